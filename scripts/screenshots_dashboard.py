"""Regenerate docs/dashboard.png: the analyst dashboard over `mentor demo-data`, as a newcomer first sees it.

    .venv/bin/python scripts/screenshots_dashboard.py [--out docs/dashboard.png] [--width 1366] [--height 900]

A scratch data directory gets the demo learners (`mentor demo-data`), a `mentor serve` on a free local port serves
it, and Debian's chromium (Playwright) signs in with the analyst token and takes a full-page shot. Nothing reaches the
network but 127.0.0.1. `shoot_dashboard` is importable, so a script taking every screenshot can call it.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a file: mentor and the browser tests' launcher from this checkout

from mentor.bench.cluster import MENTOR  # noqa: E402
from mentor.bench.procs import clean_env, free_port, spawn, stop, wait_ready  # noqa: E402
from tests.browser import LocalOnly, launch_chromium  # noqa: E402

TOKEN = "screenshot-analyst-token-of-at-least-32-bytes"


def shoot_dashboard(out: Path, *, width: int = 1366, height: int = 900) -> Path:
    """Fill a scratch database with demo learners, serve it, and save a full-page screenshot of /dashboard."""
    from playwright.sync_api import expect, sync_playwright

    with tempfile.TemporaryDirectory(prefix="mentor-shots-") as scratch:
        work = Path(scratch)
        port = free_port()
        env = clean_env(
            MENTOR_DATA_DIR=str(work / "data"),
            MENTOR_CORPUS_DIR=str(ROOT / "corpus"),
            MENTOR_HOST="127.0.0.1",
            MENTOR_PORT=str(port),
            MENTOR_ANALYST_TOKEN=TOKEN,
        )
        subprocess.run(
            [MENTOR, "demo-data", "--golden", str(ROOT / "eval" / "golden.jsonl")], env=env, check=True, cwd=ROOT
        )
        log = work / "serve.log"
        server = spawn([MENTOR, "serve"], env=env, log_path=log)
        try:
            wait_ready(f"http://127.0.0.1:{port}/readyz", server, log)
            with sync_playwright() as playwright:
                browser = launch_chromium(playwright)
                context = browser.new_context(viewport={"width": width, "height": height})
                context.route("**/*", LocalOnly())
                page = context.new_page()
                page.goto(f"http://127.0.0.1:{port}/dashboard")
                page.locator("#token").fill(TOKEN)
                page.locator("#token").press("Enter")
                expect(page.locator("#browser details.question")).to_have_count(20)
                expect(page.locator("#gaps li").first).to_be_visible()
                out.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(out), full_page=True)
                browser.close()
        finally:
            stop(server)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "dashboard.png")
    parser.add_argument("--width", type=int, default=1366)
    parser.add_argument("--height", type=int, default=900)
    args = parser.parse_args()
    print(shoot_dashboard(args.out, width=args.width, height=args.height))


if __name__ == "__main__":
    main()
