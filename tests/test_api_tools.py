"""The calculator registry over HTTP and the CLI: same results, same plain errors."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from mentor.cli import app
from mentor.tools import REGISTRY, run_tool


def test_list_tools_has_every_calculator_with_schema(client) -> None:
    tools = client.get("/v1/tools").json()
    assert [t["name"] for t in tools] == list(REGISTRY)
    zero = next(t for t in tools if t["name"] == "zero_memory")
    assert zero["parameters"]["type"] == "object"
    assert {"params", "dp_degree", "stage"} <= set(zero["parameters"]["properties"])
    assert "Rajbhandari" in zero["description"]


def test_run_tool_over_http_matches_the_registry(client) -> None:
    response = client.post("/v1/tools/zero_memory", json={"params": "7.5B", "dp_degree": 64, "stage": 1})
    assert response.status_code == 200
    body = response.json()
    assert body == run_tool("zero_memory", {"params": 7_500_000_000, "dp_degree": 64, "stage": 1}).to_dict()
    assert body["arguments"]["params"] == 7_500_000_000  # normalised
    assert body["result"]["total_bytes"] == 31_406_250_000  # the ZeRO paper's "31.4 GB"
    assert "GB" in body["explanation"]


@pytest.mark.parametrize(
    ("name", "body", "fragment"),
    [
        ("zero_memory", {"params": "7B", "dp_degree": 8, "stage": 7}, "stage"),
        ("training_memory", {"params": -5}, "params"),
        ("training_memory", {"params": "seven"}, "params"),
        ("training_memory", {"params": "7B", "colour": "red"}, "colour"),
        ("parallel_layout", {"num_gpus": 10, "tensor_parallel": 4}, "multiple of 4"),
        ("chinchilla_optimal", {}, "params"),
        ("no_such_calculator", {"params": "7B"}, "unknown calculator"),
    ],
)
def test_bad_arguments_are_a_plain_422(client, name, body, fragment) -> None:
    response = client.post(f"/v1/tools/{name}", json=body)
    assert response.status_code == 422
    assert fragment in response.json()["message"]


def test_malformed_json_body_is_a_plain_422(client) -> None:
    response = client.post(
        "/v1/tools/training_memory", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert response.status_code == 422 and "not valid JSON" in response.json()["message"]
    response = client.post("/v1/tools/training_memory", content=b"[1, 2]", headers={"content-type": "application/json"})
    assert response.status_code == 422 and "JSON object" in response.json()["message"]


def test_cli_calc_prints_the_same_json() -> None:
    result = CliRunner().invoke(app, ["calc", "chinchilla_optimal", "--args", '{"params": "70B"}'])
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    assert body["result"]["tokens"] == 1_400_000_000_000
    assert body == run_tool("chinchilla_optimal", {"params": "70B"}).to_dict()


def test_cli_calc_list_and_errors() -> None:
    runner = CliRunner()
    listing = runner.invoke(app, ["calc", "--list"])
    assert listing.exit_code == 0 and all(name in listing.output for name in REGISTRY)
    bad = runner.invoke(app, ["calc", "zero_memory", "--args", '{"params": "7B", "dp_degree": 8, "stage": 7}'])
    assert bad.exit_code == 2 and "stage: must be 0, 1, 2 or 3" in bad.output
    unknown = runner.invoke(app, ["calc", "nope"])
    assert unknown.exit_code == 2 and "unknown calculator" in unknown.output
    broken = runner.invoke(app, ["calc", "training_memory", "--args", "{oops"])
    assert broken.exit_code == 2 and "not valid JSON" in broken.output


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (b'{"params": ' + b"[" * 30_000 + b"]" * 30_000 + b"}", "nested too deeply"),
        (b"[" * 30_000 + b"]" * 30_000, "nested too deeply"),
        (b'{"params": ' + b"9" * 5_000 + b"}", "more than 4300 digits"),
        (b'{"params": -' + b"9" * 4_300 + b"}", "params"),  # the longest integer JSON may hold: out of range
        (b'{"params": 1e999}', "finite"),
        (b'{"params": 1' + b"0" * 30_000 + b".5}", "finite"),
        (b'{"params": "' + b"9" * 60_000 + b'"}', "60000-character string"),
        (b'{"params": "7B\xff"}', "not UTF-8"),
    ],
)
def test_hostile_json_is_a_plain_422(client, body, fragment) -> None:
    response = client.post("/v1/tools/training_memory", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 422, response.text
    assert fragment in response.json()["message"] and len(response.json()["message"]) < 400


def test_a_body_over_the_limit_is_413(client) -> None:
    deep = b"[" * 100_000 + b"]" * 100_000  # 200 KB: refused by size before anyone parses it
    response = client.post("/v1/tools/training_memory", content=deep, headers={"content-type": "application/json"})
    assert response.status_code == 413 and "at most 65536 bytes" in response.json()["message"]


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ('{"params": ' + "9" * 5_000 + "}", "more than 4300 digits"),
        ('{"params": ' + "[" * 500 + "]" * 500 + "}", "params"),
    ],
)
def test_cli_calc_hostile_json_is_a_plain_error(args, fragment) -> None:
    result = CliRunner().invoke(app, ["calc", "training_memory", "--args", args])
    assert result.exit_code == 2 and fragment in result.output and "Traceback" not in result.output
    assert len(result.output) < 400
