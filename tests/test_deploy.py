"""docker-compose.yml cannot run here (no Docker engine), so check what it configures instead."""

from __future__ import annotations

import yaml

from mentor.settings import Settings

from .conftest import ROOT


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
