"""Split block bloom filters (the Parquet SBBF) as pylance 14's BLOOMFILTER index stores them, built
and probed with numpy over whole arrays.

A filter is ``2**k`` bytes (32 <= size <= 128 MiB): blocks of eight little-endian ``uint32`` words.
A value is hashed with xxHash64 (seed 0) over its bytes (an integer, float or temporal value: its
little-endian bytes in its physical width; a string or binary: its bytes). The upper 32 bits of the
hash pick the block (``(hi * num_blocks) >> 32``), the lower 32 bits set one bit in each word:
bit ``(lo * SALT[i] mod 2**32) >> 27`` of word ``i``. A value may be present when all eight bits
are set.

The size is the smallest power of two whose false-positive rate for ``number_of_items`` distinct
values (Putze et al.'s formula for blocked filters, eq. 3) is at most ``probability``: the
defaults 8192 / 0.00057 give 32 KiB.

e.g. ``xxh64(b"")`` is ``0xEF46DB3751D8E999``; the int64 ``1234`` hashes its 8 bytes ``d2 04 00 ...``.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pyarrow as pa

__all__ = [
    "filter_bytes",
    "may_contain",
    "set_bits",
    "value_bytes",
    "xxh64",
]

_U64 = np.uint64
_P1 = _U64(0x9E3779B185EBCA87)
_P2 = _U64(0xC2B2AE3D27D4EB4F)
_P3 = _U64(0x165667B19E3779F9)
_P4 = _U64(0x85EBCA77C2B2AE63)
_P5 = _U64(0x27D4EB2F165667C5)
_SALT = np.array(
    [0x47B6137B, 0x44974D91, 0x8824AD5B, 0xA2B7289D, 0x705495C7, 0x2DF1424B, 0x9EFC4947, 0x5C6BFB31],
    dtype=np.uint32,
)
_MIN_LOG2, _MAX_LOG2 = 5, 27
_FLAG_BUDGET = 64 << 20  # bytes of bit flags set at once while building filters
_LOG_FACTORIALS = np.array([math.lgamma(k + 1) for k in range(749, -1, -1)])  # log(i!), i = 749 .. 0


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << _U64(r)) | (x >> _U64(64 - r))


def _round(acc: np.ndarray, lane: np.ndarray) -> np.ndarray:
    return _rotl(acc + lane * _P2, 31) * _P1


def _read(data: np.ndarray, at: np.ndarray, width: int) -> np.ndarray:
    """The little-endian ``width``-byte words of ``data`` at byte positions ``at``, as uint64."""
    raw = data[at[:, None] + np.arange(width)]
    padded = np.zeros((len(at), 8), np.uint8)
    padded[:, :width] = raw
    return padded.view("<u8").ravel().astype(_U64)


def xxh64(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """xxHash64 (seed 0) of each value ``data[starts[i] : starts[i] + lengths[i]]`` (``data`` a
    uint8 array), one loop step per 32 / 8 / 4 / 1-byte stage of the longest value, never per row."""
    data = np.asarray(data, np.uint8)
    starts = np.asarray(starts, np.int64)
    lengths = np.asarray(lengths, np.int64)
    n = len(starts)
    h = np.full(n, _P5, _U64)
    stripes = lengths // 32
    long = np.flatnonzero(stripes > 0)
    if long.size:
        acc = np.empty((4, long.size), _U64)
        # the lanes' seeds P1 + P2, P2, 0, -P1 (mod 2**64; Python ints: numpy scalars would warn)
        for lane, seed in enumerate((int(_P1) + int(_P2), int(_P2), 0, -int(_P1))):
            acc[lane] = seed % (1 << 64)
        for k in range(int(stripes[long].max())):
            striped = stripes[long] > k
            at = starts[long][striped] + 32 * k
            for lane in range(4):
                acc[lane, striped] = _round(acc[lane, striped], _read(data, at + 8 * lane, 8))
        merged = _rotl(acc[0], 1) + _rotl(acc[1], 7) + _rotl(acc[2], 12) + _rotl(acc[3], 18)
        for lane in range(4):
            merged = (merged ^ _round(np.zeros(long.size, _U64), acc[lane])) * _P1 + _P4
        h[long] = merged
    h += lengths.astype(_U64)
    pos = starts + 32 * stripes
    rest = lengths - 32 * stripes
    for _ in range(3):  # up to three 8-byte words
        live = np.flatnonzero(rest >= 8)
        if not live.size:
            break
        k1 = _round(np.zeros(live.size, _U64), _read(data, pos[live], 8))
        h[live] = _rotl(h[live] ^ k1, 27) * _P1 + _P4
        pos[live] += 8
        rest[live] -= 8
    live = np.flatnonzero(rest >= 4)
    if live.size:
        h[live] = _rotl(h[live] ^ (_read(data, pos[live], 4) * _P1), 23) * _P2 + _P3
        pos[live] += 4
        rest[live] -= 4
    for _ in range(3):  # up to three single bytes
        live = np.flatnonzero(rest >= 1)
        if not live.size:
            break
        h[live] = _rotl(h[live] ^ (data[pos[live]].astype(_U64) * _P5), 11) * _P1
        pos[live] += 1
        rest[live] -= 1
    h ^= h >> _U64(33)
    h *= _P2
    h ^= h >> _U64(29)
    h *= _P3
    h ^= h >> _U64(32)
    return h


def value_bytes(values: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The bytes pylance hashes for each non-null value of ``values``: ``(data, starts, lengths,
    valid)`` with ``valid`` the positions of the non-null values (``starts`` / ``lengths`` are theirs).
    Strings and binaries: their bytes; integers, floats and temporal values: their little-endian
    physical bytes."""
    values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    valid = np.flatnonzero(np.asarray(values.is_valid(), dtype=bool))
    t = values.type
    if (
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
    ):
        large = pa.types.is_large_string(t) or pa.types.is_large_binary(t)
        _, offsets_buf, data_buf = values.buffers()
        offsets = np.frombuffer(offsets_buf, np.int64 if large else np.int32)
        offsets = offsets[values.offset : values.offset + len(values) + 1].astype(np.int64)
        data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
        return data, offsets[:-1][valid], np.diff(offsets)[valid], valid
    width = t.bit_width // 8
    physical = (
        pa.int64() if width == 8 else pa.int32() if width == 4 else pa.int16() if width == 2 else pa.int8()
    )
    if pa.types.is_floating(t) or pa.types.is_integer(t):
        numbers = values.filter(values.is_valid()).to_numpy(zero_copy_only=False)
    else:  # dates, times, timestamps, durations: their integers
        numbers = values.filter(values.is_valid()).view(physical).to_numpy(zero_copy_only=False)
    data = np.ascontiguousarray(numbers).view(np.uint8)
    starts = np.arange(len(valid), dtype=np.int64) * width
    return data, starts, np.full(len(valid), width, np.int64), valid


