"""Arrow dictionary-typed columns against pylance 14.0.2, both ways, plus round-trip properties.

* For every index type, value type, null placement, edge length and ``lance-encoding:*``
  option, our writer chooses the same page layouts and compressions as pylance on the same
  rows; pylance reads our file and we read pylance's, with the same dictionaries and keys.
* Hypothesis: random dictionary columns (top level and inside a list) round-trip through our
  writer and reader, and pylance reads what we wrote.
* Datasets: ``lance_ops.write_dataset`` (create + append) with dictionary columns reads back in
  ``lance.dataset``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lance_ops
from lance_ops.cli import describe_layout
from lance_ops.encoding.compression import dictionary
from lance_ops.encoding.structural.values import from_block, to_block
from lance_ops.errors import CorruptFileError, SchemaError
from lance_ops.file import LanceFileReader, LanceFileWriter

lance = pytest.importorskip("lance")
lance_file = pytest.importorskip("lance.file")

VERSIONS = ["2.1", "2.2"]
INDEX_TYPES = [
    pa.int8(),
    pa.uint8(),
    pa.int16(),
    pa.uint16(),
    pa.int32(),
    pa.uint32(),
    pa.int64(),
    pa.uint64(),
]
RNG = np.random.default_rng(5)
INT32 = pa.int32()
WORDS = pa.array([f"w{i:04d}" for i in range(300)])


def _dict(keys: Any, values: pa.Array, index: pa.DataType = INT32, mask: Any = None) -> pa.Array:
    return pa.DictionaryArray.from_arrays(pa.array(keys, index, mask=mask), values)


def _write_both(
    tmp_path: Path, batches: list[pa.Array], version: str, metadata: Any = None
) -> tuple[Path, Path]:
    schema = pa.schema([pa.field("d", batches[0].type, metadata=metadata)])
    ours, theirs = tmp_path / "ours.lance", tmp_path / "theirs.lance"
    with LanceFileWriter(str(ours), schema, version=version) as writer:
        for batch in batches:
            writer.write_batch(pa.table({"d": batch}, schema=schema))
    with lance_file.LanceFileWriter(str(theirs), schema, version=version) as writer:
        for batch in batches:
            writer.write_batch(pa.table({"d": batch}, schema=schema))
    return ours, theirs


def _layouts(path: Path) -> list[list[str]]:
    return [[describe_layout(page.layout) for page in column] for column in LanceFileReader(str(path))._pages]


def _pylance_table(path: Path) -> pa.Table:
    return lance_file.LanceFileReader(str(path)).read_all().to_table().combine_chunks()


def _garbage_under_nulls() -> pa.Array:
    """Null slots whose keys point past the dictionary (Arrow does not look at them)."""
    n = 400
    valid = np.arange(n) % 3 != 0
    keys = np.where(valid, np.arange(n) % 2, 100).astype(np.int8)
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little").tobytes())
    dtype = pa.dictionary(pa.int8(), pa.string())
    return pa.DictionaryArray.from_buffers(
        dtype, n, [bitmap, pa.py_buffer(keys.tobytes())], pa.array(["a", "b"])
    )


CASES: dict[str, tuple[list[pa.Array], dict[str, str] | None]] = {
    **{
        f"keys {t}": (
            [_dict([0, 1, 2, 3, None, 1] * 200, pa.array(["a", "bb", None, "c", "unused"]), t)],
            None,
        )
        for t in INDEX_TYPES
    },
    "out-of-range keys under nulls": ([_garbage_under_nulls()], None),
    "no nulls": ([_dict([0, 1, 2, 1] * 200, pa.array(["a", "b", "c"]))], None),
    "five rows": ([_dict([0, 1, 2, 1, 0], pa.array(["a", "b", "c"]))], None),
    "one row": ([_dict([1], pa.array(["a", "b"]), pa.int8())], None),
    "all null keys": ([_dict([0] * 300, pa.array(["a"]), mask=np.ones(300, bool))], None),
    "all null values": ([_dict([0, 1] * 300, pa.array([None, None], pa.string()))], None),
    "empty dictionary": ([_dict([0] * 5, pa.array([], pa.string()), pa.uint8(), np.ones(5, bool))], None),
    "one key value": ([_dict([1] * 500, pa.array(["a", "b"]))], None),
    "binary": ([_dict([0, 1, 2, 1] * 300, pa.array([b"a", b"\x00", b""]))], None),
    "large_string": ([_dict([0, 1, 2, 1] * 300, pa.array(["a", "b", "c"], pa.large_string()))], None),
    "large_binary": ([_dict([0, 1, 2, 1] * 300, pa.array([b"a", b"b", b"c"], pa.large_binary()))], None),
    "int64 values": ([_dict([0, 1, 2, 1] * 300, pa.array([10, 20, 30], pa.int64()))], None),
    "float32 values": ([_dict([0, 1, 2, 1] * 300, pa.array([1.5, 2, 3], pa.float32()))], None),
    "bool values": ([_dict([0, 1, 1, 0] * 100, pa.array([True, False]))], None),
    "values > 32 KiB": ([_dict([0, 1, 2, 1] * 10, pa.array(["x" * 40_000, "y" * 50_000, "z"]))], None),
    "two batches": (
        [
            _dict([0, 1] * 100, pa.array(["a", "b"]), pa.int8()),
            _dict([0, 1, 2] * 50, pa.array(["c", "a", "d"]), pa.int8()),
        ],
        None,
    ),
    **{
        f"{n} rows": ([_dict(RNG.integers(0, 5, n), pa.array(list("abcde")), pa.uint16())], None)
        for n in (1023, 1024, 1025)
    },
    **{
        f"option {key}={value}": (
            [_dict(RNG.integers(0, 300, 5000), WORDS)],
            {f"lance-encoding:{key}": value},
        )
        for key, value in [
            ("compression", "zstd"),
            ("compression", "lz4"),
            ("compression", "none"),
            ("compression", "fsst"),
            ("bss", "on"),
            ("rle-threshold", "0.9"),
            ("dict-values-compression", "zstd"),
            ("dict-values-compression", "none"),
            ("structural-encoding", "fullzip"),
            ("structural-encoding", "miniblock"),
            ("dict-divisor", "100000"),
            ("dict-size-ratio", "0.01"),
            ("minichunk-size", "512"),
        ]
    },
    "runs": ([_dict(np.repeat(np.arange(10), 500), WORDS)], None),
    "runs zstd": (
        [_dict(np.repeat(np.arange(10), 500), WORDS, pa.int64())],
        {"lance-encoding:compression": "zstd"},
    ),
    "list of dictionary": (
        [
            pa.ListArray.from_arrays(
                pa.array(np.arange(0, 401, 4), pa.int32()),
                _dict([0, 1, None, 1] * 100, pa.array(["a", None, "b"]), pa.int8()),
                mask=pa.array(np.arange(100) % 7 == 0),
            )
        ],
        None,
    ),
    "struct of dictionary": (
        [
            pa.StructArray.from_arrays(
                [_dict([0, 1, None, 1] * 100, pa.array(["a", None, "b"]), pa.int8())],
                ["x"],
                mask=pa.array(np.arange(400) % 5 == 0),
            )
        ],
        None,
    ),
}


@pytest.mark.interop
@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("case", list(CASES))
def test_same_layouts_and_rows_as_pylance(case: str, version: str, tmp_path: Path) -> None:
    batches, metadata = CASES[case]
    ours, theirs = _write_both(tmp_path, batches, version, metadata)
    assert _layouts(ours) == _layouts(theirs)
    want = _pylance_table(theirs)
    assert _pylance_table(ours).equals(want)
    assert LanceFileReader(str(theirs)).read_all().to_table().equals(want)
    assert LanceFileReader(str(ours)).read_all().to_table().equals(want)


@pytest.mark.interop
@pytest.mark.parametrize("version", VERSIONS)
def test_pylance_reads_our_ranges_and_takes(version: str, tmp_path: Path) -> None:
    n = 20_000
    words = pa.array([f"w{i:03d}" for i in range(300)] + [None])
    array = _dict(RNG.integers(0, 301, n), words, pa.int16(), RNG.random(n) < 0.05)
    path = tmp_path / "ours.lance"
    with LanceFileWriter(str(path), version=version, max_page_bytes=8000, data_cache_bytes=8000) as writer:
        for start in range(0, n, 1000):
            writer.write_batch(pa.table({"d": array.slice(start, 1000)}))
    assert len(_layouts(path)[0]) > 1
    reader = lance_file.LanceFileReader(str(path))
    assert reader.read_all().to_table().column("d").to_pylist() == array.to_pylist()
    assert reader.read_range(999, 2500).to_table().column("d").to_pylist() == array[999:3499].to_pylist()
    rows = [0, 1, 999, 1000, 7777, n - 1]
    assert reader.take_rows(rows).to_table().column("d").to_pylist() == array.take(rows).to_pylist()


@pytest.mark.interop
@pytest.mark.parametrize("version", VERSIONS)
def test_empty_file(version: str, tmp_path: Path) -> None:
    schema = pa.schema([pa.field("d", pa.dictionary(pa.uint16(), pa.string()))])
    path = tmp_path / "empty.lance"
    with LanceFileWriter(str(path), schema, version=version):
        pass
    assert lance_file.LanceFileReader(str(path)).read_all().to_table().schema.equals(schema)
    assert LanceFileReader(str(path)).read_all().to_table().equals(schema.empty_table())


# --- properties --------------------------------------------------------------------------------

VALUE_TYPES = {
    "string": lambda k: pa.array([f"v{i}" * (i % 4) for i in range(k)]),
    "binary": lambda k: pa.array([bytes([i % 256]) * (i % 3) for i in range(k)], pa.binary()),
    "large_string": lambda k: pa.array([f"v{i}" for i in range(k)], pa.large_string()),
    "int32": lambda k: pa.array(np.arange(k, dtype=np.int32) * 7),
}


@st.composite
def dictionary_arrays(draw: st.DrawFn) -> pa.Array:
    index = draw(st.sampled_from(INDEX_TYPES))
    k = draw(st.integers(0, 120))
    values = VALUE_TYPES[draw(st.sampled_from(sorted(VALUE_TYPES)))](k)
    if k and draw(st.booleans()):
        values = pa.array(values.to_pylist(), values.type, mask=np.arange(k) % draw(st.integers(2, 5)) == 0)
    n = draw(st.sampled_from([0, 1, 7, 255, 256, 1023, 1024, 1025, 2000]))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    keys = rng.integers(0, max(k, 1), n)
    null_rate = draw(st.sampled_from([0.0, 0.2, 1.0])) if k else 1.0
    array = _dict(keys, values, index, rng.random(n) < null_rate)
    if draw(st.booleans()):
        lengths = rng.integers(0, 4, n // 2 + 1)
        offsets = np.minimum(np.concatenate(([0], np.cumsum(lengths))), n).astype(np.int32)
        return pa.ListArray.from_arrays(pa.array(offsets), array.slice(0, int(offsets[-1])))
    return array


def _round_trip(array: pa.Array, version: str, path: Path) -> LanceFileReader:
    with LanceFileWriter(str(path), version=version) as writer:
        writer.write_batch(pa.table({"d": array}))
    return LanceFileReader(str(path))


@settings(max_examples=60)
@given(dictionary_arrays(), st.sampled_from(VERSIONS), st.data())
def test_round_trip(tmp_path_factory: Any, array: pa.Array, version: str, data: st.DataObject) -> None:
    reader = _round_trip(array, version, tmp_path_factory.mktemp("rt") / "f.lance")
    got = reader.read_all().to_table().column("d")
    assert got.type == array.type
    assert got.to_pylist() == array.to_pylist()
    n = len(array)
    if n:
        rows = data.draw(st.lists(st.integers(0, n - 1), max_size=30))
        taken = reader.take_rows(rows).to_table().column("d")
        assert taken.to_pylist() == array.take(pa.array(rows, pa.int64())).to_pylist()
        start = data.draw(st.integers(0, n - 1))
        assert (
            reader.read_range(start, n - start).to_table().column("d").to_pylist()
            == array[start:].to_pylist()
        )


@pytest.mark.interop
@settings(max_examples=25)
@given(dictionary_arrays(), st.sampled_from(VERSIONS))
def test_pylance_reads_random_columns(tmp_path_factory: Any, array: pa.Array, version: str) -> None:
    path = tmp_path_factory.mktemp("pl") / "f.lance"
    _round_trip(array, version, path)
    got = lance_file.LanceFileReader(str(path)).read_all().to_table().column("d")
    assert got.type == array.type
    assert got.to_pylist() == array.to_pylist()


# --- helpers and errors --------------------------------------------------------------------------


def test_normalize_nulls_moves_value_nulls_into_keys() -> None:
    array = _dict([0, 1, 3, None, 1, 2], pa.array(["a", "b", None, "c"]), pa.int8())
    out = dictionary.normalize_nulls(array)
    assert out.dictionary.to_pylist() == ["a", "b", "c"]
    assert out.indices.to_pylist() == [0, 1, 2, None, 1, None]
    assert out.type == array.type


def test_concat_joins_dictionaries_like_pylance() -> None:
    a = _dict([0, 1], pa.array(["a", "b"]), pa.int8())
    b = _dict([1, None], pa.array(["c", "a"]), pa.int8())
    out = dictionary.concat([a, b])
    assert out.dictionary.to_pylist() == ["a", "b", "c", "a"]
    assert out.to_pylist() == ["a", "b", "a", None]


def test_concat_unifies_when_the_keys_would_overflow() -> None:
    chunks = [_dict(np.arange(100), pa.array([f"{c}{i}" for i in range(100)]), pa.int8()) for c in "ab"]
    with pytest.raises(SchemaError, match="int8"):
        dictionary.concat(chunks)
    same = [_dict(np.arange(100), pa.array([f"a{i}" for i in range(100)]), pa.int8()) for _ in "ab"]
    assert dictionary.concat(same).to_pylist() == same[0].to_pylist() * 2
    # Dictionaries holding nulls (2.0 pages read empty entries so) unify too; pyarrow's own
    # unification refuses them.
    entries = [None if i == 5 else f"a{i}" for i in range(100)]
    with_nulls = [
        _dict(np.arange(100), pa.array(entries), pa.int8()),
        _dict(np.arange(100), pa.array(entries[::-1]), pa.int8()),
    ]
    with pytest.raises(pa.ArrowInvalid):
        pa.concat_arrays(with_nulls)
    out = dictionary.concat(with_nulls)
    assert out.type == with_nulls[0].type and out.to_pylist() == entries + entries[::-1]


def test_out_of_range_keys_are_corrupt() -> None:
    dtype = pa.dictionary(pa.int8(), pa.string())
    with pytest.raises(CorruptFileError):
        dictionary.to_dictionary_array(np.array([0, 3]), pa.array(["a", "b"]), dtype, None)
    out = dictionary.to_dictionary_array(
        np.array([0, 3]), pa.array(["a", "b"]), dtype, np.array([True, False])
    )
    assert out.indices.to_pylist() == [0, 0]


# --- datasets -------------------------------------------------------------------------------------


@pytest.mark.interop
def test_write_dataset_with_dictionary_read_by_pylance(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds.lance")
    first = pa.table(
        {"id": pa.array(range(40)), "d": _dict([0, 1, None, 2] * 10, pa.array(["a", None, "c"]), pa.int16())}
    )
    second = pa.table(
        {"id": pa.array(range(40, 50)), "d": _dict([0, 1] * 5, pa.array(["q", "a"]), pa.int16())}
    )
    lance_ops.write_dataset(first, uri, data_storage_version="2.1")
    lance_ops.write_dataset(second, uri, mode="append")
    theirs = lance.dataset(uri)
    assert theirs.version == 2
    assert theirs.schema.field("d").type == pa.dictionary(pa.int16(), pa.string())
    want = first["d"].to_pylist() + second["d"].to_pylist()
    assert theirs.to_table().column("d").to_pylist() == want
    assert lance_ops.dataset(uri).to_table().column("d").to_pylist() == want
    assert lance_ops.dataset(uri).manifest.schema.fields[1].dictionary is not None
    # pylance appends to our dataset and we read its fragment back.
    lance.write_dataset(second, uri, mode="append")
    assert lance_ops.dataset(uri).to_table().column("d").to_pylist() == want + second["d"].to_pylist()


def test_plain_pages_of_a_dictionary_column_decode_to_a_dictionary() -> None:
    """A page stored without a dictionary (e.g. another writer's constant page) still reads as
    a dictionary array of the column's type."""
    dtype = pa.dictionary(pa.uint8(), pa.string())
    block = to_block(pa.array(["b", "a", "b"]))
    out = from_block(block, dtype)
    assert out.type == dtype
    assert out.to_pylist() == ["b", "a", "b"]
    assert out.dictionary.to_pylist() == ["b", "a"]


@pytest.mark.interop
def test_map_of_dictionary_values_2_2(tmp_path: Path) -> None:
    items = _dict([0, 1, None, 1] * 100, pa.array(["a", None, "b"]), pa.int8())
    keys = pa.array([f"k{i % 4}" for i in range(400)])
    array = pa.MapArray.from_arrays(pa.array(np.arange(0, 401, 4), pa.int32()), keys, items)
    ours, theirs = _write_both(tmp_path, [array], "2.2")
    assert _layouts(ours) == _layouts(theirs)
    want = _pylance_table(theirs)
    assert _pylance_table(ours).equals(want)
    assert LanceFileReader(str(ours)).read_all().to_table().equals(want)
