"""Reading deletion vectors (``_deletions/{fragment}-{read_version}-{id}.{arrow|bin}``).

* ``.arrow`` (``ARROW_ARRAY``): an Arrow IPC *file* with exactly one record batch of schema
  ``row_id: uint32 not null`` holding deleted row offsets (any order). pylance compresses the body
  with ZSTD; pyarrow reads either.
* ``.bin`` (``BITMAP``): one portable 32-bit Roaring bitmap of deleted row offsets.

Offsets are physical positions within the fragment (0-based).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from pyroaring import BitMap

from lance_ops.errors import CorruptFileError
from lance_ops.io import ObjectStore
from lance_ops.table.manifest import DeletionFile, DeletionFileType
from lance_ops.table.naming import DELETIONS_DIR

_ARROW_SCHEMA = pa.schema([pa.field("row_id", pa.uint32(), nullable=False)])


def decode_deletion_file(data: bytes, file_type: DeletionFileType, path: str) -> np.ndarray:
    """Sorted unique deleted row offsets (uint32) stored in a deletion file's bytes."""
    if file_type is DeletionFileType.BITMAP:
        try:
            bitmap = BitMap.deserialize(data)
        except Exception as exc:  # pyroaring raises ValueError/OverflowError on bad input
            raise CorruptFileError(path, f"undecodable Roaring bitmap: {exc}") from exc
        return np.asarray(bitmap.to_array(), dtype=np.uint32)
    try:
        reader = pa.ipc.open_file(pa.py_buffer(data))
    except pa.ArrowInvalid as exc:
        raise CorruptFileError(path, f"not an Arrow IPC file: {exc}") from exc
    if not reader.schema.equals(_ARROW_SCHEMA) or reader.num_record_batches != 1:
        raise CorruptFileError(path, "deletion file must hold one batch of row_id: uint32 not null")
    values = reader.get_batch(0).column(0).to_numpy(zero_copy_only=False)
    return np.unique(values.astype(np.uint32))


def read_deletion_vector(
    store: ObjectStore, root: str, fragment_id: int, deletion: DeletionFile
) -> np.ndarray:
    """Deleted row offsets of fragment ``fragment_id`` (dataset root ``root``)."""
    path = store.join(root, DELETIONS_DIR, deletion.file_name(fragment_id))
    return decode_deletion_file(store.read(path), deletion.file_type, path)
