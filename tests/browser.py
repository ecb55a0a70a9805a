"""What every browser test shares: Debian's chromium launched with the flags this machine needs, a route handler
that lets requests reach 127.0.0.1 only (and remembers the rest), and where screenshots go."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
# Without the background-networking flags chromium keeps calling Google's hosts, which this machine refuses.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# The docs' screenshots (docs/*.png) are refreshed with UPDATE_SCREENSHOTS=1; otherwise they go to a scratch
# directory, so a test run leaves the work tree as it found it (the dashboard's shows the time it was drawn).
SCREENSHOTS = (
    ROOT / "docs" if os.environ.get("UPDATE_SCREENSHOTS") == "1" else Path(tempfile.mkdtemp(prefix="mentor-shots-"))
)


def launch_chromium(playwright):  # noqa: ANN001, ANN201 - playwright's own types
    """Debian's chromium (Playwright's browser download cannot work here)."""
    return playwright.chromium.launch(executable_path=shutil.which("chromium"), args=CHROMIUM_ARGS)


@dataclass
class LocalOnly:
    """A route handler: requests to 127.0.0.1 go through, any other is aborted and kept in `leaked`."""

    requests: list[str] = field(default_factory=list)
    leaked: list[str] = field(default_factory=list)

    def __call__(self, route) -> None:  # noqa: ANN001
        self.requests.append(route.request.url)
        if urlsplit(route.request.url).hostname == "127.0.0.1":
            route.continue_()
        else:
            self.leaked.append(route.request.url)
            route.abort()
