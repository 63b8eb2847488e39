"""Schema evolution: ``add_columns`` / ``drop_columns`` / ``alter_columns``.

Checked against pylance 14 both ways: the same operation run by pylance and by us on copies of one
dataset gives the same schema (names, types, field ids), the same data files per fragment (field
ids) and the same transaction kind; pylance reads every version we write and continues the
history, and we read and continue what pylance writes (with deletions and stable row ids).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lance_ops
from lance_ops import LanceDataset
from lance_ops.errors import (
    LanceOpsError,
    PredicateError,
    PredicateTypeError,
    RetryableCommitConflictError,
    RowCountMismatchError,
    SchemaError,
)
from lance_ops.file import LanceFileReader
from lance_ops.fragment.reader import FragmentReader
from lance_ops.table.manifest import Manifest
from lance_ops.table.transaction import Merge, Project

VERSIONS = ["2.1", "2.2"]


def sample(n: int, start: int = 0) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table(
        {
            "a": ids,
            "s": pa.array([f"r{i}" for i in ids]),
            "f": ids.astype(np.float64) / 2,
            "st": pa.array([{"x": int(i), "y": f"y{i}"} for i in ids]),
            "l": pa.array([[int(i)] * int(i % 3) for i in ids], pa.list_(pa.int64())),
        }
    )


def make(uri: Path, version: str = "2.2", n: int = 20, stable: bool = False) -> LanceDataset:
    """Three fragments (8, 8, 4 rows) with deletions in the first two."""
    ds = lance_ops.write_dataset(
        sample(n), uri, max_rows_per_file=8, data_storage_version=version, enable_stable_row_ids=stable
    )
    ds.delete("a IN (1, 2, 9)")
    return ds


def plain(table: pa.Table) -> dict[str, list[Any]]:
    return table.to_pydict()


def layout(manifest: Manifest) -> tuple[Any, ...]:
    """What must match pylance: fields (id, parent, name, type, nullable) and per-fragment file ids."""
    fields = tuple((f.id, f.parent_id, f.name, f.logical_type, f.nullable) for f in manifest.schema)
    files = tuple(
        (f.id, tuple(tuple(d.fields) for d in f.files), f.physical_rows) for f in manifest.fragments
    )
    return fields, files


def assert_pylance_reads_every_version(lance: Any, uri: Path) -> None:
    ours = lance_ops.dataset(uri)
    for entry in ours.versions():
        version = entry["version"]
        theirs = lance.dataset(str(uri), version=version)
        mine = lance_ops.dataset(uri, version=version)
        assert theirs.schema.remove_metadata() == mine.schema.remove_metadata(), version
        assert plain(theirs.to_table()) == plain(mine.to_table()), version


def data_files(uri: Path) -> set[str]:
    return {p.name for p in (Path(uri) / "data").iterdir()}


def twin(uri: Path, tmp_path: Path, lance: Any) -> tuple[LanceDataset, Any]:
    """Our dataset at ``uri`` and pylance's handle on a copy of it."""
    copy = tmp_path / "pylance_copy"
    shutil.copytree(uri, copy)
    return lance_ops.dataset(uri), lance.dataset(str(copy))


def same_layout(ours: LanceDataset, theirs: Any) -> None:
    assert layout(ours.manifest) == layout(lance_ops.dataset(theirs.uri).manifest)
    assert type(ours.read_transaction().operation) is type(
        lance_ops.dataset(theirs.uri).read_transaction().operation
    )


# ------------------------------------------------------------------------------ add_columns


@pytest.mark.interop
@pytest.mark.parametrize("version", VERSIONS)
def test_add_sql_like_pylance(tmp_path: Path, lance_module: Any, version: str) -> None:
    uri = tmp_path / "ds"
    make(uri, version)
    ours, theirs = twin(uri, tmp_path, lance_module)
    transforms = {"b": "a * 2", "t": "s || '!'", "big": "a > 10"}
    ours.add_columns(transforms)
    theirs.add_columns(transforms)
    same_layout(ours, theirs)
    op = ours.read_transaction().operation
    assert isinstance(op, Merge) and op.preserves_nullability
    for fragment in ours.manifest.fragments:
        new = fragment.files[-1]
        assert tuple(new.fields) == (8, 9, 10)
        assert new.file_version == version
    assert plain(ours.to_table()) == plain(theirs.to_table())
    table = ours.to_table()
    assert table["b"].to_pylist() == [2 * a for a in table["a"].to_pylist()]
    assert_pylance_reads_every_version(lance_module, uri)


