"""The customer-service tasks: tau2-bench's airline and retail tasks as one fixed list.

Splits follow tau2's own (``split_tasks.json``): its ``test`` tasks are frostgym's
``test``; its ``train`` tasks are shared between frostgym's ``dev`` (about a third, dealt by
a hash of the task's content like every frostgym split, so the choice never moves) and
``train`` (the rest), so a model can be trained on tau2's train split and checked on
held-out tasks of the same distribution before its test run. There is no ``private`` split.

A task's prompt is its user scenario as tau2 renders it for its simulator (reason for the
call, known and unknown information, instructions): what makes the task the task. The
agent never sees it; it sees what the customer says.

Levels follow the size of the gold solution (tau2's ``evaluation_criteria.actions``): 1 =
at most two gold actions (a lookup, a single change, or a request to refuse), 2 = three to
five, 3 = six or more. The default serves every level's tasks together.

A task's metadata holds everything its episode and grade need: the domain, tau2's id, the
user scenario, the gold actions (name, arguments, ``compare_args``), the information to
communicate, and the sha256 of the domain's database and policy files, so the fixture lock
covers the data the episode runs on, not only the task list.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from frostgym.core.hashing import canonical_json
from frostgym.core.splits import Split, split_of
from frostgym.core.tasks import Draft, Level, Task, TaskListSource, added, shared_source
from frostgym.customer.tau2_data import DISTRIBUTION, DOMAINS, domain_data, scenario_text
from frostgym.envs.levels import level_config

SOURCE_NAME = "customer_service"
#: How tau2's train tasks are dealt between frostgym's train and dev, by content hash
#: (tau2's test tasks are frostgym's test, whatever their hash).
SPLIT_PERCENT: Mapping[Split, int] = MappingProxyType({"train": 67, "dev": 33, "test": 0, "private": 0})


@dataclass(frozen=True)
class CustomerServiceConfig:
    """``actions``: the inclusive range ``(low, high)`` of gold actions a task may have, or
    None for every task (what a level narrows)."""

    actions: tuple[int, int] | None = added(None)

    def __post_init__(self) -> None:
        bounds = self.actions
        if bounds is not None and (
            not isinstance(bounds, tuple)
            or len(bounds) != 2
            or not all(isinstance(b, int) and not isinstance(b, bool) and b >= 0 for b in bounds)
            or bounds[0] > bounds[1]
        ):
            raise ValueError(f"actions must be (low, high) with 0 <= low <= high, got {bounds!r}")


def _difficulty(actions: int) -> str:
    return "easy" if actions <= 2 else "medium" if actions <= 5 else "hard"


def draft_of(domain: str, record: Mapping[str, Any], tau2_split: str) -> Draft:
    """One tau2 task record as a draft (its prompt is the rendered user scenario)."""
    data = domain_data(domain)
    criteria = record.get("evaluation_criteria") or {}
    actions = [
        {"name": a["name"], "arguments": a["arguments"], "compare_args": a.get("compare_args")}
        for a in criteria.get("actions") or []
    ]
    metadata = {
        "domain": domain,
        "tau2_id": str(record["id"]),
        "tau2_split": tau2_split,
        "user_scenario": record["user_scenario"],
        "actions": actions,
        "communicate_info": list(criteria.get("communicate_info") or []),
        "db_sha256": data.db_sha256,
        "policy_sha256": data.policy_sha256,
    }
    return Draft(
        prompt=scenario_text(record["user_scenario"]),
        answer=canonical_json(actions),
        metadata=metadata,
        difficulty=_difficulty(len(actions)),
        tags=(domain,),
    )


class CustomerServiceSource(TaskListSource):
    """Every airline and retail task of tau2, split as the module says. ``domain`` narrows
    what ``sample`` draws (its tasks, sizes and lock stay the whole)."""

    name = SOURCE_NAME
    version = "1"
    distributions = (DISTRIBUTION,)
    difficulty = "mixed"
    tags = ("customer_service", "tools", "user")
    split_percent = SPLIT_PERCENT
    config_type = CustomerServiceConfig
    config: CustomerServiceConfig
    levels = MappingProxyType(
        {
            1: Level(
                "at most two gold actions (a lookup, one change, or a request to refuse)", CustomerServiceConfig((0, 2))
            ),
            2: Level("three to five gold actions", CustomerServiceConfig((3, 5))),
            3: Level("six or more gold actions", CustomerServiceConfig((6, 1_000))),
        }
    )
    levels_note = "the default serves every level's tasks together"

    def __init__(self, config: object = None, domain: str | None = None) -> None:
        if domain is not None and domain not in DOMAINS:
            raise ValueError(f"domain must be one of {list(DOMAINS)} or None, got {domain!r}")
        self.domain = domain
        super().__init__(config)

    def load(self) -> Mapping[Split, Sequence[Draft]]:
        bounds = self.config.actions
        dealt: dict[Split, list[Draft]] = {}
        for domain in DOMAINS:
            data = domain_data(domain)
            tau2_split = {task_id: name for name in ("train", "test") for task_id in data.splits.get(name, ())}
            for record in data.tasks:
                tau2_id = str(record["id"])
                if tau2_id not in tau2_split:
                    continue
                actions = len((record.get("evaluation_criteria") or {}).get("actions") or [])
                if bounds is not None and not bounds[0] <= actions <= bounds[1]:
                    continue
                draft = draft_of(domain, record, tau2_split[tau2_id])
                split: Split = "test"
                if tau2_split[tau2_id] == "train":
                    split = split_of(draft.prompt, salt=self.name, percent=self.split_percent)
                dealt.setdefault(split, []).append(draft)
        return dealt

    def drawable(self, task: Task) -> bool:
        return self.domain is None or task.metadata["domain"] == self.domain

    def drawable_size(self, split: Split) -> int | None:
        return len(self._pool(split)) if self.size(split) else self.size(split)


@functools.cache
def _narrowed(config: CustomerServiceConfig, domain: str) -> CustomerServiceSource:
    return CustomerServiceSource(config, domain)


def customer_service_source(
    config: object = None, level: int | None = None, domain: str | None = None
) -> CustomerServiceSource:
    """The shared source with ``config`` at ``level``, drawing from ``domain`` (None: both).
    ``ValueError`` for a bad config, level or domain."""
    configured = level_config(CustomerServiceSource, level, config)
    if domain is None:
        return shared_source(CustomerServiceSource, configured)
    if domain not in DOMAINS:
        raise ValueError(f"domain must be one of {list(DOMAINS)} or None, got {domain!r}")
    whole = shared_source(CustomerServiceSource, configured)
    return _narrowed(whole.config, domain)
