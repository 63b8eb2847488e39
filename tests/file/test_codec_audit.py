"""Cases an acceptance audit against pylance 14 found outside the codec corpus.

Each test states pylance's behaviour on the case (it writes it / refuses it / cannot read back
its own file) and checks we match it, or refuse where pylance would write a file it rejects.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import lance_ops
from lance_ops._proto import file_pb2
from lance_ops.errors import LanceOpsError, SchemaError, UnsupportedFeatureError
from lance_ops.file import LanceFileReader, LanceFileWriter
from lance_ops.file.format import read_tail
from lance_ops.io import object_store

pytestmark = pytest.mark.interop
lance = pytest.importorskip("lance")
lance_file = pytest.importorskip("lance.file")


def _table(array: pa.Array, metadata: dict[str, str] | None = None) -> pa.Table:
    field = pa.field("c", array.type, metadata=metadata)
    return pa.Table.from_arrays([array], schema=pa.schema([field]))


def _write(writer_class: Any, path: Path, table: pa.Table, version: str, batches: int = 1) -> None:
    paged = {"max_page_bytes": 4096, "data_cache_bytes": 4096} if batches > 1 else {}
    with writer_class(str(path), table.schema, version=version, **paged) as writer:
        step = max(1, -(-table.num_rows // batches))
        for start in range(0, table.num_rows, step):
            writer.write_batch(table.slice(start, step))


def _pylance_writes(table: pa.Table, path: Path, version: str) -> bool:
    try:
        _write(lance_file.LanceFileWriter, path, table, version)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException:  # pylance's Rust panics surface as a BaseException
        return False
    return True


def _pylance_reads(path: Path) -> pa.Table | None:
    try:
        return lance_file.LanceFileReader(str(path)).read_all().to_table()
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException:
        return None


def _dictionary(n: int, index_type: pa.DataType, distinct: int = 40, seed: int = 0) -> pa.DictionaryArray:
    rng = np.random.default_rng(seed)
    keys = rng.integers(0, distinct, n)
    mask = np.arange(n) % 7 == 3
    values = pa.array([f"v{seed}-{i:03d}" for i in range(distinct)])
    return pa.DictionaryArray.from_arrays(pa.array(keys, index_type, mask=mask), values)


def _file_fields(path: str | Path) -> list[file_pb2.Field]:
    store, where = object_store(str(path), None)
    return list(read_tail(store, where).descriptor.schema.fields)


# --------------------------------------------------------------------------- encoding options


@pytest.mark.parametrize("version", ["2.0", "2.1", "2.2"])
def test_values_pylance_ignores_neither_stop_our_reader_nor_our_writer(tmp_path: Path, version: str) -> None:
    """pylance 14 writes fields whose lance-encoding keys hold values it cannot parse (keeping
    its defaults); we read its file and write the same table, which pylance reads back."""
    metadata = {
        "lance-encoding:dictionary": "true",
        "lance-encoding:bss": "maybe",
        "lance-encoding:compression-level": "high",
        "lance-encoding:rle-threshold": "x",
        "lance-encoding:dict-divisor": "two",
    }
    table = _table(pa.array(["a", "bb", None, "a"] * 300), metadata)
    assert _pylance_writes(table, tmp_path / "p.lance", version)
    assert LanceFileReader(tmp_path / "p.lance").read_all().to_table().equals(table)
    _write(LanceFileWriter, tmp_path / "o.lance", table, version)
    back = _pylance_reads(tmp_path / "o.lance")
    assert back is not None and back.equals(table)


# --------------------------------------------------------------------------- blob / packed markers


NESTED = {
    "struct": pa.array([{"a": 1, "b": "x"}, {"a": 2, "b": "y"}] * 50),
    "list": pa.array([[1, 2], [], [3]] * 50, pa.list_(pa.int32())),
    "map": pa.array([[("k", 1)], []] * 50, pa.map_(pa.string(), pa.int32())),
    "struct<list<string>>": pa.array([{"l": ["a", "b"]}, {"l": []}] * 50),
}


@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("name", list(NESTED))
def test_blob_marker_on_nested_field_refused_like_pylance(tmp_path: Path, version: str, name: str) -> None:
    """pylance refuses lance-encoding:blob on a list/struct/map ("Blob encoding is not available");
    we used to write a struct so marked, which pylance's reader then misread."""
    if name == "map" and version == "2.1":
        pytest.skip("maps need 2.2")
    table = _table(NESTED[name], {"lance-encoding:blob": "true"})
    assert not _pylance_writes(table, tmp_path / "p.lance", version)
    with pytest.raises(SchemaError, match="blob field 'c' must be large_binary"):
        _write(LanceFileWriter, tmp_path / "o.lance", table, version)
    assert not (tmp_path / "o.lance").exists()


