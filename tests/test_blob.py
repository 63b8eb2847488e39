"""Blob columns (``large_binary`` + ``lance-encoding:blob``) in 2.1 / 2.2 files and datasets.

* golden files and 2.1 / 2.2 datasets written by pylance 14.0.2 (``tests/data/datagen_blob.py``) read
  whole, by ranges and by taken rows;
* codec round trips on edge shapes (0 / 1 / 1023-1025 rows, all-null, all-empty, values above
  32 KiB and of several MiB, several pages, blobs inside structs) and a hypothesis property;
* files and datasets we write, read back by pylance (bytes from its file reader, descriptions and
  ``take_blobs`` from its dataset);
* ``take`` reads only the blobs of the rows asked for (the byte ranges the store serves are recorded);
* pylance 2.2 datasets store blobs as ``lance.blob.v2`` (inline, packed and dedicated sidecar
  files, external URIs): read through the dataset;
* errors: ``binary`` blobs, blobs inside lists, descriptions pointing past the end of the file.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lance_ops
from lance_ops.encoding.api import FileVersion
from lance_ops.encoding.field_encoder import make_field_encoder
from lance_ops.errors import CorruptFileError, SchemaError, UnsupportedFeatureError
from lance_ops.file import LanceFileReader, LanceFileWriter
from lance_ops.table.blob import is_blob_v2
from tests.data.golden import DATA_DIR, FILE_VERSIONS, read_expected
from tests.encoding.harness import round_trip

BLOB_DIR = DATA_DIR / "blob"
BLOB = {"lance-encoding:blob": "true"}
VERSIONS = [FileVersion.V2_1, FileVersion.V2_2]
MIB = 1024 * 1024


def blob_field(name: str = "b") -> pa.Field:
    return pa.field(name, pa.large_binary(), metadata=BLOB)


def blob_values(
    n: int, seed: int = 0, *, null_every: int = 5, empty_every: int = 7, big: int = 0
) -> pa.Array:
    """Random values of 1..200 bytes, with nulls, empties and optionally one value of ``big`` bytes."""
    rng = np.random.default_rng(seed)
    values: list[bytes | None] = [rng.bytes(int(k)) for k in rng.integers(1, 200, n)]
    for i in range(0, n, empty_every):
        values[i] = b""
    for i in range(2, n, null_every):
        values[i] = None
    if big and n:
        values[n // 2] = rng.bytes(big)
    return pa.array(values, pa.large_binary())


# --- golden data written by pylance -----------------------------------------------------------------


@pytest.mark.parametrize("version", FILE_VERSIONS)
@pytest.mark.parametrize("name", ["blobs", "empty"])
def test_golden_files(version: str, name: str) -> None:
    expected = read_expected(BLOB_DIR / "expected" / f"{name}.parquet")
    reader = LanceFileReader(str(BLOB_DIR / version / f"{name}.lance"))
    assert reader.metadata().version == version
    assert reader.read_all().to_table().equals(expected)
    n = expected.num_rows
    ranges = [(0, 1), (n // 2 - 3, 7), (n - 5, 5), (0, n)] if n else [(0, 0)]
    for start, count in ranges:
        assert reader.read_range(start, count).to_table().equals(expected.slice(start, count))
    rows = [n - 1, 0, n // 2, 3, 3, 11] if n else []
    assert reader.take_rows(rows).to_table().equals(expected.take(pa.array(rows, pa.int64())))


def test_golden_files_use_blob_pages() -> None:
    reader = LanceFileReader(str(BLOB_DIR / "2.2" / "blobs.lance"))
    columns = reader.metadata().columns
    # id, blob, all_null, s.x, s.b: the three blob columns are blob pages even when all null.
    for index in (1, 2, 4):
        assert all(page.encoding.startswith("blob_layout") for page in columns[index].pages)


@pytest.mark.parametrize("version", FILE_VERSIONS)
def test_golden_datasets(version: str) -> None:
    expected = read_expected(BLOB_DIR / "expected" / f"dataset_{version}.parquet")
    ds = lance_ops.dataset(str(BLOB_DIR / f"dataset_{version}.lance"))
    assert ds.data_storage_version == version
    assert len(ds.get_fragments()) == 2
    field = ds.schema.field("blob")
    if version == "2.1":
        assert field.metadata == {b"lance-encoding:blob": b"true"}
    else:
        assert is_blob_v2(field)
    assert without_extensions(ds.to_table()).equals(expected)
    rows = [99, 0, 61, 59, 3, 50]
    assert without_extensions(ds.take(rows)).equals(expected.take(pa.array(rows)))


def without_extensions(table: pa.Table) -> pa.Table:
    """``table`` with extension columns as their storage (the ``lance.blob.v2`` type is registered
    with pyarrow once pylance is imported)."""
    columns = [
        pa.chunked_array([chunk.storage for chunk in column.chunks], column.type.storage_type)
        if isinstance(column.type, pa.BaseExtensionType)
        else column
        for column in table.columns
    ]
    return pa.table(columns, names=table.column_names)


# --- codec round trips ----------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("n", [1, 1023, 1024, 1025])
def test_round_trip_lengths(version: FileVersion, n: int) -> None:
    array = blob_values(n, seed=n, big=40_000)
    round_trip(
        array,
        version,
        field=blob_field(),
        page_sizes=[n // 3, n // 3] if n > 3 else None,
        slices=[(0, 1), (n // 2 - 2, n // 2 + 2), (n - 3, n)],
        takes=[[0, n - 1, n // 2], list(range(1, n, 97))],
        expect="blob_layout",
    )


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    "values",
    [
        [None] * 10,
        [b""] * 10,
        [b"", None] * 5,
        [b"x"],
        [None],
    ],
    ids=["all-null", "all-empty", "empty-and-null", "one", "one-null"],
)
def test_round_trip_edge_pages(version: FileVersion, values: list[bytes | None]) -> None:
    result = round_trip(pa.array(values, pa.large_binary()), version, field=blob_field(), takes=[[0]])
    assert result.descriptions() == ["blob_layout"]


def test_descriptions_follow_pylance_rules() -> None:
    result = round_trip(pa.array([b"abc", None, b""], pa.large_binary()), field=blob_field())
    (layout,) = result.layouts[0]
    assert list(layout.blob_layout.layers) == [3]  # NULLABLE_ITEM
    assert list(layout.blob_layout.inner_layout.mini_block_layout.layers) == [1]  # ALL_VALID_ITEM
    data = bytes(result.memory.data)
    assert data[:3] == b"abc"  # the blob precedes the page
    # (position, size) per row: (0, 3), null (0x10000, 0), empty (0, 0)
    assert np.array([0, 3, 0x10000, 0, 0, 0], np.uint64).tobytes() in data


@pytest.mark.parametrize("version", VERSIONS)
def test_round_trip_struct_child(version: FileVersion) -> None:
    n = 300
    child = blob_values(n, seed=3)
    struct = pa.StructArray.from_arrays(
        [pa.array(np.arange(n, dtype=np.int32)), child],
        fields=[pa.field("x", pa.int32()), blob_field()],
        mask=pa.array(np.arange(n) % 9 == 4),
    )
    result = round_trip(struct, version, field=pa.field("s", struct.type), takes=[[4, 5, 6, 7, 299]])
    assert result.descriptions()[1].startswith("blob_layout")


@settings(max_examples=40, deadline=None)
@given(
    values=st.lists(st.one_of(st.none(), st.binary(max_size=300)), max_size=60),
    version=st.sampled_from(VERSIONS),
)
def test_round_trip_property(values: list[bytes | None], version: FileVersion) -> None:
    n = len(values)
    round_trip(
        pa.array(values, pa.large_binary()),
        version,
        field=blob_field(),
        page_sizes=[n // 2] if n > 1 else None,
        slices=[(1, n - 1)],
        takes=[list(range(0, n, 3))],
    )


# --- errors ---------------------------------------------------------------------------------------


def test_blob_fields_must_be_large_binary() -> None:
    # binary: refused once values arrive (pylance writes and reads back a file without rows).
    encoder = make_field_encoder(pa.field("b", pa.binary(), metadata=BLOB), FileVersion.V2_2)
    with pytest.raises(SchemaError, match="large_binary"):
        encoder.encode(pa.array([b"x"]))
    with pytest.raises(SchemaError):
        LanceFileWriter("unused.lance", pa.schema([pa.field("b", pa.string(), metadata=BLOB)]))


def test_blobs_inside_lists_are_refused(tmp_path: Path) -> None:
    field = pa.field("l", pa.list_(blob_field("item")))
    with LanceFileWriter(str(tmp_path / "l.lance"), pa.schema([field])) as writer:
        with pytest.raises(UnsupportedFeatureError):
            writer.write_batch(pa.table({"l": pa.array([[b"a"]], field.type)}))
            writer.close()


def test_blobs_need_a_writer_for_external_buffers() -> None:
    encoder = make_field_encoder(blob_field(), FileVersion.V2_2)
    with pytest.raises(UnsupportedFeatureError):
        encoder.encode(pa.array([b"a"], pa.large_binary()))


def test_description_past_end_of_file(tmp_path: Path) -> None:
    path = tmp_path / "t.lance"
    schema = pa.schema([blob_field()])
    with LanceFileWriter(str(path), schema, version="2.1") as writer:
        writer.write_batch(pa.table({"b": pa.array([b"q" * 100], pa.large_binary())}, schema=schema))
    data = bytearray(path.read_bytes())
    size = np.array([100], np.uint64).tobytes()
    at = data.index(np.array([0], np.uint64).tobytes() + size)
    data[at + 8 : at + 16] = np.array([10 * MIB], np.uint64).tobytes()
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError):
        LanceFileReader(str(path)).read_all().to_table()


# --- take reads only the blobs asked for ----------------------------------------------------------


def test_file_take_reads_only_requested_blobs(
    tmp_path: Path, recorded_reads: list[tuple[str, int, int]]
) -> None:
    n, size = 20, 64 * 1024
    rng = np.random.default_rng(5)
    values = [rng.bytes(size) for _ in range(n)]
    schema = pa.schema([pa.field("id", pa.int32()), blob_field()])
    path = tmp_path / "t.lance"
    with LanceFileWriter(str(path), schema) as writer:
        writer.write_batch(
            pa.table(
                {"id": pa.array(range(n), pa.int32()), "b": pa.array(values, pa.large_binary())},
                schema=schema,
            )
        )
    data = path.read_bytes()
    where = [data.index(v) for v in values]
    reader = LanceFileReader(str(path))
    recorded_reads.clear()
    got = reader.take_rows([13, 4]).to_table()
    assert got.column("b").to_pylist() == [values[13], values[4]]
    spans = [(start, start + length) for _, start, length in recorded_reads]
    assert sum(b - a for a, b in spans) < 3 * size
    for i, pos in enumerate(where):
        touched = any(a < pos + size and pos < b for a, b in spans)
        assert touched == (i in (4, 13)), f"blob {i} {'read' if touched else 'not read'}"


def test_dataset_take_reads_only_requested_blobs(
    tmp_path: Path, recorded_reads: list[tuple[str, int, int]]
) -> None:
    """2.1 datasets keep blob pages (2.2 ones store ``lance.blob.v2``: tests/test_blob_v2.py)."""
    n, size = 12, 32 * 1024
    rng = np.random.default_rng(9)
    values = [rng.bytes(size) for _ in range(n)]
    schema = pa.schema([pa.field("id", pa.int64()), blob_field()])
    table = pa.table(
        {"id": pa.array(range(n), pa.int64()), "b": pa.array(values, pa.large_binary())}, schema=schema
    )
    uri = tmp_path / "ds"
    lance_ops.write_dataset(table, str(uri), data_storage_version="2.1", max_rows_per_file=6)
    ds = lance_ops.dataset(str(uri))
    ds.take([0, 6])  # opens the tails of both data files
    recorded_reads.clear()
    assert ds.take([8, 1]).column("b").to_pylist() == [values[8], values[1]]
    data_reads = [length for path, _, length in recorded_reads if path.endswith(".lance")]
    assert size * 2 <= sum(data_reads) < size * 3


# --- pylance reads what we write ------------------------------------------------------------------


@pytest.mark.interop
@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_pylance_reads_our_files(tmp_path: Path, version: str) -> None:
    lance_file = pytest.importorskip("lance.file")
    n = 1025
    struct = pa.StructArray.from_arrays(
        [pa.array(np.arange(n, dtype=np.int32)), blob_values(n, seed=2)],
        fields=[pa.field("x", pa.int32()), blob_field()],
        mask=pa.array(np.arange(n) % 6 == 1),
    )
    schema = pa.schema(
        [blob_field("blob"), blob_field("all_null"), blob_field("all_empty"), pa.field("s", struct.type)]
    )
    table = pa.Table.from_arrays(
        [
            blob_values(n, seed=1, big=3 * MIB),
            pa.nulls(n, pa.large_binary()),
            pa.array([b""] * n, pa.large_binary()),
            struct,
        ],
        schema=schema,
    )
    path = str(tmp_path / "t.lance")
    with LanceFileWriter(path, schema, version=version, max_page_bytes=MIB, data_cache_bytes=MIB) as writer:
        for start in range(0, n, 300):
            writer.write_batch(table.slice(start, 300))
    reader = lance_file.LanceFileReader(path)
    assert reader.read_all().to_table().equals(table)
    assert reader.read_range(500, 30).to_table().equals(table.slice(500, 30))
    rows = [0, 2, 512, 1024]
    assert reader.take_rows(rows).to_table().equals(table.take(pa.array(rows)))
    assert all(
        page.encoding.lstrip().startswith("PageLayout") and "BlobLayout(" in page.encoding
        for page in reader.metadata().columns[0].pages
    )
    empty = str(tmp_path / "empty.lance")
    with LanceFileWriter(empty, schema, version=version):
        pass
    assert lance_file.LanceFileReader(empty).read_all().to_table().num_rows == 0


@pytest.mark.interop
def test_pylance_reads_our_datasets(tmp_path: Path) -> None:
    """A 2.1 dataset (2.2 ones: tests/test_blob_v2.py)."""
    lance = pytest.importorskip("lance")
    values = blob_values(50, seed=4, big=50_000)
    schema = pa.schema([pa.field("id", pa.int64()), blob_field()])
    table = pa.table({"id": pa.array(range(50), pa.int64()), "b": values}, schema=schema)
    uri = str(tmp_path / "ds")
    lance_ops.write_dataset(table.slice(0, 30), uri, data_storage_version="2.1")
    lance_ops.write_dataset(table.slice(30), uri, mode="append")
    ds = lance.dataset(uri)
    described = ds.to_table().column("b")
    assert described.type == pa.struct([("position", pa.uint64()), ("size", pa.uint64())])
    assert described.is_null().to_pylist() == values.is_null().to_pylist()
    sizes = [None if d is None else d["size"] for d in described.to_pylist()]
    assert sizes == [None if v is None else len(v) for v in values.to_pylist()]
    rows = [v is not None for v in values.to_pylist()]
    wanted = [i for i, ok in enumerate(rows) if ok]
    blobs = ds.take_blobs("b", indices=wanted)
    assert [f.read() for f in blobs] == [values[i].as_py() for i in wanted]
    assert lance_ops.dataset(uri).to_table().equals(table)


@pytest.mark.interop
def test_pylance_blob_v2_kinds(tmp_path: Path, recorded_reads: list[tuple[str, int, int]]) -> None:
    """Inline, packed, dedicated and external (whole / ranged) blobs of a pylance 2.2 dataset."""
    lance = pytest.importorskip("lance")
    from lance.blob import Blob, blob_array
    from lance.blob import blob_field as v2_field

    external = tmp_path / "external.bin"
    external.write_bytes(b"EXTERNAL-0123456789")
    big = bytes(range(256)) * 8
    values = [
        Blob(data=b"abc"),
        None,
        Blob(data=b""),
        Blob(data=b"p" * 300),
        Blob(data=big),
        Blob(uri=external.as_uri()),
        Blob(uri=external.as_uri(), position=9, size=4),
    ]
    thresholds = {
        b"lance-encoding:blob-inline-size-threshold": b"100",
        b"lance-encoding:blob-dedicated-size-threshold": b"1000",
    }
    field = v2_field("b").with_metadata({**(v2_field("b").metadata or {}), **thresholds})
    table = pa.Table.from_arrays([blob_array(values)], schema=pa.schema([field]))
    uri = str(tmp_path / "ds")
    lance.write_dataset(table, uri, allow_external_blob_outside_bases=True)
    ds = lance_ops.dataset(uri)
    assert is_blob_v2(ds.schema.field("b"))
    got = ds.to_table().column("b").to_pylist()
    data = [None if row is None else row["data"] for row in got]
    assert data == [b"abc", None, b"", b"p" * 300, big, b"EXTERNAL-0123456789", b"0123"]
    assert [None if row is None else row["uri"] for row in got] == [None] * 5 + [external.as_uri()] * 2
    assert (got[6]["position"], got[6]["size"]) == (9, 4)
    recorded_reads.clear()
    assert ds.take([4]).column("b").to_pylist()[0]["data"] == big
    assert sum(length for path, _, length in recorded_reads if path.endswith(".blob")) == len(big)
    assert not [path for path, _, _ in recorded_reads if path.endswith(".bin")]
