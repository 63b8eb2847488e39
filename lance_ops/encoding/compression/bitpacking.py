"""Bit-packing with the FastLanes transposed layout (spec §7.4, §7.5).

**FastLanes block.** 1 024 values of T bits (T ∈ {8, 16, 32, 64}) packed at width W take
``1024·W/T`` T-bit words. With ``L = 1024 / T`` lanes and ``ORDER = [0, 4, 2, 6, 1, 5, 3, 7]``
the block is a T × L grid whose cell (row r, lane l) holds input value
``128·(r mod 8) + 16·ORDER[r div 8] + l``. Each lane concatenates the W low bits of its T
cells LSB-first (row r at stream bits ``[r·W, (r+1)·W)``) and cuts the stream into W words;
word k of lane l is output word ``L·k + l``. Packing loops over the T rows only; every step
is vectorised over all blocks of a page and all lanes (unpacking over all rows too).

**InlineBitpacking** (mini-block; also block context for small level slices): each chunk of
1 024 values (the last zero-padded to 1 024) is ``word 0 = W`` as one T-bit integer, then the
packed words; W is the bit length of the OR of the chunk's values (unsigned, no zigzag).
Example: int32 chunk with W = 10 → ``4 × (1 + 320) = 1 284`` bytes beginning ``0a 00 00 00``.
Description ``InlineBitpacking { uncompressed_bits_per_value = T }``.

**OutOfLineBitpacking** (block context; rep/def level slices): W is fixed for the whole page
and recorded as ``values = Flat(W)``. n values are ``floor(n / 1024)`` packed blocks, then the
tail of ``t = n mod 1024`` values, packed as one more zero-padded block if
``W·(1024 − t) < (T − W)·t`` and as t raw T-bit words otherwise. A decoder knows the tail is
raw iff the words left after the full blocks equal t. Examples (T = 16): 1 045 levels at
W = 1 → 128 + 21·2 = 170 bytes; 1 178 levels at W = 2 → 256 + 256 = 512 bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

import numpy as np

from lance_ops._proto import encodings_v2_1_pb2 as pb
from lance_ops.encoding.compression.base import (
    BlockCompressor,
    BlockDecompressor,
    ChunkSpans,
    Context,
    MiniBlockCompressed,
    MiniBlockCompressor,
    MiniBlockDecompressor,
    as_u8,
    chunk_descriptors,
    flat_bits,
    flat_desc,
    gather_spans,
    guarded,
    register,
    require,
    span_mask,
    split_counts,
)
from lance_ops.encoding.data import DataBlock, FixedWidthBlock
from lance_ops.encoding.kernels import (
    chunk_widths,
    copy_spans,
    inline_pack,
    pack_blocks,
    unpack_chunks,
    unpack_slices,
)
from lance_ops.errors import UnsupportedEncodingError

BLOCK_VALUES = 1024
_ORDER = np.array([0, 4, 2, 6, 1, 5, 3, 7])
_WIDTHS = (8, 16, 32, 64)


def _udtype(bits: int) -> np.dtype:
    if bits not in _WIDTHS:
        raise UnsupportedEncodingError(f"bit-packing supports 8/16/32/64-bit values, not {bits}")
    return np.dtype(f"<u{bits // 8}")


@cache
def _group_rank(bits: int) -> np.ndarray:
    """Rows 8a..8a+7 of the (T, L) grid hold values 128 b + 16 ORDER[a] + lane: group ``a`` of
    a block seen as (8, T/8, L) is column ``rank[a]``."""
    groups = bits // 8
    return np.argsort(np.argsort(_ORDER[:groups]))


@cache
def _grid_source(bits: int) -> np.ndarray:
    """Position in its block of the value at grid cell (row, lane), row-major: cell
    (8a + b, lane) is value 128 b + 16 ORDER[a] + lane."""
    lanes = BLOCK_VALUES // bits
    rows = np.arange(bits)[:, None]
    return (
        (128 * (rows % 8) + 16 * _ORDER[rows // 8] + np.arange(lanes)[None, :]).reshape(-1).astype(np.uint64)
    )


def _mask(width: int, dtype: np.dtype) -> np.unsignedinteger:
    bits = dtype.itemsize * 8
    return dtype.type(np.iinfo(dtype).max if width >= bits else (1 << width) - 1)


def fastlanes_pack(blocks: np.ndarray, width: int) -> np.ndarray:
    """Pack ``blocks`` (C × 1024 unsigned T-bit values) at ``width`` → (C × 1024·W/T) words
    (a compiled loop reading each value once at its grid position)."""
    dtype = blocks.dtype
    bits = dtype.itemsize * 8
    num = blocks.shape[0]
    out = np.zeros(num * width * (BLOCK_VALUES // bits), dtype=dtype)
    if width and num:
        pack_blocks(np.ascontiguousarray(blocks).reshape(-1), width, bits, _grid_source(bits), out)
    return out.reshape(num, width * (BLOCK_VALUES // bits))


@cache
def _row_order(bits: int) -> np.ndarray:
    """Grid rows in output order: output values ``128 b + (1024 / 8 T) column + lane`` come from
    row ``8 a + b`` where group ``a`` is the one shown as ``column`` (see :func:`_group_rank`), so
    unpacking rows in this order yields the values already in place."""
    group_of_column = np.argsort(_group_rank(bits))
    return (8 * group_of_column[None, :] + np.arange(8)[:, None]).reshape(-1)


@cache
def _unpack_plan(bits: int, width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray]:
    """Per output row (in :func:`_row_order`): the word holding its low bits and the right shift,
    and the next word and the left shift that bring its spilled high bits (``None`` when no row
    spills). Rows that do not spill get a left shift that moves every bit of the next word out
    of the row's ``width`` low bits (the mask clears them), never a shift by all T bits."""
    dtype = np.dtype(f"<u{bits // 8}")
    word, shift = np.divmod(_row_order(bits) * width, bits)
    spills = shift + width > bits
    if not spills.any():
        return word, shift.astype(dtype)[:, None], None, shift.astype(dtype)[:, None]
    next_word = np.minimum(word + 1, width - 1)
    left = np.where(spills, bits - shift, np.minimum(bits - shift, bits - 1))
    return word, shift.astype(dtype)[:, None], next_word, left.astype(dtype)[:, None]


