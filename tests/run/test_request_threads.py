"""The per-request run's threads: results and errors come back, ``stop`` frees every item
not collected (queued, running or finished), and a job that never returns does not keep
the process from exiting (the Ctrl-C path)."""

from __future__ import annotations

import subprocess
import sys
import threading

from frostgym.run.request_threads import RequestThreads
from tests.cli_process import ROOT


def _square(n: int) -> int:
    if n < 0:
        raise ValueError(n)
    return n * n


def test_results_and_errors_come_back() -> None:
    threads: RequestThreads[int, int] = RequestThreads(2, _square, lambda _: None)
    for n in (1, 2, -3):
        threads.submit(n)
    got: dict[int, object] = {}
    while len(got) < 3:
        got.update(threads.results(timeout=10))
    threads.stop()
    assert got[1] == 1 and got[2] == 4
    assert isinstance(got[-3], ValueError)


def test_results_is_empty_when_nothing_finished_in_time() -> None:
    release = threading.Event()
    threads: RequestThreads[int, int] = RequestThreads(1, lambda n: release.wait(30) and n, lambda _: None)
    threads.submit(1)
    assert threads.results(timeout=0.05) == []
    release.set()
    assert threads.results(timeout=30) == [(1, 1)]
    threads.stop()


def test_stop_abandons_the_running_the_queued_and_the_uncollected() -> None:
    running, release = threading.Event(), threading.Event()
    ran: list[int] = []
    abandoned: list[int] = []
    done = threading.Semaphore(0)

    def work(n: int) -> int:
        ran.append(n)
        if n == 1:
            running.set()
            release.wait(30)
        return n

    def abandon(n: int) -> None:
        abandoned.append(n)
        done.release()

    threads: RequestThreads[int, int] = RequestThreads(2, work, abandon)
    threads.submit(0)
    while not threads._done.qsize():  # 0 has finished, not collected
        threading.Event().wait(0.01)
    threads.submit(1)
    assert running.wait(30)
    threads.submit(2)  # the free thread may run it before stop; if not, it stays queued
    threads.submit(3)
    threads.stop()
    release.set()
    for _ in range(4):  # each is freed once: before it ran, as it returned, or taken from the done queue
        assert done.acquire(timeout=30)
    assert sorted(abandoned) == [0, 1, 2, 3]
    assert threads.results(timeout=0.05) == []


def test_a_job_that_never_returns_does_not_hold_the_exit() -> None:
    script = (
        "import threading\n"
        "from frostgym.run.request_threads import RequestThreads\n"
        "t = RequestThreads(2, lambda n: threading.Event().wait(), lambda n: None)\n"
        "t.submit(1)\n"
        "t.stop()\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, timeout=60, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
