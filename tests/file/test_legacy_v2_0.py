"""Lance 2.0 files and datasets: pylance's golden files read by us, ours read by pylance.

Golden data: ``tests/data/files/2.0`` (made by ``tests/data/datagen_legacy20.py``).
"""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from google.protobuf import any_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lance_ops
from lance_ops._proto import encodings_v2_0_pb2 as enc20
from lance_ops._proto import file2_pb2
from lance_ops.encoding.api import FileVersion
from lance_ops.encoding.legacy import v2_0
from lance_ops.errors import CorruptFileError, SchemaError, UnsupportedEncodingError, UnsupportedFeatureError
from lance_ops.file import LanceFileReader, LanceFileWriter
from lance_ops.file.codecs import codec_for
from tests.data.golden import FILES_DIR

LEGACY_DIR = FILES_DIR / "2.0"
EXPECTED_DIR = LEGACY_DIR / "expected"
GOLDEN = sorted(p.stem for p in LEGACY_DIR.glob("*.lance") if p.is_file())
ENCODINGS = json.loads((LEGACY_DIR / "encodings.json").read_text())
# Our writer reproduces pylance's bytes except where pylance's are not deterministic or depend
# on its internals: FSST symbol tables (strings) and where blob values land (blobs).
NOT_BYTE_IDENTICAL = ("strings", "blobs")


def expected(name: str) -> pa.Table:
    """What pylance read back from golden file ``name``, as one chunk (the batch it was written as)."""
    with pa.OSFile(str(EXPECTED_DIR / f"{name}.arrow")) as source:
        return pa.ipc.open_file(source).read_all().combine_chunks()


def test_golden_files_present() -> None:
    assert {"primitives", "strings", "lists", "structs", "dictionaries", "blobs", "multipage"} <= set(GOLDEN)
    assert set(ENCODINGS) == set(GOLDEN)


# --------------------------------------------------------------------------- pylance -> us


@pytest.mark.parametrize("name", GOLDEN)
def test_read_all(name: str) -> None:
    reader = LanceFileReader(LEGACY_DIR / f"{name}.lance")
    assert reader.version is FileVersion.V2_0
    metadata = reader.metadata()
    assert (metadata.major_version, metadata.minor_version) == (0, 3)
    want = expected(name)
    got = reader.read_all().to_table()
    assert got.equals(want, check_metadata=True)
    batches = list(reader.read_all(batch_size=100).to_batches())
    assert pa.Table.from_batches(batches, schema=got.schema).equals(want)


