"""L18: the BTREE page order of the numpy fast path (distinct integer / float keys) equals the
general Arrow sort (nulls first, values ascending, NaN last, ties by row id) on any keys."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from lance_ops.index.btree import _fast_order, _value_order


def _arrow_order(table: pa.Table) -> list[int]:
    order = np.asarray(
        pc.sort_indices(table, sort_keys=[("values", "ascending", "at_end"), ("ids", "ascending")])
    )
    null = np.asarray(table.column("values").is_null(), dtype=bool)[order]
    return np.concatenate([order[null], order[~null]]).tolist()


_INTS = st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1))
_FLOATS = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True))


@settings(max_examples=150, deadline=None)
@given(
    data=st.data(),
    kind=st.sampled_from(["int64", "int8", "uint32", "float64", "float32"]),
    distinct=st.booleans(),
)
def test_fast_order_equals_arrow_sort(data: st.DataObject, kind: str, distinct: bool) -> None:
    dtype = pa.from_numpy_dtype(np.dtype(kind))
    if kind.startswith("float"):
        raw = data.draw(st.lists(_FLOATS, max_size=300, unique=distinct))
        values = pa.array(raw, pa.float64()).cast(dtype, safe=False)
    else:
        info = np.iinfo(kind)
        ints = st.one_of(st.none(), st.integers(int(info.min), int(info.max)))
        values = pa.array(data.draw(st.lists(ints, max_size=300, unique=distinct)), dtype)
    n = len(values)
    ids = np.asarray(data.draw(st.permutations(range(n))), dtype=np.uint64) + (np.uint64(7) << np.uint64(32))
    table = pa.table({"values": values, "ids": pa.array(ids, pa.uint64())})
    assert _value_order(table).tolist() == _arrow_order(table)
    fast = _fast_order(values, ids)
    if fast is not None:
        assert fast.tolist() == _arrow_order(table)


def test_fast_order_is_taken_for_distinct_keys() -> None:
    values = pa.array([5, None, -3, 9, None, 0], pa.int64())
    ids = np.array([10, 4, 2, 1, 3, 0], np.uint64)
    assert _fast_order(values, ids).tolist() == [4, 1, 2, 5, 0, 3]  # nulls by id, then by value
    assert _fast_order(pa.array([1, 1, 2]), np.arange(3, dtype=np.uint64)) is None  # a tie
    assert _fast_order(pa.array(["a", "b"]), np.arange(2, dtype=np.uint64)) is None  # strings
