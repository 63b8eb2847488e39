"""The dataset API, both ways against pylance 14: we write and pylance reads, and the reverse."""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lance_ops
from lance_ops import FragmentMetadata, LanceDataset, LanceOperation
from lance_ops.errors import (
    DatasetAlreadyExistsError,
    DatasetNotFoundError,
    FieldNotFoundError,
    SchemaError,
    UnsupportedFeatureError,
)
from lance_ops.fragment import write_fragments
from lance_ops.progress import ProgressEvent
from tests.table.conftest import table


def _uri(tmp_path: Path, name: str = "ds") -> str:
    return str(tmp_path / name)


@pytest.mark.interop
@pytest.mark.parametrize(("file_version", "v2_names"), [("2.2", True), ("2.1", False), ("stable", False)])
def test_we_write_pylance_reads(tmp_path: Path, lance_module, file_version: str, v2_names: bool) -> None:  # type: ignore[no-untyped-def]
    uri = _uri(tmp_path)
    first, second, third = table(100), table(7, 100), table(30, 500)
    lance_ops.write_dataset(
        first,
        uri,
        max_rows_per_file=40,
        data_storage_version=file_version,
        enable_v2_manifest_paths=v2_names,
        commit_message="made by lance-ops",
    )
    lance_ops.write_dataset(second, uri, mode="append")
    ours = lance_ops.write_dataset(third, uri, mode="overwrite", max_rows_per_file=16)
    expected_version = "2.2" if file_version == "stable" else file_version
    assert ours.version == 3 and ours.data_storage_version == expected_version

    names = sorted(p.name for p in (Path(uri) / "_versions").iterdir())
    assert ("1.manifest" in names) != v2_names
    ds = lance_module.dataset(uri)
    assert ds.version == 3 and ds.data_storage_version == expected_version
    assert ds.to_table() == third and ds.count_rows() == 30
    assert [f.fragment_id for f in ds.get_fragments()] == [4, 5]
    assert lance_module.dataset(uri, version=2).to_table() == pa.concat_tables([first, second])
    assert lance_module.dataset(uri, version=1).count_rows() == 100
    assert [v["version"] for v in ds.versions()] == [1, 2, 3]
    assert [v["metadata"] for v in ds.versions()] == [v["metadata"] for v in ours.versions()]
    assert ds.read_transaction(1).transaction_properties == {"__lance_commit_message": "made by lance-ops"}

    # pylance keeps writing to our dataset, and we read its versions back.
    lance_module.write_dataset(table(3, 900), uri, mode="append")
    again = lance_ops.dataset(uri)
    assert again.version == 4 and again.to_table() == pa.concat_tables([third, table(3, 900)])
    assert again.checkout_version(2).to_table() == pa.concat_tables([first, second])


@pytest.mark.interop
def test_pylance_writes_we_read(tmp_path: Path, lance_module) -> None:  # type: ignore[no-untyped-def]
    uri = _uri(tmp_path)
    lance_module.write_dataset(table(100), uri, max_rows_per_file=30)
    lance_module.write_dataset(table(10, 100), uri, mode="append", max_rows_per_file=4)
    lance_module.write_dataset(table(20, 300), uri, mode="overwrite", max_rows_per_file=8)
    ds = lance_ops.dataset(uri)
    assert ds.version == 3 == ds.latest_version
    assert ds.to_table() == table(20, 300) and ds.count_rows() == 20
    v2 = lance_ops.dataset(uri, version=2)
    full = pa.concat_tables([table(100), table(10, 100)])
    assert v2.latest_version == 3 and v2.to_table() == full
    assert len(v2.get_fragments()) == 4 + 3
    indices = [109, 0, 29, 30, 31, 105, 30]
    assert v2.take(indices) == full.take(indices)
    assert v2.take(np.array([], dtype=np.int64), columns=["s"]).num_rows == 0
    assert v2.to_table(columns=["s", "id"], offset=95, limit=8) == full.select(["s", "id"]).slice(95, 8)
    assert v2.head(3) == full.slice(0, 3)
    batches = list(v2.to_batches(batch_size=7))
    assert max(b.num_rows for b in batches) <= 7 and pa.Table.from_batches(batches) == full
    rows = v2.to_table(columns=["id"], with_row_id=True, with_row_address=True)
    assert rows.column("_rowid") == rows.column("_rowaddr")
    assert rows.column("_rowaddr").to_pylist()[29:32] == [29, 1 << 32, (1 << 32) + 1]
    assert v2._take_rows([1 << 32, 5]).column("id").to_pylist() == [30, 5]
    assert [v["version"] for v in ds.versions()] == [1, 2, 3]
    assert ds.versions()[1]["metadata"] == lance_module.dataset(uri).versions()[1]["metadata"]


