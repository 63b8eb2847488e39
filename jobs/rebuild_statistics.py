"""Distributed statistics rebuild: executors compute per-fragment statistics, the driver commits once.

    python -m jobs.rebuild_statistics --uri DIR [--columns a,b] [--force]

The driver pins the latest version and asks :func:`lance_ops.ops.statistics.pending_statistics`
which fragments lack fresh statistics for which columns (all of them with ``force``); each Spark
task opens the pinned version and computes one fragment's zone statistics and HLL sketches
(:func:`lance_ops.ops.statistics.fragment_statistics`), returned to the driver as a picklable
:class:`~lance_ops.table.statistics.FragmentStatistics` (sketches travel serialised). The driver
writes them to one statistics file and commits one ``UpdateConfig``
(:func:`lance_ops.ops.statistics.commit_statistics`) — the same result as
``ds.stats.rebuild()``. A failed task fails the job before anything is written or committed.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import SparkSession

from jobs.common import commit_options, driver_log, latest, on_executors, open_version, run_main
from lance_ops import CommitOptions
from lance_ops.ops.engine import ExternalManifestStore, FragmentStatistics
from lance_ops.ops.statistics import RebuildResult, commit_statistics, fragment_statistics, pending_statistics
from lance_ops.progress import STATISTICS, ProgressCallback, Tracker


def rebuild_statistics(
    spark: SparkSession,
    uri: str,
    columns: Sequence[str] | None = None,
    force: bool = False,
    storage_options: Mapping[str, str] | None = None,
    commit_message: str | None = None,
    transaction_properties: Mapping[str, str] | None = None,
    progress: ProgressCallback | None = None,
    manifest_store: ExternalManifestStore | None = None,
    commit: CommitOptions | None = None,
) -> RebuildResult:
    """Compute the statistics the latest version of ``uri`` lacks (all with ``force``) on executors
    and commit them in one transaction; nothing is committed when every fragment is up to date.
    ``progress`` hears of every finished task (:mod:`lance_ops.progress`); ``manifest_store``
    (e.g. :class:`~lance_ops.SqliteManifestStore`) is the external store to commit through."""
    options = commit_options(storage_options, commit_message, transaction_properties, manifest_store, commit)
    storage_options, manifest_store = options.storage_options, options.manifest_store
    files = latest(uri, storage_options, manifest_store)
    pending = pending_statistics(files, columns, force)
    version = files.manifest.version
    store_options = dict(storage_options or {})

    def task(item: tuple[int, dict[int, str]]) -> FragmentStatistics:
        fragment_id, fields = item
        pinned = open_version(uri, version, store_options)
        fragment = next(f for f in pinned.fragments() if f.id == fragment_id)
        return fragment_statistics(fragment, fields)

    tracker = Tracker.start(progress, STATISTICS, len(pending), "tasks")
    computed = on_executors(spark, sorted(pending.items()), task, tracker)
    return commit_statistics(files, computed, options)


def _run(spark: SparkSession, args: argparse.Namespace) -> dict[str, Any]:
    columns = [c.strip() for c in args.columns.split(",") if c.strip()] if args.columns else None
    result = rebuild_statistics(
        spark,
        args.uri,
        columns=columns,
        force=args.force,
        storage_options=args.storage_options,
        progress=driver_log,
    )
    return {
        "version": None if result.manifest is None else result.manifest.version,
        "fragment_ids": list(result.fragment_ids),
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--columns", default=None, help="comma-separated columns (default: all)")
        parser.add_argument("--force", action="store_true", help="recompute fresh statistics too")

    result: dict[str, Any] = run_main("python -m jobs.rebuild_statistics", argv, arguments, _run)
    return result


if __name__ == "__main__":
    main()
