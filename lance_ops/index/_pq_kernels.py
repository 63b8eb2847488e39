"""Compiled (numba) PQ table lookup for kNN searches: each row's distance term is the sum, over
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
