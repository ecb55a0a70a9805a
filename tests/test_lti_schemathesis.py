"""The LTI routes fuzzed from their own OpenAPI operations with LTI on (a learner token secret and a registered
platform): no 5xx, every status and content type documented."""

from __future__ import annotations

from pathlib import Path

import schemathesis
from hypothesis import HealthCheck, settings
from pydantic import SecretStr
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import content_type_conformance, status_code_conformance

from mentor.api import create_app
from mentor.settings import Settings

from .conftest import CORPUS

pytest_plugins = ["tests.lti_fixtures"]
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance]
BUDGET = settings(
    max_examples=25, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck), database=None
)
DOCUMENT = create_app(
    Settings(data_dir=Path("unused"), corpus_dir=CORPUS, learner_token_secret=SecretStr("s" * 40))
).openapi()
schema = schemathesis.openapi.from_dict(DOCUMENT).include(path_regex="^/lti/")


@schema.parametrize()
@BUDGET
def test_lti_routes_never_answer_5xx_nor_undocumented_statuses(case, tool, platform) -> None:
    case.call_and_validate(base_url=tool, checks=CHECKS, allow_redirects=False)
