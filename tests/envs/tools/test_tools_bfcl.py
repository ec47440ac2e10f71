"""BFCL single-turn tool calling: the data, our AST grader, ``ToolsEnv``, and a cross-check
against bfcl_eval's own ``ast_checker`` on the same gold and near-miss calls."""

from __future__ import annotations

import importlib.util
import json
import random
import re
import sys
import types
import warnings
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from gymnasium.utils.env_checker import check_env

from frostgym.core.errors import BFCLNotInstalledError, InvalidActionError, UnknownTaskError
from frostgym.core.hashing import canonical_json
from frostgym.envs.tools.single_turn import IRRELEVANT_REPLY, ToolsEnv
from frostgym.graders.adversarial import run_suite
from frostgym.graders.tool_ast import GRADER, check_calls, grade_tool_reply, standardize
from frostgym.tools.bfcl_data import (
    CATEGORIES,
    INSTALL_HINT,
    IRRELEVANCE,
    PINNED_VERSION,
    BFCLEntry,
    as_source_literals,
    data_dir,
    gold_calls,
    installed_version,
    load_entries,
    perturbations,
)
from frostgym.tools.calls import ToolCall, render_calls

RELEVANT = tuple(c for c in CATEGORIES if c not in IRRELEVANCE)
Calls = list[tuple[str, dict[str, Any]]]

#: Known, explained disagreements with bfcl_eval's checker: (BFCL id, probe kind) -> why.
KNOWN_DISAGREEMENTS: dict[tuple[str, str], str] = {
    **{
        (bfcl_id, kind): "ArrayList items declared 'any': bfcl_eval keeps each item as raw text (quotes "
        "included) and compares it with the gold's numbers and booleans, so even its gold fails; we read "
        "such items as Java literals"
        for bfcl_id in ("simple_java_36", "simple_java_65")
        for kind in ("gold", "string_variant")
    },
    **{
        ("simple_java_64", kind): "the gold HashMap value is a bare string, not a list of allowed values; "
        "bfcl_eval iterates its characters, so even its gold fails; we take a bare value as the one allowed"
        for kind in ("gold", "string_variant")
    },
    **{
        (bfcl_id, "gold"): "a required array argument with an empty allowed list: bfcl_eval accepts no value "
        "at all; we read it as the empty array"
        for bfcl_id in ("live_simple_106-63-0", "live_simple_112-68-0")
    },
    ("parallel_178", "reordered"): "bfcl_eval matches parallel calls greedily in gold order; gold call 0 allows "
    "Microsoft or Apple, takes the Apple call meant for gold call 2 and leaves it unmatched; a full "
    "matching exists, which our maximum matching finds",
}


def _calls(calls: Calls) -> list[ToolCall]:
    return [ToolCall(name, arguments) for name, arguments in calls]


# -- data and oracle ---------------------------------------------------------------------------


def test_data_comes_from_the_pinned_installed_package() -> None:
    assert installed_version() == PINNED_VERSION
    assert (data_dir() / "BFCL_v4_simple_python.json").is_file()
    entries = load_entries()
    assert {e.category for e in entries} == set(CATEGORIES)
    assert all((e.possible_answer is None) == (e.category in IRRELEVANCE) for e in entries)
    assert {e.language for e in load_entries(["simple_java"])} == {"java"}


def test_missing_package_error_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "bfcl_eval" else real(name, *a))
    with pytest.raises(BFCLNotInstalledError, match=re.escape(INSTALL_HINT)):
        data_dir()
    assert "--no-deps" in INSTALL_HINT


def test_every_oracle_action_scores_one() -> None:
    env = ToolsEnv()
    failures: Counter[tuple[str, str | None]] = Counter()
    served: Counter[str] = Counter()
    for task in env.source.tasks("test"):
        env.reset(seed=0, options={"task_id": task.task_id})
        _, reward, terminated, _, info = env.step(env.oracle_action())
        served[task.metadata["category"]] += 1
        if not (terminated and reward == 1.0 and info["grade"]["label"] is None):
            failures[(task.metadata["bfcl_id"], info["grade"]["label"])] += 1
    assert set(served) == set(CATEGORIES)
    assert not failures, failures


# -- perturbations -----------------------------------------------------------------------------


def test_single_changes_get_the_right_label() -> None:
    """Native JSON values, every relevant entry: each near miss fails with its label and
    each harmless change (case, int for float, order) still passes."""
    wrong: list[str] = []
    kinds: Counter[str] = Counter()
    for entry in load_entries(RELEVANT):
        for probe in perturbations(entry, random.Random(entry.id)):
            kinds[probe.kind] += 1
            result = check_calls(
                _calls(probe.calls), entry.functions, entry.possible_answer, entry.category, entry.language
            )
            label = None if result.mismatch is None else result.mismatch.label
            if label != probe.label and (entry.id, probe.kind) not in _NATIVE_EXCEPTIONS:
                wrong.append(f"{entry.id} {probe.kind}: expected {probe.label}, got {label} ({result.mismatch})")
    assert {"drop_required", "unknown_arg", "wrong_value", "wrong_type", "rename_function", "extra_call"} <= set(kinds)
    assert not wrong, "\n".join(wrong[:30])


