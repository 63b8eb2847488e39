"""Property: every file we write opens in pylance 14 and reads back as the input.

Random shapes (flat types of every width, nested lists / structs, values over 32 KiB, long
runs, all-null, the edge lengths) × random ``lance-encoding:*`` field metadata × 2.1 / 2.2.
When we refuse to write a combination (a typed :class:`LanceOpsError`), pylance must refuse
it too: silently writing a file pylance rejects is the failure this test exists to catch.
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


PAGE_BYTES = st.sampled_from([None, 1024, 16384])
ARRAYS = st.one_of(flat_arrays(), nested_arrays(), large_values(), long_runs(), fixed_lists())


def _write(writer_class: Any, path: Path, table: pa.Table, version: str, page_bytes: int | None) -> None:
    sizes = {"max_page_bytes": page_bytes, "data_cache_bytes": page_bytes} if page_bytes else {}
    with writer_class(str(path), table.schema, version=version, **sizes) as writer:
        half = table.num_rows // 2
        for part in (table.slice(0, half), table.slice(half)) if page_bytes else (table,):
            writer.write_batch(part)


def _pylance_accepts(table: pa.Table, version: str, path: Path, page_bytes: int | None) -> bool:
    try:
        _write(lance_file.LanceFileWriter, path, table, version, page_bytes)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException:  # pylance's Rust panics surface as a BaseException
        return False
    return True


@settings(max_examples=300)  # a few seconds: most examples are small files
@given(array=ARRAYS, options=OPTIONS, version=st.sampled_from(["2.1", "2.2"]), page_bytes=PAGE_BYTES)
def test_pylance_reads_every_file_we_write(
    tmp_path_factory: pytest.TempPathFactory,
    array: pa.Array,
    options: dict[str, str],
    version: str,
    page_bytes: int | None,
) -> None:
    """``page_bytes`` set: the rows go in as two batches into pages of at most that size."""
    directory = tmp_path_factory.mktemp("prop")
    if not pa.types.is_struct(array.type):
        # pylance 14 cannot read back its own file when "packed" sits on a list field (its
        # reader expects one packed column, its writer writes one per child); we match the writer.
        options = {k: v for k, v in options.items() if k != "packed"}
    field = pa.field("c", array.type, metadata={f"lance-encoding:{k}": v for k, v in options.items()} or None)
    table = pa.Table.from_arrays([array], schema=pa.schema([field]))
    path = directory / "ours.lance"
    try:
        _write(LanceFileWriter, path, table, version, page_bytes)
    except LanceOpsError:
        assert not _pylance_accepts(table, version, directory / "theirs.lance", page_bytes), (
            "we refused a file pylance writes"
        )
        return
    reader = lance_file.LanceFileReader(str(path))
    got = reader.read_all().to_table()
    assert got.num_rows == len(array)
    assert got.column(0).equals(pa.chunked_array([array], array.type)), "pylance read_all differs"
    if len(array):
        picks = sorted({0, len(array) // 2, len(array) - 1})
        taken = reader.take_rows(picks).to_table().column(0)
        assert taken.equals(pa.chunked_array([array.take(pa.array(picks))])), "pylance take_rows differs"
