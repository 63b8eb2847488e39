"""Mini-block pages (spec §3): metadata words, chunk grammar, repetition index, random access."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lance_ops.encoding.api import FileVersion
from lance_ops.encoding.compression.bitpacking import InlineBitpackingCompressor
from lance_ops.encoding.field_decoder import make_field_decoder
from lance_ops.encoding.structural import miniblock
from lance_ops.encoding.structural.repdef import shred
from lance_ops.encoding.structural.values import to_block
from tests.encoding.harness import encode_to_memory, round_trip

V21, V22 = FileVersion.V2_1, FileVersion.V2_2


def _page(array: pa.Array, version: FileVersion) -> tuple[list[bytes], object]:
    (leaf,) = shred(array)
    compressed, desc = InlineBitpackingCompressor(32).compress(to_block(leaf.values))
    return miniblock.encode_page(leaf.levels, compressed, desc, version)


def test_metadata_words_and_first_chunk_2_1() -> None:
    buffers, layout = _page(pa.array(np.arange(5000, dtype=np.int32)), V21)
    assert buffers[0] == bytes.fromhex("1a0a1a0b1a0c1a0c100d")
    assert buffers[1][:12] == bytes.fromhex("00000405fefefefe0a000000")
    assert not layout.mini_block_layout.has_large_chunk
    assert layout.mini_block_layout.num_items == 5000


def test_metadata_words_and_first_chunk_2_2() -> None:
    buffers, layout = _page(pa.array(np.arange(5000, dtype=np.int32)), V22)
    assert buffers[0][:8] == bytes.fromhex("1a0a00001a0b0000")
    assert buffers[1][:12] == bytes.fromhex("000004050000fefe0a000000")
    assert layout.mini_block_layout.has_large_chunk


def test_chunks_are_padded_with_fe() -> None:
    buffers, _ = _page(pa.array([None, 1, 2], pa.int32()), V21)
    chunk = buffers[1]
    assert len(chunk) % 8 == 0
    # u16 num_levels, u16 def size, u16 value size, then 0xFE padding to 8 bytes.
    assert chunk[:2] == b"\x03\x00" and chunk[6:8] == b"\xfe\xfe"


def test_chunk_counts_decode() -> None:
    words = np.array([0x0A1A, 0x0B1A, 0x0D10], np.int64)
    assert miniblock.chunk_value_counts(words, 2100).tolist() == [1024, 1024, 52]


def test_repetition_index_spec_example() -> None:
    """Six rows of 3 000-3 005 int32 values, 1 024 values per chunk (spec §3.5)."""
    rows = [list(range(3000 + i)) for i in range(6)]
    arr = pa.array(rows, pa.list_(pa.int32()))
    buffers, layout = _page(arr, V21)
    index = np.frombuffer(buffers[2], "<u8").reshape(-1, 2)
    assert index[:6].tolist() == [[0, 1024], [0, 1024], [1, 72], [0, 1024], [0, 1024], [1, 143]]
    assert index[-1].tolist() == [1, 0]
    assert layout.mini_block_layout.repetition_index_depth == 1


def test_rep_index_moves_row_ending_at_chunk_boundary() -> None:
    rep = np.array([1, 0, 0, 0, 1, 0, 0, 0], np.uint16)
    assert miniblock.repetition_index(rep, 1, np.array([4, 8])).tolist() == [1, 0, 1, 0]


@pytest.mark.parametrize("version", [V21, V22], ids=str)
def test_random_access_fetches_only_needed_chunks(version: FileVersion) -> None:
    arr = pa.array(np.arange(100_000, dtype=np.int64) * 7919 % 1_000_003)
    field = pa.field("c", arr.type)
    mem, _ = encode_to_memory(field, [arr], version)
    decoder = make_field_decoder(field, mem.columns, version)
    (page,) = mem.columns[0]
    mem.fetched.clear()
    out = decoder.read(mem.fetch, np.array([5, 50_000]))
    assert out.to_pylist() == [arr[5].as_py(), arr[50_000].as_py()]
    chunk_reads = [r for r in mem.fetched if r[0] >= page.buffers[1][0]]
    assert mem.fetched[0] == page.buffers[0]
    assert len(chunk_reads) == 2
    assert sum(size for _, size in chunk_reads) < page.buffers[1][1] // 20
    mem.fetched.clear()
    decoder.read(mem.fetch, range(1000, 1100))
    assert len(mem.fetched) == 1  # metadata is cached; one chunk run


def test_list_random_access_reads_rows_spanning_chunks() -> None:
    arr = pa.array([list(range(i, i + 700)) if i % 3 else [] for i in range(40)], pa.list_(pa.int32()))
    field = pa.field("c", arr.type)
    mem, _ = encode_to_memory(field, [arr], V22)
    decoder = make_field_decoder(field, mem.columns, V22)
    for rows in ([1], [2, 3], [38, 39], [0, 17, 25]):
        assert decoder.read(mem.fetch, np.array(rows)).to_pylist() == arr.take(rows).to_pylist()


def test_2_1_chunks_stay_below_32k() -> None:
    arr = pa.array([b"x" * 200] * 64, pa.binary())
    rt = round_trip(
        arr, V21, metadata={"lance-encoding:compression": "none", "lance-encoding:minichunk-size": "65536"}
    )
    layout = rt.layouts[0][0].mini_block_layout
    assert not layout.has_large_chunk


def test_2_2_honours_large_minichunk() -> None:
    arr = pa.array([f"value-{i:06d}" for i in range(20_000)])
    meta = {"lance-encoding:compression": "none", "lance-encoding:minichunk-size": "65536"}
    rt = round_trip(arr, V22, metadata=meta, takes=[[0, 19_999]])
    page = rt.memory.columns[0][0]
    words = np.frombuffer(bytes(rt.memory.data[page.buffers[0][0] : sum(page.buffers[0])]), "<u4")
    assert int(((words[0] >> 4) + 1) * 8) > 32768


def test_dictionary_page_buffers() -> None:
    arr = pa.array([["apple", "banana", "cherry"][i % 3] for i in range(3000)])
    rt = round_trip(arr, V21, expect="mini_block_layout/dictionary", takes=[[0, 1, 2999]])
    page = rt.memory.columns[0][0]
    dictionary = bytes(rt.memory.data[page.buffers[2][0] : sum(page.buffers[2])])
    assert (
        dictionary == bytes.fromhex("200000001800000000000000050000000b00000011000000") + b"applebananacherry"
    )
    assert rt.layouts[0][0].mini_block_layout.num_dictionary_items == 3


def test_dictionary_with_lists_has_rep_index_after_dictionary() -> None:
    arr = pa.array([[i % 4, i % 4] if i % 5 else [] for i in range(3000)], pa.list_(pa.int64()))
    rt = round_trip(arr, V22, expect="mini_block_layout/dictionary", takes=[[0, 4, 5, 2999]])
    assert len(rt.memory.columns[0][0].buffers) == 4


def _ragged_lists(rng: np.random.Generator, n: int) -> pa.Array:
    """Lists of 0-1 500 int32 (so rows span chunks, and chunks hold many rows), some null."""
    lengths = np.where(rng.random(n) < 0.2, rng.integers(300, 1500, n), rng.integers(0, 6, n))
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int32)
    values = pa.array(rng.integers(0, 50_000, int(offsets[-1]), dtype=np.int32))
    valid = pa.array(rng.random(n) > 0.1)
    return pa.ListArray.from_arrays(pa.array(offsets), values, mask=pa.compute.invert(valid))


@pytest.mark.parametrize("version", [V21, V22], ids=str)
@pytest.mark.parametrize("seed", range(4))
def test_list_take_of_scattered_rows_in_one_pass(version: FileVersion, seed: int) -> None:
    """Scattered rows of list pages: runs of chunks that begin inside a row, rows ending in the
    last chunk of a run, and rows of neighbouring chunks, decoded together."""
    rng = np.random.default_rng(seed)
    arr = _ragged_lists(rng, 2000)
    nested = pa.ListArray.from_arrays(pa.array(np.arange(0, 2001, 4, dtype=np.int32)), arr)
    strings = pa.ListArray.from_arrays(arr.offsets, arr.values.cast(pa.string()), mask=arr.is_null())
    for data in (arr, nested, strings):
        field = pa.field("c", data.type)
        mem, _ = encode_to_memory(field, [data], version)
        decoder = make_field_decoder(field, mem.columns, version)
        n = len(data)
        for size in (1, 7, 60, n // 2):
            rows = np.sort(rng.choice(n, size, replace=False))
            assert decoder.read(mem.fetch, rows).equals(data.take(pa.array(rows)))
        assert decoder.read(mem.fetch, np.array([0, n - 1])).equals(data.take(pa.array([0, n - 1])))


@pytest.mark.parametrize("version", [V21, V22], ids=str)
@pytest.mark.parametrize("dtype", [pa.int8(), pa.int32(), pa.uint64(), pa.float64()], ids=str)
def test_flat_take_decodes_only_picked_positions(version: FileVersion, dtype: pa.DataType) -> None:
    """Scattered rows of nullable pages: levels and bit-packed values are read at the picked
    positions only; the result equals Arrow's take."""
    rng = np.random.default_rng(7)
    n = 20_000
    raw = rng.integers(0, 100, n).astype(dtype.to_pandas_dtype())
    arr = pa.array(raw, dtype, mask=rng.random(n) < 0.2)
    field = pa.field("c", dtype)
    mem, _ = encode_to_memory(field, [arr], version)
    decoder = make_field_decoder(field, mem.columns, version)
    for size in (1, 2, 50, 3000):
        rows = np.sort(rng.choice(n, size, replace=False))
        assert decoder.read(mem.fetch, rows).equals(arr.take(pa.array(rows)))


