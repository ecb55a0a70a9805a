"""The LTI routes: tool JWKS, OIDC login initiation, launch, the deep-linking picker's post, dynamic registration.

Each answers a browser inside the LMS, so a refusal is a plain HTML page with its 4xx status, and one log line naming
the reason (never the token). Bodies are the form posts the platforms send (application/x-www-form-urlencoded),
parsed here: the id_token is one field of it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any
from urllib.parse import parse_qsl

from fastapi import APIRouter, Depends, FastAPI, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse
from fastapi.routing import APIRoute

from mentor.errors import ConfigError, MentorError, NotFound
from mentor.lti import claims as c
from mentor.lti.analytics import analytics_form, course_of, course_token, handoff_page
from mentor.lti.deep_linking import PickedModule, read_session, response_token, session_token
from mentor.lti.errors import LtiRefused
from mentor.lti.launch import Launch, pick_registration
from mentor.lti.launch import login_redirect as platform_login_url
from mentor.lti.pages import autopost_page, box_page, csp, picker_page, refusal_page, registered_page
from mentor.lti.registration import read_platform_configuration, send_registration
from mentor.lti.registrations import add_registration, find_registration, find_registrations
from mentor.lti.service import LtiService, build_lti
from mentor.lti.state import INVITE_AUDIENCE, STATE_TTL_S, check_binding

log = logging.getLogger(__name__)

# Fields a form may have: the launch has a handful; the picker one per module.
MAX_FORM_FIELDS = 500
PAGE_CSP = csp()


class LtiRoute(APIRoute):
    """Errors of an LTI route become a plain HTML page with their status and a log line with their reason."""

    def get_route_handler(self) -> Callable[[Request], Any]:
        handler = super().get_route_handler()

        async def answered(request: Request) -> Response:
            try:
                return await handler(request)
            except MentorError as exc:
                reason = exc.reason if isinstance(exc, LtiRefused) else exc.code
                log.warning("LTI %s refused (%s, %d): %s", self.path, reason, exc.status_code, exc.message)
                return page(refusal_page(exc.status_code, exc.message), status=exc.status_code)

        return answered


@asynccontextmanager
async def lti_lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Build the LTI service once the runtime is up; without what LTI needs, the routes say so (404)."""
    app.state.lti = None
    try:
        app.state.lti = await asyncio.to_thread(build_lti, app.state.settings, app.state.runtime)
    except ConfigError as exc:
        app.state.lti_off = exc.message
        log.info("LTI routes are off: %s", exc.message)
    yield


router = APIRouter(prefix="/lti", tags=["lti"], route_class=LtiRoute, lifespan=lti_lifespan)


async def get_lti(request: Request) -> LtiService:
    """The LTI service, or a 404 page saying why LTI is off on this server."""
    lti = getattr(request.app.state, "lti", None)
    if lti is None:
        reason = getattr(request.app.state, "lti_off", "it is not configured")
        raise LtiRefused("lti_off", f"LTI is not enabled on this server: {reason}", status=404)
    return lti


LtiDep = Annotated[LtiService, Depends(get_lti)]


def page(html: str, *, status: int = 200, policy: str = PAGE_CSP) -> HTMLResponse:
    return HTMLResponse(html, status_code=status, headers={"Content-Security-Policy": policy})


async def read_fields(request: Request) -> list[tuple[str, str]]:
    """The query (GET) or the url-encoded form (POST) as (name, value) pairs."""
    if request.method == "GET":
        return list(request.query_params.multi_items())
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != "application/x-www-form-urlencoded":
        raise LtiRefused(
            "unsupported_media_type", "LTI requests are form posts (application/x-www-form-urlencoded)", status=415
        )
    try:
        return parse_qsl((await request.body()).decode("utf-8"), keep_blank_values=True, max_num_fields=MAX_FORM_FIELDS)
    except (UnicodeDecodeError, ValueError):
        raise LtiRefused("malformed_form", "the form could not be read") from None


def binding_cookie(name: str, value: str, max_age_s: int) -> str:
    """The state's browser-binding cookie: sent on the platform's cross-site form post (SameSite=None; Secure), kept
    per top-level site where third-party cookies are partitioned (Partitioned, CHIPS); only /lti/launch reads it.
    Written out because Starlette sets Partitioned only on Python 3.14."""
    return f"{name}={value}; Max-Age={max_age_s}; Path=/lti/launch; Secure; HttpOnly; SameSite=None; Partitioned"


def first_values(fields: list[tuple[str, str]]) -> dict[str, str]:
    values: dict[str, str] = {}
    for name, value in fields:
        values.setdefault(name, value)
    return values


