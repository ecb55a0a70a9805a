"""Registering platforms: LTI Dynamic Registration against the emulator (with mentor's single-use invitation), the
`mentor lti` commands, the tool's key and its rotation, the platforms' JWKS cache, and nonces used once."""

from __future__ import annotations

import asyncio
import logging
import uuid

import httpx
import pytest
import redis
from typer.testing import CliRunner

from mentor.cli import app as cli_app
from mentor.errors import ConfigError, NotReady
from mentor.lti.errors import LtiRefused
from mentor.lti.keys import load_tool_keys, rotate_key
from mentor.lti.launch import lti_learner_id
from mentor.lti.nonces import MemoryNonceStore, RedisNonceStore
from mentor.lti.platform_keys import PlatformKeys
from mentor.lti.registration import ToolUrls
from mentor.lti.registrations import find_registration
from mentor.lti.service import invite_url
from mentor.lti.state import TokenSigner, derive_key
from mentor.redis_state import connect_redis
from mentor.runtime import pseudonym_secret

from .conftest import make_settings
from .lti_platform import launch, running_platform

pytest_plugins = ["tests.lti_fixtures"]


def invite(runtime, tool: str) -> str:
    """`mentor lti invite` for the tool under test (its data directory holds the key the invitation is signed by)."""
    env = {"MENTOR_DATA_DIR": str(runtime.settings.data_dir), "MENTOR_PUBLIC_URL": tool}
    result = CliRunner().invoke(cli_app, ["lti", "invite", "--ttl", "1h"], env=env)
    assert result.exit_code == 0, result.output
    return result.output.strip()


def signed_invite(runtime, tool: str) -> str:
    """The same invitation, minted in this process (the CLI reconfigures logging, which a caplog test cannot have)."""
    signer = TokenSigner(derive_key(pseudonym_secret(runtime.settings)))
    return invite_url(signer, ToolUrls(tool), 3600)


def registration_url(url: str, platform, token: str | None = None) -> str:
    query = {
        "openid_configuration": f"{platform.issuer}/.well-known/openid-configuration",
        "registration_token": token or platform.registration_token,
    }
    return str(httpx.URL(url).copy_merge_params(query))


def test_dynamic_registration_registers_the_platform_and_its_launches_then_open(tool, runtime, browser) -> None:
    with running_platform(tool) as platform:
        page = browser.get(registration_url(invite(runtime, tool), platform))
        assert page.status_code == 200, page.text
        assert "org.imsglobal.lti.close" in page.text and "'sha256-" in page.headers["content-security-policy"]
        [sent] = platform.registrations
        assert sent["initiate_login_uri"] == f"{tool}/lti/login"
        assert sent["redirect_uris"] == [f"{tool}/lti/launch"]
        assert sent["jwks_uri"] == f"{tool}/lti/jwks"
        configuration = sent["https://purl.imsglobal.org/spec/lti-tool-configuration"]
        assert configuration["claims"] == ["iss", "sub"]  # no name, e-mail or picture asked for
        assert {m["type"] for m in configuration["messages"]} == {"LtiResourceLinkRequest", "LtiDeepLinkingRequest"}
        assert sent["scope"] == ""  # no grades sent back, no roster read
        stored = find_registration(runtime.database, platform.issuer, platform.client_id)
        assert stored is not None and stored.source == "dynamic"
        assert stored.deployment_ids == (platform.deployment_id,) and stored.jwks_url == platform.jwks_url
        assert launch(browser, platform, platform.expect()).response.status_code == 200


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("no invitation", "no_invitation"),
        ("forged invitation", "bad_invitation"),
        ("invitation used twice", "invitation_used"),
        ("wrong registration token", "registration_failed"),
        ("no openid_configuration", "missing_parameter"),
    ],
)
def test_dynamic_registration_refuses_without_a_fresh_invitation_or_the_platform_s_consent(
    tool, runtime, browser, caplog, case, reason
) -> None:
    with running_platform(tool) as platform:
        url = signed_invite(runtime, tool)
        if case == "no invitation":
            url = f"{tool}/lti/register"
        elif case == "forged invitation":
            url = f"{tool}/lti/register?invite=eyJhbGciOiJIUzI1NiJ9.e30.x"
        elif case == "invitation used twice":
            assert browser.get(registration_url(url, platform)).status_code == 200
        target = registration_url(url, platform, token="not-the-platform-s" if "token" in case else None)
        if case == "no openid_configuration":
            target = url
        with caplog.at_level(logging.WARNING, logger="mentor.lti.router"):
            response = browser.get(target)
        assert response.status_code == 400, response.text
        assert f"({reason}, 400)" in caplog.text
        assert find_registration(runtime.database, platform.issuer, platform.client_id) is None or case.endswith(
            "twice"
        )


def cli(tmp_path, *args: str) -> str:
    result = CliRunner().invoke(cli_app, ["lti", *args], env={"MENTOR_DATA_DIR": str(tmp_path / "data")})
    assert result.exit_code == 0, result.output
    return result.output


def test_the_lti_commands_register_list_extend_and_remove_platforms(tmp_path) -> None:
    out = cli(
        tmp_path,
        "register",
        "--issuer",
        "https://moodle.example.edu",
        "--client-id",
        "abc123",
        "--auth-url",
        "https://moodle.example.edu/mod/lti/auth.php",
        "--jwks-url",
        "https://moodle.example.edu/mod/lti/certs.php",
        "--deployment",
        "1",
    )
    assert "registered 1: https://moodle.example.edu (client id abc123)" in out
    assert "https://moodle.example.edu: deployments 1, 2" in cli(tmp_path, "add-deployment", "1", "2")
    assert "https://moodle.example.edu\tclient abc123\tdeployments 1, 2\tcli" in cli(tmp_path, "list")
    duplicate = CliRunner().invoke(
        cli_app,
        ["lti", "register", "--issuer", "https://moodle.example.edu", "--client-id", "abc123"]
        + ["--auth-url", "https://x.example/a", "--jwks-url", "https://x.example/j", "--deployment", "1"],
        env={"MENTOR_DATA_DIR": str(tmp_path / "data")},
    )
    assert duplicate.exit_code == 2 and "registered already" in duplicate.output
    assert "removed 1" in cli(tmp_path, "remove", "1")
    assert cli(tmp_path, "list") == ""
    assert cli(tmp_path, "learner-id", "https://moodle.example.edu", "42").strip() == lti_learner_id(
        "https://moodle.example.edu", "42"
    )


