"""Train against frostgym envs with TRL's ``GRPOTrainer`` (tested with trl 1.16): every
registered id, single-turn through reward functions, multi-turn through TRL's experimental
``environment_factory`` (guide: docs/trainers/trl.md).

Single-turn ids (the math ids, Tools-v0, Code-v0 at its default one turn)::

    from trl import GRPOConfig, GRPOTrainer
    from frostgym.train.trl import env_dataset, reward_functions, reward_weights

    data = env_dataset("frostgym/Math-v0", split="train", n=512, seed=0)
    funcs = reward_functions("frostgym/Math-v0")
    trainer = GRPOTrainer(model, reward_funcs=funcs, train_dataset=data,
                          args=GRPOConfig(reward_weights=reward_weights(funcs), ...))

``env_dataset`` builds conversational prompts (the env's reset observation) with the
columns ``task_id``, ``episode_seed`` and ``split`` (and ``environment`` for the ids whose
tools differ per task, below); tasks and seeds come from ``frostgym.run.plan.make_plan``
(one sample per task), the same derivation an eval card uses. ``reward_functions`` returns
one function per grade component (``frostgym_correctness``, ``frostgym_format``, ...) and
one for the total score (``frostgym_score``). Without an ``environments`` kwarg, each resets
a private env on the row's task and steps the completion's text, again on every turn the
episode has left until it ends (a single-turn id: once), so a reward is exactly what that
``gym.make`` episode scores. TRL *sums* every reward function, so give the components
weight 0 (``reward_weights``). A completion is graded once per batch however many
functions ask.

Multi-turn (SQL-v0, Code-v0, ToolsHTTP-v0, ToolsMultiTurn-v0, CustomerService-v0): ``environment_factory(env_id)``
is what to pass as ``GRPOTrainer(environment_factory=...)``, with ``env_dataset`` rows and
``reward_functions(env_id)``. Its objects (``ToolEnv`` subclasses) play one real episode
each through ``frostgym.train.session.TrainingEpisode``: TRL calls ``reset(**row)``, then
the tool methods the model calls (the env's tools, each an ``async`` method whose name,
type hints and docstring give the env's JSON schema); the calls of one reply are gathered
into one env action ``{"content": "", "tool_calls": [...]}`` (one env step, as ``gym.make``
plays that reply) and the env's answer is the first call's result (the others' is "").
When the model replies without a tool call, TRL's loop ends and the reward functions read
``final_grade(text)``: that reply is stepped as text, again on every turn left, until the
episode ends. SQL-v0 and Code-v0 have one tool set (a plain factory); ToolsHTTP-v0 and
ToolsMultiTurn-v0 offer different tools per task, so their factory is a dict keyed by tool
set (``toolset_key``), one class per set, and ``env_dataset`` names each row's set in its
``environment`` column. ToolsMultiTurn-v0 has several user requests per episode: its
classes add a ``finish_turn`` tool (the reply without calls that ends a request under
``gym.make``), whose result is the next request. What TRL cannot show as ``gym.make``
does (tools listed alphabetically and all at once, lossy schemas, ...) is listed in the
guide. CustomerService-v0's classes (one per domain) add a ``message_customer`` tool (the
reply without calls that speaks to the customer under ``gym.make``), whose result is the
customer's answer; a reply without any call ends TRL's loop as usual. TRL requires a chat
template that renders tool calls (Qwen2.5/Qwen3 do; SmolLM2's does not).

The ``private`` split is refused (``PrivateSplitError``) by every helper here unless called
with ``allow_private=True`` (``frostgym.train.session.check_training_split``): it is what
measures contamination and overfitting, and training on it spends it.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import inspect
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Literal, cast, overload

from frostgym.core.env import FrozenEnv
from frostgym.core.errors import FrostgymError, InvalidActionError
from frostgym.core.messages import Action
from frostgym.core.splits import Split
from frostgym.core.tasks import Task
from frostgym.envs.registry import make_env
from frostgym.train.curriculum import CurriculumSampler
from frostgym.train.session import StepResult, TaskRow, TrainingEpisode, check_training_split, task_rows

RewardFunc = Callable[..., list[float | None]]
#: What ``environment_factory`` returns: one factory, or one per tool set (``toolset_key``).
EnvironmentFactory = Callable[[], "ToolEnv"] | dict[str, Callable[[], "ToolEnv"]]

SQL_ID = "frostgym/SQL-v0"
CODE_ID = "frostgym/Code-v0"
HTTP_ID = "frostgym/ToolsHTTP-v0"
MULTI_TURN_ID = "frostgym/ToolsMultiTurn-v0"
CUSTOMER_ID = "frostgym/CustomerService-v0"
#: Ids whose tools differ per task: a dict factory, and an ``environment`` column.
PER_TASK_TOOLS = (MULTI_TURN_ID, HTTP_ID, CUSTOMER_ID)
#: Multi-turn ids with an ``environment_factory`` here.
TOOL_ENVS = (SQL_ID, CODE_ID, *PER_TASK_TOOLS)
PREFIX = "frostgym_"
#: The ToolsMultiTurn-v0 tool that ends a user request (a reply without calls under gym.make).
FINISH_TURN = "finish_turn"
#: The CustomerService-v0 tool that sends the customer a message (a reply without calls
#: under gym.make); its result is the customer's answer.
MESSAGE_CUSTOMER = "message_customer"
EPISODE_OVER = "The episode is over: no more tool calls."


def _task_toolset(env_id: str, task: Task) -> tuple[str, ...]:
    """The names of the tools an episode of ``task`` ever offers, in the env's order:
    ToolsHTTP-v0's task tools; ToolsMultiTurn-v0's functions over all its user turns
    (BFCL's held-out functions included: they come back at a later turn)."""
    if env_id == MULTI_TURN_ID:
        from frostgym.tools.bfcl_multi_turn import entry_for

        entry = entry_for(task)
        return tuple(dict.fromkeys(name for turn in range(len(entry.turns)) for name in entry.offered(turn)))
    if env_id == CUSTOMER_ID:
        from frostgym.customer.tau2_data import tool_schemas

        return tuple(str(schema["function"]["name"]) for schema in tool_schemas(str(task.metadata["domain"])))
    return tuple(str(name) for name in task.metadata["tools"])


def toolset_key(env_id: str, names: Sequence[str]) -> str:
    """The ``environment`` name of a tool set: the id's name and a hash of the sorted tool
    names (``ToolsHTTP-v0:3f9a0c1b2d``)."""
    digest = hashlib.sha256(json.dumps(sorted(names)).encode()).hexdigest()[:10]
    return f"{env_id.rsplit('/', 1)[-1]}:{digest}"


def env_dataset(
    env_id: str, *, split: Split = "train", n: int, seed: int, allow_private: bool = False, **env_kwargs: Any
) -> Any:
    """``n`` distinct tasks of ``split`` as a conversational ``datasets.Dataset``: columns
    ``prompt`` (the reset observation), ``task_id``, ``episode_seed`` and ``split``, and for
    ToolsHTTP-v0 and ToolsMultiTurn-v0 ``environment`` (the row's ``toolset_key``, which
    ``environment_factory``'s dict routes on). The tasks are ``task_rows``' (the plan's);
    ``private`` needs ``allow_private=True``."""
    rows = task_rows(env_id, split=split, n=n, seed=seed, allow_private=allow_private, **env_kwargs)
    return rows_dataset(rows, allow_private=allow_private, **env_kwargs)


def rows_dataset(rows: Sequence[TaskRow], *, allow_private: bool = False, **env_kwargs: Any) -> Any:
    """``rows`` (``frostgym.train.session.TaskRow``, all of one id) as ``env_dataset``'s
    ``datasets.Dataset``, one row each, in order; rows of ``private`` need ``allow_private=True``."""
    for row in rows:
        check_training_split(row.split, allow_private)
    from datasets import Dataset  # type: ignore[import-untyped,unused-ignore]

    env_ids = {row.env_id for row in rows}
    if len(env_ids) != 1:
        raise ValueError(f"rows_dataset takes rows of one id, got {sorted(env_ids)}")
    env_id = rows[0].env_id
    columns: dict[str, list[Any]] = {"prompt": [], "task_id": [], "episode_seed": [], "split": []}
    if env_id in PER_TASK_TOOLS:
        columns["environment"] = []
    envs: dict[Split, FrozenEnv] = {}
    try:
        for row in rows:
            if row.split not in envs:
                envs[row.split] = make_env(env_id, row.split, env_kwargs)
            env = envs[row.split]
            observation, _ = env.reset(seed=row.episode_seed, options={"task_id": row.task_id})
            columns["prompt"].append([{"role": m["role"], "content": m["content"]} for m in observation])
            columns["task_id"].append(row.task_id)
            columns["episode_seed"].append(row.episode_seed)
            columns["split"].append(row.split)
            if env_id in PER_TASK_TOOLS:
                columns["environment"].append(toolset_key(env_id, _task_toolset(env_id, env.task)))
    finally:
        for env in envs.values():
            env.close()
    return Dataset.from_dict(columns)


def completion_text(completion: Any) -> str:
    """The reply to grade: a text completion as is, or the last assistant message's content."""
    if isinstance(completion, str):
        return completion
    for msg in reversed(completion):
        if msg.get("role") == "assistant":
            content = msg.get("content")
            return content if isinstance(content, str) else ""
    return ""


def _play_to_end(episode: TrainingEpisode, reply: Action, record: list[StepResult] | None = None) -> None:
    """Step ``reply`` until the episode ends: the model's last reply answers every turn it
    has left (the env's ``max_turns`` bounds it)."""
    for _ in range(episode.max_turns + 1):
        if episode.done:
            return
        result = episode.step(reply)
        if record is not None:
            record.append(result)
    if not episode.done:
        raise FrostgymError(f"{episode.env_id} did not end within max_turns={episode.max_turns} replies")


class ToolEnv:
    """One episode of a multi-turn id per rollout, driven by TRL's tool loop
    (``environment_factory``); the base of every factory's class.

    TRL calls ``reset(**row)`` with an ``env_dataset`` row, exposes the subclass's public
    methods as tools (each ``await self._call(name, arguments)``), and hands the objects to
    the reward functions, which read ``final_grade(last_reply)``. The calls of one reply
    (TRL gathers a reply's async tool calls together) become one env action, stepped once
    through ``TrainingEpisode``; the first call gets the env's new message text, the
    others "" (TRL needs one result per call). ``steps`` holds every ``StepResult`` of the
    episode. Not thread-safe: one object per rollout, as TRL makes them. Outside TRL, call
    a tool with ``asyncio.run(env.run_sql("SELECT 1"))``."""

    #: The id this class plays when constructed without one.
    default_env_id: ClassVar[str] = ""
    #: The env tool names this class exposes (its tool methods, ``finish_turn`` aside).
    tool_names: ClassVar[tuple[str, ...]] = ()
    #: The episode's grade, stepping the last reply first while the episode is open; an
    #: instance attribute, not a method, so TRL does not offer it as a tool.
    final_grade: Callable[[str], dict[str, Any] | None]

    def __init__(self, env_id: str | None = None, *, allow_private: bool = False, **env_kwargs: Any) -> None:
        self.env_id = env_id or self.default_env_id
        self.env_kwargs = env_kwargs
        self.allow_private = allow_private
        self.episode: TrainingEpisode | None = None
        self.steps: list[StepResult] = []
        self._pending: list[tuple[str, dict[str, Any], asyncio.Future[str]]] = []
        self.final_grade = self._final_grade

    def reset(self, *, task_id: str, episode_seed: int, split: Split = "train", prompt: Any = None, **_: Any) -> None:
        """Start the row's episode. The dataset prompt already holds the observation (it is
        checked to be the env's), so nothing is appended to it."""
        if self.episode is None:
            self.episode = TrainingEpisode(self.env_id, split, allow_private=self.allow_private, **self.env_kwargs)
        first = self.episode.start(task_id, int(episode_seed), split)
        self.steps = []
        self._pending = []
        if prompt is not None and [m.get("content") for m in prompt] != [m["content"] for m in first]:
            raise ValueError(f"the row's prompt is not {self.env_id}'s first messages for {task_id}: use env_dataset")
        self._check_toolset(task_id)
        return None

    def _check_toolset(self, task_id: str) -> None:
        if self.env_id in PER_TASK_TOOLS and self.episode is not None:
            offered = _task_toolset(self.env_id, self.episode.env.task)
            if set(offered) != set(self.tool_names):
                raise ValueError(
                    f"{task_id} offers the tool set {toolset_key(self.env_id, offered)}, not this class's "
                    f"({toolset_key(self.env_id, self.tool_names)}): route rows by their environment column"
                )

    async def _call(self, name: str, arguments: Mapping[str, Any]) -> str:
        """One tool call; the calls that arrive together (one reply's) are stepped as one action."""
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._pending.append((name, dict(arguments), future))
        await asyncio.sleep(0)  # let the reply's other calls (gathered with this one) join
        if self._pending:
            self._flush()
        return await future

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        group: list[tuple[str, dict[str, Any], asyncio.Future[str]]] = []
        for call in pending:
            if call[0] in (FINISH_TURN, MESSAGE_CUSTOMER):  # the calls so far are one reply, this the next
                self._answer(group)
                self._answer([call])
                group = []
            else:
                group.append(call)
        self._answer(group)

    def _answer(self, group: list[tuple[str, dict[str, Any], asyncio.Future[str]]]) -> None:
        if not group:
            return
        if group[0][0] == FINISH_TURN:
            action: Action = ""  # a reply without calls: it ends the user request
        elif group[0][0] == MESSAGE_CUSTOMER:
            action = str(group[0][1].get("message", ""))  # a reply without calls: a message to the customer
        else:
            action = {"content": "", "tool_calls": [{"name": n, "arguments": a} for n, a, _ in group]}
        text = self._step(action)
        for i, (_, _, future) in enumerate(group):
            if not future.done():
                future.set_result(text if i == 0 else "")

    def _step(self, action: Action) -> str:
        episode = self.episode
        if episode is None or episode.done:
            return EPISODE_OVER
        try:
            result = episode.step(action)
        except InvalidActionError as error:  # one call per reply (SQL-v0, Code-v0): the env refuses more
            return f"Error: {error}"
        self.steps.append(result)
        if result.done:
            label = result.grade.get("label") if result.grade else None
            return f"graded: {label or 'pass'}"
        return "\n\n".join(str(m.get("content") or "") for m in result.messages)

    def _final_grade(self, last_reply: str) -> dict[str, Any] | None:
        """The episode's grade; while it is open, ``last_reply`` is stepped as text on every
        turn left (TRL's conversation is over). Computed once per episode."""
        if self.episode is None:
            return None
        _play_to_end(self.episode, last_reply, self.steps)
        return self.episode.grade


class SQLToolEnv(ToolEnv):
    """SQL-v0: ``run_sql`` and ``submit_sql`` (the env's two tools)."""

    default_env_id = SQL_ID
    tool_names = ("run_sql", "submit_sql")

    async def run_sql(self, query: str) -> str:
        """Run an exploratory read-only query and see (part of) its result.

        Args:
            query: One SQLite SELECT statement.
        """
        return await self._call("run_sql", {"query": query})

    async def submit_sql(self, query: str) -> str:
        """Submit the final query that answers the question. Ends the episode.

        Args:
            query: One SQLite SELECT statement.
        """
        return await self._call("submit_sql", {"query": query})


class CodeToolEnv(ToolEnv):
    """Code-v0: ``run_tests`` and ``submit`` (the env's two tools; ``run_tests`` runs the
    docstring's examples only with ``max_turns`` > 1, else it is graded as the answer)."""

    default_env_id = CODE_ID
    tool_names = ("run_tests", "submit")

    async def run_tests(self, code: str) -> str:
        """Run the code on the docstring examples and see the results (uses a turn).

        Args:
            code: The complete Python function.
        """
        return await self._call("run_tests", {"code": code})

    async def submit(self, code: str) -> str:
        """Submit the final code; it is graded on the hidden tests. Ends the episode.

        Args:
            code: The complete Python function.
        """
        return await self._call("submit", {"code": code})


class HTTPToolEnv(ToolEnv):
    """ToolsHTTP-v0; ``environment_factory`` makes one subclass per tool set, whose methods
    are that set's endpoints."""

    default_env_id = HTTP_ID


class MultiTurnToolEnv(ToolEnv):
    """ToolsMultiTurn-v0; ``environment_factory`` makes one subclass per tool set (BFCL's
    involved classes), whose methods are their functions, plus ``finish_turn``."""

    default_env_id = MULTI_TURN_ID

    async def finish_turn(self) -> str:
        # The docstring is FINISH_TURN_DESCRIPTION (set below): one line, so the schema's description is too.
        return await self._call(FINISH_TURN, {})


FINISH_TURN_DESCRIPTION = (
    "End your turn on the current user request: call it when the request is done, or cannot be done "
    "with these functions or the information you have (a reply without function calls does the same, "
    "but ends the conversation). The result is the user's next request, or that the conversation is over."
)
MultiTurnToolEnv.finish_turn.__doc__ = FINISH_TURN_DESCRIPTION


_JSON_TYPES: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool, "object": dict}