@pytest.mark.interop
def test_add_sql_pylance_continues(tmp_path: Path, lance_module: Any) -> None:
    uri = tmp_path / "ds"
    ds = make(uri)
    ds.add_columns({"b": "a + 100"})
    theirs = lance_module.dataset(str(uri))
    lance_module.write_dataset(
        lance_ops.dataset(uri).to_table(limit=3).set_column(0, "a", pa.array([50, 51, 52])),
        str(uri),
        mode="append",
    )
    theirs = lance_module.dataset(str(uri))
    theirs.delete("a = 4")
    theirs.add_columns({"c": "b - a"})
    ours = lance_ops.dataset(uri)
    table = ours.to_table()
    expected = np.asarray(table["b"]) - np.asarray(table["a"])
    assert table["c"].to_pylist() == expected.tolist()
    assert plain(ours.to_table()) == plain(theirs.to_table())
    ours.add_columns({"d": "c + 1"})
    ours.delete("a = 5")
    assert_pylance_reads_every_version(lance_module, uri)


@pytest.mark.interop
def test_add_udf_read_columns_batch_size(
    tmp_path: Path, lance_module: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = tmp_path / "ds"
    ds = make(uri, n=20)
    seen: list[tuple[list[str], int]] = []
    read: list[tuple[str, ...]] = []
    original = FragmentReader.read

    def spy(self: FragmentReader, columns: Any, *args: Any, **kwargs: Any) -> pa.Table:
        read.append(tuple(columns))
        return original(self, columns, *args, **kwargs)

    monkeypatch.setattr(FragmentReader, "read", spy)

    def udf(batch: pa.RecordBatch) -> pa.RecordBatch:
        seen.append((batch.schema.names, batch.num_rows))
        return pa.record_batch({"z": pa.array(batch["a"].to_numpy() * 10, pa.int64())})

    ds.add_columns(udf, read_columns=["a"], batch_size=3)
    monkeypatch.undo()
    assert read and set(read) == {("a",)}
    assert {tuple(names) for names, _ in seen} == {("a",)}
    assert max(rows for _, rows in seen) <= 3
    # Runs of 3 physical rows: fragment 0 (8 rows, 1 and 2 deleted) gives 1, 3, 2 live rows.
    assert [rows for _, rows in seen][:3] == [1, 3, 2]
    table = ds.to_table()
    assert table["z"].to_pylist() == [10 * a for a in table["a"].to_pylist()]
    assert_pylance_reads_every_version(lance_module, uri)


@pytest.mark.interop
def test_add_udf_pandas_decorated_and_row_ids(tmp_path: Path, lance_module: Any) -> None:
    uri = tmp_path / "ds"
    ds = make(uri, stable=True)

    @lance_ops.batch_udf(output_schema=pa.schema([pa.field("half", pa.float64())]))
    def half(batch: pa.RecordBatch) -> pd.DataFrame:
        return pd.DataFrame({"half": batch.to_pandas()["f"] / 2})

    ds.add_columns(half, read_columns=["f"])
    ds.add_columns(
        lambda b: pd.DataFrame({"rid": b["_rowid"].to_numpy().astype(np.int64)}), read_columns=["_rowid"]
    )
    table = ds.to_table(with_row_id=True)
    assert table["half"].to_pylist() == [f / 2 for f in table["f"].to_pylist()]
    assert table["rid"].to_pylist() == table["_rowid"].to_pylist()
    assert not ds.schema.metadata
    assert_pylance_reads_every_version(lance_module, uri)


@pytest.mark.interop
@pytest.mark.parametrize(
    "fields",
    [
        pa.field("n", pa.int32()),
        [pa.field("n", pa.int32()), pa.field("m", pa.string())],
        pa.schema([pa.field("n", pa.struct([("p", pa.int8())]))]),
    ],
)
def test_add_all_null_fields_writes_nothing(tmp_path: Path, lance_module: Any, fields: Any) -> None:
    uri = tmp_path / "ds"
    make(uri)
    ours, theirs = twin(uri, tmp_path, lance_module)
    before = data_files(uri)
    ours.add_columns(fields)
    theirs.add_columns(fields)
    same_layout(ours, theirs)
    assert data_files(uri) == before
    for name in ("n", "m"):
        if name in ours.schema.names:
            assert ours.to_table()[name].null_count == len(ours)
    assert plain(ours.to_table()) == plain(theirs.to_table())
    assert_pylance_reads_every_version(lance_module, uri)


@pytest.mark.interop
@pytest.mark.parametrize(
    "transforms",
    [
        {"n": "CAST(NULL AS INT)"},
        {"n": "cast((null) as bigint)", "m": "CAST(NULL AS STRING)"},
        {"n": "CAST(NULL AS DECIMAL(10,2))"},
        {"n": "CAST(NULL AS INT)", "m": "a + 1"},  # with another expression: all written
        {"n": "NULL"},  # a bare NULL (type null) is written, as pylance
        {"n": "TRY_CAST(NULL AS INT)"},
    ],
)
def test_add_null_casts_as_pylance(tmp_path: Path, lance_module: Any, transforms: dict[str, str]) -> None:
    """SQL transforms that are all ``CAST(NULL AS type)`` add metadata only, as pylance 14 does;
    any other expression among them writes them all: the same schema, files and rows as pylance."""
    uri = tmp_path / "ds"
    make(uri)
    ours, theirs = twin(uri, tmp_path, lance_module)
    before = data_files(uri)
    ours.add_columns(transforms)
    theirs.add_columns(transforms)
    same_layout(ours, theirs)
    metadata_only = all(v.upper().startswith("CAST") for v in transforms.values())
    assert (data_files(uri) == before) is metadata_only
    assert ours.to_table()["n"].null_count == len(ours)
    assert plain(ours.to_table()) == plain(theirs.to_table())
    assert_pylance_reads_every_version(lance_module, uri)


@pytest.mark.interop
@pytest.mark.parametrize("physical", [1, 1023, 1024, 1025])
def test_add_after_deletes_lines_up(tmp_path: Path, lance_module: Any, physical: int) -> None:
    uri = tmp_path / "ds"
    ds = lance_ops.write_dataset(pa.table({"a": np.arange(physical, dtype=np.int64)}), uri)
    rng = np.random.default_rng(physical)
    doomed = sorted({int(x) for x in rng.integers(0, physical, size=max(physical // 3, 0))} - {0})
    if doomed:
        ds.delete(f"a IN ({', '.join(map(str, doomed))})")
    ds.add_columns({"b": "a * 3"}, batch_size=1024)
    ds.add_columns(
        lambda b: pa.record_batch({"c": pa.array(b["a"].to_numpy() + 1)}), read_columns=["a"], batch_size=100
    )
    table = ds.to_table()
    a = np.asarray(table["a"])
    assert np.array_equal(np.asarray(table["b"]), 3 * a)
    assert np.array_equal(np.asarray(table["c"]), a + 1)
    # The new file has a row per physical row, nulls where rows are deleted.
    (fragment,) = ds.manifest.fragments
    new = LanceFileReader(str(uri / "data" / fragment.files[1].path)).read_range(0, physical).to_table()
    assert new.num_rows == physical
    assert new["b"].null_count == len(doomed)
    assert_pylance_reads_every_version(lance_module, uri)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    deleted=st.lists(st.booleans(), min_size=1, max_size=300),
    batch_size=st.integers(min_value=1, max_value=70),
    rows_per_file=st.integers(min_value=1, max_value=120),
)
def test_add_lines_up_property(
    tmp_path_factory: pytest.TempPathFactory, deleted: list[bool], batch_size: int, rows_per_file: int
) -> None:
    """Any deletion pattern, batch size and fragment size: every live row gets its own value."""
    uri = tmp_path_factory.mktemp("prop") / "ds"
    n = len(deleted)
    ds = lance_ops.write_dataset(
        pa.table({"a": np.arange(n, dtype=np.int64)}), uri, max_rows_per_file=rows_per_file
    )
    doomed = np.flatnonzero(deleted)
    if len(doomed):
        ds.delete(f"a IN ({', '.join(map(str, doomed))})")
    sizes: list[int] = []

    def udf(batch: pa.RecordBatch) -> pa.RecordBatch:
        sizes.append(batch.num_rows)
        return pa.record_batch({"neg": pa.array(-batch["a"].to_numpy())})

    ds.add_columns(udf, read_columns=["a"], batch_size=batch_size)
    table = ds.to_table()
    assert np.array_equal(np.asarray(table["a"]), np.flatnonzero(~np.asarray(deleted)))
    assert np.array_equal(np.asarray(table["neg"]), -np.asarray(table["a"]))
    assert max(sizes, default=0) <= batch_size
    assert all(len(f.files) == 2 for f in ds.manifest.fragments)


@pytest.mark.interop
def test_deletes_after_add(tmp_path: Path, lance_module: Any) -> None:
    uri = tmp_path / "ds"
    ds = make(uri)
    ds.add_columns({"b": "a * 2"})
    ds.delete("b > 30")
    ds.add_columns({"c": "b + 1"})
    ds.delete("c = 1")
    table = ds.to_table()
    assert table["a"].to_pylist() == [3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15]
    assert table["c"].to_pylist() == [2 * a + 1 for a in table["a"].to_pylist()]
    assert_pylance_reads_every_version(lance_module, uri)


@pytest.mark.interop
def test_add_keeps_stable_row_ids(tmp_path: Path, lance_module: Any) -> None:
    uri = tmp_path / "ds"
    make(uri, stable=True)
    ours, theirs = twin(uri, tmp_path, lance_module)
    before = {f.id: f.row_ids for f in ours.manifest.fragments}
    row_ids = ours.to_table(with_row_id=True)["_rowid"].to_pylist()
    ours.add_columns({"b": "a + 1"})
    theirs.add_columns({"b": "a + 1"})
    assert {f.id: f.row_ids for f in ours.manifest.fragments} == before
    mirrored = lance_ops.dataset(theirs.uri).manifest.fragments
    for mine, pylance_fragment in zip(ours.manifest.fragments, mirrored, strict=True):
        assert mine.last_updated_at_versions == pylance_fragment.last_updated_at_versions
        assert mine.created_at_versions == pylance_fragment.created_at_versions
    assert lance_module.dataset(str(uri)).to_table(with_row_id=True)["_rowid"].to_pylist() == row_ids
    assert ours._take_rows(row_ids[:3], ["b"])["b"].to_pylist() == [1, 4, 5]
    assert_pylance_reads_every_version(lance_module, uri)


@pytest.mark.interop
def test_add_to_empty_and_one_row_datasets(tmp_path: Path, lance_module: Any) -> None:
    empty = lance_ops.write_dataset(sample(0), tmp_path / "empty")
    calls: list[int] = []

    def udf(batch: pa.RecordBatch) -> pa.RecordBatch:
        calls.append(batch.num_rows)
        return pa.record_batch({"z": pa.array([], pa.int32())})

    empty.add_columns(udf, read_columns=["a"])
    empty.add_columns({"b": "a + 1"})
    assert calls == [0]
    assert empty.schema.names[-2:] == ["z", "b"]
    assert_pylance_reads_every_version(lance_module, tmp_path / "empty")
    one = lance_ops.write_dataset(sample(1), tmp_path / "one")
    one.add_columns({"b": "a + 1"})
    assert one.to_table()["b"].to_pylist() == [1]
    assert_pylance_reads_every_version(lance_module, tmp_path / "one")


# ------------------------------------------------------------------------------ drop_columns


@pytest.mark.interop
@pytest.mark.parametrize("version", VERSIONS)
def test_drop_like_pylance(tmp_path: Path, lance_module: Any, version: str) -> None:
    uri = tmp_path / "ds"
    ds = make(uri, version)
    ds.add_columns({"b": "a * 2"})
    ours, theirs = twin(uri, tmp_path, lance_module)
    for columns in (["b"], ["st.x", "f"]):
        ours.drop_columns(columns)
        theirs.drop_columns(columns)
        same_layout(ours, theirs)
        op = ours.read_transaction().operation
        assert isinstance(op, Project) and op.preserves_nullability
    # The file holding only "b" left its fragment; the others still list the dropped ids.
    assert all(len(f.files) == 1 and 2 in f.files[0].fields for f in ours.manifest.fragments)
    assert ours.schema.names == ["a", "s", "st", "l"]
    assert plain(ours.to_table()) == plain(theirs.to_table())
    assert_pylance_reads_every_version(lance_module, uri)
    theirs = lance_module.dataset(str(uri))
    theirs.add_columns({"f": "a * 2"})
    lance_module.write_dataset(theirs.to_table(limit=2), str(uri), mode="append")
    assert plain(lance_ops.dataset(uri).to_table()) == plain(lance_module.dataset(str(uri)).to_table())


# ------------------------------------------------------------------------------ alter_columns


@pytest.mark.interop
@pytest.mark.parametrize("version", VERSIONS)
def test_alter_rename_and_nullability_like_pylance(tmp_path: Path, lance_module: Any, version: str) -> None:
    uri = tmp_path / "ds"
    make(uri, version)
    ours, theirs = twin(uri, tmp_path, lance_module)
    steps: list[list[dict[str, Any]]] = [
        [{"path": "a", "name": "id"}, {"path": "st.x", "name": "xx"}],
        [{"path": "f", "nullable": False}],
        [{"path": "f", "nullable": True, "name": "g"}],
    ]
    for alterations in steps:
        ours.alter_columns(*alterations)
        theirs.alter_columns(*alterations)
        same_layout(ours, theirs)
        assert isinstance(ours.read_transaction().operation, Project)
        assert plain(ours.to_table()) == plain(theirs.to_table())
    assert ours.schema.names == ["id", "s", "g", "st", "l"]
    assert ours.to_table()["st"].to_pylist()[0] == {"xx": 0, "y": "y0"}
    assert_pylance_reads_every_version(lance_module, uri)


@pytest.mark.interop
@pytest.mark.parametrize("version", VERSIONS)
def test_alter_cast_like_pylance(tmp_path: Path, lance_module: Any, version: str) -> None:
    uri = tmp_path / "ds"
    make(uri, version)
    ours, theirs = twin(uri, tmp_path, lance_module)
    steps: list[list[dict[str, Any]]] = [
        [{"path": "a", "data_type": pa.int32()}],
        [
            {"path": "f", "data_type": pa.float32(), "name": "f32"},
            {"path": "s", "data_type": pa.large_string()},
        ],
        [{"path": "l", "data_type": pa.list_(pa.int16())}],
        [
            {"path": "st.y", "data_type": pa.large_string(), "name": "yy"},
            {"path": "st.x", "data_type": pa.int8()},
        ],
    ]
    for alterations in steps:
        ours.alter_columns(*alterations)
        theirs.alter_columns(*alterations)
        same_layout(ours, theirs)
        op = ours.read_transaction().operation
        assert isinstance(op, Merge) and op.preserves_nullability
        assert plain(ours.to_table()) == plain(theirs.to_table())
    assert ours.schema.field("a").type == pa.int32()
    assert ours.schema.field("l").type == pa.list_(pa.int16())
    assert ours.schema.field("st").type == pa.struct([("x", pa.int8()), ("yy", pa.large_string())])
    assert ours.to_table()["a"].to_pylist() == [0, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19]
    assert_pylance_reads_every_version(lance_module, uri)
    theirs = lance_module.dataset(str(uri))
    theirs.delete("a = 3")
    theirs.alter_columns({"path": "a", "data_type": pa.int64()})
    ours = lance_ops.dataset(uri)
    assert plain(ours.to_table()) == plain(theirs.to_table())


# ------------------------------------------------------------------------------ pylance -> us


@pytest.mark.interop
def test_we_read_and_continue_pylance_evolution(tmp_path: Path, lance_module: Any) -> None:
    uri = str(tmp_path / "ds")
    lance = lance_module
    ds = lance.write_dataset(sample(20), uri, max_rows_per_file=8, enable_stable_row_ids=True)
    ds.delete("a IN (1, 2, 9)")
    ds.add_columns({"b": "a * 2"})
    ds.add_columns(
        lance.batch_udf()(lambda b: pa.record_batch({"u": pa.array(b["a"].to_numpy() + 1)})),
        read_columns=["a"],
    )
    ds.add_columns(pa.field("n", pa.int16()))
    ds.drop_columns(["st.y"])
    ds.alter_columns({"path": "st.x", "name": "xx"}, {"path": "b", "data_type": pa.int32()})
    ds.add_columns({"t": "named_struct('p', a, 'q', s)"})
    ds.alter_columns({"path": "t.p", "data_type": pa.int16()})
    for version in range(1, ds.version + 1):
        theirs = lance.dataset(uri, version=version)
        mine = lance_ops.dataset(uri, version=version)
        assert plain(mine.to_table()) == plain(theirs.to_table()), version
        assert (
            mine.to_table(with_row_id=True)["_rowid"].to_pylist()
            == theirs.to_table(with_row_id=True)["_rowid"].to_pylist()
        )
    ours = lance_ops.dataset(uri)
    ours.add_columns({"c": "b + u"})
    ours.delete("c = 13")
    lance_ops.write_dataset(ours.to_table(limit=2), uri, mode="append")
    ours = lance_ops.dataset(uri)
    ours.alter_columns({"path": "c", "data_type": pa.int16()})
    ours.drop_columns(["n"])
    assert plain(lance.dataset(uri).to_table()) == plain(ours.to_table())
    assert (
        lance.dataset(uri).to_table(with_row_id=True)["_rowid"].to_pylist()
        == ours.to_table(with_row_id=True)["_rowid"].to_pylist()
    )


def test_conflicting_add_leaves_no_files(tmp_path: Path) -> None:
    uri = tmp_path / "ds"
    stale = make(uri)
    lance_ops.write_dataset(sample(2, 100), uri, mode="append")
    files = data_files(uri)
    with pytest.raises(RetryableCommitConflictError):
        stale.add_columns({"b": "a + 1"})
    assert data_files(uri) == files
    fresh = lance_ops.dataset(uri)
    fresh.add_columns({"b": "a + 1"})
    assert fresh.to_table()["b"].to_pylist()[-2:] == [101, 102]


@pytest.mark.interop
def test_pylance_udf_object_is_accepted(tmp_path: Path, lance_module: Any) -> None:
    ds = make(tmp_path / "ds")
    declared = pa.schema([pa.field("w", pa.float64())])
    udf = lance_module.batch_udf(output_schema=declared)(
        lambda b: pd.DataFrame({"w": b.to_pandas()["f"] * 2})
    )
    ds.add_columns(udf, read_columns=["f"])
    assert ds.schema.field("w").type == pa.float64()
    wrong = lance_module.batch_udf(output_schema=declared)(lambda b: pd.DataFrame({"w": b.to_pandas()["a"]}))
    with pytest.raises(SchemaError):
        ds.add_columns(wrong, read_columns=["a"])


# ------------------------------------------------------------------------------ bad input


def _udf_rows(batch: pa.RecordBatch) -> pa.RecordBatch:
    return pa.record_batch({"z": pa.array(np.zeros(max(batch.num_rows - 1, 0), np.int64))})


def _udf_late_rows(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Right until the last fragment, then one row short (files for earlier fragments exist)."""
    rows = batch.num_rows - (1 if batch["a"].to_pylist()[-1:] == [200] else 0)
    return pa.record_batch({"z": pa.array(np.zeros(rows, np.int64))})


def _udf_schema_drift(batch: pa.RecordBatch) -> pa.RecordBatch:
    late = batch["a"].to_pylist()[-1:] == [200]
    return pa.record_batch({"z": pa.array(np.zeros(batch.num_rows), pa.int32() if late else pa.int64())})


def _udf_not_batch(batch: pa.RecordBatch) -> Any:
    return 5


def _udf_existing(batch: pa.RecordBatch) -> pa.RecordBatch:
    return pa.record_batch({"a": pa.array(np.zeros(batch.num_rows, np.int64))})


BAD_ADDS: list[tuple[Any, dict[str, Any], type[Exception]]] = [
    ({"b": "a +"}, {}, PredicateError),
    ({"b": "nope + 1"}, {}, SchemaError),
    ({"b": "a + 's'"}, {}, PredicateError),
    ({"b": 5}, {}, PredicateTypeError),
    ({"a": "a + 1"}, {}, SchemaError),
    ({"b": "a + 1"}, {"read_columns": ["a"]}, ValueError),
    (_udf_rows, {"read_columns": ["a"]}, SchemaError),
    (_udf_late_rows, {"read_columns": ["a"]}, SchemaError),
    (_udf_schema_drift, {"read_columns": ["a"]}, SchemaError),
    (_udf_not_batch, {"read_columns": ["a"]}, SchemaError),
    (_udf_existing, {"read_columns": ["a"]}, SchemaError),
    (_udf_rows, {"read_columns": ["nope"]}, SchemaError),
    (pa.field("a", pa.int8()), {}, SchemaError),
    (pa.field("n", pa.int8(), nullable=False), {}, SchemaError),
    (42, {}, TypeError),
]

BAD_ALTERS: list[tuple[list[dict[str, Any]], type[Exception]]] = [
    ([{"path": "nope", "name": "x"}], SchemaError),
    ([{"path": "st.nope", "name": "x"}], SchemaError),
    ([{"path": "s", "name": "a"}], SchemaError),
    ([{"path": "st.x", "name": "y"}], SchemaError),
    ([{"path": "s", "name": "a.b"}], SchemaError),
    ([{"path": "a"}], ValueError),
    ([{"path": "a", "type": pa.int8()}], ValueError),
    ([{"path": "a", "data_type": pa.float64()}], SchemaError),
    ([{"path": "s", "data_type": pa.int64()}], SchemaError),
    ([{"path": "a", "data_type": pa.int8()}], SchemaError),
    ([{"path": "big", "data_type": pa.float32()}], SchemaError),
    ([{"path": "ts", "data_type": pa.timestamp("s")}], SchemaError),
    ([{"path": "st.y", "data_type": pa.int32()}], SchemaError),
    ([{"path": "maybe", "nullable": False}], SchemaError),
    ([{"path": "a", "name": "b"}, {"path": "nope", "name": "c"}], SchemaError),
]


@pytest.fixture
def bad_input_dataset(tmp_path: Path) -> LanceDataset:
    """A dataset where casting ``a`` to int8 only fails in the last fragment (after 127)."""
    uri = tmp_path / "ds"
    table = sample(20).append_column("big", pa.array([1.0] * 19 + [1e300]))
    table = table.append_column(
        "ts", pa.array(np.arange(20) * 1_000_000 + (np.arange(20) == 19), pa.timestamp("us"))
    )
    table = table.append_column("maybe", pa.array([1] * 19 + [None], pa.int64()))
    table = table.set_column(0, "a", pa.array(list(range(19)) + [200], pa.int64()))
    return lance_ops.write_dataset(table, uri, max_rows_per_file=8)


def assert_nothing_written(ds: LanceDataset, files: set[str]) -> None:
    assert ds.latest_version == 1 and ds.version == 1
    assert data_files(Path(ds.uri)) == files


@pytest.mark.parametrize(("transforms", "kwargs", "error"), BAD_ADDS)
def test_bad_add_columns(
    bad_input_dataset: LanceDataset, transforms: Any, kwargs: dict[str, Any], error: type[Exception]
) -> None:
    ds = bad_input_dataset
    files = data_files(Path(ds.uri))
    with pytest.raises(error) as info:
        ds.add_columns(transforms, **kwargs)
    assert isinstance(info.value, LanceOpsError)
    assert_nothing_written(ds, files)


@pytest.mark.parametrize(("alterations", "error"), BAD_ALTERS)
def test_bad_alter_columns(
    bad_input_dataset: LanceDataset, alterations: list[dict[str, Any]], error: type[Exception]
) -> None:
    ds = bad_input_dataset
    files = data_files(Path(ds.uri))
    with pytest.raises(error) as info:
        ds.alter_columns(*alterations)
    assert isinstance(info.value, LanceOpsError)
    assert_nothing_written(ds, files)


@pytest.mark.parametrize(
    ("columns", "error"),
    [
        (["nope"], SchemaError),
        (["st.nope"], SchemaError),
        (["a", "s", "f", "st", "l", "big", "ts", "maybe"], SchemaError),
        ("a", TypeError),
    ],
)
def test_bad_drop_columns(bad_input_dataset: LanceDataset, columns: Any, error: type[Exception]) -> None:
    ds = bad_input_dataset
    files = data_files(Path(ds.uri))
    with pytest.raises(error) as info:
        ds.drop_columns(columns)
    assert isinstance(info.value, LanceOpsError)
    assert_nothing_written(ds, files)


@pytest.mark.parametrize("udf", [_udf_rows, _udf_late_rows])
def test_a_udf_with_the_wrong_row_count_names_it(bad_input_dataset: LanceDataset, udf: Any) -> None:
    # pylance: OSError "new batch has different size with the source batch".
    with pytest.raises(RowCountMismatchError, match=r"the transform returned \d+ rows for a batch of \d+"):
        bad_input_dataset.add_columns(udf, read_columns=["a"])
    assert isinstance(RowCountMismatchError("x"), OSError)


@pytest.mark.interop
@pytest.mark.parametrize("transforms", [{}, pa.schema([])])
def test_adding_no_columns_commits_an_empty_merge_as_pylance(
    tmp_path: Path, lance_module: Any, transforms: Any
) -> None:
    make(tmp_path / "e")
    ours, theirs = twin(tmp_path / "e", tmp_path, lance_module)
    files = data_files(Path(ours.uri))
    ours.add_columns(transforms)
    theirs.add_columns(transforms)
    assert ours.version == theirs.version == 3
    same_layout(ours, theirs)
    assert data_files(Path(ours.uri)) == files
    assert plain(lance_module.dataset(ours.uri).to_table()) == plain(theirs.to_table())


def _pylance_error(lance: Any, uri: Path, call: Any) -> type[BaseException]:
    try:
        call(lance.dataset(str(uri)))
    except Exception as exc:  # noqa: BLE001 - the class is what is compared
        return type(exc)
    raise AssertionError("pylance accepted it")


BUILTIN_PARITY: list[tuple[str, Any]] = [
    ("add an existing column", lambda ds: ds.add_columns({"a": "a + 1"})),
    ("add an unknown column's expression", lambda ds: ds.add_columns({"b": "nope + 1"})),
    ("add malformed SQL", lambda ds: ds.add_columns({"b": "a +"})),
    (
        "add a non-nullable all-null field",
        lambda ds: ds.add_columns(pa.field("n", pa.int8(), nullable=False)),
    ),
    ("udf with the wrong row count", lambda ds: ds.add_columns(_udf_rows, read_columns=["a"])),
    ("rename a missing column", lambda ds: ds.alter_columns({"path": "nope", "name": "x"})),
    ("rename onto an existing name", lambda ds: ds.alter_columns({"path": "s", "name": "a"})),
    ("lossy cast", lambda ds: ds.alter_columns({"path": "a", "data_type": pa.int8()})),
    ("cast across families", lambda ds: ds.alter_columns({"path": "s", "data_type": pa.int64()})),
    ("non-nullable with nulls", lambda ds: ds.alter_columns({"path": "maybe", "nullable": False})),
    (
        "non-nullable and a cast in one call",
        lambda ds: ds.alter_columns({"path": "s", "nullable": False}, {"path": "a", "data_type": pa.int32()}),
    ),
    ("alter nothing", lambda ds: ds.alter_columns({"path": "a"})),
    ("drop a missing column", lambda ds: ds.drop_columns(["nope"])),
    ("drop every column", lambda ds: ds.drop_columns(["a", "s", "f", "st", "l", "big", "ts", "maybe"])),
    ("delete with malformed SQL", lambda ds: ds.delete("a >")),
    ("delete naming an unknown column", lambda ds: ds.delete("nope = 1")),
    ("delete with a non-boolean filter", lambda ds: ds.delete("a + 1")),
    ("delete with a non-predicate", lambda ds: ds.delete(5)),
]


@pytest.mark.interop
@pytest.mark.parametrize(("case", "call"), BUILTIN_PARITY, ids=[c for c, _ in BUILTIN_PARITY])
def test_bad_input_errors_are_the_builtins_pylance_raises(
    bad_input_dataset: LanceDataset, lance_module: Any, tmp_path: Path, case: str, call: Any
) -> None:
    """Code catching what pylance raises (OSError "Invalid user input", ValueError, TypeError)
    catches ours too; ours are lance_ops errors and commit nothing."""
    theirs_uri = tmp_path / "theirs"
    shutil.copytree(bad_input_dataset.uri, theirs_uri)
    expected = _pylance_error(lance_module, theirs_uri, call)
    builtin = next(b for b in (OSError, TypeError, ValueError) if issubclass(expected, b))
    files = data_files(Path(bad_input_dataset.uri))
    with pytest.raises(builtin) as info:
        call(bad_input_dataset)
    assert isinstance(info.value, LanceOpsError), case
    assert_nothing_written(bad_input_dataset, files)
    assert lance_module.dataset(str(theirs_uri)).version == 1


@pytest.mark.parametrize("stable", [False, True])
def test_add_sql_over_row_ids_and_addresses(tmp_path: Path, stable: bool) -> None:
    ds = make(tmp_path / "r", stable=stable)  # fragments of 8, 8, 4 rows; 1, 2, 9 deleted
    ds.add_columns({"rid": "_rowid", "addr": "_rowaddr"})
    got = lance_ops.dataset(ds.uri).to_table(
        columns=["a", "rid", "addr"], with_row_id=True, with_row_address=True
    )
    assert got.column("rid").to_pylist() == got.column("_rowid").to_pylist()
    assert got.column("addr").to_pylist() == got.column("_rowaddr").to_pylist()
    assert got.column("addr").to_pylist()[:3] == [0, 3, 4]


NEW_COLUMN_SQL = [
    "a * 2",  # int32 stays int32 (the literal takes the column's type)
    "a + n",  # nullable operand
    "abs(a)",  # functions are nullable
    "cast(a as bigint)",
    "a + cast(1 as bigint)",  # a computed number does not take the column's type
    "a > 5",
    "concat(s, 'x')",
    "1",  # a constant is not nullable
    "'x'",
    "NULL",
    "a = NULL",
    "f * 2",
    "-a",
    "a IS NULL",
    "a IN (1, 2)",
    "s LIKE 'x%'",
    "st.x + 1",
]


@pytest.mark.interop
@pytest.mark.parametrize("expression", NEW_COLUMN_SQL)
def test_sql_columns_typed_and_nullable_as_pylance(
    tmp_path: Path, lance_module: Any, expression: str
) -> None:
    schema = pa.schema(
        [
            pa.field("a", pa.int32(), nullable=False),
            pa.field("n", pa.int32()),
            pa.field("s", pa.string(), nullable=False),
            pa.field("f", pa.float32(), nullable=False),
            pa.field("st", pa.struct([pa.field("x", pa.int64(), nullable=False)]), nullable=False),
        ]
    )
    data = {
        "a": list(range(12)),
        "n": [1, None] * 6,
        "s": ["x", "y"] * 6,
        "f": [1.0, 2.0] * 6,
        "st": [{"x": i} for i in range(12)],
    }
    got = {}
    for who in ("pylance", "ours"):
        uri = str(tmp_path / who)
        lance_module.write_dataset(pa.table(data, schema=schema), uri, max_rows_per_file=6)
        lance_module.dataset(uri).delete("a % 5 = 1")
        (lance_module.dataset if who == "pylance" else lance_ops.dataset)(uri).add_columns({"c": expression})
        theirs = lance_module.dataset(uri)
        got[who] = (theirs.schema.field("c"), theirs.to_table().column("c").to_pylist())
        assert lance_ops.dataset(uri).to_table().column("c").to_pylist() == got[who][1]
    assert got["ours"] == got["pylance"]


@given(
    st.integers(0, 2100),
    st.data(),
    st.sampled_from([1, 7, 1023, 1024, 1025, 65536]),
)
def test_live_mask_gives_the_live_offsets_isin_gives(physical: int, data: Any, batch: int) -> None:
    """The per-fragment mask of live rows (built once) selects, batch by batch, exactly the offsets
    ``np.isin`` against every deleted offset selected: none, some, all deleted; 0/1 rows; batch
    edges at 1023/1024/1025."""
    from lance_ops.ops.columns import live_mask

    chosen = (
        data.draw(st.sets(st.integers(0, max(physical - 1, 0)), max_size=physical)) if physical else set()
    )
    if physical and data.draw(st.booleans()):
        chosen = set(range(physical)) if data.draw(st.booleans()) else chosen | {0, physical - 1}
    deleted = np.array(sorted(chosen), dtype=np.uint32)
    keep = live_mask(physical, deleted)
    assert (keep is None) == (len(deleted) == 0)
    for start in range(0, physical, batch):
        offsets = np.arange(start, min(start + batch, physical), dtype=np.int64)
        expected = offsets[~np.isin(offsets, deleted)]
        live = offsets if keep is None else offsets[keep[start : start + len(offsets)]]
        assert np.array_equal(live, expected)
