"""Learner pseudonyms: a keyed HMAC of the host app's learner id, so the raw id is never stored."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from pathlib import Path

ANONYMOUS = "anonymous"


def pseudonym(learner_id: str | None, key: bytes) -> str:
    """A stable pseudonym for `learner_id`; without the key it cannot be reversed or recomputed."""
    if not learner_id:
        return ANONYMOUS
    return hmac.new(key, learner_id.encode("utf-8"), hashlib.sha256).hexdigest()[:32]


def load_or_create_secret(path: Path, *, nbytes: int = 32) -> str:
    """Read a secret kept in the data directory, creating it (mode 600) on first use."""
    if path.exists():
        return path.read_text(encoding="utf-8").strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    secret = secrets.token_urlsafe(nbytes)
    path.touch(mode=0o600)
    path.write_text(secret + "\n", encoding="utf-8")
    return secret
