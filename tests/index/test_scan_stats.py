"""Scan statistics (``scan_stats_callback``), the per-dataset index cache (``index_cache_size_bytes``,
hit rate, ``prewarm_index``), the index work in ``analyze_plan`` and ``LANCE_MEM_POOL_SIZE``.

Datasets and indices are written by lance_ops and read by pylance (rows and plans), or written by
pylance and searched by lance_ops; every count asserted is one the scan really makes (loads from
storage only when the dataset's cache misses).
"""

from __future__ import annotations

import logging
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_ops
from lance_ops.errors import IndexNotFoundError, InvalidArgumentError, ResourcesExhaustedError
from lance_ops.io.index_cache import IndexCache, IndexCounter, counting_index_work
from lance_ops.scan_stats import ScanStatistics


class Stats:
    """Collects the statistics of each scan given :meth:`callback`."""

    def __init__(self) -> None:
        self.seen: list[ScanStatistics] = []

    def callback(self, stats: ScanStatistics) -> None:
        self.seen.append(stats)

    @property
    def last(self) -> ScanStatistics:
        return self.seen[-1]


def _ids(n: int) -> pa.Table:
    return pa.table({"id": np.arange(n, dtype=np.int64), "v": np.arange(n, dtype=np.float64) * 0.5})


# ---------------------------------------------------------------------------- the cache itself


def test_index_cache_lru_budget_and_hit_rate() -> None:
    cache = IndexCache(capacity_bytes=100)
    loads: list[str] = []

    def load(name: str) -> str:
        loads.append(name)
        return name

    assert cache.hit_rate() == 0.0
    with counting_index_work() as work:
        cache.get("a", lambda: load("a"), lambda _: 40, kind="index")
        cache.get("b", lambda: load("b"), lambda _: 40)
        cache.get("a", lambda: load("a"), lambda _: 40)  # hit: "a" becomes the most recent
        cache.get("c", lambda: load("c"), lambda _: 40)  # over budget: "b" goes
        cache.get("big", lambda: load("big"), lambda _: 101)  # bigger than the budget: not kept
    assert loads == ["a", "b", "c", "big"]
    assert work == IndexCounter(
        indices_loaded=1, parts_loaded=3, index_comparisons=0, index_cache_hits=1, index_cache_misses=4
    )
    assert cache.entry_count == 2 and cache.size_bytes == 80
    cache.get("b", lambda: load("b"), lambda _: 40)
    assert loads[-1] == "b"  # evicted before: loaded again
    assert cache.hit_rate() == pytest.approx(1 / 6)
    cache.resize(40)
    assert cache.entry_count == 1 and cache.size_bytes == 40


def test_get_many_loads_only_the_missing_in_one_call() -> None:
    cache = IndexCache()
    calls: list[list[int]] = []

    def load(positions: list[int]) -> list[int]:
        calls.append(positions)
        return [10 * p for p in positions]

    assert cache.get_many(["x", "y"], load, lambda _: 8) == [0, 10]
    assert cache.get_many(["w", "x", "y", "z"], load, lambda _: 8) == [0, 0, 10, 30]
    assert calls == [[0, 1], [0, 3]]


def test_zero_budget_keeps_nothing() -> None:
    cache = IndexCache(capacity_bytes=0)
    for _ in range(3):
        cache.get("k", lambda: 1, lambda _: 1)
    assert cache.entry_count == 0 and cache.hit_rate() == 0.0


# ---------------------------------------------------------------------------- scans


def test_scan_statistics_of_a_plain_scan(tmp_path: Path) -> None:
    ds = lance_ops.write_dataset(_ids(1000), tmp_path / "d")
    stats = Stats()
    table = ds.scanner(scan_stats_callback=stats.callback).to_table()
    assert table.num_rows == 1000 and len(stats.seen) == 1
    s = stats.last
    assert s.iops > 0 and s.requests > 0 and s.bytes_read > 0
    assert (s.indices_loaded, s.parts_loaded, s.index_comparisons) == (0, 0, 0)
    assert s.all_counts["output_rows"] == 1000
    assert lance.dataset(str(tmp_path / "d")).to_table() == table


def test_callback_called_after_the_last_batch_only(tmp_path: Path) -> None:
    ds = lance_ops.write_dataset(_ids(100), tmp_path / "d")
    stats = Stats()
    batches = ds.scanner(batch_size=30, scan_stats_callback=stats.callback).to_batches()
    first = next(batches)
    assert first.num_rows == 30 and not stats.seen
    rest = list(batches)
    assert sum(b.num_rows for b in rest) == 70
    assert len(stats.seen) == 1 and stats.last.all_counts["output_rows"] == 100


