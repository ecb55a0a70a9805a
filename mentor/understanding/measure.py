"""How well the reader's decisions do: balanced accuracy in cross-validation on their own examples, and on the held-out
sets written before the reader was (`eval/understanding/heldout/`: never trained or tuned on), read as the chat reads
a message. `mentor calibrate` prints them; a test holds them above floors.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from mentor.understanding.decisions import EXAMPLES, act_examples, load_pairs, second_part_examples
from mentor.understanding.examples import balanced_accuracy, cross_validated, load_labelled
from mentor.understanding.reader import Reader
from mentor.understanding.reading import CHATTER, INSTRUCTION, OTHER, QUESTION, Reading
from mentor.understanding.words import ModuleWords


@dataclass(frozen=True, slots=True)
class Measured:
    """One decision's figures: on its examples (cross-validated) and on its held-out set, with their sizes."""

    decision: str
    examples: int
    cross_validated: float | None
    heldout: int
    heldout_score: float | None
    note: str = ""


def measure(reader: Reader, words: ModuleWords, heldout: Path, examples: Path = EXAMPLES) -> list[Measured]:
    """Every decision's figures; a held-out file that is missing leaves its score None."""
    embed = reader.embedder.embed_documents
    figures: list[Measured] = []
    standalone = load_labelled(examples / "standalone.jsonl", "label")
    for name, rows in (
        ("acts", act_examples(examples)),
        ("kinds", load_labelled(examples / "kinds.jsonl", "kind")),
        ("standalone", standalone),
        ("second_parts", second_part_examples(standalone, examples)),
        ("subject", load_labelled(examples / "subject.jsonl", "subject")),
        ("social", load_labelled(examples / "social.jsonl", "social")),
        ("figures", load_labelled(examples / "figures.jsonl", "label")),
    ):
        texts = [row.text for row in rows]
        score = cross_validated(texts, embed(texts), [row.label for row in rows])
        held = _parts(reader, words, heldout) if name == "second_parts" else _heldout(name, reader, words, heldout)
        figures.append(Measured(name, len(rows), score, held[0], held[1]))
    # The kinds decision on choices beside comparisons and yes/no questions naming two options (`choices.jsonl`)
    choices = _heldout("choices", reader, words, heldout)
    figures.append(Measured("choices", 0, None, choices[0], choices[1], "the kinds decision"))
    figures.append(_lacking(reader, words, heldout))
    # Concepts of two or three everyday words ("sliding window attention"), beside everyday words before the module's
    # ("quick question", "big picture"): written before the lacking decision read a word's neighbours
    figures.append(_lacking(reader, words, heldout, "compounds"))
    figures.append(_follow_ups(reader, words, heldout))
    figures.append(_instructions(reader, words, heldout))
    return figures


def _read(reader: Reader, words: ModuleWords, text: str, previous: str = "") -> Reading:
    return reader.read(text, previous=previous, words=words)


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _heldout(name: str, reader: Reader, words: ModuleWords, heldout: Path) -> tuple[int, float | None]:
    """A clause or question decision on its held-out set, read whole as a message."""
    path = heldout / f"{name}.jsonl"
    if not path.is_file():
        return 0, None
    rows = _rows(path)
    if name == "acts":
        truth = [row["act"] for row in rows]
        predicted = [_act(_read(reader, words, row["text"])) for row in rows]
    elif name == "subject":
        truth = [row["subject"] for row in rows]
        predicted = ["module" if _read(reader, words, row["text"]).about_module else "topic" for row in rows]
    elif name == "social":  # as the chat reads it: chat alone first (a message read as a question is "other")
        truth = [row["social"] for row in rows]
        predicted = [_read(reader, words, row["text"]).social or OTHER for row in rows]
    elif name == "figures":  # what a figure is to its question, as the chat reads it
        truth = [row["label"] for row in rows]
        predicted = [_read(reader, words, row["text"]).figure or OTHER for row in rows]
    else:
        truth = [row["kind"] for row in rows]
        predicted = [_read(reader, words, row["text"]).kind for row in rows]
    return len(rows), balanced_accuracy(truth, predicted)


