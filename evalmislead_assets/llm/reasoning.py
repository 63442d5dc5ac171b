"""Inline reasoning in model answers: `<think>…</think>` blocks, parsed in one place.

Servers that recognise a reasoning template return thoughts separately (`reasoning_content`);
others leave them inline in the answer. A block cut off at the output cap has no closing
tag: it runs to the end of the text.
"""

from __future__ import annotations

import re

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
# group 1: the thoughts; group 2: the closing tag, empty when the block runs to the end
_BLOCK = re.compile(r"<think>(.*?)(</think>|\Z)", re.S | re.I)
_CLOSE = re.compile(re.escape(THINK_CLOSE), re.I)


def split_leading_think(content: str) -> tuple[str, str | None]:
    """(answer, reasoning) of an answer that opens with a <think> block; (content, None) otherwise.

    An unclosed block is all reasoning (the answer was cut off while thinking).
    """
    m = _BLOCK.match(content, len(content) - len(content.lstrip()))
    if m is None:
        return content, None
    if not m.group(2):
        return "", m.group(1)
    return content[m.end():].lstrip("\n"), m.group(1)


def strip_think(text: str) -> str:
    """The text without its <think> blocks (an unclosed one drops the rest) and stray closing tags."""
    return _CLOSE.sub("", _BLOCK.sub("", text))


def think_text(text: str) -> str:
    """The thoughts of every <think> block in the text, joined by newlines."""
    return "\n".join(m.group(1) for m in _BLOCK.finditer(text)).strip()
