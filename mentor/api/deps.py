"""Named dependencies routes declare; the runtime is built once in the lifespan and lives on app.state."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from mentor.runtime import Runtime
from mentor.settings import Settings


def get_runtime(request: Request) -> Runtime:
    """The runtime the lifespan built."""
    return request.app.state.runtime


def get_settings(request: Request) -> Settings:
    """The settings the app was created with."""
    return request.app.state.settings


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
