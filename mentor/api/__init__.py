"""HTTP surface: `create_app(settings)` assembles the runtime in its lifespan; routes are grouped by audience."""

from mentor.api.app import create_app

__all__ = ["create_app"]
