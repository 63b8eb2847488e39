"""FixedSizeList: ``dimension`` child values per value, the child encoded on its own.

``Nullable{…{FixedSizeList{dimension: d, items: <child encoding over n·d values>}}}``; row
nulls live in the outer Nullable (``has_validity`` stays false), child nulls in the child's
own Nullable. Example ``fixed_size_list<float32, 2>`` ``[[1, 2], [3, 4], null, [5, 6], [7, 8]]``:
buffer 0 row validity ``1b``, buffer 1 child validity ``cf 03``, buffer 2 ten float32 values.
"""

from __future__ import annotations

import pyarrow as pa

from lance_ops._proto import encodings_v2_0_pb2 as pb
from lance_ops.encoding.legacy.v2_0.page import PageBuffers, corrupt, decode, register


@register("fixed_size_list")
def decode_fixed_size_list(
    fsl: pb.FixedSizeList, page: PageBuffers, num_values: int, dtype: pa.DataType
) -> pa.Array:
    if not pa.types.is_fixed_size_list(dtype) or dtype.list_size != fsl.dimension:
        raise corrupt(f"FixedSizeList of dimension {fsl.dimension} cannot hold {dtype}")
    items = decode(fsl.items, page, num_values * fsl.dimension, dtype.value_type)
    return pa.FixedSizeListArray.from_arrays(items, type=dtype)


def fsl_items(array: pa.Array) -> pa.Array:
    """The child values under the rows of a (possibly sliced) fixed-size-list array."""
    size = array.type.list_size
    return array.values.slice(array.offset * size, len(array) * size)


def fixed_size_list_encoding(dimension: int, items: pb.ArrayEncoding) -> pb.ArrayEncoding:
    """The FixedSizeList message around already encoded ``items`` (see :func:`fsl_items`)."""
    return pb.ArrayEncoding(fixed_size_list=pb.FixedSizeList(dimension=dimension, items=items))
