"""Finding the final answer(s) in a reply, in one linear pass over its tags.

Rules, chosen so that a reply cannot hedge its way to credit:
- Reasoning (``<think>…</think>``, or everything before a lone ``</think>`` when the
  chat template opened the block) is never read for answers.
- Every explicit statement of an answer outside the reasoning is a candidate:
  ``<answer>`` blocks, ``\\boxed{}``, "the (final) answer is …" (also "the answer to
  this question is …"), ``#### …`` lines.
  The grader requires all candidates to agree.
- A reply with no explicit statement (no marker) is read only when it makes one
  statement of a value: of its lines and sentences, exactly one holds a number (a
  digit, a number word, a LaTeX macro), and that statement is the candidate ("18",
  "$18", "5 + 2 = 7" followed by chatter without numbers). Its last sentence is never
  read on its own: without a marker, reasoning that ends "Tom has 7 apples." looks
  exactly like guesses that end "Maybe 7." (see ``frostgym.graders.math_answer``).
Tags are matched with a tokenizer rather than ``.*?`` so a reply full of unclosed
tags costs linear, not quadratic, time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from frostgym.graders.numbers import NUMBER_WORD, has_non_ascii_digits

_TAG = re.compile(r"<(/?)(think|answer)\s*>", re.IGNORECASE)
_PHRASE = re.compile(
    r"(?:final\s+answer|the\s+answer(?:\s+to\s+(?:this|the)\s+(?:question|problem))?)\s*(?:is|:|=)\s*:?\s*([^\n]*)"
    r"|^[ \t]*####[ \t]*([^\n]*)",
    re.IGNORECASE | re.MULTILINE,
)
_SENTENCE_END = re.compile(r"\.(?:\s|$)")
_STATEMENT_BREAK = re.compile(r"\n|(?<=[.!?;])\s+")
_HOLDS_VALUE = re.compile(r"\d|\\[A-Za-z]")  # Unicode \d: look-alike digits count too


@dataclass(frozen=True)
class Extraction:
    """The candidate answers, where they came from, and how well the reply kept the
    ``<think>…</think><answer>…</answer>`` format (1.0, 0.5 or 0.0)."""

    candidates: tuple[str, ...]
    where: str
    format_score: float
    unclosed_answer: bool


def strip_tags(reply: str) -> str:
    """The reply without its ``<think>``/``<answer>`` tags (for measuring its prose)."""
    return _TAG.sub(" ", reply) if "<" in reply else reply


def _boxed_contents(text: str) -> list[str]:
    out: list[str] = []
    start = 0
    while True:
        i = text.find("\\boxed{", start)
        if i < 0:
            return out
        j = i + len("\\boxed{")
        depth = 1
        k = j
        while k < len(text) and depth:
            if text[k] == "{":
                depth += 1
            elif text[k] == "}":
                depth -= 1
            k += 1
        if depth == 0:
            out.append(text[j : k - 1])
        start = k


def _phrase_answers(text: str) -> list[str]:
    """Each "the answer is X" / "#### X", X ending at the sentence or line end. The
    scan resumes right after X, so a second statement in the same line is seen too."""
    out: list[str] = []
    pos = 0
    while (m := _PHRASE.search(text, pos)) is not None:
        group = 1 if m.group(1) is not None else 2
        tail = m.group(group)
        end = _SENTENCE_END.search(tail)
        answer = tail[: end.start()] if end else tail
        if answer.strip():
            out.append(answer.strip())
        pos = max(m.start(group) + len(answer), m.end(0) if not tail else m.start(group) + 1)
    return out


def _only_statement(text: str) -> str | None:
    """The one line or sentence of ``text`` that holds a number, if exactly one does."""
    holding = [
        part.strip()
        for part in _STATEMENT_BREAK.split(text)
        if _HOLDS_VALUE.search(part) or NUMBER_WORD.search(part) or has_non_ascii_digits(part)
    ]
    return holding[0] if len(holding) == 1 else None


def extract_answers(reply: str) -> Extraction:
    visible: list[str] = []  # text outside reasoning and outside answer blocks
    answers: list[str] = []
    think_blocks = 0
    thinks_before_answer = -1
    state = "outside"  # outside | think | answer
    pos = 0
    block_start = 0
    seen_tag = False
    for m in _TAG.finditer(reply):
        closing, name = m.group(1) == "/", m.group(2).lower()
        if state == "outside":
            if name == "think" and not closing:
                visible.append(reply[pos : m.start()])
                state, block_start = "think", m.end()
            elif name == "think" and closing and not seen_tag:
                # A template-opened think block: everything so far was reasoning.
                think_blocks += 1
                pos = m.end()
            elif name == "answer" and not closing:
                visible.append(reply[pos : m.start()])
                state, block_start = "answer", m.end()
            else:  # a stray closing tag outside any block: visible text
                continue
        elif state == "think":
            if name == "think" and closing:
                think_blocks += 1
                state, pos = "outside", m.end()
        elif name == "answer" and closing:  # state == "answer"
            answers.append(reply[block_start : m.start()].strip())
            thinks_before_answer = think_blocks
            state, pos = "outside", m.end()
        seen_tag = True
    unclosed_answer = state == "answer"
    if state == "outside":
        visible.append(reply[pos:])
    outside = "".join(visible)

    stated = _boxed_contents(outside) + _phrase_answers(outside)
    candidates = answers + stated
    if answers:
        where = "answer_tag"
    elif stated:
        where = "statement"
    else:
        bare = _only_statement(outside) if not unclosed_answer and state != "think" else None
        candidates, where = ([bare], "bare") if bare else ([], "none")

    if len(answers) == 1 and not outside.strip() and not unclosed_answer:
        format_score = 1.0 if think_blocks == thinks_before_answer == 1 else 0.5
    elif len(answers) == 1 and not unclosed_answer:
        format_score = 0.5
    else:
        format_score = 0.0
    return Extraction(tuple(candidates), where, format_score, unclosed_answer)
