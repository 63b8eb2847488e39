"""Spark side of lance-ops: the ``format("lance")`` data source and jobs built on it.

``register(spark)`` makes ``spark.read/write.format("lance")`` available in a session.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from jobs.add_columns import add_columns
from jobs.compact import compact
from jobs.datasource import FILTER_PUSHDOWN_CONF, LanceDataSource, save
from jobs.delete import delete

__all__ = ["LanceDataSource", "add_columns", "compact", "delete", "register", "save"]


def register(spark: SparkSession) -> None:
    """Register :class:`LanceDataSource` as ``"lance"``; allow its opt-in filter pushdown
    (``.option("filter_pushdown", "true")`` needs ``spark.sql.python.filterPushdown.enabled``)."""
    spark.conf.set(FILTER_PUSHDOWN_CONF, "true")
    spark.dataSource.register(LanceDataSource)
