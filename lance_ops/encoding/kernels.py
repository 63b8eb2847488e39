"""The encoder's compiled loops, or their numpy forms for small inputs.

The compiled (numba) kernels (``_copy_kernels``, ``_bitpack_kernels``, ``_hash_kernels``; and
``_minmax_kernels``, which :mod:`lance_ops.encoding.statistics` calls for large pages only) are
the fast path, but the first call of any of them in a process costs ~0.7 s of CPU: importing
numba, building its CPU target (typing registries, the runtime) and loading the cached machine
code. A small write would spend most of its time there. So each function here runs the numpy
form of its kernel when the input is small (fewer than :data:`COMPILED_FROM` values or
:data:`COMPILED_FROM_BYTES` bytes), and imports and calls the compiled kernel otherwise:
writing a few thousand rows does not load numba, a large write pays its start once. Once one
compiled kernel has run in the process (its start paid), every later call uses the compiled
kernels, whatever its size (a large write's small pages and copies among them).

Both forms give the same results (tests/encoding/test_kernel_forms.py checks them against each
other). Importing this module loads numpy only.

The decoder's kernels (``_decode_kernels``: bit-unpacking of mini-block chunks and level slices,
span cuts) choose by what the process has read so far rather than by one call's size (a scan
decodes pages of tens of thousands of values a call): see :data:`DECODE_COMPILED_AFTER`
(tests/encoding/test_decode_kernels.py checks those forms).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "COMPILED_FROM",
    "COMPILED_FROM_BYTES",
    "PACK_COMPILED_FROM",
    "best_coupons",
    "copy_spans",
    "cut_spans",
    "first_of_each_coupon",
    "murmur3_x64_128",
    "murmur3_x64_128_words",
    "pack_blocks",
    "unpack_chunks",
    "unpack_slices",
]

#: Inputs of at least this many values (or hashes) use the compiled kernel ...
COMPILED_FROM = 1 << 16
#: ... and so do byte strings and copies of at least this many bytes.
COMPILED_FROM_BYTES = 1 << 20
#: FastLanes packing's numpy form costs ~4 ns a value (numba's start ~0.7 s, ~175M values'
#: worth), and its inputs are padded to whole 1024-value blocks per mini-block chunk (a few
#: thousand nullable strings' levels grow past ``COMPILED_FROM``): it has its own threshold.
PACK_COMPILED_FROM = 1 << 20

_compiled_in_use = False
#: Decoding (reads) switches to the compiled kernels once this process has decoded this many
#: values with their numpy forms (or once any compiled kernel has run): numba's start (~0.5 s of
#: CPU) is worth paying for a process that keeps reading (a scan of 10M rows of four numeric
#: columns is 40M values), not for one read of a few hundred thousand rows.
DECODE_COMPILED_AFTER = 1 << 24
_decoded_values = 0


def _compiled(large: bool) -> bool:
    """Whether to call the compiled kernel: for a large input, and for any input once one has been
    called in this process."""
    global _compiled_in_use  # noqa: PLW0603 - one flag per process: numba's start is paid once
    _compiled_in_use = _compiled_in_use or large
    return _compiled_in_use


_U64 = np.uint64
_C1 = _U64(0x87C37B91114253D5)
_C2 = _U64(0x4CF5AD432745937F)


# ---------------------------------------------------------------- span copies


def copy_spans(
    dst: np.ndarray, dst_starts: np.ndarray, src: np.ndarray, src_starts: np.ndarray, sizes: np.ndarray
) -> None:
    """``dst[dst_starts[i] : dst_starts[i] + sizes[i]] = src[src_starts[i] : ... + sizes[i]]``
    for every i (uint8 arrays). The spans are checked against both arrays first: the compiled
    loop does not check bounds."""
    dst_starts = np.ascontiguousarray(dst_starts, np.int64)
    src_starts = np.ascontiguousarray(src_starts, np.int64)
    sizes = np.ascontiguousarray(sizes, np.int64)
    if not len(sizes):
        return
    if (
        len(dst_starts) != len(sizes)
        or len(src_starts) != len(sizes)
        or int(sizes.min()) < 0
        or int(dst_starts.min()) < 0
        or int(src_starts.min()) < 0
        or int((dst_starts + sizes).max()) > len(dst)
        or int((src_starts + sizes).max()) > len(src)
    ):
        raise ValueError("a span lies outside its array")
    if _compiled(int(sizes.sum()) >= COMPILED_FROM_BYTES):
        from lance_ops.encoding._copy_kernels import _copy_spans  # noqa: PLC0415 - numba, on first use

        _copy_spans(dst, dst_starts, src, src_starts, sizes)
        return
    _numpy_copy_spans(dst, dst_starts, src, src_starts, sizes)


def _numpy_copy_spans(
    dst: np.ndarray, dst_starts: np.ndarray, src: np.ndarray, src_starts: np.ndarray, sizes: np.ndarray
) -> None:
    """The numpy form of :func:`copy_spans`."""
    within = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    dst[np.repeat(dst_starts, sizes) + within] = src[np.repeat(src_starts, sizes) + within]


# ---------------------------------------------------------------- FastLanes packing


def pack_blocks(values: np.ndarray, width: int, bits: int, source: np.ndarray, out: np.ndarray) -> None:
    """Or the ``width``-bit FastLanes packing of ``values`` (whole 1024-value blocks of
    ``bits``-bit unsigned values, flat) into ``out`` (zeroed, flat, ``width * 1024 / bits``
    words per block, same dtype); ``source[row * lanes + lane]`` is the position in its block
    of the value at that grid cell. Values must fit in ``width`` bits or are masked."""
    if _compiled(len(values) >= PACK_COMPILED_FROM):
        from lance_ops.encoding._bitpack_kernels import pack_blocks as compiled  # noqa: PLC0415

        compiled(values, width, bits, source, out)
        return
    _numpy_pack_blocks(values, width, bits, source, out)


def _numpy_pack_blocks(
    values: np.ndarray, width: int, bits: int, source: np.ndarray, out: np.ndarray
) -> None:
    """The numpy form of :func:`pack_blocks`."""
    lanes = 1024 // bits
    blocks = values[: len(values) // 1024 * 1024].reshape(-1, 1024)
    grid = out.reshape(len(blocks), width * lanes)
    mask = _U64(np.iinfo(np.uint64).max if width >= 64 else (1 << width) - 1)
    for row in range(bits):
        word, shift = divmod(row * width, bits)
        cells = blocks[:, source[row * lanes : (row + 1) * lanes].astype(np.int64)].astype(np.uint64) & mask
        grid[:, word * lanes : (word + 1) * lanes] |= (cells << _U64(shift)).astype(out.dtype)
        if shift + width > bits:
            grid[:, (word + 1) * lanes : (word + 2) * lanes] |= (cells >> _U64(bits - shift)).astype(
                out.dtype
            )


# ---------------------------------------------------------------- MurmurHash3 x64-128


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << _U64(r)) | (x >> _U64(64 - r))  # type: ignore[no-any-return]


def _fmix(k: np.ndarray) -> np.ndarray:
    k = k ^ (k >> _U64(33))
    k = k * _U64(0xFF51AFD7ED558CCD)
    k = k ^ (k >> _U64(33))
    k = k * _U64(0xC4CEB9FE1A85EC53)
    return k ^ (k >> _U64(33))  # type: ignore[no-any-return]


def _finish(
    h1: np.ndarray, h2: np.ndarray, lengths: np.ndarray, h1_out: np.ndarray, h2_out: np.ndarray
) -> None:
    h1 = h1 ^ lengths
    h2 = h2 ^ lengths
    h1 = h1 + h2
    h2 = h2 + h1
    h1 = _fmix(h1)
    h2 = _fmix(h2)
    h1 = h1 + h2
    h1_out[:] = h1
    h2_out[:] = h2 + h1


def _words_at(padded: np.ndarray, at: np.ndarray, count: np.ndarray | None = None) -> np.ndarray:
    """Little-endian u64 of the 8 bytes (``count``: the first ``count``, 1 to 8) at each ``at``."""
    words = padded[at[:, None] + np.arange(8)].view("<u8").reshape(-1)
    if count is None:
        return words  # type: ignore[no-any-return]
    keep = np.where(count >= 8, _U64(0), _U64(1) << (_U64(8) * np.minimum(count, 7).astype(np.uint64)))
    return words & (keep - _U64(1))  # type: ignore[no-any-return]


def murmur3_x64_128(
    data: np.ndarray, offsets: np.ndarray, seed: int, h1_out: np.ndarray, h2_out: np.ndarray
) -> None:
    """Fill ``h1_out[i]``, ``h2_out[i]`` with the hash of ``data[offsets[i]:offsets[i + 1]]``
    (``data``: uint8; ``offsets``: int64)."""
    if _compiled(len(data) >= COMPILED_FROM_BYTES or len(offsets) - 1 >= COMPILED_FROM):
        from lance_ops.encoding._hash_kernels import murmur3_x64_128 as compiled  # noqa: PLC0415

        compiled(data, offsets, seed, h1_out, h2_out)
        return
    _numpy_murmur3_x64_128(data, offsets, seed, h1_out, h2_out)


def _numpy_murmur3_x64_128(
    data: np.ndarray, offsets: np.ndarray, seed: int, h1_out: np.ndarray, h2_out: np.ndarray
) -> None:
    """The numpy form of :func:`murmur3_x64_128`."""
    starts = offsets[:-1].astype(np.int64)
    lengths = np.diff(offsets).astype(np.int64)
    padded = np.concatenate([np.asarray(data, np.uint8), np.zeros(16, np.uint8)])
    h1 = np.full(len(lengths), seed, np.uint64)
    h2 = np.full(len(lengths), seed, np.uint64)
    blocks = lengths // 16
    for block in range(int(blocks.max(initial=0))):
        # The strings with a 16-byte block at this position: one pass over all of them.
        live = np.flatnonzero(blocks > block)
        at = starts[live] + 16 * block
        k1, k2 = _words_at(padded, at), _words_at(padded, at + 8)
        a, b = h1[live], h2[live]
        a ^= _rotl(k1 * _C1, 31) * _C2
        a = (_rotl(a, 27) + b) * _U64(5) + _U64(0x52DCE729)
        b ^= _rotl(k2 * _C2, 33) * _C1
        b = (_rotl(b, 31) + a) * _U64(5) + _U64(0x38495AB5)
        h1[live], h2[live] = a, b
    tail = starts + 16 * blocks
    rest = lengths - 16 * blocks
    high = np.flatnonzero(rest > 8)
    h2[high] ^= _rotl(_words_at(padded, tail[high] + 8, rest[high] - 8) * _C2, 33) * _C1
    low = np.flatnonzero(rest > 0)
    h1[low] ^= _rotl(_words_at(padded, tail[low], np.minimum(rest[low], 8)) * _C1, 31) * _C2
    _finish(h1, h2, lengths.astype(np.uint64), h1_out, h2_out)


def murmur3_x64_128_words(words: np.ndarray, seed: int, h1_out: np.ndarray, h2_out: np.ndarray) -> None:
    """The hash of each 8-byte little-endian value of ``words`` (uint64; how the library hashes
    ints and doubles): a tail of eight bytes and nothing else."""
    if _compiled(len(words) >= COMPILED_FROM):
        from lance_ops.encoding._hash_kernels import murmur3_x64_128_words as compiled  # noqa: PLC0415

        compiled(words, seed, h1_out, h2_out)
        return
    _numpy_murmur3_x64_128_words(words, seed, h1_out, h2_out)


def _numpy_murmur3_x64_128_words(
    words: np.ndarray, seed: int, h1_out: np.ndarray, h2_out: np.ndarray
) -> None:
    """The numpy form of :func:`murmur3_x64_128_words`."""
    seeds = np.full(len(words), seed, np.uint64)
    h1 = seeds ^ (_rotl(np.asarray(words, np.uint64) * _C1, 31) * _C2)
    _finish(h1, seeds, np.full(len(words), 8, np.uint64), h1_out, h2_out)


# ---------------------------------------------------------------- HyperLogLog coupons


def _coupon_values(h2: np.ndarray) -> np.ndarray:
    """Each hash's register value: one plus the leading zeros of its second half, at most 63."""
    # Bit lengths from float64 exponents, exact for 32-bit halves.
    high = np.frexp((h2 >> _U64(32)).astype(np.float64))[1]
    low = np.frexp((h2 & _U64(0xFFFFFFFF)).astype(np.float64))[1]
    leading = 64 - np.where(high > 0, high + 32, low)
    return np.minimum(leading, 62).astype(np.int64) + 1  # type: ignore[no-any-return]


