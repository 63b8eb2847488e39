"""Writing legacy (0.1) files and datasets (``LegacyFileWriter``, ``data_storage_version="legacy"``).

* The golden 0.1 files pylance 14 wrote (``tests/data/files/0.1``), read and written again with
  the same field ids and batch sizes, give the same data pages and page table, byte for byte.
* Datasets we write legacy are read by pylance with the data ours reads (edge shapes: 0 / 1 /
  1023 / 1024 / 1025 rows, all-null, empty lists, nested lists and structs, long strings), and
  pylance appends to them; pylance's legacy datasets take our appends, compaction and
  ``add_columns``, and stay legacy.
* Types 0.1 files cannot hold are refused with ``UnsupportedFeatureError``, as pylance refuses them.
"""

from __future__ import annotations

import struct
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lance_ops
from lance_ops._proto import file_legacy_pb2 as pbl
from lance_ops.errors import UnsupportedFeatureError
from lance_ops.file import LanceFileReader, LanceFileWriter
from lance_ops.file.legacy_v0_1 import LegacyFileReader, LegacyFileWriter
from lance_ops.fragment import write_fragments
from lance_ops.io import MemoryStore
from tests.file.test_legacy_v0_1 import BATCHES, LEGACY_DIR, NAMES

STRUCT = pa.struct([("x", pa.int16()), ("y", pa.string()), ("z", pa.list_(pa.float64()))])


def _data_region(path: Path) -> bytes:
    """A 0.1 file's bytes up to the end of its page table (pages and page table)."""
    data = path.read_bytes()
    (position,) = struct.unpack("<Q", data[-16:-8])
    (size,) = struct.unpack("<I", data[position : position + 4])
    metadata = pbl.Metadata.FromString(data[position + 4 : position + 4 + size])
    num_fields, num_batches = (
        len(LanceFileReader(str(path))._legacy.pages.entries),
        len(metadata.batch_offsets) - 1,
    )
    return data[: metadata.page_table_position + 16 * num_fields * num_batches]


@pytest.mark.parametrize("name", NAMES)
def test_rewriting_pylance_golden_files_gives_the_same_pages(name: str, tmp_path: Path) -> None:
    source = LEGACY_DIR / f"{name}.lance"
    reader = LanceFileReader(str(source))
    assert isinstance(reader, LegacyFileReader)
    table = reader.read_all().to_table()
    out = tmp_path / "again.lance"
    fields = list(reader._legacy.fields)
    with LegacyFileWriter(
        str(out), reader.schema, max_rows_per_group=BATCHES[name][0], lance_fields=fields
    ) as w:
        for batch in table.to_batches(max_chunksize=37):
            w.write_batch(batch)
    assert _data_region(out) == _data_region(source)
    again = LanceFileReader(str(out))
    assert again.read_all().to_table().equals(table)
    assert again._legacy.batch_offsets.tolist() == np.cumsum([0, *BATCHES[name]]).tolist()
    assert (struct.unpack("<HH4s", out.read_bytes()[-8:])) == (0, 2, b"LANC")


def _edge_table(rows: int) -> pa.Table:
    ints = pa.array([None if i % 7 == 3 else i for i in range(rows)], pa.int64())
    strings = pa.array([None if i % 5 == 0 else "s" * (i % 13 + 1) for i in range(rows)])
    lists = pa.array([None if i % 4 == 1 else list(range(i % 3)) for i in range(rows)], pa.list_(pa.int32()))
    nested = pa.array(
        [[[i % 100, None], []] if i % 2 else [] for i in range(rows)], pa.large_list(pa.list_(pa.int8()))
    )
    structs = pa.array(
        [None if i % 6 == 2 else {"x": i, "y": str(i), "z": [float(i)] * (i % 3)} for i in range(rows)],
        STRUCT,
    )
    return pa.table(
        {
            "i": ints,
            "s": strings,
            "l": lists,
            "n": nested,
            "st": structs,
            "b": pa.array([i % 3 == 0 for i in range(rows)]),
            "v": pa.array([[float(i), 1.0] for i in range(rows)], pa.list_(pa.float32(), 2)),
            "all_null": pa.nulls(rows, pa.float64()),
            "nothing": pa.nulls(rows),
            "ls": pa.array(
                [[{"a": i, "b": None if i % 2 else "x"}] * (i % 3) if i % 5 else None for i in range(rows)],
                pa.list_(pa.struct([("a", pa.int32()), ("b", pa.string())])),
            ),
            "big": pa.array(
                [b"\x01" * 40000 if i % 500 == 0 else b"b" for i in range(rows)], pa.large_binary()
            ),
        }
    )


