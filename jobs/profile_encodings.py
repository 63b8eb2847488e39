"""Distributed encoding profile: per-partition HLL sketches, merged on the driver into a dataset plan.

    python -m jobs.profile_encodings --uri DIR [--columns a,b] [--no-store]

Each Spark partition of the data profiles its rows (:func:`lance_ops.ops.encodings.profile_data`:
per column an HLL sketch of the distinct values, the non-null count and the value bytes) and returns
them as rows ``(column, sketch bytes, num_values, value_bytes)`` through ``mapInArrow``; the driver
merges the sketches per column (HLL unions are exact register maxima, so the result does not depend
on how the data was partitioned) and decides one :class:`~lance_ops.encoding.plan.EncodingPlan`
for the whole column (:meth:`~lance_ops.ops.encodings.DataProfile.plan`).

For a dataset URI the plan is stored in the dataset config in one ``UpdateConfig``
(:func:`lance_ops.ops.encodings.store_plan`) unless the dataset already stores that very plan
(then nothing is committed); for a DataFrame it is returned, and stored in the
config of ``target`` when one is given. Executors cast the data to the target dataset's Arrow types
first, and the dataset's ``lance-encoding:*`` field metadata steers the decision. Every later write
through ``format("lance")`` (append, replace-where, streaming) reads the stored plan once on the
driver and hands it to every task, so all fragments of a column are encoded alike whichever
partition wrote them; a create or overwrite takes it as ``.option("encoding_plan", plan.to_json())``
and stores it in the new version.
"""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import reduce
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import lance_ops
from jobs.common import commit_options, run_main, size_to_task
from jobs.datasource import FORMAT_NAME
from jobs.types import conform_batch, spark_arrow_schema
from lance_ops import CommitOptions
from lance_ops.errors import DatasetNotFoundError
from lance_ops.ops.compaction import open_version
from lance_ops.ops.encodings import ColumnProfile, DataProfile, is_profiled, profile_data, store_plan
from lance_ops.ops.engine import ENCODING_PLAN_KEY as CONFIG_KEY
from lance_ops.ops.engine import DistinctSketch, EncodingPlan, ExternalManifestStore, VersionFiles

log = logging.getLogger(__name__)

PROFILE_SCHEMA = "column STRING, sketch BINARY, num_values LONG, value_bytes LONG"


def profile_partition(schema: pa.Schema) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function profiling one partition as ``schema`` (one output row per column)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        size_to_task()  # Arrow's CPU pool: this task's cores, not the executor's
        empty = DataProfile(schema, {})
        found = (profile_data(conform_batch(b, schema)) for b in batches if b.num_rows)
        merged = reduce(DataProfile.merge, found, empty)
        if merged.columns:
            yield pa.RecordBatch.from_pylist(
                [
                    {
                        "column": name,
                        "sketch": column.sketch.to_bytes(),
                        "num_values": column.num_values,
                        "value_bytes": column.value_bytes,
                    }
                    for name, column in merged.columns.items()
                ]
            )

    return run


def profile_frame(df: DataFrame, schema: pa.Schema) -> DataProfile:
    """The merged profile of ``df``'s columns named in ``schema`` (cast to its types on executors)."""
    selected = df.select(*[F.col(f"`{name}`") for name in schema.names])
    rows = selected.mapInArrow(profile_partition(schema), PROFILE_SCHEMA).collect()
    columns: dict[str, ColumnProfile] = {}
    for row in rows:
        part = ColumnProfile(DistinctSketch.from_bytes(row["sketch"]), row["num_values"], row["value_bytes"])
        columns[row["column"]] = columns[row["column"]].merge(part) if row["column"] in columns else part
    return DataProfile(schema, {n: columns[n] for n in schema.names if n in columns})


def _latest(
    uri: str, storage_options: Mapping[str, str], manifest_store: ExternalManifestStore | None = None
) -> VersionFiles | None:
    try:
        ds = lance_ops.dataset(uri, storage_options=dict(storage_options), manifest_store=manifest_store)
    except DatasetNotFoundError:
        return None
    return open_version(uri, ds.version, storage_options)


def profile_encodings(
    spark: SparkSession,
    source: str | DataFrame,
    columns: Sequence[str] | None = None,
    target: str | None = None,
    store: bool = True,
    storage_options: Mapping[str, str] | None = None,
    commit_message: str | None = None,
    transaction_properties: Mapping[str, str] | None = None,
    manifest_store: ExternalManifestStore | None = None,
    commit: CommitOptions | None = None,
) -> EncodingPlan:
    """The encoding plan of ``source`` (a dataset URI or a DataFrame), profiled on executors.

    With ``store`` the plan is committed to the dataset (``source`` when it is a URI, else
    ``target``) as one ``UpdateConfig``; a ``target`` that does not exist raises
    :class:`DatasetNotFoundError` (create it with ``.option("encoding_plan", plan.to_json())``).
    ``columns`` limits the profile (and the plan) to those columns. ``manifest_store`` (e.g.
    :class:`~lance_ops.SqliteManifestStore`) is the external store to commit through.
    """
    options = commit_options(storage_options, commit_message, transaction_properties, manifest_store, commit)
    storage_options, manifest_store = options.storage_options, options.manifest_store
    store_options = dict(storage_options or {})
    if isinstance(source, str):
        target = source
    files = None if target is None else _latest(target, store_options, manifest_store)
    if isinstance(source, str):
        if files is None:
            raise DatasetNotFoundError(f"no Lance dataset at {source}")
        df = (
            spark.read.format(FORMAT_NAME)
            .option("version", str(files.manifest.version))
            .option("storage_options", json.dumps(store_options))
            .load(source)
        )
    else:
        df = source
    schema = files.schema if files is not None else spark_arrow_schema(df.schema)
    names = [
        n
        for n in (columns or df.columns)
        if n in df.columns and schema.get_field_index(n) >= 0 and is_profiled(schema.field(n).type)
    ]
    plan = profile_frame(df, pa.schema([schema.field(n) for n in names])).plan()
    if store and target is not None:
        if files is None:
            raise DatasetNotFoundError(
                f"no Lance dataset at {target} to store the plan in; create it with "
                "df.write.format('lance').option('encoding_plan', plan.to_json())"
            )
        if files.manifest.config.get(CONFIG_KEY) == plan.to_json():
            log.info("encoding plan of %s unchanged: nothing committed", target)
            return plan
        store_plan(files, plan, options)
    return plan


def _run(spark: SparkSession, args: argparse.Namespace) -> Any:
    columns = [c.strip() for c in args.columns.split(",") if c.strip()] if args.columns else None
    plan = profile_encodings(
        spark, args.uri, columns=columns, store=not args.no_store, storage_options=args.storage_options
    )
    return json.loads(plan.to_json())


def main(argv: Sequence[str] | None = None) -> Any:
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--columns", default=None, help="comma-separated columns (default: all)")
        parser.add_argument("--no-store", action="store_true", help="print the plan, do not store it")

    return run_main("python -m jobs.profile_encodings", argv, arguments, _run)


if __name__ == "__main__":
    main()