#: Near misses whose label is rightly another: (BFCL id, kind) -> why.
_NATIVE_EXCEPTIONS: dict[tuple[str, str], str] = {
    ("parallel_multiple_144", "wrong_value"): "its two forest_growth_forecast gold calls differ only in "
    "include_human_impact; flipped, the call matches the other gold call, and the call left over lacks the argument",
}


def test_grade_components_and_labels() -> None:
    entry = next(e for e in load_entries(["simple_python"]) if e.id == "simple_python_0")
    args = (entry.functions, entry.possible_answer, entry.category, entry.language)
    good = grade_tool_reply(render_calls([ToolCall("calculate_triangle_area", {"base": 10, "height": 5})]), *args)
    assert good.score == 1.0 and good.label is None and good.components["calls_matched"] == 1.0
    malformed = grade_tool_reply("<tool_call>{oops</tool_call>", *args)
    assert malformed.score == 0.0 and malformed.components["tool_format"] == 0.0 and malformed.label == "malformed_call"
    wrong = grade_tool_reply("calculate_triangle_area(base=10, height=6)", *args)
    assert wrong.score == 0.0 and wrong.components["tool_format"] == 1.0 and wrong.label == "wrong_value"
    assert set(wrong.details) >= {"status", "reason", "syntax", "calls", "expected_calls"}
    assert standardize("April 1, 2024") == standardize("april 1 2024") == "april12024"


def test_adversarial_suite(record_property: Callable[[str, object], None]) -> None:
    entries = {e.id: e for e in load_entries()}

    def grade(case: Any) -> Any:
        entry = entries[case.context["bfcl_id"]]
        return grade_tool_reply(case.reply, entry.functions, entry.possible_answer, entry.category, entry.language)

    report = run_suite("tools", grade, GRADER)
    record_property("adversarial_report", report.render())
    assert report.passed, report.render()
    assert report.label_coverage == 1.0


# -- the env -------------------------------------------------------------------------------------


def test_same_seed_same_observation_byte_for_byte() -> None:
    first, second = ToolsEnv(), ToolsEnv()
    for seed in range(30):
        a, info_a = first.reset(seed=seed)
        b, info_b = second.reset(seed=seed)
        assert json.dumps([a, info_a, first.tools]) == json.dumps([b, info_b, second.tools])
    tasks = {first.reset(seed=s)[1]["task_id"] for s in range(30)}
    assert len(tasks) > 25


def test_env_contract_basics() -> None:
    env = ToolsEnv()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env, skip_render_check=True)
    obs, info = env.reset(seed=3)
    assert obs[0]["role"] == "system" and "<tools>" in obs[0]["content"] and obs[-1]["role"] == "user"
    assert [t["function"]["name"] for t in env.tools] == [f["name"] for f in env.task.metadata["functions"]]
    assert all(t["function"]["parameters"]["type"] == "object" for t in env.tools)
    assert "dict" not in json.dumps([t["function"]["parameters"] for t in env.tools]).replace('"dict_', "")
    assert info["split"] == "test" and info["task_id"].startswith("bfcl/test/") and len(info["fixture_sha256"]) == 64
    _, reward, terminated, truncated, info = env.step(env.oracle_action())
    assert terminated and not truncated and reward == info["grade"]["score"] == 1.0
    json.dumps(info)
    for split in ("train", "dev", "private"):
        with pytest.raises(UnknownTaskError, match="split"):
            env.reset(seed=0, options={"split": split})
    with pytest.raises(UnknownTaskError, match="outside split"):
        env.reset(seed=0, options={"task_id": "bfcl/test/999999"})
    group = [env.reset(seed=s, options={"task_id": "bfcl/test/5"}) for s in range(4)]
    assert len({i["episode_id"] for _, i in group}) == 4 and len({canonical_json(o) for o, _ in group}) == 1


