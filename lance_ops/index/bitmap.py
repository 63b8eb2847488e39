"""BITMAP, LABEL_LIST and NGRAM index files (pylance 14): one row-address set per key.

BITMAP and LABEL_LIST, ``bitmap_page_lookup.lance``: columns ``keys`` (the indexed value type;
LABEL_LIST: the list's item type) sorted ascending with the null key first, and ``bitmaps``
(binary, a row-address map: see :mod:`lance_ops.index.treemap`); schema metadata
``lance:index_stats`` = ``{"num_bitmaps": <keys>}``. LABEL_LIST also sets
``lance:label_list_nulls`` to the number of the global buffer holding the rows whose list is null
(a row-address map; ``00000000`` when none), e.g. values ``[["x", "y"], null, ["x", null]]``
give keys ``[null, "x", "y"]`` with rows ``[{2}, {0, 2}, {0}]`` and null rows ``{1}``.

NGRAM, ``ngram_postings.lance``: columns ``tokens`` (uint32 n-gram hashes) and ``posting_list``
(binary, a 64-bit portable Roaring bitmap).

A remap rewrites every set (removed rows dropped, moved rows renumbered) and keeps every key, even
one left with no rows, as pylance does. A merge (optimize after an append) adds the new rows'
keys, keeping keys sorted with the null key first.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_ops.errors import IndexCorruptError, UnsupportedIndexTypeError
from lance_ops.index.files import IndexFileData, IndexWriter, RemapResult, read_index_file
from lance_ops.index.mapping import RowAddressMapping
from lance_ops.index.treemap import (
    decode_bitmap64,
    decode_row_address_map,
    encode_bitmap64,
    encode_row_address_map,
)
from lance_ops.io.context import StorageContext
from lance_ops.table.manifest import IndexMetadata

__all__ = ["BITMAP_LAYOUT", "NGRAM_LAYOUT", "merge_bitmap", "remap_bitmap"]

_NULLS_KEY = b"lance:label_list_nulls"
_STATS_KEY = b"lance:index_stats"


@dataclass(frozen=True)
class SetLayout:
    """Where a key -> row-set index keeps its sets and how they are serialized."""

    file: str
    keys: str
    sets: str
    decode: Callable[[bytes], np.ndarray]
    encode: Callable[[np.ndarray], bytes]


BITMAP_LAYOUT = SetLayout(
    "bitmap_page_lookup.lance", "keys", "bitmaps", decode_row_address_map, encode_row_address_map
)
NGRAM_LAYOUT = SetLayout("ngram_postings.lance", "tokens", "posting_list", decode_bitmap64, encode_bitmap64)


def _decode_all(
    blobs: list[bytes | None], layout: SetLayout, index: IndexMetadata
) -> tuple[np.ndarray, np.ndarray]:
    """All addresses of all sets, and the set (key position) of each."""
    try:
        parts = [layout.decode(b) if b else np.empty(0, np.uint64) for b in blobs]
    except UnsupportedIndexTypeError as exc:
        raise UnsupportedIndexTypeError(f"index {index.name!r}: {exc}", index.name) from exc
    except (ValueError, OverflowError, IndexError, struct.error) as exc:  # damaged bytes
        raise IndexCorruptError(layout.file, f"index {index.name!r}: undecodable row set: {exc}") from exc
    owners = np.repeat(np.arange(len(parts), dtype=np.int64), [p.size for p in parts])
    addrs = np.concatenate(parts) if parts else np.empty(0, np.uint64)
    return addrs, owners


def _encode_all(addrs: np.ndarray, owners: np.ndarray, count: int, layout: SetLayout) -> list[bytes]:
    """One serialized set per owner ``0..count-1`` (duplicates merged, addresses sorted)."""
    order = np.lexsort((addrs, owners))
    addrs, owners = addrs[order], owners[order]
    if addrs.size:
        first = np.r_[True, (addrs[1:] != addrs[:-1]) | (owners[1:] != owners[:-1])]
        addrs, owners = addrs[first], owners[first]
    bounds = np.searchsorted(owners, np.arange(count + 1))
    return [layout.encode(addrs[bounds[i] : bounds[i + 1]]) for i in range(count)]


def _rewrite(
    ctx: StorageContext,
    index: IndexMetadata,
    data: IndexFileData,
    layout: SetLayout,
    keys: pa.Array,
    blobs: list[bytes],
    buffers: tuple[bytes, ...],
) -> RemapResult:
    metadata = dict(data.metadata)
    if _STATS_KEY in metadata:
        metadata[_STATS_KEY] = json.dumps({"num_bitmaps": len(keys)}, separators=(",", ":")).encode()
    schema = data.schema.with_metadata(metadata)
    table = pa.table(
        [keys.cast(schema.field(layout.keys).type), pa.array(blobs, schema.field(layout.sets).type)],
        schema=schema,
    )
    writer = IndexWriter(ctx)
    writer.write(layout.file, table, version=data.version, global_buffers=buffers)
    return writer.result(index)


def _nulls_buffer(data: IndexFileData, index: IndexMetadata, layout: SetLayout) -> int | None:
    """Position in ``data.global_buffers`` of the LABEL_LIST null rows, if the file has them."""
    raw = data.metadata.get(_NULLS_KEY)
    if raw is None:
        return None
    try:
        position = int(raw) - 1
    except ValueError:
        position = -1
    if not 0 <= position < len(data.global_buffers):
        raise IndexCorruptError(layout.file, f"index {index.name!r}: bad {_NULLS_KEY.decode()} {raw!r}")
    return position


def _read(
    ctx: StorageContext, index: IndexMetadata, layout: SetLayout
) -> tuple[IndexFileData, pa.Array, list]:
    data = read_index_file(ctx, index, layout.file)
    keys = data.column(layout.keys, index, layout.file).combine_chunks()
    blobs = data.column(layout.sets, index, layout.file).to_pylist()
    return data, keys, blobs


def remap_bitmap(
    ctx: StorageContext, index: IndexMetadata, mapping: RowAddressMapping, layout: SetLayout = BITMAP_LAYOUT
) -> RemapResult:
    data, keys, blobs = _read(ctx, index, layout)
    addrs, owners = _decode_all(blobs, layout, index)
    new, kept = mapping.apply(addrs)
    new_blobs = _encode_all(new, owners[kept], len(blobs), layout)
    buffers = list(data.global_buffers)
    nulls = _nulls_buffer(data, index, layout)
    if nulls is not None:
        null_rows, _ = _decode_all([buffers[nulls]], layout, index)
        buffers[nulls] = layout.encode(np.unique(mapping.apply(null_rows)[0]))
    return _rewrite(ctx, index, data, layout, keys, new_blobs, tuple(buffers))


def merge_bitmap(
    ctx: StorageContext,
    template: IndexMetadata,
    merged: Sequence[IndexMetadata],
    new_values: pa.Array,
    new_ids: np.ndarray,
    label_list: bool,
    base: IndexFileData | None = None,
) -> RemapResult:
    """One segment over the rows of the segments ``merged`` and the rows ``new_ids`` (values
    ``new_values``); ``merged`` empty: a delta segment of the new rows only. ``template`` gives
    the file's schema and metadata (``base``, an empty file, for a new index).

    LABEL_LIST values are lists: each item is a key of its row, a null list goes to the null rows.
    """
    layout = BITMAP_LAYOUT
    data = base if base is not None else read_index_file(ctx, template, layout.file)
    key_type = data.schema.field(layout.keys).type
    new_ids = np.asarray(new_ids, dtype=np.uint64)
    nulls = _nulls_buffer(data, template, layout)
    null_rows = [np.empty(0, np.uint64)]
    if label_list:
        null_rows.append(new_ids[np.asarray(new_values.is_null(), dtype=bool)])
        new_ids = new_ids[np.asarray(pc.list_parent_indices(new_values), dtype=np.int64)]
        new_values = pc.list_flatten(new_values)
    try:
        key_parts = [new_values.cast(key_type)]
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise IndexCorruptError(
            layout.file, f"index {template.name!r}: new values do not fit {key_type}: {exc}"
        ) from exc
    addr_parts, owner_parts = [new_ids], [np.arange(new_ids.size, dtype=np.int64)]
    offset = new_ids.size
    for segment in merged:
        old, keys, blobs = _read(ctx, segment, layout)
        addrs, owners = _decode_all(blobs, layout, segment)
        key_parts.append(keys.cast(key_type))
        addr_parts.append(addrs)
        owner_parts.append(owners + offset)
        offset += len(keys)
        old_nulls = _nulls_buffer(old, segment, layout)
        if old_nulls is not None:
            null_rows.append(_decode_all([old.global_buffers[old_nulls]], layout, segment)[0])
    all_keys = pa.concat_arrays(key_parts)
    unique = pc.unique(all_keys)
    order = np.asarray(pc.array_sort_indices(unique, null_placement="at_end"))
    null = np.asarray(unique.is_null(), dtype=bool)[order]
    unique = unique.take(pa.array(np.concatenate([order[null], order[~null]])))  # null first, NaN last
    position = np.asarray(pc.index_in(all_keys, value_set=unique, skip_nulls=False), dtype=np.int64)
    blobs = _encode_all(
        np.concatenate(addr_parts), position[np.concatenate(owner_parts)], len(unique), layout
    )
    buffers = list(data.global_buffers)
    if nulls is not None:
        buffers[nulls] = layout.encode(np.unique(np.concatenate(null_rows)))
    return _rewrite(ctx, template, data, layout, unique, blobs, tuple(buffers))
