"""Generated corpora for the ingest and retrieval benchmarks: the seed module plus variants of it.

Each variant has its own module id and text that differs in every chunk (a note under every heading, a
tag in every table row and worked example, and word swaps in the prose), so nothing is deduplicated by
content hash and no two vectors are identical.
"""

from __future__ import annotations

import random
import re
import shutil
from pathlib import Path

from mentor.corpus import FENCE, HEADING, load_corpus

# Swaps that keep a sentence readable; applied at random so each variant's prose embeds differently.
SWAPS = (
    ("GPU", "accelerator"),
    ("large", "big"),
    ("memory", "device memory"),
    ("split", "partition"),
    ("training", "pre-training"),
    ("weights", "parameters"),
    ("cheap", "inexpensive"),
    ("faster", "quicker"),
    ("keep", "retain"),
    ("model", "network"),
)
NOTES = (
    "A cohort of {n} learners found this section easier after sketching {m} devices on paper.",
    "Study group {n} reworked this idea for a cluster of {m} nodes.",
    "Revision {n}: the examples were checked against a {m}-GPU lab setup.",
    "Tutor remark {n}: learners confused this with another idea about {m} times a term.",
    "Reading note {n}: allow about {m} minutes for this part.",
)
FRONT_MATTER = "---\nmodule_id: {id}\ntitle: {title}\nprerequisites: []\ntopics: [{topics}]\n---\n"


def generate_corpus(seed_dir: Path, out_dir: Path, n_modules: int) -> Path:
    """Write the seed module(s) plus variants up to `n_modules` files into `out_dir`; return `out_dir`."""
    seeds = load_corpus(seed_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for module in seeds[:n_modules]:
        shutil.copy(module.path, out_dir / module.path.name)
    seed = seeds[0]
    for index in range(1, n_modules - len(seeds) + 1):
        rng = random.Random(index)
        front = FRONT_MATTER.format(
            id=f"BENCH.generated.{index:03d}",
            title=f"{seed.title} (variant {index})",
            topics=", ".join(seed.topics),
        )
        (out_dir / f"generated-{index:03d}.md").write_text(front + vary(seed.body, index, rng), encoding="utf-8")
    return out_dir


def vary(body: str, index: int, rng: random.Random) -> str:
    """Rewrite a module body so every chunk of it differs from the seed's, keeping headings and structure."""
    lines: list[str] = []
    in_fence = False
    for line in body.splitlines():
        stripped = line.strip()
        if FENCE.match(stripped):
            lines.append(line)
            if not in_fence:
                lines.append(f"# variant {index}")
            in_fence = not in_fence
        elif in_fence:
            lines.append(line)
        elif HEADING.match(line):
            note = rng.choice(NOTES).format(n=index, m=rng.randint(2, 512))
            lines += [line, "", note, ""]
        elif stripped.startswith("|") and not set(stripped) <= set("|-: "):
            lines.append(f"{line.rstrip().removesuffix('|').rstrip()} (v{index}) |")
        else:
            lines.append(swap_words(line, rng))
    return "\n".join(lines) + "\n"


def swap_words(line: str, rng: random.Random) -> str:
    """Replace about a third of the swappable words in a prose line."""
    for old, new in SWAPS:
        if rng.random() < 0.35:
            line = re.sub(rf"\b{re.escape(old)}\b", new, line)
    return line
