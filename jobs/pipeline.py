"""The main job: generate a demo DataFrame, append it to a Lance dataset, read it back, report.

    python -m jobs.pipeline [--uri DIR] [--rows N] [--master local[*]]

Everything goes through the ``lance`` data source: Spark tasks write fragments, the driver commits one
Append (the first run creates the dataset), then a fresh read of the latest version is counted and
summarised. Default dataset: ``data/demo.lance`` under the repository root.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import lance_ops
from jobs.session import get_spark
from lance_ops.errors import DatasetNotFoundError

DEFAULT_URI = str(Path(__file__).resolve().parent.parent / "data" / "demo.lance")
CATEGORIES = ("alpha", "beta", "gamma", "delta")


@dataclass(frozen=True)
class WriteSummary:
    """What a Lance dataset looks like after a write."""

    uri: str
    version: int
    rows: int
    fragments: int


def demo_frame(spark: SparkSession, rows: int, start: int = 0, partitions: int | None = None) -> DataFrame:
    """``rows`` deterministic demo rows with ids ``start .. start+rows-1``: ints, floats, strings, nulls,
    timestamps and a small float vector."""
    ids = spark.range(start, start + rows, numPartitions=partitions or spark.sparkContext.defaultParallelism)
    category = F.element_at(
        F.array(*[F.lit(c) for c in CATEGORIES]), (F.col("id") % len(CATEGORIES) + 1).cast("int")
    )
    return ids.select(
        F.col("id"),
        category.alias("category"),
        (F.col("id") * F.lit(0.5)).cast("double").alias("score"),
        F.when(F.col("id") % 7 == 0, F.lit(None))
        .otherwise(F.concat(F.lit("note-"), F.col("id")))
        .alias("note"),
        F.timestamp_seconds(F.lit(1_700_000_000) + F.col("id")).alias("ts"),
        F.array(*[(F.col("id") + i).cast("float") for i in range(4)]).alias("vector"),
    )


def write_lance(
    df: DataFrame, uri: str, mode: str = "append", options: Mapping[str, str] | None = None
) -> None:
    """Write ``df`` through the data source (``mode`` append or overwrite; extra writer ``options``)."""
    writer = df.write.format("lance").mode(mode)
    for key, value in (options or {}).items():
        writer = writer.option(key, value)
    writer.save(uri)


def summarize(uri: str, storage_options: Mapping[str, str] | None = None) -> WriteSummary:
    """Version, row count and fragment count of the latest version at ``uri``."""
    ds = lance_ops.dataset(uri, storage_options=dict(storage_options or {}))
    return WriteSummary(uri=uri, version=ds.version, rows=ds.count_rows(), fragments=len(ds.get_fragments()))


def run(spark: SparkSession, uri: str, rows: int) -> WriteSummary:
    """Append ``rows`` demo rows to ``uri`` and check them by reading the dataset back through Spark."""
    try:
        before = summarize(uri).rows
    except DatasetNotFoundError:
        before = 0
    write_lance(demo_frame(spark, rows, start=before), uri)
    summary = summarize(uri)
    counted = spark.read.format("lance").load(uri).count()
    if counted != summary.rows:
        raise RuntimeError(
            f"Spark read {counted} rows from {uri} but version {summary.version} holds {summary.rows}"
        )
    return summary


def main(argv: Sequence[str] | None = None) -> WriteSummary:
    parser = argparse.ArgumentParser(prog="python -m jobs.pipeline", description=__doc__.splitlines()[0])
    parser.add_argument("--uri", default=DEFAULT_URI, help="Lance dataset directory (default: %(default)s)")
    parser.add_argument("--rows", type=int, default=10_000, help="rows to append (default: %(default)s)")
    parser.add_argument("--master", default="local[*]", help="Spark master (default: %(default)s)")
    args = parser.parse_args(argv)
    spark = get_spark("lance-ops-pipeline", master=args.master)
    try:
        summary = run(spark, args.uri, args.rows)
    finally:
        spark.stop()
    print(json.dumps(asdict(summary), indent=2))
    return summary


if __name__ == "__main__":
    main()
