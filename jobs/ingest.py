"""The rows of a declared dataset's daily ingest, shared by the Dagster ingest asset
(:mod:`assets.lance_assets`) and the Airflow ingest DAG (:mod:`lance_ops.airflow.dags`): a day's rows
from the ingest source, and the Lance SQL predicate selecting a day's rows in the dataset (what
``replace_where`` replaces, so re-running a day replaces it)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from jobs.pipeline import demo_frame
from lance_ops.datasets_config import IngestSource
from lance_ops.errors import SchemaError

# Demo rows have ``ts = DEMO_EPOCH + id`` seconds (:func:`jobs.pipeline.demo_frame`).
DEMO_EPOCH = 1_700_000_000


def partition_predicate(column: str, type_: pa.DataType, start: dt.datetime, end: dt.datetime) -> str:
    """Lance SQL selecting the rows whose ``column`` falls in ``[start, end)`` (days, UTC)."""
    if pa.types.is_timestamp(type_):
        low, high = (f"timestamp '{t:%Y-%m-%d %H:%M:%S}'" for t in (start, end))
    elif pa.types.is_date(type_):
        low, high = (f"date '{t:%Y-%m-%d}'" for t in (start, end))
    elif pa.types.is_string(type_) or pa.types.is_large_string(type_):
        low, high = (f"'{t:%Y-%m-%d}'" for t in (start, end))
    else:
        raise SchemaError(
            f"partition column {column!r} has type {type_}; a day needs a timestamp, date or string"
        )
    return f"{column} >= {low} AND {column} < {high}"


def demo_days(spark: SparkSession, days: Sequence[str], rows: int) -> DataFrame:
    """``rows`` demo rows per day, their ``ts`` the first ``rows`` seconds of the day (so ids are
    unique across days and a day's rows are exactly those its predicate selects)."""
    frames = []
    for day in days:
        midnight = dt.datetime.fromisoformat(day).replace(tzinfo=dt.UTC)
        frames.append(demo_frame(spark, rows, start=int(midnight.timestamp()) - DEMO_EPOCH, partitions=1))
    result = frames[0]
    for frame in frames[1:]:
        result = result.unionByName(frame)
    return result


def source_frame(spark: SparkSession, source: IngestSource, days: Sequence[str]) -> DataFrame:
    """The rows of ``days`` from the ingest source."""
    if source.kind == "demo":
        return demo_days(spark, days, source.rows_per_partition)
    assert source.path is not None
    return spark.read.format(source.format).load([source.path.format(partition=day) for day in days])
