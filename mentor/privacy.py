"""Privacy: learner pseudonyms (a keyed HMAC of the host app's id) and removal of personal details.

Personal details are removed before anything is written: e-mail addresses, phone numbers, card-like digit
runs, IP addresses, URLs with credentials, and names given as "my name is ...". The answer itself is computed
from the original text in memory. Numbers learners use about the module ("7B", "stage 3", "65504",
"5.88e23", "7,000,000,000", "2^16") are left alone.
"""

from __future__ import annotations

import hashlib
import hmac
import re
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


PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    # scheme://user:password@host — before e-mail, which would otherwise eat "password@host"
    ("url_credentials", re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s/:@]+:[^\s/@]*@[^\s/]+\S*", re.I)),
    # RFC 5322 local parts may hold any of !#$%&'*+/=?^_`{|}~- as well as letters, digits and dots
    ("email", re.compile(r"[\w.!#$%&'*+/=?^`{|}~-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z][A-Za-z0-9-]+\b")),
    ("ip", re.compile(r"\b(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)\b")),
    ("ipv6", re.compile(r"(?<![\w:])(?:[0-9a-f]{0,4}:){2,7}[0-9a-f]{0,4}(?![\w:])", re.I)),
    # 13-19 digits in groups separated by spaces or dashes (card numbers), never commas (big counts)
    ("card", re.compile(r"(?<![\d,.])(?:\d[ -]?){12,18}\d(?![\d,.])")),
    # +country or (area) forms, or 3-3-4 groups; at least 9 digits in all
    (
        "phone",
        re.compile(r"(?<![\w.(])(?:\+\d{1,3}[\s.-]?)?(?:\(\d{2,4}\)[\s.-]?)?\d{2,6}(?:[\s.-]\d{2,6}){1,4}(?![\w.])"),
    ),
    ("phone", re.compile(r"(?<![\w.])\+\d{9,15}\b")),
]
# The phrase in any case; the first word after it whatever its case ("my name is bob"), further words only
# when capitalised ("my name is Jane Doe and ..." keeps "and").
NAME = re.compile(
    r"\b(?i:my name is|my name's|i am called|i'm called|call me)\s+"
    r"((?!(?i:and|but|so|i|im|the|a)\b)[A-Za-z][\w'-]*(?:\s+[A-Z][\w'-]+){0,3})"
)


PLACEHOLDER = re.compile(r"\[(?:EMAIL|PHONE|CARD|IP|URL_CREDENTIALS|NAME)\]")


def without_personal_details(text: str) -> str:
    """The text with personal details dropped, for deciding what a question is about."""
    return " ".join(PLACEHOLDER.sub(" ", redact(text)[0]).split())


def redact(text: str) -> tuple[str, list[str]]:
    """Return `text` with personal details replaced by [EMAIL], [PHONE], ... and the kinds that were removed."""
    kinds: list[str] = []
    for kind, pattern in PATTERNS:
        if kind == "phone":
            replaced = pattern.sub(lambda m: _phone(m, kinds), text)
        elif kind == "ipv6":
            replaced = pattern.sub(lambda m: _ipv6(m, kinds), text)
        else:
            replaced, count = pattern.subn(f"[{kind.upper()}]", text)
            if count and kind not in kinds:
                kinds.append(kind)
        text = replaced
    text, count = NAME.subn(lambda m: m.group(0)[: m.start(1) - m.start(0)] + "[NAME]", text)
    if count:
        kinds.append("name")
    return text, kinds


def _ipv6(match: re.Match[str], kinds: list[str]) -> str:
    text = match.group(0)
    if "::" not in text and text.count(":") < 5:
        return text  # "10:30:00" or a ratio "1:2:4", not an address
    if "ip" not in kinds:
        kinds.append("ip")
    return "[IP]"


def _phone(match: re.Match[str], kinds: list[str]) -> str:
    digits = sum(ch.isdigit() for ch in match.group(0))
    if digits < 9:
        return match.group(0)  # "4 8 16" or "2 4 8" are not phone numbers
    if "phone" not in kinds:
        kinds.append("phone")
    return "[PHONE]"
