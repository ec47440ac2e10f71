"""The headline of a set of cards: per agent, family, env and level, pass@1 with its 95%
interval beside the oracle's ceiling, and the most common failure labels. It is what a
person reads first: the screen ``frostgym headline`` prints (the last step of ``make
eval``) and the first section of the report.

Why its own module, under the report: the numbers are the report's bars
(``frostgym.report.estimates.pass_at_1``: the card's own estimator, the bootstrap clustered
by task, seeded by the slice), so the console and the page give the same figures, read
from cards the same way (``read_card_facts``: complete cards that match their manifests).

Why these keys: a card records its env ids, each env's own options (``level``) and each
env's family (``envs``), so the headline needs no other source; an env played without a
``level`` is at its source's default level, said as such ("4 (default)", or "all" where the
default serves every level together). A card of the ``oracle`` agent is a ceiling, not a
row: an env's ceiling is the oracle's pass@1 on the same env at the same level, else at
another level (said).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from frostgym.compare.reading import CardFacts
from frostgym.report.estimates import SliceEstimate, pass_at_1

#: The agent spec whose cards are ceilings.
CEILING_AGENT = "oracle"
#: Failure labels named per row, most common first.
FAILURES_SHOWN = 3


@dataclass(frozen=True)
class HeadlineRow:
    """One env at one level, played by one agent (over one or more of its cards)."""

    #: The agent's name (``agent_name``) and spec, as the card's identity has it.
    agent: str
    spec: str
    #: The card the row comes from: its label and directory.
    card: str
    directory: Path
    family: str
    env: str
    #: The level as a person reads it: "1", "4 (default)", "all", or "" for an env without levels.
    level: str
    #: Episodes recorded (drops included: errors count as failures).
    episodes: int
    estimate: SliceEstimate
    #: The oracle's pass@1 on this env (None: no oracle card plays it), the oracle card's
    #: label, and its level when that is not this row's.
    ceiling: SliceEstimate | None = None
    ceiling_card: str | None = None
    ceiling_level: str | None = None
    #: The most common reasons episodes did not pass: grade labels, "drop: CLASS" for drops.
    failures: tuple[tuple[str, int], ...] = ()

    @property
    def ceiling_note(self) -> str:
        """`` (at level 4)`` or `` (all levels)`` where the ceiling is at another level, else ""."""
        if self.ceiling_level is None:
            return ""
        return " (all levels)" if self.ceiling_level in ("", "all") else f" (at level {self.ceiling_level})"

    @property
    def category(self) -> str:
        """The env and level in a chart's words: ``Arithmetic-v0 (level 1)``."""
        return category(self.env, self.level)


@dataclass(frozen=True)
class Headline:
    rows: tuple[HeadlineRow, ...]
    #: The labels of the oracle cards (the ceilings), and of every other card.
    ceiling_cards: tuple[str, ...]
    model_cards: tuple[str, ...]
    #: Per agent (``agents``' order), over all its rows: the most common failure labels.
    failures: Mapping[str, tuple[tuple[str, int], ...]]

    @property
    def agents(self) -> list[str]:
        """The agents of the rows, in the order they first appear."""
        return list(dict.fromkeys(row.agent for row in self.rows))


def category(env: str, level: str) -> str:
    short = env.removeprefix("frostgym/")
    if not level:
        return short
    return f"{short} ({'all levels' if level == 'all' else f'level {_bare_level(level)}'})"


def agent_name(card: Mapping[str, Any]) -> str:
    """What a card's agent is called: the model it names (its ``describe``'s ``source``,
    else its model path's last part), else its spec."""
    described = card.get("agent") or {}
    source = described.get("source") or {}
    if isinstance(source, Mapping) and source.get("model"):
        return str(source["model"])
    spec = str(card.get("config", {}).get("identity", {}).get("agent") or described.get("spec") or "agent")
    model = described.get("model")
    if spec.startswith("hf:") and isinstance(model, str) and model:
        return Path(model).name or model
    if spec.startswith("openai:") and isinstance(model, str) and model:
        return model
    return spec


def level_of(card: Mapping[str, Any], env: str) -> str:
    """The level ``env`` was played at in ``card`` (see the module docstring)."""
    options = card.get("config", {}).get("identity", {}).get("env_options", {}).get(env) or {}
    if "level" in options:
        return str(options["level"])
    import gymnasium

    from frostgym.envs.levels import env_levels, task_source_class

    try:
        levels = env_levels(env)
        default = task_source_class(env).default_level
    except (gymnasium.error.Error, KeyError, ValueError):  # an env this install does not register
        return "default"
    if not levels:
        return ""
    return "all" if default is None else f"{default} (default)"