@pytest.mark.parametrize(
    ("name", "marker"),
    [("list", "blob"), ("list", "packed"), ("struct<list<string>>", "blob")],
)
def test_2_0_markers_pylance_cannot_read_back_are_refused(tmp_path: Path, name: str, marker: str) -> None:
    """pylance 14 writes a 2.0 list marked blob/packed (or a struct marked blob) but cannot read
    its own file back; we refuse to write one rather than produce a file pylance rejects."""
    table = _table(NESTED[name], {f"lance-encoding:{marker}": "true"})
    assert _pylance_writes(table, tmp_path / "p.lance", "2.0")
    assert _pylance_reads(tmp_path / "p.lance") is None
    # We still read pylance's file.
    assert LanceFileReader(tmp_path / "p.lance").read_all().to_table().equals(table)
    with pytest.raises(UnsupportedFeatureError, match=f"marked lance-encoding:{marker}"):
        _write(LanceFileWriter, tmp_path / "o.lance", table, "2.0")


def test_2_0_packed_struct_with_nulls_refused_like_pylance(tmp_path: Path) -> None:
    """2.0 keeps no struct validity, packed or not: pylance refuses, and so do we (we used to
    write a file pylance read back without the nulls)."""
    array = pa.array([{"a": 1, "b": 2.0}, None, {"a": 3, "b": 4.0}] * 10)
    table = _table(array, {"lance-encoding:packed": "true"})
    assert not _pylance_writes(table, tmp_path / "p.lance", "2.0")
    with pytest.raises(UnsupportedFeatureError, match="does not encode struct validity"):
        _write(LanceFileWriter, tmp_path / "o.lance", table, "2.0")


def test_2_0_blob_marked_dictionary_is_a_plain_dictionary(tmp_path: Path) -> None:
    """pylance's 2.0 writer ignores the blob marker on a dictionary column; both ways read."""
    table = _table(_dictionary(300, pa.int32()), {"lance-encoding:blob": "true"})
    assert _pylance_writes(table, tmp_path / "p.lance", "2.0")
    ours = LanceFileReader(tmp_path / "p.lance").read_all().to_table()
    assert ours.column(0).type == table.column(0).type
    assert ours.to_pylist() == table.to_pylist()
    _write(LanceFileWriter, tmp_path / "o.lance", table, "2.0")
    back = _pylance_reads(tmp_path / "o.lance")
    assert back is not None and back.to_pylist() == table.to_pylist()


# --------------------------------------------------------------------------- 2.0 dictionaries


@pytest.mark.parametrize("index_type", [pa.int8(), pa.int16(), pa.int32(), pa.uint32()])
def test_2_0_dictionary_over_several_pages(tmp_path: Path, index_type: pa.DataType) -> None:
    """Each 2.0 page carries its own dictionary; pylance gives a chunk per page, we join them
    (pyarrow cannot unify dictionaries holding the null 2.0 empty entries, which failed)."""
    # pylance refuses joined dictionaries that outgrow the keys
    distinct = 40 if index_type == pa.int8() else 400
    parts = [_dictionary(2000, index_type, distinct, seed) for seed in range(3)]
    table = pa.Table.from_batches([pa.record_batch([part], names=["c"]) for part in parts])
    path = tmp_path / "p.lance"
    with lance_file.LanceFileWriter(str(path), table.schema, version="2.0", max_page_bytes=4096) as writer:
        for batch in table.to_batches():
            writer.write_batch(batch)
    assert len(lance_file.LanceFileReader(str(path)).read_all().to_table().column(0).chunks) > 1
    reader = LanceFileReader(path)
    got = reader.read_all().to_table()
    assert got.column(0).type == table.schema.field("c").type and got.to_pylist() == table.to_pylist()
    assert reader.read_range(1990, 2020).to_table().to_pylist() == table.slice(1990, 2020).to_pylist()
    picks = [5999, 0, 2000, 1999, 4000, 3]
    assert reader.take_rows(picks).to_table().to_pylist() == table.take(picks).to_pylist()


# --------------------------------------------------------------------------- dataset field messages


