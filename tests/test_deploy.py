"""docker-compose.yml cannot run here (no Docker engine), so check what it configures instead."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from mentor.settings import Settings

from .conftest import ROOT, free_port


def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_api_is_configured_only_with_real_settings() -> None:
    environment = compose()["services"]["api"]["environment"]
    names = {name.removeprefix("MENTOR_").lower() for name in environment if name.startswith("MENTOR_")}
    assert names <= set(Settings.model_fields), names - set(Settings.model_fields)
    settings = Settings(**{name: environment[f"MENTOR_{name.upper()}"] for name in names})
    assert settings.chroma_url == "http://chroma:8000"
    assert settings.database.startswith("postgresql+psycopg://") and "@postgres:5432/" in settings.database


def test_api_talks_to_the_chroma_and_postgres_services() -> None:
    services = compose()["services"]
    assert {"api", "chroma", "postgres"} <= set(services)
    assert set(services["api"]["depends_on"]) == {"chroma", "postgres"}
    postgres = services["postgres"]["environment"]
    url = services["api"]["environment"]["MENTOR_DATABASE_URL"]
    assert f"{postgres['POSTGRES_USER']}:{postgres['POSTGRES_PASSWORD']}@" in url
    assert url.endswith(f"/{postgres['POSTGRES_DB']}")
    assert (ROOT / services["api"]["build"] / "Dockerfile").is_file()


def test_readme_documents_every_setting_and_both_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    missing = [name for name in Settings.model_fields if f"`MENTOR_{name.upper()}`" not in readme]
    assert not missing, f"settings missing from the README table: {missing}"
    assert "make serve" in readme and "make test" in readme
    assert "make test" in (ROOT / ".ci/run").read_text()


def compose_command() -> list[str] | None:
    """`docker compose` (the v2 plugin) or the standalone `docker-compose`; None when neither is installed."""
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return None


def dockerfile_healthcheck() -> list[str]:
    """The exec-form command of the Dockerfile's HEALTHCHECK (continuation lines joined)."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    (line,) = [line for line in text.splitlines() if line.startswith("HEALTHCHECK")]
    return json.loads(line.split(" CMD ", 1)[1])


def test_every_service_has_a_health_check_and_a_restart_policy() -> None:
    services = compose()["services"]
    for name, service in services.items():
        assert service.get("restart") in ("unless-stopped", "always", "on-failure"), name
        check = service["healthcheck"]
        assert check["test"][0] in ("CMD", "CMD-SHELL") and check["interval"] and check["retries"], name
    # The API starts once its dependencies answer, not merely once their containers exist.
    assert services["api"]["depends_on"] == {
        "chroma": {"condition": "service_healthy"},
        "postgres": {"condition": "service_healthy"},
    }
    assert "/readyz" in services["api"]["healthcheck"]["test"][-1]
    assert services["api"]["healthcheck"]["test"][1:] == dockerfile_healthcheck()  # one probe, not two
    assert "/api/v2/heartbeat" in services["chroma"]["healthcheck"]["test"][-1]
    assert "pg_isready" in services["postgres"]["healthcheck"]["test"][-1]


def test_docker_compose_accepts_the_file() -> None:
    command = compose_command()
    if command is None:
        pytest.skip("neither `docker compose` nor `docker-compose` is installed")
    done = subprocess.run([*command, "-f", str(ROOT / "docker-compose.yml"), "config"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    # A lone `$` would be read as a variable to substitute (with a warning); the probe's shell variable is `$$`.
    assert "variable is not set" not in done.stderr, done.stderr
    resolved = yaml.safe_load(done.stdout)["services"]
    assert resolved["api"]["depends_on"]["chroma"]["condition"] == "service_healthy"


def test_health_checks_pass_on_a_working_service_and_fail_on_a_dead_one(runtime, chroma_server: str) -> None:
    from dataclasses import replace

    from mentor.api import create_app
    from mentor.retrieve import Retriever

    from .chat_helpers import serve

    def probe(command: list[str], port: int) -> int:
        # The container's probe, run here: the host's python, and the port of a live server instead of 8000.
        program = {"python": sys.executable}.get(command[1], command[1])
        script = command[-1].replace("/8000", f"/{port}").replace("$$", "$")
        env = {"PATH": os.environ["PATH"], "MENTOR_PORT": str(port)}
        return subprocess.run([program, *command[2:-1], script], env=env, timeout=30).returncode

    services = compose()["services"]
    api, chroma = services["api"]["healthcheck"]["test"], services["chroma"]["healthcheck"]["test"]
    with serve(create_app(runtime.settings, runtime=runtime)) as url:
        assert probe(api, int(url.rsplit(":", 1)[1])) == 0
    empty = replace(runtime, retriever=Retriever(runtime.collection, runtime.embedder, []))
    with serve(create_app(runtime.settings, runtime=empty)) as url:
        assert probe(api, int(url.rsplit(":", 1)[1])) != 0  # 503: no question can be answered
    assert probe(chroma, int(chroma_server.rsplit(":", 1)[1])) == 0
    assert probe(chroma, free_port()) != 0
    assert probe(api, free_port()) != 0
