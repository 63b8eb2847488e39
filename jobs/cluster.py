"""Clustering with Spark: a range-partitioned sort of a clustering task (L20), called by
:func:`jobs.compact.compact` when ``cluster_by`` is set (or the dataset config sets
``lance-ops.cluster-by``).

1. **Survey** (executors): the planned fragments in ``spark.default.parallelism`` contiguous chunks;
   each task reads its chunk's key columns and returns the keys' lowest / highest normalized values
   and a uniform sample of key rows (:class:`lance_ops.ops.clustering.Survey`).
2. **Split points** (driver): the merged survey gives the :class:`~lance_ops.ops.clustering.Layout`:
   the z-order scaling, and the quantiles of the sampled routing keys as split points. Ranges: at
   least the default parallelism, more when the rows exceed ``cluster_memory_bytes`` per range
   (counted as decoded bytes, as in process: :func:`lance_ops.ops.clustering.held_bytes`),
   fewer when a range would hold less than two target fragments (``target_rows_per_fragment``).
3. **Ranges** (executors, one task per range): each reads the key columns of the planned fragments,
   keeps its rows, reads them whole, sorts them (stably from arrival order) and writes them as new
   fragments; with stable row ids the rows keep their ids, otherwise their old addresses come back
   in their new order (:func:`lance_ops.ops.clustering.execute_range`).
4. **Commit** (driver): the ranges' results, concatenated in range order, are the one result of the
   task, committed as one ``Rewrite`` (indices remapped as any compaction's: L15). A clustering is
   one rewrite group of every fragment, so ``commit_every`` does not split it.

An incremental plan (``cluster_incremental``) brings its own split points: steps 1-2 are skipped and
each of its ranges is a task.

The rows come out in exactly the order of the in-process clustering (``compact_files(cluster_by=)``)
whatever the split points, since a range holds every row of its routing keys; only where the new
fragments are cut differs (per range here).
"""

from __future__ import annotations

import json
from functools import reduce

from pyspark.sql import SparkSession

from jobs.common import on_executors
from lance_ops.ops import clustering
from lance_ops.ops.commit import CommitOptions
from lance_ops.ops.compaction import (
    CompactionMetrics,
    CompactionTask,
    RewriteResult,
    commit_compaction,
    open_version,
)
from lance_ops.ops.engine import DEFAULT_BATCH_SIZE, DataFragment
from lance_ops.progress import COMPACT, ProgressCallback, Tracker


def cluster(
    spark: SparkSession,
    uri: str,
    task: CompactionTask,
    storage_options: dict[str, str],
    commit: CommitOptions,
    progress: ProgressCallback | None = None,
) -> CompactionMetrics:
    """Run the clustering ``task`` (from :func:`lance_ops.ops.clustering.plan`) on the executors and
    commit it; returns the metrics."""
    options = task.options
    mode = options.cluster_mode or "sort"
    keys = options.cluster_by
    batch_size = options.batch_size or DEFAULT_BATCH_SIZE
    version = task.read_version
    live = task.num_rows
    parallelism = max(1, spark.sparkContext.defaultParallelism)
    fragments = [f for f in task.fragments if f.num_rows > 0]
    step = max(1, -(-len(fragments) // parallelism))
    chunks = [
        json.dumps({"seed": n, "fragments": [f.to_json() for f in fragments[start : start + step]]})
        for n, start in enumerate(range(0, len(fragments), step))
    ]

    def survey(text: str) -> str:
        data = json.loads(text)
        files = open_version(uri, version, storage_options)
        readers = [files.fragment(DataFragment.from_json(f)) for f in data["fragments"]]
        return clustering.survey(readers, files.schema, keys, batch_size, live, seed=data["seed"]).json()

    if task.cluster_splits is not None:  # an incremental plan: its ranges are the ones to rewrite
        layout = clustering.Layout(mode, keys, splits=task.cluster_splits)
    else:
        surveys = [clustering.Survey.from_json(s) for s in on_executors(spark, chunks, survey)]
        found = reduce(clustering.Survey.merge, surveys)
        budget = options.cluster_memory_bytes or clustering.DEFAULT_CLUSTER_MEMORY_BYTES
        files = open_version(uri, version, storage_options)  # the budget bounds decoded bytes
        held = clustering.held_bytes([files.fragment(f) for f in fragments], files.schema, live)
        wanted = max(parallelism, clustering.range_count(held, live, budget))
        ranges = max(1, min(wanted, live // (2 * options.target_rows_per_fragment)))
        layout = clustering.Layout.build(found, mode, keys, ranges)

    def write_range(index: int) -> str:
        files = open_version(uri, version, storage_options)
        return clustering.execute_range(files, task, layout, index).json()

    tracker = Tracker.start(progress, COMPACT, layout.ranges, "ranges")
    results = [
        RewriteResult.from_json(r)
        for r in on_executors(spark, list(range(layout.ranges)), write_range, tracker)
    ]
    return commit_compaction(uri, [clustering.merge_ranges(task, results)], commit).metrics
