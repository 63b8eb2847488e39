"""Segmented (distributed) index builds, as pylance 14's ``create_index_uncommitted``,
``merge_existing_index_segments`` and ``commit_existing_index_segments``.

1. :func:`create_index_uncommitted` - each worker writes one segment over its ``fragment_ids``
   under ``_indices/<uuid>/`` (``index_uuid``, or a new one) and gets its :class:`Index` back;
   nothing is committed. Vector segments (IVF_FLAT / IVF_PQ / IVF_SQ / IVF_HNSW_*) use the
   ``ivf_centroids`` / ``pq_codebook`` given (the shared model of a distributed build) or train
   their own on their rows; scalar segments (BTREE, BITMAP, LABEL_LIST, ZONEMAP, NGRAM, INVERTED)
   index their fragments' rows.
2. :func:`merge_existing_index_segments` - segments of one column, type and model over disjoint
   fragments become one new segment (new uuid), by each type's codec as ``optimize_indices``
   merges deltas (vector codes are concatenated per partition, never re-encoded). Nothing is
   committed; the inputs' files stay.
3. :func:`commit_existing_index_segments` - one ``CreateIndex`` publishing the segments under one
   index name (every ``IndexMetadata`` of that name, each with its own fragment bitmap, as pylance
   records them) and removing the index of that name the version had.

Bad input raises :class:`~lance_ops.errors.IndexSegmentError` (overlapping fragments, segments of
other columns, types or models, unknown uuids, no segments) before anything is written or
committed. pylance's ``IndexSegment`` cannot be built from Python; segments are passed as the
:class:`Index` objects the calls above return (lance_ops' or pylance's).
"""

from __future__ import annotations

import datetime
import time
import uuid as uuid_module
from collections.abc import Iterable, Sequence
from dataclasses import replace as with_changes
from typing import Any

import numpy as np
from pyroaring import BitMap

from lance_ops.errors import (
    IndexSegmentError,
    InvalidArgumentError,
    UnsupportedIndexTypeError,
)
from lance_ops.fragment.reader import VersionFiles
from lance_ops.index.build_scalar import scalar_rows, write_scalar_index
from lance_ops.index.build_vector import (
    BUILDABLE_TYPES,
    TrainedIvf,
    build_ivf,
    multivector_model,
    vector_rows,
)
from lance_ops.index.files import IndexWriter, new_index_directory
from lance_ops.index.ivf import _centroids, _read_storage
from lance_ops.index.optimize import EXTENDABLE_TYPES, column_rows, merge_segment_files
from lance_ops.index.types import index_type_of
from lance_ops.ops.commit import CommitOptions, commit
from lance_ops.ops.indices import Index
from lance_ops.ops.scalar_index import plan_scalar_index
from lance_ops.ops.vector_index import given_model, new_index, plan_vector_index
from lance_ops.table.indices import fragment_ids as bitmap_of
from lance_ops.table.manifest import IndexMetadata, Manifest
from lance_ops.table.transaction import CreateIndex, Transaction

__all__ = [
    "SEGMENT_SCALAR_TYPES",
    "commit_existing_index_segments",
    "create_index_uncommitted",
    "is_segment_native",
    "merge_existing_index_segments",
    "requires_uncommitted",
]

# pylance 14's ``_is_segment_native_scalar_index_type`` (its RTREE, BLOOMFILTER and MINHASHLSH
# lance_ops does not build), and ``_requires_uncommitted_scalar_index``: all of them but INVERTED
# (and FTS), which ``create_scalar_index(fragment_ids=)`` still stages.
SEGMENT_SCALAR_TYPES = (
    "BTREE",
    "BITMAP",
    "INVERTED",
    "FTS",
    "NGRAM",
    "RTREE",
    "ZONEMAP",
    "BLOOMFILTER",
    "LABEL_LIST",
    "MINHASHLSH",
)
UNCOMMITTED_ONLY_SCALAR_TYPES = tuple(t for t in SEGMENT_SCALAR_TYPES if t not in ("INVERTED", "FTS"))


def _type_name(index_type: Any) -> str:
    """An index type's name: a string, or an ``IndexConfig``'s ``index_type``."""
    return str(getattr(index_type, "index_type", index_type)).upper()


def requires_uncommitted(index_type: Any) -> bool:
    """pylance 14's ``_requires_uncommitted_scalar_index``."""
    return _type_name(index_type) in UNCOMMITTED_ONLY_SCALAR_TYPES


def is_segment_native(index_type: Any) -> bool:
    """pylance 14's ``_is_segment_native_scalar_index_type``."""
    return _type_name(index_type) in SEGMENT_SCALAR_TYPES


def _uuid(index_uuid: str | None) -> bytes:
    if index_uuid is None:
        return uuid_module.uuid4().bytes
    try:
        return uuid_module.UUID(str(index_uuid)).bytes
    except ValueError as exc:
        raise InvalidArgumentError(f"index_uuid must be a UUID, got {index_uuid!r}") from exc


