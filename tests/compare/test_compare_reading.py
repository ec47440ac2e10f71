"""How ``frostgym compare`` reads cards: records reduced to columns, checked as they are read,
and two large cards read at once by two processes that agree with one.

The columns must give exactly the numbers the cards' own views give (both reporting rules,
with drops), a card that was edited or holds a bad line must be refused naming the file
(and the line), and reading the candidate in a second process must give the same columns,
the same comparison and the same errors as reading it here.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import zlib
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from frostgym.agents import AgentReply, AgentRequest, OracleAgent, RandomAgent
from frostgym.cards.card import load_card
from frostgym.compare.compare import _compare, compare_cards
from frostgym.compare.facts import EpisodeFacts
from frostgym.compare.parallel import ReaderProcess, fingerprint, read_both
from frostgym.compare.reading import read_card_facts
from frostgym.core.errors import CardCorruptError, CardNotCompleteError
from frostgym.core.stats import distinct_columns
from frostgym.evaluate.run_to_card import card_config, run_to_card
from frostgym.run.runner import RunOptions

ENVS = ["frostgym/Arithmetic-v0", "frostgym/Fractions-v0"]


class _Flaky:
    """The oracle on two episodes in three, the random agent on the third, and an agent
    error on one in five (by episode id): a card with drops, passes and failures."""

    name = "flaky"

    def act(self, requests: Sequence[AgentRequest]) -> list[AgentReply]:
        oracle, random = OracleAgent().act(requests), RandomAgent(seed=1).act(requests)
        out = []
        for request, good, bad in zip(requests, oracle, random, strict=True):
            which = zlib.crc32(request.episode_id.encode())
            out.append(AgentReply.failed("boom") if which % 5 == 0 else bad if which % 3 == 0 else good)
        return out

    def describe(self) -> dict[str, Any]:
        return {"spec": "flaky"}


def _card(out: Path, agent: Any, *, seed: int = 1) -> Path:
    options = RunOptions(batch_size=8, retries=0)
    config = card_config(
        env_ids=ENVS, agent_spec="test", sampling={}, episodes=8, samples=3, seed=seed, options=options
    )
    run_to_card(out, agent, config, options)
    return out


@pytest.fixture(scope="module")
def cards(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("reading")
    return {"oracle": _card(root / "oracle", OracleAgent()), "flaky": _card(root / "flaky", _Flaky())}


def _copy(card: Path, to: Path) -> Path:
    shutil.copytree(card, to)
    return to


def _edit_line(card: Path, number: int, edit: Any, *, fix_manifest: bool) -> None:
    """Replace line ``number`` (from 1) of ``episodes.jsonl``; with ``fix_manifest``, the
    card's manifest is rewritten to match, as a forger would."""
    path = card / "episodes.jsonl"
    lines = path.read_bytes().split(b"\n")
    lines[number - 1] = edit(lines[number - 1])
    path.write_bytes(b"\n".join(lines))
    if fix_manifest:
        data = path.read_bytes()
        manifest = json.loads((card / "card.json").read_text())
        manifest["files"]["episodes.jsonl"].update(sha256=hashlib.sha256(data).hexdigest(), bytes=len(data))
        (card / "card.json").write_text(json.dumps(manifest))


def _same_columns(left: EpisodeFacts, right: EpisodeFacts) -> None:
    for field in fields(EpisodeFacts):
        a, b = getattr(left, field.name), getattr(right, field.name)
        if isinstance(a, np.ndarray):
            assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), field.name
        else:
            assert a == b, field.name


def test_the_views_are_the_cards_own_under_both_rules_with_drops(cards: dict[str, Path]) -> None:
    """The flaky card has agent-error drops (failures under errors_as_failures, left out
    under errors_excluded): every base value is the card's own view, overall and per env."""
    card_views = load_card(cards["flaky"])[0]["views"]
    overall = card_views["overall"]
    assert overall["errors_as_failures"]["episodes"] > overall["errors_excluded"]["episodes"]
    comparison = compare_cards(cards["flaky"], cards["oracle"])
    assert comparison.drops["base"] and not comparison.drops["cand"]
    for rule in ("errors_as_failures", "errors_excluded"):
        for slice_name, key, shown in [
            ("overall", "", card_views["overall"][rule]),
            *(("env", env, card_views["by_env"][env][rule]) for env in ENVS),
        ]:
            found = comparison.view("mean_reward", slice_name, key, rule)
            assert found is not None and found.base == pytest.approx(shown["mean_reward"])
            for metric in ("pass@k", "pass^k", "maj@k"):
                for k, value in shown[metric].items():
                    found = comparison.view(f"{metric[:-1]}{k}", slice_name, key, rule)
                    assert found is not None and found.base == pytest.approx(value["value"]), (metric, k, rule)
            best = comparison.view("best_of_n", slice_name, key, rule)
            assert best is not None and best.base == pytest.approx(shown["best_of_n"]["value"])
            for name, mean in shown["component_means"].items():
                found = comparison.view(f"component:{name}", slice_name, key, rule)
                assert found is not None and found.base == pytest.approx(mean)


