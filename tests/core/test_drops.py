"""The one drop type: how each place that declares a drop (an exception, an agent's reply,
an env's ``Reply``, the runner) builds the same ``Drop``, and how it is written and read."""

from __future__ import annotations

import pytest

from frostgym.agents.base import AgentReply
from frostgym.core.episode import DROP_ERROR_CHARS, Drop, DropRecord, drop_record
from frostgym.core.errors import GraderError, InvalidActionError, SandboxTimeoutError
from frostgym.run.plan import PlannedEpisode
from frostgym.run.runner import failure_of


def test_a_drop_keeps_one_line_and_names_its_class_when_empty() -> None:
    assert Drop("agent_error", "agent", "first\nsecond").error == "first"
    assert Drop("agent_error", "agent", "x" * 2000).error == "x" * DROP_ERROR_CHARS
    assert Drop("skipped", "runner", "").error == "skipped"
    assert Drop("skipped", "runner", "\nsecond").error == "skipped"
    assert Drop("cancelled", "runner", "why").counted_as == "excluded"
    assert Drop("sandbox_oom", "step", "why").counted_as == "failure"


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({"drop_class": "gremlins", "stage": "step", "error": "x"}, "unknown drop class"),
        ({"drop_class": "infra_error", "stage": "later", "error": "x"}, "unknown drop stage"),
        ({"drop_class": "infra_error", "error": "x"}, "unknown drop stage"),
        ({"drop_class": "infra_error", "stage": "step", "error": 7}, "'error' must be a string"),
        (["infra_error", "step", "x"], "JSON object"),
    ],
)
def test_reading_a_drop_names_what_is_wrong(data: object, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        Drop.from_json(data)
    with pytest.raises(ValueError, match="unknown drop class"):
        Drop("gremlins", "step", "x")  # type: ignore[arg-type]


def test_a_drop_survives_its_json() -> None:
    drop = Drop("replay_miss", "step", "no recorded response")
    assert Drop.from_json(drop.to_json()) == drop


def test_exceptions_declare_their_drop_and_others_take_the_stage_default() -> None:
    def failed(error: BaseException, stage: str = "step") -> Drop:
        try:
            raise error
        except BaseException as raised:
            failure = failure_of(raised, stage, "infra_error")  # type: ignore[arg-type]
        assert failure.traceback and type(error).__name__ in failure.traceback
        return failure.drop

    assert failed(GraderError("boom")) == Drop("grader_error", "grade", "GraderError: boom")
    assert failed(SandboxTimeoutError("slow")) == Drop("sandbox_timeout", "step", "SandboxTimeoutError: slow")
    assert failed(InvalidActionError("int")).drop_class == "agent_error"
    assert failed(KeyError("k"), "reset") == Drop("infra_error", "reset", "KeyError: 'k'")
    foreign = RuntimeError("from elsewhere")
    foreign.drop_class = "not a class"  # type: ignore[attr-defined]
    foreign.stage = "nowhere"  # type: ignore[attr-defined]
    assert failed(foreign) == Drop("infra_error", "step", "RuntimeError: from elsewhere")


def test_an_agent_reply_without_an_action_carries_its_drop() -> None:
    reply = AgentReply.failed("server said no\ntrace", "replay_miss", extra={"latency_s": 1.0})
    assert reply.drop == Drop("replay_miss", "agent", "server said no") and reply.action == ""
    assert reply.extra == {"latency_s": 1.0} and AgentReply(action="a").drop is None


def test_a_drop_record_is_written_flat_and_read_back_whole() -> None:
    planned = PlannedEpisode(
        plan_id="e:t:0",
        env_id="e",
        task_id="t",
        sample=0,
        seed=7,
        seed_derivation=("episode", 0, "e", "t", 0),
        difficulty=None,
        tags=("tag",),
    )
    record = drop_record(planned, Drop("agent_error", "agent", "bad"), attempts=2, earlier_errors=["worse"])
    data = record.to_json()
    assert (data["drop_class"], data["counted_as"], data["stage"], data["error"]) == (
        "agent_error",
        "failure",
        "agent",
        "bad",
    )
    assert "drop" not in data and DropRecord.from_json(data) == record
    assert record.head().drop == record.drop and record.head().reward == 0.0
