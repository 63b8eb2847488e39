"""Legacy (0.1) files and datasets: golden data written by pylance 14 (``tests/data/datagen_legacy01.py``)
read with ``read_all`` / ``read_range`` / ``take_rows`` and through ``lance_ops.dataset``; live
pylance-written legacy datasets of generated data; refused writes; corrupt tails.

The legacy datasets under ``tests/data/datasets/legacy01_*`` are also read at every version by
``tests/test_golden.py`` (content, take, versions).
"""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lance_ops
from lance_ops.encoding.legacy.v0_1.decoder import TAKE_GAP_ROWS
from lance_ops.errors import CorruptFileError, UnsupportedFeatureError
from lance_ops.file import LanceFileReader, LanceFileWriter
from lance_ops.file.legacy_v0_1 import LegacyFileReader
from tests.data.golden import DATASETS_DIR, FILES_DIR, read_expected
from tests.test_golden import _assert_same

LEGACY_DIR = FILES_DIR / "0.1"
BATCHES: dict[str, list[int]] = json.loads((LEGACY_DIR / "batches.json").read_text())
NAMES = sorted(BATCHES)


def _expected(name: str) -> pa.Table:
    with pa.ipc.open_file(LEGACY_DIR / "expected" / f"{name}.arrow") as source:
        return source.read_all()


def _open(name: str) -> LanceFileReader:
    return LanceFileReader(str(LEGACY_DIR / f"{name}.lance"))


def test_golden_legacy_data_present() -> None:
    assert {
        "primitives",
        "strings",
        "dictionaries",
        "nested",
        "extras",
        "rows_1",
        "rows_1023",
        "rows_1024",
        "rows_1025",
    } <= set(NAMES)
    assert sum(len(b) > 1 for b in BATCHES.values()) >= 5, "several files must hold several batches"


@pytest.mark.parametrize("name", NAMES)
def test_read_all(name: str) -> None:
    reader = _open(name)
    expected = _expected(name)
    assert isinstance(reader, LegacyFileReader)
    assert str(reader.version) == "0.1"
    assert reader.num_rows == expected.num_rows == sum(BATCHES[name])
    assert reader.schema.names == expected.column_names
    _assert_same(reader.read_all().to_table(), expected, f"0.1/{name} read_all")
    batches = reader.read_all(batch_size=97).to_batches()
    _assert_same(pa.Table.from_batches(list(batches), schema=batches.schema), expected, f"0.1/{name} batches")
    columns = expected.column_names[::-2]
    _assert_same(
        reader.read_all(columns=columns).to_table(), expected.select(columns), f"0.1/{name} {columns}"
    )