def _type_hint(schema: Mapping[str, Any]) -> Any:
    """The Python type hint transformers' ``get_json_schema`` renders as ``schema``'s type
    (enums as ``Literal``; nested ``properties``, bounds and defaults are not expressible)."""
    if schema.get("enum"):
        return Literal[tuple(schema["enum"])]
    kind = schema.get("type")
    if kind == "array":
        items = schema.get("items")
        return list[_type_hint(items)] if isinstance(items, Mapping) and items.get("type") else list  # type: ignore[misc]
    return _JSON_TYPES.get(str(kind), Any)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def tool_method(schema: Mapping[str, Any]) -> Callable[..., Any]:
    """An async method ``name(self, **arguments)`` that calls the env tool ``schema`` (an
    OpenAI function tool) through ``ToolEnv._call``, with the signature, annotations and
    Google-style docstring that make transformers' ``get_json_schema`` render that schema
    (as closely as it can: see ``_type_hint``). The arguments reach the env as the model
    gave them, so the env checks them as under ``gym.make``."""
    function = schema["function"]
    name = str(function["name"])
    parameters = function.get("parameters") or {}
    properties: Mapping[str, Any] = parameters.get("properties") or {}
    required = set(parameters.get("required") or ())

    async def tool(self: ToolEnv, **arguments: Any) -> str:
        return await self._call(name, arguments)

    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {}
    lines = [_one_line(function.get("description") or name)]
    if properties:
        lines += ["", "Args:"]
    for arg, prop in properties.items():
        hint = _type_hint(prop)
        default = inspect.Parameter.empty if arg in required else prop.get("default")
        params.append(inspect.Parameter(arg, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=hint))
        annotations[arg] = hint
        lines.append(f"    {arg}: {_one_line(prop.get('description') or arg)}")
    tool.__name__ = tool.__qualname__ = name
    tool.__doc__ = "\n".join(lines)
    tool.__annotations__ = annotations
    setattr(tool, "__signature__", inspect.Signature(params))  # noqa: B010  (mypy: no such attribute)
    return tool


