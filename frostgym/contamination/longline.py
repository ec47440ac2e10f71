"""A JSONL line too long to hold, read from the file a buffer at a time.

Why its own module: ``orjson.loads`` of a 200 MB line needs the line, then the text it
decodes, at once; and a document only exists as JSON, so its text cannot be cut out of the
raw bytes blindly (a cut may fall inside an escape, a UTF-8 character or a surrogate pair,
and the text may be the contents of a chat's messages, or a prompt and a completion in
either order). So the line is read twice, from its place in the file, through a buffer of
a window's size:

1. ``survey`` checks that the line is JSON as orjson would judge it (the grammar, string
   escapes, control characters, UTF-8 and surrogate pairs, numbers that are finite as a
   double, at most 1,024 levels of nesting; one difference: a number of more than a few MiB
   of digits is called not JSON) and, if it is an object, notes where each top-level value
   lies and its kind. String contents are checked by one regular expression at C speed and
   an incremental UTF-8 decoder, and kept nowhere.
2. ``string_pieces`` then decodes the string values the document's text is made of
   (``reading.document_text``'s choice, made from the survey; a chat's contents are found
   by walking the messages array), a piece of at most a buffer at a time, each piece cut
   where no escape, UTF-8 character or surrogate pair is split, decoded by orjson itself.

Memory: the buffer and a piece of text, whatever the line's length.
"""

from __future__ import annotations

import codecs
import math
import re
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from typing import BinaryIO

import orjson

from frostgym.core.errors import NotJSON

#: Nesting orjson accepts (a 1,025th level is an error).
MAX_DEPTH = 1024
#: About the longest number read (orjson reads any length; no training set holds longer ones).
MAX_NUMBER = 1 << 20
#: The JSON grammar's whitespace.
_SPACE = re.compile(rb"[ \t\r\n]*+")
#: What else ``bytes.strip`` removes: a line of only these is blank, no document at all.
_BLANK = re.compile(rb"[ \t\r\n\x0b\x0c]*+")
#: A string's contents up to its closing quote: characters that need no escape (any byte
#: from 0x20 up but the quote and the backslash; UTF-8 is checked apart), the two-character
#: escapes, ``\\uXXXX`` that is no surrogate, and a high surrogate followed by a low one.
_BODY = re.compile(
    rb'(?:[^"\\\x00-\x1f]++'
    rb'|\\["\\/bfnrt]'
    rb"|\\u(?![dD][89a-fA-F])[0-9a-fA-F]{4}"
    rb"|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2})*+"
)
_NUMBER = re.compile(rb"-?(?:0|[1-9][0-9]*+)(?:\.[0-9]++)?(?:[eE][+-]?[0-9]++)?")
_LITERALS = {ord("t"): (b"true", "true"), ord("f"): (b"false", "false"), ord("n"): (b"null", "null")}
_OPEN = {ord("{"): ord("}"), ord("["): ord("]")}
_QUOTE, _COLON, _COMMA = ord('"'), ord(":"), ord(",")
#: The longest escape sequence: a surrogate pair, ``\\uD83D\\uDE00``.
_LONGEST_ESCAPE = 12


def _run_end(pattern: re.Pattern[bytes], data: bytes, start: int, stop: int | None = None) -> int:
    """Where the run of ``pattern`` (one that matches the empty run too) from ``start`` ends."""
    matched = pattern.match(data, start, len(data) if stop is None else stop)
    assert matched is not None  # every pattern here is a repeat that may match nothing
    return matched.end()


@dataclass(frozen=True)
class Value:
    """A value in the line: its kind (``object``, ``array``, ``string``, ``number``,
    ``true``, ``false``, ``null``) and where it lies in the file (``start`` its first byte,
    ``end`` after its last)."""

    kind: str
    start: int
    end: int


@dataclass(frozen=True)
class Survey:
    """What ``survey`` found: ``blank`` (only whitespace), else the kind of the line's
    value and, for an object, its top-level ``members`` of the names asked for (the last of
    a repeated name, as orjson keeps)."""

    blank: bool = False
    kind: str = ""
    members: dict[str, Value] | None = None


