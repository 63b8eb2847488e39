"""Container-level tests: regions, footer, offset tables, page sizing, corrupt files.

These use the raw test codec (``fake_codec``) so they only exercise the file layer.
"""

from __future__ import annotations

import io
import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from lance_ops._proto import file2_pb2 as pb2
from lance_ops._proto import file_pb2 as pb
from lance_ops.encoding.api import FileVersion
from lance_ops.errors import CorruptFileError, SchemaError, UnsupportedEncodingError, UnsupportedFeatureError
from lance_ops.file import LanceFileReader, LanceFileWriter
from lance_ops.file.format import (
    ALIGNMENT,
    FOOTER_FORMAT,
    PAD_BYTE,
    RegionWriter,
    direct_encoding,
    pack_any,
    values_column_encoding,
)
from lance_ops.file.schema import schema_to_pb
from lance_ops.io import object_store
from tests.file.fake_codec import layout as fake_layout

pytestmark = pytest.mark.usefixtures("fake_codec_installed")

SCHEMA = pa.schema([("a", pa.int32()), ("b", pa.float64())])


def _table(n: int, start: int = 0) -> pa.Table:
    a = np.arange(start, start + n, dtype=np.int32)
    return pa.table({"a": a, "b": a.astype(np.float64) / 2}, schema=SCHEMA)


def _write(path: Path, *tables: pa.Table, **kwargs) -> Path:
    with LanceFileWriter(str(path), **kwargs) as writer:
        for table in tables:
            writer.write_batch(table)
    return path


def _footer(data: bytes) -> tuple:
    return struct.unpack(FOOTER_FORMAT, data[-40:])


@pytest.mark.parametrize("n", [0, 1, 1023, 1024, 1025])
@pytest.mark.parametrize("version", ["2.1", "2.2", "stable"])
def test_round_trip(tmp_path: Path, n: int, version: str) -> None:
    path = _write(tmp_path / "f.lance", _table(n), version=version, schema=SCHEMA)
    reader = LanceFileReader(str(path))
    assert reader.num_rows == n
    assert reader.schema == SCHEMA
    assert reader.read_all().to_table().equals(_table(n))
    assert reader.version is FileVersion.parse(version)
    major, minor = FileVersion.parse(version).value
    assert _footer(path.read_bytes())[5:] == (major, minor, b"LANC")


