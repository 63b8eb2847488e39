"""L20: ``jobs.compact(spark, uri, cluster_by=...)`` writes what the in-process clustering writes."""

from __future__ import annotations

from pathlib import Path

import lance
from pyspark.sql import SparkSession

import jobs
import lance_ops
from tests.table.test_clustering import arrival, build


def test_spark_clustering_equals_in_process(spark: SparkSession, tmp_path: Path) -> None:
    local, distributed = str(tmp_path / "local"), str(tmp_path / "spark")
    for uri in (local, distributed):
        build(uri, 3000, 6, stable=True).delete("id % 13 = 0")
    lance_ops.dataset(local).optimize.compact_files(
        target_rows_per_fragment=500, cluster_by=["day", "s"], cluster_mode="zorder"
    )
    metrics = jobs.compact(
        spark, distributed, target_rows_per_fragment=500, cluster_by=["day", "s"], cluster_mode="zorder"
    )
    assert metrics.fragments_removed == 6
    want = lance.dataset(local).to_table(with_row_id=True)
    got = lance.dataset(distributed).to_table(with_row_id=True)
    assert got.equals(want)
    assert got.num_rows == 3000 - len(range(0, 3000, 13))
    expected = arrival(3000).take([i for i in range(3000) if i % 13])
    assert got.drop_columns(["_rowid"]).sort_by("id").equals(expected)
    # a second run: already clustered
    assert jobs.compact(spark, distributed, target_rows_per_fragment=500, cluster_by=["day", "s"],
                        cluster_mode="zorder").fragments_added == 0  # fmt: skip
