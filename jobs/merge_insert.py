"""Distributed upsert: executors merge target fragments with the source; the driver commits one Update.

    python -m jobs.merge_insert --uri DIR --source PARQUET_OR_LANCE --on id [--on day]
        [--when-matched update_all|delete|fail|none] [--when-not-matched insert_all|none]
        [--when-not-matched-by-source delete|none] [--by-source-condition SQL]

Two ways to join, chosen by the source's size (``strategy="auto"``: broadcast up to
``broadcast_rows`` source rows, co-partitioned above; the driver collects at most
``broadcast_rows + 1`` rows to tell, and that collection is the broadcast source):

* **broadcast**: the source DataFrame is collected once on the driver (as Arrow, columns cast to
  the dataset's types; without a limit when Spark's plan states its row count) and broadcast as
  one Arrow IPC buffer. One Spark job: each task merges a run of target fragments (at most
  4 × the default parallelism tasks) with it (:func:`lance_ops.ops.merge_insert.merge_fragments`:
  the fragments' rows pruned by their page statistics with the source's key range, joined with one
  key lookup per task, their deletion files and the updated rows written) and returns what it
  wrote and which source rows it matched. A Python worker reads the source and opens the pinned
  version once per merge, in its first task (Spark reuses workers; they hold both until their
  next merge). The driver, which holds the source anyway, writes the rows nothing matched (the
  inserts): cheaper than a second Spark job.
* **co-partitioned**: both sides are hash-partitioned by key into ``partitions`` partitions
  (:func:`lance_ops.ops.merge_insert.key_partitions`, the same hash in every process). One task per
  target fragment reads the columns the merge needs with ``_rowaddr`` (``_rowid`` with stable row
  ids) and sends each partition its share; the source is split the same way inside Spark
  (``mapInArrow``) without passing through the driver. Spark shuffles both (Arrow IPC slices) so
  that partition ``p`` holds exactly the target and source rows of hash ``p``; a task per partition
  joins them (:func:`lance_ops.ops.merge_insert.merge_rows`), writes the updated and inserted rows
  as new fragments and returns them with the row addresses to delete. The driver writes one
  deletion file per touched fragment from those addresses. Only the source's key columns reach
  the driver (for the check against keys a concurrent commit inserted); they are broadcast so that
  the target tasks prune pages by the keys' range and shuffle only the rows whose key the source
  has (the key, ``_rowaddr`` and the columns an update keeps). A plan that deletes by source needs
  every target row and shuffles them all.

Either way the driver commits everything as one ``Update``; after a retryable conflict the whole
merge runs again on the latest version, as the library's does. A failed task fails the job before
the commit: what the other tasks wrote is referenced by no version and removed by cleanup.
"""

from __future__ import annotations

import argparse
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal, TypeVar

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from jobs.common import (
    commit_options,
    driver_log,
    latest,
    on_executors,
    open_version,
    run_main,
    size_to_task,
)
from lance_ops import CommitOptions
from lance_ops.errors import InvalidArgumentError
from lance_ops.ops import merge_insert as merge_op
from lance_ops.ops.engine import ROW_ADDRESS, ROW_ID, ExternalManifestStore, ScanOptions, VersionFiles
from lance_ops.ops.update import Attempt, Committed, RowRewrite
from lance_ops.progress import ProgressCallback, Tracker

WHEN_MATCHED = {"update_all": "update", "delete": "delete", "fail": "fail", None: None, "none": None}
WHEN_NOT_MATCHED = {"insert_all": True, None: False, "none": False}
WHEN_NOT_MATCHED_BY_SOURCE = {"delete": True, None: False, "none": False}
OPERATION = "merge_insert"
BROADCAST_ROWS = 1_000_000
STRATEGIES = ("auto", "broadcast", "copartitioned")
_TARGET, _SOURCE = 0, 1
T = TypeVar("T")


def _choice(table: Mapping[Any, Any], value: Any, what: str) -> Any:
    if value not in table:
        raise InvalidArgumentError(f"{what} must be one of {[k for k in table if k]}, not {value!r}")
    return table[value]


def _source_table(df: DataFrame, files: VersionFiles) -> pa.Table:
    """The DataFrame as Arrow with its columns cast to the dataset's types (Spark's types are
    coarser: strings may come back large, decimals and timestamps in Spark's units)."""
    return _cast_to(df.toArrow(), files.schema)


def _known_rows(df: DataFrame) -> int | None:
    """The DataFrame's row count when Spark's optimized plan states it (local and cached data),
    else None (file sources, filters, Spark Connect)."""
    try:
        count = df._jdf.queryExecution().optimizedPlan().stats().rowCount()
        return int(count.get()) if count.isDefined() else None
    except Exception:  # noqa: BLE001 (no JVM plan to ask: decide by collecting)
        return None


