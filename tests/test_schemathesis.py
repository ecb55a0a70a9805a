"""Property-based tests of the app's own OpenAPI document against a real uvicorn: no 5xx, no schema violation.

Every operation is generated twice, without credentials and with the analyst token, from a fixed seed
(derandomize) and a small example budget, so the run is reproducible and stays within about a minute.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from mentor.api import create_app
from mentor.settings import Settings

from .conftest import CORPUS
from .test_api_hardening import serving

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
BUDGET = settings(
    max_examples=15,
    derandomize=True,  # the same cases every run: a failure here is reproducible, not a flake
    deadline=None,  # the first chat question of a session loads things; latency is another test's business
    suppress_health_check=list(HealthCheck),
    database=None,
)


def openapi_document() -> dict:
    """The document the app serves at /openapi.json (building the app reads no data; the lifespan does)."""
    return create_app(Settings(data_dir=Path("unused"), corpus_dir=CORPUS)).openapi()


# Loaded at import so that pytest gets one test per operation; the live document is compared with it below.
schema = schemathesis.openapi.from_dict(openapi_document())


@pytest.fixture(scope="module")
def live_url(runtime) -> Iterator[str]:
    """A real uvicorn serving an app over the session runtime (whose rate limit conftest raised)."""
    with serving(create_app(runtime.settings, runtime=runtime)) as url:
        yield url


def test_the_fuzzed_document_is_the_served_one(live_url) -> None:
    assert httpx.get(f"{live_url}/openapi.json").json() == openapi_document()


@schema.parametrize()
@BUDGET
def test_api_without_credentials(case, live_url) -> None:
    case.call_and_validate(base_url=live_url, checks=CHECKS)


@schema.parametrize()
@BUDGET
def test_api_with_the_analyst_token(case, live_url, runtime) -> None:
    auth = {"Authorization": f"Bearer {runtime.analyst_token}"}
    case.call_and_validate(base_url=live_url, checks=CHECKS, headers=auth)
