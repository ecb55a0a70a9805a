"""The LTI tests' fixtures (loaded with `pytest_plugins = ["tests.lti_fixtures"]`): the real app over HTTP with LTI
on, a registered platform emulator per test, and an HTTP client playing the browser."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from pydantic import SecretStr

from mentor.api import create_app

from .conftest import free_port
from .lti_platform import SECRET, Platform, running_platform, serve_on


@pytest.fixture(scope="module")
def tool(runtime) -> Iterator[str]:
    """The real app over HTTP, with learner tokens (LTI needs them) and its public URL where it listens."""
    port = free_port()
    settings = runtime.settings.model_copy(
        update={"learner_token_secret": SecretStr(SECRET), "public_url": f"http://127.0.0.1:{port}"}
    )
    with serve_on(create_app(settings, runtime=runtime), port) as url:
        yield url


@pytest.fixture
def platform(tool, runtime) -> Iterator[Platform]:
    """A registered platform (a fresh issuer per test)."""
    with running_platform(tool) as emulated:
        emulated.register_with(runtime.database)
        yield emulated


@pytest.fixture
def browser() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=30) as client:
        yield client
