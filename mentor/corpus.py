"""Read module Markdown files, validate them, and cut them into section-aware chunks with content-hash ids.

A module file is YAML front matter (`module_id`, `title`, `prerequisites`, optional `version`, `topics` and
`glossary`: what learners write for the module's terms, "DP: data parallel"; `pointers`: the other modules it sends
learners to, each for a topic) followed by
Markdown whose every heading ends in a stable section id: `## Mixed precision {#ref-mixed-precision}`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from langchain_text_splitters import MarkdownHeaderTextSplitter, RecursiveCharacterTextSplitter

from mentor.errors import CorpusError
from mentor.front_matter import split_front_matter
from mentor.text import FENCE, HEADING

SECTION_ID = re.compile(r"^(?P<title>.*?)\s*\{#(?P<id>[a-z0-9][a-z0-9._-]*)\}$")
MODULE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
HTML_COMMENT = re.compile(r"<!--.*?-->", re.S)


@dataclass(frozen=True, slots=True)
class Section:
    """One headed part of a module, as written."""

    id: str
    title: str
    level: int
    line: int
    text: str


@dataclass(frozen=True, slots=True)
class Module:
    """A validated module: its metadata and its sections in reading order."""

    id: str
    title: str
    version: str
    prerequisites: tuple[str, ...]
    topics: tuple[str, ...]
    path: Path
    body: str
    sections: tuple[Section, ...] = field(repr=False)
    source: str = field(default="", repr=False)  # the file as written, which `mentor ingest` publishes
    # The module's own shorthand, spelled out: what a learner writes ("DP", "zero-3", "OOM") -> the words the module
    # uses for it ("data parallel", "ZeRO stage 3", "memory hog"). Module knowledge lives with the module, not in code.
    glossary: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    # Where the module sends a learner for a topic it leaves to another module ("In-app: Inference & serving, for
    # why decode is memory-bound"): told to a learner whose question belongs there.
    pointers: tuple[Pointer, ...] = field(default=(), repr=False)


@dataclass(frozen=True, slots=True)
class Pointer:
    """Another module the module names for a topic: its id, its title, and the topic (as the module words it)."""

    module_id: str
    title: str
    topic: str


@dataclass(frozen=True, slots=True)
class Chunk:
    """A retrievable piece of one section; `id` is a hash of its content, so it is stable everywhere."""

    id: str
    module_id: str
    module_version: str
    section_id: str
    section_title: str
    position: int
    text: str

    @property
    def embedding_text(self) -> str:
        """What is embedded and BM25-indexed: the section title gives a short chunk its topic."""
        return f"{self.section_title}\n{self.text}"

    @property
    def metadata(self) -> dict[str, str | int]:
        """The chunk's fields as Chroma metadata."""
        return {
            "module_id": self.module_id,
            "module_version": self.module_version,
            "section_id": self.section_id,
            "section_title": self.section_title,
            "position": self.position,
        }


def load_corpus(corpus_dir: Path) -> list[Module]:
    """Load and validate every `*.md` module under `corpus_dir`; module ids must be unique."""
    if not corpus_dir.is_dir():
        raise CorpusError(f"{corpus_dir}: corpus directory does not exist")
    modules: list[Module] = []
    seen: dict[str, Path] = {}
    for path in sorted(corpus_dir.glob("*.md")):
        module = load_module(path)
        if module.id in seen:
            raise CorpusError(f"{path}:2: module_id {module.id!r} is already used by {seen[module.id]}")
        seen[module.id] = path
        modules.append(module)
    if not modules:
        raise CorpusError(f"{corpus_dir}: no module files (*.md) found")
    return modules


def load_module(path: Path) -> Module:
    """Parse one module file; raise `CorpusError` naming the file and line of the first problem."""
    try:
        raw = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CorpusError(f"{path}: cannot read as UTF-8 text ({exc})") from exc
    return parse_module(raw, path)


def parse_module(raw: str, path: Path) -> Module:
    """Parse a module's Markdown source (`path` names it in errors): what replicas do with a published module."""
    meta, body, body_line = split_front_matter(path, raw)
    # Learners never see HTML comments, so the mentor must not read them either (blanked, keeping line numbers).
    body = HTML_COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), body)
    module_id, title, prerequisites, version, topics = _validate_meta(path, meta)
    glossary = _glossary(path, meta)
    pointers = _pointers(path, meta)
    sections = _parse_sections(path, body, body_line)
    version = version or hashlib.sha256(raw.encode()).hexdigest()[:12]
    return Module(
        module_id, title, version, prerequisites, topics, path, body, tuple(sections), raw, glossary, pointers
    )


