"""Applying an operation to a manifest: ``apply_operation(op, base, ctx) -> Manifest``.

A single-dispatch function over the operation dataclasses of :mod:`lance_ops.table.transaction`.
``base`` is the latest manifest (for the dataset-creating commit an empty manifest that only
carries the creation settings: data format, stable-row-id flag). Each rule returns the content of
the new version; :func:`build_manifest` then stamps what every commit sets (version, timestamp,
writer version, transaction file, feature flags, fragment order).

Rules (pylance 14 behaviour, fact sheet sections 3.4 and 6.6):

* fragment ids 0 in Append / Overwrite / Update / Rewrite are assigned ``max_fragment_id + 1, ...``
  (Merge fragments carry their ids; compaction's Rewrite carries ids reserved by ReserveFragments);
  ``max_fragment_id`` never decreases (not even on Overwrite or Restore);
* with stable row ids, fragments lacking a row-id sequence get ``Range(next_row_id, +rows)`` and
  created-at / last-updated-at sequences of the new version; ``next_row_id`` grows accordingly;
* with stable row ids, an Update's new fragments keep the row ids they carry (rows it rewrote) and
  rows past the end of their sequence get new ids; the rows it rewrote keep their created-at
  version (looked up by row id in the fragments the Update touches), every row is last updated in
  the new version;
* Overwrite replaces schema and fragments, drops indices, keeps config and table metadata;
* with stable row ids, a Merge stamps every row of a fragment whose data files it changed (new or
  re-typed columns) as last updated in the new version;
* Restore copies the restored version's content but keeps ``max_fragment_id`` and ``next_row_id``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from functools import singledispatch

import numpy as np

from lance_ops.errors import InvalidArgumentError, UnsupportedFeatureError
from lance_ops.table.indices import holds_row_ids, moved_bitmap
from lance_ops.table.manifest import DataFragment, IndexMetadata, Manifest, WriterVersion
from lance_ops.table.rowids import (
    decode_row_ids,
    decode_versions,
    encode_row_ids,
    encode_versions,
    range_sequence,
    version_sequence,
)
from lance_ops.table.schema import LanceField
from lance_ops.table.transaction import (
    Append,
    CreateIndex,
    DataReplacement,
    Delete,
    Merge,
    Operation,
    Overwrite,
    Project,
    ReserveFragments,
    Restore,
    Rewrite,
    RewrittenIndex,
    Transaction,
    Update,
    UpdateBases,
    UpdateConfig,
)

TOMBSTONE_FIELD = -2


@dataclass(frozen=True)
class ApplyContext:
    """What an operation may need besides the base manifest.

    ``version`` is the version being built; ``load_version`` reads another version's manifest
    (Restore).
    """

    version: int
    load_version: Callable[[int], Manifest] | None = None


def _new_fragments(
    base: Manifest, fragments: Iterable[DataFragment], ctx: ApplyContext
) -> tuple[tuple[DataFragment, ...], int | None, int]:
    """Assign ids (and stable row ids) to new fragments; returns (fragments, max id, next row id)."""
    max_id = base.max_fragment_id
    next_row_id = base.next_row_id
    out = []
    for fragment in fragments:
        if fragment.id == 0:
            max_id = 0 if max_id is None else max_id + 1
            fragment = fragment.with_id(max_id)
        else:
            max_id = fragment.id if max_id is None else max(max_id, fragment.id)
        if base.uses_stable_row_ids and fragment.row_ids is None:
            fragment = replace(
                fragment,
                row_ids=range_sequence(next_row_id, next_row_id + fragment.physical_rows),
                created_at_versions=version_sequence(fragment.physical_rows, ctx.version),
                last_updated_at_versions=version_sequence(fragment.physical_rows, ctx.version),
            )
            next_row_id += fragment.physical_rows
        out.append(fragment)
    return tuple(out), max_id, next_row_id


def _with_new(
    base: Manifest, kept: Iterable[DataFragment], new: Iterable[DataFragment], ctx: ApplyContext
) -> Manifest:
    added, max_id, next_row_id = _new_fragments(base, new, ctx)
    return replace(base, fragments=(*kept, *added), max_fragment_id=max_id, next_row_id=next_row_id)


def _max_id(current: int | None, fragments: Iterable[DataFragment]) -> int | None:
    """``max_fragment_id`` after adding fragments that already carry their ids."""
    return max([*(f.id for f in fragments), *([] if current is None else [current])], default=None)


@singledispatch
def apply_operation(op: Operation, base: Manifest, ctx: ApplyContext) -> Manifest:
    """The content of the version that ``op`` makes out of ``base``."""
    raise UnsupportedFeatureError(f"committing a {type(op).__name__} operation is not supported")


@apply_operation.register
def _(op: Append, base: Manifest, ctx: ApplyContext) -> Manifest:
    return _with_new(base, base.fragments, op.fragments, ctx)


@apply_operation.register
def _(op: Overwrite, base: Manifest, ctx: ApplyContext) -> Manifest:
    content = replace(
        base,
        schema=op.schema,
        config={**base.config, **op.config_upsert_values},
        base_paths=(*base.base_paths, *op.initial_bases),
        indices=(),
    )
    return _with_new(content, (), op.fragments, ctx)


@apply_operation.register
def _(op: Delete, base: Manifest, ctx: ApplyContext) -> Manifest:
    updated = {f.id: f for f in op.updated_fragments}
    removed = set(op.deleted_fragment_ids)
    fragments = tuple(updated.get(f.id, f) for f in base.fragments if f.id not in removed)
    return replace(base, fragments=fragments)


@apply_operation.register
def _(op: Update, base: Manifest, ctx: ApplyContext) -> Manifest:
    updated = {f.id: f for f in op.updated_fragments}
    removed = set(op.removed_fragment_ids)
    kept = [updated.get(f.id, f) for f in base.fragments if f.id not in removed]
    if not base.uses_stable_row_ids:
        return _with_new(base, kept, op.new_fragments, ctx)
    touched = [f for f in base.fragments if f.id in removed or f.id in updated]
    new, next_row_id = _rewritten_rows(touched, op.new_fragments, base.next_row_id, ctx.version)
    return _with_new(replace(base, next_row_id=next_row_id), kept, new, ctx)


def _created_at(fragments: Iterable[DataFragment]) -> tuple[np.ndarray, np.ndarray]:
    """Row ids of ``fragments`` (sorted) and their created-at versions (1 where none is recorded)."""
    ids, versions = [np.zeros(0, np.uint64)], [np.zeros(0, np.uint64)]
    for fragment in fragments:
        if not isinstance(fragment.row_ids, bytes):
            continue
        ids.append(decode_row_ids(fragment.row_ids))
        created = fragment.created_at_versions
        versions.append(
            decode_versions(created, len(ids[-1]))
            if isinstance(created, bytes)
            else np.ones(len(ids[-1]), np.uint64)
        )
    all_ids, all_versions = np.concatenate(ids), np.concatenate(versions)
    order = np.argsort(all_ids, kind="stable")
    return all_ids[order], all_versions[order]


def _rewritten_rows(
    touched: Iterable[DataFragment], fragments: Iterable[DataFragment], next_row_id: int, version: int
) -> tuple[list[DataFragment], int]:
    """An Update's new fragments with complete row ids and row versions; returns the next row id."""
    known_ids, known_created = _created_at(touched)
    out = []
    for fragment in fragments:
        carried = decode_row_ids(fragment.row_ids) if isinstance(fragment.row_ids, bytes) else None
        if carried is None or len(carried) > fragment.physical_rows:
            out.append(fragment)
            continue
        fresh = np.arange(next_row_id, next_row_id + fragment.physical_rows - len(carried), dtype=np.uint64)
        next_row_id += len(fresh)
        created = np.full(fragment.physical_rows, version, np.uint64)
        if len(known_ids) and len(carried):
            at = np.minimum(np.searchsorted(known_ids, carried), len(known_ids) - 1)
            found = known_ids[at] == carried
            created[: len(carried)][found] = known_created[at[found]]
        out.append(
            replace(
                fragment,
                row_ids=encode_row_ids([carried, fresh] if len(fresh) else [carried]),
                created_at_versions=encode_versions(created),
                last_updated_at_versions=version_sequence(fragment.physical_rows, version),
            )
        )
    return out, next_row_id


