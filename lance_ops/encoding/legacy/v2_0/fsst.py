"""Fsst: strings coded with a page's FSST symbol table, stored as Binary.

``Fsst{binary: Binary of the coded strings, symbol_table}``, written only when the field asks
for ``lance-encoding:compression = fsst``. The symbol table has the layout of
:class:`lance_ops.encoding.compression.fsst.SymbolTable`; pages smaller than
:data:`MIN_CODED_BYTES` keep their strings as they are under an "uncoded" table (byte 3 bit 0
clear), as pylance does. Nulls stay in the Binary's offsets.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lance_ops._proto import encodings_v2_0_pb2 as pb
from lance_ops.encoding.compression.fsst import SymbolTable, fsst_decode, fsst_encode
from lance_ops.encoding.data import VariableWidthBlock
from lance_ops.encoding.legacy.v2_0.binary import encode_binary, value_bytes
from lance_ops.encoding.legacy.v2_0.page import BufferSink, PageBuffers, decode, pack_bits, register, validity

MIN_CODED_BYTES = 32 * 1024


def _with_offsets(dtype: pa.DataType, offsets: np.ndarray, data: np.ndarray, valid: np.ndarray) -> pa.Array:
    mask = None if valid.all() else pa.py_buffer(pack_bits(valid))
    large = (
        pa.large_string()
        if pa.types.is_string(dtype) or pa.types.is_large_string(dtype)
        else pa.large_binary()
    )
    out = pa.Array.from_buffers(
        large, len(valid), [mask, pa.py_buffer(offsets.astype(np.int64)), pa.py_buffer(data)]
    )
    return out if out.type == dtype else out.cast(dtype)


@register("fsst")
def decode_fsst(fsst: pb.Fsst, page: PageBuffers, num_values: int, dtype: pa.DataType) -> pa.Array:
    coded = decode(fsst.binary, page, num_values, pa.large_binary())
    table = SymbolTable.parse(fsst.symbol_table)
    raw = coded.buffers()
    offsets = np.frombuffer(raw[1], dtype=np.int64)[: num_values + 1]
    data = np.frombuffer(raw[2], dtype=np.uint8) if raw[2] is not None else np.zeros(0, np.uint8)
    out, out_offsets = fsst_decode(data, offsets, table)
    return _with_offsets(dtype, out_offsets, out, validity(coded))


def encode_fsst(array: pa.Array, sink: BufferSink) -> pb.ArrayEncoding:
    """FSST-code the strings of ``array`` (when the page is big enough) inside a Binary."""
    lengths, valid, data = value_bytes(array)
    offsets = np.concatenate([np.zeros(1, np.int64), np.cumsum(lengths)])
    block = VariableWidthBlock(offsets, data, len(array))
    uncoded = SymbolTable(np.zeros((0, 8), np.uint8), np.zeros(0, np.uint8), coded=False)
    coded, table = fsst_encode(block, None if len(data) >= MIN_CODED_BYTES else uncoded)
    stored = _with_offsets(pa.large_binary(), coded.offsets, np.asarray(coded.data, np.uint8), valid)
    out = pb.ArrayEncoding()
    out.fsst.binary.CopyFrom(encode_binary(stored, sink))
    out.fsst.symbol_table = table.to_bytes()
    return out
