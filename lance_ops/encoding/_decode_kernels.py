"""Compiled (numba) decoding of mini-block chunks: InlineBitpacking values and OutOfLineBitpacking
level slices unpacked in one pass.

The numpy form of an InlineBitpacking page decode is three passes over every value: the chunks'
packed words are cut out of the page (``gather_spans``), unpacked block by block
(``fastlanes_unpack``: a ``take`` of the grid's words per row, shifts, a mask) and the short
last chunk's padding dropped. This loop reads each chunk's width word and its packed words where
they lie in the page and writes each value straight to its place in the output. Called through
:func:`lance_ops.encoding.kernels.unpack_chunks` (which checks the chunks first: the loop does not
check bounds); the level slices likewise, through :func:`~lance_ops.encoding.kernels.unpack_slices`.
Imported on first use, so ``import lance_ops`` does not load numba.
"""

from __future__ import annotations

import numpy as np
from numba import njit, uint64

# Rows 8a..8a+7 of a block's grid hold values 128 b + 16 ORDER[a] + lane (the FastLanes order).
_ORDER = np.array([0, 4, 2, 6, 1, 5, 3, 7], np.uint64)


@njit(cache=True, nogil=True, boundscheck=False)
def _unpack_block(
    words: np.ndarray, base: int, width: int, bits: int, dst: np.ndarray, order: np.ndarray
) -> None:
    """The 1024 values of the block packed at ``width`` whose words start at ``words[base]``,
    into ``dst[0:1024]``."""
    lanes = uint64(1024 // bits)
    wide = uint64(bits)
    w = uint64(width)
    b0 = uint64(base)
    if width == 0:
        for i in range(1024):
            dst[i] = 0
        return
    mask = ~uint64(0) if width >= 64 else (uint64(1) << w) - uint64(1)
    for r in range(bits):
        at = uint64(r) * w
        word, shift = at // wide, at % wide
        first = b0 + word * lanes
        out = uint64(128) * (uint64(r) % uint64(8)) + uint64(16) * order[r // 8]
        if shift + w > wide:
            left = wide - shift
            for lane in range(lanes):
                lo = uint64(words[first + uint64(lane)]) >> shift
                hi = uint64(words[first + lanes + uint64(lane)]) << left
                dst[out + uint64(lane)] = (lo | hi) & mask
        else:
            for lane in range(lanes):
                dst[out + uint64(lane)] = (uint64(words[first + uint64(lane)]) >> shift) & mask


@njit(cache=True, nogil=True, boundscheck=False)
def unpack_chunks(words: np.ndarray, starts: np.ndarray, nums: np.ndarray, out: np.ndarray) -> None:
    """The first ``nums[c]`` values of every InlineBitpacking chunk ``c`` (its width word at
    ``words[starts[c]]``, its packed words after it) back to back into ``out`` (same dtype as
    ``words``; ``nums.sum()`` values)."""
    bits = words.itemsize * 8
    order = _ORDER
    scratch = np.empty(1024, out.dtype)
    pos = uint64(0)
    for c in range(len(starts)):
        start = uint64(starts[c])
        n = uint64(nums[c])
        width = int(words[start])
        if n == uint64(1024):
            _unpack_block(words, start + uint64(1), width, bits, out[pos : pos + n], order)
        else:
            _unpack_block(words, start + uint64(1), width, bits, scratch, order)
            for i in range(n):
                out[pos + uint64(i)] = scratch[i]
        pos += n


@njit(cache=True, nogil=True, boundscheck=False)
def unpack_slices(
    words: np.ndarray,
    firsts: np.ndarray,
    nums: np.ndarray,
    raw_tails: np.ndarray,
    width: int,
    out: np.ndarray,
) -> None:
    """The values of OutOfLineBitpacking slices (level slices of mini-block chunks) back to back
    into ``out``: slice ``s`` starts at ``words[firsts[s]]`` and holds ``nums[s]`` values, whole
    blocks packed at the page-wide ``width``, then its tail, raw words when ``raw_tails[s]`` and
    one more packed block otherwise."""
    bits = words.itemsize * 8
    order = _ORDER
    block_words = uint64(width * (1024 // bits))
    scratch = np.empty(1024, out.dtype)
    pos = uint64(0)
    for s in range(len(firsts)):
        at = uint64(firsts[s])
        n = uint64(nums[s])
        full, tail = n // uint64(1024), n % uint64(1024)
        for _ in range(full):
            _unpack_block(words, at, width, bits, out[pos : pos + uint64(1024)], order)
            at += block_words
            pos += uint64(1024)
        if tail == uint64(0):
            continue
        if raw_tails[s]:
            for i in range(tail):
                out[pos + uint64(i)] = words[at + uint64(i)]
        else:
            _unpack_block(words, at, width, bits, scratch, order)
            for i in range(tail):
                out[pos + uint64(i)] = scratch[i]
        pos += tail
