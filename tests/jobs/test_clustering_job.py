"""L20: ``jobs.compact(spark, uri, cluster_by=...)``: a range-partitioned sort on the executors
(jobs/cluster.py) that writes the rows (and row ids) the in-process clustering writes."""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

import jobs
import lance_ops
from lance_ops.ops import clustering
from lance_ops.ops.compaction import open_version
from tests.table.test_clustering import arrival, build, key_ranges


@pytest.mark.parametrize(
    ("stable", "keys", "mode"),
    [(True, ["day", "s"], "zorder"), (False, ["s"], "sort"), (True, ["x"], "sort")],
)
def test_spark_clustering_equals_in_process(spark: SparkSession, tmp_path: Path, stable, keys, mode) -> None:  # type: ignore[no-untyped-def]
    local, distributed = str(tmp_path / "local"), str(tmp_path / "spark")
    for uri in (local, distributed):
        build(uri, 3000, 6, stable=stable).delete("id % 13 = 0")
        if not stable:
            lance.dataset(uri).create_scalar_index("id", "BTREE")
    lance_ops.dataset(local).optimize.compact_files(
        target_rows_per_fragment=300, cluster_by=keys, cluster_mode=mode
    )
    metrics = jobs.compact(
        spark, distributed, target_rows_per_fragment=300, cluster_by=keys, cluster_mode=mode
    )
    assert metrics.fragments_removed == 6
    want = lance.dataset(local).to_table(with_row_id=stable)
    got = lance.dataset(distributed).to_table(with_row_id=stable)
    assert got.equals(want)
    assert got.num_rows == 3000 - len(range(0, 3000, 13))
    expected = arrival(3000).take([i for i in range(3000) if i % 13])
    assert got.select(expected.column_names).sort_by("id").equals(expected)
    # several ranges were written (new fragments cut per range), each a set of whole fragments
    assert len(lance.dataset(distributed).get_fragments()) >= 2
    if mode == "sort":  # fragment key ranges are disjoint
        ranges = key_ranges(distributed, lance, keys[0])
        assert all(hi <= lo for (_, hi), (lo, _) in zip(ranges, ranges[1:], strict=False))
    if not stable:  # a pylance BTREE built before was remapped by the old -> new addresses
        for uri in (local, distributed):
            indexed = lance.dataset(uri).to_table(filter="id >= 1000 AND id < 1200", columns=["id", "s"])
            plain = lance.dataset(uri).to_table(
                filter="id >= 1000 AND id < 1200", columns=["id", "s"], use_scalar_index=False
            )
            assert indexed.sort_by("id").equals(plain.sort_by("id")) and plain.num_rows > 180
    # a second run: already clustered
    again = jobs.compact(spark, distributed, target_rows_per_fragment=300, cluster_by=keys, cluster_mode=mode)
    assert again.fragments_added == 0


def test_spark_incremental_clustering_equals_in_process(spark: SparkSession, tmp_path: Path) -> None:
    from tests.table.test_clustering import nightly

    uris = str(tmp_path / "local"), str(tmp_path / "spark")
    for uri in uris:
        lance_ops.write_dataset(nightly(3000, 0, 10_000, seed=1), uri, max_rows_per_file=1000)
        lance_ops.dataset(uri).update_config(
            {"lance-ops.cluster-by": "k", "lance-ops.cluster-incremental": "true"}
        )
        lance_ops.dataset(uri).optimize.compact_files(target_rows_per_fragment=1000)
        lance_ops.write_dataset(nightly(150, 0, 10_000, seed=2), uri, mode="append", max_rows_per_file=50)
    local, distributed = uris
    want = lance_ops.dataset(local).optimize.compact_files(target_rows_per_fragment=1000)
    got = jobs.compact(spark, distributed, target_rows_per_fragment=1000)
    assert got == want and got.fragments_removed == 6  # 3 ranges, 3 new fragments
    assert lance.dataset(distributed).to_table().equals(lance.dataset(local).to_table())
    ranges = sorted(key_ranges(distributed, lance, "k"))
    assert all(hi <= lo for (_, hi), (lo, _) in zip(ranges, ranges[1:], strict=False))


def test_spark_ranges_are_sized_by_decoded_bytes(spark: SparkSession, tmp_path: Path) -> None:
    """Rows that compress well (a long, mostly repeated string) take far more memory decoded than
    their data files: the job cuts its ranges by the decoded size, as the in-process sort does."""
    uri = str(tmp_path / "d")
    rows = 4000
    text = pa.array([("x" * 2000) + str(i % 7) for i in range(rows)])
    keys = np.random.default_rng(7).permutation(rows)
    data = pa.table({"id": pa.array(np.arange(rows)), "k": pa.array(keys), "s": text})
    ds = lance_ops.write_dataset(data, uri, max_rows_per_file=500)
    files = ds.manifest.fragments
    file_bytes = sum(d.file_size_bytes for f in files for d in f.files)
    budget = 2 * file_bytes  # the data files would fit half the budget: 1 range
    version = lance_ops.dataset(uri).version
    opened = open_version(uri, version, {})
    readers = [opened.fragment(f) for f in files]
    held = clustering.held_bytes(readers, opened.schema, rows)
    assert held > 4 * budget  # decoded, the rows need several ranges
    want = clustering.range_count(held, rows, budget)
    assert want > spark.sparkContext.defaultParallelism
    totals = []

    def progress(event):  # type: ignore[no-untyped-def]
        if event.unit == "ranges" and event.done == 0:
            totals.append(event.total)

    jobs.compact(
        spark,
        uri,
        target_rows_per_fragment=100,
        cluster_by=["k"],
        cluster_memory_bytes=budget,
        progress=progress,
    )
    assert totals == [want]
    got = lance.dataset(uri).to_table()
    assert got["k"].to_pylist() == list(range(rows))
    assert got.sort_by("id").equals(data)
