"""Pieces shared by the job modules: running one function per item on executors (with progress),
opening a pinned version on an executor, and the ``python -m jobs.<name>`` command-line skeleton."""

from __future__ import annotations

import argparse
import cProfile
import itertools
import json
import logging
import os
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql import SparkSession

import lance_ops
from jobs.session import get_spark
from lance_ops.ops.commit import CommitOptions
from lance_ops.ops.compaction import open_version
from lance_ops.ops.engine import ExternalManifestStore, VersionFiles, set_worker_threads
from lance_ops.progress import ProgressEvent, Tracker

T = TypeVar("T")
R = TypeVar("R")

__all__ = [
    "commit_options",
    "driver_log",
    "groups",
    "in_group",
    "latest",
    "on_executors",
    "open_version",
    "pinned_version",
    "profiled",
    "run_main",
    "size_to_task",
    "task_slots",
]

log = logging.getLogger("jobs")
POLL_SECONDS = 0.5


def driver_log(event: ProgressEvent) -> None:
    """The default progress callback of the job mains: one INFO line on the driver per event."""
    total = "?" if event.total is None else event.total
    log.info("%s: %s/%s %s %s", event.operation, event.done, total, event.unit, event.message)


def size_to_task() -> int | None:
    """In a Spark task: lance_ops' decode / encode threads and Arrow's CPU pool sized to the cores
    Spark gave the task (``spark.task.cpus``, 1 by default), so that the tasks running at once on
    an executor share its cores instead of each using all of them (``local[2]`` runs two tasks,
    each on one thread). Returns that count; None (nothing changed) outside a task. Ask for more
    threads per task with ``spark.task.cpus`` (Spark then runs fewer tasks at once)."""
    context = TaskContext.get()
    if context is None:
        return None
    threads = max(1, int(context.cpus()))
    set_worker_threads(threads)
    if pa.cpu_count() != threads:
        pa.set_cpu_count(threads)
    return threads


#: Set to a directory in the driver's environment (before the session starts: executors inherit
#: it) to profile every executor function of the jobs with cProfile, one ``.prof`` file per call.
PROFILE_ENV = "LANCE_OPS_TASK_PROFILE"


def profiled(func: Callable[..., R], *args: Any) -> R:
    """``func(*args)``, under cProfile when :data:`PROFILE_ENV` names a directory (the stats
    written there as ``<pid>-<uuid>.prof``). The profile's clock is the process's CPU time: a
    Python worker runs one task at a time, so that is the task's work (its encode / decode
    threads included), not the waits a loaded machine adds to wall time."""
    directory = os.environ.get(PROFILE_ENV)
    if not directory:
        return func(*args)
    profile = cProfile.Profile(time.process_time)
    try:
        return profile.runcall(func, *args)
    finally:
        os.makedirs(directory, exist_ok=True)
        profile.dump_stats(os.path.join(directory, f"{os.getpid()}-{uuid.uuid4().hex[:8]}.prof"))


def in_group(func: Callable[[T], R]) -> Callable[[Sequence[T]], list[R]]:
    """``func`` applied to each item of a group in one task, after :func:`size_to_task`; the
    group profiled as one call when :data:`PROFILE_ENV` is set."""

    def each(group: Sequence[T]) -> list[R]:
        return [func(item) for item in group]

    def sized(group: Sequence[T]) -> list[R]:
        size_to_task()
        return profiled(each, group)

    return sized


def task_slots(spark: SparkSession) -> int:
    """How many tasks the session's executors run at once: their task slots (cores over
    ``spark.task.cpus``, as Spark's scheduler counts them for the default resource profile), so
    that cheap per-item work split into this many tasks (:func:`on_executors`) runs in one wave.
    ``spark.default.parallelism`` (which :mod:`jobs.session` sets to 4: two waves under
    ``local[2]``, each task paying its fixed cost) when Spark counts no slot, e.g. no executor
    registered yet under dynamic allocation."""
    context = spark.sparkContext
    try:
        scheduler = context._jsc.sc()
        profile = scheduler.resourceProfileManager().defaultResourceProfile()
        slots = int(scheduler.maxNumConcurrentTasks(profile))
    except Exception:  # noqa: BLE001 - a JVM API of Spark's internals: fall back when it moves
        slots = 0
    return slots if slots > 0 else max(1, int(context.defaultParallelism))


def groups(items: Sequence[T], count: int) -> list[list[T]]:
    """``items`` in ``count`` contiguous groups (at most ``len(items)``), sizes differing by at
    most one, the larger first."""
    count = max(1, min(count, len(items)))
    size, extra = divmod(len(items), count)
    out, start = [], 0
    for n in range(count):
        end = start + size + (n < extra)
        out.append(list(items[start:end]))
        start = end
    return out