def _ranges(name: str) -> list[tuple[int, int]]:
    """Edge ranges plus ranges across every batch boundary."""
    n = sum(BATCHES[name])
    ranges = {(0, 0), (0, n), (n, 0), (0, 1), (n - 1, 1), (1, n - 2), (n // 2, n - n // 2)}
    for boundary in np.cumsum(BATCHES[name])[:-1].tolist():
        ranges |= {(boundary - 1, 2), (boundary, 1), (boundary - 3, 7), (max(boundary - 150, 0), 300)}
    return sorted((s, length) for s, length in ranges if s >= 0 and length >= 0 and s + length <= n)


@pytest.mark.parametrize("name", NAMES)
def test_read_range(name: str) -> None:
    reader = _open(name)
    expected = _expected(name)
    for start, length in _ranges(name):
        _assert_same(
            reader.read_range(start, length).to_table(),
            expected.slice(start, length),
            f"{name} {start}+{length}",
        )


@pytest.mark.parametrize("name", NAMES)
def test_take_rows(name: str) -> None:
    reader = _open(name)
    expected = _expected(name)
    n = expected.num_rows
    rng = np.random.default_rng(n)
    cases = [
        np.array([], dtype=np.int64),
        np.array([0]),
        np.array([n - 1, 0, n - 1]),
        np.sort(rng.choice(n, size=min(n, 50), replace=False)),
        rng.integers(0, n, size=min(3 * n, 200)),
        np.arange(0, n, TAKE_GAP_ROWS + 1),  # one short range per row
        np.cumsum(BATCHES[name]) - 1,  # the last row of every batch
    ]
    for indices in cases:
        actual = reader.take_rows(indices).to_table()
        _assert_same(actual, expected.take(pa.array(indices, pa.int64())), f"{name} take {indices}")


@given(data=st.data())
def test_any_range_and_take(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(["nested", "strings", "primitives"]))
    reader, expected = _open(name), _expected(name)
    n = expected.num_rows
    start = data.draw(st.integers(0, n))
    length = data.draw(st.integers(0, n - start))
    _assert_same(reader.read_range(start, length).to_table(), expected.slice(start, length), name)
    indices = data.draw(st.lists(st.integers(0, n - 1), max_size=40))
    taken = reader.take_rows(np.array(indices, dtype=np.int64)).to_table()
    _assert_same(taken, expected.take(pa.array(indices, pa.int64())), name)


def test_legacy_semantics_are_pylance_s() -> None:
    """No validity in legacy files: nulls under fixed-width values and lists read as written bytes."""
    strings = _expected("strings")
    assert strings.column("required_string").null_count == 0
    assert "" in strings.column("required_string").to_pylist()
    assert "" not in strings.column("string").to_pylist()
    nested = _expected("nested")
    assert nested.column("list_int32").null_count == 0
    assert nested.column("struct").null_count == 0
    assert _expected("primitives").column("int32").null_count == 0
    cities = _expected("dictionaries").column("dict_int8_string").chunk(0).dictionary
    assert cities.null_count == 1, "an empty dictionary value reads as null"


@pytest.mark.parametrize("name", NAMES)
def test_metadata(name: str) -> None:
    reader = _open(name)
    metadata = reader.metadata()
    assert (metadata.major_version, metadata.minor_version) == (0, 2)
    assert metadata.num_rows == reader.num_rows
    assert metadata.global_buffers == []
    assert all(len(column.pages) == len(BATCHES[name]) for column in metadata.columns)
    top = metadata.columns[0]
    extra = 1 if top.pages[0].encoding == "list" else 0  # list pages hold lists + 1 offsets
    assert [page.length - extra for page in top.pages] == BATCHES[name]
    with pytest.raises(UnsupportedFeatureError):
        reader.file_statistics()
    with pytest.raises(IndexError):
        reader.read_global_buffer(0)


def test_nested_pages_by_field_id() -> None:
    """Struct runs are empty; list children have one page per batch of their own length."""
    metadata = _open("nested").metadata()
    layouts = {page.encoding for column in metadata.columns for page in column.pages}
    assert {"list", "struct", "plain", "var_binary"} <= layouts
    struct_pages = [c.pages for c in metadata.columns if c.pages[0].encoding == "struct"]
    assert struct_pages and all(p.length == 0 for pages in struct_pages for p in pages)


# --------------------------------------------------------------------------- datasets


@pytest.fixture
def legacy_dataset(tmp_path: Path) -> Path:
    target = tmp_path / "legacy.lance"
    shutil.copytree(DATASETS_DIR / "legacy01_basic.lance", target)
    return target


def test_dataset_scan_filter_take_count(legacy_dataset: Path) -> None:
    ds = lance_ops.dataset(str(legacy_dataset))
    expected = read_expected(DATASETS_DIR / "legacy01_basic.expected" / f"v{ds.version}.parquet")
    assert ds.data_storage_version == "0.1"
    assert len(ds.get_fragments()) > 1
    assert any(f.deletion_file() for f in ds.get_fragments())
    mask = pc.and_(pc.greater_equal(expected.column("id"), 500), pc.equal(expected.column("city"), "Lima"))
    wanted = expected.filter(mask)
    _assert_same(ds.to_table(filter="id >= 500 AND city = 'Lima'"), wanted, "filter")
    assert ds.count_rows("id >= 500 AND city = 'Lima'") == wanted.num_rows
    columns = ["address", "tags", "id"]
    _assert_same(ds.to_table(columns=columns), expected.select(columns), "projection")
    indices = [expected.num_rows - 1, 3, 0, 400]
    _assert_same(
        ds.take(indices, columns=["vec", "name"]), expected.select(["vec", "name"]).take(indices), "take"
    )
    scanned = pa.Table.from_batches(list(ds.to_batches(batch_size=50)))
    _assert_same(scanned, expected, "batches")


def test_writing_to_pylance_legacy_dictionary_dataset(legacy_dataset: Path, tmp_path: Path) -> None:
    """pylance's legacy dataset with dictionary columns (their values in its manifest file) takes
    our appends and overwrites, and its rows make a new legacy dataset; pylance reads every one
    (tests/file/test_legacy_dictionaries.py has the rest)."""
    uri = str(legacy_dataset)
    data = lance_ops.dataset(uri).head(3)
    assert any(pa.types.is_dictionary(t) for t in data.schema.types)
    before = lance.dataset(uri).to_table()
    lance_ops.write_dataset(data, uri, mode="append")
    assert lance.dataset(uri).to_table() == pa.concat_tables([before, data])
    lance_ops.write_dataset(data, uri, mode="overwrite")
    lance_ops.write_dataset(data, str(tmp_path / "new.lance"), data_storage_version="legacy")
    for written in (uri, str(tmp_path / "new.lance")):
        assert lance.dataset(written).data_storage_version == "0.1"
        assert lance.dataset(written).to_table() == data
        assert lance_ops.dataset(written).to_table() == data
    for version in ("0.1", "legacy"):
        with pytest.raises(UnsupportedFeatureError, match="LegacyFileWriter"):
            LanceFileWriter(str(tmp_path / "x.lance"), data.schema, version=version)
    assert not (tmp_path / "x.lance").exists()


# --------------------------------------------------------------------------- corrupt tails


def _copy(tmp_path: Path, name: str = "rows_1") -> bytearray:
    return bytearray((LEGACY_DIR / f"{name}.lance").read_bytes())


def _read(tmp_path: Path, data: bytes) -> pa.Table:
    path = tmp_path / "bad.lance"
    path.write_bytes(data)
    return LanceFileReader(str(path)).read_all().to_table()


def test_truncated_legacy_file(tmp_path: Path) -> None:
    data = _copy(tmp_path)
    with pytest.raises(CorruptFileError):
        _read(tmp_path, bytes(data[-100:]))


def test_metadata_block_out_of_range(tmp_path: Path) -> None:
    data = _copy(tmp_path)
    data[-16:-8] = struct.pack("<Q", len(data) + 5)
    with pytest.raises(CorruptFileError, match="outside the file"):
        _read(tmp_path, bytes(data))


def test_page_table_pointing_outside(tmp_path: Path) -> None:
    reader = _open("rows_1")
    position = int(reader._legacy.metadata.page_table_position)
    data = _copy(tmp_path)
    data[position : position + 8] = struct.pack("<q", len(data) * 4)
    with pytest.raises(CorruptFileError, match="page table"):
        _read(tmp_path, bytes(data))


def _page_entry(name: str, field: str) -> tuple[int, int, int]:
    """(page position, value count, byte position of the page table entry) of ``field``, batch 0."""
    reader = _open(name)
    field_id = {f.name: f.id for f in reader._legacy.fields}[field]
    pages = reader._legacy.pages
    index = (field_id - pages.min_field_id) * pages.entries.shape[1]
    position, length = pages.page(field_id, 0)
    return position, length, int(reader._legacy.metadata.page_table_position) + 16 * index


def test_corrupt_pages(tmp_path: Path) -> None:
    position, _, _ = _page_entry("rows_1", "name")
    data = _copy(tmp_path)
    data[position : position + 8] = struct.pack("<q", -5)
    with pytest.raises(CorruptFileError, match="var-binary positions"):
        _read(tmp_path, bytes(data))
    _, _, entry = _page_entry("rows_1", "tags")
    data = _copy(tmp_path)
    data[entry + 8 : entry + 16] = struct.pack("<q", 1)  # one offset: no room for the list's end
    with pytest.raises(CorruptFileError, match="values"):
        _read(tmp_path, bytes(data))


def test_file_without_embedded_schema(tmp_path: Path) -> None:
    """Only files that carry their schema (all pylance 14 writes) can be read on their own."""
    data = bytes(_copy(tmp_path))
    metadata = _open("rows_1")._legacy.metadata
    metadata.manifest_position = 0
    block = metadata.SerializeToString()
    tail = struct.pack("<I", len(block)) + block + struct.pack("<QHH4s", len(data) - 16, 0, 2, b"LANC")
    with pytest.raises(UnsupportedFeatureError, match="embedded schema"):
        _read(tmp_path, data[:-16] + tail)


# --------------------------------------------------------------------------- live pylance


_TYPES = {
    "int16": pa.int16(),
    "float64": pa.float64(),
    "bool": pa.bool_(),
    "string": pa.string(),
    "large_binary": pa.large_binary(),
    "list": pa.list_(pa.int32()),
    "large_list_str": pa.large_list(pa.string()),
    "fsl": pa.list_(pa.float32(), 3),
    "struct": pa.struct([("a", pa.int64()), ("b", pa.list_(pa.string()))]),
    "dict": pa.dictionary(pa.int16(), pa.string()),
    "timestamp": pa.timestamp("ns", tz="UTC"),
}


def _column(type_name: str, n: int, seed: int) -> pa.Array:
    rng = np.random.default_rng(seed)
    ids = np.arange(n)
    values = {
        "int16": lambda: pa.array(rng.integers(-500, 500, size=n).astype(np.int16)),
        "float64": lambda: pa.array(rng.normal(size=n)),
        "bool": lambda: pa.array(rng.random(n) < 0.5),
        "string": lambda: pa.array(["" if i % 4 == 0 else "v" * int(i % 9) for i in ids], mask=ids % 5 == 0),
        "large_binary": lambda: pa.array([bytes(int(i % 7)) for i in ids], pa.large_binary()),
        "list": lambda: pa.array(
            [None if i % 6 == 0 else list(range(int(i % 4))) for i in ids], pa.list_(pa.int32())
        ),
        "large_list_str": lambda: pa.array([[str(i)] * int(i % 3) for i in ids], pa.large_list(pa.string())),
        "fsl": lambda: pa.FixedSizeListArray.from_arrays(
            pa.array(rng.normal(size=3 * n).astype(np.float32)), 3
        ),
        "struct": lambda: pa.array(
            [{"a": int(i), "b": [str(i)] * int(i % 2)} for i in ids], _TYPES["struct"]
        ),
        "dict": lambda: pa.DictionaryArray.from_arrays(
            pa.array(ids % 3, pa.int16()), pa.array(["", "yy", "zzz"])
        ),
        "timestamp": lambda: pa.array(ids * 10**9, pa.timestamp("ns", tz="UTC")),
    }
    return values[type_name]()


@pytest.mark.interop
@given(
    types=st.lists(st.sampled_from(sorted(_TYPES)), min_size=1, max_size=4, unique=True),
    n=st.sampled_from([1, 2, 7, 255, 1023, 1024, 1025]),
    group=st.sampled_from([1, 3, 100, 1024]),
    seed=st.integers(0, 2**16),
)
def test_pylance_written_legacy_reads_back(
    tmp_path_factory: pytest.TempPathFactory, types: list[str], n: int, group: int, seed: int
) -> None:
    lance = pytest.importorskip("lance")
    uri = tmp_path_factory.mktemp("legacy") / "ds.lance"
    table = pa.table({name: _column(name, n, seed) for name in types})
    written = lance.write_dataset(
        table, uri, data_storage_version="legacy", max_rows_per_group=group, max_rows_per_file=600
    )
    expected = lance.dataset(uri).to_table()  # read from disk, like lance_ops
    ds = lance_ops.dataset(str(uri))
    _assert_same(ds.to_table(), expected, "dataset")
    rng = np.random.default_rng(seed)
    indices = rng.integers(0, n, size=min(n, 20)).tolist()
    _assert_same(ds.take(indices), expected.take(indices), "take")
    fragment = written.get_fragments()[0]
    reader = LanceFileReader(str(uri / "data" / fragment.data_files()[0].path))
    rows = fragment.count_rows()
    _assert_same(reader.read_all().to_table(), expected.slice(0, rows), "file")
    start = int(rng.integers(0, rows))
    _assert_same(
        reader.read_range(start, rows - start).to_table(), expected.slice(start, rows - start), "range"
    )
