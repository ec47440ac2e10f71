"""JSON Schemas (draft 2020-12) of the four files of a rollout card.

A card is meant to be read by tools that are not frostgym: dashboards, notebooks, other
languages. These schemas are the published contract of what they may rely on, printed by
``frostgym schema card|plan|episode|drop``. The record lines' schemas are derived from the
record types (``frostgym.core.episode``), the one declaration the card's reader also
decodes with, so the contract and the reader cannot disagree; ``card.json`` and
``plan.json`` are written out here, their closed vocabularies (drop classes, statuses,
splits, reporting rules) imported from the code that defines them. ``tests/cards/test_card_schema.py`` builds
real cards and checks every file against these schemas, and checks that mutated files are
rejected.

Record objects are closed (``additionalProperties: false``): a field added to a record is
a new contract version. Data that belongs to someone else stays open: an agent's
``describe()`` and per-step trace, a grade's ``details``, an env's step ``info``,
tool calls and their results, env kwargs and sampling parameters.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final, get_args

import msgspec

from frostgym.cards.card import CARD_SCHEMA, CHECKPOINT_KEY, DROPS_FILE, EPISODES_FILE, SUMMARY_KEYS, CardStatus
from frostgym.cards.contract import BASELINE_ROLES
from frostgym.cards.views import RULE_NAMES, SLICES
from frostgym.core.episode import COUNTED_AS, DROP_CLASSES, CountedAs, DropRecord, EpisodeRecord
from frostgym.core.seeding import SEED_BITS
from frostgym.core.splits import ALL_SPLITS
from frostgym.run.plan import SEEDING

__all__ = ["SCHEMAS"]

Schema = dict[str, Any]

DRAFT: Final = "https://json-schema.org/draft/2020-12/schema"
BASE_URL: Final = "https://frostgym.dev/schema"
#: The states whose ``card.json`` was rewritten from the files on disk at close.
CLOSED_STATUSES: Final[tuple[str, ...]] = ("interrupted", "complete")
#: Keys ``CardWriter.close`` adds; a card that has been closed once always has them.


# ---------------------------------------------------------------------------------------------
# Small builders, so the schemas below read like the records they describe


def ref(name: str) -> Schema:
    return {"$ref": f"#/$defs/{name}"}


def nullable(schema: Schema) -> Schema:
    """``schema`` or JSON null."""
    return {"anyOf": [schema, {"type": "null"}]}


def string(**extra: Any) -> Schema:
    return {"type": "string", **extra}


def integer(minimum: int | None = 0, **extra: Any) -> Schema:
    schema: Schema = {"type": "integer", **extra}
    if minimum is not None:
        schema["minimum"] = minimum
    return schema


def number(**extra: Any) -> Schema:
    return {"type": "number", **extra}


def unit() -> Schema:
    """A number in [0, 1]: scores, components, rates."""
    return {"type": "number", "minimum": 0, "maximum": 1}


def boolean() -> Schema:
    return {"type": "boolean"}


def array(items: Schema, **extra: Any) -> Schema:
    return {"type": "array", "items": items, **extra}


def enum(values: tuple[str, ...] | list[str]) -> Schema:
    return {"type": "string", "enum": list(values)}


def mapping(values: Schema, **extra: Any) -> Schema:
    """An object used as a dictionary: any keys, every value matching ``values``."""
    return {"type": "object", "additionalProperties": values, **extra}


def open_object(description: str, **properties: Schema) -> Schema:
    """An object whose shape is not ours to fix; known keys are still typed."""
    schema: Schema = {"type": "object", "description": description}
    if properties:
        schema["properties"] = properties
    return schema


def record(properties: dict[str, Schema], *, optional: tuple[str, ...] = (), description: str = "") -> Schema:
    """A closed object: every property required unless listed in ``optional``, no others."""
    schema: Schema = {"type": "object"}
    if description:
        schema["description"] = description
    schema["properties"] = properties
    schema["required"] = [name for name in properties if name not in optional]
    schema["additionalProperties"] = False
    return schema


def document(kind: str, title: str, description: str, body: Schema, defs: dict[str, Schema]) -> Schema:
    if "description" in body:
        raise ValueError("describe the document, not its body")
    return {
        "$schema": DRAFT,
        "$id": f"{BASE_URL}/{kind}/{CARD_SCHEMA.rsplit('/', 1)[1]}.json",
        "title": title,
        "description": description,
        **body,
        "$defs": defs,
    }


# ---------------------------------------------------------------------------------------------
# Shared pieces ($defs)

SHA256: Final = string(pattern="^[0-9a-f]{64}$")
TIMESTAMP: Final = string(format="date-time")
UNIX_TIME: Final = number(minimum=0, description="seconds since the epoch")
SECONDS: Final = number(minimum=0)
ONE_LINE: Final = {"type": "string", "not": {"pattern": "[\\n\\r]"}, "description": "one line"}


def _seed() -> Schema:
    return integer(0, maximum=2**SEED_BITS - 1, description="a derived seed: 63 bits, so it fits int64")


def _seed_derivation() -> Schema:
    return array(
        {"anyOf": [string(), integer(0)]},
        minItems=1,
        description="the frostgym.core.seeding.derive_seed parts that gave the seed",
    )


def _plan_entry() -> Schema:
    """``frostgym.run.plan.PlannedEpisode.to_dict``."""
    return record(
        {
            "plan_id": string(minLength=1, description="ENV_ID:TASK_ID:SAMPLE, unique within the plan"),
            "env_id": string(minLength=1),
            "task_id": string(minLength=1),
            "sample": integer(0),
            "seed": ref("seed"),
            "seed_derivation": ref("seed_derivation"),
            "difficulty": nullable(string()),
            "tags": array(string()),
        }
    )


def _aggregate() -> Schema:
    return record(
        {
            "value": nullable(unit()),
            "tasks_counted": integer(0),
            "tasks_n_lt_k": integer(0, description="tasks with fewer than k counted samples, left out"),
        },
        description="a per-task estimate averaged over the tasks with n >= k; value is null when none has",
    )


def _metrics() -> Schema:
    """What ``frostgym.cards.views`` computes for one slice under one rule."""
    per_k = mapping(ref("aggregate"), propertyNames={"pattern": "^[1-9][0-9]*$"})
    return record(
        {
            "episodes": integer(0),
            "tasks": integer(0),
            "per_task_n": nullable(record({"min": integer(1), "max": integer(1)})),
            "mean_reward": nullable(number()),
            "component_means": mapping(unit()),
            "pass@k": per_k,
            "pass^k": per_k,
            "maj@k": per_k,
            "best_of_n": record(
                {"value": nullable(number()), "tasks_counted": integer(0), "pass_any": nullable(unit())}
            ),
            "no_answer_rate": record(
                {**_rate(), "no_answer": integer(0), "graded": integer(0)},
                description="share of graded episodes labelled no_answer, with its 95% Wilson interval "
                "(absent from cards written before views had it)",
            ),
            "selective_accuracy": record(
                {**_rate(), "passed": integer(0), "answered": integer(0)},
                description="pass rate among graded episodes not labelled no_answer, with its 95% Wilson interval "
                "(absent from cards written before views had it)",
            ),
            "safety_violation_rate": record(
                {**_rate(), "violations": integer(0), "checked": integer(0)},
                description="share of graded episodes whose grader checks safety that violated it, with its "
                "95% Wilson interval (absent from cards written before views had it)",
            ),
        },
        optional=("no_answer_rate", "selective_accuracy", "safety_violation_rate"),
    )


def _rate() -> dict[str, Schema]:
    """A rate and its interval, all null when it has no denominator."""
    return {"value": nullable(unit()), "ci_low": nullable(unit()), "ci_high": nullable(unit())}


def _by_rule() -> Schema:
    """The same metrics under each reporting rule for drops."""
    return record({rule: ref("metrics") for rule in RULE_NAMES})


def _twin_gap() -> Schema:
    """``frostgym.cards.twin_gap``: one env's gap under one rule."""
    return record(
        {
            "pairs": integer(0, description="tasks with a pass@1 on both sides, original and twin"),
            "originals": nullable(unit()),
            "twins": nullable(unit()),
            "gap": nullable(number(minimum=-1, maximum=1)),
            "ci_low": nullable(number(minimum=-1, maximum=1)),
            "ci_high": nullable(number(minimum=-1, maximum=1)),
        },
        description="mean pass@1 of originals and of their twins, originals - twins, and its 95% paired interval",
    )


