"""Remapping an index after compaction moved its rows: ``remap_index``.

Without stable row ids an index stores row addresses, and compaction changes them. For each type
pylance 14 remaps, this writes a new index directory (a fresh uuid) holding the same index over
the new addresses, leaving the old directory as it was; the caller records old -> new uuid in the
Rewrite transaction (``rewritten_indices``) with the new files, details and version.

==============  ==================================================================
BTREE           pages rebuilt (removed rows dropped, lookup recomputed)
BITMAP          every key's row set remapped
LABEL_LIST      as BITMAP, plus the null-lists row set
NGRAM           every n-gram's posting list remapped
IVF_FLAT/PQ/SQ  storage rows remapped, partition sizes updated, model copied (a legacy IVF_PQ
                ``index.idx``: rewritten whole, still legacy, as pylance 14)
IVF_HNSW_*      as IVF_*; graphs copied, or without removed nodes (repaired, renumbered)
INVERTED        documents' row ids rewritten; removed rows leave (documents renumbered,
                scores, impacts and positions rewritten, emptied tokens dropped)
ZONEMAP         ``None``: pylance 14 never remaps it (same uuid, same fragment list)
BLOOMFILTER     ``None``, as ZONEMAP
others          :class:`~lance_ops.errors.UnsupportedIndexTypeError` naming the index
==============  ==================================================================

The caller falls back to the Fragment Reuse Index where this raises UnsupportedIndexTypeError.
A remap that raises removes the directory it had started (nothing half written is left behind).
"""

from __future__ import annotations

from lance_ops.errors import UnsupportedIndexTypeError
from lance_ops.index.bitmap import NGRAM_LAYOUT, remap_bitmap
from lance_ops.index.btree import remap_btree
from lance_ops.index.files import RemapResult, new_index_directory
from lance_ops.index.inverted import remap_inverted
from lance_ops.index.ivf import remap_ivf
from lance_ops.index.legacy_ivf import is_legacy_index, remap_legacy_ivf_pq
from lance_ops.index.mapping import RowAddressMapping
from lance_ops.index.types import (
    BITMAP,
    BLOOMFILTER,
    BTREE,
    INVERTED,
    LABEL_LIST,
    NGRAM,
    VECTOR_TYPES,
    ZONEMAP,
    index_type_of,
)
from lance_ops.io.context import StorageContext
from lance_ops.table.manifest import IndexMetadata

__all__ = ["REMAPPABLE_TYPES", "RemapResult", "RowAddressMapping", "remap_index"]

REMAPPABLE_TYPES = (BTREE, BITMAP, LABEL_LIST, NGRAM, INVERTED, *VECTOR_TYPES)


def remap_index(
    ctx: StorageContext, index: IndexMetadata, mapping: RowAddressMapping, uuid: bytes | None = None
) -> RemapResult | None:
    """``index`` rewritten under ``mapping`` into a new directory (named ``uuid`` when given, else
    a fresh uuid), or ``None`` for a type pylance keeps as it is (ZONEMAP, BLOOMFILTER). Raises
    UnsupportedIndexTypeError (type not remappable, or an INVERTED index losing rows in a layout
    that cannot be renumbered) and
    IndexCorruptError (missing or undecodable files), both naming the index; either way the new
    directory is removed again."""
    with new_index_directory(ctx, uuid):
        return _remap(ctx, index, mapping)


def _remap(ctx: StorageContext, index: IndexMetadata, mapping: RowAddressMapping) -> RemapResult | None:
    kind = index_type_of(index, ctx)
    if kind in (ZONEMAP, BLOOMFILTER):
        return None
    if kind == BTREE:
        return remap_btree(ctx, index, mapping)
    if kind in (BITMAP, LABEL_LIST):
        return remap_bitmap(ctx, index, mapping)
    if kind == NGRAM:
        return remap_bitmap(ctx, index, mapping, NGRAM_LAYOUT)
    if kind == INVERTED:
        return remap_inverted(ctx, index, mapping)
    if kind == "IVF_PQ" and is_legacy_index(ctx, index):
        return remap_legacy_ivf_pq(ctx, index, mapping)
    if kind in VECTOR_TYPES:
        return remap_ivf(ctx, index, mapping, kind)
    raise UnsupportedIndexTypeError(
        f"{kind} index {index.name!r} cannot be remapped by lance_ops", index.name
    )
