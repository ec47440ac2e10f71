"""What a long ``frostgym eval`` shows while it works: episodes done, tokens generated,
tokens/s, time elapsed and an estimate of the time left, and a line at each end of a
slow phase (converting the embedded model, loading weights) with its duration.

Why: a model run can go minutes between finished episodes (every episode of a batch
finishes when the batch's last reply is generated), and the first run on a machine
converts the embedded model before anything is played, so a display fed only by finished
episodes looks hung. So tokens are counted as they are generated (the agent's
``on_tokens``, ``frostgym.agents.base.CountsTokens``), and where the output is not a
terminal (a log, CI, ``make eval | tee``), where a rich bar prints nothing until it ends,
a plain line is printed every ``interval_s()`` seconds instead:
``episodes 3/48 · 20 replies · 1,204 tokens · 9.8 tok/s · 2m03s elapsed · ~28m left``.
Replies are counted too (each batch's, as it is done), so the estimate need not wait for a
whole batch of episodes to finish. A slow phase
prints the same kind of heartbeat, with the CPU time the process has used: a number that
grows says it is working, not stuck.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TextColumn
from rich.text import Text

from frostgym.agents.base import Agent, CountsTokens
from frostgym.agents.sampling import SamplingParams

#: Seconds between two plain lines when the output is not a terminal; the environment
#: variable overrides it (a positive number of seconds).
INTERVAL_ENV = "FROSTGYM_PROGRESS_SECONDS"
DEFAULT_INTERVAL_S = 5.0
#: How often a terminal's spinner and bar are redrawn.
TERMINAL_TICK_S = 1.0
SEP = " \N{MIDDLE DOT} "

T = TypeVar("T")


def interval_s() -> float:
    """Seconds between plain progress lines: ``$FROSTGYM_PROGRESS_SECONDS``, else 5."""
    try:
        value = float(os.environ.get(INTERVAL_ENV, ""))
    except ValueError:
        return DEFAULT_INTERVAL_S
    return value if value > 0 and math.isfinite(value) else DEFAULT_INTERVAL_S


class TokenMeter:
    """The tokens an agent has generated and the replies it has finished, added to from any
    thread (``add`` is its ``on_tokens``); ``counting`` says whether an agent is wired to it
    (``load_agent``), so a display of an agent that counts nothing (the oracle) shows no
    tokens rather than 0 tokens/s."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0
        self._replies = 0
        self.counting = False

    def reset(self) -> None:
        with self._lock:
            self._count = self._replies = 0
            self.counting = False

    def add(self, tokens: int, replies: int = 0) -> None:
        with self._lock:
            self._count += tokens
            self._replies += replies

    @property
    def count(self) -> int:
        with self._lock:
            return self._count

    @property
    def replies(self) -> int:
        with self._lock:
            return self._replies


