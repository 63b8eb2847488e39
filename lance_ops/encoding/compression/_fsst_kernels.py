"""Compiled (numba) loops for FSST: greedy longest-match coding and decoding.

Both are inherently sequential byte loops (a token's length decides where the next one
starts), which numpy can only express as one array pass per token step; compiled, each runs
in a single pass at a few nanoseconds per byte (bench/RESULTS.md has the measurement). The
module is imported on first use so that ``import lance_ops`` does not load numba.

Decoding copies every symbol with one unaligned 8-byte store (``_store8``, an LLVM intrinsic:
numba does not merge eight byte stores) and advances by the symbol's length, so the output
carries 8 bytes of slack; its size comes from one pass over the codes (two when there are
escapes), with the checks for an escape ending a string and for bad offsets made by the
decoding loop itself. Coding reads the 8 bytes at a position with one unaligned load. Both
intrinsics take the host's byte order as little-endian, as the format code does throughout.

Tables are coded in four lanes by :func:`encode_probed_lanes` (text: per-length perfect hash
tables), or in one branch-free pass across the string ends by :func:`encode_short_lanes` (no
symbol longer than two bytes: every byte is looked up, a bitmap marks the strings' last bytes)
when ``fsst`` picks them, else by :func:`encode_hashed_lanes` (and :func:`encode_hashed` for one
lane or recorded tokens) when the table fits its hash buckets, as tables built by
``fsst.build_symbol_table`` do; their lookups are described there. Other tables go to
:func:`encode`.

Lookup structure used by :func:`encode` (built by ``fsst._Lookup``), one uint32 per value p
of the next two bytes (so one cache line serves both lookups): bits 0..7 and 8..15 give the
range of ``cand_*`` holding the symbols of three or more bytes starting with p (longest
first), which match when their ``cand_len`` bytes fit before the end of the string and equal
the low bytes of the little-endian word read at the position; failing that, bits 16..23 and
24..31 are the code and length (0: none) of the best match of at most two bytes. At a
string's last byte ``byte_code[b]`` is the one-byte symbol ``b`` (or -1).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core.extending import intrinsic

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


@intrinsic
def _load_unaligned(typingctx, data, index):  # type: ignore[no-untyped-def]
    """The uint64 at ``data[index : index + 8]`` (little-endian) with one unaligned load; ``data``
    a C-contiguous uint8 array, no bounds check."""
    if not (isinstance(data, types.Array) and data.dtype == types.uint8 and data.layout == "C"):
        return None
    sig = types.uint64(data, index)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        array, at = args
        base = context.make_array(signature.args[0])(context, builder, array).data
        load = builder.load(builder.bitcast(builder.gep(base, [at]), ir.IntType(64).as_pointer()))
        load.align = 1
        return load

    return sig, codegen


@njit(cache=True, nogil=True, inline="always")
def _word_at(data: np.ndarray, i: int) -> np.uint64:
    """:func:`_load8` for C-contiguous uint8 ``data``: one 8-byte load away from the end."""
    if i + 8 <= len(data):
        return _load_unaligned(data, i)  # type: ignore[call-arg]
    return _load8(data, i)


@njit(cache=True, nogil=True)
def encode(
    data: np.ndarray,
    offs: np.ndarray,
    lanes: np.ndarray,
    info: np.ndarray,
    cand_key: np.ndarray,
    cand_len: np.ndarray,
    cand_code: np.ndarray,
    byte_code: np.ndarray,
    out: np.ndarray,
    out_offs: np.ndarray,
    lane_ends: np.ndarray,
    tok_pos: np.ndarray,
    tok_len: np.ndarray,
) -> int:
    """Code every string; returns the number of tokens. ``out`` needs ``2 × len(data)`` bytes.

    The strings are split into lanes, ``lanes[k] .. lanes[k + 1]``, coded in turns of one token
    (or one step to the next string) per lane: a token's lookups wait on the previous token of
    its string, so independent lanes keep several in flight. Lane k writes from
    ``2 × offs[lanes[k]]`` (a string codes to at most twice its bytes) to ``lane_ends[k]``;
    ``out_offs[s]`` is where string s starts in ``out`` (the caller joins the lanes; the last
    entry is left to it). When ``tok_pos`` is not empty (one lane only), token ``t`` starts at
    ``tok_pos[t]`` in ``data`` and ``tok_len[t]`` is the symbol length, or 0 for an escaped
    byte.
    """
    record = len(tok_pos) > 0
    n_lanes = len(lanes) - 1
    string = lanes[:-1] - 1  # each lane starts "at the end of" the string before its first
    stop = lanes[1:].copy()
    pos = offs[lanes[:-1]].astype(np.int64)
    end = pos.copy()
    at = 2 * pos
    t = 0
    busy = n_lanes
    while busy > 0:
        busy = 0
        for k in range(n_lanes):
            s = string[k]
            if s >= stop[k]:
                continue
            busy += 1
            i = pos[k]
            if i == end[k]:
                s += 1
                string[k] = s
                if s < stop[k]:
                    out_offs[s] = at[k]
                    end[k] = offs[s + 1]
                continue
            word = _word_at(data, i)
            rem = end[k] - i
            length = 0
            code = 0
            if rem >= 2:
                entry = np.int64(info[word & np.uint64(0xFFFF)])
                for c in range(entry & 0xFF, (entry >> 8) & 0xFF):
                    n = cand_len[c]
                    shift = np.uint64(64 - 8 * n)
                    if n <= rem and (word << shift) == (cand_key[c] << shift):
                        length = n
                        code = cand_code[c]
                        break
                if length == 0:
                    length = int(entry >> 24)
                    code = int((entry >> 16) & 0xFF)
            else:
                single = byte_code[word & np.uint64(0xFF)]
                if single >= 0:
                    length = 1
                    code = single
            if record:
                tok_pos[t] = i
                tok_len[t] = length
            t += 1
            o = at[k]
            if length > 0:
                out[o] = code
                at[k] = o + 1
                pos[k] = i + length
            else:
                out[o] = ESCAPE
                out[o + 1] = data[i]
                at[k] = o + 2
                pos[k] = i + 1
    lane_ends[:] = at
    return t


@intrinsic
def _store8(typingctx, out, index, word):  # type: ignore[no-untyped-def]
    """Store the uint64 ``word`` little-endian at ``out[index : index + 8]`` with one unaligned
    8-byte store (no bounds check: the caller allocates 8 bytes of slack)."""
    if not (isinstance(out, types.Array) and out.dtype == types.uint8 and word == types.uint64):
        return None
    sig = types.void(out, index, word)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        array, at, value = args
        base = context.make_array(signature.args[0])(context, builder, array).data
        target = builder.bitcast(builder.gep(base, [at]), ir.IntType(64).as_pointer())
        store = builder.store(value, target)
        store.align = 1
        return context.get_dummy_value()

    return sig, codegen


@njit(cache=True, nogil=True)
def decoded_size(codes: np.ndarray, lengths: np.ndarray) -> tuple[int, bool]:
    """Output bytes of :func:`decode` and whether a code refers to a missing symbol.

    ``lengths[c]``: symbol length, 1 for the escape, 0 for a missing symbol. Exact for valid
    codes: a byte is literal (counted with its escape) when it follows an escape that is not
    itself literal. When an escape ends a string, :func:`decode` stops there and the figure is
    still an upper bound of what it writes (its parse only differs from this one after that
    escape).
    """
    total = 0
    missing = False
    escapes = 0
    for i in range(len(codes)):  # no loop-carried dependency: vectorises
        n = lengths[codes[i]]
        total += n
        missing |= n == 0
        escapes += codes[i] == ESCAPE
    if escapes == 0:
        return total, missing
    total = 0
    missing = False
    after_escape = False
    for i in range(len(codes)):
        c = codes[i]
        coded = not after_escape  # a code, not the literal byte after an escape
        n = lengths[c]
        total += n if coded else 0
        missing |= coded and n == 0
        after_escape = coded and c == ESCAPE
    return total, missing


@njit(cache=True, nogil=True)
def decode(
    codes: np.ndarray,
    offs: np.ndarray,
    symbols: np.ndarray,
    lengths: np.ndarray,
    out: np.ndarray,
    out_offs: np.ndarray,
) -> int:
    """Expand the coded strings (``codes`` sliced by ``offs - offs[0]``) into ``out``.

    ``symbols[c]``: symbol c as a little-endian uint64 (0 for a missing one), ``lengths`` as in
    :func:`decoded_size`. Each symbol is copied as one 8-byte store, so ``out`` needs 8 bytes
    beyond :func:`decoded_size`. ``out_offs`` (any integer dtype) receives the output offsets.
    Returns the output size, -1 when an escape ends a string, -3 when ``offs`` decreases or
    points past ``codes`` (nothing beyond ``out``'s decoded size + 8 is written either way).
    """
    base = np.int64(offs[0])
    size = len(codes)
    o = 0
    i = 0
    for s in range(len(offs) - 1):
        out_offs[s] = o
        end = np.int64(offs[s + 1]) - base
        if end < i or end > size:
            return -3
        while i < end:
            c = codes[i]
            if c != ESCAPE:
                _store8(out, o, symbols[c])  # type: ignore[call-arg]
                o += lengths[c]
                i += 1
            else:
                if i + 1 >= end:
                    return -1
                out[o] = codes[i + 1]
                o += 1
                i += 2
    out_offs[len(offs) - 1] = o
    return o


# --- coding with a hashed table (up to BUCKET symbols of 3..8 bytes per hash bucket) --------------

HASH_BITS = 9  # 512 buckets ...
BUCKET = 8  # ... of up to 8 symbols of 3..8 bytes (fsst._top keeps tables within this)
HASH_MULT = 0x9E3779B1


@njit(cache=True, nogil=True, inline="always")
def _bucket(key: np.uint64) -> np.int64:
    """The hash bucket of a symbol of 3..8 bytes (its first three bytes), as ``fsst._slot``."""
    low = (key & np.uint64(0xFFFFFF)) * np.uint64(HASH_MULT)
    return np.int64(low >> np.uint64(24)) & ((1 << HASH_BITS) - 1)


@njit(cache=True, nogil=True)
def hashed_lookup(keys: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
    """``fsst._HashedLookup``'s arrays (``short``, ``slots``) and whether the table fits the
    buckets, built in one call: the symbols of 3..8 bytes go to their buckets by length, longest
    first, then by code; the short entries by code (a later duplicate wins)."""
    counts = np.zeros(1 << HASH_BITS, np.int64)
    slots = np.zeros(2 * BUCKET << HASH_BITS, np.uint64)
    usable = True
    for length in range(8, 2, -1):
        for c in range(len(keys)):
            if lengths[c] != length:
                continue
            key = np.uint64(keys[c])
            bucket = _bucket(key)
            rank = counts[bucket]
            counts[bucket] = rank + 1
            if rank >= BUCKET:
                usable = False
            elif usable:
                slots[2 * (bucket * BUCKET + rank)] = key
                slots[2 * (bucket * BUCKET + rank) + 1] = np.uint64(c | length << 8 | 1 << 12)
    if not usable:
        slots = np.zeros(2 * BUCKET << HASH_BITS, np.uint64)
    single = np.full(256, ESCAPE | 1 << 8 | 2 << 12, np.uint16)
    for c in range(len(keys)):
        if lengths[c] == 1:
            single[np.int64(keys[c])] = c | 1 << 8 | 1 << 12
    short = np.empty(0x10000 + 256, np.uint16)
    for p in range(0x10000 + 256):
        short[p] = single[p & 0xFF]
    for c in range(len(keys)):
        if lengths[c] == 2:
            short[np.int64(keys[c])] = c | 2 << 8 | 1 << 12
    return short, slots, usable


@njit(cache=True, nogil=True)
def encode_hashed(
    data: np.ndarray,
    offs: np.ndarray,
    short: np.ndarray,
    slots: np.ndarray,
    out: np.ndarray,
    out_offs: np.ndarray,
    tok_pos: np.ndarray,
    tok_len: np.ndarray,
) -> int:
    """Greedy longest-match coding for tables with at most ``BUCKET`` symbols of 3..8 bytes per
    hash bucket of their first three bytes. ``slots`` holds each bucket's (key, entry) pairs,
    longest symbol first, entry 0 after the last; the first that matches is the longest match,
    else the ``short`` entry of the next two bytes (65 536 entries), or of the next byte at a
    string's last one (256 more). Entries pack code (bits 0..7), input bytes (8..11) and output
    bytes (12..15: 2 for an escape, whose second byte is the input byte). ``out`` needs
    ``2 × len(data) + 1`` bytes; ``out_offs`` gets every string's start and the end. Returns
    the output size; with a non-empty ``tok_pos``, the tokens are recorded as in
    :func:`encode` and the return value is their number."""
    record = len(tok_pos) > 0
    LOW3 = np.uint64(0xFFFFFF)
    MULT = np.uint64(HASH_MULT)
    SLOT_MASK = np.uint64((1 << HASH_BITS) - 1)
    o = 0
    t = 0
    i = np.int64(offs[0])
    for s in range(len(offs) - 1):
        out_offs[s] = o
        end = np.int64(offs[s + 1])
        while i < end:
            word = _word_at(data, i)  # type: ignore[arg-type]
            rem = end - i
            at = (
                np.int64(word & np.uint64(0xFFFF)) if rem >= 2 else 0x10000 + np.int64(word & np.uint64(0xFF))
            )
            entry = np.int64(short[at])
            bucket = 2 * BUCKET * np.int64((((word & LOW3) * MULT) >> np.uint64(24)) & SLOT_MASK)
            for j in range(BUCKET):  # longest first; empty entries (length 0) after the last
                info = np.int64(slots[bucket + 2 * j + 1])
                n = (info >> 8) & 0xF
                if n == 0:
                    break
                if n <= rem and ((word ^ slots[bucket + 2 * j]) << np.uint64(8 * (8 - n))) == np.uint64(0):
                    entry = info
                    break
            n = (entry >> 8) & 0xF
            out[o] = entry & 0xFF
            out[o + 1] = word & np.uint64(0xFF)
            if record:
                tok_pos[t] = i
                tok_len[t] = n if (entry >> 12) == 1 else 0
                t += 1
            o += int(entry >> 12)
            i += n
    out_offs[len(offs) - 1] = o
    return t if record else o


@njit(cache=True, nogil=True)
def encode_hashed_lanes(
    data: np.ndarray,
    offs: np.ndarray,
    lanes: np.ndarray,
    short: np.ndarray,
    slots: np.ndarray,
    out: np.ndarray,
    out_offs: np.ndarray,
    lane_ends: np.ndarray,
) -> None:
    """:func:`encode_hashed` in four lanes of strings, ``lanes[k] .. lanes[k + 1]``, coded in
    turns (a token's lookups wait on the previous token's length; four independent chains
    keep the core busy). Lane k writes from ``2 × offs[lanes[k]]`` to ``lane_ends[k]``, with
    ``out_offs`` as in :func:`encode` (the caller joins the lanes). ``out`` needs
    ``2 × len(data) + 1`` bytes. The four lanes' steps are written out (helpers taking the
    arrays are neither inlined by LLVM nor free of reference counting when numba inlines them);
    the turns stop when a lane runs out of strings and :func:`encode_hashed` codes the rest."""
    LOW3 = np.uint64(0xFFFFFF)
    MULT = np.uint64(HASH_MULT)
    SLOT_MASK = np.uint64((1 << HASH_BITS) - 1)
    size = len(data)
    s0, s1, s2, s3 = lanes[0] - 1, lanes[1] - 1, lanes[2] - 1, lanes[3] - 1
    t0, t1, t2, t3 = lanes[1] - 1, lanes[2] - 1, lanes[3] - 1, lanes[4] - 1
    i0, i1, i2, i3 = (
        np.int64(offs[lanes[0]]),
        np.int64(offs[lanes[1]]),
        np.int64(offs[lanes[2]]),
        np.int64(offs[lanes[3]]),
    )
    e0, e1, e2, e3 = i0, i1, i2, i3
    # output positions unsigned: numba adds no negative-index wraparound to unsigned indices
    o0, o1, o2, o3 = np.uint64(2 * i0), np.uint64(2 * i1), np.uint64(2 * i2), np.uint64(2 * i3)
    ONE = np.uint64(1)
    while True:
        if i0 == e0:
            s0 += 1
            if s0 > t0:
                break
            out_offs[s0] = o0
            e0 = np.int64(offs[s0 + 1])
        else:
            w0 = _load_unaligned(data, i0) if i0 + 8 <= size else _load8(data, i0)  # type: ignore[call-arg, arg-type]
            r0 = e0 - i0
            a0 = np.int64(w0 & np.uint64(0xFFFF)) if r0 >= 2 else 0x10000 + np.int64(w0 & np.uint64(0xFF))
            x0 = np.int64(short[a0])
            f0 = False
            b0 = 2 * BUCKET * np.int64((((w0 & LOW3) * MULT) >> np.uint64(24)) & SLOT_MASK)
            for j in range(BUCKET):  # longest first; empty entries (length 0) after the last
                y0 = np.int64(slots[b0 + 2 * j + 1])
                n0 = (y0 >> 8) & 0xF
                if n0 == 0:
                    break
                hit0 = (n0 <= r0) & (((w0 ^ slots[b0 + 2 * j]) << np.uint64(8 * (8 - n0))) == np.uint64(0))
                x0 = y0 if hit0 & (f0 == 0) else x0
                f0 |= hit0
            out[o0] = np.uint8(x0 & 0xFF)
            out[o0 + ONE] = np.uint8(w0 & np.uint64(0xFF))
            i0 += (x0 >> 8) & 0xF
            o0 += np.uint64(x0 >> 12)
        if i1 == e1:
            s1 += 1
            if s1 > t1:
                break
            out_offs[s1] = o1
            e1 = np.int64(offs[s1 + 1])
        else:
            w1 = _load_unaligned(data, i1) if i1 + 8 <= size else _load8(data, i1)  # type: ignore[call-arg, arg-type]
            r1 = e1 - i1
            a1 = np.int64(w1 & np.uint64(0xFFFF)) if r1 >= 2 else 0x10000 + np.int64(w1 & np.uint64(0xFF))
            x1 = np.int64(short[a1])
            f1 = False
            b1 = 2 * BUCKET * np.int64((((w1 & LOW3) * MULT) >> np.uint64(24)) & SLOT_MASK)
            for j in range(BUCKET):  # longest first; empty entries (length 0) after the last
                y1 = np.int64(slots[b1 + 2 * j + 1])
                n1 = (y1 >> 8) & 0xF
                if n1 == 0:
                    break
                hit1 = (n1 <= r1) & (((w1 ^ slots[b1 + 2 * j]) << np.uint64(8 * (8 - n1))) == np.uint64(0))
                x1 = y1 if hit1 & (f1 == 0) else x1
                f1 |= hit1
            out[o1] = np.uint8(x1 & 0xFF)
            out[o1 + ONE] = np.uint8(w1 & np.uint64(0xFF))
            i1 += (x1 >> 8) & 0xF
            o1 += np.uint64(x1 >> 12)
        if i2 == e2:
            s2 += 1
            if s2 > t2:
                break
            out_offs[s2] = o2
            e2 = np.int64(offs[s2 + 1])
        else:
            w2 = _load_unaligned(data, i2) if i2 + 8 <= size else _load8(data, i2)  # type: ignore[call-arg, arg-type]
            r2 = e2 - i2
            a2 = np.int64(w2 & np.uint64(0xFFFF)) if r2 >= 2 else 0x10000 + np.int64(w2 & np.uint64(0xFF))
            x2 = np.int64(short[a2])
            f2 = False
            b2 = 2 * BUCKET * np.int64((((w2 & LOW3) * MULT) >> np.uint64(24)) & SLOT_MASK)
            for j in range(BUCKET):  # longest first; empty entries (length 0) after the last
                y2 = np.int64(slots[b2 + 2 * j + 1])
                n2 = (y2 >> 8) & 0xF
                if n2 == 0:
                    break
                hit2 = (n2 <= r2) & (((w2 ^ slots[b2 + 2 * j]) << np.uint64(8 * (8 - n2))) == np.uint64(0))
                x2 = y2 if hit2 & (f2 == 0) else x2
                f2 |= hit2
            out[o2] = np.uint8(x2 & 0xFF)
            out[o2 + ONE] = np.uint8(w2 & np.uint64(0xFF))
            i2 += (x2 >> 8) & 0xF
            o2 += np.uint64(x2 >> 12)
        if i3 == e3:
            s3 += 1
            if s3 > t3:
                break
            out_offs[s3] = o3
            e3 = np.int64(offs[s3 + 1])
        else:
            w3 = _load_unaligned(data, i3) if i3 + 8 <= size else _load8(data, i3)  # type: ignore[call-arg, arg-type]
            r3 = e3 - i3
            a3 = np.int64(w3 & np.uint64(0xFFFF)) if r3 >= 2 else 0x10000 + np.int64(w3 & np.uint64(0xFF))
            x3 = np.int64(short[a3])
            f3 = False
            b3 = 2 * BUCKET * np.int64((((w3 & LOW3) * MULT) >> np.uint64(24)) & SLOT_MASK)
            for j in range(BUCKET):  # longest first; empty entries (length 0) after the last
                y3 = np.int64(slots[b3 + 2 * j + 1])
                n3 = (y3 >> 8) & 0xF
                if n3 == 0:
                    break
                hit3 = (n3 <= r3) & (((w3 ^ slots[b3 + 2 * j]) << np.uint64(8 * (8 - n3))) == np.uint64(0))
                x3 = y3 if hit3 & (f3 == 0) else x3
                f3 |= hit3
            out[o3] = np.uint8(x3 & 0xFF)
            out[o3 + ONE] = np.uint8(w3 & np.uint64(0xFF))
            i3 += (x3 >> 8) & 0xF
            o3 += np.uint64(x3 >> 12)
    # finish each lane from where it stopped (a lane that broke out is past its last string)
    q0, q1, q2, q3 = np.int64(o0), np.int64(o1), np.int64(o2), np.int64(o3)
    state = np.array([[s0, i0, e0, q0], [s1, i1, e1, q1], [s2, i2, e2, q2], [s3, i3, e3, q3]])
    none = np.empty(0, np.int64)
    for k in range(4):
        s, i, e, o = state[k, 0], state[k, 1], state[k, 2], state[k, 3]
        last = lanes[k + 1] - 1
        if s <= last and i < e:  # the rest of string s
            rest = np.empty(2, np.int64)
            rest[0], rest[1] = i, e
            o += encode_hashed(data, rest, short, slots, out[o:], np.empty(2, np.int64), none, none)
        if s < last:  # the strings after it
            sub_offs = offs[s + 1 : last + 2]
            sub_out = np.empty(len(sub_offs), np.int64)
            size = encode_hashed(data, sub_offs, short, slots, out[o:], sub_out, none, none)
            out_offs[s + 1 : last + 1] = sub_out[:-1] + o
            o += size
        lane_ends[k] = o


# --- coding with per-length perfect hash tables (symbols of 3..8 bytes) ----------------------------

PROBE_BITS = 11  # 2 048 slots for the symbols of each length 3..8


@njit(cache=True, nogil=True)
def encode_probed(
    data: np.ndarray,
    offs: np.ndarray,
    state: np.ndarray,
    short: np.ndarray,
    pkey: np.ndarray,
    pent: np.ndarray,
    mults: np.ndarray,
    out: np.ndarray,
    out_offs: np.ndarray,
) -> int:
    """Greedy longest-match coding, one lane, from ``state`` = (string s, position i, end e of
    string s, output position o, last string t) to the end of string t; returns the output
    position reached. A lane starting at string ``a`` begins at (a - 1, offs[a], offs[a], o, t).

    ``short`` as ``_HashedLookup.short`` (entries code | input bytes << 8 | output bytes << 12).
    Every token is then looked up in the table of each length n = 3..8 (``2**PROBE_BITS``
    slots each, from ``(n - 3) << PROBE_BITS``): the n bytes at the position, as a
    little-endian word v, sit in slot ``(v * mults[n - 3]) >> (64 - PROBE_BITS)``, whose
    ``pkey`` equals v only when v is a symbol (each length's table is collision-free; an empty
    slot holds a key hashing elsewhere) and whose ``pent`` is then its entry. The longest
    match that fits before the string's end wins, else the short entry. The six probes are
    independent and no branch depends on which one matches: on text, where most tokens are
    long symbols, this runs about twice as fast as a bucket scan that stops at the first
    match, or as a branch that skips the probes after two bytes no long symbol starts with
    (both mispredict on every few tokens; bench/RESULTS.md has the measurements)."""
    LOW1, LOW2, TAIL = np.uint64(0xFF), np.uint64(0xFFFF), np.uint64(0x10000)
    S8, S12, LEN, ONE = np.uint64(8), np.uint64(12), np.uint64(0xF), np.uint64(1)
    SHIFT = np.uint64(64 - PROBE_BITS)
    K3, K4, K5 = np.uint64(0xFFFFFF), np.uint64(0xFFFFFFFF), np.uint64(0xFFFFFFFFFF)
    K6, K7, K8 = np.uint64(0xFFFFFFFFFFFF), np.uint64(0xFFFFFFFFFFFFFF), np.uint64(0xFFFFFFFFFFFFFFFF)
    m3, m4, m5, m6, m7, m8 = mults[0], mults[1], mults[2], mults[3], mults[4], mults[5]
    last8 = len(data) - 8
    s0, i0, e0, t0 = state[0], state[1], state[2], state[4]
    o0 = np.uint64(state[3])  # unsigned: no negative-index wraparound on the output stores
    while True:
        if i0 == e0:
            s0 += 1
            if s0 > t0:
                break
            out_offs[s0] = o0
            e0 = np.int64(offs[s0 + 1])
        else:
            w0 = _load_unaligned(data, i0) if i0 <= last8 else _load8(data, i0)  # type: ignore[call-arg, arg-type]
            r0 = e0 - i0
            x0 = np.uint64(short[(w0 & LOW2) if r0 >= 2 else (w0 & LOW1) + TAIL])
            v0 = w0 & K3
            h0 = ((v0 * m3) >> SHIFT) + np.uint64(0)
            x0 = pent[h0] if (pkey[h0] == v0) & (r0 >= 3) else x0
            v0 = w0 & K4
            h0 = ((v0 * m4) >> SHIFT) + np.uint64(1 << PROBE_BITS)
            x0 = pent[h0] if (pkey[h0] == v0) & (r0 >= 4) else x0
            v0 = w0 & K5
            h0 = ((v0 * m5) >> SHIFT) + np.uint64(2 << PROBE_BITS)
            x0 = pent[h0] if (pkey[h0] == v0) & (r0 >= 5) else x0
            v0 = w0 & K6
            h0 = ((v0 * m6) >> SHIFT) + np.uint64(3 << PROBE_BITS)
            x0 = pent[h0] if (pkey[h0] == v0) & (r0 >= 6) else x0
            v0 = w0 & K7
            h0 = ((v0 * m7) >> SHIFT) + np.uint64(4 << PROBE_BITS)
            x0 = pent[h0] if (pkey[h0] == v0) & (r0 >= 7) else x0
            v0 = w0 & K8
            h0 = ((v0 * m8) >> SHIFT) + np.uint64(5 << PROBE_BITS)
            x0 = pent[h0] if (pkey[h0] == v0) & (r0 >= 8) else x0
            out[o0] = np.uint8(x0 & LOW1)
            out[o0 + ONE] = np.uint8(w0 & LOW1)
            i0 += np.int64((x0 >> S8) & LEN)
            o0 += x0 >> S12
    return np.int64(o0)  # type: ignore[return-value]


@njit(cache=True, nogil=True)
def encode_probed_lanes(
    data: np.ndarray,
    offs: np.ndarray,
    lanes: np.ndarray,
    short: np.ndarray,
    pkey: np.ndarray,
    pent: np.ndarray,
    mults: np.ndarray,
    out: np.ndarray,
    out_offs: np.ndarray,
    lane_ends: np.ndarray,
) -> None:
    """:func:`encode_probed` in four lanes of strings coded in turns, with ``lanes``,
    ``out_offs`` and ``lane_ends`` as in :func:`encode_hashed_lanes` (``out`` needs
    ``2 × len(data) + 1`` bytes); when one lane runs out of strings, each lane's rest is coded
    by :func:`encode_probed`."""
    LOW1, LOW2, TAIL = np.uint64(0xFF), np.uint64(0xFFFF), np.uint64(0x10000)
    S8, S12, LEN, ONE = np.uint64(8), np.uint64(12), np.uint64(0xF), np.uint64(1)
    SHIFT = np.uint64(64 - PROBE_BITS)
    K3, K4, K5 = np.uint64(0xFFFFFF), np.uint64(0xFFFFFFFF), np.uint64(0xFFFFFFFFFF)
    K6, K7, K8 = np.uint64(0xFFFFFFFFFFFF), np.uint64(0xFFFFFFFFFFFFFF), np.uint64(0xFFFFFFFFFFFFFFFF)
    m3, m4, m5, m6, m7, m8 = mults[0], mults[1], mults[2], mults[3], mults[4], mults[5]
    last8 = len(data) - 8
    s0, s1, s2, s3 = lanes[0] - 1, lanes[1] - 1, lanes[2] - 1, lanes[3] - 1
    t0, t1, t2, t3 = lanes[1] - 1, lanes[2] - 1, lanes[3] - 1, lanes[4] - 1
    i0, i1, i2, i3 = (
        np.int64(offs[lanes[0]]),
        np.int64(offs[lanes[1]]),
        np.int64(offs[lanes[2]]),
        np.int64(offs[lanes[3]]),
    )
    e0, e1, e2, e3 = i0, i1, i2, i3
    # output positions unsigned: numba adds no negative-index wraparound to unsigned indices
    o0, o1, o2, o3 = np.uint64(2 * i0), np.uint64(2 * i1), np.uint64(2 * i2), np.uint64(2 * i3)
    while True:
        if i0 == e0:
            s0 += 1
            if s0 > t0:
                break
            out_offs[s0] = o0
            e0 = np.int64(offs[s0 + 1])
        else:
            w0 = _load_unaligned(data, i0) if i0 <= last8 else _load8(data, i0)  # type: ignore[call-arg, arg-type]
            r0 = e0 - i0
            x0 = np.uint64(short[(w0 & LOW2) if r0 >= 2 else (w0 & LOW1) + TAIL])
            v0 = w0 & K3
            h0 = ((v0 * m3) >> SHIFT) + np.uint64(0)
            x0 = pent[h0] if (pkey[h0] == v0) & (r0 >= 3) else x0
            v0 = w0 & K4
            h0 = ((v0 * m4) >> SHIFT) + np.uint64(1 << PROBE_BITS)
            x0 = pent[h0] if (pkey[h0] == v0) & (r0 >= 4) else x0
            v0 = w0 & K5
            h0 = ((v0 * m5) >> SHIFT) + np.uint64(2 << PROBE_BITS)
            x0 = pent[h0] if (pkey[h0] == v0) & (r0 >= 5) else x0
            v0 = w0 & K6
            h0 = ((v0 * m6) >> SHIFT) + np.uint64(3 << PROBE_BITS)
            x0 = pent[h0] if (pkey[h0] == v0) & (r0 >= 6) else x0
            v0 = w0 & K7
            h0 = ((v0 * m7) >> SHIFT) + np.uint64(4 << PROBE_BITS)
            x0 = pent[h0] if (pkey[h0] == v0) & (r0 >= 7) else x0
            v0 = w0 & K8
            h0 = ((v0 * m8) >> SHIFT) + np.uint64(5 << PROBE_BITS)
            x0 = pent[h0] if (pkey[h0] == v0) & (r0 >= 8) else x0
            out[o0] = np.uint8(x0 & LOW1)
            out[o0 + ONE] = np.uint8(w0 & LOW1)
            i0 += np.int64((x0 >> S8) & LEN)
            o0 += x0 >> S12
        if i1 == e1:
            s1 += 1
            if s1 > t1:
                break
            out_offs[s1] = o1
            e1 = np.int64(offs[s1 + 1])
        else:
            w1 = _load_unaligned(data, i1) if i1 <= last8 else _load8(data, i1)  # type: ignore[call-arg, arg-type]
            r1 = e1 - i1
            x1 = np.uint64(short[(w1 & LOW2) if r1 >= 2 else (w1 & LOW1) + TAIL])
            v1 = w1 & K3
            h1 = ((v1 * m3) >> SHIFT) + np.uint64(0)
            x1 = pent[h1] if (pkey[h1] == v1) & (r1 >= 3) else x1
            v1 = w1 & K4
            h1 = ((v1 * m4) >> SHIFT) + np.uint64(1 << PROBE_BITS)
            x1 = pent[h1] if (pkey[h1] == v1) & (r1 >= 4) else x1
            v1 = w1 & K5
            h1 = ((v1 * m5) >> SHIFT) + np.uint64(2 << PROBE_BITS)
            x1 = pent[h1] if (pkey[h1] == v1) & (r1 >= 5) else x1
            v1 = w1 & K6
            h1 = ((v1 * m6) >> SHIFT) + np.uint64(3 << PROBE_BITS)
            x1 = pent[h1] if (pkey[h1] == v1) & (r1 >= 6) else x1
            v1 = w1 & K7
            h1 = ((v1 * m7) >> SHIFT) + np.uint64(4 << PROBE_BITS)
            x1 = pent[h1] if (pkey[h1] == v1) & (r1 >= 7) else x1
            v1 = w1 & K8
            h1 = ((v1 * m8) >> SHIFT) + np.uint64(5 << PROBE_BITS)
            x1 = pent[h1] if (pkey[h1] == v1) & (r1 >= 8) else x1
            out[o1] = np.uint8(x1 & LOW1)
            out[o1 + ONE] = np.uint8(w1 & LOW1)
            i1 += np.int64((x1 >> S8) & LEN)
            o1 += x1 >> S12
        if i2 == e2:
            s2 += 1
            if s2 > t2:
                break
            out_offs[s2] = o2
            e2 = np.int64(offs[s2 + 1])
        else:
            w2 = _load_unaligned(data, i2) if i2 <= last8 else _load8(data, i2)  # type: ignore[call-arg, arg-type]
            r2 = e2 - i2
            x2 = np.uint64(short[(w2 & LOW2) if r2 >= 2 else (w2 & LOW1) + TAIL])
            v2 = w2 & K3
            h2 = ((v2 * m3) >> SHIFT) + np.uint64(0)
            x2 = pent[h2] if (pkey[h2] == v2) & (r2 >= 3) else x2
            v2 = w2 & K4
            h2 = ((v2 * m4) >> SHIFT) + np.uint64(1 << PROBE_BITS)
            x2 = pent[h2] if (pkey[h2] == v2) & (r2 >= 4) else x2
            v2 = w2 & K5
            h2 = ((v2 * m5) >> SHIFT) + np.uint64(2 << PROBE_BITS)
            x2 = pent[h2] if (pkey[h2] == v2) & (r2 >= 5) else x2
            v2 = w2 & K6
            h2 = ((v2 * m6) >> SHIFT) + np.uint64(3 << PROBE_BITS)
            x2 = pent[h2] if (pkey[h2] == v2) & (r2 >= 6) else x2
            v2 = w2 & K7
            h2 = ((v2 * m7) >> SHIFT) + np.uint64(4 << PROBE_BITS)
            x2 = pent[h2] if (pkey[h2] == v2) & (r2 >= 7) else x2
            v2 = w2 & K8
            h2 = ((v2 * m8) >> SHIFT) + np.uint64(5 << PROBE_BITS)
            x2 = pent[h2] if (pkey[h2] == v2) & (r2 >= 8) else x2
            out[o2] = np.uint8(x2 & LOW1)
            out[o2 + ONE] = np.uint8(w2 & LOW1)
            i2 += np.int64((x2 >> S8) & LEN)
            o2 += x2 >> S12
        if i3 == e3:
            s3 += 1
            if s3 > t3:
                break
            out_offs[s3] = o3
            e3 = np.int64(offs[s3 + 1])
        else:
            w3 = _load_unaligned(data, i3) if i3 <= last8 else _load8(data, i3)  # type: ignore[call-arg, arg-type]
            r3 = e3 - i3
            x3 = np.uint64(short[(w3 & LOW2) if r3 >= 2 else (w3 & LOW1) + TAIL])
            v3 = w3 & K3
            h3 = ((v3 * m3) >> SHIFT) + np.uint64(0)
            x3 = pent[h3] if (pkey[h3] == v3) & (r3 >= 3) else x3
            v3 = w3 & K4
            h3 = ((v3 * m4) >> SHIFT) + np.uint64(1 << PROBE_BITS)
            x3 = pent[h3] if (pkey[h3] == v3) & (r3 >= 4) else x3
            v3 = w3 & K5
            h3 = ((v3 * m5) >> SHIFT) + np.uint64(2 << PROBE_BITS)
            x3 = pent[h3] if (pkey[h3] == v3) & (r3 >= 5) else x3
            v3 = w3 & K6
            h3 = ((v3 * m6) >> SHIFT) + np.uint64(3 << PROBE_BITS)
            x3 = pent[h3] if (pkey[h3] == v3) & (r3 >= 6) else x3
            v3 = w3 & K7
            h3 = ((v3 * m7) >> SHIFT) + np.uint64(4 << PROBE_BITS)
            x3 = pent[h3] if (pkey[h3] == v3) & (r3 >= 7) else x3
            v3 = w3 & K8
            h3 = ((v3 * m8) >> SHIFT) + np.uint64(5 << PROBE_BITS)
            x3 = pent[h3] if (pkey[h3] == v3) & (r3 >= 8) else x3
            out[o3] = np.uint8(x3 & LOW1)
            out[o3 + ONE] = np.uint8(w3 & LOW1)
            i3 += np.int64((x3 >> S8) & LEN)
            o3 += x3 >> S12
    q0, q1, q2, q3 = np.int64(o0), np.int64(o1), np.int64(o2), np.int64(o3)
    state = np.array([[s0, i0, e0, q0, t0], [s1, i1, e1, q1, t1], [s2, i2, e2, q2, t2], [s3, i3, e3, q3, t3]])
    for k in range(4):
        lane_ends[k] = encode_probed(data, offs, state[k], short, pkey, pent, mults, out, out_offs)


@njit(cache=True, nogil=True)
def probed_lookup(
    keys: np.ndarray, lengths: np.ndarray, multipliers: np.ndarray, bits: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """``fsst._ProbedLookup``'s arrays (``pkey``, ``pent``, ``mults``) and whether every length
    3..8 found a multiplier, in one call: for each length, the first of ``multipliers`` that
    sends its symbols to distinct slots of ``2 ** bits`` and the decoy keys 0 and 1 to different
    ones; the empty slots hold the first symbol's key (0 when none), and the first symbol's
    slot's decoy, should it be empty, a key hashing elsewhere. Stops at the first length that
    finds none."""
    size = 1 << bits
    shift = np.uint64(64 - bits)
    pkey = np.zeros(6 * size, np.uint64)
    pent = np.zeros(6 * size, np.uint16)
    mults = np.zeros(6, np.uint64)
    seen = np.zeros(size, np.int64)
    stamp = 0
    for n in range(3, 9):
        base = (n - 3) * size
        first = np.uint64(0)
        for c in range(len(keys)):
            if lengths[c] == n:
                first = np.uint64(keys[c])
                break
        placed = False
        for mult in multipliers:
            stamp += 1
            distinct = True
            for c in range(len(keys)):
                if lengths[c] == n:
                    at = np.int64((np.uint64(keys[c]) * mult) >> shift)
                    if seen[at] == stamp:
                        distinct = False
                        break
                    seen[at] = stamp
            one = np.int64((np.uint64(1) * mult) >> shift)
            if not distinct or one == 0:  # the decoys 0 and 1 share slot 0
                continue
            mults[n - 3] = mult
            first_slot = np.int64((first * mult) >> shift)
            for i in range(base, base + size):
                pkey[i] = first
            pkey[base + first_slot] = np.uint64(1) if first_slot == 0 else np.uint64(0)
            for c in range(len(keys)):
                if lengths[c] == n:
                    at = np.int64((np.uint64(keys[c]) * mult) >> shift)
                    pkey[base + at] = keys[c]
                    pent[base + at] = c | n << 8 | 1 << 12
            placed = True
            break
        if not placed:
            return pkey, pent, mults, False
    return pkey, pent, mults, True


@njit(cache=True, nogil=True)
def string_end_bits(offs: np.ndarray) -> tuple[np.ndarray, int]:
    """A bitmap of the page's bytes (bit ``p - offs[0]`` of word ``(p - offs[0]) >> 6``) marking
    the last byte of every non-empty string, and the number of empty strings. The ends come in
    order, so a word is gathered in a register and stored whole at every string (no
    read-modify-write through memory when several strings end in one word)."""
    n = len(offs) - 1
    base = np.int64(offs[0])
    bits = np.zeros((np.int64(offs[n]) - base + 63) // 64 + 1, np.uint64)
    word = np.uint64(0)
    acc = np.uint64(0)
    nonempty = np.int64(0)
    prev = np.uint64(0)
    for s in range(n):
        end = np.uint64(np.int64(offs[s + 1]) - base)
        full = end > prev
        prev = end
        p = end - np.uint64(full)  # the last byte; an empty string or-s a zero at its position
        at = p >> np.uint64(6)
        acc = acc if at == word else np.uint64(0)
        word = at
        acc |= np.uint64(full) << (p & np.uint64(63))
        bits[word] = acc
        nonempty += np.int64(full)
    return bits, n - int(nonempty)


@njit(cache=True, nogil=True)
def _short_bytes(
    data: np.ndarray,
    base: int,
    bits: np.ndarray,
    short: np.ndarray,
    p: int,
    stop: int,
    out: np.ndarray,
    o: np.uint64,
    ends: np.ndarray,
    e: np.uint64,
    skip: np.uint64,
) -> tuple[np.uint64, np.uint64, np.uint64]:
    """:func:`_short_run`'s step for the bytes ``p .. stop`` one at a time (each reads its bit
    of the bitmap and its 8 bytes on its own: the first and last bytes of a run); returns the
    output position, the string end slot and whether the next byte is skipped."""
    LOW1, LOW2, TAIL = np.uint64(0xFF), np.uint64(0xFFFF), np.uint64(0x10000)
    ONE, TWO, S9, S12 = np.uint64(1), np.uint64(2), np.uint64(9), np.uint64(12)
    while p < stop:
        at = p - base
        end = (bits[at >> 6] >> np.uint64(at & 63)) & ONE
        w = _word_at(data, p)  # type: ignore[arg-type]
        x = np.uint64(short[(w & LOW1) + TAIL if end else (w & LOW2)])
        out[o] = np.uint8(x & LOW1)
        out[o + ONE] = np.uint8(w & LOW1)
        o += x >> (S12 + (skip << TWO))
        skip = (x >> S9) & ~skip & ONE
        ends[e] = np.int64(o)
        e += end
        p += 1
    return o, e, skip


@njit(cache=True, nogil=True)
def _short_run(
    data: np.ndarray,
    base: int,
    bits: np.ndarray,
    short: np.ndarray,
    a: int,
    b: int,
    out: np.ndarray,
    o: np.uint64,
    ends: np.ndarray,
    e: np.uint64,
) -> tuple[np.uint64, np.uint64]:
    """:func:`encode_short_lanes`' pass over the bytes ``a .. b`` (whole strings), from output
    position ``o`` and string end slot ``e``; returns both where it stopped. Every byte is looked
    up (no token chase): with symbols of one or two bytes, the next byte starts a token unless
    this one began a two-byte token, and a two-byte lookup is replaced by the one-byte one at a
    string's last byte. Each byte stores its code and literal byte whether or not it starts a
    token (the output position only advances for a token start, so a later token overwrites
    them) and the output position as the end of the current string (the last byte's store
    stands), so that the loop has no branch but its own."""
    LOW1, LOW2, TAIL = np.uint64(0xFF), np.uint64(0xFFFF), np.uint64(0x10000)
    ONE, TWO, S9, S12 = np.uint64(1), np.uint64(2), np.uint64(9), np.uint64(12)
    # whole 64-bit words of the bitmap with 8 readable bytes at every position: one word per 64 bytes
    first_word = (a - base + 63) >> 6
    last_word = (min(b, len(data) - 8) - base) >> 6
    if first_word >= last_word:
        o, e, _ = _short_bytes(data, base, bits, short, a, b, out, o, ends, e, np.uint64(0))
        return o, e
    head = base + 64 * first_word
    o, e, skip = _short_bytes(data, base, bits, short, a, head, out, o, ends, e, np.uint64(0))
    for q in range(first_word, last_word):
        word = bits[q]
        at = base + 64 * q
        for j in range(64):
            w = _load_unaligned(data, at + j)  # type: ignore[call-arg, var-annotated]
            end = word & ONE
            word >>= ONE
            x = np.uint64(short[(w & LOW1) + TAIL if end else (w & LOW2)])
            out[o] = np.uint8(x & LOW1)
            out[o + ONE] = np.uint8(w & LOW1)
            o += x >> (S12 + (skip << TWO))  # output bytes, or none (shifted out) when skipped
            skip = (x >> S9) & ~skip & ONE  # input bytes 2 (bit 9 of the entry) and a token start
            ends[e] = np.int64(o)
            e += end
    o, e, _ = _short_bytes(data, base, bits, short, base + 64 * last_word, b, out, o, ends, e, skip)
    return o, e


@njit(cache=True, nogil=True)
def encode_short_lanes(
    data: np.ndarray,
    offs: np.ndarray,
    lanes: np.ndarray,
    short: np.ndarray,
    pkey: np.ndarray,
    pent: np.ndarray,
    mults: np.ndarray,
    out: np.ndarray,
    out_offs: np.ndarray,
    lane_ends: np.ndarray,
) -> None:
    """Coding for tables without symbols of 3..8 bytes (``short`` entries as in
    :func:`encode_probed`; ``pkey``, ``pent`` and ``mults`` unused), with ``lanes``, ``out_offs``
    and ``lane_ends`` as in :func:`encode_hashed_lanes`. The lanes are coded one after another
    (one lane is best: nothing to join), each in one branch-free pass over its bytes across the
    string ends (:func:`_short_run`), which a bitmap marks (:func:`string_end_bits`). With a
    table of one- and two-byte symbols the token starts need no chase through the lookups, and
    no string end is a mispredicted exit branch (the four-lane token chase this replaced spent
    about a third of its time there; bench/RESULTS.md, "L19 FSST encode IV")."""
    n_lanes = len(lanes) - 1
    base = int(offs[0])
    bits, empty = string_end_bits(offs)
    direct = empty == 0 and n_lanes == 1  # string ends land in out_offs as they are
    ends = out_offs if direct else np.empty(len(offs) + n_lanes, np.int64)
    e = np.uint64(0)
    for k in range(n_lanes):
        a, b = int(offs[lanes[k]]), int(offs[lanes[k + 1]])
        o = np.uint64(2 * a)
        ends[e] = np.int64(o)  # the lane's start, before the end of its first non-empty string
        o, e = _short_run(data, base, bits, short, a, b, out, o, ends, e + np.uint64(1))
        lane_ends[k] = np.int64(o)
    if direct:
        return
    # each string starts where the last non-empty string before it in its lane ended
    e = np.uint64(0)
    for k in range(n_lanes):
        for s in range(lanes[k], lanes[k + 1]):
            out_offs[s] = ends[e]
            e += np.uint64(offs[s + 1] > offs[s])
        e += np.uint64(1)


# --- symbol table building ------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def merge_gains(
    keys: np.ndarray, lengths: np.ndarray, gains: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct (key, length) pairs, in order of first appearance, with their summed gains
    (an open-addressing hash table instead of a sort of every candidate)."""
    n = len(keys)
    size = 16
    while size < 4 * n:  # at most a quarter full: random substrings are mostly distinct, and
        size *= 2  # each probe past an occupied slot is a second cache miss (its key)
    where = np.full(size, -1, np.int32)  # half the cache lines of int64 (n < 2**31 candidates)
    out_keys = np.empty(n, np.uint64)
    out_lengths = np.empty(n, np.int64)
    out_gains = np.zeros(n, np.float64)
    count = 0
    for i in range(n):
        key = keys[i]
        length = lengths[i]
        h = np.int64(((key ^ np.uint64(length)) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(40)) & (
            size - 1
        )
        while True:
            at = where[h]
            if at < 0:
                where[h] = np.int32(count)
                out_keys[count] = key
                out_lengths[count] = length
                out_gains[count] = gains[i]
                count += 1
                break
            if out_keys[at] == key and out_lengths[at] == length:
                out_gains[at] += gains[i]
                break
            h = (h + 1) & (size - 1)
    return out_keys[:count], out_lengths[:count], out_gains[:count]


@njit(cache=True, nogil=True)
def gain_bar(total: np.ndarray, limit: int) -> float:
    """The ``limit``-th largest of ``total`` (``np.partition(total, len(total) - limit)`` at
    ``len(total) - limit``, 0 < limit <= len(total)) by counting, when every total is a whole
    number in 0..65535 (gains are lengths); NaN otherwise, for the caller's partition."""
    top = 0
    for g in total:
        if not (0 <= g < 65536) or g != np.floor(g):
            return np.nan
        top = max(top, int(g))
    counts = np.zeros(top + 1, np.int64)
    for g in total:
        counts[np.int64(g)] += 1
    seen = 0
    for value in range(top, -1, -1):
        seen += counts[value]
        if seen >= limit:
            return float(value)
    return np.nan


@njit(cache=True, nogil=True)
def bucket_keep(keys: np.ndarray, lengths: np.ndarray, order: np.ndarray, most: int) -> np.ndarray:
    """The first ``most`` candidates of ``order`` (best first) that keep every hash bucket within
    ``BUCKET`` symbols of 3..8 bytes (a symbol is dropped when its bucket is full)."""
    counts = np.zeros(1 << HASH_BITS, np.int64)
    keep = np.empty(min(most, len(order)), np.int64)
    kept = 0
    for i in order:
        if kept == most:
            break
        if lengths[i] >= 3:
            bucket = _bucket(np.uint64(keys[i]))
            counts[bucket] += 1
            if counts[bucket] > BUCKET:
                continue
        keep[kept] = i
        kept += 1
    return keep[:kept]


@njit(cache=True, nogil=True)
def capped_length_sum(offsets: np.ndarray, cap: int) -> int:
    """``sum(min(offsets[i + 1] - offsets[i], cap))``: the bytes of the strings each cut to its
    first ``cap`` bytes, in one pass and without the array of lengths."""
    total = 0
    for i in range(len(offsets) - 1):
        total += min(offsets[i + 1] - offsets[i], cap)
    return total


@njit(cache=True, nogil=True)
def cut_sample(
    data: np.ndarray, offs: np.ndarray, take: np.ndarray, cap: int
) -> tuple[np.ndarray, np.ndarray]:
    """The strings ``take`` (indices into ``offs``), each cut to its first ``cap`` bytes,
    joined: (bytes, int64 offsets from 0). One pass for the offsets, one for the copies."""
    n = len(take)
    soffs = np.empty(n + 1, np.int64)
    soffs[0] = 0
    total = 0
    for j in range(n):
        t = take[j]
        piece = np.int64(offs[t + 1]) - np.int64(offs[t])
        total += int(piece if piece < cap else cap)
        soffs[j + 1] = total
    sample = np.empty(total, np.uint8)
    for j in range(n):  # byte loops: slice copies cost numba ~1.5 s more to compile
        start = np.int64(offs[take[j]]) - soffs[j]
        for at in range(soffs[j], soffs[j + 1]):
            sample[at] = data[start + at]
    return sample, soffs


@njit(cache=True, nogil=True, inline="always")
def _low_bytes(word: np.uint64, n: int | np.int64) -> np.uint64:
    """The low ``n`` (1..8) bytes of ``word``."""
    return word & (np.uint64(0xFFFFFFFFFFFFFFFF) >> np.uint64(8 * (8 - n)))


@njit(cache=True, nogil=True)
def substring_candidates(sample: np.ndarray, soffs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every substring of 1..8 bytes of every string of ``sample`` (sliced by ``soffs``, from 0),
    as (little-endian key, length), one per occurrence (``fsst._candidates``'s numpy form
    lists the same pairs, grouped by length)."""
    size = len(sample)
    keys = np.empty(8 * size, np.uint64)
    lengths = np.empty(8 * size, np.int64)
    count = 0
    for s in range(len(soffs) - 1):
        end = np.int64(soffs[s + 1])
        for p in range(np.int64(soffs[s]), end):
            word = _word_at(sample, p)  # type: ignore[arg-type]
            longest = end - p if end - p < 8 else 8
            for k in range(1, longest + 1):
                keys[count] = _low_bytes(word, k)
                lengths[count] = k
                count += 1
    return keys[:count], lengths[:count]


@njit(cache=True, nogil=True)
def token_candidates(
    sample: np.ndarray, soffs: np.ndarray, tokens: np.ndarray, match: np.ndarray, pairs: bool
) -> tuple[np.ndarray, np.ndarray]:
    """The tokens of a coded sample (start ``tokens``, ``match`` bytes, 0 for an escaped byte) as
    (key, length) candidates, and with ``pairs`` the joins of each two adjacent tokens of one
    string that fit in 8 bytes (``fsst._refine``'s numpy form lists the same pairs)."""
    n = len(tokens)
    keys = np.empty(2 * n, np.uint64)
    lengths = np.empty(2 * n, np.int64)
    count = 0
    s = 0
    for j in range(n):
        p = np.int64(tokens[j])
        while np.int64(soffs[s + 1]) <= p:  # the string holding the token
            s += 1
        length = np.int64(match[j]) if match[j] > 0 else np.int64(1)
        word = _word_at(sample, p)  # type: ignore[arg-type]
        keys[count] = _low_bytes(word, length)
        lengths[count] = length
        count += 1
        if pairs and j + 1 < n:
            joined = length + (np.int64(match[j + 1]) if match[j + 1] > 0 else np.int64(1))
            if np.int64(tokens[j + 1]) < np.int64(soffs[s + 1]) and joined <= 8:
                keys[count] = _low_bytes(word, joined)
                lengths[count] = joined
                count += 1
    return keys[:count], lengths[:count]
