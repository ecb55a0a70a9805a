"""The deployment: docker-compose.yml, the Dockerfile, .dockerignore and deploy/nginx.conf.

No Docker engine runs here, so the compose file is checked for what it configures and validated by the compose
client (`docker compose config` or `docker-compose config`), the Dockerfile's dependency step runs with a stand-in
pip, and the proxy's configuration runs in a native nginx in front of two local servers standing in for replicas.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from fnmatch import fnmatch
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
import yaml

from mentor.api.middleware import MAX_BODY_BYTES, error_response
from mentor.settings import Settings

from .conftest import ROOT, free_port

NGINX_CONF = ROOT / "deploy" / "nginx.conf"
SECRETS = ("MENTOR_PSEUDONYM_KEY", "MENTOR_ANALYST_TOKEN")


def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def jobs(services: dict) -> set[str]:
    """The one-off services: those another waits on to have exited 0."""
    return {
        name
        for service in services.values()
        for name, dependency in (service.get("depends_on") or {}).items()
        if dependency["condition"] == "service_completed_successfully"
    }


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined and comments dropped."""
    lines = [line for line in (ROOT / "Dockerfile").read_text().splitlines() if not line.lstrip().startswith("#")]
    text = "\n".join(lines).replace("\\\n", "")
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in text.splitlines() if line.strip()]


def dockerfile_healthcheck() -> list[str]:
    """The exec-form command of the Dockerfile's HEALTHCHECK."""
    (arguments,) = [arguments for name, arguments in dockerfile_instructions() if name == "HEALTHCHECK"]
    return json.loads(arguments.split(" CMD ", 1)[1])


# --- docker-compose.yml: what it configures --------------------------------------------------------------------


def test_replicas_and_jobs_are_configured_only_with_real_settings() -> None:
    services = compose()["services"]

    def settings_named(environment: dict[str, str]) -> set[str]:
        return {key.removeprefix("MENTOR_").lower() for key in environment if key.startswith("MENTOR_")}

    for name in ("api", *jobs(services)):
        names = settings_named(services[name]["environment"])
        assert names <= set(Settings.model_fields), (name, names - set(Settings.model_fields))
    environment = services["api"]["environment"]
    settings = Settings(**{name: environment[f"MENTOR_{name.upper()}"] for name in settings_named(environment)})
    assert settings.chroma_url == "http://chroma:8000"
    assert settings.database.startswith("postgresql+psycopg://") and "@postgres:5432/" in settings.database
    assert settings.redis_url == "redis://redis:6379/0"
    # A replica neither ingests nor migrates: the jobs do, once, before any replica starts.
    assert settings.shared and not settings.sync_index and not settings.migrate_database
    assert set(SECRETS) <= set(environment)


