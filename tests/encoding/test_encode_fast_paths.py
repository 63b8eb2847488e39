"""The encoder's fused fast paths (L19) against their general forms: InlineBitpacking's per-chunk
widths and packing in one compiled pass (against the numpy form and a chunk-by-chunk reference
built on :func:`fastlanes_pack`); distinct sketches of numbers hashed as they are reduced
(against the representatives chosen from arrays of hashes, and the sketch's bytes); float pages'
bounds and NaN counts in one pass (against the general statistics functions)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lance_ops.encoding import _bitpack_kernels, _hash_kernels, _minmax_kernels, kernels, sketch, statistics
from lance_ops.encoding.compression.bitpacking import BLOCK_VALUES, _grid_source, fastlanes_pack

COUNTS = st.sampled_from([0, 1, 2, 7, 1023, 1024, 1025, 2048, 3000])


def _chunked_values(rng: np.random.Generator, count: int, bits: int, widths: list[int]) -> np.ndarray:
    """``count`` unsigned values whose chunk k holds values of at most ``widths[k % len]`` bits,
    each chunk reaching its width at least once (a 0-width chunk: all zeros)."""
    dtype = np.dtype(f"u{bits // 8}")
    values = np.zeros(count, dtype)
    for k, start in enumerate(range(0, count, BLOCK_VALUES)):
        width = widths[k % len(widths)]
        n = min(BLOCK_VALUES, count - start)
        if width:
            chunk = (
                rng.integers(0, 2**width, n, dtype=np.uint64)
                if width < 64
                else rng.integers(0, 2**63, n, dtype=np.uint64) * 2 + 1
            )
            chunk[rng.integers(0, n)] = (1 << width) - 1 if width < 64 else 2**64 - 1
            values[start : start + n] = chunk.astype(dtype)
    return values


def _reference_inline(values: np.ndarray) -> bytes:
    """InlineBitpacking chunk by chunk: width word, then the padded chunk packed at its width."""
    out = []
    for start in range(0, len(values), BLOCK_VALUES):
        chunk = np.zeros(BLOCK_VALUES, values.dtype)
        part = values[start : start + BLOCK_VALUES]
        chunk[: len(part)] = part
        width = int(np.bitwise_or.reduce(chunk.astype(np.uint64))).bit_length()
        out.append(np.array([width], values.dtype).tobytes())
        out.append(fastlanes_pack(chunk.reshape(1, -1), width).tobytes())
    return b"".join(out)


@pytest.mark.parametrize("bits", [8, 16, 32, 64])
@given(count=COUNTS, data=st.data(), seed=st.integers(0, 2**16))
@settings(max_examples=20, deadline=None)
def test_inline_bitpacking_fast_path(bits: int, count: int, data: st.DataObject, seed: int) -> None:
    widths = data.draw(st.lists(st.integers(0, bits), min_size=1, max_size=3))
    values = _chunked_values(np.random.default_rng(seed), count, bits, widths)
    compiled_widths = _bitpack_kernels.chunk_widths(values)
    numpy_widths = kernels._numpy_chunk_widths(values)
    assert compiled_widths.tolist() == numpy_widths.tolist()
    expected = [widths[k % len(widths)] for k in range(len(compiled_widths))]
    assert compiled_widths.tolist() == expected
    size = int((1 + compiled_widths * (BLOCK_VALUES // bits)).sum())
    fast, slow = np.zeros(size, values.dtype), np.zeros(size, values.dtype)
    _bitpack_kernels.inline_pack(values, compiled_widths, bits, _grid_source(bits), fast)
    kernels._numpy_inline_pack(values, numpy_widths, bits, _grid_source(bits), slow)
    assert fast.tobytes() == slow.tobytes() == _reference_inline(values)


# ---------------------------------------------------------------- distinct sketches of numbers

SKETCH_TYPES = [
    pa.int8(),
    pa.uint16(),
    pa.int32(),
    pa.uint32(),
    pa.int64(),
    pa.uint64(),
    pa.float16(),
    pa.float32(),
    pa.float64(),
    pa.date32(),
    pa.timestamp("us", "UTC"),
    pa.duration("ns"),
    pa.time32("ms"),
]
SKETCH_COUNTS = st.sampled_from([0, 1, 2, 1023, 1024, 1025, 5000, 70_000])


def _number_array(
    rng: np.random.Generator, type_: pa.DataType, count: int, distinct: int, nulls: str
) -> pa.Array:
    """``count`` values of ``type_`` drawn from ``distinct`` values (floats with NaN of both signs,
    both zeros and infinities; integers with their type's extremes); ``nulls``: none / some / all."""
    if pa.types.is_floating(type_):
        dtype = np.dtype(type_.to_pandas_dtype())
        pool = rng.normal(0, 1e3, max(distinct, 1)).astype(dtype)
        specials = np.array([np.nan, -np.nan, 0.0, -0.0, np.inf, -np.inf], dtype)
        pool[: min(len(pool), len(specials))] = specials[: len(pool)]
        values = pool[rng.integers(0, len(pool), count)]
        # NaN payloads other than the default: every NaN hashes as the canonical one.
        if dtype == np.float64 and count:
            bits = values.view(np.uint64)
            odd = rng.random(count) < 0.01
            bits[odd] = np.uint64(0x7FF0000000000001) | (bits[odd] & np.uint64(1 << 63))
        storage = pa.array(values, type_)
    else:
        storage_type = pa.int32() if type_.bit_width == 32 and not pa.types.is_integer(type_) else type_
        if not pa.types.is_integer(storage_type):
            storage_type = pa.int64()
        info = np.iinfo(np.dtype(storage_type.to_pandas_dtype()))
        pool = rng.integers(
            info.min,
            info.max,
            max(distinct, 1),
            dtype=np.dtype(storage_type.to_pandas_dtype()),
            endpoint=True,
        )
        pool[:2] = [info.min, info.max][: len(pool[:2])]
        storage = pa.array(pool[rng.integers(0, len(pool), count)], storage_type)
    mask = {"none": None, "some": rng.random(count) < 0.2, "all": np.ones(count, bool)}[nulls]
    buffers = storage.buffers()
    if mask is not None:
        validity = pa.array(~mask).buffers()[1]
        buffers = [validity, buffers[1]]
    return pa.Array.from_buffers(type_, count, buffers, null_count=-1)


@pytest.mark.parametrize("type_", SKETCH_TYPES, ids=str)
@given(
    count=SKETCH_COUNTS,
    distinct=st.sampled_from([1, 7, 900, 5000, 1 << 20]),
    nulls=st.sampled_from(["none", "some", "all"]),
    offset=st.sampled_from([0, 3]),
    seed=st.integers(0, 2**16),
)
@settings(max_examples=12, deadline=None)
def test_sketch_representatives_fast_path(
    type_: pa.DataType, count: int, distinct: int, nulls: str, offset: int, seed: int
) -> None:
    array = _number_array(np.random.default_rng(seed), type_, count + offset, distinct, nulls).slice(offset)
    fast = sketch._representatives(array, sketch.DEFAULT_LG_K)
    general = sketch._hashed_representatives(array, sketch.DEFAULT_LG_K)
    assert fast.type == general.type and fast.null_count == 0
    # Same values in the same order (the library's HIP accumulator, in the bytes, depends on it).
    assert pa.array(fast.view(_bits_type(type_))).equals(pa.array(general.view(_bits_type(type_))))
    fed, reference = sketch.DistinctSketch(), sketch.DistinctSketch()
    fed.update(array)
    reference._pending, reference._pending_rows = [general], len(general)
    assert fed.to_bytes() == reference.to_bytes()


def _bits_type(type_: pa.DataType) -> pa.DataType:
    """An integer type of ``type_``'s width, to compare values bit for bit (NaN == NaN)."""
    return {8: pa.int8(), 16: pa.int16(), 32: pa.int32(), 64: pa.int64()}[type_.bit_width]


@given(
    count=SKETCH_COUNTS,
    distinct=st.sampled_from([1, 900, 1 << 20]),
    floats=st.booleans(),
    masked=st.booleans(),
    seed=st.integers(0, 2**16),
)
@settings(max_examples=30, deadline=None)
def test_word_coupon_kernels_forms(count: int, distinct: int, floats: bool, masked: bool, seed: int) -> None:
    """The compiled hash-as-you-go coupon kernels against their numpy forms (hash arrays, then
    the numpy coupon choices)."""
    rng = np.random.default_rng(seed)
    pool = rng.integers(0, 2**64, distinct, dtype=np.uint64)
    if floats:
        pool[:4] = np.array([np.nan, -0.0, 0.0, -np.nan]).view(np.uint64)[: len(pool[:4])]
    words = pool[rng.integers(0, distinct, count)]
    valid = rng.random(count) < 0.7 if masked else np.zeros(0, np.bool_)
    lg_k = 12
    results = []
    for compiled in (True, False):
        best = np.zeros(1 << lg_k, np.uint8)
        first = np.full(1 << lg_k, -1, np.int64)
        if compiled:
            reached = _hash_kernels.word_best_coupons(words, valid, floats, 9001, lg_k, best, first)
            index, complete = _hash_kernels.word_first_coupons(words, valid, floats, 9001, lg_k + 2)
        else:
            h1, h2 = kernels._numpy_word_hashes(words, floats, 9001)
            reached = kernels._numpy_best_coupons(h1, h2, valid, lg_k, best, first)
            index, complete = kernels._numpy_first_of_each_coupon(h1, h2, valid, lg_k + 2)
        results.append((reached, best.tolist(), first.tolist(), index.tolist(), complete))
    assert results[0] == results[1]


# ---------------------------------------------------------------- float page statistics


def _float_pages_array(
    rng: np.random.Generator, dtype: str, count: int, nulls: str, specials: str
) -> pa.Array:
    values = rng.normal(0, 10, count).astype(dtype)
    if specials == "all":  # every value special: NaN of both signs, zeros of both signs, infinities
        pool = np.array([np.nan, -np.nan, 0.0, -0.0, np.inf, -np.inf], dtype)
        values = pool[rng.integers(0, len(pool), count)]
    elif specials == "some" and count:
        at = rng.integers(0, count, max(1, count // 50))
        values[at] = np.array([np.nan, -np.nan, -0.0, 0.0], dtype)[rng.integers(0, 4, len(at))]
    elif specials == "nan":
        values[:] = np.nan
    elif specials == "zeros":  # both zeros only: bounds -0.0 and +0.0 whichever zero comes first
        values = np.where(rng.random(count) < 0.5, 0.0, -0.0).astype(dtype)
    elif specials == "nonnegative" and count:  # a zero min
        values = np.abs(values)
        values[rng.integers(0, count, max(1, count // 100))] = np.array(0.0, dtype)
    mask = {"none": None, "some": rng.random(count) < 0.1, "all": np.ones(count, bool)}[nulls]
    return pa.array(values, pa.from_numpy_dtype(np.dtype(dtype)), mask=mask, from_pandas=False)


def _bits(stats: pa.StructArray) -> list[object]:
    """Rows of statistics with float bounds as their bits (-0.0 and +0.0 differ)."""
    out = []
    for name in ("min_value", "max_value"):
        field = stats.field(name)
        width = {4: np.uint32, 8: np.uint64}[field.type.bit_width // 8]
        out.append(field.to_numpy(zero_copy_only=False).view(width).tolist())
    return [stats.field("null_count").to_pylist(), *out]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@given(
    pages=st.lists(st.sampled_from([0, 1, 7, 1023, 1024, 1025, 30_000, 70_000]), min_size=1, max_size=4),
    nulls=st.sampled_from(["none", "some", "all"]),
    specials=st.sampled_from(["none", "some", "all", "nan", "zeros", "nonnegative"]),
    offset=st.sampled_from([0, 5]),
    seed=st.integers(0, 2**16),
)
@settings(max_examples=25, deadline=None)
def test_float_page_summary_fast_path(
    dtype: str, pages: list[int], nulls: str, specials: str, offset: int, seed: int
) -> None:
    """The one-pass float bounds and NaN counts (compiled, for large arrays) against
    :func:`page_statistics` and :func:`page_nan_counts`; and the kernel itself on any page."""
    rng = np.random.default_rng(seed)
    array = _float_pages_array(rng, dtype, sum(pages) + offset, nulls, specials).slice(offset)
    stats, nans = statistics.float_page_summary(array, pages)
    assert _bits(stats) == _bits(statistics.page_statistics(array, pages))
    assert nans.tolist() == statistics.page_nan_counts(array, pages).tolist()
    values = array.to_numpy(zero_copy_only=False).astype(dtype)
    valid = (
        np.asarray(array.is_valid().to_numpy(zero_copy_only=False), bool)
        if array.null_count
        else np.zeros(0, bool)
    )
    lows, highs, positive, negative = _minmax_kernels.float_pages(values, valid, np.cumsum(pages))
    reference = statistics.page_statistics(array, pages)
    assert lows.astype(dtype).view(f"u{values.itemsize}").tolist() == _bits(reference)[1]
    assert highs.astype(dtype).view(f"u{values.itemsize}").tolist() == _bits(reference)[2]
    assert [positive.tolist(), negative.tolist()] == nans.tolist()


# ---------------------------------------------------------------- the dictionary probe near its limit


@pytest.mark.parametrize("dtype", [pa.uint64(), pa.string()])
@pytest.mark.parametrize("offset", [-2, -1, 0, 1, 2])
def test_dictionary_probe_near_the_limit_decides_as_the_exact_count(dtype: pa.DataType, offset: int) -> None:
    """A prefix whose hash-prefix bound falls just short of the limit is counted by its whole
    hashes: the probe says "too many" exactly when the exact count reaches the limit (the bench
    table's ``c`` column: 100,003 distinct values against a limit of 100,001)."""
    from lance_ops.encoding.compression_strategy import (
        _distinct_hashes,
        _distinct_lower_bound,
        _prefix_hashes,
        _too_many_distinct,
    )

    limit = 100_001
    distinct = limit + offset
    ids = np.arange(125_001) % distinct
    array = pa.array(ids.astype(np.uint64)) if dtype == pa.uint64() else pa.array([f"v{i}" for i in ids])
    bound = _distinct_lower_bound(array)
    assert bound is not None and limit * 0.75 <= bound < limit  # the near-limit case
    hashes = _prefix_hashes(array)
    assert hashes is not None and _distinct_hashes(hashes) == distinct == len(array.unique())
    assert _too_many_distinct(array, limit) == (distinct >= limit)
    assert _distinct_hashes(np.zeros(0, np.uint64)) == 0
