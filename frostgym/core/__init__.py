"""The ground floor: seeding, hashing, spaces, tasks, grades, reply tags and the env base class.

Import from the submodules (``frostgym.core.grade``, ``frostgym.core.env``, ...): this
package re-exports nothing, so graders can use ``core.grade`` without loading envs.
It imports nothing else from ``frostgym`` (``tests/test_layering.py`` holds it to that).
"""
