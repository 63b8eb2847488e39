"""L18: where BTREE / BITMAP indices answer the whole filter exactly, the rows they select are read
without re-evaluating the filter; elsewhere (ZONEMAP, floats, a conjunct no index answers,
fragments no index covers) the filter is still applied. Rows always equal a full scan's and
pylance's."""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lance_ops
from tests.index.helpers import index_selection as _selection


def _table(start: int, n: int) -> pa.Table:
    ids = np.arange(start, start + n)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "cat": pa.array([None if k % 13 == 0 else f"c{k % 9}" for k in ids], pa.string()),
            "x": pa.array([float("nan") if k % 97 == 0 else k / 3 for k in ids], pa.float64()),
            "n": pa.array([None if k % 11 == 0 else int(k % 50) for k in ids], pa.int32()),
        }
    )


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> lance_ops.LanceDataset:
    """4 indexed fragments of 256 rows (1,025 rows), rows deleted in each, then 80 rows appended
    after the indices were built (a fragment no index covers)."""
    path = tmp_path_factory.mktemp("exact") / "ds"
    ds = lance_ops.write_dataset(_table(0, 1025), str(path), max_rows_per_file=256)
    ds.create_scalar_index("id", "BTREE")
    ds.create_scalar_index("cat", "BITMAP")
    ds.create_scalar_index("n", "BTREE")
    ds.create_scalar_index("x", "BTREE")
    ds.delete("id % 5 = 2 or (id >= 300 and id < 400)")
    lance_ops.write_dataset(_table(1025, 80), str(path), mode="append")
    return lance_ops.dataset(str(path))


def _ids(ds: lance_ops.LanceDataset, flt: str, use: bool) -> list[int]:
    return sorted(ds.to_table(columns=["id"], filter=flt, use_scalar_index=use)["id"].to_pylist())


@pytest.mark.parametrize(
    "flt",
    [
        "cat = 'c4'",
        "cat IS NULL",
        "n IS NULL",
        "n IS NOT NULL AND id < 100",
        "id IN (3, 7, 300, 301, 1030)",
        "id BETWEEN 250 AND 270",
        "cat = 'c1' AND n >= 40",
        "cat IN ('c0', 'c8') AND id > 900",
    ],
)
def test_exact_answers_skip_the_recheck_and_equal_a_full_scan(
    dataset: lance_ops.LanceDataset, flt: str
) -> None:
    selection = _selection(dataset, flt)
    appended = max(f.id for f in dataset.handle.files.manifest.fragments)
    assert selection.exact, flt  # the indexed fragments' rows are taken as the answer
    assert selection.exact <= set(selection.rows) and appended not in selection.exact
    assert (
        f"{len(selection.exact)} answered exactly (no recheck)" in dataset.scanner(filter=flt).explain_plan()
    )
    full = _ids(dataset, flt, False)
    assert _ids(dataset, flt, True) == full
    assert dataset.count_rows(flt) == len(full)
    theirs = lance.dataset(dataset.uri)
    assert sorted(theirs.to_table(columns=["id"], filter=flt)["id"].to_pylist()) == full


@pytest.mark.parametrize(
    "flt",
    [
        "x > 100.5",  # a NaN is a possible match of a float comparison: rechecked
        "x < 10 AND cat = 'c1'",
        "cat = 'c4' AND id % 3 = 0",  # a conjunct no index answers
        "cat = 'c4' OR id = 5",
        "cat != 'c4'",
        "NOT (id IN (1, 2, 3))",
        "cat LIKE 'c4%'",
    ],
)
def test_inexact_answers_are_rechecked(dataset: lance_ops.LanceDataset, flt: str) -> None:
    assert not _selection(dataset, flt).exact
    assert "no recheck" not in dataset.scanner(filter=flt).explain_plan()
    full = _ids(dataset, flt, False)
    assert _ids(dataset, flt, True) == full
    assert dataset.count_rows(flt) == len(full)


def test_zonemap_answers_are_rechecked(tmp_path: Path) -> None:
    ds = lance_ops.write_dataset(_table(0, 600), str(tmp_path / "ds"), max_rows_per_file=200)
    ds.create_scalar_index("id", "ZONEMAP", rows_per_zone=64)
    ds = lance_ops.dataset(str(tmp_path / "ds"))
    flt = "id = 77"
    selection = _selection(ds, flt)
    assert selection.used and not selection.exact
    assert _ids(ds, flt, True) == [77]
    assert lance.dataset(str(tmp_path / "ds")).count_rows(flt) == 1


def test_stable_row_ids_are_rechecked(tmp_path: Path) -> None:
    ds = lance_ops.write_dataset(
        _table(0, 600), str(tmp_path / "ds"), max_rows_per_file=200, enable_stable_row_ids=True
    )
    ds.create_scalar_index("id", "BTREE")
    ds.delete("id < 150")
    ds = lance_ops.dataset(str(tmp_path / "ds"))
    assert not _selection(ds, "id = 170").exact
    assert _ids(ds, "id = 170", True) == [170]
    assert lance.dataset(str(tmp_path / "ds")).to_table(filter="id = 170").num_rows == 1


def test_most_rows_selected_read_whole_and_filtered(dataset: lance_ops.LanceDataset) -> None:
    """More than half a fragment's rows selected: the fragment is read whole, so the filter (and
    the deletions) still decide there."""
    flt = "cat IS NOT NULL"
    assert _selection(dataset, flt).exact
    full = _ids(dataset, flt, False)
    assert _ids(dataset, flt, True) == full
    assert dataset.count_rows(flt) == len(full)


_FILTERS = st.one_of(
    st.builds(
        lambda op, v: f"id {op} {v}", st.sampled_from(["=", "<", "<=", ">", ">="]), st.integers(-5, 1110)
    ),
    st.builds(
        lambda vs: f"id IN ({', '.join(map(str, vs))})",
        st.lists(st.integers(0, 1110), min_size=1, max_size=4),
    ),
    st.builds(lambda v: f"cat = 'c{v}'", st.integers(0, 9)),
    st.builds(lambda op, v: f"n {op} {v}", st.sampled_from(["=", "<", ">="]), st.integers(-1, 51)),
    st.sampled_from(
        ["cat IS NULL", "cat IS NOT NULL", "n IS NULL", "n IS NOT NULL", "id BETWEEN 240 AND 260"]
    ),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=_FILTERS, second=st.one_of(st.just(""), _FILTERS))
def test_property_exact_answers_equal_full_scan(
    dataset: lance_ops.LanceDataset, first: str, second: str
) -> None:
    flt = f"{first} AND {second}" if second else first
    full = _ids(dataset, flt, False)
    assert _ids(dataset, flt, True) == full
    assert dataset.count_rows(flt) == len(full)