def test_lance_fields_store_a_datasets_field_messages(tmp_path: Path) -> None:
    """pylance stores a dataset's own field messages (ids, the empty ``dictionary`` marker) in its
    data files; ``LanceFileWriter(lance_fields=...)`` stores them byte for byte."""
    table = pa.table(
        {
            "a": pa.array([1, 2, 3]),
            "s": pa.array([{"x": 1, "y": "a"}] * 3),
            "d": pa.array(["a", "b", "a"]).dictionary_encode(),
        }
    )
    uri = str(tmp_path / "ds")
    dataset = lance.write_dataset(table, uri, data_storage_version="2.1")
    dataset.add_columns({"b": "a * 2"})
    manifest_fields = [f.SerializeToString() for f in lance_ops.dataset(uri).manifest.schema.to_pb()]
    data_files = sorted((tmp_path / "ds" / "data").glob("*.lance"), key=lambda p: len(_file_fields(p)))
    added, first = (_file_fields(p) for p in data_files)
    assert [f.id for f in added] == [5]  # the dataset's id, not 0
    assert [f.SerializeToString() for f in first + added] == manifest_fields
    assert first[4].HasField("dictionary")

    for pylance_fields, columns in ((first, table), (added, pa.table({"b": pa.array([2, 4, 6])}))):
        path = tmp_path / f"ours-{pylance_fields[0].id}.lance"
        with LanceFileWriter(str(path), columns.schema, version="2.1", lance_fields=pylance_fields) as writer:
            writer.write_batch(columns)
        assert [f.SerializeToString() for f in _file_fields(path)] == [
            f.SerializeToString() for f in pylance_fields
        ]
        assert LanceFileReader(path).read_all().to_table().equals(columns)
        back = _pylance_reads(path)
        assert back is not None and back.equals(columns)

    # Without lance_fields: numbered from 0 and no marker, like pylance's own file writer.
    plain = tmp_path / "plain.lance"
    with LanceFileWriter(str(plain), table.schema, version="2.1") as writer:
        writer.write_batch(table)
    with lance_file.LanceFileWriter(str(tmp_path / "p.lance"), table.schema, version="2.1") as writer:
        writer.write_batch(table)
    assert [f.SerializeToString() for f in _file_fields(plain)] == [
        f.SerializeToString() for f in _file_fields(tmp_path / "p.lance")
    ]


def test_lance_fields_must_describe_the_schema(tmp_path: Path) -> None:
    schema = pa.schema([pa.field("a", pa.int64()), pa.field("s", pa.struct([("x", pa.int32())]))])
    good = [
        file_pb2.Field(name="a", id=7, parent_id=-1, logical_type="int64", nullable=True),
        file_pb2.Field(name="s", id=8, parent_id=-1, logical_type="struct", nullable=True),
        file_pb2.Field(name="x", id=9, parent_id=8, logical_type="int32", nullable=True),
    ]
    wrong_parent = [*good[:2], file_pb2.Field(name="x", id=9, parent_id=7, logical_type="int32")]
    wrong_type = [file_pb2.Field(name="a", id=7, parent_id=-1, logical_type="int32"), *good[1:]]
    for bad in (good[:2], wrong_parent, wrong_type):
        with pytest.raises(SchemaError):
            LanceFileWriter(str(tmp_path / "bad.lance"), schema, lance_fields=bad)
        assert not (tmp_path / "bad.lance").exists()
    with LanceFileWriter(str(tmp_path / "good.lance"), schema, lance_fields=good) as writer:
        writer.write_batch(pa.table({"a": [1], "s": [{"x": 2}]}, schema=schema))
    assert [(f.id, f.parent_id) for f in _file_fields(tmp_path / "good.lance")] == [(7, -1), (8, -1), (9, 8)]
    assert isinstance(SchemaError("x"), LanceOpsError)


PACKED_LIST_CASES = {
    "list<struct<a, b>>": pa.array(
        [[{"a": 1, "b": 2}], []] * 10, pa.list_(pa.struct([("a", pa.int32()), ("b", pa.int32())]))
    ),
    "list<list<struct<a, b>>>": pa.array(
        [[[{"a": 1, "b": 2}]], []] * 10, pa.list_(pa.list_(pa.struct([("a", pa.int32()), ("b", pa.int32())])))
    ),
    "map<string, int32>": pa.array([[("k", 1)], []] * 10, pa.map_(pa.string(), pa.int32())),
}