def _kept(keep: np.ndarray, count: int) -> np.ndarray:
    return np.flatnonzero(keep) if len(keep) else np.arange(count)


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
    if _compiled(len(h1) >= COMPILED_FROM):
        from lance_ops.encoding._hash_kernels import best_coupons as compiled  # noqa: PLC0415

        return compiled(h1, h2, keep, lg_k, best_value, best_index)  # type: ignore[no-any-return]
    return _numpy_best_coupons(h1, h2, keep, lg_k, best_value, best_index)


def _numpy_best_coupons(
    h1: np.ndarray,
    h2: np.ndarray,
    keep: np.ndarray,
    lg_k: int,
    best_value: np.ndarray,
    best_index: np.ndarray,
) -> int:
    """The numpy form of :func:`best_coupons`."""
    at = _kept(keep, len(h1))
    slots = (h1[at] & _U64((1 << lg_k) - 1)).astype(np.int64)
    values = _coupon_values(h2[at])
    # Per slot, its largest value and the first hash with it: the head of each slot's run when
    # sorted by slot, value descending, position.
    order = np.lexsort((at, -values, slots))
    heads = order[np.r_[True, slots[order][1:] != slots[order][:-1]]] if len(order) else order
    slot, value = slots[heads], values[heads]
    current = best_value[slot].astype(np.int64)
    better = value > current
    best_value[slot[better]] = value[better]
    best_index[slot[better]] = at[heads][better]
    return int(np.count_nonzero(current[better] == 0))