@apply_operation.register
def _(op: ReserveFragments, base: Manifest, ctx: ApplyContext) -> Manifest:
    start = -1 if base.max_fragment_id is None else base.max_fragment_id
    return replace(base, max_fragment_id=start + op.num_fragments)


@apply_operation.register
def _(op: Rewrite, base: Manifest, ctx: ApplyContext) -> Manifest:
    old_ids = {f.id for g in op.groups for f in g.old_fragments}
    new = [f for g in op.groups for f in g.new_fragments]
    # id 0 means "assign at commit" here too, as in pylance (compaction reserves its ids instead)
    next_id = 0 if base.max_fragment_id is None else base.max_fragment_id + 1
    next_id = max([next_id, *(f.id + 1 for f in new)])
    for index, fragment in enumerate(new):
        if fragment.id == 0:
            new[index] = fragment.with_id(next_id)
            next_id += 1
    content = replace(
        base,
        fragments=(*(f for f in base.fragments if f.id not in old_ids), *new),
        max_fragment_id=_max_id(base.max_fragment_id, new),
    )
    renamed = {r.old_id: r for r in op.rewritten_indices}
    indices = [_rewritten_index(i, renamed.get(i.uuid), op, base.uses_stable_row_ids) for i in base.indices]
    reuse = op.frag_reuse_index
    if reuse is not None:
        indices = [i for i in indices if i.name != reuse.name] + [reuse]
    return replace(content, indices=tuple(indices))


