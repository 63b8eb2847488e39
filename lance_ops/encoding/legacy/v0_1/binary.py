"""Variable-length binary encoding of legacy (0.1) pages (string, binary and their large forms).

A page of ``n`` values is the values' bytes back to back, followed by ``n + 1`` int64 *absolute
file positions*: value ``i`` is ``file[positions[i]:positions[i + 1]]``. The page table points at
the positions array and records ``n``. There is no validity buffer: in a nullable field an empty
value reads as null (so pylance turns ``""`` into null), in a non-nullable one as ``""``.

Example: ``["ab", "c"]`` written at file position 0 is ``61 62 63`` followed, at byte 3, by the
int64 positions ``0, 2, 3``; the page table entry is ``(3, 2)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from lance_ops.encoding.api import Fetch
from lance_ops.encoding.legacy.v0_1.plain import Span
from lance_ops.errors import CorruptFileError

_POSITION = np.dtype("<i8")


def is_var_binary(data_type: pa.DataType) -> bool:
    """Types stored with this encoding: string, binary, large_string, large_binary."""
    return (
        pa.types.is_string(data_type)
        or pa.types.is_binary(data_type)
        or pa.types.is_large_string(data_type)
        or pa.types.is_large_binary(data_type)
    )


def decode_binary(
    data_type: pa.DataType, nullable: bool, spans: Sequence[Span], fetch: Fetch
) -> list[pa.Array]:
    """Values ``start..stop`` of the var-binary page whose positions start at ``position``, for each
    span: one fetch for all the positions, one for all the value bytes."""
    width = _POSITION.itemsize
    raws = fetch([(position + width * start, width * (stop - start + 1)) for position, start, stop in spans])
    positions = []
    for (_, start, stop), raw in zip(spans, raws, strict=True):
        if len(raw) != width * (stop - start + 1):
            raise CorruptFileError("<page>", "var-binary positions are truncated")
        values = np.frombuffer(raw, dtype=_POSITION)
        if values[0] < 0 or (np.diff(values) < 0).any():
            raise CorruptFileError("<page>", "var-binary positions are negative or not ascending")
        positions.append(values)
    datas = fetch([(int(p[0]), int(p[-1] - p[0])) for p in positions])
    return [_build(data_type, nullable, p, data) for p, data in zip(positions, datas, strict=True)]


def _build(data_type: pa.DataType, nullable: bool, positions: np.ndarray, data: memoryview) -> pa.Array:
    first, last = int(positions[0]), int(positions[-1])
    if len(data) != last - first:
        raise CorruptFileError("<page>", "var-binary data is truncated")
    large = pa.types.is_large_string(data_type) or pa.types.is_large_binary(data_type)
    if not large and last - first > np.iinfo(np.int32).max:
        raise CorruptFileError("<page>", f"more than 2 GiB of {data_type} values in one read")
    offsets = (positions - first).astype(np.int64 if large else np.int32)
    lengths = np.diff(positions)
    validity = None
    if nullable and not lengths.all():
        validity = pa.array(lengths != 0).buffers()[1]
    buffers = [validity, pa.py_buffer(offsets), pa.py_buffer(data)]
    return pa.Array.from_buffers(data_type, len(lengths), buffers)
