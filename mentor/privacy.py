"""Privacy: learner pseudonyms (a keyed HMAC of the host app's id) and removal of personal details.

Personal details are removed before anything is written, searched or sent to an LLM: e-mail addresses (any script,
and written out as "jane at example dot com", "jane [at] example [dot] com", "jane(at)example.com"), phone numbers
(national, international, or a bare run of 10-12 digits), card-like digit runs, IBANs, IP addresses, URLs with
credentials, names given as "my name is ..." (or "меня зовут", "je m'appelle", "我叫", ...), and names introduced
as "I'm Janeth Doerfler, ...". Text is matched in its NFKC form (a fullwidth "＠" is an "@"), and replaced where it
was written. Numbers learners use about the module ("7B", "stage 3", "65504", "5.88e23", "7,000,000,000",
"70000000000", "6738415616 parameters", "2^16") are left alone.

A detail found in the learner's words is also removed wherever it reappears in what was derived from them
(`Scrubber`): a card number the calculator took as a parameter count, or a name the answer echoes.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import os
import re
import secrets
import unicodedata
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS
from wordfreq import zipf_frequency

ANONYMOUS = "anonymous"


def pseudonym(learner_id: str | None, key: bytes) -> str:
    """A stable pseudonym for `learner_id`; without the key it cannot be reversed or recomputed."""
    if not learner_id:
        return ANONYMOUS
    return hmac.new(key, learner_id.encode("utf-8"), hashlib.sha256).hexdigest()[:32]


def create_private(path: Path) -> None:
    """Create `path` empty with owner-only permissions (mode 600) if it is missing; tighten it if it is not."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        os.fchmod(fd, 0o600)  # a file an earlier version created 644 is tightened too
    finally:
        os.close(fd)


def load_or_create_secret(path: Path, *, nbytes: int = 32) -> str:
    """Read a secret kept in the data directory, creating it (mode 600) on first use."""
    if path.exists():
        return path.read_text(encoding="utf-8").strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    secret = secrets.token_urlsafe(nbytes)
    create_private(path)
    path.write_text(secret + "\n", encoding="utf-8")
    return secret


# A digit run is a number learners use about the module, not a personal detail, when it is round (five or more
# trailing zeros: 7000000000, 70000000000, 1400000000000 tokens; a phone or card number ending in 00000 is rare
# enough to accept) or when a quantity word or an operator sits next to it ("6738415616 parameters",
# "2^32 = 4294967296"). A leading "+" always means a phone number.
ROUND = re.compile(r"0{5}$")
QUANTITY_AFTER = re.compile(
    r"\s*(?:[×x*/÷^=]|(?:params?|parameters?|weights?|tokens?|bytes?|bits?|flops?|FLOP|GPUs?|samples?|steps?"
    r"|sequences?|words?|chars?|characters?|examples?|rows?|[KMGTPE]i?B|[kKMBT])\b)",
    re.I,
)
QUANTITY_BEFORE = re.compile(r"(?:[×*/÷^]|[\d)]\s*=)\s*$")
# Not inside a word, a decimal ("1.4155550199") or a thousands-grouped count ("7,000,000,000").
DIGITS_START = r"(?<![\w.+])(?<!\d,)"
DIGITS_END = r"(?!\w)(?![.,]\d)(?!:\d)"

# "at" and "dot" written out: bracketed ("[at]", "(dot)"), or as words between spaces; "@" and "." themselves too.
AT = r"(?:\s*[\[({<]\s*at\s*[\])}>]\s*|\s+at\s+|\s*@\s*)"
DOT = r"(?:\s*[\[({<]\s*dot\s*[\])}>]\s*|\s+dot\s+|\.)"
TLD = r"(?:[^\W\d_]{2}|com|org|net|edu|gov|info|biz|io|ai|dev|app|me|co|mil|int)"
WRITTEN_OUT = re.compile(r"[\[({<]\s*(?:at|dot)\s*[\])}>]|\sdot\s|\s@|@\s", re.I)

PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    # scheme://user:password@host — before e-mail, which would otherwise eat "password@host". The scheme is
    # bounded (the longest in use, "postgresql+psycopg", has 18 characters): unbounded, "a.a.a.…" costs time
    # quadratic in its length (38 s for 100,000 characters).
    ("url_credentials", re.compile(r"\b[a-z][a-z0-9+.-]{0,31}://[^\s/:@]+:[^\s/@]*@[^\s/]+\S*", re.I)),
    # RFC 5322 local parts may hold any of !#$%&'*+/=?^_`{|}~- as well as letters, digits and dots; local part
    # and domain may be in any script (müller@bücher.de), the top-level domain starts with a letter. The
    # lookbehind starts a match only where a local part can start: without it a 4,000-character word costs
    # 80 ms (every position scanned to its end), with it 0.1 ms.
    (
        "email",
        re.compile(r"(?<![\w.!#$%&'*+/=?^`{|}~-])[\w.!#$%&'*+/=?^`{|}~-]+@[\w-]+(?:\.[\w-]+)*\.[^\W\d_][\w-]+\b"),
    ),
    # An address written out so a scraper misses it: "jane_x at example dot com", "jane [at] example [dot] com",
    # "jane(at)example.com", "jane@example dot com". Kept only when written out (`WRITTEN_OUT`): a plain " at "
    # needs a written-out dot too ("look at train.py" is no address), and the address must end in a top-level domain
    # (two letters, or a common generic one: "the dot product" is no address). Repetitions are bounded and words
    # never given back (possessive), so a hostile "a dot a dot ..." costs time linear in its length, and an ordinary
    # answer 0.07 ms a kilobyte (0.36 ms when words could be given back letter by letter).
    (
        "email_written_out",
        re.compile(
            rf"(?<![\w.+-])[\w+-]++(?:{DOT}[\w+-]++){{0,3}}{AT}[\w-]++(?:{DOT}[\w-]++){{0,4}}{DOT}{TLD}(?![\w-])",
            re.I,
        ),
    ),
    # country code, two check digits, 11-30 letters or digits (groups of four may be spaced); kept only if the
    # ISO 7064 mod-97 checksum holds, so "BF16 1024 2048 4096" stays. Before cards and phones, which would
    # otherwise take the digits and leave the rest.
    ("iban", re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b", re.I)),
    ("ip", re.compile(r"\b(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)\b")),
    ("ipv6", re.compile(r"(?<![\w:])(?:[0-9a-f]{0,4}:){2,7}[0-9a-f]{0,4}(?![\w:])", re.I)),
    # 13-19 digits, bare or in the groups cards are printed in (4-4-4-4, 4-6-5) with spaces or dashes; never
    # commas (big counts)
    (
        "card",
        re.compile(
            DIGITS_START
            + r"(?:\d{13,19}|\d{4}[ -]\d{4}[ -]\d{4}[ -]\d{1,4}(?:[ -]\d{1,3})?|\d{4}[ -]\d{6}[ -]\d{4,5})"
            + DIGITS_END
        ),
    ),
    # international: +country code, then digits in any grouping, "(0)" trunk prefix included: +33 1 23 45 67 89,
    # +49 (0)30 123456, +81-3-1234-5678, +447700900123
    ("phone", re.compile(r"(?<![\w+])\+\d{1,3}(?:[\s.-]?(?:\(\d{1,4}\)|\d{1,8})){1,7}" + DIGITS_END)),
    # national: an optional (area) code, then 2-5 groups of 2-8 digits: (415) 555-0132, 0049 30 1234567
    (
        "phone",
        re.compile(DIGITS_START + r"(?:\(\d{1,4}\)[\s.-]?)?\d{2,8}(?:[\s.-]\d{2,8}){1,4}" + DIGITS_END),
    ),
    # bare: 10-12 digits without separators (4155550199); 13 and more are taken as cards above
    ("phone", re.compile(DIGITS_START + r"\d{10,12}" + DIGITS_END)),
]
# Words that follow the phrases without being a name ("call me at ...", "call me back", "I'm called in ...").
STOP_WORDS = frozenset(
    {"and", "but", "so", "i", "im", "the", "a", "at", "on", "in", "by", "via", "back", "if", "when", "later", "please"}
)
# The phrase in any case; the first word after it whatever its case ("my name is bob"), further words only
# when capitalised ("my name is Jane Doe and ..." keeps "and"). Letters of any cased script: José Álvarez,
# Иван Петров, Γιώργος.
NAME = re.compile(
    r"(?<!\w)(?i:my name is|my name's|i am called|i'm called|call me|je m'appelle|je m’appelle|me llamo"
    r"|mi nombre es|ich heiße|ich heisse|mein name ist|меня зовут|моё имя|мое имя|με λένε|το όνομά μου είναι)"
    r"\s+([^\W\d_][\w'’-]*(?:[ \t]+[^\W\d_][\w'’-]*){0,3})"
)
# Scripts written without spaces: the name is the run of Han, katakana or Hangul after the phrase.
NAME_UNSPACED = re.compile(
    r"(?:我叫|我的名字是|我的名字叫|私の名前は|僕の名前は|わたしの名前は|제 이름은)\s*"
    r"([\u3400-\u4dbf\u4e00-\u9fff\u30a0-\u30ff\uac00-\ud7af]{1,6})"
)