@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("name", list(PACKED_LIST_CASES))
def test_packed_list_of_structs_refused_pylance_cannot_read_it(
    tmp_path: Path, version: str, name: str
) -> None:
    """``packed`` on a list (or map) holding a struct of several children: pylance writes a
    column per child but reads back expecting one; we refuse once rows arrive."""
    if name.startswith("map") and version == "2.1":
        pytest.skip("maps need 2.2")
    table = _table(PACKED_LIST_CASES[name], {"lance-encoding:packed": "true"})
    assert _pylance_writes(table, tmp_path / "p.lance", version)
    assert _pylance_reads(tmp_path / "p.lance") is None
    assert LanceFileReader(tmp_path / "p.lance").read_all().to_table().equals(table)
    with pytest.raises(UnsupportedFeatureError, match="marked lance-encoding:packed holds a struct"):
        _write(LanceFileWriter, tmp_path / "o.lance", table, version)
    assert not (tmp_path / "o.lance").exists()
    # Without rows pylance writes and reads such a file back; so do we.
    empty = table.slice(0, 0)
    _write(LanceFileWriter, tmp_path / "empty.lance", empty, version)
    back = _pylance_reads(tmp_path / "empty.lance")
    assert back is not None and back.equals(empty)
    # One struct child: one column either way, pylance reads it (and so is not refused).
    single = _table(
        pa.array([[{"a": 1}], []] * 10, pa.list_(pa.struct([("a", pa.int32())]))), table.schema[0].metadata
    )
    _write(LanceFileWriter, tmp_path / "single.lance", single, version)
    back = _pylance_reads(tmp_path / "single.lance")
    assert back is not None and back.equals(single)


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_packed_struct_with_dictionary_child_refused_like_pylance(tmp_path: Path, version: str) -> None:
    """pylance refuses to pack a dictionary child; we used to write a file it could not read."""
    array = pa.StructArray.from_arrays(
        [_dictionary(50, pa.int8()).fill_null("v0-000"), pa.array(range(50), pa.int32())], names=["d", "i"]
    )
    table = _table(array, {"lance-encoding:packed": "true"})
    assert not _pylance_writes(table, tmp_path / "p.lance", version)
    with pytest.raises(UnsupportedFeatureError, match="dictionary-typed children"):
        _write(LanceFileWriter, tmp_path / "o.lance", table, version)


@pytest.mark.parametrize("version", ["2.0", "2.1", "2.2"])
def test_large_binary_marked_packed_and_blob_is_a_blob_column(tmp_path: Path, version: str) -> None:
    """``packed`` means nothing on a large_binary field: pylance stores it as blobs (we used to
    take packed+blob for a blob v2 description, and refused the 70 KB values in a mini-block)."""
    rng = np.random.default_rng(3)
    array = pa.array([None if i % 3 == 1 else rng.bytes(70_000) for i in range(6)], pa.large_binary())
    table = _table(
        array,
        {
            "lance-encoding:packed": "true",
            "lance-encoding:blob": "true",
            "lance-encoding:structural-encoding": "miniblock",
        },
    )
    assert _pylance_writes(table, tmp_path / "p.lance", version)
    assert LanceFileReader(tmp_path / "p.lance").read_all().to_table().equals(table)
    _write(LanceFileWriter, tmp_path / "o.lance", table, version)
    back = _pylance_reads(tmp_path / "o.lance")
    assert back is not None and back.equals(table)
    assert LanceFileReader(tmp_path / "o.lance").take_rows([5, 0]).to_table().equals(table.take([5, 0]))


def test_user_struct_marked_packed_and_blob_numbers_its_children(tmp_path: Path) -> None:
    """Only a lance.blob.v2 description (kind, position, size, blob_id, blob_uri) keeps its
    children at id -1; pylance numbers any other struct's children (and otherwise cannot read
    our file)."""
    array = pa.array([{"a": 1, "b": 2.5}] * 3, pa.struct([("a", pa.int32()), ("b", pa.float64())]))
    table = _table(array, {"lance-encoding:packed": "true", "lance-encoding:blob": "true"})
    assert _pylance_writes(table, tmp_path / "p.lance", "2.0")
    _write(LanceFileWriter, tmp_path / "o.lance", table, "2.0")
    assert _file_fields(tmp_path / "o.lance") == _file_fields(tmp_path / "p.lance")
    back = _pylance_reads(tmp_path / "o.lance")
    assert back is not None and back.equals(table)
