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
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from frostgym.contamination.report import ContaminationInputError

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
    ``raw`` holds whole JSONL lines, ``texts`` one text per row (None: the row has none)."""

    first: int
    raw: bytes = b""
    texts: Sequence[str | None] = ()


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
    datasets directory that cannot be opened or lacks a text column."""

    def __init__(self, path: Path, *, text_field: str = "text", chunk_bytes: int = CHUNK_BYTES) -> None:
        self.path = path
        self.format = detect_format(path)
        self.text_field = text_field
        self.chunk_bytes = chunk_bytes
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
                    digest.update(f"{file.relative_to(self.path).as_posix()}\x00{_file_sha256(file)}\n".encode())
                self._sha256 = digest.hexdigest()
            else:
                self._sha256 = _file_sha256(self.path)
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
        first, carry = 1, b""
        with self.path.open("rb") as stream:
            while block := stream.read(self.chunk_bytes):
                digest.update(block)
                data = carry + block
                cut = data.rfind(b"\n") + 1
                if cut == 0:  # no line ends in it yet: a line longer than a chunk
                    carry = data
                    continue
                carry = data[cut:]
                yield Chunk(first, raw=data[:cut])
                first += data.count(b"\n", 0, cut)
        self._sha256 = digest.hexdigest()
        if carry:
            yield Chunk(first, raw=carry)

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
                yield Chunk(first, texts=texts)
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
                yield Chunk(first, texts=texts)
                first += len(texts)

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


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while block := stream.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()
