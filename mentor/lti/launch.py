"""Login initiation and launch: from the platform's first request to a verified `Launch`.

The order of the checks follows 1EdTech's Security Framework §5.1.3 and LTI Core §5: the state is ours and fresh;
the id_token is RS256, signed by a key the registered platform publishes, from its issuer, for mentor's client id
(an `azp` naming it when there are several audiences), unexpired and not issued in the future; its nonce is the one
this state sent and was never used before; then the LTI claims the spec marks required. Each failure is an
LtiRefused with a reason for the log line; nothing here reads a name, e-mail or picture from the token.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import jwt

from mentor.lti import claims as c
from mentor.lti.errors import LtiRefused
from mentor.lti.nonces import NonceStore
from mentor.lti.platform_keys import PlatformKeys
from mentor.lti.registrations import Registration
from mentor.lti.state import STATE_TTL_S, LoginState, StateClaims, TokenSigner, hashed
from mentor.privacy import pseudonym

# Seconds of clock difference tolerated between the platform and mentor on exp and iat.
LEEWAY_S = 60
MAX_TOKEN_CHARS = 32_000


@dataclass(frozen=True, slots=True)
class DeepLinking:
    """Where and how the platform takes the links an instructor picks (the deep_linking_settings claim)."""

    return_url: str
    accept_multiple: bool
    data: str | None
    title: str | None


@dataclass(frozen=True, slots=True)
class Launch:
    """A verified launch: who (pseudonymous), in which course (pseudonymous), for which module, with which roles."""

    registration: Registration
    message_type: str
    deployment_id: str
    learner_id: str  # "lti-" + a hash of (issuer, sub): what the learner token names; pseudonymised again when stored
    context_key: str | None  # pseudonym of (issuer, context id); None when the launch names no course
    roles: tuple[str, ...]
    module_id: str | None  # the resource link's custom module_id
    resource_link_id: str | None
    deep_linking: DeepLinking | None
    browser_bound: bool  # the state's cookie came back and matched

    @property
    def staff(self) -> bool:
        return c.is_staff(self.roles)


def lti_learner_id(issuer: str, subject: str) -> str:
    """The learner id an LTI learner has in mentor: stable per (issuer, sub), bounded in length, raw sub not kept.

    Pseudonymised with the pseudonym key like every learner id before anything is stored; erasing the learner is
    `DELETE /v1/learners/<this id>` (`mentor lti learner-id ISSUER SUB` prints it).
    """
    digest = hashlib.sha256(f"{issuer}\n{subject}".encode()).digest()
    return "lti-" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def context_key(issuer: str, context_id: str, key: bytes) -> str:
    """The course's pseudonym: a keyed HMAC of (issuer, context id), like a learner's."""
    return pseudonym(f"lti-context\n{issuer}\n{context_id}", key)


def login_redirect(
    params: Mapping[str, str], *, registration: Registration, redirect_uri: str, login: LoginState
) -> str:
    """The platform's authorization URL the browser is sent to (OIDC implicit flow, form_post back to mentor)."""
    query = {
        "scope": "openid",
        "response_type": "id_token",
        "response_mode": "form_post",
        "prompt": "none",
        "client_id": registration.client_id,
        "redirect_uri": redirect_uri,
        "login_hint": params["login_hint"],
        "state": login.state,
        "nonce": login.nonce,
    }
    if params.get("lti_message_hint"):
        query["lti_message_hint"] = params["lti_message_hint"]
    separator = "&" if "?" in registration.auth_login_url else "?"
    return f"{registration.auth_login_url}{separator}{urlencode(query)}"


def pick_registration(params: Mapping[str, str], registrations: list[Registration]) -> Registration:
    """The registration a login initiation is for: by issuer, and by client id when the platform sends one (it
    must when mentor is registered on it more than once)."""
    for name in ("iss", "login_hint", "target_link_uri"):
        if not params.get(name):
            raise LtiRefused("missing_parameter", f"the login request has no {name}")
    if not registrations:
        raise LtiRefused("unknown_issuer", "this platform is not registered with mentor", status=404)
    client_id = params.get("client_id")
    if client_id:
        chosen = [r for r in registrations if r.client_id == client_id]
        if not chosen:
            raise LtiRefused("unknown_client", "this client id is not registered for this platform", status=404)
        return chosen[0]
    if len(registrations) > 1:
        raise LtiRefused("ambiguous_client", "mentor is registered more than once on this platform: send client_id")
    return registrations[0]


