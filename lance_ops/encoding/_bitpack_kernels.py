"""Compiled (numba) FastLanes bit-packing of whole 1024-value blocks.

The numpy form (a (blocks, T, lanes) transpose of the values, then one shift-and-or pass over
all blocks per row of the grid) moves every value through several temporaries; this loop reads
each value once, at its grid position, and ors it into its output word(s). Same words. Imported
on first use, so ``import lance_ops`` does not load numba.
"""

from __future__ import annotations

import numpy as np
from numba import njit, uint64


@njit(cache=True, nogil=True, boundscheck=False)
def pack_blocks(values: np.ndarray, width: int, bits: int, source: np.ndarray, out: np.ndarray) -> None:
    """Or the ``width``-bit FastLanes packing of ``values`` (whole 1024-value blocks of
    ``bits``-bit unsigned values, flat) into ``out`` (zeroed, flat, ``width * 1024 / bits``
    words per block, same dtype); ``source[row * lanes + lane]`` is the position in its block
    of the value at that grid cell. Values must fit in ``width`` bits or are masked."""
    # Unsigned indices throughout: numba adds no negative-index wraparound to the accesses.
    lanes = uint64(1024 // bits)
    words = uint64(width) * lanes
    mask = ~uint64(0) if width >= 64 else (uint64(1) << uint64(width)) - uint64(1)
    wide = uint64(bits)
    for c in range(values.shape[0] // 1024):
        base, out_base = uint64(c) * uint64(1024), uint64(c) * words
        for r in range(bits):
            at = uint64(r) * uint64(width)
            word, shift = at // wide, at % wide
            spill = shift + uint64(width) > wide
            row = uint64(r) * lanes
            first = out_base + word * lanes
            for lane in range(lanes):
                v = uint64(values[base + uint64(source[row + uint64(lane)])]) & mask
                out[first + uint64(lane)] |= v << shift
                if spill:
                    out[first + lanes + uint64(lane)] |= v >> (wide - shift)


@njit(cache=True, nogil=True, boundscheck=False)
def chunk_widths(values: np.ndarray) -> np.ndarray:
    """Bit length of the OR of each 1024-value chunk of ``values`` (unsigned; the last chunk may
    be short), without padding a copy of the values to whole chunks."""
    n = len(values)
    out = np.zeros((n + 1023) // 1024, dtype=np.int64)
    for c in range(len(out)):
        acc = uint64(0)
        for v in values[c * 1024 : min(n, c * 1024 + 1024)]:  # a slice: no index checks, vectorised
            acc |= uint64(v)
        width = 0
        while acc:
            acc >>= uint64(1)
            width += 1
        out[c] = width
    return out


@njit(cache=True, nogil=True, boundscheck=False)
def inline_pack(
    values: np.ndarray, widths: np.ndarray, bits: int, source: np.ndarray, out: np.ndarray
) -> None:
    """InlineBitpacking of ``values`` (unsigned ``bits``-bit, flat, any count) into ``out`` (zeroed,
    same dtype, ``sum(1 + widths * 1024 / bits)`` words): per 1024-value chunk its width word,
    then its FastLanes words at that width (``widths``: :func:`chunk_widths`); the last chunk's
    missing values are zeros. ``source`` as for :func:`pack_blocks`."""
    n = uint64(len(values))
    lanes = uint64(1024 // bits)
    wide = uint64(bits)
    at_out = uint64(0)
    for c in range(len(widths)):
        width = uint64(widths[c])
        out[at_out] = width
        at_out += uint64(1)
        if width == 0:
            continue
        mask = ~uint64(0) if width >= uint64(64) else (uint64(1) << width) - uint64(1)
        base = uint64(c) * uint64(1024)
        whole = base + uint64(1024) <= n
        for r in range(bits):
            at = uint64(r) * width
            word, shift = at // wide, at % wide
            spill = shift + width > wide
            row = uint64(r) * lanes
            first = at_out + word * lanes
            for lane in range(lanes):
                pos = base + uint64(source[row + uint64(lane)])
                if not whole and pos >= n:
                    continue
                v = uint64(values[pos]) & mask
                out[first + uint64(lane)] |= v << shift
                if spill:
                    out[first + lanes + uint64(lane)] |= v >> (wide - shift)
        at_out += width * lanes
