"""Property: every file we write opens in pylance 14 and reads back as the input.

Random shapes (flat types of every width, nested lists / structs / maps, Arrow dictionary
arrays, values over 32 KiB, long runs, all-null, the edge lengths) × random ``lance-encoding:*``
field metadata × 2.0 / 2.1 / 2.2. When we refuse to write a combination (a typed
:class:`LanceOpsError`), pylance must refuse it too or be unable to read back the file it
writes: silently writing a file pylance rejects is the failure this test exists to catch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lance_ops.errors import LanceOpsError
from lance_ops.file import LanceFileWriter
from tests.encoding.harness import flat_arrays, nested_arrays

pytestmark = pytest.mark.interop
lance_file = pytest.importorskip("lance.file")

OPTIONS = st.fixed_dictionaries(
    {},
    optional={
        "structural-encoding": st.sampled_from(["miniblock", "fullzip"]),
        "compression": st.sampled_from(["none", "zstd", "lz4", "fsst"]),
        "compression-level": st.sampled_from(["1", "3", "9"]),
        "bss": st.sampled_from(["on", "off", "auto"]),
        "rle-threshold": st.sampled_from(["0.1", "0.5", "0.9"]),
        "dict-divisor": st.sampled_from(["1", "2", "100"]),
        "dict-size-ratio": st.sampled_from(["0.5", "0.9", "1.0"]),
        "dict-values-compression": st.sampled_from(["none", "zstd", "lz4"]),
        "minichunk-size": st.sampled_from(["1024", "4096", "65536"]),
        "general": st.sampled_from(["on", "off"]),
        "packed": st.just("true"),
        "blob": st.just("true"),
        "dictionary": st.sampled_from(["always", "never"]),
    },
)


@st.composite
def large_values(draw: st.DrawFn) -> pa.Array:
    """A dozen or so binary / string values of 20-70 KiB, some null."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n = draw(st.integers(1, 14))
    dtype = draw(st.sampled_from([pa.binary(), pa.large_binary(), pa.large_string()]))
    sizes = rng.integers(20_000, 70_000, n)
    nulls = rng.random(n) < draw(st.sampled_from([0.0, 0.3]))
    if pa.types.is_large_string(dtype):
        return pa.array([None if z else "x" * int(s) for s, z in zip(sizes, nulls, strict=True)], dtype)
    return pa.array([None if z else rng.bytes(int(s)) for s, z in zip(sizes, nulls, strict=True)], dtype)


@st.composite
def long_runs(draw: st.DrawFn) -> pa.Array:
    """Runs longer than 255 (RLE run-length limit) of a few integers, optionally null runs."""
    lengths = draw(st.lists(st.integers(1, 700), min_size=1, max_size=6))
    values = np.repeat(np.arange(len(lengths), dtype=np.int64) * 7, lengths)
    arr = pa.array(values, draw(st.sampled_from([pa.int8(), pa.int32(), pa.uint64()])))
    if draw(st.booleans()):
        return arr
    mask = np.repeat(np.arange(len(lengths)) % 2 == 1, lengths)
    return pa.array(values, arr.type, mask=mask)


@st.composite
def fixed_lists(draw: st.DrawFn) -> pa.Array:
    n = draw(st.sampled_from([0, 1, 7, 1023, 1025]))
    size = draw(st.sampled_from([1, 3, 16]))
    values = pa.array(np.arange(n * size, dtype=np.float32))
    mask = pa.array(np.arange(n) % 5 == 2) if draw(st.booleans()) else None
    return pa.FixedSizeListArray.from_arrays(values, size, mask=mask)


