"""A declared dataset's asset, its daily ingest asset, and what every materialization records.

Asset keys: ``lance/<name>`` is the dataset itself (materializing it records the latest Lance
version; its ``DataVersion`` is that version number, so anything downstream goes stale when the
dataset changes, whoever changed it) and ``lance/<name>/ingest`` writes one day of rows per
partition through the ``lance`` Spark data source with ``replace_where`` on the day, so re-running a
day replaces it (or, with ingest ``mode: upsert``, merges the day's rows in by their keys through
:func:`jobs.merge_insert`); a backfill of many days runs as one Spark write and one ``Update`` transaction.

Every Lance transaction a Dagster run commits carries ``dagster/run_id``, ``dagster/asset_key`` and
the partition (``dagster/partition_key``, or ``dagster/partition_range`` for a multi-day run) in its
properties, the way dagster-iceberg stamps snapshot properties. Every materialization carries the
numbers of the version it leaves (:func:`dataset_metadata`), as numeric metadata the UI plots.

No ``from __future__ import annotations`` here: Dagster reads asset functions' parameter annotations
(config classes) when decorating and needs real classes, not strings.
"""

import json
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import dagster as dg
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

import jobs
import lance_ops
from assets.config import DatasetConfig, IngestSource
from assets.resources import LanceDatasetResource
from jobs.ingest import partition_predicate, source_frame
from jobs.pipeline import write_lance
from lance_ops.errors import SchemaError
from lance_ops.progress import ProgressCallback, ProgressEvent

RUN_ID_KEY = "dagster/run_id"
ASSET_KEY_KEY = "dagster/asset_key"
PARTITION_KEY_KEY = "dagster/partition_key"
PARTITION_RANGE_KEY = "dagster/partition_range"
# The tag Dagster reads an externally reported materialization's data version from.
DATA_VERSION_TAG = "dagster/data_version"


def dataset_key(config: DatasetConfig) -> dg.AssetKey:
    return dg.AssetKey(["lance", config.name])


def ingest_key(config: DatasetConfig) -> dg.AssetKey:
    return dg.AssetKey(["lance", config.name, "ingest"])


def resource_key(config: DatasetConfig) -> str:
    """The resource through which a dataset's assets reach it."""
    return f"lance_{config.name}"


# The contexts assets, ops and checks run with: all reach resources and the run the same way.
Context = dg.AssetExecutionContext | dg.OpExecutionContext | dg.AssetCheckExecutionContext


def dataset_resource(context: Context, config: DatasetConfig) -> LanceDatasetResource:
    resource: LanceDatasetResource = getattr(context.resources, resource_key(config))
    return resource


def spark_session(context: dg.AssetExecutionContext | dg.OpExecutionContext) -> SparkSession:
    """The run's Spark session (``pyspark`` resource) with the ``lance`` data source registered."""
    spark: SparkSession = context.resources.pyspark.spark_session
    jobs.register(spark)
    return spark


def dagster_progress(context: dg.AssetExecutionContext | dg.OpExecutionContext) -> ProgressCallback:
    """A ``progress=`` callback (:mod:`lance_ops.progress`) reporting each event as a Dagster log
    event of the run (INFO), so long maintenance shows its tasks finishing in the run's log."""

    def report(event: ProgressEvent) -> None:
        total = "?" if event.total is None else event.total
        context.log.info(f"{event.operation}: {event.done}/{total} {event.unit} {event.message}".rstrip())

    return report


def dagster_transaction_properties(
    context: dg.AssetExecutionContext | dg.OpExecutionContext,
) -> dict[str, str]:
    """Transaction properties naming the Dagster run, asset and partition(s) behind a commit."""
    properties = {RUN_ID_KEY: context.run.run_id}
    if context.has_assets_def:
        properties[ASSET_KEY_KEY] = context.asset_key.to_user_string()
    if context.has_partition_key:
        properties[PARTITION_KEY_KEY] = context.partition_key
    elif context.has_partition_key_range:
        keys = context.partition_key_range
        properties[PARTITION_RANGE_KEY] = f"{keys.start}...{keys.end}"
    return properties


