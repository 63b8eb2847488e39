"""Index metadata as pylance 14 reports it, and the index operations that only change the manifest.

* :func:`describe_indices` - one :class:`IndexDescription` per index name, its segments (one per
  ``IndexMetadata`` of that name: a base index and its deltas) with the fragments each covers as
  pylance sees them (through the Fragment Reuse Index, when a compaction deferred the remap);
* :func:`list_indices` - pylance's older per-segment dicts (``name``, ``type``, ``uuid``,
  ``fields``, ``version``, ``fragment_ids``, ``base_id``);
* :func:`index_stats` - the coverage part of pylance's ``ds.stats.index_stats(name)``: indexed and
  unindexed fragments and rows (live rows of existing fragments), rows per delta, last update;
* :func:`drop_index` - a ``CreateIndex`` removing every segment of the index, as pylance records it;
* :func:`remap_deferred` - indices a deferred compaction left behind, remapped through the Fragment
  Reuse Index by their codecs, and the reuse index trimmed to the versions still needed;
* :func:`optimize_indices` - that, then unindexed fragments added to each index by its codec.

Example: an index built on fragments {0, 1} of 100 rows each (10 deleted in 1), then a fragment 2
of 50 rows appended -> ``num_indexed_fragments`` 2, ``num_indexed_rows`` 190,
``num_unindexed_fragments`` 1, ``num_unindexed_rows`` 50.
"""

from __future__ import annotations

import datetime
import logging
import uuid as uuid_module
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from typing import Any

from pyroaring import BitMap

from lance_ops.errors import CommitConflictError, IndexNotFoundError, UnsupportedIndexTypeError
from lance_ops.fragment.reader import VersionFiles
from lance_ops.index.files import new_index_directory, remove_index_directory
from lance_ops.index.optimize import update_index
from lance_ops.index.stats import segment_details
from lance_ops.index.types import covers_no_fragment, index_type_of, pylance_type_name, uuid_text
from lance_ops.ops.commit import CommitOptions, commit
from lance_ops.ops.index_remap import check_index_files, discard, remap_all
from lance_ops.table import frag_reuse
from lance_ops.table.indices import FRAG_REUSE_INDEX_NAME, is_system, is_zone_map
from lance_ops.table.manifest import DataFragment, IndexFile, IndexMetadata, Manifest
from lance_ops.table.transaction import CreateIndex, Transaction

log = logging.getLogger(__name__)


class FragmentIds(BitMap):  # type: ignore[misc]
    """The fragment ids of an index segment: a ``BitMap`` that also equals the ``set`` of the
    same ids, as pylance's ``Bitmap`` does (``list_indices()[0]["fragment_ids"] == {0}``)."""

    def __eq__(self, other: object) -> bool:
        if isinstance(other, AbstractSet) and not isinstance(other, BitMap):
            return set(self) == set(other)
        return bool(BitMap.__eq__(self, other))

    __hash__ = None  # type: ignore[assignment]


@dataclass
class Index:
    """An index segment as pylance's ``lance.dataset.Index``, for
    ``LanceOperation.CreateIndex(new_indices=[Index(...)], removed_indices=[])`` after a
    distributed build. ``fragment_ids`` may be any iterable of ids; ``created_at`` a datetime;
    ``files`` ``IndexFile`` s or ``(path, size_bytes)`` pairs; ``index_details`` the details'
    ``(type_url, value)`` (None, as pylance's tests commit them: readers then tell the type
    from the files)."""

    uuid: str
    name: str
    fields: list[int]
    dataset_version: int
    fragment_ids: Any
    index_version: int
    created_at: datetime.datetime | None = None
    base_id: int | None = None
    files: list[Any] | None = None
    index_details: tuple[str, bytes] | None = None
    covering_fields: list[int] = field(default_factory=list)

    def to_metadata(self) -> IndexMetadata:
        """The manifest entry of this segment."""
        created = None if self.created_at is None else int(self.created_at.timestamp() * 1000)
        files = tuple(
            IndexFile(str(f.path), int(f.size_bytes))
            if hasattr(f, "path")
            else IndexFile(str(f[0]), int(f[1]))
            for f in self.files or ()
        )
        return IndexMetadata(
            uuid=uuid_module.UUID(str(self.uuid)).bytes,
            fields=tuple(int(f) for f in self.fields),
            name=self.name,
            dataset_version=int(self.dataset_version),
            fragment_bitmap=BitMap(int(i) for i in self.fragment_ids).serialize(),
            details=self.index_details,
            index_version=int(self.index_version),
            created_at=created,
            base_id=self.base_id,
            files=files,
        )


