"""The calculators over HTTP: the same registry the LLM and the CLI use."""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request

from mentor.api.deps import per_client
from mentor.api.schemas import ErrorResponse, ToolInfo, ToolRun
from mentor.errors import InvalidInput
from mentor.throttle import TOOLS
from mentor.tools import REGISTRY, run_tool
from mentor.tools.registry import explain_json_error, title_of

router = APIRouter(prefix="/v1/tools", tags=["tools"])


@router.get("", response_model=list[ToolInfo])
def list_tools() -> list[ToolInfo]:
    """Every calculator with its description and the JSON schema of its arguments."""
    return [
        ToolInfo(name=c.name, title=title_of(c.name), description=c.description, parameters=c.json_schema)
        for c in REGISTRY.values()
    ]


# The names are documented as an enum; the route checks them itself, to answer with the list of calculators.
NAMES = {"enum": [*REGISTRY]}
NameParam = Annotated[str, Path(description="A calculator, as GET /v1/tools lists.", json_schema_extra=NAMES)]


@router.post(
    "/{name}",
    response_model=ToolRun,
    responses={
        422: {"model": ErrorResponse, "description": "Unknown calculator, bad arguments or unusable JSON."},
        429: {"model": ErrorResponse, "description": "Too many calculator runs from this address; see Retry-After."},
    },
    dependencies=[per_client(TOOLS)],
    openapi_extra={
        "requestBody": {
            "content": {"application/json": {"schema": {"type": "object"}, "example": {"params": "7B"}}},
        }
    },
)
async def run(name: NameParam, request: Request) -> dict[str, Any]:
    """Run one calculator on the JSON body's arguments; returns the normalised arguments, result and explanation."""
    # The body is read before the route refuses anything, so a refusal leaves the connection ready for the next
    # request (a 429 comes before it is read: RequestLimits then drains it, or closes the connection).
    raw = await request.body()
    if name not in REGISTRY:  # the contract treats an unknown calculator as bad input (422), like a bad argument
        raise InvalidInput(f"unknown calculator {name!r}; available: {', '.join(REGISTRY)}")
    try:
        arguments = json.loads(raw) if raw.strip() else {}
    except (ValueError, RecursionError) as error:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise InvalidInput(f"the request body is {explain_json_error(error)}") from None
    return run_tool(name, arguments).to_dict()
