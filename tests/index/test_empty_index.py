"""L18: empty indices (``train=False``), as pylance 14 makes them, both ways.

pylance 14 commits an empty index covering no fragment: a scalar index's files hold no row, a
vector index has no file at all (its details record the parameters). ``index_stats`` reports it
as ``"N/A"`` with ``{}`` per segment; scans read every fragment as unindexed; ``optimize_indices``
fills it (a vector index is trained then, with pylance's default number of partitions). Each
case runs with lance_ops and pylance on either side: one builds the empty index, the other
optimizes it, and both read the result.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_ops
from lance_ops.errors import ArgumentTypeError, InvalidArgumentError, UnsupportedFeatureError

LIBS = {"lance_ops": lance_ops, "pylance": lance}
PAIRS = [("lance_ops", "lance_ops"), ("lance_ops", "pylance"), ("pylance", "lance_ops")]
SCALAR = {
    "BTREE": ("id", "id = 57"),
    "BITMAP": ("cat", "cat = 'c3'"),
    "LABEL_LIST": ("tags", "array_has_any(tags, ['t2'])"),
    "ZONEMAP": ("id", "id = 57"),
    "BLOOMFILTER": ("id", "id = 57"),
    "NGRAM": ("txt", "contains(txt, 'rd5')"),
    "INVERTED": ("txt", None),
}
DIM = 16


def _table(start: int, rows: int) -> pa.Table:
    ids = np.arange(start, start + rows)
    vectors = np.random.default_rng(start).standard_normal((rows, DIM)).astype(np.float32)
    return pa.table(
        {
            "id": ids,
            "cat": pa.array([f"c{i % 7}" for i in ids]),
            "tags": pa.array([[f"t{i % 5}", f"t{i % 3}"] for i in ids]),
            "txt": pa.array([f"word{i % 11} rd{i % 9}" for i in ids]),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), DIM),
        }
    )


def _stats(lib: Any, path: Path, name: str) -> dict[str, Any]:
    stats = lib.dataset(str(path)).stats.index_stats(name)
    stats.pop("updated_at_timestamp_ms")
    return stats


def _empty_stats(rows: int) -> dict[str, Any]:
    return {
        "index_type": "N/A",
        "num_indices": 1,
        "num_segments": 1,
        "indices": [{}],
        "segments": [{}],
        "num_indexed_fragments": 0,
        "num_indexed_rows": 0,
        "num_unindexed_fragments": 1,
        "num_unindexed_rows": rows,
        "num_indexed_rows_per_delta": [0],
    }


@pytest.mark.parametrize(("builder", "optimizer"), PAIRS)
@pytest.mark.parametrize("kind", list(SCALAR))
def test_empty_scalar_index(tmp_path: Path, kind: str, builder: str, optimizer: str) -> None:
    column, predicate = SCALAR[kind]
    lance_ops.write_dataset(_table(0, 300), tmp_path)
    LIBS[builder].dataset(str(tmp_path)).create_scalar_index(column, kind, name="idx", train=False)
    for lib in LIBS.values():  # both read the empty index alike
        stats = _stats(lib, tmp_path, "idx")
        assert {k: stats[k] for k in _empty_stats(300)} == _empty_stats(300)
    if predicate is not None:  # a scan answers from the data, as without the index
        expected = lance.dataset(str(tmp_path)).to_table(filter=predicate, columns=["id"])
        assert expected.num_rows > 0
        got = lance_ops.dataset(str(tmp_path)).to_table(filter=predicate, columns=["id"])
        assert got.sort_by("id").equals(expected.sort_by("id"))
    lance_ops.write_dataset(_table(300, 100), tmp_path, mode="append")
    LIBS[optimizer].dataset(str(tmp_path)).optimize.optimize_indices()
    ours, theirs = _stats(lance_ops, tmp_path, "idx"), _stats(lance, tmp_path, "idx")
    assert ours == theirs
    assert ours["num_indexed_rows"] == 400 and ours["num_unindexed_rows"] == 0
    assert ours["index_type"] != "N/A"
    if predicate is not None:  # pylance answers from the filled index with every matching row
        ds = lance.dataset(str(tmp_path))
        assert "ScalarIndexQuery" in ds.scanner(filter=predicate).explain_plan()
        got = ds.to_table(filter=predicate, columns=["id"])
        expected = ds.to_table(filter=predicate, columns=["id"], use_scalar_index=False)
        assert got.sort_by("id").equals(expected.sort_by("id"))
    else:
        hits = lance.dataset(str(tmp_path)).to_table(full_text_query="word3", columns=["id"])
        assert sorted(hits.column("id").to_pylist()) == [i for i in range(400) if i % 11 == 3]


@pytest.mark.parametrize(("builder", "optimizer"), PAIRS)
@pytest.mark.parametrize("kind", ["IVF_FLAT", "IVF_PQ", "IVF_HNSW_SQ"])
def test_empty_vector_index(tmp_path: Path, kind: str, builder: str, optimizer: str) -> None:
    lance_ops.write_dataset(_table(0, 600), tmp_path)
    LIBS[builder].dataset(str(tmp_path)).create_index(
        "vector", kind, num_partitions=8, num_sub_vectors=4, metric="cosine", train=False
    )
    assert not [p for p in tmp_path.glob("_indices/**/*") if p.is_file()]  # pylance 14 writes none
    q = np.asarray(_table(0, 600).column("vector")[7].values, np.float32)
    nearest = {"column": "vector", "q": q, "k": 5}
    exact = lance.dataset(str(tmp_path)).to_table(nearest={**nearest, "use_index": False}, columns=["id"])
    for lib in LIBS.values():
        stats = _stats(lib, tmp_path, "vector_idx")
        assert {k: stats[k] for k in _empty_stats(600)} == _empty_stats(600)
        found = lib.dataset(str(tmp_path)).to_table(nearest=nearest, columns=["id"])
        assert found.column("id").to_pylist() == exact.column("id").to_pylist()  # searched flat
    lance_ops.write_dataset(_table(600, 100), tmp_path, mode="append")
    LIBS[optimizer].dataset(str(tmp_path)).optimize.optimize_indices()
    ours, theirs = _stats(lance_ops, tmp_path, "vector_idx"), _stats(lance, tmp_path, "vector_idx")
    for stats in (ours, theirs):
        assert stats["index_type"] == kind and stats["num_indexed_rows"] == 700
        segment = stats["indices"][0]
        assert segment["metric_type"] == "cosine" and segment["num_partitions"] == 1  # 700 // 8192
        if kind == "IVF_PQ":
            assert segment["sub_index"]["num_sub_vectors"] == 4
    for lib in LIBS.values():  # the filled index finds the query's own row first
        found = lib.dataset(str(tmp_path)).to_table(nearest=nearest, columns=["id"])
        assert found.column("id")[0].as_py() == 7


def test_unknown_keywords_are_typed_errors(tmp_path: Path) -> None:
    ds = lance_ops.write_dataset(_table(0, 300), tmp_path)
    with pytest.raises(ArgumentTypeError, match="bogus"):
        ds.create_index("vector", "IVF_FLAT", num_partitions=2, bogus=1)
    with pytest.raises(UnsupportedFeatureError, match="ivf_centroids_file"):
        ds.create_index("vector", "IVF_FLAT", num_partitions=2, ivf_centroids_file="c.npy")
    with pytest.raises(InvalidArgumentError, match="bogus"):
        ds.create_scalar_index("id", "BTREE", bogus=1)
    assert ds.describe_indices() == [] and ds.version == 1  # nothing committed
    # pylance's keywords that change nothing lance_ops writes are taken
    ds.create_index("vector", "IVF_FLAT", num_partitions=2, accelerator=None, filter_nan=True, train=True)
    ds.create_scalar_index("id", "BTREE", train=True, progress_callback=None)
    assert sorted(d.name for d in lance.dataset(str(tmp_path)).describe_indices()) == ["id_idx", "vector_idx"]


@pytest.mark.parametrize("compactor", ["lance_ops", "pylance"])
def test_empty_indices_through_compaction(tmp_path: Path, compactor: str) -> None:
    """Compaction leaves the empty indices empty (nothing to remap); optimize then fills them."""
    ds = lance_ops.write_dataset(_table(0, 800), tmp_path, max_rows_per_file=200)
    ds.create_index("vector", "IVF_PQ", num_partitions=2, num_sub_vectors=4, train=False)
    ds.create_scalar_index("id", "BTREE", train=False)
    ds.delete("id < 50")
    LIBS[compactor].dataset(str(tmp_path)).optimize.compact_files(target_rows_per_fragment=1000)
    q = np.asarray(_table(0, 800).column("vector")[123].values, np.float32)
    for lib in LIBS.values():
        ds = lib.dataset(str(tmp_path))
        assert len(ds.get_fragments()) == 1
        assert [ds.stats.index_stats(n)["index_type"] for n in ("vector_idx", "id_idx")] == ["N/A", "N/A"]
        assert ds.to_table(filter="id = 123", columns=["id"]).num_rows == 1
        assert (
            ds.to_table(nearest={"column": "vector", "q": q, "k": 1}, columns=["id"])["id"][0].as_py() == 123
        )
    lance_ops.dataset(str(tmp_path)).optimize.optimize_indices()
    for lib in LIBS.values():
        ds = lib.dataset(str(tmp_path))
        assert [ds.stats.index_stats(n)["num_indexed_rows"] for n in ("vector_idx", "id_idx")] == [750, 750]
        assert "ScalarIndexQuery" in ds.scanner(filter="id = 123").explain_plan()
        assert (
            ds.to_table(nearest={"column": "vector", "q": q, "k": 1}, columns=["id"])["id"][0].as_py() == 123
        )


def test_skip_transpose_stores_row_major_pq_codes(tmp_path: Path) -> None:
    """``skip_transpose=True`` keeps PQ codes row-major, as pylance 14 records it (``transposed``)."""
    ds = lance_ops.write_dataset(_table(0, 600), tmp_path)
    ds.create_index("vector", "IVF_PQ", num_partitions=2, num_sub_vectors=4, skip_transpose=True, seed=3)
    theirs = lance.dataset(str(tmp_path))
    assert theirs.stats.index_stats("vector_idx")["indices"][0]["sub_index"]["transposed"] is False
    q = np.asarray(_table(0, 600).column("vector")[42].values, np.float32)
    nearest = {"column": "vector", "q": q, "k": 5, "nprobes": 2}
    found = theirs.to_table(nearest=nearest, columns=["id"])["id"].to_pylist()
    assert found[0] == 42
    ours = lance_ops.dataset(str(tmp_path)).to_table(nearest=nearest, columns=["id"])["id"].to_pylist()
    assert ours[0] == 42 and len(set(ours) & set(found)) >= 4  # a PQ tie may order the last apart
