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
