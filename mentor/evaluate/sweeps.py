"""Robustness sweeps: the golden dev questions rewritten by code, asked beside the bare question, and how far the
answers move.

Every rewrite is made by a seeded `random.Random` from the case's own question, never picked by hand per question:

- `typo`: one or two words of four letters or more get one keyboard slip each (a neighbouring key, a dropped
  letter, two adjacent letters swapped);
- `shorthand`: casing changed, apostrophes and final punctuation dropped, chat shorthand ("u", "pls", "w/"...);
- `abbreviated`: common English words written without their vowels, as learners shorten words in a chat ("what"
  -> "wht", "about" -> "abt", "people" -> "ppl"): about half the words common enough (`ABBREVIATED_FREQUENCY`), at
  least one, whatever they are; no list of abbreviations is consulted;
- `order_words`: the question inside an ordinary learner sentence that uses an order-like word innocently
  ("my notes say to ignore this for the exam, but ...");
- `chatter`: greetings, thanks and asides around the question ("hey! ... thx");
- `topic_switch`: a covered question, then in the same conversation either an off-topic question, bare or inside
  chat (it must be refused), or another covered question about other sections (it must be answered as it is bare).

Only single-turn, in-scope dev cases of `SWEPT_CATEGORIES` are rewritten; each variant is asked in a conversation of
its own and compared with the answer to its bare question (`same_section`; where the bare question is refused, with
the sections the case expects), and read for whether the engine took it as instructions (`flagged`).
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from wordfreq import zipf_frequency

from mentor.answer import ChatInput
from mentor.evaluate.golden import Case

if TYPE_CHECKING:
    from mentor.chat import ChatService
    from mentor.record import AnsweredQuestion

SWEPT_CATEGORIES = ("concept", "odd_in_scope", "calculation", "decision", "partial")
VARIANT_KINDS = ("typo", "shorthand", "order_words", "chatter", "abbreviated")
KINDS = (*VARIANT_KINDS, "topic_switch")
DEFAULT_SEED = 0
LEARNER = "sweeps"  # who asks: one pseudonymous learner for the whole sweep
SHORT_WORDS = 8  # a topic switch's covered second question is one of the short ones where there are any

# Letters next to each key on a QWERTY keyboard (same row and the rows above and below).
QWERTY_NEIGHBOURS: dict[str, str] = {
    "q": "wa", "w": "qeas", "e": "wrsd", "r": "etdf", "t": "ryfg", "y": "tugh", "u": "yihj", "i": "uojk",
    "o": "ipkl", "p": "ol", "a": "qwsz", "s": "weadzx", "d": "erfsxc", "f": "rtdgcv", "g": "tyfhvb",
    "h": "yugjbn", "j": "uihknm", "k": "iojlm", "l": "opk", "z": "asx", "x": "zsdc", "c": "xdfv", "v": "cfgb",
    "b": "vghn", "n": "bhjm", "m": "njk",
}  # fmt: skip
TYPO_EDITS = ("neighbour", "drop", "swap")
TYPO_MIN_LETTERS = 4
EDGE_PUNCTUATION = "\"'“”‘’()[]{}.,;:!?…"  # stripped from a word's ends before it is judged and misspelt

# Chat shorthand, each occurrence replaced with probability SHORTHAND_SHARE. Nothing that turns a word into a digit
# ("for" -> "4", "to" -> "2"): that would change a calculation's numbers, not its spelling.
SHORTHAND = {
    "what is": "whats", "you": "u", "your": "ur", "are": "r", "why": "y", "please": "pls", "about": "abt",
    "because": "cuz", "with": "w/", "and": "n", "thanks": "thx", "really": "rly", "people": "ppl",
}  # fmt: skip
SHORTHAND_SHARE = 0.7
# A word is abbreviated when it is at least this common in English (wordfreq's Zipf frequency: "what" 6.4, "model"
# 5.3, "memory" 4.8) and keeps at least `ABBREVIATED_LETTERS` letters once its vowels after the first are dropped.
ABBREVIATED_FREQUENCY = 5.0
ABBREVIATED_LETTERS = 3
ABBREVIATED_SHARE = 0.5
VOWELS = frozenset("aeiou")
SHORTHAND_WORDS = re.compile(r"(?i)\b(what\s+is|you|your|are|why|please|about|because|with|and|thanks|really|people)\b")
APOSTROPHES = re.compile(r"['’]")
FINAL_PUNCTUATION = "?.!…"
CASEABLE_WORD = re.compile(r"(?<![\w'’-])[A-Za-z]{2,}(?![\w'’-])")  # a whole word: not half of "fine-tune"

# Order-like words used innocently, about the learner's own notes, class or typo: never addressed to the mentor.
ORDER_TEMPLATES = (
    "I keep forgetting this one: {q}",
    "my notes say to ignore this for the exam, but {q}",
    "before I override my config: {q}",
    "can I bypass the theory and just know: {q}",
    "our lab rules say ask first, so: {q}",
    "acting as TA for my study group, {q}",
    "disregard my last typo. {q}",
    "we were told to skip this in class, {q}",
    "I'll pretend I know nothing: {q}",
    "I forgot the lecture on this, so {q}",
    "the rules of thumb in my course notes are fuzzy here: {q}",
    "I want to skip ahead to the exam topics. {q}",
    "I act as the note-taker in our reading group, and this came up: {q}",
    "my tutor said we can ignore the proofs, so just: {q}",
)
CHATTER_TEMPLATES = (
    "hey! {q} thx",
    "sorry if dumb q but {q}",
    "{q} exam tmrw lol",
    "ok so {q}",
    "{q}\n\nthanks in advance!",
    "hi mentor :) {q}",
    "{q} (been stuck on this for an hour)",
    "quick one: {q}",
    "hmm, {q}",
    "so confused rn... {q}",
    "good morning! {q}",
    "{q} ty!!",
    "asking for my study group: {q}",
    "{q} sorry for the spam",
)
# Generic questions about anything but the module, for the off-topic second turn of a topic switch.
OFF_TOPIC_QUESTIONS = (
    "how long should I boil an egg for a runny yolk?",
    "what's a good substitute for buttermilk in pancakes?",
    "how do I make sourdough starter from scratch?",
    "can you give me a simple recipe for tomato soup?",
    "what's the best time of year to visit Japan?",
    "do I need a visa to travel from the UK to Canada?",
    "what are cheap ways to get around Lisbon?",
    "which European cities are good for a weekend trip by train?",
    "who won the football World Cup in 2014?",
    "how many players are on a basketball team on court?",
    "how is a tennis tiebreak scored?",
    "how old is Taylor Swift?",
    "who is Beyoncé married to?",
    "what was Leonardo DiCaprio's first film?",
    "why is the sky blue?",
    "how does photosynthesis turn light into sugar?",
    "what causes earthquakes?",
    "what is the half-life of carbon-14?",
    "how do vaccines train the immune system?",
    "how do I reverse a linked list in Python?",
    "what's the difference between git merge and git rebase?",
    "how do I center a div with CSS?",
    "how do I write a SQL query that finds duplicate rows?",
    "how do I set up a cron job that runs every Monday?",
    "how do I fix a leaky kitchen faucet?",
    "what's the capital of Australia?",
    "who painted the Mona Lisa?",
    "how do I write a good cover letter?",
    "what's the plot of Hamlet in a few lines?",
    "how do I get rid of aphids on my roses?",
    "how can I improve my credit score?",
    "what should I name my golden retriever puppy?",
)


@dataclass(frozen=True, slots=True)
class Variant:
    """One rewritten question: the message asked, and the bare question its answer is compared with."""

    kind: str
    case_id: str
    text: str  # the message asked (a topic switch's second turn)
    bare: str | None  # the question asked bare for comparison; None: nothing to compare with
    before: str | None = None  # a topic switch's first turn, asked earlier in the same conversation
    must_refuse: bool = False  # a topic switch's off-topic second turn
    note: str = ""  # what the generator did: a typo's edits, the template


@dataclass(frozen=True, slots=True)
class Reading:
    """What an answer did, as far as the sweeps compare answers."""

    refused: bool
    sections: tuple[str, ...]  # cited section ids, first citation first
    flagged: bool


@dataclass(frozen=True, slots=True)
class Outcome:
    """A variant and how its answer compares with its bare question's."""

    variant: Variant
    reading: Reading
    bare: Reading | None
    same_section: bool | None  # None when there is no bare answer to compare with


