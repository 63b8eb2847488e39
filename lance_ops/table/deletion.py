"""Deletion vectors (``_deletions/{fragment}-{read_version}-{id}.{arrow|bin}``): reading, writing, merging.

* ``.arrow`` (``ARROW_ARRAY``): an Arrow IPC *file* with exactly one record batch of schema
  ``row_id: uint32 not null`` holding deleted row offsets (any order). pylance compresses the body
  with ZSTD; pyarrow reads either.
* ``.bin`` (``BITMAP``): one portable 32-bit Roaring bitmap of deleted row offsets. pylance writes it
  without run containers (cookie 12346): header, per container its key and cardinality - 1, per
  container its byte offset, then each container: up to 4096 values as sorted ``u16``, more as a
  1024 x ``u64`` bitset. Readers also accept run containers (cookie 12347).

Offsets are physical positions within the fragment (0-based). ``read_version`` in the name is the
version the delete read; ``id`` a random u64.

Which kind pylance 14 writes (fact sheet section 4.3, checked with pylance 14.0.2): a fragment's first
deletion vector is a bitmap from 5000 offsets on; a vector merged with an existing Arrow one becomes
a bitmap only above 5000 offsets; once a bitmap, always a bitmap.
"""

from __future__ import annotations

import secrets
from dataclasses import replace

import numpy as np
import pyarrow as pa
from pyroaring import BitMap

from lance_ops.errors import CorruptFileError
from lance_ops.io import ObjectStore
from lance_ops.table.manifest import DataFragment, DeletionFile, DeletionFileType
from lance_ops.table.naming import DELETIONS_DIR
from lance_ops.table.paths import referenced_file
from lance_ops.table.transaction import Delete

_ARROW_SCHEMA = pa.schema([pa.field("row_id", pa.uint32(), nullable=False)])
BITMAP_THRESHOLD = 5000
_ROARING_NO_RUNS_COOKIE = 12346
_ARRAY_CONTAINER_MAX = 4096


def decode_deletion_file(data: bytes, file_type: DeletionFileType, path: str) -> np.ndarray:
    """Sorted unique deleted row offsets (uint32) stored in a deletion file's bytes."""
    if file_type is DeletionFileType.BITMAP:
        try:
            bitmap = BitMap.deserialize(data)
        except Exception as exc:  # pyroaring raises ValueError/OverflowError on bad input
            raise CorruptFileError(path, f"undecodable Roaring bitmap: {exc}") from exc
        return np.asarray(bitmap.to_array(), dtype=np.uint32)
    # pyarrow reports damaged IPC bytes as ArrowInvalid, ArrowIOError (an OSError) or ZSTD errors,
    # at open or only when the batch is read: all of them mean this file is corrupt.
    try:
        reader = pa.ipc.open_file(pa.py_buffer(data))
        if not reader.schema.equals(_ARROW_SCHEMA) or reader.num_record_batches != 1:
            raise CorruptFileError(path, "deletion file must hold one batch of row_id: uint32 not null")
        column = reader.get_batch(0).column(0)
        if column.null_count:
            raise CorruptFileError(path, "deletion file holds null row ids")
        # The values buffer as is: Array.to_numpy makes pyarrow import pandas (~0.2 s at startup).
        values = np.frombuffer(column.buffers()[1], np.uint32, len(column), column.offset * 4)
    except (pa.ArrowException, OSError) as exc:
        raise CorruptFileError(path, f"not a readable Arrow IPC file: {exc}") from exc
    return np.unique(values.astype(np.uint32))


def deletion_path(store: ObjectStore, root: str, fragment_id: int, deletion: DeletionFile) -> str:
    """The store path of fragment ``fragment_id``'s deletion file (dataset root ``root``)."""
    return store.join(root, DELETIONS_DIR, deletion.file_name(fragment_id))


def read_deletion_vector(
    store: ObjectStore, root: str, fragment_id: int, deletion: DeletionFile, data: bytes | None = None
) -> np.ndarray:
    """Deleted row offsets of fragment ``fragment_id`` (dataset root ``root``); ``data``: the
    file's bytes when the caller fetched them already (several files read together).

    The manifest records how many rows the file deletes (0 = unknown, older writers); a file holding
    another count is damaged, and is refused rather than silently deleting the wrong rows.
    """
    path = deletion_path(store, root, fragment_id, deletion)
    if data is None:
        with referenced_file(path, "deletion file"):
            data = store.read(path)
    offsets = decode_deletion_file(data, deletion.file_type, path)
    if deletion.num_deleted_rows and len(offsets) != deletion.num_deleted_rows:
        raise CorruptFileError(
            path, f"holds {len(offsets)} deleted rows, the manifest records {deletion.num_deleted_rows}"
        )
    return offsets


def deletion_file_type(num_deleted: int, previous: DeletionFileType | None) -> DeletionFileType:
    """The kind pylance 14 writes for ``num_deleted`` offsets replacing a ``previous`` vector (see above)."""
    if previous is DeletionFileType.BITMAP:
        return DeletionFileType.BITMAP
    if previous is None:
        return DeletionFileType.BITMAP if num_deleted >= BITMAP_THRESHOLD else DeletionFileType.ARROW_ARRAY
    return DeletionFileType.BITMAP if num_deleted > BITMAP_THRESHOLD else DeletionFileType.ARROW_ARRAY


