"""A rollout card as an inspect_ai eval log (``frostgym export inspect``), so ``inspect view``
opens frostgym cards.

Why its own module: how a card maps onto inspect_ai's ``EvalLog`` is decided here and
nowhere else. The card stays the evidence; the log is a read-only translation of it,
built through inspect_ai's own API and read back by its own reader:

- the log: one eval whose task is the card's env ids (``task_name``), whose model is the card's agent
  spec, created when the card was; status ``success`` for a complete card, ``cancelled``
  for an interrupted one, ``started`` for one still running (or killed);
- one sample per plan entry the card records (completed episodes and drops, in plan
  order): id the plan id with each ``/`` as ``|`` (``sample_id``: inspect names a sample's
  file in the log by its id, and its viewer reads ids back from those names up to the
  first ``/``), epoch the sample index + 1, input the reset observation's user messages,
  target the grade's gold where the grader records one; its metadata holds the plan id as
  it is, with the rest of the record's identity and seeding;
- messages: the reset observation, then each step's new messages, one inspect message per
  frostgym message with the same role and text. A step's tool calls (as its env parsed
  them) are ``ToolCall``s on its assistant message, and each of its tool results a
  ``ChatMessageTool`` right after that message (``tool_call_id`` naming its call, the
  recorded result whole in its metadata under ``RESULT_KEY``). These tool messages are the
  only messages the export adds: the agent read its results in the env's next message,
  which follows them unchanged;
- scores: one per grade component, and ``reward`` (explanation the grade's label, metadata
  its details); a drop counted as a failure scores reward 0 and nothing else, as the card's
  views count it; a drop the views leave out scores nothing. Drops also carry the sample's
  ``error``, so inspect shows them as errored samples;
- results: the card's own views (``compute_views``) under the errors-as-failures rule:
  ``reward`` with its mean and pass@k, each component with its mean.

inspect_ai is an optional extra (``pip install 'frostgym[inspect]'``), imported only when
an export runs.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from frostgym.cards.card import load_card
from frostgym.cards.views import compute_views
from frostgym.core.episode import DropRecord, EpisodeRecord, Record, StepRecord
from frostgym.core.errors import ExportError, InspectMissingError
from frostgym.core.messages import Message

if TYPE_CHECKING:
    from inspect_ai.log import EvalLog, EvalResults, EvalSample, EvalSpec
    from inspect_ai.model import ChatMessage, GenerateConfig, ModelUsage
    from inspect_ai.scorer import Score

INSTALL_HINT = "pip install 'frostgym[inspect]'"
#: The score every sample has (beside one per grade component): the episode's reward.
REWARD = "reward"
#: Where a tool message's metadata holds the tool result it shows, exactly as the card recorded it.
RESULT_KEY = "frostgym_tool_result"
#: The card's view rule the log's results and drop scores follow (``frostgym.cards.views``).
RULE = "errors_as_failures"
#: inspect's log format for each suffix ``out`` may have.
FORMATS: dict[str, Literal["eval", "json"]] = {".eval": "eval", ".json": "json"}
#: A card's status as an inspect eval status.
STATUSES: dict[str, Literal["started", "success", "cancelled"]] = {
    "complete": "success",
    "interrupted": "cancelled",
    "running": "started",
}
#: The agents' finish reasons inspect has a stop reason for (any other is ``unknown``).
STOP_REASONS: dict[str, Literal["stop", "max_tokens", "tool_calls"]] = {
    "stop": "stop",
    "length": "max_tokens",
    "tool_calls": "tool_calls",
}


def export_inspect(card_dir: Path, out: Path) -> Path:
    """Write the card in ``card_dir`` as an inspect_ai eval log at ``out`` and return ``out``:
    ``.eval`` is inspect's zipped log, ``.json`` one JSON document. The log is written beside
    ``out`` and renamed into place, so ``out`` is never half written; a file already there is
    replaced. The card is only read.

    Raises ``ExportError`` for an ``out`` with another suffix, ``InspectMissingError`` when
    inspect_ai is not installed, ``CardCorruptError`` when ``card_dir`` holds no readable
    card (``load_card``), and ``OSError`` when ``out`` cannot be written."""
    log_format = FORMATS.get(out.suffix)
    if log_format is None:
        raise ExportError(f"{out}: an inspect log ends in .eval or .json, not {out.suffix or 'no suffix'!r}")
    try:
        from inspect_ai.log import write_eval_log
    except ImportError as error:
        raise InspectMissingError(f"exporting to inspect needs inspect_ai: {INSTALL_HINT} ({error})") from None
    card, episodes, drops = load_card(card_dir)
    log = eval_log(card, [*episodes, *drops])
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
        try:
            write_eval_log(log, str(staging / out.name), format=log_format)
            os.replace(staging / out.name, out)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    except OSError as error:  # named by ``out``, not by the staging file the failure may name
        raise OSError(f"cannot write {out}: {error.strerror or error}") from error
    return out


def eval_log(card: Mapping[str, Any], records: Sequence[Record]) -> EvalLog:
    """The eval log of a card (``card.json`` as read) and its records (episodes and drops,
    in any order; they are written in plan order). Deterministic: the same card gives
    the same log, every id and time taken from the card."""
    from inspect_ai.log import EvalLog, EvalPlan, EvalPlanStep, EvalStats

    agent = str(card["config"]["identity"]["agent"])
    order = {entry["plan_id"]: index for index, entry in enumerate(card["plan"]["episodes"])}
    ordered = sorted(records, key=lambda record: order[record.plan_id])
    samples = [_sample(record, agent, card["plan"]["sha256"]) for record in ordered]
    sessions = card.get("sessions") or [{}]
    usage = _usage_total([sample.model_usage[agent] for sample in samples if agent in sample.model_usage])
    return EvalLog(
        status=STATUSES.get(card["status"], "started"),
        eval=_spec(card, agent),
        plan=EvalPlan(
            steps=[EvalPlanStep(solver=agent, params=dict(card.get("agent") or {}))],
            config=_generate_config(card["config"]["identity"].get("sampling") or {}),
        ),
        results=_results(card, records),
        stats=EvalStats(
            started_at=sessions[0].get("started_at") or "",
            completed_at=sessions[-1].get("ended_at") or "",
            model_usage={} if usage is None else {agent: usage},
        ),
        samples=samples,
    )


# -- the eval ------------------------------------------------------------------------------


def task_name(card: Mapping[str, Any]) -> str:
    """The eval's task name, in inspect's ``package/task`` form: ``frostgym/`` and the card's
    env ids without it, comma-separated (``frostgym/Math-v0,SQL-v0``)."""
    return "frostgym/" + ",".join(env_id.removeprefix("frostgym/") for env_id in card["config"]["identity"]["env_ids"])


def _spec(card: Mapping[str, Any], agent: str) -> EvalSpec:
    from inspect_ai.log import EvalConfig, EvalDataset, EvalRevision, EvalSpec

    identity = card["config"]["identity"]
    plan = card["plan"]
    git = card.get("git") or {}
    metadata = {
        "frostgym_version": card["frostgym_version"],
        "card_schema": card["schema"],
        "card_status": card["status"],
        "plan_sha256": plan["sha256"],
        "config": card["config"],
        "envs": card.get("envs"),
        "agent": card.get("agent"),
        "accounting": card.get("accounting"),  # None while the card is not closed
        "graders": card.get("graders"),
    }
    return EvalSpec(
        eval_id=stable_id("eval", plan["sha256"], card["created_at"], agent),
        run_id=stable_id("run", plan["sha256"], card["created_at"], agent),
        created=card["created_at"],
        task=task_name(card),
        task_id=stable_id("task", plan["sha256"]),
        task_args={k: v for k, v in identity.items() if k not in ("agent", "sampling")},
        dataset=EvalDataset(
            name=f"{identity['split']} split",
            samples=len(plan["episodes"]),
            sample_ids=[sample_id(entry["plan_id"]) for entry in plan["episodes"]],
        ),
        model=agent,
        model_generate_config=_generate_config(identity.get("sampling") or {}),
        config=EvalConfig(epochs=identity["samples"]),
        revision=EvalRevision(type="git", origin="", commit=git["commit"], dirty=git.get("dirty"))
        if git.get("commit")
        else None,
        packages={str(k): str(v) for k, v in (card.get("packages") or {}).items()},
        metadata=metadata,
    )


def _generate_config(sampling: Mapping[str, Any]) -> GenerateConfig:
    """The card's sampling parameters (``SamplingParams.to_dict``) in inspect's terms."""
    from inspect_ai.model import GenerateConfig

    return GenerateConfig(
        temperature=sampling.get("temperature"),
        top_p=sampling.get("top_p"),
        max_tokens=sampling.get("max_new_tokens"),
        stop_seqs=sampling.get("stop") or None,
        seed=sampling.get("seed"),
        logprobs=sampling.get("logprobs") or None,
    )


def _results(card: Mapping[str, Any], records: Sequence[Record]) -> EvalResults:
    """The card's overall views under ``RULE`` as inspect scores: ``reward`` first (inspect's
    headline), then each grade component."""
    from inspect_ai.log import EvalMetric, EvalResults, EvalScore

    view = compute_views([record.head() for record in records], card["config"].get("ks", [1]))["overall"][RULE]

    def score(name: str, scored: int, metrics: Mapping[str, float | None]) -> EvalScore:
        return EvalScore(
            name=name,
            scorer=name,
            scored_samples=scored,
            unscored_samples=len(records) - scored,
            metrics={m: EvalMetric(name=m, value=v) for m, v in metrics.items() if v is not None},
            metadata={"rule": RULE},
        )

    passes = {f"pass@{k}": value["value"] for k, value in view["pass@k"].items()}
    scores = [score(REWARD, view["episodes"], {"mean": view["mean_reward"], **passes})]
    for name, mean in view["component_means"].items():
        graded = sum(1 for r in records if isinstance(r, EpisodeRecord) and r.grade and name in r.grade["components"])
        scores.append(score(name, graded, {"mean": mean}))
    episodes = sum(1 for record in records if isinstance(record, EpisodeRecord))
    return EvalResults(total_samples=len(card["plan"]["episodes"]), completed_samples=episodes, scores=scores)


# -- one sample per record -------------------------------------------------------------------


def _sample(record: Record, agent: str, plan_sha256: str) -> EvalSample:
    from inspect_ai.log import EvalError, EvalSample
    from inspect_ai.model import ChatCompletionChoice, ChatMessageAssistant, ModelOutput

    messages = chat_messages(record, agent)
    last = next((m for m in reversed(messages) if isinstance(m, ChatMessageAssistant)), None)
    finish = str(record.steps[-1].agent.get("finish_reason")) if record.steps else ""
    output = ModelOutput(model=agent)
    if last is not None:
        output = ModelOutput(
            model=agent, choices=[ChatCompletionChoice(message=last, stop_reason=STOP_REASONS.get(finish, "unknown"))]
        )
    usage = _usage_of(record.steps)
    error = None
    if isinstance(record, DropRecord):
        drop = record.drop
        message = f"{drop.drop_class} at {drop.stage}: {drop.error}"
        traceback = record.traceback or message
        error = EvalError(message=message, traceback=traceback, traceback_ansi=traceback)
    return EvalSample(
        id=sample_id(record.plan_id),
        epoch=record.sample + 1,
        input=_input(messages[: len(record.observation)]),
        target=gold(record),
        messages=messages,
        output=output,
        scores=scores(record),
        metadata=sample_metadata(record),
        model_usage={} if usage is None else {agent: usage},
        started_at=_iso(record.started_at),
        completed_at=_iso(record.started_at + record.wall_seconds) if record.started_at > 0 else None,
        total_time=record.wall_seconds if record.started_at > 0 else None,
        uuid=stable_id("sample", plan_sha256, record.plan_id),
        error=error,
    )


def _input(observation: Sequence[ChatMessage]) -> str | list[ChatMessage]:
    """The sample's input: the user messages of the reset observation (as inspect
    messages), or the text of the one there is."""
    users: list[ChatMessage] = [m for m in observation if m.role == "user"]
    return users[0].text if len(users) == 1 else users


def gold(record: Record) -> str:
    """The sample's target: the gold answer the grade records (``details.gold``), else ""."""
    details = record.grade.get("details") if isinstance(record, EpisodeRecord) and record.grade else None
    value = (details or {}).get("gold")
    return value if isinstance(value, str) else ""


