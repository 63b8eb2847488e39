"""Empty struct columns (``struct<>``): files byte for byte as pylance 14 writes them (2.0: a
struct column of its own; 2.1 / 2.2: a leaf column of constant pages without buffers), read both
ways, in files and datasets; nulls and lists above them refused as pylance refuses them."""

from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa
import pytest
from lance.file import LanceFileReader as PylanceFileReader
from lance.file import LanceFileWriter as PylanceFileWriter

import lance_ops
from lance_ops.errors import UnsupportedFeatureError
from lance_ops.file import LanceFileReader, LanceFileWriter

EMPTY = pa.struct([])
VERSIONS = ("2.0", "2.1", "2.2")


def _cases(rows: int) -> dict[str, pa.Table]:
    return {
        "top": pa.table({"a": pa.array(range(rows), pa.int32()), "e": pa.array([{}] * rows, EMPTY)}),
        "not_null": pa.Table.from_arrays(
            [pa.array([{}] * rows, EMPTY)], schema=pa.schema([pa.field("e", EMPTY, nullable=False)])
        ),
        "nested": pa.table(
            {
                "n": pa.array(
                    [{"x": i, "e": {}} for i in range(rows)], pa.struct([("x", pa.int32()), ("e", EMPTY)])
                )
            }
        ),
        "nested_only": pa.table({"n": pa.array([{"e": {}}] * rows, pa.struct([("e", EMPTY)]))}),
    }


CASES = [(v, rows, name) for v in VERSIONS for rows in (0, 1, 5000) for name in _cases(0)]


@pytest.mark.parametrize(("version", "rows", "name"), CASES)
def test_files_match_pylance_both_ways(version: str, rows: int, name: str, tmp_path: Path) -> None:
    table = _cases(rows)[name]
    theirs, ours = tmp_path / "theirs.lance", tmp_path / "ours.lance"
    with PylanceFileWriter(str(theirs), table.schema, version=version) as writer:
        writer.write_batch(table)
    with LanceFileWriter(str(ours), table.schema, version=version, page_statistics=False) as writer:
        writer.write_batch(table)
    assert ours.read_bytes() == theirs.read_bytes()
    assert LanceFileReader(str(theirs)).read_all().to_table().equals(table)
    assert PylanceFileReader(str(ours)).read_all().to_table().equals(table)
    with LanceFileWriter(str(ours), table.schema, version=version) as writer:  # page statistics on
        writer.write_batch(table)
    assert PylanceFileReader(str(ours)).read_all().to_table().equals(table)
    if rows:
        taken = LanceFileReader(str(ours)).take_rows([rows - 1, 0]).to_table()
        assert taken.equals(table.take([rows - 1, 0]))


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    "column",
    [
        pa.array([{}, None], EMPTY),
        pa.array([{"e": {}}, None], pa.struct([("e", EMPTY)])),
        pa.array([[{}], []], pa.list_(EMPTY)),
    ],
    ids=["null", "null_parent", "in_list"],
)
def test_refused_like_pylance(version: str, column: pa.Array, tmp_path: Path) -> None:
    table = pa.table({"c": column})
    theirs, ours = tmp_path / "theirs.lance", tmp_path / "ours.lance"
    if version == "2.0" and pa.types.is_list(column.type):
        # 2.0 keeps lists of empty structs (offsets and a struct column), both ways
        for writer_class in (PylanceFileWriter, LanceFileWriter):
            path = theirs if writer_class is PylanceFileWriter else ours
            with writer_class(str(path), table.schema, version=version) as writer:
                writer.write_batch(table)
        assert LanceFileReader(str(theirs)).read_all().to_table().equals(table)
        assert PylanceFileReader(str(ours)).read_all().to_table().equals(table)
        return
    with pytest.raises((ValueError, OSError)):
        with PylanceFileWriter(str(theirs), table.schema, version=version) as writer:
            writer.write_batch(table)
    with pytest.raises(UnsupportedFeatureError):
        with LanceFileWriter(str(ours), table.schema, version=version) as writer:
            writer.write_batch(table)
    assert not ours.exists()


def test_datasets_both_ways(tmp_path: Path) -> None:
    """pylance's test_empty_structs, both ways, and a history continued by both. (pylance 14
    panics reading a dataset with an empty struct inside a struct, which lance-ops reads: the
    files of such a column are checked above.)"""
    schema = pa.schema([pa.field("id", pa.int32()), pa.field("empties", EMPTY)])
    table = pa.table({"id": [0, 1, 2], "empties": [{}] * 3}, schema=schema)
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    lance_ops.write_dataset(table, ours)
    lance.write_dataset(table, theirs)
    for uri in (ours, theirs):
        assert lance.dataset(uri).take([2, 0, 1]) == table.take([2, 0, 1])
        assert lance_ops.dataset(uri).take([2, 0, 1]) == table.take([2, 0, 1])
        lance_ops.write_dataset(table, uri, mode="append")
        lance.write_dataset(table, uri, mode="append")
        lance_ops.dataset(uri).optimize.compact_files()
        expected = pa.concat_tables([table] * 3)
        assert lance.dataset(uri).to_table().equals(expected)
        assert lance_ops.dataset(uri).to_table().equals(expected)
        assert lance_ops.dataset(uri).to_table(columns=["empties"], filter="id > 0").num_rows == 6
    nested = pa.table({"n": pa.array([{"x": 1, "e": {}}], pa.struct([("x", pa.int32()), ("e", EMPTY)]))})
    lance_ops.write_dataset(nested, str(tmp_path / "nested"))
    assert lance_ops.dataset(str(tmp_path / "nested")).to_table().equals(nested)
    opened = lance.dataset(str(tmp_path / "nested"))  # pylance opens it (its scan panics)
    assert (opened.schema, opened.count_rows()) == (nested.schema, 1)


def test_sibling_after_an_empty_struct(tmp_path: Path) -> None:
    """A struct field after an empty struct sibling: pylance 14 writes the file as we do but
    reads the later field back as nulls; lance-ops reads it."""
    table = pa.table(
        {"n": pa.array([{"e": {}, "x": "a"}] * 3, pa.struct([("e", EMPTY), ("x", pa.string())]))}
    )
    theirs, ours = tmp_path / "theirs.lance", tmp_path / "ours.lance"
    with PylanceFileWriter(str(theirs), table.schema) as writer:
        writer.write_batch(table)
    with LanceFileWriter(str(ours), table.schema, page_statistics=False) as writer:
        writer.write_batch(table)
    assert ours.read_bytes() == theirs.read_bytes()
    assert LanceFileReader(str(theirs)).read_all().to_table().equals(table)
    assert PylanceFileReader(str(theirs)).read_all().to_table().column("n").to_pylist()[0] == {
        "e": {},
        "x": None,
    }
