"""Assets that write Lance datasets with Spark, and the check that guards them.

Every write goes through the ``lance`` Spark data source, committing one Lance transaction whose
properties record who wrote it (``dagster/run_id``, ``dagster/asset_key`` and, for partitioned
assets, ``dagster/partition_key``), the way dagster-iceberg stamps snapshot properties. The
materialization's metadata describes the version it produced: version, rows, fragments, deleted rows
and data bytes.

This module deliberately has no ``from __future__ import annotations``: Dagster reads the asset
functions' parameter annotations (config class, resource types) at decoration time and needs real
classes, not strings.
"""

import json
from typing import Literal

import dagster as dg
from dagster_pyspark import PySparkResource
from pyspark.sql import DataFrame

import jobs
import lance_ops
from assets.resources import LanceDatasetResource
from jobs.pipeline import demo_frame, write_lance

RUN_ID_KEY = "dagster/run_id"
ASSET_KEY_KEY = "dagster/asset_key"
PARTITION_KEY_KEY = "dagster/partition_key"


def dagster_transaction_properties(context: dg.AssetExecutionContext) -> dict[str, str]:
    """Transaction properties naming the Dagster run (and partition, if any) behind a write."""
    properties = {RUN_ID_KEY: context.run.run_id, ASSET_KEY_KEY: context.asset_key.to_user_string()}
    if context.has_partition_key:
        properties[PARTITION_KEY_KEY] = context.partition_key
    return properties


def dataset_metadata(ds: lance_ops.LanceDataset) -> dict[str, dg.MetadataValue]:
    """Materialization metadata for one version of a dataset."""
    fragments = [fragment.metadata for fragment in ds.get_fragments()]
    rows = ds.count_rows()
    physical_rows = sum(fragment.physical_rows for fragment in fragments)
    data_bytes = sum(data_file.file_size_bytes for fragment in fragments for data_file in fragment.files)
    return {
        "lance/uri": dg.MetadataValue.path(ds.uri),
        "lance/version": dg.MetadataValue.int(ds.version),
        "dagster/row_count": dg.MetadataValue.int(rows),
        "lance/fragments": dg.MetadataValue.int(len(fragments)),
        "lance/deleted_rows": dg.MetadataValue.int(physical_rows - rows),
        "lance/data_bytes": dg.MetadataValue.int(data_bytes),
    }


def write_dataframe(
    context: dg.AssetExecutionContext,
    df: DataFrame,
    lance_dataset: LanceDatasetResource,
    mode: Literal["append", "overwrite"] = "append",
) -> dg.MaterializeResult:
    """Write ``df`` to the resource's dataset in one transaction stamped with this run; describe it."""
    options = {
        **lance_dataset.writer_options(),
        "transaction_properties": json.dumps(dagster_transaction_properties(context)),
    }
    write_lance(df, lance_dataset.uri, mode=mode, options=options)
    ds = lance_ops.dataset(lance_dataset.uri, storage_options=lance_dataset.storage_options)
    context.log.info("committed Lance version %d at %s", ds.version, lance_dataset.uri)
    return dg.MaterializeResult(metadata=dataset_metadata(ds))


class DemoDatasetConfig(dg.Config):
    """How many demo rows to write, and whether to append them or replace the dataset."""

    rows: int = 10_000
    mode: Literal["append", "overwrite"] = "append"


@dg.asset(
    kinds={"spark", "lance"},
    group_name="lance",
    automation_condition=dg.AutomationCondition.on_missing(),
    description="Demo rows generated with Spark and written through the Lance data source.",
)
def demo_lance_dataset(
    context: dg.AssetExecutionContext,
    config: DemoDatasetConfig,
    pyspark: PySparkResource,
    lance_dataset: LanceDatasetResource,
) -> dg.MaterializeResult:
    spark = pyspark.spark_session
    jobs.register(spark)
    existing = lance_dataset.load_or_none() if config.mode == "append" else None
    start = existing.count_rows() if existing is not None else 0
    return write_dataframe(context, demo_frame(spark, config.rows, start=start), lance_dataset, config.mode)


@dg.asset_check(asset=demo_lance_dataset, description="The latest version was committed by a Dagster run.")
def demo_lance_dataset_stamped(lance_dataset: LanceDatasetResource) -> dg.AssetCheckResult:
    ds = lance_dataset.load()
    transaction = ds.read_transaction(ds.version)
    properties = dict(transaction.properties) if transaction is not None else {}
    return dg.AssetCheckResult(
        passed=RUN_ID_KEY in properties,
        metadata={"lance/version": ds.version, "run_id": properties.get(RUN_ID_KEY, "")},
    )
