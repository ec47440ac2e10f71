"""The tool-calling family's task sources, all fixed lists.

- ``BFCLSource`` (Tools-v0): BFCL's single-turn entries, read from the installed
  ``bfcl-eval`` (``frostgym.tools.bfcl_data``). All in ``test`` (the published
  benchmark); ``bfcl/test/i`` is the i-th entry in ``CATEGORIES`` order.
- ``BFCLMultiTurnSource`` (ToolsMultiTurn-v0): BFCL's 800 multi-turn entries
  (``frostgym.tools.bfcl_multi_turn``), all in ``test``, under BFCL's own numbering:
  ``bfcl_mt/<category>/test/<n>``.
- ``HTTPToolsSource`` (ToolsHTTP-v0): the committed ``fixtures/tools_http/tasks.json``
  (``frostgym.tools.http.tasks``), dealt into dev/test/private by a hash of the prompt
  (30/50/20); no train, since every gold call must be in the cassettes.

The BFCL sources may be narrowed to some categories: that changes only what ``sample``
draws, never the tasks, sizes or lock. Each lock hashes every non-empty split.

Levels: ToolsHTTP's are parts of its task list by what a task needs (one call or none,
then calls that depend on each other, then parallel calls), each with its own ids and
lock. Tools-v0's are BFCL's own category groups (simple, multiple, parallel,
parallel_multiple): a level narrows what ``sample`` draws, as ``categories`` does, so ids
stay BFCL's numbering and the benchmark keeps one lock. ToolsMultiTurn-v0 has none: its
four categories are the same conversations under four perturbations, not a ladder.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from types import MappingProxyType

from frostgym.core.errors import UnknownTaskError
from frostgym.core.splits import Split
from frostgym.core.tasks import Draft, Level, Task, TaskListSource, added, shared_source
from frostgym.envs.levels import level_config
from frostgym.tools import bfcl_data, bfcl_multi_turn
from frostgym.tools.http.tasks import KINDS, draft_of, load_task_records


class BFCLSource(TaskListSource):
    """BFCL's single-turn entries as one fixed ``test`` list. ``categories`` (as
    ``check_categories`` takes them; None: all) narrows what ``sample`` draws."""

    name = "bfcl"
    version = "1"
    distributions = (bfcl_data.DISTRIBUTION,)
    difficulty = "mixed"
    tags = ("tools", "bfcl")
    #: BFCL's category groups, each with its live twin; a level's config is its categories.
    levels = MappingProxyType(
        {
            1: Level(
                "simple: one call of the one function offered",
                ("simple_python", "simple_java", "simple_javascript", "live_simple"),
            ),
            2: Level("multiple: one call, choosing among several functions", ("multiple", "live_multiple")),
            3: Level("parallel: several calls of one function", ("parallel", "live_parallel")),
            4: Level(
                "parallel_multiple: several calls of several functions",
                ("parallel_multiple", "live_parallel_multiple"),
            ),
        }
    )
    levels_note = (
        "a level narrows what reset draws to BFCL categories, as categories= does (ids keep BFCL's "
        "numbering); the default draws every category, irrelevance included"
    )

    def __init__(self, categories: Sequence[str] | None = None) -> None:
        self.categories = bfcl_data.check_categories(categories)
        super().__init__()
        self.level = next((n for n, level in self.levels.items() if set(level.config) == set(self.categories)), None)

    def load(self) -> Mapping[Split, Sequence[Draft]]:
        return {bfcl_data.SPLIT: [bfcl_data.draft_of(entry) for entry in bfcl_data.load_entries()]}

    def drawable(self, task: Task) -> bool:
        return task.metadata["category"] in self.categories

    def drawable_size(self, split: Split) -> int | None:
        return len(self._pool(split)) if self.size(split) else self.size(split)


class BFCLMultiTurnSource(TaskListSource):
    """BFCL's multi-turn entries as one fixed ``test`` list, all four categories in
    ``CATEGORIES`` order. ``categories`` (a non-empty subset) narrows what ``sample`` draws."""

    name = bfcl_multi_turn.SOURCE_NAME
    version = "1"
    distributions = ("bfcl-eval",)
    difficulty = "mixed"
    tags = bfcl_multi_turn.TAGS

    def __init__(self, categories: tuple[str, ...] = bfcl_multi_turn.CATEGORIES) -> None:
        known = bfcl_multi_turn.CATEGORIES
        if not categories or not set(categories) <= set(known):
            raise ValueError(f"categories must be a non-empty subset of {known}, got {categories!r}")
        self.categories = tuple(c for c in known if c in categories)
        self._by_id: dict[str, Task] = {}
        super().__init__()

    def load(self) -> Mapping[Split, Sequence[Draft]]:
        entries = [e for c in bfcl_multi_turn.CATEGORIES for e in bfcl_multi_turn.load_entries(c)]
        return {bfcl_multi_turn.SPLIT: [bfcl_multi_turn.draft_of(entry) for entry in entries]}

    levels_note = (
        "base, miss_func, miss_param and long_context are the same conversations under four "
        "perturbations, not a ladder; categories= narrows what reset draws"
    )

    def drawable(self, task: Task) -> bool:
        return task.metadata["category"] in self.categories

    def drawable_size(self, split: Split) -> int | None:
        return len(self._pool(split)) if self.size(split) else self.size(split)

    def _task_id(self, split: Split, index: int, draft: Draft) -> str:
        return bfcl_multi_turn.task_id_of(bfcl_multi_turn.entry_by_id(str(draft.metadata["bfcl_id"])))

    def task_by_id(self, task_id: str) -> Task:
        """``bfcl_mt/<category>/test/<n>`` (the canonical id), or ``bfcl_mt/test/<i>`` by
        position in the split."""
        if not self._by_id:
            self._by_id = {t.task_id: t for t in self.tasks(bfcl_multi_turn.SPLIT)}
        task = self._by_id.get(task_id) if isinstance(task_id, str) else None
        if task is not None:
            return task
        if isinstance(task_id, str) and task_id.count("/") == 3:
            source, category, rest = task_id.split("/", 2)
            if source == self.name and category in bfcl_multi_turn.CATEGORIES and rest.startswith("test/"):
                raise UnknownTaskError(
                    f"task {task_id!r}: {category} has no entry {rest.split('/')[-1]} (outside split)"
                )
        return super().task_by_id(task_id)


@dataclass(frozen=True)
class HTTPToolsConfig:
    """``kinds``: the task kinds served (``frostgym.tools.http.tasks.KINDS``: ``none``,
    ``single``, ``multi``, ``parallel``), or None for all."""

    kinds: tuple[str, ...] | None = added(None)

    def __post_init__(self) -> None:
        if self.kinds is not None and (
            not isinstance(self.kinds, tuple)
            or not self.kinds
            or len(set(self.kinds)) != len(self.kinds)
            or not set(self.kinds) <= KINDS
        ):
            raise ValueError(f"kinds must be distinct names among {sorted(KINDS)}, got {self.kinds!r}")


class HTTPToolsSource(TaskListSource):
    """The fixed HTTP tool tasks, dealt into dev/test/private by prompt hash. A config (a
    level) keeps the tasks of some kinds, in the splits they always had."""

    name = "tools_http"
    version = "1"
    distributions = ("vcrpy", "httpx")
    difficulty = "mixed"
    tags = ("tools", "http")
    split_percent = MappingProxyType({"train": 0, "dev": 30, "test": 50, "private": 20})
    config_type = HTTPToolsConfig
    config: HTTPToolsConfig
    levels = MappingProxyType(
        {
            1: Level("one call, or none (the answer needs no tool)", HTTPToolsConfig(("none", "single"))),
            2: Level("two calls in turn, the second using the first's result", HTTPToolsConfig(("multi",))),
            3: Level("two or three independent calls in one reply", HTTPToolsConfig(("parallel",))),
        }
    )
    levels_note = "the default serves every level's tasks together"

    def __init__(self, config: object = None) -> None:
        self._by_key: dict[str, Task] = {}
        super().__init__(config)

    def load(self) -> Mapping[Split, Sequence[Draft]]:
        kinds = self.config.kinds
        records = (r for r in load_task_records() if kinds is None or r["kind"] in kinds)
        return self.deal_by_content(draft_of(record) for record in records)

    def all_tasks(self) -> list[Task]:
        return [t for split in self.locked_splits for t in self.tasks(split)]

    def task_by_key(self, key: str) -> Task:
        """The task whose ``tasks.json`` id is ``key`` (stable across splits and indices)."""
        if not self._by_key:
            self._by_key = {str(t.metadata["id"]): t for t in self.all_tasks()}
        try:
            return self._by_key[key]
        except KeyError:
            raise UnknownTaskError(f"no tools_http task with id {key!r}") from None


@cache
def bfcl_source(categories: tuple[str, ...] | None = None) -> BFCLSource:
    """The shared source (per category selection); ``categories`` as ``check_categories`` orders them."""
    return BFCLSource(categories)


@cache
def bfcl_multi_turn_source(categories: tuple[str, ...] = bfcl_multi_turn.CATEGORIES) -> BFCLMultiTurnSource:
    return BFCLMultiTurnSource(categories)


def http_tools_source(config: object = None, level: int | None = None) -> HTTPToolsSource:
    """The shared source with ``config`` (an ``HTTPToolsConfig``, a mapping of its fields,
    or None) at ``level`` (``frostgym.envs.levels.level_config``). ``ValueError`` for a bad
    config or level."""
    return shared_source(HTTPToolsSource, level_config(HTTPToolsSource, level, config))