def committed_by(ds: lance_ops.LanceDataset, version: int | None = None) -> str | None:
    """The Dagster run that committed ``version`` (default: ``ds``'s), None if it was not Dagster."""
    transaction = ds.read_transaction(version)
    return None if transaction is None else dict(transaction.properties).get(RUN_ID_KEY)


def table_schema(schema: pa.Schema) -> dg.TableSchema:
    """The Arrow schema as Dagster's column schema (names, types, nullability)."""
    return dg.TableSchema(
        columns=[
            dg.TableColumn(
                name=f.name,
                type=str(f.type),
                constraints=dg.TableColumnConstraints(nullable=f.nullable),
            )
            for f in schema
        ]
    )


def dataset_metadata(ds: lance_ops.LanceDataset, small_file_rows: int = 1024) -> dict[str, dg.MetadataValue]:
    """Materialization metadata for one version: its numbers (plotted by the UI), schema and the
    operation that made it. ``small_file_rows``: fragments with fewer rows count as small files."""
    stats = ds.stats.dataset_stats(max_rows_per_group=small_file_rows)
    fragments = ds.manifest.fragments
    physical_rows = sum(f.physical_rows for f in fragments)
    data_bytes = sum(d.file_size_bytes or 0 for f in fragments for d in f.files)
    transaction = ds.read_transaction()
    run_id = committed_by(ds)
    return {
        "lance/uri": dg.MetadataValue.path(ds.uri),
        "lance/version": dg.MetadataValue.int(ds.version),
        "dagster/row_count": dg.MetadataValue.int(physical_rows - stats["num_deleted_rows"]),
        "lance/deleted_rows": dg.MetadataValue.int(stats["num_deleted_rows"]),
        "lance/deleted_ratio": dg.MetadataValue.float(
            stats["num_deleted_rows"] / physical_rows if physical_rows else 0.0
        ),
        "lance/fragments": dg.MetadataValue.int(stats["num_fragments"]),
        "lance/small_files": dg.MetadataValue.int(stats["num_small_files"]),
        "lance/data_bytes": dg.MetadataValue.int(data_bytes),
        "lance/data_storage_version": dg.MetadataValue.text(ds.data_storage_version),
        "lance/operation": dg.MetadataValue.text(
            "" if transaction is None else type(transaction.operation).__name__
        ),
        "lance/committed_by": dg.MetadataValue.text(run_id or "outside Dagster"),
        "dagster/column_schema": dg.MetadataValue.table_schema(table_schema(ds.schema)),
    }


def version_result(
    resource: LanceDatasetResource, config: DatasetConfig, extra: Mapping[str, Any] | None = None
) -> dg.MaterializeResult:
    """A materialization describing the latest version (plus ``extra`` metadata)."""
    ds = resource.load()
    metadata = {**dataset_metadata(ds, config.maintenance.compaction.small_file_rows), **(extra or {})}
    return dg.MaterializeResult(metadata=metadata, data_version=dg.DataVersion(str(ds.version)))


def write_dataframe(
    context: dg.AssetExecutionContext,
    df: DataFrame,
    lance_dataset: LanceDatasetResource,
    mode: Literal["append", "overwrite"] = "append",
    replace_where: str | None = None,
    small_file_rows: int = 1024,
    fill_missing: str | None = None,
) -> dg.MaterializeResult:
    """Write ``df`` to the resource's dataset in one transaction stamped with this run; describe it.

    ``replace_where`` (with ``mode="overwrite"``): replace the rows the predicate selects;
    ``fill_missing``: what the dataset's columns ``df`` lacks get (the writer's option of that name)."""
    options = {
        **lance_dataset.writer_options(),
        "transaction_properties": json.dumps(dagster_transaction_properties(context)),
    }
    if replace_where is not None:
        options["replace_where"] = replace_where
    if fill_missing is not None:
        options["fill_missing"] = fill_missing
    write_lance(df, lance_dataset.uri, mode=mode, options=options)
    ds = lance_dataset.load()
    context.log.info("committed Lance version %d at %s", ds.version, lance_dataset.uri)
    return dg.MaterializeResult(
        metadata=dataset_metadata(ds, small_file_rows), data_version=dg.DataVersion(str(ds.version))
    )