def _bare_level(level: str) -> str:
    return level.removesuffix(" (default)")


def build_headline(
    cards: Sequence[tuple[str, CardFacts]], estimates: Sequence[Sequence[SliceEstimate]] | None = None
) -> Headline:
    """The headline of ``cards`` (label, facts), in the cards' order and each card's env
    order. Oracle cards are ceilings (``CEILING_AGENT``), unless every card is one: then
    they are the rows. ``estimates``, one list per card, are the cards' ``pass_at_1`` when
    the caller has them already (the report does); else they are computed."""
    per_card = [
        {e.key: e for e in (pass_at_1(facts.facts) if estimates is None else estimates[i]) if e.kind == "env"}
        for i, (_, facts) in enumerate(cards)
    ]
    specs = [str(facts.card.get("config", {}).get("identity", {}).get("agent", "")) for _, facts in cards]
    ceiling_at = [i for i, spec in enumerate(specs) if spec == CEILING_AGENT]
    if len(ceiling_at) == len(cards):
        ceiling_at = []
    ceilings: dict[tuple[str, str], tuple[SliceEstimate, str]] = {}
    by_env: dict[str, tuple[SliceEstimate, str, str]] = {}
    for i in ceiling_at:
        label, facts = cards[i]
        for env, estimate in per_card[i].items():
            level = _bare_level(level_of(facts.card, env))
            ceilings.setdefault((env, level), (estimate, label))
            by_env.setdefault(env, (estimate, label, level))
    rows = []
    for i, (label, facts) in enumerate(cards):
        if i in ceiling_at:
            continue
        found = per_card[i]
        envs = list(facts.card.get("config", {}).get("identity", {}).get("env_ids", [])) or sorted(found)
        env_rows = np.array(facts.facts.env_of_task(), dtype=object)[facts.facts.task]
        for env in envs:
            if env not in found:
                continue
            level = level_of(facts.card, env)
            ceiling: tuple[SliceEstimate, str] | None = ceilings.get((env, _bare_level(level)))
            other_level = None
            if ceiling is None and env in by_env:
                estimate, ceiling_label, other_level = by_env[env]
                ceiling = (estimate, ceiling_label)
            mask = env_rows == env
            rows.append(
                HeadlineRow(
                    agent=agent_name(facts.card),
                    spec=specs[i],
                    card=label,
                    directory=facts.directory,
                    family=str((facts.card.get("envs", {}).get(env) or {}).get("family") or env.split("/")[0]),
                    env=env,
                    level=level,
                    episodes=int(mask.sum()),
                    estimate=found[env],
                    ceiling=None if ceiling is None else ceiling[0],
                    ceiling_card=None if ceiling is None else ceiling[1],
                    ceiling_level=other_level or None,
                    failures=_top(_failures(facts, mask), FAILURES_SHOWN),
                )
            )
    totals: dict[str, Counter[str]] = {}
    for i, (_, facts) in enumerate(cards):
        if i not in ceiling_at:
            totals.setdefault(agent_name(facts.card), Counter()).update(
                _failures(facts, np.ones(len(facts.facts), dtype=bool))
            )
    return Headline(
        rows=tuple(rows),
        ceiling_cards=tuple(cards[i][0] for i in ceiling_at),
        model_cards=tuple(label for i, (label, _) in enumerate(cards) if i not in ceiling_at),
        failures={agent: _top(total, FAILURES_SHOWN + 2) for agent, total in totals.items()},
    )


def _top(counts: Counter[str], n: int) -> tuple[tuple[str, int], ...]:
    """The ``n`` most common, ties by name: the same order on every machine."""
    return tuple(sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:n])


def _failures(facts: CardFacts, rows: np.ndarray[Any, np.dtype[np.bool_]]) -> Counter[str]:
    """Why the chosen rows did not pass: the grade's label ("failed (no label)" without
    one), "drop: CLASS" for a drop; passed episodes are not counted."""
    counts: Counter[str] = Counter()
    data = facts.facts
    for row in np.flatnonzero(rows & ~data.passed).tolist():
        drop = int(data.drop[row])
        label = data.names[int(data.label[row])] or "failed (no label)"
        counts[f"drop: {data.names[drop]}" if drop else str(label)] += 1
    return counts
