"""Compiled (numba) byte copies of many spans, for assembling mini-block chunks.

A mini-block page interleaves, per chunk, a header, the chunk's level slices and its value
buffers. Copying them with one Python slice assignment per chunk and part costs about a
microsecond each, tens of thousands of times per 1M-row page of a list column; one compiled
loop over the spans costs a few nanoseconds per span plus the bytes. Called through
:func:`lance_ops.encoding.kernels.copy_spans` (which checks the spans), for large copies only.
"""

from __future__ import annotations

import numpy as np
from numba import njit, uint64


@njit(cache=True, nogil=True, boundscheck=False)
def _copy_spans(
    dst: np.ndarray, dst_starts: np.ndarray, src: np.ndarray, src_starts: np.ndarray, sizes: np.ndarray
) -> None:
    for i in range(len(sizes)):
        # Unsigned indices: numba adds no negative-index wraparound, so the loop becomes a memcpy.
        d, s, n = uint64(dst_starts[i]), uint64(src_starts[i]), uint64(sizes[i])
        for k in range(n):
            dst[d + k] = src[s + k]
