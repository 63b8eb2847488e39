"""Variable-length binary encoding of legacy (0.1) pages (string, binary and their large forms).

A page of ``n`` values is the values' bytes back to back, followed by ``n + 1`` int64 *absolute
file positions*: value ``i`` is ``file[positions[i]:positions[i + 1]]``. The page table points at
the positions array and records ``n``. There is no validity buffer: in a nullable field an empty
value reads as null (so pylance turns ``""`` into null), in a non-nullable one as ``""``.

Example: ``["ab", "c"]`` written at file position 0 is ``61 62 63`` followed, at byte 3, by the
int64 positions ``0, 2, 3``; the page table entry is ``(3, 2)``.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lance_ops.encoding.api import Fetch
from lance_ops.errors import CorruptFileError

_POSITION = np.dtype("<i8")


def decode_binary(
    data_type: pa.DataType, nullable: bool, position: int, start: int, stop: int, fetch: Fetch
) -> pa.Array:
    """Values ``start..stop`` of a var-binary page whose positions array starts at ``position``."""
    count = stop - start
    (raw,) = fetch([(position + _POSITION.itemsize * start, _POSITION.itemsize * (count + 1))])
    if len(raw) != _POSITION.itemsize * (count + 1):
        raise CorruptFileError("<page>", "var-binary positions are truncated")
    positions = np.frombuffer(raw, dtype=_POSITION)
    lengths = np.diff(positions)
    if count and (lengths < 0).any():
        raise CorruptFileError("<page>", "var-binary positions are not ascending")
    first, last = int(positions[0]), int(positions[-1])
    (data,) = fetch([(first, last - first)]) if last > first else (memoryview(b""),)
    if len(data) != last - first:
        raise CorruptFileError("<page>", "var-binary data is truncated")
    large = pa.types.is_large_string(data_type) or pa.types.is_large_binary(data_type)
    if not large and last - first > np.iinfo(np.int32).max:
        raise CorruptFileError("<page>", f"more than 2 GiB of {data_type} values in one read")
    offsets = (positions - first).astype(np.int64 if large else np.int32)
    validity = None
    if nullable and count and not lengths.all():
        validity = pa.array(lengths != 0).buffers()[1]
    return pa.Array.from_buffers(data_type, count, [validity, pa.py_buffer(offsets), pa.py_buffer(data)])
