"""What the manifest says about an index's fragments, and how a Rewrite moves them.

The fragment bitmap is a 32-bit Roaring bitmap of the fragments whose rows the index holds. A
compaction group moves it: an index holding every old fragment of a group holds the group's new
fragments instead (one holding only some of them is a plan error); e.g. bitmap {0, 1, 2, 5} and
groups [0, 1, 2] -> [6], [3, 4] -> [7] give {5, 6}. The index's kind (``lance_ops.index.types``)
is not needed here, only whether it is a zone map, from its details' type URL.
"""

from __future__ import annotations

from collections.abc import Iterable

from pyroaring import BitMap

from lance_ops.errors import InvalidArgumentError
from lance_ops.table.manifest import IndexMetadata

FRAG_REUSE_INDEX_NAME = "__lance_frag_reuse"
MEM_WAL_INDEX_NAME = "__lance_mem_wal"


def is_zone_map(index: IndexMetadata) -> bool:
    return index.details is not None and index.details[0].endswith(".ZoneMapIndexDetails")


def holds_row_ids(index: IndexMetadata) -> bool:
    """Whether pylance 14's files of this index hold row ids (stable through a compaction with
    stable row ids): vector, bitmap, label-list and inverted (full-text) indices. A BTREE holds
    row addresses."""
    url = index.details[0] if index.details is not None else ""
    return url.endswith(
        (".VectorIndexDetails", ".BitmapIndexDetails", ".LabelListIndexDetails", ".InvertedIndexDetails")
    )


def is_system(index: IndexMetadata) -> bool:
    """The Fragment Reuse and MemWAL indices: no column, no files of their own to remap."""
    return index.name in (FRAG_REUSE_INDEX_NAME, MEM_WAL_INDEX_NAME)


def fragment_ids(index: IndexMetadata) -> BitMap:
    return BitMap.deserialize(index.fragment_bitmap) if index.fragment_bitmap else BitMap()


def moved_bitmap(bitmap: bytes, groups: Iterable[object], *, add_new: bool = True) -> bytes:
    """``bitmap`` after the Rewrite ``groups`` (each with ``old_fragments`` / ``new_fragments``):
    a group whose old fragments are all in it is replaced by its new ones (only removed when
    ``add_new`` is false); a group partly in it is an :class:`InvalidArgumentError`."""
    ids = BitMap.deserialize(bitmap)
    out = BitMap(ids)
    for group in groups:
        old = [f.id for f in group.old_fragments]  # type: ignore[attr-defined]
        inside = [i in ids for i in old]
        if not any(inside):
            continue
        if not all(inside):
            raise InvalidArgumentError(
                f"a rewrite group {old} mixes fragments an index covers with fragments it does not"
            )
        out.difference_update(BitMap(old))
        if add_new:
            out.update(f.id for f in group.new_fragments)  # type: ignore[attr-defined]
    return out.serialize()
