"""Distributed compaction: plan on the driver, tasks on executors, ``Rewrite`` commits on the driver.

    python -m jobs.compact --uri DIR [--target-rows-per-fragment N] [--commit-every N] [--dry-run]

The driver plans against the latest version (:func:`lance_ops.ops.compaction.plan`, options resolved
as pylance does: explicit values, else the dataset's ``lance.compaction.*`` config, else defaults);
each task travels to an executor in its JSON form, which opens the plan's version, rewrites its
fragments (:meth:`CompactionTask.execute`) and returns the :class:`RewriteResult` as JSON; the driver
commits them with :func:`lance_ops.ops.compaction.commit_compaction` (``ReserveFragments`` then one
``Rewrite``, as pylance's ``Compaction.commit``).

Indexed datasets: each task computes, where it rewrote the rows, its part of the old -> new row
address mapping (its surviving old addresses in new row order, shipped back as a roaring bitmap);
before the commit the indices to remap are rewritten on the executors, one Spark task per index,
each from the union of those parts (an index's files interleave rows of every fragment, so they
cannot be rewritten task by task: :mod:`lance_ops.ops.index_remap`). The driver only commits the
``Rewrite`` with their ``rewritten_indices``. A remap that fails removes every directory the remap
wrote and raises :class:`~lance_ops.errors.IndexCorruptError` naming the index; nothing is committed.

``commit_every=N`` runs and commits the tasks N at a time, so a long compaction keeps its progress;
``dry_run=True`` returns the plan as a DataFrame and writes nothing. A failed task fails its group
before that group's commit. A plan with no task (a dataset already compacted, or empty) is a clean
no-op: zero metrics, a log line, no new version.
"""

from __future__ import annotations

import argparse
import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import ArrayType, LongType, StructField, StructType

from jobs.cluster import cluster
from jobs.common import commit_options, driver_log, latest, on_executors, run_main
from lance_ops.errors import IndexCorruptError
from lance_ops.index.files import remove_index_directory
from lance_ops.io.context import StorageContext
from lance_ops.ops import clustering
from lance_ops.ops.compaction import (
    CompactionMetrics,
    CompactionOptions,
    CompactionPlan,
    CompactionTask,
    RewriteResult,
    commit_compaction,
    plan,
)
from lance_ops.ops.index_remap import (
    GroupMove,
    IndexRemapper,
    address_mapping,
    decode_moves,
    discard,
    encode_moves,
    remap_with_codec,
)
from lance_ops.progress import COMPACT, ProgressCallback, Tracker
from lance_ops.table.manifest import IndexMetadata, Manifest
from lance_ops.table.manifest_store import ExternalManifestStore
from lance_ops.table.transaction import RewrittenIndex

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


def executor_remapper(spark: SparkSession, uri: str, storage_options: Mapping[str, str]) -> IndexRemapper:
    """An :data:`~lance_ops.ops.index_remap.IndexRemapper` rewriting each index in its own Spark task.

    The moves travel as one compact text (:func:`~lance_ops.ops.index_remap.encode_moves`); each
    task rebuilds the address mapping and remaps its index into a directory named by a uuid the
    driver chose, so that whatever fails, the driver knows every directory to remove."""
    options = dict(storage_options)

    def remap(
        storage: StorageContext,
        manifest: Manifest,
        indices: Sequence[IndexMetadata],
        moves: Sequence[GroupMove],
    ) -> list[RewrittenIndex | None]:
        payload = encode_moves(moves)
        items = [(index, uuid.uuid4().bytes) for index in indices]

        def task(item: tuple[IndexMetadata, bytes]) -> RewrittenIndex | None | tuple[str, str]:
            index, new_uuid = item
            context = StorageContext.of(uri, options)
            try:
                return remap_with_codec(
                    context, index, *address_mapping(decode_moves(payload)), uuid=new_uuid
                )
            except IndexCorruptError as exc:  # typed on the driver, not as a Spark task failure
                return (exc.path, exc.reason)

        try:
            results = on_executors(spark, items, task)
        except BaseException:
            for _, new_uuid in items:
                remove_index_directory(storage, new_uuid)
            raise
        failed = [r for r in results if isinstance(r, tuple)]
        if failed:
            discard(storage, [r for r in results if isinstance(r, RewrittenIndex)])
            path, reason = failed[0]
            raise IndexCorruptError(path, reason)
        return [r for r in results if not isinstance(r, tuple)]

    return remap


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
    **compaction_options: Any,
) -> DataFrame | CompactionMetrics:
    """Compact the latest version of ``uri``; returns the metrics (or, with ``dry_run``, the plan).

    ``progress`` hears of every finished task (:mod:`lance_ops.progress`, operation ``compact``);
    ``manifest_store`` (e.g. :class:`~lance_ops.SqliteManifestStore`) is the external store to
    commit through."""
    if commit_every is not None and commit_every <= 0:
        raise ValueError("commit_every must be positive")
    files = latest(uri, storage_options, manifest_store)
    options = CompactionOptions.resolve(files.manifest.config, **compaction_options)
    the_plan = plan(files.manifest, options)
    if options.cluster_by:  # one group of every fragment (lance_ops.ops.clustering)
        the_plan = clustering.plan(files, the_plan)
    if dry_run:
        return plan_frame(spark, the_plan)
    store_options = dict(storage_options or {})
    if options.cluster_by and the_plan.tasks:  # range-partitioned sort on the executors (jobs.cluster)
        commit = commit_options(storage_options, commit_message, transaction_properties, manifest_store)
        return cluster(spark, uri, the_plan.tasks[0], store_options, commit, progress)

    def task(text: str) -> str:
        return CompactionTask.from_json(text).execute(uri, store_options).json()

    metrics = CompactionMetrics()
    tasks = [t.json() for t in the_plan.tasks]
    if not tasks:
        log.info(
            "nothing to compact in %s: version %d has %d fragment(s), none to merge or rewrite",
            uri,
            the_plan.read_version,
            len(files.manifest.fragments),
        )
        return metrics
    commit = commit_options(storage_options, commit_message, transaction_properties, manifest_store)
    group = commit_every or len(tasks)
    tracker = Tracker.start(progress, COMPACT, len(tasks), "tasks")
    for start in range(0, len(tasks), group):
        finished = on_executors(spark, tasks[start : start + group], task, tracker)
        results = [RewriteResult.from_json(r) for r in finished]
        remapper = executor_remapper(spark, uri, store_options)
        metrics = metrics + commit_compaction(uri, results, commit, remapper).metrics
    return metrics


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
