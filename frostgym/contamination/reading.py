"""Training documents, streamed from a JSONL file, a Parquet file or a Hugging Face
``datasets`` directory (``save_to_disk``), a bounded chunk at a time.

Why its own module: a training set of a gigabyte must never be read into memory, and a bad
line must cost that line, never the check. The reader only cuts the input into chunks
(whole JSONL lines as bytes; Parquet and datasets rows as texts); the worker that scans a
chunk parses its lines (``parse_chunk``), so the parsing runs in parallel too.

A document's text is its ``text_field`` (default ``text``); a record without that field
but in a chat shape (``messages``: a list of ``{"role", "content"}``) or a completion
shape (``prompt`` and ``completion``) is read as the contents joined by newlines. A JSONL
line that is blank is not a document; one that is not JSON, not an object, or has no
text is skipped and counted by reason.

A long document is never held whole (``windows``): a JSONL line of more than ``window``
bytes (1 MiB) is not read into a chunk at all. The reader notes where it lies in the file
and reads on to its end keeping nothing; then ``longline`` reads the line again from the
file, a buffer at a time, checks it is JSON and decodes the strings its text is made of,
and the text is cut into windows of ``window`` characters, each a chunk of its own
(``Chunk.part``). A Parquet or datasets text of more than ``window`` characters (already in
memory: a row is read whole) is cut into the same windows, so that the scan's memory stays
bounded there too and every format gives the same figures.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from frostgym.contamination.longline import Value, contents, string_pieces, survey
from frostgym.contamination.windows import WINDOW, Part, Windower, windows
from frostgym.core.errors import ContaminationInputError, NotJSON
from frostgym.core.hashing import sha256_file

FORMATS = ("jsonl", "parquet", "datasets")
#: Bytes of JSONL (or, roughly, of Parquet text) per chunk: large enough that numpy's
#: per-call cost vanishes, small enough that a few in flight stay tens of MB.
CHUNK_BYTES = 4 << 20
#: Rows of Parquet or datasets per chunk.
ROWS_PER_CHUNK = 20_000
#: Skipped lines kept as examples in the report.
MAX_EXAMPLES = 5
_JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")
_DATASETS_MARKERS = ("dataset_info.json", "state.json", "dataset_dict.json")


@dataclass(frozen=True)
class Chunk:
    """Part of the input: ``first`` is the number (from 1) of its first line or row;
    ``raw`` holds whole JSONL lines, ``texts`` one text per row (None: the row has none);
    or ``part`` is a window of the long document on line ``first``; or ``skipped`` is why
    the long line ``first`` is no document."""

    first: int
    raw: bytes = b""
    texts: Sequence[str | None] = ()
    part: Part | None = None
    skipped: str = ""


@dataclass
class Parsed:
    """A chunk's documents as (line, text), the lines it held, and what was skipped."""

    documents: list[tuple[int, str]] = field(default_factory=list)
    lines: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    examples: list[tuple[int, str]] = field(default_factory=list)

    def skip(self, line: int, reason: str) -> None:
        self.skipped[reason] += 1
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append((line, reason))


def detect_format(path: Path) -> str:
    """``jsonl``, ``parquet`` or ``datasets`` for ``path``, by its suffix or, for a
    directory, the files ``save_to_disk`` writes. Raises ``ContaminationInputError`` for a
    path that is missing or of another kind."""
    if not path.exists():
        raise ContaminationInputError(f"training data {path} does not exist")
    if path.is_dir():
        if any((path / marker).exists() for marker in _DATASETS_MARKERS):
            return "datasets"
        raise ContaminationInputError(
            f"{path} is a directory but not a datasets directory (save_to_disk writes {' or '.join(_DATASETS_MARKERS)})"
        )
    suffix = path.suffix.lower()
    if suffix in _JSONL_SUFFIXES:
        return "jsonl"
    if suffix == ".parquet":
        return "parquet"
    raise ContaminationInputError(
        f"{path}: unknown training data format {suffix or '(no suffix)'!r}; expected JSONL (.jsonl, .ndjson, .json "
        "with one object per line), Parquet (.parquet) or a datasets directory (save_to_disk)"
    )


def document_text(record: Mapping[str, Any], text_field: str) -> str | None:
    """The text of one record (see the module docstring), or None when it has none."""
    value = record.get(text_field)
    if isinstance(value, str):
        return value
    if value is None and text_field != "messages":
        value = record.get("messages")
        if value is None:
            prompt, completion = record.get("prompt"), record.get("completion")
            if isinstance(prompt, str) and isinstance(completion, str):
                return f"{prompt}\n{completion}"
            return None
    if isinstance(value, list):  # a chat: the contents of its messages
        contents = [m.get("content") for m in value if isinstance(m, Mapping)]
        texts = [c for c in contents if isinstance(c, str)]
        return "\n".join(texts) if texts else None
    return None


