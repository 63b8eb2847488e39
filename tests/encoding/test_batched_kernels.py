"""Batched fast paths agree with their one-at-a-time definitions.

* ``decompress_chunks`` (Flat, Variable, FSST, InlineBitpacking, OutOfLineBitpacking) equals the
  concatenation of per-chunk ``decompress`` calls;
* ``pack_out_of_line_slices`` writes what ``OutOfLineBitpackingCompressor`` writes per slice;
* the compiled FSST coder and decoder round-trip and reject corrupt codes;
* decoders given :class:`ChunkSpans` (chunks cut from one array, with gaps) read the same as
  given one buffer per chunk, and ``gather_spans`` equals slicing span by span;
* ``copy_spans`` (mini-block chunk assembly) equals slice assignment span by span and rejects
  spans outside either array.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lance_ops.encoding.compression import bitpacking, flat, fsst, variable
from lance_ops.encoding.compression.base import ChunkSpans, Context, decompressor_for, gather_spans
from lance_ops.encoding.data import FixedWidthBlock, VariableWidthBlock
from lance_ops.encoding.kernels import copy_spans
from lance_ops.errors import CorruptFileError
from tests.encoding.compression_helpers import split_chunks


def _variable_block(values: list[bytes], large: bool = False) -> VariableWidthBlock:
    offsets = np.concatenate(([0], np.cumsum([len(v) for v in values]))).astype(
        np.uint64 if large else np.uint32
    )
    return VariableWidthBlock(offsets, np.frombuffer(b"".join(values), np.uint8).copy(), len(values))


def _strings(block: VariableWidthBlock) -> list[bytes]:
    offs = np.asarray(block.offsets, np.int64)
    data = np.asarray(block.data).tobytes()
    return [data[a:b] for a, b in zip(offs[:-1], offs[1:], strict=True)]


def _spans(buffers: list, gap: int = 5) -> ChunkSpans:
    """``buffers`` laid out in one array with ``gap`` filler bytes before each."""
    raws = [np.frombuffer(bytes(b), np.uint8) for b in buffers]
    sizes = np.array([len(r) for r in raws], np.int64)
    starts = np.cumsum(sizes + gap) - sizes
    blob = np.full(int(starts[-1] + sizes[-1]) if len(raws) else 0, 0xFE, np.uint8)
    for start, raw in zip(starts.tolist(), raws, strict=True):
        blob[start : start + len(raw)] = raw
    return ChunkSpans(blob, starts, sizes)


def _same_block(a, b) -> None:
    assert a.num_values == b.num_values
    if isinstance(a, VariableWidthBlock):
        assert _strings(a) == _strings(b)
    else:
        width = a.bits_per_value // 8
        assert np.asarray(a.data)[: a.num_values * width].tobytes() == (
            np.asarray(b.data)[: b.num_values * width].tobytes()
        )


def _batched_equals_per_chunk(compressor, block) -> None:
    compressed, desc = compressor.compress(block)
    dec = decompressor_for(Context.MINIBLOCK, desc)
    chunks = split_chunks(compressed)
    one_by_one = [dec.decompress(bufs, n) for bufs, n in chunks]
    together = dec.decompress_chunks([bufs[0] for bufs, _ in chunks], [n for _, n in chunks])
    assert together.num_values == sum(n for _, n in chunks)
    if isinstance(together, VariableWidthBlock):
        assert _strings(together) == [s for b in one_by_one for s in _strings(b)]
    else:
        width = together.bits_per_value // 8
        expected = b"".join(np.asarray(b.data)[: b.num_values * width].tobytes() for b in one_by_one)
        assert np.asarray(together.data)[: together.num_values * width].tobytes() == expected
    counts = [n for _, n in chunks]
    for gap in (0, 3, 600):
        _same_block(dec.decompress_chunks(_spans([bufs[0] for bufs, _ in chunks], gap), counts), together)


words = st.sampled_from([b"lance", b"ops", b" ", b"\xff", b"", b"columnar", b"42"])
texts = st.lists(st.lists(words, max_size=20).map(b"".join), min_size=1, max_size=3000)


@settings(max_examples=30, deadline=None)
@given(values=texts, large=st.booleans())
def test_variable_and_fsst_chunks(values: list[bytes], large: bool) -> None:
    block = _variable_block(values, large)
    _batched_equals_per_chunk(variable.VariableCompressor(), block)
    _batched_equals_per_chunk(fsst.FsstCompressor(), block)


@pytest.mark.parametrize("n", [1, 1023, 1024, 1025, 5000])
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8])
def test_fixed_chunks(n: int, dtype: type) -> None:
    values = (np.arange(n) * 7919 % 1000).astype(dtype)
    block = FixedWidthBlock.from_values(values)
    bits = np.dtype(dtype).itemsize * 8
    _batched_equals_per_chunk(flat.FlatCompressor(), block)
    _batched_equals_per_chunk(bitpacking.InlineBitpackingCompressor(bits), block)


def _slices(draw_sizes: list[int]) -> tuple[np.ndarray, np.ndarray]:
    stops = np.cumsum(draw_sizes)
    return stops - np.asarray(draw_sizes), stops


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(
        st.sampled_from([0, 1, 7, 24, 100, 512, 1000, 1023, 1024, 1025, 2048, 3000]), min_size=1, max_size=12
    ),
    width=st.integers(1, 16),
    seed=st.integers(0, 2**16),
)
def test_out_of_line_slices(sizes: list[int], width: int, seed: int) -> None:
    starts, stops = _slices(sizes)
    levels = np.random.default_rng(seed).integers(0, 1 << width, int(stops[-1])).astype(np.uint16)
    packed, desc = bitpacking.pack_out_of_line_slices(levels, starts, stops, width)
    compressor = bitpacking.OutOfLineBitpackingCompressor(16, bit_width=width)
    for data, a, b in zip(packed, starts, stops, strict=True):
        expected, expected_desc = compressor.compress(FixedWidthBlock.from_values(levels[a:b]))
        assert data == expected and desc == expected_desc
    dec = decompressor_for(Context.BLOCK, desc)
    together = dec.decompress_chunks([memoryview(d) for d in packed], list(stops - starts))
    assert np.array_equal(together.view("<u2"), levels)
    spans = _spans(packed, gap=2)
    assert np.array_equal(dec.decompress_chunks(spans, list(stops - starts)).view("<u2"), levels)


def test_fsst_repetitive_long_strings_compress() -> None:
    values = [f"{i} ".encode() * 90 for i in range(2000)]
    coded, table = fsst.fsst_encode(_variable_block(values))
    assert table.coded and len(coded.data) < 0.7 * sum(map(len, values))
    data, offs = fsst.fsst_decode(coded.data, coded.offsets, table)
    assert _strings(VariableWidthBlock(offs, data, len(values))) == values


def test_fsst_decoder_rejects_corrupt_codes() -> None:
    table = fsst.SymbolTable(np.frombuffer(b"ab\0\0\0\0\0\0", np.uint8), np.array([2], np.uint8))
    offsets = np.array([0, 2], np.int64)
    with pytest.raises(CorruptFileError, match="escape byte at the end"):
        fsst.fsst_decode(np.array([0, 0xFF], np.uint8), offsets, table)
    with pytest.raises(CorruptFileError, match="missing symbol"):
        fsst.fsst_decode(np.array([0, 7], np.uint8), offsets, table)
    data, offs = fsst.fsst_decode(np.array([0xFF, 0xFF, 0], np.uint8), np.array([0, 3], np.int64), table)
    assert data.tobytes() == b"\xffab" and offs.tolist() == [0, 3]


def test_out_of_line_slices_mixed_tails() -> None:
    # 1000 levels pack into one block (24 spare slots), 24 levels stay raw: same total as one block.
    levels = np.random.default_rng(1).integers(0, 256, 1024).astype(np.uint16)
    starts, stops = np.array([0, 1000]), np.array([1000, 1024])
    packed, desc = bitpacking.pack_out_of_line_slices(levels, starts, stops, 8)
    assert [len(p) for p in packed] == [1024, 48]
    together = decompressor_for(Context.BLOCK, desc).decompress_chunks(
        [memoryview(p) for p in packed], [1000, 24]
    )
    assert np.array_equal(together.view("<u2"), levels)


@settings(max_examples=50, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 1100), min_size=0, max_size=40),
    gaps=st.lists(st.integers(0, 9), min_size=40, max_size=40),
    shuffle=st.booleans(),
)
def test_gather_spans_equals_slicing(sizes: list[int], gaps: list[int], shuffle: bool) -> None:
    lens = np.array(sizes, np.int64)
    starts = np.cumsum(lens + np.array(gaps[: len(sizes)], np.int64)) - lens
    blob = np.random.default_rng(len(sizes)).integers(0, 256, int(starts[-1] + lens[-1]) if sizes else 0)
    blob = blob.astype(np.uint8)
    order = np.arange(len(sizes))[::-1] if shuffle else np.arange(len(sizes))
    got = gather_spans(blob, starts[order], lens[order])
    expected = b"".join(blob[a : a + n].tobytes() for a, n in zip(starts[order], lens[order], strict=True))
    assert got.tobytes() == expected


@settings(max_examples=40, deadline=None)
@given(
    bits=st.sampled_from([8, 16, 32, 64]),
    n=st.integers(1, 5000),
    width=st.integers(0, 64),
    seed=st.integers(0, 2**16),
)
def test_inline_decode_at_positions(bits: int, n: int, width: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    width = min(width, bits)
    values = rng.integers(0, 2**63, n, dtype=np.uint64) >> np.uint64(64 - width) if width else np.zeros(n)
    block = FixedWidthBlock.from_values(values.astype(f"<u{bits // 8}"))
    compressed, desc = bitpacking.InlineBitpackingCompressor(bits).compress(block)
    dec = decompressor_for(Context.MINIBLOCK, desc)
    chunks = split_chunks(compressed)
    buffers, counts = [bufs[0] for bufs, _ in chunks], [c for _, c in chunks]
    positions = np.sort(rng.choice(n, min(n, 300), replace=False))
    for given_buffers in (buffers, _spans(buffers, gap=3)):
        got = dec.decompress_chunks_at(given_buffers, counts, positions)
        assert np.array_equal(got.view(f"<u{bits // 8}"), block.view(f"<u{bits // 8}")[positions])


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.sampled_from([1, 7, 24, 1000, 1023, 1024, 1025, 3000]), min_size=1, max_size=8),
    width=st.integers(0, 16),
    seed=st.integers(0, 2**16),
)
def test_out_of_line_decode_at_positions(sizes: list[int], width: int, seed: int) -> None:
    starts, stops = _slices(sizes)
    rng = np.random.default_rng(seed)
    levels = rng.integers(0, 1 << width, int(stops[-1])).astype(np.uint16)
    if width == 0:
        packed = [b"" for _ in sizes]
        dec = bitpacking.OutOfLineBitpackingDecompressor(16, 0)
    else:
        packed, desc = bitpacking.pack_out_of_line_slices(levels, starts, stops, width)
        dec = decompressor_for(Context.BLOCK, desc)
    positions = np.unique(rng.integers(0, len(levels), 200))
    got = dec.decompress_chunks_at([memoryview(p) for p in packed], list(stops - starts), positions)
    assert np.array_equal(got.view("<u2"), levels[positions])
    with pytest.raises(CorruptFileError):
        dec.decompress_chunks_at([memoryview(p) for p in packed], list(stops - starts), [len(levels)])


@settings(max_examples=50, deadline=None)
@given(
    sizes=st.lists(st.sampled_from([0, 1, 2, 7, 8, 9, 31, 64, 1000, 4097]), min_size=0, max_size=30),
    gaps=st.lists(st.integers(0, 9), min_size=30, max_size=30),
    seed=st.integers(0, 2**16),
)
def test_copy_spans_equals_slice_assignment(sizes: list[int], gaps: list[int], seed: int) -> None:
    rng = np.random.default_rng(seed)
    lens = np.array(sizes, np.int64)
    order = rng.permutation(len(sizes))  # the spans lie in the source in another order
    src_starts = np.zeros(len(sizes), np.int64)
    src_starts[order] = np.cumsum(lens[order]) - lens[order]
    src = np.frombuffer(
        rng.integers(0, 256, int(lens.sum()), dtype=np.uint8).tobytes(), np.uint8
    )  # read-only
    dst_starts = np.cumsum(lens + np.array(gaps[: len(sizes)], np.int64)) - lens
    dst = np.full(int(dst_starts[-1] + lens[-1]) if sizes else 0, 0xAB, np.uint8)
    expected = dst.copy()
    for d, s, n in zip(dst_starts.tolist(), src_starts.tolist(), sizes, strict=True):
        expected[d : d + n] = src[s : s + n]
    copy_spans(dst, dst_starts, src, src_starts, lens)
    assert dst.tobytes() == expected.tobytes()


def test_copy_spans_rejects_spans_outside_the_arrays() -> None:
    src, dst = np.arange(10, dtype=np.uint8), np.zeros(10, np.uint8)
    for dst_start, src_start, size in ((0, 5, 6), (5, 0, 6), (-1, 0, 1), (0, -1, 1), (0, 0, -1)):
        with pytest.raises(ValueError, match="outside"):
            copy_spans(dst, np.array([dst_start]), src, np.array([src_start]), np.array([size]))
    assert not dst.any()