def upsert_dataframe(
    context: dg.AssetExecutionContext,
    df: DataFrame,
    lance_dataset: LanceDatasetResource,
    keys: Sequence[str],
    small_file_rows: int = 1024,
) -> dg.MaterializeResult:
    """Merge ``df`` into the resource's dataset by ``keys`` (:func:`jobs.merge_insert`: matched rows
    updated, the others inserted) in one transaction stamped with this run; describe it."""
    committed = jobs.merge_insert(
        spark_session(context),
        lance_dataset.uri,
        df,
        keys,
        storage_options=lance_dataset.resolved_storage_options(),
        transaction_properties=dagster_transaction_properties(context),
    )
    ds = lance_dataset.load()
    context.log.info("upserted %s: Lance version %d at %s", committed.result, ds.version, lance_dataset.uri)
    metadata = {
        **dataset_metadata(ds, small_file_rows),
        **{f"lance/{k}": dg.MetadataValue.int(v) for k, v in committed.result.items()},
    }
    return dg.MaterializeResult(metadata=metadata, data_version=dg.DataVersion(str(ds.version)))


# ---------------------------------------------------------------------------------- ingest


def ingest_asset(config: DatasetConfig) -> dg.AssetsDefinition:
    """The daily-partitioned asset writing ``config``'s ingest source into the dataset."""
    source = config.ingest
    assert source is not None

    # ``backfill_policy`` is a beta parameter; single-run backfills are what this asset is for.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.BetaWarning)
        return _ingest_asset(config, source)


def _ingest_asset(config: DatasetConfig, source: IngestSource) -> dg.AssetsDefinition:
    @dg.asset(
        key=ingest_key(config),
        partitions_def=dg.DailyPartitionsDefinition(
            start_date=source.start_date, end_offset=source.end_offset
        ),
        backfill_policy=dg.BackfillPolicy.single_run(),
        kinds={"spark", "lance"},
        group_name=config.name,
        required_resource_keys={"pyspark", resource_key(config)},
        description=(
            f"Daily rows of {config.name} ({source.kind} source), written with replace_where on "
            f"{source.partition_column}: re-running a day replaces it."
            if source.mode == "replace"
            else f"Daily rows of {config.name} ({source.kind} source), upserted by {list(source.keys)}."
        ),
    )
    def ingest(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        spark = spark_session(context)
        resource = dataset_resource(context, config)
        window = context.partition_time_window
        df = source_frame(spark, source, context.partition_keys)
        existing = resource.load_or_none()
        small = config.maintenance.compaction.small_file_rows
        if existing is None:
            return write_dataframe(context, df, resource, "append", small_file_rows=small)
        if source.partition_column not in existing.schema.names:
            raise SchemaError(
                f"{config.name}: partition column {source.partition_column!r} is not in the dataset "
                f"(columns {existing.schema.names})"
            )
        if source.mode == "upsert":
            return upsert_dataframe(context, df, resource, source.keys, small)
        column = existing.schema.field(source.partition_column)
        where = partition_predicate(column.name, column.type, window.start, window.end)
        context.log.info("replacing %s", where)
        return write_dataframe(context, df, resource, "overwrite", where, small, source.fill_missing)

    return ingest


def dataset_asset(config: DatasetConfig) -> dg.AssetsDefinition:
    """The dataset: materializing it records the latest version (whoever committed it)."""

    @dg.asset(
        key=dataset_key(config),
        deps=[ingest_key(config)] if config.ingest is not None else None,
        kinds={"lance"},
        group_name=config.name,
        required_resource_keys={resource_key(config)},
        automation_condition=dg.AutomationCondition.eager() if config.ingest is not None else None,
        description=config.description
        or f"The Lance dataset at {config.uri}; its data version is the Lance version.",
    )
    def dataset(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        return version_result(dataset_resource(context, config), config)

    return dataset
