"""Compiled (numba) loops for FSST: greedy longest-match coding and decoding.

Both are inherently sequential byte loops (a token's length decides where the next one
starts), which numpy can only express as one array pass per token step; compiled, each runs
in a single pass at a few nanoseconds per byte (bench/RESULTS.md has the measurement). The
module is imported on first use so that ``import lance_ops`` does not load numba.

Lookup structure used by :func:`encode` (built by ``fsst._Lookup``): symbols of three or
more bytes are grouped by their first two bytes (``long_start[p] .. long_start[p + 1]`` index
``cand_*``, longest first) and match when their ``cand_len`` bytes fit before the end of the
string and equal the low bytes of the little-endian word read at the position; failing that,
``short_code[p]`` is the best match of at most two bytes (``code | length << 16`` or -1), and
at a string's last byte ``byte_code[b]`` the one-byte symbol ``b`` (or -1).
"""

from __future__ import annotations

import numpy as np
from numba import njit

ESCAPE = 0xFF


@njit(cache=True, nogil=True, inline="always")
def _load8(data: np.ndarray, i: int) -> np.uint64:
    """The 8 bytes at ``i`` as a little-endian word (zero past the end of ``data``)."""
    if i + 8 <= len(data):
        return (
            np.uint64(data[i])
            | np.uint64(data[i + 1]) << np.uint64(8)
            | np.uint64(data[i + 2]) << np.uint64(16)
            | np.uint64(data[i + 3]) << np.uint64(24)
            | np.uint64(data[i + 4]) << np.uint64(32)
            | np.uint64(data[i + 5]) << np.uint64(40)
            | np.uint64(data[i + 6]) << np.uint64(48)
            | np.uint64(data[i + 7]) << np.uint64(56)
        )
    word = np.uint64(0)
    for j in range(len(data) - i):
        word |= np.uint64(data[i + j]) << np.uint64(8 * j)
    return word


@njit(cache=True, nogil=True)
def encode(
    data: np.ndarray,
    offs: np.ndarray,
    long_start: np.ndarray,
    cand_key: np.ndarray,
    cand_len: np.ndarray,
    cand_code: np.ndarray,
    short_code: np.ndarray,
    byte_code: np.ndarray,
    out: np.ndarray,
    out_offs: np.ndarray,
    tok_pos: np.ndarray,
    tok_len: np.ndarray,
) -> int:
    """Code every string; returns the number of tokens. ``out`` needs ``2 × len(data)`` bytes.

    When ``tok_pos`` is not empty, token ``t`` starts at ``tok_pos[t]`` in ``data`` and
    ``tok_len[t]`` is the symbol length, or 0 for an escaped byte.
    """
    record = len(tok_pos) > 0
    o = 0
    t = 0
    for s in range(len(offs) - 1):
        out_offs[s] = o
        i = offs[s]
        end = offs[s + 1]
        word = _load8(data, i)
        while i < end:
            rem = end - i
            length = 0
            code = -1
            if rem >= 2:
                p = int(word & np.uint64(0xFFFF))
                for c in range(long_start[p], long_start[p + 1]):
                    n = cand_len[c]
                    shift = np.uint64(64 - 8 * n)
                    if n <= rem and (word << shift) == (cand_key[c] << shift):
                        length = n
                        code = cand_code[c]
                        break
                if length == 0:
                    best = short_code[p]
                    if best >= 0:
                        length = best >> 16
                        code = best & 0xFFFF
            else:
                code = byte_code[word & np.uint64(0xFF)]
                if code >= 0:
                    length = 1
            if record:
                tok_pos[t] = i
                tok_len[t] = length
            t += 1
            if length > 0:
                out[o] = code
                o += 1
            else:
                out[o] = ESCAPE
                out[o + 1] = data[i]
                o += 2
            i += max(length, 1)
            word = _load8(data, i)
    out_offs[len(offs) - 1] = o
    return t


@njit(cache=True, nogil=True)
def decoded_size(codes: np.ndarray, offs: np.ndarray, out_len: np.ndarray) -> int:
    """Output bytes of :func:`decode` (``out_len[c]``: symbol length, 1 for the escape, 0 for a
    missing symbol); -1 for an escape ending a string, -2 for a missing symbol. ``codes`` must
    end where the last string does."""
    total = 0
    missing = False
    escapes = 0
    for i in range(len(codes)):  # no loop-carried dependency: pipelines well
        n = out_len[codes[i]]
        total += n
        missing |= n == 0
        escapes += codes[i] == ESCAPE
    if escapes == 0:
        return -2 if missing else total
    total = 0
    missing = False
    for s in range(len(offs) - 1):
        i = offs[s]
        end = offs[s + 1]
        while i < end:
            c = codes[i]
            n = out_len[c]
            missing |= n == 0
            total += n
            i += 1 + (c == ESCAPE)
        if i > end:
            return -1
    return -2 if missing else total


@njit(cache=True, nogil=True)
def decode(
    codes: np.ndarray,
    offs: np.ndarray,
    symbols: np.ndarray,
    out_len: np.ndarray,
    out: np.ndarray,
    out_offs: np.ndarray,
) -> None:
    """Expand valid coded strings (checked by :func:`decoded_size`) into ``out``."""
    o = 0
    for s in range(len(offs) - 1):
        out_offs[s] = o
        i = offs[s]
        end = offs[s + 1]
        while i < end:
            c = codes[i]
            if c == ESCAPE:
                out[o] = codes[i + 1]
                o += 1
                i += 2
            else:
                for j in range(out_len[c]):
                    out[o + j] = symbols[c, j]
                o += out_len[c]
                i += 1
    out_offs[len(offs) - 1] = o
