"""Compiled (numba) kernels: the PQ table lookup for kNN searches, and the nearest-point search and
cluster sums of k-means over the few dimensions of PQ sub-vectors.

The table lookup: each row's distance term is the sum, over
its ``m`` sub-vector codes, of one entry of the query's ``[m, 256]`` table.

In numpy that is ``m`` fancy-index passes, each converting the ``uint8`` codes to a fresh ``intp``
index array; compiled, it is one pass per sub-vector over the codes, reading a table row that
stays in the L1 cache. Imported on first use, so ``import lance_ops`` does not load numba.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def add_lookups(table: np.ndarray, codes: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover - compiled
    """``out[i] += sum_j table[j, codes[j, i]]`` for ``codes`` ``[m, n]`` (uint8, one row per
    sub-vector) and ``table`` ``[m, 256]`` (float32)."""
    m, n = codes.shape
    for j in range(m):
        row = table[j]
        column = codes[j]
        for i in range(n):
            out[i] += row[column[i]]


@njit(cache=True, nogil=True)
def nearest_points(  # pragma: no cover - compiled
    x: np.ndarray,
    points_t: np.ndarray,
    norms: np.ndarray,
    scale: float,
    nearest: np.ndarray,
    best: np.ndarray,
) -> None:
    """For each row ``i`` of ``x`` ``[n, d]`` (float32): ``nearest[i]`` the column ``c`` of
    ``points_t`` ``[d, k]`` (float32, the points transposed) with the least score ``norms[c] -
    scale * x[i] . points_t[:, c]`` (the first on a tie) and ``best[i]`` that score.

    One row at a time, its ``k`` scores in a small buffer: for the few dimensions of a PQ
    sub-vector this does the work of a matmul without writing and re-reading an ``[n, k]`` matrix.
    """
    n, d = x.shape
    k = points_t.shape[1]
    scores = np.empty(k, np.float32)
    factor = np.float32(-scale)
    for i in range(n):
        for c in range(k):
            scores[c] = norms[c]
        for j in range(d):
            v = factor * x[i, j]
            row = points_t[j]
            for c in range(k):
                scores[c] += v * row[c]
        at = 0
        low = scores[0]
        for c in range(1, k):
            if scores[c] < low:
                low = scores[c]
                at = c
        nearest[i] = at
        best[i] = low


@njit(cache=True, nogil=True)
def cluster_sums(x: np.ndarray, assign: np.ndarray, sums: np.ndarray) -> None:  # pragma: no cover - compiled
    """``sums[assign[i]] += x[i]`` for each row ``i`` (float64 sums, rows added in order)."""
    n, d = x.shape
    for i in range(n):
        row = sums[assign[i]]
        for j in range(d):
            row[j] += x[i, j]