#: Names a tool method cannot have: TRL's (``reset``, ``get_reward``) and ``ToolEnv``'s own.
_RESERVED = frozenset(
    {
        "reset",
        "get_reward",
        FINISH_TURN,
        MESSAGE_CUSTOMER,
        "steps",
        "episode",
        "env_id",
        "env_kwargs",
        "final_grade",
        "allow_private",
    }
)


class CustomerToolEnv(ToolEnv):
    """CustomerService-v0; ``environment_factory`` makes one subclass per domain, whose
    methods are the domain's tools, plus ``message_customer``."""

    default_env_id = CUSTOMER_ID

    async def message_customer(self, message: str) -> str:
        # The docstring is MESSAGE_CUSTOMER_DESCRIPTION (set below).
        return await self._call(MESSAGE_CUSTOMER, {"message": message})


MESSAGE_CUSTOMER_DESCRIPTION = """Send the customer a message (a question, a confirmation to ask for, or what was done).

The result is the customer's answer, or that the conversation is over.

Args:
    message: What to tell or ask the customer."""
CustomerToolEnv.message_customer.__doc__ = MESSAGE_CUSTOMER_DESCRIPTION


def tool_env_class(env_id: str, schemas: Sequence[Mapping[str, Any]]) -> type[ToolEnv]:
    """The ``ToolEnv`` subclass of ``env_id`` (ToolsHTTP-v0, ToolsMultiTurn-v0 or
    CustomerService-v0) whose tool methods are ``schemas`` (``tool_method``)."""
    bases: dict[str, type[ToolEnv]] = {MULTI_TURN_ID: MultiTurnToolEnv, CUSTOMER_ID: CustomerToolEnv}
    base = bases.get(env_id, HTTPToolEnv)
    names = tuple(str(s["function"]["name"]) for s in schemas)
    for name in names:
        if name.startswith("_") or name in _RESERVED or hasattr(base, name):
            raise FrostgymError(f"{env_id}'s tool {name!r} cannot be a tool method of {base.__name__}")
    key = toolset_key(env_id, names)
    namespace: dict[str, Any] = {s["function"]["name"]: tool_method(s) for s in schemas}
    namespace.update(tool_names=names, __doc__=f"{env_id} tool set {key}: {', '.join(names)}.")
    return type(f"{base.__name__}_{key.rsplit(':', 1)[-1]}", (base,), namespace)


