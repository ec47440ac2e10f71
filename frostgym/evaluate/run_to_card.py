"""Run a plan into a card: create (or resume) the card, play what is left, close it.

The plan is generated as the card writes it to ``plan.json`` (``frostgym.run.plan.iter_plan``)
and played from there (``CardWriter.plan``), so a run holds none of it however long it is.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from frostgym.agents.base import Agent
from frostgym.cards.card import CardWriter
from frostgym.cards.contract import describe_contract
from frostgym.cards.provenance import describe_envs, git_info, host_info, package_versions
from frostgym.cards.views import default_ks
from frostgym.evaluate.exclusions import excluded_tasks
from frostgym.run.plan import PlannedEpisode, iter_plan
from frostgym.run.runner import EnvBackend, Outcome, RunOptions, run_plan


def card_config(
    *,
    env_ids: Sequence[str],
    agent_spec: str,
    sampling: Mapping[str, Any],
    episodes: int | None,
    samples: int,
    seed: int,
    options: RunOptions,
    ks: Sequence[int] = (),
    excluded: Mapping[str, Any] | None = None,
    twins: bool = False,
    trained_on_private: bool = False,
) -> dict[str, Any]:
    """A card's ``config``: ``identity``, what defines the run (a resume must match it:
    envs, split, episodes, samples, seed, env kwargs, the agent spec and its sampling);
    ``execution``, what may change between sessions without changing any episode
    (``execution_config``); and ``ks``, the k of every pass@k-style view (``default_ks``
    of ``samples``, plus ``ks``). Raises ``ValueError`` for ``samples`` below 1.

    ``env_options`` (each env's own arguments) is in the identity only when there are some,
    so a card made without them reads and resumes as cards did before they existed; so is
    ``excluded``, the tasks the plan leaves out (``frostgym.evaluate.exclusions.identity_record``),
    and ``twins`` (each task is played with its twin, ``make_plan``), and
    ``trained_on_private`` (the agent's model was trained on the private split, as its
    trainer declares: frostgym cannot tell; ``frostgym summary`` and ``compare`` warn),
    each only when true."""
    identity: dict[str, Any] = {
        "env_ids": list(env_ids),
        "split": options.split,
        "episodes": episodes,
        "samples": samples,
        "seed": seed,
        "env_kwargs": dict(options.env_kwargs),
    }
    if options.env_options:
        identity["env_options"] = {env_id: dict(kwargs) for env_id, kwargs in options.env_options.items()}
    if excluded is not None:
        identity["excluded"] = dict(excluded)
    if twins:
        identity["twins"] = True
    if trained_on_private:
        identity["trained_on_private"] = True
    return {
        "identity": {**identity, "agent": agent_spec, "sampling": dict(sampling)},
        "execution": execution_config(options),
        "ks": sorted(set(default_ks(samples)) | set(ks)),
    }


def run_options(identity: Mapping[str, Any], execution: Mapping[str, Any] | None = None) -> RunOptions:
    """The ``RunOptions`` a card's ``identity`` (and ``execution``, else the defaults) says
    its envs are made with: the one reading of ``env_kwargs`` and ``env_options``."""
    return RunOptions(
        split=identity["split"],
        env_kwargs=identity["env_kwargs"],
        env_options=identity.get("env_options", {}),
        **(dict(execution) if execution is not None else {}),
    )


def execution_config(options: RunOptions) -> dict[str, Any]:
    """The options that may change between sessions of one card without changing an episode."""
    return {
        "batch_size": options.batch_size,
        "workers": options.workers,
        "retries": options.retries,
        "max_drops": options.max_drops,
    }


def run_to_card(
    out: Path,
    agent: Agent,
    config: dict[str, Any],
    options: RunOptions,
    *,
    resume: bool = False,
    plan: Iterable[PlannedEpisode] | None = None,
    skip: Mapping[str, str] | None = None,
    extra: Mapping[str, Any] | None = None,
    on_plan: Callable[[int, int], None] | None = None,
    on_outcome: Callable[[Outcome], None] | None = None,
    envs: EnvBackend | None = None,
    baseline_role: str | None = None,
) -> dict[str, Any]:
    """Play ``config``'s plan (``card_config``; or ``plan``, when given: it is gone through
    once, as the card writes it) with ``agent`` into the card at ``out``, and return the
    closed card's ``card.json``.

    A new card needs an empty or missing ``out`` (``FileExistsError`` otherwise); with
    ``resume`` the card there is finished instead: its identity and plan must match
    (``CardMismatchError``), and its files what it recorded (``CardCorruptError``). ``skip``
    maps plan ids to a reason recorded as a ``skipped`` drop; ``extra`` is added to the
    card's provenance; ``on_plan(total, already_done)`` is called once the card is on disk,
    before the first episode, and ``on_outcome`` after each; ``envs`` is where the envs
    live (this process by default; ``RayEnvs`` for a Ray cluster): the card does not
    depend on it. A new card records the contract it is played under
    (``frostgym.cards.contract.describe_contract``), with ``baseline_role`` when given (one
    of ``BASELINE_ROLES``: ``ValueError`` otherwise, before any file).

    Whatever stops the run (Ctrl-C, a full disk, a dead backend) is raised after the card
    was closed as ``interrupted``, resumable with the same call and ``resume=True``; when
    even closing failed, that is noted on the error."""
    identity = config["identity"]
    made_with = run_options(identity)
    if plan is None:
        plan = iter_plan(
            identity["env_ids"],
            split=identity["split"],
            episodes=identity["episodes"],
            samples=identity["samples"],
            seed=identity["seed"],
            env_kwargs=made_with.env_kwargs,
            env_options=made_with.env_options,
            exclude=excluded_tasks(identity),
            twins=identity.get("twins", False),
        )
    if resume:
        writer = CardWriter.resume(out, config=config, plan=plan)
    else:
        envs_info, distributions = describe_envs(identity["env_ids"], identity["split"], made_with.kwargs_for)
        provenance = {
            "agent": agent.describe(),
            "envs": envs_info,
            "packages": package_versions(distributions),
            "git": git_info(),
            "host": host_info(),
            "contract": describe_contract(
                identity["env_ids"], identity["split"], made_with.kwargs_for, agent, identity["sampling"], baseline_role
            ),
            **(extra or {}),
        }
        writer = CardWriter.create(out, config=config, plan=plan, provenance=provenance)
    remaining = writer.plan if not writer.done else _NotIn(writer.plan, writer.done)
    if on_plan is not None:
        writer.wait_until_in_place()  # what it is told of is on disk
        on_plan(len(writer.plan), len(writer.done))  # a resume checked that every id done is planned
    try:
        run_plan(remaining, agent, writer, options, skip=skip, on_outcome=on_outcome, envs=envs)
    except BaseException as error:  # Ctrl-C, a full disk, a dead backend: the card stays resumable
        try:
            writer.close("interrupted", agent.describe())
        except Exception as closing:  # e.g. the disk is still full: report the cause, not this
            error.add_note(f"the card in {out} could not be closed either ({type(closing).__name__}: {closing})")
        raise
    return writer.close("complete", agent.describe())


class _NotIn:
    """The entries of ``plan`` whose plan ids are not in ``done``, each time it is iterated
    (``run_plan`` goes through its plan twice when it has a skip map)."""

    def __init__(self, plan: Iterable[PlannedEpisode], done: Collection[str]) -> None:
        self._plan = plan
        self._done = done

    def __iter__(self) -> Iterator[PlannedEpisode]:
        return (p for p in self._plan if p.plan_id not in self._done)
