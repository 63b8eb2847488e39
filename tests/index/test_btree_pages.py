"""L18 (btreecold): BTREE pages searched by binary search (integer pages in order) give exactly
the rows the general compare of every value gives, and indexed scans through them equal a full
scan and pylance's answer, on indices either system built, with long runs of one value across
page boundaries, nulls, deletes and an unindexed appended tail."""

from __future__ import annotations

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lance_ops
from lance_ops.index.btree import PAGES
from lance_ops.index.files import read_index_file
from lance_ops.index.scalar_query import (
    _btree_pages,
    _integer_keys,
    _matches,
    _Page,
    _value_set,
    key_rows,
)
from lance_ops.query.predicate import Bound

_INT_TYPES = [pa.int8(), pa.int32(), pa.int64(), pa.uint16(), pa.uint64()]
_OPS = ["eq", "in", "lt", "le", "gt", "ge", "null", "not_null"]


def _bound(op: str, values: list[int], type_: pa.DataType) -> Bound:
    if op in ("null", "not_null"):
        return Bound("k", op, ())
    chosen = values if op == "in" else values[:1]
    return Bound("k", op, tuple(pa.scalar(v, type_) for v in chosen))


def _type_values(type_: pa.DataType, draw: st.DrawFn, size: int) -> list[int]:
    info = np.iinfo(type_.to_pandas_dtype())
    # a few distinct values, the type's extremes among them: long runs of one value
    pool = draw(
        st.lists(
            st.one_of(
                st.integers(int(info.min), int(info.max)), st.sampled_from([int(info.min), int(info.max)])
            ),
            min_size=1,
            max_size=6,
        )
    )
    return draw(st.lists(st.sampled_from(pool), min_size=size, max_size=size))


@st.composite
def _pages(draw: st.DrawFn) -> tuple[pa.Array, Bound]:
    type_ = draw(st.sampled_from(_INT_TYPES))
    size = draw(st.sampled_from([0, 1, 2, 7, 64]))
    nulls = draw(st.integers(0, size))
    present = sorted(_type_values(type_, draw, size - nulls))
    values = pa.array([None] * nulls + present, type_)
    op = draw(st.sampled_from(_OPS))
    probe = draw(
        st.lists(st.one_of(st.sampled_from(present or [0]), st.integers(0, 127)), min_size=1, max_size=5)
    )
    return values, _bound(op, probe, type_)


@settings(max_examples=300, deadline=None)
@given(page=_pages())
def test_page_binary_search_equals_compare_of_every_value(page: tuple[pa.Array, Bound]) -> None:
    values, bound = page
    ids = np.arange(len(values), dtype=np.uint64) * np.uint64(7) + np.uint64(3)
    kept = _Page.of(values, ids)
    assert kept.keys is not None
    wanted = _value_set(bound, values.type) if bound.op in ("eq", "in") else None
    hits = kept.hits(bound, _integer_keys(wanted))
    assert hits is not None
    assert hits.tolist() == ids[_matches(values, bound, wanted)].tolist()


@pytest.mark.parametrize(
    "values",
    [
        pa.array([3, 1, 2], pa.int64()),  # not in order
        pa.array([1, None, 2], pa.int32()),  # a null after a value
        pa.array([1.0, 2.0], pa.float64()),
        pa.array(["a", "b"], pa.string()),
    ],
)
def test_pages_without_integer_order_are_compared_value_by_value(values: pa.Array) -> None:
    page = _Page.of(values, np.arange(len(values), dtype=np.uint64))
    assert page.keys is None and page.hits(Bound("k", "not_null", ()), None) is None
    assert page.nbytes == values.nbytes + page.ids.nbytes


def test_in_list_with_a_null_is_compared_value_by_value() -> None:
    values = pa.array([None, 1, 2], pa.int64())
    page = _Page.of(values, np.arange(3, dtype=np.uint64))
    wanted = pa.array([None, 2], pa.int64())
    assert _integer_keys(wanted) is None
    assert page.hits(Bound("k", "in", (pa.scalar(None, pa.int64()), pa.scalar(2))), None) is None


