"""One way to build a local Spark session for lance-ops jobs, tests and Dagster assets.

``get_spark`` points Python workers at this interpreter (so executors import the same venv and the
installed ``jobs``/``lance_ops`` packages), keeps memory and shuffle settings small enough for a laptop
or a CI runner, pins the session time zone to UTC (Lance timestamps carry their own zone) and registers
the ``lance`` data source.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from pyspark.sql import SparkSession

import jobs

# Set by spark-submit for the Python driver it starts; the JVM then already knows its master.
LAUNCHER_GATEWAY = "PYSPARK_GATEWAY_PORT"

#: Rows per Arrow batch between Spark's JVM and its Python tasks (``DEFAULT_CONFIG``).
ARROW_BATCH_ROWS = 128 * 1024
#: ``spark.sql.execution.arrow.maxBytesPerBatch`` meaning "no cap" to Spark (Int.MaxValue).
ARROW_NO_BYTE_CAP = 2**31 - 1

DEFAULT_CONFIG: dict[str, str] = {
    "spark.driver.memory": "1g",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # Rows per Arrow batch Spark hands a Python task (the data source's writer, mapInArrow): 10,000
    # by default, which at 10M rows costs the JVM and the Python worker ~20-30 % more CPU than
    # 131,072 (bench/RESULTS.md, "L19 Spark jobs III").
    "spark.sql.execution.arrow.maxRecordsPerBatch": str(ARROW_BATCH_ROWS),
    # No cap in bytes: Spark's default is 64 MiB, and with any cap but Int.MaxValue (none) Spark
    # measures the Arrow batch being built after EVERY row, half the JVM's CPU of a 10M-row
    # DataFrame append (bench/RESULTS.md, "L19 Spark jobs: one wave, no byte cap"). A batch of
    # 131,072 rows is 128 MiB at 1 KiB a row: for wider rows pass a lower ``maxRecordsPerBatch``
    # (or a byte cap, at that CPU cost) in ``get_spark``'s ``config``.
    "spark.sql.execution.arrow.maxBytesPerBatch": str(ARROW_NO_BYTE_CAP),
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
