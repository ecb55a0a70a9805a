"""The golden set: versioned JSON Lines of learner questions with what a good answer must (not) contain.

Line 1 is a header `{"golden_version": "1.0.0", ...}`; every other line is one case. `load_golden` checks every
case and reports all problems at once, each with its line number, so a broken edit never runs half a suite.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mentor.answer import STYLES
from mentor.corpus import chunk_module, load_corpus
from mentor.errors import CorpusError, InvalidInput, MentorError
from mentor.text import CLAIMS, MAX_MESSAGE_CHARS, split_sentences, split_units, strip_markers
from mentor.tools import REGISTRY, run_tool

CATEGORIES = (
    "concept",
    "calculation",
    "decision",
    "partial",
    "follow_up",
    "off_topic",
    "not_covered",
    "neighbour",
    "odd_in_scope",
    "injection",
    "poisoned",
    "extraction",
    "pii",
    # issue 30's answer kinds (golden 1.5.0, the fresh split): a yes/no question, a "which one should I use" choice
    # without a calculator, a question of two parts, and a question resting on a false premise
    "verdict",
    "choice",
    "two_part",
    "false_premise",
)
OUT_OF_SCOPE_CATEGORIES = frozenset({"off_topic", "not_covered", "neighbour"})
IN_SCOPE_CATEGORIES = frozenset(
    {
        "concept",
        "calculation",
        "decision",
        "partial",
        "follow_up",
        "odd_in_scope",
        "pii",
        "poisoned",
        "verdict",
        "choice",
        "two_part",
        "false_premise",
    }
)
ATTACK_CATEGORIES = frozenset({"injection", "poisoned", "extraction"})
COVERAGES = ("full", "partial", "none")
# dev tunes the engine and sets the thresholds; heldout and fresh are never tuned on. fresh (golden 1.5.0) was written
# before the work of issues 29 and 30 began and is not edited after its first run.
SPLITS = ("dev", "heldout", "fresh")
CORPORA = ("default", "poisoned")
CASE_KEYS = frozenset({"id", "category", "split", "module_id", "corpus", "turns", "style", "expect", "note"})
EXPECT_KEYS = frozenset(
    {
        "sections",
        "facts",
        "numbers",
        "tool",
        "tool_arguments",
        "out_of_scope",
        "forbidden",
        "pii",
        "reference",
        "parts",
        "verdict",
        "coverage",
        "repeat_ok",
        "lacking",
        "no_tool",
    }
)
CASE_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,79}$")
SECTION_ID = re.compile(r"^[A-Za-z0-9][\w.-]*$")
MAX_TURN_CHARS = MAX_MESSAGE_CHARS  # the chat's own limit


def match_text(text: str) -> str:
    """The form labels and answers are compared in: citation markers stripped, case folded, whitespace collapsed."""
    return " ".join(strip_markers(text).casefold().split())


@dataclass(frozen=True, slots=True)
class Expect:
    """What a good answer to a case does; empty fields are not checked."""

    sections: tuple[str, ...] = ()
    facts: tuple[str, ...] = ()
    numbers: tuple[tuple[str, ...], ...] = ()  # each entry: acceptable renderings of one expected number
    tool: str | None = None
    tool_arguments: Mapping[str, Any] = field(default_factory=dict)
    out_of_scope: bool = False
    forbidden: tuple[str, ...] = ()
    pii: tuple[str, ...] = ()
    reference: str | None = None  # optional reference answer for exports; none is made up when absent
    # Each part of the question: lowercase substrings of the module units that answer it (any one suffices).
    parts: tuple[tuple[str, ...], ...] = ()
    verdict: str | None = None  # what the answer's first sentence must say ("no", "13b on 500b tokens")
    coverage: str | None = None  # full | partial | none; None: none when out of scope, else full
    repeat_ok: bool = False  # a follow-up that asks to hear the earlier answer again
    # What the module does not cover that the answer must name (each entry: acceptable renderings of one concept).
    lacking: tuple[tuple[str, ...], ...] = ()
    no_tool: bool = False  # no calculator result belongs in the answer: the question asks of a method none models

    @property
    def expected_coverage(self) -> str:
        """The coverage the answer should report: as labelled, else none when out of scope and full otherwise."""
        return self.coverage or ("none" if self.out_of_scope else "full")


@dataclass(frozen=True, slots=True)
class Case:
    """One golden case: a conversation whose last turn is evaluated."""

    id: str
    category: str
    split: str
    module_id: str
    corpus: str
    turns: tuple[str, ...]
    style: str
    expect: Expect
    line: int = 0
    golden_version: str = ""
    golden_sha256: str = ""

    @property
    def question(self) -> str:
        """The evaluated (last) learner message."""
        return self.turns[-1]

    def to_dict(self) -> dict[str, Any]:
        """The case as it reads in the golden file."""
        e = self.expect
        expect: dict[str, Any] = {
            "sections": list(e.sections),
            "facts": list(e.facts),
            "numbers": [list(n) for n in e.numbers],
            "tool": e.tool,
            "tool_arguments": dict(e.tool_arguments),
            "out_of_scope": e.out_of_scope,
            "forbidden": list(e.forbidden),
            "pii": list(e.pii),
        }
        if e.reference:
            expect["reference"] = e.reference
        if e.parts:
            expect["parts"] = [list(part) for part in e.parts]
        if e.verdict is not None:
            expect["verdict"] = e.verdict
        if e.coverage is not None:
            expect["coverage"] = e.coverage
        if e.repeat_ok:
            expect["repeat_ok"] = True
        if e.lacking:
            expect["lacking"] = [list(entry) for entry in e.lacking]
        if e.no_tool:
            expect["no_tool"] = True
        return {
            "id": self.id,
            "category": self.category,
            "split": self.split,
            "module_id": self.module_id,
            "corpus": self.corpus,
            "turns": list(self.turns),
            "style": self.style,
            "expect": expect,
        }


@dataclass(frozen=True, slots=True)
class GoldenInfo:
    """Which golden set a run used: the header's version and the file's SHA-256."""

    version: str
    sha256: str


def golden_info(path: Path) -> GoldenInfo:
    """Read the version from the header line and hash the whole file."""
    raw = path.read_bytes()
    first = raw.split(b"\n", 1)[0]
    try:
        header = json.loads(first)
    except json.JSONDecodeError:
        header = None
    if not isinstance(header, dict) or not isinstance(header.get("golden_version"), str):
        raise InvalidInput(f'{path} line 1: must be the header {{"golden_version": "..."}}')
    return GoldenInfo(header["golden_version"], hashlib.sha256(raw).hexdigest())


def load_golden(path: Path, split: str = "dev", *, corpus_dirs: Mapping[str, Path] | None = None) -> list[Case]:
    """Load and validate the cases of `split` (dev, heldout or all); raise InvalidInput naming every bad line.

    With `corpus_dirs` ({"default": Path("corpus"), "poisoned": ...}) module and section ids are checked too.
    """
    if split not in (*SPLITS, "all"):
        raise InvalidInput(f"split: must be dev, heldout, fresh or all (got {split!r})")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InvalidInput(f"{path}: cannot be read ({exc.strerror or exc})") from None
    info = golden_info(path)
    known = _known_modules(corpus_dirs) if corpus_dirs else None
    errors: list[str] = []
    cases: list[Case] = []
    first_line: dict[str, int] = {}
    for number, text in enumerate(lines[1:], start=2):
        if not text.strip():
            continue
        problems: list[str] = []
        case = _parse_case(text, number, info, problems, known)
        if case is not None and case.id in first_line:
            problems.append(f"id: {case.id!r} is already used on line {first_line[case.id]}")
        errors.extend(f"line {number}: {problem}" for problem in problems)
        if case is not None and not problems:
            first_line[case.id] = number
            cases.append(case)
    if errors:
        shown = "\n".join(errors[:30]) + (f"\n... and {len(errors) - 30} more" if len(errors) > 30 else "")
        raise InvalidInput(f"{path}: {len(errors)} problem(s) in the golden set:\n{shown}")
    if not cases:
        raise InvalidInput(f"{path}: holds no cases")
    return [case for case in cases if split == "all" or case.split == split]


@dataclass(frozen=True, slots=True)
class _KnownModule:
    """What a case may name in one module: its section ids, and its quotable text for `parts` labels."""

    sections: frozenset[str]
    sentences: tuple[str, ...]  # every unit the engine can quote, cut as the eval cuts answers, in match_text form


def _known_modules(corpus_dirs: Mapping[str, Path]) -> dict[str, dict[str, _KnownModule]]:
    known: dict[str, dict[str, _KnownModule]] = {}
    for corpus, directory in corpus_dirs.items():
        try:
            modules = load_corpus(directory)
        except (CorpusError, OSError) as exc:
            raise InvalidInput(f"corpus {corpus!r} ({directory}): {getattr(exc, 'message', exc)}") from None
        known[corpus] = {
            module.id: _KnownModule(
                sections=frozenset(section.id for section in module.sections),
                # A label must sit inside one answer sentence, or no answer could ever match it.
                sentences=tuple(
                    match_text(sentence)
                    for chunk in chunk_module(module)
                    for unit in split_units(chunk.text)
                    for sentence in split_sentences(unit.text, CLAIMS)
                ),
            )
            for module in modules
        }
    return known


def _strings(value: Any, where: str, problems: list[str], *, allow_empty_list: bool = True) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) and item.strip() for item in value):
        problems.append(f"{where}: must be a list of non-empty strings")
        return ()
    if not value and not allow_empty_list:
        problems.append(f"{where}: must not be empty")
    return tuple(value)


def _parse_case(
    text: str,
    line: int,
    info: GoldenInfo,
    problems: list[str],
    known: dict[str, dict[str, _KnownModule]] | None,
) -> Case | None:
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        problems.append(f"not valid JSON ({exc.msg} at column {exc.colno})")
        return None
    if not isinstance(raw, dict):
        problems.append("must be a JSON object")
        return None
    for key in sorted(set(raw) - CASE_KEYS):
        problems.append(f"unknown key {key!r} (allowed: {', '.join(sorted(CASE_KEYS))})")
    case_id = raw.get("id")
    if not isinstance(case_id, str) or not CASE_ID.match(case_id):
        problems.append("id: must be lowercase letters, digits and dashes, e.g. 'calc-zero-03'")
        case_id = f"<line {line}>"
    category = raw.get("category")
    if category not in CATEGORIES:
        problems.append(f"category: must be one of {', '.join(CATEGORIES)} (got {category!r})")
    split = raw.get("split")
    if split not in SPLITS:
        problems.append(f"split: must be one of {', '.join(SPLITS)} (got {split!r})")
    module_id = raw.get("module_id")
    if not isinstance(module_id, str) or not module_id:
        problems.append("module_id: must be a module id string")
    corpus = raw.get("corpus", "default")
    if corpus not in CORPORA:
        problems.append(f"corpus: must be default or poisoned (got {corpus!r})")
    elif (category == "poisoned") != (corpus == "poisoned"):
        problems.append("corpus: poisoned cases, and only they, use the poisoned corpus")
    turns = _strings(raw.get("turns"), "turns", problems, allow_empty_list=False)
    if any(len(turn) > MAX_TURN_CHARS for turn in turns):
        problems.append(f"turns: each message is at most {MAX_TURN_CHARS} characters")
    if category == "follow_up" and len(turns) < 2:
        problems.append("turns: a follow_up case needs an earlier turn")
    style = raw.get("style", "explain")
    if style not in STYLES:
        problems.append(f"style: must be one of {', '.join(STYLES)} (got {style!r})")
    expect = _parse_expect(raw.get("expect"), category, problems)
    if expect is not None and expect.repeat_ok and category != "follow_up":
        problems.append("expect.repeat_ok: only a follow_up case can ask to hear an earlier answer again")
    if known is not None and expect is not None and isinstance(module_id, str) and corpus in known:
        module = known[corpus].get(module_id)
        if module is None:
            problems.append(f"module_id: {module_id!r} is not in the {corpus} corpus")
        else:
            for section in expect.sections:
                if section not in module.sections:
                    problems.append(f"expect.sections: {section!r} is not a section of {module_id}")
            for index, part in enumerate(expect.parts):
                for label in part:
                    if match_text(label) != label:
                        continue  # already named as malformed
                    if not any(label in sentence for sentence in module.sentences):
                        problems.append(f"expect.parts[{index}]: {label!r} is in no quotable sentence of {module_id}")
    if problems or expect is None:
        return None
    return Case(
        id=case_id,
        category=category,
        split=split,
        module_id=module_id,
        corpus=corpus,
        turns=turns,
        style=style,
        expect=expect,
        line=line,
        golden_version=info.version,
        golden_sha256=info.sha256,
    )


def _parse_expect(raw: Any, category: Any, problems: list[str]) -> Expect | None:
    if not isinstance(raw, dict):
        problems.append("expect: must be an object")
        return None
    for key in sorted(set(raw) - EXPECT_KEYS):
        problems.append(f"expect: unknown key {key!r} (allowed: {', '.join(sorted(EXPECT_KEYS))})")
    sections = _strings(raw.get("sections", []), "expect.sections", problems)
    for section in sections:
        if not SECTION_ID.match(section):
            problems.append(f"expect.sections: {section!r} is not a section id")
    facts = tuple(fact.lower() for fact in _strings(raw.get("facts", []), "expect.facts", problems))
    numbers = _renderings(raw.get("numbers", []), "expect.numbers", problems)
    lacking = _renderings(raw.get("lacking", []), "expect.lacking", problems)
    tool = raw.get("tool")
    arguments = raw.get("tool_arguments", {})
    if tool is not None and tool not in REGISTRY:
        problems.append(f"expect.tool: unknown calculator {tool!r}; available: {', '.join(REGISTRY)}")
    elif not isinstance(arguments, dict):
        problems.append("expect.tool_arguments: must be an object")
    elif arguments and tool is None:
        problems.append("expect.tool_arguments: given without expect.tool")
    elif tool is not None:
        try:
            run_tool(tool, arguments)  # the expected call must itself be valid
        except MentorError as exc:
            problems.append(f"expect.tool_arguments: {exc.message}")
    out_of_scope = raw.get("out_of_scope", False)
    if not isinstance(out_of_scope, bool):
        problems.append("expect.out_of_scope: must be true or false")
    forbidden = _strings(raw.get("forbidden", []), "expect.forbidden", problems)
    pii = _strings(raw.get("pii", []), "expect.pii", problems)
    reference = raw.get("reference")
    if reference is not None and (not isinstance(reference, str) or not reference.strip()):
        problems.append("expect.reference: must be a non-empty string")
    parts = _parts(raw.get("parts", []), problems)
    verdict = raw.get("verdict")
    if verdict is not None and (not isinstance(verdict, str) or not verdict.strip() or match_text(verdict) != verdict):
        problems.append("expect.verdict: must be a non-empty lowercase string with single spaces")
    coverage = raw.get("coverage")
    if coverage is not None and coverage not in COVERAGES:
        problems.append(f"expect.coverage: must be one of {', '.join(COVERAGES)} (got {coverage!r})")
    repeat_ok = raw.get("repeat_ok", False)
    if not isinstance(repeat_ok, bool):
        problems.append("expect.repeat_ok: must be true or false")
    no_tool = raw.get("no_tool", False)
    if not isinstance(no_tool, bool):
        problems.append("expect.no_tool: must be true or false")
    if no_tool is True and tool is not None:
        problems.append("expect.no_tool: not with expect.tool")
    if lacking and coverage != "partial":
        problems.append('expect.lacking: names what a partial answer lacks, so coverage must be "partial"')
    if any(match_text(r) != r for entry in lacking for r in entry):
        problems.append("expect.lacking: renderings must be lowercase and single-spaced")
    # What each category is for; a case that cannot test it is a mistake in the set.
    if out_of_scope is True and (parts or verdict is not None or coverage not in (None, "none")):
        problems.append("expect: an out-of-scope case has no parts or verdict, and coverage none")
    if out_of_scope is False and coverage == "none":
        problems.append("expect.coverage: none is for out-of-scope cases; an in-scope case is full or partial")
    if category in ATTACK_CATEGORIES and coverage is not None:
        problems.append(f"expect.coverage: {category} cases are not scored on coverage")
    if category == "decision" and (tool is None or verdict is None):
        problems.append("expect: a decision case needs the calculator (tool) and the verdict")
    if category in ("verdict", "choice", "false_premise") and verdict is None:
        problems.append(f"expect.verdict: a {category} case needs the verdict its answer opens with")
    if category == "two_part" and len(parts) < 2:
        problems.append("expect.parts: a two_part case labels both of its parts")
    if category == "partial" and coverage != "partial":
        problems.append('expect.coverage: a partial case must expect "partial"')
    if category in OUT_OF_SCOPE_CATEGORIES and out_of_scope is not True:
        problems.append(f"expect.out_of_scope: must be true for {category} cases")
    if category in IN_SCOPE_CATEGORIES and out_of_scope is not False:
        problems.append(f"expect.out_of_scope: must be false for {category} cases")
    if out_of_scope is True and (sections or tool or numbers):
        problems.append("expect: an out-of-scope case expects no sections, numbers or tool")
    if category == "concept" and not sections:
        problems.append("expect.sections: a concept case needs the acceptable section ids")
    if category == "calculation" and tool is None:
        problems.append("expect.tool: a calculation case needs the expected calculator")
    if category in ATTACK_CATEGORIES and not forbidden:
        problems.append(f"expect.forbidden: {category} cases need the strings that must not appear")
    if category == "pii" and not pii:
        problems.append("expect.pii: a pii case needs the personal details that must not be stored")
    return Expect(
        sections=sections,
        facts=facts,
        numbers=tuple(numbers),
        tool=tool if isinstance(tool, str) else None,
        tool_arguments=dict(arguments) if isinstance(arguments, dict) else {},
        out_of_scope=out_of_scope is True,
        forbidden=forbidden,
        pii=pii,
        reference=reference if isinstance(reference, str) else None,
        parts=parts,
        verdict=verdict if isinstance(verdict, str) else None,
        coverage=coverage if coverage in COVERAGES else None,
        repeat_ok=repeat_ok is True,
        lacking=lacking,
        no_tool=no_tool is True,
    )


def _renderings(raw: Any, where: str, problems: list[str]) -> tuple[tuple[str, ...], ...]:
    """Entries each given as one string or a non-empty list of acceptable renderings."""
    if not isinstance(raw, list):
        problems.append(f"{where}: must be a list; each entry a string or a list of acceptable renderings")
        return ()
    entries: list[tuple[str, ...]] = []
    for index, entry in enumerate(raw):
        renderings = [entry] if isinstance(entry, str) else entry
        if (
            not isinstance(renderings, list)
            or not renderings
            or not all(isinstance(r, str) and r.strip() for r in renderings)
        ):
            problems.append(f"{where}[{index}]: must be a string or a non-empty list of strings")
            continue
        entries.append(tuple(renderings))
    return tuple(entries)


def _parts(raw: Any, problems: list[str]) -> tuple[tuple[str, ...], ...]:
    """Each part of the question: a non-empty list of labels, each already in match_text form."""
    if not isinstance(raw, list):
        problems.append("expect.parts: must be a list of parts; each part a list of lowercase substrings")
        return ()
    parts: list[tuple[str, ...]] = []
    for index, part in enumerate(raw):
        if not isinstance(part, list) or not part or not all(isinstance(x, str) and x.strip() for x in part):
            problems.append(f"expect.parts[{index}]: must be a non-empty list of non-empty strings")
            continue
        for label in part:
            if match_text(label) != label:
                problems.append(
                    f"expect.parts[{index}]: {label!r} must be lowercase, single-spaced and without citation markers"
                )
        parts.append(tuple(part))
    return tuple(parts)
