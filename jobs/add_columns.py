"""Distributed add-columns: executors write one data file per fragment, the driver commits one ``Merge``.

    python -m jobs.add_columns --uri DIR --column "name=sql expression" [--column ...]

Two forms:

* ``add_columns(spark, uri, {"col": "sql expr"} | udf, read_columns=None)``: the driver pins the
  latest version and numbers the new fields (calling a UDF without a declared ``output_schema`` on
  the first batch of the first fragment); each Spark task (one per slot of the session) recomputes
  the columns for a group of fragments, the version opened once per Python worker, and writes
  one data file per fragment (:func:`lance_ops.ops.columns.write_fragment_columns`); the driver
  commits all files as one ``Merge`` (:func:`lance_ops.ops.columns.commit_new_columns`).
* ``add_columns(spark, uri, df)`` with a DataFrame keyed by ``_rowaddr`` or ``_rowid`` (lance-spark's
  ``ALTER TABLE ... ADD COLUMNS ... FROM``): the DataFrame's other columns become new nullable
  columns, backfilled from its rows; rows it does not name read as null. A ``_rowid`` key is mapped
  to row addresses by a join with the dataset's ``_rowid, _rowaddr``; the rows are grouped by
  fragment and each group writes that fragment's file. A repeated key or one outside the version
  raises, and nothing is committed.

A failed task fails the job before the commit; the files other tasks wrote are orphans for cleanup.
"""

from __future__ import annotations

import argparse
import json
import pickle
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, LongType, StructField, StructType

from jobs.common import (
    commit_options,
    driver_log,
    latest,
    on_executors,
    open_version,
    pinned_version,
    run_main,
    size_to_task,
    task_slots,
)
from jobs.types import spark_arrow_schema
from lance_ops import CommitOptions
from lance_ops.errors import SchemaError
from lance_ops.ops.columns import (
    NewColumns,
    column_compute,
    commit_new_columns,
    new_columns,
    numbered_columns,
    write_fragment_columns,
    write_fragment_values,
)
from lance_ops.ops.engine import ROW_ADDRESS, ROW_ID, DataFile, ExternalManifestStore, Manifest
from lance_ops.progress import ADD_COLUMNS, ProgressCallback, Tracker

FRAGMENT_KEY = "_lance_fragment"
_WRITTEN = StructType(
    [StructField("fragment_id", LongType(), False), StructField("data_file", BinaryType(), False)]
)
_WRITTEN_ARROW = spark_arrow_schema(_WRITTEN)


def add_columns(
    spark: SparkSession,
    uri: str,
    transforms: Mapping[str, str] | Callable[[pa.RecordBatch], Any] | DataFrame,
    read_columns: Sequence[str] | None = None,
    batch_size: int | None = None,
    storage_options: Mapping[str, str] | None = None,
    commit_message: str | None = None,
    transaction_properties: Mapping[str, str] | None = None,
    progress: ProgressCallback | None = None,
    manifest_store: ExternalManifestStore | None = None,
    commit: CommitOptions | None = None,
) -> Manifest:
    """Add columns to the latest version of ``uri`` in one ``Merge``; returns the manifest written.

    ``progress`` hears of every finished per-fragment task (:mod:`lance_ops.progress`);
    ``manifest_store`` (e.g. :class:`~lance_ops.SqliteManifestStore`) is the external store to commit
    through."""
    options = commit_options(storage_options, commit_message, transaction_properties, manifest_store, commit)
    storage_options, manifest_store = options.storage_options, options.manifest_store
    files = latest(uri, storage_options, manifest_store)
    version = files.manifest.version
    store_options = dict(storage_options or {})
    if isinstance(transforms, DataFrame):
        if read_columns is not None:
            raise ValueError("read_columns does not apply to a DataFrame backfill")
        new, written = _backfill(spark, uri, version, store_options, transforms)
    else:
        new = new_columns(files, column_compute(files, transforms, read_columns), batch_size)

        job = uuid.uuid4().hex

        def task(fragment_id: int) -> tuple[int, DataFile]:
            pinned = pinned_version(job, uri, version, store_options)  # once per worker
            compute = column_compute(pinned, transforms, read_columns)
            return fragment_id, write_fragment_columns(pinned, fragment_id, compute, new, batch_size)

        tracker = Tracker.start(progress, ADD_COLUMNS, len(files.manifest.fragments), "tasks")
        fragment_ids = [f.id for f in files.manifest.fragments]
        # Fragments in groups, a task per slot of the session (a task's fixed cost paid per group).
        written = dict(on_executors(spark, fragment_ids, task, tracker, tasks=task_slots(spark)))
    manifest, _ = commit_new_columns(files, new.fields, written, options)
    return manifest


