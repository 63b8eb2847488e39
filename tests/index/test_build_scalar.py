"""L18: scalar indices built by lance_ops (create_scalar_index), used by pylance as its own.

Every dataset here is written by lance_ops and read by pylance: pylance's plan names our index and
its rows equal its full scan; our index files hold what pylance's own build of the same data holds.
"""

from __future__ import annotations

import datetime as dt
import uuid
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_ops
from lance_ops.errors import (
    FieldNotFoundError,
    IndexColumnTypeError,
    IndexExistsError,
    InvalidArgumentError,
    UnsupportedIndexTypeError,
)
from lance_ops.file import LanceFileReader

N = 5000


def _table(n: int = N) -> pa.Table:
    i = np.arange(n)
    return pa.table(
        {
            "id": pa.array(i, pa.int64()),
            "i": pa.array([None if k % 11 == 0 else int(k % 97) for k in i], pa.int32()),
            "f": pa.array(
                [None if k % 13 == 0 else (float("nan") if k % 29 == 0 else k / 7) for k in i], pa.float64()
            ),
            "s": pa.array([None if k % 7 == 0 else f"s{k % 5}" for k in i], pa.string()),
            "d": pa.array([dt.date(2020, 1, 1) + dt.timedelta(days=int(k % 40)) for k in i], pa.date32()),
            "ts": pa.array(i * 1_000_000 // 3, pa.timestamp("us")),
            "b": pa.array([None if k % 5 == 0 else bool(k % 2) for k in i], pa.bool_()),
            "l": pa.array(
                [None if k % 17 == 0 else [f"t{k % 3}", f"u{k % 4}"][: k % 3] for k in i],
                pa.list_(pa.string()),
            ),
            "li": pa.array(
                [[int(k % 6), None] if k % 9 == 0 else [int(k % 6)] for k in i], pa.list_(pa.int64())
            ),
        }
    )


def _write(path: Path, stable: bool = False, n: int = N) -> lance_ops.LanceDataset:
    return lance_ops.write_dataset(_table(n), str(path), max_rows_per_file=1500, enable_stable_row_ids=stable)


def _row_ids(ds: lance.LanceDataset, flt: str, use_index: bool) -> list[int]:
    t = ds.to_table(columns=["id"], filter=flt, use_scalar_index=use_index)
    return sorted(t["id"].to_pylist())


CASES = [
    (
        "i",
        "BTREE",
        ["i = 3", "i IN (1, 5, 96)", "i > 50", "i BETWEEN 10 AND 20", "i IS NULL", "i IS NOT NULL"],
    ),
    ("f", "BTREE", ["f < 100.5", "f = 10.0", "f IS NULL"]),
    ("s", "BTREE", ["s = 's1'", "s IN ('s0', 's4')", "s >= 's3'", "s IS NULL"]),
    ("d", "BTREE", ["d = date '2020-01-05'", "d > date '2020-02-01'"]),
    ("ts", "BTREE", ["ts < timestamp '1970-01-01 00:00:01'"]),
    ("b", "BTREE", ["b = true", "b IS NULL"]),
    ("i", "BITMAP", ["i = 3", "i IN (1, 5)", "i IS NULL", "i < 4"]),
    ("s", "BITMAP", ["s = 's1'", "s IS NULL", "s IN ('s2', 'zz')"]),
    ("b", "BITMAP", ["b = false"]),
    ("d", "BITMAP", ["d = date '2020-01-05'"]),
    (
        "l",
        "LABEL_LIST",
        ["array_has_any(l, ['t1'])", "array_contains(l, 'u2')", "array_has_all(l, ['t2', 'u1'])"],
    ),
    ("li", "LABEL_LIST", ["array_has_any(li, [2, 3])", "array_contains(li, 0)"]),
    ("i", "ZONEMAP", ["i = 3", "i > 90", "i IS NULL"]),
    ("f", "ZONEMAP", ["f > 300.0", "f IS NULL"]),
    ("ts", "ZONEMAP", ["ts > timestamp '1970-01-01 00:20:00'"]),
]


@pytest.mark.parametrize("stable", [False, True], ids=["addresses", "stable-ids"])
@pytest.mark.parametrize(("column", "kind", "filters"), CASES, ids=[f"{c[1]}-{c[0]}" for c in CASES])
def test_pylance_answers_from_our_index(
    tmp_path: Path, column: str, kind: str, filters: list[str], stable: bool
) -> None:
    ds = _write(tmp_path / "ds", stable)
    ds.delete("id % 10 = 3 or (id >= 1600 and id < 1700)")
    ds.create_scalar_index(column, kind)
    assert [i["name"] for i in ds.list_indices()] == [f"{column}_idx"]
    theirs = lance.dataset(str(tmp_path / "ds"))
    (info,) = theirs.describe_indices()
    assert info.field_names == [column]
    (segment,) = info.segments
    assert set(segment.fragment_ids) == {f.fragment_id for f in theirs.get_fragments()}
    for flt in filters:
        plan = theirs.scanner(filter=flt).explain_plan()
        assert f"@{column}_idx" in plan, (flt, plan)
        expected = _row_ids(theirs, flt, use_index=False)
        assert _row_ids(theirs, flt, use_index=True) == expected, flt
        assert expected, flt  # every filter selects something, so an empty answer would fail


def _index_tables(path: Path, name: str) -> dict[str, pa.Table]:
    ds = lance_ops.dataset(str(path))
    (index,) = [i for i in ds.manifest.indices if i.name == name]
    directory = path / "_indices" / str(uuid.UUID(bytes=index.uuid))
    out = {}
    for f in index.files:
        reader = LanceFileReader(str(directory / f.path))
        buffers = [reader.read_global_buffer(i) for i in range(1, len(reader.metadata().global_buffers))]
        out[f.path] = (reader.read_all().to_table(), buffers)
        assert (directory / f.path).stat().st_size == f.size_bytes
    return out


@pytest.mark.parametrize(
    ("column", "kind"),
    [
        ("id", "BTREE"),
        ("i", "BTREE"),
        ("s", "BTREE"),
        ("f", "BTREE"),
        ("s", "BITMAP"),
        ("i", "BITMAP"),
        ("l", "LABEL_LIST"),
        ("f", "ZONEMAP"),
        ("i", "ZONEMAP"),
    ],
)
def test_files_and_transaction_equal_pylances_build(tmp_path: Path, column: str, kind: str) -> None:
    ours = _write(tmp_path / "ours")
    ours.delete("id % 10 = 3")
    lance.write_dataset(_table(), str(tmp_path / "theirs"), max_rows_per_file=1500)
    theirs = lance.dataset(str(tmp_path / "theirs"))
    theirs.delete("id % 10 = 3")
    ours.create_scalar_index(column, kind)
    theirs.create_scalar_index(column, kind)
    mine, want = (
        _index_tables(tmp_path / "ours", f"{column}_idx"),
        _index_tables(tmp_path / "theirs", f"{column}_idx"),
    )
    assert mine.keys() == want.keys()
    for name in mine:
        (a, ab), (b, bb) = mine[name], want[name]
        assert a.schema.equals(b.schema, check_metadata=True), name
        if name == "page_data.lance":  # pylance's sort leaves rows of equal values in any order
            assert str(a["values"].to_pylist()) == str(b["values"].to_pylist())
            a, b = (t.sort_by([("values", "ascending"), ("ids", "ascending")]) for t in (a, b))
        assert str(a.to_pylist()) == str(b.to_pylist()), name  # str: NaN equals NaN
        assert ab == bb, name
    tx = lance_ops.dataset(str(tmp_path / "ours")).read_transaction()
    tx_theirs = lance_ops.dataset(str(tmp_path / "theirs")).read_transaction()
    (new,), (new_theirs,) = tx.operation.new_indices, tx_theirs.operation.new_indices
    assert tx.operation.removed_indices == ()
    for attr in (
        "name",
        "fields",
        "fragment_bitmap",
        "details",
        "index_version",
        "dataset_version",
        "base_id",
    ):
        assert getattr(new, attr) == getattr(new_theirs, attr), attr
    assert [f.path for f in new.files] == [f.path for f in new_theirs.files]
    assert new.created_at is not None and new.created_at > 0


def test_names_replace_and_other_writers(tmp_path: Path) -> None:
    ds = _write(tmp_path / "ds", n=300)
    ds.create_scalar_index("i", "BTREE")
    first = ds.list_indices()[0]["uuid"]
    ds.create_scalar_index("i", "BTREE")  # same type, default name: replaced
    (again,) = ds.list_indices()
    assert again["name"] == "i_idx" and again["uuid"] != first
    tx = ds.read_transaction()
    assert [str(uuid.UUID(bytes=i.uuid)) for i in tx.operation.removed_indices] == [first]
    ds.create_scalar_index("i", "BITMAP")  # other type, default name: the next free one
    assert sorted((i["name"], i["type"]) for i in ds.list_indices()) == [
        ("i_idx", "BTree"),
        ("i_idx_2", "Bitmap"),
    ]
    version = ds.version
    with pytest.raises(IndexExistsError, match="already exists"):
        ds.create_scalar_index("s", "BITMAP", name="i_idx", replace=False)
    assert lance_ops.dataset(str(tmp_path / "ds")).version == version
    ds.create_scalar_index("s", "BITMAP", name="mine")
    # pylance continues: appends, optimizes our index, answers from it
    theirs = lance.dataset(str(tmp_path / "ds"))
    lance.write_dataset(_table(300).slice(0, 50), str(tmp_path / "ds"), mode="append")
    theirs = lance.dataset(str(tmp_path / "ds"))
    theirs.optimize.optimize_indices()
    assert "@mine" in theirs.scanner(filter="s = 's1'").explain_plan()
    assert _row_ids(theirs, "s = 's1'", True) == _row_ids(theirs, "s = 's1'", False)


@pytest.mark.parametrize(
    ("column", "kind", "error"),
    [
        ("l", "BTREE", IndexColumnTypeError),
        ("l", "BITMAP", IndexColumnTypeError),
        ("i", "LABEL_LIST", IndexColumnTypeError),
        ("l", "ZONEMAP", IndexColumnTypeError),
        ("nope", "BTREE", FieldNotFoundError),
        ("i", "FOO", UnsupportedIndexTypeError),
        ("i", "NGRAM", IndexColumnTypeError),
        ("i", "INVERTED", IndexColumnTypeError),
    ],
)
def test_bad_input_commits_nothing(tmp_path: Path, column: str, kind: str, error: type) -> None:
    ds = _write(tmp_path / "ds", n=100)
    with pytest.raises(error) as info:
        ds.create_scalar_index(column, kind)
    if error is IndexColumnTypeError:
        assert info.value.column == column and column in str(info.value)
        assert isinstance(info.value, TypeError)
    assert lance_ops.dataset(str(tmp_path / "ds")).version == 1
    assert lance.dataset(str(tmp_path / "ds")).describe_indices() == []


def test_bad_params(tmp_path: Path) -> None:
    ds = _write(tmp_path / "ds", n=100)
    with pytest.raises(InvalidArgumentError):
        ds.create_scalar_index("i", "ZONEMAP", rows_per_zone=0)
    with pytest.raises(InvalidArgumentError):
        ds.create_scalar_index("i", "BTREE", bogus=1)
    ds.create_scalar_index("i", "ZONEMAP", rows_per_zone=64)
    theirs = lance.dataset(str(tmp_path / "ds"))
    assert _row_ids(theirs, "i = 5", True) == _row_ids(theirs, "i = 5", False)


@pytest.mark.parametrize("n", [0, 1])
def test_tiny_datasets(tmp_path: Path, n: int) -> None:
    ds = (
        _write(tmp_path / "ds", n=n)
        if n
        else lance_ops.write_dataset(_table(1).slice(0, 0), str(tmp_path / "ds"))
    )
    for column, kind in [("i", "BTREE"), ("s", "BITMAP"), ("l", "LABEL_LIST"), ("f", "ZONEMAP")]:
        ds.create_scalar_index(column, kind)
    theirs = lance.dataset(str(tmp_path / "ds"))
    assert len(theirs.describe_indices()) == 4
    for flt in ["i = 0", "s IS NULL", "array_has_any(l, ['t1'])", "f < 1.0"]:
        assert _row_ids(theirs, flt, True) == _row_ids(theirs, flt, False)
