"""L18: lance_ops scans prune fragments through scalar indices; rows always equal a full scan."""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lance_ops


def _table(start: int, n: int) -> pa.Table:
    ids = np.arange(start, start + n)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "cat": pa.array([None if k % 13 == 0 else f"c{k // 250}" for k in ids], pa.string()),
            "x": pa.array([float("nan") if k % 97 == 0 else k / 3 for k in ids], pa.float64()),
        }
    )


def _ids(ds: lance_ops.LanceDataset, flt: str, use: bool) -> list[int]:
    return sorted(ds.to_table(columns=["id"], filter=flt, use_scalar_index=use)["id"].to_pylist())


@pytest.mark.parametrize(("column", "kind"), [("id", "BTREE"), ("cat", "BITMAP"), ("id", "ZONEMAP")])
def test_indexed_scan_prunes_and_equals_full_scan(tmp_path: Path, column: str, kind: str) -> None:
    ds = lance_ops.write_dataset(_table(0, 1000), str(tmp_path / "ds"), max_rows_per_file=250)
    ds.create_scalar_index(column, kind, rows_per_zone=64) if kind == "ZONEMAP" else ds.create_scalar_index(
        column, kind
    )
    ds.delete("id % 7 = 1")
    lance_ops.write_dataset(_table(1000, 100), str(tmp_path / "ds"), mode="append")  # not indexed
    ds = lance_ops.dataset(str(tmp_path / "ds"))
    flt = "id = 300" if column == "id" else "cat = 'c1'"
    plan = ds.scanner(filter=flt).explain_plan()
    assert f"@{column}_idx" in plan
    assert "fragments=2/5" in plan  # fragment 1 (rows 250..499) and the unindexed fragment 4
    assert _ids(ds, flt, True) == _ids(ds, flt, False) != []
    assert "ScalarIndexQuery" not in ds.scanner(filter=flt, use_scalar_index=False).explain_plan()
    assert ds.count_rows(flt) == len(_ids(ds, flt, False))
    theirs = lance.dataset(str(tmp_path / "ds"))
    assert sorted(theirs.to_table(columns=["id"], filter=flt)["id"].to_pylist()) == _ids(ds, flt, True)


_FILTERS = st.one_of(
    st.builds(
        lambda op, v: f"id {op} {v}", st.sampled_from(["=", "<", "<=", ">", ">="]), st.integers(-5, 1105)
    ),
    st.builds(
        lambda vs: f"id IN ({', '.join(map(str, vs))})",
        st.lists(st.integers(0, 1100), min_size=1, max_size=4),
    ),
    st.builds(lambda v: f"cat = 'c{v}'", st.integers(0, 5)),
    st.builds(
        lambda op, v: f"x {op} {v}", st.sampled_from(["<", ">", "="]), st.floats(-10, 400, allow_nan=False)
    ),
    st.sampled_from(["cat IS NULL", "cat IS NOT NULL", "x IS NULL", "id BETWEEN 240 AND 260 AND cat = 'c0'"]),
)


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> lance_ops.LanceDataset:
    path = tmp_path_factory.mktemp("q") / "ds"
    ds = lance_ops.write_dataset(_table(0, 1025), str(path), max_rows_per_file=256)
    ds.create_scalar_index("id", "BTREE")
    ds.create_scalar_index("cat", "BITMAP")
    ds.create_scalar_index("x", "ZONEMAP", rows_per_zone=100)
    ds.delete("id % 5 = 2 or (id >= 300 and id < 520)")
    lance_ops.write_dataset(_table(1025, 80), str(path), mode="append")
    return lance_ops.dataset(str(path))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flt=_FILTERS)
def test_property_indexed_equals_full_scan(indexed: lance_ops.LanceDataset, flt: str) -> None:
    assert _ids(indexed, flt, True) == _ids(indexed, flt, False)


def _labelled(start: int, n: int) -> pa.Table:
    table = _table(start, n)
    ids = np.arange(start, start + n)
    tags = [
        None if k % 17 == 0 else [f"t{k % 5}", f"t{k % 3}"] + (["rare"] if k % 101 == 0 else []) for k in ids
    ]
    return table.append_column("tags", pa.array(tags, pa.list_(pa.string())))


