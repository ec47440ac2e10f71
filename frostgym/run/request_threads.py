"""The threads a per-request run sends its requests on: daemon threads that each run one
job at a time and hand its result back through a queue.

Why not ``concurrent.futures.ThreadPoolExecutor``: its workers are joined when the
interpreter exits, so one request blocked in a socket read holds a Ctrl-C'd process until
that request's deadline; and a ``KeyboardInterrupt`` that lands inside
``concurrent.futures.wait`` while it is taking the futures' locks can leave one held, which
blocks the worker finishing that future, and so the exit, for ever. Here the main thread
waits in one ``SimpleQueue.get`` (safe to interrupt), and the process can always exit.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")

_STOP = object()


class RequestThreads(Generic[Item, Result]):
    """``threads`` daemon threads running ``work(item)`` for each submitted item.

    A result (or the exception ``work`` raised) comes back from ``results``. After
    ``stop``, nothing more comes back: each item whose job is queued, running or finished
    but not collected is handed to ``abandon`` (to free what it holds) on the thread that
    ends with it."""

    def __init__(self, threads: int, work: Callable[[Item], Result], abandon: Callable[[Item], None]) -> None:
        self._work = work
        self._abandon = abandon
        self._jobs: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._done: queue.SimpleQueue[tuple[Item, Result | BaseException]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._stopped = False
        self._threads = [
            threading.Thread(target=self._serve, name=f"frostgym-request-{n}", daemon=True) for n in range(threads)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, item: Item) -> None:
        self._jobs.put(item)

    def results(self, timeout: float) -> list[tuple[Item, Result | BaseException]]:
        """What has finished: waits up to ``timeout`` seconds for the first, then takes
        every other that is ready; an empty list when none finished in time."""
        try:
            ready = [self._done.get(timeout=timeout)]
        except queue.Empty:
            return []
        while True:
            try:
                ready.append(self._done.get_nowait())
            except queue.Empty:
                return ready

    def stop(self) -> None:
        """No more results: every item not collected is abandoned, and the threads end as
        soon as their jobs return (a thread blocked in a job never holds up the process)."""
        with self._lock:
            self._stopped = True
            uncollected = []
            while True:
                try:
                    uncollected.append(self._done.get_nowait()[0])
                except queue.Empty:
                    break
        for _ in self._threads:
            self._jobs.put(_STOP)
        for item in uncollected:
            self._abandon(item)

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not _STOP:
            item: Item = job  # type: ignore[assignment]  # anything but _STOP is a submitted item
            if self._stopped:
                self._abandon(item)
                continue
            result: Result | BaseException
            try:
                result = self._work(item)
            except BaseException as error:  # handed to the main thread, which raises it
                result = error
            with self._lock:
                keep = not self._stopped
                if keep:
                    self._done.put((item, result))
            if not keep:
                self._abandon(item)
