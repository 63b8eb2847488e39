"""Binary: strings and binaries (any offset width) as null-adjusted offsets plus bytes.

``Binary{indices: Nullable{no_nulls{Flat{64}}}, bytes: Flat{8}, null_adjustment: A}``: buffer 0
holds the page-relative u64 end offsets (see :mod:`.offsets`, ``A`` = total bytes + 1, also
without nulls), buffer 1 the valid values' bytes back to back (``bytes`` may carry
``compression``). Example ``["a", "bc", null, "", "def"]``: offsets ``[1, 3, 10, 3, 6]``,
bytes ``abcdef``, A = 7. The Arrow offset width is chosen on read from the requested type.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_ops._proto import encodings_v2_0_pb2 as pb
from lance_ops.encoding.legacy.v2_0.flat import buffer_bytes, encode_flat
from lance_ops.encoding.legacy.v2_0.flat import encode_bytes as encode_flat_bytes
from lance_ops.encoding.legacy.v2_0.nullable import encode_nullable
from lance_ops.encoding.legacy.v2_0.offsets import decode_offsets, encode_offsets
from lance_ops.encoding.legacy.v2_0.page import (
    BufferSink,
    PageBuffers,
    corrupt,
    decode,
    pack_bits,
    register,
    validity,
)


def _large(dtype: pa.DataType) -> pa.DataType:
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        return pa.large_string()
    if pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype):
        return pa.large_binary()
    raise corrupt(f"a Binary page cannot hold {dtype}")


@register("binary")
def decode_binary(binary: pb.Binary, page: PageBuffers, num_values: int, dtype: pa.DataType) -> pa.Array:
    stored = decode(binary.indices, page, num_values, pa.uint64())
    offsets, valid = decode_offsets(stored.to_numpy(zero_copy_only=False), int(binary.null_adjustment))
    if binary.bytes.WhichOneof("array_encoding") != "flat":
        raise corrupt("Binary bytes are not Flat")
    data = buffer_bytes(binary.bytes.flat, page)
    if len(data) < offsets[-1]:
        raise corrupt(f"Binary bytes hold {len(data)} bytes, offsets need {offsets[-1]}")
    mask = None if valid.all() else pa.py_buffer(pack_bits(valid))
    large = pa.Array.from_buffers(
        _large(dtype), num_values, [mask, pa.py_buffer(offsets), pa.py_buffer(data[: offsets[-1]])]
    )
    return large if large.type == dtype else large.cast(dtype)


def value_bytes(array: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Lengths (0 for nulls), validity and concatenated bytes of a string/binary array."""
    valid = validity(array)
    if array.offset or array.buffers()[1] is None:
        array = pa.concat_arrays([array]) if len(array) else pa.array([], array.type)
    wide = pa.types.is_large_string(array.type) or pa.types.is_large_binary(array.type)
    offsets = np.frombuffer(array.buffers()[1], dtype=np.int64 if wide else np.int32)[: len(array) + 1]
    lengths = np.diff(offsets).astype(np.int64)
    if (lengths[~valid] != 0).any():
        # Nulls backed by bytes: blank them so that only valid values own bytes.
        blanked = pc.if_else(pa.array(valid), array, pa.scalar(b"", array.type))
        lengths, _, raw = value_bytes(blanked)
        return lengths, valid, raw
    data = array.buffers()[2]
    start, stop = int(offsets[0]) if len(offsets) else 0, int(offsets[-1]) if len(offsets) else 0
    raw = np.frombuffer(data, dtype=np.uint8)[start:stop] if data is not None else np.zeros(0, np.uint8)
    return lengths, valid, raw


def encode_binary(
    array: pa.Array, sink: BufferSink, compression: str | None = None, level: int | None = None
) -> pb.ArrayEncoding:
    """Binary of a string/binary array: offsets in the next buffer, bytes in the one after."""
    lengths, valid, data = value_bytes(array)
    stored, adjustment = encode_offsets(lengths, valid)
    out = pb.ArrayEncoding()
    out.binary.indices.CopyFrom(encode_nullable(pa.array(stored, pa.uint64()), sink, encode_flat))
    out.binary.bytes.CopyFrom(encode_flat_bytes(data, sink, compression, level))
    out.binary.null_adjustment = adjustment
    return out