@pytest.mark.interop
def test_appends_both_ways(tmp_path: Path, lance_module) -> None:  # type: ignore[no-untyped-def]
    ours, theirs = _uri(tmp_path, "ours"), _uri(tmp_path, "theirs")
    lance_ops.write_dataset(table(10), ours)
    lance_module.write_dataset(table(5, 10), ours, mode="append")
    lance_module.write_dataset(table(10), theirs)
    lance_ops.write_dataset(table(5, 10), theirs, mode="append")
    for uri in (ours, theirs):
        assert lance_module.dataset(uri).to_table() == table(15)
        assert lance_ops.dataset(uri).to_table() == table(15)
        assert [f.fragment_id for f in lance_module.dataset(uri).get_fragments()] == [0, 1]


@pytest.mark.interop
def test_pylance_deletions_and_stable_row_ids(pylance_history: dict[str, str], lance_module) -> None:  # type: ignore[no-untyped-def]
    uri = pylance_history["stable"]
    theirs, ours = lance_module.dataset(uri), lance_ops.dataset(uri)
    assert ours.has_stable_row_ids and ours.count_rows() == theirs.count_rows() == 13
    assert ours.to_table() == theirs.to_table()
    mine = ours.to_table(with_row_id=True, with_row_address=True)
    expected = theirs.to_table(with_row_id=True, with_row_address=True)
    assert mine.column("_rowid") == expected.column("_rowid")
    assert mine.column("_rowaddr") == expected.column("_rowaddr")
    assert ours.take([0, 1, 12]) == theirs.take([0, 1, 12])
    assert (
        ours._take_rows([12, 0]).column("id").to_pylist()
        == theirs._take_rows([12, 0]).column("id").to_pylist()
    )
    for fragment in ours.get_fragments():
        assert fragment.count_rows() == theirs.get_fragment(fragment.fragment_id).count_rows()


@pytest.mark.interop
def test_evolved_schema_is_read_by_field_id(pylance_history: dict[str, str], lance_module) -> None:  # type: ignore[no-untyped-def]
    uri = pylance_history["evolved"]
    for version in range(1, lance_module.dataset(uri).version + 1):
        theirs = lance_module.dataset(uri, version=version)
        ours = lance_ops.dataset(uri, version=version)
        assert ours.schema == theirs.schema, version
        assert ours.to_table() == theirs.to_table(), version
        assert ours.count_rows() == theirs.count_rows()


@pytest.mark.interop
def test_null_columns_renames_and_drops(tmp_path: Path, lance_module) -> None:  # type: ignore[no-untyped-def]
    uri = _uri(tmp_path)
    lance_ops.write_dataset(table(12), uri, max_rows_per_file=5)
    ds = lance_module.dataset(uri)
    ds.add_columns(pa.field("empty", pa.float32()))
    lance_module.dataset(uri).alter_columns({"path": "s", "name": "text"})
    lance_module.dataset(uri).drop_columns(["st"])
    ours = lance_ops.dataset(uri)
    assert ours.schema.names == ["id", "text", "empty"]
    expected = lance_module.dataset(uri).to_table()
    assert ours.to_table() == expected
    assert ours.to_table().column("empty").null_count == 12
    assert ours.take([11, 2], columns=["empty", "text"]) == expected.select(["empty", "text"]).take([11, 2])
    lance_ops.write_dataset(expected.slice(0, 2), uri, mode="append")
    assert lance_module.dataset(uri).count_rows() == 14


@pytest.mark.interop
def test_open_by_tag(tmp_path: Path, lance_module) -> None:  # type: ignore[no-untyped-def]
    uri = _uri(tmp_path)
    lance_ops.write_dataset(table(3), uri)
    lance_ops.write_dataset(table(3, 3), uri, mode="append")
    lance_module.dataset(uri).tags.create("first", 1)
    assert lance_ops.dataset(uri, version="first").to_table() == table(3)
    with pytest.raises(DatasetNotFoundError):
        lance_ops.dataset(uri, version="nope")


