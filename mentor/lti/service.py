"""The LTI pieces, built once per app when it starts (the router's lifespan), from the settings and the runtime.

LTI needs MENTOR_LEARNER_TOKEN_SECRET: the box opened by a launch proves its learner with a learner token, and
without the secret mentor reads no token (a learner id is then taken as sent, and a launch would prove nothing).
A server without it, or without a usable tool key, serves no LTI route (404 saying why, and one warning at start)
and runs everything else as before.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from mentor.auth import mint_learner_token
from mentor.errors import ConfigError
from mentor.lti.keys import ToolKeys, load_tool_keys
from mentor.lti.launch import Launch, LaunchValidator
from mentor.lti.nonces import MemoryNonceStore, NonceStore, RedisNonceStore
from mentor.lti.platform_keys import PlatformKeys
from mentor.lti.registration import ToolUrls
from mentor.lti.state import INVITE_AUDIENCE, TokenSigner, derive_key
from mentor.runtime import Runtime, pseudonym_secret
from mentor.settings import Settings

log = logging.getLogger(__name__)

# The box's learner token lives two hours (at most the configured maximum): a lesson's length. After that the box
# says "reload the page to sign in again", and reloading the LMS page launches anew.
BOX_TOKEN_TTL_S = 2 * 3600


@dataclass
class LtiService:
    """Everything an LTI route needs, built once."""

    settings: Settings
    runtime: Runtime
    keys: ToolKeys
    signer: TokenSigner
    validator: LaunchValidator
    nonces: NonceStore
    urls: ToolUrls

    @property
    def database(self) -> Any:
        return self.runtime.database

    def learner_token(self, launch: Launch) -> str:
        """The box's learner token for the launch's learner (the existing signed tokens, short-lived)."""
        settings = self.settings
        assert settings.learner_token_secret is not None
        return mint_learner_token(
            launch.learner_id,
            secret=settings.learner_token_secret.get_secret_value(),
            audience=settings.learner_token_audience,
            ttl_s=min(BOX_TOKEN_TTL_S, settings.learner_token_max_age_s),
            max_age_s=settings.learner_token_max_age_s,
            context=launch.context_key,
        )

    def invite_url(self, ttl_s: int) -> str:
        """A dynamic-registration URL an administrator pastes into the platform, valid once within `ttl_s`."""
        return invite_url(self.signer, self.urls, ttl_s)


def invite_url(signer: TokenSigner, urls: ToolUrls, ttl_s: int) -> str:
    """The registration URL with a signed, single-use invitation (mentor.lti.registration)."""
    invite = signer.sign(INVITE_AUDIENCE, {"jti": secrets.token_urlsafe(16)}, ttl_s=ttl_s)
    return f"{urls.register}?{urlencode({'invite': invite})}"


def nonce_store(runtime: Runtime, settings: Settings) -> NonceStore:
    """Redis when learner state is shared (replicas), else this process's memory."""
    if runtime.state.redis is not None:
        return RedisNonceStore(runtime.state.redis, prefix=settings.redis_prefix)
    return MemoryNonceStore()


def build_lti(settings: Settings, runtime: Runtime, *, platform_keys: PlatformKeys | None = None) -> LtiService:
    """The LTI service; ConfigError saying what is missing when LTI cannot run with these settings."""
    if settings.learner_token_secret is None:
        raise ConfigError(
            "LTI needs MENTOR_LEARNER_TOKEN_SECRET: the box a launch opens proves its learner with a learner token"
        )
    key = pseudonym_secret(settings)
    signer = TokenSigner(derive_key(key))
    nonces = nonce_store(runtime, settings)
    return LtiService(
        settings=settings,
        runtime=runtime,
        keys=load_tool_keys(settings),
        signer=signer,
        validator=LaunchValidator(
            signer=signer,
            platform_keys=platform_keys or PlatformKeys(),
            nonces=nonces,
            pseudonym_key=key,
        ),
        nonces=nonces,
        urls=ToolUrls(settings.public_url.rstrip("/")),
    )