def duration(seconds: float) -> str:
    """``45s``, ``2m03s``, ``1h02m``: how long something took, to the second."""
    whole = max(0, int(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def estimate(seconds: float) -> str:
    """``~40s``, ``~28m``, ``~2h05m``: a time left, rounded up (an estimate is no better)."""
    whole = max(1, math.ceil(seconds))
    if whole < 60:
        return f"~{whole}s"
    if whole < 3600:
        return f"~{math.ceil(whole / 60)}m"
    minutes = math.ceil(whole / 60)
    return f"~{minutes // 60}h{minutes % 60:02d}m"


class RunProgress:
    """The progress of one run: hand ``on_plan`` and ``on_outcome`` to the runner, and
    ``tokens`` (the meter the agent's ``on_tokens`` adds to; None for agents that count
    none, such as the oracle) is read while the run goes on.

    Used as a context manager around the run: in a terminal, a rich bar with the same
    figures; elsewhere a plain line when the plan is known, every ``interval`` seconds,
    and at the end. The estimate is the time per episode finished in this session so far,
    times the episodes left. Before any has finished (the episodes of a batch finish
    together) it is the time per reply so far times the episodes no reply has reached yet,
    as if each took one turn (until an episode has finished, nothing says how many)."""

    def __init__(self, console: Console, tokens: TokenMeter | None = None, *, interval: float | None = None) -> None:
        self.console = console
        self.tokens = tokens
        self.interval = interval_s() if interval is None else interval
        self.total: int | None = None
        self.done = 0
        self._done_before = 0
        self._tokens_before = 0 if tokens is None else tokens.count
        self._replies_before = 0 if tokens is None else tokens.replies
        self._started = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._bar: Progress | None = None

    # -- the runner's hooks -------------------------------------------------------------

    def on_plan(self, total: int, done: int) -> None:
        """The plan is on disk: ``total`` episodes, ``done`` of them by earlier sessions."""
        with self._lock:
            self.total, self.done, self._done_before = total, done, done
            self._started = time.monotonic()
        if self._bar is not None:
            self._bar.update(self._bar.task_ids[0], total=total, completed=done)
        else:
            self._print_line()

    def on_outcome(self, _outcome: Any) -> None:
        with self._lock:
            self.done += 1
        if self._bar is not None:
            self._bar.advance(self._bar.task_ids[0])

    # -- what is shown -----------------------------------------------------------------

    def figures(self, now: float | None = None) -> str:
        """Everything but the episode count:
        ``20 replies · 1,204 tokens · 9.8 tok/s · 2m03s elapsed · ~28m left``."""
        now = time.monotonic() if now is None else now
        with self._lock:
            total, done, before, started = self.total, self.done, self._done_before, self._started
        elapsed = max(0.0, now - started)
        parts = []
        replies = 0
        if self.tokens is not None:
            tokens = self.tokens.count - self._tokens_before
            replies = self.tokens.replies - self._replies_before
            parts.append(f"{replies:,} replies")
            parts.append(f"{tokens:,} tokens")
            parts.append(f"{tokens / elapsed:.1f} tok/s" if elapsed > 0 else "0.0 tok/s")
        parts.append(f"{duration(elapsed)} elapsed")
        if total is None:
            pass
        elif done >= total:
            parts.append("done")
        elif done > before:
            parts.append(f"{estimate(elapsed / (done - before) * (total - done))} left")
        elif replies > 0:  # a batch under way: as if each episode took one reply
            unanswered = total - done - replies
            parts.append(
                f"{estimate(elapsed / replies * unanswered)} left"
                if unanswered > 0
                else "estimate after the first episode"
            )
        else:
            parts.append(
                "estimate after the first reply" if self.tokens is not None else "estimate after the first episode"
            )
        return SEP.join(parts)

    def line(self, now: float | None = None) -> str:
        """The plain line: ``episodes 3/48 · 20 replies · 1,204 tokens · 9.8 tok/s · 2m03s elapsed · ~28m left``."""
        with self._lock:
            total, done = self.total, self.done
        return f"episodes {done}/{'?' if total is None else total}{SEP}{self.figures(now)}"

    def _print_line(self) -> None:
        self.console.print(escape(self.line()), highlight=False, soft_wrap=True)

    # -- the display -------------------------------------------------------------------

    def __enter__(self) -> RunProgress:
        if self.console.is_terminal:
            self._bar = Progress(
                TextColumn("episodes"),
                BarColumn(),
                MofNCompleteColumn(),
                _Figures(self),
                console=self.console,
                refresh_per_second=1 / TERMINAL_TICK_S,
            )
            self._bar.add_task("episodes", total=None)
            self._bar.__enter__()
        else:
            self._thread = threading.Thread(target=self._heartbeat, name="frostgym-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            if self.total is not None:  # the last figures, however the run ended
                self._print_line()
        if self._bar is not None:
            self._bar.__exit__(None, None, None)

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.interval):
            if self.total is not None:  # before the plan is on disk there is nothing to count
                self._print_line()


class _Figures(ProgressColumn):
    """The bar's column of tokens, tokens/s, elapsed and estimate (``RunProgress.figures``)."""

    def __init__(self, progress: RunProgress) -> None:
        super().__init__()
        self.progress = progress

    def render(self, task: Task) -> Text:
        return Text(self.progress.figures())


@contextmanager
def phase(
    console: Console, doing: str, done: str, *, short: str | None = None, interval: float | None = None
) -> Iterator[None]:
    """A slow step that says nothing of its own (converting a model, loading weights):
    ``doing...`` at its start, ``done in 12.3s`` at its end (or ``short: failed after
    3.2s``), and in between, every ``interval`` seconds when the output is not a terminal,
    ``short: still working, 45s elapsed, 38s of CPU time`` (``short`` is ``doing`` unless
    given); a spinner with the same words in a terminal."""
    short = doing if short is None else short
    every = interval_s() if interval is None else interval
    started, cpu = time.monotonic(), time.process_time()
    stop = threading.Event()

    def working() -> str:
        return (
            f"{short}: still working, {duration(time.monotonic() - started)} elapsed, "
            f"{duration(time.process_time() - cpu)} of CPU time"
        )

    console.print(escape(f"{doing}..."), highlight=False, soft_wrap=True)
    status = console.status(escape(working())) if console.is_terminal else None

    def beat() -> None:
        while not stop.wait(TERMINAL_TICK_S if status is not None else every):
            if status is not None:
                status.update(escape(working()))
            else:
                console.print(escape(working()), highlight=False, soft_wrap=True)

    ticker = threading.Thread(target=beat, name="frostgym-phase", daemon=True)
    if status is not None:
        status.start()
    ticker.start()
    try:
        yield
    except BaseException:
        stop.set()
        ticker.join()
        if status is not None:
            status.stop()
        console.print(
            escape(f"{short}: failed after {time.monotonic() - started:.1f}s"), highlight=False, soft_wrap=True
        )
        raise
    stop.set()
    ticker.join()
    if status is not None:
        status.stop()
    console.print(escape(f"{done} in {time.monotonic() - started:.1f}s"), highlight=False, soft_wrap=True)


def timed(console: Console, doing: str, done: str, work: Callable[[], T], *, short: str | None = None) -> T:
    """``work()`` inside ``phase(console, doing, done, short=short)``: what it returns."""
    with phase(console, doing, done, short=short):
        return work()


def load_agent(
    console: Console,
    spec: str,
    meter: TokenMeter,
    *,
    sampling: SamplingParams,
    seed: int = 0,
    batch_size: int = 16,
    request_timeout_s: float | None = None,
    concurrency: int = 16,
    adaptive_concurrency: bool = True,
    token_ids: bool = False,
) -> Agent:
    """``make_agent(spec, ...)``, saying what it does while it does it: converting the
    embedded model's GGUF file (its first use on a machine) and loading a model's weights
    are phases (``phase``). ``meter`` is reset, and when the agent counts the tokens it
    generates (``CountsTokens``) its ``on_tokens`` adds to ``meter``, which is then
    ``counting``."""
    from frostgym.agents.spec import make_agent

    def make() -> Agent:
        return make_agent(
            spec,
            seed=seed,
            sampling=sampling,
            batch_size=batch_size,
            request_timeout_s=request_timeout_s,
            concurrency=concurrency,
            adaptive_concurrency=adaptive_concurrency,
            token_ids=token_ids,
        )

    if spec == "smollm2":
        from frostgym.agents.smollm2 import MODEL_NAME, ensure_converted, gguf_file, needs_conversion

        if needs_conversion():
            timed(
                console,
                f"converting {MODEL_NAME} from {gguf_file().name} to safetensors (first use on this machine only)",
                f"converted {MODEL_NAME}",
                ensure_converted,
                short=f"converting {MODEL_NAME}",
            )
        agent = timed(console, f"loading {MODEL_NAME}'s weights", f"loaded {MODEL_NAME}", make)
    elif spec.startswith("hf:"):
        agent = timed(console, f"loading the model in {spec[3:]}", "loaded the model", make)
    else:
        agent = make()
    meter.reset()
    if isinstance(agent, CountsTokens):
        agent.on_tokens = meter.add
        meter.counting = True
    return agent