@pytest.mark.parametrize("rows", [0, 1, 1023, 1024, 1025])
def test_row_count_edges(tmp_path: Path, rows: int) -> None:
    uri = _uri(tmp_path)
    data = table(rows)
    ds = lance_ops.write_dataset(data, uri, max_rows_per_file=1024)
    assert ds.count_rows() == rows and ds.to_table() == data
    assert [f.metadata.physical_rows for f in ds.get_fragments()] == [1024] * (rows // 1024) + (
        [rows % 1024] if rows % 1024 else []
    )
    if not rows:
        empty = lance_ops.write_dataset(data, _uri(tmp_path, "empty21"), data_storage_version="2.1")
        assert empty.data_storage_version == "2.1" and empty.schema == data.schema
    if rows:
        assert ds.take([rows - 1]) == data.slice(rows - 1, 1)
        with pytest.raises(IndexError):
            ds.take([rows])


def test_input_kinds_and_all_null_column(tmp_path: Path) -> None:
    data = pa.table({"x": pa.array([None] * 13, pa.int32()), "y": pa.array(range(13), pa.int64())})
    inputs = {
        "table": data,
        "batch": data.to_batches()[0],
        "reader": pa.RecordBatchReader.from_batches(data.schema, data.to_batches(max_chunksize=5)),
        "iterable": iter(data.to_batches(max_chunksize=4)),
        "pandas": data.to_pandas(),
    }
    for name, value in inputs.items():
        got = lance_ops.write_dataset(value, _uri(tmp_path, name), schema=data.schema).to_table()
        assert got == data, name
    frame = pd.DataFrame({"a": [1.5, 2.5], "b": ["x", "y"]})
    assert lance_ops.write_dataset(frame, _uri(tmp_path, "df")).to_table().to_pandas().equals(frame)


def _memory_story(lib: Any, uri: str) -> list[Any]:
    """What a memory:// dataset shows through ``lib`` (lance_ops or pylance): its handle keeps its
    store; opening the URI again finds nothing; a second create there starts afresh."""
    seen: list[Any] = []
    ds = lib.write_dataset(table(9), uri, max_rows_per_file=4)
    ds = lib.write_dataset(table(2, 9), ds, mode="append")
    seen += [ds.version, ds.count_rows(), ds.checkout_version(1).count_rows(), len(ds.versions())]
    ds.delete("id < 2")
    seen += [ds.version, ds.to_table().column("id").to_pylist()]
    try:
        lib.dataset(uri)
    except ValueError as exc:  # pylance's (and lance_ops' DatasetNotFoundError is one)
        seen.append(f"not found: {type(exc).__name__ in ('ValueError', 'DatasetNotFoundError')}")
    again = lib.write_dataset(table(3), uri)  # mode="create" on the same name: a new store
    seen += [again.version, again.count_rows(), len(again.versions())]
    appended = lib.write_dataset(table(1), uri, mode="append")  # appending to nothing creates
    seen += [appended.version, appended.count_rows()]
    return seen


@pytest.mark.interop
def test_memory_datasets_behave_as_pylance() -> None:
    lance = pytest.importorskip("lance")
    uri = "memory://table-tests/ds"
    ours = _memory_story(lance_ops, uri)
    assert ours == [2, 11, 9, 2, 3, list(range(2, 11)), "not found: True", 1, 3, 1, 1, 1]
    assert ours == _memory_story(lance, uri)
    with pytest.raises(DatasetNotFoundError):
        lance_ops.dataset(uri)


def test_spark_style_write_then_commit(tmp_path: Path) -> None:
    uri = _uri(tmp_path)
    lance_ops.write_dataset(table(4), uri)
    shipped = [json.dumps(f.to_json()) for f in write_fragments(table(6, 4), uri, max_rows_per_file=4)]
    pickled = pickle.loads(pickle.dumps([FragmentMetadata.from_json(json.loads(s)) for s in shipped]))
    for fragment in pickled:
        (data_file,) = fragment.files
        assert data_file.file_size_bytes == (tmp_path / "ds" / "data" / data_file.path).stat().st_size
    ds = LanceDataset.commit(
        uri, LanceOperation.Append(pickled), read_version=1, transaction_properties={"run": "r1"}
    )
    assert ds.version == 2 and ds.to_table() == table(10)
    transaction = ds.read_transaction()
    assert transaction is not None and transaction.properties == {"run": "r1"}
    fresh = _uri(tmp_path, "fresh")
    fragments = write_fragments(table(5), fresh, mode="create", data_storage_version="2.1")
    created = LanceDataset.commit(fresh, LanceOperation.Overwrite(table(5).schema, fragments))
    assert created.version == 1 and created.data_storage_version == "2.1" and created.to_table() == table(5)