# A name introduced without "my name is": "I'm Janeth Doerfler, and I wonder ...", "Hi, this is Janeth." Whether the
# words after "I'm" are a name is a decision about meaning, and a regex cannot make it ("I'm Confused", "I am Adam
# optimizer user", "I'm ZeRO-curious", "this is Chinchilla scaling" are no names). So this pattern only finds the
# formal shape, the cue and one to three capitalised words, and `_introduced` keeps it when the words look like a
# name by three formal tests and one library's word frequencies:
# - each word is written like a name: a capital then small letters, in pieces joined by "-" or an apostrophe
#   ("Jean-Luc", "O'Brien"); not all capitals ("GPU"), no capital inside ("ZeRO", "DeepSpeed"), no digits, no
#   possessive ("Kaplan's law" names a result, not the learner);
# - one of them is rare in English (`RARE_NAME`): wordfreq's Zipf frequency under 3.5, the spelling module's line
#   for an ordinary word ("Janeth" 1.4, "Doerfler" 1.0, "Álvarez" 2.1, "Sven" 3.2 are rare; "Confused" 4.5,
#   "Adam" 4.6, "Stuck" 4.7, "New" 6.3 are not). The cost: a name that is also a common word is missed when it
#   comes alone ("I'm Jane", 4.4), though not beside a rare one ("I'm Jane Doerfler");
# - it ends the phrase: the text goes on with punctuation, the end, or an English stop word ("..., and", "from",
#   "here"), not with a noun it qualifies ("Adam Optimizer user", "Chinchilla scaling").
# The module's own capitalised terms are rare in English too ("Chinchilla" 2.6, "Megatron" 2.8): "This is Megatron,
# right?" loses the word. It is rare in what learners write, and a name kept costs more than a term lost.
INTRODUCED = re.compile(r"(?<![\w'’])(?i:i'm|i’m|i am|this is)[ \t]+([^\W\d_][\w'’-]*(?:[ \t]+[^\W\d_][\w'’-]*){0,2})")
NAME_PIECE = re.compile(r"[-'’]")
RARE_NAME = 3.5

