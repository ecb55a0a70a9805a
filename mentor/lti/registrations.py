"""The only reader and writer of the registrations table: which platforms may launch mentor, and how to reach them.

Synchronous (SQLAlchemy over the signals database's engine); the router calls these in a worker thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urlsplit

from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from mentor.errors import InvalidInput
from mentor.signals.tables import LtiRegistrationRow

MAX_URL_CHARS = 1000
MAX_ID_CHARS = 255


@dataclass(frozen=True, slots=True)
class Registration:
    """One platform's registration, as launches use it."""

    id: int
    issuer: str
    client_id: str
    auth_login_url: str
    jwks_url: str
    deployment_ids: tuple[str, ...]
    auth_token_url: str | None = None
    name: str | None = None
    source: str = "cli"


def _of(row: LtiRegistrationRow) -> Registration:
    assert row.id is not None
    return Registration(
        id=row.id,
        issuer=row.issuer,
        client_id=row.client_id,
        auth_login_url=row.auth_login_url,
        jwks_url=row.jwks_url,
        deployment_ids=tuple(row.deployment_ids),
        auth_token_url=row.auth_token_url,
        name=row.name,
        source=row.source,
    )


def check_url(name: str, url: str, *, allow_http: bool = True) -> str:
    """`url` if it is an absolute http(s) URL of reasonable length; InvalidInput naming the field otherwise.

    Plain http is accepted (a platform on a developer's machine, the tests' emulator); docs/lti.md says to use https.
    """
    parts = urlsplit(url)
    schemes = ("https", "http") if allow_http else ("https",)
    if parts.scheme not in schemes or not parts.netloc or len(url) > MAX_URL_CHARS:
        raise InvalidInput(f"{name}: an absolute {' or '.join(schemes)} URL of at most {MAX_URL_CHARS} characters")
    return url


def check_id(name: str, value: str) -> str:
    """A non-empty id of at most 255 characters (issuer, client id, deployment id)."""
    if not value.strip() or len(value) > MAX_ID_CHARS:
        raise InvalidInput(f"{name}: 1-{MAX_ID_CHARS} characters")
    return value


def add_registration(
    engine: Engine,
    *,
    issuer: str,
    client_id: str,
    auth_login_url: str,
    jwks_url: str,
    deployment_ids: list[str],
    auth_token_url: str | None = None,
    name: str | None = None,
    source: str = "cli",
) -> Registration:
    """Record a platform; InvalidInput when (issuer, client id) is registered already or a value is unusable."""
    check_id("issuer", issuer)
    check_url("issuer", issuer)
    check_id("client_id", client_id)
    check_url("auth_login_url", auth_login_url)
    check_url("jwks_url", jwks_url)
    if auth_token_url:
        check_url("auth_token_url", auth_token_url)
    for deployment_id in deployment_ids:
        check_id("deployment_id", deployment_id)
    row = LtiRegistrationRow(
        issuer=issuer,
        client_id=client_id,
        name=name,
        auth_login_url=auth_login_url,
        auth_token_url=auth_token_url or None,
        jwks_url=jwks_url,
        deployment_ids=list(dict.fromkeys(deployment_ids)),
        source=source,
        created_at=datetime.now(UTC),
    )
    with Session(engine) as session:
        session.add(row)
        try:
            session.commit()
        except IntegrityError:
            raise InvalidInput(f"{issuer} is registered already with client id {client_id}") from None
        session.refresh(row)
        return _of(row)


def add_deployment(engine: Engine, registration_id: int, deployment_id: str) -> Registration:
    """Allow one more deployment of a registered platform to launch mentor."""
    check_id("deployment_id", deployment_id)
    with Session(engine) as session:
        row = session.get(LtiRegistrationRow, registration_id)
        if row is None:
            raise InvalidInput(f"no registration {registration_id} (see: mentor lti list)")
        if deployment_id not in row.deployment_ids:
            row.deployment_ids = [*row.deployment_ids, deployment_id]  # a new list, so SQLAlchemy sees the change
            session.add(row)
            session.commit()
            session.refresh(row)
        return _of(row)


def remove_registration(engine: Engine, registration_id: int) -> bool:
    """Forget a platform: its launches are refused from now on. True when there was one."""
    with Session(engine) as session:
        row = session.get(LtiRegistrationRow, registration_id)
        if row is None:
            return False
        session.delete(row)
        session.commit()
        return True


def list_registrations(engine: Engine) -> list[Registration]:
    """Every registration, oldest first."""
    with Session(engine) as session:
        return [_of(row) for row in session.exec(select(LtiRegistrationRow).order_by(LtiRegistrationRow.id)).all()]


def find_registrations(engine: Engine, issuer: str) -> list[Registration]:
    """The registrations of one issuer (a platform may register mentor more than once, with distinct client ids)."""
    with Session(engine) as session:
        query = select(LtiRegistrationRow).where(LtiRegistrationRow.issuer == issuer).order_by(LtiRegistrationRow.id)
        return [_of(row) for row in session.exec(query).all()]


def find_registration(engine: Engine, issuer: str, client_id: str) -> Registration | None:
    """The registration of (issuer, client id), if any."""
    with Session(engine) as session:
        query = select(LtiRegistrationRow).where(
            LtiRegistrationRow.issuer == issuer, LtiRegistrationRow.client_id == client_id
        )
        row = session.exec(query).first()
        return _of(row) if row is not None else None
