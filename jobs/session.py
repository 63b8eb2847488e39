"""One way to build a local Spark session for lance-ops jobs, tests and Dagster assets.

``get_spark`` points Python workers at this interpreter (so executors import the same venv and the
installed ``jobs``/``lance_ops`` packages), keeps memory and shuffle settings small enough for a laptop
or a CI runner, pins the session time zone to UTC (Lance timestamps carry their own zone) and registers
the ``lance`` data source.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

import jobs

# Set by spark-submit for the Python driver it starts; the JVM then already knows its master.
LAUNCHER_GATEWAY = "PYSPARK_GATEWAY_PORT"

#: Rows per Arrow batch between Spark's JVM and its Python tasks (``DEFAULT_CONFIG``).
ARROW_BATCH_ROWS = 128 * 1024
#: Bytes at which Spark cuts an Arrow batch for a Python task (``DEFAULT_CONFIG``; Spark's default).
ARROW_BATCH_BYTES = 64 << 20
#: ``spark.sql.execution.arrow.maxBytesPerBatch`` meaning "no cap" to Spark (Int.MaxValue).
ARROW_NO_BYTE_CAP = 2**31 - 1
MAX_BYTES_KEY = "spark.sql.execution.arrow.maxBytesPerBatch"
MAX_RECORDS_KEY = "spark.sql.execution.arrow.maxRecordsPerBatch"

DEFAULT_CONFIG: dict[str, str] = {
    "spark.driver.memory": "1g",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # Rows per Arrow batch Spark hands a Python task (the data source's writer, mapInArrow): 10,000
    # by default, which at 10M rows costs the JVM and the Python worker ~20-30 % more CPU than
    # 131,072 (bench/RESULTS.md, "L19 Spark jobs III").
    MAX_RECORDS_KEY: str(ARROW_BATCH_ROWS),
    # A batch is also cut at 64 MiB, so that wide rows (strings, blobs, vectors) never make batches
    # of gigabytes. With any cap but Int.MaxValue (none) Spark measures the batch being built after
    # EVERY row, half the JVM's CPU of a 10M-row DataFrame append (bench/RESULTS.md, "L19 Spark
    # jobs: one wave, no byte cap"): the jobs lift the cap where rows are too narrow to reach it
    # (:func:`arrow_batches_cut_by_rows`).
    MAX_BYTES_KEY: str(ARROW_BATCH_BYTES),
    "spark.python.worker.reuse": "true",
    # Workers forked with jobs and lance_ops already imported (jobs.daemon).
    "spark.python.daemon.module": "jobs.daemon",
    "spark.ui.showConsoleProgress": "false",
}


def python_worker_config() -> dict[str, str]:
    """Settings that make Spark's Python workers run ``sys.executable`` (also exported to the env)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    return {"spark.pyspark.python": sys.executable, "spark.pyspark.driver.python": sys.executable}


def get_spark(
    app_name: str, master: str | None = "local[*]", config: Mapping[str, str] | None = None
) -> SparkSession:
    """A (possibly existing) Spark session with lance-ops defaults, ``config`` overriding them.

    ``master`` None keeps the master the launcher configured (``spark-submit --master``), else
    ``local[*]``.
    """
    if master is None and LAUNCHER_GATEWAY not in os.environ:
        master = "local[*]"
    if master is not None and master.startswith("local"):
        # Bind local sessions to loopback: no host-name lookup, nothing listening on other interfaces.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    for key, value in {**DEFAULT_CONFIG, **python_worker_config(), **(config or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    jobs.register(spark)
    return spark


# Bytes of one value of Spark's fixed-width types in Arrow (booleans and validity counted as a byte).
_FIXED_WIDTHS: dict[type[T.DataType], int] = {
    T.NullType: 0,
    T.BooleanType: 1,
    T.ByteType: 1,
    T.ShortType: 2,
    T.IntegerType: 4,
    T.LongType: 8,
    T.FloatType: 4,
    T.DoubleType: 8,
    T.DateType: 4,
    T.TimestampType: 8,
    T.TimestampNTZType: 8,
    T.DecimalType: 16,
    T.DayTimeIntervalType: 8,
    T.YearMonthIntervalType: 4,
}


def fixed_row_bytes(schema: T.StructType) -> int | None:
    """The most bytes a row of ``schema`` takes in an Arrow batch when every field is of fixed
    width (a byte of validity per field included); None when some field's values may be of any
    length (strings, binary, arrays, maps, variants)."""
    total = 0
    for field in schema.fields:
        dtype = field.dataType
        width = fixed_row_bytes(dtype) if isinstance(dtype, T.StructType) else _FIXED_WIDTHS.get(type(dtype))
        if width is None:
            return None
        total += width + 1
    return total


_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)


def _bytes_conf(text: str) -> int | None:
    """A Spark byte-size setting (``67108864``, ``64m``, ``64MB``) in bytes; None if unreadable."""
    found = _SIZE.match(text)
    if found is None:
        return None
    return int(found.group(1)) << (10 * "kmgt".find(found.group(2).lower()) + 10 if found.group(2) else 0)


@contextmanager
def arrow_batches_cut_by_rows(df: DataFrame) -> Iterator[None]:
    """While the block runs, no byte cap on the Arrow batches Spark hands Python tasks, when
    ``df``'s rows are of fixed width and a batch of ``maxRecordsPerBatch`` of them cannot reach the
    session's cap anyway: the batches are the same, and Spark no longer measures each one after
    every row it adds (half the JVM's CPU of a 10M-row append). Otherwise (rows of any length, no
    row limit, a cap already lifted) the session's settings stay. Session-wide while it lasts: jobs
    on other threads of the same session see it too (their batches stay within the cap they had
    only if their rows are as narrow)."""
    conf = df.sparkSession.conf
    cap = _bytes_conf(str(conf.get(MAX_BYTES_KEY, str(ARROW_BATCH_BYTES))))
    rows = int(str(conf.get(MAX_RECORDS_KEY, "10000")))
    width = fixed_row_bytes(df.schema)
    if cap is None or cap >= ARROW_NO_BYTE_CAP or width is None or rows <= 0 or width * rows > cap:
        yield
        return
    before = conf.get(MAX_BYTES_KEY)
    conf.set(MAX_BYTES_KEY, str(ARROW_NO_BYTE_CAP))
    try:
        yield
    finally:
        conf.set(MAX_BYTES_KEY, str(before))
