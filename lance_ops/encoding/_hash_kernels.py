"""Compiled (numba) MurmurHash3 x64-128 of many byte strings, as DataSketches hashes them.

A string's hash walks its 16-byte blocks one after another, so a numpy version needs one array
pass per block position across all strings (and a gather of two words per pass); compiled, the
loop runs once over the bytes. Used by :mod:`lance_ops.encoding.sketch` to hash strings before
they reach the HyperLogLog library. Imported on first use, so ``import lance_ops`` does not
load numba.

Reference: MurmurHash3_x64_128 (Austin Appleby, public domain): per 16-byte block
``h1 ^= mix1(k1); h1 = (rotl(h1, 27) + h2) * 5 + 0x52DCE729; h2 ^= mix2(k2);
h2 = (rotl(h2, 31) + h1) * 5 + 0x38495AB5``, then the tail bytes, the length and ``fmix64``.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from lance_ops.encoding.compression._fsst_kernels import _load_unaligned, _word_at

_C1 = np.uint64(0x87C37B91114253D5)
_C2 = np.uint64(0x4CF5AD432745937F)


@njit(cache=True, nogil=True, inline="always")
def _rotl(x: np.uint64, r: int) -> np.uint64:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


@njit(cache=True, nogil=True, inline="always")
def _fmix(k: np.uint64) -> np.uint64:
    k ^= k >> np.uint64(33)
    k *= np.uint64(0xFF51AFD7ED558CCD)
    k ^= k >> np.uint64(33)
    k *= np.uint64(0xC4CEB9FE1A85EC53)
    k ^= k >> np.uint64(33)
    return k


@njit(cache=True, nogil=True, inline="always")
def _finish(h1: np.uint64, h2: np.uint64, length: int) -> tuple[np.uint64, np.uint64]:
    h1 ^= np.uint64(length)
    h2 ^= np.uint64(length)
    h1 += h2
    h2 += h1
    h1 = _fmix(h1)
    h2 = _fmix(h2)
    h1 += h2
    h2 += h1
    return h1, h2


@njit(cache=True, nogil=True, inline="always")
def _word(data: np.ndarray, at: int, count: int) -> np.uint64:
    """Little-endian u64 of the ``count`` (at most 8) bytes at ``at`` (``data`` C-contiguous)."""
    if at + 8 <= len(data):  # one unaligned 8-byte load, the bytes past ``count`` masked off
        word: np.uint64 = _load_unaligned(data, at)  # type: ignore[call-arg]
        if count < 8:
            word &= (np.uint64(1) << np.uint64(8 * count)) - np.uint64(1)
        return word
    word = np.uint64(0)
    for j in range(count):
        word |= np.uint64(data[at + j]) << np.uint64(8 * j)
    return word


@njit(cache=True, nogil=True)
def murmur3_x64_128(
    data: np.ndarray, offsets: np.ndarray, seed: int, h1_out: np.ndarray, h2_out: np.ndarray
) -> None:
    """Fill ``h1_out[i]``, ``h2_out[i]`` with the hash of ``data[offsets[i]:offsets[i + 1]]``
    (``data``: a C-contiguous uint8 array; its 8-byte words are read with unaligned loads)."""
    c1, c2 = _C1, _C2
    for i in range(len(offsets) - 1):
        start, length = offsets[i], offsets[i + 1] - offsets[i]
        h1 = np.uint64(seed)
        h2 = np.uint64(seed)
        blocks = length // 16
        for block in range(blocks):
            at = start + 16 * block
            k1 = _word_at(data, at)
            k2 = _word_at(data, at + 8)
            h1 ^= _rotl(k1 * c1, 31) * c2
            h1 = (_rotl(h1, 27) + h2) * np.uint64(5) + np.uint64(0x52DCE729)
            h2 ^= _rotl(k2 * c2, 33) * c1
            h2 = (_rotl(h2, 31) + h1) * np.uint64(5) + np.uint64(0x38495AB5)
        tail = start + 16 * blocks
        rest = length - 16 * blocks
        if rest > 8:
            h2 ^= _rotl(_word(data, tail + 8, rest - 8) * c2, 33) * c1
        if rest > 0:
            h1 ^= _rotl(_word(data, tail, min(rest, 8)) * c1, 31) * c2
        h1_out[i], h2_out[i] = _finish(h1, h2, length)


@njit(cache=True, nogil=True)
def murmur3_x64_128_words(words: np.ndarray, seed: int, h1_out: np.ndarray, h2_out: np.ndarray) -> None:
    """The hash of each 8-byte little-endian value of ``words`` (how the library hashes ints and
    doubles): a tail of eight bytes and nothing else."""
    for i in range(len(words)):
        h1 = np.uint64(seed) ^ (_rotl(np.uint64(words[i]) * _C1, 31) * _C2)
        h1_out[i], h2_out[i] = _finish(h1, np.uint64(seed), 8)


@intrinsic
def _ctlz64(typingctx, x):  # type: ignore[no-untyped-def]
    """Leading zero bits of a uint64 (64 for zero): LLVM's ``ctlz``, one instruction on x86-64."""
    sig = types.uint64(types.uint64)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        return builder.ctlz(args[0], ir.Constant(ir.IntType(1), 0))

    return sig, codegen