@pytest.mark.parametrize("name", GOLDEN)
def test_read_range_and_take_rows(name: str) -> None:
    reader = LanceFileReader(LEGACY_DIR / f"{name}.lance")
    want = expected(name)
    n = want.num_rows
    for start, count in [(0, n), (n // 3, n // 2), (max(n - 1, 0), min(n, 1)), (n, 0)]:
        assert reader.read_range(start, count).to_table().equals(want.slice(start, count))
    rng = np.random.default_rng(5)
    indices = rng.integers(0, n, size=min(n, 50)) if n else np.zeros(0, np.int64)
    assert reader.take_rows(indices).to_table().equals(want.take(pa.array(indices, pa.int64())))
    if n:
        column = want.column_names[-1]
        got = reader.take_rows([n - 1, 0, n - 1], columns=[column]).to_table()
        assert got.equals(want.select([column]).take([n - 1, 0, n - 1]))


def test_page_lengths_and_priorities() -> None:
    metadata = LanceFileReader(LEGACY_DIR / "multipage.lance").metadata()
    columns = metadata.columns
    assert [len(c.pages) for c in columns][0] >= 3
    assert all(page.priority == 0 for column in columns for page in column.pages)
    assert sum(page.length for page in columns[0].pages) == metadata.num_rows
    assert columns[2].pages[0].encoding.startswith("list {")


def _page_features(path: Path) -> dict[int, list[list[str]]]:
    """The oneofs of every page like ``encodings.json``, decoded from a file we can read."""
    raw = path.read_bytes()
    _, cmo, _, _, num_columns, *_ = struct.unpack("<QQQIIHH4s", raw[-40:])
    out = {}
    for i in range(num_columns):
        position, size = struct.unpack_from("<QQ", raw, cmo + 16 * i)
        column = file2_pb2.ColumnMetadata.FromString(raw[position : position + size])
        extra = _oneofs(_unpack(column.encoding, enc20.ColumnEncoding)) - {"values"}
        out[i] = [sorted(_oneofs(_unpack(p.encoding, enc20.ArrayEncoding)) | extra) for p in column.pages]
    return out


def _unpack(encoding: file2_pb2.Encoding, kind: type) -> enc20.ArrayEncoding | enc20.ColumnEncoding:
    return kind.FromString(any_pb2.Any.FromString(encoding.direct.encoding).value)


def _oneofs(message: object) -> set[str]:
    found: set[str] = set()
    for descriptor, value in message.ListFields():  # type: ignore[attr-defined]
        if descriptor.containing_oneof is not None:
            found.add(descriptor.name)
        if hasattr(value, "ListFields"):
            found |= _oneofs(value)
        elif not isinstance(value, str | bytes | int | float):
            for item in value:
                if hasattr(item, "ListFields"):
                    found |= _oneofs(item)
    return found


# --------------------------------------------------------------------------- us -> pylance


def _write(path: Path, table: pa.Table, **options: int) -> None:
    """Write as pylance would: without our page statistics, so the bytes can equal pylance's
    (files with them are checked in tests/table/test_page_statistics.py)."""
    with LanceFileWriter(path, table.schema, version="2.0", page_statistics=False, **options) as writer:
        writer.write_batch(table)


@pytest.mark.parametrize("name", GOLDEN)
def test_we_choose_pylance_encodings(tmp_path: Path, name: str) -> None:
    """Every page we write uses the encodings pylance chose for the same data, page for page."""
    path = tmp_path / f"{name}.lance"
    _write(path, expected(name), **({"max_page_bytes": 2048} if name == "multipage" else {}))
    assert list(_page_features(path).values()) == list(ENCODINGS[name].values())


@pytest.mark.interop
@pytest.mark.parametrize("name", GOLDEN)
def test_pylance_reads_our_files(tmp_path: Path, name: str) -> None:
    from lance.file import LanceFileReader as PylanceReader

    want = expected(name)
    path = tmp_path / f"{name}.lance"
    _write(path, want, **({"max_page_bytes": 2048} if name == "multipage" else {}))
    assert struct.unpack("<HH", path.read_bytes()[-8:-4]) == (0, 3)
    got = PylanceReader(str(path)).read_all().to_table()
    assert got.equals(want)
    assert LanceFileReader(path).read_all().to_table().equals(want)
    if name not in NOT_BYTE_IDENTICAL:
        assert path.read_bytes() == (LEGACY_DIR / f"{name}.lance").read_bytes()


@pytest.mark.interop
def test_multipage_and_large_values_to_pylance(tmp_path: Path) -> None:
    from lance.file import LanceFileReader as PylanceReader

    n = 5000
    table = pa.table(
        {
            "x": pa.array(np.arange(n), mask=np.arange(n) % 3 == 0),
            "big": pa.array([b"v" * 40_000 if i % 1000 == 0 else b"" for i in range(n)], pa.large_binary()),
            "l": pa.array([[i] * (i % 4) for i in range(n)], pa.list_(pa.int16())),
        }
    )
    path = tmp_path / "multi.lance"
    with LanceFileWriter(
        path, table.schema, version="2.0", max_page_bytes=8192, data_cache_bytes=4096
    ) as writer:
        for batch in table.to_batches(max_chunksize=700):
            writer.write_batch(batch)
    assert PylanceReader(str(path)).read_all().to_table().equals(table)
    reader = LanceFileReader(path)
    assert all(len(column.pages) > 1 for column in reader.metadata().columns)
    assert reader.read_range(1234, 2000).to_table().equals(table.slice(1234, 2000))
    rows = [4999, 0, 2500, 2500, 17]
    assert reader.take_rows(rows).to_table().equals(table.take(rows))


def _edge_tables() -> st.SearchStrategy[pa.Table]:
    rows = st.sampled_from([0, 1, 7, 1023, 1024, 1025])

    def build(n: int, seed: int, null_every: int) -> pa.Table:
        rng = np.random.default_rng(seed)
        nulls = np.arange(n) % null_every == 0 if null_every else np.zeros(n, bool)
        lengths = rng.integers(0, 4, n)
        return pa.table(
            {
                "i": pa.array(rng.integers(-5, 5, n).astype(np.int16), mask=nulls),
                "b": pa.array(rng.random(n) < 0.5, mask=nulls),
                "s": pa.array([None if m else "ab"[: k % 3] for k, m in zip(lengths, nulls, strict=True)]),
                "l": pa.array(
                    [None if m else list(range(k)) for k, m in zip(lengths, nulls, strict=True)],
                    pa.large_list(pa.uint32()),
                ),
                "f": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(2 * n)), 2, mask=pa.array(nulls)),
                "st": pa.StructArray.from_arrays([pa.array(lengths, mask=nulls)], ["k"]),
            }
        )

    return st.builds(build, rows, st.integers(0, 1000), st.sampled_from([0, 1, 2, 5, 300]))


