"""The Fragment Reuse Index (``__lance_frag_reuse``): compactions whose index remap is deferred.

It lives inline in the manifest, as pylance 14 writes it: an ``IndexMetadata`` named
``__lance_frag_reuse`` with no fields and no files, ``index_details`` an Any of
``/lance.table.FragmentReuseIndexDetails`` holding ``inline.versions``; its fragment bitmap holds
the new fragments of its versions. Each version (``dataset_version`` = the version the compaction's
Rewrite was built on) lists the compaction's groups: old and new fragment digests (id, physical rows,
deleted rows) and ``changed_row_addrs``, a portable 64-bit Roaring treemap of the surviving old
row addresses. The ``n``-th surviving old address (in order) is the ``n``-th row of the group's new
fragments (in order): old fragments 0 (3 rows, row 1 deleted) and 1 (2 rows) -> new fragment 6
gives changed ``{0<<32|0, 0<<32|2, 1<<32|0, 1<<32|1}`` -> ``6<<32|0 .. 6<<32|3``; old address
``0<<32|1`` maps to nothing (deleted).

A reader maps an index's stale addresses through every version newer than the index
(:func:`remap_addresses`); a version every index has caught up with (index ``dataset_version`` at or
after the version's) can be trimmed (:func:`trimmed`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from pyroaring import BitMap, BitMap64

from lance_ops._proto import table_pb2
from lance_ops.errors import CorruptFileError
from lance_ops.table.indices import FRAG_REUSE_INDEX_NAME, fragment_ids, is_system, is_zone_map
from lance_ops.table.manifest import DataFragment, IndexMetadata, Manifest

TYPE_URL = "/lance.table.FragmentReuseIndexDetails"


@dataclass(frozen=True)
class FragmentDigest:
    id: int
    physical_rows: int
    num_deleted_rows: int

    @classmethod
    def of(cls, fragment: DataFragment) -> FragmentDigest:
        return cls(fragment.id, fragment.physical_rows, fragment.num_deleted_rows)


@dataclass(frozen=True, eq=False)
class ReuseGroup:
    """One compaction group: ``changed_row_addrs`` are the surviving old addresses, sorted."""

    changed_row_addrs: np.ndarray
    old_fragments: tuple[FragmentDigest, ...]
    new_fragments: tuple[FragmentDigest, ...]

    def new_addrs(self) -> np.ndarray:
        """The new address of each changed old address (same order)."""
        parts = [
            (np.uint64(f.id) << np.uint64(32)) | np.arange(f.physical_rows, dtype=np.uint64)
            for f in self.new_fragments
        ]
        new = np.concatenate(parts) if parts else np.zeros(0, np.uint64)
        if len(new) != len(self.changed_row_addrs):
            raise CorruptFileError(
                "<fragment reuse index>",
                f"a group maps {len(self.changed_row_addrs)} old rows onto {len(new)} new rows",
            )
        return new


@dataclass(frozen=True)
class ReuseVersion:
    dataset_version: int
    groups: tuple[ReuseGroup, ...]


@dataclass(frozen=True)
class FragReuseDetails:
    versions: tuple[ReuseVersion, ...] = ()

    @classmethod
    def from_bytes(cls, data: bytes) -> FragReuseDetails:
        pb = table_pb2.FragmentReuseIndexDetails()
        try:
            pb.ParseFromString(data)
        except Exception as exc:  # protobuf's DecodeError
            raise CorruptFileError("<fragment reuse index>", f"details do not parse: {exc}") from exc
        if pb.WhichOneof("content") == "external":
            raise CorruptFileError(
                "<fragment reuse index>", "details kept in an external file are not supported"
            )

        def digests(items: Iterable[table_pb2.FragmentReuseIndexDetails.FragmentDigest]) -> tuple:
            return tuple(FragmentDigest(d.id, d.physical_rows, d.num_deleted_rows) for d in items)

        return cls(
            tuple(
                ReuseVersion(
                    v.dataset_version,
                    tuple(
                        ReuseGroup(
                            np.array(BitMap64.deserialize(g.changed_row_addrs), dtype=np.uint64),
                            digests(g.old_fragments),
                            digests(g.new_fragments),
                        )
                        for g in v.groups
                    ),
                )
                for v in pb.inline.versions
            )
        )

    def to_bytes(self) -> bytes:
        pb = table_pb2.FragmentReuseIndexDetails()
        for version in self.versions:
            out = pb.inline.versions.add(dataset_version=version.dataset_version)
            for group in version.groups:
                g = out.groups.add(changed_row_addrs=BitMap64(group.changed_row_addrs).serialize())
                for target, items in (
                    (g.old_fragments, group.old_fragments),
                    (g.new_fragments, group.new_fragments),
                ):
                    for d in items:
                        target.add(
                            id=d.id, physical_rows=d.physical_rows, num_deleted_rows=d.num_deleted_rows
                        )
        if not self.versions:
            pb.inline.SetInParent()
        return pb.SerializeToString()

    def new_fragment_ids(self) -> BitMap:
        return BitMap(f.id for v in self.versions for g in v.groups for f in g.new_fragments)

    def mapping_since(self, dataset_version: int) -> tuple[np.ndarray, np.ndarray]:
        """``(old, new)`` address pairs of the versions at or after ``dataset_version``, chained so
        that an address moved twice maps to where it is now; new is :data:`DROPPED` for a row a
        compaction dropped. Sorted by old address (fragment ids are never reused, so old addresses
        are unique across versions)."""
        keys = np.zeros(0, np.uint64)
        values = np.zeros(0, np.uint64)
        for version in self.versions:
            if version.dataset_version < dataset_version or not version.groups:
                continue
            old = np.concatenate([g.changed_row_addrs for g in version.groups])
            new = np.concatenate([g.new_addrs() for g in version.groups])
            dropped = np.concatenate([_dropped(g) for g in version.groups])
            values = _follow(values, old, new, dropped)
            keys = np.concatenate([keys, old, dropped])
            values = np.concatenate([values, new, np.full(len(dropped), DROPPED, np.uint64)])
        order = np.argsort(keys, kind="stable")
        return keys[order], values[order]


DROPPED = np.uint64(2**64 - 1)


def _follow(values: np.ndarray, old: np.ndarray, new: np.ndarray, dropped: np.ndarray) -> np.ndarray:
    """``values`` with every address a later compaction moved (``old`` -> ``new``) or dropped
    replaced by where it went."""
    if not len(values) or not (len(old) or len(dropped)):
        return values
    order = np.argsort(old, kind="stable")
    old_sorted, new_sorted = old[order], new[order]
    out = values.copy()
    if len(old_sorted):
        at = np.minimum(np.searchsorted(old_sorted, values), len(old_sorted) - 1)
        hit = old_sorted[at] == values
        out[hit] = new_sorted[at[hit]]
    out[np.isin(values, dropped)] = DROPPED
    return out


def _dropped(group: ReuseGroup) -> np.ndarray:
    """Old addresses of the group's fragments that did not survive (deleted rows)."""
    changed = group.changed_row_addrs
    parts = [
        (np.uint64(f.id) << np.uint64(32)) | np.arange(f.physical_rows, dtype=np.uint64)
        for f in group.old_fragments
    ]
    every = np.concatenate(parts) if parts else np.zeros(0, np.uint64)
    return np.setdiff1d(every, changed, assume_unique=True)


