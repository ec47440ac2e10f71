"""``FrozenEnv``: the contract every frostgym family implements.

The base class owns everything that must behave the same in every family: seeding
from ``self.np_random`` only, task choice, episode ids, the fixture check, the
observation as chat messages, action coercion, turn limits, and the ``info`` keys. A
family passes its task source and supplies the first messages, how one reply is
answered, and the oracle.

It also guards what a family returns: every string a ``Reply`` carries (feedback, tool
calls and results, grade details, drop reason) is made UTF-8-clean in ``step``, since a
family derives them from the action (a parser decodes ``"\\ud800"`` escapes into lone
surrogates), and a record that holds one cannot be written.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Self, SupportsFloat

import gymnasium
import orjson

from frostgym.core.arguments import check_env_arguments
from frostgym.core.episode import Drop
from frostgym.core.errors import EpisodeNotActiveError, InvalidActionError, UnknownTaskError
from frostgym.core.fixture_lock import package_lock_file, verified_fixture_sha256, verified_twins
from frostgym.core.grade import Grade
from frostgym.core.messages import Action, Message, Observation, clean_data, clean_text, copy_messages, message
from frostgym.core.seeding import derive_seed, draw_seed
from frostgym.core.spaces import ChatObservationSpace, TextActionSpace
from frostgym.core.splits import Split, check_split
from frostgym.core.task_ids import is_twin_id
from frostgym.core.tasks import Task, TaskSource

#: Conversation history keeps at most this much of one assistant reply; the full
#: action is kept by whoever records the episode (the runner), never lost.
HISTORY_CHARS = 20_000
RESET_OPTIONS = frozenset({"task_id", "split"})


@dataclass(frozen=True)
class Reply:
    """How the env answers one action: the grade (if this turn was graded), whether
    the episode is over, any message to show the agent next, and the tool calls the
    env parsed from the action with what each returned (recorded in ``info`` so a
    trajectory shows them without re-parsing the text)."""

    grade: Grade | None
    done: bool
    feedback: Message | None = None
    tool_calls: tuple[dict[str, Any], ...] = ()
    tool_results: tuple[dict[str, Any], ...] = ()
    #: Why this episode cannot be scored normally although it ran (e.g. a request the
    #: frozen world never recorded; stage ``"step"``): the agent still gets an error
    #: observation, ``info["drop"]`` carries it (``Drop.to_json``), and the runner files
    #: the episode as a drop.
    drop: Drop | None = None


class FrozenEnv(gymnasium.Env[Observation, Action], ABC):
    """A Gymnasium env whose episodes are a pure function of its seed: the same seed (and
    task source, config and package versions) gives the same observations, infos and
    rewards, byte for byte, on any machine.

    Constructor (a family's, which passes its task source): ``split`` is the split tasks
    are drawn from (``dev`` by default), ``max_turns`` the replies an episode allows (>= 1),
    ``render_mode`` None or ``"ansi"``; ``ValueError`` for anything else.

    ``reset(seed=..., options=...)`` draws a task from ``split`` with ``self.np_random``,
    or takes ``options["task_id"]`` (``options["split"]`` overrides the split), which may name
    an eval task's twin (``arithmetic/test/5~twin``, ``TaskSource.twin``) where the family
    makes twins. It returns
    the conversation so far (chat messages) and ``info``; raises ``ValueError`` for another
    option and ``UnknownTaskError`` for a task id (or split) this env does not have.

    ``step(action)`` takes the assistant's reply: a ``str`` (or a dict with a ``"content"``
    string; tool-calling families also read its ``"tool_calls"``). Bad *content* is never
    an exception: it is graded as a failure. It returns ``(observation, reward, terminated,
    truncated, info)``: ``reward`` is the final grade's score on the step that ends the
    episode and 0 before it, ``terminated`` is True once the env is done or ``max_turns``
    replies were made, and ``truncated`` is always False. It raises ``InvalidActionError``
    for an action of another type (the episode is left as it was) and
    ``EpisodeNotActiveError`` before ``reset`` or after the episode ended.

    ``info`` always holds ``task_id``, ``episode_id``, ``env_version``, ``fixture_sha256``,
    ``task_sha256``, ``split``, ``difficulty``, ``tags``, ``turn`` and ``max_turns``; on a
    step also ``grade`` (``Grade.to_dict``, on the step that ends the episode) or
    ``turn_grade`` (a graded earlier turn), ``tool_calls`` and ``tool_results`` (the calls
    the env parsed and what each returned), ``action_sanitized`` (the reply held text no
    JSON can carry, replaced by U+FFFD) and ``drop`` (``Drop.to_json``: the episode ran but
    cannot be scored normally). The first ``reset`` in a process checks the task data
    against the family's lock file (and the first that serves a twin, the twins):
    ``FixtureMismatchError`` when it drifted. A grader that
    crashes (our bug, never the reply's) raises ``GraderError`` from ``step``.
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi"]}  # noqa: RUF012 (gymnasium's API)
    family: ClassVar[str]
    env_version: ClassVar[str]
    #: Installed distributions (PyPI names) this env's grading depends on, beside those of
    #: its task source (``TaskSource.distributions``); see ``distributions``.
    grader_distributions: ClassVar[tuple[str, ...]] = ()

    #: Keyword arguments that bound the work one call may do (a sandbox's CPU seconds, rows
    #: shown): a server lets its clients narrow them, never widen them past their defaults,
    #: unless its operator allows it (``frostgym serve --allow-wider-limits``).
    limit_kwargs: ClassVar[frozenset[str]] = frozenset()

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        # One check of every argument against ``__init__``'s annotations, for every way an env
        # is made (``gym.make``, the CLI, a server): a wrong type is refused before any episode.
        check_env_arguments(cls, args, kwargs)
        return super().__new__(cls)

    @property
    def distributions(self) -> tuple[str, ...]:
        """Every installed distribution whose version can change this env's episodes or
        grades: its task source's and its grader's. Card provenance records these."""
        return tuple(sorted({*self.source.distributions, *self.grader_distributions}))

    def __init__(
        self,
        source: TaskSource,
        *,
        split: Split = "dev",
        max_turns: int = 1,
        render_mode: str | None = None,
    ) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']}, got {render_mode!r}")
        if max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {max_turns}")
        self.source = source
        self.split: Split = check_split(split)
        self.max_turns = max_turns
        self.render_mode = render_mode
        self.observation_space = ChatObservationSpace()
        self.action_space = TextActionSpace()
        self._task: Task | None = None
        self._messages: list[Message] = []
        self._episode_id = ""
        self._turn = 0
        self._done = True
        self._fixture_sha256: str | None = None

    @property
    def fixture_sha256(self) -> str:
        """Content hash of the task data this env serves, checked against the family's
        lock file once per process (``FixtureMismatchError`` on drift). Kept per env once
        known: every ``reset`` and ``step`` reports it, and the lookup's key is too slow to build per call."""
        if self._fixture_sha256 is None:
            self._fixture_sha256 = verified_fixture_sha256(self.lock_file, self.source)
        return self._fixture_sha256

    @property
    def lock_file(self) -> Path:
        """The lock file this env's task data is checked against: the package's
        ``fixtures/<family>/lock.json``. A family kept outside the package overrides this."""
        return package_lock_file(self.family)

    # -- what a family provides ------------------------------------------------------
    @abstractmethod
    def first_messages(self, task: Task) -> list[Message]:
        """The conversation the agent sees at reset."""

    @abstractmethod
    def respond(self, task: Task, text: str, turn: int, last_turn: bool) -> Reply:
        """Answer one assistant reply on ``turn`` (0-based)."""

    @abstractmethod
    def oracle_action(self) -> Action:
        """The gold action for the current step of the current episode."""

    def interrupt(self) -> None:
        """Ask a ``reset`` or ``step`` running on another thread to stop as soon as it can
        (a server calls it when a call ran past its deadline); that call then returns or
        raises at once, and this env is closed after it. Safe from any thread, and a no-op
        when nothing runs. The default does nothing: a family whose calls are bounded by
        their own limits needs nothing more; one that waits on outside work (a sandbox)
        overrides it to stop that work."""

    # -- the evaluation contract -------------------------------------------------------
    def contract(self) -> dict[str, Any]:
        """This env's part of a card's evaluation contract (``frostgym.cards.contract``):
        its turn limit, the value of each limit on the work one call may do
        (``contract_limits``) and the tools it offers, read-only or writing (``tool_access``)."""
        return {"max_turns": self.max_turns, "limits": self.contract_limits(), "tools": self.tool_access()}

    def contract_limits(self) -> dict[str, Any]:
        """Each of ``limit_kwargs`` with the value this env runs under, by name. A family
        whose limits are kept elsewhere, or bound by more than its arguments (a fixed
        deadline), overrides it; values are JSON scalars."""
        return {name: getattr(self, name) for name in sorted(self.limit_kwargs)}

    def tool_access(self) -> dict[str, Any]:
        """The tools this env can offer its tasks, by name: ``read_only`` (a call changes no
        state a later call or the grade sees) and ``writing`` (it does); a family decides
        each of its own (none by default). ``described_only`` (true) marks tools that are
        shown and graded but never run."""
        return {"read_only": [], "writing": []}

    # -- gymnasium API ---------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        super().reset(seed=seed)
        options = dict(options or {})
        unknown = set(options) - RESET_OPTIONS
        if unknown:
            raise ValueError(f"unknown reset options {sorted(unknown)}; allowed: {sorted(RESET_OPTIONS)}")
        split = check_split(options.get("split", self.split))
        task_id = options.get("task_id")
        if task_id is not None:
            task = self.source.task_by_id(task_id)
            if "split" in options and task.split != split:
                raise UnknownTaskError(f"task {task_id!r} is in split {task.split!r}, not {split!r}")
            if is_twin_id(task.task_id):
                verified_twins(self.lock_file, self.source)
        else:
            task = self.source.sample(split, self.np_random)
        # The episode id draws after the task so a fixed task_id still gives each seed its own id.
        self._episode_id = f"{derive_seed(self.family, task.task_id, draw_seed(self.np_random)):016x}"
        self._task = task
        self._messages = self.first_messages(task)
        self._turn = 0
        self._done = False
        return copy_messages(self._messages), self._info()

    def step(self, action: Action) -> tuple[Observation, SupportsFloat, bool, bool, dict[str, Any]]:
        if self._task is None or self._done:
            state = "before reset()" if self._task is None else "after the episode ended"
            raise EpisodeNotActiveError(f"step() called {state}; call reset() to start an episode")
        text, sanitized = self.coerce_action(action)
        last_turn = self._turn + 1 >= self.max_turns
        reply, unclean = _utf8_clean(self.respond(self._task, text, self._turn, last_turn))
        sanitized = sanitized or unclean
        self._messages.append(message("assistant", _for_history(text)))
        self._turn += 1
        self._done = reply.done or last_turn
        if reply.feedback is not None and not self._done:
            self._messages.append(reply.feedback)
        info = self._info()
        if sanitized:
            info["action_sanitized"] = True
        if reply.tool_calls:
            info["tool_calls"] = [dict(call) for call in reply.tool_calls]
            info["tool_results"] = [dict(result) for result in reply.tool_results]
        if reply.grade is not None:
            info["grade" if self._done else "turn_grade"] = reply.grade.to_dict()
        if reply.drop is not None:
            info["drop"] = reply.drop.to_json()
        reward = reply.grade.score if (self._done and reply.grade is not None) else 0.0
        return copy_messages(self._messages), float(reward), self._done, False, info

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        return "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in self._messages)

    # -- helpers shared by families --------------------------------------------------
    def coerce_action(self, action: Action) -> tuple[str, bool]:
        """The reply text, or ``InvalidActionError`` for a type no policy can emit."""
        if isinstance(action, (str, bytes)):
            return clean_text(action)
        if isinstance(action, dict) and isinstance(action.get("content"), str):
            return clean_text(action["content"])
        raise InvalidActionError(
            f"{type(self).__name__}.step expects the assistant reply as str "
            f"(or a dict with a 'content' string), got {type(action).__name__}"
        )

    @property
    def task(self) -> Task:
        if self._task is None:
            raise EpisodeNotActiveError("no episode: call reset() first")
        return self._task

    @property
    def episode_id(self) -> str:
        return self._episode_id

    @property
    def turn(self) -> int:
        return self._turn

    def _info(self) -> dict[str, Any]:
        task = self.task
        return {
            "task_id": task.task_id,
            "episode_id": self._episode_id,
            "env_version": self.env_version,
            "fixture_sha256": self.fixture_sha256,
            "task_sha256": task.sha256,
            "split": task.split,
            "difficulty": task.difficulty,
            "tags": list(task.tags),
            "turn": self._turn,
            "max_turns": self.max_turns,
        }


def _utf8_clean(reply: Reply) -> tuple[Reply, bool]:
    """``reply`` with every string it carries made UTF-8-clean (``clean_data``), and whether
    any was not. orjson checks the common case, text that is already clean, in about a
    microsecond; only data it refuses (a lone surrogate, or values it cannot write) is walked."""
    grade = reply.grade
    drop = reply.drop
    parts = (
        reply.feedback,
        reply.tool_calls,
        reply.tool_results,
        None if grade is None else grade.details,
        None if drop is None else drop.error,
    )
    try:
        orjson.dumps(parts)
        return reply, False
    except TypeError:  # orjson.JSONEncodeError is one
        pass
    cleaned, changed = clean_data(parts)
    if not changed:
        return reply, False
    feedback, tool_calls, tool_results, details, error = cleaned
    if grade is not None and details is not grade.details:
        grade = dataclasses.replace(grade, details=details)
    if drop is not None and error is not drop.error:
        drop = dataclasses.replace(drop, error=error)
    return (
        dataclasses.replace(
            reply, grade=grade, feedback=feedback, tool_calls=tool_calls, tool_results=tool_results, drop=drop
        ),
        True,
    )


def _for_history(text: str) -> str:
    if len(text) <= HISTORY_CHARS:
        return text
    return text[:HISTORY_CHARS] + f"\n[frostgym: reply truncated from {len(text):,} characters]"
