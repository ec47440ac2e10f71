"""The runner: plays a plan with one agent, fed the way the agent declares
(``frostgym.agents.base.Scheduling``).

A ``"batched"`` agent (an in-process model, a scripted policy) gets one call per turn with
the request of every live episode: one forward pass for all that are ready. A
``"per_request"`` agent (a model server) gets each episode's request on its own thread as
soon as the episode needs it, up to its ``concurrency`` in flight, and each episode steps
as soon as its own reply arrives: a slow reply holds only its own episode, never the
others, and the server's queue stays full. Either way, finished episodes are replaced
from the queue at once and committed to the sink as they end.
Each episode ends as exactly one outcome handed to the sink: an ``EpisodeRecord``
when it was scored, a ``DropRecord`` with its class, stage and traceback when it was
not. Nothing a single episode does (agent exception, grader bug, sandbox kill, replay
miss) stops the run.
"""

from __future__ import annotations

import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol, SupportsFloat

from frostgym.agents.base import Agent, AgentReply, AgentRequest, abort_agent, concurrency_of, scheduling_of
from frostgym.core.episode import (
    DROP_CLASSES,
    RETRYABLE,
    STAGES,
    Drop,
    DropClass,
    DropRecord,
    EpisodeRecord,
    ObservationDelta,
    Stage,
    StepRecord,
    drop_record,
    split_step_info,
    stored_action,
)
from frostgym.core.errors import BackendLostError
from frostgym.core.messages import Action, Observation, copy_messages
from frostgym.core.seeding import derive_seed
from frostgym.core.splits import Split
from frostgym.envs.registry import make_env
from frostgym.envs.specs import env_kwargs_for
from frostgym.run.plan import PlannedEpisode, make_plan
from frostgym.run.request_threads import RequestThreads

Outcome = EpisodeRecord | DropRecord
#: While a per-request run waits for replies, it commits the sink at least this often, so
#: what has ended reaches the card even while every request in flight hangs.
IDLE_COMMIT_SECONDS = 0.25


class EpisodeSink(Protocol):
    def add(self, outcome: Outcome) -> None:
        """Take one finished episode."""

    def commit(self) -> None:
        """A batch boundary: make everything added so far durable."""


@dataclass
class MemorySink:
    """Keeps outcomes in a list, in the order they ended: for library use, tests and the
    no-card baseline. ``episodes`` and ``drops`` split them by kind."""

    outcomes: list[Outcome] = field(default_factory=list)

    def add(self, outcome: Outcome) -> None:
        self.outcomes.append(outcome)

    def commit(self) -> None:
        pass

    @property
    def episodes(self) -> list[EpisodeRecord]:
        return [o for o in self.outcomes if isinstance(o, EpisodeRecord)]

    @property
    def drops(self) -> list[DropRecord]:
        return [o for o in self.outcomes if isinstance(o, DropRecord)]


class RunnerEnv(Protocol):
    """What the runner needs of an env: a ``FrozenEnv``, or a stand-in for one that lives
    elsewhere (``frostgym.run.ray_backend``). Tools, when offered, are ``env.tools``."""

    @property
    def turn(self) -> int: ...

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]: ...

    def step(self, action: Action) -> tuple[Observation, SupportsFloat, bool, bool, dict[str, Any]]: ...

    def oracle_action(self) -> Action: ...

    def close(self) -> None: ...


class EnvBackend(Protocol):
    """Where the runner's envs live. The runner's logic (batching, order, retries, drops)
    is the same for every backend; only env creation and the step fan-out differ."""

    def make_env(self, env_id: str, split: Split | str, env_kwargs: Mapping[str, Any]) -> RunnerEnv:
        """A fresh env; the runner resets it per episode and reuses it after a clean end."""

    def step_threads(self, workers: int) -> int:
        """Threads stepping the envs of one batch (``RunOptions.workers`` for local envs)."""


