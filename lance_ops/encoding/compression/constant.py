"""Constant (compressive): every value equals the bytes in the description (spec §7.3).

Description ``Constant { value }``. There is no data buffer: a block of n values is the
value's bytes repeated n times (``value = 07 00 00 00`` → int32 7s). pylance 14 never writes
this message in 2.1/2.2 pages (constant pages use the structural ConstantLayout), so only
decoding is provided, in the block and per-value contexts. A description without a value
carries no data and is rejected.
"""

from __future__ import annotations

import numpy as np

from lance_ops._proto import encodings_v2_1_pb2 as pb
from lance_ops.encoding.compression.base import (
    BlockDecompressor,
    Context,
    PerValueDecompressor,
    guarded,
    register,
)
from lance_ops.encoding.data import DataBlock, FixedWidthBlock
from lance_ops.errors import UnsupportedEncodingError


def _repeat(value: bytes, num_values: int) -> FixedWidthBlock:
    data = np.tile(np.frombuffer(value, dtype=np.uint8), num_values)
    return FixedWidthBlock(data, len(value) * 8, num_values)


class _ConstantReader:
    def __init__(self, value: bytes) -> None:
        if not value:
            raise UnsupportedEncodingError("Constant compression without a value is not supported")
        self.value = value

    @classmethod
    def from_description(cls, desc: pb.Constant) -> _ConstantReader:
        return cls(desc.value if desc.HasField("value") else b"")


@register(Context.BLOCK, "constant")
class ConstantBlockDecompressor(_ConstantReader, BlockDecompressor):
    @guarded
    def decompress(self, data: memoryview, num_values: int) -> DataBlock:
        return _repeat(self.value, num_values)


@register(Context.PER_VALUE, "constant")
class ConstantPerValueDecompressor(_ConstantReader, PerValueDecompressor):
    @guarded
    def decompress(self, block: DataBlock) -> DataBlock:
        return _repeat(self.value, block.num_values)