def test_replicas_wait_for_every_service_and_both_jobs() -> None:
    services = compose()["services"]
    assert services["api"]["depends_on"] == {
        "redis": {"condition": "service_healthy"},
        "chroma": {"condition": "service_healthy"},
        "postgres": {"condition": "service_healthy"},
        "migrate": {"condition": "service_completed_successfully"},
        "ingest": {"condition": "service_completed_successfully"},
    }
    assert jobs(services) == {"migrate", "ingest"}
    assert services["migrate"]["command"] == ["mentor", "db", "upgrade"]
    assert services["migrate"]["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    assert services["ingest"]["command"] == ["mentor", "ingest"]
    assert services["ingest"]["depends_on"] == {"chroma": {"condition": "service_healthy"}}
    for job in ("migrate", "ingest"):  # the replicas' image and the same addresses
        assert services[job]["image"] == services["api"]["image"] and services[job]["build"] == services["api"]["build"]
        shared = {k: v for k, v in services["api"]["environment"].items() if k in services[job]["environment"]}
        assert shared == services[job]["environment"], job
        assert not set(SECRETS) & set(services[job]["environment"]), job  # a job needs neither secret
    postgres = services["postgres"]["environment"]
    url = services["api"]["environment"]["MENTOR_DATABASE_URL"]
    assert f"{postgres['POSTGRES_USER']}:{postgres['POSTGRES_PASSWORD']}@" in url
    assert url.endswith(f"/{postgres['POSTGRES_DB']}")
    assert (ROOT / services["api"]["build"] / "Dockerfile").is_file()


def test_replicas_publish_no_port_so_they_can_be_scaled() -> None:
    services = compose()["services"]
    api = services["api"]
    assert "ports" not in api and "container_name" not in api  # either would let only one replica start
    assert api["expose"] == [api["environment"]["MENTOR_PORT"]] == ["8000"]
    assert api["deploy"]["replicas"] >= 2
    # The proxy is the one way in: nothing else is published on the host.
    assert {name for name, service in services.items() if service.get("ports")} == {"proxy"}
    assert services["proxy"]["ports"] == ["8000:80"]


def test_every_long_running_service_has_a_health_check_and_a_restart_policy() -> None:
    services = compose()["services"]
    for name in jobs(services):
        # Retried a few times, then `up` stops with the job's exit code instead of looping.
        assert re.fullmatch(r"on-failure:\d", services[name]["restart"]), name
    for name in set(services) - jobs(services):
        service = services[name]
        assert service.get("restart") in ("unless-stopped", "always"), name
        check = service["healthcheck"]
        assert check["test"][0] in ("CMD", "CMD-SHELL") and check["interval"] and check["retries"], name
    assert "/readyz" in services["api"]["healthcheck"]["test"][-1]
    assert services["api"]["healthcheck"]["test"][1:] == dockerfile_healthcheck()  # one probe, not two
    assert "/api/v2/heartbeat" in services["chroma"]["healthcheck"]["test"][-1]
    assert "pg_isready" in services["postgres"]["healthcheck"]["test"][-1]
    assert "redis-cli ping" in services["redis"]["healthcheck"]["test"][-1]


def test_redis_keeps_erasure_tombstones_across_a_restart_and_evicts_conversations_first() -> None:
    redis = compose()["services"]["redis"]
    command = redis["command"]
    assert command[command.index("--appendonly") + 1] == "yes" and command[command.index("--save") + 1] == ""
    assert command[command.index("--maxmemory-policy") + 1] == "volatile-ttl"
    assert any(str(v).endswith(":/data") for v in redis["volumes"])


def test_readme_gives_both_commands_and_ci_runs_make_test() -> None:
    # Every setting is documented on the configuration page, written from Settings when the docs site is built:
    # tests/test_docs_site.py builds it and checks each MENTOR_* variable is there.
    readme = (ROOT / "README.md").read_text()
    assert "make serve" in readme and "make test" in readme
    assert "make test" in (ROOT / ".ci/run").read_text()


# --- docker-compose.yml: what the compose client makes of it ----------------------------------------------------


def compose_command() -> list[str] | None:
    """`docker compose` (the v2 plugin) or the standalone `docker-compose`; None when neither is installed."""
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return None


def compose_config(tmp_path: Path, **secrets: str) -> subprocess.CompletedProcess[str]:
    """`config` with exactly these secrets in the environment (no .env file read)."""
    command = compose_command()
    if command is None:
        pytest.skip("neither `docker compose` nor `docker-compose` is installed")
    empty = tmp_path / "empty.env"
    empty.write_text("")
    env = {name: value for name, value in os.environ.items() if name not in SECRETS} | secrets
    return subprocess.run(
        [*command, "--env-file", str(empty), "-f", str(ROOT / "docker-compose.yml"), "config"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def test_docker_compose_accepts_the_file(tmp_path: Path) -> None:
    done = compose_config(tmp_path, MENTOR_PSEUDONYM_KEY="k" * 64, MENTOR_ANALYST_TOKEN="t" * 64)
    assert done.returncode == 0, done.stderr
    # A lone `$` would be read as a variable to substitute (with a warning); the probe's shell variable is `$$`.
    assert "variable is not set" not in done.stderr, done.stderr
    resolved = yaml.safe_load(done.stdout)["services"]
    api = resolved["api"]
    assert [api["environment"][name] for name in SECRETS] == ["k" * 64, "t" * 64]
    assert api["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert "ports" not in api
    (volume,) = resolved["proxy"]["volumes"]
    source = volume["source"] if isinstance(volume, dict) else volume.split(":")[0]
    assert Path(source) == NGINX_CONF and NGINX_CONF.is_file()


@pytest.mark.parametrize("missing", SECRETS)
def test_the_stack_refuses_to_start_without_a_shared_secret(tmp_path: Path, missing: str) -> None:
    done = compose_config(tmp_path, **{name: "s" * 64 for name in SECRETS if name != missing})
    assert done.returncode != 0
    assert f"set {missing}," in done.stderr and "openssl rand -hex 32" in done.stderr, done.stderr


# --- the image ---------------------------------------------------------------------------------------------------


def test_image_installs_cpu_torch_and_the_dependencies_before_the_code(tmp_path: Path) -> None:
    instructions = dockerfile_instructions()
    numbered = list(enumerate(instructions))
    copies = [(i, arguments.split()[:-1]) for i, (name, arguments) in numbered if name == "COPY"]
    install = next(i for i, (name, arguments) in numbered if name == "RUN" and "pip install -r" in arguments)
    # Only pyproject.toml is copied before the dependencies are installed; the code comes after.
    assert [sources for i, sources in copies if i < install] == [["pyproject.toml"]]
    assert {"mentor", "corpus", "prompts"} <= {source for i, sources in copies if i > install for source in sources}
    args = dict(arguments.split("=", 1) for name, arguments in instructions if name == "ARG")
    index = args["TORCH_INDEX_URL"]
    assert index == "https://download.pytorch.org/whl/cpu"
    assert "torch==" not in (ROOT / "Dockerfile").read_text()  # the version is pyproject.toml's pin, in one place

    # Run the step as `docker build` would (the ARG in the environment, /bin/sh), with a pip that only records.
    bin_dir, log = tmp_path / "bin", tmp_path / "pip.log"
    bin_dir.mkdir()
    (bin_dir / "pip").write_text(
        '#!/bin/sh\necho "pip $*" >> "$PIP_LOG"\n'
        'while [ $# -gt 0 ]; do [ "$1" = -r ] && sed "s/^/  /" "$2" >> "$PIP_LOG"; shift; done\n'
    )
    (bin_dir / "pip").chmod(0o755)
    (bin_dir / "python").symlink_to(sys.executable)
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    step = instructions[install][1].replace("/tmp/", f"{tmp_path}/")
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "PIP_LOG": str(log), "TORCH_INDEX_URL": index}
    done = subprocess.run(["/bin/sh", "-c", step], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (torch,) = [requirement for requirement in project["project"]["dependencies"] if requirement.startswith("torch")]
    assert re.fullmatch(r"torch==[\d.]+", torch)  # pinned: nothing later may pick another (CUDA) build
    calls = log.read_text().split("pip ")[1:]
    assert [call.split("\n")[0] for call in calls] == [
        f"install --index-url {index} -r {tmp_path}/torch.txt",
        f"install -r {tmp_path}/requirements.txt",
    ]
    assert calls[0].split("\n")[1:-1] == [f"  {torch}"]
    everything = [*project["build-system"]["requires"], *project["project"]["dependencies"]]
    assert calls[1].split("\n")[1:-1] == [f"  {requirement}" for requirement in everything]
    # The package itself needs nothing more: no dependency, and the build backend installed above.
    (final,) = [arguments for name, arguments in instructions if name == "RUN" and "--no-deps" in arguments]
    assert "--no-build-isolation" in final


def test_image_preloads_jemalloc_and_runs_as_a_user() -> None:
    instructions = dockerfile_instructions()
    env = " ".join(arguments for name, arguments in instructions if name == "ENV")
    runs = " ".join(arguments for name, arguments in instructions if name == "RUN")
    preload = re.search(r"LD_PRELOAD=(\S+)", env)[1]
    assert "libjemalloc2" in runs and re.search(rf'ln -s "[^"]+/libjemalloc\.so\.2" {preload}', runs)
    assert "HF_HUB_OFFLINE=1" in env.split()
    users = [arguments for name, arguments in instructions if name == "USER"]
    assert users and users[-1] != "root"
    assert instructions[-1] == ("CMD", '["mentor", "serve"]')


def dockerignored(path: str, patterns: list[str]) -> bool:
    """Docker's rule for a path: the last pattern matching it or a directory above it decides (`!` lets it in)."""
    parts = path.split("/")
    ignored = False
    for pattern in patterns:
        negated, pattern = pattern.startswith("!"), pattern.lstrip("!").strip("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        if pattern.startswith("**/"):
            matched = any(fnmatch(part, pattern[3:]) for part in parts)
        else:
            matched = any(fnmatch(prefix, pattern) and prefix.count("/") == pattern.count("/") for prefix in prefixes)
        if matched:
            ignored = not negated
    return ignored


def test_build_context_holds_what_the_image_copies_and_nothing_private() -> None:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    patterns = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    copies = [arguments.split()[:-1] for name, arguments in dockerfile_instructions() if name == "COPY"]
    copied = [source for sources in copies for source in sources]
    for source in copied:
        assert not dockerignored(source, patterns), source
        assert (ROOT / source).exists(), source
    assert not dockerignored("mentor/signals/migrations/versions/0001_initial_signals_schema.py", patterns)
    private = [".git", ".venv", ".mentor", ".env", "tests", "eval", "mentor.egg-info", "mentor/__pycache__/cli.pyc"]
    assert [path for path in private if not dockerignored(path, patterns)] == []


# --- deploy/nginx.conf: what it says -----------------------------------------------------------------------------


def test_proxy_balances_over_the_api_replicas_found_by_dockers_dns() -> None:
    services = compose()["services"]
    proxy, conf = services["proxy"], NGINX_CONF.read_text()
    assert proxy["volumes"] == ["./deploy/nginx.conf:/etc/nginx/conf.d/default.conf:ro"]
    assert re.search(r"^\s*listen 80;", conf, re.M) and proxy["ports"] == ["8000:80"]
    # Every replica's address, re-read while running: the service name on the port the replicas expose, resolved
    # by Docker's DNS, which nginx can re-ask only from 1.27.3 on (`resolve` in an upstream).
    assert re.search(r"^\s*server api:8000 resolve\b", conf, re.M) and services["api"]["expose"] == ["8000"]
    assert re.search(r"^resolver 127\.0\.0\.11 valid=\d+s", conf, re.M)
    version = re.fullmatch(r"nginx:(\d+)\.(\d+)(?:\.(\d+))?-alpine", proxy["image"])
    assert version and tuple(int(part or 0) for part in version.groups()) >= (1, 27, 3), proxy["image"]


def test_proxy_carries_the_apps_limits_and_waits_for_slow_answers() -> None:
    conf = NGINX_CONF.read_text()
    size = re.search(r"client_max_body_size (\d+)k;", conf)
    assert int(size[1]) * 1024 == MAX_BODY_BYTES
    message = re.search(r"return 413 '(.*)';", conf)[1]
    assert json.loads(message) == json.loads(error_response(413, f"request body: at most {MAX_BODY_BYTES} bytes").body)
    # An answer may take the LLM's timeout for each tool round before its first byte (or between two events).
    fields = Settings.model_fields
    slowest_s = fields["llm_timeout_s"].default * fields["llm_max_tool_rounds"].default
    timeouts = [int(seconds) for seconds in re.findall(r"proxy_read_timeout (\d+)s;", conf)]
    assert len(timeouts) == 2 and min(timeouts) > slowest_s
    stream = re.search(r"location = /v1/chat/stream \{(.*?)\}", conf, re.S)[1]
    assert "proxy_buffering off;" in stream


# --- deploy/nginx.conf: run by a native nginx ----------------------------------------------------------------------


class Replica(ThreadingHTTPServer):
    """A stand-in for one API replica on a free localhost port: says who it is and what reached it."""

    daemon_threads = True

    def __init__(self, name: str, release: threading.Event) -> None:
        super().__init__(("127.0.0.1", 0), ReplicaHandler)
        self.name, self.release = name, release
        threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    @property
    def port(self) -> int:
        return self.server_address[1]


class ReplicaHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Replica

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass

    def do_GET(self) -> None:
        self.reply({})

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path == "/v1/chat/stream":
            self.stream()
        else:
            self.reply({"body_bytes": len(body)})

    def reply(self, extra: dict) -> None:
        data = json.dumps(
            {
                "replica": self.server.name,
                "x_forwarded_for": self.headers.get("X-Forwarded-For"),
                "x_request_id": self.headers.get("X-Request-ID"),
                **extra,
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def stream(self) -> None:
        """One event, then wait until the client says it has it: a proxy holding the first back never gets the go."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")  # and no X-Accel-Buffering: the config must do it
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        self.wfile.write(b'event: meta\ndata: {"replica": "%s"}\n\n' % self.server.name.encode())
        released = self.server.release.wait(timeout=3)
        self.wfile.write(b'event: done\ndata: {"released": %s}\n\n' % json.dumps(released).encode())


def native_config(listen_port: int, replica_ports: list[int]) -> str:
    """deploy/nginx.conf for a native nginx: listen on a loopback port, and one `server` line per local replica.

    `resolve` is dropped with the name: it needs Docker's DNS, and nginx >= 1.27.3 (Debian's is 1.22).
    """

    def servers(found: re.Match[str]) -> str:
        indent, parameters = found[1], found[2].replace(" resolve", "")
        return "\n".join(f"{indent}server 127.0.0.1:{port}{parameters};" for port in replica_ports)

    text = NGINX_CONF.read_text()
    text, listens = re.subn(r"^(\s*)listen 80;", rf"\1listen 127.0.0.1:{listen_port};", text, flags=re.M)
    text, upstreams = re.subn(r"^(\s*)server api:8000((?: [^;]*)?);", servers, text, flags=re.M)
    assert (listens, upstreams) == (1, 1)
    return text


def nginx_files(directory: Path, listen_port: int, replica_ports: list[int]) -> list[str]:
    """Write a minimal main configuration that includes ours, as the image's http {} block does; return nginx's argv."""
    (directory / "mentor.conf").write_text(native_config(listen_port, replica_ports))
    # Temporary files where this user may write (the compiled-in paths are under /var/lib/nginx).
    temp_paths = "".join(f"    {kind}_temp_path {directory}/{kind};\n" for kind in ("client_body", "proxy", "fastcgi"))
    temp_paths += "".join(f"    {kind}_temp_path {directory}/{kind};\n" for kind in ("uwsgi", "scgi"))
    (directory / "nginx.conf").write_text(
        f"daemon off;\nworker_processes 1;\npid {directory}/nginx.pid;\nerror_log {directory}/error.log;\n"
        f"events {{ worker_connections 64; }}\nhttp {{\n{temp_paths}    include {directory}/mentor.conf;\n}}\n"
    )
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    return [nginx, "-p", str(directory), "-e", str(directory / "error.log"), "-c", str(directory / "nginx.conf")]


def require_nginx() -> None:
    if not (shutil.which("nginx") or Path("/usr/sbin/nginx").exists()):
        pytest.skip("nginx is not installed (Debian: apt-get install nginx-light); deploy/nginx.conf is not run")


def test_nginx_accepts_the_configuration(tmp_path: Path) -> None:
    require_nginx()
    done = subprocess.run([*nginx_files(tmp_path, free_port(), [free_port()]), "-t"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "test is successful" in done.stderr


@dataclass
class Proxy:
    url: str
    replicas: list[Replica]
    release: threading.Event


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxy]:
    """nginx with deploy/nginx.conf in front of replicas a and b, and of a third that is gone (its port is closed)."""
    require_nginx()
    release = threading.Event()
    replicas = [Replica("a", release), Replica("b", release)]
    port, gone = free_port(), free_port()
    directory = tmp_path_factory.mktemp("nginx")
    argv = nginx_files(directory, port, [replicas[0].port, gone, replicas[1].port])
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            assert process.poll() is None, (directory / "error.log").read_text()
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "nginx did not listen within 10 s"
                time.sleep(0.02)
        yield Proxy(f"http://127.0.0.1:{port}", replicas, release)
    finally:
        process.terminate()
        process.wait(timeout=10)
        for replica in replicas:
            replica.shutdown()
            replica.server_close()


def test_proxy_spreads_requests_over_the_replicas_and_passes_over_a_dead_one(proxy: Proxy) -> None:
    with httpx.Client(base_url=proxy.url, timeout=10) as client:
        answers = [client.get("/v1/modules") for _ in range(8)]
        posts = [client.post("/v1/chat", json={"message": "hello"}) for _ in range(4)]
    assert [answer.status_code for answer in answers + posts] == [200] * 12  # the gone one costs no failed request
    assert {answer.json()["replica"] for answer in answers} == {"a", "b"}
    assert {answer.json()["replica"] for answer in posts} == {"a", "b"}


def test_proxy_passes_each_event_on_as_the_replica_writes_it(proxy: Proxy) -> None:
    proxy.release.clear()
    with (
        httpx.Client(base_url=proxy.url, timeout=10) as client,
        client.stream("POST", "/v1/chat/stream", json={"message": "hello"}) as response,
    ):
        assert response.headers["content-type"] == "text/event-stream"
        chunks, received = response.iter_raw(), b""
        while b"\n\n" not in received:
            received += next(chunks)
        proxy.release.set()  # the replica writes its second event only now
        received += b"".join(chunks)
    events = [event.split("\n") for event in received.decode().strip().split("\n\n")]
    assert [event[0] for event in events] == ["event: meta", "event: done"]
    assert json.loads(events[1][1].removeprefix("data: ")) == {"released": True}


def test_proxy_refuses_a_body_over_the_apps_limit_with_the_apps_error(proxy: Proxy) -> None:
    with httpx.Client(base_url=proxy.url, timeout=10, headers={"Content-Type": "application/json"}) as client:
        fits = client.post("/v1/chat", content=b"x" * MAX_BODY_BYTES)
        over = client.post("/v1/chat", content=b"x" * (MAX_BODY_BYTES + 1))
    assert fits.status_code == 200 and fits.json()["body_bytes"] == MAX_BODY_BYTES
    assert over.status_code == 413 and over.headers["content-type"] == "application/json"
    assert over.json() == json.loads(error_response(413, f"request body: at most {MAX_BODY_BYTES} bytes").body)


def test_proxy_sets_the_callers_address_and_a_request_id(proxy: Proxy) -> None:
    # From 127.0.0.2, so the address the replica is told is visibly the connection's, not a default.
    transport = httpx.HTTPTransport(local_address="127.0.0.2")
    with httpx.Client(base_url=proxy.url, timeout=10, transport=transport) as client:
        forged = client.get("/v1/modules", headers={"X-Forwarded-For": "203.0.113.9", "X-Request-ID": "host-app:42"})
        odd = client.get("/v1/modules", headers={"X-Request-ID": "two words\\r\\nforged: line"})
        none = client.get("/v1/modules")
    assert forged.json()["x_forwarded_for"] == "127.0.0.2"  # a caller's own header is not passed on
    assert forged.json()["x_request_id"] == "host-app:42"
    assert re.fullmatch(r"[0-9a-f]{32}", odd.json()["x_request_id"])
    assert re.fullmatch(r"[0-9a-f]{32}", none.json()["x_request_id"])
    assert none.json()["x_request_id"] != odd.json()["x_request_id"]


def test_proxy_keeps_the_replicas_metrics_off_the_public_port(proxy: Proxy) -> None:
    assert httpx.get(proxy.url + "/metrics", timeout=10).status_code == 404
    assert httpx.get(proxy.url + "/v1/modules", timeout=10).status_code == 200  # the replicas themselves answer


def test_proxy_health_check_answers_on_loopback_only(proxy: Proxy) -> None:
    probe = compose()["services"]["proxy"]["healthcheck"]["test"]
    path = urlsplit(probe[-1]).path
    assert probe[1] == "wget" and urlsplit(probe[-1]).netloc == "127.0.0.1"  # port 80, inside the container
    assert httpx.get(proxy.url + path, timeout=10).status_code == 200
    outside = httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2"), timeout=10)
    with outside:
        assert outside.get(proxy.url + path).status_code == 403


# --- the health checks, run here ---------------------------------------------------------------------------------


def test_health_checks_pass_on_a_working_service_and_fail_on_a_dead_one(runtime, chroma_server: str) -> None:
    import copy
    from dataclasses import replace

    from mentor.api import create_app
    from mentor.catalog import make_catalog

    from .chat_helpers import serve

    def probe(command: list[str], port: int) -> int:
        # The container's probe, run here: the host's python, and the port of a live server instead of 8000.
        program = {"python": sys.executable}.get(command[1], command[1])
        script = command[-1].replace("/8000", f"/{port}").replace("$$", "$")
        env = {"PATH": os.environ["PATH"], "MENTOR_PORT": str(port)}
        return subprocess.run([program, *command[2:-1], script], env=env, timeout=30).returncode

    services = compose()["services"]
    api, chroma = services["api"]["healthcheck"]["test"], services["chroma"]["healthcheck"]["test"]
    with serve(create_app(runtime.settings, runtime=runtime)) as url:
        assert probe(api, int(url.rsplit(":", 1)[1])) == 0
    empty = replace(runtime, chat=copy.copy(runtime.chat))  # the same runtime serving no module
    empty.chat.use(make_catalog(runtime.settings, runtime.embedder, {}, {}, {}))
    with serve(create_app(runtime.settings, runtime=empty)) as url:
        assert probe(api, int(url.rsplit(":", 1)[1])) != 0  # 503: no question can be answered
    assert probe(chroma, int(chroma_server.rsplit(":", 1)[1])) == 0
    assert probe(chroma, free_port()) != 0
    assert probe(api, free_port()) != 0


def test_redis_health_check_passes_on_a_live_redis_and_fails_on_a_dead_one() -> None:
    if not shutil.which("redis-cli"):
        pytest.skip("redis-cli is not installed")
    (kind, script) = compose()["services"]["redis"]["healthcheck"]["test"]
    assert kind == "CMD-SHELL"

    def probe(port: int) -> int:
        command = script.replace("redis-cli", f"redis-cli -h 127.0.0.1 -p {port}")
        return subprocess.run(["/bin/sh", "-c", command], timeout=30).returncode

    assert shlex.split(script)[:2] == ["redis-cli", "ping"]
    assert probe(6379) == 0  # the machine's Redis (.ci/run starts it)
    assert probe(free_port()) != 0


def test_the_wheel_the_image_installs_carries_the_migrations_and_the_web_assets(tmp_path) -> None:
    """The image runs `pip install .`: data directories that are not packages must be declared, or `mentor db
    upgrade` finds no migrations and `/widget.js` is missing in the container while every local test passes."""
    import subprocess
    import sys
    import zipfile

    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    names = zipfile.ZipFile(next(tmp_path.glob("mentor-*.whl"))).namelist()
    assert "mentor/signals/migrations/env.py" in names
    assert any(n.startswith("mentor/signals/migrations/versions/0001") for n in names)
    web = ROOT / "mentor" / "web"
    expected = {f"mentor/web/{p.relative_to(web).as_posix()}" for p in web.rglob("*") if p.is_file()}
    assert expected <= set(names), sorted(expected - set(names))[:5]
