"""The decisions the reader makes, each built once per process from its labelled examples (package data, general
across subjects: no module's wording) and the embedder:

- `acts`: what a clause does: asks (question), tries to instruct the mentor (instruction), or chats (chatter);
- `kinds`: the kind of answer a question wants (`mentor.understanding.reading.KINDS`);
- `subject`: whether a question asks about the module itself ("who is this course for?", "what does this chapter
  draw on?") or about a subject it names ("who painted the Mona Lisa?"): only the former is answered from what
  describes the module, whatever retrieval finds;
- `standalone`: whether a message can be understood on its own ("self") or leans on the turn before ("depends");
- `second_parts`: whether a message's second question is read on its own or with its first: a classifier like
  `standalone`, learned from its examples and second questions joined to a first (`second_parts.jsonl`);
- `continues`: whether a message continues the previous question: a regression over how much it leans on the turn
  before (a classifier like `standalone`, learned from its examples and the pairs' messages) and how close it is to
  it, trained on labelled pairs of consecutive messages;
- `social`: what a message of chat alone does socially: greets, thanks, takes leave, or none of these ("other":
  small talk, or a request the module has nothing for); the first three get a short kind reply, not the redirect;
- `figures`: what a figure the learner writes is to the question: the answer they want checked ("so it comes to
  112 GB, right?": "states"), a budget asked about ("is 500B tokens enough?": "suffices"), or neither ("why does it
  need 112 GB?", "i have 3 kg of flour, how many loaves?": "other");
- `lacking`: which words name a topic the module lacks (`mentor.understanding.lacking`, from the module's
  calibration questions).
"""

from __future__ import annotations

import hashlib
import json
import random
import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression

from mentor.embeddings import Embedder, embed_cached
from mentor.errors import InvalidInput
from mentor.understanding.examples import Classifier, Labelled, load_labelled
from mentor.understanding.lacking import LackingModel
from mentor.understanding.reading import CHATTER, QUESTION
from mentor.understanding.words import ModuleWords

EXAMPLES = Path(__file__).parent / "examples"
MIXES = 200  # questions made from the examples: chat beside a question
JOINTS = (" ", ", ", ": ", " - ", "... ")  # marks alone: no word is written into an example
OPENER_SHARE = 0.01  # a word opening this share of the example questions may open a question joined by no mark
_BUILT: dict[tuple[str, int], ContinuesModel] = {}  # one per pair set and embedder, per process
_LOCK = threading.Lock()


@dataclass(frozen=True, slots=True)
class Pair:
    """Two consecutive learner messages, and whether the second continues the first (a module's pairs name it)."""

    previous: str
    message: str
    continues: bool
    module_id: str = ""
    apart: bool = False  # the module names none of the message's terms beside the previous question's (`_read`)


def load_pairs(path: Path) -> list[Pair]:
    """Read `{"previous", "message", "continues"}` lines (and `module_id`, for a module's calibration pairs)."""
    pairs = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            pair = Pair(str(row["previous"]), str(row["message"]), bool(row["continues"]), row.get("module_id", ""))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise InvalidInput(f"{path}:{number}: expected previous, message and continues") from exc
        pairs.append(pair)
    return pairs


