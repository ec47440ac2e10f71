"""``ReplayAgent``: plays the actions recorded in a rollout card, by episode id and turn.

Episode ids are a pure function of the env, the seed and the task, so re-running the
same plan meets the same ids. A request with no recorded action gets an errored reply
(a ``replay_miss`` drop), never a made-up action."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import orjson

from frostgym.agents.base import AgentReply, AgentRequest
from frostgym.core.episode import EpisodeRecord
from frostgym.core.messages import Action


class ReplayAgent:
    """Plays recorded actions again: the action for a request is the one recorded for its
    ``(episode_id, turn)``, so re-running a card's plan re-grades exactly what the agent
    said, with no model (deterministic by construction).

    ``actions`` maps ``(episode_id, turn)`` to the action; ``source`` and ``sha256`` name
    where they came from, for ``describe``. ``from_card(directory)`` reads the completed
    episodes of a rollout card (a step whose action was cut short is not kept); it raises
    ``OSError`` when ``episodes.jsonl`` cannot be read, and ``ValueError`` naming the first
    line that is not an episode record. ``from_records`` takes episodes already read.

    ``act`` returns one ``AgentReply`` per request, in order, and never raises: a request
    with no recorded action gets an errored reply that a runner files as a ``replay_miss``
    drop, never a made-up action.
    """

    name = "replay"

    def __init__(self, actions: dict[tuple[str, int], Action], source: str = "", sha256: str = "") -> None:
        self.actions = actions
        self.source = source
        self.sha256 = sha256

    @classmethod
    def from_card(cls, directory: str | Path) -> ReplayAgent:
        """The actions of every completed episode in the card at ``directory``."""
        path = Path(directory) / "episodes.jsonl"
        raw = path.read_bytes()
        episodes = []
        for number, line in enumerate(raw.splitlines(), start=1):
            try:
                episodes.append(EpisodeRecord.from_json(orjson.loads(line)))
            except ValueError as error:
                raise ValueError(f"{path} line {number}: {error}") from error
        return cls.from_records(episodes, str(directory), hashlib.sha256(raw).hexdigest())

    @classmethod
    def from_records(cls, episodes: Iterable[EpisodeRecord], source: str = "", sha256: str = "") -> ReplayAgent:
        """The actions of ``episodes``; ``source`` and ``sha256`` name where they came from."""
        actions: dict[tuple[str, int], Action] = {}
        for episode in episodes:
            for step in episode.steps:
                if step.action_is_whole:  # a prefix is not the action: its turn is a replay miss
                    actions[(episode.episode_id, step.turn)] = step.action
        return cls(actions, source, sha256)

    def act(self, requests: Sequence[AgentRequest]) -> list[AgentReply]:
        replies = []
        for r in requests:
            action = self.actions.get((r.episode_id, r.turn))
            if action is None:
                miss = f"replay miss: no recorded action for episode {r.episode_id} turn {r.turn}"
                replies.append(AgentReply.failed(miss, "replay_miss"))
            else:
                replies.append(AgentReply(action=action, finish_reason="replay"))
        return replies

    def describe(self) -> dict[str, Any]:
        return {"spec": f"replay:{self.source}", "episodes_sha256": self.sha256, "actions": len(self.actions)}
