"""The ground floor: seeding, hashing, spaces, tasks, grades, reply tags, the env base class
and the statistics every interval is drawn with.

Import from the submodules (``frostgym.core.grade``, ``frostgym.core.env``, ...): this
package re-exports nothing, so graders can use ``core.grade`` without loading envs.
It imports nothing else from ``frostgym`` (``tests/test_layering.py`` holds it to that).
"""