@dataclass(frozen=True, slots=True, eq=False)
class ContinuesModel:
    """Does a message continue the question before it? A regression over how much it leans back, how unusually
    close it is to that question, and whether the module keeps their terms apart (`ModuleWords.apart`), alone and
    with the leaning: a term alone leans back by its form ("awq?" as much as "why?"), so what it is about decides:
    "awq?" continues "does gptq need retraining?" (one sentence of the module answers both) and starts a new topic
    after "expected loss for 7B on 1T tokens?".

    Closeness is the similarity to the previous question in standard deviations above the message's similarity to
    the example pairs' earlier questions: a message of one term is close to little, and how far one question stands
    out from questions on every subject says more than its raw similarity."""

    standalone: Classifier
    model: LogisticRegression
    background: np.ndarray = field(repr=False)  # the example pairs' earlier questions, a unit vector a row (float64)

    def features(self, text: str, message: np.ndarray, previous: np.ndarray, apart: bool) -> list[float]:
        """P(the message leans on the turn before), its closeness to the previous question, `apart`, and `apart`
        times the leaning."""
        depends = self.standalone.probability(text, message, "depends")
        close = float(_closeness(message[None, :], previous[None, :], self.background)[0])
        return [depends, close, float(apart), depends * float(apart)]

    def probability(self, text: str, message: np.ndarray, previous: np.ndarray, apart: bool = False) -> float:
        """The probability that the message (`text`, its vector `message`) continues the `previous` question;
        `apart` when the module names none of its terms beside one of the previous question's."""
        return float(self.model.predict_proba(np.asarray([self.features(text, message, previous, apart)]))[0, 1])

    @classmethod
    def fit(cls, standalone: Classifier, vectors: np.ndarray, pairs: list[Pair]) -> ContinuesModel:
        """Train on labelled pairs; `vectors` holds each pair's previous then message vector, in order."""
        messages = [pair.message for pair in pairs]
        depends = standalone.probabilities(messages, vectors[1::2])[:, standalone.labels.index("depends")]
        background = np.unique(vectors[0::2], axis=0).astype(np.float64)  # cast once, not on every follow-up
        close = _closeness(vectors[1::2], vectors[0::2], background)
        apart = np.asarray([pair.apart for pair in pairs], dtype=np.float64)
        x = np.column_stack([depends, close, apart, depends * apart])
        model = LogisticRegression(class_weight="balanced").fit(x, [p.continues for p in pairs])
        return cls(standalone, model, background)

    @classmethod
    def build(
        cls, pairs: list[Pair], standalone: Classifier, embedder: Embedder, *, cache_dir: Path | None
    ) -> ContinuesModel:
        """The model of labelled pairs (their texts read as the reader reads them), built once per set (texts,
        labels and whether the module keeps them apart) and embedder in a process."""
        texts = [text for p in pairs for text in (p.previous, p.message)]
        rows = [f"{p.previous}\x1f{p.message}\x1f{p.continues:d}{p.apart:d}" for p in pairs]
        key = (hashlib.sha256("\x1e".join(rows).encode()).hexdigest(), id(embedder))
        with _LOCK:
            built = _BUILT.get(key)
            if built is None:
                vectors = embed_cached(embedder, texts, cache_dir, kind="examples-follow-ups")
                built = _BUILT[key] = cls.fit(standalone, vectors, pairs)
        return built


def _closeness(messages: np.ndarray, previous: np.ndarray, background: np.ndarray) -> np.ndarray:
    """Each message's similarity to its previous question, in standard deviations above its mean similarity to the
    `background` questions (float64)."""
    scores = messages.astype(np.float64) @ background.T
    own = np.einsum("ij,ij->i", messages.astype(np.float64), previous.astype(np.float64))
    return (own - scores.mean(axis=1)) / np.maximum(scores.std(axis=1), 1e-6)


def _read(pair: Pair, words: Mapping[str, ModuleWords]) -> Pair:
    """A module's pair as the reader reads it: spelling corrected toward the module, its glossary spelled out, and
    whether the module keeps their terms apart."""
    module = words[pair.module_id]
    previous, message = module.read(pair.previous)[0], module.read(pair.message)[0]
    return replace(pair, previous=previous, message=message, apart=module.apart(message, previous))


def act_examples(examples: Path, *, mixes: int = MIXES, seed: int = 0) -> list[Labelled]:
    """The clause examples, every example question of the other files (asking, each), and chat joined to a question
    by marks alone (a question: "sorry if dumb q but ...", "... exam tmrw lol").

    Two more augmentations were tried and dropped, measured on the robustness sweeps' order-like wrappers (share of
    messages the clause decision reads as possibly instructing, at 0.5): an order joined to a question as a label of
    its own 0.546 (it took "context: question" for "order: question"), halves of the examples 0.046, neither 0.023.
    """
    rows = load_labelled(examples / "acts.jsonl", "act")
    asked = [r.text for name in ("kinds", "standalone") for r in load_labelled(examples / f"{name}.jsonl", "label"
             if name == "standalone" else "kind")]  # fmt: skip
    rows += [Labelled(text, QUESTION) for text in asked]
    chat = [r.text.rstrip(" .!") for r in rows if r.label == CHATTER]
    questions = [r.text for r in rows if r.label == QUESTION]
    rng = random.Random(seed)
    for _ in range(mixes):
        a, q, joint = rng.choice(chat), rng.choice(questions), rng.choice(JOINTS)
        rows.append(Labelled(f"{a}{joint}{q}" if rng.random() < 0.7 else f"{q}{joint}{a}", QUESTION))
    return rows


def leaning_examples(standalone: list[Labelled], pairs: list[Pair]) -> list[Labelled]:
    """The examples of messages that stand alone or lean on the turn before, and the message of every general
    example pair: one that starts a new topic stands alone, one that continues leans on the question before it.
    Without the pairs, chat opening a message read as leaning ("sorry if dumb q but who won the World Cup?" after a
    question on ZeRO: a follow-up), since the standalone examples' chat openers all lean."""
    return standalone + [Labelled(pair.message, "depends" if pair.continues else "self") for pair in pairs]