def test_categories_kwarg_and_actions() -> None:
    env = ToolsEnv(categories="parallel")
    for seed in range(10):
        env.reset(seed=seed)
        assert env.task.metadata["category"] == "parallel"
    gold = json.loads(env.task.answer)
    _, reward, _, _, info = env.step({"content": "", "tool_calls": gold[::-1]})  # structured, reordered
    assert reward == 1.0 and [c["name"] for c in info["tool_calls"]] == [c["name"] for c in gold[::-1]]
    env.reset(seed=0)
    _, reward, _, _, info = env.step("I cannot help.")
    assert reward == 0.0 and info["grade"]["label"] == "no_call"
    env.reset(seed=0)
    with pytest.raises(InvalidActionError):
        env.step(42)  # type: ignore[arg-type]
    with pytest.raises(UnknownTaskError, match="unknown BFCL categories"):
        ToolsEnv(categories=["simple", "parallel"])
    irrelevant = ToolsEnv(categories=["irrelevance", "live_irrelevance"])
    irrelevant.reset(seed=1)
    assert irrelevant.oracle_action() == IRRELEVANT_REPLY
    offered = irrelevant.task.metadata["functions"][0]["name"]
    _, reward, _, _, info = irrelevant.step(f"<tool_call>{json.dumps({'name': offered, 'arguments': {}})}</tool_call>")
    assert reward == 0.0 and info["grade"]["label"] == "called_when_irrelevant"
    # python-syntax values that JSON cannot hold are still recorded as plain data
    env.reset(seed=0)
    _, _, _, _, info = env.step("f(a={1, 2}, b=(1, 2), c=1j)")
    assert info["tool_calls"] == [{"name": "f", "arguments": {"a": [1, 2], "b": [1, 2], "c": "1j"}}]
    json.dumps(info)


# -- cross-check against bfcl_eval ----------------------------------------------------------------


def _bfcl_checker() -> tuple[Any, Any]:
    """bfcl_eval's ``ast_checker`` without its API-client imports: the one thing it takes
    from ``model_config`` is ``MODEL_CONFIG_MAPPING[model].underscore_to_dot``."""
    name = "bfcl_eval.constants.model_config"
    if name not in sys.modules:
        stub = types.ModuleType(name)
        stub.MODEL_CONFIG_MAPPING = {"frostgym": types.SimpleNamespace(underscore_to_dot=False)}  # type: ignore[attr-defined]
        sys.modules[name] = stub
    from bfcl_eval.constants.enums import Language  # type: ignore[import-untyped]
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker  # type: ignore[import-untyped]

    return ast_checker, Language


def _probes(entry: BFCLEntry) -> list[tuple[str, Calls]]:
    return [("gold", gold_calls(entry))] + [(p.kind, p.calls) for p in perturbations(entry, random.Random(entry.id))]


def test_agrees_with_bfcl_eval_ast_checker(record_property: Callable[[str, object], None]) -> None:
    ast_checker, language = _bfcl_checker()
    languages = {"python": language.PYTHON, "java": language.JAVA, "javascript": language.JAVASCRIPT}
    agree: Counter[str] = Counter()
    total: Counter[str] = Counter()
    disagreements: dict[tuple[str, str], str] = {}
    for entry in load_entries(RELEVANT):
        for kind, calls in _probes(entry):
            calls = as_source_literals(entry, calls)  # Java/JS as source text: what bfcl_eval reads
            ours = check_calls(_calls(calls), entry.functions, entry.possible_answer, entry.category, entry.language)
            theirs = ast_checker(
                list(entry.functions),
                [{name: arguments} for name, arguments in calls],
                list(entry.possible_answer or ()),
                languages[entry.language],
                entry.category,
                "frostgym",
            )
            total[entry.category] += 1
            if ours.valid == theirs["valid"]:
                agree[entry.category] += 1
            else:
                disagreements[(entry.id, kind)] = f"ours {ours.valid} ({ours.mismatch}), bfcl {theirs['error_type']}"
    # Irrelevance: bfcl_eval passes a reply when it decodes to no call at all.
    for entry in load_entries(sorted(IRRELEVANCE)):
        name = str(entry.functions[0]["name"]) if entry.functions else "get_weather"
        required = entry.functions[0]["parameters"].get("required", []) if entry.functions else []
        probes: list[tuple[list[ToolCall], bool]] = [([], True), ([ToolCall(name, dict.fromkeys(required, 1))], False)]
        for replies, bfcl_valid in probes:
            total[entry.category] += 1
            agree[entry.category] += check_calls(replies, entry.functions, None, entry.category).valid == bfcl_valid
    lines = [f"{c:24s} {agree[c]:5d}/{total[c]:5d} = {agree[c] / total[c]:.2%}" for c in CATEGORIES]
    lines += [
        f"  known: {k[0]} {k[1]}: {KNOWN_DISAGREEMENTS.get(k, 'UNEXPLAINED')} [{v}]" for k, v in disagreements.items()
    ]
    report = "agreement with bfcl_eval ast_checker:\n" + "\n".join(lines)
    print(report)
    record_property("bfcl_crosscheck", report)
    unexplained = {k: v for k, v in disagreements.items() if k not in KNOWN_DISAGREEMENTS}
    assert not unexplained, report
    assert set(KNOWN_DISAGREEMENTS) <= set(disagreements), "a known disagreement no longer happens: drop it"
    assert sum(total.values()) > 20_000