def scores(record: Record) -> dict[str, Score] | None:
    """The sample's scores: ``reward``, then one per grade component (a failure drop:
    ``reward`` 0 only; a drop the views leave out: none)."""
    from inspect_ai.scorer import Score

    if isinstance(record, DropRecord):
        if record.counted_as == "excluded":
            return None
        explanation = f"dropped ({record.drop.drop_class}): counted as a failure"
        return {REWARD: Score(value=0.0, explanation=explanation, metadata={"counted_as": record.counted_as})}
    grade: Mapping[str, Any] = record.grade or {}
    details = grade.get("details")
    result = {REWARD: Score(value=record.reward, explanation=grade.get("label"), metadata=details or None)}
    for name, value in (grade.get("components") or {}).items():
        result[name] = Score(value=float(value))
    return result


def sample_metadata(record: Record) -> dict[str, Any]:
    """What the sample's metadata says of its record: identity and seeding, the grader of an
    episode, the drop of a drop."""
    metadata: dict[str, Any] = {
        "plan_id": record.plan_id,
        "env_id": record.env_id,
        "task_id": record.task_id,
        "sample": record.sample,
        "seed": record.seed,
        "seed_derivation": list(record.seed_derivation),
        "episode_id": record.episode_id,
        "difficulty": record.difficulty,
        "tags": list(record.tags),
        "attempts": record.attempts,
    }
    if isinstance(record, DropRecord):
        return {
            **metadata,
            **record.drop.to_json(),
            "counted_as": record.drop.counted_as,
            "earlier_errors": list(record.earlier_errors),
        }
    grade: Mapping[str, Any] = record.grade or {}
    return {
        **metadata,
        "split": record.split,
        "env_version": record.env_version,
        "fixture_sha256": record.fixture_sha256,
        "task_sha256": record.task_sha256,
        "grader": grade.get("grader"),
        "grader_version": grade.get("grader_version"),
        "grade_weights": grade.get("weights"),
        "grade_required": grade.get("required"),
    }