class LocalEnvs:
    """The default backend: envs in this process, stepped by ``workers`` threads."""

    def make_env(self, env_id: str, split: Split | str, env_kwargs: Mapping[str, Any]) -> RunnerEnv:
        return make_env(env_id, split, env_kwargs)

    def step_threads(self, workers: int) -> int:
        return workers


@dataclass(frozen=True)
class RunOptions:
    """How a plan is played. None of these changes an episode's content: the same plan
    gives the same records with any batch size, worker count or backend.

    ``split`` and ``env_kwargs`` are what every env is made with (``split`` may name several,
    comma-separated: envs are made on the first, and each episode plays its planned task);
    ``env_options`` maps an env id to arguments of its own, on top (a level, say: from
    ``--env 'ID[level=1]'``); ``batch_size`` the most
    episodes in flight (for a ``batched`` agent, the requests in one call; a ``per_request``
    agent also caps them at its ``concurrency``); ``workers`` the threads stepping envs of a
    batched turn in parallel (sandboxed code, tool I/O; a per-request episode steps on its
    request's thread); ``retries`` the extra attempts, from reset,
    of an episode whose drop class is ``RETRYABLE``; ``max_drops`` how many episodes may
    drop before the rest of the plan is ``cancelled`` (None: never). Raises ``ValueError``
    for a batch size or worker count below 1, or negative retries.
    """

    split: Split | str = "dev"
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    env_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    batch_size: int = 64  # most episodes in flight
    workers: int = 1  # threads stepping envs in parallel (sandboxed code, tool I/O)
    retries: int = 1  # extra attempts from reset for retryable drop classes
    max_drops: int | None = None  # cancel the rest of the plan once more episodes than this drop

    def __post_init__(self) -> None:
        if self.batch_size < 1 or self.workers < 1 or self.retries < 0:
            raise ValueError(f"invalid run options: {self}")

    def kwargs_for(self, env_id: str) -> dict[str, Any]:
        """The keyword arguments ``env_id`` is made with (``env_kwargs``, then its own)."""
        return env_kwargs_for(env_id, self.env_kwargs, self.env_options)


@dataclass(frozen=True)
class Failure:
    """How an attempt at an episode ended without a grade: its drop, and the traceback of
    the exception that ended it (None when none did)."""

    drop: Drop
    traceback: str | None = None
    #: False when trying the episode again could not help or would harm (a request that
    #: may still be at work on the server): then it drops at once, whatever ``retries`` says.
    retryable: bool = True


@dataclass
class _Attempt:
    planned: PlannedEpisode
    number: int = 1
    earlier_errors: list[str] = field(default_factory=list)


class _PlanQueue(deque[_Attempt]):
    """The attempts still to start: those queued again (a retry goes first:
    ``appendleft``), then the plan's entries not started yet, each taken from ``plan`` only
    when it is started. Why a ``deque`` that draws its plan lazily: the loops that start
    episodes take a deque, and queued whole, the attempts of a 1,000,000-episode plan held
    150 MB (and the plan itself 500 MB) for the run's length.

    Its truth is whether anything is left to start; ``len`` counts only the attempts queued
    again and the entry already drawn (how many the plan holds is not known ahead)."""

    def __init__(self, plan: Iterable[PlannedEpisode]) -> None:
        super().__init__()
        self._plan = iter(plan)
        self._next: _Attempt | None = None  # the plan's next entry, once drawn to answer ``bool``

    def _draw(self) -> _Attempt | None:
        if self._next is None:
            planned = next(self._plan, None)
            self._next = None if planned is None else _Attempt(planned)
        return self._next

    def __bool__(self) -> bool:
        return super().__len__() > 0 or self._draw() is not None

    def __len__(self) -> int:
        return super().__len__() + (self._next is not None)

    def popleft(self) -> _Attempt:
        if super().__len__():
            return super().popleft()
        attempt = self._draw()
        if attempt is None:
            raise IndexError("pop from an empty deque")
        self._next = None
        return attempt


@dataclass
class _Live:
    attempt: _Attempt
    env: RunnerEnv
    record: EpisodeRecord
    observation: Observation
    started: float


