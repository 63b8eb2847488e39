"""The encoder's fused fast paths (L19) against their general forms: InlineBitpacking's per-chunk
widths and packing in one compiled pass (against the numpy form and a chunk-by-chunk reference
built on :func:`fastlanes_pack`)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lance_ops.encoding import _bitpack_kernels, kernels
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