@st.composite
def _lookups(draw: st.DrawFn) -> tuple[pa.Table, Bound]:
    type_ = draw(st.sampled_from(_INT_TYPES))
    count = draw(st.integers(0, 60))
    nulls = draw(st.integers(0, count))
    present = sorted(_type_values(type_, draw, count - nulls))
    sorted_values = pa.array([None] * nulls + present, type_)
    batch = draw(st.sampled_from([1, 2, 5]))
    starts = np.arange(0, count, batch)
    ends = np.minimum(starts + batch, count) - 1
    lookup = pa.table(
        {
            "min": sorted_values.take(pa.array(starts, pa.int64())),
            "max": sorted_values.take(pa.array(ends, pa.int64())),
        }
    )
    probe = draw(
        st.lists(st.one_of(st.sampled_from(present or [0]), st.integers(0, 127)), min_size=1, max_size=5)
    )
    return lookup, _bound(draw(st.sampled_from(["eq", "in"])), probe, type_)


@settings(max_examples=200, deadline=None)
@given(case=_lookups())
def test_page_choice_by_binary_search_equals_dense_ranking(case: tuple[pa.Table, Bound]) -> None:
    lookup, bound = case
    wanted = _value_set(bound, lookup.schema.field("max").type)
    fast = _btree_pages(lookup, bound, wanted, _integer_keys(wanted))
    assert fast.tolist() == _btree_pages(lookup, bound, wanted).tolist()


# -- whole scans: runs of one value across 4096-row pages, nulls, deletes, an appended tail ----


def _table(start: int, n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = np.arange(start, start + n)
    runs = np.repeat(np.arange(n // 3000 + 1), 3000)[:n] * 10  # runs of 3,000 rows of one value
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "r": pa.array(runs, pa.int32(), mask=rng.random(n) < 0.05),
            "u": pa.array(rng.integers(0, 2**63, n, dtype=np.uint64) | np.uint64(1 << 63), pa.uint64()),
            "s": pa.array([f"s{v % 700:04d}" for v in rng.integers(0, 10_000, n)], pa.string()),
        }
    )


@pytest.fixture(scope="module", params=["lance_ops", "pylance"])
def runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> lance_ops.LanceDataset:
    """BTREEs on ``r`` (long runs, nulls), ``u`` (uint64 above 2**63) and ``s`` (strings) built
    by either system; rows deleted, then rows appended that no index covers."""
    path = str(tmp_path_factory.mktemp("runs") / "ds")
    lance.write_dataset(_table(0, 14_000, 1), path, max_rows_per_file=6000)
    system = lance_ops if request.param == "lance_ops" else lance
    ds = system.dataset(path)
    for column in ("r", "u", "s"):
        ds.create_scalar_index(column, "BTREE")
    lance_ops.dataset(path).delete("id % 7 = 2 or (id >= 8000 and id < 8300)")
    lance_ops.write_dataset(_table(14_000, 1500, 2), path, mode="append")
    return lance_ops.dataset(path)


def _u_values(ds: lance_ops.LanceDataset) -> list[int]:
    return ds.to_table(columns=["u"])["u"].to_pylist()


_RUN_FILTERS = st.one_of(
    st.builds(
        lambda op, v: f"r {op} {v}",
        st.sampled_from(["=", "<", "<=", ">", ">="]),
        st.sampled_from([-1, 0, 5, 10, 20, 30, 40, 50, 1000]),
    ),
    st.builds(
        lambda vs: f"r IN ({', '.join(map(str, vs))})",
        st.lists(st.sampled_from([0, 10, 20, 30, 40, 50, 7]), min_size=1, max_size=4),
    ),
    st.builds(lambda v: f"s = 's{v:04d}'", st.integers(0, 701)),
    st.builds(
        lambda vs: "s IN (" + ", ".join(f"'s{v:04d}'" for v in vs) + ")",
        st.lists(st.integers(0, 701), min_size=1, max_size=4),
    ),
    st.builds(lambda v: f"s < 's{v:04d}'", st.integers(0, 701)),
    st.sampled_from(["r IS NULL", "r IS NOT NULL", "r BETWEEN 10 AND 20", "r = 20 AND id > 7000"]),
)


def _ids(
    ds: lance_ops.LanceDataset | lance.LanceDataset, flt: str | pc.Expression, use: bool = True
) -> list[int]:
    return sorted(ds.to_table(columns=["id"], filter=flt, use_scalar_index=use)["id"].to_pylist())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flt=_RUN_FILTERS)
