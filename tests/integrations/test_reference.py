"""The contract's reference agrees with itself: the oracle scores 1 on every case, junk
is graded, and ``TrainingEpisode`` (what every adapter drives) sees what ``gym.make`` does."""

from __future__ import annotations

import pytest

from frostgym.train.session import TaskRow, TrainingEpisode, messages_text
from tests.integrations.reference import Played, cases, junk_actions, oracle_actions, reference_play

CASES = cases()


def session_play(row: TaskRow, actions: list[object]) -> Played:
    episode = TrainingEpisode(row.env_id, row.split)
    try:
        first = messages_text(episode.start(row.task_id, row.episode_seed))
        added = []
        for action in actions:
            result = episode.step(action)  # type: ignore[arg-type]
            added.append(messages_text(result.messages))
            if result.done:
                break
        return Played.of(first, added, episode.grade)
    finally:
        episode.close()


@pytest.mark.parametrize("row", CASES, ids=lambda r: r.task_id)
def test_training_episode_is_the_gym_episode(row: TaskRow) -> None:
    oracle = oracle_actions(row)
    played = reference_play(row, oracle)
    assert played.score == 1.0
    assert session_play(row, oracle) == played  # type: ignore[arg-type]
    junk = junk_actions(row)
    junk_played = reference_play(row, junk)
    assert junk_played.score is not None  # (an irrelevance task's right answer is no call)
    assert session_play(row, junk) == junk_played  # type: ignore[arg-type]