@st.composite
def dictionary_arrays(draw: st.DrawFn) -> pa.Array:
    """Arrow dictionary arrays (nulls in keys and values), alone or under a list / struct."""
    n = draw(st.sampled_from([0, 1, 7, 300, 1025]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    index_type = draw(
        st.sampled_from([pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint32()])
    )
    value_type = draw(st.sampled_from([pa.string(), pa.binary(), pa.large_string()]))
    distinct = draw(st.integers(1, 100))
    entries = [None if draw(st.booleans()) and i == 0 else f"w{i}" * (i % 5) for i in range(distinct)]
    values = pa.array([e.encode() if e is not None and value_type == pa.binary() else e for e in entries])
    keys = pa.array(
        rng.integers(0, distinct, n), index_type, mask=rng.random(n) < draw(st.sampled_from([0.0, 0.3]))
    )
    array = pa.DictionaryArray.from_arrays(keys, values.cast(value_type))
    wrap = draw(st.sampled_from(["none", "list", "struct"]))
    if wrap == "list" and n:
        return pa.ListArray.from_arrays(
            pa.array(np.arange(0, n + 1, 3).tolist() + ([n] if n % 3 else [])), array
        )
    if wrap == "struct":
        return pa.StructArray.from_arrays([array, pa.array(np.arange(n, dtype=np.int32))], names=["d", "i"])
    return array


@st.composite
def map_arrays(draw: st.DrawFn) -> pa.Array:
    rows = draw(
        st.lists(
            st.lists(st.tuples(st.text(max_size=3), st.integers(-5, 5) | st.none()), max_size=3) | st.none(),
            max_size=30,
        )
    )
    return pa.array(rows, pa.map_(pa.string(), pa.int32()))


PAGE_BYTES = st.sampled_from([None, 1024, 16384])
ARRAYS = st.one_of(
    flat_arrays(),
    nested_arrays(),
    large_values(),
    long_runs(),
    fixed_lists(),
    dictionary_arrays(),
    map_arrays(),
)


def _write(writer_class: Any, path: Path, table: pa.Table, version: str, page_bytes: int | None) -> None:
    sizes = {"max_page_bytes": page_bytes, "data_cache_bytes": page_bytes} if page_bytes else {}
    with writer_class(str(path), table.schema, version=version, **sizes) as writer:
        half = table.num_rows // 2
        for part in (table.slice(0, half), table.slice(half)) if page_bytes else (table,):
            writer.write_batch(part)


def _pylance_round_trips(table: pa.Table, version: str, path: Path, page_bytes: int | None) -> bool:
    """Whether pylance writes ``table`` and reads its own file back (a file pylance writes but
    cannot read is one we rightly refuse to write)."""
    try:
        _write(lance_file.LanceFileWriter, path, table, version, page_bytes)
        back = lance_file.LanceFileReader(str(path)).read_all().to_table()
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException:  # pylance's Rust panics surface as a BaseException
        return False
    return _same(back.column(0), table.column(0))


def _same(got: pa.ChunkedArray, want: pa.ChunkedArray) -> bool:
    """Equal values of the same type (pylance may give a dictionary column other chunks and
    dictionaries than the input's: compared by value there)."""
    if got.type != want.type:
        return False
    if pa.types.is_dictionary(got.type) or "dictionary" in str(got.type):
        return got.to_pylist() == want.to_pylist()
    return got.equals(want)


@settings(max_examples=300)  # a few seconds: most examples are small files
@given(array=ARRAYS, options=OPTIONS, version=st.sampled_from(["2.0", "2.1", "2.2"]), page_bytes=PAGE_BYTES)
def test_pylance_reads_every_file_we_write(
    tmp_path_factory: pytest.TempPathFactory,
    array: pa.Array,
    options: dict[str, str],
    version: str,
    page_bytes: int | None,
) -> None:
    """``page_bytes`` set: the rows go in as two batches into pages of at most that size."""
    directory = tmp_path_factory.mktemp("prop")
    field = pa.field("c", array.type, metadata={f"lance-encoding:{k}": v for k, v in options.items()} or None)
    table = pa.Table.from_arrays([array], schema=pa.schema([field]))
    path = directory / "ours.lance"
    try:
        _write(LanceFileWriter, path, table, version, page_bytes)
    except LanceOpsError:
        assert not _pylance_round_trips(table, version, directory / "theirs.lance", page_bytes), (
            "we refused a file pylance writes and reads back"
        )
        return
    reader = lance_file.LanceFileReader(str(path))
    got = reader.read_all().to_table()
    assert got.num_rows == len(array)
    assert _same(got.column(0), pa.chunked_array([array], array.type)), "pylance read_all differs"
    if len(array):
        picks = sorted({0, len(array) // 2, len(array) - 1})
        taken = reader.take_rows(picks).to_table().column(0)
        assert _same(taken, pa.chunked_array([array.take(pa.array(picks))])), "pylance take_rows differs"