def _toolset_schemas(env_id: str, names: Sequence[str]) -> list[dict[str, Any]]:
    if env_id == MULTI_TURN_ID:
        from frostgym.tools.bfcl_multi_turn import tools_for

        return tools_for(list(names))
    if env_id == CUSTOMER_ID:
        from frostgym.customer.tau2_data import DOMAINS
        from frostgym.customer.tau2_data import tool_schemas as domain_schemas

        for domain in DOMAINS:
            schemas = {str(s["function"]["name"]): dict(s) for s in domain_schemas(domain)}
            if set(names) == set(schemas):
                return [schemas[name] for name in names]
        raise ValueError(f"{env_id} has no domain with the tools {sorted(names)}")
    from frostgym.tools.http.clients import tool_schemas

    return tool_schemas(list(names))


@functools.cache
def _toolsets(env_id: str, env_kwargs_json: str) -> dict[str, type[ToolEnv]]:
    """Every tool set the id's tasks offer (all finite splits), a class each, by key."""
    env_kwargs = json.loads(env_kwargs_json)
    env = make_env(env_id, "test", env_kwargs)
    try:
        classes: dict[str, type[ToolEnv]] = {}
        for split in ("train", "dev", "test", "private"):
            if not env.source.size(split):  # none, or an unbounded train split (these ids have none)
                continue
            for task in env.source.tasks(split):
                names = _task_toolset(env_id, task)
                key = toolset_key(env_id, names)
                if key not in classes:
                    classes[key] = tool_env_class(env_id, _toolset_schemas(env_id, names))
        return classes
    finally:
        env.close()