def second_part_examples(standalone: list[Labelled], examples: Path) -> list[Labelled]:
    """The standalone examples and second questions joined to a first by "and", "also", "but", read without that
    word (`without_opener`: it says nothing of what is asked): one leans on the first only when it does not say what
    it is about ("..., and when is a heap the better choice?" stands alone; "..., and why does that happen?" leans).
    The standalone examples' openers all lean."""
    openers = second_openers(examples)
    seconds = load_labelled(examples / "second_parts.jsonl", "label")
    return standalone + [Labelled(without_opener(row.text, openers), row.label) for row in seconds]


def second_openers(examples: Path) -> frozenset[str]:
    """The words the example second questions open with (`opening_words` of `second_parts.jsonl`)."""
    return opening_words([row.text for row in load_labelled(examples / "second_parts.jsonl", "label")])


def without_opener(text: str, openers: frozenset[str]) -> str:
    """`text` without the first word joining it to a question before it, when it is one of the `openers`."""
    head, _, rest = text.partition(" ")
    return rest if rest and head.lower().strip(",") in openers else text


def opening_words(questions: list[str]) -> frozenset[str]:
    """The first words of at least `OPENER_SHARE` of the `questions`, lower case."""
    first = Counter(text.split()[0].lower().strip(",?") for text in questions if text.split())
    return frozenset(word for word, count in first.items() if count >= OPENER_SHARE * len(questions))


@dataclass(frozen=True, slots=True, eq=False)
class Decisions:
    """Every decision the reader makes, built once."""

    acts: Classifier
    kinds: Classifier
    standalone: Classifier
    second_parts: Classifier  # whether a message's second question is read with its first
    subject: Classifier
    continues: ContinuesModel
    lacking: LackingModel
    social: Classifier
    figures: Classifier  # what a figure the learner writes is to the question (`reading.STATES`, `SUFFICES`)
    # The words the example second questions open with ("and", "also", "but", "plus"): where a second question may
    # begin when no mark sets it apart from the first.
    openers: frozenset[str] = frozenset()

    @classmethod
    def load(
        cls,
        embedder: Embedder,
        *,
        words: Mapping[str, ModuleWords],
        lacking_examples: Path | None,
        follow_up_examples: Path | None,
        cache_dir: Path | None = None,
        examples: Path = EXAMPLES,
    ) -> Decisions:
        """Build every decision from the example files in `examples`, and the modules' calibration files (the
        concepts their questions name that they lack; their follow-up pairs), read with each module's words."""
        acts = Classifier.build("acts", act_examples(examples), embedder, cache_dir=cache_dir)
        kinds_rows = load_labelled(examples / "kinds.jsonl", "kind")
        kinds = Classifier.build("kinds", kinds_rows, embedder, cache_dir=cache_dir)
        standalone_rows = load_labelled(examples / "standalone.jsonl", "label")
        standalone = Classifier.build("standalone", standalone_rows, embedder, cache_dir=cache_dir)
        second_rows = second_part_examples(standalone_rows, examples)
        second_parts = Classifier.build("second_parts", second_rows, embedder, cache_dir=cache_dir)
        subject_rows = load_labelled(examples / "subject.jsonl", "subject")
        subject = Classifier.build("subject", subject_rows, embedder, cache_dir=cache_dir)
        social_rows = load_labelled(examples / "social.jsonl", "social")
        social = Classifier.build("social", social_rows, embedder, cache_dir=cache_dir)
        figures_rows = load_labelled(examples / "figures.jsonl", "label")
        figures = Classifier.build("figures", figures_rows, embedder, cache_dir=cache_dir)
        general = load_pairs(examples / "follow_ups.jsonl")
        # A term alone ("awq?") continues a question about its sibling and starts a new topic after another: what
        # it is about decides, not how it is written, so these pairs teach the follow-up decision only.
        pairs = [*general, *load_pairs(examples / "follow_ups_terms.jsonl")]
        if follow_up_examples is not None and follow_up_examples.is_file():
            pairs += [_read(pair, words) for pair in load_pairs(follow_up_examples) if pair.module_id in words]
        # Whether a message leans on the turn before, for the follow-up decision: learned from the standalone
        # examples and the example pairs' messages too. The parts of one message keep `standalone` alone: with the
        # pairs' messages, "what does ZeRO stage 1 shard, and why is bf16 ...?" read as one part.
        leaning_rows = leaning_examples(standalone_rows, general)
        leaning = Classifier.build("leaning", leaning_rows, embedder, cache_dir=cache_dir)
        continues = ContinuesModel.build(pairs, leaning, embedder, cache_dir=cache_dir)
        messages = [row.text for row in act_examples(examples, mixes=0)]
        spellers = {module_id: w.speller for module_id, w in words.items()}
        lacking = LackingModel.load(lacking_examples, spellers, messages)
        openers = second_openers(examples)
        return cls(acts, kinds, standalone, second_parts, subject, continues, lacking, social, figures, openers)
