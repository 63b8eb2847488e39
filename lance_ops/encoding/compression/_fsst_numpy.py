"""numpy forms of the FSST encoder's compiled kernels, for small pages (no numba load).

The compiled coder walks each string byte by byte; here every step is an array pass over the
whole page instead:

1. the best match at *every* byte position, as if a token started there: the 8 bytes from the
   position as one little-endian uint64, the best symbol of at most two bytes from the two-byte
   table, then for each symbol length 3..8 (shortest first, so the longest match wins) one
   vectorised lookup of the masked word among that length's symbols, where the string has that
   many bytes left;
2. the greedy tokens: a token at ``p`` is followed by one at ``p + taken[p]``, so the token
   starts are the positions reachable from the string starts. A few lock-step steps follow
   every string's cursor at once; the cursors still running after them (long strings) are
   finished by pointer doubling (the set reached within ``2^k`` steps doubles each pass), so a
   page needs ``O(log(longest string))`` passes, never one per byte;
3. the output: one code byte per token, ``0xFF`` and the byte for an escape, placed by a
   cumulative sum; each string's coded offset counts the output bytes of the tokens before it.

The tokens, and so the bytes, are those of the compiled kernels (greedy longest match);
tests/encoding/test_compression_fsst.py checks both forms against a pure reference. Importing
this module loads numpy only.
"""

from __future__ import annotations

import numpy as np

PROBE_BITS = 11  # as fsst.PROBE_BITS (the probed tables' slots per length)
LOCKSTEP_STEPS = 32  # cursor steps before the remaining (long) strings go to pointer doubling


def _words(buf: np.ndarray) -> np.ndarray:
    """The 8 bytes starting at every position of ``buf`` (zero padded) as little-endian uint64."""
    padded = np.concatenate((buf, np.zeros(8, np.uint8)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, 8)[: len(buf)]
    return np.ascontiguousarray(windows).view("<u8").reshape(-1)


def _matches(
    buf: np.ndarray,
    left: np.ndarray,
    short: np.ndarray,
    keys: np.ndarray,
    lengths: np.ndarray,
    probed: tuple[np.ndarray, np.ndarray, np.ndarray] | None,
) -> np.ndarray:
    """For every position, the packed entry (code | taken << 8 | written << 12) of the longest
    symbol that fits in the ``left`` bytes of its string from there, or of an escape. Symbols
    of 3..8 bytes are looked up only where one begins with the position's two bytes: in
    ``probed`` (``fsst._ProbedLookup``'s keys, entries and multipliers) when given, else by a
    binary search of each length's sorted keys."""
    word = _words(buf)
    pair = (word & np.uint64(0xFFFF)).astype(np.intp)
    entry = short[np.where(left >= 2, pair, 0x10000 + (pair & 0xFF))].astype(np.int64)
    long = np.flatnonzero(lengths >= 3)
    if not len(long):
        return entry
    begins = np.zeros(0x10000, bool)
    begins[(keys[long] & np.uint64(0xFFFF)).astype(np.intp)] = True
    at = np.flatnonzero(begins[pair] & (left >= 3))
    word, left, found = word[at], left[at], entry[at]
    for n in range(3, 9):
        of_n = long[lengths[long] == n]
        if not len(of_n):
            continue
        mask = np.uint64(0xFFFFFFFFFFFFFFFF) if n == 8 else np.uint64((1 << (8 * n)) - 1)
        probe = word & mask
        if probed is not None:
            pkey, pent, mults = probed
            slot = ((n - 3) << PROBE_BITS) + (probe * mults[n - 3] >> np.uint64(64 - PROBE_BITS)).astype(
                np.intp
            )
            hit = (pkey[slot] == probe) & (left >= n)
            found = np.where(hit, pent[slot], found)
        else:
            order = np.argsort(keys[of_n])
            sorted_keys, codes = keys[of_n][order], of_n[order]
            slot = np.minimum(np.searchsorted(sorted_keys, probe), len(sorted_keys) - 1)
            hit = (sorted_keys[slot] == probe) & (left >= n)
            found = np.where(hit, codes[slot] | n << 8 | 1 << 12, found)
    entry[at] = found
    return entry


def _token_starts(rel: np.ndarray, taken: np.ndarray, left: np.ndarray) -> np.ndarray:
    """Positions where the greedy tokens start: reachable from a string start by ``taken`` steps."""
    size = len(taken)
    start = np.zeros(size + 1, bool)
    # one token on, or the sink ``size`` after a string's last token (the sink stays)
    step = np.append(np.where(taken < left, np.arange(size) + taken, size), size)
    cur = rel[:-1][np.diff(rel) > 0]
    for _ in range(LOCKSTEP_STEPS):
        if not len(cur):
            return np.flatnonzero(start[:size])
        start[cur] = True
        cur = step[cur]
        cur = cur[cur < size]
    # pointer doubling from the cursors still running: after pass k, ``reached`` holds every
    # token start up to 2^k tokens on from them and ``jump`` moves 2^k tokens
    reached = np.zeros(size + 1, bool)
    reached[cur] = True
    jump = step
    while True:
        front = np.flatnonzero(reached)
        ahead = jump[front]
        if bool(reached[ahead].all()):
            break
        reached[ahead] = True
        jump = jump[jump]
    return np.flatnonzero((start | reached)[:size])


def encode(
    data: np.ndarray,
    offs: np.ndarray,
    short: np.ndarray,
    keys: np.ndarray,
    lengths: np.ndarray,
    probed: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Greedy longest-match coding of the strings ``data``/``offs`` (int64, any first offset)
    with the symbols ``keys``/``lengths`` (uint64 keys, low bytes first), ``short``
    (``fsst._HashedLookup.short``) and ``probed`` (see ``_matches``) → (coded bytes, coded
    offsets from 0, token start positions in ``data``, token symbol lengths with 0 for an
    escaped byte)."""
    base = int(offs[0])
    rel = offs - base
    size = int(rel[-1])
    buf = data[base : base + size]
    left = np.repeat(rel[1:], np.diff(rel)) - np.arange(size)  # bytes left in the string
    entry = _matches(buf, left, short, np.asarray(keys, np.uint64), np.asarray(lengths, np.int64), probed)
    starts = _token_starts(rel, (entry >> 8) & 0xF, left)
    entry = entry[starts]
    written = entry >> 12
    ends = np.cumsum(written)
    out = np.empty(int(ends[-1]) if len(ends) else 0, np.uint8)
    at = ends - written
    out[at] = entry & 0xFF
    escaped = written == 2
    out[at[escaped] + 1] = buf[starts[escaped]]
    out_offs = np.concatenate(([0], ends))[np.searchsorted(starts, rel)]
    match = np.where(escaped, 0, (entry >> 8) & 0xF)
    return out, out_offs.astype(np.int64), starts + base, match


def merge_gains(
    keys: np.ndarray, lengths: np.ndarray, gains: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct (key, length) pairs with their summed gains (ordered by key, then length;
    ``fsst._top`` orders them itself)."""
    order = np.lexsort((lengths, keys))
    keys, lengths, gains = keys[order], lengths[order], gains[order]
    if not len(keys):
        return keys, lengths, gains
    first = np.flatnonzero(np.concatenate(([True], (keys[1:] != keys[:-1]) | (lengths[1:] != lengths[:-1]))))
    return keys[first], lengths[first], np.add.reduceat(gains, first)


def capped_length_sum(offsets: np.ndarray, cap: int) -> int:
    """``sum(min(offsets[i + 1] - offsets[i], cap))``."""
    return int(np.minimum(np.diff(np.asarray(offsets, np.int64)), cap).sum())