@overload
def environment_factory(
    env_id: Literal["frostgym/SQL-v0", "frostgym/Code-v0"], *, allow_private: bool = False, **env_kwargs: Any
) -> Callable[[], ToolEnv]: ...
@overload
def environment_factory(
    env_id: Literal["frostgym/ToolsHTTP-v0", "frostgym/ToolsMultiTurn-v0", "frostgym/CustomerService-v0"],
    *,
    allow_private: bool = False,
    **env_kwargs: Any,
) -> dict[str, Callable[[], ToolEnv]]: ...
@overload
def environment_factory(env_id: str, *, allow_private: bool = False, **env_kwargs: Any) -> EnvironmentFactory: ...
def environment_factory(env_id: str, *, allow_private: bool = False, **env_kwargs: Any) -> EnvironmentFactory:
    """What to pass as ``GRPOTrainer(environment_factory=...)`` for a multi-turn id (with
    ``env_dataset`` rows made with the same ``env_kwargs``): a factory of ``SQLToolEnv`` /
    ``CodeToolEnv``, or for ToolsHTTP-v0 and ToolsMultiTurn-v0 a dict of factories keyed by
    ``toolset_key``, one ``tool_env_class`` per tool set the id's tasks offer. ``ValueError``
    for an id without tools between turns (give TRL ``reward_functions`` alone). Its
    objects refuse a row of ``private`` unless ``allow_private=True``."""
    if env_id == SQL_ID:
        return functools.partial(SQLToolEnv, env_id, allow_private=allow_private, **env_kwargs)
    if env_id == CODE_ID:
        return functools.partial(CodeToolEnv, env_id, allow_private=allow_private, **env_kwargs)
    if env_id in PER_TASK_TOOLS:
        classes = _toolsets(env_id, json.dumps(env_kwargs, sort_keys=True, default=repr))
        return {
            key: functools.partial(cls, env_id, allow_private=allow_private, **env_kwargs)
            for key, cls in classes.items()
        }
    raise ValueError(
        f"{env_id} has no tools between turns: train it with reward_functions alone; "
        f"environment_factory serves {', '.join(TOOL_ENVS)}"
    )


