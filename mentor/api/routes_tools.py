"""The calculators over HTTP: the same registry the LLM and the CLI use."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request

from mentor.api.schemas import ErrorResponse, ToolInfo, ToolRun
from mentor.errors import InvalidInput
from mentor.tools import REGISTRY, run_tool

router = APIRouter(prefix="/v1/tools", tags=["tools"])


@router.get("", response_model=list[ToolInfo])
def list_tools() -> list[ToolInfo]:
    """Every calculator with its description and the JSON schema of its arguments."""
    return [ToolInfo(name=c.name, description=c.description, parameters=c.json_schema) for c in REGISTRY.values()]


@router.post(
    "/{name}",
    response_model=ToolRun,
    responses={422: {"model": ErrorResponse}},
    openapi_extra={"requestBody": {"content": {"application/json": {"schema": {"type": "object"}}}}},
)
async def run(name: str, request: Request) -> dict[str, Any]:
    """Run one calculator on the JSON body's arguments; returns the normalised arguments, result and explanation."""
    if name not in REGISTRY:  # the contract treats an unknown calculator as bad input (422), like a bad argument
        raise InvalidInput(f"unknown calculator {name!r}; available: {', '.join(REGISTRY)}")
    raw = await request.body()
    try:
        arguments = json.loads(raw) if raw.strip() else {}
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise InvalidInput("the request body is not valid JSON") from None
    return run_tool(name, arguments).to_dict()
