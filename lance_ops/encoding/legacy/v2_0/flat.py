"""Flat: ``n`` fixed-width values back to back in one page buffer.

``Flat{bits_per_value, buffer, compression?}``. ``bits_per_value = 1`` is an LSB-first bitmap
(bools, validity); otherwise ``bits_per_value / 8`` little-endian bytes per value, exactly the
Arrow values buffer (null slots hold whatever Arrow held). Example: int32 ``[1, 2, 3]`` is
``Flat{32}`` over ``01000000 02000000 03000000``.

With ``compression{scheme, level?}`` the whole buffer is one compressed blob: ``zstd`` = u64
uncompressed length + zstd frame (a bare frame is accepted), ``lz4`` = u32 uncompressed length
+ one LZ4 block. pylance only compresses the bytes of Binary pages this way.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lance_ops._proto import encodings_v2_0_pb2 as pb
from lance_ops._proto import encodings_v2_1_pb2 as pb21
from lance_ops.encoding.compression.general import compress_buffer, decompress_buffer
from lance_ops.encoding.legacy.v2_0.page import BufferSink, PageBuffers, corrupt, pack_bits, register
from lance_ops.errors import UnsupportedEncodingError

_SCHEMES = {"zstd": pb21.COMPRESSION_ALGORITHM_ZSTD, "lz4": pb21.COMPRESSION_ALGORITHM_LZ4}


def fixed_bit_width(dtype: pa.DataType) -> int | None:
    """Bits per value of a fixed-width type (1 for bool), None for other types."""
    if pa.types.is_boolean(dtype):
        return 1
    if pa.types.is_fixed_size_list(dtype) or pa.types.is_null(dtype) or pa.types.is_dictionary(dtype):
        return None
    try:
        return int(dtype.bit_width)
    except ValueError:
        return None


def buffer_bytes(flat: pb.Flat, page: PageBuffers) -> np.ndarray:
    """The (decompressed) bytes of a Flat buffer."""
    if not flat.HasField("buffer"):
        raise corrupt("Flat without a buffer")
    data = page.get(flat.buffer)
    scheme = flat.compression.scheme if flat.HasField("compression") else ""
    if scheme in ("", "none"):
        return data
    if scheme not in _SCHEMES:
        raise UnsupportedEncodingError(f"2.0 Flat compression {scheme!r} is not supported")
    return np.frombuffer(decompress_buffer(data, _SCHEMES[scheme]), dtype=np.uint8)


def values_bytes(flat: pb.Flat, page: PageBuffers, num_values: int) -> np.ndarray:
    """Exactly the bytes of ``num_values`` values (a bitmap for ``bits_per_value == 1``)."""
    bits = int(flat.bits_per_value)
    if bits != 1 and (bits == 0 or bits % 8):
        raise UnsupportedEncodingError(f"2.0 Flat with {bits} bits per value is not supported")
    size = (num_values + 7) // 8 if bits == 1 else num_values * bits // 8
    data = buffer_bytes(flat, page)
    if len(data) < size:
        raise corrupt(f"Flat buffer holds {len(data)} bytes, {num_values} values need {size}")
    return data[:size]


@register("flat")
def decode_flat(flat: pb.Flat, page: PageBuffers, num_values: int, dtype: pa.DataType) -> pa.Array:
    data = values_bytes(flat, page, num_values)
    if int(flat.bits_per_value) != fixed_bit_width(dtype):
        raise corrupt(f"Flat of {flat.bits_per_value} bits cannot hold {dtype}")
    return pa.Array.from_buffers(dtype, num_values, [None, pa.py_buffer(data)])


def flat_encoding(
    bits: int, buffer: pb.Buffer, compression: str | None = None, level: int | None = None
) -> pb.ArrayEncoding:
    encoding = pb.ArrayEncoding(flat=pb.Flat(bits_per_value=bits, buffer=buffer))
    if compression is not None:
        encoding.flat.compression.scheme = compression
        if level is not None:
            encoding.flat.compression.level = level
    return encoding


def encode_bytes(
    data: np.ndarray, sink: BufferSink, compression: str | None = None, level: int | None = None
) -> pb.ArrayEncoding:
    """Bytes (``Flat{8}``), compressed with ``zstd`` / ``lz4`` when asked."""
    stored: bytes | np.ndarray = data
    if compression in _SCHEMES:
        stored = compress_buffer(data, _SCHEMES[compression], level)
    else:
        compression = None
    return flat_encoding(8, sink.add(stored), compression, level)


def fixed_width_bytes(array: pa.Array) -> tuple[np.ndarray, int]:
    """The values of a fixed-width (or bool) array as bytes, and the bits per value."""
    dtype = array.type
    data = array.buffers()[1]
    if pa.types.is_boolean(dtype):
        if data is None:
            return np.zeros((len(array) + 7) // 8, np.uint8), 1
        raw = np.frombuffer(data, dtype=np.uint8)
        bits = np.unpackbits(raw, bitorder="little")[array.offset : array.offset + len(array)]
        return pack_bits(bits.astype(bool)), 1
    width = dtype.bit_width // 8
    if data is None:
        return np.zeros(len(array) * width, np.uint8), dtype.bit_width
    raw = np.frombuffer(data, dtype=np.uint8)
    return raw[array.offset * width : (array.offset + len(array)) * width], dtype.bit_width


def encode_flat(array: pa.Array, sink: BufferSink) -> pb.ArrayEncoding:
    """``Flat{bits}`` of a fixed-width array's values (validity is the Nullable's business)."""
    data, bits = fixed_width_bytes(array)
    return flat_encoding(bits, sink.add(data))