def fastlanes_unpack(words: np.ndarray, width: int) -> np.ndarray:
    """Inverse of :func:`fastlanes_pack`: (C × 1024·W/T) words → (C × 1024) values."""
    dtype = words.dtype
    bits = dtype.itemsize * 8
    lanes = BLOCK_VALUES // bits
    num = words.shape[0]
    if width == 0 or num == 0:
        return np.zeros((num, BLOCK_VALUES), dtype=dtype)
    grid = words.reshape(num, width, lanes)
    # All T rows at once, taken in output order (so no permutation afterwards): row r starts at
    # stream bit r·W, i.e. in word r·W div T at shift r·W mod T, and spills into the next word
    # when shift + W > T. ``take`` along the word axis gives contiguous (C, T, L) arrays.
    word, right, next_word, left = _unpack_plan(bits, width)
    cells = np.take(grid, word, axis=1)
    cells >>= right
    if next_word is not None:
        high = np.take(grid, next_word, axis=1)
        high <<= left
        cells |= high
    if width < bits:
        cells &= _mask(width, dtype)
    return cells.reshape(num, BLOCK_VALUES)


def fastlanes_at(words: np.ndarray, base: np.ndarray, width: np.ndarray, index: np.ndarray) -> np.ndarray:
    """Value ``index[k]`` (0..1023) of the block packed at ``width[k]`` whose words start at
    ``words[base[k]]``, for every k: only the one or two words holding each value are read."""
    dtype = words.dtype
    bits = dtype.itemsize * 8
    lanes = BLOCK_VALUES // bits
    index = np.asarray(index, np.int64)
    width = np.asarray(width, np.int64)
    column, lane = np.divmod(index % 128, lanes)
    row = _column_rows(bits)[column] + index // 128
    word, shift = np.divmod(row * width, bits)
    at = np.asarray(base, np.int64) + word * lanes + lane
    live = width > 0
    out = np.zeros(len(index), dtype)
    out[live] = words[at[live]] >> shift[live].astype(dtype)
    spill = live & (shift + width > bits)
    out[spill] |= words[at[spill] + lanes] << (bits - shift[spill]).astype(dtype)
    partial = live & (width < bits)
    one = dtype.type(1)
    out[partial] &= (one << width[partial].astype(dtype)) - one
    return out


@cache
def _column_rows(bits: int) -> np.ndarray:
    """First grid row of each column of a ``bits``-bit block (:func:`_group_rank` inverted, times 8)."""
    rows = 8 * np.argsort(_group_rank(bits))
    rows.flags.writeable = False
    return rows


