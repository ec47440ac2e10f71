"""The table of registered env ids: the one place an id is bound to code and settings.

Entry points are strings, so ``import frostgym`` registers every id without importing
any family (reasoning-gym alone is slow to import).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import gymnasium

from frostgym.core.splits import Split, parse_splits  # standard library only: cheap to import

if TYPE_CHECKING:  # kept off ``import frostgym``'s path, which needs only the table
    from frostgym.core.env import FrozenEnv

NAMESPACE = "frostgym"


@dataclass(frozen=True)
class EnvEntry:
    """One registered id: its family, env class (``module:Class``), one-line summary, the
    keyword arguments the id fixes, and its task-source class (``module:Class``), which
    ``frostgym.envs.levels`` reads an id's levels from without making the env (empty: the
    entry does not say, and the env is made to find out)."""

    id: str
    family: str
    entry_point: str
    summary: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    task_source: str = ""


_MATH = "frostgym.envs.math:MathEnv"
ENTRIES: tuple[EnvEntry, ...] = (
    EnvEntry(
        "frostgym/Math-v0",
        "math",
        _MATH,
        "GSM-style word problems (reasoning-gym gsm_symbolic)",
        {"source": "gsm_symbolic"},
        task_source="frostgym.envs.math.gsm:GSMSymbolicSource",
    ),
    EnvEntry(
        "frostgym/Arithmetic-v0",
        "math",
        _MATH,
        "multi-step integer arithmetic",
        {"source": "arithmetic"},
        task_source="frostgym.envs.math.arithmetic:ArithmeticSource",
    ),
    EnvEntry(
        "frostgym/Fractions-v0",
        "math",
        _MATH,
        "fraction arithmetic, reduced answers",
        {"source": "fraction_arithmetic"},
        task_source="frostgym.envs.math.fraction_arithmetic:FractionArithmeticSource",
    ),
    EnvEntry(
        "frostgym/LinearEquations-v0",
        "math",
        _MATH,
        "linear equations, rational solutions",
        {"source": "linear_equations"},
        task_source="frostgym.envs.math.linear_equations:LinearEquationSource",
    ),
    EnvEntry(
        "frostgym/SQL-v0",
        "sql",
        "frostgym.envs.sql:SQLEnv",
        "text-to-SQL on Chinook and three vega-datasets databases, multi-turn with exploration",
        task_source="frostgym.envs.sql.tasks:SQLTaskSource",
    ),
    EnvEntry(
        "frostgym/Code-v0",
        "code",
        "frostgym.envs.code:CodeEnv",
        "HumanEval's 164 problems (split 'test'); hidden unit tests run in a sandbox",
        task_source="frostgym.envs.code.tasks:HumanEvalSource",
    ),
    EnvEntry(
        "frostgym/Tools-v0",
        "tools",
        "frostgym.envs.tools.single_turn:ToolsEnv",
        "BFCL v4 single-turn function calling (python/java/javascript, multiple, parallel, live, irrelevance)",
        task_source="frostgym.envs.tools.tasks:BFCLSource",
    ),
    EnvEntry(
        "frostgym/ToolsMultiTurn-v0",
        "tools",
        "frostgym.envs.tools.multi_turn:MultiTurnToolsEnv",
        "BFCL v4 multi-turn (base, miss_func, miss_param, long_context) on BFCL's stateful tool classes",
        task_source="frostgym.envs.tools.tasks:BFCLMultiTurnSource",
    ),
    EnvEntry(
        "frostgym/ToolsHTTP-v0",
        "tools",
        "frostgym.envs.tools.http:HTTPToolsEnv",
        "six REST APIs (22 endpoints) replayed from committed vcrpy cassettes, multi-step, final answer checked",
        task_source="frostgym.envs.tools.tasks:HTTPToolsSource",
    ),
    EnvEntry(
        "frostgym/CustomerService-v0",
        "customer_service",
        "frostgym.envs.customer:CustomerServiceEnv",
        "tau2-bench airline and retail: serve a customer (scripted or a cached LLM) under a policy with tools",
        task_source="frostgym.envs.customer.tasks:CustomerServiceSource",
    ),
)


def entry(env_id: str) -> EnvEntry:
    for e in ENTRIES:
        if e.id == env_id:
            return e
    known = ", ".join(e.id for e in ENTRIES)
    raise gymnasium.error.UnregisteredEnv(f"{env_id!r} is not a frostgym env; registered: {known}")


def register_envs(entries: Iterable[EnvEntry] = ENTRIES) -> None:
    """Register every id of ``entries`` (by default frostgym's own) with gymnasium,
    idempotently. A family kept outside frostgym passes its own entries."""
    for e in entries:
        if e.id not in gymnasium.registry:
            gymnasium.register(id=e.id, entry_point=e.entry_point, kwargs=dict(e.kwargs))


def env_class(env_id: str) -> type:
    """The class (or factory) ``gymnasium.make(env_id)`` calls, without making an env.
    Raises what ``gymnasium.spec`` raises for an unknown id."""
    from gymnasium.envs.registration import load_env_creator

    entry_point = gymnasium.spec(env_id).entry_point
    creator = load_env_creator(entry_point) if isinstance(entry_point, str) else entry_point
    return cast("type", creator)


def make_env(env_id: str, split: Split | str | None, env_kwargs: Mapping[str, Any]) -> FrozenEnv:
    """The env behind ``env_id`` on ``split`` (of several, comma-separated, the first: a
    runner picks each episode's task, and so its split, by task id; None: the env's own
    default), unwrapped from Gymnasium's wrappers (the runner, the plan and replays call
    the env's own methods). Raises what
    ``gymnasium.make`` raises for an unknown id, and ``ValueError`` naming the id for
    ``env_kwargs`` it does not take (``max_turns`` on a single-turn id, say)."""
    on_split: dict[str, Any] = {} if split is None else {"split": parse_splits(split)[0]}
    try:
        env = gymnasium.make(env_id, **on_split, **env_kwargs)
    except TypeError as error:  # the env's __init__ refused a keyword
        raise ValueError(f"{env_id} does not take these options {sorted(env_kwargs)}: {error}") from error
    return cast("FrozenEnv", env.unwrapped)
