"""Text know-how, in one place: Markdown blocks, sentences, quotable units, citation markers and tokens.

- `markdown`: `blocks` walks Markdown into headings, paragraphs, list items, table rows and code lines;
  `strip_inline` drops emphasis and links; the line patterns (`FENCE`, `HEADING`, ...) the corpus reads by.
- `sentences`: `split_sentences` and the rules each reader splits by (`ANSWER`, `CLAIMS`, `MODULE`, `ROUGH`).
- `units`: `split_units`, the quotable `Unit`s of a chunk (sentences, items, table rows, formula lines).
- `markers`: the "[n]" citation marker grammar and its readers (`cited`, `strip_markers`, `rank_markers`, ...).
- `tokens`: `tokenize`, the stemmed words retrieval and the grounding check compare.
- `profile`: `ModuleProfile`, a module's word weights and boilerplate units (imported from its module).
"""

from mentor.text.markdown import FENCE, HEADING, ITEM, Block, blocks, strip_inline, table_cells
from mentor.text.markers import MARKER, cited, has_marker, prune_markers, rank_markers, strip_markers
from mentor.text.sentences import ANSWER, CLAIMS, MODULE, ROUGH, SentenceRules, split_sentences
from mentor.text.tokens import tokenize
from mentor.text.units import Unit, split_units

# The longest message a learner may send, in characters: the chat, the search route, the HTTP schema, the planner
# and the golden set all read it from here.
MAX_MESSAGE_CHARS = 4000

__all__ = [
    "ANSWER",
    "CLAIMS",
    "FENCE",
    "HEADING",
    "ITEM",
    "MARKER",
    "MAX_MESSAGE_CHARS",
    "MODULE",
    "ROUGH",
    "Block",
    "SentenceRules",
    "Unit",
    "blocks",
    "cited",
    "has_marker",
    "prune_markers",
    "rank_markers",
    "split_sentences",
    "split_units",
    "strip_inline",
    "strip_markers",
    "table_cells",
    "tokenize",
]