# -- the conversation ------------------------------------------------------------------------


def transcript(record: Record) -> list[tuple[Message, StepRecord | None]]:
    """Every message of ``record``'s conversation in order, each with the step whose action
    it is (None for the others): the reset observation, then each step's new messages, of
    which the first assistant one is that step's action. frostgym's envs only append, so
    this is the final conversation; a delta that rewrote earlier messages shows them again
    where the step sent them."""
    messages: list[tuple[Message, StepRecord | None]] = [(m, None) for m in record.observation]
    for step in record.steps:
        owner: StepRecord | None = step
        for message in step.observation.new:
            if owner is not None and message["role"] == "assistant":
                messages.append((message, owner))
                owner = None
            else:
                messages.append((message, None))
    return messages


def call_id(step: StepRecord, index: int) -> str:
    """The id that ties a step's ``index``-th tool call to its result (results pair with
    calls by position, as every tool-calling env records them)."""
    return f"call_{step.turn}_{index}"


def result_text(result: Mapping[str, Any]) -> str:
    """What a tool message shows of a result: its ``content`` when that is text, else the
    JSON of its content (of the whole result, when it has none)."""
    content = result.get("content", result)
    return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False, sort_keys=True)


def chat_messages(record: Record, agent: str) -> list[ChatMessage]:
    """The record's conversation as inspect messages (``transcript``), with each step's tool
    calls on its assistant message and its tool results as tool messages right after it.
    Ids are the plan id and the message's position, so the same card gives the same ids."""
    from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageTool, ChatMessageUser
    from inspect_ai.tool import ToolCall

    out: list[ChatMessage] = []

    def next_id() -> str:
        return f"{record.plan_id}#{len(out)}"

    for message, step in transcript(record):
        role, content = message["role"], message["content"]
        if role == "system":
            out.append(ChatMessageSystem(id=next_id(), content=content))
        elif role == "user":
            out.append(ChatMessageUser(id=next_id(), content=content))
        elif role == "tool":
            tool_id, name = message.get("tool_call_id"), message.get("name")
            out.append(ChatMessageTool(id=next_id(), content=content, tool_call_id=tool_id, function=name))
        elif step is None:
            out.append(ChatMessageAssistant(id=next_id(), content=content, model=agent))
        else:
            calls = [
                ToolCall(id=call_id(step, i), function=str(call.get("name", "")), arguments=_arguments(call))
                for i, call in enumerate(step.tool_calls)
            ]
            out.append(ChatMessageAssistant(id=next_id(), content=content, tool_calls=calls or None, model=agent))
            for i, result in enumerate(step.tool_results):
                out.append(
                    ChatMessageTool(
                        id=next_id(),
                        content=result_text(result),
                        tool_call_id=call_id(step, i),
                        function=str(result.get("name", "")),
                        metadata={RESULT_KEY: result},
                    )
                )
    return out


