"""How many requests a model-server agent keeps in flight: a limit that adapts to the server.

Why: a server's capacity is not known in advance. One that generates one request at a time
(``transformers serve``, a small llama.cpp) queues whatever else is sent, and the queued
requests run into their deadlines while the server still works on them: generations
wasted, and a retry storm if they were sent again. A batching server (vLLM, SGLang) is
wasted unless enough requests keep its batch full. So the limit is found, not set.

The rule (additive increase, multiplicative decrease, as TCP and Netflix's
concurrency-limits do it), between 1 and the ``maximum`` the user gave (``--concurrency``):

- **Slow start.** The limit begins at 1 and grows by one per reply that comes back while the
  limit is in use (doubling every round trip), until the first sign of congestion; after
  that by one per round trip (``1/limit`` per reply).
- **Latency.** Each reply's seconds per generated token (the server's own
  ``completion_tokens``; the whole latency when it reports none) is compared with the
  lowest the run has seen (the server's cost without a queue; it drifts up slowly so a
  changed load can be relearned). A reply over ``CONGESTED_RATIO`` times that baseline,
  and also ``MIN_QUEUE_S`` over it in seconds, waited in a queue at the server: the limit
  does not grow on it. When every one of the last replies (``LATENCY_WINDOW``, or a
  quarter of the limit when that is more) queued, the queue is standing: the limit is
  multiplied by ``LATENCY_DECREASE``. Every one, not most: a queue slows every reply, a
  straggler (a long generation) only its own.
- **The deadline.** A reply that took over half of its request's deadline also shrinks the
  limit by ``LATENCY_DECREASE``: the next ones would otherwise time out in the queue, and a
  timed-out request is a generation wasted. So a one-at-a-time server
  settles at one or two requests in flight; a batching server whose cost per token rises
  less than the ratio with its batch is filled up to ``maximum`` (for one that slows more,
  ``--fixed-concurrency`` keeps ``maximum`` in flight).
- **Overload.** A 429 or 503, or a request that ran out its deadline, halves the limit, and
  a ``Retry-After`` holds every new request until it has passed.
- At most one decrease per round trip (``limit`` replies), so one burst is one signal.

The limit's history, one point per change, is what the agent's ``describe()`` puts on the
card. Thread-safe: the request threads call ``acquire`` and ``release``.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Literal

#: Fewest replies that must all have queued for the limit to shrink (a quarter of the
#: limit when that is more: more replies in flight, more chances for a fixed cost per
#: request, the network's and the env's, to inflate a short reply's cost per token).
LATENCY_WINDOW = 3
#: Cost per token over the baseline above which a reply is taken to have queued.
CONGESTED_RATIO = 1.5
#: Seconds a reply must also have waited over its no-queue cost to count as queued: less is
#: the jitter of a loaded machine (threads, the GIL, the network), not a queue at the server.
MIN_QUEUE_S = 0.05
LATENCY_DECREASE = 0.75
OVERLOAD_DECREASE = 0.5
#: The baseline's drift up per reply (1% per 10 replies), so it follows a changed load.
BASELINE_DRIFT = 1.001
#: Points kept of the limit's history; past it, every other point is dropped.
MAX_TRACE_POINTS = 512

Outcome = Literal["ok", "overloaded", "timed_out", "failed"]


class ConcurrencyLimit:
    """The number of requests allowed in flight: fixed at ``maximum`` when ``adaptive`` is
    False, else adapted between 1 and ``maximum`` by the rule in the module docstring.

    ``acquire`` waits for a free place (False once ``close`` was called: send nothing);
    every acquire is matched by one ``release`` with what became of the request."""

    def __init__(
        self,
        maximum: int,
        *,
        adaptive: bool = True,
        deadline_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if maximum < 1:
            raise ValueError(f"concurrency must be at least 1, got {maximum}")
        self.maximum = maximum
        self.deadline_s = deadline_s
        self.adaptive = adaptive
        self._clock = clock
        self._limit = 1.0 if adaptive else float(maximum)
        self._slow_start = adaptive
        self._in_flight = 0
        self._closed = False
        self._hold_until = 0.0
        self._baseline: float | None = None
        self._recent: deque[bool] = deque(maxlen=max(LATENCY_WINDOW, maximum // 4))  # whether each queued
        self._since_decrease = 0
        self._started = clock()
        self._trace: list[tuple[float, int]] = [(0.0, int(self._limit))]
        self._reached = int(self._limit)
        self._changed = threading.Condition()

    @property
    def limit(self) -> int:
        return max(1, int(self._limit))

    def acquire(self) -> bool:
        with self._changed:
            while not self._closed:
                wait = self._hold_until - self._clock()
                if wait > 0:
                    self._changed.wait(wait)
                elif self._in_flight < self.limit:
                    self._in_flight += 1
                    return True
                else:
                    self._changed.wait()
            return False

    def release(
        self,
        outcome: Outcome,
        latency_s: float | None = None,
        tokens: int | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        """Give the place back, and adapt the limit to what the request met: ``"ok"`` (a
        reply, with its latency and completion tokens), ``"overloaded"`` (429/503, with the
        server's ``Retry-After`` if any), ``"timed_out"`` (its deadline passed), or
        ``"failed"`` (anything else: no signal about the server's load)."""
        with self._changed:
            self._in_flight -= 1
            if self.adaptive:
                self._adapt(outcome, latency_s, tokens, retry_after_s)
            self._changed.notify_all()

    def close(self) -> None:
        """Wake every waiter with False; no place is given after this."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def describe(self) -> dict[str, object]:
        """For the card: the mode, the bounds, the highest limit reached, and the limit's
        history as ``[seconds since the agent was made, limit]`` points."""
        with self._changed:
            return {
                "adaptive": self.adaptive,
                "maximum": self.maximum,
                "reached": self._reached,
                "trace": [[round(t, 3), n] for t, n in self._trace],
            }

    # -- the rule ----------------------------------------------------------------------------
    def _adapt(
        self, outcome: Outcome, latency_s: float | None, tokens: int | None, retry_after_s: float | None
    ) -> None:
        self._since_decrease += 1
        if outcome in ("overloaded", "timed_out"):
            if retry_after_s:
                self._hold_until = max(self._hold_until, self._clock() + retry_after_s)
            self._decrease(OVERLOAD_DECREASE)
            return
        if outcome != "ok" or latency_s is None:
            return
        cost = latency_s / tokens if tokens else latency_s
        self._baseline = cost if self._baseline is None else min(cost, self._baseline * BASELINE_DRIFT)
        waited = latency_s - self._baseline * (tokens or 1)  # over what the reply costs with no queue
        queued = cost > CONGESTED_RATIO * self._baseline and waited > MIN_QUEUE_S
        self._recent.append(queued)
        window = max(LATENCY_WINDOW, self.limit // 4)
        near_deadline = self.deadline_s is not None and latency_s > self.deadline_s / 2
        if near_deadline or (len(self._recent) >= window and all(list(self._recent)[-window:])):
            self._decrease(LATENCY_DECREASE)
        elif not queued and self._in_flight + 1 >= self._limit / 2:  # unqueued, the limit in use
            self._set(self._limit + (1.0 if self._slow_start else 1.0 / self._limit))

    def _decrease(self, factor: float) -> None:
        self._slow_start = False
        if self._since_decrease < self._limit:  # one decrease per round trip
            return
        self._since_decrease = 0
        self._recent.clear()
        self._set(max(1.0, self._limit * factor))

    def _set(self, value: float) -> None:
        before = self.limit
        self._limit = min(float(self.maximum), value)
        if self.limit != before:
            self._reached = max(self._reached, self.limit)
            self._trace.append((self._clock() - self._started, self.limit))
            if len(self._trace) > MAX_TRACE_POINTS:
                self._trace = [*self._trace[:-1:2], self._trace[-1]]