def encode_roaring(values: np.ndarray) -> bytes:
    """Sorted unique uint32 ``values`` as a portable Roaring bitmap without run containers (pylance's
    bytes; pyroaring would turn runs of consecutive values into run containers)."""
    values = np.asarray(values, dtype=np.uint32)
    high = (values >> np.uint32(16)).astype(np.uint16)
    low = (values & np.uint32(0xFFFF)).astype(np.uint16)
    keys, starts, counts = np.unique(high, return_index=True, return_counts=True)
    sizes = np.where(counts > _ARRAY_CONTAINER_MAX, 8192, 2 * counts)
    header = 8 + 8 * len(keys)
    offsets = header + np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    described = np.empty((len(keys), 2), "<u2")
    described[:, 0], described[:, 1] = keys, counts - 1
    parts = [
        np.array([_ROARING_NO_RUNS_COOKIE, len(keys)], "<u4").tobytes(),
        described.tobytes(),
        offsets.astype("<u4").tobytes(),
    ]
    for start, count in zip(starts.tolist(), counts.tolist(), strict=True):
        chunk = low[start : start + count]
        if count <= _ARRAY_CONTAINER_MAX:
            parts.append(chunk.astype("<u2").tobytes())
        else:
            bits = np.zeros(65536, np.uint8)
            bits[chunk] = 1
            parts.append(np.packbits(bits, bitorder="little").tobytes())
    return b"".join(parts)


def encode_deletion_file(offsets: np.ndarray, file_type: DeletionFileType) -> bytes:
    """The bytes of a deletion file holding ``offsets`` (sorted unique uint32)."""
    values = np.asarray(offsets, dtype=np.uint32)
    if file_type is DeletionFileType.BITMAP:
        return encode_roaring(values)
    batch = pa.record_batch([pa.array(values, pa.uint32())], schema=_ARROW_SCHEMA)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, _ARROW_SCHEMA, options=pa.ipc.IpcWriteOptions(compression="zstd")) as writer:
        writer.write_batch(batch)
    return bytes(sink.getvalue())


def sorted_unique(*parts: np.ndarray) -> np.ndarray:
    """The distinct values of ``parts`` as sorted uint32 offsets (``np.unique`` of their
    concatenation). Linear in the common cases: one part already strictly increasing is returned as
    it is, and sorted parts are merged by a stable sort, which runs in linear time on sorted runs
    (``np.unique`` hashes every value: at 10M rows that was over 40 % of a Spark delete task)."""
    values = (
        np.concatenate([np.asarray(p, dtype=np.uint32) for p in parts]) if parts else np.zeros(0, np.uint32)
    )
    if len(values) < 2 or bool(np.all(values[1:] > values[:-1])):
        return values
    ordered = np.sort(values, kind="stable")
    return ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))]


def write_deletion_file(
    store: ObjectStore,
    root: str,
    fragment_id: int,
    read_version: int,
    offsets: np.ndarray,
    previous: DeletionFileType | None,
) -> DeletionFile:
    """Write the complete deletion vector ``offsets`` of a fragment as a new file; returns its metadata."""
    deleted = sorted_unique(offsets)
    deletion = DeletionFile(
        file_type=deletion_file_type(len(deleted), previous),
        read_version=read_version,
        id=secrets.randbits(64),
        num_deleted_rows=len(deleted),
    )
    path = store.join(root, DELETIONS_DIR, deletion.file_name(fragment_id))
    store.write(path, encode_deletion_file(deleted, deletion.file_type))
    return deletion


def can_rebase(ours: Delete, theirs: Delete) -> bool:
    """Whether :func:`rebase_delete` can merge ``ours`` over ``theirs`` (deletion files at the root)."""
    fragments = (*ours.updated_fragments, *theirs.updated_fragments)
    return all(f.deletion_file is None or f.deletion_file.base_id is None for f in fragments)


def rebase_delete(store: ObjectStore, root: str, ours: Delete, theirs: Delete, their_version: int) -> Delete:
    """``ours`` rewritten to apply on top of ``theirs`` (committed concurrently as ``their_version``).

    For each fragment both updated, the two complete deletion vectors are unioned into a new
    deletion file (our superseded file is removed); a fragment the union deletes whole, or that
    ``theirs`` removed, is removed. Nothing either delete removed is lost.
    """
    their_updated = {f.id: f for f in theirs.updated_fragments}
    their_removed = set(theirs.deleted_fragment_ids)
    updated: list[DataFragment] = []
    removed = list(ours.deleted_fragment_ids)
    for fragment in ours.updated_fragments:
        other = their_updated.get(fragment.id)
        if fragment.id not in their_removed and (other is None or other.deletion_file is None):
            updated.append(fragment)
            continue
        mine = fragment.deletion_file
        assert mine is not None, "a Delete's updated fragments carry deletion files"
        ours_vector = read_deletion_vector(store, root, fragment.id, mine)
        store.delete(store.join(root, DELETIONS_DIR, mine.file_name(fragment.id)))
        if fragment.id in their_removed:
            removed.append(fragment.id)
            continue
        assert other is not None and other.deletion_file is not None
        union = np.union1d(ours_vector, read_deletion_vector(store, root, fragment.id, other.deletion_file))
        if fragment.physical_rows and len(union) >= fragment.physical_rows:
            removed.append(fragment.id)
            continue
        either_bitmap = DeletionFileType.BITMAP in (mine.file_type, other.deletion_file.file_type)
        previous = DeletionFileType.BITMAP if either_bitmap else DeletionFileType.ARROW_ARRAY
        deletion = write_deletion_file(store, root, fragment.id, their_version, union, previous)
        updated.append(replace(fragment, deletion_file=deletion))
    return replace(ours, updated_fragments=tuple(updated), deleted_fragment_ids=tuple(dict.fromkeys(removed)))
