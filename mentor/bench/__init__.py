"""`mentor bench`: mentor's own cost per question, measured against a stub LLM and a LangChain baseline.

`run_bench(quick=True, out_dir=Path(...))` runs it and writes results.json and results.md there (`mentor bench`
defaults to MENTOR_DATA_DIR/bench, outside the tracked files; eval/bench holds the published figures);
`render_markdown(results)` renders a result document as the same Markdown.
"""

from mentor.bench.report import render_markdown
from mentor.bench.run import run_bench

__all__ = ["render_markdown", "run_bench"]
