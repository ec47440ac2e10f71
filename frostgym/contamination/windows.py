"""A document too long to scan whole, cut into windows that the scan treats as one document.

Why its own module: scanned whole, a document costs many times its length in memory (a
bytes object per token, then per token an id and a hash for each window length), gigabytes
for one long JSONL line. Cut into windows of ``WINDOW`` characters, each scanned on its own,
the memory a document takes is bounded by the window, however long the document is. Every
reader uses these windows (JSONL, Parquet, datasets, ``check_texts``), so a document gives
the same figures whichever way it comes in.

No n-gram is lost at a cut, and none is made up there:

- A window ends right after a whitespace character of the last half of the window. No token
  is split, and normalisation (NFKC, lowercasing, the character classes: ``ngrams``) never
  reaches across whitespace, so the two sides give the tokens the whole text gives. A text
  with no whitespace there (text in a script written without spaces) is cut after another
  character that normalisation keeps a separator (U+FF0C, a fullwidth comma, but not U+2103,
  degrees Celsius, which becomes ``°c``), and not next to a combining mark (``e`` and U+0301
  compose to one letter). With none of those either, the last half of the window is one run
  that holds no task's words (a base64 blob): it is cut at the window's end, and the two
  halves of the token it splits are left out.
- Each window starts with the last ``CARRIED`` tokens before it (``MAX_WINDOW - 1`` = 63:
  more than any gram or shingle spans), so every run of up to ``MAX_WINDOW`` consecutive
  tokens of the document lies whole in some window.

What the scan makes of a document's windows (``scan.scan_part``, ``check._Merge``): the
n-gram hits of all its windows are united before each task's share is taken, so its
``ngram_overlap`` (and coverage) is exactly what scanning it whole gives, whatever the cuts;
a leak across a cut is found whole. MinHash compares each window with the tasks on its own
(uniting signatures would need every window MinHashed, and the prefilter could not skip
any): a document or a window of a MiB is near a task only if it is little else, so it is
the n-gram overlap that finds a leak inside a long document either way. A text of at most
``WINDOW`` characters is one window, scanned exactly as a short document always was.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass

from frostgym.contamination.ngrams import MAX_WINDOW, tokens

#: Characters of text per window; a JSONL line of more bytes, or a text of more characters,
#: is read in windows (``reading``). A line holds at least as many bytes as its text has
#: characters, so a line short enough to read whole has a text of one window.
WINDOW = 1 << 20
#: Tokens each window repeats from before it: every run of ``MAX_WINDOW`` tokens fits whole.
CARRIED = MAX_WINDOW - 1

_WHITESPACE = re.compile(r"\s")
_NOT_WORD = re.compile(r"[^\w]")  # separators and operators: the characters no token spans
_WORD = re.compile(r"\w")
#: Characters searched at a time, backwards from a window's end, for a place to cut.
_STEP = 4096


@dataclass(frozen=True)
class Part:
    """One window of a document: its ``text``; the tokens ``carried`` over from before it
    (the overlap; none after a split token); whether the text's first
    and last tokens are halves of a split token, to leave out (``drop_first``,
    ``drop_last``); and whether the document ends with it (``last``)."""

    text: str
    carried: tuple[bytes, ...] = ()
    drop_first: bool = False
    drop_last: bool = False
    last: bool = True

    def tokens(self) -> list[bytes]:
        """The tokens this window scans: the carried ones, then its text's."""
        own = tokens(self.text)
        if self.drop_last and own:
            own.pop()
        if self.drop_first and own:
            own.pop(0)
        return [*self.carried, *own]


class Windower:
    """Text in, windows out: ``feed`` the text a piece at a time (the pieces' sizes do not
    change the windows), then ``close`` for the last window."""

    def __init__(self, size: int = WINDOW) -> None:
        if size < 64:
            raise ValueError(f"a window holds at least 64 characters, got {size}")
        self.size = size
        self._pending: list[str] = []
        self._length = 0
        self._carried: tuple[bytes, ...] = ()
        self._drop_first = False

    def feed(self, text: str) -> Iterator[Part]:
        """The windows that ``text`` completes (none until more than a window is held)."""
        if text:
            self._pending.append(text)
            self._length += len(text)
        while self._length > self.size:  # more than a window: this one is not the last
            held = "".join(self._pending)
            cut, split = cut_at(held, self.size)
            window = held[:cut]
            yield Part(window, self._carried, self._drop_first, split, last=False)
            self._carried = self._carry(window, split)
            self._drop_first = split
            rest = held[cut:]
            self._pending, self._length = [rest], len(rest)

    def close(self) -> Part:
        """The last window (the whole text, if it was never more than one window)."""
        text = "".join(self._pending)
        self._pending, self._length = [], 0
        return Part(text, self._carried, self._drop_first, False, last=True)

    def _carry(self, window: str, split: bool) -> tuple[bytes, ...]:
        """The last ``CARRIED`` tokens up to the end of ``window``; none after a split
        token (no valid gram runs across it, and none must seem to)."""
        if split:
            return ()
        span = 64 * CARRIED
        while True:
            start = max(0, len(window) - span)
            toks = tokens(window[start:])
            if start:
                toks = toks[1:]  # it may begin inside a token
            elif self._drop_first and toks:
                toks = toks[1:]
            if len(toks) >= CARRIED or not start:
                return (*self._carried, *toks)[-CARRIED:] if not start else tuple(toks[-CARRIED:])
            span *= 4


def windows(text: str, size: int = WINDOW) -> Iterator[Part]:
    """The windows of a text held whole."""
    windower = Windower(size)
    yield from windower.feed(text)
    yield windower.close()


def cut_at(text: str, size: int) -> tuple[int, bool]:
    """Where to end a window of ``text`` (longer than ``size``): the position (at most
    ``size``, more than ``size // 2``) after its last safe character (module docstring), and
    whether a token is split there (no safe place in the last half)."""
    low = size // 2
    at = _last(text, low, size, _WHITESPACE, _any)
    if at < 0:
        at = _last(text, low, size, _NOT_WORD, _separates)
    if at < 0:
        return size, True
    return at + 1, False


def _last(text: str, low: int, high: int, pattern: re.Pattern[str], keep: object) -> int:
    """The position of the last character in ``text[low:high]`` that ``pattern`` matches and
    ``keep(text, position)`` accepts, or -1; searched backwards a step at a time."""
    end = high
    while end > low:
        begin = max(low, end - _STEP)
        found = [m.start() for m in pattern.finditer(text, begin, end)]
        for position in reversed(found):
            if keep(text, position):  # type: ignore[operator]
                return position
        end = begin
    return -1


def _any(text: str, position: int) -> bool:
    return True


def _separates(text: str, position: int) -> bool:
    """Whether a window may end after ``text[position]``, a character no token holds: it is
    no combining mark, normalisation makes no word character of it, and no combining mark
    follows it."""
    char = text[position]
    if unicodedata.category(char).startswith("M") or _WORD.search(unicodedata.normalize("NFKC", char)):
        return False
    following = text[position + 1 : position + 2]
    return not (following and unicodedata.category(following).startswith("M"))