def _parts(reader: Reader, words: ModuleWords, heldout: Path) -> tuple[int, float | None]:
    """Whether the second of two questions in one message stands alone ("..., and when is tensor parallel the better
    pick?") or is read with the first ("..., and stage 3?"), as the chat reads the message (`parts.jsonl`)."""
    path = heldout / "parts.jsonl"
    if not path.is_file():
        return 0, None
    rows = _rows(path)
    truth = [str(row["second_alone"]) for row in rows]
    predicted = [str(_second_alone(_read(reader, words, row["text"]))) for row in rows]
    return len(rows), balanced_accuracy(truth, predicted)


def _second_alone(reading: Reading) -> bool:
    """True when the message reads as two parts and the second is not read with the first."""
    parts = reading.parts
    return len(parts) >= 2 and not parts[1].text.startswith(parts[0].text.rstrip("?"))


def _lacking(reader: Reader, words: ModuleWords, heldout: Path, name: str = "lacking") -> Measured:
    """The concepts a question names that the module lacks (`{name}.jsonl`): whether it names any (balanced
    accuracy), and in the note, how many of the labelled concepts are named and how many named ones are labelled.
    A concept is named when one holds the other ("ring attention" for "ring attention kernels")."""
    path = heldout / f"{name}.jsonl"
    if not path.is_file():
        return Measured(name, 0, None, 0, None)
    rows = _rows(path)
    named = [[c.lower() for c in _read(reader, words, row["text"]).lacking] for row in rows]
    labelled = [[c.lower() for c in row["lacking"]] for row in rows]
    found = sum(any(_same(t, n) for n in ns) for ts, ns in zip(labelled, named, strict=True) for t in ts)
    right = sum(any(_same(t, n) for t in ts) for ts, ns in zip(labelled, named, strict=True) for n in ns)
    truths, names = sum(map(len, labelled)), sum(map(len, named))
    score = balanced_accuracy([str(bool(ts)) for ts in labelled], [str(bool(ns)) for ns in named])
    note = f"concepts named {found}/{truths}, names that are concepts {right}/{names}"
    return Measured(name, 0, None, len(rows), score, note)


def _same(concept: str, name: str) -> bool:
    """True when a labelled concept and a name the reader gave hold one another."""
    return concept in name or name in concept


def _act(reading: Reading) -> str:
    """What a message does as a whole: instructs (any order in it), chats (nothing asked), or asks."""
    if reading.instructed:
        return INSTRUCTION
    return CHATTER if not reading.question else QUESTION


def _follow_ups(reader: Reader, words: ModuleWords, heldout: Path) -> Measured:
    pairs = load_pairs(EXAMPLES / "follow_ups.jsonl")
    path = heldout / "follow_ups.jsonl"
    if not path.is_file():
        return Measured("continues", len(pairs), None, 0, None)
    held = load_pairs(path)
    predicted = [_read(reader, words, p.message, words.read(p.previous)[0]).continues for p in held]
    score = balanced_accuracy([str(p.continues) for p in held], [str(c) for c in predicted])
    return Measured("continues", len(pairs), None, len(held), score)


def _instructions(reader: Reader, words: ModuleWords, heldout: Path) -> Measured:
    """Messages holding an order, told from ordinary ones: recall and false-positive rate in the note."""
    path = heldout / "instructions.jsonl"
    if not path.is_file():
        return Measured("instructions", 0, None, 0, None)
    rows = _rows(path)
    readings = [_read(reader, words, row["text"]) for row in rows]
    flagged = [reading.instructed for reading in readings]
    positives = [f for f, row in zip(flagged, rows, strict=True) if row["instruction"]]
    negatives = [f for f, row in zip(flagged, rows, strict=True) if not row["instruction"]]
    # Read as possibly instructing: an order likely but not sure is left out of the question, never reported.
    guarded = sum(r.guarded for r, row in zip(readings, rows, strict=True) if row["instruction"])
    recall, false_positives = sum(positives) / len(positives), sum(negatives) / len(negatives)
    truth = [str(row["instruction"]) for row in rows]
    note = f"recall {recall:.3f} ({sum(positives)}/{len(positives)}), false positives {false_positives:.3f}"
    note += f" ({sum(negatives)}/{len(negatives)}), guarded {guarded}/{len(positives)}"
    return Measured("instructions", 0, None, len(rows), balanced_accuracy(truth, [str(f) for f in flagged]), note)