class _Buffer:
    """The bytes ``[start, end)`` of ``stream``, read forwards through a buffer; with
    ``check_utf8``, each byte read is checked as UTF-8 (as it comes, once)."""

    def __init__(self, stream: BinaryIO, start: int, end: int, size: int, *, check_utf8: bool = False) -> None:
        self.stream, self.end, self.size = stream, end, size
        self.data, self.base = b"", start  # ``data[0]`` is the file's byte ``base``
        self._read_to = start
        self._decoder = codecs.getincrementaldecoder("utf-8")() if check_utf8 else None
        stream.seek(start)

    def at(self, position: int, need: int = 1) -> int:
        """The index in ``data`` of the file's byte ``position``, ``data`` holding at least
        ``need`` bytes from there (fewer only at the end); bytes before it may be dropped."""
        index = position - self.base
        if index < 0:
            raise AssertionError(f"byte {position} was dropped from the buffer (it starts at {self.base})")
        if index + need <= len(self.data) or self._read_to >= self.end:
            return index
        more = min(max(self.size, need - (len(self.data) - index)), self.end - self._read_to)
        block = self.stream.read(more)
        if len(block) != more:
            raise OSError(f"the file changed while it was read (expected {more} bytes at {self._read_to})")
        self._read_to += more
        if self._decoder is not None:
            try:
                self._decoder.decode(block, final=self._read_to >= self.end)
            except UnicodeDecodeError:
                raise NotJSON("not UTF-8") from None
        self.data, self.base = self.data[index:] + block, position
        return 0

    def byte(self, position: int) -> int:
        """The byte at ``position``; raises ``NotJSON`` past the end (the line ended)."""
        index = self.at(position)
        if index >= len(self.data):
            raise NotJSON("unexpected end of the line")
        return self.data[index]

    def skip(self, position: int, pattern: re.Pattern[bytes]) -> int:
        """Past the run of ``pattern`` (a pattern of single-byte repeats) at ``position``."""
        while True:
            index = self.at(position)
            found = _run_end(pattern, self.data, index)
            position = self.base + found
            if found < len(self.data) or self._read_to >= self.end:
                return position

    def slice(self, start: int, end: int) -> bytes:
        index = self.at(start, end - start)
        return self.data[index : index + end - start]


class _Parser:
    """The grammar over a ``_Buffer``."""

    def __init__(self, buffer: _Buffer) -> None:
        self.buffer = buffer
        self.closed_at = 0  # past the object ``members`` last read to its end

    def space(self, position: int) -> int:
        return self.buffer.skip(position, _SPACE)

    def expect(self, position: int, byte: int) -> int:
        if self.buffer.byte(position) != byte:
            raise NotJSON(f"expected {chr(byte)!r}")
        return position + 1

    def string(self, position: int) -> int:
        """Past the string at ``position`` (its opening quote)."""
        buffer = self.buffer
        position = self.expect(position, _QUOTE)
        while True:
            index = buffer.at(position, _LONGEST_ESCAPE)
            data = buffer.data
            found = _run_end(_BODY, data, index)
            if found < len(data) and data[found] == _QUOTE:
                return buffer.base + found + 1
            more = buffer.base + len(data) < buffer.end
            if more and (found == len(data) or (data[found] == ord("\\") and found > len(data) - _LONGEST_ESCAPE)):
                position = buffer.base + found  # the buffer ended, maybe inside an escape: read on
                continue
            raise NotJSON("bad string")

    def number(self, position: int) -> int:
        buffer, need = self.buffer, 64
        while True:
            index = buffer.at(position, need)
            matched = _NUMBER.match(buffer.data, index)
            if matched is None:
                raise NotJSON("bad number")
            if matched.end() < len(buffer.data) or buffer.base + len(buffer.data) >= buffer.end:
                break
            if need > MAX_NUMBER:  # the number runs on past the buffer: look further
                raise NotJSON("a number of several MiB")
            need *= 4
        if math.isinf(float(matched.group())):
            raise NotJSON("number is infinity when parsed as double")
        return buffer.base + matched.end()

    def key(self, position: int, longest: int) -> tuple[str | None, int]:
        """The member name at ``position`` (None when longer raw than ``longest`` bytes: it
        is none of the names asked for) and the position past it."""
        self.buffer.at(position, longest + 2 + _LONGEST_ESCAPE)  # kept while ``string`` reads a short one
        end = self.string(position)
        if end - position > longest + 2:
            return None, end
        name = orjson.loads(self.buffer.slice(position, end))
        return name, end

    def value(self, position: int, depth: int = 0) -> Value:
        """The value at ``position`` (whitespace skipped before it), checked to its end;
        ``depth``: the containers it is in."""
        position = self.space(position)
        start, kind = position, ""
        closers: list[int] = []  # of the containers open inside this value
        while True:
            first = self.buffer.byte(position)
            if first in _OPEN:
                if depth + len(closers) >= MAX_DEPTH:
                    raise NotJSON("depth limit exceeded")
                kind = kind or ("object" if first == ord("{") else "array")
                closers.append(_OPEN[first])
                position = self.space(position + 1)
                if self.buffer.byte(position) == closers[-1]:
                    closers.pop()
                    position += 1
                else:
                    if first == ord("{"):
                        position = self._member_name(position)
                    continue
            elif first == _QUOTE:
                kind = kind or "string"
                position = self.string(position)
            elif first == ord("-") or ord("0") <= first <= ord("9"):
                kind = kind or "number"
                position = self.number(position)
            elif first in _LITERALS:
                literal, name = _LITERALS[first]
                if self.buffer.slice(position, position + len(literal)) != literal:
                    raise NotJSON("bad literal")
                kind = kind or name
                position += len(literal)
            else:
                raise NotJSON("expected a value")
            # after a value: close containers, or go on to the next element or member
            while closers:
                position = self.space(position)
                byte = self.buffer.byte(position)
                if byte == _COMMA:
                    position = self.space(position + 1)
                    if closers[-1] == ord("}"):
                        position = self._member_name(position)
                    break
                if byte != closers[-1]:
                    raise NotJSON("expected ',' or a closing bracket")
                closers.pop()
                position += 1
            else:
                return Value(kind, start, position)
            position = self.space(position)

    def _member_name(self, position: int) -> int:
        """Past a member's name and its colon (and the whitespace after it)."""
        position = self.string(position)
        position = self.expect(self.space(position), _COLON)
        return self.space(position)

    def members(self, position: int, names: frozenset[str], depth: int) -> Iterator[tuple[str | None, Value]]:
        """The members of the object at ``position``: (name, or None if not one of
        ``names``; value); ``depth``: the containers the object is in. Read to its end, it
        leaves ``closed_at`` past the closing brace."""
        longest = _LONGEST_ESCAPE // 2 * max((len(n) for n in names), default=0)
        position = self.space(self.expect(self.space(position), ord("{")))
        if self.buffer.byte(position) == ord("}"):
            self.closed_at = position + 1
            return
        while True:
            name, position = self.key(position, longest)
            position = self.expect(self.space(position), _COLON)
            value = self.value(position, depth + 1)
            yield (name if name in names else None), value
            position = self.space(value.end)
            if self.buffer.byte(position) == ord("}"):
                self.closed_at = position + 1
                return
            position = self.space(self.expect(position, _COMMA))

    def elements(self, position: int, depth: int) -> Generator[int, int, None]:
        """The start of each element of the array at ``position``. The caller reads each
        element (``value`` or ``members``) and sends back where it ended."""
        position = self.space(self.expect(self.space(position), ord("[")))
        if self.buffer.byte(position) == ord("]"):
            return
        while True:
            end = yield position
            position = self.space(end)
            if self.buffer.byte(position) == ord("]"):
                return
            position = self.space(self.expect(position, _COMMA))


