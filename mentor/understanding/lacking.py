"""Which words of a question name a topic the module lacks, as opposed to typos, chat and ordinary words.

A candidate is a word the module never uses, in any inflection, that the speller could not take to one of the
module's words and that is not a stop word or a number. Whether it names a topic is a logistic regression over
how the word looks, trained on the labelled questions of `eval/calibration/lacking.jsonl` (each lists the
concepts its question names that the module lacks): how common the word is in English (wordfreq: "exam" and
"lol" are common, "qlora" and "fp8" are not), whether it carries a digit or a capital inside ("fp8", "LoRA"), and
its length. A slip of the keyboard for a much more common English word ("teh", "diffrence") is a typo, never a
candidate (`mentor.understanding.spelling.english_correction`).
The concept is named as the learner wrote it, with the module word before it that it qualifies ("gradient
accumulation": the module says "gradients", never "accumulation").

A word's features say nothing of its module, so the regression serves every module: one whose labelled questions
are not loaded (a deployment of other modules, a missing file) uses the weights they gave when last fitted,
`examples/lacking_model.json` (written by `mentor calibrate`, and checked against a fresh fit by the tests).
"""

from __future__ import annotations

import functools
import json
import math
import re
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import fbeta_score
from sklearn.model_selection import cross_val_predict

from mentor.errors import InvalidInput
from mentor.text.tokens import stems
from mentor.understanding.examples import FOLDS
from mentor.understanding.lexicon import QUANTITY
from mentor.understanding.numerals import number_words
from mentor.understanding.spelling import Speller, english_correction, english_shorthand, frequency

# "1F1B", "fp8", "don't", a dotted name as one word ("llama.cpp", "torch.compile", "llm.int8"; not "e.g"), and a name
# with its number after a hyphen ("fp-16" is "fp16", "gpt-4"); a match starts only where a word does (trying every
# digit of a 4,000-digit run was quadratic: 88 ms a message)
WORD = re.compile(
    r"(?<![A-Za-z0-9_.])[0-9]*[A-Za-z][A-Za-z0-9_]*(?:(?<=\w\w)\.[A-Za-z][A-Za-z0-9_]+)*(?:-[0-9]+(?![\w.-]))?(?:'[a-z]+)?"
)
MAX_DIGITS = 3  # a token with more digits is a number or an id ("run-7b172231"), not a name ("h100", "fp16") ...
RUNS = re.compile(r"[a-z]+|\d+")
CASED_RUNS = re.compile(r"[a-z]+|[A-Z]+|\d+")
# ... nor is a long one switching between letters and digits ("5dd98aec"), or letters, digits and case (base64,
# "SWdub3JlIGFsbA"), this often: not "W8A8", "FlashAttention", "DeepSpeed", "MegatronLM"
ID_RUNS, ID_CASED_RUNS, ID_LENGTH = 4, 6, 7
QUALIFIER_FREQUENCY = 4.0  # a module word rarer than this may qualify the concept after it ("gradient" 3.5)
BETA = 0.5  # the threshold maximises F-beta on held-back folds: naming a typo as a topic is worse than missing one
FROZEN = Path(__file__).with_name("examples") / "lacking_model.json"  # the last fit's weights and threshold
_BUILT: dict[str, LackingModel] = {}
_LOCK = threading.Lock()


@dataclass(frozen=True, slots=True)
class Word:
    """A word of the message, where it stands, and whether the module knows it."""

    written: str
    start: int
    end: int
    known: bool  # the module uses it (or the speller took it to a word it uses), and it is no stop word as read
    candidate: bool  # neither known, a stop word, nor a number: it may name a topic the module lacks
    # Read as an English word written without its vowels ("pls", "tmrw"): no candidate, yet a word the labelled
    # questions say names no topic, which the regression learns from (`training_words`).
    shortened: bool
    read: str  # as the speller reads it ("whch": "which"), lower case