def test_write_fragments_with_explicit_fields_skips_the_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = _uri(tmp_path)
    lance_ops.write_dataset(table(4), uri, data_storage_version="2.1")
    ds = lance_ops.dataset(uri)
    shifted = dataclasses.replace(
        ds.manifest.schema,
        fields=tuple(
            dataclasses.replace(f, id=f.id + 10, parent_id=f.parent_id + 10 if f.parent_id >= 0 else -1)
            for f in ds.manifest.schema
        ),
    )

    def no_manifest(*args: object) -> None:
        raise AssertionError("write_fragments read the manifest")

    monkeypatch.setattr(lance_ops.fragment.writer, "_dataset_schema", no_manifest)
    data = table(3, 4).select(["st", "s", "id"])  # cast back to the order of ``fields``
    (fragment,) = write_fragments(data, uri, fields=shifted, data_storage_version="2.1")
    (data_file,) = fragment.files
    assert data_file.fields == (10, 11, 13, 14)  # the leaves: id, s, st.a, st.b
    assert (data_file.file_major_version, data_file.file_minor_version) == (2, 1)
    with pytest.raises(AssertionError, match="read the manifest"):
        write_fragments(data, uri)
    (same_ids,) = write_fragments(data, uri, fields=ds.manifest.schema, data_storage_version="2.1")
    ds = LanceDataset.commit(uri, LanceOperation.Append([same_ids]), read_version=1)
    assert ds.to_table() == table(7)


def test_concurrent_appends_from_threads(tmp_path: Path) -> None:
    uri = _uri(tmp_path)
    lance_ops.write_dataset(table(1), uri)
    errors: list[BaseException] = []

    def append(start: int) -> None:
        try:
            lance_ops.write_dataset(table(3, start), uri, mode="append")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=append, args=(10 * (i + 1),)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    ds = lance_ops.dataset(uri)
    assert ds.version == 3 and ds.count_rows() == 7
    assert sorted(ds.to_table().column("id").to_pylist()) == [0, 10, 11, 12, 20, 21, 22]


def test_errors_are_typed(tmp_path: Path) -> None:
    uri = _uri(tmp_path)
    with pytest.raises(DatasetNotFoundError):
        lance_ops.dataset(uri)
    ds = lance_ops.write_dataset(table(3), uri)
    with pytest.raises(DatasetAlreadyExistsError):
        lance_ops.write_dataset(table(3), uri)
    with pytest.raises(DatasetNotFoundError):
        lance_ops.dataset(uri, version=5)
    with pytest.raises(UnsupportedFeatureError):
        ds.count_rows(filter="id IN (SELECT 1)")
    with pytest.raises(SchemaError):
        lance_ops.write_dataset(pa.table({"other": [1]}), uri, mode="append")
    with pytest.raises(UnsupportedFeatureError):
        lance_ops.write_dataset(  # legacy files hold no maps
            pa.table({"m": pa.array([[("k", 1)]], pa.map_(pa.string(), pa.int32()))}),
            _uri(tmp_path, "legacy"),
            data_storage_version="legacy",
        )
    with pytest.raises(ValueError, match="mode"):
        lance_ops.write_dataset(table(1), uri, mode="upsert")
    with pytest.raises(ValueError, match="no such column"):
        ds.to_table(columns=["nope"])
    assert isinstance(DatasetNotFoundError("x"), FileNotFoundError)
    assert lance_ops.__version__ == "0.1.0"


@pytest.fixture(scope="module")
def pylance_with_deletions(tmp_path_factory: pytest.TempPathFactory, lance_module) -> str:  # type: ignore[no-untyped-def]
    uri = str(tmp_path_factory.mktemp("deletions") / "ds")
    lance_module.write_dataset(table(200), uri, max_rows_per_file=37)
    lance_module.write_dataset(table(40, 200), uri, mode="append", max_rows_per_file=1000)
    lance_module.dataset(uri).delete("id % 7 = 3 or (id >= 37 and id < 74)")
    return uri


