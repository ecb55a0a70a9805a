"""Two real `mentor serve` replicas (Redis, PostgreSQL, a Chroma server) behind one public URL, launched by the
platform emulator: a launch on one replica, the answer on another; a launch replayed to the other replica refused;
a login started on one replica finished on the other. The platform is registered with the real `mentor lti register`."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from mentor.bench.cluster import Cluster
from mentor.lti.keys import generate_key

from .conftest import MODULE_ID
from .lti_platform import SECRET, launch, read_form, running_platform
from .proxy import Proxy

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[tuple[Cluster, str]]:
    """Two replicas; the public URL is a TCP proxy (the load balancer) to the first."""
    root = tmp_path_factory.mktemp("lti-cluster")
    balancer = Proxy(1)  # its target is set once the replicas have their ports
    public = f"http://127.0.0.1:{balancer.port}"
    key = root / "tool-key.pem"
    generate_key(key)
    cluster = Cluster.start(
        root / "cluster",
        replicas=2,
        redis_db=11,
        extra_env={
            "MENTOR_LEARNER_TOKEN_SECRET": SECRET,
            "MENTOR_LTI_PRIVATE_KEY_FILE": str(key),
            "MENTOR_PUBLIC_URL": public,
        },
    )
    balancer.target = ("127.0.0.1", cluster.replicas[0].port)
    balancer.up()
    try:
        yield cluster, public
    finally:
        balancer.down()
        cluster.close()


def test_a_launch_on_one_replica_is_answered_by_the_other_and_cannot_be_replayed_there(cluster) -> None:
    cluster, public = cluster
    first, second = (replica.url for replica in cluster.replicas)
    with running_platform(public) as platform, httpx.Client(timeout=60) as browser:
        out = cluster.job(
            "lti", "register", "--issuer", platform.issuer, "--client-id", platform.client_id,
            "--auth-url", platform.auth_url, "--jwks-url", platform.jwks_url, "--deployment", platform.deployment_id,
        )  # fmt: skip
        assert "registered" in out
        assert httpx.get(f"{first}/lti/jwks").json() == httpx.get(f"{second}/lti/jwks").json()

        dance = launch(browser, platform, platform.expect(custom={"module_id": MODULE_ID}))
        assert dance.response.status_code == 200, dance.response.text
        token = dance.response.text.split('token="', 1)[1].split('"', 1)[0]
        answer = browser.post(
            f"{second}/v1/chat",
            json={"message": "Why keep an fp32 master copy of the weights?"},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert answer.status_code == 200, answer.text

        replayed = browser.post(f"{second}/lti/launch", data=dance.form)
        assert replayed.status_code == 401 and "used already" in replayed.text

        # A login started on the second replica is finished at the public URL (the first): the state is signed with
        # the key every replica derives alike.
        hint = platform.expect(custom={"module_id": MODULE_ID})
        login = httpx.URL(platform.login_url(hint))
        started = browser.get(f"{second}/lti/login", params=dict(login.params), follow_redirects=False)
        assert started.status_code == 302
        action, form = read_form(browser.get(started.headers["location"]).text)
        assert action == f"{public}/lti/launch"
        finished = browser.post(action, data=form)
        assert finished.status_code == 200 and "<mentor-chat" in finished.text
