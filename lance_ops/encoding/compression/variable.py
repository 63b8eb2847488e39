"""Variable: variable-width values stored verbatim with offsets (spec §7.2).

Description: ``Variable { offsets = Flat(32 | 64) }`` (u32 for string/binary, u64 for the
large types).

Mini-block chunk buffer holding n values, offset width w bytes::

    (n + 1) offsets (uN), relative to the start of this chunk buffer
    the n values' bytes
    0x48 padding up to a multiple of w (4 or 8); the recorded buffer size includes it

so ``offsets[0] == (n + 1) × w``. Example: ``["ab", "c"]`` with u32 offsets is
``0c000000 0e000000 0f000000 | 61 62 63 | 48``.

Chunking (§3.7): at each chunk start with r values left, the chunk takes all r values if
``(r + 1) × w + bytes ≤ minichunk_size`` (default 4 096) and r ≤ 4 096; otherwise it starts
at two values and doubles while the doubled chunk still fits in ``minichunk_size`` and does
not exceed the values left. Two is the floor even when two values overflow
``minichunk_size``: a non-last chunk records log2(count) in its metadata word and 0 is
reserved for the last chunk, so a lone oversized value may only end a page.

Block form (dictionaries)::

    u32 32 | u32 data_start | (n + 1) u32 offsets | data        data_start = 8 + 4 (n + 1)
    u64 64 | u64 data_start | (n + 1) u64 offsets | data        data_start = 16 + 8 (n + 1)

with offsets starting at 0 and indexing the data section. Example ``["apple", "banana",
"cherry"]``: ``20000000 18000000 | 00000000 05000000 0b000000 11000000 | applebananacherry``.

Per-value (full-zip): the identity; the structural layer writes each value's length prefix.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lance_ops._proto import encodings_v2_1_pb2 as pb
from lance_ops.encoding.compression.base import (
    BlockDecompressor,
    ChunkSpans,
    Context,
    MiniBlockCompressed,
    MiniBlockCompressor,
    MiniBlockDecompressor,
    PerValueDecompressor,
    as_u8,
    chunk_descriptors,
    flat_bits,
    flat_desc,
    gather_spans,
    guarded,
    register,
    require,
)
from lance_ops.encoding.data import DataBlock, VariableWidthBlock
from lance_ops.encoding.kernels import copy_spans
from lance_ops.errors import UnsupportedEncodingError

PAD_BYTE = 0x48
MAX_CHUNK_VALUES = 4096


def variable_desc(bits_per_offset: int) -> pb.CompressiveEncoding:
    """``Variable { offsets = Flat(bits_per_offset) }``."""
    return pb.CompressiveEncoding(variable=pb.Variable(offsets=flat_desc(bits_per_offset)))


def _variable(block: DataBlock) -> VariableWidthBlock:
    if not isinstance(block, VariableWidthBlock):
        raise UnsupportedEncodingError(
            f"Variable compresses variable-width blocks, not {type(block).__name__}"
        )
    if block.offsets.dtype.itemsize not in (4, 8):
        raise UnsupportedEncodingError(f"unsupported offset dtype {block.offsets.dtype}")
    return block


def variable_chunk_counts(
    offsets: np.ndarray, width: int, minichunk_size: int = 4096, max_values: int = MAX_CHUNK_VALUES
) -> list[int]:
    """Values per mini-block chunk for Arrow-style ``offsets`` (§3.7 rule, see module docstring).

    A chunk of k values from ``start`` costs ``g[start + k] - g[start] + width`` bytes with
    ``g[i] = offsets[i] + width × i``, which grows with k, so the most values that fit is one
    binary search away; doubling from two up to that bound is the largest power of two below it.

    Values of similar sizes give runs of chunks of one count: after each chunk the rule is checked
    for the next ones of the same count at once (one vectorised search), and the run is taken
    whole up to the first chunk that would differ.
    """
    offs = np.asarray(offsets, dtype=np.int64)
    n = len(offs) - 1
    cost = offs + width * np.arange(n + 1, dtype=np.int64)
    budget = minichunk_size - width
    counts: list[int] = []
    start = 0
    while start < n:
        left = n - start
        fitting = int(cost.searchsorted(cost[start] + budget, "right")) - 1 - start
        if left <= max_values and fitting >= left:
            counts.append(left)
            break
        bound = min(fitting, left, max_values)
        k = 1 << (bound.bit_length() - 1) if bound >= 2 else min(2, left)
        counts.append(k)
        start += k
        if k >= 2 and start < n:
            run = _same_count_run(cost, start, k, budget, max_values)
            counts.extend([k] * run)
            start += run * k
    return counts


def _same_count_run(cost: np.ndarray, start: int, k: int, budget: int, max_values: int) -> int:
    """How many chunks of ``k`` values, one after the other from ``start``, the rule of
    :func:`variable_chunk_counts` gives (stopping before a last chunk or any other count).

    Looked at in windows of 64, 128, 256, ... chunks, so a short run costs a short search (one
    search over every remaining chunk made pages of many short runs quadratic)."""
    n = len(cost) - 1
    run, position, window = 0, start, 64
    while position < n:
        starts = np.arange(position, min(n, position + window * k), k, dtype=np.int64)
        left = n - starts
        fitting = cost.searchsorted(cost[starts] + budget, "right") - 1 - starts
        bound = np.minimum(np.minimum(fitting, left), max_values)
        # the rule's k is k exactly when bound lies in [k, 2k) and the chunk is not the last one
        same = (bound >= k) & (bound < 2 * k) & ~((left <= max_values) & (fitting >= left))
        if not same.all():
            return run + int(np.argmin(same))
        run += len(same)
        position += len(same) * k
        window *= 2
    return run


def _padded(size: int, align: int) -> int:
    return -(-size // align) * align


class VariableCompressor(MiniBlockCompressor):
    """Variable in all three contexts (``compress`` = mini-block, plus ``compress_block`` and
    ``compress_per_value``)."""

    def __init__(self, minichunk_size: int = 4096, max_chunk_values: int = MAX_CHUNK_VALUES) -> None:
        self.minichunk_size = minichunk_size
        self.max_chunk_values = max_chunk_values

    def compress(self, block: DataBlock) -> tuple[MiniBlockCompressed, pb.CompressiveEncoding]:
        block = _variable(block)
        width = block.offsets.dtype.itemsize
        offs = block.offsets.astype(np.int64)
        data = as_u8(block.data)
        counts = np.array(
            variable_chunk_counts(offs, width, self.minichunk_size, self.max_chunk_values), np.int64
        )
        ends = np.cumsum(counts)
        starts = ends - counts
        headers = (counts + 1) * width
        lows, highs = offs[starts], offs[ends]
        sizes = -(-(headers + highs - lows) // width) * width
        bases = np.cumsum(sizes) - sizes
        total = int(sizes.sum())
        buffer = np.empty(total, dtype=np.uint8)
        # Every chunk is its k + 1 offsets (rebased to the chunk), its bytes, then padding. The
        # first k offsets of every chunk are rebased in one pass and, like the bytes, copied to
        # their chunks by one compiled span copy; the k-th (closing) offsets are written after.
        dtype = np.dtype(f"<u{width}")
        words = buffer.view(dtype)  # chunk sizes are whole words
        rebased = (offs[:-1] + np.repeat(headers - lows, counts)).astype(dtype)
        copy_spans(buffer, bases, rebased.view(np.uint8), starts * width, counts * width)
        words[bases // width + counts] = (highs - lows + headers).astype(dtype)
        copy_spans(buffer, bases + headers, data, lows, highs - lows)
        pad_from = bases + headers + highs - lows
        pad = bases + sizes - pad_from  # fewer than ``width`` bytes per chunk
        for byte in range(width - 1):
            buffer[pad_from[pad > byte] + byte] = PAD_BYTE
        chunks = chunk_descriptors(counts.tolist(), sizes)
        return MiniBlockCompressed((buffer,), chunks, block.num_values), variable_desc(width * 8)

    def compress_block(self, block: DataBlock) -> tuple[bytes, pb.CompressiveEncoding]:
        block = _variable(block)
        width = block.offsets.dtype.itemsize
        dtype = np.dtype(f"<u{width}")
        offs = block.offsets.astype(np.int64)
        offs = offs - offs[0]
        data = as_u8(block.data)[int(block.offsets[0]) : int(block.offsets[-1])]
        header = np.array([width * 8, 2 * width + width * len(offs)], dtype=dtype)
        out = b"".join([header.tobytes(), offs.astype(dtype).tobytes(), data.tobytes()])
        return out, variable_desc(width * 8)

    def compress_per_value(self, block: DataBlock) -> tuple[DataBlock, pb.CompressiveEncoding]:
        block = _variable(block)
        return block, variable_desc(block.bits_per_offset)


def _check_offsets(offs: np.ndarray, lo: int, hi: int, what: str) -> None:
    require(len(offs) > 0 and bool(np.all(offs[1:] >= offs[:-1])), f"{what}: offsets are not monotonic")
    require(int(offs[0]) >= lo and int(offs[-1]) <= hi, f"{what}: offsets point outside the buffer")


class _VariableReader:
    def __init__(self, bits_per_offset: int) -> None:
        if bits_per_offset not in (32, 64):
            raise UnsupportedEncodingError(f"Variable offsets must be 32 or 64 bits, got {bits_per_offset}")
        self.width = bits_per_offset // 8
        self.dtype = np.dtype(f"<u{self.width}")

    @classmethod
    def from_description(cls, desc: pb.Variable) -> _VariableReader:
        if desc.HasField("values"):
            raise UnsupportedEncodingError("Variable with buffer compression is not supported")
        return cls(flat_bits(desc.offsets, (32, 64)))

    def _block(self, raw: np.ndarray, offs: np.ndarray, base: int) -> VariableWidthBlock:
        offs = offs.astype(np.int64)
        data = raw[base + int(offs[0]) : base + int(offs[-1])]
        out_dtype = np.uint32 if self.width == 4 else np.uint64
        return VariableWidthBlock((offs - offs[0]).astype(out_dtype), data, len(offs) - 1)


@register(Context.MINIBLOCK, "variable")
class VariableMiniBlockDecompressor(_VariableReader, MiniBlockDecompressor):
    @guarded
    def decompress(self, buffers: Sequence[memoryview], num_values: int) -> DataBlock:
        require(len(buffers) == 1, f"Variable expects one mini-block buffer, got {len(buffers)}")
        raw = as_u8(buffers[0])
        header = (num_values + 1) * self.width
        require(len(raw) >= header, "Variable chunk is shorter than its offsets")
        offs = raw[:header].view(self.dtype)
        _check_offsets(offs, header, len(raw), "Variable chunk")
        return self._block(raw, offs, 0)

    @guarded
    def decompress_chunks(self, buffers: Sequence[memoryview], counts: Sequence[int]) -> VariableWidthBlock:
        """Many chunks at once: the chunks' offsets and value bytes are joined and rebased together.

        Each chunk's offsets but its first are copied straight into the output and shifted by
        where the chunk's bytes land; one monotonicity check over the result then covers every
        chunk's offsets (a chunk's first offset, its lowest, is where its bytes begin)."""
        nums = np.asarray(counts, np.int64)
        spans = ChunkSpans.of(buffers)
        lens = spans.sizes
        header = (nums + 1) * self.width
        require(bool(np.all(lens >= header)), "Variable chunk is shorter than its offsets")
        words, first = spans.words(self.dtype) if len(nums) else (np.zeros(1, self.dtype), nums)
        lo = words[first].astype(np.int64)
        hi = words[first + nums].astype(np.int64)
        require(
            bool(np.all((lo >= header) & (hi <= lens) & (hi >= lo))),
            "Variable chunk: offsets point outside the buffer",
        )
        sizes = hi - lo
        out = np.empty(int(nums.sum()) + 1, np.int64)
        out[0] = 0
        out[1:] = gather_spans(words, first + 1, nums)
        out[1:] += np.repeat(np.cumsum(sizes) - sizes - lo, nums)
        require(bool(np.all(out[1:] >= out[:-1])), "Variable chunk: offsets are not monotonic")
        data = gather_spans(spans.blob, spans.starts + lo, sizes)
        out_dtype = np.uint32 if self.width == 4 else np.uint64
        return VariableWidthBlock(out.astype(out_dtype), data, int(nums.sum()))


@register(Context.BLOCK, "variable")
class VariableBlockDecompressor(_VariableReader, BlockDecompressor):
    @guarded
    def decompress(self, data: memoryview, num_values: int) -> DataBlock:
        raw = as_u8(data)
        require(len(raw) >= 2 * self.width, "Variable block is shorter than its header")
        width_bits, data_start = (int(x) for x in raw[: 2 * self.width].view(self.dtype))
        require(
            width_bits == 8 * self.width,
            f"Variable block header announces {width_bits}-bit offsets, the description {8 * self.width}-bit "
            "(the legacy one-byte-width block form is not supported)",
        )
        expected = 2 * self.width + (num_values + 1) * self.width
        require(data_start == expected, f"Variable block data starts at {data_start}, expected {expected}")
        require(len(raw) >= data_start, "Variable block is shorter than its offsets")
        offs = raw[2 * self.width : data_start].view(self.dtype)
        _check_offsets(offs, 0, len(raw) - data_start, "Variable block")
        return self._block(raw, offs, data_start)


@register(Context.PER_VALUE, "variable")
class VariablePerValueDecompressor(_VariableReader, PerValueDecompressor):
    @guarded
    def decompress(self, block: DataBlock) -> DataBlock:
        require(isinstance(block, VariableWidthBlock), "per-value Variable expects a variable-width block")
        return block
