"""Find, or build once, the isolated tools of the interop checks and print the path asked for.

    python eval/interop/env.py python      # a venv with DeepEval and RAGAS (eval/interop/requirements.txt)
    python eval/interop/env.py promptfoo   # promptfoo from npm (eval/promptfoo/package-lock.json)
    python eval/interop/env.py llm         # simonw's llm, a client of the OpenAI facade (llm-requirements.txt)
    python eval/interop/env.py all         # all three: what .ci/run does before the tests

Each is built under ~/.cache/mentor-interop (or --cache DIR) in a directory named by a hash of what it pins, so
an unchanged pin is reused and a changed one builds afresh. Measured on a 2-core machine with empty download
caches: the venv takes about 3 min and 0.9 GB, promptfoo about 2.5 min and 1.4 GB, llm's venv about 20 s and
60 MB; none belongs in mentor's own venv (ragas wants openai < 3, mentor has 3.x; llm is a client, installed as
its users install it) nor in the pytest time budget, so CI builds them first.
A build holds a lock, writes into its directory and marks it complete last: a concurrent run waits, and an
interrupted build is thrown away and redone. Standard library only: it runs before any venv exists.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
REQUIREMENTS = HERE / "requirements.txt"
LLM_REQUIREMENTS = HERE / "llm-requirements.txt"
PROMPTFOO_DIR = HERE.parent / "promptfoo"
PROMPTFOO_PINS = ("package.json", "package-lock.json")
DEFAULT_CACHE = Path.home() / ".cache" / "mentor-interop"
COMPLETE = ".complete"


def _key(*parts: bytes) -> str:
    return hashlib.sha256(b"\0".join(parts)).hexdigest()[:12]


def python_env(cache: Path) -> Path:
    """The interpreter of the DeepEval + RAGAS venv, built if missing."""
    return _venv(cache, "python", REQUIREMENTS) / "bin" / "python"


def llm_env(cache: Path) -> Path:
    """The `llm` command of simonw's llm, in a venv of its own, built if missing."""
    return _venv(cache, "llm", LLM_REQUIREMENTS) / "bin" / "llm"


def _venv(cache: Path, name: str, requirements: Path) -> Path:
    """A venv with `requirements` installed, under `cache`, keyed by them and by this Python; built if missing."""
    runtime = f"{platform.python_implementation()}-{platform.python_version()}".encode()
    target = cache / f"{name}-{_key(requirements.read_bytes(), runtime)}"

    def build(directory: Path, log: Path) -> None:
        # Built from the interpreter running this script (venv uses its base Python even from inside a venv).
        _run([sys.executable, "-m", "venv", str(directory)], log=log)
        pip = [str(directory / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check"]
        _run([*pip, "--requirement", str(requirements)], log=log)

    _ensure(target, build)
    return target


def promptfoo_env(cache: Path) -> Path:
    """The promptfoo executable, installed from the lock file if missing."""
    node = subprocess.run(["node", "--version"], capture_output=True, text=True, check=True).stdout.strip()
    pins = [PROMPTFOO_DIR.joinpath(name).read_bytes() for name in PROMPTFOO_PINS]
    target = cache / f"promptfoo-{_key(*pins, node.encode())}"

    def build(directory: Path, log: Path) -> None:
        directory.mkdir(parents=True)
        for name in PROMPTFOO_PINS:
            shutil.copy2(PROMPTFOO_DIR / name, directory / name)
        _run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], log=log, cwd=directory)

    _ensure(target, build)
    return target / "node_modules" / ".bin" / "promptfoo"


def _ensure(target: Path, build: Callable[[Path, Path], None]) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f"{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second run waits for the first build instead of racing it
        if (target / COMPLETE).exists():
            return
        if target.exists():
            shutil.rmtree(target)  # an interrupted build
        log = target.parent / f"{target.name}.log"
        started = time.monotonic()
        print(f"building {target} (log: {log})", file=sys.stderr)
        try:
            build(target, log)
        except subprocess.CalledProcessError as exc:
            shutil.rmtree(target, ignore_errors=True)
            tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-20:])
            raise SystemExit(f"building {target.name} failed ({exc.cmd[0]} exited {exc.returncode}):\n{tail}") from None
        seconds = time.monotonic() - started
        (target / COMPLETE).write_text(f"built in {seconds:.0f} s\n")
        print(f"built {target.name} in {seconds:.0f} s", file=sys.stderr)


def _run(command: list[str], *, log: Path, cwd: Path | None = None) -> None:
    with open(log, "a") as out:
        out.write(f"$ {' '.join(command)}\n")
        out.flush()
        subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, cwd=cwd, check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tool", choices=("python", "promptfoo", "llm", "all"))
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="where the environments live")
    args = parser.parse_args()
    if args.tool in ("python", "all"):
        print(python_env(args.cache))
    if args.tool in ("promptfoo", "all"):
        print(promptfoo_env(args.cache))
    if args.tool in ("llm", "all"):
        print(llm_env(args.cache))


if __name__ == "__main__":
    main()