def _fragments(files: VersionFiles, fragment_ids: Iterable[int] | None) -> list[Any]:
    """The fragments named, in the dataset's order (as pylance reads them)."""
    if fragment_ids is None:
        raise InvalidArgumentError(
            "create_index_uncommitted requires fragment_ids for distributed index build"
        )
    wanted = {int(i) for i in fragment_ids}
    known = {f.id for f in files.manifest.fragments}
    unknown = sorted(wanted - known)
    if unknown:
        raise InvalidArgumentError(
            f"Unknown fragment id {unknown[0]} in fragment filter; not part of the current dataset version"
        )
    return [f for f in files.manifest.fragments if f.id in wanted]


def as_index(meta: IndexMetadata) -> Index:
    """The :class:`Index` (pylance's ``lance.dataset.Index``) of a manifest entry."""
    created = None
    if meta.created_at is not None:
        created = datetime.datetime.fromtimestamp(meta.created_at / 1000, tz=datetime.UTC)
    return Index(
        uuid=str(uuid_module.UUID(bytes=meta.uuid)),
        name=meta.name,
        fields=list(meta.fields),
        dataset_version=meta.dataset_version,
        fragment_ids=bitmap_of(meta),
        index_version=meta.index_version or 0,
        created_at=created,
        base_id=meta.base_id,
        files=list(meta.files),
        index_details=meta.details,
    )


def create_index_uncommitted(
    files: VersionFiles,
    column: str,
    index_type: str,
    *,
    fragment_ids: Iterable[int] | None,
    index_uuid: str | None = None,
    name: str | None = None,
    replace: bool = False,
    ivf_centroids: Any = None,
    pq_codebook: Any = None,
    **kwargs: Any,
) -> Index:
    """Write one segment of ``column``'s index over ``fragment_ids`` and return it, committing
    nothing (keyword arguments: :func:`~lance_ops.ops.vector_index.plan_vector_index`, or a
    scalar type's build parameters). An index ``name`` the version has is refused unless
    ``replace``, as pylance does."""
    kind = str(index_type).upper()
    fragments = _fragments(files, fragment_ids)
    target = _uuid(index_uuid)
    ctx, manifest = files.storage, files.manifest
    if kind in SEGMENT_SCALAR_TYPES:
        build, _ = plan_scalar_index(
            files, column, "INVERTED" if kind == "FTS" else kind, name, replace, kwargs
        )
        with new_index_directory(ctx, target):
            meta = write_scalar_index(ctx, manifest, build, scalar_rows(ctx, manifest, fragments, build))
        meta = _covering(meta, fragments, manifest)
        return as_index(meta)
    plan = plan_vector_index(files, column, kind, name=name, replace=replace, **kwargs)
    rows, row_ids = column_rows(ctx, manifest, fragments, column, "_rowid")
    values, ids = vector_rows(rows, row_ids)
    model: TrainedIvf | None
    if ivf_centroids is not None or pq_codebook is not None:
        model = given_model(plan.params, values, ivf_centroids, pq_codebook)
    else:
        model = multivector_model(plan.params, rows)
    with new_index_directory(ctx, target):
        # PQ codes row-major, as pylance's segments: its merge takes no transposed segment
        result = build_ivf(IndexWriter(ctx), plan.params, values, ids, model, transpose_pq=False)
    return as_index(new_index(manifest, plan.field_id, plan.name, fragments, result))


def _covering(meta: IndexMetadata, fragments: Sequence[Any], manifest: Manifest) -> IndexMetadata:
    """``meta`` (a whole-dataset entry) covering ``fragments`` only, stamped with this version."""
    return with_changes(
        meta,
        fragment_bitmap=BitMap(f.id for f in fragments).serialize(),
        dataset_version=manifest.version,
        created_at=int(time.time() * 1000),
    )


def _metadata(segment: Any) -> IndexMetadata:
    """The manifest entry of a segment given as an :class:`Index` (lance_ops' or pylance's)."""
    if isinstance(segment, IndexMetadata):
        return segment
    if isinstance(segment, Index):
        return segment.to_metadata()
    try:
        copied = Index(
            uuid=str(segment.uuid),
            name=str(segment.name),
            fields=list(segment.fields),
            dataset_version=int(segment.dataset_version),
            fragment_ids=[int(i) for i in segment.fragment_ids],
            index_version=int(segment.index_version),
            created_at=getattr(segment, "created_at", None),
            base_id=getattr(segment, "base_id", None),
            files=list(segment.files or ()),
            index_details=getattr(segment, "index_details", None),
        )
    except (AttributeError, TypeError, ValueError) as exc:
        raise IndexSegmentError(
            f"an index segment must be an Index returned by create_index_uncommitted, got {segment!r}"
        ) from exc
    return copied.to_metadata()


def _present_files(files: VersionFiles, meta: IndexMetadata) -> set[str]:
    """The names of the files in the segment's directory (none for an unknown uuid)."""
    directory = files.storage.path("_indices", str(uuid_module.UUID(bytes=meta.uuid)))
    try:
        return {info.path.rsplit("/", 1)[-1] for info in files.storage.store.list(directory)}
    except FileNotFoundError:
        return set()


