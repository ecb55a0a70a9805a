"""LTI Dynamic Registration 1.0: an administrator pastes mentor's registration URL into the platform; the platform
opens it with `openid_configuration` and `registration_token`; mentor reads the platform's configuration, sends its
own (the tool configuration below) to the platform's registration endpoint, and stores what comes back.

The registration URL carries an invitation mentor signed (`mentor lti invite`), used once: without it, anyone could
register a "platform" of their own naming an issuer that is not theirs, and sign launches for its learners.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from mentor.errors import InvalidInput
from mentor.lti import claims as c
from mentor.lti.errors import LtiRefused
from mentor.lti.registrations import check_url

log = logging.getLogger(__name__)

TIMEOUT_S = 10.0
MAX_DOCUMENT_BYTES = 256 * 1024


@dataclass(frozen=True, slots=True)
class ToolUrls:
    """mentor's own LTI endpoints, from its public URL."""

    base: str

    @property
    def login(self) -> str:
        return f"{self.base}/lti/login"

    @property
    def launch(self) -> str:
        return f"{self.base}/lti/launch"

    @property
    def jwks(self) -> str:
        return f"{self.base}/lti/jwks"

    @property
    def register(self) -> str:
        return f"{self.base}/lti/register"


@dataclass(frozen=True, slots=True)
class PlatformConfiguration:
    """What mentor needs of the platform's OpenID configuration."""

    issuer: str
    authorization_endpoint: str
    jwks_uri: str
    registration_endpoint: str
    token_endpoint: str | None
    product: str | None


def tool_configuration(urls: ToolUrls) -> dict[str, Any]:
    """mentor's client registration (OpenID Connect Dynamic Client Registration with the LTI tool configuration).

    No scopes: mentor sends no grades (asking is a learning signal, never a grade) and reads no roster. The claims
    asked for are the identifiers only: no name, e-mail or picture.
    """
    return {
        "application_type": "web",
        "response_types": ["id_token"],
        "grant_types": ["implicit", "client_credentials"],
        "initiate_login_uri": urls.login,
        "redirect_uris": [urls.launch],
        "client_name": "mentor",
        "jwks_uri": urls.jwks,
        "token_endpoint_auth_method": "private_key_jwt",
        "scope": "",
        c.TOOL_CONFIGURATION: {
            "domain": urlsplit(urls.base).netloc,
            "target_link_uri": urls.launch,
            "description": "Answers learners' questions grounded in the study module they are reading.",
            "claims": ["iss", "sub"],
            "messages": [
                {"type": c.DEEP_LINKING_REQUEST, "target_link_uri": urls.launch, "label": "Ask the mentor"},
                {"type": c.RESOURCE_LINK_REQUEST, "target_link_uri": urls.launch, "label": "Ask the mentor"},
            ],
        },
    }


async def read_platform_configuration(url: str, registration_token: str | None) -> PlatformConfiguration:
    """The platform's OpenID configuration; LtiRefused (400) when it cannot be read or lacks what mentor needs."""
    try:
        check_url("openid_configuration", url)
    except InvalidInput as exc:
        raise LtiRefused("bad_openid_configuration", exc.message) from None
    document = await _fetch_json("GET", url, registration_token, what="the platform's OpenID configuration")
    fields = {}
    for name in ("issuer", "authorization_endpoint", "jwks_uri", "registration_endpoint"):
        value = document.get(name)
        if not isinstance(value, str) or not value:
            raise LtiRefused("bad_openid_configuration", f"the platform's OpenID configuration has no {name}")
        fields[name] = value
    algorithms = document.get("id_token_signing_alg_values_supported")
    if isinstance(algorithms, list) and "RS256" not in algorithms:
        raise LtiRefused("bad_openid_configuration", "the platform does not sign id_tokens with RS256")
    platform = document.get(c.PLATFORM_CONFIGURATION)
    product = platform.get("product_family_code") if isinstance(platform, dict) else None
    token_endpoint = document.get("token_endpoint")
    return PlatformConfiguration(
        issuer=fields["issuer"],
        authorization_endpoint=fields["authorization_endpoint"],
        jwks_uri=fields["jwks_uri"],
        registration_endpoint=fields["registration_endpoint"],
        token_endpoint=token_endpoint if isinstance(token_endpoint, str) and token_endpoint else None,
        product=product if isinstance(product, str) else None,
    )


async def send_registration(
    platform: PlatformConfiguration, urls: ToolUrls, registration_token: str | None
) -> tuple[str, list[str]]:
    """Post mentor's configuration to the platform; return the client id and deployment ids it gave."""
    try:
        check_url("registration_endpoint", platform.registration_endpoint)
    except InvalidInput as exc:
        raise LtiRefused("bad_openid_configuration", exc.message) from None
    answer = await _fetch_json(
        "POST",
        platform.registration_endpoint,
        registration_token,
        what="the platform's registration endpoint",
        json=tool_configuration(urls),
    )
    client_id = answer.get("client_id")
    if not isinstance(client_id, str) or not client_id:
        raise LtiRefused("registration_failed", "the platform's registration answer has no client_id")
    configuration = answer.get(c.TOOL_CONFIGURATION)
    deployment_id = configuration.get("deployment_id") if isinstance(configuration, dict) else None
    return client_id, [deployment_id] if isinstance(deployment_id, str) and deployment_id else []


async def _fetch_json(
    method: str, url: str, token: str | None, *, what: str, json: dict[str, Any] | None = None
) -> dict[str, Any]:
    headers = {"Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        async with httpx.AsyncClient(timeout=TIMEOUT_S) as client:
            response = await client.request(method, url, headers=headers, json=json)
        if len(response.content) > MAX_DOCUMENT_BYTES:
            raise ValueError(f"larger than {MAX_DOCUMENT_BYTES} bytes")
        response.raise_for_status()
        document = response.json()
    except (httpx.HTTPError, ValueError) as exc:
        log.warning("dynamic registration: %s at %s failed (%s: %s)", what, url, type(exc).__name__, str(exc)[:200])
        raise LtiRefused("registration_failed", f"{what} could not be used ({type(exc).__name__})") from None
    if not isinstance(document, dict):
        raise LtiRefused("registration_failed", f"{what} did not answer with a JSON object")
    return document
