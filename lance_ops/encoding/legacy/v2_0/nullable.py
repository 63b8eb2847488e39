"""Nullable: validity around another encoding.

``Nullable`` is a oneof: ``no_nulls{values}`` (null count 0), ``some_nulls{validity, values}``
(``validity`` is a ``Flat{1}`` LSB-first bitmap, 1 = valid, taking its buffer index before the
values), ``all_nulls{}`` (every value null, no buffers; also for the Arrow null type and for empty pages).
Example: int32 ``[1, null, 3]`` is ``some_nulls{Flat{1} buffer 0 = 05, Flat{32} buffer 1}``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa

from lance_ops._proto import encodings_v2_0_pb2 as pb
from lance_ops.encoding.legacy.v2_0.flat import flat_encoding, values_bytes
from lance_ops.encoding.legacy.v2_0.page import (
    BufferSink,
    PageBuffers,
    corrupt,
    decode,
    pack_bits,
    register,
    unpack_bits,
    validity,
)

ValuesEncoder = Callable[[pa.Array, BufferSink], pb.ArrayEncoding]


@register("nullable")
def decode_nullable(
    nullable: pb.Nullable, page: PageBuffers, num_values: int, dtype: pa.DataType
) -> pa.Array:
    kind = nullable.WhichOneof("nullability")
    if kind == "all_nulls":
        return pa.nulls(num_values, dtype)
    if kind == "no_nulls":
        return decode(nullable.no_nulls.values, page, num_values, dtype)
    if kind != "some_nulls":
        raise corrupt("Nullable has no nullability set")
    values = decode(nullable.some_nulls.values, page, num_values, dtype)
    validity_encoding = nullable.some_nulls.validity
    if validity_encoding.WhichOneof("array_encoding") != "flat":
        raise corrupt("Nullable validity is not a Flat bitmap")
    bitmap = values_bytes(validity_encoding.flat, page, num_values)
    return with_validity(values, unpack_bits(bitmap, num_values))


def with_validity(values: pa.Array, valid: np.ndarray) -> pa.Array:
    """``values`` with the nulls of ``valid`` (their own nulls are replaced)."""
    if pa.types.is_fixed_size_list(values.type):
        return pa.FixedSizeListArray.from_arrays(values.values, type=values.type, mask=pa.array(~valid))
    if pa.types.is_struct(values.type):
        children = [values.field(i) for i in range(values.type.num_fields)]
        return pa.StructArray.from_arrays(children, fields=list(values.type), mask=pa.array(~valid))
    if pa.types.is_dictionary(values.type):
        indices = with_validity(values.indices, valid)
        return pa.DictionaryArray.from_arrays(indices, values.dictionary)
    if values.offset:
        values = pa.concat_arrays([values])
    buffers = values.buffers()
    buffers[0] = pa.py_buffer(pack_bits(valid))
    return pa.Array.from_buffers(values.type, len(values), buffers)


def encode_nullable(array: pa.Array, sink: BufferSink, values: ValuesEncoder) -> pb.ArrayEncoding:
    """Wrap ``values(array)`` in the Nullable variant matching the array's nulls."""
    out = pb.ArrayEncoding()
    if pa.types.is_null(array.type) or array.null_count == len(array):
        out.nullable.all_nulls.SetInParent()
    elif array.null_count == 0:
        out.nullable.no_nulls.values.CopyFrom(values(array, sink))
    else:
        bitmap = sink.add(pack_bits(validity(array)))
        out.nullable.some_nulls.validity.CopyFrom(flat_encoding(1, bitmap))
        out.nullable.some_nulls.values.CopyFrom(values(array, sink))
    return out