@dataclass(frozen=True)
class IndexSegmentDescription:
    """One ``IndexMetadata`` of an index (pylance's ``IndexSegmentDescription``)."""

    uuid: str
    dataset_version_at_last_update: int
    fragment_ids: BitMap
    index_version: int
    created_at: datetime.datetime | None
    size_bytes: int | None
    base_id: int | None


@dataclass(frozen=True)
class IndexDescription:
    """One index by name (pylance's ``IndexDescription``)."""

    name: str
    type_url: str
    index_type: str
    num_rows_indexed: int
    fields: list[int]
    field_names: list[str]
    segments: list[IndexSegmentDescription]
    details: dict[str, Any] = field(default_factory=dict)
    total_size_bytes: int | None = None

    @property
    def num_segments(self) -> int:
        return len(self.segments)


def type_name(files: VersionFiles, index: IndexMetadata) -> str:
    """pylance's printed type (``"BTree"``, ``"IVF_PQ"``...); an unknown type by its details' name."""
    try:
        return pylance_type_name(index_type_of(index, files.storage))
    except UnsupportedIndexTypeError:
        url = index.details[0] if index.details is not None else ""
        return url.rsplit(".", 1)[-1].removesuffix("IndexDetails") or "Unknown"


def segments_of(manifest: Manifest, name: str) -> list[IndexMetadata]:
    """Every segment of the index ``name``; :class:`IndexNotFoundError` when there is none."""
    found = [i for i in manifest.indices if i.name == name]
    if not found:
        raise IndexNotFoundError(f'Index "{name}" not found', name)
    return found


def _covered(manifest: Manifest, index: IndexMetadata) -> BitMap:
    return frag_reuse.effective_fragment_ids(manifest, index)


def _live_rows(manifest: Manifest, ids: BitMap) -> int:
    return sum(f.num_rows for f in manifest.fragments if f.id in ids)


def _field_name(manifest: Manifest, field_id: int) -> str:
    """The dotted path of a field (``"a.b"`` for a struct's child)."""
    by_id = {f.id: f for f in manifest.schema.fields}
    parts: list[str] = []
    current = by_id.get(field_id)
    while current is not None:
        parts.append(current.name)
        current = by_id.get(current.parent_id)
    return ".".join(reversed(parts)) or str(field_id)


def describe_indices(files: VersionFiles) -> list[IndexDescription]:
    """Every index of the version, by name (in manifest order of first appearance)."""
    manifest = files.manifest
    names = list(dict.fromkeys(i.name for i in manifest.indices))
    return [_describe(files, name) for name in sorted(names)]


def _describe(files: VersionFiles, name: str) -> IndexDescription:
    manifest = files.manifest
    segments = segments_of(manifest, name)
    first = segments[0]
    covered = [_covered(manifest, s) for s in segments]
    sizes = [sum(f.size_bytes for f in s.files) if s.files else None for s in segments]
    known = [s for s in sizes if s is not None]
    return IndexDescription(
        name=name,
        type_url=first.details[0] if first.details is not None else "",
        index_type=type_name(files, first),
        num_rows_indexed=_live_rows(manifest, BitMap.union(*covered) if covered else BitMap()),
        fields=list(first.fields),
        field_names=[_field_name(manifest, f) for f in first.fields],
        segments=[
            IndexSegmentDescription(
                uuid=uuid_text(s),
                dataset_version_at_last_update=s.dataset_version,
                fragment_ids=FragmentIds(ids),
                index_version=s.index_version or 0,
                created_at=(
                    None
                    if s.created_at is None
                    else datetime.datetime.fromtimestamp(s.created_at / 1000, tz=datetime.UTC)
                ),
                size_bytes=size,
                base_id=s.base_id,
            )
            for s, ids, size in zip(segments, covered, sizes, strict=True)
        ],
        total_size_bytes=sum(known) if known else None,
    )


def list_indices(files: VersionFiles) -> list[dict[str, Any]]:
    """pylance's ``list_indices()``: one dict per segment."""
    return [
        {
            "name": d.name,
            "type": d.index_type,
            "uuid": s.uuid,
            "fields": d.field_names,
            "version": s.dataset_version_at_last_update,
            "fragment_ids": s.fragment_ids,
            "base_id": s.base_id,
        }
        for d in describe_indices(files)
        for s in d.segments
    ]