def _checked(files: VersionFiles, segments: Sequence[Any], name: str) -> tuple[list[IndexMetadata], str]:
    """The segments' manifest entries and their (common) type, after the checks every segment
    set must pass: at least one; files present; disjoint fragments; one field and one type."""
    metas = [_metadata(s) for s in segments]
    if not metas:
        raise IndexSegmentError(f"index {name!r}: at least one index segment is required")
    ctx = files.storage
    seen: BitMap = BitMap()
    kinds = set()
    for meta in metas:
        uuid = str(uuid_module.UUID(bytes=meta.uuid))
        present = _present_files(files, meta)
        expected = {f.path for f in meta.files}
        if not present or not expected <= present:
            raise IndexSegmentError(f"index {name!r}: segment {uuid} has no index files in _indices/{uuid}")
        covered = bitmap_of(meta)
        if covered & seen:
            raise IndexSegmentError(
                f"index {name!r}: overlapping fragment coverage in the segment set "
                f"(fragments {sorted(covered & seen)} are in more than one segment)"
            )
        seen |= covered
        kinds.add(index_type_of(meta, ctx))
    fields = {m.fields for m in metas}
    if len(fields) != 1:
        raise IndexSegmentError(f"index {name!r}: segments of different fields {sorted(fields)}")
    if len(kinds) != 1:
        raise IndexSegmentError(f"index {name!r}: segments of different index types {sorted(kinds)}")
    return metas, kinds.pop()


def _same_model(files: VersionFiles, metas: Sequence[IndexMetadata], kind: str) -> None:
    """Vector segments merge only when they share one model: the same centroids and metric, and
    the same storage model (PQ codebook and sub-vectors; for SQ the code width) in
    ``auxiliary.idx``."""

    def model(meta: IndexMetadata) -> tuple[Any, ...]:
        centroids, metric = _centroids(files.storage, meta)
        storage = _read_storage(files.storage, meta, kind)
        buffers = [b for i, b in enumerate(storage.data.global_buffers) if i != storage.ivf_position]
        params = dict(storage.params)
        if kind.endswith("_SQ"):
            # each SQ segment has its own bounds; pylance 14 merges them under the first
            # segment's bounds, codes unchanged (so does extend_ivf with that template)
            params.pop("bounds", None)
            buffers = []
        code_type = storage.data.schema.field(storage.code_column).type
        return centroids, metric, params, buffers, code_type

    first = model(metas[0])
    for meta in metas[1:]:
        other = model(meta)
        same = (
            first[0].shape == other[0].shape and np.array_equal(first[0], other[0]) and first[1:] == other[1:]
        )
        if not same:
            raise IndexSegmentError(
                f"{kind} segments {uuid_module.UUID(bytes=metas[0].uuid)} and "
                f"{uuid_module.UUID(bytes=meta.uuid)} have different models (IVF centroids, "
                "quantizer or metric): give every worker the same ivf_centroids / pq_codebook, or "
                "commit them as separate segments without merging"
            )


def merge_existing_index_segments(files: VersionFiles, segments: Sequence[Any]) -> Index:
    """One new segment (new uuid) holding the rows of ``segments``; nothing committed."""
    name = getattr(segments[0], "name", "uncommitted") if segments else "uncommitted"
    metas, kind = _checked(files, segments, name)
    if kind not in EXTENDABLE_TYPES:
        raise UnsupportedIndexTypeError(f"lance_ops cannot merge {kind} segments", name)
    if kind in BUILDABLE_TYPES:
        _same_model(files, metas, kind)
    ctx = files.storage
    template = metas[0]
    with new_index_directory(ctx):
        result = merge_segment_files(ctx, files.manifest, kind, template, metas, [])
    covered = BitMap().union(*(bitmap_of(m) for m in metas))
    merged = with_changes(
        result.metadata_for(template, covered.serialize()),
        dataset_version=min(m.dataset_version for m in metas),
        created_at=int(time.time() * 1000),
    )
    return as_index(merged)


def commit_existing_index_segments(
    files: VersionFiles, index_name: str, column: str, segments: Sequence[Any], options: CommitOptions
) -> tuple[Manifest, Transaction]:
    """Publish ``segments`` as the index ``index_name`` on ``column`` (one ``CreateIndex``, which
    removes the segments of that name the version had)."""
    manifest = files.manifest
    field = manifest.schema.field_at(column)  # FieldNotFoundError when there is none
    metas, _ = _checked(files, segments, index_name)
    if metas[0].fields[:1] != (field.id,):
        raise IndexSegmentError(
            f"index {index_name!r}: segments were built for fields {list(metas[0].fields)}, "
            f"not column {column!r} (field {field.id})"
        )
    known = {f.id for f in manifest.fragments}
    for meta in metas:
        gone = sorted(set(bitmap_of(meta)) - known)
        if gone:
            raise IndexSegmentError(
                f"index {index_name!r}: segment {uuid_module.UUID(bytes=meta.uuid)} covers fragments "
                f"{gone} this version does not have"
            )
    existing = tuple(i for i in manifest.indices if i.name == index_name)
    published = tuple(with_changes(m, name=index_name, fields=(field.id,)) for m in metas)
    return commit(files.storage, CreateIndex(published, existing), options)
