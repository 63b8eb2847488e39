"""Carrying deletions through a compaction's rewritten fragments (stable row ids only).

A ``Rewrite`` (compaction) read version ``v``; a ``Delete`` committed since deleted rows of
fragments the Rewrite replaces. Committing the Rewrite as is would bring those rows back, so the
conflict matrix says "retry". With stable row ids the rows can be followed instead: the rows the
delete added to an old fragment's vector (or all its live rows, if it removed the fragment) are
turned into row ids through the old fragment's sequence, found in the new fragments' sequences, and
written as deletion vectors of the new fragments (a new fragment left without rows is dropped).

Example: old fragments 0 (ids 0-9) and 1 (ids 10-19) compacted into fragment 5 (ids 0-19); a
concurrent delete of id 12 (fragment 1, offset 2) becomes offset 12 in fragment 5's new vector.

The other direction works the same way: an ``Update`` (update / merge_insert) that read version
``v`` deleted rows of fragments a compaction committed since has replaced. Its deletions are
followed into the compaction's new fragments (:func:`follow_rewrite`), so the upsert lands without
redoing its work; the rows it wrote keep their ids, so nothing is lost or resurrected. A concurrent
``Update`` is carried into a compaction like a ``Delete`` (:func:`as_delete`: its new rows are in
new fragments the compaction never saw).

Without stable row ids (the transaction does not say where the rows went) or with deletion files
outside the dataset root, nothing is carried and the commit retries.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from lance_ops.io import ObjectStore
from lance_ops.table.deletion import read_deletion_vector, write_deletion_file
from lance_ops.table.manifest import DataFragment
from lance_ops.table.naming import DELETIONS_DIR
from lance_ops.table.rowids import decode_row_ids
from lance_ops.table.transaction import Delete, Rewrite, RewriteGroup, Update


def can_carry(ours: Rewrite, theirs: Delete) -> bool:
    """Whether :func:`carry_delete` can follow ``theirs`` into ``ours``."""
    touched = {f.id for f in theirs.updated_fragments} | set(theirs.deleted_fragment_ids)
    fragments = [
        f
        for g in ours.groups
        if any(o.id in touched for o in g.old_fragments)
        for f in (*g.old_fragments, *g.new_fragments)
    ]
    return all(isinstance(f.row_ids, bytes) for f in fragments) and all(
        f.deletion_file is None or f.deletion_file.base_id is None
        for f in (*fragments, *theirs.updated_fragments)
    )


def _vector(store: ObjectStore, root: str, fragment: DataFragment) -> np.ndarray:
    if fragment.deletion_file is None:
        return np.zeros(0, np.uint32)
    return read_deletion_vector(store, root, fragment.id, fragment.deletion_file)


def _newly_deleted_ids(store: ObjectStore, root: str, old: DataFragment, theirs: Delete) -> np.ndarray:
    """Row ids of ``old`` that ``theirs`` deleted (beyond what was deleted when we read it)."""
    assert isinstance(old.row_ids, bytes)
    ids = decode_row_ids(old.row_ids)
    before = _vector(store, root, old)
    if old.id in theirs.deleted_fragment_ids:
        live = np.ones(len(ids), dtype=bool)
        live[before.astype(np.int64)] = False
        return ids[live]
    updated = {f.id: f for f in theirs.updated_fragments}.get(old.id)
    if updated is None:
        return np.zeros(0, np.uint64)
    newly = np.setdiff1d(_vector(store, root, updated), before)
    return ids[newly.astype(np.int64)]


def _delete_ids(
    store: ObjectStore, root: str, fragment: DataFragment, doomed: np.ndarray, version: int
) -> DataFragment | None:
    """``fragment`` with its rows whose ids are in ``doomed`` deleted (a new deletion file written
    as read on ``version``); itself when none is, None when no row is left."""
    assert isinstance(fragment.row_ids, bytes)
    hit = np.isin(decode_row_ids(fragment.row_ids), doomed)
    if not hit.any():
        return fragment
    vector = np.union1d(_vector(store, root, fragment), np.flatnonzero(hit).astype(np.uint32))
    if len(vector) >= fragment.physical_rows:
        return None
    previous = fragment.deletion_file
    deletion = write_deletion_file(
        store, root, fragment.id, version, vector, None if previous is None else previous.file_type
    )
    return replace(fragment, deletion_file=deletion)


def carry_delete(store: ObjectStore, root: str, ours: Rewrite, theirs: Delete, their_version: int) -> Rewrite:
    """``ours`` with the rows ``theirs`` deleted from its old fragments deleted from its new ones."""
    groups = []
    for group in ours.groups:
        deleted = [_newly_deleted_ids(store, root, old, theirs) for old in group.old_fragments]
        doomed = np.concatenate(deleted) if deleted else np.zeros(0, np.uint64)
        if not len(doomed):
            groups.append(group)
            continue
        kept = (_delete_ids(store, root, f, doomed, their_version) for f in group.new_fragments)
        groups.append(RewriteGroup(group.old_fragments, tuple(f for f in kept if f is not None)))
    return replace(ours, groups=tuple(groups))


def as_delete(update: Update) -> Delete:
    """The deletions of ``update`` as a ``Delete`` (for :func:`can_carry` / :func:`carry_delete`)."""
    return Delete(update.updated_fragments, update.removed_fragment_ids)


def can_follow(ours: Update, theirs: Rewrite) -> bool:
    """Whether :func:`follow_rewrite` can move ``ours`` over the compaction ``theirs``."""
    touched = {f.id for f in ours.updated_fragments} | set(ours.removed_fragment_ids)
    groups = [g for g in theirs.groups if any(o.id in touched for o in g.old_fragments)]
    fragments = [f for g in groups for f in (*g.old_fragments, *g.new_fragments)]
    return all(isinstance(f.row_ids, bytes) for f in fragments) and all(
        f.deletion_file is None or f.deletion_file.base_id is None
        for f in (*fragments, *ours.updated_fragments)
    )


def follow_rewrite(
    store: ObjectStore, root: str, ours: Update, theirs: Rewrite, their_version: int
) -> Update:
    """``ours`` with its deletions in fragments ``theirs`` compacted moved to the new fragments."""
    updated = {f.id: f for f in ours.updated_fragments}
    removed = set(ours.removed_fragment_ids)
    moved: list[DataFragment] = []
    gone: list[int] = []
    for group in theirs.groups:
        doomed_parts = []
        for old in group.old_fragments:
            # Only the rows this update deleted: an id deleted earlier may live on elsewhere.
            assert isinstance(old.row_ids, bytes)
            ids, before = decode_row_ids(old.row_ids), _vector(store, root, old)
            if old.id in removed:
                live = np.ones(len(ids), dtype=bool)
                live[before.astype(np.int64)] = False
                doomed_parts.append(ids[live])
                removed.discard(old.id)
            elif old.id in updated:
                mine = updated.pop(old.id)
                doomed_parts.append(ids[np.setdiff1d(_vector(store, root, mine), before).astype(np.int64)])
                assert mine.deletion_file is not None
                store.delete(store.join(root, DELETIONS_DIR, mine.deletion_file.file_name(mine.id)))
        if not doomed_parts:
            continue
        doomed = np.concatenate(doomed_parts)
        for fragment in group.new_fragments:
            after = _delete_ids(store, root, fragment, doomed, their_version)
            if after is None:
                gone.append(fragment.id)
            elif after is not fragment:
                moved.append(after)
    return replace(
        ours,
        updated_fragments=(*updated.values(), *moved),
        removed_fragment_ids=(*sorted(removed), *gone),
    )