class LaunchValidator:
    """Checks a launch (the form the platform posts back) into a `Launch`."""

    def __init__(self, *, signer: TokenSigner, platform_keys: PlatformKeys, nonces: NonceStore, pseudonym_key: bytes):
        self._signer = signer
        self._keys = platform_keys
        self._nonces = nonces
        self._pseudonym_key = pseudonym_key

    def read_state(self, form: Mapping[str, str]) -> StateClaims:
        """The verified state of a launch form, after the platform's own error if it sent one."""
        if form.get("error"):
            description = str(form.get("error_description") or "")[:200]
            raise LtiRefused(
                "platform_error", f"the platform refused the sign-in: {form['error']} {description}".strip()
            )
        for name in ("id_token", "state"):
            if not form.get(name):
                raise LtiRefused("missing_parameter", f"the launch has no {name}")
        return self._signer.read_state(form["state"])

    async def validate(
        self, form: Mapping[str, str], *, state: StateClaims, registration: Registration, bound: bool
    ) -> Launch:
        """The verified launch; LtiRefused with the first check that fails."""
        token = form["id_token"]
        if len(token) > MAX_TOKEN_CHARS:
            raise LtiRefused("malformed_token", "the id_token is too long")
        payload = await self._verify(token, registration)
        nonce = payload.get("nonce")
        if not isinstance(nonce, str) or not hmac.compare_digest(hashed(nonce), state.nonce_hash):
            raise LtiRefused("nonce_mismatch", "the id_token was not issued for this login", status=401)
        launch = self._read_claims(payload, registration, bound=bound)
        if not await self._nonces.use(nonce, ttl_s=STATE_TTL_S + LEEWAY_S):
            raise LtiRefused("nonce_replayed", "this launch was used already; launch again from the course", status=401)
        return launch

    async def _verify(self, token: str, registration: Registration) -> dict[str, Any]:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError:
            raise LtiRefused("malformed_token", "the id_token is not a JWT", status=401) from None
        if header.get("alg") != "RS256":
            raise LtiRefused("wrong_algorithm", "the id_token must be signed RS256", status=401)
        kid = header.get("kid")
        key = await self._keys.key(registration.jwks_url, kid if isinstance(kid, str) else None)
        try:
            payload = jwt.decode(
                token,
                key,
                algorithms=["RS256"],
                audience=registration.client_id,
                issuer=registration.issuer,
                leeway=LEEWAY_S,
                options={"require": ["iss", "aud", "exp", "iat", "nonce"]},
            )
        except jwt.InvalidSignatureError:
            raise LtiRefused(
                "bad_signature", "the id_token's signature does not match the platform's key", status=401
            ) from None
        except jwt.ExpiredSignatureError:
            raise LtiRefused("expired", "the id_token has expired; launch again from the course", status=401) from None
        except jwt.ImmatureSignatureError:
            raise LtiRefused(
                "not_yet_valid", "the id_token is issued in the future (check clocks)", status=401
            ) from None
        except jwt.InvalidIssuerError:
            raise LtiRefused(
                "wrong_issuer", "the id_token is from another issuer than this platform's", status=401
            ) from None
        except jwt.InvalidAudienceError:
            raise LtiRefused("wrong_audience", "the id_token is not meant for mentor's client id", status=401) from None
        except jwt.MissingRequiredClaimError as exc:
            raise LtiRefused("missing_claim", f"the id_token has no {exc.claim} claim", status=401) from None
        except jwt.InvalidTokenError:
            raise LtiRefused("malformed_token", "the id_token is malformed", status=401) from None
        audience = payload["aud"]
        azp = payload.get("azp")
        if isinstance(audience, list) and len(audience) > 1 and azp is None:
            raise LtiRefused("missing_claim", "the id_token has several audiences and no azp claim", status=401)
        if azp is not None and azp != registration.client_id:
            raise LtiRefused("wrong_audience", "the id_token's azp is not mentor's client id", status=401)
        return payload

    def _read_claims(self, payload: dict[str, Any], registration: Registration, *, bound: bool) -> Launch:
        message_type = _required_str(payload, c.MESSAGE_TYPE, "message_type")
        if message_type not in (c.RESOURCE_LINK_REQUEST, c.DEEP_LINKING_REQUEST):
            raise LtiRefused("unsupported_message", f"mentor does not handle {message_type[:60]!r} messages")
        if _required_str(payload, c.VERSION, "version") != c.LTI_VERSION:
            raise LtiRefused("wrong_version", f"mentor speaks LTI {c.LTI_VERSION} only")
        deployment_id = _required_str(payload, c.DEPLOYMENT_ID, "deployment_id")
        if deployment_id not in registration.deployment_ids:
            raise LtiRefused(
                "unknown_deployment",
                "this deployment of mentor is not registered (mentor lti add-deployment)",
                status=403,
            )
        _required_str(payload, c.TARGET_LINK_URI, "target_link_uri")
        subject = payload.get("sub")
        if not isinstance(subject, str) or not subject:
            raise LtiRefused(
                "missing_claim", "the launch names no user (sub): mentor needs one to keep the learner apart"
            )
        roles = payload.get(c.ROLES)
        if not isinstance(roles, list) or not all(isinstance(role, str) for role in roles):
            raise LtiRefused("missing_claim", "the launch has no roles claim (a list, empty for no role)")
        resource_link_id = None
        deep_linking = None
        if message_type == c.RESOURCE_LINK_REQUEST:
            link = payload.get(c.RESOURCE_LINK)
            if not isinstance(link, dict) or not isinstance(link.get("id"), str) or not link["id"]:
                raise LtiRefused("missing_claim", "the launch has no resource_link id")
            resource_link_id = link["id"]
        else:
            deep_linking = _deep_linking(payload.get(c.DEEP_LINKING_SETTINGS))
        context = payload.get(c.CONTEXT)
        context_id = context.get("id") if isinstance(context, dict) else None
        custom = payload.get(c.CUSTOM)
        module_id = custom.get(c.MODULE_PARAMETER) if isinstance(custom, dict) else None
        return Launch(
            registration=registration,
            message_type=message_type,
            deployment_id=deployment_id,
            learner_id=lti_learner_id(registration.issuer, subject),
            context_key=context_key(registration.issuer, context_id, self._pseudonym_key)
            if isinstance(context_id, str) and context_id
            else None,
            roles=tuple(roles),
            module_id=module_id.strip() if isinstance(module_id, str) and module_id.strip() else None,
            resource_link_id=resource_link_id,
            deep_linking=deep_linking,
            browser_bound=bound,
        )


