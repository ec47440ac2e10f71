"""Token turns: each step of an episode as a trainer consumes it, read from the step's
``TokenTrace`` (never from its text).

``token_turns(record)`` gives one ``TokenTurn`` per step of an ``EpisodeRecord`` that holds
both prompt and completion ids; ``card_token_turns(directory)`` does it for every completed
episode of a card on disk, streamed. What each guarantees is in its docstring.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from frostgym.cards.card import CARD_FILE, load_card, read_card_json, stream_records
from frostgym.core.episode import EpisodeRecord, LogprobsOf
from frostgym.core.errors import CardCorruptError


@dataclass(frozen=True)
class TokenTurn:
    """One turn of one episode, in token ids.

    - ``prompt_ids``: exactly the ids the model was fed for this turn (no padding);
      ``completion_ids``: exactly the ids it generated (through its end-of-sequence token
      when it generated one). They are the agent's own, as recorded: never re-tokenised.
    - ``input_ids`` (``prompt_ids + completion_ids``) and ``mask``, aligned with it: 1 on
      each completion token (the policy's), 0 on each prompt token.
    - ``logprobs``: one per completion id, of the distribution ``logprobs_of`` names
      (``"sampling"``, ``"model"`` or ``"server"``: ``frostgym.core.episode.LogprobsOf``), an
      entry None where the server gave no number; None when the agent recorded none.
    - ``reward``: the step's own reward; ``episode_reward``: the episode's (the same on
      every turn of it); ``done``: the step ended the episode (terminated or truncated).
    - ``prefix_mismatch``: True when this prompt does not start with the previous turn's
      prompt and completion ids (the chat template rewrote an earlier turn, or the
      completion re-tokenised differently): a trainer that concatenates turns into one
      sequence must not do so across it. None on the first turn, and when the previous
      step lacks ids.
    """

    episode_id: str
    plan_id: str
    task_id: str
    turn: int
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float | None] | None
    logprobs_of: LogprobsOf | None
    reward: float
    episode_reward: float
    done: bool
    prefix_mismatch: bool | None

    @property
    def input_ids(self) -> list[int]:
        """The turn's whole sequence: its prompt, then its completion."""
        return [*self.prompt_ids, *self.completion_ids]

    @property
    def mask(self) -> list[int]:
        """The loss mask over ``input_ids``: 0 for the prompt, 1 for the completion."""
        return [0] * len(self.prompt_ids) + [1] * len(self.completion_ids)


def token_turns(record: EpisodeRecord) -> list[TokenTurn]:
    """The token turns of one completed episode, in step order.

    Guaranteed: one ``TokenTurn`` for each step whose token trace holds both prompt and
    completion ids, with those ids exactly as the agent recorded them, ``logprobs`` (when
    present) one per completion id, and ``prefix_mismatch`` as decoding the record checked
    it against the ids. A step without ids (an agent that records none, such as a scripted
    or replayed one, or a server that sent none or malformed ones) gives no turn, so
    ``len(token_turns(r)) < len(r.steps)`` says an episode is incomplete in tokens; an
    episode recorded before token traces existed gives ``[]``."""
    turns = []
    for step in record.steps:
        tokens = step.tokens
        if tokens is None or tokens.prompt_ids is None or tokens.completion_ids is None:
            continue
        turns.append(
            TokenTurn(
                episode_id=record.episode_id,
                plan_id=record.plan_id,
                task_id=record.task_id,
                turn=step.turn,
                prompt_ids=tokens.prompt_ids,
                completion_ids=tokens.completion_ids,
                logprobs=tokens.logprobs,
                logprobs_of=tokens.logprobs_of,
                reward=step.reward,
                episode_reward=record.reward,
                done=step.terminated or step.truncated,
                prefix_mismatch=tokens.prefix_mismatch,
            )
        )
    return turns


def card_token_turns(directory: str | Path) -> Iterator[list[TokenTurn]]:
    """The token turns of every completed episode of the card in ``directory``, one list per
    episode (``token_turns``), in the order ``episodes.jsonl`` holds them.

    Guaranteed: every record is decoded and checked as every card reader does it (types,
    bounds, each stored ``prefix_mismatch`` against its ids); a closed card is streamed and
    its files checked against their checksums in ``card.json``, a card still running (or
    killed) is read whole up to its last complete line. Dropped episodes (``drops.jsonl``)
    are not read: their trajectories are partial and unscored. An episode without token
    ids gives an empty list, so the lists line up with the card's episodes. Raises
    ``CardCorruptError`` for a missing, edited or unreadable card."""
    directory = Path(directory)
    if not (directory / CARD_FILE).exists():
        raise CardCorruptError(f"{directory} holds no card ({CARD_FILE} is missing)")
    card = read_card_json(directory)
    if "files" not in card:  # not closed: no checksums to stream against
        _, episodes, _ = load_card(directory)
        for record in episodes:
            yield token_turns(record)
        return
    plan_ids = {entry["plan_id"] for entry in card["plan"]["episodes"]}
    for _, outcome in stream_records(directory, card, plan_ids):
        if isinstance(outcome, EpisodeRecord):
            yield token_turns(outcome)
