"""``ds.stats.index_stats(name)`` as pylance 14 reports it, key by key, per-segment details included
(BTREE min / max / pages, bitmap counts, zone counts, IVF partitions, centroids, metric, sub-index
parameters): on pylance-built indices, and on the ones our compaction and optimize_indices wrote."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pytest

import lance_ops
from tests.index.conftest import DELETE, VECTOR_PARAMS, build_scalar, make_table

# INVERTED / NGRAM details: tests/index/test_inverted_stats.py
SCALARS = ("id_idx", "cat_idx", "tags_idx", "id_zm", "cat_bt")
METRICS = {
    "IVF_FLAT": "cosine",
    "IVF_PQ": "dot",
    "IVF_SQ": "cosine",
    "IVF_HNSW_SQ": "dot",
    "IVF_HNSW_PQ": "cosine",
}


@pytest.fixture(scope="module")
def every_type(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("stats") / "ds"
    ds = build_scalar(path)
    ds.create_scalar_index("cat", "BTREE", name="cat_bt")  # strings, nulls every 13th row
    for kind, params in VECTOR_PARAMS.items():
        metric = METRICS.get(kind, "l2")
        ds.create_index("vec", kind, name=f"v_{kind.lower()}", num_partitions=4, metric=metric, **params)
    return path


def names() -> list[str]:
    return [*SCALARS, *(f"v_{kind.lower()}" for kind in VECTOR_PARAMS)]


def assert_stats_equal(path: Path) -> None:
    ours, theirs = lance_ops.dataset(str(path)), lance.dataset(str(path))
    for name in names():
        mine: dict[str, Any] = ours.stats.index_stats(name)
        expected: dict[str, Any] = theirs.stats.index_stats(name)
        assert set(mine) == set(expected), name
        for key in expected:
            assert mine[key] == expected[key], (name, key)
        assert mine["indices"], name  # details read, not an empty list


def test_pylance_built_indices(every_type: Path) -> None:
    assert_stats_equal(every_type)
    stats = lance_ops.dataset(str(every_type)).stats.index_stats("v_ivf_hnsw_sq")["indices"][0]
    assert stats["metric_type"] == "dot" and stats["sub_index"]["index_type"] == "HNSW"
    assert sum(p["size"] for p in stats["partitions"]) == 3000 and len(stats["centroids"]) == 4


def test_after_our_compaction_and_optimize(every_type: Path, tmp_path: Path) -> None:
    """Remapped segments (rows removed), then a delta segment per index after an append."""
    path = tmp_path / "ds"
    shutil.copytree(every_type, path)
    lance.dataset(str(path)).delete(DELETE)
    lance_ops.dataset(str(path)).optimize.compact_files(target_rows_per_fragment=1 << 20)
    assert_stats_equal(path)
    lance.write_dataset(make_table(300, start=3000, seed=7), path, mode="append")
    lance_ops.dataset(str(path)).optimize.optimize_indices(index_names=names(), num_indices_to_merge=0)
    assert_stats_equal(path)
    stats = lance.dataset(str(path)).stats.index_stats("v_ivf_pq")
    assert stats["num_indices"] == 2 and stats["num_unindexed_rows"] == 0


def test_btree_bounds_printed_as_pylance(tmp_path: Path) -> None:
    """Page bounds as text: NULL first, NaN last, float32 by its own shortest digits."""
    table = pa.table(
        {
            "f32": pa.array([0.1, None, 2.5, 7.0], pa.float32()),
            "f64": pa.array([0.1, 1e20, float("nan"), -3.0]),
            "s": pa.array(["b", "a", None, "c"]),
        }
    )
    ds = lance.write_dataset(table, tmp_path / "ds")
    for column in table.column_names:
        ds.create_scalar_index(column, "BTREE")
    ours = lance_ops.dataset(str(tmp_path / "ds"))
    for column in table.column_names:
        name = f"{column}_idx"
        assert ours.stats.index_stats(name) == ds.stats.index_stats(name), name