@pytest.fixture(scope="module")
def labelled(tmp_path_factory: pytest.TempPathFactory) -> lance_ops.LanceDataset:
    path = tmp_path_factory.mktemp("l") / "ds"
    ds = lance_ops.write_dataset(_labelled(0, 1025), str(path), max_rows_per_file=256)
    ds.create_scalar_index("id", "BTREE")
    ds.create_scalar_index("cat", "BITMAP")
    ds.create_scalar_index("tags", "LABEL_LIST")
    ds.create_scalar_index("x", "ZONEMAP", rows_per_zone=50)
    ds.delete("id % 5 = 2 or (id >= 300 and id < 520)")
    lance_ops.write_dataset(_labelled(1025, 80), str(path), mode="append")
    return lance_ops.dataset(str(path))


_LABEL_FILTERS = st.one_of(
    st.builds(
        lambda fn, vs: f"{fn}(tags, [{', '.join(repr(v) for v in vs)}])",
        st.sampled_from(["array_has_any", "array_has_all"]),
        st.lists(st.sampled_from(["t0", "t1", "t2", "t4", "rare", "none"]), min_size=1, max_size=3),
    ),
    st.builds(lambda v: f"array_has(tags, '{v}')", st.sampled_from(["t0", "rare", "none"])),
)
# a conjunct no index answers, and indexed ones combined
_REST = st.sampled_from(
    ["", " AND id % 3 = 0", " AND cat = 'c2'", " AND id < 700", " AND x > 100.5", " OR id = 4"]
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=st.one_of(_FILTERS, _LABEL_FILTERS), rest=_REST)
def test_property_row_level_answers_equal_full_scan(
    labelled: lance_ops.LanceDataset, first: str, rest: str
) -> None:
    flt = first + rest
    assert _ids(labelled, flt, True) == _ids(labelled, flt, False)
    assert labelled.count_rows(flt) == len(_ids(labelled, flt, False))


def test_label_list_answers_rows_and_pylance_agrees(labelled: lance_ops.LanceDataset) -> None:
    flt = "array_has_any(tags, ['rare']) AND id > 100"
    plan = labelled.scanner(filter=flt).explain_plan()
    assert "AND([id > 100]@id_idx(BTree),[array_has_any(tags, List([rare]))]@tags_idx(LabelList))" in plan
    expected = [
        k for k in range(101, 1105, 101) if k % 17 and not (k % 5 == 2 or 300 <= k < 520) and k < 1025
    ]
    assert "IndexedTake: rows=" in plan
    assert _ids(labelled, flt, True) == expected
    theirs = lance.dataset(labelled.uri)
    assert "tags_idx" in theirs.scanner(filter=flt).explain_plan()
    assert sorted(theirs.to_table(columns=["id"], filter=flt)["id"].to_pylist()) == expected


@pytest.mark.parametrize(
    ("flt", "kind"), [("id = 700", "BTREE"), ("cat = 'c3'", "BITMAP"), ("x > 395.1", "ZONEMAP")]
)
def test_point_filter_reads_only_the_indexed_rows(
    tmp_path: Path, recorded_reads: list[tuple[str, int, int]], flt: str, kind: str
) -> None:
    n = 20000
    table = pa.table(
        {
            "id": pa.array(np.arange(n), pa.int64()),
            "cat": pa.array([f"c{k // 250}" for k in range(n)]),
            "x": pa.array(np.arange(n) / 50.0),
            "payload": pa.array([f"{k:08d}" * 16 for k in range(n)]),
        }
    )
    path = str(tmp_path / "ds")
    ds = lance_ops.write_dataset(table, path, max_rows_per_file=10000)
    column = flt.split()[0]
    ds.create_scalar_index(column, kind, **({"rows_per_zone": 100} if kind == "ZONEMAP" else {}))
    ds = lance_ops.dataset(path)

    def data_bytes(use: bool) -> tuple[list[int], int]:
        recorded_reads.clear()
        got = ds.to_table(columns=["id", "payload"], filter=flt, use_scalar_index=use)["id"].to_pylist()
        return got, sum(length for p, _, length in recorded_reads if "/data/" in p)

    indexed, indexed_bytes = data_bytes(True)
    scanned, scanned_bytes = data_bytes(False)
    assert indexed == scanned != []
    assert indexed_bytes * 5 < scanned_bytes, (indexed_bytes, scanned_bytes)
    plan = ds.scanner(filter=flt, columns=["id"]).explain_plan()
    shown = {"BTREE": "BTree", "BITMAP": "Bitmap", "ZONEMAP": "ZoneMap"}[kind]  # as pylance's plans name them
    assert f"@{column}_idx({shown})" in plan and "IndexedTake: rows=" in plan and "fragments=1/2" in plan
    assert lance.dataset(path).to_table(filter=flt, columns=["id"])["id"].to_pylist() == scanned


