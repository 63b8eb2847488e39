"""Executor tasks size lance_ops' worker threads and Arrow's CPU pool to the task's cores
(``spark.task.cpus``), not to every core of the executor (L19). Local[2] session."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

import jobs
from jobs.common import on_executors, size_to_task
from lance_ops.file import parallel

pytestmark = pytest.mark.spark  # one worker: the session fixture


def _threads(_: int) -> tuple[int, int]:
    return parallel.WORKER_THREADS, pa.cpu_count()


def _oversized(_: int) -> int:
    parallel.set_worker_threads(5)  # what a previous task of the reused worker may have left
    return parallel.WORKER_THREADS


def test_each_task_uses_its_own_cores_not_the_executors(spark: SparkSession) -> None:
    driver = parallel.WORKER_THREADS
    task_cpus = int(spark.conf.get("spark.task.cpus", "1"))
    context = spark.sparkContext
    assert context.parallelize(range(4), 4).map(_oversized).collect() == [5] * 4
    # Under local[2] two tasks run at once: each on spark.task.cpus (1) threads, not two.
    assert on_executors(spark, list(range(4)), _threads) == [(task_cpus, task_cpus)] * 4
    assert parallel.WORKER_THREADS == driver  # the driver is not a task: left as it was


def test_size_to_task_outside_a_task_changes_nothing() -> None:
    before = parallel.WORKER_THREADS
    assert size_to_task() is None
    assert parallel.WORKER_THREADS == before


def test_a_job_writes_and_reads_with_sized_tasks(spark: SparkSession, tmp_path: object) -> None:
    import lance

    uri = str(tmp_path) + "/t.lance"  # type: ignore[operator]
    frame = spark.range(50_000).selectExpr("id", "id % 7 AS k").repartition(2)
    jobs.save(frame, uri)
    assert lance.dataset(uri).count_rows() == 50_000
    back = spark.read.format("lance").load(uri)
    assert back.where("k = 3").count() == len([i for i in range(50_000) if i % 7 == 3])


def _daemon_command(_: int) -> str:
    import os

    with open(f"/proc/{os.getppid()}/cmdline", "rb") as command:
        return command.read().replace(b"\0", b" ").decode()


def test_workers_are_forked_from_the_preloading_daemon(spark: SparkSession) -> None:
    """The session's Python workers come from jobs.daemon, which imported jobs and lance_ops
    before forking them (the first task of each worker does not pay those imports)."""
    assert spark.conf.get("spark.python.daemon.module") == "jobs.daemon"
    commands = on_executors(spark, [0, 1], _daemon_command)
    assert all("-m jobs.daemon" in command for command in commands), commands


def test_preloading_imports_without_starting_threads() -> None:
    """The daemon forks after preloading: nothing it loads may leave a thread running."""
    import os
    import sys
    import threading

    from jobs import daemon
    from lance_ops.encoding import kernels

    def native_threads() -> set[str]:
        return set(os.listdir("/proc/self/task"))

    # No thread started (threads earlier tests left may end meanwhile: compared as sets).
    before, native = set(threading.enumerate()), native_threads()
    assert daemon.preload() == []
    assert set(threading.enumerate()) <= before
    assert native_threads() <= native  # Arrow's or numba's pools not started either
    assert {"jobs", "lance_ops.dataset", "lance_ops.encoding.sketch"} <= set(sys.modules)
    # The warm-up ran the compiled kernels (a task's first large write does not load them) and
    # parsed a predicate (sqlglot's dialects loaded).
    assert kernels._compiled_in_use and "numba" in sys.modules
    assert "sqlglot.dialects.spark" in sys.modules


def test_a_silent_tracker_counts_every_task_without_polling(spark: SparkSession) -> None:
    """Without a progress callback on_executors runs the job on the calling thread (no status
    polling); the tracker still counts the tasks, and a reporting one gets an event per task."""
    from lance_ops.progress import ProgressEvent, Tracker

    silent = Tracker.start(None, "test", 3, "tasks")
    assert on_executors(spark, [1, -2, 3], abs, silent) == [1, 2, 3]
    assert silent.done == 3 and not silent.reports
    events: list[ProgressEvent] = []
    loud = Tracker.start(events.append, "test", 3, "tasks")
    assert on_executors(spark, [1, -2, 3], abs, loud) == [1, 2, 3]
    assert loud.done == 3 and events[-1].done == 3


def test_profiled_writes_one_stats_file_per_call(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    import pstats

    from jobs.common import PROFILE_ENV, profiled

    monkeypatch.delenv(PROFILE_ENV, raising=False)
    assert profiled(abs, -4) == 4
    directory = os.path.join(str(tmp_path), "profiles")
    monkeypatch.setenv(PROFILE_ENV, directory)
    assert profiled(sorted, [3, 1, 2]) == [1, 2, 3]
    (written,) = os.listdir(directory)
    assert "sorted" in str(pstats.Stats(os.path.join(directory, written)).stats)