def test_callback_error_is_logged_not_raised(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    ds = lance_ops.write_dataset(_ids(10), tmp_path / "d")

    def boom(stats: ScanStatistics) -> None:
        raise RuntimeError("callback failed")

    with caplog.at_level(logging.ERROR, logger="lance_ops.scan_stats"):
        assert ds.scanner(scan_stats_callback=boom).to_table().num_rows == 10
    assert "scan_stats_callback raised" in caplog.text


def test_btree_cache_per_opened_dataset_and_prewarm(tmp_path: Path) -> None:
    path = tmp_path / "d"
    ds = lance_ops.write_dataset(_ids(10_000), path)
    ds.create_scalar_index("id", "BTREE")
    stats = Stats()
    expected = lance.dataset(str(path)).to_table(filter="id > 9000")

    def scan(d: lance_ops.LanceDataset) -> ScanStatistics:
        assert d.scanner(filter="id > 9000", scan_stats_callback=stats.callback).to_table() == expected
        return stats.last

    cold = scan(ds)  # the index was just written: nothing of it read yet
    assert cold.indices_loaded >= 1 and cold.parts_loaded >= 1 and cold.index_cache_misses >= 2
    assert cold.index_comparisons > 0
    warm = scan(ds)
    assert (warm.indices_loaded, warm.parts_loaded, warm.index_cache_misses) == (0, 0, 0)
    assert warm.index_cache_hits == 2  # the lookup file and the one page (rows 8192-9999)
    assert cold.index_cache_misses == 3  # those, and the page file opened to read the page
    assert warm.index_comparisons == cold.index_comparisons
    assert warm.bytes_read < cold.bytes_read
    # a checkout shares the cache; a new dataset() call starts with an empty one
    assert scan(ds.checkout_version(ds.version)).parts_loaded == 0
    fresh = lance_ops.dataset(path)
    assert scan(fresh).parts_loaded >= 1
    prewarmed = lance_ops.dataset(path)
    prewarmed.prewarm_index("id_idx")
    before = prewarmed.session().size_bytes()
    assert before > 0
    after = scan(prewarmed)
    assert (after.parts_loaded, after.indices_loaded, after.index_cache_misses) == (0, 0, 0)
    assert prewarmed._ds.index_cache_entry_count() >= 3  # lookup, page file, pages
    assert prewarmed._ds.index_cache_hit_rate() > 0
    with pytest.raises(IndexNotFoundError):
        prewarmed.prewarm_index("nope")


def test_zero_sized_cache_loads_every_time(tmp_path: Path) -> None:
    path = tmp_path / "d"
    lance_ops.write_dataset(_ids(5000), path).create_scalar_index("id", "BTREE")
    ds = lance_ops.dataset(path, index_cache_size_bytes=0)
    stats = Stats()
    for _ in range(2):
        assert ds.scanner(filter="id = 17", scan_stats_callback=stats.callback).to_table().num_rows == 1
        assert stats.last.parts_loaded >= 1 and stats.last.index_cache_hits == 0
    assert ds._ds.index_cache_entry_count() == 0 and ds._ds.index_cache_hit_rate() == 0.0


def test_index_cache_size_is_deprecated(tmp_path: Path) -> None:
    lance_ops.write_dataset(_ids(10), tmp_path / "d")
    with pytest.warns(DeprecationWarning, match="index_cache_size_bytes"):
        ds = lance_ops.dataset(tmp_path / "d", index_cache_size=2)
    assert ds.storage.index_cache.capacity_bytes == 2 * 20 * 1024 * 1024


def test_pylance_written_bitmap_and_zonemap_counted(tmp_path: Path) -> None:
    path = tmp_path / "d"
    table = pa.table({"id": np.arange(4096, dtype=np.int64), "cat": [f"c{i % 7}" for i in range(4096)]})
    theirs = lance.write_dataset(table, str(path))
    theirs.create_scalar_index("cat", "BITMAP")
    theirs.create_scalar_index("id", "ZONEMAP")
    ds = lance_ops.dataset(path)
    stats = Stats()
    for flt in ("cat = 'c3'", "id < 100"):
        ours = ds.scanner(filter=flt, scan_stats_callback=stats.callback).to_table()
        assert ours == theirs.to_table(filter=flt)
        assert stats.last.indices_loaded == 1 and stats.last.index_comparisons > 0
        ds.scanner(filter=flt, scan_stats_callback=stats.callback).to_table()
        assert stats.last.indices_loaded == 0 and stats.last.index_cache_hits == 1


def test_smaller_zones_read_less(tmp_path: Path) -> None:
    ds = lance_ops.write_dataset(pa.table({"x": np.arange(64 * 1024, dtype=np.int64)}), tmp_path / "d")
    stats = Stats()
    read = []
    for rows_per_zone in (64, 16 * 1024):
        ds.create_scalar_index("x", "ZONEMAP", rows_per_zone=rows_per_zone)
        assert ds.scanner(filter="x = 7", scan_stats_callback=stats.callback).to_table().num_rows == 1
        read.append(stats.last.bytes_read)
    assert read[0] < read[1]
    assert lance.dataset(str(tmp_path / "d")).to_table(filter="x = 7").num_rows == 1


# ---------------------------------------------------------------------------- full-text search

TEXT = pa.table(
    {
        "id": list(range(1, 11)),
        "text": ["lance database test", "full text search", "lance search text"] + ["some other content"] * 7,
    }
)


def test_fts_prefilter_scores_only_rows_passing_it(tmp_path: Path) -> None:
    path = tmp_path / "d"
    ds = lance_ops.write_dataset(TEXT, path)
    ds.create_scalar_index("id", "BTREE")
    ds.create_scalar_index("text", "INVERTED")
    args = {"full_text_query": "lance search text", "filter": "id <= 1", "prefilter": True}
    theirs = lance.dataset(str(path)).to_table(**args)
    ours = ds.to_table(**args)
    assert ours["id"].to_pylist() == theirs["id"].to_pylist() == [1]
    assert ours["_score"].to_pylist() == theirs["_score"].to_pylist()
    plan = ds.scanner(**args).analyze_plan()
    match = next(line for line in plan.splitlines() if "MatchQuery: column=text, index=" in line)
    assert "index_comparisons=1," in match  # one document holds a term and passes the filter
    filter_line = next(line for line in plan.splitlines() if "Filter: id <= 1" in line)
    assert "index_comparisons=" in filter_line
    unfiltered = ds.scanner(full_text_query="lance search text").analyze_plan()
    assert "index_comparisons=3," in unfiltered  # three documents hold a term


def test_fts_prewarm(tmp_path: Path) -> None:
    path = tmp_path / "d"
    theirs = lance.write_dataset(pa.table({"fts": ["word"] * 100}), str(path))
    theirs.create_scalar_index("fts", "INVERTED")
    stats = Stats()
    ds = lance_ops.dataset(path)
    assert ds.to_table(full_text_query="word", scan_stats_callback=stats.callback).num_rows == 100
    assert stats.last.parts_loaded >= 1 and stats.last.index_comparisons == 100
    ds = lance_ops.dataset(path)
    ds.prewarm_index("fts_idx", with_position=True)
    ours = ds.to_table(full_text_query="word", scan_stats_callback=stats.callback)
    assert stats.last.parts_loaded == 0
    assert ours["_score"].to_pylist() == theirs.to_table(full_text_query="word")["_score"].to_pylist()


# ---------------------------------------------------------------------------- vector search


def test_vector_cache_and_prewarm(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((2048, 16)).astype(np.float32)
    path = tmp_path / "d"
    table = pa.table({"vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), 16)})
    ds = lance_ops.write_dataset(table, path)
    ds.create_index("vector", "IVF_PQ", num_partitions=16, num_sub_vectors=4)
    q = rng.standard_normal(16).astype(np.float32)
    nearest = {"column": "vector", "q": q, "k": 10, "nprobes": 4}
    cold = lance_ops.dataset(path)
    first = cold.to_table(nearest=nearest, with_row_id=True)
    assert cold._ds.index_cache_entry_count() == 1 + 4  # the model and the probed partitions
    again = cold.to_table(nearest=nearest, with_row_id=True)
    assert again == first and cold._ds.index_cache_hit_rate() > 0.5
    warm = lance_ops.dataset(path)
    warm.prewarm_index("vector_idx")
    assert warm._ds.index_cache_entry_count() == 1 + 16
    assert warm.to_table(nearest=nearest, with_row_id=True) == first
    theirs = lance.dataset(str(path)).to_table(nearest=nearest, with_row_id=True)
    assert set(theirs["_rowid"].to_pylist()) == set(first["_rowid"].to_pylist())


# ---------------------------------------------------------------------------- memory pool


def test_mem_pool_bounds_btree_sort(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "d"
    ds = lance_ops.write_dataset(pa.table({"int": np.arange(100 * 1024, dtype=np.int64) * 10}), path)
    ds.create_scalar_index("int", "BTREE")
    version = ds.version
    monkeypatch.setenv("LANCE_MEM_POOL_SIZE", "1024")
    with pytest.raises(ResourcesExhaustedError, match="LANCE_MEM_POOL_SIZE=1024"):
        ds.create_scalar_index("int", "BTREE", replace=True)
    with pytest.raises(ResourcesExhaustedError):
        ds.create_scalar_index("int", "BITMAP", name="int_bitmap")
    assert lance_ops.dataset(path).version == version  # nothing committed
    ds.create_scalar_index("int", "ZONEMAP", name="int_zones")  # no sort: not bounded
    monkeypatch.setenv("LANCE_MEM_POOL_SIZE", str(64 << 20))
    ds.create_scalar_index("int", "BTREE", replace=True)  # fits
    monkeypatch.setenv("LANCE_MEM_POOL_SIZE", "1024")
    monkeypatch.setenv("LANCE_BYPASS_SPILLING", "1")
    ds.create_scalar_index("int", "BTREE", replace=True)
    theirs = lance.dataset(str(path))
    assert "ScalarIndexQuery" in theirs.scanner(filter="int = 500").explain_plan()
    assert theirs.to_table(filter="int = 500")["int"].to_pylist() == [500]


def test_negative_cache_budget_is_refused(tmp_path: Path) -> None:
    lance_ops.write_dataset(pa.table({"a": [1]}), str(tmp_path / "d"))
    with pytest.raises(InvalidArgumentError, match="index_cache_size_bytes"):
        lance_ops.dataset(str(tmp_path / "d"), index_cache_size_bytes=-1)
    with pytest.raises(InvalidArgumentError, match="index_cache_size_bytes"):
        IndexCache(1024).resize(-1)
