"""L18: ``full_text_query=`` scans of lance_ops against pylance 14's, both ways: over pylance's own
INVERTED index and over ours, the same rows and BM25 ``_score``s (float tolerance), with limits,
pre/postfilters, rows appended after the build (searched flat), deleted rows and no index at all.
"""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_ops
from lance_ops.errors import InvalidArgumentError, UnsupportedFeatureError
from lance_ops.query.fulltext import MatchQuery, MultiMatchQuery, PhraseQuery
from tests.index.test_fts_build import QUERIES, corpus, write

pytestmark = pytest.mark.interop


def rows(module: object, path: Path, query: object, **kwargs: object) -> tuple[list[int], np.ndarray]:
    table = module.dataset(str(path)).to_table(full_text_query=query, columns=["id"], **kwargs)  # type: ignore[attr-defined]
    assert table.column_names == ["id", "_score"]
    table = table.sort_by([("_score", "descending"), ("id", "ascending")])
    return table.column("id").to_pylist(), np.asarray(table.column("_score"), np.float32)


def assert_same(path: Path, query: object, *, exact_ids: bool = True, **kwargs: object) -> int:
    ids, scores = rows(lance_ops, path, query, **kwargs)
    want_ids, want_scores = rows(lance, path, query, **kwargs)
    np.testing.assert_allclose(scores, want_scores, rtol=1e-6, err_msg=str(query))
    if exact_ids:
        assert sorted(ids) == sorted(want_ids), query
    return len(ids)


@pytest.fixture(params=["pylance", "lance_ops"])
def indexed(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """700 rows in 3 fragments with an INVERTED index built by ``request.param``, then 200 rows
    appended (not indexed) and some rows deleted."""
    path = tmp_path / "ds"
    write(path, corpus(700))
    (lance if request.param == "pylance" else lance_ops).dataset(str(path)).create_scalar_index(
        "text", "INVERTED"
    )
    more = corpus(200, seed=9)
    table = pa.table({"id": pa.array(range(700, 900), pa.int64()), "text": pa.array(more, pa.string())})
    lance.write_dataset(table, path, mode="append")
    lance.dataset(str(path)).delete("id % 10 = 4")
    return path


def test_search_matches_pylance(indexed: Path) -> None:
    found = sum(assert_same(indexed, q) for q in QUERIES)
    assert found > 500
    assert assert_same(indexed, {"query": "alpha w3", "columns": ["text"]}) > 50
    ids, _ = rows(lance_ops, indexed, "alpha")
    assert all(i % 10 != 4 for i in ids) and any(i >= 700 for i in ids)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"limit": 7},
        {"limit": 5, "offset": 3},
        {"filter": "id > 300", "limit": 10},
        {"filter": "id > 300", "limit": 10, "prefilter": True},
        {"filter": "id < 50 or id >= 800", "prefilter": True},
    ],
)
def test_limit_and_filters(indexed: Path, kwargs: dict) -> None:
    # ids are compared only without ties at the cut (pylance orders tied scores arbitrarily)
    ids, scores = rows(lance_ops, indexed, "w5 gamma", **kwargs)
    want_ids, want_scores = rows(lance, indexed, "w5 gamma", **kwargs)
    np.testing.assert_allclose(scores, want_scores, rtol=1e-6)
    if len(set(scores.tolist())) == len(scores):
        assert ids == want_ids
    if "filter" in kwargs and "id > 300" in kwargs["filter"]:
        assert all(i > 300 for i in ids)


def test_after_optimize_and_explain(indexed: Path) -> None:
    lance_ops.dataset(str(indexed)).optimize.optimize_indices()
    for query in QUERIES[:4]:
        assert_same(indexed, query)
    plan = lance_ops.dataset(str(indexed)).scanner(full_text_query="alpha", columns=["id"]).explain_plan()
    assert "MatchQuery: column=text, index=text_idx" in plan


def test_without_index_searches_flat(tmp_path: Path) -> None:
    write(tmp_path / "ds", corpus(300))
    for query in ("alpha running", "Running the", "Crème"):
        assert assert_same(tmp_path / "ds", {"query": query, "columns": ["text"]}) > 0
    assert (
        assert_same(tmp_path / "ds", {"query": "w3", "columns": ["text"]}, filter="id < 100", prefilter=True)
        > 5
    )
    plan = (
        lance_ops.dataset(str(tmp_path / "ds"))
        .scanner(full_text_query={"query": "alpha", "columns": ["text"]})
        .explain_plan()
    )
    assert "MatchQuery: column=text, index" not in plan and "FlatMatchQuery" in plan