def parse_chunk(chunk: Chunk, text_field: str) -> Parsed:
    """The documents of ``chunk``, each with its line (or row) number."""
    parsed = Parsed()
    if chunk.skipped:
        parsed.lines = 1
        parsed.skip(chunk.first, chunk.skipped)
        return parsed
    if chunk.texts:
        parsed.lines = len(chunk.texts)
        for offset, text in enumerate(chunk.texts):
            if text is None:
                parsed.skip(chunk.first + offset, f"no text in field {text_field!r}")
            else:
                parsed.documents.append((chunk.first + offset, text))
        return parsed
    lines = chunk.raw.split(b"\n")
    if lines and not lines[-1]:
        lines.pop()  # the newline that ends the last line
    parsed.lines = len(lines)
    for offset, line in enumerate(lines):
        number = chunk.first + offset
        if not line.strip():
            continue
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            parsed.skip(number, "not JSON")
            continue
        if not isinstance(record, dict):
            parsed.skip(number, "not a JSON object")
            continue
        text = document_text(record, text_field)
        if text is None:
            parsed.skip(number, f"no text in field {text_field!r}")
        else:
            parsed.documents.append((number, text))
    return parsed


class TrainingSource:
    """A training file or directory to stream: ``chunks()`` yields it once; ``size`` and
    ``sha256`` fingerprint it (of a datasets directory: its files, by name and content).
    Raises ``ContaminationInputError`` as ``detect_format`` does, and for a Parquet file or
    datasets directory that cannot be opened or lacks a text column. ``window``: the
    length over which a document is read in windows, and a window's (module docstring)."""

    def __init__(
        self, path: Path, *, text_field: str = "text", chunk_bytes: int = CHUNK_BYTES, window: int = WINDOW
    ) -> None:
        self.path = path
        self.format = detect_format(path)
        self.text_field = text_field
        self.chunk_bytes = chunk_bytes
        self.window = window
        self._sha256: str | None = None
        self.size = sum(p.stat().st_size for p in self._files())

    def _files(self) -> list[Path]:
        if self.path.is_dir():
            return sorted(p for p in self.path.rglob("*") if p.is_file())
        return [self.path]

    @property
    def sha256(self) -> str:
        """The fingerprint (computed once; for JSONL, while ``chunks`` reads it)."""
        if self._sha256 is None:
            if self.path.is_dir():
                digest = hashlib.sha256()
                for file in self._files():
                    digest.update(f"{file.relative_to(self.path).as_posix()}\x00{sha256_file(file)}\n".encode())
                self._sha256 = digest.hexdigest()
            else:
                self._sha256 = sha256_file(self.path)
        return self._sha256

    def chunks(self) -> Iterator[Chunk]:
        """The input, a chunk at a time, in order."""
        if self.format == "jsonl":
            return self._jsonl()
        if self.format == "parquet":
            return self._parquet()
        return self._datasets()

    def _jsonl(self) -> Iterator[Chunk]:
        digest = hashlib.sha256()
        first, data, base = 1, b"", 0  # ``data``: the file's bytes from ``base``, whole lines and a start of one
        after_long: bytes | None = None  # what the block that ended a long line holds after it
        with self.path.open("rb") as stream:
            while True:
                if after_long is None:
                    block = stream.read(self.chunk_bytes)
                    digest.update(block)
                else:  # a chunk of its own, not one with the next block: no chunk is twice the size
                    block, after_long = after_long, None
                data += block
                complete = data.rfind(b"\n") + 1 if block else len(data)  # at the end, a last line without a newline
                position = 0
                while position < complete:
                    long = _long_line(data, position, complete, self.window)
                    stop = complete if long < 0 else long
                    if stop > position:
                        yield Chunk(first, raw=data[position:stop])
                        first += data.count(b"\n", position, stop)
                    if long < 0:
                        break
                    end = data.find(b"\n", long, complete)
                    end = complete if end < 0 else end
                    yield from self._long_document(first, base + long, base + end)
                    first += 1
                    position = end + 1
                data, base = data[complete:], base + complete
                if not block:
                    break
                if len(data) > self.window:  # the line begun is long: find its end, keeping none of it
                    start, base = base, base + len(data)
                    while (block := stream.read(self.chunk_bytes)) and (newline := block.find(b"\n")) < 0:
                        digest.update(block)
                        base += len(block)
                    digest.update(block)
                    end = base + newline if block else base
                    yield from self._long_document(first, start, end)
                    first += 1
                    data, base = b"", end + 1
                    after_long = (block[newline + 1 :] or None) if block else None
        self._sha256 = digest.hexdigest()

    def _long_document(self, line: int, start: int, end: int) -> Iterator[Chunk]:
        """The windows of the JSONL line in bytes ``[start, end)`` of the file, longer than a
        window (or why it is no document), read from the file again (``longline``)."""
        field = self.text_field
        with self.path.open("rb") as stream, self.path.open("rb") as strings:
            try:
                found = survey(stream, start, end, frozenset({field, "messages", "prompt", "completion"}), self.window)
            except NotJSON:
                yield Chunk(line, skipped="not JSON")
                return
            if found.blank:
                yield Chunk(line, raw=b"\n")  # a blank line: counted, no document
                return
            if found.members is None:
                yield Chunk(line, skipped="not a JSON object")
                return
            pieces = _text_pieces(found.members, field, stream, strings, self.window)
            windower, texts = Windower(self.window), False
            for piece in pieces:
                texts = True
                for part in windower.feed(piece):
                    yield Chunk(line, part=part)
            if not texts:
                yield Chunk(line, skipped=f"no text in field {field!r}")
                return
            yield Chunk(line, part=windower.close())

    def _parquet(self) -> Iterator[Chunk]:
        try:
            import pyarrow.parquet as pq
        except ImportError as error:
            raise ContaminationInputError(f"reading {self.path} needs pyarrow: pip install pyarrow") from error
        try:
            parquet = pq.ParquetFile(self.path)
            names = list(parquet.schema_arrow.names)
        except Exception as error:  # pyarrow raises its own kinds for a file that is not Parquet
            raise ContaminationInputError(f"{self.path} is not a readable Parquet file ({error})") from None
        columns = self._columns(names)
        first = 1
        for group in range(parquet.num_row_groups):
            for batch in parquet.iter_batches(batch_size=ROWS_PER_CHUNK, row_groups=[group], columns=columns):
                texts = self._texts(batch.to_pydict())
                yield from self._rows(first, texts)
                first += len(texts)

    def _datasets(self) -> Iterator[Chunk]:
        try:
            from datasets import Dataset, DatasetDict, load_from_disk  # type: ignore[import-untyped,unused-ignore]
        except ImportError as error:
            raise ContaminationInputError(
                f"reading {self.path} needs the datasets package: pip install 'frostgym[train]'"
            ) from error
        try:
            loaded = load_from_disk(str(self.path))
        except Exception as error:  # datasets raises its own kinds for a damaged directory
            raise ContaminationInputError(f"{self.path} is not a readable datasets directory ({error})") from None
        parts: list[Dataset] = (
            [loaded[name] for name in sorted(loaded)] if isinstance(loaded, DatasetDict) else [loaded]
        )
        first = 1
        for part in parts:
            columns = self._columns(list(part.column_names))
            for batch in part.select_columns(columns).iter(batch_size=ROWS_PER_CHUNK):
                texts = self._texts(batch)
                yield from self._rows(first, texts)
                first += len(texts)

    def _rows(self, first: int, texts: list[str | None]) -> Iterator[Chunk]:
        """Chunks of ``texts`` (rows from ``first``), a text longer than a window cut into
        windows."""
        start = 0
        for at, text in enumerate(texts):
            if text is not None and len(text) > self.window:
                if at > start:
                    yield Chunk(first + start, texts=texts[start:at])
                for part in windows(text, self.window):
                    yield Chunk(first + at, part=part)
                start = at + 1
        if start < len(texts):
            yield Chunk(first + start, texts=texts[start:])

    def _columns(self, names: list[str]) -> list[str]:
        """The columns a document's text is read from (``document_text``'s shapes)."""
        for wanted in ([self.text_field], ["messages"], ["prompt", "completion"]):
            if all(name in names for name in wanted):
                return wanted
        raise ContaminationInputError(
            f"{self.path} has no column {self.text_field!r} (nor messages, nor prompt and completion); "
            f"its columns: {', '.join(names)}; name the text column with --text-field"
        )

    def _texts(self, batch: Mapping[str, list[Any]]) -> list[str | None]:
        columns = list(batch)
        rows = len(batch[columns[0]]) if columns else 0
        return [document_text({name: batch[name][i] for name in columns}, self.text_field) for i in range(rows)]