def _rewritten_index(
    index: IndexMetadata, rewritten: RewrittenIndex | None, op: Rewrite, stable_row_ids: bool
) -> IndexMetadata:
    """An index after a Rewrite, as pylance 14 leaves it.

    A rewritten index takes its new uuid, files, details and version, and its fragment bitmap
    moves to the new fragments. With stable row ids an index holding row ids (vector, bitmap and
    label-list indices) keeps its files and its bitmap moves too; any other (a zone map, whose
    per-fragment zones say nothing of the new fragments, or a BTREE, which holds row addresses,
    when it was not rewritten) only loses the old fragments: the new ones are scanned unindexed
    until the index is optimized. Without stable row ids an index not rewritten is left as it was
    (a deferred remap: the Fragment Reuse Index maps it).
    """
    if rewritten is not None:
        index = replace(
            index,
            uuid=rewritten.new_id,
            details=rewritten.new_index_details or index.details,
            index_version=rewritten.new_index_version,
            files=rewritten.new_index_files or index.files,
        )
    elif not stable_row_ids or not index.fragment_bitmap:
        return index
    if not index.fragment_bitmap:
        raise InvalidArgumentError(f"index {index.name!r} has no fragment bitmap and cannot be rewritten")
    moved = rewritten is not None or holds_row_ids(index)
    return replace(index, fragment_bitmap=moved_bitmap(index.fragment_bitmap, op.groups, add_new=moved))


@apply_operation.register
def _(op: Merge, base: Manifest, ctx: ApplyContext) -> Manifest:
    fragments = op.fragments
    if base.uses_stable_row_ids:
        before = {f.id: f.files for f in base.fragments}
        fragments = tuple(
            f
            if before.get(f.id) == f.files
            else replace(f, last_updated_at_versions=version_sequence(f.physical_rows, ctx.version))
            for f in fragments
        )
    return replace(
        base,
        schema=op.schema,
        fragments=fragments,
        max_fragment_id=_max_id(base.max_fragment_id, op.fragments),
    )


@apply_operation.register
def _(op: Project, base: Manifest, ctx: ApplyContext) -> Manifest:
    ids = {f.id for f in op.schema}
    fragments = tuple(
        replace(frag, files=tuple(d for d in frag.files if any(i in ids for i in d.fields)))
        for frag in base.fragments
    )
    indices = tuple(i for i in base.indices if not i.fields or all(f in ids for f in i.fields))
    schema = replace(op.schema, metadata=base.schema.metadata)
    return replace(base, schema=schema, fragments=fragments, indices=indices)