def _required_str(payload: dict[str, Any], claim: str, name: str) -> str:
    value = payload.get(claim)
    if not isinstance(value, str) or not value:
        raise LtiRefused("missing_claim", f"the launch has no {name} claim")
    return value


def _deep_linking(settings: Any) -> DeepLinking:
    """The deep_linking_settings claim, with what mentor needs of it checked."""
    if not isinstance(settings, dict):
        raise LtiRefused("missing_claim", "the deep-linking request has no deep_linking_settings claim")
    return_url = settings.get("deep_link_return_url")
    if not isinstance(return_url, str) or not return_url.startswith(("https://", "http://")):
        raise LtiRefused("missing_claim", "the deep-linking request has no deep_link_return_url")
    accept_types = settings.get("accept_types")
    if not isinstance(accept_types, list):
        raise LtiRefused("missing_claim", "the deep-linking request has no accept_types")
    if not isinstance(settings.get("accept_presentation_document_targets"), list):
        raise LtiRefused("missing_claim", "the deep-linking request has no accept_presentation_document_targets")
    if c.RESOURCE_LINK_ITEM not in accept_types:
        raise LtiRefused("unsupported_item", "the platform does not accept LTI resource links here")
    data = settings.get("data")
    title = settings.get("title")
    return DeepLinking(
        return_url=return_url,
        accept_multiple=settings.get("accept_multiple") is True,  # absent: one item, the safe reading
        data=data if isinstance(data, str) else None,
        title=title if isinstance(title, str) else None,
    )
