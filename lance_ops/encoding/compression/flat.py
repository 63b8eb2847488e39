"""Flat: fixed-width values stored verbatim (spec §7.1).

Byte layout (every context): the values back to back at ``bits_per_value`` bits, little
endian, no header. ``Flat(1)`` is an LSB-first bitmap; other widths that are not a
multiple of 8 are packed LSB-first as well. Example: int32 ``[1, 2]`` is
``01 00 00 00 02 00 00 00``; booleans ``[T, F, T]`` are the single byte ``05``.

Mini-block chunking (§3.7): ``n`` values per chunk, starting at 2 and doubling while
``2 n × bytes_per_value < 8 186`` and ``2 n ≤ 4 096``: 1 024 int32, 512 int64, 256
decimal128, 4 096 booleans (512 bytes). Every non-last chunk therefore holds a multiple
of 8 values and starts on a byte boundary. The last chunk takes the remainder.

Block and per-value contexts hold the same bytes (per-value is the identity: a full-zip
payload is already a value's bytes).
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
    fixed_chunk_values,
    flat_desc,
    guarded,
    register,
    require,
    split_counts,
)
from lance_ops.encoding.data import DataBlock, FixedWidthBlock
from lance_ops.encoding.kernels import cut_spans
from lance_ops.errors import UnsupportedEncodingError


def packed_nbytes(num_values: int, bits_per_value: int) -> int:
    """Bytes holding ``num_values`` values of ``bits_per_value`` bits."""
    return (num_values * bits_per_value + 7) // 8


def _fixed(block: DataBlock) -> FixedWidthBlock:
    if not isinstance(block, FixedWidthBlock):
        raise UnsupportedEncodingError(f"Flat compresses fixed-width blocks, not {type(block).__name__}")
    if block.bits_per_value <= 0:
        raise UnsupportedEncodingError(f"Flat needs a positive width, got {block.bits_per_value}")
    return block


def _clean_bytes(block: FixedWidthBlock) -> np.ndarray:
    """The block's packed bytes, exactly ``packed_nbytes`` long, unused trailing bits zeroed."""
    nbytes = packed_nbytes(block.num_values, block.bits_per_value)
    data = as_u8(block.data)
    if len(data) < nbytes:
        raise ValueError(f"fixed-width block holds {len(data)} bytes, needs {nbytes}")
    data = data[:nbytes]
    tail_bits = (block.num_values * block.bits_per_value) % 8
    if tail_bits:
        data = data.copy()
        data[-1] &= (1 << tail_bits) - 1
    return data


class FlatCompressor(MiniBlockCompressor):
    """Flat in all three contexts.

    ``compress`` is the mini-block form; ``compress_block`` and ``compress_per_value`` are the
    other contexts (wrap with ``BlockAdapter`` / ``PerValueAdapter`` for the ABCs).
    """

    def compress(self, block: DataBlock) -> tuple[MiniBlockCompressed, pb.CompressiveEncoding]:
        block = _fixed(block)
        bits = block.bits_per_value
        data = _clean_bytes(block)
        counts = split_counts(block.num_values, fixed_chunk_values(bits / 8))
        sizes = [packed_nbytes(c, bits) for c in counts]
        compressed = MiniBlockCompressed(
            (data,), chunk_descriptors(counts, np.array(sizes)), block.num_values
        )
        return compressed, flat_desc(bits)

    def compress_block(self, block: DataBlock) -> tuple[bytes, pb.CompressiveEncoding]:
        block = _fixed(block)
        return _clean_bytes(block).tobytes(), flat_desc(block.bits_per_value)

    def compress_per_value(self, block: DataBlock) -> tuple[DataBlock, pb.CompressiveEncoding]:
        block = _fixed(block)
        return block, flat_desc(block.bits_per_value)


class _FlatReader:
    def __init__(self, bits_per_value: int) -> None:
        if bits_per_value <= 0:
            raise UnsupportedEncodingError(f"Flat({bits_per_value}) is not a valid width")
        self.bits_per_value = bits_per_value

    @classmethod
    def from_description(cls, desc: pb.Flat) -> _FlatReader:
        if desc.HasField("data"):
            raise UnsupportedEncodingError("Flat with buffer compression is not supported")
        return cls(int(desc.bits_per_value))

    def _read(self, data: memoryview | np.ndarray, num_values: int) -> FixedWidthBlock:
        raw = as_u8(data)
        nbytes = packed_nbytes(num_values, self.bits_per_value)
        require(
            len(raw) >= nbytes,
            f"Flat({self.bits_per_value}) buffer of {len(raw)} bytes is too short for {num_values} values",
        )
        return FixedWidthBlock(raw[:nbytes], self.bits_per_value, num_values)

    @guarded
    def decompress_chunks(self, buffers: Sequence[memoryview], counts: Sequence[int]) -> DataBlock:
        """Many buffers (mini-block chunks or level slices) decoded and concatenated in one call."""
        bits = self.bits_per_value
        nums = np.asarray(counts, np.int64)
        if bits % 8 == 0:
            spans = ChunkSpans.of(buffers)
            nbytes = nums * (bits // 8)
            require(bool(np.all(spans.sizes >= nbytes)), f"Flat({bits}) buffer is too short for its values")
            total = int(nums.sum())
            return FixedWidthBlock(cut_spans(spans.blob, spans.starts, nbytes, total), bits, total)
        blocks = [self._read(b, n) for b, n in zip(buffers, counts, strict=True)]
        data = np.packbits(
            np.concatenate(
                [np.unpackbits(b.data, bitorder="little")[: b.num_values * bits] for b in blocks]
                or [np.zeros(0, np.uint8)]
            ),
            bitorder="little",
        )
        return FixedWidthBlock(data, bits, int(nums.sum()))


@register(Context.MINIBLOCK, "flat")
class FlatMiniBlockDecompressor(_FlatReader, MiniBlockDecompressor):
    @guarded
    def decompress(self, buffers: Sequence[memoryview], num_values: int) -> DataBlock:
        require(len(buffers) == 1, f"Flat expects one mini-block buffer, got {len(buffers)}")
        return self._read(buffers[0], num_values)


@register(Context.BLOCK, "flat")
class FlatBlockDecompressor(_FlatReader, BlockDecompressor):
    @guarded
    def decompress(self, data: memoryview, num_values: int) -> DataBlock:
        return self._read(data, num_values)


@register(Context.PER_VALUE, "flat")
class FlatPerValueDecompressor(_FlatReader, PerValueDecompressor):
    @guarded
    def decompress(self, block: DataBlock) -> DataBlock:
        require(
            isinstance(block, FixedWidthBlock) and block.bits_per_value == self.bits_per_value,
            f"per-value Flat({self.bits_per_value}) expects a fixed-width block of that width",
        )
        return block
