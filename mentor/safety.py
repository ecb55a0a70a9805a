"""Keep instructions out of data and unsafe Markdown out of answers.

Questions and passages are data. A sentence that tries to instruct the assistant ("ignore your
instructions", "print your system prompt") is never quoted from a passage nor obeyed from a question.
"""

from __future__ import annotations

import functools
import re

INJECTION = re.compile(
    r"""(?ix)
    \b(ignore|disregard|forget|override|bypass)\b[^.!?\n]{0,40}\b(instructions?|rules|prompt|guidelines|above|previous
      |directions|directives|safety|filters?|guardrails|restrictions)\b
    | \b(don'?t|do\s+not|never)\s+(cite|quote)\b
    | \b(ignore|disregard|forget)\s+(the|this|your)\s+(module|context|passages|sources)\b
    | \b(system|developer|hidden|initial)\s+(prompt|message|instructions)\b
    | \byou\s+are\s+(now|no\s+longer)\b | \byour\s+new\s+(role|persona|task)\b | \bfrom\s+now\s+on\s+you\b
    | \b(debug|developer|god|sudo|admin|maintenance)\s+mode\b
    | \bi'?\s*a?m\s+(the|your)\s+(developer|admin|creator|owner)\b
    | \[/?(admin|system|developer|root|sudo)\] | \bunfiltered\b
    | \byou\s+are\s+an?\s+(pirate|robot|villain|hacker|evil)\b
    | ["']role["']\s*:\s*["'](system|developer|assistant)["']
    | \b(act|pretend|behave)\s+as\b[^.!?\n]{0,30}\b(unrestricted|jailbroken|dan|different|another)\b
    | \bpretend\s+(you'?re|you\s+are|to\s+be)\b | \b(unrestricted|jailbroken|jailbreak|uncensored)\b
    | \bnew\s+instructions?\b | \b(new|updated)\s+(policy|policies|directives?)\b | \bnew\s+rules?\s*:
    | \bfrom\s+your\s+(developers?|admins?|administrators?|creators?|operators?)\b
    | \bfrom\s+the\s+(admins?|administrators?)\b
    | (^\W*|\b(and|then|now|just|only|first)\s+)(say|type|output|print)\s+(the\s+word\s+)?["'“‘]
    | \b(answer|reply|respond)\s+without\s+(citations|sources|references)
    | \b(answer|reply|respond|say|output|print)\s+(only|just)\s+(with\s+)?(?-i:["'A-Z])
    | \bpwned\b
    | \b(reveal|print|show|repeat|output|leak|dump|summari[sz]e|paraphrase|translate|copy|list)\b[^.!?\n]{0,30}
      \b(your|its|the\s+system|hidden|initial|original)\s+(prompt|instructions|rules|guidelines|configuration|message)
    | \bwhat\s+(were|are|have)\s+you\s+(been\s+)?(told|instructed|programmed)\b
    | \b(canary|secret\s+(word|key|token))\b
    | \b(what|which)\s+(are|is|were)\s+your\s+(instructions|rules|prompt|system\s+prompt|guidelines)
    | \b(repeat|print|output)\b[^.!?\n]{0,20}\b(text|words|everything|all)\s+(above|before)
    | <\s*/?\s*(system|assistant|instructions?|question)\s*>
    | \[/?INST\] | <</?SYS>>
    | ^\W*(system|admin|developer|override|system\s+override)(\s+(note|message|mode|notice))?\s*:
    | \b(begin|end|start|stop)\s+(override|system|admin|instructions?|prompt)\b
    | \b(respond|answer|reply|speak|write|talk)\s+(in|with)\s+the\s+(voice|style|tone|manner)\s+of\b
    | \b(talk|speak|write)\s+like\s+an?\s+(pirate|robot|villain|child|poet)\b
    | \b(answer|reply|respond|write|speak)\s+(only\s+)?in\s+(json|xml|yaml|uppercase|all\s+caps|emojis?|french|spanish
      |german|italian|portuguese|chinese|japanese|korean|russian|hindi|arabic|pirate)\b
    | \b(answer|reply|respond|start|begin)\s+(your\s+(answer|reply)\s+)?with\s+["'“]
    | \b(start|begin|end|finish|sign)\s+(your|the|each|every)\s+(reply|answer|response|message)s?\s+(with|by)\b
    | \b(include|insert|add|put|mention|write)\b[^.!?\n]{0,30}\b(in|into|to)\s+your\s+(reply|answer|response|output)\b
    | \bmention\s+\S+\s+somewhere\b | \b(password|passphrase|api[\s_-]*key)\b
    | \b(open|visit|follow|click)\b[^.!?\n]{0,40}\b(do\s+what\s+it\s+says|its\s+instructions)
    """
)
HTML_TAG = re.compile(r"</?[A-Za-z][^>\n]{0,200}>|<!--.*?-->", re.S)
IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)\s]*)[^)]*\)")
LINK = re.compile(r"(?<!!)\[([^\]]+)\]\(([^)\s]+)[^)]*\)")
BARE_URL = re.compile(r"\bhttps?://[^\s)>\]]+")


def looks_like_injection(text: str) -> bool:
    """True when `text` addresses the assistant with instructions instead of asking about the module."""
    return bool(INJECTION.search(text))


@functools.lru_cache(maxsize=8192)
def without_instructions(passage: str) -> str:
    """A passage with any instruction-like text replaced, before it reaches a model.

    Cached: passages are the module's chunks, the same few hundred texts again and again, and this pattern over
    every passage of every request was 3.4% of the server's CPU under new questions.
    """
    return INJECTION.sub("[instruction-like text removed]", passage)


def sanitize_markdown(text: str, *, allowed_urls: frozenset[str] = frozenset()) -> str:
    """Drop raw HTML, images and any link or URL that did not come from the module."""
    text = HTML_TAG.sub("", text)
    text = IMAGE.sub(lambda m: m.group(1), text)
    text = LINK.sub(lambda m: m.group(0) if m.group(2) in allowed_urls else m.group(1), text)
    return BARE_URL.sub(lambda m: m.group(0) if m.group(0) in allowed_urls else "[link removed]", text)


def module_urls(text: str) -> frozenset[str]:
    """URLs that appear in a module's own text (the only ones an answer may carry)."""
    return frozenset(BARE_URL.findall(text))
