"""Tasks and task sources: where an env's episodes come from.

A ``Task`` is plain frozen data. Every env serves one ``TaskSource``, of one of two kinds:

- ``ProceduralSource``, a seeded generator: it turns (split, index) into a task with a
  private RNG derived by ``derive_seed`` and keeps a split's tasks only if their content
  hashes into that split, so splits never share a question. Finite splits are
  materialised once per process (and de-duplicated); ``train`` is unbounded.
- ``TaskListSource``, a fixed list (a published benchmark, hand-written tasks): its
  subclass only says how to load the drafts of each split. Its ``train`` split may be
  drawn, unbounded, from a ``ProceduralSource`` that never serves a listed prompt.

Both answer the same questions (sizes, ``task``, ``task_by_id``, ``sample``, ``tasks``)
and give the fixture lock (``frostgym.core.fixture_lock``) the same ``lock_record``,
which hashes the splits the source names in ``locked_splits``.

A source may take a config: a frozen dataclass of JSON values (``config_type``) that its
content is made from. The default config gives the task ids, seeds and content every
shipped lock records. Any other config tags the ids (``arithmetic~3f9a2c1b/dev/4``), so
tasks of two configs are never taken for one another, and is part of every task seed. A
field added to a config after it shipped is declared with ``added``: the record leaves it
out while it holds its default, so every config that existed before keeps its ids, seeds
and lock entry.

A source may also name some configs as its levels (``levels``, 1 = easiest), each with a
few words saying what it is: ``level_config`` turns a level into its config, and a source
made with a level's config tags its ids with the level (``arithmetic~L1/dev/4``) rather
than a hash. The default config is one of the levels (``default_level``) or, for a list
whose levels are parts of it, none of them; either way its ids stay untagged. Levels share
the source's name, so a prompt falls in the same split at every level: no level's train
holds another level's eval task.

A source may also make *twins* (``twin_rule`` names the version of its rule): the twin of an
eval task keeps its structure (a template, an expression's shape, a function's code) with
new values or names and its own gold, so a score that drops from originals to twins is a
sign of memorised originals. A twin's id is its original's plus ``~twin``
(``arithmetic~L1/test/5~twin``): the level tag sits in the first part of an id and the twin
tag after the index, so neither can be read as the other. ``twin`` makes it from the
original's content hash with ``derive_random``, so it is frozen too, and ``_twin_fits``
keeps it off every eval task of the source (and a generator's twin in its original's split,
where that split's part of the content has room, so train never serves it). The lock keeps
a hash of the twins of the locked splits (``twins_record``), checked the first time a
process serves a twin.
"""

from __future__ import annotations

import dataclasses
import json
import random
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property
from types import MappingProxyType
from typing import Any, ClassVar, TypeVar, cast

import numpy as np

from frostgym.core.errors import UnknownTaskError
from frostgym.core.hashing import canonical_json, sha256_json
from frostgym.core.seeding import derive_random
from frostgym.core.splits import ALL_SPLITS, DEFAULT_SPLIT_PERCENT, Split, check_split, split_of
from frostgym.core.task_ids import is_twin_id, original_id, parse_task_id, twin_id

ConfigT = TypeVar("ConfigT")
SourceT = TypeVar("SourceT", bound="TaskSource")


@dataclass(frozen=True)
class Task:
    """One frozen problem. ``answer`` is the gold answer in the family's own terms."""

    task_id: str
    source: str
    split: Split
    index: int
    prompt: str
    answer: str
    solution: str = ""
    difficulty: str = "medium"
    tags: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        """The canonical content of the task, the thing its hash covers."""
        return {
            "task_id": self.task_id,
            "source": self.source,
            "split": self.split,
            "index": self.index,
            "prompt": self.prompt,
            "answer": self.answer,
            "solution": self.solution,
            "difficulty": self.difficulty,
            "tags": list(self.tags),
            "metadata": dict(self.metadata),
        }

    @cached_property
    def sha256(self) -> str:
        return sha256_json(self.record())


