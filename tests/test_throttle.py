"""The rate limits (mentor/throttle.py) as a client meets them over real HTTP: one address cannot buy itself more
questions by inventing learner ids, nor search, run calculators or guess tokens without bound; a 429 carries
Retry-After; replicas sharing Redis count together; and use within the limits is untouched.

uvicorn trusts X-Forwarded-For from 127.0.0.1 (its default FORWARDED_ALLOW_IPS), as the replicas behind the compose
file's nginx do: the tests speak for several client addresses that way.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace

import httpx
import jwt
import pytest
import redis

from mentor.api import create_app
from mentor.errors import RateLimited
from mentor.record import NO_SINK
from mentor.runtime import LearnerState, Runtime, build_chat
from mentor.throttle import ASK, SEARCH, Limit, memory_limiter

from .chat_helpers import serve
from .conftest import MODULE_ID, UNLIMITED, make_settings

REDIS = "redis://127.0.0.1:6379/0"
SECRET = "a-learner-token-secret-of-at-least-32-bytes"
SERVER_KEY = "a-server-key-of-at-least-32-bytes-long"
METRICS_TOKEN = "a-metrics-token-of-at-least-32-bytes-long"


def limited(runtime: Runtime, tmp_path, **settings) -> Runtime:
    """The session runtime (index, embedder) with its own settings and learner state, so its own counts."""
    config = make_settings(tmp_path, **(UNLIMITED | settings))
    state = LearnerState.build(config)
    chat = build_chat(config, runtime.catalog, runtime.embedder, sink=NO_SINK, state=state)
    return replace(runtime, settings=config, chat=chat, state=state)


def served(runtime: Runtime):
    return serve(create_app(runtime.settings, runtime=runtime))


def from_address(address: str, **headers: str) -> dict[str, str]:
    return {"X-Forwarded-For": address, **headers}


def ask(client: httpx.Client, learner_id: str | None, address: str = "203.0.113.1", **headers: str) -> httpx.Response:
    body = {"message": "what does ZeRO stage 2 shard?", "module_id": MODULE_ID}
    if learner_id is not None:
        body["learner_id"] = learner_id
    return client.post("/v1/chat", json=body, headers=from_address(address, **headers))


def assert_retry_after(response: httpx.Response, fragment: str) -> None:
    assert response.status_code == 429, response.text
    assert 1 <= int(response.headers["Retry-After"]) <= 60
    assert fragment in response.json()["message"]


def test_invented_learner_ids_from_one_address_get_429_on_the_embedded_default(runtime, tmp_path) -> None:
    rt = limited(runtime, tmp_path, rate_limit_per_minute=20, rate_limit_per_client_per_minute=5)
    with served(rt) as url, httpx.Client(base_url=url, timeout=60) as client:
        burst = [ask(client, f"invented-{n}") for n in range(8)]
        other_address = ask(client, "invented-elsewhere", address="203.0.113.2")
    assert [r.status_code for r in burst] == [200] * 5 + [429] * 3
    assert_retry_after(burst[-1], "too many questions from this address: at most 5 a minute")
    assert other_address.status_code == 200  # the ceiling is the address's, not everyone's


def test_invented_facade_users_from_one_address_get_429(runtime, tmp_path) -> None:
    rt = limited(runtime, tmp_path, rate_limit_per_client_per_minute=3)
    with served(rt) as url, httpx.Client(base_url=url, timeout=60) as client:
        codes = []
        for n in range(5):
            body = {"model": MODULE_ID, "messages": [{"role": "user", "content": "what is ZeRO?"}], "user": f"u{n}"}
            response = client.post("/v1/chat/completions", json=body, headers=from_address("203.0.113.3"))
            codes.append(response.status_code)
    assert codes == [200] * 3 + [429] * 2
    assert response.json()["error"]["type"] == "rate_limit_error" and int(response.headers["Retry-After"]) >= 1


def test_learners_proven_by_token_or_server_key_are_not_held_to_the_address_ceiling(runtime, tmp_path) -> None:
    rt = limited(
        runtime, tmp_path, rate_limit_per_client_per_minute=2, learner_token_secret=SECRET, server_key=SERVER_KEY
    )
    now = int(time.time())

    def token(learner: str) -> str:
        claims = {"sub": learner, "aud": "mentor", "iat": now, "exp": now + 600}
        return jwt.encode(claims, SECRET, algorithm="HS256")

    with served(rt) as url, httpx.Client(base_url=url, timeout=60) as client:
        tokened = [ask(client, None, Authorization=f"Bearer {token(f'class-{n}')}").status_code for n in range(4)]
        vouched = [ask(client, f"platform-{n}", **{"X-Mentor-Server-Key": SERVER_KEY}).status_code for n in range(4)]
    # A class behind one NAT, each learner signed in: the per-learner limit is the one that holds.
    assert tokened == [200] * 4 and vouched == [200] * 4


def test_within_the_limits_learners_ask_as_before(runtime, tmp_path) -> None:
    rt = limited(runtime, tmp_path, rate_limit_per_minute=3, rate_limit_per_client_per_minute=6)
    with served(rt) as url, httpx.Client(base_url=url, timeout=60) as client:
        first = [ask(client, "ana").status_code for _ in range(3)]
        second = [ask(client, "ben").status_code for _ in range(3)]
        ana_again = ask(client, "ana", address="203.0.113.9")
    assert first == [200] * 3 and second == [200] * 3  # six questions, two learners, one address: all answered
    assert_retry_after(ana_again, "too many questions: at most 3 a minute")  # her own limit, wherever she asks from


@pytest.fixture
def redis_prefix() -> Iterator[str]:
    prefix = f"test-throttle-{uuid.uuid4().hex[:12]}"
    yield prefix
    with redis.Redis.from_url(REDIS) as client:
        for key in client.scan_iter(match=f"{prefix}:*", count=1000):
            client.delete(key)


def test_replicas_sharing_redis_agree_on_the_address_ceiling(runtime, tmp_path, redis_prefix) -> None:
    settings = {"redis_url": REDIS, "redis_prefix": redis_prefix, "rate_limit_per_client_per_minute": 4}
    one, two = limited(runtime, tmp_path / "one", **settings), limited(runtime, tmp_path / "two", **settings)
    try:
        with (
            served(one) as url_one,
            served(two) as url_two,
            httpx.Client(base_url=url_one, timeout=60) as first,
            httpx.Client(base_url=url_two, timeout=60) as second,
        ):
            codes = [ask([first, second][n % 2], f"invented-{n}").status_code for n in range(7)]
            searches = [first.get("/v1/search", params={"q": "ZeRO"}), second.get("/v1/search", params={"q": "ZeRO"})]
    finally:  # the async pools belong to the servers' loops, gone now
        for rt in (one, two):
            rt.state.redis.sync.close()
    assert codes == [200] * 4 + [429] * 3  # 4 a minute across both replicas, whichever answered
    assert [r.status_code for r in searches] == [200, 200]  # another limit, counted apart


def test_searches_and_calculator_runs_beyond_their_limits_get_429(runtime, tmp_path) -> None:
    rt = limited(runtime, tmp_path, rate_limit_search_per_minute=3, rate_limit_tools_per_minute=4)
    arguments = {"params": "7.5B", "dp_degree": 64, "stage": 1}
    with served(rt) as url, httpx.Client(base_url=url, timeout=60) as client:
        searches = [
            client.get("/v1/search", params={"q": f"ZeRO {n}"}, headers=from_address("198.51.100.1")) for n in range(5)
        ]
        runs = [
            client.post("/v1/tools/zero_memory", json=arguments, headers=from_address("198.51.100.1")) for _ in range(6)
        ]
        listing = client.get("/v1/tools", headers=from_address("198.51.100.1"))
        elsewhere = client.get("/v1/search", params={"q": "ZeRO"}, headers=from_address("198.51.100.2"))
    assert [r.status_code for r in searches] == [200] * 3 + [429] * 2
    assert_retry_after(searches[-1], "too many searches from this address: at most 3 a minute")
    assert [r.status_code for r in runs] == [200] * 4 + [429] * 2
    assert_retry_after(runs[-1], "too many calculator runs from this address: at most 4 a minute")
    assert listing.status_code == 200 and elsewhere.status_code == 200


def test_repeated_wrong_analyst_tokens_get_429_that_says_nothing_of_the_token(runtime, tmp_path) -> None:
    rt = limited(runtime, tmp_path, rate_limit_bad_tokens_per_minute=3)
    right = {"Authorization": f"Bearer {rt.analyst_token}"}
    wrong = {"Authorization": "Bearer not-the-analyst-token"}
    route = "/v1/signals/questions"
    with served(rt) as url, httpx.Client(base_url=url, timeout=60) as client:
        analyst = [client.get(route, headers=from_address("192.0.2.1", **right)).status_code for _ in range(6)]
        missing = [client.get(route, headers=from_address("192.0.2.2")).status_code for _ in range(5)]
        guesses = [client.get(route, headers=from_address("192.0.2.3", **wrong)) for _ in range(5)]
        right_after = client.get(route, headers=from_address("192.0.2.3", **right))
        elsewhere = client.get(route, headers=from_address("192.0.2.4", **right))
    assert analyst == [200] * 6  # successes are not counted
    assert missing == [401] * 5  # nor requests that guess nothing
    assert [r.status_code for r in guesses] == [401] * 3 + [429] * 2
    assert_retry_after(guesses[-1], "too many wrong tokens from this address: at most 3 a minute")
    # Over the limit, the right token is refused alike: the 429 tells a guesser nothing, and is no 401.
    assert_retry_after(right_after, "too many wrong tokens from this address")
    same_words = re.compile(r"\d+ s$")
    assert same_words.sub("", right_after.json()["message"]) == same_words.sub("", guesses[-1].json()["message"])
    assert "www-authenticate" not in right_after.headers and "items" not in right_after.text
    assert elsewhere.status_code == 200  # an analyst at another address is not locked out


def test_wrong_metrics_tokens_count_as_wrong_analyst_tokens(runtime, tmp_path) -> None:
    rt = limited(runtime, tmp_path, rate_limit_bad_tokens_per_minute=2, metrics_token=METRICS_TOKEN)
    with served(rt) as url, httpx.Client(base_url=url, timeout=60) as client:
        scrapes = [
            client.get("/metrics", headers=from_address("192.0.2.9", Authorization="Bearer wrong")).status_code
            for _ in range(3)
        ]
        analyst = client.get(
            "/v1/signals/questions", headers=from_address("192.0.2.9", Authorization=f"Bearer {rt.analyst_token}")
        )
        scrape = client.get("/metrics", headers=from_address("192.0.2.10", Authorization=f"Bearer {METRICS_TOKEN}"))
    assert scrapes == [401, 401, 429]
    assert analyst.status_code == 429 and scrape.status_code == 200


def test_one_limiter_counts_each_named_limit_apart() -> None:
    async def scenario() -> None:
        limiter = memory_limiter({ASK: Limit(2, "questions"), SEARCH: Limit(1, "searches")})
        await limiter.hit(ASK, "k")
        await limiter.hit(SEARCH, "k")  # the same key under another limit: its own window
        await limiter.hit(ASK, "k")
        await limiter.check(ASK, "other")
        with pytest.raises(RateLimited) as refused:
            await limiter.check(ASK, "k")  # checking counts nothing, and says when a slot frees
        assert 59 <= refused.value.retry_after_s <= 60
        with pytest.raises(RateLimited):
            await limiter.hit(SEARCH, "k")

    asyncio.run(scenario())


def test_one_memory_limiter_serves_several_event_loops() -> None:
    """A runtime is shared by several loops (tests, benchmarks): limits.aio's memory storage bound its locks to the
    first loop that contended for them, and the next loop's hits failed with RuntimeError."""
    limiter = memory_limiter({ASK: Limit(10_000, "questions")})

    async def learner(n: int) -> None:
        for turn in range(20):
            await limiter.hit(ASK, f"k{(n * 7 + turn) % 20}")
            await asyncio.sleep(0.001)

    async def classroom() -> None:
        await asyncio.gather(*(learner(n) for n in range(30)))

    for _ in range(3):
        asyncio.run(classroom())
