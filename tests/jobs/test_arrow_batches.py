"""Spark hands its Python tasks Arrow batches of ``jobs.session.ARROW_BATCH_ROWS`` rows (not
Spark's default 10,000: L19, the per-batch cost in the JVM and the Python worker), and a data
source write of several such batches in one task writes what pylance reads back. Local[2] session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

import jobs
from jobs.session import (
    ARROW_BATCH_BYTES,
    ARROW_BATCH_ROWS,
    ARROW_NO_BYTE_CAP,
    arrow_batches_cut_by_rows,
    fixed_row_bytes,
)

pytestmark = [pytest.mark.spark, pytest.mark.interop]


def _sizes(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        yield pa.RecordBatch.from_pydict({"n": pa.array([batch.num_rows], pa.int64())})


@pytest.mark.parametrize("rows", [1, ARROW_BATCH_ROWS, ARROW_BATCH_ROWS + 1, 2 * ARROW_BATCH_ROWS + 37])
def test_python_tasks_get_batches_of_arrow_batch_rows(spark: SparkSession, rows: int) -> None:
    sizes = [r.n for r in spark.range(0, rows, numPartitions=1).mapInArrow(_sizes, "n long").collect()]
    full, rest = divmod(rows, ARROW_BATCH_ROWS)
    assert sizes == [ARROW_BATCH_ROWS] * full + ([rest] if rest else [])


def test_byte_cap_lifted_only_for_rows_too_narrow_to_reach_it(spark: SparkSession) -> None:
    """A ``maxBytesPerBatch`` other than Int.MaxValue (none) makes the JVM measure the batch being
    built after every row (half its CPU in a 10M-row append): the jobs lift the session's 64 MiB
    cap while a DataFrame of fixed-width rows is written, whose batches of ``ARROW_BATCH_ROWS`` rows
    cannot reach it; rows of any length (strings) keep it, so their batches stay bounded."""
    key = "spark.sql.execution.arrow.maxBytesPerBatch"
    assert _bytes(spark.conf.get(key)) == ARROW_BATCH_BYTES
    narrow = spark.range(0, 10).selectExpr("id", "CAST(id AS DOUBLE) AS c", "named_struct('a', id) AS s")
    with arrow_batches_cut_by_rows(narrow):
        assert _bytes(spark.conf.get(key)) == ARROW_NO_BYTE_CAP
    assert _bytes(spark.conf.get(key)) == ARROW_BATCH_BYTES
    for wide in (narrow.selectExpr("id", "CAST(id AS STRING) AS s"), narrow.selectExpr("array(id) AS a")):
        with arrow_batches_cut_by_rows(wide):
            assert _bytes(spark.conf.get(key)) == ARROW_BATCH_BYTES
    spark.conf.set(key, "1k")  # a cap a batch of narrow rows would reach: kept
    try:
        with arrow_batches_cut_by_rows(narrow):
            assert spark.conf.get(key) == "1k"
    finally:
        spark.conf.set(key, str(ARROW_BATCH_BYTES))


def _bytes(text: str) -> int:
    return int(text.rstrip("b"))


def test_fixed_row_bytes() -> None:
    from pyspark.sql import types as T

    assert fixed_row_bytes(T.StructType([])) == 0
    schema = T.StructType(
        [
            T.StructField("i", T.LongType()),
            T.StructField("f", T.FloatType()),
            T.StructField("b", T.BooleanType()),
            T.StructField("s", T.StructType([T.StructField("d", T.DecimalType(10, 2))])),
        ]
    )
    assert fixed_row_bytes(schema) == (8 + 1) + (4 + 1) + (1 + 1) + ((16 + 1) + 1)
    for loose in (
        T.StringType(),
        T.BinaryType(),
        T.ArrayType(T.IntegerType()),
        T.MapType(T.IntegerType(), T.IntegerType()),
    ):
        assert (
            fixed_row_bytes(T.StructType([T.StructField("x", T.StructType([T.StructField("y", loose)]))]))
            is None
        )


def test_a_write_of_several_batches_in_one_task_reads_back_in_pylance(
    spark: SparkSession, tmp_path: Path
) -> None:
    rows = 2 * ARROW_BATCH_ROWS + 37
    frame = spark.range(0, rows, numPartitions=1).selectExpr(
        "id", "id % 1000 AS a", "CAST(id AS DOUBLE) / 7 AS c"
    )
    uri = str(tmp_path / "t.lance")
    for _ in range(2):  # created, then appended to
        jobs.save(frame, uri)
    table = lance.dataset(uri).to_table()
    ids = np.tile(np.arange(rows, dtype=np.int64), 2)
    assert table.column("id").to_numpy().tolist() == ids.tolist()
    assert np.array_equal(table.column("a").to_numpy(), ids % 1000)
    assert np.array_equal(table.column("c").to_numpy(), ids / 7)