def test_regions_alignment_and_padding(tmp_path: Path) -> None:
    path = _write(tmp_path / "f.lance", _table(3), _table(5, 3), data_cache_bytes=1)
    data = path.read_bytes()
    reader = LanceFileReader(str(path))
    meta = reader.metadata()
    buffers = [b for c in meta.columns for p in c.pages for b in p.buffers]
    assert len(buffers) == 4  # two flushes of two columns
    positions = sorted(b.position for b in buffers)
    assert all(p % ALIGNMENT == 0 for p in positions)
    for b in buffers:  # padding after every buffer is 0x48 up to the next boundary
        end = b.position + b.size
        assert set(data[end : -(-end // ALIGNMENT) * ALIGNMENT]) <= {PAD_BYTE}
    cms, cmo, gbo, ngb, ncols, *_ = _footer(data)
    gb0 = meta.global_buffers[0]
    assert gb0.position == max(positions) + ALIGNMENT  # right after the data region
    assert gb0.position + gb0.size == cms  # descriptor, then column metadata, no gap
    assert cmo + 16 * ncols == gbo and gbo + 16 * ngb == len(data) - 40
    # pages interleave by flush: a0 b0 a1 b1
    assert [c.pages[0].buffers[0].position for c in meta.columns] == [0, 64]
    assert [c.pages[1].buffers[0].position for c in meta.columns] == [128, 192]
    assert [p.priority for p in meta.columns[0].pages] == [0, 3]
    assert meta.num_data_bytes == cms - gb0.size
    assert meta.num_column_metadata_bytes == gbo - cms


def test_page_splitting_by_max_page_bytes(tmp_path: Path) -> None:
    # 1000 int32 rows = 4000 bytes with a 1000-byte page limit: 2.0 cuts pages by it, 2.1+ do not
    # (their readers split large pages), both as pylance
    path = _write(tmp_path / "f.lance", _table(1000), max_page_bytes=1000, version="2.0")
    meta = LanceFileReader(str(path)).metadata()
    assert len(meta.columns[0].pages) > 1 and len(meta.columns[1].pages) > 1
    table = LanceFileReader(str(path)).read_range(240, 30).to_table()
    assert table.equals(_table(30, 240))
    path = _write(tmp_path / "g.lance", _table(1000), max_page_bytes=1000, version="2.2")
    assert [len(c.pages) for c in LanceFileReader(str(path)).metadata().columns] == [1, 1]


def test_data_cache_bytes_accumulates_until_exceeded(tmp_path: Path) -> None:
    # each batch holds 40 + 80 bytes; a 100-byte cache flushes a after 3 batches, b after 2
    batches = [_table(10, 10 * i) for i in range(6)]
    path = _write(tmp_path / "f.lance", *batches, data_cache_bytes=100)
    meta = LanceFileReader(str(path)).metadata()
    assert [p.length for p in meta.columns[0].pages] == [30, 30]
    assert [p.length for p in meta.columns[1].pages] == [20, 20, 20]
    assert LanceFileReader(str(path)).read_all().to_table().equals(pa.concat_tables(batches))


@pytest.mark.parametrize("n", [0, 1, 1025])
def test_bytes_written_is_the_file_size(tmp_path: Path, n: int) -> None:
    path = tmp_path / "f.lance"
    writer = LanceFileWriter(str(path), SCHEMA)
    assert writer.bytes_written == 0
    writer.write_batch(_table(n))
    before_close = writer.bytes_written
    writer.close()
    assert writer.bytes_written == path.stat().st_size > before_close


def test_zero_row_file_and_global_buffers(tmp_path: Path) -> None:
    path = tmp_path / "f.lance"
    writer = LanceFileWriter(str(path), SCHEMA)
    assert writer.add_global_buffer(b"abc") == 1
    assert writer.add_global_buffer(b"") == 2
    writer.add_schema_metadata("k", "v")
    assert writer.close() == 0
    reader = LanceFileReader(str(path))
    assert reader.num_rows == 0
    assert reader.read_global_buffer(1) == b"abc"
    assert reader.read_global_buffer(2) == b""
    assert reader.schema.metadata == {b"k": b"v"}
    assert all(not c.pages for c in reader.metadata().columns)
    assert reader.read_all().to_table().num_rows == 0
    with pytest.raises(IndexError):
        reader.read_global_buffer(3)


def test_inputs_and_schema_errors(tmp_path: Path) -> None:
    path = tmp_path / "f.lance"
    with LanceFileWriter(str(path)) as writer:
        writer.write_batch(_table(2).to_batches()[0])
        writer.write_batch(_table(2, 2).to_pandas())
        writer.write_batch(_table(0))
        with pytest.raises(SchemaError):
            writer.write_batch(pa.table({"a": [1.5], "b": [2.0]}))
    assert LanceFileReader(str(path)).read_all().to_table().equals(_table(4))
    with pytest.raises(SchemaError):
        LanceFileWriter(str(tmp_path / "g.lance")).close()
    assert not (tmp_path / "g.lance").exists()
    with pytest.raises(UnsupportedFeatureError):
        LanceFileWriter(str(tmp_path / "h.lance"), version="legacy")
    with pytest.raises(SchemaError):
        LanceFileWriter(
            str(tmp_path / "h.lance"), pa.schema([("m", pa.map_(pa.string(), pa.int8()))]), version="2.1"
        )
    with pytest.raises(ValueError), LanceFileWriter(str(tmp_path / "i.lance"), SCHEMA):
        raise ValueError("boom")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.lance"]  # no partial or temporary files


def test_read_range_take_and_projection(tmp_path: Path) -> None:
    path = _write(tmp_path / "f.lance", _table(100), max_page_bytes=64)
    reader = LanceFileReader(str(path), columns=["b"])
    assert reader.read_all().to_table().column_names == ["b"]
    expected = _table(100)
    indices = [99, 0, 5, 5, 42, 0]
    assert reader.take_rows(indices, columns=["a", "b"]).to_table().equals(expected.take(indices))
    assert reader.take_rows(np.array([], dtype=np.int64)).to_table().num_rows == 0
    assert reader.read_range(10, 0).to_table().num_rows == 0
    batches = list(reader.read_all(columns=["a"], batch_size=30).to_batches())
    assert [len(b) for b in batches] == [30, 30, 30, 10]
    assert pa.Table.from_batches(batches).equals(expected.select(["a"]))
    assert [len(b) for b in reader.take_rows(list(range(50))).to_batches(batch_size=20)] == [20, 20, 10]
    with pytest.raises(IndexError):
        reader.take_rows([100])
    with pytest.raises(IndexError):
        reader.take_rows([-1])
    with pytest.raises(IndexError):
        reader.read_range(90, 11)
    with pytest.raises(SchemaError):
        reader.read_all(columns=["nope"])
    with pytest.raises(SchemaError):
        LanceFileReader(str(path), columns=["nope"])


def test_memory_store() -> None:
    """A file in a memory store is read through that store; opening its URI anew finds nothing
    (a new memory store, as in pylance)."""
    store, path = object_store("memory://lance-ops-file-tests/f.lance")
    with LanceFileWriter(path, store=store) as writer:
        writer.write_batch(_table(7))
    assert LanceFileReader(path, store=store).read_all().to_table().equals(_table(7))
    with pytest.raises(FileNotFoundError):
        LanceFileReader("memory://lance-ops-file-tests/f.lance")


# --------------------------------------------------------------------------- corrupt files


def _valid_file(tmp_path: Path) -> bytes:
    return _write(tmp_path / "valid.lance", _table(10)).read_bytes()


def _expect_corrupt(tmp_path: Path, data: bytes, error: type[Exception] = CorruptFileError) -> Exception:
    path = tmp_path / "bad.lance"
    path.write_bytes(data)
    with pytest.raises(error) as info:
        LanceFileReader(str(path)).read_all().to_table()
    assert str(path) in str(info.value)
    return info.value


def _patch_footer(data: bytes, **changes: int) -> bytes:
    names = ["cms", "cmo", "gbo", "ngb", "ncols", "major", "minor", "magic"]
    values = dict(zip(names, _footer(data), strict=True))
    values.update(changes)
    return data[:-40] + struct.pack(FOOTER_FORMAT, *(values[n] for n in names))


@pytest.mark.parametrize("keep", [0, 1, 39, 40, 100, -1, -20, -39])
def test_truncated(tmp_path: Path, keep: int) -> None:
    data = _valid_file(tmp_path)
    _expect_corrupt(tmp_path, data[:keep])


def test_bad_magic(tmp_path: Path) -> None:
    data = _valid_file(tmp_path)
    error = _expect_corrupt(tmp_path, data[:-4] + b"LANX")
    assert "magic" in str(error)


@pytest.mark.parametrize(
    "changes",
    [
        {"cms": 1},  # column metadata does not start at column_meta_start
        {"cmo": -1},  # CMO table no longer ends at the GBO table
        {"cmo": 8},
        {"gbo": 1 << 40},  # out of range
        {"cms": 1 << 40},
        {"ncols": 1},  # CMO table start/end mismatch
        {"ngb": 1000},
    ],
)
def test_bad_offsets(tmp_path: Path, changes: dict[str, int]) -> None:
    data = _valid_file(tmp_path)
    original = dict(zip(["cms", "cmo", "gbo", "ngb", "ncols"], _footer(data), strict=False))
    bumped = {k: original[k] + v for k, v in changes.items()}
    _expect_corrupt(tmp_path, _patch_footer(data, **bumped))


def test_zero_global_buffers(tmp_path: Path) -> None:
    error = _expect_corrupt(tmp_path, _patch_footer(_valid_file(tmp_path), ngb=0))
    assert "global buffers" in str(error)


def test_global_buffer_0_after_column_metadata(tmp_path: Path) -> None:
    data = bytearray(_valid_file(tmp_path))
    cms, _, gbo, *_ = _footer(bytes(data))
    struct.pack_into("<QQ", data, gbo, cms + 1, 10)
    _expect_corrupt(tmp_path, bytes(data))


def test_protobuf_does_not_parse(tmp_path: Path) -> None:
    data = bytearray(_valid_file(tmp_path))
    cms = _footer(bytes(data))[0]
    data[cms : cms + 4] = b"\xff\xff\xff\xff"
    error = _expect_corrupt(tmp_path, bytes(data))
    assert "parse" in str(error)


@pytest.mark.parametrize(("major", "minor"), [(0, 3), (2, 0)])
def test_2_0_footer_on_2_1_pages(tmp_path: Path, major: int, minor: int) -> None:
    data = _patch_footer(_valid_file(tmp_path), major=major, minor=minor)
    error = _expect_corrupt(tmp_path, data, UnsupportedEncodingError)
    assert "lance.encodings.ArrayEncoding" in str(error)


@pytest.mark.parametrize(("major", "minor"), [(0, 1), (0, 2)])
def test_legacy_footer_on_a_v2_file_is_corrupt(tmp_path: Path, major: int, minor: int) -> None:
    """A legacy version routes to the 0.1 reader, which finds no 0.1 metadata block there."""
    _expect_corrupt(tmp_path, _patch_footer(_valid_file(tmp_path), major=major, minor=minor))


@pytest.mark.parametrize(("major", "minor"), [(3, 0), (2, 3), (1, 0)])
def test_unknown_footer_version(tmp_path: Path, major: int, minor: int) -> None:
    _expect_corrupt(
        tmp_path, _patch_footer(_valid_file(tmp_path), major=major, minor=minor), UnsupportedFeatureError
    )


# --------------------------------------------------------------------------- hand-built containers


def _build(
    columns: list[pb2.ColumnMetadata], version: FileVersion = FileVersion.V2_2, num_rows: int = 0
) -> bytes:
    out = io.BytesIO()
    region = RegionWriter(out)
    schema = schema_to_pb(pa.schema([("a", pa.int32())]))
    region.write_tail(pb.FileDescriptor(schema=schema, length=num_rows), columns, [], version)
    return out.getvalue()


def _column(encoding: pb2.Encoding, page_encoding: pb2.Encoding | None = None) -> pb2.ColumnMetadata:
    column = pb2.ColumnMetadata(encoding=encoding)
    if page_encoding is not None:
        column.pages.add(length=0, encoding=page_encoding)
    return column


def _reader_error(tmp_path: Path, data: bytes, error: type[Exception], match: str = "") -> None:
    path = tmp_path / "built.lance"
    path.write_bytes(data)
    with pytest.raises(error) as info:
        LanceFileReader(str(path)).metadata()
    assert str(path) in str(info.value)
    assert match in str(info.value)


def test_hand_built_valid_container(tmp_path: Path) -> None:
    data = _build([_column(values_column_encoding())])
    path = tmp_path / "built.lance"
    path.write_bytes(data)
    assert LanceFileReader(str(path)).read_all().to_table().num_rows == 0


@pytest.mark.parametrize(
    "encoding",
    [
        pb2.Encoding(),  # unset
        pb2.Encoding(indirect=pb2.DeferredEncoding(buffer_location=0, buffer_length=0)),
        pb2.Encoding(none={}),
    ],
)
def test_non_direct_encodings(tmp_path: Path, encoding: pb2.Encoding) -> None:
    _reader_error(tmp_path, _build([_column(encoding)]), UnsupportedEncodingError)
    _reader_error(tmp_path, _build([_column(values_column_encoding(), encoding)]), UnsupportedEncodingError)


def test_unknown_type_url(tmp_path: Path) -> None:
    wrong = direct_encoding(pb.Schema())  # a valid Any holding the wrong message
    _reader_error(tmp_path, _build([_column(wrong)]), UnsupportedEncodingError)
    no_slash = pb2.Encoding(direct=pb2.DirectEncoding(encoding=pack_any(pb.Schema()).replace(b"/", b"_")))
    _reader_error(tmp_path, _build([_column(no_slash)]), UnsupportedEncodingError)


def test_column_count_must_match_schema(tmp_path: Path) -> None:
    columns = [_column(values_column_encoding()), _column(values_column_encoding())]
    _reader_error(tmp_path, _build(columns), CorruptFileError)


# --------------------------------------------------------------------------- container interop


def _buffers(columns) -> list[list[list[tuple[int, int]]]]:
    return [[[(b.position, b.size) for b in page.buffers] for page in column.pages] for column in columns]


def _assert_same_container(ours, theirs) -> None:
    assert (ours.major_version, ours.minor_version, ours.num_rows) == (
        theirs.major_version,
        theirs.minor_version,
        theirs.num_rows,
    )
    assert ours.num_data_bytes == theirs.num_data_bytes
    assert ours.num_column_metadata_bytes == theirs.num_column_metadata_bytes
    assert ours.num_global_buffer_bytes == theirs.num_global_buffer_bytes
    assert [(b.position, b.size) for b in ours.global_buffers] == [
        (b.position, b.size) for b in theirs.global_buffers
    ]
    assert _buffers(ours.columns) == _buffers(theirs.columns)


@pytest.mark.interop
@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_pylance_reads_our_container(tmp_path: Path, version: str) -> None:
    import lance.file

    path = tmp_path / "ours.lance"
    with LanceFileWriter(str(path), version=version, max_page_bytes=1000) as writer:
        writer.write_batch(_table(600))
        writer.add_global_buffer(b"x" * 70)
        writer.add_schema_metadata("k", "v")
    theirs = lance.file.LanceFileReader(str(path))
    _assert_same_container(LanceFileReader(str(path)).metadata(), theirs.metadata())
    assert theirs.read_global_buffer(1) == b"x" * 70
    assert theirs.metadata().schema.metadata == {b"k": b"v"}


@pytest.mark.interop
@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_we_read_pylance_container(tmp_path: Path, version: str) -> None:
    import lance.file

    path = str(tmp_path / "theirs.lance")
    with lance.file.LanceFileWriter(path, version=version, data_cache_bytes=1024) as writer:
        for start in range(0, 5000, 1000):
            writer.write_batch(_table(1000, start))
        writer.add_global_buffer(b"global")
    ours = LanceFileReader(path)
    theirs = lance.file.LanceFileReader(path)
    _assert_same_container(ours.metadata(), theirs.metadata())
    assert ours.read_global_buffer(1) == b"global"
    assert ours.schema == SCHEMA
    for column in ours.metadata().columns:
        assert [p.priority for p in column.pages] == list(
            np.cumsum([0] + [p.length for p in column.pages])[:-1]
        )
        assert all("mini_block_layout" in p.encoding for p in column.pages)


def test_metadata_larger_than_the_tail_read(tmp_path: Path) -> None:
    path = tmp_path / "big.lance"
    with LanceFileWriter(str(path)) as writer:
        writer.write_batch(_table(5))
        writer.add_schema_metadata("big", "m" * 100_000)  # descriptor alone exceeds 64 KiB
        indices = [writer.add_global_buffer(bytes([i % 256])) for i in range(5000)]  # 80 KB GBO table
    reader = LanceFileReader(str(path))
    assert reader.schema.metadata[b"big"] == b"m" * 100_000
    assert reader.read_global_buffer(indices[-1]) == bytes([4999 % 256])
    assert reader.read_all().to_table().equals(_table(5))


def test_page_buffer_outside_data_region(tmp_path: Path) -> None:
    column = _column(values_column_encoding())
    layout = direct_encoding(fake_layout())
    column.pages.add(length=1, encoding=layout, buffer_offsets=[1 << 20], buffer_sizes=[4])
    _reader_error(tmp_path, _build([column], num_rows=1), CorruptFileError, "outside the data region")
    mismatched = _column(values_column_encoding())
    mismatched.pages.add(length=1, encoding=layout, buffer_offsets=[0, 0], buffer_sizes=[4])
    _reader_error(tmp_path, _build([mismatched], num_rows=1), CorruptFileError, "differ in length")


def test_page_rows_must_add_up(tmp_path: Path) -> None:
    column = _column(values_column_encoding())
    column.pages.add(length=3, encoding=direct_encoding(fake_layout()))
    _reader_error(tmp_path, _build([column], num_rows=4), CorruptFileError, "3 rows")