@pytest.mark.interop
@given(
    offset=st.integers(min_value=0, max_value=250),
    limit=st.one_of(st.none(), st.integers(min_value=0, max_value=250)),
    indices=st.lists(st.integers(min_value=0, max_value=174), max_size=30),
)
def test_scans_and_takes_match_pylance(  # type: ignore[no-untyped-def]
    pylance_with_deletions: str, lance_module, offset: int, limit: int | None, indices: list[int]
) -> None:
    theirs = lance_module.dataset(pylance_with_deletions)
    ours = lance_ops.dataset(pylance_with_deletions)
    assert ours.count_rows() == theirs.count_rows() == 175
    assert ours.to_table(offset=offset, limit=limit) == theirs.to_table(offset=offset, limit=limit)
    assert ours.take(indices, columns=["s", "id"]) == theirs.take(indices, columns=["s", "id"])


@pytest.mark.interop
def test_stable_row_ids_big_values_and_pylance_maintenance(tmp_path: Path, lance_module) -> None:  # type: ignore[no-untyped-def]
    uri = _uri(tmp_path)
    big = pa.table({"id": pa.array([0, 1, 2], pa.int64()), "blob": ["x" * 40_000, "", "y" * 33_000]})
    seen: list[ProgressEvent] = []
    lance_ops.write_dataset(
        big, uri, mode="append", enable_stable_row_ids=True, max_rows_per_file=2, progress=seen.append
    )
    assert [
        e.fragment.physical_rows for e in seen if e.fragment is not None and e.fragment.physical_rows
    ] == [2, 1]
    more = pa.table({"id": pa.array([3, 4], pa.int64()), "blob": ["z", "w" * 50_000]})
    lance_ops.write_dataset(more, uri, mode="append")
    theirs = lance_module.dataset(uri)
    assert theirs.has_stable_row_ids and theirs.to_table() == pa.concat_tables([big, more])
    assert theirs.to_table(with_row_id=True).column("_rowid").to_pylist() == [0, 1, 2, 3, 4]
    theirs.delete("id = 1")
    lance_module.dataset(uri).optimize.compact_files(target_rows_per_fragment=100)
    ours = lance_ops.dataset(uri)
    expected = lance_module.dataset(uri).to_table(with_row_id=True)
    assert ours.to_table(with_row_id=True) == expected
    assert ours.to_table(with_row_id=True).column("_rowid").to_pylist() == [0, 2, 3, 4]
    assert ours._take_rows([4, 0]).column("id").to_pylist() == [4, 0]
    assert ours._take_rows([1]).num_rows == 0


@pytest.mark.interop
def test_take_rows_skips_deleted_rows(pylance_history: dict[str, str]) -> None:
    ours = lance_ops.dataset(pylance_history["stable"])
    assert ours._take_rows([13, 0, 2]).column("id").to_pylist() == [13, 0, 2]
    assert ours._take_rows([1, 14, 12, 99]).column("id").to_pylist() == [14]
    assert ours._take_rows([(1 << 32) + 1]).num_rows == 0


@pytest.mark.interop
def test_pylance_commits_fragments_we_wrote(tmp_path: Path, lance_module) -> None:  # type: ignore[no-untyped-def]
    uri = _uri(tmp_path)
    lance_module.write_dataset(table(5), uri)
    ours = write_fragments(table(9, 5), uri, max_rows_per_file=4)
    theirs = [lance_module.FragmentMetadata.from_json(json.dumps(f.to_json())) for f in ours]
    ds = lance_module.LanceDataset.commit(uri, lance_module.LanceOperation.Append(theirs), read_version=1)
    assert ds.version == 2 and ds.to_table() == table(14)
    assert [f.fragment_id for f in ds.get_fragments()] == [0, 1, 2, 3]


@pytest.mark.interop
def test_validate_and_drop_as_pylance(tmp_path: Path) -> None:
    """``validate`` passes on a sound dataset and raises an ``OSError`` for a missing data file, as
    pylance's; ``LanceDataset.drop`` removes the dataset, and a second drop finds nothing."""
    import glob

    import lance

    uri = str(tmp_path / "ds.lance")
    ds = lance_ops.write_dataset(pa.table({"x": list(range(10))}), uri, max_rows_per_file=4)
    ds.delete("x = 3")
    assert lance_ops.dataset(uri).validate() is None
    os.remove(sorted(glob.glob(f"{uri}/data/*.lance"))[0])
    for module in (lance, lance_ops):
        with pytest.raises(OSError):
            module.dataset(uri).validate()
    lance_ops.LanceDataset.drop(uri)
    assert not os.path.exists(uri)
    with pytest.raises(ValueError):
        lance_ops.dataset(uri)
    with pytest.raises(OSError):
        lance_ops.LanceDataset.drop(uri)