@pytest.fixture(scope="module")
def paged(tmp_path_factory: pytest.TempPathFactory) -> lance_ops.LanceDataset:
    """BTREEs of several 4096-row pages, nulls first and NaN last in the float one."""
    path = tmp_path_factory.mktemp("p") / "ds"
    rng = np.random.default_rng(4)
    n = 20000
    f = rng.integers(0, 3000, n).astype(np.float64)
    f[rng.random(n) < 0.05] = np.nan
    table = pa.table(
        {
            "id": pa.array(np.arange(n), pa.int64()),
            "k": pa.array(rng.integers(0, 5000, n), pa.int64(), mask=rng.random(n) < 0.1),
            "f": pa.array(f, pa.float64(), mask=rng.random(n) < 0.1),
        }
    )
    ds = lance_ops.write_dataset(table, str(path), max_rows_per_file=7000)
    ds.create_scalar_index("k", "BTREE")
    ds.create_scalar_index("f", "BTREE")
    ds.delete("id % 9 = 4")
    return lance_ops.dataset(str(path))


_PAGED = st.one_of(
    st.builds(
        lambda c, op, v: f"{c} {op} {v}",
        st.sampled_from(["k", "f"]),
        st.sampled_from(["=", "<", "<=", ">", ">="]),
        st.integers(-3, 5003),
    ),
    st.builds(
        lambda vs: f"k IN ({', '.join(map(str, vs))})", st.lists(st.integers(0, 5000), min_size=1, max_size=5)
    ),
    st.sampled_from(
        ["k IS NULL", "f IS NULL", "k IS NOT NULL", "f IS NOT NULL", "f > 2999", "k BETWEEN 10 AND 12"]
    ),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flt=_PAGED)
def test_property_btree_pages_equal_full_scan(paged: lance_ops.LanceDataset, flt: str) -> None:
    assert _ids(paged, flt, True) == _ids(paged, flt, False)


def test_btree_pages_agree_with_pylance(paged: lance_ops.LanceDataset) -> None:
    theirs = lance.dataset(paged.uri)
    for flt in ("k = 17", "f > 2990", "f IS NULL", "k < 40"):
        assert (
            "k_idx" in paged.scanner(filter=flt).explain_plan()
            or "f_idx" in paged.scanner(filter=flt).explain_plan()
        )
        assert sorted(theirs.to_table(columns=["id"], filter=flt)["id"].to_pylist()) == _ids(paged, flt, True)


@pytest.mark.parametrize("builder", ["lance_ops", "pylance"])
def test_first_created_index_of_a_column_answers(tmp_path: Path, builder: str) -> None:
    """Two indices on one column: the one created first (manifest order, not name order) answers,
    in both systems' plans, whoever built them; the history then continues."""
    system = lance_ops if builder == "lance_ops" else lance
    uri = str(tmp_path / "multi")
    ds = system.write_dataset(pa.table({"ints": np.tile(np.arange(100), 10)}), uri)
    ds.create_scalar_index("ints", "BITMAP", name="zz_bitmap")
    ds.create_scalar_index("ints", "BTREE", name="aa_btree")  # sorts first by name
    ours, theirs = lance_ops.dataset(uri), lance.dataset(uri)
    assert "@zz_bitmap(Bitmap)" in ours.scanner(filter="ints = 7").explain_plan()
    assert "@zz_bitmap(Bitmap)" in theirs.scanner(filter="ints = 7").explain_plan()
    assert ours.count_rows("ints = 7") == theirs.count_rows("ints = 7") == 10
    ours.drop_index("zz_bitmap")
    assert "@aa_btree(BTree)" in lance_ops.dataset(uri).scanner(filter="ints = 7").explain_plan()
    assert lance.dataset(uri).count_rows("ints = 7") == 10