KINDS = ("email", "phone", "card", "iban", "ip", "url_credentials", "name")
PLACEHOLDER = re.compile(r"\[(?:EMAIL|PHONE|CARD|IBAN|IP|URL_CREDENTIALS|NAME)\]")
# Kinds whose value is a number in any grouping ("4111 1111 1111 1111" is 4111111111111111 in a tool argument
# and "4,111,111,111,111,111" in the answer); the others reappear as written.
NUMERIC_KINDS = frozenset({"phone", "card", "iban"})


def without_personal_details(text: str) -> str:
    """The text with personal details dropped, for deciding what a question is about."""
    return without_placeholders(redact(text)[0])


def without_placeholders(text: str) -> str:
    """Redacted text with its placeholders dropped ("my name is [NAME], why bf16?" -> "my name is , why bf16?"),
    each line's spaces collapsed and its line breaks kept: a line break ends a clause ("…from all this" then
    "thanks in advance!" on a line of its own are two)."""
    lines = (" ".join(line.split()) for line in PLACEHOLDER.sub(" ", text).splitlines())
    return "\n".join(line for line in lines if line)


def redact(text: str) -> tuple[str, list[str]]:
    """Return `text` with personal details replaced by [EMAIL], [PHONE], ... and the kinds that were removed."""
    text, found = _redact(text)
    return text, list(dict.fromkeys(kind for kind, _ in found))


def _redact(text: str) -> tuple[str, list[tuple[str, str]]]:
    """The redacted text and each (kind, original text) removed from it."""
    found: list[tuple[str, str]] = []
    for kind, pattern in PATTERNS:
        text, _ = _substitute(pattern, text, lambda m, kind=kind: _replace(kind, m, found))
    for pattern in (NAME, NAME_UNSPACED):
        text, _ = _substitute(pattern, text, lambda m: _name(m, found))
    text, _ = _substitute(INTRODUCED, text, lambda m: _introduced(m, found))
    return text, found


@functools.lru_cache(maxsize=8)  # each pattern in turn folds the same text, unless the one before replaced something
def _folded(text: str) -> tuple[str, list[int], list[int]] | None:
    """`text` in NFKC (None when it is already), and for each of its characters the span of `text` it came from.

    Each character is normalised with the combining marks after it, so a span never splits what was one letter;
    the text stored keeps its own forms ("10²³" stays, where NFKC would write "1023").
    """
    if unicodedata.is_normalized("NFKC", text):
        return None
    pieces: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    i = 0
    while i < len(text):
        j = i + 1
        while j < len(text) and unicodedata.combining(text[j]):
            j += 1
        piece = unicodedata.normalize("NFKC", text[i:j])
        pieces.append(piece)
        starts += [i] * len(piece)
        ends += [j] * len(piece)
        i = j
    return "".join(pieces), starts, ends


def _substitute(pattern: re.Pattern[str], text: str, replace: Callable[[re.Match[str]], str]) -> tuple[str, int]:
    """`pattern.subn(replace, text)` matched on the NFKC form of `text`, replacing what was written.

    `replace` returning the match unchanged keeps the text as written.
    """
    folded = _folded(text)
    if folded is None:
        count = 0

        def counted(match: re.Match[str]) -> str:
            nonlocal count
            new = replace(match)
            count += new != match.group(0)
            return new

        return pattern.sub(counted, text), count
    normal, starts, ends = folded
    out: list[str] = []
    done = count = 0
    for match in pattern.finditer(normal):
        new = replace(match)
        if new == match.group(0) or match.end() == match.start():
            continue
        start, end = starts[match.start()], ends[match.end() - 1]
        if start < done:
            continue  # two matches in one written character: the first was replaced
        out += [text[done:start], new]
        done = end
        count += 1
    return "".join(out) + text[done:], count