def _long_line(data: bytes, start: int, end: int, longest: int) -> int:
    """Where the first line of ``data[start:end]`` (whole lines) longer than ``longest``
    bytes begins, or -1; in steps of ``longest`` bytes, not line by line."""
    while end - start > longest:
        newline = data.rfind(b"\n", start, start + longest + 1)
        if newline < 0:
            return start
        start = newline + 1
    return -1


def _text_pieces(
    members: Mapping[str, Value], field: str, stream: BinaryIO, strings: BinaryIO, size: int
) -> Iterator[str]:
    """The pieces of a long line's text, as ``document_text`` would choose it from the
    line's top-level ``members``: the string ``field``; else (``field`` absent or null) a
    chat's ``messages``, else a ``prompt`` and a ``completion``. Nothing: no text (a text,
    even an empty one, begins with an empty piece)."""
    value = members.get(field)
    if value is not None and value.kind == "string":
        yield ""
        yield from string_pieces(stream, value, size)
        return
    if (value is None or value.kind == "null") and field != "messages":
        value = members.get("messages")
        if value is None or value.kind == "null":
            prompt, completion = members.get("prompt"), members.get("completion")
            if prompt is not None and completion is not None and prompt.kind == completion.kind == "string":
                yield ""
                yield from string_pieces(stream, prompt, size)
                yield "\n"
                yield from string_pieces(stream, completion, size)
            return
    if value is not None and value.kind == "array":
        for number, content in enumerate(contents(stream, value, size)):
            yield "\n" if number else ""
            yield from string_pieces(strings, content, size)