def bit_widths(values: np.ndarray) -> np.ndarray:
    """Bit length of each unsigned value (vectorised over any shape)."""
    values = np.asarray(values)
    widths = np.zeros(values.shape, dtype=np.int64)
    for bit in range(values.dtype.itemsize * 8):
        widths += (values >> values.dtype.type(bit)) != 0
    return widths


def max_bit_width(values: np.ndarray) -> int:
    """Bit length of the OR of all ``values`` taken as unsigned (the page-wide W)."""
    unsigned = _as_unsigned(values)
    if len(unsigned) == 0:
        return 0
    return int(bit_widths(np.bitwise_or.reduce(unsigned)))


def _as_unsigned(values: np.ndarray) -> np.ndarray:
    values = np.ascontiguousarray(values)
    return values.view(_udtype(values.dtype.itemsize * 8)).reshape(-1)


def _padded_blocks(values: np.ndarray) -> np.ndarray:
    """Values as a (C × 1024) array, the last block zero-padded."""
    num_blocks = -(-len(values) // BLOCK_VALUES)
    blocks = np.zeros(num_blocks * BLOCK_VALUES, dtype=values.dtype)
    blocks[: len(values)] = values
    return blocks.reshape(num_blocks, BLOCK_VALUES)


def estimate_inline_size(values: np.ndarray) -> int:
    """Bytes InlineBitpacking would take for ``values`` (any 8/16/32/64-bit integer array)."""
    unsigned = _as_unsigned(values)
    bits = unsigned.dtype.itemsize * 8
    widths = chunk_widths(unsigned)
    return int(((1 + widths * (BLOCK_VALUES // bits)) * (bits // 8)).sum())


def _fixed_values(block: DataBlock, bits: int) -> np.ndarray:
    if not isinstance(block, FixedWidthBlock) or block.bits_per_value != bits:
        raise UnsupportedEncodingError(f"bit-packing({bits}) needs a {bits}-bit fixed-width block")
    return block.view(_udtype(bits))


def _inline_encode(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """All chunks' bytes back to back, and each chunk's byte size."""
    dtype = values.dtype
    bits = dtype.itemsize * 8
    widths = chunk_widths(values)
    chunk_words = 1 + widths * (BLOCK_VALUES // bits)
    out = np.zeros(int(chunk_words.sum()), dtype=dtype)
    inline_pack(np.ascontiguousarray(values), widths, bits, _grid_source(bits), out)
    return out.view(np.uint8), chunk_words * (bits // 8)


def _inline_decode(words: np.ndarray, starts: np.ndarray, widths: np.ndarray) -> np.ndarray:
    """Unpack chunks whose width word sits at ``starts`` (sorted word indices) → (C × 1024)
    values."""
    bits = words.dtype.itemsize * 8
    lanes = BLOCK_VALUES // bits
    kinds = np.unique(widths)
    out: np.ndarray | None = None
    for width in kinds.tolist():
        if width == 0:
            continue
        size = width * lanes
        if len(kinds) == 1:  # one width (the usual case): no scatter into a zeroed array
            packed = gather_spans(words, starts + 1, np.full(len(starts), size, np.int64))
            return fastlanes_unpack(packed.reshape(-1, size), width)
        if out is None:
            out = np.zeros((len(starts), BLOCK_VALUES), dtype=words.dtype)
        idx = np.flatnonzero(widths == width)
        packed = gather_spans(words, starts[idx] + 1, np.full(len(idx), size, np.int64))
        out[idx] = fastlanes_unpack(packed.reshape(-1, size), width)
    return np.zeros((len(starts), BLOCK_VALUES), dtype=words.dtype) if out is None else out


def numpy_unpack_chunks(
    words: np.ndarray, starts: np.ndarray, widths: np.ndarray, nums: np.ndarray
) -> np.ndarray:
    """The numpy form of :func:`lance_ops.encoding.kernels.unpack_chunks`: the first ``nums[c]``
    values of each chunk, back to back."""
    values = _inline_decode(words, starts, widths)
    if len(nums) and bool(np.all(nums[:-1] == BLOCK_VALUES)):  # only the last chunk is short
        return values.reshape(-1)[: int(nums.sum())]
    firsts = np.arange(len(nums), dtype=np.int64) * BLOCK_VALUES
    return gather_spans(values.reshape(-1), firsts, nums)


class InlineBitpackingCompressor(MiniBlockCompressor):
    """InlineBitpacking: ``compress`` = mini-block (1 024 values per chunk); ``compress_block``
    writes the same chunk sequence as one buffer (level slices of ≤ 1 024 values)."""

    def __init__(self, uncompressed_bits: int) -> None:
        self.dtype = _udtype(uncompressed_bits)
        self.bits = uncompressed_bits

    def description(self) -> pb.CompressiveEncoding:
        return pb.CompressiveEncoding(
            inline_bitpacking=pb.InlineBitpacking(uncompressed_bits_per_value=self.bits)
        )

    def compress(self, block: DataBlock) -> tuple[MiniBlockCompressed, pb.CompressiveEncoding]:
        values = _fixed_values(block, self.bits)
        data, sizes = _inline_encode(values)
        chunks = chunk_descriptors(split_counts(len(values), BLOCK_VALUES), sizes)
        return MiniBlockCompressed((data,), chunks, len(values)), self.description()

    def compress_block(self, block: DataBlock) -> tuple[bytes, pb.CompressiveEncoding]:
        data, _ = _inline_encode(_fixed_values(block, self.bits))
        return data.tobytes(), self.description()


def _locate(counts: np.ndarray, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which of back-to-back pieces of ``counts`` values holds each position, and where in it."""
    positions = np.asarray(positions, np.int64)
    ends = np.cumsum(counts)
    piece = np.searchsorted(ends, positions, side="right")
    require(bool(((positions >= 0) & (piece < len(counts))).all()), "position beyond the decoded values")
    return piece, positions - (ends[piece] - counts[piece])


def _words(data: memoryview | np.ndarray, dtype: np.dtype, what: str) -> np.ndarray:
    raw = as_u8(data)
    require(len(raw) % dtype.itemsize == 0, f"{what}: {len(raw)} bytes is not a whole number of words")
    return raw.view(dtype)


class _InlineReader:
    def __init__(self, uncompressed_bits: int) -> None:
        self.dtype = _udtype(uncompressed_bits)
        self.bits = uncompressed_bits

    @classmethod
    def from_description(cls, desc: pb.InlineBitpacking) -> _InlineReader:
        if desc.HasField("values"):
            raise UnsupportedEncodingError("InlineBitpacking with buffer compression is not supported")
        return cls(int(desc.uncompressed_bits_per_value))

    def _decode(self, words: np.ndarray, starts: Sequence[int], num_values: int) -> FixedWidthBlock:
        starts_arr = np.asarray(starts, dtype=np.int64)
        values = _inline_decode(words, starts_arr, words[starts_arr].astype(np.int64))
        return FixedWidthBlock.from_values(values.reshape(-1)[:num_values])

    def _scan(self, words: np.ndarray, num_chunks: int) -> list[int]:
        """Word index of each chunk's width word in a run of back-to-back chunks."""
        lanes = BLOCK_VALUES // self.bits
        starts = []
        pos = 0
        for _ in range(num_chunks):
            require(pos < len(words), "InlineBitpacking buffer is truncated")
            width = int(words[pos])
            require(width <= self.bits, f"InlineBitpacking width {width} exceeds {self.bits} bits")
            starts.append(pos)
            pos += 1 + width * lanes
        require(pos <= len(words), "InlineBitpacking buffer is truncated")
        return starts

    def decompress_chunks(self, buffers: Sequence[memoryview], counts: Sequence[int]) -> FixedWidthBlock:
        """Decode many mini-block chunks at once (one compiled pass, or vectorised over chunks of
        equal width: :func:`~lance_ops.encoding.kernels.unpack_chunks`)."""
        words, starts, widths, nums = self._chunk_words(buffers, counts)
        return FixedWidthBlock.from_values(unpack_chunks(words, starts, widths, nums))

    def decompress_chunks_at(
        self, buffers: Sequence[memoryview], counts: Sequence[int], positions: np.ndarray
    ) -> FixedWidthBlock:
        """``decompress_chunks(buffers, counts)`` at ``positions`` only, unpacking just those."""
        words, starts, widths, nums = self._chunk_words(buffers, counts)
        chunk, index = _locate(nums, positions)
        return FixedWidthBlock.from_values(fastlanes_at(words, starts[chunk] + 1, widths[chunk], index))

    def _chunk_words(
        self, buffers: Sequence[memoryview], counts: Sequence[int]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The chunks' words (see :meth:`ChunkSpans.words`), each chunk's first word, width and value
        count."""
        spans = ChunkSpans.of(buffers)
        item = self.dtype.itemsize
        # ndarray methods, not np.all: a take decodes many small pages, and the wrapper adds up
        require(not (spans.sizes % item).any(), "InlineBitpacking chunk: not a whole number of words")
        require(bool((spans.sizes > 0).all()), "empty InlineBitpacking chunk")
        nums = np.asarray(counts, np.int64)
        require(
            bool(((nums >= 0) & (nums <= BLOCK_VALUES)).all()),
            "InlineBitpacking chunks hold at most 1024 values",
        )
        lens = spans.sizes // item
        words, starts = spans.words(self.dtype)
        widths = words[starts].astype(np.int64) if len(starts) else np.zeros(0, np.int64)
        require(bool((widths <= self.bits).all()), "InlineBitpacking width exceeds the value width")
        require(
            bool((1 + widths * (BLOCK_VALUES // self.bits) <= lens).all()), "InlineBitpacking chunk truncated"
        )
        return words, starts, widths, nums


@register(Context.MINIBLOCK, "inline_bitpacking")
class InlineBitpackingMiniBlockDecompressor(_InlineReader, MiniBlockDecompressor):
    @guarded
    def decompress(self, buffers: Sequence[memoryview], num_values: int) -> DataBlock:
        require(len(buffers) == 1, f"InlineBitpacking expects one mini-block buffer, got {len(buffers)}")
        require(
            num_values <= BLOCK_VALUES, f"an InlineBitpacking chunk holds ≤ 1024 values, not {num_values}"
        )
        words = _words(buffers[0], self.dtype, "InlineBitpacking chunk")
        return self._decode(words, self._scan(words, 1), num_values)


@register(Context.BLOCK, "inline_bitpacking")
class InlineBitpackingBlockDecompressor(_InlineReader, BlockDecompressor):
    @guarded
    def decompress(self, data: memoryview, num_values: int) -> DataBlock:
        words = _words(data, self.dtype, "InlineBitpacking block")
        return self._decode(words, self._scan(words, -(-num_values // BLOCK_VALUES)), num_values)


def _ool_desc(bits: int, width: int) -> pb.CompressiveEncoding:
    return pb.CompressiveEncoding(
        out_of_line_bitpacking=pb.OutOfLineBitpacking(
            uncompressed_bits_per_value=bits, values=flat_desc(width)
        )
    )


def _tail_is_packed(bits: int, width: int, tail: int | np.ndarray) -> bool | np.ndarray:
    """Whether a tail of ``tail`` values is stored as one padded block (elementwise for arrays)."""
    return (tail > 0) & (width * (BLOCK_VALUES - tail) < (bits - width) * tail)


def estimate_out_of_line_size(num_values: int, bits: int, width: int) -> int:
    """Bytes OutOfLineBitpacking takes for ``num_values`` ``bits``-bit values at ``width``."""
    full, tail = divmod(num_values, BLOCK_VALUES)
    packed_tail = bool(_tail_is_packed(bits, width, tail))
    words = (full + packed_tail) * (width * BLOCK_VALUES // bits) + (0 if packed_tail else tail)
    return words * bits // 8


def pack_out_of_line_slices(
    values: np.ndarray, starts: np.ndarray, stops: np.ndarray, width: int
) -> tuple[ChunkSpans, pb.CompressiveEncoding]:
    """OutOfLineBitpacking of ``values[a:b]`` for every slice at the page-wide ``width`` (which
    must cover every value), as :class:`OutOfLineBitpackingCompressor` would write each slice,
    back to back in one byte array (span ``i`` is slice ``i``); the blocks of all slices are
    packed in one call and each slice's packed blocks and raw tail copied in one compiled pass."""
    dtype = values.dtype
    bits = dtype.itemsize * 8
    starts = np.asarray(starts, np.int64)
    stops = np.asarray(stops, np.int64)
    nums = stops - starts
    full, tail = np.divmod(nums, BLOCK_VALUES)
    packed_tail = _tail_is_packed(bits, width, tail)
    blocks = full + packed_tail
    in_blocks = full * BLOCK_VALUES + np.where(packed_tail, tail, 0)
    block_first = np.cumsum(blocks) - blocks
    packed_part = gather_spans(values, starts, in_blocks)  # each slice's blocked values, back to back
    if bool(np.all(in_blocks == blocks * BLOCK_VALUES)):  # no padded tail block: they are the grid
        grid = np.ascontiguousarray(packed_part)
    else:
        grid = np.zeros(int(blocks.sum()) * BLOCK_VALUES, dtype=dtype)
        grid[span_mask(block_first * BLOCK_VALUES, in_blocks, len(grid))] = packed_part
    packed = fastlanes_pack(grid.reshape(-1, BLOCK_VALUES), width)
    block_bytes = width * BLOCK_VALUES // 8
    packed_sizes = blocks * block_bytes
    raw_tail = starts + in_blocks
    tail_sizes = (stops - raw_tail) * dtype.itemsize
    sizes = packed_sizes + tail_sizes
    out_starts = np.cumsum(sizes) - sizes
    out = np.empty(int(sizes.sum()), np.uint8)
    copy_spans(out, out_starts, as_u8(packed), block_first * block_bytes, packed_sizes)
    copy_spans(
        out,
        out_starts + packed_sizes,
        as_u8(np.ascontiguousarray(values)),
        raw_tail * dtype.itemsize,
        tail_sizes,
    )
    return ChunkSpans(out, out_starts, sizes), _ool_desc(bits, width)


class OutOfLineBitpackingCompressor(BlockCompressor):
    """OutOfLineBitpacking (block context). ``bit_width`` forces the page-wide W (it must cover
    every value); by default W is the bit length of the block's largest value (at least 1)."""

    def __init__(self, uncompressed_bits: int, bit_width: int | None = None) -> None:
        self.dtype = _udtype(uncompressed_bits)
        self.bits = uncompressed_bits
        if bit_width is not None and not 1 <= bit_width <= uncompressed_bits:
            raise ValueError(f"bit width {bit_width} is outside 1..{uncompressed_bits}")
        self.bit_width = bit_width

    def compress(self, block: DataBlock) -> tuple[bytes, pb.CompressiveEncoding]:
        values = _fixed_values(block, self.bits)
        needed = max_bit_width(values)
        width = max(1, needed) if self.bit_width is None else self.bit_width
        if needed > width:
            raise ValueError(f"values need {needed} bits but the page width is {width}")
        full, tail = divmod(len(values), BLOCK_VALUES)
        parts = [fastlanes_pack(values[: full * BLOCK_VALUES].reshape(full, BLOCK_VALUES), width).reshape(-1)]
        if _tail_is_packed(self.bits, width, tail):
            parts.append(fastlanes_pack(_padded_blocks(values[full * BLOCK_VALUES :]), width).reshape(-1))
        else:
            parts.append(values[full * BLOCK_VALUES :])
        return np.concatenate(parts).astype(self.dtype).tobytes(), _ool_desc(self.bits, width)

    compress_block = compress


def numpy_unpack_slices(
    words: np.ndarray, word_first: np.ndarray, nums: np.ndarray, is_raw: np.ndarray, width: int
) -> np.ndarray:
    """The numpy form of :func:`lance_ops.encoding.kernels.unpack_slices`: the packed blocks of
    all slices unpacked in one call and the raw tails copied in."""
    dtype = words.dtype
    bits = dtype.itemsize * 8
    block_words = width * BLOCK_VALUES // bits
    full, tail = np.divmod(nums, BLOCK_VALUES)
    blocks = np.where(is_raw, full, full + (tail > 0))
    if width == 0:
        values = np.zeros(int(blocks.sum()) * BLOCK_VALUES, dtype)
    else:
        packed = gather_spans(words, word_first, blocks * block_words)
        values = fastlanes_unpack(packed.reshape(-1, block_words), width).reshape(-1)
    block_first = (np.cumsum(blocks) - blocks) * BLOCK_VALUES
    if not is_raw.any():  # every slice is whole blocks: drop the padding of packed tails
        return gather_spans(values, block_first, nums)
    # Each slice is its unpacked values then (raw tails) its tail words: both pieces of every
    # slice are copied into the output in one concatenation.
    in_blocks = np.where(is_raw, full * BLOCK_VALUES, nums)
    raw_first, raw = word_first + full * block_words, nums - in_blocks
    pieces = []
    for a, n, b, m in zip(
        block_first.tolist(), in_blocks.tolist(), raw_first.tolist(), raw.tolist(), strict=True
    ):
        pieces.append(values[a : a + n])
        pieces.append(words[b : b + m])
    return np.concatenate(pieces).astype(dtype, copy=False)


@register(Context.BLOCK, "out_of_line_bitpacking")
class OutOfLineBitpackingDecompressor(BlockDecompressor):
    def __init__(self, uncompressed_bits: int, bit_width: int) -> None:
        self.dtype = _udtype(uncompressed_bits)
        self.bits = uncompressed_bits
        if not 0 <= bit_width <= uncompressed_bits:
            raise UnsupportedEncodingError(
                f"OutOfLineBitpacking width {bit_width} exceeds {uncompressed_bits}"
            )
        self.width = bit_width

    @classmethod
    def from_description(cls, desc: pb.OutOfLineBitpacking) -> OutOfLineBitpackingDecompressor:
        return cls(int(desc.uncompressed_bits_per_value), flat_bits(desc.values))

    @guarded
    def decompress(self, data: memoryview, num_values: int) -> DataBlock:
        words = _words(data, self.dtype, "OutOfLineBitpacking buffer")
        block_words = self.width * BLOCK_VALUES // self.bits
        full, tail = divmod(num_values, BLOCK_VALUES)
        left = len(words) - full * block_words
        require(left >= 0, "OutOfLineBitpacking buffer is truncated")
        out = np.empty(num_values, dtype=self.dtype)
        head = words[: full * block_words].reshape(full, block_words)
        out[: full * BLOCK_VALUES] = fastlanes_unpack(head, self.width).reshape(-1)
        rest = words[full * block_words :]
        if left == tail:
            out[full * BLOCK_VALUES :] = rest
        else:
            require(
                tail > 0 and left == block_words,
                f"OutOfLineBitpacking tail of {left} words "
                f"matches neither {tail} raw values nor one packed block",
            )
            out[full * BLOCK_VALUES :] = fastlanes_unpack(rest.reshape(1, -1), self.width)[0, :tail]
        return FixedWidthBlock.from_values(out)

    @guarded
    def decompress_chunks(self, buffers: Sequence[memoryview], counts: Sequence[int]) -> DataBlock:
        """Decode many level slices at once (one compiled pass, or the packed blocks of all
        slices unpacked in one call: :func:`~lance_ops.encoding.kernels.unpack_slices`). Each
        slice's tail is packed or raw, as its byte size says (either is accepted, like
        :meth:`decompress`)."""
        nums = np.asarray(counts, np.int64)
        words, word_first, is_raw = self._slice_words(buffers, nums)
        return FixedWidthBlock.from_values(unpack_slices(words, word_first, nums, is_raw, self.width))

    @guarded
    def decompress_chunks_at(
        self, buffers: Sequence[memoryview], counts: Sequence[int], positions: np.ndarray
    ) -> DataBlock:
        """``decompress_chunks(buffers, counts)`` at ``positions`` only, unpacking just those."""
        block_words = self.width * BLOCK_VALUES // self.bits
        nums = np.asarray(counts, np.int64)
        words, word_first, is_raw = self._slice_words(buffers, nums)
        piece, index = _locate(nums, positions)
        block, offset = np.divmod(index, BLOCK_VALUES)
        raw = is_raw[piece] & (block == nums[piece] // BLOCK_VALUES)
        base = word_first[piece] + block * block_words
        out = np.empty(len(index), self.dtype)
        out[raw] = words[base[raw] + offset[raw]]
        packed = ~raw
        widths = np.full(int(packed.sum()), self.width)
        out[packed] = fastlanes_at(words, base[packed], widths, offset[packed])
        return FixedWidthBlock.from_values(out)

    def _slice_words(
        self, buffers: Sequence[memoryview], nums: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The slices' words (see :meth:`ChunkSpans.words`), each slice's first word, and whether its
        tail is raw."""
        item = self.dtype.itemsize
        block_words = self.width * BLOCK_VALUES // self.bits
        spans = ChunkSpans.of(buffers)
        lens = spans.sizes
        require(bool(np.all(lens % item == 0)), "OutOfLineBitpacking buffer is not whole words")
        full, tail = np.divmod(nums, BLOCK_VALUES)
        is_raw = lens == (full * block_words + tail) * item
        require(
            bool(np.all(is_raw | (lens == (full + (tail > 0)) * block_words * item))),
            "OutOfLineBitpacking slice size matches neither a raw nor a packed tail",
        )
        words, first = spans.words(self.dtype)
        return words, first, is_raw