@pytest.mark.interop
def test_drop_ignore_not_found_and_non_dataset_roots_as_pylance(tmp_path: Path) -> None:
    """``drop(ignore_not_found=True)`` of nothing returns quietly, without it an ``OSError``; a
    directory holding files but no manifest is refused with a ``ValueError`` and kept, as pylance 14."""
    import lance

    for module in (lance, lance_ops):
        uri = str(tmp_path / f"{module.__name__}.lance")
        module.write_dataset(pa.table({"x": [0]}), uri)
        module.LanceDataset.drop(uri, ignore_not_found=False)
        assert not os.path.exists(uri)
        assert module.LanceDataset.drop(uri, ignore_not_found=True) is None
        with pytest.raises(OSError):
            module.LanceDataset.drop(uri, ignore_not_found=False)
        stray = tmp_path / f"{module.__name__}-stray" / "data"
        stray.mkdir(parents=True)
        (stray / "a.lance").write_bytes(b"x")
        for flag in (None, True):
            with pytest.raises(ValueError):
                module.LanceDataset.drop(str(stray.parent), ignore_not_found=flag)
        assert (stray / "a.lance").exists()


@pytest.mark.interop
def test_commit_lock_guards_every_commit_as_pylance(tmp_path: Path) -> None:
    """``commit_lock(version)`` is entered around each commit (``write_dataset`` and an opened
    dataset's operations, also of a version checked out from it); an error the lock raises is an
    ``OSError`` naming it, in lance-ops as in pylance; pylance reads what was committed under it."""
    import contextlib

    import lance

    from lance_ops.commit import CommitConflictError

    for module in (lance, lance_ops):
        seen: list[int] = []

        @contextlib.contextmanager
        def lock(version: int, seen: list[int] = seen) -> Any:
            seen.append(version)
            yield

        uri = str(tmp_path / f"{module.__name__}.lance")
        module.write_dataset(pa.table({"a": range(10)}), uri, commit_lock=lock)
        ds = module.dataset(uri, commit_lock=lock)
        ds.delete("a < 3")
        ds.checkout_version(1).restore()
        assert seen == [1, 2, 3], module
        assert lance.dataset(uri).count_rows() == 10

        @contextlib.contextmanager
        def refuse(version: int) -> Any:
            raise CommitConflictError()

        @contextlib.contextmanager
        def fail_on_exit(version: int) -> Any:
            try:
                yield
            finally:
                raise KeyError("hello world!")

        with pytest.raises(OSError, match="CommitConflictError"):
            module.write_dataset(
                pa.table({"a": [1]}), str(tmp_path / f"{module.__name__}-3"), commit_lock=refuse
            )
        with pytest.raises(OSError, match="CommitConflictError"):
            module.dataset(uri, commit_lock=refuse).delete("a < 5")
        assert lance.dataset(uri).version == 3
        with pytest.raises(OSError, match="hello world!"):
            module.write_dataset(
                pa.table({"a": [1]}), str(tmp_path / f"{module.__name__}-2"), commit_lock=fail_on_exit
            )