def first_of_each_coupon(
    h1: np.ndarray, h2: np.ndarray, keep: np.ndarray, lg_table: int
) -> tuple[np.ndarray, bool]:
    """The index of the first hash of each distinct coupon (the library's register value above the
    hash's 26-bit slot address), in order, among the hashes ``keep`` marks (empty: all); and
    False instead when the distinct coupons would fill more than half of a ``2**lg_table``-slot
    table (the caller then deduplicates otherwise)."""
    if _compiled(len(h1) >= COMPILED_FROM):
        from lance_ops.encoding._hash_kernels import first_of_each_coupon as compiled  # noqa: PLC0415

        return compiled(h1, h2, keep, lg_table)  # type: ignore[no-any-return]
    return _numpy_first_of_each_coupon(h1, h2, keep, lg_table)


def _numpy_first_of_each_coupon(
    h1: np.ndarray, h2: np.ndarray, keep: np.ndarray, lg_table: int
) -> tuple[np.ndarray, bool]:
    """The numpy form of :func:`first_of_each_coupon`."""
    at = _kept(keep, len(h1))
    coupons = (_coupon_values(h2[at]).astype(np.uint64) << _U64(26)) | (h1[at] & _U64(0x3FFFFFF))
    first = np.unique(coupons, return_index=True)[1]
    if len(first) > (1 << lg_table) // 2:
        return np.zeros(0, np.int64), False
    return np.sort(at[first]).astype(np.int64), True


