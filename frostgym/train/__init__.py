"""Training against the envs: ``vector`` (batched stepping and GRPO groups), ``curriculum``
(levels that move with the policy) and the trainer adapters (``trl``: GRPO datasets, reward
functions, and ``environment_factory`` for the multi-turn ids' tool loops). The public API
is the names below (imported on first use; the ``trl`` adapter's need the ``train`` extra)."""

from typing import TYPE_CHECKING

from frostgym.core.lazy import lazy_exports

if TYPE_CHECKING:
    from frostgym.train.curriculum import Curriculum, CurriculumConfig, CurriculumEnv, CurriculumSampler
    from frostgym.train.trl import (
        curriculum_dataset,
        env_dataset,
        environment_factory,
        reward_functions,
        reward_weights,
        sql_environment_factory,
    )
    from frostgym.train.vector import (
        FrozenAsyncVectorEnv,
        FrozenSyncVectorEnv,
        group_reset,
        group_seeds,
        make_vector_env,
    )

__all__ = [
    "Curriculum",
    "CurriculumConfig",
    "CurriculumEnv",
    "CurriculumSampler",
    "FrozenAsyncVectorEnv",
    "FrozenSyncVectorEnv",
    "curriculum_dataset",
    "env_dataset",
    "environment_factory",
    "group_reset",
    "group_seeds",
    "make_vector_env",
    "reward_functions",
    "reward_weights",
    "sql_environment_factory",
]
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "Curriculum": "frostgym.train.curriculum",
        "CurriculumConfig": "frostgym.train.curriculum",
        "CurriculumEnv": "frostgym.train.curriculum",
        "CurriculumSampler": "frostgym.train.curriculum",
        "FrozenAsyncVectorEnv": "frostgym.train.vector",
        "FrozenSyncVectorEnv": "frostgym.train.vector",
        "curriculum_dataset": "frostgym.train.trl",
        "env_dataset": "frostgym.train.trl",
        "environment_factory": "frostgym.train.trl",
        "group_reset": "frostgym.train.vector",
        "group_seeds": "frostgym.train.vector",
        "make_vector_env": "frostgym.train.vector",
        "reward_functions": "frostgym.train.trl",
        "reward_weights": "frostgym.train.trl",
        "sql_environment_factory": "frostgym.train.trl",
    },
)
