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
from jobs.session import ARROW_BATCH_ROWS

pytestmark = [pytest.mark.spark, pytest.mark.interop]


def _sizes(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        yield pa.RecordBatch.from_pydict({"n": pa.array([batch.num_rows], pa.int64())})


@pytest.mark.parametrize("rows", [1, ARROW_BATCH_ROWS, ARROW_BATCH_ROWS + 1, 2 * ARROW_BATCH_ROWS + 37])
def test_python_tasks_get_batches_of_arrow_batch_rows(spark: SparkSession, rows: int) -> None:
    sizes = [r.n for r in spark.range(0, rows, numPartitions=1).mapInArrow(_sizes, "n long").collect()]
    full, rest = divmod(rows, ARROW_BATCH_ROWS)
    assert sizes == [ARROW_BATCH_ROWS] * full + ([rest] if rest else [])


def test_no_byte_cap_per_batch_by_default(spark: SparkSession) -> None:
    """A ``maxBytesPerBatch`` other than Int.MaxValue (none; Spark's default is 64 MiB) makes the
    JVM measure the batch being built after every row (half its CPU in a 10M-row append)."""
    assert spark.conf.get("spark.sql.execution.arrow.maxBytesPerBatch") in ("2147483647", "2147483647b")


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