@apply_operation.register
def _(op: UpdateConfig, base: Manifest, ctx: ApplyContext) -> Manifest:
    fields = base.schema.fields
    if op.field_metadata_updates:
        fields = tuple(_update_field_metadata(f, op) for f in base.schema.fields)
    schema_metadata = (
        op.schema_metadata_updates.apply(base.schema.metadata, encode=True)
        if op.schema_metadata_updates
        else base.schema.metadata
    )
    return replace(
        base,
        schema=replace(base.schema, fields=fields, metadata=schema_metadata),
        config=op.config_updates.apply(base.config) if op.config_updates else base.config,
        table_metadata=(
            op.table_metadata_updates.apply(base.table_metadata)
            if op.table_metadata_updates
            else base.table_metadata
        ),
    )


def _update_field_metadata(field: LanceField, op: UpdateConfig) -> LanceField:
    update = op.field_metadata_updates.get(field.id)
    if update is None:
        return field
    return replace(field, metadata=update.apply(dict(field.metadata), encode=True))


@apply_operation.register
def _(op: CreateIndex, base: Manifest, ctx: ApplyContext) -> Manifest:
    # As pylance 14: only ``removed_indices`` (by uuid) leave; a new index of an existing name is
    # another segment of it (optimize_indices' delta), a replaced one is listed as removed.
    removed = {i.uuid for i in op.removed_indices}
    new = {i.uuid for i in op.new_indices}
    kept = tuple(i for i in base.indices if i.uuid not in removed and i.uuid not in new)
    return replace(base, indices=(*kept, *op.new_indices))


@apply_operation.register
def _(op: DataReplacement, base: Manifest, ctx: ApplyContext) -> Manifest:
    by_fragment: dict[int, list] = {}
    for fragment_id, new_file in op.replacements:
        by_fragment.setdefault(fragment_id, []).append(new_file)
    fragments = []
    for fragment in base.fragments:
        files = list(fragment.files)
        for new_file in by_fragment.get(fragment.id, ()):
            slots = [n for n, f in enumerate(files) if f.fields == new_file.fields]
            if slots:
                files[slots[0]] = new_file
            else:
                files.append(new_file)
        fragment = replace(fragment, files=tuple(files))
        if base.uses_stable_row_ids and fragment.id in by_fragment:
            # as pylance 14: every row of a fragment whose column files were replaced was updated now
            fragment = replace(
                fragment, last_updated_at_versions=version_sequence(fragment.physical_rows, ctx.version)
            )
        fragments.append(fragment)
    return replace(base, fragments=tuple(fragments))


@apply_operation.register
def _(op: Restore, base: Manifest, ctx: ApplyContext) -> Manifest:
    if ctx.load_version is None:
        raise UnsupportedFeatureError("Restore needs access to the dataset's other versions")
    old = ctx.load_version(op.version)
    return replace(
        old,
        max_fragment_id=base.max_fragment_id,
        next_row_id=base.next_row_id,
        reader_feature_flags=base.reader_feature_flags,
        writer_feature_flags=base.writer_feature_flags,
    )


@apply_operation.register
def _(op: UpdateBases, base: Manifest, ctx: ApplyContext) -> Manifest:
    return replace(base, base_paths=(*base.base_paths, *op.new_bases))


def build_manifest(
    base: Manifest,
    transaction: Transaction,
    *,
    version: int,
    timestamp_ns: int,
    writer_version: WriterVersion,
    load_version: Callable[[int], Manifest] | None = None,
) -> Manifest:
    """The manifest of ``version``: ``transaction`` applied to ``base`` plus the per-commit stamps."""
    ctx = ApplyContext(version=version, load_version=load_version)
    content = apply_operation(transaction.operation, base, ctx)
    fragments = tuple(
        sorted(
            (
                replace(f, files=tuple(d for d in f.files if any(i != TOMBSTONE_FIELD for i in d.fields)))
                for f in content.fragments
            ),
            key=lambda f: f.id,
        )
    )
    content = replace(
        content,
        fragments=fragments,
        version=version,
        timestamp_ns=timestamp_ns,
        writer_version=writer_version,
        transaction_file=transaction.file_name,
        tag="",
        version_aux_data=0,
    )
    reader, writer = content.feature_flags()
    return replace(content, reader_feature_flags=reader, writer_feature_flags=writer)