def _cast_to(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with the columns ``schema`` has cast to its types."""
    columns = [
        table.column(n).cast(schema.field(n).type) if schema.get_field_index(n) >= 0 else table.column(n)
        for n in table.column_names
    ]
    fields = [
        schema.field(n) if schema.get_field_index(n) >= 0 else table.schema.field(n)
        for n in table.column_names
    ]
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


def merge_insert(
    spark: SparkSession,
    uri: str,
    df: DataFrame,
    on: str | Sequence[str],
    when_matched: str | None = "update_all",
    when_not_matched: str | None = "insert_all",
    when_not_matched_by_source: str | None = None,
    *,
    matched_condition: str | None = None,
    by_source_condition: str | None = None,
    storage_options: Mapping[str, str] | None = None,
    commit_message: str | None = None,
    transaction_properties: Mapping[str, str] | None = None,
    progress: ProgressCallback | None = None,
    manifest_store: ExternalManifestStore | None = None,
    strategy: Literal["auto", "broadcast", "copartitioned"] = "auto",
    broadcast_rows: int = BROADCAST_ROWS,
    partitions: int | None = None,
    commit: CommitOptions | None = None,
) -> Committed:
    """Upsert ``df`` into the latest version of ``uri`` keyed on ``on`` in one commit, as
    ``ds.merge_insert(on)`` with the given ``when_*`` clauses; the result is the library's
    (``committed.result`` holds pylance's counts). Bad input raises before any task runs.
    ``strategy``: ``broadcast`` the source, join ``copartitioned`` by key hash into ``partitions``
    partitions (default: Spark's default parallelism), or ``auto``: broadcast up to
    ``broadcast_rows`` source rows (collecting at most one row more on the driver to tell)."""
    options = commit_options(storage_options, commit_message, transaction_properties, manifest_store, commit)
    storage_options, manifest_store = options.storage_options, options.manifest_store
    plan = merge_op.MergeInsertPlan(
        on=(on,) if isinstance(on, str) else tuple(on),
        when_matched=_choice(WHEN_MATCHED, when_matched, "when_matched"),
        matched_condition=matched_condition,
        insert_not_matched=_choice(WHEN_NOT_MATCHED, when_not_matched, "when_not_matched"),
        delete_not_matched_by_source=_choice(
            WHEN_NOT_MATCHED_BY_SOURCE, when_not_matched_by_source, "when_not_matched_by_source"
        ),
        by_source_condition=by_source_condition,
    )
    if strategy not in STRATEGIES:
        raise InvalidArgumentError(f"strategy must be one of {list(STRATEGIES)}, not {strategy!r}")
    files = latest(uri, storage_options, manifest_store)
    plan.check(files.schema)
    store_options = dict(storage_options or {})
    collected = None
    if strategy == "auto":
        # One job: the whole source when Spark's plan knows it has few enough rows (a cached or
        # local DataFrame), else up to one row past the limit (no count job before it; a limit
        # scans the partitions in rounds, and costs more than the plain collection).
        known = _known_rows(df)
        small = known is not None and known <= broadcast_rows
        collected = _source_table(df if small else df.limit(broadcast_rows + 1), files)
    if strategy == "copartitioned" or (collected is not None and collected.num_rows > broadcast_rows):
        count = partitions or spark.sparkContext.defaultParallelism
        if count < 1:
            raise InvalidArgumentError(f"partitions must be >= 1, not {count}")
        return _copartitioned(spark, uri, df, plan, files, count, store_options, options, progress)
    collected = _source_table(df, files) if collected is None else collected
    source = merge_op.read_source(collected, None, plan, files.schema)
    return _broadcast(spark, uri, plan, files, source, store_options, options, progress)


def _broadcast(
    spark: SparkSession,
    uri: str,
    plan: merge_op.MergeInsertPlan,
    files: VersionFiles,
    source: pa.Table,
    store_options: dict[str, str],
    options: CommitOptions,
    progress: ProgressCallback | None,
) -> Committed:
    """The merge with ``source`` broadcast (see the module docstring): one Spark job."""
    shared = spark.sparkContext.broadcast(_ipc(source))
    token = uuid.uuid4().hex  # this merge's entries in the workers' caches

    def attempt(version: VersionFiles) -> Attempt:
        pinned_version = version.manifest.version

        def task(fragment_ids: list[int]) -> merge_op.MergePart:
            pinned = _per_worker(
                "version", (token, pinned_version), lambda: open_version(uri, pinned_version, store_options)
            )
            table = _per_worker("source", token, lambda: _read_ipc(shared.value))
            return merge_op.merge_fragments(pinned, plan, table, fragment_ids)

        groups = _groups(
            [f.id for f in version.manifest.fragments], 4 * spark.sparkContext.defaultParallelism
        )
        tracker = Tracker.start(progress, OPERATION, len(groups) + 1, "tasks")
        parts = on_executors(spark, groups, task, tracker)
        matched = np.unique(np.concatenate([np.zeros(0, np.int64), *(p.matched for p in parts)]))
        if plan.insert_not_matched and len(matched) < source.num_rows:
            # The source is here already: its unmatched rows are written by the driver (a second
            # Spark job would cost more than writing them).
            parts.append(merge_op.insert_unmatched(version, plan, source, matched))
        tracker.advance(1)
        return merge_op.combine(version, parts)

    try:
        return merge_op.commit_merge(files, plan, source, attempt, options)
    finally:
        shared.unpersist()


def _groups(ids: Sequence[int], at_most: int) -> list[list[int]]:
    """``ids`` in at most ``at_most`` runs of consecutive ones, of sizes differing by one at most."""
    count = max(1, min(len(ids), at_most))
    return [chunk.tolist() for chunk in np.array_split(np.asarray(ids, dtype=np.int64), count) if len(chunk)]


# What the tasks of one merge share in a Python worker (Spark reuses workers across tasks): the
# source read from the broadcast Arrow IPC bytes and the pinned version, built by the worker's
# first task of the merge. One entry per kind: a worker's next merge replaces them.
_WORKER_CACHE: dict[str, tuple[Any, Any]] = {}


def _per_worker(kind: str, key: Any, build: Callable[[], T]) -> T:
    """``build()``, or what it gave for ``key`` in an earlier task of this Python worker."""
    held = _WORKER_CACHE.get(kind)
    if held is None or held[0] != key:
        _WORKER_CACHE.pop(kind, None)  # the previous merge's goes before the new one is built
        held = _WORKER_CACHE[kind] = (key, build())
    value: T = held[1]
    return value


def _read_ipc(payload: bytes) -> pa.Table:
    """The table of an Arrow IPC stream (zero-copy over ``payload``)."""
    return pa.ipc.open_stream(pa.py_buffer(payload)).read_all()


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def _from_ipc(payloads: Iterable[bytes], schema: pa.Schema) -> pa.Table:
    tables = [pa.ipc.open_stream(p).read_all() for p in payloads]
    return pa.concat_tables(tables).combine_chunks() if tables else schema.empty_table()


def _split(table: pa.Table, on: Sequence[str], partitions: int) -> Iterator[tuple[int, pa.Table]]:
    """``table``'s rows grouped by their key partition."""
    if not table.num_rows:
        return
    keys = merge_op.key_partitions(table, on, partitions)
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    bounds = np.flatnonzero(np.diff(sorted_keys)) + 1
    for chunk in np.split(order, bounds):
        yield int(keys[chunk[0]]), table.take(pa.array(chunk))


def _copartitioned(
    spark: SparkSession,
    uri: str,
    df: DataFrame,
    plan: merge_op.MergeInsertPlan,
    files: VersionFiles,
    partitions: int,
    store_options: dict[str, str],
    options: CommitOptions,
    progress: ProgressCallback | None,
) -> Committed:
    """The merge as a shuffle join of target and source by key hash (see the module docstring)."""
    on = list(plan.on)
    # Bad input is refused on the driver, before any task: an empty source of the same shape.
    shape = merge_op.read_source(_source_table(df.limit(0), files), None, plan, files.schema)
    keys = merge_op.read_source(_source_table(df.select(*on), files), None, plan, files.schema)
    dataset_schema = files.schema
    # Unless the plan deletes by source, only target rows with a source key take part: the tasks
    # prune pages by the keys' range and send on only rows whose key the source has.
    every_row = plan.delete_not_matched_by_source
    bounds = None if every_row else merge_op.key_bounds(keys, on)
    shared_keys = None if every_row else spark.sparkContext.broadcast(keys)

    def attempt(version: VersionFiles) -> Attempt:
        pinned_version = version.manifest.version
        stable = version.manifest.uses_stable_row_ids
        read_columns = merge_op.target_columns(version, plan, shape.schema)
        scan = ScanOptions(columns=read_columns, with_row_id=stable, with_row_address=True)

        def target_task(fragment_id: int) -> Iterator[tuple[int, tuple[int, bytes]]]:
            size_to_task()
            pinned = open_version(uri, pinned_version, store_options)
            (fragment,) = [pinned.fragment(f) for f in pinned.manifest.fragments if f.id == fragment_id]
            live = None if every_row else merge_op.candidate_offsets(fragment, bounds)
            if live is not None and not len(live):
                return
            for table in fragment.scan(scan, live):
                if shared_keys is not None:
                    table = merge_op.rows_with_keys(table, shared_keys.value, on)
                for key, part in _split(table, on, partitions):
                    yield key, (_TARGET, _ipc(part))

        def source_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            size_to_task()
            for batch in batches:
                table = _cast_to(pa.Table.from_batches([batch]), dataset_schema)
                for key, part in _split(table, on, partitions):
                    yield pa.record_batch(
                        {"key": pa.array([key], pa.int32()), "payload": pa.array([_ipc(part)], pa.binary())}
                    )

        def merge_task(index: int, items: Iterable[tuple[int, tuple[int, bytes]]]) -> Iterator[Any]:
            size_to_task()
            sides: dict[int, list[bytes]] = {_TARGET: [], _SOURCE: []}
            for _, (side, payload) in items:
                sides[side].append(payload)
            if not sides[_SOURCE] and not plan.delete_not_matched_by_source:
                return  # target rows no source row can match: nothing to do
            pinned = open_version(uri, pinned_version, store_options)
            source = merge_op.read_source(_from_ipc(sides[_SOURCE], shape.schema), None, plan, pinned.schema)
            target_schema = _target_schema(pinned, read_columns, stable)
            target = _from_ipc(sides[_TARGET], target_schema)
            yield merge_op.merge_rows(pinned, plan, source, target)

        context = spark.sparkContext
        fragment_ids = [f.id for f in version.manifest.fragments]
        target_rdd = context.parallelize(fragment_ids, max(1, len(fragment_ids))).flatMap(target_task)
        source_rdd = df.mapInArrow(source_task, "key INT, payload BINARY").rdd.map(
            lambda row: (row["key"], (_SOURCE, bytes(row["payload"])))
        )
        shuffled = target_rdd.union(source_rdd).partitionBy(partitions, lambda key: key)
        tracker = Tracker.start(progress, OPERATION, 1, "jobs")
        results = shuffled.mapPartitionsWithIndex(merge_task).collect()
        tracker.advance(1)
        parts = [part for part, _ in results]
        addresses = np.concatenate([np.zeros(0, np.uint64), *(a for _, a in results)])
        parts.append(_driver_deletions(version, addresses))
        return merge_op.combine(version, parts)

    try:
        return merge_op.commit_merge(files, plan, keys, attempt, options)
    finally:
        if shared_keys is not None:
            shared_keys.unpersist()


def _target_schema(files: VersionFiles, columns: Sequence[str], stable: bool) -> pa.Schema:
    fields = [files.schema.field(c) for c in columns]
    if stable:
        fields.append(pa.field(ROW_ID, pa.uint64()))
    fields.append(pa.field(ROW_ADDRESS, pa.uint64()))
    return pa.schema(fields)


def _driver_deletions(version: VersionFiles, addresses: np.ndarray) -> merge_op.MergePart:
    """One deletion file per fragment the tasks' row ``addresses`` fall in, written by the driver."""
    rewrite = RowRewrite(version)
    fragment_of = addresses >> np.uint64(32)
    touched = set(np.unique(fragment_of).tolist())
    for fragment in version.fragments():
        if fragment.id in touched:
            offsets = (addresses[fragment_of == fragment.id] & np.uint64(0xFFFFFFFF)).astype(np.int64)
            rewrite.delete(fragment, offsets)
    zeros = dict.fromkeys(("num_inserted_rows", "num_updated_rows", "num_deleted_rows"), 0)
    return merge_op.MergePart(tuple(rewrite.deletions), (), np.zeros(0, np.int64), zeros)


def _run(spark: SparkSession, args: argparse.Namespace) -> dict[str, Any]:
    df = spark.read.format(args.source_format).load(args.source)
    committed = merge_insert(
        spark,
        args.uri,
        df,
        args.on,
        args.when_matched,
        args.when_not_matched,
        args.when_not_matched_by_source,
        matched_condition=args.matched_condition,
        by_source_condition=args.by_source_condition,
        storage_options=args.storage_options,
        progress=driver_log,
    )
    return {"version": committed.manifest.version, **committed.result}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--source", required=True, help="the source data (a path Spark can load)")
        parser.add_argument("--source-format", default="parquet", help="its Spark format (default parquet)")
        parser.add_argument("--on", action="append", required=True, help="key column (repeatable)")
        parser.add_argument(
            "--when-matched", default="update_all", choices=["update_all", "delete", "fail", "none"]
        )
        parser.add_argument("--matched-condition", default=None, help="SQL over target.x / source.x")
        parser.add_argument("--when-not-matched", default="insert_all", choices=["insert_all", "none"])
        parser.add_argument("--when-not-matched-by-source", default="none", choices=["delete", "none"])
        parser.add_argument("--by-source-condition", default=None, help="SQL limiting the by-source delete")

    result: dict[str, Any] = run_main("python -m jobs.merge_insert", argv, arguments, _run)
    return result


if __name__ == "__main__":
    main()