def test_the_tool_key_is_generated_once_and_rotation_keeps_the_old_one_published(tmp_path) -> None:
    settings = make_settings(tmp_path)
    first = load_tool_keys(settings)
    assert load_tool_keys(settings).kid == first.kid  # kept, not regenerated
    assert (settings.data_dir / "lti" / "tool-key.pem").stat().st_mode & 0o777 == 0o600
    old, new = rotate_key(settings)
    rotated = load_tool_keys(settings)
    assert old == first.kid and rotated.kid == new != old
    assert [k["kid"] for k in rotated.jwks()["keys"]] == [new, old]


def test_shared_replicas_need_a_configured_key_and_a_bad_one_is_named(tmp_path) -> None:
    with pytest.raises(ConfigError, match="MENTOR_LTI_PRIVATE_KEY_FILE must be set"):
        load_tool_keys(make_settings(tmp_path, redis_url="redis://127.0.0.1:6379/0"))
    bad = tmp_path / "bad.pem"
    bad.write_text("not a key")
    with pytest.raises(ConfigError, match="bad.pem"):
        load_tool_keys(make_settings(tmp_path, lti_private_key_file=bad))
    generated = tmp_path / "key.pem"
    assert "wrote" in cli(tmp_path, "generate-key", str(generated))
    assert load_tool_keys(make_settings(tmp_path, redis_url="redis://x:1/0", lti_private_key_file=generated)).kid


def test_cached_platform_keys_keep_working_while_the_jwks_cannot_be_fetched(caplog) -> None:
    with running_platform("http://127.0.0.1:9") as platform:
        keys = PlatformKeys(fresh_s=0, retry_s=0)  # every call tries to refresh
        known = asyncio.run(keys.key(platform.jwks_url, platform.kid))
        platform.jwks_down = True
        with caplog.at_level(logging.WARNING):
            assert asyncio.run(keys.key(platform.jwks_url, platform.kid)) is known
            assert asyncio.run(keys.key(platform.jwks_url, platform.kid)) is known
        assert platform.jwks_fetches == 3
        assert caplog.text.count("cannot fetch the platform JWKS") == 1  # one warning per outage
        with pytest.raises(LtiRefused) as refused:
            asyncio.run(keys.key(platform.jwks_url, "a-kid-never-seen"))
        assert refused.value.reason == "jwks_unavailable"


def test_a_jwks_is_fetched_again_only_when_stale_or_a_new_kid_appears_and_not_more_than_once_per_interval() -> None:
    with running_platform("http://127.0.0.1:9") as platform:
        keys = PlatformKeys(retry_s=3600)
        for _ in range(3):
            asyncio.run(keys.key(platform.jwks_url, platform.kid))
        assert platform.jwks_fetches == 1
        for _ in range(3):  # made-up kids do not make mentor hammer the platform
            with pytest.raises(LtiRefused):
                asyncio.run(keys.key(platform.jwks_url, uuid.uuid4().hex))
        assert platform.jwks_fetches == 1


def test_a_nonce_opens_one_launch_in_memory_and_across_replicas_in_redis() -> None:
    async def twice(store) -> tuple[bool, bool]:
        return await store.use("n-1", ttl_s=60), await store.use("n-1", ttl_s=60)

    assert asyncio.run(twice(MemoryNonceStore())) == (True, False)
    prefix = f"mentor-test-{uuid.uuid4().hex[:8]}"

    async def replicas() -> tuple[bool, bool]:
        first, second = connect_redis("redis://127.0.0.1:6379/0"), connect_redis("redis://127.0.0.1:6379/0")
        try:
            return await RedisNonceStore(first, prefix=prefix).use("n-1", ttl_s=60), await RedisNonceStore(
                second, prefix=prefix
            ).use("n-1", ttl_s=60)
        finally:
            await first.aclose()
            await second.aclose()

    assert asyncio.run(replicas()) == (True, False)
    client = redis.Redis()
    try:
        [key] = list(client.scan_iter(match=f"{prefix}:*"))
        assert b"n-1" not in key and 0 < client.ttl(key) <= 60  # a hash of the nonce, for its lifetime
        client.delete(key)
    finally:
        client.close()


def test_a_nonce_store_that_cannot_be_reached_refuses_rather_than_let_a_replay_through() -> None:
    async def use() -> bool:
        clients = connect_redis("redis://127.0.0.1:9/0")
        try:
            return await RedisNonceStore(clients, prefix="x").use("n", ttl_s=60)
        finally:
            await clients.aclose()

    with pytest.raises(NotReady):
        asyncio.run(use())


def test_memory_nonces_expire_and_stay_bounded() -> None:
    store = MemoryNonceStore(max_nonces=2)

    async def run() -> list[bool]:
        return [
            await store.use("a", ttl_s=0),  # expires at once
            await store.use("a", ttl_s=60),
            await store.use("b", ttl_s=60),
            await store.use("c", ttl_s=60),
        ]

    assert asyncio.run(run()) == [True, True, True, True]
    assert len(store._used) == 2