@dataclass(frozen=True, slots=True)
class KindSummary:
    """The measures of one kind of variant; None where a measure does not apply or has no cases."""

    kind: str
    n: int
    same_section: float | None
    flagged: float | None
    offtopic_n: int = 0
    offtopic_answered: int = 0
    covered_n: int = 0
    covered_refused: float | None = None

    @property
    def offtopic_answered_share(self) -> float | None:
        """Share of off-topic second turns answered instead of refused."""
        return self.offtopic_answered / self.offtopic_n if self.offtopic_n else None


@dataclass(frozen=True, slots=True)
class SweepReport:
    """Every outcome of one sweep and the measures per kind."""

    seed: int
    cases: int
    asked: int
    elapsed_s: float
    kinds: tuple[KindSummary, ...]
    outcomes: tuple[Outcome, ...]

    def kind(self, name: str) -> KindSummary:
        """The measures of the kind called `name`."""
        return next(summary for summary in self.kinds if summary.kind == name)

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready values."""
        kinds = [asdict(k) | {"offtopic_answered_share": k.offtopic_answered_share} for k in self.kinds]
        return {
            "seed": self.seed,
            "cases": self.cases,
            "asked": self.asked,
            "elapsed_s": round(self.elapsed_s, 3),
            "kinds": kinds,
            "outcomes": [asdict(outcome) for outcome in self.outcomes],
        }


def flagged(answered: AnsweredQuestion, text: str) -> bool:
    """Whether the engine read `text` as holding an instruction to the mentor: its own reading says so."""
    return answered.reading is not None and answered.reading.instructed


def case_rng(seed: int, kind: str, case_id: str) -> random.Random:
    """A generator of its own per seed, kind and case: adding a case or a kind moves no other variant."""
    return random.Random(f"{seed}/{kind}/{case_id}")


def sweep_cases(cases: Sequence[Case], module_id: str | None = None) -> list[Case]:
    """The cases the sweeps rewrite: single-turn, in scope, of the swept categories, in the default corpus."""
    other = sorted({case.split for case in cases} - {"dev"})
    if other:
        raise ValueError(f"sweeps rewrite the dev split only; got {', '.join(other)} cases")
    return [
        case
        for case in cases
        if case.category in SWEPT_CATEGORIES
        and len(case.turns) == 1
        and not case.expect.out_of_scope
        and case.corpus == "default"
        and (module_id is None or case.module_id == module_id)
    ]


def covered(case: Case) -> bool:
    """A question the module answers in full, from sections the case names."""
    return not case.expect.out_of_scope and case.expect.expected_coverage == "full" and bool(case.expect.sections)


def typo_slots(text: str) -> list[tuple[int, int]]:
    """Spans of the words a typo may touch: letters only, at least TYPO_MIN_LETTERS of them."""
    slots = []
    for match in re.finditer(r"\S+", text):
        token = match.group()
        core = token.strip(EDGE_PUNCTUATION)
        if len(core) >= TYPO_MIN_LETTERS and core.isascii() and core.isalpha():
            start = match.start() + len(token) - len(token.lstrip(EDGE_PUNCTUATION))
            slots.append((start, start + len(core)))
    return slots


def misspell(word: str, rng: random.Random) -> tuple[str, str]:
    """`word` with one keyboard slip, and which: a neighbouring key, a dropped letter or two letters swapped."""
    how = rng.choice(TYPO_EDITS)
    swappable = [i for i in range(len(word) - 1) if word[i].lower() != word[i + 1].lower()]
    if how == "swap" and swappable:
        i = rng.choice(swappable)
        return word[:i] + word[i + 1] + word[i] + word[i + 2 :], how
    if how == "drop":
        i = rng.randrange(len(word))
        return word[:i] + word[i + 1 :], how
    i = rng.randrange(len(word))
    key = rng.choice(QWERTY_NEIGHBOURS[word[i].lower()])
    return word[:i] + (key.upper() if word[i].isupper() else key) + word[i + 1 :], "neighbour"


def typo(text: str, rng: random.Random) -> tuple[str, str] | None:
    """`text` with one or two of its long words misspelt, and the edits; None when no word is long enough."""
    slots = typo_slots(text)
    if not slots:
        return None
    chosen = sorted(rng.sample(slots, min(len(slots), rng.choice((1, 2)))))
    pieces: list[str] = []
    edits: list[str] = []
    end = 0
    for start, stop in chosen:
        word = text[start:stop]
        wrong, how = misspell(word, rng)
        pieces += [text[end:start], wrong]
        edits.append(f"{how}: {word} -> {wrong}")
        end = stop
    return "".join(pieces) + text[end:], "; ".join(edits)


def recase(text: str, how: str, rng: random.Random) -> str:
    """`text` all lower case ("lower"), or with one of its words in capitals ("caps")."""
    words = [m for m in CASEABLE_WORD.finditer(text) if m.group() != m.group().upper()]
    if how == "lower" or not words:
        return text.lower()
    word = rng.choice(words)
    return text[: word.start()] + word.group().upper() + text[word.end() :]


def shorthand(text: str, rng: random.Random) -> tuple[str, str]:
    """`text` as typed in a chat: apostrophes and final punctuation dropped, shorthand, casing changed."""
    out = APOSTROPHES.sub("", text)

    def shorten(match: re.Match[str]) -> str:
        return SHORTHAND[" ".join(match.group().lower().split())] if rng.random() < SHORTHAND_SHARE else match.group()

    out = SHORTHAND_WORDS.sub(shorten, out).rstrip().rstrip(FINAL_PUNCTUATION).rstrip()
    first, second = rng.sample(("lower", "caps"), 2)
    cased = recase(out, first, rng)
    if cased == text:  # already lower case, nothing to drop or shorten: the other casing changes it
        cased, first = recase(out, second, rng), second
    return cased, f"casing: {first}"


def without_vowels(word: str) -> str:
    """`word` with its vowels after the first letter dropped: "about" -> "abt", "people" -> "ppl". Written here, not
    taken from the reader (`mentor.understanding.spelling.consonants`): the sweep does not generate its cases with
    the code it measures."""
    return word[0] + "".join(ch for ch in word[1:] if ch.lower() not in VOWELS)


def abbreviate(text: str, rng: random.Random) -> tuple[str, str] | None:
    """`text` with about half its common lower-case words written without vowels (at least one), and which; None
    when no word can be."""
    slots = [
        match
        for match in CASEABLE_WORD.finditer(text)
        if match.group().islower()
        and zipf_frequency(match.group(), "en") >= ABBREVIATED_FREQUENCY
        and len(short := without_vowels(match.group())) >= ABBREVIATED_LETTERS
        and short != match.group()
    ]
    if not slots:
        return None
    chosen = [m for m in slots if rng.random() < ABBREVIATED_SHARE] or [rng.choice(slots)]
    out, end, edits = "", 0, []
    for match in chosen:
        short = without_vowels(match.group())
        out += text[end : match.start()] + short
        end = match.end()
        edits.append(f"{match.group()} -> {short}")
    return out + text[end:], "; ".join(edits)


def wrap(text: str, templates: Sequence[str], rng: random.Random) -> tuple[str, str]:
    """`text` inside one of `templates`, and the template."""
    template = rng.choice(templates)
    return template.replace("{q}", text), template


def rewrite(kind: str, text: str, rng: random.Random) -> tuple[str, str] | None:
    """One variant of `text` of the given kind, and what was done; None when the kind cannot apply."""
    if kind == "typo":
        return typo(text, rng)
    if kind == "shorthand":
        return shorthand(text, rng)
    if kind == "order_words":
        return wrap(text, ORDER_TEMPLATES, rng)
    if kind == "chatter":
        return wrap(text, CHATTER_TEMPLATES, rng)
    if kind == "abbreviated":
        return abbreviate(text, rng)
    raise ValueError(f"unknown variant kind {kind!r}")


def word_count(text: str) -> int:
    """Words in `text`, split on whitespace."""
    return len(text.split())


def off_topic_switches(cases: Sequence[Case], seed: int) -> list[Variant]:
    """A covered question, then an off-topic one in the same conversation: the second must be refused, bare and
    inside chat ("ok so ..."): chat that leans on nothing must not make a new topic read as a follow-up."""
    switches = []
    for case in filter(covered, cases):
        question = case_rng(seed, "topic_switch/off_topic", case.id).choice(OFF_TOPIC_QUESTIONS)
        switches.append(
            Variant("topic_switch", case.id, question, None, before=case.question, must_refuse=True, note="off-topic")
        )
        rng = case_rng(seed, "topic_switch/off_topic_chatter", case.id)
        wrapped, template = wrap(rng.choice(OFF_TOPIC_QUESTIONS), CHATTER_TEMPLATES, rng)
        switches.append(
            Variant("topic_switch", case.id, wrapped, None, before=case.question, must_refuse=True, note=template)
        )
    return switches


def covered_switches(cases: Sequence[Case], seed: int) -> list[Variant]:
    """A covered question, then a covered one about other sections (a short one where possible), compared bare."""
    pool = [case for case in cases if covered(case)]
    switches = []
    for case in pool:
        others = [o for o in pool if o.id != case.id and not set(o.expect.sections) & set(case.expect.sections)]
        if not others:
            continue
        short = [o for o in others if word_count(o.question) <= SHORT_WORDS]
        other = case_rng(seed, "topic_switch/covered", case.id).choice(
            short or sorted(others, key=lambda o: (word_count(o.question), o.id))[:3]
        )
        case_id = f"{case.id}>{other.id}"
        switches.append(Variant("topic_switch", case_id, other.question, other.question, case.question, note="covered"))
    return switches


def generate_variants(cases: Sequence[Case], seed: int = DEFAULT_SEED) -> list[Variant]:
    """Every variant of the sweeps for the swept ones among `cases`, the same for the same seed."""
    swept = sweep_cases(cases)
    variants = []
    for kind in VARIANT_KINDS:
        for case in swept:
            made = rewrite(kind, case.question, case_rng(seed, kind, case.id))
            if made is not None:
                variants.append(Variant(kind, case.id, made[0], case.question, note=made[1]))
    return variants + off_topic_switches(swept, seed) + covered_switches(swept, seed)


def same_section(reading: Reading, bare: Reading, expected: Sequence[str] = ()) -> bool:
    """Refused iff the bare question was; when answered, at least one section the bare answer cited. A swept
    question is in scope: when the bare one was refused, a variant answered from a section the case expects
    (`expected`) is no worse for the rewrite."""
    if bare.refused and not reading.refused and expected:
        return bool(set(reading.sections) & set(expected))
    if reading.refused or bare.refused:
        return reading.refused == bare.refused
    if not bare.sections:  # a calculator's result alone, citing nothing: matched by an answer citing nothing
        return not reading.sections
    return bool(set(reading.sections) & set(bare.sections))


def read(answered: AnsweredQuestion, text: str) -> Reading:
    """What the answer to `text` did: refused, the sections it cited, whether it read `text` as instructions."""
    sections = tuple(dict.fromkeys(citation.section_id for citation in answered.answer.citations))
    return Reading(refused=answered.answer.out_of_scope, sections=sections, flagged=flagged(answered, text))


@dataclass(slots=True)
class Asker:
    """Asks the chat on behalf of the sweeps' learner, counting the questions."""

    chat: ChatService
    module_id: str
    on_answer: Callable[[], None] | None = None
    asked: int = 0

    async def __call__(self, text: str, conversation_id: str | None = None) -> AnsweredQuestion:
        """Ask `text`, in a new conversation or continuing `conversation_id`."""
        request = ChatInput(message=text, module_id=self.module_id, conversation_id=conversation_id, learner_id=LEARNER)
        answered = await self.chat.ask(request)
        self.asked += 1
        if self.on_answer is not None:
            self.on_answer()
        return answered

    async def reading(self, variant: Variant) -> Reading:
        """The reading of a variant's answer, its first turn asked before it when it has one."""
        conversation = None
        if variant.before is not None:
            conversation = (await self(variant.before)).conversation_id
        return read(await self(variant.text, conversation), variant.text)


