"""The numpy forms of the encoder's kernels (:mod:`lance_ops.encoding.kernels`, used for small
inputs so that a small write does not load numba) give what the compiled kernels give, on the
same inputs: hashes, HyperLogLog coupon choices, FastLanes words and span copies."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lance_ops.encoding import _bitpack_kernels, _copy_kernels, _hash_kernels, kernels
from lance_ops.encoding.compression.bitpacking import _grid_source

SEED = 9001
# Row counts at the edges of a 1024-value block and of one byte string's 16-byte blocks.
COUNTS = st.sampled_from([0, 1, 2, 15, 16, 17, 1023, 1024, 1025, 3000])


def _strings(rng: np.random.Generator, count: int, max_len: int) -> tuple[np.ndarray, np.ndarray]:
    lengths = rng.integers(0, max_len + 1, count)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    data = rng.integers(0, 256, int(offsets[-1]), dtype=np.uint8)
    return data, offsets


@settings(max_examples=40, deadline=None)
@given(count=COUNTS, max_len=st.sampled_from([0, 7, 8, 9, 16, 33, 70]), seed=st.integers(0, 2**16))
def test_murmur3_of_byte_strings(count: int, max_len: int, seed: int) -> None:
    data, offsets = _strings(np.random.default_rng(seed), count, max_len)
    ours = np.empty(count, np.uint64), np.empty(count, np.uint64)
    compiled = np.empty(count, np.uint64), np.empty(count, np.uint64)
    kernels._numpy_murmur3_x64_128(data, offsets, SEED, *ours)
    _hash_kernels.murmur3_x64_128(data, offsets, SEED, *compiled)
    assert ours[0].tolist() == compiled[0].tolist() and ours[1].tolist() == compiled[1].tolist()


def test_murmur3_of_a_slice_ending_at_the_buffer_end() -> None:
    """A string whose last 8-byte word would run past the data (read from the padding, masked)."""
    data = np.frombuffer(b"0123456789abcdefXYZ", np.uint8)
    offsets = np.array([3, 19], np.int64)
    ours = np.empty(1, np.uint64), np.empty(1, np.uint64)
    compiled = np.empty(1, np.uint64), np.empty(1, np.uint64)
    kernels._numpy_murmur3_x64_128(data, offsets, SEED, *ours)
    _hash_kernels.murmur3_x64_128(data, offsets, SEED, *compiled)
    assert (ours[0][0], ours[1][0]) == (compiled[0][0], compiled[1][0])


@settings(max_examples=30, deadline=None)
@given(count=COUNTS, seed=st.integers(0, 2**16))
def test_murmur3_of_words(count: int, seed: int) -> None:
    words = np.random.default_rng(seed).integers(0, 2**64, count, dtype=np.uint64)
    words[: min(count, 3)] = [0, 2**64 - 1, 1][: min(count, 3)]
    ours = np.empty(count, np.uint64), np.empty(count, np.uint64)
    compiled = np.empty(count, np.uint64), np.empty(count, np.uint64)
    kernels._numpy_murmur3_x64_128_words(words, SEED, *ours)
    _hash_kernels.murmur3_x64_128_words(words, SEED, *compiled)
    assert ours[0].tolist() == compiled[0].tolist() and ours[1].tolist() == compiled[1].tolist()


def _hashes(rng: np.random.Generator, count: int, distinct: int) -> tuple[np.ndarray, np.ndarray]:
    """Hashes with repeats (``distinct`` different ones) and second halves of every leading-zero
    count, 0 (all zero: value 63) included."""
    pool1 = rng.integers(0, 2**64, max(distinct, 1), dtype=np.uint64)
    pool2 = rng.integers(0, 2**64, max(distinct, 1), dtype=np.uint64) >> rng.integers(
        0, 65, max(distinct, 1)
    ).astype(np.uint64)
    pool2[pool2 == 2**64 - 1] = 0
    pick = rng.integers(0, max(distinct, 1), count)
    return pool1[pick], pool2[pick]


@settings(max_examples=40, deadline=None)
@given(
    count=COUNTS,
    distinct=st.sampled_from([1, 5, 100, 5000]),
    lg_k=st.sampled_from([4, 12]),
    masked=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_best_coupons(count: int, distinct: int, lg_k: int, masked: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    h1, h2 = _hashes(rng, count, distinct)
    keep = rng.random(count) < 0.7 if masked else np.zeros(0, np.bool_)
    results = []
    for form in (kernels._numpy_best_coupons, _hash_kernels.best_coupons):
        best = np.zeros(1 << lg_k, np.uint8)
        first = np.full(1 << lg_k, -1, np.int64)
        reached = form(h1, h2, keep, lg_k, best, first)
        results.append((int(reached), best.tolist(), first.tolist()))
    assert results[0] == results[1]


@settings(max_examples=40, deadline=None)
@given(
    count=COUNTS,
    distinct=st.sampled_from([1, 5, 100, 5000]),
    lg_table=st.sampled_from([3, 6, 14]),
    masked=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_first_of_each_coupon(count: int, distinct: int, lg_table: int, masked: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    h1, h2 = _hashes(rng, count, distinct)
    keep = rng.random(count) < 0.7 if masked else np.zeros(0, np.bool_)
    ours = kernels._numpy_first_of_each_coupon(h1, h2, keep, lg_table)
    compiled = _hash_kernels.first_of_each_coupon(h1, h2, keep, lg_table)
    assert (ours[0].tolist(), ours[1]) == (compiled[0].tolist(), compiled[1])


@pytest.mark.parametrize("bits", [8, 16, 32, 64])
@given(blocks=st.sampled_from([0, 1, 3]), data=st.data(), seed=st.integers(0, 2**16))
@settings(max_examples=15, deadline=None)
def test_pack_blocks(bits: int, blocks: int, data: st.DataObject, seed: int) -> None:
    width = data.draw(st.integers(1, bits))
    dtype = np.dtype(f"u{bits // 8}")
    rng = np.random.default_rng(seed)
    # Values wider than ``width``: both forms mask them.
    values = rng.integers(0, 2**bits, blocks * 1024, dtype=np.uint64).astype(dtype)
    words = blocks * width * (1024 // bits)
    ours, compiled = np.zeros(words, dtype), np.zeros(words, dtype)
    kernels._numpy_pack_blocks(values, width, bits, _grid_source(bits), ours)
    _bitpack_kernels.pack_blocks(values, width, bits, _grid_source(bits), compiled)
    assert ours.tobytes() == compiled.tobytes()


@settings(max_examples=30, deadline=None)
@given(sizes=st.lists(st.integers(0, 40), max_size=20), seed=st.integers(0, 2**16))
def test_copy_spans(sizes: list[int], seed: int) -> None:
    rng = np.random.default_rng(seed)
    lens = np.array(sizes, np.int64)
    src = rng.integers(0, 256, int(lens.sum()), dtype=np.uint8)
    src_starts = np.cumsum(lens) - lens
    order = rng.permutation(len(sizes))
    dst_starts = np.zeros(len(sizes), np.int64)
    dst_starts[order] = np.cumsum(lens[order]) - lens[order]  # another order in the destination
    ours, compiled = np.zeros(len(src), np.uint8), np.zeros(len(src), np.uint8)
    kernels._numpy_copy_spans(ours, dst_starts, src, src_starts, lens)
    _copy_kernels._copy_spans(compiled, dst_starts, src, src_starts, lens)
    assert ours.tobytes() == compiled.tobytes()