@pytest.mark.slow
def test_a_card_read_in_a_second_process_gives_the_same_columns_and_comparison(
    cards: dict[str, Path], tmp_path: Path
) -> None:
    here = read_card_facts(cards["flaky"])
    reader = ReaderProcess.start(cards["flaky"])
    assert reader is not None
    try:
        read = reader.result(fingerprint(cards["flaky"], here.card))
    finally:
        reader.stop()
    assert read is not None
    _same_columns(read[0], here.facts)
    assert read[1] == here.rows
    base, there = read_both(cards["oracle"], cards["flaky"], min_bytes=0)
    _same_columns(there.facts, here.facts)
    assert there.rows == here.rows and there.card == here.card and there.plan == here.plan
    _same_columns(base.facts, read_card_facts(cards["oracle"]).facts)
    other = _copy(cards["flaky"], tmp_path / "other")
    manifest = json.loads((other / "card.json").read_text())
    manifest["plan"]["sha256"] = "0" * 64
    (other / "card.json").write_text(json.dumps(manifest))
    reader = ReaderProcess.start(cards["flaky"])
    assert reader is not None
    try:  # the process read another card.json than this one: its columns are not taken
        assert reader.result(fingerprint(other, manifest)) is None
    finally:
        reader.stop()
    first = compare_cards(cards["oracle"], cards["flaky"]).to_json()
    assert json.dumps(first) == json.dumps(_compare_in_two_processes(cards["oracle"], cards["flaky"]))


def _compare_in_two_processes(base: Path, cand: Path) -> dict[str, Any]:
    """``compare_cards`` with the candidate read by a second process, however small it is."""
    base_facts, cand_facts = read_both(base, cand, min_bytes=0)
    return _compare(base_facts, cand_facts, overlap=False).to_json()


@pytest.mark.slow
@pytest.mark.parametrize("min_bytes", [0, 1 << 60], ids=["two processes", "one process"])
def test_a_bad_line_is_named_with_its_file_and_line(cards: dict[str, Path], tmp_path: Path, min_bytes: int) -> None:
    """A line that is not JSON, or not a record, is named, whether or not the manifest was
    rewritten to match it; an edit the manifest does not match is refused; the base's
    error comes first."""
    not_json = _copy(cards["flaky"], tmp_path / "not_json")
    _edit_line(not_json, 3, lambda line: line[:-5], fix_manifest=True)
    with pytest.raises(CardCorruptError, match=r"not_json/episodes\.jsonl: line 3 is not JSON"):
        read_both(cards["oracle"], not_json, min_bytes=min_bytes)
    not_a_record = _copy(cards["flaky"], tmp_path / "not_a_record")
    _edit_line(not_a_record, 4, lambda line: line.replace(b'"sample":', b'"sample":-1,"x":', 1), fix_manifest=False)
    with pytest.raises(CardCorruptError, match=r"not_a_record/episodes\.jsonl: line 4: 'sample' must be"):
        read_both(cards["oracle"], not_a_record, min_bytes=min_bytes)
    edited = _copy(cards["flaky"], tmp_path / "edited")
    _edit_line(edited, 2, lambda line: line.replace(b'"wall_seconds":', b'"wall_seconds":1', 1), fix_manifest=False)
    with pytest.raises(CardCorruptError, match=r"edited/episodes\.jsonl does not match the card's manifest"):
        read_both(cards["oracle"], edited, min_bytes=min_bytes)
    with pytest.raises(CardCorruptError, match=r"not_json/episodes\.jsonl: line 3"):
        read_both(not_json, edited, min_bytes=min_bytes)


def test_an_unfinished_or_incomplete_card_is_refused(cards: dict[str, Path], tmp_path: Path) -> None:
    unfinished = _copy(cards["flaky"], tmp_path / "unfinished")
    manifest = json.loads((unfinished / "card.json").read_text())
    manifest["status"] = "interrupted"
    (unfinished / "card.json").write_text(json.dumps(manifest))
    for min_bytes in (0, 1 << 60):
        with pytest.raises(CardNotCompleteError, match="not complete"):
            read_both(cards["oracle"], unfinished, min_bytes=min_bytes)
    torn = _copy(cards["flaky"], tmp_path / "torn")
    path = torn / "episodes.jsonl"
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(CardCorruptError, match=r"torn/episodes\.jsonl: line \d+ is torn"):
        read_card_facts(torn)
    missing = _copy(cards["flaky"], tmp_path / "missing")
    (missing / "episodes.jsonl").unlink()
    with pytest.raises(CardCorruptError, match=r"missing/episodes\.jsonl is missing"):
        read_card_facts(missing)


def test_distinct_columns_is_numpys_unique_by_column() -> None:
    data = np.random.default_rng(3)
    for _ in range(200):
        tasks, width = int(data.integers(1, 30)), int(data.integers(1, 25))
        pool = data.integers(0, 3, (tasks, int(data.integers(1, 6)))) / 2.0
        sums = pool[:, data.integers(0, pool.shape[1], width)]
        expected, inverse = np.unique(sums, axis=1, return_inverse=True)
        found, found_inverse = distinct_columns(sums)
        assert np.array_equal(found, expected) and np.array_equal(found_inverse, inverse.reshape(-1))