@pytest.mark.interop
@pytest.mark.parametrize("stable_row_ids", [False, True])
def test_take_with_sql_projection_as_pylance(tmp_path: Path, stable_row_ids: bool) -> None:
    """``take`` / ``_take_rows`` with ``columns={"name": "SQL"}`` give pylance's table (names,
    types, values), also over a deletion and for no rows. Virtual columns in an expression, which
    pylance 14 refuses (``_rowid``) or fails on (``_rowaddr``), are computed as in a scan."""
    import lance

    uri = str(tmp_path / "ds.lance")
    data = pa.table({"a": pa.array(range(6), pa.int32()), "b": list("xyzuvw")})
    lance_ops.write_dataset(data, uri, max_rows_per_file=4, enable_stable_row_ids=stable_row_ids)
    lance_ops.dataset(uri).delete("a = 1")
    projection = {"a2": "a * 2", "bup": "UPPER(b)"}
    ours, theirs = lance_ops.dataset(uri), lance.dataset(uri)
    for indices in ([0], [4, 0, 2], []):
        expected = theirs.take(indices, columns=projection)
        assert ours.take(indices, columns=projection) == expected
        assert ours.take(indices, columns=projection).schema == expected.schema
    row_ids = theirs.to_table(columns=[], with_row_id=True).column("_rowid").to_pylist()
    picked = [row_ids[3], row_ids[0]]
    assert ours._take_rows(picked, columns=projection) == theirs._take_rows(picked, columns=projection)
    addresses = ours.to_table(with_row_address=True).column("_rowaddr").to_pylist()
    assert ours.take([4, 0], columns={"next": "_rowaddr + 1"}).column("next").to_pylist() == [
        addresses[4] + 1,
        addresses[0] + 1,
    ]
    with pytest.raises(FieldNotFoundError):
        ours.take([0], columns={"x": "nope + 1"})


@pytest.mark.interop
def test_create_index_takes_commit_options(tmp_path: Path) -> None:
    """``create_scalar_index`` / ``create_index`` take ``commit=CommitOptions(...)`` like the other
    mutating methods: the message and properties land in the transactions pylance reads."""
    import lance

    uri = str(tmp_path / "ds.lance")
    vectors = pa.FixedSizeListArray.from_arrays(pa.array(np.arange(1024, dtype=np.float32) / 7), 4)
    ds = lance_ops.write_dataset(pa.table({"id": range(256), "v": vectors}), uri)
    commit = lance_ops.CommitOptions(commit_message="index it", transaction_properties={"by": "test"})
    ds.create_scalar_index("id", "BTREE", commit=commit)
    ds.create_index("v", "IVF_FLAT", num_partitions=2, commit=commit)
    theirs = lance.dataset(uri)
    assert theirs.version == 3
    assert {i.name for i in theirs.describe_indices()} == {"id_idx", "v_idx"}
    for version in (2, 3):
        properties = theirs.read_transaction(version).transaction_properties
        assert properties == {"by": "test", "__lance_commit_message": "index it"}


@pytest.mark.interop
def test_commit_batch_appends_as_pylance(tmp_path: Path) -> None:
    """``commit_batch`` of two appends makes one version holding both, with pylance 14's merged
    ``Append`` (fragments in order, the first read version, no properties); pylance reads the
    result and commits a batch on top of ours; anything but appends, or nothing, is refused."""
    import lance

    uri = str(tmp_path / "ds.lance")
    data = [pa.table({"a": range(i * 10, i * 10 + 10)}) for i in range(5)]
    ds = lance_ops.write_dataset(data[0], uri)
    frags = [write_fragments(data[i], uri) for i in (1, 2)]
    txns = [
        lance_ops.Transaction(1, LanceOperation.Append(frags[0]), transaction_properties={"k": "v"}),
        lance_ops.Transaction(7, LanceOperation.Append(frags[1])),
    ]
    result = LanceDataset.commit_batch(ds, txns)
    assert result["dataset"].version == 2
    merged = result["merged"]
    assert merged.read_version == 1 and merged.operation.fragments == frags[0] + frags[1]
    assert isinstance(merged.operation, LanceOperation.Append)
    assert dict(merged.transaction_properties) == {}
    theirs = lance.dataset(uri)
    assert theirs.version == 2 and len(theirs.get_fragments()) == 3
    assert theirs.to_table() == pa.concat_tables(data[:3])
    assert isinstance(theirs.read_transaction(2).operation, lance.LanceOperation.Append)
    # pylance commits a batch after ours, and we read it
    theirs_frags = [lance.fragment.write_fragments(data[i], theirs) for i in (3, 4)]
    lance.LanceDataset.commit_batch(
        theirs, [lance.Transaction(2, lance.LanceOperation.Append(f)) for f in theirs_frags]
    )
    assert lance_ops.dataset(uri).to_table() == pa.concat_tables(data)
    for bad in ([], [lance_ops.Transaction(3, LanceOperation.Delete([], [0], "a < 3"))]):
        with pytest.raises(OSError, match="No transactions|Only append"):
            LanceDataset.commit_batch(uri, bad)
    assert lance_ops.dataset(uri).version == 3
