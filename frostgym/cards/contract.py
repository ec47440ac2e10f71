"""The evaluation contract a card was played under: what bounded each episode.

Two cards of one plan are the same episodes only if the same contract bounded them: an env
that allowed 6 turns against one that allowed 3, a sandbox with half the memory, a model
cut at 256 new tokens instead of 512. ``card.json``'s ``contract`` records it once, when
the card is created (``describe_contract``):

- per env: ``max_turns``, each limit on the work of one call with the value it ran under
  (``FrozenEnv.contract_limits``: a sandbox's CPU seconds and memory, SQL's deadline and
  rows shown), and the tools it offers, read-only or writing (``FrozenEnv.tool_access``,
  decided by each family);
- per run (``agent``): the most new tokens a turn, the agent's context length when it
  knows it (an in-process model's ``max_position_embeddings``), the deadline of one
  request (the openai agent's), and a wall-time budget per episode (none: null);
- ``baseline_role``, when declared (``frostgym eval --baseline-role``): what the card
  stands for as a comparison's base.

A card written before frostgym recorded a contract has none; ``read_contract`` gives each
part ``UNKNOWN`` then (``max_turns`` excepted, which every card's ``envs`` holds), so a
reader says what it does not know instead of guessing. ``contract_differences`` names
every part two cards differ in, one line each: ``frostgym compare`` warns with them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Literal, cast, get_args

from frostgym.core.splits import Split
from frostgym.envs.registry import make_env

__all__ = [
    "AGENT_FIELDS",
    "BASELINE_ROLES",
    "UNKNOWN",
    "BaselineRole",
    "agent_contract",
    "baseline_role",
    "contract_differences",
    "contract_lines",
    "describe_contract",
    "read_contract",
]

#: What a part of the contract a card does not record reads as.
UNKNOWN: Final = "unknown"
#: What a card stands for as a comparison's base: the checkpoint before, the SFT model the
#: run started from, the model in production, or something else.
BaselineRole = Literal["previous", "sft", "production", "other"]
BASELINE_ROLES: Final[tuple[str, ...]] = get_args(BaselineRole)
#: The run's part, in the order it is shown; each null when the run has none (or, for
#: ``context_length``, when the agent does not know it).
AGENT_FIELDS: Final[tuple[str, ...]] = ("max_new_tokens", "context_length", "request_timeout_s", "episode_wall_s")
#: How each of ``AGENT_FIELDS`` reads when null.
_NULL_MEANS: Final[Mapping[str, str]] = {
    "max_new_tokens": UNKNOWN,
    "context_length": UNKNOWN,
    "request_timeout_s": "none",
    "episode_wall_s": "none",
}


def describe_contract(
    env_ids: Sequence[str],
    split: Split | str,
    kwargs_for: Callable[[str], Mapping[str, Any]],
    agent: object,
    sampling: Mapping[str, Any],
    role: str | None = None,
) -> dict[str, Any]:
    """A new card's ``contract``: each env made as the run makes it (``kwargs_for(env_id)``:
    ``RunOptions.kwargs_for``) and asked for its part (``FrozenEnv.contract``), the
    agent's part (``agent_contract``), and ``role`` when given (one of ``BASELINE_ROLES``:
    ``ValueError`` otherwise)."""
    envs: dict[str, Any] = {}
    for env_id in env_ids:
        env = make_env(env_id, split, kwargs_for(env_id))
        try:
            envs[env_id] = env.contract()
        finally:
            env.close()
    contract: dict[str, Any] = {"envs": envs, "agent": agent_contract(agent, sampling)}
    if role is not None:
        contract["baseline_role"] = baseline_role(role)
    return contract


def baseline_role(role: str) -> BaselineRole:
    """``role`` checked against ``BASELINE_ROLES`` (``ValueError`` naming them)."""
    if role in BASELINE_ROLES:
        return cast(BaselineRole, role)
    raise ValueError(f"baseline role must be one of {', '.join(BASELINE_ROLES)}, got {role!r}")


def agent_contract(agent: object, sampling: Mapping[str, Any]) -> dict[str, Any]:
    """The run's part of the contract: ``sampling``'s ``max_new_tokens``; the agent's
    ``context_length`` (an attribute: ``HFAgent`` reads its model's config), null when it
    has none; its per-request deadline (``request_timeout_s`` in its ``describe()``: the
    openai agent's), null for an agent that makes no requests; and ``episode_wall_s``, the
    wall time an episode may take, null: frostgym's runner bounds episodes by turns, not time."""
    described = getattr(agent, "describe", None)
    description = described() if callable(described) else {}
    return {
        "max_new_tokens": _positive(sampling.get("max_new_tokens"), int),
        "context_length": _positive(getattr(agent, "context_length", None), int),
        "request_timeout_s": _positive(description.get("request_timeout_s"), float),
        "episode_wall_s": None,
    }


def _positive(value: object, kind: type[int] | type[float]) -> Any:
    """``value`` when it is a positive number (an int for ``int``), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        return None
    return value if kind is float or isinstance(value, int) else None


def read_contract(card: Mapping[str, Any]) -> dict[str, Any]:
    """``card``'s contract with every part present: what the card records, and
    ``UNKNOWN`` for each part it does not (a card written before contracts). Each env of
    the card's identity has ``max_turns`` (from its ``envs`` provenance when the contract
    is missing), ``limits`` and ``tools``; ``agent`` has each of ``AGENT_FIELDS``;
    ``baseline_role`` is the declared role, None when the card declares none, ``UNKNOWN``
    on a card without a contract."""
    recorded = card.get("contract")
    contract: Mapping[str, Any] = recorded if isinstance(recorded, Mapping) else {}
    env_ids = list(card.get("config", {}).get("identity", {}).get("env_ids", []))
    envs_recorded: Mapping[str, Any] = contract.get("envs", {})
    provenance: Mapping[str, Any] = card.get("envs", {})
    envs: dict[str, Any] = {}
    for env_id in [*env_ids, *(e for e in envs_recorded if e not in env_ids)]:
        part: Mapping[str, Any] = envs_recorded.get(env_id, {})
        max_turns = part.get("max_turns", provenance.get(env_id, {}).get("max_turns", UNKNOWN))
        envs[env_id] = {
            "max_turns": max_turns,
            "limits": part.get("limits", UNKNOWN),
            "tools": part.get("tools", UNKNOWN),
        }
    agent_recorded: Mapping[str, Any] | None = contract.get("agent")
    agent = {
        name: UNKNOWN if agent_recorded is None or name not in agent_recorded else agent_recorded[name]
        for name in AGENT_FIELDS
    }
    if agent_recorded is None:  # every card's identity holds its sampling
        sampling = card.get("config", {}).get("identity", {}).get("sampling", {})
        agent["max_new_tokens"] = _positive(sampling.get("max_new_tokens"), int) or UNKNOWN
    role = contract.get("baseline_role") if recorded is not None else UNKNOWN
    return {"recorded": recorded is not None, "envs": envs, "agent": agent, "baseline_role": role}


def contract_lines(card: Mapping[str, Any]) -> list[str]:
    """The contract in a few lines: the run's part, then one line per env (``frostgym
    summary``)."""
    contract = read_contract(card)
    agent = contract["agent"]
    run = ", ".join(f"{name} {_agent_value(name, agent[name])}" for name in AGENT_FIELDS)
    lines = [f"run: {run}"]
    if not contract["recorded"]:
        lines[0] += f" (the card was written before frostgym recorded its contract: limits and tools {UNKNOWN})"
    role = contract["baseline_role"]
    if role is not None:
        lines.append(f"baseline role: {role}")
    for env_id, part in contract["envs"].items():
        limits = part["limits"]
        shown = limits if not isinstance(limits, Mapping) else (_mapping(limits) or "none")
        lines.append(f"{env_id}: max_turns {part['max_turns']}; limits {shown}; tools {_tools(part['tools'])}")
    return lines


def contract_differences(base: Mapping[str, Any], cand: Mapping[str, Any]) -> list[str]:
    """Each part of the contract in which two cards differ, one line each ("max_turns of
    frostgym/SQL-v0 differs: 6 vs 3"), base's value first; a part only one card records
    reads ``unknown`` on the other, and a card without a contract is said once."""
    b, c = read_contract(base), read_contract(cand)
    unrecorded = [side for side, contract in (("base", b), ("cand", c)) if not contract["recorded"]]
    lines = []
    if unrecorded:
        which = "neither card records a" if len(unrecorded) == 2 else f"the {unrecorded[0]} card records no"
        lines.append(
            f"{which} contract (written before frostgym recorded one): limits, tools and agent budgets are "
            f"{UNKNOWN}, so whether both were played under the same contract cannot be checked"
        )
    for env_id in [*b["envs"], *(e for e in c["envs"] if e not in b["envs"])]:
        if env_id not in b["envs"] or env_id not in c["envs"]:
            continue  # a different plan: compare says so
        base_part, cand_part = b["envs"][env_id], c["envs"][env_id]
        if base_part["max_turns"] != cand_part["max_turns"]:
            lines.append(f"max_turns of {env_id} differs: {base_part['max_turns']} vs {cand_part['max_turns']}")
        if b["recorded"] and c["recorded"]:
            lines += _limit_differences(env_id, base_part["limits"], cand_part["limits"])
            if base_part["tools"] != cand_part["tools"]:
                lines.append(f"tools of {env_id} differ: {_tools(base_part['tools'])} vs {_tools(cand_part['tools'])}")
    for name in AGENT_FIELDS:
        base_value, cand_value = b["agent"][name], c["agent"][name]
        if UNKNOWN not in (base_value, cand_value) and base_value != cand_value:
            lines.append(f"{name} differs: {_agent_value(name, base_value)} vs {_agent_value(name, cand_value)}")
    return lines


def _limit_differences(env_id: str, base: object, cand: object) -> list[str]:
    if not (isinstance(base, Mapping) and isinstance(cand, Mapping)):
        return [] if base == cand else [f"limits of {env_id} differ: {_shown(base)} vs {_shown(cand)}"]
    return [
        f"{name} of {env_id} differs: {_shown(base.get(name, UNKNOWN))} vs {_shown(cand.get(name, UNKNOWN))}"
        for name in sorted(base.keys() | cand.keys())
        if base.get(name, UNKNOWN) != cand.get(name, UNKNOWN)
    ]


def _agent_value(name: str, value: object) -> str:
    return _NULL_MEANS[name] if value is None else _shown(value)


def _shown(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return f"{value:g}"
    if isinstance(value, Mapping):
        return _mapping(value)
    return str(value)


def _mapping(values: Mapping[str, Any]) -> str:
    return ", ".join(f"{name} {_shown(value)}" for name, value in sorted(values.items()))


def _tools(tools: object) -> str:
    """``read-only a, b; writing c`` (or what the card says instead)."""
    if not isinstance(tools, Mapping):
        return str(tools)
    if tools.get("described_only"):
        return "each task's own, described only (never run)"
    parts = [
        f"{label} {', '.join(tools.get(key, [])) or 'none'}"
        for key, label in (("read_only", "read-only"), ("writing", "writing"))
        if tools.get(key)
    ]
    return "; ".join(parts) or "none"
