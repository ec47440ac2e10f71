"""Replay and regrade: what a card's recorded actions do in fresh envs today.

Replay asserts that nothing changed: each recorded action, stepped through a fresh env
reset with the recorded seed and task, must give the recorded observations, tool
results, info and grades, byte for byte after JSON encoding. Regrade expects graders
to have changed: it plays the same actions into a new card and diffs the grades.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from frostgym.agents.replay import ReplayAgent
from frostgym.cards.card import load_card
from frostgym.cards.store import dumps_line, write_json_atomic
from frostgym.core.env import FrozenEnv
from frostgym.core.episode import EPISODE_INFO_KEYS, EpisodeRecord, ObservationDelta, split_step_info
from frostgym.core.errors import CardCorruptError
from frostgym.envs.registry import make_env
from frostgym.evaluate.run_to_card import execution_config, run_options, run_to_card
from frostgym.run.plan import PlannedEpisode
from frostgym.run.runner import EnvBackend, RunOptions


@dataclass(frozen=True)
class EpisodeReplay:
    plan_id: str
    env_id: str
    steps: int
    divergence: str | None  # the first difference, naming its step; None when identical
    #: Why the episode was not replayed (an action the card stored only as a prefix); None when it was.
    not_replayable: str | None = None


@dataclass(frozen=True)
class ReplayReport:
    directory: Path
    #: Why the files fail their checksums or structure; only ``replay_card(verify=False)``
    #: replays such a card.
    integrity_error: str | None
    episodes: list[EpisodeReplay]
    drops_not_replayed: int

    @property
    def ok(self) -> bool:
        return self.integrity_error is None and all(e.divergence is None for e in self.episodes)


def _json(value: Any) -> Any:
    """``value`` as the card stores it, so fresh and recorded data compare like for like."""
    return orjson.loads(dumps_line(value))


def first_difference(recorded: Any, replayed: Any, path: str = "") -> str | None:
    if isinstance(recorded, dict) and isinstance(replayed, dict):
        for key in sorted(set(recorded) | set(replayed)):
            if key not in recorded or key not in replayed:
                return f"{path}.{key}: {'missing from the card' if key not in recorded else 'not produced now'}"
            found = first_difference(recorded[key], replayed[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(recorded, list) and isinstance(replayed, list):
        if len(recorded) != len(replayed):
            return f"{path}: {len(recorded)} items recorded, {len(replayed)} now"
        for i, (a, b) in enumerate(zip(recorded, replayed, strict=True)):
            found = first_difference(a, b, f"{path}[{i}]")
            if found:
                return found
        return None
    if recorded != replayed or type(recorded) is not type(replayed):
        return f"{path or 'value'}: recorded {_short(recorded)}, now {_short(replayed)}"
    return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def replay_episode(env: FrozenEnv, episode: EpisodeRecord) -> str | None:
    """The first divergence of one recorded episode in ``env`` (reset with the recorded
    seed and task, then each recorded action), naming where; None when every observation,
    tool call and result, info field, reward and grade is what the card holds. Raises what
    ``env.reset`` raises; an exception from ``env.step`` is a divergence."""
    observation, info = env.reset(seed=episode.seed, options={"task_id": episode.task_id})
    start = {k: info[k] for k in EPISODE_INFO_KEYS}
    found = first_difference(_json({k: getattr(episode, k) for k in start}), _json(start), "reset")
    found = found or first_difference(_json(episode.observation), _json(observation), "reset.observation")
    if found:
        return found
    for number, step in enumerate(episode.steps):
        where = f"step {number}"
        try:
            after, reward, terminated, truncated, step_info = env.step(step.action)
        except Exception as error:
            return f"{where}: the env raised {type(error).__name__}: {error}"
        rest, calls, results, grade = split_step_info(step_info)
        if step.action_stored is not None and step.action_stored.get(
            "sanitized"
        ):  # the card holds the text as the env read it
            rest.setdefault("action_sanitized", True)
        replayed = {
            "grade": grade,
            "tool_calls": calls,
            "tool_results": results,
            "reward": float(reward),
            "terminated": terminated,
            "truncated": truncated,
            "info": rest,
            "observation": ObservationDelta.between(observation, after),
        }
        found = first_difference(_json({k: getattr(step, k) for k in replayed}), _json(replayed), where)
        if found:
            return _with_grader_change(found, step.grade, grade)
        observation = after
    return None


def _with_grader_change(found: str, recorded: Mapping[str, Any] | None, replayed: Mapping[str, Any] | None) -> str:
    """``found``, led by the grader's version change when the card's grade is of another
    version than today's: the divergence is then the versions', which ``frostgym regrade``
    shows episode by episode, not a broken replay."""
    if not recorded or not replayed or recorded.get("grader_version") == replayed.get("grader_version"):
        return found
    return (
        f"grader {replayed.get('grader')} is {replayed.get('grader_version')} here and "
        f"{recorded.get('grader_version')} on the card (CHANGELOG.md says what changed; frostgym regrade "
        f"applies it): {found}"
    )


def replay_card(directory: Path, *, verify: bool = True) -> ReplayReport:
    """Replay every completed episode of the card in ``directory`` in fresh envs (drops
    have no final grade to check); ``ok`` is False when any episode diverged. The files are
    checked against their checksums first: a card that fails them is refused with
    ``CardCorruptError`` before any episode is replayed, since an edited line can replay as
    it reads and would be called identical. With ``verify`` False such a card is replayed
    all the same (to find the edited episodes among the divergent ones), the failure in
    ``integrity_error`` and ``ok`` False. Raises ``CardCorruptError`` for a card that cannot
    be read at all (no ``card.json``, a line that is not a record), and what building an
    env raises."""
    if verify:
        card, episodes, drops = load_card(directory)
        integrity: str | None = None
    else:
        try:
            card, episodes, drops = load_card(directory)
        except CardCorruptError as error:
            card, episodes, drops = load_card(directory, verify=False)
            integrity = str(error)
        else:
            integrity = None
    identity = card["config"]["identity"]
    made_with = run_options(identity)
    envs: dict[str, FrozenEnv] = {}
    results = []
    try:
        for episode in episodes:
            env_id = episode.env_id
            if reason := unreplayable(episode):
                results.append(EpisodeReplay(episode.plan_id, env_id, len(episode.steps), None, reason))
                continue
            if env_id not in envs:
                envs[env_id] = make_env(env_id, identity["split"], made_with.kwargs_for(env_id))
            try:
                divergence = replay_episode(envs[env_id], episode)
            except Exception as error:  # a reset that raises is a divergence too
                divergence = f"reset: the env raised {type(error).__name__}: {error}"
            results.append(EpisodeReplay(episode.plan_id, env_id, len(episode.steps), divergence))
    finally:
        for env in envs.values():
            env.close()
    return ReplayReport(directory, integrity, results, len(drops))


def unreplayable(episode: EpisodeRecord) -> str | None:
    """Why the recorded actions of ``episode`` cannot be played again, or None: an action
    over ``STORED_ACTION_CHARS`` is kept only as a prefix with its length and sha256."""
    for step in episode.steps:
        if not step.action_is_whole and step.action_stored is not None:
            kept, whole = step.action_stored["prefix_chars"], step.action_stored["chars"]
            return f"step {step.turn}: the card keeps {kept:,} of its {whole:,} characters"
    return None


# -- regrade ---------------------------------------------------------------------------------
def replay_into(
    source: Path, out: Path, options: RunOptions | None = None, envs: EnvBackend | None = None
) -> tuple[dict[str, Any], list[EpisodeRecord], dict[str, Any]]:
    """Play the source card's recorded actions into a new card at ``out``: the same plan,
    seeds and execution options, no retries, through today's envs (or ``envs``, a backend
    that wraps them: a judge's), by a ``ReplayAgent``; the new card records where it came
    from (``regraded_from``). Episodes dropped in the source, or whose actions the card
    keeps only in part, are ``skipped`` drops. Returns the source's ``card.json`` and
    episodes, and the new card's ``card.json``. Raises ``CardCorruptError`` for a source
    that fails its checksums or holds a line that is not a record, and ``FileExistsError``
    for an ``out`` that is not empty."""
    card, episodes, drops = load_card(source)
    identity = card["config"]["identity"]
    options = options or RunOptions()
    options = run_options(
        identity,
        # a replay is deterministic: a second attempt would fail the same way
        {"batch_size": options.batch_size, "workers": options.workers, "retries": 0},
    )
    config = {
        **card["config"],
        "identity": {**identity, "agent": f"replay:{source}"},
        "execution": execution_config(options),
    }
    plan = [PlannedEpisode.from_dict(p) for p in card["plan"]["episodes"]]
    skip = {d.plan_id: f"dropped in {source} as {d.drop.drop_class}: {d.drop.error}" for d in drops}
    skip |= {e.plan_id: f"not replayable: {reason}" for e in episodes if (reason := unreplayable(e))}
    agent = ReplayAgent.from_card(source)
    regraded_from = {"path": str(source), "episodes_sha256": agent.sha256, "graders": card.get("graders", {})}
    new_card = run_to_card(
        out, agent, config, options, plan=plan, skip=skip, extra={"regraded_from": regraded_from}, envs=envs
    )
    return card, episodes, new_card


def regrade_card(source: Path, out: Path, options: RunOptions | None = None) -> dict[str, Any]:
    """Play the source card's actions through today's envs and graders into a new card at
    ``out`` (``replay_into``), then write and return ``out/regrade.json``: the grader
    versions before and after and every episode whose grade changed (``grade_diff``).
    Raises what ``replay_into`` raises."""
    card, episodes, new_card = replay_into(source, out, options)
    _, new_episodes, _ = load_card(out)
    diff = grade_diff(episodes, new_episodes)
    report = {
        "source": str(source),
        "graders_before": card.get("graders", {}),
        "graders_after": new_card["graders"],
        **diff,
    }
    write_json_atomic(out / "regrade.json", report)
    return report


def grade_diff(before: Sequence[EpisodeRecord], after: Sequence[EpisodeRecord]) -> dict[str, Any]:
    """Per-episode grade changes between two cards of the same plan (episodes completed in
    both, matched by plan id): how many were compared, changed and unchanged, and each
    change's score, label, components and grader version before and after."""
    old = {e.plan_id: e for e in before}
    changed = []
    for episode in after:
        previous = old.get(episode.plan_id)
        if previous is None:
            continue
        a: Mapping[str, Any] = previous.grade or {}
        b: Mapping[str, Any] = episode.grade or {}
        fields = ("score", "label", "components", "grader_version")
        if any(a.get(f) != b.get(f) for f in fields):
            changed.append(
                {
                    "plan_id": episode.plan_id,
                    "episode_id": episode.episode_id,
                    "before": {f: a.get(f) for f in fields},
                    "after": {f: b.get(f) for f in fields},
                }
            )
    compared = sum(1 for e in after if e.plan_id in old)
    return {"compared": compared, "changed": len(changed), "unchanged": compared - len(changed), "changes": changed}