def _legacy_reads(table: pa.Table) -> pa.Table:
    """``table`` as a 0.1 file gives it back: nulls are not stored (fixed-width nulls read as the
    zero pyarrow put under them, null lists as empty, null structs as their children, empty
    strings of nullable fields as null)."""
    arrays = []
    for column in table.columns:
        values = column.to_pylist()
        arrays.append(pa.array([_legacy_value(v, column.type) for v in values], column.type))
    return pa.table(arrays, names=table.column_names)


def _legacy_value(value: object, data_type: pa.DataType) -> object:
    if pa.types.is_null(data_type):
        return None
    if pa.types.is_struct(data_type):
        value = value or {}
        return {f.name: _legacy_value(value.get(f.name), f.type) for f in data_type}  # type: ignore[union-attr]
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type):
        return [_legacy_value(v, data_type.value_type) for v in value or []]  # type: ignore[union-attr]
    if pa.types.is_fixed_size_list(data_type):
        return [_legacy_value(v, data_type.value_type) for v in value or [None] * data_type.list_size]  # type: ignore[union-attr]
    if pa.types.is_string(data_type) or pa.types.is_large_binary(data_type):
        return value or None
    if value is None:
        return False if pa.types.is_boolean(data_type) else 0
    return value


@pytest.mark.parametrize("rows", [1, 1023, 1024, 1025, 2049])
def test_we_write_pylance_reads_edge_shapes(rows: int, tmp_path: Path) -> None:
    table = _edge_table(rows)
    uri = str(tmp_path / "ours.lance")
    lance_ops.write_dataset(table, uri, data_storage_version="legacy", max_rows_per_group=1024)
    ours = lance_ops.dataset(uri).to_table()
    theirs = lance.dataset(uri).to_table()
    assert lance.dataset(uri).data_storage_version == "0.1"
    assert ours.equals(theirs)
    assert ours.equals(_legacy_reads(table))
    fragment = lance.dataset(uri).get_fragments()[0].metadata
    (data_file,) = fragment.files
    assert (data_file.file_major_version, data_file.file_minor_version) == (0, 2)
    assert data_file.column_indices == []


def test_zero_rows_write_no_file(tmp_path: Path) -> None:
    uri = str(tmp_path / "empty.lance")
    lance_ops.write_dataset(_edge_table(0), uri, data_storage_version="0.1")
    assert lance.dataset(uri).data_storage_version == "0.1"
    assert lance.dataset(uri).count_rows() == 0
    assert lance_ops.dataset(uri).get_fragments() == []


@settings(max_examples=15, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.text(max_size=5)), max_size=40),
    st.integers(1, 9),
    st.integers(0, 5),
)
def test_sliced_batches_round_trip(values: list[str | None], group: int, cut: int) -> None:
    """Batches of any offset (sliced arrays) and any group size read back as written."""
    table = pa.table(
        {
            "s": pa.array(values, pa.string()),
            "b": pa.array([v is None for v in values]),
            "l": pa.array([[len(v)] if v else None for v in values], pa.list_(pa.int16())),
        }
    ).slice(min(cut, len(values)))
    store = MemoryStore()
    with LegacyFileWriter("f.lance", table.schema, max_rows_per_group=group, store=store) as writer:
        for batch in table.to_batches(max_chunksize=3):
            writer.write_batch(batch)
    read = LanceFileReader("f.lance", store=store).read_all().to_table()
    assert read.equals(_legacy_reads(table))