def index_stats(files: VersionFiles, name: str, details: bool = True) -> dict[str, Any]:
    """pylance's ``ds.stats.index_stats(name)``: coverage from the manifest, and per segment the
    details its type reports (``indices`` and ``segments``, the same list;
    :mod:`lance_ops.index.stats`), read from the index files unless ``details=False`` (coverage
    only, from the manifest alone)."""
    manifest = files.manifest
    segments = segments_of(manifest, name)
    covered = [_covered(manifest, s) for s in segments]
    indexed = BitMap.union(*covered) & BitMap(f.id for f in manifest.fragments)
    unindexed = [f for f in manifest.fragments if f.id not in indexed]
    stamps = [s.created_at for s in segments if s.created_at is not None]
    # as pylance 14: a segment that covers no fragment (``train=False``) is not opened: ``{}``, and
    # the index's type is "N/A" when no segment covers any
    trained = [s for s in segments if not covers_no_fragment(s)]
    listed = [segment_details(files.storage, s) if s in trained else {} for s in segments] if details else []
    return {
        "index_type": type_name(files, trained[0]) if trained else "N/A",
        "name": name,
        "num_indices": len(segments),
        "num_segments": len(segments),
        **({"indices": listed, "segments": [dict(d) for d in listed]} if details else {}),
        "num_indexed_fragments": len(indexed),
        "num_indexed_rows": _live_rows(manifest, indexed),
        "num_unindexed_fragments": len(unindexed),
        "num_unindexed_rows": sum(f.num_rows for f in unindexed),
        "num_indexed_rows_per_delta": [_live_rows(manifest, ids) for ids in covered],
        "updated_at_timestamp_ms": max(stamps) if stamps else None,
    }


def drop_index(files: VersionFiles, name: str, options: CommitOptions) -> tuple[Manifest, Transaction]:
    """Remove every segment of ``name`` (``CreateIndex`` with ``removed_indices``, as pylance);
    a missing index in pylance's ``drop_index`` words."""
    segments = [i for i in files.manifest.indices if i.name == name]
    if not segments:
        raise IndexNotFoundError(f"Lance index not found: name={name}", name)
    return commit(files.storage, CreateIndex((), tuple(segments)), options)


@dataclass(frozen=True)
class RemapReport:
    remapped: tuple[str, ...] = ()
    still_deferred: tuple[str, ...] = ()
    reuse_versions_left: int = 0


def remap_deferred(
    files: VersionFiles, options: CommitOptions, index_names: Sequence[str] | None = None
) -> tuple[RemapReport, tuple[Manifest, Transaction] | None]:
    """Remap the indices a deferred compaction left behind through the Fragment Reuse Index, then
    trim the reuse index to the versions some index still needs (removed when none is).

    Each index behind the reuse index is rewritten by its codec with the chained old -> new
    addresses of the versions since it was built; one its codec cannot remap stays deferred. Zone
    maps are left on their old fragments, as pylance's compaction leaves them (optimizing covers
    the new ones). One
    ``CreateIndex`` commit replaces the remapped indices and the reuse index; nothing is committed
    when nothing changes.
    """
    manifest = files.manifest
    reuse = frag_reuse.find(manifest)
    if reuse is None:
        return RemapReport(), None
    details = frag_reuse.details_of(reuse)
    wanted = None if index_names is None else set(index_names)
    if wanted is not None:
        for name in wanted:
            segments_of(manifest, name)
    behind = [
        i
        for i in manifest.indices
        if not is_system(i)
        and not is_zone_map(i)
        and (wanted is None or i.name in wanted)
        and frag_reuse.is_behind(manifest, i)
    ]
    check_index_files(files.storage, behind)
    new_indices: list[IndexMetadata] = []
    removed: list[IndexMetadata] = []
    still: list[str] = []
    old, new = details.mapping_since(0)
    keep = new != frag_reuse.DROPPED
    results = remap_all(files.storage, behind, old[keep], new[keep], old[~keep]) if behind else []
    for index, result in zip(behind, results, strict=True):
        if result is None:
            still.append(index.name)
            continue
        removed.append(index)
        new_indices.append(
            replace(
                index,
                uuid=result.new_id,
                details=result.new_index_details or index.details,
                index_version=result.new_index_version,
                files=result.new_index_files,
                fragment_bitmap=frag_reuse.effective_fragment_ids(manifest, index).serialize(),
            )
        )
    kept_indices = [i for i in manifest.indices if not is_system(i) and i not in removed] + new_indices
    left = frag_reuse.trimmed(details, kept_indices)
    if left.versions == details.versions and not new_indices:
        return RemapReport((), tuple(still), len(left.versions)), None
    removed.append(reuse)
    if left.versions:
        new_indices.append(frag_reuse.reuse_index(left, reuse.dataset_version))
    try:
        committed = commit(files.storage, CreateIndex(tuple(new_indices), tuple(removed)), options)
    except CommitConflictError:  # surely not committed: the remapped files are nobody's
        discard(files.storage, results)
        raise
    report = RemapReport(
        tuple(i.name for i in new_indices if i.name != FRAG_REUSE_INDEX_NAME),
        tuple(still),
        len(left.versions),
    )
    return report, committed


