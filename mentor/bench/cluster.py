"""The deployment's topology, run natively: a Chroma server, a fresh PostgreSQL database, Redis on a database
number of its own, the one-off jobs, and N `mentor serve` replicas with the same settings.

docker-compose.yml describes the same thing for a Docker engine; none runs here, so the replica test
(tests/test_replicas.py) and the replica benchmark (`python -m mentor.bench.replicas`) start these processes.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from sqlalchemy import create_engine, text

from mentor.bench.procs import ROOT, clean_env, free_port, spawn, stop, tail, wait_ready

ADMIN_DB = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
REDIS = "redis://127.0.0.1:6379"
MENTOR = str(Path(sys.executable).with_name("mentor"))
CHROMA = str(Path(sys.executable).with_name("chroma"))


@dataclass
class Replica:
    """One `mentor serve` process."""

    port: int
    log: Path
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@dataclass
class Cluster:
    """Start with `Cluster.start(root, replicas=3)`; `close()` stops everything and drops the database."""

    root: Path
    env: dict[str, str]
    database: str
    database_url: str
    chroma: subprocess.Popen
    replicas: list[Replica] = field(default_factory=list)

    @classmethod
    def start(
        cls,
        root: Path,
        *,
        replicas: int = 3,
        redis_db: int = 9,
        database_port: int | None = None,
        extra_env: dict[str, str] | None = None,
    ) -> Cluster:
        """Chroma, a fresh database, the jobs (`mentor db upgrade`, `mentor ingest`), then the replicas.

        `database_port` routes the replicas (not the jobs) through a port of the caller's, e.g. a proxy to cut.
        """
        root.mkdir(parents=True, exist_ok=True)
        corpus = root / "corpus"
        shutil.copytree(ROOT / "corpus", corpus, dirs_exist_ok=True)
        chroma_port = free_port()
        chroma = spawn(
            [CHROMA, "run", "--path", str(root / "chroma"), "--host", "127.0.0.1", "--port", str(chroma_port)],
            env=clean_env(),
            log_path=root / "chroma.log",
        )
        name = f"mentor_cluster_{uuid.uuid4().hex[:12]}"
        admin = create_engine(ADMIN_DB, isolation_level="AUTOCOMMIT")
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
        admin.dispose()
        database_url = f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
        env = clean_env(
            MENTOR_DATA_DIR=str(root / "data"),  # one directory for every replica: their spools sit side by side
            MENTOR_CORPUS_DIR=str(corpus),
            MENTOR_CHROMA_URL=f"http://127.0.0.1:{chroma_port}",
            MENTOR_DATABASE_URL=database_url,
            MENTOR_REDIS_URL=f"{REDIS}/{redis_db}",
            MENTOR_REDIS_PREFIX=name,
            MENTOR_PSEUDONYM_KEY=uuid.uuid4().hex,
            MENTOR_ANALYST_TOKEN=uuid.uuid4().hex,
            MENTOR_RELOAD_INTERVAL_S="1",
            MENTOR_LOG_LEVEL="info",
            **(extra_env or {}),
        )
        cluster = cls(root, env, name, database_url, chroma)
        try:
            wait_chroma(chroma_port, chroma, root / "chroma.log")
            cluster.job("db", "upgrade")
            cluster.job("ingest")
            if database_port is not None:
                env["MENTOR_DATABASE_URL"] = f"postgresql+psycopg://postgres@127.0.0.1:{database_port}/{name}"
            cluster.replicas = [Replica(free_port(), root / f"replica-{i}.log") for i in range(replicas)]
            for replica in cluster.replicas:
                cluster.launch(replica, wait=False)
            for replica in cluster.replicas:
                assert replica.process is not None
                wait_ready(f"{replica.url}/readyz", replica.process, replica.log)
        except BaseException:
            cluster.close()
            raise
        return cluster

    @property
    def analyst(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.env['MENTOR_ANALYST_TOKEN']}"}

    def job(self, *args: str) -> str:
        """Run a one-off `mentor` command with the cluster's settings; its output, or an error with it."""
        done = subprocess.run([MENTOR, *args], env=self.env, cwd=ROOT, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise RuntimeError(f"mentor {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
        return done.stdout

    def launch(self, replica: Replica, *, wait: bool = True) -> None:
        """Start (or restart) a replica on its port."""
        mode = "ab" if replica.log.exists() else "wb"
        with replica.log.open(mode) as log:
            argv = [MENTOR, "serve", "--port", str(replica.port)]
            replica.process = subprocess.Popen(argv, env=self.env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        if wait:
            wait_ready(f"{replica.url}/readyz", replica.process, replica.log)

    def kill(self, replica: Replica) -> None:
        """SIGKILL: no shutdown, no flush, the spool left as it was."""
        assert replica.process is not None
        replica.process.kill()
        replica.process.wait(timeout=10)

    def close(self) -> None:
        for replica in self.replicas:
            if replica.process is not None:
                stop(replica.process)
        stop(self.chroma)
        admin = create_engine(ADMIN_DB, isolation_level="AUTOCOMMIT")
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)'))
        admin.dispose()
        try:
            import redis

            client = redis.Redis.from_url(self.env["MENTOR_REDIS_URL"])
            for key in client.scan_iter(match=f"{self.env['MENTOR_REDIS_PREFIX']}*", count=1000):
                client.delete(key)
            client.close()
        except Exception:  # Redis keeps nothing on disk; a leftover prefix costs nothing
            pass


def wait_chroma(port: int, process: subprocess.Popen, log: Path, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"chroma exited with {process.returncode}:\n{tail(log)}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/v2/heartbeat", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"chroma not ready after {timeout_s:.0f} s:\n{tail(log)}")