@njit(cache=True, nogil=True, inline="always")
def _coupon_value(h2: np.uint64) -> int:
    """A hash's register value: one plus the leading zeros of its second half, at most 63."""
    return min(int(_ctlz64(h2)), 62) + 1  # type: ignore[call-arg]


@njit(cache=True, nogil=True, inline="always")
def _raise_register(
    h1: np.uint64, h2: np.uint64, i: int, mask: np.uint64, best_value: np.ndarray, best_index: np.ndarray
) -> int:
    """Keep hash ``i`` in its slot (``h1 & mask``) if its register value is the slot's largest so
    far; 1 if the slot was empty, else 0."""
    slot = int(h1 & mask)
    value = _coupon_value(h2)
    current = best_value[slot]
    if value > current:
        best_value[slot] = value
        best_index[slot] = i
        return 1 if current == 0 else 0
    return 0


@njit(cache=True, nogil=True, inline="always")
def _add_coupon(
    h1: np.uint64, h2: np.uint64, i: int, keys: np.ndarray, lg_table: int, found: np.ndarray, count: int
) -> int:
    """Record hash ``i`` in ``found`` if its coupon is new to the open-addressing table ``keys``;
    the new count, or -1 when the table already holds its half (``len(found)``) of coupons."""
    mask = len(keys) - 1
    coupon = np.uint32((np.uint64(_coupon_value(h2)) << np.uint64(26)) | (h1 & np.uint64(0x3FFFFFF)))
    at = int((coupon * np.uint32(0x9E3779B1)) >> np.uint32(32 - lg_table)) & mask
    while keys[at] != 0 and keys[at] != coupon:
        at = (at + 1) & mask
    if keys[at] != 0:
        return count
    if count == len(found):
        return -1
    keys[at] = coupon
    found[count] = i
    return count + 1


@njit(cache=True, nogil=True)
def best_coupons(
    h1: np.ndarray,
    h2: np.ndarray,
    keep: np.ndarray,
    lg_k: int,
    best_value: np.ndarray,
    best_index: np.ndarray,
) -> int:
    """Per HLL register slot (``h1``'s low ``lg_k`` bits), the largest register value and the first
    hash reaching it (0 / -1 for empty slots); returns the number of slots reached. Only hashes
    ``keep`` marks count (an empty ``keep``: all)."""
    mask = np.uint64((1 << lg_k) - 1)
    reached = 0
    every = len(keep) == 0
    for i in range(len(h1)):
        if every or keep[i]:
            reached += _raise_register(h1[i], h2[i], i, mask, best_value, best_index)
    return reached


