"""Filters with a top-level ``OR`` answered from scalar indices: the union of each alternative's
index rows (``a = 1 OR (a >= x AND a < y)``), always the rows of a full scan and of pylance.

The dataset has fragments a BTREE on ``a`` and a BITMAP on ``b`` cover (some rows deleted since)
and one appended after the build (no index answers for it: scanned whole).
"""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lance_ops

ROWS = 3000


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("or") / "d"
    rng = np.random.default_rng(3)
    a = rng.integers(0, 1000, ROWS)
    table = pa.table({"a": a, "b": (a % 17).astype(np.int32), "c": rng.random(ROWS)})
    ds = lance_ops.write_dataset(table, path, max_rows_per_file=1024)  # 1024 + 1024 + 952 rows
    ds.create_scalar_index("a", "BTREE")
    ds.create_scalar_index("b", "BITMAP")
    ds.delete("a % 50 = 7")
    ds.insert(pa.table({"a": np.arange(1000, 1025), "b": np.full(25, 3, np.int32), "c": np.zeros(25)}))
    return path


def _condition() -> st.SearchStrategy[str]:
    value = st.integers(-5, 1030)
    return st.one_of(
        value.map(lambda v: f"a = {v}"),
        st.tuples(value, value).map(lambda r: f"(a >= {min(r)} AND a < {max(r)})"),
        st.integers(0, 18).map(lambda v: f"b = {v}"),
        st.lists(value, min_size=1, max_size=3).map(lambda vs: f"a IN ({', '.join(map(str, vs))})"),
        st.sampled_from(["c < 0.1", "a IS NULL", "b > 15"]),  # no index answers / a bound
    )


@settings(max_examples=40, deadline=None)
@given(st.lists(_condition(), min_size=2, max_size=4), st.sampled_from(["", " AND b < 9", " AND c > 0.5"]))
def test_or_of_indexed_conditions_matches_a_full_scan(dataset: Path, parts: list[str], rest: str) -> None:
    flt = "(" + " OR ".join(parts) + ")" + rest
    ds = lance_ops.dataset(dataset)
    ours = ds.to_table(filter=flt)
    assert ours == ds.to_table(filter=flt, use_scalar_index=False)
    assert ours == lance.dataset(str(dataset)).to_table(filter=flt)
    assert ds.count_rows(flt) == ours.num_rows


def test_or_prunes_with_the_union(dataset: Path) -> None:
    ds = lance_ops.dataset(dataset)
    flt = "a = 1 OR (a >= 500 AND a < 510)"
    plan = ds.scanner(filter=flt).explain_plan()
    assert "ScalarIndexQuery: query=[a = 1 || a >= 500 && a < 510]@a_idx(BTree)" in plan
    # the appended fragment is not covered: read whole; the covered ones only at the union's rows
    selection = ds.scanner(filter=flt)._index_selection
    assert selection is not None
    assert sum(len(r) for r in selection.rows.values()) <= 3 * 15  # a few rows, not whole fragments
    assert 3 in selection.fragments and 3 not in selection.rows
    mixed = ds.scanner(filter="a = 1 OR b = 16").explain_plan()
    assert "@a_idx|b_idx(mixed)" in mixed
    # an alternative no index answers: no pruning from the OR
    assert "ScalarIndexQuery" not in ds.scanner(filter="a = 1 OR c < 0.5").explain_plan()