def _file_manifest() -> Schema:
    return record(
        {
            "sha256": SHA256,
            "bytes": integer(0),
            "lines": integer(0),
            "line_crc32": string(
                pattern="^([0-9a-f]{8})*$", description="CRC-32 of each line, 8 hex digits a line: locates an edit"
            ),
        }
    )


def _graders() -> Schema:
    return mapping(
        array(string(), uniqueItems=True),
        description="grader name -> versions of the graders whose final grades scored the completed episodes",
    )


CARD_DEFS: Final[dict[str, Schema]] = {
    "seed": _seed(),
    "seed_derivation": _seed_derivation(),
    "plan_entry": _plan_entry(),
    "file_manifest": _file_manifest(),
    "graders": _graders(),
    "aggregate": _aggregate(),
    "metrics": _metrics(),
    "by_rule": _by_rule(),
    "twin_gap": _twin_gap(),
}


# ---------------------------------------------------------------------------------------------
# episodes.jsonl and drops.jsonl: derived from the record types


def _record_schemas() -> tuple[Schema, Schema]:
    """The episode and drop line schemas, as ``msgspec`` derives them from
    ``EpisodeRecord`` and ``DropRecord`` (the declaration the card's reader decodes with),
    with two rules msgspec cannot declare: the grade, message and stored-action mappings are
    closed like the records, and ``counted_as`` follows from ``drop_class``."""
    (episode_ref, drop_ref), components = msgspec.json.schema_components(
        [EpisodeRecord, DropRecord], ref_template="#/$defs/{name}"
    )
    names = {name: _def_name(name) for name in components}
    renamed = json.dumps({names[name]: schema for name, schema in components.items()})
    defs: dict[str, Schema] = json.loads(re.sub(r'"#/\$defs/(\w+)"', lambda m: f'"#/$defs/{names[m[1]]}"', renamed))
    for name in ("grade", "message", "stored_action"):
        defs[name]["additionalProperties"] = False
    bodies = []
    for ref_schema in (episode_ref, drop_ref):
        body = defs.pop(names[ref_schema["$ref"].rsplit("/", 1)[1]])
        body.pop("title", None)
        body.pop("description", None)
        bodies.append(body)
    episode, drop = bodies
    drop["properties"]["drop_class"]["enum"] = list(DROP_CLASSES)  # in the order DropClass declares, not sorted
    drop["allOf"] = _counted_as_rules()
    return (
        document(
            "episode",
            "frostgym episode record",
            "One line of a rollout card's episodes.jsonl: a completed episode, its full trajectory and its grade.",
            episode,
            defs,
        ),
        document(
            "drop",
            "frostgym drop record",
            "One line of a rollout card's drops.jsonl: an episode that was not scored normally, why, and how views "
            "count it. episode_id is null when the episode never reset; observation and steps are what it got to.",
            drop,
            defs,
        ),
    )


