"""Distributed upsert: executors merge target fragments with the source; the driver commits one Update.

    python -m jobs.merge_insert --uri DIR --source PARQUET_OR_LANCE --on id [--on day]
        [--when-matched update_all|delete|fail|none] [--when-not-matched insert_all|none]
        [--when-not-matched-by-source delete|none] [--by-source-condition SQL]

The source DataFrame is collected once on the driver (as Arrow, columns cast to the dataset's
types) and broadcast: an upsert's source is the small side of the join, as pylance also keeps it in
memory. Each Spark task opens the pinned version, merges one target fragment with it
(:func:`lance_ops.ops.merge_insert.merge_fragment`: the fragment's rows are pruned by its page
statistics with the source's key range, hash-joined, its deletion file and the updated rows
written) and returns what it wrote and which source rows it matched; one more task writes the
source rows nothing matched (the inserts). The driver commits everything as one ``Update``; after a
retryable conflict the whole merge runs again on the latest version, as the library's does. A
failed task fails the job before the commit: what the other tasks wrote is referenced by no
version and removed by cleanup.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from jobs.common import commit_options, driver_log, latest, on_executors, open_version, run_main
from lance_ops import CommitOptions
from lance_ops.errors import InvalidArgumentError
from lance_ops.ops import merge_insert as merge_op
from lance_ops.ops.engine import ExternalManifestStore, VersionFiles
from lance_ops.ops.update import Attempt, Committed
from lance_ops.progress import ProgressCallback, Tracker

WHEN_MATCHED = {"update_all": "update", "delete": "delete", "fail": "fail", None: None, "none": None}
WHEN_NOT_MATCHED = {"insert_all": True, None: False, "none": False}
WHEN_NOT_MATCHED_BY_SOURCE = {"delete": True, None: False, "none": False}
OPERATION = "merge_insert"


def _choice(table: Mapping[Any, Any], value: Any, what: str) -> Any:
    if value not in table:
        raise InvalidArgumentError(f"{what} must be one of {[k for k in table if k]}, not {value!r}")
    return table[value]


def _source_table(df: DataFrame, files: VersionFiles) -> pa.Table:
    """The DataFrame as Arrow with its columns cast to the dataset's types (Spark's types are
    coarser: strings may come back large, decimals and timestamps in Spark's units)."""
    table = df.toArrow()
    schema = files.schema
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
    commit: CommitOptions | None = None,
) -> Committed:
    """Upsert ``df`` into the latest version of ``uri`` keyed on ``on`` in one commit, as
    ``ds.merge_insert(on)`` with the given ``when_*`` clauses; the result is the library's
    (``committed.result`` holds pylance's counts). Bad input raises before any task runs."""
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
    files = latest(uri, storage_options, manifest_store)
    plan.check(files.schema)
    source = merge_op.read_source(_source_table(df, files), None, plan, files.schema)
    shared = spark.sparkContext.broadcast(source)
    store_options = dict(storage_options or {})

    def attempt(version: VersionFiles) -> Attempt:
        pinned_version = version.manifest.version

        def task(fragment_id: int) -> merge_op.MergePart:
            pinned = open_version(uri, pinned_version, store_options)
            return merge_op.merge_fragment(pinned, plan, shared.value, fragment_id)

        def insert_task(matched: np.ndarray) -> merge_op.MergePart:
            pinned = open_version(uri, pinned_version, store_options)
            return merge_op.insert_unmatched(pinned, plan, shared.value, matched)

        fragment_ids = [f.id for f in version.manifest.fragments]
        tracker = Tracker.start(progress, OPERATION, len(fragment_ids) + 1, "tasks")
        parts = on_executors(spark, fragment_ids, task, tracker)
        matched = np.unique(np.concatenate([np.zeros(0, np.int64), *(p.matched for p in parts)]))
        if plan.insert_not_matched and len(matched) < source.num_rows:
            parts += on_executors(spark, [matched], insert_task, tracker)
        return merge_op.combine(version, source, parts)

    try:
        return merge_op.commit_merge(files, plan, source, attempt, options)
    finally:
        shared.unpersist()


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