@njit(cache=True, nogil=True)
def first_of_each_coupon(
    h1: np.ndarray, h2: np.ndarray, keep: np.ndarray, lg_table: int
) -> tuple[np.ndarray, bool]:
    """The index of the first hash of each distinct coupon (the library's register value above the
    hash's 26-bit slot address), in order, among the hashes ``keep`` marks (empty: all); and
    False instead when the distinct coupons would fill more than half of a ``2**lg_table``-slot
    table (the caller then deduplicates otherwise)."""
    keys = np.zeros(1 << lg_table, dtype=np.uint32)  # coupons are never 0 (their value is at least 1)
    found = np.empty(len(keys) // 2, dtype=np.int64)
    count = 0
    every = len(keep) == 0
    for i in range(len(h1)):
        if every or keep[i]:
            count = _add_coupon(h1[i], h2[i], i, keys, lg_table, found, count)
            if count < 0:
                return found[:0], False
    return found[:count], True


_EXPONENT = np.uint64(0x7FF0000000000000)
_MANTISSA = np.uint64(0x000FFFFFFFFFFFFF)
_CANONICAL_NAN = np.uint64(0x7FF8000000000000)


#: Words hashed at a time by the word kernels: their hashes stay in the L1 cache, and the hash
#: loop (no branches) vectorises apart from the coupon loop's branches.
_BLOCK = 2048


@njit(cache=True, nogil=True, inline="always")
def _hash_block(
    words: np.ndarray, start: int, stop: int, floats: bool, seed: np.uint64, h1: np.ndarray, h2: np.ndarray
) -> None:
    """:func:`murmur3_x64_128_words` of ``words[start:stop]`` into ``h1[:stop - start]``, ``h2``;
    ``floats``: the words are doubles' bits, hashed as the library hashes doubles (both zeros as
    +0.0, every NaN as the canonical one)."""
    block = words[start:stop]
    if floats:
        for k in range(len(block)):
            word = np.uint64(block[k])
            if word << np.uint64(1) == np.uint64(0):
                word = np.uint64(0)
            if word & _EXPONENT == _EXPONENT and word & _MANTISSA != np.uint64(0):
                word = _CANONICAL_NAN
            h1[k], h2[k] = _finish(seed ^ (_rotl(word * _C1, 31) * _C2), seed, 8)
    else:
        for k in range(len(block)):
            h1[k], h2[k] = _finish(seed ^ (_rotl(np.uint64(block[k]) * _C1, 31) * _C2), seed, 8)


@njit(cache=True, nogil=True)
def word_best_coupons(
    words: np.ndarray,
    valid: np.ndarray,
    floats: bool,
    seed: int,
    lg_k: int,
    best_value: np.ndarray,
    best_index: np.ndarray,
) -> int:
    """:func:`best_coupons` of the hashes of ``words`` (8-byte values as :func:`_hash_block` hashes
    them) where ``valid`` is set (empty: all), hashing a block at a time as it goes (no arrays of
    all the hashes)."""
    mask = np.uint64((1 << lg_k) - 1)
    reached = 0
    every = len(valid) == 0
    h1 = np.empty(_BLOCK, np.uint64)
    h2 = np.empty(_BLOCK, np.uint64)
    for start in range(0, len(words), _BLOCK):
        stop = min(start + _BLOCK, len(words))
        _hash_block(words, start, stop, floats, np.uint64(seed), h1, h2)
        for k in range(stop - start):
            i = start + k
            if every or valid[i]:
                reached += _raise_register(h1[k], h2[k], i, mask, best_value, best_index)
    return reached


@njit(cache=True, nogil=True)
def word_first_coupons(
    words: np.ndarray, valid: np.ndarray, floats: bool, seed: int, lg_table: int
) -> tuple[np.ndarray, bool]:
    """:func:`first_of_each_coupon` of the hashes of ``words`` (as :func:`word_best_coupons`)."""
    keys = np.zeros(1 << lg_table, dtype=np.uint32)
    found = np.empty(len(keys) // 2, dtype=np.int64)
    count = 0
    every = len(valid) == 0
    h1 = np.empty(_BLOCK, np.uint64)
    h2 = np.empty(_BLOCK, np.uint64)
    for start in range(0, len(words), _BLOCK):
        stop = min(start + _BLOCK, len(words))
        _hash_block(words, start, stop, floats, np.uint64(seed), h1, h2)
        for k in range(stop - start):
            i = start + k
            if every or valid[i]:
                count = _add_coupon(h1[k], h2[k], i, keys, lg_table, found, count)
                if count < 0:
                    return found[:0], False
    return found[:count], True
