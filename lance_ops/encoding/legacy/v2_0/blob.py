"""Blob columns (``large_binary`` with ``lance-encoding:blob``): values out of line.

Column encoding ``blob{inner{values{}}}``. Every non-empty value is written as its own data
buffer (64-byte aligned, outside any page) as soon as its page is encoded; the page holds a
``PackedStruct`` of two u64 per row, the value's absolute file position and size. An empty
value is ``(0, 0)``, a null one ``(1, 0)``. Example ``[b'abc', b'', null, 70 × b'z']`` written
first in a file: ``(0, 3) (0, 0) (1, 0) (64, 70)``.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lance_ops._proto import encodings_v2_0_pb2 as pb
from lance_ops.encoding.api import Fetch, WriteExternal
from lance_ops.encoding.legacy.v2_0.binary import value_bytes
from lance_ops.encoding.legacy.v2_0.packed_struct import encode_packed_struct
from lance_ops.encoding.legacy.v2_0.page import BufferSink, pack_bits

DESCRIPTION = pa.struct([("position", pa.uint64()), ("size", pa.uint64())])
NULL_POSITION = 1


def blob_column_encoding() -> pb.ColumnEncoding:
    encoding = pb.ColumnEncoding()
    encoding.blob.inner.values.SetInParent()
    return encoding


def encode_blob(array: pa.Array, sink: BufferSink, external: WriteExternal) -> pb.ArrayEncoding:
    """Write the values of ``array`` through ``external``; the page describes where they went."""
    lengths, valid, data = value_bytes(array)
    ends = np.cumsum(lengths)
    positions = np.where(valid, 0, NULL_POSITION).astype(np.uint64)
    stored = np.flatnonzero(lengths)
    if len(stored):
        view = memoryview(data.data)
        positions[stored] = external([view[ends[i] - lengths[i] : ends[i]] for i in stored])
    descriptions = pa.StructArray.from_arrays(
        [pa.array(positions), pa.array(lengths.astype(np.uint64))], fields=list(DESCRIPTION)
    )
    return encode_packed_struct(descriptions, sink)


def read_blobs(descriptions: pa.StructArray, fetch: Fetch, dtype: pa.DataType) -> pa.Array:
    """The values of ``descriptions`` (from a blob page), fetched from the file."""
    positions = descriptions.field(0).to_numpy(zero_copy_only=False)
    sizes = descriptions.field(1).to_numpy(zero_copy_only=False).astype(np.int64)
    valid = ~((positions == NULL_POSITION) & (sizes == 0))
    present = np.flatnonzero(sizes)
    values = fetch([(int(positions[i]), int(sizes[i])) for i in present]) if len(present) else []
    data = np.frombuffer(b"".join(values), dtype=np.uint8)
    offsets = np.concatenate([np.zeros(1, np.int64), np.cumsum(sizes)])
    mask = None if valid.all() else pa.py_buffer(pack_bits(valid))
    out = pa.Array.from_buffers(
        pa.large_binary(), len(descriptions), [mask, pa.py_buffer(offsets), pa.py_buffer(data)]
    )
    return out if out.type == dtype else out.cast(dtype)
