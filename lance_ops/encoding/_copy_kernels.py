"""Compiled (numba) byte copies of many spans, for assembling mini-block chunks.

A mini-block page interleaves, per chunk, a header, the chunk's level slices and its value
buffers. Copying them with one Python slice assignment per chunk and part costs about a
microsecond each, tens of thousands of times per 1M-row page of a list column; one compiled
loop over the spans costs a few nanoseconds per span plus the bytes. Imported on first use, so
``import lance_ops`` does not load numba.
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


def copy_spans(
    dst: np.ndarray, dst_starts: np.ndarray, src: np.ndarray, src_starts: np.ndarray, sizes: np.ndarray
) -> None:
    """``dst[dst_starts[i] : dst_starts[i] + sizes[i]] = src[src_starts[i] : ... + sizes[i]]``
    for every i (uint8 arrays). The spans are checked against both arrays first: the compiled
    loop does not check bounds."""
    dst_starts = np.ascontiguousarray(dst_starts, np.int64)
    src_starts = np.ascontiguousarray(src_starts, np.int64)
    sizes = np.ascontiguousarray(sizes, np.int64)
    if not len(sizes):
        return
    if (
        len(dst_starts) != len(sizes)
        or len(src_starts) != len(sizes)
        or int(sizes.min()) < 0
        or int(dst_starts.min()) < 0
        or int(src_starts.min()) < 0
        or int((dst_starts + sizes).max()) > len(dst)
        or int((src_starts + sizes).max()) > len(src)
    ):
        raise ValueError("a span lies outside its array")
    _copy_spans(dst, dst_starts, src, src_starts, sizes)