@pytest.mark.interop
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(table=_edge_tables())
def test_round_trip_edge_shapes(tmp_path: Path, table: pa.Table) -> None:
    from lance.file import LanceFileReader as PylanceReader
    from lance.file import LanceFileWriter as PylanceWriter

    ours, theirs = tmp_path / "ours.lance", tmp_path / "theirs.lance"
    _write(ours, table)
    with PylanceWriter(str(theirs), table.schema, version="2.0") as writer:
        writer.write_batch(table)
    assert LanceFileReader(ours).read_all().to_table().equals(table)
    assert PylanceReader(str(ours)).read_all().to_table().equals(table)
    assert LanceFileReader(theirs).read_all().to_table().equals(table)
    assert ours.read_bytes() == theirs.read_bytes()
    if table.num_rows:
        rows = np.arange(table.num_rows)[::-3]
        assert LanceFileReader(theirs).take_rows(rows).to_table().equals(table.take(rows))


# --------------------------------------------------------------------------- datasets


@pytest.mark.interop
def test_our_2_0_dataset_read_by_pylance(tmp_path: Path) -> None:
    import lance

    table = expected("rows_1025")
    uri = tmp_path / "ds.lance"
    lance_ops.write_dataset(table, uri, data_storage_version="2.0", max_rows_per_file=400)
    lance_ops.write_dataset(table.slice(0, 10), uri, mode="append")
    theirs = lance.dataset(str(uri))
    assert theirs.data_storage_version == "2.0"
    assert len(theirs.get_fragments()) == 4
    assert theirs.to_table().equals(pa.concat_tables([table, table.slice(0, 10)]))
    assert lance_ops.dataset(uri).take([0, 1025, 1034]).equals(table.take([0, 0, 9]))


@pytest.mark.interop
def test_pylance_2_0_dataset_read_and_appended(tmp_path: Path) -> None:
    import lance

    uri = tmp_path / "dataset.lance"
    shutil.copytree(LEGACY_DIR / "dataset.lance", uri)
    want = expected("dataset")
    ours = lance_ops.dataset(uri)
    assert ours.data_storage_version == "2.0"
    assert ours.to_table().equals(want)
    lance_ops.write_dataset(want.slice(0, 100), uri, mode="append")
    appended = lance.dataset(str(uri))
    assert appended.to_table().equals(pa.concat_tables([want, want.slice(0, 100)]))
    files = [f for fragment in appended.get_fragments() for f in fragment.metadata.files]
    assert all((f.file_major_version, f.file_minor_version) == (2, 0) for f in files)


# --------------------------------------------------------------------------- errors


def _rewrite_first_page(path: Path, change: object) -> bytes:
    """The file's bytes with column 0 / page 0's ArrayEncoding replaced by ``change(encoding)``."""
    raw = bytearray(path.read_bytes())
    cm0, cmo, gbo, ngb, ncol, major, minor, magic = struct.unpack("<QQQIIHH4s", raw[-40:])
    position, size = struct.unpack_from("<QQ", raw, cmo)
    column = file2_pb2.ColumnMetadata.FromString(bytes(raw[position : position + size]))
    page = column.pages[0]
    encoding = _unpack(page.encoding, enc20.ArrayEncoding)
    new = change(encoding)  # type: ignore[operator]
    page.encoding.direct.encoding = any_pb2.Any(
        type_url="/lance.encodings.ArrayEncoding", value=new.SerializeToString()
    ).SerializeToString()
    data = column.SerializeToString()
    tail = bytes(raw[cm0:position]) + data + bytes(raw[position + size : cmo])
    shift = len(data) - size
    table = bytearray(raw[cmo:gbo])
    struct.pack_into("<QQ", table, 0, position, len(data))
    for i in range(1, ncol):
        p, s = struct.unpack_from("<QQ", table, 16 * i)
        struct.pack_into("<QQ", table, 16 * i, p + shift if p > position else p, s)
    footer = struct.pack("<QQQIIHH4s", cm0, cmo + shift, gbo + shift, ngb, ncol, major, minor, magic)
    return bytes(raw[:cm0]) + tail + bytes(table) + bytes(raw[gbo:-40]) + footer