def _close_env(item: _Live) -> None:
    """Free an episode abandoned while its request was out, once that request returns."""
    item.env.close()


def env_drop(steps: list[StepRecord]) -> Drop | None:
    """The first drop an env declared in a step's ``info["drop"]`` (``Reply.drop``); an
    ``info["drop"]`` that is not a drop (a foreign env's) is not one."""
    for step in steps:
        if "drop" in step.info:
            try:
                return Drop.from_json(step.info["drop"])
            except ValueError:
                continue
    return None


def failure_of(error: BaseException, stage: Stage, default: DropClass) -> Failure:
    """How ``error``, raised at ``stage``, ends an episode: the ``drop_class`` and ``stage``
    it declares (``FrostgymError``; any exception may carry them), else ``default`` and
    ``stage``; the error's first line, and its traceback."""
    declared = getattr(error, "drop_class", None)
    drop_class: DropClass = declared if declared in DROP_CLASSES else default
    at = getattr(error, "stage", None)
    drop = Drop(drop_class, at if at in STAGES else stage, f"{type(error).__name__}: {error}")
    return Failure(drop, "".join(traceback.format_exception(error)).strip())


def run_plan(
    plan: Iterable[PlannedEpisode],
    agent: Agent,
    sink: EpisodeSink,
    options: RunOptions | None = None,
    *,
    skip: Mapping[str, str] | None = None,
    on_outcome: Callable[[Outcome], None] | None = None,
    envs: EnvBackend | None = None,
) -> None:
    """Play every planned episode with ``agent`` and hand each outcome to ``sink`` (an
    ``EpisodeRecord`` when it was scored, a ``DropRecord`` when it was not), committing the
    sink at each batch boundary. ``plan`` is taken an entry at a time as episodes start
    (a list, or a ``PlanFile`` read back from its file: nothing of it is held), and gone
    through once more first when there is a ``skip``, which maps plan ids to a reason: those
    are recorded as ``skipped`` drops without running, before any episode starts.
    ``on_outcome`` is called with each outcome after the sink took it. ``envs`` is where
    the envs live (default: this process, ``LocalEnvs``).

    Nothing one episode does stops the run: an agent or env exception, a grader bug, a
    sandbox kill or a replay miss becomes that episode's drop (``Drop``, with the
    traceback), retried first when ``options.retries`` allows. What does stop it is raised:
    an exception from ``sink`` (a full disk), from ``on_outcome``, ``KeyboardInterrupt``, or
    ``BackendLostError`` from the backend (its episodes under way are not recorded, so a
    resume plays them); every env is closed first."""
    options = options or RunOptions()
    envs = envs or LocalEnvs()
    _Run(agent, sink, options, on_outcome, envs).run(plan, skip or {})


