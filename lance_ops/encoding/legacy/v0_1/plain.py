"""Plain encoding of legacy (0.1) pages: fixed-stride values, back to back, no validity.

A page of ``n`` values of a fixed-width type starts at its page-table position and holds
``n * width`` bytes, little-endian (booleans: ``ceil(n / 8)`` bytes of LSB-first bits;
fixed-size lists: the ``n * size`` child values; fixed-size binary: ``n * width`` bytes).
Nulls are not stored: a null written by pylance reads back as whatever bytes were under it
(zero for pyarrow-built arrays). Example: int32 ``[1, 2, 3]`` is ``01000000 02000000 03000000``.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from lance_ops.encoding.api import Fetch
from lance_ops.errors import CorruptFileError, UnsupportedFeatureError

# (page position, first value, end value) of one read from one page.
Span = tuple[int, int, int]


def _bit_width(data_type: pa.DataType) -> int:
    """Bits per value of a fixed-stride type (fixed-size lists: the whole list)."""
    if pa.types.is_fixed_size_list(data_type):
        return _bit_width(data_type.value_type) * data_type.list_size
    try:
        return int(data_type.bit_width)
    except ValueError as exc:
        raise UnsupportedFeatureError(f"{data_type} is not a fixed-stride type") from exc


def decode_plain(data_type: pa.DataType, spans: Sequence[Span], fetch: Fetch) -> list[pa.Array]:
    """Values ``start..stop`` of the plain page at ``position``, for each span, in one fetch."""
    bits = _bit_width(data_type)
    ranges, bit_offsets = [], []
    for position, start, stop in spans:
        first_byte, end_byte = start * bits // 8, -(-stop * bits // 8)
        ranges.append((position + first_byte, end_byte - first_byte))
        bit_offsets.append(start * bits % 8)
    buffers = fetch(ranges)
    return [
        _build(data_type, pa.py_buffer(data), stop - start, bit_offset)
        for (_, start, stop), data, bit_offset in zip(spans, buffers, bit_offsets, strict=True)
    ]


def _build(data_type: pa.DataType, buffer: pa.Buffer, length: int, bit_offset: int) -> pa.Array:
    """An array of ``length`` values over ``buffer``, starting ``bit_offset`` bits in (booleans only)."""
    needed = -(-(bit_offset + length * _bit_width(data_type)) // 8)
    if buffer.size < needed:
        raise CorruptFileError("<page>", f"plain page of {data_type} is truncated")
    if pa.types.is_fixed_size_list(data_type):
        child = _build(data_type.value_type, buffer, length * data_type.list_size, bit_offset)
        return pa.FixedSizeListArray.from_arrays(child, type=data_type)
    return pa.Array.from_buffers(data_type, length, [None, buffer], offset=bit_offset)
