"""The adaptive curriculum: moves between levels to keep the running pass rate in its band,
logs each decision, and is a pure function of its config, seed and history."""

from __future__ import annotations

import pytest

from frostgym.curriculum import Curriculum, CurriculumConfig


def test_config_refuses_what_cannot_be_a_curriculum() -> None:
    for bad in (
        {"levels": (), "start": 1},
        {"levels": (1, 1), "start": 1},
        {"levels": (1, 2), "start": 3},
        {"levels": (1, 2), "start": 1, "band": (0.7, 0.3)},
        {"levels": (1, 2), "start": 1, "band": (-0.1, 0.5)},
        {"levels": (1, 2), "start": 1, "window": 0},
    ):
        with pytest.raises(ValueError, match=r"levels|start|band|window"):
            CurriculumConfig(**bad)  # type: ignore[arg-type]


def test_moves_up_when_too_easy_and_down_when_too_hard_once_the_window_is_full() -> None:
    curriculum = Curriculum(CurriculumConfig(levels=(1, 2, 3), start=2, band=(0.3, 0.7), window=4))
    assert curriculum.record([True, True, True]) is None  # window not full yet
    assert curriculum.pass_rate is None
    assert curriculum.record([True]) == "up"
    assert curriculum.level == 3 and curriculum.pass_rate is None  # a new level starts a new window
    assert curriculum.record([True] * 8) is None  # no level above 3
    assert curriculum.level == 3
    assert curriculum.record([False] * 4) == "down"  # the last 4 at level 3 all failed
    assert curriculum.level == 2
    curriculum = Curriculum(CurriculumConfig(levels=(1, 2, 3), start=2, window=4))
    assert curriculum.record([False, False, True, False]) == "down"
    assert curriculum.level == 1
    assert curriculum.record([False] * 4) is None  # no level below 1
    assert curriculum.level == 1


def test_stays_inside_the_band() -> None:
    curriculum = Curriculum(CurriculumConfig(levels=(1, 2, 3), start=2, band=(0.3, 0.7), window=10))
    for _ in range(20):
        assert curriculum.record([True, False]) is None
    assert curriculum.level == 2 and curriculum.pass_rate == 0.5


def test_outcomes_of_a_level_left_behind_are_logged_not_counted() -> None:
    curriculum = Curriculum(CurriculumConfig(levels=(1, 2), start=1, window=2))
    assert curriculum.record([True, True]) == "up"
    assert curriculum.record([True, True], level=1) is None  # drawn before the move
    assert curriculum.level == 2 and curriculum.pass_rate is None
    log = curriculum.log_records()
    assert [(s["level"], s["passed"], s["move"]) for s in log] == [(1, 2, "up"), (1, 2, None)]
    assert [s["step"] for s in log] == [0, 1]


def test_the_level_is_a_pure_function_of_the_history() -> None:
    history = [[i % 3 == 0, i % 2 == 0, True] for i in range(40)]

    def levels() -> list[int]:
        curriculum = Curriculum(CurriculumConfig(levels=(1, 2, 3, 4), start=1, window=6))
        seen = []
        for batch in history:
            curriculum.record(batch)
            seen.append(curriculum.level)
        return seen

    assert levels() == levels()
