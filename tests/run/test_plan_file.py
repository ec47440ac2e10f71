"""A plan generated one entry at a time (``iter_plan``) and spooled to a file (``PlanFile``) is
``make_plan``'s, byte for byte as ``plan.json`` holds it, so its hash is the plan's identity as
before and existing cards resume and compare."""

from __future__ import annotations

import tempfile

import pytest

from frostgym.run.plan import PlanFile, iter_plan, make_plan, plan_json_and_sha256

PLANS = [
    (["frostgym/Arithmetic-v0"], {"split": "train", "episodes": 30, "samples": 1, "seed": 0}),
    (
        ["frostgym/Arithmetic-v0", "frostgym/Fractions-v0"],
        {"split": "test,dev", "episodes": 4, "samples": 3, "seed": 2},
    ),
    (["frostgym/Arithmetic-v0"], {"split": "test", "episodes": 5, "samples": 2, "seed": 1, "twins": True}),
    (["frostgym/Fractions-v0"], {"split": "dev", "episodes": None, "samples": 1, "seed": 3, "exclude": {}}),
]


@pytest.mark.parametrize(("env_ids", "kwargs"), PLANS)
@pytest.mark.parametrize("chunk", [1, 7, PlanFile.CHUNK])
def test_a_spooled_plan_is_the_whole_plans_json_and_entries(
    env_ids: list[str], kwargs: dict[str, object], chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(PlanFile, "CHUNK", chunk)
    whole = make_plan(env_ids, **kwargs)  # type: ignore[arg-type]
    data, digest = plan_json_and_sha256(whole)
    with tempfile.TemporaryFile() as handle:
        spooled = PlanFile.write(iter_plan(env_ids, **kwargs), handle)  # type: ignore[arg-type]
        handle.seek(0)
        assert handle.read() == data == spooled.data()
        assert spooled.sha256 == digest
        assert len(spooled) == len(whole)
        assert list(spooled) == whole
        assert list(zip(spooled, spooled, strict=True)) == list(zip(whole, whole, strict=True))  # two at once


def test_an_empty_plan_spools_as_an_empty_array() -> None:
    with tempfile.TemporaryFile() as handle:
        spooled = PlanFile.write([], handle)
        assert spooled.data() == b"[]" and spooled.sha256 == plan_json_and_sha256([])[1]
        assert len(spooled) == 0 and list(spooled) == []


def test_a_plan_that_cannot_be_made_is_refused_when_asked_for() -> None:
    with pytest.raises(ValueError, match="must be >= 1"):
        iter_plan(["frostgym/Arithmetic-v0"], split="test", episodes=0, samples=1, seed=0)
    entries = iter_plan(["frostgym/Arithmetic-v0"], split="test", episodes=100_000, samples=1, seed=0)
    with pytest.raises(ValueError, match="fewer than the 100000 asked for"):
        next(entries)  # the split's size is known once its env is made: at its first entry