def _replace(kind: str, match: re.Match[str], found: list[tuple[str, str]]) -> str:
    value = match.group(0)
    if kind == "email_written_out":
        if not WRITTEN_OUT.search(value):
            return value  # a plain address is the other pattern's; "see notes at model.py" is none
        kind = "email"
    elif kind == "ipv6":
        if "::" not in value and value.count(":") < 5:
            return value  # "10:30:00" or a ratio "1:2:4", not an address
        kind = "ip"
    elif kind == "iban" and not _iban_checksum(value):
        return value
    elif kind in ("card", "phone"):
        digits = re.sub(r"\D", "", value)
        if len(digits) < 9:
            return value  # "4 8 16" or "2 4 8" are not phone numbers
        if not value.startswith("+") and _quantity(kind, match, digits):
            return value
    found.append((kind, value))
    return f"[{kind.upper()}]"


def _quantity(kind: str, match: re.Match[str], digits: str) -> bool:
    """Whether a digit run reads as a count about the module rather than a phone or card number."""
    if ROUND.search(digits):
        return True
    groups = re.findall(r"\d+", match.group(0))
    if len(groups) > 1:  # written in groups, the way phone and card numbers are, unless it is a list of sizes
        return all(int(g) >= 2 and int(g) & (int(g) - 1) == 0 for g in groups)  # "256 512 1024 2048"
    if kind == "card":
        return False  # 13 digits and more, not round: no exact count of this module is that long
    text = match.string
    return bool(QUANTITY_AFTER.match(text, match.end()) or QUANTITY_BEFORE.search(text, 0, match.start()))


def _introduced(match: re.Match[str], found: list[tuple[str, str]]) -> str:
    """The name after "I'm" / "I am" / "this is" replaced, when the words look like one (see `INTRODUCED`)."""
    text = match.string
    words: list[tuple[int, int]] = []
    for word in re.finditer(r"\S+", match.group(1)):
        if not _name_shaped(word.group(0)):
            break
        words.append((match.start(1) + word.start(), match.start(1) + word.end()))
    rare = [i for i, (start, end) in enumerate(words) if zipf_frequency(text[start:end], "en") < RARE_NAME]
    if not rare:
        return match.group(0)
    start, end = words[0][0], words[rare[-1]][1]
    after = re.match(r"[ \t]*(\w*)", text[end:])
    follower = after.group(1) if after else ""
    if follower and follower.lower() not in ENGLISH_STOP_WORDS:
        return match.group(0)  # "Adam Optimizer user": the words qualify a noun; no introduction
    found.append(("name", text[start:end]))
    return text[match.start() : start] + "[NAME]" + text[end : match.end()]


def _name_shaped(word: str) -> bool:
    """Whether a word is written as a name is: "Janeth", "Jean-Luc", "O'Brien", "Zoë"; not "GPU", "ZeRO",
    "ZeRO-curious", "Kaplan's", "Llama2"."""
    pieces = NAME_PIECE.split(word)
    first = pieces[0]
    if (len(first) < 2 and len(pieces) == 1) or not first[:1].isupper() or pieces[-1].lower() == "s":
        return False
    return all(p.isalpha() and p[1:] == p[1:].lower() for p in pieces)


def _iban_checksum(value: str) -> bool:
    compact = value.replace(" ", "").upper()
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(ch, 36)) for ch in rearranged)) % 97 == 1


def _name(match: re.Match[str], found: list[tuple[str, str]]) -> str:
    words = match.group(1).split()
    if words[0].lower().strip("'’") in STOP_WORDS:
        return match.group(0)
    taken = 1 + next((i for i, w in enumerate(words[1:]) if not w[0].isupper()), len(words) - 1)
    end = match.start(1)
    for word in words[:taken]:
        end = match.string.index(word, end) + len(word)
    found.append(("name", match.string[match.start(1) : end]))
    return match.string[match.start(0) : match.start(1)] + "[NAME]" + match.string[end : match.end(0)]


