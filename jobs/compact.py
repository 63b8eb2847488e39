"""Distributed compaction: plan on the driver, tasks on executors, ``Rewrite`` commits on the driver.

    python -m jobs.compact --uri DIR [--target-rows-per-fragment N] [--commit-every N] [--dry-run]

The driver plans against the latest version (:func:`lance_ops.ops.compaction.plan`, options resolved
as pylance does: explicit values, else the dataset's ``lance.compaction.*`` config, else defaults);
each task travels to an executor in its JSON form, which opens the plan's version, rewrites its
fragments (:meth:`CompactionTask.execute`) and returns the :class:`RewriteResult` as JSON; the driver
commits them with :func:`lance_ops.ops.compaction.commit_compaction` (``ReserveFragments`` then one
``Rewrite``, as pylance's ``Compaction.commit``). ``commit_every=N`` runs and commits the tasks N at a
time, so a long compaction keeps its progress; ``dry_run=True`` returns the plan as a DataFrame and
writes nothing. A failed task fails its group before that group's commit. A plan with no task (a
dataset already compacted, or empty) is a clean no-op: zero metrics, a log line, no new version.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import ArrayType, LongType, StructField, StructType

from jobs.common import commit_options, driver_log, latest, on_executors, run_main
from lance_ops import CommitOptions
from lance_ops.ops import clustering
from lance_ops.ops.compaction import (
    CompactionMetrics,
    CompactionOptions,
    CompactionPlan,
    CompactionTask,
    RewriteResult,
    TaskRunner,
    check_commit_every,
    plan,
)
from lance_ops.ops.compaction import compact as run_compaction
from lance_ops.ops.engine import ExternalManifestStore
from lance_ops.progress import ProgressCallback, Tracker

log = logging.getLogger(__name__)

PLAN_SCHEMA = StructType(
    [
        StructField("read_version", LongType(), False),
        StructField("task", LongType(), False),
        StructField("fragment_ids", ArrayType(LongType(), False), False),
        StructField("rows", LongType(), False),
        StructField("deleted_rows", LongType(), False),
        StructField("bytes", LongType(), False),
    ]
)


def plan_frame(spark: SparkSession, the_plan: CompactionPlan) -> DataFrame:
    """One row per task of ``the_plan``: the fragments it rewrites, live rows, deleted rows, bytes."""
    rows = [
        (the_plan.read_version, n, s["fragment_ids"], s["rows"], s["deleted_rows"], s["bytes"])
        for n, s in enumerate(the_plan.summary())
    ]
    return spark.createDataFrame(rows, PLAN_SCHEMA)


def compact(
    spark: SparkSession,
    uri: str,
    commit_every: int | None = None,
    dry_run: bool = False,
    storage_options: Mapping[str, str] | None = None,
    commit_message: str | None = None,
    transaction_properties: Mapping[str, str] | None = None,
    progress: ProgressCallback | None = None,
    manifest_store: ExternalManifestStore | None = None,
    commit: CommitOptions | None = None,
    **compaction_options: Any,
) -> DataFrame | CompactionMetrics:
    """Compact the latest version of ``uri``; returns the metrics (or, with ``dry_run``, the plan).

    ``progress`` hears of every finished task (:mod:`lance_ops.progress`, operation ``compact``);
    ``manifest_store`` (e.g. :class:`~lance_ops.SqliteManifestStore`) is the external store to
    commit through. The plan / execute / commit loop is :func:`lance_ops.ops.compaction.compact`'s,
    with the tasks of each group run on the executors."""
    check_commit_every(commit_every)
    committing = commit_options(
        storage_options, commit_message, transaction_properties, manifest_store, commit
    )
    storage_options, manifest_store = committing.storage_options, committing.manifest_store
    files = latest(uri, storage_options, manifest_store)
    options = CompactionOptions.resolve(files.manifest.config, **compaction_options)
    if dry_run:
        the_plan = plan(files.manifest, options)
        if options.cluster_by:  # one group of every fragment, sorted on one executor
            the_plan = clustering.plan(files, the_plan)
        return plan_frame(spark, the_plan)
    outcome = run_compaction(
        files, options, committing, commit_every, progress, spark_runner(spark, uri, storage_options)
    )
    if outcome is None:
        log.info(
            "nothing to compact in %s: version %d has %d fragment(s), none to merge or rewrite",
            uri,
            files.manifest.version,
            len(files.manifest.fragments),
        )
        return CompactionMetrics()
    return outcome.metrics


def spark_runner(spark: SparkSession, uri: str, storage_options: Mapping[str, str] | None) -> TaskRunner:
    """Each group of tasks run as one Spark job, a task per executor task; each travels in its JSON
    form and opens the plan's version of ``uri`` itself. A failed task fails its whole group."""
    store_options = dict(storage_options or {})

    def task(text: str) -> str:
        return CompactionTask.from_json(text).execute(uri, store_options).json()

    def run(
        tasks: Sequence[CompactionTask], group: int, tracker: Tracker
    ) -> Iterator[tuple[int, RewriteResult]]:
        texts = [t.json() for t in tasks]
        for start in range(0, len(texts), group):
            finished = on_executors(spark, texts[start : start + group], task, tracker)
            for n, result in enumerate(finished, start):
                yield n, RewriteResult.from_json(result)

    return run


def _run(spark: SparkSession, args: argparse.Namespace) -> Any:
    options = {"target_rows_per_fragment": args.target_rows_per_fragment}
    result = compact(
        spark,
        args.uri,
        commit_every=args.commit_every,
        dry_run=args.dry_run,
        storage_options=args.storage_options,
        progress=driver_log,
        **options,
    )
    if isinstance(result, DataFrame):
        return [row.asDict() for row in result.collect()]
    return asdict(result)


def main(argv: Sequence[str] | None = None) -> Any:
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--target-rows-per-fragment", type=int, default=None)
        parser.add_argument("--commit-every", type=int, default=None, help="tasks per commit")
        parser.add_argument("--dry-run", action="store_true", help="print the plan, write nothing")

    return run_main("python -m jobs.compact", argv, arguments, _run)


if __name__ == "__main__":
    main()
