"""HTTP surface: `create_app(settings)` assembles the runtime in its lifespan; routes are grouped by audience.

`create_app` is imported on first use: `mentor ask` reads `mentor.api.schemas` alone, and importing the app with it
(FastAPI, every route, the pages) cost each cold CLI question ~0.5 s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mentor.api.app import create_app

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from mentor.api.app import create_app

        return create_app
    raise AttributeError(f"module 'mentor.api' has no attribute {name!r}")