def _repetition_index_by_definition(rep: np.ndarray, max_rep: int, bounds: np.ndarray) -> list[int]:
    """§3.5 chunk by chunk: rows whose last level lies in the chunk, trailing levels of an open row."""
    starts = np.concatenate(([0], bounds[:-1]))
    pairs = []
    for c, (lo, hi) in enumerate(zip(starts.tolist(), bounds.tolist(), strict=True)):
        seg = rep[lo:hi] == max_rep
        hits = np.flatnonzero(seg)
        rows, partial = int(np.count_nonzero(seg[1:])), (len(seg) - int(hits[-1]) if len(hits) else len(seg))
        if c == len(bounds) - 1:
            rows, partial = rows + 1, 0
        elif partial and hi < len(rep) and rep[hi] == max_rep:
            rows, partial = rows + 1, 0
        pairs += [rows, partial]
    return pairs


@given(
    rep=st.lists(st.integers(0, 2), max_size=200).map(lambda v: np.array([2, *v], np.uint16)),
    cuts=st.lists(st.integers(0, 201), max_size=12),
)
def test_repetition_index_matches_definition(rep: np.ndarray, cuts: list[int]) -> None:
    bounds = np.array(sorted({min(c, len(rep)) for c in cuts} | {len(rep)}), np.int64)
    expected = _repetition_index_by_definition(rep, 2, bounds)
    assert miniblock.repetition_index(rep, 2, bounds).tolist() == expected