def sql_environment_factory(
    env_id: str = SQL_ID, *, allow_private: bool = False, **env_kwargs: Any
) -> Callable[[], SQLToolEnv]:
    """``environment_factory`` for SQL-v0 (kept for older code)."""
    if env_id != SQL_ID:
        raise ValueError(f"sql_environment_factory serves {SQL_ID}, not {env_id}: use environment_factory")
    return functools.partial(SQLToolEnv, env_id, allow_private=allow_private, **env_kwargs)


class _Grader:
    """One env per thread, and a per-batch memo of grades keyed by (task, seed, split, text)."""

    def __init__(self, env_id: str, env_kwargs: Mapping[str, Any], allow_private: bool = False) -> None:
        self.env_id = env_id
        self.env_kwargs = dict(env_kwargs)
        self.allow_private = allow_private
        self.local = threading.local()

    def _episode(self, split: Split, level: int | None) -> TrainingEpisode:
        episodes: dict[tuple[str, int | None], TrainingEpisode] = self.local.__dict__.setdefault("episodes", {})
        if (split, level) not in episodes:
            kwargs = self.env_kwargs if level is None else {**self.env_kwargs, "level": level}
            episodes[(split, level)] = TrainingEpisode(self.env_id, split, allow_private=self.allow_private, **kwargs)
        return episodes[(split, level)]

    def grade(
        self, task_id: str, episode_seed: int, split: Split, text: str, level: int | None = None
    ) -> dict[str, Any] | None:
        """The grade of the episode whose every reply is ``text`` (one reply on a single-turn id)."""
        episode = self._episode(split, level)
        episode.start(task_id, int(episode_seed), split)
        _play_to_end(episode, text)
        return episode.grade

    def batch(self, completions: Sequence[Any], kwargs: Mapping[str, Any]) -> list[dict[str, Any] | None]:
        """Grades for a batch, computed once however many reward functions ask for it."""
        if getattr(self.local, "completions", None) is completions:
            return cast(list[dict[str, Any] | None], self.local.grades)
        texts = [completion_text(c) for c in completions]
        environments = kwargs.get("environments")
        grades: list[dict[str, Any] | None]
        if environments is not None:
            grades = [env.final_grade(text) for env, text in zip(environments, texts, strict=True)]
        else:
            if "task_id" not in kwargs or "episode_seed" not in kwargs:
                raise ValueError("the dataset needs task_id and episode_seed columns: build it with env_dataset()")
            splits = kwargs.get("split") or ["train"] * len(texts)
            levels = kwargs.get("level") or [None] * len(texts)  # a curriculum's rows name their level
            memo: dict[tuple[str, int, str, str], dict[str, Any] | None] = {}
            grades = []
            for task_id, seed, split, level, text in zip(
                kwargs["task_id"], kwargs["episode_seed"], splits, levels, texts, strict=True
            ):
                key = (task_id, int(seed), split, text)
                if key not in memo:
                    memo[key] = self.grade(task_id, int(seed), split, text, None if level is None else int(level))
                grades.append(memo[key])
        self.local.completions, self.local.grades = completions, grades
        return grades


