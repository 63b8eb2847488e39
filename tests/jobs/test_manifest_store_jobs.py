"""Spark jobs and the Datasource commit through an external manifest store (SqliteManifestStore)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

import jobs
import lance_ops
from jobs.datasource import LanceDataSource
from lance_ops import SqliteManifestStore

pytestmark = [pytest.mark.spark]


def _table(n: int, start: int = 0) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table({"id": ids, "score": ids * 0.5})


def _claimed(db: Path, uri: str) -> list[int]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT version FROM lance_manifests WHERE base_uri = ? ORDER BY version", (uri,))
        return [int(v) for (v,) in rows]


def test_jobs_and_datasource_commit_through_the_store(spark: SparkSession, tmp_path: Path) -> None:
    uri, db = str(tmp_path / "ds.lance"), tmp_path / "m.db"
    store = SqliteManifestStore(db)
    spark.dataSource.register(LanceDataSource)
    spark.createDataFrame(_table(40).to_pandas()).write.format("lance").mode("append").option(
        "manifest_store", str(db)
    ).option("max_rows_per_file", 10).save(uri)
    spark.createDataFrame(_table(20, 100).to_pandas()).write.format("lance").mode("append").option(
        "manifest_store", str(db)
    ).option("max_rows_per_file", 10).save(uri)
    assert _claimed(db, uri) == [1, 2]
    jobs.delete(spark, uri, "id < 5", manifest_store=store)
    jobs.add_columns(spark, uri, {"double": "id * 2"}, manifest_store=store)
    jobs.rebuild_statistics(spark, uri, force=True, manifest_store=store)
    jobs.profile_encodings(spark, uri, manifest_store=store)
    jobs.compact(spark, uri, target_rows_per_fragment=1000, manifest_store=store)
    direct = [v["version"] for v in lance_ops.dataset(uri).versions()]
    assert direct[-1] >= 7 and _claimed(db, uri) == direct
    read = spark.read.format("lance").option("manifest_store", str(db)).load(uri)
    assert read.count() == 55
    stats = jobs.cleanup(spark, uri, retain_versions=1, manifest_store=store)
    assert stats.old_versions == len(direct) - 1
    assert lance_ops.dataset(uri, manifest_store=store).count_rows() == 55
