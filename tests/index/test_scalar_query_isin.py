"""L16 / L18: ``IN`` lists answered through BTREE, BITMAP and ZONEMAP indices in one vectorised
lookup each; the rows always equal a full scan's, for any value set (empty, all absent, repeated
values, nulls, 1023 / 1024 / 1025 values)."""

from __future__ import annotations

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lance_ops
from lance_ops.index.scalar_query import select_rows
from lance_ops.query.predicate import parse_predicate

ROWS = 13_000  # BTREE pages of 4096 rows: four pages, the last one short


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> lance_ops.LanceDataset:
    """Repeated keys with nulls (BTREE ``k``, ZONEMAP ``z``), strings (BITMAP ``s``), a float BTREE
    with NaN (``f``); rows deleted, and a fragment appended after the indices."""
    path = str(tmp_path_factory.mktemp("isin") / "ds")
    rng = np.random.default_rng(23)
    ids = np.arange(ROWS)
    k = rng.integers(0, 4000, ROWS)
    f = (k % 700).astype(np.float64)
    f[rng.random(ROWS) < 0.03] = np.nan
    table = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "k": pa.array(k, pa.int64(), mask=rng.random(ROWS) < 0.05),
            "z": pa.array(k // 2, pa.int32(), mask=rng.random(ROWS) < 0.05),
            "s": pa.array([f"s{v % 300}" for v in k], pa.string(), mask=rng.random(ROWS) < 0.05),
            "f": pa.array(f, pa.float64()),
        }
    )
    ds = lance_ops.write_dataset(table.slice(0, 12_000), path, max_rows_per_file=5000)
    ds.create_scalar_index("k", "BTREE")
    ds.create_scalar_index("s", "BITMAP")
    ds.create_scalar_index("z", "ZONEMAP", rows_per_zone=512)
    ds.create_scalar_index("f", "BTREE")
    ds.delete("id % 11 = 3")
    lance_ops.write_dataset(table.slice(12_000), path, mode="append")
    return lance_ops.dataset(path)


def _column_type(column: str) -> pa.DataType:
    return {"k": pa.int64(), "z": pa.int32(), "s": pa.string(), "f": pa.float64()}[column]


def _value(column: str, v: int | None) -> object:
    if v is None:
        return None
    return f"s{v}" if column == "s" else float(v) if column == "f" else v


def _ids(ds: lance_ops.LanceDataset, flt: pc.Expression, use: bool) -> list[int]:
    return sorted(ds.to_table(columns=["id"], filter=flt, use_scalar_index=use)["id"].to_pylist())


def _check(ds: lance_ops.LanceDataset, column: str, values: list[int | None]) -> None:
    wanted = pa.array([_value(column, v) for v in values], _column_type(column))
    flt = pc.field(column).isin(wanted)
    assert _ids(ds, flt, True) == _ids(ds, flt, False)
    files = ds.scanner()._files
    predicate = parse_predicate(flt, ds.schema)
    if predicate.bounds:  # the index answered (a set the predicate keeps no bound for is scanned)
        chosen = select_rows(
            files.storage, files.manifest, predicate, [f.id for f in files.manifest.fragments]
        )
        assert [u.kind for u in chosen.used] == [
            {"k": "BTREE", "s": "BITMAP", "z": "ZONEMAP", "f": "BTREE"}[column]
        ]


_VALUES = st.lists(st.one_of(st.integers(-50, 4100), st.none()), max_size=40)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(column=st.sampled_from(["k", "s", "z", "f"]), values=_VALUES, repeat=st.booleans())
def test_property_in_lists_equal_full_scan(
    indexed: lance_ops.LanceDataset, column: str, values: list[int | None], repeat: bool
) -> None:
    _check(indexed, column, values + values if repeat else values)


@pytest.mark.parametrize(
    ("column", "size"),
    [("k", 0), ("f", 0), ("k", 1), ("s", 1), ("k", 1023), ("s", 1024), ("z", 1025), ("f", 1025)],
)
def test_in_lists_of_boundary_sizes_equal_full_scan(
    indexed: lance_ops.LanceDataset, column: str, size: int
) -> None:
    rng = np.random.default_rng(size)
    _check(indexed, column, rng.integers(-100, 4200, size).tolist())


@pytest.mark.parametrize("column", ["k", "s"])
def test_all_absent_values_select_nothing(indexed: lance_ops.LanceDataset, column: str) -> None:
    absent = list(range(5000, 5100))
    _check(indexed, column, absent)
    wanted = pa.array([_value(column, v) for v in absent], _column_type(column))
    assert indexed.count_rows(pc.field(column).isin(wanted)) == 0


def test_large_in_list_agrees_with_pylance(indexed: lance_ops.LanceDataset) -> None:
    values = pa.array(np.random.default_rng(5).integers(0, 4000, 1025), pa.int64())
    flt = pc.field("k").isin(values)
    ours = _ids(indexed, flt, True)
    theirs = sorted(lance.dataset(indexed.uri).to_table(columns=["id"], filter=flt)["id"].to_pylist())
    assert ours == theirs != []
