"""Every decompressor turns truncated or random input into CorruptFileError (a ValueError)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lance_ops._proto import encodings_v2_1_pb2 as pb
from lance_ops.encoding.compression.base import Context, decompressor_for, flat_desc
from lance_ops.encoding.compression.fsst import SymbolTable
from lance_ops.encoding.compression.general import general_desc
from lance_ops.encoding.compression.rle import rle_desc
from lance_ops.encoding.compression.variable import variable_desc
from lance_ops.encoding.data import FixedWidthBlock, VariableWidthBlock
from lance_ops.errors import CorruptFileError

_table = SymbolTable(np.frombuffer(b"ab\0\0\0\0\0\0", np.uint8), np.array([2], np.uint8)).to_bytes()
MINIBLOCK = {
    "flat": (flat_desc(32), 1),
    "variable32": (variable_desc(32), 1),
    "variable64": (variable_desc(64), 1),
    "inline": (
        pb.CompressiveEncoding(inline_bitpacking=pb.InlineBitpacking(uncompressed_bits_per_value=16)),
        1,
    ),
    "rle": (rle_desc(32), 2),
    "bss": (pb.CompressiveEncoding(byte_stream_split=pb.ByteStreamSplit(values=flat_desc(64))), 1),
    "fsst": (pb.CompressiveEncoding(fsst=pb.Fsst(symbol_table=_table, values=variable_desc(32))), 1),
    "zstd": (general_desc(pb.COMPRESSION_ALGORITHM_ZSTD, None, flat_desc(32)), 1),
    "lz4": (general_desc(pb.COMPRESSION_ALGORITHM_LZ4, None, variable_desc(32)), 1),
    "fsl": (
        pb.CompressiveEncoding(
            fixed_size_list=pb.FixedSizeList(items_per_value=3, has_validity=True, values=flat_desc(16))
        ),
        2,
    ),
    "packed": (
        pb.CompressiveEncoding(packed_struct=pb.PackedStruct(bits_per_value=[8, 32], values=flat_desc(40))),
        1,
    ),
}
BLOCK = {
    "flat": flat_desc(16),
    "variable": variable_desc(32),
    "inline": pb.CompressiveEncoding(inline_bitpacking=pb.InlineBitpacking(uncompressed_bits_per_value=16)),
    "ool": pb.CompressiveEncoding(
        out_of_line_bitpacking=pb.OutOfLineBitpacking(uncompressed_bits_per_value=16, values=flat_desc(3))
    ),
    "rle": rle_desc(16),
    "lz4": general_desc(pb.COMPRESSION_ALGORITHM_LZ4, None, variable_desc(32)),
    "zstd": general_desc(pb.COMPRESSION_ALGORITHM_ZSTD, None, flat_desc(64)),
}


@pytest.mark.parametrize("name", sorted(MINIBLOCK))
@given(data=st.data())
def test_miniblock_garbage(name: str, data: st.DataObject) -> None:
    desc, nbuf = MINIBLOCK[name]
    dec = decompressor_for(Context.MINIBLOCK, desc)
    bufs = [memoryview(data.draw(st.binary(max_size=300))) for _ in range(nbuf)]
    try:
        dec.decompress(bufs, data.draw(st.integers(0, 2000)))
    except CorruptFileError:
        pass


@pytest.mark.parametrize("name", sorted(BLOCK))
@given(data=st.data())
def test_block_garbage(name: str, data: st.DataObject) -> None:
    dec = decompressor_for(Context.BLOCK, BLOCK[name])
    try:
        dec.decompress(memoryview(data.draw(st.binary(max_size=3000))), data.draw(st.integers(0, 3000)))
    except CorruptFileError:
        pass


@given(items=st.lists(st.binary(max_size=40), max_size=20))
def test_per_value_garbage(items: list[bytes]) -> None:
    offs = np.concatenate(([0], np.cumsum([len(i) for i in items]))).astype(np.uint32)
    block = VariableWidthBlock(offs, np.frombuffer(b"".join(items), np.uint8), len(items))
    for desc in (MINIBLOCK["fsst"][0], general_desc(pb.COMPRESSION_ALGORITHM_ZSTD, 0, variable_desc(32))):
        try:
            decompressor_for(Context.PER_VALUE, desc).decompress(block)
        except CorruptFileError:
            pass
    fsl = decompressor_for(Context.PER_VALUE, MINIBLOCK["fsl"][0])
    with pytest.raises(CorruptFileError):
        fsl.decompress(FixedWidthBlock(np.zeros(len(items) * 8, np.uint8), 64, len(items)))