class Scrubber:
    """Removes personal details from a learner's message and from everything derived from it.

    The patterns alone miss a detail once it is reshaped: the card number "4111 1111 1111 1111" becomes the
    tool argument 4111111111111111 and "4,111,111,111,111,111 params" in the answer. So each detail `text`
    finds is remembered and removed, in any grouping, from every field scrubbed after it: scrub the learner's
    message first.
    """

    def __init__(self) -> None:
        self.replaced: list[str] = []  # the kind of each replacement made, in order
        self._known: list[tuple[str, re.Pattern[str]]] = []

    @property
    def kinds(self) -> set[str]:
        """The kinds of personal detail removed so far."""
        return set(self.replaced)

    def text(self, text: str) -> str:
        """`text` with the patterns' details and every detail already learned replaced."""
        text, found = _redact(text)
        for kind, value in found:
            self._learn(kind, value)
            self.replaced.append(kind)
        for kind, pattern in self._known:
            text, count = _substitute(pattern, text, lambda _m, kind=kind: f"[{kind.upper()}]")
            self.replaced += [kind] * count
        return text

    def value(self, value: Any) -> Any:
        """A JSON-like value (tool arguments, results) with details removed from its strings and numbers."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(str(k)): self.value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.value(v) for v in value]
        if isinstance(value, int | float) and not isinstance(value, bool):
            written = _plain(value)
            for kind, pattern in self._known:
                if kind in NUMERIC_KINDS and pattern.search(written):
                    self.replaced.append(kind)
                    return f"[{kind.upper()}]"
        return value

    def derived(self, value: Any, kind: str) -> Any:
        """A value computed from a personal detail: long numbers in it go too, here and in later text.

        A calculator result over a card number (8222222222222222 bytes for 4111111111111111 params) gives the
        number back by one division; a number with fewer than six significant digits cannot.
        """
        if isinstance(value, dict):
            return {k: self.derived(v, kind) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.derived(v, kind) for v in value]
        if isinstance(value, int | float) and not isinstance(value, bool):
            significant = re.sub(r"\D", "", _plain(value)).strip("0")
            if len(significant) >= 6:
                self._learn(kind, _plain(value))
                self.replaced.append(kind)
                return f"[{kind.upper()}]"
            return value
        return self.value(value)

    def _learn(self, kind: str, value: str) -> None:
        for pattern in _known_patterns(kind, value):
            if all(p.pattern != pattern.pattern for _, p in self._known):
                self._known.append((kind, pattern))


def _known_patterns(kind: str, value: str) -> list[re.Pattern[str]]:
    if kind in NUMERIC_KINDS:
        # The same digits (letters, for an IBAN) with any separators between them, as a whole number.
        chars = re.sub(r"[\W_]", "", value)
        if kind != "iban":
            chars = re.sub(r"\D", "", value).lstrip("0") or chars
        joined = r"[\s.,'’_-]?".join(re.escape(c) for c in chars)
        return [re.compile(rf"(?<![\dA-Za-z]){joined}(?![\dA-Za-z])", re.I)]
    if kind == "name":
        # The whole name, and each word of it as written or capitalised ("Hi José,", "Dear bob").
        words = [w for w in value.split() if len(w) >= 2]
        variants = {value, *words, *(w[0].upper() + w[1:] for w in words)}
        return [re.compile(rf"(?<!\w){re.escape(v)}(?!\w)") for v in sorted(variants, key=len, reverse=True)]
    if kind == "email" and WRITTEN_OUT.search(value):
        # "jane_x at example dot com" may come back written plainly (an answer echoing it): that form goes too.
        plain = re.sub(DOT, ".", re.sub(AT, "@", value, count=1, flags=re.I), flags=re.I)
        return [re.compile(re.escape(v), re.I) for v in (value, plain)]
    return [re.compile(re.escape(value), re.I)]


def _plain(number: int | float) -> str:
    """A number as plain digits (no exponent), as it may be written in text."""
    if isinstance(number, float):
        return format(Decimal(repr(number)), "f") if number == number and abs(number) != float("inf") else ""
    return str(number)
