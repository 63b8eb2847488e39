"""L18: pylance's full-text query objects (``lance.query``: MatchQuery, MultiMatchQuery,
BoostQuery, BooleanQuery, ``&`` / ``|``) searched by lance_ops (``lance_ops.query``) give the rows
and scores pylance gives for its own objects, over indices built by either side."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import lance
import lance.query
import numpy as np
import pyarrow as pa
import pytest

import lance_ops
import lance_ops.query
from tests.index.test_fts_build import corpus

pytestmark = pytest.mark.interop

Build = Callable[[ModuleType], object]
QUERIES: dict[str, Build] = {
    "match": lambda q: q.MatchQuery("alpha w3 w3", "text"),
    "match_and": lambda q: q.MatchQuery("alpha w3", "text", operator=q.FullTextOperator.AND),
    "match_and_missing": lambda q: q.MatchQuery("alpha zzz", "text", operator=q.FullTextOperator.AND),
    "match_boost": lambda q: q.MatchQuery("gamma", "text", boost=2.5),
    "other_column": lambda q: q.MatchQuery("w1", "title"),
    "multi": lambda q: q.MultiMatchQuery("w1 alpha", ["text", "title"]),
    "multi_boosts": lambda q: q.MultiMatchQuery("w1", ["text", "title"], boosts=[1.0, 3.0]),
    "boost": lambda q: q.BoostQuery(
        q.MatchQuery("alpha", "text"), q.MatchQuery("w7", "text"), negative_boost=0.3
    ),
    "bool": lambda q: q.BooleanQuery(
        [
            (q.Occur.MUST, q.MatchQuery("alpha", "text")),
            (q.Occur.SHOULD, q.MatchQuery("w2", "text")),
            (q.Occur.MUST_NOT, q.MatchQuery("w5", "title")),
        ]
    ),
    "should_only": lambda q: q.BooleanQuery(
        [(q.Occur.SHOULD, q.MatchQuery("w2", "text")), (q.Occur.SHOULD, q.MatchQuery("w3", "title"))]
    ),
    "and_or": lambda q: (
        (q.MatchQuery("alpha", "text") & q.MatchQuery("beta", "text")) | q.MatchQuery("w9", "title")
    ),
}


@pytest.fixture(scope="module", params=["pylance", "lance_ops"])
def dataset(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("q") / "ds"
    rng = np.random.default_rng(3)
    titles = [" ".join(rng.choice([f"w{i}" for i in range(12)], size=3)) for _ in range(500)]
    table = pa.table({"id": pa.array(range(500), pa.int64()), "text": corpus(500), "title": titles})
    lance.write_dataset(table, path, max_rows_per_file=200)
    module = lance if request.param == "pylance" else lance_ops
    module.dataset(str(path)).create_scalar_index("text", "INVERTED")
    module.dataset(str(path)).create_scalar_index("title", "INVERTED")
    return path


def _rows(module: ModuleType, path: Path, query: object) -> tuple[list[int], np.ndarray]:
    table = module.dataset(str(path)).to_table(full_text_query=query, columns=["id", "_score"])
    table = table.sort_by([("id", "ascending")])
    return table.column("id").to_pylist(), np.asarray(table.column("_score"), np.float32)


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_query_objects_match_pylance(dataset: Path, name: str) -> None:
    ids, scores = _rows(lance_ops, dataset, QUERIES[name](lance_ops.query))
    want_ids, want_scores = _rows(lance, dataset, QUERIES[name](lance.query))
    assert ids == want_ids
    np.testing.assert_allclose(scores, want_scores, rtol=1e-5, atol=1e-6)
    if name != "match_and_missing":
        assert ids


def test_plain_string_searches_every_indexed_column(dataset: Path) -> None:
    ids, scores = _rows(lance_ops, dataset, "w1 alpha")
    want_ids, want_scores = _rows(lance, dataset, "w1 alpha")
    assert ids == want_ids
    np.testing.assert_allclose(scores, want_scores, rtol=1e-5)
    plan = lance_ops.dataset(str(dataset)).scanner(full_text_query="w1").explain_plan()
    assert "column=text, index=text_idx" in plan and "column=title, index=title_idx" in plan