FORM = {"application/x-www-form-urlencoded": {"schema": {"type": "object", "additionalProperties": {"type": "string"}}}}
HTML = {"content": {"text/html": {"schema": {"type": "string"}}}}
REFUSALS: dict[int | str, dict[str, Any]] = {
    status: {"description": description, **HTML}
    for status, description in {
        400: "The request misses something or is malformed (a page says what).",
        401: "The launch cannot be verified: signature, issuer, audience, expiry, nonce, keys.",
        403: "A deployment that is not registered, or a role that may not do this.",
        404: "LTI is off on this server, or the platform, client or module is unknown.",
        415: "Not a form post.",
    }.items()
}


@router.get("/jwks", summary="The tool's public keys (JWKS)", responses={404: REFUSALS[404]})
async def jwks(lti: LtiDep) -> JSONResponse:
    """The public keys platforms verify mentor's deep-linking responses with (the current key and retired ones)."""
    return JSONResponse(lti.keys.jwks(), headers={"Cache-Control": "public, max-age=300"})


LOGIN = {
    "summary": "OIDC third-party login initiation (iss, login_hint, target_link_uri, client_id, lti_message_hint)",
    "status_code": 302,
    "response_class": RedirectResponse,
    "responses": REFUSALS,
}


@router.get("/login", **LOGIN)
async def login_by_link(request: Request, lti: LtiDep) -> Response:
    """Start a launch from a link (the parameters in the query)."""
    return await login(request, lti)


@router.post("/login", openapi_extra={"requestBody": {"required": True, "content": FORM}}, **LOGIN)
async def login_by_form(request: Request, lti: LtiDep) -> Response:
    """Start a launch from a form post."""
    return await login(request, lti)


async def login(request: Request, lti: LtiService) -> Response:
    """Send the browser to the platform's authorization endpoint with a signed state and a nonce."""
    params = first_values(await read_fields(request))
    registrations = await asyncio.to_thread(find_registrations, lti.database, params.get("iss", ""))
    registration = pick_registration(params, registrations)
    login_state = lti.signer.new_login_state(issuer=registration.issuer, client_id=registration.client_id)
    response = RedirectResponse(
        platform_login_url(params, registration=registration, redirect_uri=lti.urls.launch, login=login_state), 302
    )
    # Bound to this browser when it keeps the cookie inside the LMS's iframe (mentor.lti.state explains the rest).
    response.headers.append(
        "set-cookie", binding_cookie(login_state.cookie_name, login_state.cookie_value, STATE_TTL_S)
    )
    return response


@router.post(
    "/launch",
    summary="LTI launch (the platform's form post of the id_token)",
    response_class=HTMLResponse,
    responses=REFUSALS,
    openapi_extra={"requestBody": {"required": True, "content": FORM}},
)
async def launch(request: Request, lti: LtiDep) -> HTMLResponse:
    """Verify the launch, then show the box for the link's module (or, for deep linking, the module picker)."""
    form = first_values(await read_fields(request))
    state = lti.validator.read_state(form)
    bound = check_binding(state, request.cookies.get(state.cookie_name))
    registration = await asyncio.to_thread(find_registration, lti.database, state.issuer, state.client_id)
    if registration is None:
        raise LtiRefused("unknown_registration", "this platform's registration was removed from mentor", status=401)
    verified = await lti.validator.validate(form, state=state, registration=registration, bound=bound)
    log.info(
        "LTI %s from %s (deployment %s)%s%s",
        verified.message_type,
        registration.issuer,
        verified.deployment_id,
        " by course staff" if verified.staff else "",
        "" if bound else "; state not bound to a cookie (blocked in the iframe)",
    )
    deep_linking = verified.message_type == c.DEEP_LINKING_REQUEST
    response = picker(lti, verified) if deep_linking else box(lti, verified)
    response.headers.append("set-cookie", binding_cookie(state.cookie_name, "", 0))  # used: gone
    return response


def box(lti: LtiService, verified: Launch) -> HTMLResponse:
    """The box for the resource link's module, with a learner token for the launch's learner."""
    modules = lti.runtime.modules
    module_id = verified.module_id
    if module_id is None:
        if len(modules) != 1:
            raise LtiRefused(
                "no_module",
                "this link names no module (custom parameter module_id): ask the instructor to place it again with "
                "mentor's picker",
            )
        module_id = next(iter(modules))
    module = modules.get(module_id)
    if module is None:
        raise LtiRefused("unknown_module", f"module {module_id[:200]!r} is not served by this mentor", status=404)
    staff_form = ""
    if verified.staff and verified.context_key is not None:
        staff_form = analytics_form(course_token(lti.signer, verified.context_key))
    return page(box_page(module, token=lti.learner_token(verified), staff_form=staff_form))