def test_pylance_appends_to_ours_and_we_continue(tmp_path: Path) -> None:
    uri = str(tmp_path / "t.lance")
    table = _edge_table(300)
    lance_ops.write_dataset(table, uri, use_legacy_format=True, max_rows_per_group=100)
    lance.write_dataset(table, uri, mode="append")
    lance_ops.write_dataset(table, uri, mode="append")
    expected = pa.concat_tables([_legacy_reads(table)] * 3)
    assert lance_ops.dataset(uri).to_table().equals(expected)
    assert lance.dataset(uri).to_table().equals(expected)
    files = [f.metadata.files[0] for f in lance.dataset(uri).get_fragments()]
    assert {(f.file_major_version, f.file_minor_version) for f in files} == {(0, 2)}


def test_pylance_legacy_dataset_stays_legacy(tmp_path: Path) -> None:
    """A legacy dataset pylance made: our appends, compaction and add_columns write 0.1 files."""
    uri = str(tmp_path / "p.lance")
    table = _edge_table(50)
    lance.write_dataset(table, uri, data_storage_version="legacy")
    lance_ops.write_dataset(table, uri, mode="append")
    ds = lance_ops.dataset(uri)
    ds.optimize.compact_files()
    lance_ops.dataset(uri).add_columns({"twice": "i * 2"})
    lance_ops.dataset(uri).delete("i = 4")
    # twice more: nothing left to compact, the column exists
    assert lance_ops.dataset(uri).optimize.compact_files().fragments_removed == 0
    theirs = lance.dataset(uri)
    assert theirs.data_storage_version == "0.1"
    assert lance_ops.dataset(uri).to_table().equals(theirs.to_table())
    assert theirs.count_rows() == 98
    versions = {
        (f.file_major_version, f.file_minor_version) for g in theirs.get_fragments() for f in g.metadata.files
    }
    assert versions == {(0, 2)}
    assert theirs.to_table(columns=["twice"]).column(0).to_pylist()[:3] == [0, 2, 4]


def test_write_fragments_and_fragment_create_write_legacy(tmp_path: Path) -> None:
    uri = str(tmp_path / "f.lance")
    table = _edge_table(10)
    fragments = write_fragments(table, uri, data_storage_version="legacy")
    lance_ops.LanceDataset.commit(uri, lance_ops.LanceOperation.Overwrite(table.schema, fragments))
    fragment = lance_ops.LanceFragment.create(uri, table, use_legacy_format=True)
    lance_ops.LanceDataset.commit(uri, lance_ops.LanceOperation.Append([fragment]), read_version=1)
    theirs = lance.dataset(uri)
    assert theirs.data_storage_version == "0.1"
    assert theirs.to_table().equals(pa.concat_tables([_legacy_reads(table)] * 2))


@pytest.mark.parametrize(
    "column",
    [
        pa.array([[("a", 1)]], pa.map_(pa.string(), pa.int32())),
        pa.array([{}], pa.struct([])),
        pa.array([["a", "b"]], pa.list_(pa.string(), 2)),
        pa.array([[{"a": 1}]], pa.list_(pa.struct([("a", pa.int32())]), 1)),
    ],
    ids=["map", "empty_struct", "fsl_string", "fsl_struct"],
)
def test_refuses_what_legacy_cannot_hold(column: pa.Array, tmp_path: Path) -> None:
    table = pa.table({"c": column})
    with pytest.raises(UnsupportedFeatureError, match="legacy"):
        lance_ops.write_dataset(table, str(tmp_path / "x.lance"), data_storage_version="legacy")
    with pytest.raises(UnsupportedFeatureError, match="legacy"):
        LegacyFileWriter(str(tmp_path / "x.lance"), table.schema)
    assert not (tmp_path / "x.lance").exists()


