"""ByteStreamSplit: fixed-width values split into byte planes (spec §7.8).

Description ``ByteStreamSplit { values = Flat(32 | 64) }``; mini-block only. A chunk of n
values of w bytes is w streams of n bytes; stream j holds byte j (little-endian position)
of every value, in value order. Example: int32 ``[1, 2]`` → ``01 02 | 00 00 | 00 00 | 00 00``.
It never shrinks data by itself; pylance uses it below a General wrapper. Chunking is the
Flat rule (1 024 values for 32-bit, 512 for 64-bit).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lance_ops._proto import encodings_v2_1_pb2 as pb
from lance_ops.encoding.compression.base import (
    ChunkSpans,
    Context,
    MiniBlockCompressed,
    MiniBlockCompressor,
    MiniBlockDecompressor,
    as_u8,
    chunk_descriptors,
    fixed_chunk_values,
    flat_bits,
    flat_desc,
    gather_spans,
    guarded,
    register,
    require,
    split_counts,
)
from lance_ops.encoding.data import DataBlock, FixedWidthBlock
from lance_ops.errors import UnsupportedEncodingError

_WIDTHS = (32, 64)


class ByteStreamSplitCompressor(MiniBlockCompressor):
    """ByteStreamSplit in the mini-block context."""

    def compress(self, block: DataBlock) -> tuple[MiniBlockCompressed, pb.CompressiveEncoding]:
        if not isinstance(block, FixedWidthBlock) or block.bits_per_value not in _WIDTHS:
            raise UnsupportedEncodingError("ByteStreamSplit compresses 32/64-bit fixed-width blocks")
        width = block.bytes_per_value
        values = as_u8(block.data)[: block.num_values * width].reshape(-1, width)
        counts = split_counts(block.num_values, fixed_chunk_values(width))
        bounds = np.cumsum([0, *counts])
        out = np.empty(block.num_values * width, dtype=np.uint8)
        for i in range(len(counts)):
            lo, hi = bounds[i], bounds[i + 1]
            out[lo * width : hi * width] = values[lo:hi].T.reshape(-1)
        desc = pb.CompressiveEncoding(
            byte_stream_split=pb.ByteStreamSplit(values=flat_desc(block.bits_per_value))
        )
        sizes = np.array(counts, dtype=np.int64) * width
        return MiniBlockCompressed((out,), chunk_descriptors(counts, sizes), block.num_values), desc


@register(Context.MINIBLOCK, "byte_stream_split")
class ByteStreamSplitDecompressor(MiniBlockDecompressor):
    def __init__(self, bits_per_value: int) -> None:
        self.width = bits_per_value // 8
        self.bits = bits_per_value

    @classmethod
    def from_description(cls, desc: pb.ByteStreamSplit) -> ByteStreamSplitDecompressor:
        return cls(flat_bits(desc.values, _WIDTHS))

    @guarded
    def decompress(self, buffers: Sequence[memoryview], num_values: int) -> DataBlock:
        require(len(buffers) == 1, f"ByteStreamSplit expects one mini-block buffer, got {len(buffers)}")
        raw = as_u8(buffers[0])
        nbytes = num_values * self.width
        require(len(raw) >= nbytes, "ByteStreamSplit buffer is too short")
        data = np.ascontiguousarray(raw[:nbytes].reshape(self.width, num_values).T).reshape(-1)
        return FixedWidthBlock(data, self.bits, num_values)

    @guarded
    def decompress_chunks(self, buffers: Sequence[memoryview], counts: Sequence[int]) -> DataBlock:
        """Many chunks decoded in one call: each run of consecutive chunks holding the same number
        of values (all but the last, in practice) is transposed back in one array operation."""
        spans = ChunkSpans.of(buffers)
        nums = np.asarray(counts, np.int64)
        nbytes = nums * self.width
        require(bool(np.all(spans.sizes >= nbytes)), "ByteStreamSplit buffer is too short")
        planes = gather_spans(spans.blob, spans.starts, nbytes)
        out = np.empty(len(planes), np.uint8)
        ends = np.cumsum(nbytes)
        breaks = np.flatnonzero(np.diff(nums)) + 1
        for first, stop in zip([0, *breaks.tolist()], [*breaks.tolist(), len(nums)], strict=True):
            lo, hi, count = int(ends[first] - nbytes[first]), int(ends[stop - 1]), int(nums[first])
            grid = planes[lo:hi].reshape(stop - first, self.width, count)
            out[lo:hi] = grid.transpose(0, 2, 1).reshape(-1)
        return FixedWidthBlock(out, self.bits, int(nums.sum()))