def picker(lti: LtiService, verified: Launch) -> HTMLResponse:
    """The deep-linking picker, for course staff."""
    if not verified.staff:
        raise LtiRefused("not_staff", "only course staff can place mentor in a course", status=403)
    modules = list(lti.runtime.modules.values())
    if not modules:
        raise NotFound("no module is loaded yet (run `mentor ingest`)")
    assert verified.deep_linking is not None
    return page(
        picker_page(
            modules, session=session_token(lti.signer, verified), multiple=verified.deep_linking.accept_multiple
        )
    )


@router.post(
    "/deep-link",
    summary="The picker's choice, returned to the platform as a signed LtiDeepLinkingResponse",
    response_class=HTMLResponse,
    responses=REFUSALS,
    openapi_extra={"requestBody": {"required": True, "content": FORM}},
)
async def deep_link(request: Request, lti: LtiDep) -> HTMLResponse:
    """Sign the response for the chosen modules and post it to the platform's return URL (a self-submitting form)."""
    fields = await read_fields(request)
    values = first_values(fields)
    if not values.get("session"):
        raise LtiRefused("missing_parameter", "the picker's post has no session")
    session = read_session(lti.signer, values["session"])
    registration = await asyncio.to_thread(find_registration, lti.database, session.issuer, session.client_id)
    if registration is None or session.deployment_id not in registration.deployment_ids:
        raise LtiRefused("unknown_registration", "this platform or deployment is no longer registered", status=401)
    modules = lti.runtime.modules
    picked = []
    for module_id in dict.fromkeys(value for name, value in fields if name == "module_id"):
        module = modules.get(module_id)
        if module is None:
            raise LtiRefused("unknown_module", f"module {module_id[:200]!r} is not served by this mentor", status=404)
        picked.append(PickedModule(module.id, module.title))
    token = response_token(lti.keys, session, picked, launch_url=lti.urls.launch)
    log.info("LTI deep-linking response to %s: %d module(s)", registration.issuer, len(picked))
    html, policy = autopost_page(session.return_url, token)
    return page(html, policy=policy)


@router.get(
    "/register",
    summary="LTI Dynamic Registration (opened by the platform with openid_configuration and registration_token)",
    response_class=HTMLResponse,
    responses=REFUSALS,
)
async def register(
    lti: LtiDep, invite: str = "", openid_configuration: str = "", registration_token: str | None = None
) -> HTMLResponse:
    """Register the platform that opened this URL: read its configuration, send mentor's, store the answer."""
    if not invite:
        raise LtiRefused(
            "no_invitation", "this registration URL has no invitation: create one with `mentor lti invite`"
        )
    claims = lti.signer.verify(INVITE_AUDIENCE, invite, what="invitation")
    if not openid_configuration:
        raise LtiRefused("missing_parameter", "the platform did not send openid_configuration")
    if not await lti.nonces.use(f"invite:{claims.get('jti')}", ttl_s=max(60, int(claims["exp"] - claims["iat"]))):
        raise LtiRefused("invitation_used", "this invitation was used already: create another with `mentor lti invite`")
    platform = await read_platform_configuration(openid_configuration, registration_token)
    client_id, deployment_ids = await send_registration(platform, lti.urls, registration_token)
    registration = await asyncio.to_thread(
        add_registration,
        lti.database,
        issuer=platform.issuer,
        client_id=client_id,
        auth_login_url=platform.authorization_endpoint,
        auth_token_url=platform.token_endpoint,
        jwks_url=platform.jwks_uri,
        deployment_ids=deployment_ids,
        name=platform.product,
        source="dynamic",
    )
    log.info(
        "LTI dynamic registration: %s, client id %s, %d deployment(s)",
        registration.issuer,
        client_id,
        len(deployment_ids),
    )
    html, policy = registered_page(registration.issuer, registration.client_id)
    return page(html, policy=policy)


@router.post(
    "/analytics",
    summary="Open the dashboard limited to a course (course staff, from their launch page)",
    response_class=HTMLResponse,
    responses=REFUSALS,
    openapi_extra={"requestBody": {"required": True, "content": FORM}},
)
async def analytics(request: Request, lti: LtiDep) -> HTMLResponse:
    """Hand the staff launch's course token to the dashboard (in this tab's storage) and open it."""
    token = first_values(await read_fields(request)).get("course_token", "")
    if course_of(lti, token) is None:
        raise LtiRefused(
            "bad_course_token", "this course analytics link has expired; open it again from the course", status=401
        )
    html, policy = handoff_page(token)
    return page(html, policy=policy)