def test_row_ids_and_all_columns(indexed: Path) -> None:
    table = lance_ops.dataset(str(indexed)).to_table(full_text_query="hello", with_row_id=True)
    assert table.column_names == ["id", "text", "_score", "_rowid"]
    assert sorted(table.column("id").to_pylist()) == [5, 705]  # indexed, and appended after the build
    assert table.column("text").to_pylist() == ["hello world hello"] * 2


@pytest.mark.parametrize(
    ("query", "error"),
    [
        ({"query": "x", "columns": ["id"]}, InvalidArgumentError),
        ({"query": "x", "columns": ["nope"]}, InvalidArgumentError),
        ({"query": "x", "fuzziness": 1}, InvalidArgumentError),
        ({"query": "x", "columns": ["text", "text2"]}, InvalidArgumentError),
        (42, UnsupportedFeatureError),
        ('"quoted phrase"', InvalidArgumentError),  # the index has no positions
        (PhraseQuery("a b", "text"), InvalidArgumentError),
        (MatchQuery("alpha", "text", fuzziness=-1), InvalidArgumentError),
        (MultiMatchQuery("alpha", ["text"], boosts=[1.0, 2.0]), InvalidArgumentError),
    ],
)
def test_bad_queries(indexed: Path, query: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        lance_ops.dataset(str(indexed)).to_table(full_text_query=query)


def test_no_index_and_no_column(tmp_path: Path) -> None:
    write(tmp_path / "ds", ["hello"])
    with pytest.raises(InvalidArgumentError, match="no INVERTED index"):
        lance_ops.dataset(str(tmp_path / "ds")).to_table(full_text_query="hello")


def test_nested_column_index_from_pylance(tmp_path: Path) -> None:
    texts = [f"document {i} about lance" + (" lance" if i % 3 else "") for i in range(40)]
    data = pa.table(
        {
            "id": pa.array(range(40), pa.int64()),
            "data": pa.StructArray.from_arrays(
                [pa.array(texts), pa.array([f"label_{i}" for i in range(40)])], names=["text", "label"]
            ),
        }
    )
    lance.write_dataset(data, tmp_path / "ds").create_scalar_index("data.text", "INVERTED")
    assert assert_same(tmp_path / "ds", "lance") == 40
    assert assert_same(tmp_path / "ds", "document", filter="data.label = 'label_5'", prefilter=True) == 1


def test_stable_row_ids(tmp_path: Path) -> None:
    """With stable row ids the docs file holds them; compaction moves rows, pylance still finds them."""
    table = pa.table({"id": pa.array(range(600), pa.int64()), "text": pa.array(corpus(600), pa.string())})
    lance.write_dataset(table, tmp_path / "ds", max_rows_per_file=200, enable_stable_row_ids=True)
    lance.dataset(str(tmp_path / "ds")).delete("id % 7 = 1")
    lance_ops.dataset(str(tmp_path / "ds")).create_scalar_index("text", "INVERTED")
    assert sum(assert_same(tmp_path / "ds", q) for q in QUERIES) > 100
    lance.dataset(str(tmp_path / "ds")).optimize.compact_files(target_rows_per_fragment=1000)
    assert sum(assert_same(tmp_path / "ds", q) for q in QUERIES) > 100


def test_include_deleted_rows_refused(indexed: Path) -> None:
    with pytest.raises(ValueError, match="Cannot include deleted rows"):
        lance_ops.dataset(str(indexed)).to_table(full_text_query="alpha", include_deleted_rows=True)
    with pytest.raises(TypeError, match="bogus"):
        lance_ops.dataset(str(indexed)).to_table(full_text_query="alpha", bogus=1)


def test_compaction_remaps_our_index(tmp_path: Path) -> None:
    """lance_ops compacts the fragments under our index (row addresses move): the remapped docs
    file still gives pylance's and our search the same rows and scores."""
    write(tmp_path / "ds", corpus(700))
    lance_ops.dataset(str(tmp_path / "ds")).create_scalar_index("text", "INVERTED")
    before = rows(lance, tmp_path / "ds", "alpha w5")
    lance_ops.dataset(str(tmp_path / "ds")).optimize.compact_files(target_rows_per_fragment=2000)
    assert len(lance.dataset(str(tmp_path / "ds")).get_fragments()) == 1
    assert sum(assert_same(tmp_path / "ds", q) for q in QUERIES) > 100
    after = rows(lance, tmp_path / "ds", "alpha w5")
    np.testing.assert_allclose(after[1], before[1], rtol=1e-6)