@dataclass(frozen=True)
class Draft:
    """What a generator or loader returns before the source gives it an id and a split."""

    prompt: str
    answer: str
    solution: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    #: Per-task overrides of the source's difficulty and tags (hand-written task sets).
    difficulty: str | None = None
    tags: tuple[str, ...] | None = None


# -- configs ---------------------------------------------------------------------------


_ADDED = "frostgym.added"


def added(default: ConfigT) -> ConfigT:
    """A config field added after its config shipped: ``field: int = added(2)``. The
    config's record (``TaskSource.config_record``) leaves the field out while it holds
    ``default``, so the configs that existed before keep their record, and with it their
    ids, seeds and lock entries."""
    return field(default=default, metadata={_ADDED: True})


def _recorded_fields(config: object) -> dict[str, Any]:
    """The fields of a config (a frozen dataclass) that its record holds, by name: every
    field but an ``added`` one at its default."""
    return {
        f.name: getattr(config, f.name)
        for f in dataclasses.fields(config)  # type: ignore[arg-type]
        if not (f.metadata.get(_ADDED) and getattr(config, f.name) == f.default)
    }


@dataclass(frozen=True)
class Level:
    """One level of a task source (``TaskSource.levels``).

    ``summary``: what the level is, in a few words (``frostgym list --levels`` shows it).
    ``config``: the source's config at this level, a ``config_type`` instance; for a source
    narrowed without a config (BFCL's categories), the narrowing its env takes.
    ``sizes``: the split sizes, for a level whose content is too small for the source's own
    (every task hashed into a split, or fewer); None keeps the source's.
    """

    summary: str
    config: Any
    sizes: Mapping[Split, int | None] | None = None


def make_config(config_type: type[ConfigT], value: ConfigT | Mapping[str, Any] | None) -> ConfigT:
    """``value`` as a ``config_type`` (a frozen dataclass): None is the default config, an
    instance is kept, a mapping (JSON, as a card records it) is read key by key, its lists
    as tuples so the config stays hashable. Raises ``ValueError`` naming the accepted keys
    for an unknown one, and whatever the config's own checks raise for a bad value."""
    if value is None:
        return config_type()
    if isinstance(value, config_type):
        return value
    if not isinstance(value, Mapping):
        raise ValueError(f"a {config_type.__name__} is a mapping of its fields, got {type(value).__name__}")
    accepted = [f.name for f in dataclasses.fields(config_type)]  # type: ignore[arg-type]
    unknown = sorted(str(k) for k in value if k not in accepted)
    if unknown:
        raise ValueError(f"unknown {config_type.__name__} keys {unknown}; accepted: {', '.join(accepted)}")
    return config_type(**{k: tuple(v) if isinstance(v, list) else v for k, v in value.items()})


