"""The settings object (mentor/settings.py): what start-up refuses before anything is built."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from mentor.cli import app
from mentor.runtime import analyst_token
from mentor.settings import MIN_SECRET_BYTES, Settings

# Every shared secret a caller presents or a token is signed with; a short one is guessed or brute-forced offline.
SECRETS = ("MENTOR_LEARNER_TOKEN_SECRET", "MENTOR_ANALYST_TOKEN", "MENTOR_SERVER_KEY", "MENTOR_METRICS_TOKEN")


def field(env_name: str) -> str:
    return env_name.removeprefix("MENTOR_").lower()


@pytest.mark.parametrize("name", SECRETS)
def test_a_one_byte_secret_refuses_to_serve_in_one_line(name, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("MENTOR_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv(name, "a")
    # Two workers without Redis would be refused next, still before anything is built: without the check on the
    # secret, this test fails at once rather than starting a server.
    result = CliRunner().invoke(app, ["serve", "--workers", "2"])
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()
    assert line.startswith(f"error: invalid setting: {field(name)}: {name} must be at least 32 bytes"), line
    assert "'a'" not in line  # the secret itself is never repeated
    assert not (tmp_path / "data").exists()  # refused before anything was built


@pytest.mark.parametrize("name", SECRETS)
def test_a_secret_is_measured_in_utf8_bytes(name) -> None:
    assert Settings(**{field(name): "x" * MIN_SECRET_BYTES}) is not None
    assert Settings(**{field(name): "é" * (MIN_SECRET_BYTES // 2)}) is not None  # 16 characters, 32 bytes
    for short in ("x" * (MIN_SECRET_BYTES - 1), "é" * (MIN_SECRET_BYTES // 2 - 1) + "x", ""):
        with pytest.raises(ValidationError) as caught:
            Settings(**{field(name): short})
        (error,) = caught.value.errors()
        assert error["loc"] == (field(name),) and error["type"] == "weak_secret"


def test_several_short_secrets_are_named_together_on_one_line(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("MENTOR_DATA_DIR", str(tmp_path / "data"))
    for name in SECRETS:
        monkeypatch.setenv(name, "short")
    result = CliRunner().invoke(app, ["token", "alice"])
    assert result.exit_code == 2
    (line,) = result.output.strip().splitlines()
    assert all(f"{name} must be at least 32 bytes" in line for name in SECRETS), line


def test_the_generated_analyst_token_is_long_enough_to_be_configured(tmp_path) -> None:
    generated = analyst_token(Settings(data_dir=tmp_path))
    assert len(generated.encode("utf-8")) >= MIN_SECRET_BYTES
    # What an operator copies from data_dir/analyst.token into MENTOR_ANALYST_TOKEN (a second replica) is accepted.
    assert Settings(analyst_token=generated).analyst_token.get_secret_value() == generated
    assert analyst_token(Settings(data_dir=tmp_path)) == generated  # kept, not made again


def test_the_learner_token_max_age_is_read_under_both_names(monkeypatch) -> None:
    assert Settings().learner_token_max_age_s == 86_400
    monkeypatch.setenv("MENTOR_LEARNER_TOKEN_MAX_AGE", "3600")
    assert Settings().learner_token_max_age_s == 3600
    monkeypatch.setenv("MENTOR_LEARNER_TOKEN_MAX_AGE_S", "7200")
    assert Settings().learner_token_max_age_s == 7200
    monkeypatch.setenv("MENTOR_LEARNER_TOKEN_MAX_AGE_S", str(10 * 365 * 86_400))
    with pytest.raises(ValidationError):
        Settings()
