"""`mentor lti ...`: register platforms, list them, invite a platform to register itself, manage the tool key.

`lti_app` is given the CLI's own `handle_errors` and `make_settings` (mentor/cli.py registers it with one line), so
these commands report errors and read settings exactly as every other command; this module imports only typer at
load, like mentor/cli.py, so `mentor --help` stays light.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

PLAIN_HELP: dict[str, Any] = {"rich_markup_mode": None, "add_completion": False, "pretty_exceptions_enable": False}


def lti_app(
    *, handle_errors: Callable[[Any], Any], make_settings: Callable[..., Any], parse_age: Callable[[str], Any]
) -> typer.Typer:
    """The `lti` sub-command group, with the CLI's error handling, settings and age parser."""
    app = typer.Typer(
        help="LTI 1.3: the learning platforms that may launch mentor, and the tool's key.",
        no_args_is_help=True,
        **PLAIN_HELP,
    )

    def database(settings: Any) -> Any:
        from mentor.db import make_engine
        from mentor.signals.schema import migrate

        settings.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        engine = make_engine(settings.database)
        migrate(engine)
        return engine

    @app.command("register")
    @handle_errors
    def register(
        issuer: Annotated[
            str, typer.Option(metavar="URL", help="The platform's issuer (iss), e.g. https://lms.example.edu")
        ],
        client_id: Annotated[str, typer.Option(metavar="ID", help="The client id the platform gave mentor.")],
        auth_url: Annotated[
            str, typer.Option(metavar="URL", help="The platform's OIDC authorization endpoint (auth login URL).")
        ],
        jwks_url: Annotated[str, typer.Option(metavar="URL", help="The platform's public keyset URL (JWKS).")],
        deployment: Annotated[
            list[str], typer.Option(metavar="ID", help="A deployment id that may launch mentor (repeatable).")
        ],
        token_url: Annotated[
            str | None, typer.Option(metavar="URL", help="The platform's access token URL (optional).")
        ] = None,
        name: Annotated[str | None, typer.Option(metavar="TEXT", help="A label, e.g. 'Moodle, Physics'.")] = None,
    ) -> None:
        """Register a platform by hand (what its administrator's screen shows), with its deployment ids."""
        from mentor.lti.registrations import add_registration

        settings = make_settings()
        registration = add_registration(
            database(settings),
            issuer=issuer,
            client_id=client_id,
            auth_login_url=auth_url,
            jwks_url=jwks_url,
            deployment_ids=deployment,
            auth_token_url=token_url,
            name=name,
        )
        typer.echo(f"registered {registration.id}: {registration.issuer} (client id {registration.client_id})")
        if settings.learner_token_secret is None:
            typer.echo("note: launches need MENTOR_LEARNER_TOKEN_SECRET on the server", err=True)

    @app.command("list")
    @handle_errors
    def list_(as_json: Annotated[bool, typer.Option("--json", help="One JSON object a line.")] = False) -> None:
        """The registered platforms."""
        from dataclasses import asdict

        from mentor.lti.registrations import list_registrations

        for registration in list_registrations(database(make_settings())):
            if as_json:
                typer.echo(json.dumps(asdict(registration)))
            else:
                deployments = ", ".join(registration.deployment_ids) or "none"
                typer.echo(
                    f"{registration.id}\t{registration.issuer}\tclient {registration.client_id}\t"
                    f"deployments {deployments}\t{registration.source}"
                )

    @app.command("add-deployment")
    @handle_errors
    def add_deployment(
        registration_id: Annotated[int, typer.Argument(metavar="ID", help="The registration (see: mentor lti list).")],
        deployment_id: Annotated[str, typer.Argument(metavar="DEPLOYMENT", help="The deployment id to allow.")],
    ) -> None:
        """Allow one more deployment of a registered platform (a platform installs mentor per course or account)."""
        from mentor.lti.registrations import add_deployment as add

        registration = add(database(make_settings()), registration_id, deployment_id)
        typer.echo(f"{registration.issuer}: deployments {', '.join(registration.deployment_ids)}")

    @app.command("remove")
    @handle_errors
    def remove(
        registration_id: Annotated[int, typer.Argument(metavar="ID", help="The registration (see: mentor lti list).")],
    ) -> None:
        """Forget a platform: its launches are refused from now on."""
        from mentor.errors import NotFound
        from mentor.lti.registrations import remove_registration

        if not remove_registration(database(make_settings()), registration_id):
            raise NotFound(f"no registration {registration_id}")
        typer.echo(f"removed {registration_id}")

    @app.command("invite")
    @handle_errors
    def invite(
        ttl: Annotated[str, typer.Option("--ttl", metavar="AGE", help="How long it may be used: 1h, 7d.")] = "7d",
    ) -> None:
        """Print a dynamic-registration URL (usable once) to paste into the platform's "register a tool" screen."""
        from mentor.lti.registration import ToolUrls
        from mentor.lti.service import invite_url
        from mentor.lti.state import TokenSigner, derive_key
        from mentor.runtime import pseudonym_secret

        settings = make_settings()
        signer = TokenSigner(derive_key(pseudonym_secret(settings)))
        typer.echo(invite_url(signer, ToolUrls(settings.public_url.rstrip("/")), int(parse_age(ttl).total_seconds())))

    @app.command("config")
    @handle_errors
    def config() -> None:
        """Print what a platform's administrator pastes when registering mentor by hand."""
        from mentor.lti.registration import ToolUrls

        urls = ToolUrls(make_settings().public_url.rstrip("/"))
        typer.echo(f"Login initiation URL (OIDC):  {urls.login}")
        typer.echo(f"Redirect URI / target link:   {urls.launch}")
        typer.echo(f"Public keyset URL (JWKS):     {urls.jwks}")
        typer.echo(f"Deep linking URL:             {urls.launch}")
        typer.echo("Custom parameter per link:    module_id=<module id> (set by the deep-linking picker)")

    @app.command("learner-id")
    @handle_errors
    def learner_id(
        issuer: Annotated[str, typer.Argument(metavar="ISSUER", help="The platform's issuer.")],
        subject: Annotated[str, typer.Argument(metavar="SUB", help="The learner's id on the platform (sub).")],
    ) -> None:
        """Print the learner id mentor knows an LTI learner by: erase them with DELETE /v1/learners/<it>."""
        from mentor.lti.launch import lti_learner_id

        typer.echo(lti_learner_id(issuer, subject))

    @app.command("generate-key")
    @handle_errors
    def generate_key(
        path: Annotated[Path, typer.Argument(metavar="FILE", help="Where to write the PEM private key (mode 600).")],
    ) -> None:
        """Write a new RSA key for MENTOR_LTI_PRIVATE_KEY_FILE."""
        from mentor.errors import InvalidInput
        from mentor.lti.keys import generate_key as generate
        from mentor.lti.keys import public_jwk

        if path.exists():
            raise InvalidInput(f"{path} exists; choose another file")
        typer.echo(f"wrote {path} (kid {public_jwk(generate(path))['kid']})")

    @app.command("rotate-key")
    @handle_errors
    def rotate_key() -> None:
        """Retire the generated tool key (still published until deleted) and generate a new one."""
        from mentor.lti.keys import rotate_key as rotate

        old, new = rotate(make_settings())
        typer.echo(f"retired {old}, signing with {new}; restart the replicas, delete the retired file after a day")

    return app