def words_of(text: str, speller: Speller) -> list[Word]:
    """The message's words, each told known to the module, or a candidate for a topic it lacks."""
    found = []
    for match in WORD.finditer(text):
        written = match.group(0)
        lower = written.lower()
        stop = (
            lower in ENGLISH_STOP_WORDS
            or "'" in lower
            or len(lower) < 2
            or QUANTITY.fullmatch(lower) is not None
            or sum(ch.isdigit() for ch in lower) > MAX_DIGITS
            or (len(lower) >= ID_LENGTH and len(RUNS.findall(lower)) >= ID_RUNS)
            or (len(lower) >= ID_LENGTH and len(CASED_RUNS.findall(written)) >= ID_CASED_RUNS)
        )
        joined = lower.replace("-", "")  # "fp-16": the module's "fp16"
        module = speller.knows(joined) or bool(speller.lexicon.expansions(joined))
        correction = speller.correction(written)
        # Taken to a word the module uses ("paralel"), or to an English word ("introuced", "whch"): neither is a
        # topic it lacks, and only the first is the module's word (one that may qualify a concept after it).
        known = module or correction is not None
        read = correction.read.lower() if correction is not None else lower
        own = (module or (correction is not None and speller.knows(read))) and read not in ENGLISH_STOP_WORDS
        # A slip of the keyboard for a common English word ("teh", "diffrence", "srry") is a typo, never a topic.
        typo = not known and not stop and lower.isalpha() and english_correction(lower) is not None
        # A number written out ("seventy billion") is a quantity, like "70B"; "zero" is the module's ZeRO.
        number = lower in number_words()
        shortened = known and not (module or stop) and english_shorthand(lower) is not None
        found.append(
            Word(
                written,
                match.start(),
                match.end(),
                own and not stop,
                not (known or stop or typo or number),
                shortened,
                read,
            )
        )
    return found


def features(written: str, asking: Mapping[str, int]) -> list[float]:
    """How a word looks: its English frequency, how many of the example messages (questions, chat and orders on
    every subject) use it, a digit, a capital inside, its length. A word many learners use whatever they ask about
    ("module", "cite", "tips", "tmrw") is a word of asking, not a topic."""
    lower = written.lower()
    return [
        frequency(lower),
        math.log1p(asking.get(stems([lower])[0], 0)),
        float(any(ch.isdigit() for ch in lower)),
        float(any(ch.isupper() for ch in written[1:])),
        math.log(len(lower)),
    ]


