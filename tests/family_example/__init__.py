"""A fifth family, kept outside the package, built the way README's "Adding a family"
says: ``tasks.py`` (its task sources), ``env.py`` (its env), entries registered here, and
a lock file its env names (``lock_file``). ``tests/envs/test_adding_a_family.py`` locks it and
runs every contract check the shipped ids get."""

from __future__ import annotations

from frostgym.envs.registry import EnvEntry, register_envs

_ENV = "tests.family_example.env:DigitsEnv"
ENTRIES: tuple[EnvEntry, ...] = (
    EnvEntry("example/DigitSum-v0", "digits", _ENV, "sum of a number's digits", {"source": "digit_sum"}),
    EnvEntry("example/Roman-v0", "digits", _ENV, "Roman numerals 1 to 400, read as numbers", {"source": "roman"}),
)
register_envs(ENTRIES)