def require_int(name: str, value: object, *, low: int, high: int | None = None) -> None:
    """For a config's ``__post_init__``: ``ValueError`` unless ``value`` is an int in [low, high]."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        bounds = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ValueError(f"{name} must be an integer {bounds}, got {value!r}")


# -- the shared base -------------------------------------------------------------------


class TaskSource(ABC):
    """Everything a task source shares, whatever makes its tasks. Raises
    ``UnknownTaskError`` for a task or split it does not have."""

    #: Stable identifier; part of every task id and every derived seed.
    name: str
    #: Bump when the content changes; a generator hashes it into every task seed.
    version: str
    difficulty: str
    tags: tuple[str, ...] = ()
    #: Tasks per split: a count, or None for an unbounded split (drawn by index).
    sizes: Mapping[Split, int | None]
    #: How content hashes are shared out among the splits.
    split_percent: Mapping[Split, int] = DEFAULT_SPLIT_PERCENT
    #: The finite splits whose content the fixture lock hashes.
    locked_splits: tuple[Split, ...]
    #: Installed distributions (PyPI names) the tasks' content is read, generated or replayed
    #: from: another version of one can change an episode. A card's provenance records their
    #: versions (``frostgym.cards.provenance``); this is the only list of them.
    distributions: tuple[str, ...] = ()
    #: The frozen dataclass of options the content is made from; None: the source takes none.
    config_type: ClassVar[type[Any] | None] = None
    #: This source's config (a ``config_type`` instance), or None.
    config: Any
    #: Whether ``config`` is the default one (always, for a source without a config).
    default_config: bool
    #: The first part of every task id: the name, plus ``~L<n>`` for a level's config other
    #: than the default, or ``~<hash8>`` for any other config.
    id_prefix: str
    #: Named configs by level, 1 = easiest; empty for a source without levels.
    levels: ClassVar[Mapping[int, Level]] = MappingProxyType({})
    #: The level whose config is the default one; None when the default is none of them (a
    #: fixed list whose levels are parts of it serves them all together) or there are none.
    default_level: ClassVar[int | None] = None
    #: One line on the levels: why the source has none, or what its default serves when
    #: that is no level. ``frostgym list --levels`` and the errors of ``level_config`` say it.
    levels_note: ClassVar[str] = ""
    #: The level this source's config is, or None.
    level: int | None
    #: The version of the rule that makes this source's twins (``twin_draft``): part of every
    #: twin's seed, its content (``metadata["twin_rule"]``) and the lock entry, so a change to
    #: the rule is a new version. Empty: the source makes no twins.
    twin_rule: ClassVar[str] = ""
    #: Give up on a twin after this many rejected draws (guards a broken rule).
    max_twin_draws: ClassVar[int] = 10_000

    def __init__(self, config: object = None) -> None:
        """``config``: a ``config_type`` instance or a mapping of its fields (``make_config``);
        None is the default. ``ValueError`` for a bad config, or any for a source without one."""
        if self.config_type is None:
            if config is not None:
                raise ValueError(f"task source {self.name!r} takes no config, got {config!r}")
            self.config = None
        else:
            self.config = make_config(self.config_type, config)
        record = self.config_record()
        self.default_config = self.config_type is None or self.config == self.config_type()
        levels = self.levels if self.config_type is not None else {}
        self.level = next((n for n, level in sorted(levels.items()) if level.config == self.config), None)
        if self.default_config:
            self.id_prefix = self.name
        elif self.level is not None:
            self.id_prefix = f"{self.name}~L{self.level}"
        else:
            self.id_prefix = f"{self.name}~{sha256_json(record)[:8]}"
        level_sizes = None if self.level is None else levels[self.level].sizes
        if level_sizes is not None:
            self.sizes = MappingProxyType(dict(level_sizes))
        self._finite: dict[Split, list[Task]] = {}
        self._pools: dict[Split, list[Task]] = {}
        self._twins: dict[str, Task] = {}

    # -- what a kind provides ----------------------------------------------------------
    @abstractmethod
    def _build(self, split: Split) -> list[Task]:
        """Every task of the finite ``split``, in index order (called once per split)."""

    def _draw(self, split: Split, index: int) -> Task:
        """Task ``index`` of the unbounded ``split``."""
        raise UnknownTaskError(f"{self.name} has no unbounded split {split!r}")

    # -- what a subclass may narrow ----------------------------------------------------
    def drawable(self, task: Task) -> bool:
        """Whether ``sample`` may draw ``task`` from its finite split. A source narrowed to
        part of its content (BFCL's categories) says no to the rest; its tasks, sizes and
        lock stay the whole."""
        return True

    def _task_id(self, split: Split, index: int, draft: Draft) -> str:
        return f"{self.id_prefix}/{split}/{index}"

    # -- what a source with twins provides ---------------------------------------------
    def twin_draft(self, original: Task, rng: random.Random) -> Draft:
        """The draft of ``original``'s twin, from ``rng`` alone: the same structure with new
        values (or names), and the gold solved again. Raising ``ValueError`` or
        ``ArithmeticError`` rejects the draw; the next one is used. A source with a
        ``twin_rule`` overrides this."""
        raise UnknownTaskError(f"{self.id_prefix} has no twins")

    def _twin_fits(self, draft: Draft, original: Task, candidate: int) -> bool:
        """Whether the twin of ``original`` may have ``draft``'s prompt, the ``candidate``-th
        (from 0) the rule drew that is not the original's: never that of one of the source's
        eval tasks."""
        raise NotImplementedError

    # -- levels ------------------------------------------------------------------------
    @classmethod
    def level_config(cls, level: int, task_config: object = None, *, who: str = "") -> Any:
        """The config of ``level`` (``Level.config``), with the fields ``task_config`` (a
        mapping of some of them, or None) gives set on top. ``who`` names the source in the
        errors (an env id; by default the source's name). Raises ``ValueError`` when the
        source has no levels, when ``level`` is none of them (the message lists them), and
        for a ``task_config`` that is not a mapping or names an unknown field."""
        who = who or f"task source {cls.name!r}"
        if not cls.levels:
            raise ValueError(f"{who} has no levels" + (f": {cls.levels_note}" if cls.levels_note else ""))
        if isinstance(level, bool) or not isinstance(level, int) or level not in cls.levels:
            listing = "; ".join(f"{n} = {entry.summary}" for n, entry in sorted(cls.levels.items()))
            raise ValueError(f"{who} has no level {level!r}; its levels are {listing}")
        config = cls.levels[level].config
        if task_config is None:
            return config
        if cls.config_type is None or not isinstance(task_config, Mapping):
            raise ValueError(f"with a level, {who} takes task_config as a mapping of the fields to change")
        fields = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
        return make_config(cls.config_type, {**fields, **task_config})

    def drawable_size(self, split: Split) -> int | None:
        """How many tasks ``sample`` draws from ``split``: its size, or for a source narrowed
        to part of its content (``drawable``), the tasks of that part."""
        return self.size(split)

    # -- the API -----------------------------------------------------------------------
    def config_record(self) -> dict[str, Any]:
        """The config as JSON data (what the lock and a card record); ``{}`` for none. An
        ``added`` field at its default is left out."""
        if self.config is None:
            return {}
        data: dict[str, Any] = json.loads(canonical_json(_recorded_fields(self.config)))
        return data

    def size(self, split: Split) -> int | None:
        return self.sizes[check_split(split)]

    def task(self, split: Split, index: int) -> Task:
        split = check_split(split)
        size = self.sizes[split]
        if size == 0:
            raise self._no_split(split)
        if index < 0 or (size is not None and index >= size):
            raise UnknownTaskError(f"{self.name}: index {index} is outside split {split!r} (size {size})")
        if size is None:
            return self._draw(split, index)
        return self._finite_split(split)[index]

    def task_by_id(self, task_id: str) -> Task:
        """The task ``task_id`` names: ``prefix/split/index``, or that plus ``~twin`` for its
        twin (``twin``). ``UnknownTaskError`` for an id this source does not have."""
        if isinstance(task_id, str) and is_twin_id(task_id):
            return self.twin(self.task_by_id(original_id(task_id)))
        prefix, split, index = parse_task_id(task_id)
        if prefix != self.id_prefix:
            raise UnknownTaskError(f"task {task_id!r} is not from source {self.id_prefix!r}")
        return self.task(split, index)

    def sample(self, split: Split, rng: np.random.Generator) -> Task:
        """The task an episode seeded with ``rng`` gets."""
        size = self.size(split)
        if size is None:
            return self.task(split, int(rng.integers(0, 2**62, dtype=np.int64)))
        pool = self._pool(split)
        if not pool:
            raise self._no_split(split)
        return pool[int(rng.integers(0, len(pool), dtype=np.int64))]

    def tasks(self, split: Split) -> Iterator[Task]:
        size = self.size(split)
        if size is None:
            raise ValueError(f"split {split!r} of {self.name} is unbounded; iterate with task()")
        return iter(self._finite_split(split))

    def twin(self, task: Task) -> Task:
        """The twin of ``task``, an eval task of this source: the same structure with new
        values and its own gold (``twin_draft``), under the id ``task``'s plus ``~twin``, in
        ``task``'s split and at its index, with ``metadata`` saying whose twin it is
        (``twin_of``) and by which rule (``twin_rule``). Its values are drawn from
        ``task``'s content hash alone, and its prompt is that of no eval task of the source.
        Raises ``UnknownTaskError`` for a source without twins, a train task or a twin, and
        ``RuntimeError`` when the rule finds no twin."""
        if not self.twin_rule:
            raise UnknownTaskError(f"{self.id_prefix} has no twins; {task.task_id!r} has none")
        if is_twin_id(task.task_id) or task.split == "train":
            what = "a twin" if is_twin_id(task.task_id) else "a train task"
            raise UnknownTaskError(f"{task.task_id!r} is {what}: only eval tasks have twins")
        cached = self._twins.get(task.task_id)
        if cached is not None:
            return cached
        candidate = 0
        for attempt in range(self.max_twin_draws):
            rng = derive_random("twin", self.name, self.twin_rule, task.sha256, attempt)
            try:
                draft = self.twin_draft(task, rng)
            except (ValueError, ArithmeticError):
                continue  # a degenerate draw (an inexact division, say): the next one is as frozen
            if draft.prompt == task.prompt:
                continue
            candidate += 1
            if not self._twin_fits(draft, task, candidate - 1):
                continue
            made = self._make(task.split, task.index, draft)
            twin = dataclasses.replace(
                made,
                task_id=twin_id(task.task_id),
                metadata={**draft.metadata, "twin_of": task.task_id, "twin_rule": self.twin_rule},
            )
            self._twins[task.task_id] = twin
            return twin
        raise RuntimeError(f"{self.id_prefix}: no twin of {task.task_id} after {self.max_twin_draws} draws")

    def twins_record(self) -> dict[str, Any]:
        """What the lock keeps of this source's twins: the rule's version and the SHA-256 of
        the twins of each locked split (``{"rule": "1", "sha256": {"dev": …}}``)."""
        return {
            "rule": self.twin_rule,
            "sha256": {
                split: sha256_json([self.twin(t).record() for t in self.tasks(split)]) for split in self.locked_splits
            },
        }

    def fingerprint(self, splits: tuple[Split, ...]) -> str:
        """SHA-256 over the full content of the given finite splits."""
        return sha256_json([[t.record() for t in self.tasks(s)] for s in splits])

    def lock_record(self, *, twins: bool = True) -> dict[str, Any]:
        """What the fixture lock keeps for this source: its version, config, split sizes and
        the SHA-256 of each locked split (``{"sha256": {"dev": …}}``), and for a source with
        twins, unless ``twins`` is False, their ``twins_record``."""
        record: dict[str, Any] = {
            "version": self.version,
            "config": self.config_record(),
            "sizes": dict(self.sizes),
            "sha256": {split: self.fingerprint((split,)) for split in self.locked_splits},
        }
        if twins and self.twin_rule:
            record["twins"] = self.twins_record()
        return record

    # -- shared machinery --------------------------------------------------------------
    def _make(self, split: Split, index: int, draft: Draft) -> Task:
        return Task(
            task_id=self._task_id(split, index, draft),
            source=self.name,
            split=split,
            index=index,
            prompt=draft.prompt,
            answer=draft.answer,
            solution=draft.solution,
            difficulty=draft.difficulty or self.difficulty,
            tags=self.tags if draft.tags is None else draft.tags,
            metadata=draft.metadata,
        )

    def _finite_split(self, split: Split) -> list[Task]:
        cached = self._finite.get(split)
        if cached is None:
            cached = self._finite[split] = self._build(split)
        return cached

    def _no_split(self, split: Split) -> UnknownTaskError:
        served = ", ".join(repr(s) for s in ALL_SPLITS if s != split and self.sizes[s] != 0)
        return UnknownTaskError(f"{self.id_prefix} has no task to draw in split {split!r}; its tasks are in {served}")

    def _pool(self, split: Split) -> list[Task]:
        pool = self._pools.get(split)
        if pool is None:
            pool = self._pools[split] = [t for t in self._finite_split(split) if self.drawable(t)]
        return pool


# -- the two kinds ---------------------------------------------------------------------


class ProceduralSource(TaskSource):
    """A seeded generator of tasks with fixed-size eval splits and an unbounded train
    split. Its lock hashes the dev split."""

    sizes: Mapping[Split, int | None] = MappingProxyType({"train": None, "dev": 200, "test": 500, "private": 500})
    locked_splits: tuple[Split, ...] = ("dev",)
    #: Give up on a split if this many draws in a row are rejected (guards a broken generator).
    max_rejections: int = 10_000
    #: For this many candidates (draws of the twin rule) a twin must hash into its original's
    #: split; after them (a split whose part of the content holds few or no other tasks of
    #: the structure, as at the smallest levels) into train instead, never another eval split.
    twin_same_split_draws: ClassVar[int] = 100

    def __init__(self, config: object = None) -> None:
        super().__init__(config)
        #: Prompts this generator never serves: a fixed list's, when it draws that list's train.
        self.held_out: frozenset[str] = frozenset()
        # The default config seeds as it always has; any other is part of every seed.
        self._config_seed: tuple[str, ...] = () if self.default_config else (canonical_json(self.config_record()),)
        self._split_prompts: dict[Split, frozenset[str]] = {}

    @abstractmethod
    def generate(self, rng: random.Random) -> Draft:
        """Make one task from ``rng`` alone (no other randomness, no I/O). Raising
        ``ValueError`` or ``ArithmeticError`` rejects the draw; the next one is used."""

    def _owns(self, draft: Draft, split: Split) -> bool:
        if draft.prompt in self.held_out:
            return False
        return split_of(draft.prompt, salt=self.name, percent=self.split_percent) == split

    def _twin_fits(self, draft: Draft, original: Task, candidate: int) -> bool:
        """In the original's split and none of its tasks; after ``twin_same_split_draws``
        candidates, in train. A prompt's split is a function of it, so a twin that is in one
        split can be none of another split's tasks."""
        owner = split_of(draft.prompt, salt=self.name, percent=self.split_percent)
        if owner == original.split:
            return draft.prompt not in self._prompts(original.split)
        return owner == "train" and candidate >= self.twin_same_split_draws and draft.prompt not in self.held_out

    def _prompts(self, split: Split) -> frozenset[str]:
        prompts = self._split_prompts.get(split)
        if prompts is None:
            prompts = self._split_prompts[split] = frozenset(t.prompt for t in self.tasks(split))
        return prompts

    def _try_generate(self, *seed_parts: str | int) -> Draft | None:
        try:
            return self.generate(derive_random(self.name, self.version, *self._config_seed, *seed_parts))
        except (ValueError, ArithmeticError):
            return None  # some seeds make degenerate instances; the next draw is just as frozen

    def _draw(self, split: Split, index: int) -> Task:
        for attempt in range(self.max_rejections):
            draft = self._try_generate(split, index, attempt)
            if draft is not None and self._owns(draft, split):
                return self._make(split, index, draft)
        raise RuntimeError(f"{self.name}: no task for {split}/{index} after {self.max_rejections} draws")

    def _build(self, split: Split) -> list[Task]:
        size = self.sizes[split]
        assert size is not None
        tasks: list[Task] = []
        seen: set[str] = set()
        draw = rejected_in_row = 0
        while len(tasks) < size:
            draft = self._try_generate(split, draw)
            draw += 1
            if draft is None or draft.prompt in seen or not self._owns(draft, split):
                rejected_in_row += 1
                if rejected_in_row > self.max_rejections:
                    raise RuntimeError(
                        f"{self.id_prefix}: split {split!r} stalled at {len(tasks)} tasks "
                        "(its config may allow too few distinct tasks)"
                    )
                continue
            rejected_in_row = 0
            seen.add(draft.prompt)
            tasks.append(self._make(split, len(tasks), draft))
        return tasks


class TaskListSource(TaskSource):
    """A fixed list of tasks per split, loaded once by ``load``; a task's index is its
    position in its split's list. Splits ``load`` leaves out are empty, unless
    ``train_generator`` gives a generator for an unbounded ``train``. Its lock hashes every
    non-empty listed split."""

    def __init__(self, config: object = None) -> None:
        super().__init__(config)
        loaded = self.load()
        self._listed: dict[Split, list[Draft]] = {split: list(loaded.get(split, ())) for split in ALL_SPLITS}
        self._listed_prompts: frozenset[str] | None = None
        sizes: dict[Split, int | None] = {split: len(drafts) for split, drafts in self._listed.items()}
        self.train = self.train_generator()
        if self.train is not None:
            if sizes["train"] or self.train.id_prefix != self.id_prefix:
                raise ValueError(f"{self.name}: a generated train needs no listed train and the source's id prefix")
            self.train.held_out = self.held_out_prompts()
            sizes["train"] = None
        self.sizes = MappingProxyType(sizes)
        self.locked_splits = tuple(split for split in ALL_SPLITS if sizes[split])

    @abstractmethod
    def load(self) -> Mapping[Split, Sequence[Draft]]:
        """The drafts of each split, in index order (``deal_by_content`` shares one list out)."""

    def train_generator(self) -> ProceduralSource | None:
        """A generator (with this source's name and config) for an unbounded ``train``
        split, or None. It is told to hold out ``held_out_prompts``, so train never repeats
        a listed task."""
        return None

    def held_out_prompts(self) -> frozenset[str]:
        """The prompts a generated train never serves: every listed one. A source whose
        config narrows its list (a level) returns those of the whole list, so no level's
        train holds another level's eval task."""
        return frozenset(d.prompt for drafts in self._listed.values() for d in drafts)

    def _twin_fits(self, draft: Draft, original: Task, candidate: int) -> bool:
        """None of the listed tasks, of any split."""
        if self._listed_prompts is None:
            self._listed_prompts = frozenset(d.prompt for drafts in self._listed.values() for d in drafts)
        return draft.prompt not in self._listed_prompts

    def deal_by_content(self, drafts: Iterable[Draft]) -> dict[Split, list[Draft]]:
        """``drafts`` dealt into splits by a hash of their prompt (``split_percent``, salted
        with the name), keeping their order: adding a task never moves another between
        splits. ``ValueError`` if two drafts share a prompt."""
        dealt: dict[Split, list[Draft]] = {}
        seen: set[str] = set()
        for draft in drafts:
            if draft.prompt in seen:
                raise ValueError(f"two {self.name} tasks share a prompt: {draft.prompt[:80]!r}")
            seen.add(draft.prompt)
            dealt.setdefault(split_of(draft.prompt, salt=self.name, percent=self.split_percent), []).append(draft)
        return dealt

    def _build(self, split: Split) -> list[Task]:
        return [self._make(split, index, draft) for index, draft in enumerate(self._listed[split])]

    def _draw(self, split: Split, index: int) -> Task:
        if self.train is None or split != "train":
            return super()._draw(split, index)
        return self.train.task(split, index)


def shared_source(kind: type[SourceT], config: object = None) -> SourceT:
    """The one instance of ``kind`` per process and config (as ``make_config`` takes it;
    None is the default), so a finite split is built once however many envs serve it.
    ``ValueError`` for a bad config, or for any config given to a kind that takes none."""
    if kind.config_type is not None:
        config = make_config(kind.config_type, config)
    elif config is not None:
        return kind(config)  # which refuses it
    return cast(SourceT, _shared(kind, config))


@cache
def _shared(kind: type[TaskSource], config: object) -> TaskSource:
    return kind(config)