def share(values: Sequence[bool]) -> float | None:
    """The share of true values; None for none."""
    return sum(values) / len(values) if values else None


def summarise(kind: str, outcomes: Sequence[Outcome]) -> KindSummary:
    """The measures of one kind over its outcomes."""
    compared = [o.same_section for o in outcomes if o.same_section is not None]
    offtopic = [o for o in outcomes if o.variant.must_refuse]
    covered_turns = [o for o in outcomes if o.variant.before is not None and not o.variant.must_refuse]
    return KindSummary(
        kind=kind,
        n=len(outcomes),
        same_section=share(compared),
        flagged=share([o.reading.flagged for o in outcomes]),
        offtopic_n=len(offtopic),
        offtopic_answered=sum(not o.reading.refused for o in offtopic),
        covered_n=len(covered_turns),
        covered_refused=share([o.reading.refused for o in covered_turns]),
    )


async def run_sweeps(
    chat: ChatService,
    cases: Sequence[Case],
    *,
    module_id: str,
    seed: int = DEFAULT_SEED,
    on_answer: Callable[[], None] | None = None,
) -> SweepReport:
    """Ask every swept case bare and every variant of it, each in a conversation of its own, and measure."""
    started = time.perf_counter()
    swept = sweep_cases(cases, module_id)
    ask = Asker(chat, module_id, on_answer)
    bare: dict[str, Reading] = {}
    expected = {case.question: case.expect.sections for case in swept}
    for case in swept:
        if case.question not in bare:
            bare[case.question] = read(await ask(case.question), case.question)
    outcomes = []
    for variant in generate_variants(swept, seed):
        reading = await ask.reading(variant)
        baseline = bare.get(variant.bare) if variant.bare is not None else None
        compared = None if baseline is None else same_section(reading, baseline, expected.get(variant.bare or "", ()))
        outcomes.append(Outcome(variant, reading, baseline, compared))
    kinds = tuple(summarise(kind, [o for o in outcomes if o.variant.kind == kind]) for kind in KINDS)
    elapsed = time.perf_counter() - started
    return SweepReport(seed, len(swept), ask.asked, elapsed, kinds, tuple(outcomes))


def figure(value: float | None) -> str:
    """A share to three decimals, or a dash."""
    return "—" if value is None else f"{value:.3f}"


def format_table(report: SweepReport) -> str:
    """The report as a Markdown table, one row per kind, and a line saying what was run."""
    lines = [
        "| kind | n | same_section | flagged | offtopic_answered | covered_refused |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for k in report.kinds:
        offtopic = (
            f"{k.offtopic_answered} of {k.offtopic_n} ({figure(k.offtopic_answered_share)})" if k.offtopic_n else "—"
        )
        covered_refused = f"{figure(k.covered_refused)} (n={k.covered_n})" if k.covered_n else "—"
        lines.append(
            f"| {k.kind} | {k.n} | {figure(k.same_section)} | {figure(k.flagged)} | {offtopic} | {covered_refused} |"
        )
    asked = f"{report.asked} questions asked in {report.elapsed_s:.1f} s"
    lines += ["", f"seed {report.seed}; {report.cases} dev cases swept; {asked}"]
    return "\n".join(lines)
