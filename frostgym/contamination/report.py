"""The contamination report: typed records, their JSON, and reading the JSON back.

Why its own module: ``frostgym contamination --json`` writes this report and
``frostgym eval --exclude`` reads it; both go through these records, so the two cannot
disagree on a field. The JSON holds no clock time: the same training file and tasks give
the same bytes.

Per eval task (``TaskOverlap``): ``ngram_overlap``, the highest share of the task's
distinct n-grams found in one training document (the figure the flag uses: a leak is a
document); ``ngram_coverage``, the share found anywhere in the training data, over all its
documents together (Llama 2's coverage; it also collects chance hits of phrases many tasks
share, so it only informs); ``minhash_similarity``, the highest estimated Jaccard
similarity of word shingles with one training document (0 when the LSH paired the task with
none: below about 0.5); ``contaminated``, ``ngram_overlap >= ngram_threshold`` or
``minhash_similarity >= minhash_threshold``; and ``train_line``, the line (JSONL) or row
(Parquet, datasets), from 1, of the document with the strongest evidence.

Why two measures and these thresholds (0.5 and 0.6): on training files leaking Math-v0
test questions verbatim and with one number or word changed (``synthetic``; 150 edited
leaks over 6 seeds), a changed token in the middle of a short question left as little as
0.46 of its 13-grams in that document, while its 5-word shingles kept a Jaccard similarity
of at least 0.71; tasks of other templates reached at most 0.08 and 0.0. Tasks of a leaked
task's own GSM template (another name or number) can reach either threshold (about 4% of
them did): they are near copies of the leak, and are counted apart in the benchmark
(``benchmarks/contamination.py``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from frostgym.contamination.ngrams import DEFAULT_NGRAM, MAX_WINDOW, MIN_GRAM_TOKENS, SHINGLE
from frostgym.core.errors import ContaminationInputError

REPORT_SCHEMA = "frostgym.contamination/1"


@dataclass(frozen=True)
class Parameters:
    """How a check counts and flags. ``ValueError`` for a value out of range.

    ``ngram``: words per n-gram; ``min_gram_tokens``: the fewest tokens a shorter task may
    have and still be one gram (its whole text); ``max_gram_tasks``: a gram more tasks hold
    is an instruction, left out (``frostgym.contamination.index``); ``shingle``: words per
    MinHash shingle;
    ``num_perm`` and ``lsh_threshold``: the MinHash signature and LSH tuning;
    ``prefilter``: a training document is MinHashed only when at least this share of its
    distinct shingles are shingles of some eval task (its Jaccard similarity with any task
    is at most that share, so no document skipped could reach it); ``ngram_threshold`` and
    ``minhash_threshold``: the flags."""

    ngram: int = DEFAULT_NGRAM
    min_gram_tokens: int = MIN_GRAM_TOKENS
    max_gram_tasks: int = 100
    shingle: int = SHINGLE
    num_perm: int = 128
    lsh_threshold: float = 0.5
    prefilter: float = 0.3
    ngram_threshold: float = 0.5
    minhash_threshold: float = 0.6

    def __post_init__(self) -> None:
        if not 1 <= self.min_gram_tokens <= self.ngram <= MAX_WINDOW or not 1 <= self.shingle <= MAX_WINDOW:
            raise ValueError(
                f"need 1 <= min_gram_tokens <= ngram <= {MAX_WINDOW} and 1 <= shingle <= {MAX_WINDOW}: {self}"
            )
        if self.max_gram_tasks < 1:
            raise ValueError(f"max_gram_tasks must be >= 1, got {self.max_gram_tasks}")
        if self.num_perm < 16:
            raise ValueError(f"num_perm must be >= 16, got {self.num_perm}")
        for name in ("lsh_threshold", "prefilter", "ngram_threshold", "minhash_threshold"):
            value = getattr(self, name)
            if not 0.0 < value <= 1.0:
                raise ValueError(f"{name} must be in (0, 1], got {value}")
        if self.lsh_threshold >= 1.0:
            raise ValueError(f"lsh_threshold must be below 1, got {self.lsh_threshold}")

    def flags(self, ngram_overlap: float, minhash_similarity: float) -> bool:
        """Whether a task with these figures counts as contaminated."""
        return ngram_overlap >= self.ngram_threshold or minhash_similarity >= self.minhash_threshold


@dataclass(frozen=True)
class TaskOverlap:
    """One eval task's figures (see the module docstring). ``ngrams``: its distinct
    n-grams (0: too short, or only instruction text: no n-gram evidence either way)."""

    env: str
    split: str
    task_id: str
    ngrams: int
    ngram_overlap: float
    ngram_coverage: float
    minhash_similarity: float
    contaminated: bool
    train_line: int | None


@dataclass(frozen=True)
class GroupSummary:
    """The tasks of one env and split: how many, how many contaminated, their share, and
    how many have no n-gram to judge by (``TaskOverlap.ngrams`` 0)."""

    env: str
    split: str
    tasks: int
    contaminated: int
    share: float
    without_ngrams: int


@dataclass(frozen=True)
class TrainingInfo:
    """What was read: the path as given, its format, size and SHA-256 (of the file; of a
    datasets directory, of its files' names and hashes), lines (JSONL) or rows read,
    documents scanned, lines skipped by reason with the first few (line, reason), and how
    many documents were MinHashed (passed the prefilter; each window of a long document
    counts as one: ``windows``)."""

    path: str
    format: str
    bytes: int
    sha256: str
    lines: int
    documents: int
    skipped: Mapping[str, int] = field(default_factory=dict)
    skipped_examples: Sequence[tuple[int, str]] = ()
    minhashed: int = 0


@dataclass(frozen=True)
class Report:
    """A whole check: parameters, what was read, the per env/split summary and every task."""

    parameters: Parameters
    training: TrainingInfo
    summary: Sequence[GroupSummary]
    tasks: Sequence[TaskOverlap]

    @property
    def contaminated(self) -> list[TaskOverlap]:
        return [task for task in self.tasks if task.contaminated]

    def to_json(self) -> dict[str, Any]:
        training = asdict(self.training)
        training["skipped_examples"] = [
            {"line": line, "reason": reason} for line, reason in self.training.skipped_examples
        ]
        return {
            "schema": REPORT_SCHEMA,
            "parameters": asdict(self.parameters),
            "training": training,
            "summary": [asdict(group) for group in self.summary],
            "tasks": [asdict(task) for task in self.tasks],
        }

    def write(self, path: Path) -> None:
        """Write the JSON (one task record per line of its array, keys in record order)."""
        path.write_text(json.dumps(self.to_json(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def summarize(tasks: Sequence[TaskOverlap]) -> list[GroupSummary]:
    """One summary per (env, split), in the order the tasks come."""
    groups: dict[tuple[str, str], list[TaskOverlap]] = {}
    for task in tasks:
        groups.setdefault((task.env, task.split), []).append(task)
    return [
        GroupSummary(
            env=env,
            split=split,
            tasks=len(members),
            contaminated=(flagged := sum(t.contaminated for t in members)),
            share=round(flagged / len(members), 6),
            without_ngrams=sum(t.ngrams == 0 for t in members),
        )
        for (env, split), members in groups.items()
    ]


def contaminated_in(data: Any, source: str) -> list[TaskOverlap]:
    """The contaminated task records of a report's JSON ``data`` (read from ``source``,
    named in errors). Raises ``ContaminationInputError`` when ``data`` is not a report."""
    if not isinstance(data, dict) or data.get("schema") != REPORT_SCHEMA or not isinstance(data.get("tasks"), list):
        raise ContaminationInputError(f"{source} is not a contamination report (schema {REPORT_SCHEMA})")
    found = []
    for number, record in enumerate(data["tasks"]):
        try:
            task = TaskOverlap(**record)
        except TypeError as error:
            raise ContaminationInputError(f"{source}: task record {number} is malformed ({error})") from None
        if task.contaminated:
            found.append(task)
    return found