def _backfill(
    spark: SparkSession, uri: str, version: int, storage_options: dict[str, str], df: DataFrame
) -> tuple[NewColumns, dict[int, DataFile]]:
    """Write the data files of a DataFrame backfill keyed by ``_rowaddr`` or ``_rowid``."""
    keys = [k for k in (ROW_ADDRESS, ROW_ID) if k in df.columns]
    if len(keys) != 1:
        raise SchemaError(
            f"a backfill DataFrame has exactly one of {ROW_ADDRESS}, {ROW_ID}; got {df.columns}"
        )
    key = keys[0]
    values = df.drop(key)
    if not values.columns:
        raise SchemaError("a backfill DataFrame needs at least one column besides its key")
    arrow = spark_arrow_schema(values.schema)
    files = open_version(uri, version, storage_options)
    new = numbered_columns(files, pa.schema([f.with_nullable(True) for f in arrow]))
    if key == ROW_ID:
        addresses = (
            spark.read.format("lance")
            .option("version", version)
            .option("columns", f"{ROW_ID},{ROW_ADDRESS}")
            .option("storage_options", json.dumps(storage_options))
            .load(uri)
        )
        df = df.join(addresses, on=ROW_ID, how="left")
        missing = df.filter(F.col(ROW_ADDRESS).isNull()).limit(1).count()
        if missing:
            raise SchemaError(f"the backfill names a {ROW_ID} that is not in version {version}")
        df = df.drop(ROW_ID)
    keyed = df.withColumn(FRAGMENT_KEY, F.shiftright(F.col(ROW_ADDRESS), 32))
    job = uuid.uuid4().hex

    def write_group(table: pa.Table) -> pa.Table:
        size_to_task()  # the encoders' threads: this task's cores, not the executor's
        fragment_id = int(table.column(FRAGMENT_KEY)[0].as_py())
        offsets = pc.bit_wise_and(table.column(ROW_ADDRESS), pa.scalar(0xFFFFFFFF, pa.int64()))
        pinned = pinned_version(job, uri, version, storage_options)  # once per worker
        data_file = write_fragment_values(pinned, fragment_id, offsets.to_numpy(), table, new)
        return pa.table(
            {"fragment_id": [fragment_id], "data_file": [pickle.dumps(data_file)]}, schema=_WRITTEN_ARROW
        )

    rows = keyed.groupBy(FRAGMENT_KEY).applyInArrow(write_group, _WRITTEN).collect()
    return new, {row.fragment_id: pickle.loads(row.data_file) for row in rows}


def _parse_columns(pairs: Sequence[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        name, sep, expression = pair.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"--column takes name=expression, got {pair!r}")
        out[name.strip()] = expression.strip()
    return out


def _run(spark: SparkSession, args: argparse.Namespace) -> dict[str, Any]:
    manifest = add_columns(
        spark,
        args.uri,
        _parse_columns(args.column),
        storage_options=args.storage_options,
        progress=driver_log,
    )
    return {"version": manifest.version, "columns": manifest.schema.names}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--column", action="append", required=True, help="name=SQL expression (repeatable)"
        )

    result: dict[str, Any] = run_main("python -m jobs.add_columns", argv, arguments, _run)
    return result


if __name__ == "__main__":
    main()
