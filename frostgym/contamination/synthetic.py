"""A synthetic training file with known leaks: what the benchmark, the README's worked
example and the tests check the checker on.

Why its own module: "finds every leak and flags no clean task" needs a training file whose
leaks are known exactly, made the same way by all three. The file is JSONL (``{"text":
...}`` per line) of unrelated lines, random word sequences drawn (Zipf-weighted, seeded)
from a vocabulary the caller gives (the benchmark gives the eval tasks' own words: every
window then has to be looked up, the slowest case for the scan, and any 13 words in
common are chance), with the leaked task texts at seeded positions, verbatim or lightly
edited (``light_edit``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from frostgym.core.seeding import derive_generator

_WORD = re.compile(r"[A-Za-z]{3,}")
_NUMBER = re.compile(r"\b\d+\b")
#: Words of unrelated lines: at least this many, at most that many.
LINE_WORDS = (8, 80)


@dataclass(frozen=True)
class Leak:
    """One leaked task: its id, the line (from 1) it is on, and how it was written:
    ``verbatim`` or the edit ``light_edit`` made."""

    task_id: str
    line: int
    edit: str
    text: str


def light_edit(text: str, number: int) -> tuple[str, str]:
    """``text`` lightly edited, and what was done: every edit changes the punctuation and
    case (the end of the first sentence loses its stop, the first word its capital), and
    one word: ``number`` even changes a number (one more; a leak whose numbers were
    changed still teaches the question), odd replaces the longest word with ``thing``.
    A text with no number gets the word edit."""
    edited = text.replace(". ", " ", 1)
    edited = edited[:1].lower() + edited[1:]
    numbers = list(_NUMBER.finditer(edited))
    if number % 2 == 0 and numbers:
        match = numbers[len(numbers) // 2]
        edited = f"{edited[: match.start()]}{int(match.group()) + 1}{edited[match.end() :]}"
        return edited, "punctuation, case, a number changed"
    words = list(_WORD.finditer(edited))
    if not words:
        return edited, "punctuation, case"
    match = max(words, key=lambda m: (len(m.group()), -m.start()))
    edited = f"{edited[: match.start()]}thing{edited[match.end() :]}"
    return edited, "punctuation, case, a word changed"


def write_training_file(
    path: Path,
    leaked: Sequence[tuple[str, str]],
    vocabulary: Sequence[str],
    *,
    lines: int | None = None,
    size_bytes: int | None = None,
    seed: int = 0,
) -> list[Leak]:
    """Write a JSONL training file of unrelated lines with ``leaked`` ((task id, text)
    pairs) among them, and return where each leak went. Every other leak (the 1st, 3rd, ...)
    is verbatim, the rest lightly edited. The file has ``lines`` lines or, with
    ``size_bytes``, as many as reach that size; the leaks are at seeded positions.
    ``ValueError`` unless exactly one of the two is given, or for an empty vocabulary."""
    if (lines is None) == (size_bytes is None):
        raise ValueError("give lines or size_bytes")
    if not vocabulary:
        raise ValueError("the vocabulary is empty")
    rng = derive_generator("frostgym.contamination.synthetic", seed)
    words = np.array(sorted(set(vocabulary)), dtype=object)
    weights = 1.0 / np.arange(1, len(words) + 1)
    weights /= weights.sum()
    order = rng.permutation(len(words))  # which word is common is seeded too
    words = words[order]
    # Positions among the first lines of the file (a size-bound file's line count is known
    # only at the end): spread over the first ``lines`` or over an estimate from the size.
    mean_word = float(weights @ np.array([len(str(w).encode()) + 1 for w in words]))
    mean_line = len('{"text": ""}\n') + mean_word * sum(LINE_WORDS) / 2
    planned = lines if lines is not None else max(len(leaked) + 1, int((size_bytes or 0) / mean_line))
    positions = sorted(rng.choice(planned, size=len(leaked), replace=False).tolist()) if leaked else []
    texts: dict[int, Leak] = {}
    for number, ((task_id, text), position) in enumerate(zip(leaked, positions, strict=True)):
        if number % 2 == 0:
            written, edit = text, "verbatim"
        else:
            written, edit = light_edit(text, number // 2)
        texts[position] = Leak(task_id, position + 1, edit, written)
    written_bytes = 0
    line = 0
    last_leak = max(texts, default=-1)
    with path.open("w", encoding="utf-8") as out:
        while (lines is not None and line < lines) or (
            size_bytes is not None and (written_bytes < size_bytes or line <= last_leak)
        ):
            block = 10_000
            lengths = rng.integers(LINE_WORDS[0], LINE_WORDS[1] + 1, size=block)
            picks = rng.choice(len(words), size=int(lengths.sum()), p=weights)
            chosen = words[picks].tolist()
            start = 0
            parts = []
            for length in lengths.tolist():
                if lines is not None and line >= lines:
                    break
                leak = texts.get(line)
                text = leak.text if leak is not None else " ".join(chosen[start : start + length])
                start += length
                record = json.dumps({"text": text}, ensure_ascii=False) + "\n"
                parts.append(record)
                written_bytes += len(record.encode("utf-8"))
                line += 1
                if size_bytes is not None and written_bytes >= size_bytes and line > last_leak:
                    break
            out.write("".join(parts))
    return [texts[p] for p in sorted(texts)]
