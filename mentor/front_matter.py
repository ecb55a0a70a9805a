"""A module file's YAML front matter, read without the rest of the corpus code.

`mentor.corpus` parses whole modules (and imports the text tools and LangChain's splitters, seconds on a busy
machine); a command that only needs to know which modules exist, such as `mentor ask --module` checking its
argument before the model loads, reads the front matter here (PyYAML alone).
"""

from __future__ import annotations

from pathlib import Path

import yaml

from mentor.errors import CorpusError, NotFound


def split_front_matter(path: Path, raw: str) -> tuple[dict, str, int]:
    """The front matter of `raw` as a mapping, the body after it, and the body's first line number.

    Raise `CorpusError` naming `path` and the line of the problem.
    """
    lines = raw.splitlines()
    if not lines or lines[0].strip() != "---":
        raise CorpusError(f"{path}:1: missing YAML front matter (the file must start with a '---' line)")
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
    except StopIteration:
        raise CorpusError(f"{path}:1: front matter is not closed by a '---' line") from None
    try:
        meta = yaml.safe_load("\n".join(lines[1:end])) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 2 if mark is not None else 2
        raise CorpusError(f"{path}:{line}: front matter is not valid YAML ({getattr(exc, 'problem', exc)})") from exc
    if not isinstance(meta, dict):
        raise CorpusError(f"{path}:2: front matter must be a mapping of keys to values")
    return meta, "\n".join(lines[end + 1 :]), end + 2


def module_ids(corpus_dir: Path) -> list[str]:
    """The `module_id` of every `*.md` module under `corpus_dir`, in file order: their front matter alone.

    A file whose front matter cannot be read is left out: loading the corpus reports it, with its line.
    """
    ids = []
    for path in sorted(corpus_dir.glob("*.md")):
        try:
            meta, _, _ = split_front_matter(path, path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, CorpusError):
            continue
        if isinstance(meta.get("module_id"), str):
            ids.append(meta["module_id"])
    return ids


def unknown_module(module_id: str, known: list[str]) -> NotFound:
    """The one answer for a module id that is not served, naming those that are."""
    return NotFound(f"unknown module {module_id!r}; known modules: {', '.join(known) or 'none'}")
