"""Spark side of lance-ops: the ``format("lance")`` data source and jobs built on it.

``register(spark)`` makes ``spark.read/write.format("lance")`` available in a session;
``jobs.delete``, ``jobs.merge_insert``, ``jobs.add_columns``, ``jobs.compact``,
``jobs.rebuild_statistics``, ``jobs.create_index`` and ``jobs.profile_encodings`` are the
distributed maintenance jobs (executors do the data work, the driver commits), ``jobs.cleanup``,
``jobs.optimize_indices`` and the ``jobs.tags`` helpers run on the driver; each is also
``python -m jobs.<name> --uri ...`` (see docs/spark.md);
``jobs.save`` writes a DataFrame in any save mode; ``jobs.append_files`` writes Parquet / Arrow IPC
files read by the executors with pyarrow (no rows through Spark's JVM);
``python -m jobs.pipeline`` is the main job.
"""

from __future__ import annotations

import warnings

from pyspark.sql import SparkSession

from jobs import tags
from jobs.add_columns import add_columns
from jobs.append_files import append_files
from jobs.cleanup import cleanup
from jobs.compact import compact
from jobs.create_index import create_index
from jobs.datasource import FILTER_PUSHDOWN_CONF, LanceDataSource, save
from jobs.delete import delete
from jobs.merge_insert import merge_insert
from jobs.optimize_indices import optimize_indices
from jobs.profile_encodings import profile_encodings
from jobs.rebuild_statistics import rebuild_statistics

# ``jobs.delete`` etc. are both the job functions (imported here) and the modules that
# ``python -m jobs.<name>`` runs; runpy warns that the module was imported with the package, which is
# expected and harmless here.
warnings.filterwarnings(
    "ignore",
    message=r"'jobs\.\w+' found in sys\.modules after import of package 'jobs'",
    category=RuntimeWarning,
)

__all__ = [
    "LanceDataSource",
    "add_columns",
    "append_files",
    "cleanup",
    "compact",
    "create_index",
    "delete",
    "merge_insert",
    "optimize_indices",
    "profile_encodings",
    "rebuild_statistics",
    "register",
    "save",
    "tags",
]


def register(spark: SparkSession) -> None:
    """Register :class:`LanceDataSource` as ``"lance"``. Also sets
    ``spark.sql.python.filterPushdown.enabled``, which Spark needs for a reader taking filters; the
    source refuses ``filter_pushdown`` on Spark releases that would reuse such a reader
    (:func:`jobs.datasource.filter_pushdown`)."""
    spark.conf.set(FILTER_PUSHDOWN_CONF, "true")
    spark.dataSource.register(LanceDataSource)
