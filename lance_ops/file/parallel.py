"""Running decode and encode tasks on every core.

Decoding and encoding spend their time in numpy, zstd, lz4 and the numba kernels, which release
the GIL, so independent pieces of one read (fields, and row ranges of one field) and the fields
of one writer flush are handled in parallel on threads. :func:`run_tasks` runs a list of tasks
on a process-wide pool of :data:`WORKER_THREADS` - 1 workers *and* the calling thread, which
pull tasks from one shared queue (costliest first, so the last to finish is a short one), and
returns their results in task order. It is re-entrant without deadlock: a task that itself
calls :func:`run_tasks` runs its subtasks on its own thread. The pool is created on first use
and dropped in a forked child (Spark forks its Python workers), which builds a fresh one.
:func:`set_worker_threads` sizes it to fewer cores than the machine's (a Spark task uses the
cores Spark gave it, not every core of the executor: ``jobs.common``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from lance_ops.io.metrics import counting_into, current

T = TypeVar("T")

#: Threads working on one read or one flush, the caller included (1: all on the calling thread).
WORKER_THREADS = max(1, min(os.cpu_count() or 1, 8))

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()
_in_task = threading.local()


def _reset_after_fork() -> None:
    global _pool, _pool_lock
    _pool = None
    _pool_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def _workers() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max(1, WORKER_THREADS - 1), thread_name_prefix="lance-ops-worker")
        return _pool


def in_task() -> bool:
    """Whether the calling thread is running a task of :func:`run_tasks` (work it starts then
    stays on this thread: the tasks beside it already use the other cores)."""
    return bool(getattr(_in_task, "active", False))


def set_worker_threads(threads: int) -> int:
    """Use ``threads`` threads (the caller included) for each read or flush from now on; returns
    the previous count. A pool of another size is dropped (its idle threads end when it is
    collected; a read already running finishes on it) and the next read builds one of this size."""
    global WORKER_THREADS, _pool
    if threads < 1:
        raise ValueError(f"worker threads must be at least 1, got {threads}")
    with _pool_lock:
        previous, WORKER_THREADS = WORKER_THREADS, threads
        if threads != previous:
            _pool = None
    return previous


def run_tasks(tasks: Sequence[Callable[[], T]], costs: Sequence[float] | None = None) -> list[T]:
    """Every task's result, in task order; the first failure (in task order) is raised once all
    tasks have ended. ``costs`` (one per task) orders the queue, costliest first."""
    if len(tasks) < 2 or WORKER_THREADS < 2 or in_task():
        return [task() for task in tasks]
    order = list(range(len(tasks)))
    if costs is not None:
        order.sort(key=lambda i: -costs[i])
    results: list[T | None] = [None] * len(tasks)
    errors: list[BaseException | None] = [None] * len(tasks)
    queue = iter(order)
    queue_lock = threading.Lock()
    counter = current()  # the caller's I/O count (analyze_plan), joined by the workers

    def drain() -> None:
        _in_task.active = True
        try:
            with counting_into(counter):
                _drain()
        finally:
            _in_task.active = False

    def _drain() -> None:
        while True:
            with queue_lock:
                i = next(queue, None)
            if i is None:
                return
            try:
                results[i] = tasks[i]()
            except BaseException as exc:  # re-raised in the caller, in task order
                errors[i] = exc

    pool = _workers()
    helpers = [pool.submit(drain) for _ in range(min(WORKER_THREADS - 1, len(tasks) - 1))]
    drain()
    for helper in helpers:
        # A helper still queued behind another read's tasks is not waited for: the queue is empty.
        if not helper.cancel():
            helper.result()
    for error in errors:
        if error is not None:
            raise error
    return results  # type: ignore[return-value]
