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