def _probe_components(env_id: str, env_kwargs: Mapping[str, Any]) -> list[str]:
    """The weighted component names, read from the grade of an oracle episode on a dev/test task."""
    splits: tuple[Split, ...] = ("dev", "test")
    for split in splits:
        env = make_env(env_id, split, env_kwargs)
        try:
            if not env.source.size(split):
                continue
            env.reset(seed=0)
            info: dict[str, Any] = {}
            for _ in range(env.max_turns):
                _, _, terminated, truncated, info = env.step(env.oracle_action())
                if terminated or truncated:
                    break
            if "grade" in info:
                return list(info["grade"]["weights"])
        finally:
            env.close()
    raise FrostgymError(f"could not read the grade components of {env_id}")


def reward_functions(
    env_id: str, *, curriculum: CurriculumSampler | None = None, allow_private: bool = False, **env_kwargs: Any
) -> list[RewardFunc]:
    """One reward function per weighted grade component, then ``frostgym_score`` (the reward).

    Each takes TRL's ``prompts``/``completions`` plus the dataset columns and returns one
    float per completion. Rows need ``task_id`` and ``episode_seed`` (see ``env_dataset``),
    and ``level`` when they come from ``curriculum_dataset``: pass its ``curriculum`` too,
    and ``frostgym_score`` records each completion's pass (score 1) at its row's level.
    Every id works: with TRL's ``environments`` kwarg (an ``environment_factory`` run) the
    grade is each object's ``final_grade(last reply)``; without, the completion's text is
    stepped on a private env until its episode ends (once, on a single-turn id). Rows of
    the ``private`` split are refused unless ``allow_private=True`` (or ``curriculum`` was
    made with it).
    """
    if curriculum is not None:
        env_kwargs = {**curriculum.env_kwargs, **env_kwargs}
        probe_kwargs = {**env_kwargs, "level": curriculum.curriculum.level}
    else:
        probe_kwargs = env_kwargs
    allowed = allow_private or (curriculum is not None and curriculum.allow_private)
    grader = _Grader(env_id, env_kwargs, allowed)

    def make(component: str | None) -> RewardFunc:
        def reward(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
            out: list[float | None] = []
            grades = grader.batch(completions, kwargs)
            for grade in grades:
                if grade is None:
                    out.append(0.0)
                elif component is None:
                    out.append(float(grade["score"]))
                else:
                    value = grade["components"].get(component)
                    out.append(None if value is None else float(value))
            if component is None and curriculum is not None:
                curriculum.record_batch(kwargs.get("level") or [None] * len(out), [score == 1.0 for score in out])
            return out

        reward.__name__ = f"{PREFIX}{component or 'score'}"
        reward.__qualname__ = reward.__name__
        return reward

    return [make(name) for name in _probe_components(env_id, probe_kwargs)] + [make(None)]


def curriculum_dataset(sampler: CurriculumSampler, *, batch: int = 8) -> Any:
    """An endless ``datasets.IterableDataset`` of prompts drawn ``batch`` tasks at a time at
    the curriculum's current level: columns ``prompt``, ``task_id``, ``episode_seed``,
    ``split`` and ``level``. Give TRL ``max_steps`` (the stream has no end) and
    ``shuffle_dataset=False``, and pass the same sampler to ``reward_functions(...,
    curriculum=sampler)`` so each batch's rewards move the curriculum. The loader reads
    ahead, so a move shows a batch or two later; the tasks are still a function of the
    seed and the rewards so far (``frostgym.train.curriculum``). The sampler's split was
    checked when it was made (``private`` needs ``CurriculumSampler(..., allow_private=True)``)."""
    from datasets import IterableDataset  # type: ignore[import-untyped,unused-ignore]

    def rows() -> Any:
        while True:
            for task in sampler.next(batch):
                observation, _ = sampler.env(task.level).reset(seed=task.seed, options={"task_id": task.task_id})
                yield {
                    "prompt": [{"role": m["role"], "content": m["content"]} for m in observation],
                    "task_id": task.task_id,
                    "episode_seed": task.seed,
                    "split": sampler.split,
                    "level": task.level,
                }

    return IterableDataset.from_generator(rows)


def reward_weights(funcs: Sequence[RewardFunc]) -> list[float]:
    """``GRPOConfig.reward_weights`` that train on the env's reward only: 1 for
    ``frostgym_score``, 0 for the logged-only components."""
    return [1.0 if f.__name__ == f"{PREFIX}score" else 0.0 for f in funcs]