def test_a_file_grows_one_dictionary_across_batches(tmp_path: Path) -> None:
    """A file alone grows one dictionary across batches with different dictionaries (datasets:
    tests/file/test_legacy_dictionaries.py)."""
    first = pa.array(["b", "a", None]).dictionary_encode()
    second = pa.DictionaryArray.from_arrays(pa.array([0, 1], pa.int32()), pa.array(["c", "b"]))
    schema = pa.schema([("d", first.type)])
    path = str(tmp_path / "d.lance")
    with LegacyFileWriter(path, schema, max_rows_per_group=3) as writer:
        writer.write_batch(pa.table({"d": first}))
        writer.write_batch(pa.table({"d": second}))
    read = LanceFileReader(path).read_all().to_table().column("d")
    assert read.to_pylist() == ["b", "a", "b", "c", "b"]  # the null key was written as key 0


def test_lance_file_writer_points_to_the_legacy_writer(tmp_path: Path) -> None:
    """As pylance, the 2.x file writer does not write 0.1 files."""
    with pytest.raises(UnsupportedFeatureError, match="LegacyFileWriter"):
        LanceFileWriter(str(tmp_path / "x.lance"), pa.schema([("a", pa.int32())]), version="legacy")
    assert not (tmp_path / "x.lance").exists()


def test_overwrite_with_a_requested_version_switches_the_dataset(tmp_path: Path) -> None:
    """As pylance: an overwrite that names a file version gives the dataset that version (also
    with no rows); appends then follow the dataset, whatever they ask for."""
    uri = str(tmp_path / "s.lance")
    table = pa.table({"a": pa.array(range(10), pa.int64())})
    lance_ops.write_dataset(table, uri)
    lance_ops.write_dataset(table, uri, mode="overwrite", data_storage_version="legacy")
    assert lance.dataset(uri).data_storage_version == "0.1"
    lance_ops.write_dataset(table, uri, mode="append", data_storage_version="stable")
    files = [f.metadata.files[0] for f in lance.dataset(uri).get_fragments()]
    assert [(f.file_major_version, f.file_minor_version) for f in files] == [(0, 2), (0, 2)]
    lance_ops.write_dataset([], uri, schema=table.schema, mode="overwrite", data_storage_version="2.0")
    assert lance.dataset(uri).data_storage_version == "2.0"
    lance_ops.write_dataset(table, uri, mode="append", data_storage_version="legacy")
    assert lance.dataset(uri).get_fragments()[0].metadata.files[0].file_major_version == 2
    lance_ops.write_dataset(table, uri, mode="overwrite")  # no version asked: the dataset's
    assert lance.dataset(uri).data_storage_version == "2.0"
    assert lance.dataset(uri).to_table().equals(table)


def test_extension_types_and_file_limits(tmp_path: Path) -> None:
    """Extension columns are written as their storage (fixed-size lists, fixed-size binary) with
    their names in the field metadata; files roll over at max_rows_per_file."""
    tensors = pa.FixedShapeTensorArray.from_numpy_ndarray(np.arange(24, dtype=np.float32).reshape(6, 2, 2))
    uuids = pa.array([bytes(range(16))] * 6, pa.binary(16)).cast(pa.uuid())
    table = pa.table({"t": tensors, "u": uuids, "i": pa.array(range(6))})
    uri = str(tmp_path / "ext.lance")
    lance_ops.write_dataset(
        table, uri, data_storage_version="legacy", max_rows_per_file=4, max_rows_per_group=3
    )
    theirs = lance.dataset(uri)
    assert len(theirs.get_fragments()) == 2
    assert theirs.to_table().equals(table)
    assert lance_ops.dataset(uri).to_table().equals(table)
