"""The shared contract: seeding, hashing, spaces, tasks, grades and the env base class.

Import from the submodules (``frostgym.core.grade``, ``frostgym.core.env``, ...): this
package re-exports nothing, so graders can use ``core.grade`` without loading envs.
"""