def survey(stream: BinaryIO, start: int, end: int, names: frozenset[str], size: int) -> Survey:
    """Check the line in bytes ``[start, end)`` of ``stream`` and find its top-level members
    named in ``names``, through a buffer of ``size`` bytes. Raises ``NotJSON``."""
    if _Buffer(stream, start, end, size).skip(start, _BLANK) >= end:
        return Survey(blank=True)
    buffer = _Buffer(stream, start, end, size, check_utf8=True)
    parser = _Parser(buffer)
    position = parser.space(start)
    if buffer.byte(position) == ord("{"):
        members = {name: value for name, value in parser.members(position, names, 0) if name is not None}
        kind, finish = "object", parser.closed_at
    else:
        value = parser.value(position)
        members, kind, finish = None, value.kind, value.end
    if parser.space(finish) < end:
        raise NotJSON("data after the value")
    buffer.at(end)  # the line's last bytes read, so checked as UTF-8
    return Survey(kind=kind, members=members)


def string_pieces(stream: BinaryIO, value: Value, size: int) -> Iterator[str]:
    """The text of the string ``value`` (a surveyed one), decoded a piece of at most about
    ``size`` bytes at a time; a piece never ends inside an escape or a UTF-8 character."""
    end = value.end - 1  # the closing quote
    buffer = _Buffer(stream, value.start + 1, end, size)
    position = value.start + 1
    while position < end:
        index = buffer.at(position, size + 4)
        data = buffer.data
        stop = index + size
        if buffer.base + stop >= end:
            stop = end - buffer.base
        else:
            stop = _run_end(_BODY, data, index, stop)  # whole escapes and surrogate pairs only
            while stop > index and data[stop] & 0xC0 == 0x80:  # not inside a UTF-8 character
                stop -= 1
        yield orjson.loads(b'"' + data[index:stop] + b'"')
        position = buffer.base + stop


def contents(stream: BinaryIO, array: Value, size: int) -> Iterator[Value]:
    """The string contents of the chat messages in ``array`` (a surveyed top-level value):
    of each element that is an object, its last member ``content``, if a string."""
    parser = _Parser(_Buffer(stream, array.start, array.end, size))
    walker = parser.elements(array.start, 1)
    position = next(walker, None)
    while position is not None:
        if parser.buffer.byte(position) == ord("{"):
            content = None
            for name, value in parser.members(position, _CONTENT, 2):
                if name is not None:
                    content = value
            if content is not None and content.kind == "string":
                yield content
            end = parser.closed_at
        else:
            end = parser.value(position, 2).end
        try:
            position = walker.send(end)
        except StopIteration:
            position = None


_CONTENT = frozenset({"content"})