class _Run:
    def __init__(
        self,
        agent: Agent,
        sink: EpisodeSink,
        options: RunOptions,
        on_outcome: Callable[[Outcome], None] | None,
        envs: EnvBackend,
    ) -> None:
        self.agent = agent
        self.sink = sink
        self.options = options
        self.on_outcome = on_outcome
        self.envs = envs
        self.free_envs: dict[str, list[RunnerEnv]] = {}
        self.dropped = 0
        threads = envs.step_threads(options.workers)
        self.pool = ThreadPoolExecutor(threads) if threads > 1 else None

    def run(self, plan: Iterable[PlannedEpisode], skip: Mapping[str, str]) -> None:
        if skip:
            for planned in plan:
                if planned.plan_id in skip:
                    self.drop(_Attempt(planned), Failure(Drop("skipped", "runner", skip[planned.plan_id])), None)
        queue = _PlanQueue(p for p in plan if p.plan_id not in skip) if skip else _PlanQueue(plan)
        self.sink.commit()
        if scheduling_of(self.agent) == "per_request":
            self.run_per_request(queue)
            return
        live: list[_Live] = []
        try:
            while queue or live:
                while queue and len(live) < self.options.batch_size:
                    started = self.start(queue.popleft(), queue)
                    if started is not None:
                        live.append(started)
                if live:
                    live = self.turn(live, queue)
                self.sink.commit()
                if self.options.max_drops is not None and self.dropped > self.options.max_drops:
                    self.cancel(live, queue)
                    live = []
                    self.sink.commit()
        finally:
            for item in live:
                item.env.close()
            self.close()

    def run_per_request(self, queue: deque[_Attempt]) -> None:
        """Each episode on its own: its request goes out as soon as it needs one (up to the
        agent's ``concurrency`` and ``batch_size`` episodes in flight), and it steps on the
        request's thread as soon as its reply arrives; the main thread starts episodes,
        files what ended, and commits the sink after each round of replies."""
        limit = min(self.options.batch_size, concurrency_of(self.agent, self.options.batch_size))
        requests: RequestThreads[_Live, Failure | StepRecord] = RequestThreads(limit, self.request_and_step, _close_env)
        in_flight: dict[int, _Live] = {}  # by id(): an episode is in flight at most once
        try:
            while queue or in_flight:
                while queue and len(in_flight) < limit:
                    started = self.start(queue.popleft(), queue)
                    if started is not None:
                        in_flight[id(started)] = started
                        requests.submit(started)
                if not in_flight:
                    continue
                for item, result in requests.results(timeout=IDLE_COMMIT_SECONDS):
                    if in_flight.pop(id(item), None) is None:  # cancelled while its request was out
                        item.env.close()
                        continue
                    if isinstance(result, BaseException):
                        raise result
                    if self.settle(item, result, queue):
                        in_flight[id(item)] = item
                        requests.submit(item)
                self.sink.commit()
                if self.options.max_drops is not None and self.dropped > self.options.max_drops:
                    self.cancel_in_flight(in_flight, queue)
                    self.sink.commit()
        except BaseException:  # Ctrl-C, a lost backend, a full disk: no request outlives the run
            abort_agent(self.agent)
            raise
        finally:
            requests.stop()  # the envs of episodes still in flight close as their requests return
            self.close()

    def close(self) -> None:
        """At the run's end: close the envs waiting for reuse and stop the step threads."""
        for envs in self.free_envs.values():
            for env in envs:
                env.close()
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)

    def request_and_step(self, item: _Live) -> Failure | StepRecord:
        """One turn of one episode, on a request thread: the agent's reply to its request,
        then the env's step (what a lost backend raises is raised)."""
        request = self.request(item)
        began = time.perf_counter()
        try:
            replies = self.agent.act([request])
            if len(replies) != 1:
                raise RuntimeError(f"agent returned {len(replies)} replies for 1 request")
        except BackendLostError:
            raise
        except Exception as error:
            return failure_of(error, "agent", "agent_error")
        return self.step(item, request, replies[0], time.perf_counter() - began)

    def cancel_in_flight(self, in_flight: dict[int, _Live], queue: deque[_Attempt]) -> None:
        """``cancel`` for episodes whose request may still be out: each is filed as cancelled
        now, with the steps it had (a copy: its request may still add one), and its env is
        closed once its request returns."""
        for item in in_flight.values():
            item.record.steps = list(item.record.steps)
        self.cancel(list(in_flight.values()), queue, close=False)
        in_flight.clear()

    # -- one episode's life ------------------------------------------------------------
    def start(self, attempt: _Attempt, queue: deque[_Attempt]) -> _Live | None:
        planned = attempt.planned
        began = time.time()
        try:
            free = self.free_envs.setdefault(planned.env_id, [])
            env = (
                free.pop()
                if free
                else self.envs.make_env(planned.env_id, self.options.split, self.options.kwargs_for(planned.env_id))
            )
        except BackendLostError:
            raise
        except Exception as error:
            self.fail(attempt, failure_of(error, "env", "infra_error"), None, queue)
            return None
        try:
            observation, info = env.reset(seed=planned.seed, options={"task_id": planned.task_id})
        except BackendLostError:
            env.close()
            raise
        except Exception as error:
            env.close()
            self.fail(attempt, failure_of(error, "reset", "infra_error"), None, queue)
            return None
        record = EpisodeRecord(
            plan_id=planned.plan_id,
            episode_id=info["episode_id"],
            env_id=planned.env_id,
            task_id=info["task_id"],
            sample=planned.sample,
            split=info["split"],
            difficulty=info["difficulty"],
            tags=list(info["tags"]),
            seed=planned.seed,
            seed_derivation=list(planned.seed_derivation),
            env_version=info["env_version"],
            fixture_sha256=info["fixture_sha256"],
            task_sha256=info["task_sha256"],
            observation=copy_messages(observation),
            attempts=attempt.number,
            started_at=began,
            reward=0.0,
            grade=None,
            wall_seconds=0.0,
            steps=[],
        )
        return _Live(attempt, env, record, observation, time.perf_counter())

    def turn(self, live: list[_Live], queue: deque[_Attempt]) -> list[_Live]:
        """One batched agent call for every live episode, then one env step each."""
        requests = [self.request(item) for item in live]
        began = time.perf_counter()
        try:
            replies = self.agent.act(requests)
            if len(replies) != len(requests):
                raise RuntimeError(f"agent returned {len(replies)} replies for {len(requests)} requests")
        except BackendLostError:  # an oracle read from envs whose backend is gone
            raise
        except Exception as error:  # the whole batch failed: every episode in it did
            failure = failure_of(error, "agent", "agent_error")
            for item in live:
                self.fail(item.attempt, failure, item, queue)
            return []
        agent_seconds = (time.perf_counter() - began) / len(requests)
        stepping = list(zip(live, requests, replies, strict=True))

        def step(job: tuple[_Live, AgentRequest, AgentReply]) -> Failure | StepRecord:
            return self.step(job[0], job[1], job[2], agent_seconds)

        results: Iterable[Failure | StepRecord] = (
            self.pool.map(step, stepping) if self.pool is not None else [step(job) for job in stepping]
        )
        return [
            item for (item, _, _), result in zip(stepping, results, strict=True) if self.settle(item, result, queue)
        ]

    def settle(self, item: _Live, result: Failure | StepRecord, queue: deque[_Attempt]) -> bool:
        """File what one step of a live episode gave (a failure, or its end); whether the
        episode goes on."""
        if isinstance(result, Failure):
            self.fail(item.attempt, result, item, queue)
        elif result.terminated or result.truncated:
            self.finish(item)
        else:
            return True
        return False

    def request(self, item: _Live) -> AgentRequest:
        """The agent's request for the next action of a live episode."""
        return AgentRequest(
            observation=copy_messages(item.observation),
            episode_id=item.record.episode_id,
            turn=item.env.turn,
            seed=derive_seed("agent", item.record.seed, item.env.turn),
            oracle=item.env.oracle_action,
            tools=getattr(item.env, "tools", None),
        )

    def step(self, item: _Live, request: AgentRequest, reply: AgentReply, agent_seconds: float) -> Failure | StepRecord:
        if reply.drop is not None:
            return Failure(reply.drop, retryable=reply.retryable)
        began = time.perf_counter()
        try:
            observation, reward, terminated, truncated, info = item.env.step(reply.action)
        except BackendLostError:
            raise
        except Exception as error:
            return failure_of(error, "step", "infra_error")
        rest, calls, results, grade = split_step_info(info)
        action, action_stored = stored_action(reply.action)
        steps = item.record.steps
        tokens = None if reply.tokens is None else reply.tokens.following(steps[-1].tokens if steps else None)
        step = StepRecord(
            turn=request.turn,
            agent_seed=request.seed,
            action=action,
            agent=reply.trace(),
            tool_calls=calls,
            tool_results=results,
            grade=grade,
            reward=float(reward),
            terminated=terminated,
            truncated=truncated,
            info=rest,
            observation=ObservationDelta.between(item.observation, observation),
            agent_seconds=agent_seconds,
            env_seconds=time.perf_counter() - began,
            action_stored=action_stored,
            tokens=tokens,
        )
        item.record.steps.append(step)
        item.record.reward += step.reward
        item.observation = observation
        if terminated or truncated:
            item.record.grade = grade
        return step

    def finish(self, item: _Live) -> None:
        item.record.wall_seconds = time.perf_counter() - item.started
        self.free_envs.setdefault(item.record.env_id, []).append(item.env)
        declared = env_drop(item.record.steps)
        if declared is not None:  # it ran to the end, but cannot be scored normally
            self.drop(item.attempt, Failure(declared), item)
            return
        self.emit(item.record)

    def fail(self, attempt: _Attempt, failure: Failure, item: _Live | None, queue: deque[_Attempt]) -> None:
        drop = failure.drop
        if item is not None:
            if drop.stage == "agent":  # the env is fine; a broken env is not reused
                self.free_envs.setdefault(item.record.env_id, []).append(item.env)
            else:
                item.env.close()
        if failure.retryable and drop.drop_class in RETRYABLE and attempt.number <= self.options.retries:
            queue.appendleft(_Attempt(attempt.planned, attempt.number + 1, [*attempt.earlier_errors, drop.error]))
            return
        self.drop(attempt, failure, item)

    def drop(self, attempt: _Attempt, failure: Failure, item: _Live | None) -> None:
        planned = attempt.planned
        self.dropped += failure.drop.counted_as == "failure"
        record = item.record if item is not None else None
        self.emit(
            drop_record(
                planned,
                failure.drop,
                traceback=failure.traceback,
                attempts=attempt.number,
                earlier_errors=attempt.earlier_errors,
                episode_id=None if record is None else record.episode_id,
                observation=[] if record is None else record.observation,
                steps=[] if record is None else record.steps,
                started_at=time.time() if record is None else record.started_at,
                wall_seconds=0.0 if item is None else time.perf_counter() - item.started,
            )
        )

    def cancel(self, live: list[_Live], queue: deque[_Attempt], *, close: bool = True) -> None:
        """File the live episodes and the queue as cancelled (``max_drops``), closing the
        live episodes' envs unless ``close`` is False (their caller closes them later)."""
        reason = f"run cancelled: more than max_drops={self.options.max_drops} episodes dropped"
        for item in live:
            if close:
                item.env.close()
            self.drop(item.attempt, Failure(Drop("cancelled", "runner", reason)), item)
        while queue:
            self.drop(queue.popleft(), Failure(Drop("cancelled", "runner", reason)), None)

    def emit(self, outcome: Outcome) -> None:
        self.sink.add(outcome)
        if self.on_outcome is not None:
            self.on_outcome(outcome)


def evaluate(
    env_ids: Sequence[str],
    agent: Agent,
    *,
    episodes: int | None,
    samples: int = 1,
    seed: int = 0,
    options: RunOptions | None = None,
    envs: EnvBackend | None = None,
) -> MemorySink:
    """Plan ``episodes`` tasks of each env in ``env_ids`` (every task of a finite split when
    None) times ``samples``, seeded from ``seed``, play the plan with ``agent`` and return
    the outcomes in memory, without a card: for library use and quick checks. ``options``
    and ``envs`` as in ``run_plan``. Raises ``ValueError`` for what no plan can hold
    (episodes or samples below 1, a negative seed, an env id twice, more episodes than a
    finite split has), gymnasium's ``UnregisteredEnv`` for an unknown env id, and what
    ``run_plan`` lets through."""
    options = options or RunOptions()
    plan = make_plan(
        env_ids,
        split=options.split,
        episodes=episodes,
        samples=samples,
        seed=seed,
        env_kwargs=options.env_kwargs,
        env_options=options.env_options,
    )
    sink = MemorySink()
    run_plan(plan, agent, sink, options, envs=envs)
    return sink