def find(manifest: Manifest) -> IndexMetadata | None:
    return next((i for i in manifest.indices if i.name == FRAG_REUSE_INDEX_NAME), None)


def details_of(index: IndexMetadata | None) -> FragReuseDetails:
    if index is None or index.details is None:
        return FragReuseDetails()
    return FragReuseDetails.from_bytes(index.details[1])


def reuse_index(details: FragReuseDetails, dataset_version: int) -> IndexMetadata:
    """A new ``__lance_frag_reuse`` entry holding ``details`` (fresh uuid, as pylance makes one per
    change)."""
    return IndexMetadata(
        uuid=uuid.uuid4().bytes,
        fields=(),
        name=FRAG_REUSE_INDEX_NAME,
        dataset_version=dataset_version,
        fragment_bitmap=details.new_fragment_ids().serialize(),
        details=(TYPE_URL, details.to_bytes()),
        index_version=0,
        created_at=int(time.time() * 1000),
    )


def with_version(
    manifest: Manifest,
    dataset_version: int,
    groups: Sequence[tuple[Sequence[DataFragment], Sequence[DataFragment], np.ndarray]],
) -> IndexMetadata:
    """The reuse index of ``manifest`` with one more version: ``groups`` of (old fragments, new
    fragments with their final ids, surviving old addresses in write order)."""
    current = details_of(find(manifest))
    version = ReuseVersion(
        dataset_version,
        tuple(
            ReuseGroup(
                np.sort(np.asarray(addrs, dtype=np.uint64)),
                tuple(FragmentDigest.of(f) for f in old),
                tuple(FragmentDigest.of(f) for f in new),
            )
            for old, new, addrs in groups
        ),
    )
    return reuse_index(FragReuseDetails((*current.versions, version)), dataset_version)


def moved_fragments(details: FragReuseDetails, bitmap: BitMap, since: int = 0) -> BitMap:
    """``bitmap`` of an index as the reuse index sees it: groups wholly in it replaced by their new
    fragments (versions at or after ``since``, in order)."""
    out = BitMap(bitmap)
    for version in details.versions:
        if version.dataset_version < since:
            continue
        for group in version.groups:
            old = [f.id for f in group.old_fragments]
            if old and all(i in out for i in old):
                out.difference_update(BitMap(old))
                out.update(f.id for f in group.new_fragments)
    return out


def trimmed(details: FragReuseDetails, indices: Iterable[IndexMetadata]) -> FragReuseDetails:
    """``details`` without the versions no index needs any more: a version is kept while some
    (non-system) index still holds an old fragment of it, directly or through an older version.
    Zone maps are never remapped (as pylance 14): they keep no version alive."""
    kept: list[ReuseVersion] = []
    holdings = [fragment_ids(i) for i in indices if not is_system(i) and not is_zone_map(i)]
    for version in details.versions:
        old = BitMap(f.id for g in version.groups for f in g.old_fragments)
        if any(h & old for h in holdings):
            kept.append(version)
        holdings = [moved_fragments(FragReuseDetails((version,)), h) for h in holdings]
    return FragReuseDetails(tuple(kept))


def effective_fragment_ids(manifest: Manifest, index: IndexMetadata) -> BitMap:
    """The fragments ``index`` covers once the manifest's reuse index is applied to it."""
    ids = fragment_ids(index)
    reuse = find(manifest)
    if reuse is None or is_system(index):
        return ids
    return moved_fragments(details_of(reuse), ids)


def is_behind(manifest: Manifest, index: IndexMetadata) -> bool:
    """Whether ``index`` still holds addresses of fragments a deferred compaction replaced."""
    return effective_fragment_ids(manifest, index) != fragment_ids(index)
