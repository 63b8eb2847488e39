"""The 2.0 encoding choice per Arrow type, as pylance 14 makes it (file-container.md §4.5).

=================================================  ============================================
Arrow type of a one-column field                   page ``ArrayEncoding``
=================================================  ============================================
null                                               ``Nullable{all_nulls}``
bool, ints, floats, temporal, decimals,            ``Nullable{…Flat{8·width}}`` (bool: ``Flat{1}``;
fixed_size_binary                                  never bitpacked)
fixed_size_list<T, d>                              ``Nullable{…FixedSizeList{d, items: T's}}``
string, page of ≥ 100 values, < 100 distinct       automatic ``Dictionary`` (u8 indices), even
                                                   when a compression is set
string, large_string, binary, large_binary         ``Binary``; ``lance-encoding:compression``
                                                   zstd / lz4 compresses its bytes, fsst gives
                                                   ``Fsst`` around the Binary (32-bit offsets
                                                   only: pylance fails on large types)
dictionary<K, V>                                   ``Dictionary`` over the Arrow keys
struct with ``packed`` / ``lance-encoding:packed``  ``PackedStruct``
=================================================  ============================================

Lists, large lists and other structs span several columns (see :mod:`.columns`).
"""

from __future__ import annotations

import pyarrow as pa

from lance_ops._proto import encodings_v2_0_pb2 as pb
from lance_ops.encoding.legacy.v2_0.binary import encode_binary
from lance_ops.encoding.legacy.v2_0.dictionary import (
    auto_dictionary_eligible,
    encode_arrow_dictionary,
    encode_auto_dictionary,
)
from lance_ops.encoding.legacy.v2_0.fixed_size_list import fixed_size_list_encoding, fsl_items
from lance_ops.encoding.legacy.v2_0.flat import encode_flat, fixed_bit_width
from lance_ops.encoding.legacy.v2_0.fsst import encode_fsst
from lance_ops.encoding.legacy.v2_0.nullable import encode_nullable
from lance_ops.encoding.legacy.v2_0.packed_struct import encode_packed_struct
from lance_ops.encoding.legacy.v2_0.page import BufferSink
from lance_ops.encoding.options import EncodingOptions
from lance_ops.errors import UnsupportedFeatureError

COMPRESSION_SCHEMES = ("zstd", "lz4")


def is_binary_like(dtype: pa.DataType) -> bool:
    return (
        pa.types.is_string(dtype)
        or pa.types.is_large_string(dtype)
        or pa.types.is_binary(dtype)
        or pa.types.is_large_binary(dtype)
    )


def _fsl_leaf(dtype: pa.DataType) -> pa.DataType:
    while pa.types.is_fixed_size_list(dtype):
        dtype = dtype.value_type
    return dtype


def encode_values(array: pa.Array, sink: BufferSink, options: EncodingOptions) -> pb.ArrayEncoding:
    """The page encoding of a one-column field's values; buffers go to ``sink``."""
    dtype = array.type
    if pa.types.is_null(dtype):
        return encode_nullable(array, sink, encode_flat)
    if pa.types.is_fixed_size_list(dtype):
        if is_binary_like(_fsl_leaf(dtype)):
            raise UnsupportedFeatureError(f"Lance 2.0 cannot store {dtype} (pylance fails on it too)")
        return encode_nullable(
            array,
            sink,
            lambda rows, out: fixed_size_list_encoding(
                dtype.list_size, encode_values(fsl_items(rows), out, options)
            ),
        )
    if pa.types.is_dictionary(dtype):
        return encode_arrow_dictionary(
            array, sink, lambda items, out: encode_values(items, out, EncodingOptions())
        )
    if is_binary_like(dtype):
        auto = auto_dictionary_eligible(array)
        if auto is not None:
            return encode_auto_dictionary(auto, sink)
        if options.compression == "fsst" and (pa.types.is_string(dtype) or pa.types.is_binary(dtype)):
            return encode_fsst(array, sink)
        compression = options.compression if options.compression in COMPRESSION_SCHEMES else None
        return encode_binary(array, sink, compression, options.compression_level)
    if pa.types.is_struct(dtype):
        return encode_packed_struct(array, sink)
    if fixed_bit_width(dtype) is not None:
        return encode_nullable(array, sink, encode_flat)
    raise UnsupportedFeatureError(f"Lance 2.0 cannot store {dtype}")
