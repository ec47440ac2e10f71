"""The tags in a reply, read in one linear pass: its reasoning set aside, its tagged blocks found.

Every family reads replies the same way: ``<think>`` blocks are reasoning and never read
for answers, queries, code or calls, and an answer-bearing block is ``<tag>…</tag>``.
Graders, envs, the tool-call parser and code extraction all use these two helpers, so they
live on the ground floor (standard library only). Tags are matched with a tokenizer rather
than ``.*?``, so a reply full of unclosed tags costs linear, not quadratic, time.
"""

from __future__ import annotations

import re

_THINK = re.compile(r"<(/?)think\s*>", re.IGNORECASE)
_ANY_TAG = re.compile(r"<(/?)([a-z_]+)\s*>", re.IGNORECASE)


def outside_reasoning(reply: str) -> str:
    """The reply without its reasoning: ``<think>`` blocks (an unclosed one runs to the
    end) and, when the template opened the block, everything before a lone ``</think>``."""
    out: list[str] = []
    pos = 0
    inside = False
    seen = False
    for m in _THINK.finditer(reply):
        closing = m.group(1) == "/"
        if not inside and not closing:
            out.append(reply[pos : m.start()])
            inside = True
        elif inside and closing:
            inside, pos = False, m.end()
        elif not inside and closing and not seen:
            pos = m.end()
        seen = True
    if not inside:
        out.append(reply[pos:])
    return "".join(out)


def tagged_blocks(text: str, tag: str) -> tuple[list[str], bool]:
    """Contents of every ``<tag>…</tag>`` block in ``text`` (tags do not nest), and
    whether a block was left open. Linear time."""
    blocks: list[str] = []
    start: int | None = None
    for m in _ANY_TAG.finditer(text):
        if m.group(2).lower() != tag:
            continue
        if m.group(1) != "/" and start is None:
            start = m.end()
        elif m.group(1) == "/" and start is not None:
            blocks.append(text[start : m.start()].strip())
            start = None
    return blocks, start is not None