# ---------------------------------------------------------------- InlineBitpacking


def chunk_widths(values: np.ndarray) -> np.ndarray:
    """Bit length of the OR of each 1024-value chunk of ``values`` (unsigned; the last chunk may be
    short), as int64."""
    if _compiled(len(values) >= PACK_COMPILED_FROM):
        from lance_ops.encoding._bitpack_kernels import chunk_widths as compiled  # noqa: PLC0415

        return compiled(values)  # type: ignore[no-any-return]
    return _numpy_chunk_widths(values)


def _numpy_chunk_widths(values: np.ndarray) -> np.ndarray:
    """The numpy form of :func:`chunk_widths`."""
    chunks = -(-len(values) // 1024)
    if not chunks:
        return np.zeros(0, np.int64)
    padded = np.zeros(chunks * 1024, values.dtype)
    padded[: len(values)] = values
    ors = np.bitwise_or.reduce(padded.reshape(chunks, 1024), axis=1).astype(np.uint64)
    # Bit lengths from float64 exponents, exact for 32-bit halves (as _coupon_values).
    high = np.frexp((ors >> _U64(32)).astype(np.float64))[1]
    low = np.frexp((ors & _U64(0xFFFFFFFF)).astype(np.float64))[1]
    return np.where(high > 0, high + 32, low).astype(np.int64)  # type: ignore[no-any-return]


def inline_pack(
    values: np.ndarray, widths: np.ndarray, bits: int, source: np.ndarray, out: np.ndarray
) -> None:
    """InlineBitpacking of ``values`` (unsigned ``bits``-bit, flat, any count) into ``out`` (zeroed,
    same dtype, ``sum(1 + widths * 1024 / bits)`` words): per 1024-value chunk its width word, then
    its FastLanes words at that width (``widths``: :func:`chunk_widths`); the last chunk is
    zero-padded. ``source`` as for :func:`pack_blocks`."""
    if _compiled(len(values) >= PACK_COMPILED_FROM):
        from lance_ops.encoding._bitpack_kernels import inline_pack as compiled  # noqa: PLC0415

        compiled(values, widths, bits, source, out)
        return
    _numpy_inline_pack(values, widths, bits, source, out)


def _numpy_inline_pack(
    values: np.ndarray, widths: np.ndarray, bits: int, source: np.ndarray, out: np.ndarray
) -> None:
    """The numpy form of :func:`inline_pack` (chunks of one width packed together)."""
    lanes = 1024 // bits
    padded = np.zeros(len(widths) * 1024, values.dtype)
    padded[: len(values)] = values
    blocks = padded.reshape(-1, 1024)
    chunk_words = 1 + widths * lanes
    starts = np.cumsum(chunk_words) - chunk_words
    out[starts] = widths.astype(out.dtype)
    for width in np.unique(widths).tolist():
        if width == 0:
            continue
        idx = np.flatnonzero(widths == width)
        packed = np.zeros(len(idx) * width * lanes, out.dtype)
        pack_blocks(np.ascontiguousarray(blocks[idx]).reshape(-1), width, bits, source, packed)
        out[(starts[idx] + 1)[:, None] + np.arange(width * lanes)] = packed.reshape(len(idx), -1)


# ---------------------------------------------------------------- HyperLogLog coupons of 8-byte values

_CANONICAL_NAN = _U64(0x7FF8000000000000)


def word_hashes(words: np.ndarray, floats: bool, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The hashes :func:`word_best_coupons` computes as it goes, as arrays (numpy: for a few values)."""
    return _numpy_word_hashes(words, floats, seed)


def _numpy_word_hashes(words: np.ndarray, floats: bool, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The hashes :func:`word_best_coupons` computes as it goes, as arrays."""
    if floats:
        doubles = words.view(np.float64)
        words = np.where(np.isnan(doubles), _CANONICAL_NAN, np.where(doubles == 0, _U64(0), words))
    h1, h2 = np.empty(len(words), np.uint64), np.empty(len(words), np.uint64)
    _numpy_murmur3_x64_128_words(words, seed, h1, h2)
    return h1, h2


def word_best_coupons(
    words: np.ndarray,
    valid: np.ndarray,
    floats: bool,
    seed: int,
    lg_k: int,
    best_value: np.ndarray,
    best_index: np.ndarray,
) -> int:
    """:func:`best_coupons` of the hashes of ``words`` (uint64: 8-byte values as
    :func:`murmur3_x64_128_words` hashes them; ``floats``: doubles' bits, both zeros hashed as
    +0.0 and every NaN as the canonical one) where ``valid`` is set (empty: all)."""
    if _compiled(len(words) >= COMPILED_FROM):
        from lance_ops.encoding._hash_kernels import word_best_coupons as compiled  # noqa: PLC0415

        return compiled(words, valid, floats, seed, lg_k, best_value, best_index)  # type: ignore[no-any-return]
    h1, h2 = _numpy_word_hashes(words, floats, seed)
    return _numpy_best_coupons(h1, h2, valid, lg_k, best_value, best_index)


def word_first_coupons(
    words: np.ndarray, valid: np.ndarray, floats: bool, seed: int, lg_table: int
) -> tuple[np.ndarray, bool]:
    """:func:`first_of_each_coupon` of the hashes of ``words`` (as :func:`word_best_coupons`)."""
    if _compiled(len(words) >= COMPILED_FROM):
        from lance_ops.encoding._hash_kernels import word_first_coupons as compiled  # noqa: PLC0415

        return compiled(words, valid, floats, seed, lg_table)  # type: ignore[no-any-return]
    h1, h2 = _numpy_word_hashes(words, floats, seed)
    return _numpy_first_of_each_coupon(h1, h2, valid, lg_table)


# ---------------------------------------------------------------- mini-block decoding


def _compiled_decode(values: int) -> bool:
    """Whether a decode of ``values`` values calls its compiled kernel (see
    :data:`DECODE_COMPILED_AFTER`). The count is a plain global: a lost update between threads
    only delays the switch."""
    global _decoded_values  # noqa: PLW0603 - one count per process, like ``_compiled_in_use``
    if _compiled_in_use:
        return True
    _decoded_values += values
    return _compiled(_decoded_values >= DECODE_COMPILED_AFTER)


def unpack_chunks(words: np.ndarray, starts: np.ndarray, widths: np.ndarray, nums: np.ndarray) -> np.ndarray:
    """The values of InlineBitpacking chunks, back to back: chunk ``c`` has its width word
    ``widths[c]`` at ``words[starts[c]]`` (unsigned T-bit words), its packed words after it, and
    ``nums[c]`` (<= 1024) values. The caller has checked the chunks (widths <= T, every chunk's
    words within ``words``): the compiled loop does not check bounds."""
    nums = np.ascontiguousarray(nums, np.int64)
    total = int(nums.sum())
    if _compiled_decode(total):
        from lance_ops.encoding._decode_kernels import unpack_chunks as compiled  # noqa: PLC0415

        out = np.empty(total, words.dtype)
        compiled(np.ascontiguousarray(words), np.ascontiguousarray(starts, np.int64), nums, out)
        return out
    from lance_ops.encoding.compression.bitpacking import numpy_unpack_chunks  # noqa: PLC0415 - it imports us

    return numpy_unpack_chunks(words, starts, widths, nums)


def unpack_slices(
    words: np.ndarray, firsts: np.ndarray, nums: np.ndarray, raw_tails: np.ndarray, width: int
) -> np.ndarray:
    """The values of OutOfLineBitpacking slices, back to back: slice ``s`` starts at
    ``words[firsts[s]]`` (unsigned T-bit words) with ``nums[s]`` values, its whole 1024-value
    blocks packed at ``width``, then its tail (raw words when ``raw_tails[s]``, else one more
    packed block). The caller has checked every slice's size against ``words``: the compiled
    loop does not check bounds."""
    nums = np.ascontiguousarray(nums, np.int64)
    total = int(nums.sum())
    if _compiled_decode(total):
        from lance_ops.encoding._decode_kernels import unpack_slices as compiled  # noqa: PLC0415

        out = np.empty(total, words.dtype)
        compiled(
            np.ascontiguousarray(words),
            np.ascontiguousarray(firsts, np.int64),
            nums,
            np.ascontiguousarray(raw_tails, np.bool_),
            width,
            out,
        )
        return out
    from lance_ops.encoding.compression.bitpacking import numpy_unpack_slices  # noqa: PLC0415 - it imports us

    return numpy_unpack_slices(words, firsts, nums, raw_tails, width)


def cut_spans(blob: np.ndarray, starts: np.ndarray, sizes: np.ndarray, values: int) -> np.ndarray:
    """``blob[starts[i] : starts[i] + sizes[i]]`` for every i, concatenated (uint8; the spans
    of ``values`` decoded values): :func:`~lance_ops.encoding.compression.base.gather_spans`, or
    one compiled copy of all spans into a new array once decoding is compiled (see
    :data:`DECODE_COMPILED_AFTER`)."""
    from lance_ops.encoding.compression.base import gather_spans  # noqa: PLC0415 - it imports us

    starts = np.asarray(starts, np.int64)
    sizes = np.asarray(sizes, np.int64)
    if len(starts) < 2 or not _compiled_decode(values):
        return gather_spans(blob, starts, sizes)
    out = np.empty(int(sizes.sum()), np.uint8)
    copy_spans(out, np.cumsum(sizes) - sizes, blob, starts, sizes)
    return out
