"""HTTP: health, readiness, modules and search, including bad input -> 4xx with a plain message."""

from __future__ import annotations

import pytest

from .conftest import MODULE_ID


def test_health_and_readiness(client) -> None:
    assert client.get("/healthz").json() == {"status": "ok", "detail": {}}
    ready = client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["detail"]["database"] == "ok" and ready.json()["detail"]["index"].startswith("ok")


def test_readiness_is_degraded_not_failed_when_the_database_cannot_be_used(tmp_path, runtime) -> None:
    from dataclasses import replace

    from fastapi.testclient import TestClient

    from mentor.api import create_app
    from mentor.db import make_engine

    broken = replace(runtime, database=make_engine("postgresql+psycopg://nobody@127.0.0.1:1/none"))
    with TestClient(create_app(runtime.settings, runtime=broken)) as test_client:
        response = test_client.get("/readyz")
    # Questions are still answered (signals are spooled), so a load balancer must keep this replica.
    assert response.status_code == 200
    assert response.json()["status"] == "degraded"
    assert response.json()["detail"]["database"].startswith("unavailable (database cannot be used")


def test_modules_lists_sections(client) -> None:
    (module,) = client.get("/v1/modules").json()
    assert module["id"] == MODULE_ID and module["title"] == "Training at scale"
    assert {"id": "ref-mixed-precision", "title": "2 — Mixed-precision training (q22)"} in module["sections"]


def test_search_returns_ranked_passages(client) -> None:
    response = client.get("/v1/search", params={"module_id": MODULE_ID, "q": "what does bf16 keep from fp32", "k": 3})
    assert response.status_code == 200
    body = response.json()
    assert body["in_scope"] and len(body["passages"]) == 3
    assert body["passages"][0]["section_id"] == "ref-mixed-precision"
    assert set(body["passages"][0]) >= {"chunk_id", "section_id", "section_title", "text", "score"}


def test_module_id_may_be_omitted_with_one_module(client) -> None:
    assert client.get("/v1/search", params={"q": "pipeline bubble"}).status_code == 200


@pytest.mark.parametrize(
    ("params", "status", "fragment"),
    [
        ({"module_id": MODULE_ID, "q": ""}, 422, "query"),
        ({"module_id": MODULE_ID, "q": "x" * 10_000}, 422, "at most 4000"),
        ({"module_id": "nope", "q": "zero"}, 404, "unknown module"),
        ({"module_id": MODULE_ID, "q": "zero", "k": 0}, 422, "k"),
        ({"module_id": MODULE_ID, "q": "zero", "k": 500}, 422, "k"),
        ({"module_id": MODULE_ID, "q": "zero", "k": "many"}, 422, "k"),
        ({"module_id": MODULE_ID}, 422, "q: is required"),
    ],
)
def test_bad_search_input_is_a_plain_4xx(client, params, status, fragment) -> None:
    response = client.get("/v1/search", params=params)
    assert response.status_code == status
    body = response.json()
    assert fragment in body["message"] and "Traceback" not in body["message"]
