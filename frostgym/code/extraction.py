"""From a model's reply to the program that is run.

Rules (also in the README):
1. Reasoning (``<think>…</think>``) is never read.
2. If the reply has fenced blocks (```python, ```py or bare ```), the last block that
   defines the entry point wins; failing that, the last fenced block.
3. With no fence, the whole visible reply is the code.
4. Code that defines ``def <entry_point>(`` at the top level is appended to the prompt
   (which brings its imports and helper functions; the new definition replaces the
   stub). Any other code is treated as the *body* that continues the prompt, which is
   HumanEval's completion convention for base models.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from frostgym.core.tags import outside_reasoning

MAX_CODE_CHARS = 200_000
_FENCE = re.compile(r"^[ \t]*```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)^[ \t]*```[ \t]*$", re.MULTILINE | re.DOTALL)
_PY_LANGS = frozenset({"", "python", "python3", "py", "py3"})

CodeSource = Literal["fenced", "raw", "empty"]


@dataclass(frozen=True)
class ExtractedCode:
    code: str
    where: CodeSource
    defines_entry_point: bool
    truncated: bool = False


def _defines(code: str, entry_point: str) -> bool:
    return re.search(rf"^(?:async\s+)?def\s+{re.escape(entry_point)}\s*\(", code, re.MULTILINE) is not None


def extract_code(reply: str, entry_point: str) -> ExtractedCode:
    visible = outside_reasoning(reply)
    truncated = len(visible) > MAX_CODE_CHARS
    visible = visible[:MAX_CODE_CHARS]
    blocks = [m.group(2) for m in _FENCE.finditer(visible) if m.group(1).lower() in _PY_LANGS]
    if blocks:
        defining = [b for b in blocks if _defines(b, entry_point)]
        code = (defining or blocks)[-1]
        return ExtractedCode(code, "fenced", _defines(code, entry_point), truncated)
    if not visible.strip():
        return ExtractedCode("", "empty", False, truncated)
    return ExtractedCode(visible, "raw", _defines(visible, entry_point), truncated)


def assemble_program(prompt: str, extracted: ExtractedCode) -> str:
    """The source the sandbox runs: prompt + full definition, or prompt + body."""
    if extracted.defines_entry_point:
        return f"{prompt.rstrip()}\n\n\n{extracted.code.strip(chr(10))}\n"
    body = extracted.code
    if body and not body.startswith((" ", "\t")):
        body = "    " + body.replace("\n", "\n    ")  # an unindented body: indent it under the stub
    return f"{prompt}{body}\n"
