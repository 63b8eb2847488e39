"""The numpy evaluator of simple integer filters (:mod:`lance_ops.query.vectorized`) against the
Arrow path it stands in for: same mask on every filter it accepts, None where it must not decide
(nulls, types and operators outside its set), and pylance's own selection on a dataset."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lance_ops.query.predicate import parse_predicate
from lance_ops.query.vectorized import compile_mask, selected

SCHEMA = pa.schema([("a", pa.int64()), ("b", pa.int32()), ("f", pa.float64()), ("s", pa.string())])
EDGES = [0, 1, -1, 7, -7, 99, 100, -100, 2**31, -(2**31), 2**63 - 1, -(2**63)]


def _table(a: list[int], b: list[int]) -> pa.Table:
    n = len(a)
    return pa.table(
        {
            "a": pa.array(a, pa.int64()),
            "b": pa.array(b[:n] + [0] * (n - len(b[:n])), pa.int32()),
            "f": pa.array([float(x % 5) for x in range(n)]),
            "s": pa.array([str(x) for x in range(n)]),
        },
        schema=SCHEMA,
    )


def _arrow_mask(text: str, table: pa.Table) -> np.ndarray:
    return selected(None, parse_predicate(text, table.schema), table)


literals = st.sampled_from(["0", "1", "-1", "7", "-7", "3", "100", "9223372036854775807"])
int64_terms = st.sampled_from(["a", "a % 100", "a % -3", "a % 7", "a + 1", "a - 5", "a * 3", "-a % 10"])
comparisons = st.builds(
    lambda left, op, right: f"{left} {op} {right}",
    st.one_of(int64_terms, st.just("b")),
    st.sampled_from(["=", "<>", "!=", "<", "<=", ">", ">="]),
    literals,
)
others = st.one_of(
    st.builds(lambda lo, hi: f"a BETWEEN {lo} AND {hi}", literals, literals),
    st.builds(lambda x, y: f"b IN ({x}, {y})", literals, literals),
    st.builds(lambda x: f"a % 10 NOT IN ({x}, 3)", literals),
    st.just("a IS NULL"),
    st.just("b IS NOT NULL"),
)
atoms = st.one_of(comparisons, others)
filters = st.recursive(
    atoms,
    lambda inner: st.one_of(
        st.builds(lambda x, y: f"({x}) AND ({y})", inner, inner),
        st.builds(lambda x, y: f"({x}) OR ({y})", inner, inner),
        st.builds(lambda x: f"NOT ({x})", inner),
    ),
    max_leaves=4,
)
values = st.lists(st.one_of(st.sampled_from(EDGES), st.integers(-(2**63), 2**63 - 1)), max_size=40)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(text=filters, a=values, b=st.lists(st.integers(-(2**31), 2**31 - 1), max_size=40))
def test_numpy_mask_equals_the_arrow_path(text: str, a: list[int], b: list[int]) -> None:
    table = _table(a, b)
    mask = compile_mask(text, SCHEMA)
    assert mask is not None, text
    found = mask(table)
    assert found is not None
    assert found.dtype == np.bool_ and found.shape == (table.num_rows,)
    assert found.tolist() == _arrow_mask(text, table).tolist(), text


@pytest.mark.parametrize(
    "text",
    [
        "f > 1",  # floats: NaN and -0.0 order as DataFusion orders them
        "s = '1'",
        "b % 3 = 1",  # int32 arithmetic is promoted by the Arrow path
        "b + 1 > 0",
        "a / 2 = 1",
        "a % 0 = 1",  # raises on the Arrow path
        "a % b = 0",
        "a = 1.5",
        "_rowid = 3",
        "A = 1",  # a case-folded name is resolved by the Arrow path
        "1 = 1",
        "a",
    ],
)
def test_filters_outside_the_subset_are_not_compiled(text: str) -> None:
    assert compile_mask(text, SCHEMA) is None


def test_arrow_expression_is_not_compiled() -> None:
    import pyarrow.compute as pc

    assert compile_mask(pc.field("a") == 1, SCHEMA) is None


def test_nulls_leave_the_decision_to_the_arrow_path() -> None:
    table = pa.table({"a": pa.array([1, None, 7, 107], pa.int64()), "b": pa.array([1, 2, 3, 4], pa.int32())})
    text = "a % 100 = 7 OR b = 2"
    mask = compile_mask(text, table.schema)
    assert mask is not None
    assert mask(table) is None
    predicate = parse_predicate(text, table.schema)
    # NULL OR TRUE is TRUE; NULL % 100 = 7 alone is NULL, not selected
    assert selected(mask, predicate, table).tolist() == [False, True, True, True]


@pytest.mark.parametrize("rows", [0, 1, 1023, 1024, 1025])
def test_dataset_selection_matches_pylance(lance_module: Any, tmp_path: Path, rows: int) -> None:
    """pylance's own filter selects the rows the numpy mask selects (negative keys included)."""
    ids = np.arange(rows, dtype=np.int64) - rows // 2
    table = pa.table({"a": ids, "b": pa.array((ids % 11).astype(np.int32))})
    uri = str(tmp_path / "ds")
    lance_module.write_dataset(table, uri)
    for text in ["a % 100 = 7", "a % 7 = -3 AND b >= 2", "a BETWEEN -5 AND 5 OR b IN (3, 4)"]:
        expected = lance_module.dataset(uri).to_table(filter=text).column("a").to_pylist()
        mask = compile_mask(text, table.schema)
        assert mask is not None
        found = mask(table)
        assert found is not None
        assert ids[found].tolist() == expected, text
