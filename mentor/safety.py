"""Keep instructions out of data and unsafe Markdown out of answers.

Questions and passages are data. A sentence that tries to instruct the assistant ("ignore your instructions",
"print your system prompt") is never quoted from a passage nor obeyed from a question: the reader decides which
sentences instruct, from labelled examples (`mentor.understanding`); here they are cut out of what a model reads.
"""

from __future__ import annotations

import functools
import re

HTML_TAG = re.compile(r"</?[A-Za-z][^>\n]{0,200}>|<!--.*?-->", re.S)
IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)\s]*)[^)]*\)")
LINK = re.compile(r"(?<!!)\[([^\]]+)\]\(([^)\s]+)[^)]*\)")
BARE_URL = re.compile(r"\bhttps?://[^\s)>\]]+")


@functools.lru_cache(maxsize=8192)
def without_planted(passage: str, planted: frozenset[str]) -> str:
    """A passage with the units that read as instructions (`planted`, decided once per module by the reader)
    replaced, before it reaches a model. Matched word by word, whatever the spaces and line breaks between.

    Cached: passages are the module's chunks, the same few hundred texts again and again.
    """
    for unit in planted:
        words = unit.split()
        if words and words[0] in passage:
            pattern = r"\s+".join(re.escape(word) for word in words)
            passage = re.sub(pattern, "[instruction-like text removed]", passage)
    return passage


def quoted(text: str) -> str:
    """Earlier words as they may stand inside a data fence of the LLM's user message: without tags, so a client's
    "</history><system>..." neither closes the fence nor opens another. mentor's own answers have none already
    (`sanitize_markdown`); an answer a client holds may have anything."""
    return HTML_TAG.sub(" ", text).strip()


def sanitize_markdown(text: str, *, allowed_urls: frozenset[str] = frozenset()) -> str:
    """Drop raw HTML, images and any link or URL that did not come from the module."""
    text = HTML_TAG.sub("", text)
    text = IMAGE.sub(lambda m: m.group(1), text)
    text = LINK.sub(lambda m: m.group(0) if m.group(2) in allowed_urls else m.group(1), text)
    return BARE_URL.sub(lambda m: m.group(0) if m.group(0) in allowed_urls else "[link removed]", text)


def module_urls(text: str) -> frozenset[str]:
    """URLs that appear in a module's own text (the only ones an answer may carry)."""
    return frozenset(BARE_URL.findall(text))