def _arguments(call: Mapping[str, Any]) -> dict[str, Any]:
    arguments = call.get("arguments")
    return dict(arguments) if isinstance(arguments, Mapping) else {}


# -- small pure helpers ----------------------------------------------------------------------


def sample_id(plan_id: str) -> str:
    """The inspect sample id of a plan entry: its plan id with each ``/`` as ``|`` (no
    gymnasium env id or frostgym task id holds a ``|``, so ids stay distinct)."""
    return plan_id.replace("/", "|")


def stable_id(*parts: object) -> str:
    """A 22-character id (inspect's length) that is a function of ``parts`` alone."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode("utf-8")).hexdigest()[:22]


def _iso(unix: float) -> str | None:
    """A record's unix time as an ISO UTC time (None for 0: the episode never started)."""
    return dt.datetime.fromtimestamp(unix, dt.UTC).isoformat() if unix > 0 else None


def _usage_of(steps: Sequence[StepRecord]) -> ModelUsage | None:
    """The tokens the agent reported over ``steps`` (None when it reported none, as the oracle)."""
    from inspect_ai.model import ModelUsage

    prompt = [s.agent.get("prompt_tokens") for s in steps]
    completion = [s.agent.get("completion_tokens") for s in steps]
    if not any(isinstance(n, int) for n in prompt + completion):
        return None
    input_tokens = sum(n for n in prompt if isinstance(n, int))
    output_tokens = sum(n for n in completion if isinstance(n, int))
    return ModelUsage(input_tokens=input_tokens, output_tokens=output_tokens, total_tokens=input_tokens + output_tokens)


def _usage_total(usages: Sequence[ModelUsage]) -> ModelUsage | None:
    from inspect_ai.model import ModelUsage

    if not usages:
        return None
    return ModelUsage(
        input_tokens=sum(u.input_tokens for u in usages),
        output_tokens=sum(u.output_tokens for u in usages),
        total_tokens=sum(u.total_tokens for u in usages),
    )
