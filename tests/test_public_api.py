"""The public API, listed: what ``frostgym``, ``frostgym.cards``, ``frostgym.compare``,
``frostgym.integrations`` and ``frostgym.train`` export. A change to it fails here, so it is
made on purpose (and noted in CHANGELOG.md). Every name resolves, and ``import frostgym``
stays cheap: it registers the ids and imports none of the modules behind the names until
one is used."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

PUBLIC = {
    "frostgym": [
        "ENTRIES",
        "FrostgymError",
        "FrozenEnv",
        "Grade",
        "Reply",
        "RunOptions",
        "__version__",
        "card_config",
        "compare_cards",
        "evaluate",
        "load_card",
        "make_agent",
        "make_vector_env",
        "register_envs",
        "regrade_card",
        "replay_card",
        "run_to_card",
    ],
    "frostgym.cards": ["CardWriter", "SCHEMAS", "load_card", "read_card_json", "summarize_card"],
    "frostgym.compare": [
        "Comparison",
        "Gate",
        "GateResult",
        "compare_cards",
        "judge",
        "parse_gates",
        "read_gates",
        "trend",
    ],
    "frostgym.integrations": ["TokenTurn", "card_token_turns", "token_turns"],
    "frostgym.train": [
        "Curriculum",
        "CurriculumConfig",
        "CurriculumEnv",
        "CurriculumSampler",
        "FrozenAsyncVectorEnv",
        "FrozenSyncVectorEnv",
        "curriculum_dataset",
        "env_dataset",
        "environment_factory",
        "group_reset",
        "group_seeds",
        "make_vector_env",
        "reward_functions",
        "reward_weights",
        "sql_environment_factory",
    ],
}


@pytest.mark.parametrize("package", sorted(PUBLIC))
def test_the_public_api_is_what_is_listed_and_every_name_resolves(package: str) -> None:
    module = importlib.import_module(package)
    assert sorted(module.__all__) == PUBLIC[package]
    for name in module.__all__:
        if package == "frostgym.train" and name in ("env_dataset", "reward_functions", "reward_weights"):
            pytest.importorskip("trl", reason="the trl adapter needs the train extra")
        assert getattr(module, name) is not None, name
        assert name in dir(module)
    with pytest.raises(AttributeError):
        module.no_such_name  # noqa: B018


def test_import_frostgym_imports_none_of_the_modules_behind_its_names() -> None:
    probe = (
        "import sys, frostgym; "
        "heavy = [m for m in ('frostgym.run.runner', 'frostgym.cards.card', 'frostgym.evaluate.run_to_card', "
        "'frostgym.compare.compare', 'frostgym.agents.spec', 'frostgym.core.env') if m in sys.modules]; "
        "print(','.join(heavy))"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "", f"import frostgym loaded {loaded}"
