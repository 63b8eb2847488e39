"""Deleting the rows a predicate selects: new deletion vectors, one ``Delete`` commit.

For every fragment of the version read, the live rows the predicate selects are added to the
fragment's deletion vector and the complete vector is written as a new deletion file (its kind chosen
as pylance does, :func:`lance_ops.table.deletion.deletion_file_type`); a fragment left without live
rows is removed instead. A delete that selects nothing still commits a version, as pylance does.
Concurrent deletes of the same fragment are rebased at commit (vectors unioned); the count returned
is then the number of rows this delete took from the version it was committed on (rows a
concurrent delete had already removed are not counted twice, as pylance's count after its retry).

The per-fragment step (:func:`delete_in_fragment`) and the commit (:func:`commit_delete`) are
separate so that a distributed job (``jobs.delete``) can run the first on executors.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace

import numpy as np
import pyarrow.compute as pc

from lance_ops.errors import RetryableCommitConflictError, VersionNotFoundError
from lance_ops.fragment.reader import FragmentReader, VersionFiles
from lance_ops.ops.commit import CommitOptions, commit
from lance_ops.query.predicate import Predicate, parse_predicate
from lance_ops.table.commit import load_manifest
from lance_ops.table.deletion import sorted_unique, write_deletion_file
from lance_ops.table.manifest import DataFragment, Manifest
from lance_ops.table.naming import DELETIONS_DIR
from lance_ops.table.transaction import Delete, Transaction

# pylance's delete re-runs on a retryable conflict (its conflict_retries and retry_timeout).
CONFLICT_RETRIES = 10
RETRY_TIMEOUT_SECONDS = 30.0


@dataclass(frozen=True)
class DeleteResult:
    """What a delete committed, and how many rows it deleted."""

    manifest: Manifest
    transaction: Transaction
    num_deleted_rows: int


@dataclass(frozen=True)
class FragmentDeletion:
    """One fragment's part of a delete: its new metadata (with the new deletion file), or its
    removal when no live row is left; ``num_deleted_rows`` counts the rows this delete selected."""

    fragment_id: int
    num_deleted_rows: int
    updated: DataFragment | None


def delete_in_fragment(fragment: FragmentReader, bound: Predicate, version: int) -> FragmentDeletion | None:
    """Write the deletion file for the live rows of ``fragment`` that ``bound`` selects (None: none).

    Only the deletion file is written; nothing is committed. ``version`` is the version read.
    """
    return delete_offsets(fragment, fragment.matching_offsets(bound), version)


def delete_offsets(fragment: FragmentReader, selected: np.ndarray, version: int) -> FragmentDeletion | None:
    """Write the deletion file that adds the live rows at physical offsets ``selected`` to the
    deletion vector of ``fragment`` (None: nothing selected). ``version`` is the version read."""
    if not len(selected):
        return None
    vector = sorted_unique(fragment.deleted, selected)
    if len(vector) >= fragment.physical_rows:
        return FragmentDeletion(fragment.id, len(selected), None)
    previous = fragment.metadata.deletion_file
    files = fragment.files
    deletion = write_deletion_file(
        files.store,
        files.root,
        fragment.id,
        version,
        vector,
        None if previous is None else previous.file_type,
    )
    return FragmentDeletion(fragment.id, len(selected), replace(fragment.metadata, deletion_file=deletion))


def commit_delete(
    files: VersionFiles,
    deletions: Iterable[FragmentDeletion],
    predicate: str | pc.Expression,
    options: CommitOptions,
) -> DeleteResult:
    """Commit one ``Delete`` of the fragment deletions computed on the version ``files`` reads."""
    updated: list[DataFragment] = []
    removed: list[int] = []
    count = 0
    for deletion in sorted(deletions, key=lambda d: d.fragment_id):
        count += deletion.num_deleted_rows
        if deletion.updated is None:
            removed.append(deletion.fragment_id)
        else:
            updated.append(deletion.updated)
    version = files.manifest.version
    operation = Delete(tuple(updated), tuple(removed), str(predicate))
    manifest, transaction = commit(files.storage, operation, replace(options, read_version=version))
    if manifest.version != version + 1:
        touched = {f.id for f in updated} | set(removed)
        taken = _rows_taken(files, manifest, touched)
        count = count if taken is None else taken
    return DeleteResult(manifest, transaction, count)


def _rows_taken(files: VersionFiles, manifest: Manifest, fragment_ids: set[int]) -> int | None:
    """Live rows of ``fragment_ids`` in the version before ``manifest`` that ``manifest`` no
    longer has: what a delete committed over concurrent commits removed itself (None when a
    concurrent cleanup has already removed that version)."""
    try:
        before = load_manifest(files.store, files.root, manifest.version - 1).manifest
    except VersionNotFoundError:
        return None
    return _live_rows(files, before, fragment_ids) - _live_rows(files, manifest, fragment_ids)


def _live_rows(files: VersionFiles, manifest: Manifest, fragment_ids: set[int]) -> int:
    version = VersionFiles(files.storage, manifest)
    return sum(version.fragment(f).live_count for f in manifest.fragments if f.id in fragment_ids)


def delete(files: VersionFiles, predicate: str | pc.Expression, options: CommitOptions) -> DeleteResult:
    """Delete the rows of the version ``files`` reads that ``predicate`` (SQL or Arrow) selects.

    A predicate that is malformed, names an unknown column, is not boolean or is neither SQL nor an
    Arrow expression raises (:class:`PredicateError`, :class:`SchemaError`) before anything is written.
    When the commit meets a retryable conflict (a concurrent compaction, column change or update
    of the same fragments), the delete is run again on the latest version, as pylance's is: at most
    :data:`CONFLICT_RETRIES` times within :data:`RETRY_TIMEOUT_SECONDS`; the deletion files of an
    abandoned attempt are removed.
    """
    bound = parse_predicate(predicate, files.schema)
    deadline = time.monotonic() + RETRY_TIMEOUT_SECONDS
    for attempt in itertools.count():
        version = files.manifest.version
        found = (delete_in_fragment(fragment, bound, version) for fragment in files.fragments())
        deletions = [d for d in found if d is not None]
        try:
            return commit_delete(files, deletions, predicate, options)
        except RetryableCommitConflictError:
            _discard(files, deletions)
            if attempt >= CONFLICT_RETRIES or time.monotonic() > deadline:
                raise
        files = VersionFiles(files.storage, load_manifest(files.store, files.root).manifest)
        bound = parse_predicate(predicate, files.schema)
    raise AssertionError("unreachable")


def _discard(files: VersionFiles, deletions: Iterable[FragmentDeletion]) -> None:
    """Remove the deletion files of an attempt that was not committed."""
    for deletion in deletions:
        if deletion.updated is not None and deletion.updated.deletion_file is not None:
            name = deletion.updated.deletion_file.file_name(deletion.fragment_id)
            files.store.delete(files.store.join(files.root, DELETIONS_DIR, name))
