"""PackedStruct: fixed-width struct children stored row-major in one buffer.

``PackedStruct{inner: [Nullable{no_nulls{Flat{bits_i}}} per child], buffer}``: each row is the
children's values concatenated in field order, no padding. Example ``struct<a: int32, b: double>``
``[{0, 0.0}, {1, 1.0}]``: 12 bytes per row, ``00000000 0000000000000000 01000000 000000000000f03f``.
Blob columns store their (u64 position, u64 size) descriptions this way.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lance_ops._proto import encodings_v2_0_pb2 as pb
from lance_ops.encoding.legacy.v2_0.flat import fixed_bit_width, fixed_width_bytes, flat_encoding
from lance_ops.encoding.legacy.v2_0.page import BufferSink, PageBuffers, corrupt, register
from lance_ops.errors import UnsupportedFeatureError


def _child_bits(encoding: pb.ArrayEncoding) -> int:
    while encoding.WhichOneof("array_encoding") == "nullable" and encoding.nullable.HasField("no_nulls"):
        encoding = encoding.nullable.no_nulls.values
    if encoding.WhichOneof("array_encoding") != "flat" or encoding.flat.bits_per_value % 8:
        raise corrupt("packed struct children must be byte-wide Flat values")
    return int(encoding.flat.bits_per_value)


@register("packed_struct")
def decode_packed_struct(
    packed: pb.PackedStruct, page: PageBuffers, num_values: int, dtype: pa.DataType
) -> pa.Array:
    widths = [_child_bits(child) // 8 for child in packed.inner]
    if not pa.types.is_struct(dtype) or dtype.num_fields != len(widths):
        raise corrupt(f"a packed struct of {len(widths)} children cannot hold {dtype}")
    row = sum(widths)
    data = page.get(packed.buffer)
    if len(data) < row * num_values:
        raise corrupt(
            f"packed struct buffer holds {len(data)} bytes, {num_values} rows need {row * num_values}"
        )
    rows = data[: row * num_values].reshape(num_values, row)
    starts = np.cumsum([0, *widths])
    children = []
    for i, child in enumerate(dtype):
        if fixed_bit_width(child.type) != widths[i] * 8:
            raise corrupt(f"packed child {child.name!r} of {widths[i]} bytes cannot hold {child.type}")
        values = np.ascontiguousarray(rows[:, starts[i] : starts[i + 1]])
        children.append(pa.Array.from_buffers(child.type, num_values, [None, pa.py_buffer(values)]))
    return pa.StructArray.from_arrays(children, fields=list(dtype))


def encode_packed_struct(array: pa.StructArray, sink: BufferSink) -> pb.ArrayEncoding:
    """All children of ``array`` (fixed-width, without nulls) row-major in one buffer."""
    if array.null_count:
        # pylance 14 refuses these too: 2.0 has no validity for a struct, packed or not.
        raise UnsupportedFeatureError(
            f"the struct holds {array.null_count} null value(s), but Lance file version 2.0 "
            "does not encode struct validity"
        )
    columns, inner = [], []
    for i in range(array.type.num_fields):
        child = array.field(i)
        if child.null_count or fixed_bit_width(child.type) in (None, 1):
            raise UnsupportedFeatureError(
                f"packed struct child {array.type.field(i).name!r} must be byte-wide and without nulls"
            )
        data, bits = fixed_width_bytes(child)
        columns.append(data.reshape(len(array), bits // 8))
        encoding = pb.ArrayEncoding()
        encoding.nullable.no_nulls.values.CopyFrom(flat_encoding(bits, pb.Buffer()))
        inner.append(encoding)
    rows = np.hstack(columns) if columns else np.zeros((len(array), 0), np.uint8)
    return pb.ArrayEncoding(packed_struct=pb.PackedStruct(inner=inner, buffer=sink.add(rows.reshape(-1))))