def chunk_module(module: Module, *, chunk_size: int = 900, chunk_overlap: int = 100) -> list[Chunk]:
    """Cut a module into chunks: each section as `load_module` parsed it, then size-bounded blocks.

    Tables and fenced blocks (the worked examples) are never split; prose paragraphs longer than
    `chunk_size` are split by LangChain's recursive splitter with `chunk_overlap`.
    """
    # The sections are already parsed; LangChain's Markdown splitter, given no heading levels, only lays out
    # each section's lines: stripped, paragraphs joined by Markdown line breaks ("  \n"). Chunk ids hash that
    # text, so it stays exactly what splitting the whole body by headings gave.
    layout = MarkdownHeaderTextSplitter([], strip_headers=True, return_each_line=False)
    prose_splitter = RecursiveCharacterTextSplitter(
        chunk_size=chunk_size, chunk_overlap=chunk_overlap, separators=["\n\n", "\n", ". ", " ", ""]
    )
    chunks: list[Chunk] = []
    for section in module.sections:
        for doc in layout.split_text(section.text):
            for text in _pack(_blocks(doc.page_content), chunk_size, prose_splitter):
                chunks.append(_make_chunk(module, section, len(chunks), text))
    return chunks


def chunk_corpus(modules: Iterable[Module], *, chunk_size: int = 900, chunk_overlap: int = 100) -> list[Chunk]:
    """Chunk every module, in order."""
    return [c for m in modules for c in chunk_module(m, chunk_size=chunk_size, chunk_overlap=chunk_overlap)]


def _make_chunk(module: Module, section: Section, position: int, text: str) -> Chunk:
    digest = hashlib.sha256("\x1f".join((module.id, section.id, section.title, text)).encode("utf-8")).hexdigest()[:32]
    return Chunk(digest, module.id, module.version, section.id, section.title, position, text)


def _validate_meta(path: Path, meta: dict) -> tuple[str, str, tuple[str, ...], str | None, tuple[str, ...]]:
    def fail(key: str, problem: str) -> CorpusError:
        return CorpusError(f"{path}:{_meta_line(path, key)}: front matter {problem}")

    module_id = meta.get("module_id")
    if not isinstance(module_id, str) or not MODULE_ID.match(module_id):
        raise fail("module_id", "needs `module_id`: letters, digits, '.', '_' or '-' (e.g. P10.topic.02)")
    title = meta.get("title")
    if not isinstance(title, str) or not title.strip():
        raise fail("title", "needs a non-empty `title`")
    prerequisites = meta.get("prerequisites")
    if not isinstance(prerequisites, list) or not all(isinstance(p, str) and p for p in prerequisites):
        raise fail("prerequisites", "needs `prerequisites`: a list of module ids (may be empty: [])")
    version = meta.get("version")
    if version is not None and (isinstance(version, bool) or not isinstance(version, str | int | float)):
        raise fail("version", "`version` must be a string or a number")
    topics = meta.get("topics", [])
    if not isinstance(topics, list) or not all(isinstance(t, str) and t for t in topics):
        raise fail("topics", "`topics` must be a list of short phrases (what the module covers)")
    return module_id, title.strip(), tuple(prerequisites), None if version is None else str(version), tuple(topics)


def _pointers(path: Path, meta: dict) -> tuple[Pointer, ...]:
    """The front matter's `pointers`: a list of {module, title, topic}, each a module the text sends learners to."""
    pointers = meta.get("pointers", [])
    keys = ("module", "title", "topic")
    if not isinstance(pointers, list) or not all(
        isinstance(p, dict) and all(isinstance(p.get(k), str) and p[k].strip() for k in keys) for p in pointers
    ):
        raise CorpusError(
            f"{path}:{_meta_line(path, 'pointers')}: front matter `pointers` must be a list of entries with a "
            "`module` id, its `title` and the `topic` the module sends learners there for"
        )
    return tuple(Pointer(p["module"].strip(), p["title"].strip(), p["topic"].strip()) for p in pointers)