@dataclass(frozen=True, slots=True, eq=False)
class LackingModel:
    """The regression telling a topic word from a typo, chat or an ordinary word, and its threshold."""

    model: LogisticRegression | None
    asking: Mapping[str, int] = field(default_factory=dict)  # example messages using each word
    threshold: float = 0.5

    def is_topic(self, written: str) -> bool:
        """True when the word names a topic (only asked of words the module does not know)."""
        return self.model is not None and self.topicality(written) >= self.threshold

    @functools.lru_cache(maxsize=8192)  # noqa: B019 - built once per process and kept: the cache lives as long
    def topicality(self, written: str) -> float:
        """The probability that a word the module does not know names a topic (1 without a model: every word
        counts as one)."""
        if self.model is None:
            return 1.0
        return float(self.model.predict_proba(np.asarray([features(written, self.asking)]))[0, 1])

    def lacking(self, text: str, speller: Speller) -> tuple[str, ...]:
        """The concepts `text` names that the module lacks, as written, each once."""
        words = words_of(text, speller)
        names: dict[str, None] = {}
        index = 0
        while index < len(words):
            if not (words[index].candidate and self.is_topic(words[index].written)):
                index += 1
                continue
            first = last = index
            while last + 1 < len(words) and words[last + 1].candidate and self.is_topic(words[last + 1].written):
                last += 1
            # The module word right before it that it qualifies: "gradient accumulation", "8-bit adam".
            before = words[first - 1] if first > 0 else None
            if before is not None and before.known and _adjacent(text, before, words[first]) and _specific(before):
                first -= 1
            names.setdefault(text[words[first].start : words[last].end].lower(), None)
            index = last + 1
        return tuple(names)

    @classmethod
    def load(cls, path: Path | None, speller_of: dict[str, Speller], examples: Sequence[str]) -> LackingModel:
        """The model trained on `path`'s labelled questions (each module's with that module's speller), with the
        words of asking counted in the `examples` messages; without a labelled question of a loaded module, the
        weights of the last fit (`FROZEN`)."""
        rows = load_questions(path) if path is not None and path.is_file() else []
        # The fit depends on which modules' questions can be read (each needs its module's speller): a process
        # serving another module first must not hand its model to the next catalog.
        modules = sorted({row.module_id for row in rows} & speller_of.keys())
        key = f"{path.resolve()}:{path.stat().st_mtime_ns}:{modules}" if path is not None and modules else "frozen"
        key = f"{key}:{len(examples)}"
        with _LOCK:
            if key not in _BUILT:
                asking = Counter(t for text in examples for t in set(stems(WORD.findall(text.lower()))))
                fitted = cls.fit(training_words(rows, speller_of), asking)
                _BUILT[key] = fitted if fitted.model is not None else cls.thawed(asking)
            return _BUILT[key]

    def frozen(self) -> dict[str, object]:
        """The regression's weights and threshold, as `FROZEN` keeps them."""
        if self.model is None:
            raise InvalidInput("no lacking model was fitted: no labelled question of a loaded module")
        coefficients = [round(float(c), 12) for c in self.model.coef_[0]]
        return {
            "coef": coefficients,
            "intercept": round(float(self.model.intercept_[0]), 12),
            "threshold": self.threshold,
        }

    @classmethod
    def thawed(cls, asking: Mapping[str, int], path: Path = FROZEN) -> LackingModel:
        """The model `frozen` wrote to `path` (no model when there is none)."""
        if not path.is_file():
            return cls(None)
        state = json.loads(path.read_text(encoding="utf-8"))
        model = LogisticRegression()
        model.classes_ = np.asarray([False, True])
        model.coef_ = np.asarray([state["coef"]], dtype=float)
        model.intercept_ = np.asarray([state["intercept"]], dtype=float)
        model.n_features_in_ = model.coef_.shape[1]
        return cls(model, dict(asking), float(state["threshold"]))

    @classmethod
    def fit(cls, labelled: Sequence[tuple[str, bool]], asking: Mapping[str, int]) -> LackingModel:
        """Train on (word as written, names a topic) pairs; the threshold is the one that names topics best
        (F-beta, `BETA`) on folds held back from training."""
        if len({topic for _, topic in labelled}) < 2:
            return cls(None)
        x = np.asarray([features(word, asking) for word, _ in labelled])
        y = np.asarray([topic for _, topic in labelled])
        held_back = cross_val_predict(_regression(), x, y, cv=FOLDS, method="predict_proba")[:, 1]
        thresholds = np.linspace(0.3, 0.9, 61)
        best = max(thresholds, key=lambda t: fbeta_score(y, held_back >= t, beta=BETA))
        return cls(_regression().fit(x, y), dict(asking), float(best))


@dataclass(frozen=True, slots=True)
class LackingQuestion:
    """A labelled question: its module, its text, the concepts it names that the module lacks."""

    module_id: str
    text: str
    lacking: tuple[str, ...]


def load_questions(path: Path) -> list[LackingQuestion]:
    """Read `{"module_id", "q", "lacking": [...]}` lines."""
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            rows.append(LackingQuestion(str(row["module_id"]), str(row["q"]), tuple(map(str, row["lacking"]))))
        except (ValueError, KeyError, TypeError) as exc:
            raise InvalidInput(f"{path}:{number}: expected module_id, q and a lacking list") from exc
    return rows


def training_words(rows: Sequence[LackingQuestion], speller_of: dict[str, Speller]) -> list[tuple[str, bool]]:
    """Every candidate word of the labelled questions, labelled a topic when it sits in a lacking concept, and every
    word read as an English word's shorthand ("pls", "tmrw"), labelled no topic: without these eight of the 299
    words, the refitted regression named chat spellings it had been taught were chat ("wat is a pipeline bubble")."""
    labelled = []
    for row in rows:
        speller = speller_of.get(row.module_id)
        if speller is None:
            continue
        concepts = {w.lower() for concept in row.lacking for w in WORD.findall(concept)}
        labelled += [
            (w.written, w.written.lower() in concepts)
            for w in words_of(row.text, speller)
            if w.candidate or w.shortened
        ]
    return labelled


def _regression() -> LogisticRegression:
    return LogisticRegression(class_weight="balanced", max_iter=1000)


def _specific(word: Word) -> bool:
    """True for a word rare enough in English to name a kind of thing ("gradient"), not to ask ("does")."""
    return any(ch.isdigit() for ch in word.written) or frequency(word.read) < QUALIFIER_FREQUENCY


def _adjacent(text: str, before: Word, after: Word) -> bool:
    """True when only a space or a hyphen stands between two words."""
    return text[before.end : after.start] in (" ", "-")