def _false_positive_rate(ndv: int, log2_bytes: int) -> float:
    """Putze et al.'s false-positive rate of a blocked filter of ``2**log2_bytes`` bytes holding
    ``ndv`` distinct values (the Poisson sum over a block's load, 750 terms, smallest first)."""
    if ndv == 0:
        return 0.0
    bits = float(1 << log2_bytes) * 8
    if ndv / bits > 2.0:
        return 1.0
    lam = 256.0 / (bits / ndv)
    i = np.arange(749, -1, -1, dtype=np.float64)
    log_p = i * math.log(lam) - lam - _LOG_FACTORIALS
    with np.errstate(divide="ignore"):  # i = 0: log(0), a term of 0
        log_inner = 8.0 * np.log(1.0 - (1.0 - 1.0 / 32.0) ** i)
    total = 0.0
    for term in np.exp(log_p + log_inner).tolist():  # largest i first, as the reference sums
        total += term
    return min(total, 1.0)


@functools.lru_cache(maxsize=64)
def filter_bytes(number_of_items: int, probability: float) -> int:
    """The size in bytes of a filter for ``number_of_items`` distinct values at ``probability``."""
    low, high = 0, 64
    while high > low + 1:
        mid = (low + high) // 2
        if _false_positive_rate(number_of_items, mid) <= probability:
            high = mid
        else:
            low = mid
    return 1 << min(max(high, _MIN_LOG2), _MAX_LOG2)


def _positions(hashes: np.ndarray, num_blocks: int) -> tuple[np.ndarray, np.ndarray]:
    """For each hash, its block and the eight bit numbers (one per word): ``(block, bits[n, 8])``."""
    block = ((hashes >> _U64(32)) * _U64(num_blocks)) >> _U64(32)
    low = (hashes & _U64(0xFFFFFFFF)).astype(np.uint32)
    bits = (low[:, None] * _SALT[None, :]) >> np.uint32(27)
    return block.astype(np.int64), bits.astype(np.int64)


def set_bits(hashes: np.ndarray, zone: np.ndarray, num_zones: int, size: int) -> list[bytes]:
    """The filters (``size`` bytes each) of ``num_zones`` zones holding ``hashes`` (in zone ``zone``,
    ascending), built a group of zones at a time (a byte flag per filter bit: 256 KiB a zone of the
    default 32 KiB)."""
    num_blocks = size // 32
    block, bits = _positions(hashes, num_blocks)
    group = max(1, _FLAG_BUDGET // (size * 8))
    out: list[bytes] = []
    for first in range(0, num_zones, group):
        last = min(first + group, num_zones)
        lo, hi = np.searchsorted(zone, [first, last])
        word = ((zone[lo:hi].astype(np.int64) - first)[:, None] * num_blocks + block[lo:hi, None]) * 8
        flags = np.zeros((last - first) * size * 8, dtype=bool)
        flags[((word + np.arange(8)) * 32 + bits[lo:hi]).ravel()] = True
        packed = np.packbits(flags, bitorder="little").tobytes()
        out += [packed[z * size : (z + 1) * size] for z in range(last - first)]
    return out


def may_contain(filters: list[bytes], hashes: np.ndarray) -> np.ndarray:
    """Which filters may hold any of ``hashes`` (one flag per filter)."""
    out = np.zeros(len(filters), dtype=bool)
    for z, blob in enumerate(filters):
        words = np.frombuffer(blob, "<u4")
        num_blocks = len(words) // 8
        if not num_blocks or not hashes.size:
            continue
        block, bits = _positions(hashes, num_blocks)
        got = words[block[:, None] * 8 + np.arange(8)]
        hit = ((got >> bits.astype(np.uint32)) & np.uint32(1)).all(axis=1)
        out[z] = bool(hit.any())
    return out