def on_executors(
    spark: SparkSession,
    items: Sequence[T],
    func: Callable[[T], R],
    tracker: Tracker | None = None,
    tasks: int | None = None,
) -> list[R]:
    """``func`` applied to every item in Spark tasks, results in item order: one task per item, or
    with ``tasks`` that many tasks at most, each applying ``func`` to a contiguous group of items
    (:func:`groups`; for items whose work is small beside a task's fixed cost: its scheduling,
    pickling, a Python worker's start of the task, opening the pinned version).

    If any task fails (after Spark's retries) the job fails and this raises: callers commit only
    after it returns, so a failed task means no commit. ``tracker`` (:mod:`lance_ops.progress`)
    is advanced per finished item, from the calling thread: Spark's status tracker is polled
    while the job runs (only when the tracker reports to a callback); a task's items count as
    finished when the task does.
    """
    if not items:
        return []
    split = groups(items, len(items) if tasks is None else tasks)
    rdd = spark.sparkContext.parallelize(split, numSlices=len(split)).map(in_group(func))
    if tracker is None or not tracker.reports:
        # Nobody to tell: no polling of Spark's status tracker (py4j calls every POLL_SECONDS).
        result = [r for group in rdd.collect() for r in group]
        if tracker is not None:
            tracker.advance(len(items))
        return result
    context = spark.sparkContext
    group = f"lance-ops-{uuid.uuid4().hex}"
    outcome: dict[str, Any] = {}

    def run() -> None:
        context.setJobGroup(group, tracker.operation)
        try:
            outcome["result"] = rdd.collect()
        except BaseException as exc:  # re-raised in the calling thread
            outcome["error"] = exc

    worker = threading.Thread(target=run, name=group, daemon=True)
    worker.start()
    start = tracker.done
    # Items done after n finished tasks: the n smallest groups' (never more than were done).
    done_after = [0, *itertools.accumulate(sorted(len(g) for g in split))]
    while worker.is_alive():
        worker.join(POLL_SECONDS)
        # the last item is counted with the results, once they are here
        tasks_done = min(_finished_tasks(context.statusTracker(), group), len(split))
        finished = min(done_after[tasks_done], len(items) - 1)
        if start + finished > tracker.done:
            tracker.advance(
                start + finished - tracker.done, f"{finished} of {len(items)} {tracker.unit} finished"
            )
    if "error" in outcome:
        raise outcome["error"]
    tracker.advance(
        start + len(items) - tracker.done, f"{len(items)} of {len(items)} {tracker.unit} finished"
    )
    return [r for part in outcome["result"] for r in part]


def _finished_tasks(status: Any, group: str) -> int:
    finished = 0
    for job in status.getJobIdsForGroup(group):
        info = status.getJobInfo(job)
        for stage in info.stageIds if info is not None else ():
            stage_info = status.getStageInfo(stage)
            finished += stage_info.numCompletedTasks if stage_info is not None else 0
    return int(finished)


#: Versions a Python worker keeps open between the tasks of a job (:func:`pinned_version`).
PINNED_KEPT = 2
_pinned: OrderedDict[tuple[str, str, int, tuple[tuple[str, str], ...]], VersionFiles] = OrderedDict()
_pinned_lock = threading.Lock()


def pinned_version(
    job: str, uri: str, version: int, storage_options: Mapping[str, str] | None
) -> VersionFiles:
    """The files of ``version`` of ``uri`` as one job's tasks read them: opened once per Python
    worker (Spark reuses a worker for the job's next task) and kept, the last :data:`PINNED_KEPT`
    of them. ``job`` is a name the driver chose for this job (a uuid): a later job opens its
    version afresh, so a dataset removed and written again at the same URI is never read from
    what an earlier job kept."""
    key = (job, uri, version, tuple(sorted((storage_options or {}).items())))
    with _pinned_lock:
        files = _pinned.get(key)
        if files is not None:
            _pinned.move_to_end(key)
            return files
    files = open_version(uri, version, storage_options)
    with _pinned_lock:
        _pinned[key] = files
        while len(_pinned) > PINNED_KEPT:
            _pinned.popitem(last=False)
    return files


def latest(
    uri: str,
    storage_options: Mapping[str, str] | None = None,
    manifest_store: ExternalManifestStore | None = None,
) -> VersionFiles:
    """The files of the latest version at ``uri`` (what a job plans against, on the driver); with
    ``manifest_store`` a version claimed but not finished there is repaired first."""
    ds = lance_ops.dataset(uri, storage_options=dict(storage_options or {}), manifest_store=manifest_store)
    return open_version(uri, ds.version, storage_options)


def commit_options(
    storage_options: Mapping[str, str] | None = None,
    commit_message: str | None = None,
    transaction_properties: Mapping[str, str] | None = None,
    manifest_store: ExternalManifestStore | None = None,
    commit: CommitOptions | None = None,
) -> CommitOptions:
    """Commit options of a job's single transaction (through ``manifest_store`` when given): the
    job's keyword forms joined with its ``commit=`` object (:meth:`CommitOptions.of`)."""
    return CommitOptions.of(
        commit,
        manifest_store=manifest_store,
        storage_options=storage_options,
        commit_message=commit_message,
        transaction_properties=transaction_properties,
    )


def storage_option(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` of ``--storage-option``; a malformed one is not echoed (it may be a secret)."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError("expected KEY=VALUE (the argument has no '=' or no key)")
    return key, value


def run_main(
    prog: str,
    argv: Sequence[str] | None,
    add_arguments: Callable[[argparse.ArgumentParser], None],
    job: Callable[[SparkSession, argparse.Namespace], Any],
) -> Any:
    """Parse ``--uri``/``--master``/``--storage-option`` plus the job's own arguments, run ``job`` on
    a session, print its result as JSON and return it. ``args.storage_options`` is a dict (pylance's
    keys; a secret is better left to the environment, e.g. ``AWS_SECRET_ACCESS_KEY``, than put on a
    command line). Without ``--master`` the session keeps the master ``spark-submit`` was given
    (``local[*]`` when run as ``python -m jobs.<name>``)."""
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--uri", required=True, help="Lance dataset URI")
    parser.add_argument(
        "--master", default=None, help="Spark master (default: spark-submit's, else local[*])"
    )
    parser.add_argument(
        "--storage-option",
        dest="storage_options",
        action="append",
        type=storage_option,
        default=[],
        metavar="KEY=VALUE",
        help="object-store option, e.g. aws_endpoint=http://... (repeatable)",
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    args.storage_options = dict(args.storage_options)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    spark = get_spark(f"lance-ops-{prog.rsplit('.', 1)[-1]}", master=args.master)
    try:
        result = job(spark, args)
    finally:
        spark.stop()
    print(json.dumps(result, indent=2, default=str))
    return result
