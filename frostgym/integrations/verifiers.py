"""Train and evaluate on frostgym envs with verifiers (``verifiers==0.4.0``, its ``v1`` stack).

What: ``load_environment(env_id, ...)`` returns a real ``verifiers.v1.Env`` whose taskset is
the plan's tasks (``task_rows``: the task ids and seeds of a ``frostgym eval`` plan), whose
episodes step the frozen env, and whose scoring is frostgym's grade. This module is also a
verifiers plugin: its ``__all__`` exports the ``Taskset``, ``Env`` and ``Harness`` that
verifiers' loaders resolve by the taskset id ``frostgym`` (``PLUGIN_ID``; what ``vf-eval``,
through ``vf_eval``, and prime-rl are handed as ``--env.taskset.id``).

Why this shape: verifiers 0.4.0 runs every model call through its interception server and
drives multi-turn exchanges from the env's ``run()`` (``agents.player.interaction(task)``),
the caller being the run's user, as its bundled TextArena and OpenEnv envs do. Here the
frozen env is that user: each assistant reply is stepped through one
``frostgym.train.session.TrainingEpisode`` (held by the episode's ``run()`` for the whole
episode, then reused by a later one: an env is made per concurrent episode), and what the
step added (tool results, SQL results, feedback, the next user turn) is the next turn; the
episode's end ends the exchange. The harness (``FrostgymHarness``) is an in-process chat
loop, one model call per segment through the interception endpoint, offering the env's
tools (OpenAI function schemas) on every call, so no program is installed in a sandbox and
the trace records exactly the calls the model answered.

Scoring (the rubric): the task's ``@vf.reward`` ``frostgym_score`` is the grade's score and
each component is a metric (``grade_metrics``), with ``ended`` (whether the env ended the
episode). When the trainer's turn limit (or a token cap, a ``@stop``) ends the exchange
before the env ended the episode, every reply the model gave has already been stepped, so
there is no answer left to grade: the score is 0 (``ended`` 0), never
``finish(last_reply)``, which would step a reply twice.

The ``private`` split is refused (``PrivateSplitError``) unless ``load_environment`` (or the
taskset config) says ``allow_private=True``; the rows then carry ``allow_private`` in their
``info``, which the env's episodes are made with (``frostgym.train.session.check_training_split``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

import httpx
import verifiers.v1 as vf  # type: ignore[import-untyped,unused-ignore]
from pydantic import Field
from verifiers.v1.dialects.chat import message_to_wire  # type: ignore[import-untyped,unused-ignore]
from verifiers.v1.runtimes import ProgramResult, Runtime  # type: ignore[import-untyped,unused-ignore]

from frostgym.core.splits import Split
from frostgym.train.session import (
    EpisodePool,
    TrainingEpisode,
    assistant_action,
    check_training_split,
    grade_metrics,
    task_rows,
)

__all__ = [
    "PLUGIN_ID",
    "FrostgymData",
    "FrostgymEnv",
    "FrostgymEnvConfig",
    "FrostgymHarness",
    "FrostgymHarnessConfig",
    "FrostgymTask",
    "FrostgymTaskset",
    "FrostgymTasksetConfig",
    "load_environment",
    "vf_eval",
]

#: The id verifiers' loaders resolve this module by (taskset and harness alike). They import
#: a plugin id as ``verifiers.v1.tasksets.<id>`` (``.harnesses.<id>``) or a top-level module,
#: and a dotted id breaks that lookup, so importing this module registers it under both
#: namespaced names.
PLUGIN_ID = "frostgym"
for _group in ("tasksets", "harnesses"):
    sys.modules.setdefault(f"verifiers.v1.{_group}.{PLUGIN_ID}", sys.modules[__name__])
GRADE_KEY = "frostgym_grade"


class FrostgymData(vf.TaskData):  # type: ignore[misc]
    """One task row: ``info`` holds ``task_id``, ``episode_seed``, ``split`` and ``env_id``
    (and the env's arguments); ``tools`` the env's OpenAI function schemas at reset."""

    info: dict[str, Any]
    tools: list[dict[str, Any]] = Field(default_factory=list)


class FrostgymTask(vf.Task[FrostgymData, vf.State, vf.TaskConfig]):  # type: ignore[misc]
    """A frostgym task; scored from the grade ``FrostgymEnv.run`` leaves on the trace."""

    @property
    def key(self) -> str:
        info = self.data.info
        return f"{info['env_id']}:{info['split']}:{info['task_id']}:{info['episode_seed']}"

    @vf.reward  # type: ignore[untyped-decorator,misc,unused-ignore]
    async def frostgym_score(self, trace: vf.Trace) -> float:
        return grade_metrics(trace.info.get(GRADE_KEY))["score"]

    @vf.metric  # type: ignore[untyped-decorator,misc,unused-ignore]
    async def frostgym_grade(self, trace: vf.Trace) -> dict[str, float]:
        metrics = {name: value for name, value in grade_metrics(trace.info.get(GRADE_KEY)).items() if name != "score"}
        metrics["ended"] = 1.0 if trace.info.get(GRADE_KEY) is not None else 0.0
        return metrics


class FrostgymTasksetConfig(vf.TasksetConfig):  # type: ignore[misc]
    id: str = PLUGIN_ID
    env: str = "frostgym/Math-v0"
    """The frostgym id (one of ``frostgym.envs.registry.ENTRIES``)."""
    split: str = "train"
    n: int = 64
    """How many distinct tasks (the plan's first ``n``)."""
    seed: int = 0
    """The plan's seed: the same seed gives the same tasks and episode seeds as ``frostgym eval``."""
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    """The env's arguments (``level``, ``max_turns``, ...)."""
    allow_private: bool = False
    """Whether ``split`` may be ``private`` (``frostgym.train.session.check_training_split``)."""


class FrostgymTaskset(vf.Taskset[FrostgymTask, FrostgymTasksetConfig]):  # type: ignore[misc]
    """The plan's tasks (``task_rows``), each prompted with the env's reset observation."""

    def load(self) -> Iterator[FrostgymTask]:
        config = self.config
        split: Split = config.split
        allow = bool(config.allow_private)
        rows = task_rows(
            config.env, split=split, n=config.n, seed=config.seed, allow_private=allow, **config.env_kwargs
        )
        episode = TrainingEpisode(config.env, split, allow_private=allow, **config.env_kwargs)
        try:
            for row in rows:
                first = episode.start(row.task_id, row.episode_seed)
                info = {**row.to_dict(), "env_kwargs": dict(config.env_kwargs)}
                if allow:
                    info["allow_private"] = True
                yield FrostgymTask(
                    FrostgymData(
                        id=f"{row.env_id}:{row.task_id}",
                        name=row.task_id,
                        prompt=[vf_message(m) for m in first],
                        info=info,
                        tools=episode.tools,
                    ),
                    config.task,
                )
        finally:
            episode.close()


class FrostgymHarnessConfig(vf.HarnessConfig):  # type: ignore[misc]
    id: str = PLUGIN_ID


class FrostgymHarness(vf.Harness[FrostgymHarnessConfig]):  # type: ignore[misc]
    """An in-process chat loop: one model call per segment through the interception
    endpoint, the task's tools offered on each call (verifiers allows a harness to run its
    loop in-process when every model call goes through ``endpoint`` + ``secret``)."""

    APPENDS_SYSTEM_PROMPT: ClassVar[bool] = True
    SUPPORTS_RESUME: ClassVar[bool] = True
    EXECUTES_CODE: ClassVar[bool] = False
    NEEDS_CONTAINER: ClassVar[bool] = False

    async def launch(
        self,
        ctx: vf.ModelContext,
        trace: vf.Trace,
        runtime: Runtime,
        endpoint: str,
        secret: str,
        mcp_urls: dict[str, str],
        data: vf.TaskData,
        tool_interception_url: str | None = None,
    ) -> ProgramResult:
        system, prompt = self.resolve_prompt(data)
        messages: list[Any] = []
        if system is not None:
            messages.append(vf.SystemMessage(content=system))
        if isinstance(prompt, str):
            messages.append(vf.UserMessage(content=prompt))
        elif prompt is not None:
            messages.extend(prompt)
        body: dict[str, Any] = {"model": ctx.model, "messages": [message_to_wire(m) for m in messages]}
        tools = getattr(data, "tools", None)
        if tools:
            body["tools"] = tools
        async with httpx.AsyncClient(timeout=None) as http:
            response = await http.post(
                f"{endpoint.rstrip('/')}/chat/completions",
                json=body,
                headers={"Authorization": f"Bearer {secret}"},
            )
        if response.status_code != 200:
            return ProgramResult(
                exit_code=1, stdout="", stderr=f"model call: HTTP {response.status_code}: {response.text[:2000]}"
            )
        return ProgramResult(exit_code=0, stdout="", stderr="")


class FrostgymEnvConfig(vf.EnvConfig):  # type: ignore[misc]
    player: vf.AgentConfig = vf.AgentConfig()


class FrostgymEnv(vf.Env[FrostgymEnvConfig]):  # type: ignore[misc]
    """One frostgym episode per verifiers episode: the frozen env plays the user.

    Each episode borrows a ``TrainingEpisode`` for its whole ``run`` (an idle one, else a new
    one: concurrent episodes never share one) and gives it back when it ends, so an env is
    made once per concurrent episode, not once per episode; ``stop`` closes them."""

    def __init__(self, config: FrostgymEnvConfig) -> None:
        super().__init__(config)
        self._pool: EpisodePool = EpisodePool()

    def borrow(self, info: Mapping[str, Any]) -> TrainingEpisode:
        """An idle ``TrainingEpisode`` for ``info``'s env, split and arguments, or a new one
        (``private`` only for a row whose ``info`` says ``allow_private``)."""
        allow = bool(info.get("allow_private", False))
        return self._pool.borrow(info["env_id"], info["split"], info.get("env_kwargs", {}), allow)

    def give_back(self, episode: TrainingEpisode) -> None:
        self._pool.give_back(episode)

    async def stop(self) -> None:
        self._pool.close()

    async def run(self, task: vf.Task, agents: vf.Agents) -> None:
        info = task.data.info
        episode = self.borrow(info)
        try:
            episode.start(info["task_id"], int(info["episode_seed"]))
            async with agents.player.interaction(task) as interaction:
                trace = interaction.trace
                segment = await interaction.turn()
                while not segment.terminated:
                    result = episode.step(assistant_action(last_assistant(segment.messages)))
                    if result.done:
                        # What the last step added never reaches the model: keep it on the trace.
                        trace.info["frostgym_final_messages"] = [dict(m) for m in result.messages]
                        break
                    segment = await interaction.turn([vf_message(m) for m in result.messages])
                # Set before the context closes: scoring runs as it closes.
                trace.info[GRADE_KEY] = episode.grade
                trace.info["frostgym_turns"] = episode.turns
        except BaseException:
            episode.close()  # in an unknown state: not reused
            raise
        self.give_back(episode)


def last_assistant(messages: list[Any]) -> dict[str, Any]:
    """The segment's last assistant message as a wire dict (``tool_calls`` in OpenAI's form)."""
    for message in reversed(messages):
        if isinstance(message, vf.AssistantMessage):
            if not message.tool_calls:  # the common case, without the wire round trip
                return {"role": "assistant", "content": message.content or ""}
            wire: dict[str, Any] = message_to_wire(message)
            return wire
    return {"role": "assistant", "content": ""}


def vf_message(message: Mapping[str, Any]) -> Any:
    """A frostgym message as a verifiers message (frostgym envs answer as system/user turns)."""
    role, content = message.get("role"), str(message.get("content") or "")
    if role == "system":
        return vf.SystemMessage(content=content)
    if role == "assistant":
        return vf.AssistantMessage(content=content)
    return vf.UserMessage(content=content)


def load_environment(
    env_id: str,
    split: Split = "train",
    level: int | None = None,
    n: int = 64,
    seed: int = 0,
    *,
    model: str | None = None,
    base_url: str | None = None,
    api_key_var: str | None = None,
    player_max_turns: int | None = None,
    allow_private: bool = False,
    **env_kwargs: Any,
) -> FrostgymEnv:
    """The verifiers env over ``n`` tasks of ``env_id``'s ``split`` (the plan's, for
    ``seed``); ``level`` and ``env_kwargs`` are the env's arguments. ``model``,
    ``base_url`` and ``api_key_var`` pin the player's endpoint (else verifiers' defaults,
    or what the run's ``ModelContext`` gives); ``player_max_turns`` is the trainer's cap on
    the player's turns (verifiers' ``max_turns``; an env's own ``max_turns`` is an env argument).
    ``split="private"`` raises ``PrivateSplitError`` unless ``allow_private=True``."""
    check_training_split(split, allow_private)
    kwargs = dict(env_kwargs)
    if level is not None:
        kwargs["level"] = level
    # The harness runs in-process and the env's own sandbox isolates code, so the player's
    # runtime is a local subprocess one (verifiers' default is a remote Prime sandbox).
    agent: dict[str, Any] = {"harness": {"id": PLUGIN_ID}, "runtime": {"type": "subprocess"}}
    if model is not None:
        agent["model"] = model
    if base_url is not None or api_key_var is not None:
        client: dict[str, Any] = {"type": "eval"}
        if base_url is not None:
            client["base_url"] = base_url
        if api_key_var is not None:
            client["api_key_var"] = api_key_var
        agent["client"] = client
    if player_max_turns is not None:
        agent["max_turns"] = player_max_turns
    config = vf.resolve_env_config(
        {
            "taskset": {
                "id": PLUGIN_ID,
                "env": env_id,
                "split": split,
                "n": n,
                "seed": seed,
                "env_kwargs": kwargs,
                "allow_private": allow_private,
            },
            "player": agent,
        }
    )
    env = vf.load_environment(config)
    assert isinstance(env, FrostgymEnv)
    return env


def vf_eval(argv: list[str] | None = None) -> None:
    """verifiers' ``vf-eval`` with this module's plugin id registered (a bare ``vf-eval
    frostgym`` would import the top-level ``frostgym`` package, which exports no taskset):
    ``python -c "from frostgym.integrations.verifiers import vf_eval; vf_eval()" frostgym ...``.
    The CLI also needs ``prime-runs``, ``prime-traces`` and ``loguru`` (see docs/trainers/verifiers.md)."""
    from verifiers.v1.cli.eval.main import main  # type: ignore[import-untyped,unused-ignore]

    main(argv)
