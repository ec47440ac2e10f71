"""The adaptive limit on requests in flight (``frostgym.agents.concurrency``): a
one-at-a-time server on loopback gets one or two requests at a time, even with a short
deadline, and none of its generations is wasted; a server that answers everything at once
is filled up to the maximum; 429 with ``Retry-After`` halves the limit and holds new
requests; ``close`` wakes every waiter; the history on the card stays bounded."""

from __future__ import annotations

import threading
import time
from typing import Any

from frostgym.agents.concurrency import MAX_TRACE_POINTS, ConcurrencyLimit
from frostgym.agents.openai_compat import OpenAIAgent
from frostgym.run.plan import make_plan
from frostgym.run.runner import MemorySink, RunOptions, run_plan
from tests.chat_server import Answer, ChatServer

REPLY_S = 0.2


class _OneSlot:
    """A server's one generation slot: requests wait their turn; counts the most waiting."""

    def __init__(self) -> None:
        self.slot = threading.Lock()
        self.lock = threading.Lock()
        self.waiting = self.most_waiting = 0

    def __call__(self, body: dict[str, Any]) -> Answer | None:
        with self.lock:
            self.waiting += 1
            self.most_waiting = max(self.most_waiting, self.waiting)
        with self.slot:
            with self.lock:
                self.waiting -= 1
            time.sleep(REPLY_S)
        return None  # the server's echo reply (7 completion tokens)


def _run(server: ChatServer, agent: OpenAIAgent, episodes: int) -> MemorySink:
    plan = make_plan(["frostgym/Arithmetic-v0"], split="train", episodes=episodes, samples=1, seed=0)
    sink = MemorySink()
    run_plan(plan, agent, sink, RunOptions(split="train", batch_size=16))
    return sink


def test_a_one_at_a_time_server_gets_one_or_two_requests_at_a_time() -> None:
    one_slot = _OneSlot()
    with ChatServer(one_slot) as server:
        agent = OpenAIAgent(server.base_url, "echo", concurrency=16, timeout_s=REPLY_S * 6)
        sink = _run(server, agent, 16)
        limit = agent.describe()["concurrency_limit"]
        agent.close()
    assert len(sink.episodes) == 16 and not sink.drops  # nothing timed out in the server's queue
    assert len(server.bodies) == 16  # each generated once: nothing wasted, nothing sent again
    assert one_slot.most_waiting <= 3, one_slot.most_waiting  # fixed at 16 it is 15
    assert limit["adaptive"] is True and limit["maximum"] == 16 and limit["reached"] <= 4
    assert limit["trace"][0] == [0.0, 1]


def _generate(body: dict[str, Any]) -> Answer | None:
    time.sleep(REPLY_S / 2)  # every request at once: a batching server with room to spare
    return None


def test_a_server_that_answers_everything_at_once_is_filled_to_the_maximum() -> None:
    with ChatServer(_generate) as server:
        agent = OpenAIAgent(server.base_url, "echo", concurrency=8)
        sink = _run(server, agent, 64)
        limit = agent.describe()["concurrency_limit"]
        agent.close()
    assert len(sink.episodes) == 64
    assert limit["reached"] == 8


def _round_trip(limit: ConcurrencyLimit, *latencies: float) -> None:
    """As many requests as the limit allows sent at once, then answered (in ``latencies``,
    each the same when only one is given), 10 tokens each."""
    sent = limit.limit
    for _ in range(sent):
        assert limit.acquire()
    for n in range(sent):
        limit.release("ok", latency_s=latencies[n] if len(latencies) > 1 else latencies[0], tokens=10)


def test_fixed_keeps_the_maximum_from_the_start() -> None:
    limit = ConcurrencyLimit(5, adaptive=False)
    assert [limit.acquire() for _ in range(5)] == [True] * 5
    limit.release("overloaded", retry_after_s=None)
    assert limit.limit == 5 and limit.describe()["trace"] == [[0.0, 5]]


def test_overload_halves_the_limit_and_retry_after_holds_new_requests() -> None:
    limit = ConcurrencyLimit(16)
    for _ in range(4):  # slow start: one more per unqueued reply while the limit is in use
        _round_trip(limit, 0.1)
    before = limit.limit
    assert before >= 6
    for _ in range(before):
        assert limit.acquire()
    limit.release("overloaded", retry_after_s=0.3)
    assert limit.limit == before // 2
    for _ in range(before - 1):
        limit.release("ok", latency_s=0.1, tokens=10)
    began = time.monotonic()
    assert limit.acquire()
    assert time.monotonic() - began >= 0.25  # held until Retry-After had passed


def test_a_standing_queue_shrinks_the_limit_and_a_straggler_does_not() -> None:
    limit = ConcurrencyLimit(16)
    for _ in range(4):
        _round_trip(limit, 0.1)
    grown = limit.limit
    _round_trip(limit, 0.1, 5.0, *[0.1] * (grown - 2))  # one long reply among normal ones: no decrease
    assert limit.limit >= grown
    before = limit.limit
    _round_trip(limit, *[0.3] * before)  # every reply waited as long again: a queue
    assert limit.limit < before


def test_close_wakes_every_waiter_with_false() -> None:
    limit = ConcurrencyLimit(1)
    assert limit.acquire()
    got: list[bool] = []
    waiters = [threading.Thread(target=lambda: got.append(limit.acquire())) for _ in range(3)]
    for waiter in waiters:
        waiter.start()
    limit.close()
    for waiter in waiters:
        waiter.join(10)
    assert got == [False, False, False]


def test_the_history_stays_bounded() -> None:
    limit = ConcurrencyLimit(4)
    for n in range(5 * MAX_TRACE_POINTS):
        limit.acquire()
        limit.release("overloaded" if n % 8 == 7 else "ok", latency_s=0.1, tokens=1)
    trace = limit.describe()["trace"]
    assert isinstance(trace, list) and len(trace) <= MAX_TRACE_POINTS + 1


def test_a_reply_past_half_its_deadline_shrinks_the_limit() -> None:
    limit = ConcurrencyLimit(16, deadline_s=1.0)
    for _ in range(4):
        _round_trip(limit, 0.1)
    before = limit.limit
    _round_trip(limit, 0.6, *[0.1] * (before - 1))  # the rest of the queue would run out its deadline
    assert limit.limit < before