@dataclass(frozen=True)
class OptimizeReport:
    """What :func:`optimize_indices` did, by index name."""

    remapped: tuple[str, ...] = ()
    extended: tuple[str, ...] = ()
    unindexed_rows_before: dict[str, int] = field(default_factory=dict)


def unindexed_fragments(manifest: Manifest, name: str) -> list[DataFragment]:
    """The existing fragments no segment of ``name`` covers (through the reuse index too)."""
    covered = BitMap.union(*(_covered(manifest, s) for s in segments_of(manifest, name)))
    return [f for f in manifest.fragments if f.id not in covered]


def optimize_indices(
    files: VersionFiles,
    options: CommitOptions,
    index_names: Sequence[str] | None = None,
    num_indices_to_merge: int = 1,
) -> tuple[OptimizeReport, tuple[Manifest, Transaction] | None]:
    """pylance's ``optimize_indices``: indices behind a deferred compaction are remapped first
    (:func:`remap_deferred`), then every index with unindexed fragments is extended over them by
    its type's codec (``lance_ops.index.optimize.update_index``) in one ``CreateIndex`` commit.

    Names that match no index raise :class:`IndexNotFoundError`; a type no codec extends raises
    :class:`UnsupportedIndexTypeError` naming the index and its type (nothing is committed by
    this step). Returns the report and the last commit made (None when nothing changed).
    """
    manifest = files.manifest
    names = [n for n in dict.fromkeys(i.name for i in manifest.indices) if n != FRAG_REUSE_INDEX_NAME]
    if index_names is not None:
        for name in index_names:
            segments_of(manifest, name)
        names = [n for n in names if n in set(index_names)]
    remap_report, committed = remap_deferred(files, options, names)
    if committed is not None:
        files = VersionFiles(files.storage, committed[0])
        manifest = files.manifest
    todo = {n: unindexed_fragments(manifest, n) for n in names}
    todo = {n: frags for n, frags in todo.items() if frags}
    before = {n: sum(f.num_rows for f in frags) for n, frags in todo.items()}
    if not todo:
        return OptimizeReport(remap_report.remapped, (), before), committed
    new_indices: list[IndexMetadata] = []
    removed: list[IndexMetadata] = []
    try:
        for name, fragments in todo.items():
            segments = segments_of(manifest, name)
            with new_index_directory(files.storage):  # a failed extension leaves no directory
                updated = _extend(files, segments, fragments, num_indices_to_merge)
            old_uuids = {s.uuid for s in segments}
            new_uuids = {s.uuid for s in updated}
            new_indices.extend(s for s in updated if s.uuid not in old_uuids)
            removed.extend(s for s in segments if s.uuid not in new_uuids)
    except BaseException:  # the indices extended before this one are not committed either
        _remove(files, new_indices)
        raise
    try:
        committed = commit(files.storage, CreateIndex(tuple(new_indices), tuple(removed)), options)
    except CommitConflictError:  # surely not committed: the new files are nobody's
        _remove(files, new_indices)
        raise
    return OptimizeReport(remap_report.remapped, tuple(todo), before), committed


def _remove(files: VersionFiles, indices: Sequence[IndexMetadata]) -> None:
    for index in indices:
        remove_index_directory(files.storage, index.uuid)


def _extend(
    files: VersionFiles, segments: list[IndexMetadata], fragments: list[DataFragment], merge: int
) -> list[IndexMetadata]:
    kind = type_name(files, segments[0])
    result = update_index(files.storage, files.manifest, segments, fragments, merge)
    if result is None:
        raise UnsupportedIndexTypeError(
            f"optimize_indices: index {segments[0].name!r} of type {kind} cannot be extended over "
            f"{len(fragments)} unindexed fragment(s) yet",
            segments[0].name,
        )
    return list(result)
