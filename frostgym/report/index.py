"""The trajectory browser's index of one card: one small row per episode, all that filtering reads.

Why a separate, coded index: filtering 100,000 episodes by env, split, difficulty, tag,
label, outcome and drop class must answer at once, so each row is a handful of integers
indexing short name tables (code 0 is "none" where a field can be missing), written as
column arrays (``data/c<card>/index.js``, gzipped like the chunks) and turned into typed
arrays by the page. Row ``r`` is the card's ``r``-th record (episodes, then drops), which
is record ``r % CHUNK_RECORDS`` of chunk ``r // CHUNK_RECORDS``.
"""

from __future__ import annotations

import base64
import gzip
from collections.abc import Sequence
from typing import Any

import orjson

from frostgym.report.records import CHUNK_RECORDS, GZIP_LEVEL, ReportCard


def index_data(card: ReportCard) -> dict[str, Any]:
    """The index of ``card`` as plain data (see the module docstring)."""
    facts = card.facts.facts
    envs = sorted({env for env, _ in facts.task_keys})
    env_code = {env: code for code, env in enumerate(envs)}
    splits, split = _recode(facts.names, facts.split.tolist())
    difficulties, difficulty = _recode(facts.names, facts.difficulty.tolist())
    labels, label = _recode(facts.names, facts.label.tolist())
    drops, drop = _recode(facts.names, facts.drop.tolist())
    stage_names: list[str | None] = [None, *sorted({s for s in card.stages if s is not None})]
    stage_code = {name: code for code, name in enumerate(stage_names)}
    tags = sorted({tag for tag_set in facts.tag_sets for tag in tag_set})
    tag_code = {tag: code for code, tag in enumerate(tags)}
    return {
        "card": card.number,
        "chunk_records": CHUNK_RECORDS,
        "envs": envs,
        "task_env": [env_code[env] for env, _ in facts.task_keys],
        "task_id": [task for _, task in facts.task_keys],
        "plan_id": facts.plan_ids.tolist(),
        "task": facts.task.tolist(),
        "sample": facts.sample.tolist(),
        "splits": splits,
        "split": split,
        "difficulties": difficulties,
        "difficulty": difficulty,
        "tags": tags,
        "tag_sets": [[tag_code[tag] for tag in tag_set] for tag_set in facts.tag_sets],
        "tag_set": facts.tags.tolist(),
        "labels": labels,
        "label": label,
        "drops": drops,
        "drop": drop,
        "stages": stage_names,
        "stage": [stage_code[s] for s in card.stages],
        "reward": [round(r, 6) for r in facts.reward.tolist()],
        "passed": [int(p) for p in facts.passed.tolist()],
    }


def index_script(card: ReportCard) -> bytes:
    """``data/c<card>/index.js``: the index handed to the page, gzipped, as base64."""
    payload = gzip.compress(orjson.dumps(index_data(card)), compresslevel=GZIP_LEVEL, mtime=0)
    return b'frostgymIndex(%d,"%s");\n' % (card.number, base64.b64encode(payload))


def _recode(names: Sequence[Any], codes: list[int]) -> tuple[list[Any], list[int]]:
    """The names ``codes`` use (None first, as code 0; the rest sorted) and the codes
    renumbered into that list: the facts' shared name table also holds every answer key."""
    used = sorted({names[code] for code in codes if names[code] is not None}, key=str)
    table: list[Any] = [None, *used]
    position = {name: code for code, name in enumerate(table)}
    return table, [position[names[code]] for code in codes]
