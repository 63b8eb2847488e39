"""Compiled (numba) smallest and largest byte string of a page, and float pages' bounds and NaN
counts in one pass (:func:`float_pages`), for page statistics.

Arrow's ``min_max`` of a string array compares through a generic kernel at tens of nanoseconds
per value; most comparisons are decided by the first byte, so a compiled loop over the offsets
that keeps the indices of the current smallest and largest values runs at a few nanoseconds per
value. Order: unsigned bytes, lexicographic, a prefix before its extensions (Arrow's order for
binary and UTF-8 strings). Imported on first use, so ``import lance_ops`` does not load numba.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit


@njit(cache=True, nogil=True, inline="always")
def _compare(data: np.ndarray, a: int, a_len: int, b: int, b_len: int) -> int:
    """<0, 0, >0 as ``data[a:a + a_len]`` sorts before, with or after ``data[b:b + b_len]``."""
    for k in range(min(a_len, b_len)):
        x, y = data[a + k], data[b + k]
        if x != y:
            return -1 if x < y else 1
    return a_len - b_len


@njit(cache=True, nogil=True)
def min_max_index(data: np.ndarray, offsets: np.ndarray, valid: np.ndarray) -> tuple[int, int]:
    """Indices of the first smallest and first largest of the strings
    ``data[offsets[i]:offsets[i + 1]]`` whose ``valid[i]`` is set (every one when ``valid`` is
    empty); ``(-1, -1)`` when there is none."""
    lo = hi = -1
    lo_at = lo_len = hi_at = hi_len = 0
    lo_first = hi_first = np.int64(-1)
    check = len(valid) > 0
    for i in range(len(offsets) - 1):
        if check and not valid[i]:
            continue
        at, size = offsets[i], offsets[i + 1] - offsets[i]
        if lo < 0:
            lo = hi = i
            lo_at = hi_at = at
            lo_len = hi_len = size
            lo_first = hi_first = np.int64(data[at]) if size > 0 else np.int64(-1)
            continue
        first = np.int64(data[at]) if size > 0 else np.int64(-1)  # most values differ here
        if first < lo_first or (first == lo_first and _compare(data, at, size, lo_at, lo_len) < 0):
            lo, lo_at, lo_len, lo_first = i, at, size, first
        elif first > hi_first or (first == hi_first and _compare(data, at, size, hi_at, hi_len) > 0):
            hi, hi_at, hi_len, hi_first = i, at, size, first
    return lo, hi


@njit(cache=True, nogil=True)
def float_pages(
    values: np.ndarray, valid: np.ndarray, ends: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per page (pages end at ``ends``) of float ``values`` whose ``valid`` is set (empty: all):
    the smallest and largest number (NaN ignored; ``-inf`` / ``+inf`` when there is none, a zero
    min as ``-0.0`` and a zero max as ``+0.0``) and the NaN values with the sign bit clear and
    set: statistics and NaN counts in one pass."""
    pages = len(ends)
    lows = np.empty(pages, np.float64)
    highs = np.empty(pages, np.float64)
    positive = np.zeros(pages, np.int64)
    negative = np.zeros(pages, np.int64)
    check = len(valid) > 0
    start = 0
    for p in range(pages):
        low, high = np.inf, -np.inf
        seen = False
        for i in range(start, ends[p]):
            if check and not valid[i]:
                continue
            v = np.float64(values[i])
            if v != v:
                if math.copysign(1.0, v) < 0.0:
                    negative[p] += 1
                else:
                    positive[p] += 1
                continue
            seen = True
            if v < low:
                low = v
            if v > high:
                high = v
        if not seen:
            low, high = -np.inf, np.inf
        lows[p] = -0.0 if low == 0 else low
        highs[p] = 0.0 if high == 0 else high
        start = ends[p]
    return lows, highs, positive, negative