def test_property_runs_equal_full_scan_and_pylance(runs: lance_ops.LanceDataset, flt: str) -> None:
    ours = _ids(runs, flt)
    assert ours == _ids(runs, flt, use=False)
    assert ours == _ids(lance.dataset(runs.uri), flt)


def test_uint64_above_int64_and_in_lists_equal_pylance(runs: lance_ops.LanceDataset) -> None:
    """Keys above 2**63 (filters as Arrow expressions here, as SQL for pylance: lance_ops' SQL
    parser takes integer literals up to 2**63 - 1, pylance's Substrait conversion no uint64
    expression)."""
    stored = _u_values(runs)
    order = sorted(stored)
    theirs = lance.dataset(runs.uri)
    field = pc.field("u")
    some = [stored[1], stored[4000], stored[-1], 2**64 - 1]
    for expression, sql in (
        (field == pa.scalar(stored[5], pa.uint64()), f"u = {stored[5]}"),
        (field.isin(pa.array(some, pa.uint64())), f"u IN ({', '.join(map(str, some))})"),
        (field >= pa.scalar(order[len(order) // 2], pa.uint64()), f"u >= {order[len(order) // 2]}"),
        (field < pa.scalar(order[100], pa.uint64()), f"u < {order[100]}"),
    ):
        ours = _ids(runs, expression)
        assert ours == _ids(runs, expression, use=False) == _ids(theirs, sql)
        assert ours
        assert "u_idx" in runs.scanner(filter=expression).explain_plan()


def test_warm_pages_answer_as_cold_ones_and_are_counted(runs: lance_ops.LanceDataset) -> None:
    fresh = lance_ops.dataset(runs.uri)
    flt = "r IN (10, 20)"  # two runs, across a page boundary
    cold = fresh.scanner(columns=["id"], filter=flt).analyze_plan()
    warm = fresh.scanner(columns=["id"], filter=flt).analyze_plan()
    assert "parts_loaded=0" not in cold and "parts_loaded=0" in warm
    assert _ids(fresh, flt) == _ids(fresh, flt, use=False)


def test_every_integer_page_is_searched_by_binary_search(runs: lance_ops.LanceDataset) -> None:
    """Both systems write integer pages nulls first and then in order, so no page of theirs
    falls back to the compare of every value."""
    files = runs.scanner()._files
    for index in files.manifest.indices:
        if index.name not in ("r_idx", "u_idx"):
            continue
        pages = read_index_file(files.storage, index, PAGES).table
        values, ids = pages.column("values").combine_chunks(), np.asarray(pages.column("ids"), np.uint64)
        for start in range(0, len(values), 4096):
            assert _Page.of(values.slice(start, 4096), ids[start : start + 4096]).keys is not None


def test_key_rows_of_another_integer_type_equal_the_column_types(
    runs: lance_ops.LanceDataset,
) -> None:
    """Keys given as int64 for the int32 ``r`` (no binary search: the general compare) find the
    same rows as int32 keys (binary search)."""
    files = runs.scanner()._files
    as_int32 = key_rows(files.storage, files.manifest, "r", pa.array([10, 20, 7], pa.int32()))
    as_int64 = key_rows(files.storage, files.manifest, "r", pa.array([10, 20, 7], pa.int64()))
    assert as_int32 is not None and as_int64 is not None
    assert len(as_int32.rows) > 4096  # runs of 3,000 rows, deleted ones included
    assert np.sort(as_int32.rows).tolist() == np.sort(as_int64.rows).tolist()
