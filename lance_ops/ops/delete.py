"""Deleting the rows a predicate selects: new deletion vectors, one ``Delete`` commit.

For every fragment of the version read, the live rows the predicate selects are added to the
fragment's deletion vector and the complete vector is written as a new deletion file (its kind chosen
as pylance does, :func:`lance_ops.table.deletion.deletion_file_type`); a fragment left without live
rows is removed instead. A delete that selects nothing still commits a version, as pylance does.
Concurrent deletes of the same fragment are rebased at commit (vectors unioned).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pyarrow.compute as pc

from lance_ops.fragment.reader import VersionFiles
from lance_ops.ops.commit import CommitOptions, commit
from lance_ops.query.predicate import parse_predicate
from lance_ops.table.deletion import write_deletion_file
from lance_ops.table.manifest import DataFragment, Manifest
from lance_ops.table.transaction import Delete, Transaction


@dataclass(frozen=True)
class DeleteResult:
    """What a delete committed, and how many rows it deleted."""

    manifest: Manifest
    transaction: Transaction
    num_deleted_rows: int


def delete(files: VersionFiles, predicate: str | pc.Expression, options: CommitOptions) -> DeleteResult:
    """Delete the rows of the version ``files`` reads that ``predicate`` (SQL or Arrow) selects.

    A predicate that is malformed, names an unknown column, is not boolean or is neither SQL nor an
    Arrow expression raises (:class:`PredicateError`, :class:`SchemaError`) before anything is written.
    """
    bound = parse_predicate(predicate, files.schema)
    version = files.manifest.version
    updated: list[DataFragment] = []
    removed: list[int] = []
    count = 0
    for fragment in files.fragments():
        selected = fragment.matching_offsets(bound)
        if not len(selected):
            continue
        count += len(selected)
        vector = np.union1d(fragment.deleted, selected.astype(np.uint32))
        if len(vector) >= fragment.physical_rows:
            removed.append(fragment.id)
            continue
        previous = fragment.metadata.deletion_file
        deletion = write_deletion_file(
            files.store,
            files.root,
            fragment.id,
            version,
            vector,
            None if previous is None else previous.file_type,
        )
        updated.append(replace(fragment.metadata, deletion_file=deletion))
    operation = Delete(tuple(updated), tuple(removed), str(predicate))
    manifest, transaction = commit(files.uri, operation, replace(options, read_version=version))
    return DeleteResult(manifest, transaction, count)
