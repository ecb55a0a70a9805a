"""Understanding a learner's message: read once into a typed `Reading` that every later stage takes.

Decisions come from labelled example messages and the embedder (`decisions.py`), spelling from libraries
(`spelling.py`), module vocabulary from the module itself (`lexicon.py`); regular expressions only cut a message at
its formal syntax (`clauses.py`).
"""

from mentor.understanding.decisions import Decisions
from mentor.understanding.reader import Reader
from mentor.understanding.reading import Clause, Part, Reading
from mentor.understanding.words import ModuleWords

__all__ = ["Clause", "Decisions", "ModuleWords", "Part", "Reader", "Reading"]
