"""Carrying a concurrent delete into a compaction's rewritten fragments (stable row ids only).

A ``Rewrite`` (compaction) read version ``v``; a ``Delete`` committed since deleted rows of
fragments the Rewrite replaces. Committing the Rewrite as is would bring those rows back, so the
conflict matrix says "retry". With stable row ids the rows can be followed instead: the rows the
delete added to an old fragment's vector (or all its live rows, if it removed the fragment) are
turned into row ids through the old fragment's sequence, found in the new fragments' sequences, and
written as deletion vectors of the new fragments (a new fragment left without rows is dropped).

Example: old fragments 0 (ids 0-9) and 1 (ids 10-19) compacted into fragment 5 (ids 0-19); a
concurrent delete of id 12 (fragment 1, offset 2) becomes offset 12 in fragment 5's new vector.

Without stable row ids (the transaction does not say where the rows went) or with deletion files
outside the dataset root, nothing is carried and the commit retries.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from lance_ops.io import ObjectStore
from lance_ops.table.deletion import read_deletion_vector, write_deletion_file
from lance_ops.table.manifest import DataFragment
from lance_ops.table.rowids import decode_row_ids
from lance_ops.table.transaction import Delete, Rewrite, RewriteGroup


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


def carry_delete(store: ObjectStore, root: str, ours: Rewrite, theirs: Delete, their_version: int) -> Rewrite:
    """``ours`` with the rows ``theirs`` deleted from its old fragments deleted from its new ones."""
    groups = []
    for group in ours.groups:
        deleted = [_newly_deleted_ids(store, root, old, theirs) for old in group.old_fragments]
        doomed = np.concatenate(deleted) if deleted else np.zeros(0, np.uint64)
        if not len(doomed):
            groups.append(group)
            continue
        new = []
        for fragment in group.new_fragments:
            assert isinstance(fragment.row_ids, bytes)
            hit = np.isin(decode_row_ids(fragment.row_ids), doomed)
            if not hit.any():
                new.append(fragment)
                continue
            vector = np.union1d(_vector(store, root, fragment), np.flatnonzero(hit).astype(np.uint32))
            if len(vector) >= fragment.physical_rows:
                continue
            previous = fragment.deletion_file
            deletion = write_deletion_file(
                store,
                root,
                fragment.id,
                their_version,
                vector,
                None if previous is None else previous.file_type,
            )
            new.append(replace(fragment, deletion_file=deletion))
        groups.append(RewriteGroup(group.old_fragments, tuple(new)))
    return replace(ours, groups=tuple(groups))