def _glossary(path: Path, meta: dict) -> tuple[tuple[str, str], ...]:
    """The front matter's `glossary`: a mapping of what learners write to the module's words for it."""
    glossary = meta.get("glossary", {})
    if not isinstance(glossary, dict) or not all(
        isinstance(k, str | int) and str(k).strip() and isinstance(v, str) and v.strip() for k, v in glossary.items()
    ):
        raise CorpusError(
            f"{path}:{_meta_line(path, 'glossary')}: front matter `glossary` must map what learners write to the "
            "module's words for it (e.g. DP: data parallel)"
        )
    return tuple((str(k).strip(), v.strip()) for k, v in glossary.items())


def _meta_line(path: Path, key: str) -> int:
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.startswith(f"{key}:"):
            return number
    return 2


def _parse_sections(path: Path, body: str, first_line: int) -> list[Section]:
    """Validate headings (each needs a unique `{#id}`) and that no section is empty."""
    sections: list[Section] = []
    content: list[list[str]] = []
    seen: dict[str, int] = {}
    fence: str | None = None
    for offset, line in enumerate(body.splitlines()):
        number = first_line + offset
        fence_match = FENCE.match(line.strip())
        if fence_match and (fence is None or fence_match.group(1)[0] == fence[0]):
            fence = fence_match.group(1) if fence is None else None
        heading = HEADING.match(line) if fence is None else None
        if heading is None:
            if not sections and line.strip():
                raise CorpusError(f"{path}:{number}: text before the first heading belongs to no section")
            if sections:
                content[-1].append(line)
            continue
        titled = SECTION_ID.match(heading.group(2))
        if titled is None or not titled.group("title"):
            raise CorpusError(
                f"{path}:{number}: heading {heading.group(2)!r} needs a title and a section id, "
                "e.g. '## Mixed precision {#mixed-precision}'"
            )
        section_id = titled.group("id")
        if section_id in seen:
            raise CorpusError(f"{path}:{number}: section id {section_id!r} is already used on line {seen[section_id]}")
        seen[section_id] = number
        sections.append(Section(section_id, titled.group("title"), len(heading.group(1)), number, ""))
        content.append([])
    if fence is not None:
        raise CorpusError(f"{path}: a fenced block ({fence}) is never closed")
    if not sections:
        raise CorpusError(f"{path}:{first_line}: the module has no headings, so no sections")
    result = []
    for index, (section, lines) in enumerate(zip(sections, content, strict=True)):
        text = "\n".join(lines).strip()
        has_children = index + 1 < len(sections) and sections[index + 1].level > section.level
        if not text and not has_children:
            raise CorpusError(f"{path}:{section.line}: section {section.id!r} is empty")
        result.append(Section(section.id, section.title, section.level, section.line, text))
    return result


def _blocks(text: str) -> list[tuple[str, bool]]:
    """Split section text into (block, atomic) pairs: tables and fenced blocks are atomic.

    Not mentor.text.blocks: a chunk keeps the module's lines as written (its id hashes them), so this groups
    whole lines into runs of prose, table or fence instead of reading them.
    """
    blocks: list[tuple[str, bool]] = []
    current: list[str] = []
    kind: str | None = None  # None (prose), "fence", "table"

    def flush() -> None:
        nonlocal current, kind
        if any(line.strip() for line in current):
            blocks.append(("\n".join(current).strip(), kind is not None))
        current, kind = [], None

    for line in text.splitlines():
        stripped = line.strip()
        if kind == "fence":
            current.append(line)
            if FENCE.match(stripped):
                flush()
            continue
        if FENCE.match(stripped):
            flush()
            kind = "fence"
            current.append(line)
            continue
        is_table = stripped.startswith("|")
        if is_table != (kind == "table") or not stripped:
            flush()
        if stripped:
            kind = "table" if is_table else None
            current.append(line)
    flush()
    return blocks


def _pack(blocks: list[tuple[str, bool]], chunk_size: int, splitter: RecursiveCharacterTextSplitter) -> list[str]:
    """Greedily join blocks into chunks of at most `chunk_size` characters, splitting only long prose."""
    pieces: list[str] = []
    for block, atomic in blocks:
        pieces.extend([block] if atomic or len(block) <= chunk_size else splitter.split_text(block))
    chunks: list[str] = []
    for piece in pieces:
        if chunks and len(chunks[-1]) + 2 + len(piece) <= chunk_size:
            chunks[-1] = f"{chunks[-1]}\n\n{piece}"
        else:
            chunks.append(piece)
    return chunks