def _def_name(name: str) -> str:
    """A record type's name as a ``$defs`` key: ``StepRecord`` as ``step``."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name.removesuffix("Record")).lower()


def _counted_as_rules() -> list[Schema]:
    """``counted_as`` follows from ``drop_class`` (``COUNTED_AS``): one if/then per value."""
    rules = []
    for how in get_args(CountedAs):
        classes = [name for name in DROP_CLASSES if COUNTED_AS[name] == how]
        if classes:
            rules.append(
                {
                    "if": {"properties": {"drop_class": {"enum": classes}}, "required": ["drop_class"]},
                    "then": {"properties": {"counted_as": {"const": how}}},
                }
            )
    return rules


# ---------------------------------------------------------------------------------------------
# card.json


def _config() -> Schema:
    """``frostgym.evaluate.run_to_card.card_config``."""
    identity = record(
        {
            "env_ids": array(string(minLength=1), minItems=1, uniqueItems=True),
            "split": string(
                pattern=f"^({'|'.join(ALL_SPLITS)})(,({'|'.join(ALL_SPLITS)}))*$",
                description="the split played, or several comma-separated (each env plays its tasks of each)",
            ),
            "episodes": nullable(integer(1)),
            "samples": integer(1),
            "seed": integer(0),
            "env_kwargs": open_object("keyword arguments passed to every env"),
            "env_options": {
                "type": "object",
                "description": "each env's own keyword arguments (--env 'ID[level=1]'), on top of env_kwargs",
                "additionalProperties": open_object("keyword arguments of this env"),
            },
            "agent": string(minLength=1, description="the agent spec, e.g. oracle, hf:PATH, replay:DIR"),
            "sampling": open_object(
                "sampling parameters (frostgym.agents.sampling.SamplingParams)",
                temperature=number(minimum=0),
                top_p=number(minimum=0, maximum=1),
                max_new_tokens=integer(1),
                stop=array(string()),
                seed=integer(0),
                logprobs=boolean(),
            ),
            "excluded": record(
                {
                    "sha256": SHA256,
                    "tasks": array(
                        record({"env": string(minLength=1), "task_id": string(minLength=1), "reason": string()})
                    ),
                },
                description="tasks left out before the plan was drawn (frostgym eval --exclude), each with its env "
                "and reason, and the SHA-256 of the exclusion file",
            ),
            "twins": {
                "const": True,
                "description": "each planned task is followed by its twin, id TASK~twin (frostgym eval --twins); "
                "absent when not",
            },
            "trained_on_private": {
                "const": True,
                "description": "the agent's model was trained on the private split, as declared by whoever ran the "
                "eval (frostgym eval --trained-on-private): its private-split scores are no held-out measure; "
                "absent when not declared",
            },
        },
        optional=("env_options", "excluded", "twins", "trained_on_private"),
        description="what defines the run: a resume must match it",
    )
    execution = record(
        {
            "batch_size": integer(1),
            "workers": integer(1),
            "retries": integer(0),
            "max_drops": nullable(integer(0)),
        },
        description="how the run was executed; may change between sessions without changing any episode",
    )
    return record({"identity": identity, "execution": execution, "ks": array(integer(1), minItems=1, uniqueItems=True)})


def _contract() -> Schema:
    """``frostgym.cards.contract.describe_contract``."""
    scalar = {"type": ["string", "number", "integer", "boolean", "null"]}
    names = array(string(minLength=1), uniqueItems=True)
    env = record(
        {
            "max_turns": integer(1),
            "limits": mapping(
                scalar,
                description="each limit on the work of one call, with the value the env ran under "
                "(FrozenEnv.contract_limits: sandbox cpu_seconds and memory_mb, SQL sql_timeout_s, rows shown, ...)",
            ),
            "tools": record(
                {
                    "read_only": names,
                    "writing": names,
                    "described_only": {
                        "const": True,
                        "description": "the env offers each task's own functions, shown and graded but never run",
                    },
                },
                optional=("described_only",),
                description="the tools the env can offer its tasks (BFCL multi-turn: its tool classes), by whether a "
                "call changes state a later call or the grade sees",
            ),
            "second_party": {
                "type": "object",
                "properties": {
                    "kind": {"enum": ["scripted", "model"]},
                    "model": {"type": "object", "description": "the model's pin (frostgym.models.pin_model)"},
                    "mode": {"enum": ["replay", "record", "live"]},
                    "cache_sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
                    "cache_path": {"type": ["string", "null"]},
                },
                "required": ["kind"],
                "additionalProperties": False,
                "description": "the env's other party (CustomerService-v0's customer): scripted, or a model called "
                "through the frozen model layer, with its cache's mode, path and hash when the env was made",
            },
        },
        optional=("second_party",),
    )
    positive = {"exclusiveMinimum": 0}
    agent = record(
        {
            "max_new_tokens": nullable(integer(1)),
            "context_length": nullable(
                integer(1, description="the model's context in tokens; null when the agent does not know it")
            ),
            "request_timeout_s": nullable(number(**positive, description="one request's deadline; null: none")),
            "episode_wall_s": nullable(number(**positive, description="an episode's wall-time budget; null: none")),
        },
        description="the run's part of the contract",
    )
    return record(
        {
            "envs": mapping(env, description="env id -> its part of the contract"),
            "agent": agent,
            "baseline_role": enum(BASELINE_ROLES),
        },
        optional=("baseline_role",),
        description="what bounded each episode (frostgym.cards.contract), recorded when the card was created; "
        "absent from cards written before it, which read as unknown; baseline_role: what the card stands for as "
        "a comparison's base (frostgym eval --baseline-role), absent when not declared",
    )


def _accounting() -> Schema:
    """``frostgym.cards.card.accounting``."""
    return record(
        {
            "planned": integer(0),
            "completed": integer(0),
            "dropped": integer(0),
            "pending": integer(0),
            "succeeded": integer(0),
            "failed": integer(0),
            "errored": integer(0),
            "skipped": integer(0),
            "dropped_by_class": mapping(integer(1), propertyNames=enum(DROP_CLASSES)),
            "dropped_counted_as_failure": integer(0),
            "invariants": array(string()),
            "balanced": boolean(),
            "excluded": integer(
                0, description="tasks config.identity.excluded left out of the plan (never planned, so in no count)"
            ),
        },
        optional=("excluded",),
    )


def _views() -> Schema:
    """``frostgym.cards.views.compute_views``."""
    slices = {name: mapping(ref("by_rule"), description=f"{name[3:]} -> metrics per rule") for name in SLICES}
    return record(
        {
            "ks": array(integer(1), minItems=1, uniqueItems=True),
            "rules": record({rule: string() for rule in RULE_NAMES}),
            "definitions": mapping(string()),
            "overall": ref("by_rule"),
            **slices,
            "twin_gap": mapping(
                record({rule: ref("twin_gap") for rule in RULE_NAMES}),
                description="a card played with --twins: env -> originals' minus twins' pass@1 per rule "
                "(frostgym.cards.twin_gap; definitions.twin_gap says how)",
            ),
        },
        optional=("twin_gap",),
    )


def _card_schema() -> Schema:
    properties: dict[str, Schema] = {
        "schema": {"const": CARD_SCHEMA},
        "status": enum(get_args(CardStatus)),
        "frostgym_version": string(minLength=1),
        "created_at": TIMESTAMP,
        "config": _config(),
        "seeding": record({"run_seed": integer(0), **{name: string() for name in SEEDING}}),
        "plan": record(
            {
                "sha256": SHA256,
                "count": integer(0, description="how many entries plan.json holds"),
            },
            description="the plan: its entries are in plan.json, whose sha256 this is",
        ),
        "agent": open_object("the agent's describe(): its spec and parameters", spec=string(minLength=1)),
        "envs": mapping(
            record(
                {
                    "family": string(minLength=1),
                    "env_version": string(minLength=1),
                    "source": string(minLength=1),
                    "source_version": string(minLength=1),
                    "fixture_sha256": SHA256,
                    "max_turns": integer(1),
                }
            ),
            description="env id -> its version and fixture hash",
        ),
        "packages": mapping(nullable(string()), description="distribution -> version, null when not installed"),
        "git": record({"commit": nullable(string()), "dirty": nullable(boolean())}),
        "contract": _contract(),
        "host": record(
            {
                "hostname": string(),
                "platform": string(),
                "python": string(),
                "cpus": nullable(integer(1)),
                "gpu": string(),
            },
            optional=("gpu",),
        ),
        "sessions": array(
            record(
                {
                    "started_at": TIMESTAMP,
                    "ended_at": nullable(TIMESTAMP),
                    "resumed": boolean(),
                    "written": integer(0),
                }
            ),
            minItems=1,
        ),
        "updated_at": TIMESTAMP,
        "files": record({EPISODES_FILE: ref("file_manifest"), DROPS_FILE: ref("file_manifest")}),
        CHECKPOINT_KEY: record(
            {EPISODES_FILE: ref("file_manifest"), DROPS_FILE: ref("file_manifest")},
            description="while a session runs: what the files held when it began (a resume checks they still do)",
        ),
        "graders": ref("graders"),
        "accounting": _accounting(),
        "views": _views(),
        "regraded_from": record(
            {"path": string(), "episodes_sha256": SHA256, "graders": ref("graders")},
            description="on a regraded card: the source card, the sha256 of its episodes.jsonl, and its graders",
        ),
    }
    body = record(properties, optional=(*SUMMARY_KEYS, CHECKPOINT_KEY, "regraded_from", "contract"))
    body["allOf"] = [
        {
            "description": "a card closed at least once carries what close() computes from the files",
            "if": {"properties": {"status": {"enum": list(CLOSED_STATUSES)}}, "required": ["status"]},
            "then": {"required": list(SUMMARY_KEYS)},
        },
        {
            "description": "a complete card has no pending episodes",
            "if": {"properties": {"status": {"const": "complete"}}, "required": ["status"]},
            "then": {
                "properties": {"accounting": {"properties": {"pending": {"const": 0}, "balanced": {"const": True}}}}
            },
        },
    ]
    return document(
        "card",
        "frostgym rollout card manifest",
        "card.json of a rollout card: plan, config, provenance, and (once closed) accounting, file checksums, "
        "grader versions and score views recomputed from episodes.jsonl and drops.jsonl.",
        body,
        CARD_DEFS,
    )


def _plan_schema() -> Schema:
    """``plan.json``: ``frostgym.run.plan.PlannedEpisode.to_dict`` of each planned episode."""
    return document(
        "plan",
        "frostgym rollout card plan",
        "plan.json of a rollout card: every planned episode, in plan order, as one compact JSON array; "
        "its sha256 is card.json's plan.sha256.",
        {"type": "array", "items": ref("plan_entry")},
        {name: CARD_DEFS[name] for name in ("seed", "seed_derivation", "plan_entry")},
    )


_EPISODE_SCHEMA, _DROP_SCHEMA = _record_schemas()
SCHEMAS: dict[str, dict[str, Any]] = {
    "card": _card_schema(),
    "plan": _plan_schema(),
    "episode": _EPISODE_SCHEMA,
    "drop": _DROP_SCHEMA,
}
