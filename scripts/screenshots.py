"""Regenerate the docs' screenshots of the "Ask the mentor" box: docs/box-phone.png and docs/box-desktop.png.

    .venv/bin/python scripts/screenshots.py [--out docs]

Starts `mentor serve` on the repository's corpus with a scratch data directory, opens the demo page in Debian's
chromium (the browser tests' launcher: headless, every request outside 127.0.0.1 refused) and saves:

- box-phone.png: 390 x 844, the launcher opened, a starter question asked and answered;
- box-desktop.png: 1366 x 768, the box beside the module with a calculation (its card and one line of prose).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from playwright.sync_api import expect, sync_playwright  # noqa: E402 - after the path is set

from mentor.bench.cluster import MENTOR  # noqa: E402
from mentor.bench.procs import clean_env, free_port, spawn, stop, wait_ready  # noqa: E402
from tests.browser import LocalOnly, launch_chromium  # noqa: E402

CALCULATION = "how much memory does Adam need for a 7B model?"
ANSWER_TIMEOUT_MS = 30_000


def shoot(url: str, out: Path) -> list[Path]:
    """Take both screenshots of the demo page at `url`; return their paths."""
    saved = []
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            for name, viewport in (("box-phone.png", (390, 844)), ("box-desktop.png", (1366, 768))):
                context = browser.new_context(viewport={"width": viewport[0], "height": viewport[1]})
                local_only = LocalOnly()
                context.route("**/*", local_only)
                page = context.new_page()
                page.goto(f"{url}/")
                box = page.locator("mentor-chat")
                expect(box.locator(".shell")).to_be_visible()
                if name == "box-phone.png":
                    box.locator("button.launcher").click()
                    starters = box.locator("button.starter")
                    expect(starters).to_have_count(3)
                    starters.last.click()
                else:
                    field = box.locator("form.ask textarea")
                    field.fill(CALCULATION)
                    field.press("Enter")
                expect(box.locator(".turn .feedback")).to_have_count(1, timeout=ANSWER_TIMEOUT_MS)
                box.locator(".log").evaluate("(log) => { log.scrollTop = 0; }")
                target = out / name
                page.screenshot(path=str(target))
                saved.append(target)
                context.close()
                if local_only.leaked:
                    raise RuntimeError(f"requests outside 127.0.0.1: {local_only.leaked}")
        finally:
            browser.close()
    return saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs", help="where to write the PNGs (default: docs/)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mentor-shots-") as scratch:
        work = Path(scratch)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        env = clean_env(
            MENTOR_DATA_DIR=str(work / "data"),
            MENTOR_CORPUS_DIR=str(ROOT / "corpus"),
            MENTOR_HOST="127.0.0.1",
            MENTOR_PORT=str(port),
        )
        log = work / "serve.log"
        process = spawn([MENTOR, "serve"], env=env, log_path=log)
        try:
            wait_ready(f"{url}/readyz", process, log)
            for path in shoot(url, args.out):
                print(path)
        finally:
            stop(process)


if __name__ == "__main__":
    main()