def test_unsupported_and_corrupt_pages(tmp_path: Path) -> None:
    source = tmp_path / "ints.lance"
    _write(source, pa.table({"a": pa.array([1, 2, 3], pa.int32())}))

    def rle(_: enc20.ArrayEncoding) -> enc20.ArrayEncoding:
        return enc20.ArrayEncoding(rle=enc20.Rle(bits_per_value=32))

    def wide(encoding: enc20.ArrayEncoding) -> enc20.ArrayEncoding:
        encoding.nullable.no_nulls.values.flat.bits_per_value = 64
        return encoding

    def column_buffer(encoding: enc20.ArrayEncoding) -> enc20.ArrayEncoding:
        encoding.nullable.no_nulls.values.flat.buffer.buffer_type = enc20.Buffer.column
        return encoding

    cases = [
        (rle, UnsupportedEncodingError),
        (wide, CorruptFileError),
        (column_buffer, UnsupportedEncodingError),
    ]
    for change, error in cases:
        bad = tmp_path / "bad.lance"
        bad.write_bytes(_rewrite_first_page(source, change))
        with pytest.raises(error):
            LanceFileReader(bad).read_all().to_table()


def test_num_columns() -> None:
    t = pa.struct([("x", pa.int32()), ("y", pa.list_(pa.struct([("a", pa.string()), ("b", pa.float64())])))])
    assert v2_0.num_columns(pa.field("s", t)) == 6
    assert v2_0.num_columns(pa.field("f", pa.list_(pa.float32(), 4))) == 1
    assert v2_0.num_columns(pa.field("d", pa.dictionary(pa.int8(), pa.string()))) == 1
    for key in ("packed", "lance-encoding:packed"):
        packed = pa.field("p", pa.struct([("a", pa.int32()), ("b", pa.float64())]), metadata={key: "true"})
        assert v2_0.num_columns(packed) == 1
    unpacked = pa.field("p", pa.struct([("a", pa.int32())]), metadata={"packed": "false"})
    assert v2_0.num_columns(unpacked) == 2


def test_write_errors(tmp_path: Path) -> None:
    struct_nulls = pa.table({"s": pa.array([{"x": 1}, None], pa.struct([("x", pa.int8())]))})
    with pytest.raises(UnsupportedFeatureError, match="struct validity"):
        _write(tmp_path / "a.lance", struct_nulls)
    blob = pa.schema([pa.field("b", pa.binary(), metadata={"lance-encoding:blob": "true"})])
    # Refused once values arrive, as pylance does (a file without rows is fine for it).
    with pytest.raises(SchemaError, match="large_binary"):
        _write(tmp_path / "b.lance", pa.table({"b": pa.array([b"x"])}, schema=blob))
    packed = pa.schema([pa.field("p", pa.struct([("s", pa.string())]), metadata={"packed": "true"})])
    with pytest.raises(UnsupportedFeatureError, match="packed"):
        _write(tmp_path / "c.lance", pa.table({"p": [{"s": "x"}]}, schema=packed))
    strings = pa.table({"f": pa.array([["a", "b"]], pa.list_(pa.string(), 2))})
    with pytest.raises(UnsupportedFeatureError, match="cannot store"):
        _write(tmp_path / "e.lance", strings)
    keys = pa.array([*range(128), None], pa.int8())
    full = pa.DictionaryArray.from_arrays(keys, pa.array([f"v{i}" for i in range(128)]))
    with pytest.raises(UnsupportedFeatureError, match="dictionary"):
        _write(tmp_path / "d.lance", pa.table({"d": full}))
    with pytest.raises(UnsupportedFeatureError):
        codec_for(FileVersion.V0_1)


def test_cli_inspects_2_0_files(capsys: pytest.CaptureFixture[str]) -> None:
    from lance_ops.cli import main

    assert main(["inspect", str(LEGACY_DIR / "structs.lance"), "--pages"]) == 0
    out = capsys.readouterr().out
    assert "format version 0.3, 1025 rows" in out
    assert "nullable some_nulls flat(1) flat(64)" in out
    assert (
        "packed_struct nullable no_nulls flat(32) nullable no_nulls flat(64) nullable no_nulls flat(24)"
        in out
    )


@pytest.mark.interop
def test_take_across_fragments_of_a_pylance_2_0_dictionary_column(tmp_path: Path) -> None:
    """Each 2.0 fragment has its own dictionary (with a null entry): a take spanning fragments
    joins them instead of failing in Arrow's unification, and equals pylance's take."""
    lance = pytest.importorskip("lance")
    uri = str(tmp_path / "ds")
    for i in range(3):
        keys = pa.array([0, None, 1, 0], pa.int32())
        column = pa.DictionaryArray.from_arrays(keys, pa.array([f"v{i}", f"w{i}"]))
        table = pa.table({"id": pa.array(range(i * 4, i * 4 + 4)), "c": column})
        lance.write_dataset(table, uri, data_storage_version="2.0", mode="append")
    lance.dataset(uri).delete("id = 5")
    rows = [9, 0, 5, 3, 10, 0]
    assert lance_ops.dataset(uri).take(rows).to_pylist() == lance.dataset(uri).take(rows).to_pylist()
