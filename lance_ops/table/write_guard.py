"""The last check before a commit: new data files hold every non-nullable field, without nulls.

Writers conform their data before writing it (:mod:`lance_ops.fragment.conform`); this guard also
covers what reaches a commit by other roads: fragments written by executors or by hand and
committed as an ``Append``, compaction outputs, ``Merge`` and ``DataReplacement`` files. A version
with nulls in a non-nullable column cannot be scanned by pylance ("Found unmasked nulls for
non-nullable ... field") nor read by Spark, so such a commit raises
:class:`~lance_ops.errors.WriteSchemaError` and claims no version.

For every fragment of the new manifest holding a data file the base manifest does not have:

* every non-nullable top-level field of the new schema must be stored by one of the fragment's data
  files (its id, or the id of a field inside it, listed in ``DataFile.fields``);
* in each new data file, a non-nullable top-level field may hold no more nulls than the fragment
  has deleted rows (a column added to a fragment stores its deleted rows as nulls).

Null counts come from the writer that just wrote the file (``DataFile.null_counts``), else from the
file's page statistics (its tail and one global buffer; never its columns), keyed by the file's own
field ids, which writers here and pylance's set to the dataset's. Files with neither, legacy files
and files under other base paths are not read. ``Restore`` is not checked: it brings back content
committed before.

:func:`check_file_families` also refuses a version whose data files mix legacy (0.x) and V2 files,
or are not of its data storage version's family, as pylance 14 refuses it.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping

from lance_ops.errors import WriteSchemaError
from lance_ops.file.reader import file_null_counts
from lance_ops.io import ObjectStore
from lance_ops.table.manifest import DataFile, DataFragment, Manifest
from lance_ops.table.naming import DATA_DIR
from lance_ops.table.schema import LanceField, LanceSchema
from lance_ops.table.transaction import Append, DataReplacement, Merge, Operation, Overwrite, Rewrite, Update

__all__ = ["NullCountCache", "check_file_families", "check_new_fragments"]

# Operations that bring new data files into a version.
_ADDING_FILES = (Append, Overwrite, Update, Rewrite, Merge, DataReplacement)

# Data file path -> its null counts by field id (None: the file has no statistics).
NullCountCache = MutableMapping[str, Mapping[int, int] | None]


def _files_of(manifest: Manifest) -> set[tuple[int | None, str]]:
    return {(f.base_id, f.path) for fragment in manifest.fragments for f in fragment.files}


def check_file_families(manifest: Manifest) -> None:
    """Raise :class:`WriteSchemaError` when ``manifest`` mixes legacy (0.x) and V2 data files, or
    holds files of the other family than its data storage version: pylance 14 refuses to commit
    such a version, in these words."""
    files = [(fragment.id, f) for fragment in manifest.fragments for f in fragment.files]
    if len({f.file_major_version >= 2 for _, f in files}) > 1:
        raise WriteSchemaError("Invalid user input: Dataset snapshot mixes V1 and V2 data files")
    default = manifest.data_storage_version
    for fragment_id, f in files[:1]:
        if (f.file_major_version >= 2) != default.startswith("2."):
            raise WriteSchemaError(
                f"Invalid user input: Data file '{f.path}' in fragment {fragment_id} has version "
                f"{f.file_version}, but the manifest default is {default}; V1 and V2 storage versions "
                "cannot be mixed"
            )


def _required(schema: LanceSchema) -> list[tuple[LanceField, frozenset[int]]]:
    """The non-nullable top-level fields and the ids of their subtrees."""
    return [
        (f, frozenset(g.id for g in schema.subtree(f.id)))
        for f in schema.fields
        if f.parent_id == -1 and not f.nullable
    ]


def _null_counts(
    store: ObjectStore, root: str, data_file: DataFile, cache: NullCountCache
) -> Mapping[int, int] | None:
    if data_file.null_counts is not None:
        return data_file.null_counts
    if data_file.base_id is not None or data_file.file_major_version < 2:
        return None
    if data_file.path not in cache:
        cache[data_file.path] = file_null_counts(store, store.join(root, DATA_DIR, data_file.path))
    return cache[data_file.path]


def check_new_fragments(
    store: ObjectStore,
    root: str,
    base: Manifest,
    manifest: Manifest,
    operation: Operation,
    cache: NullCountCache | None = None,
) -> None:
    """Raise :class:`WriteSchemaError` when a fragment ``operation`` adds data files to (going from
    ``base`` to ``manifest``) lacks a non-nullable field or holds nulls in one. ``cache`` keeps the
    null counts read from files across a commit's attempts."""
    if not isinstance(operation, _ADDING_FILES):
        return
    required = _required(manifest.schema)
    if not required:
        return
    cache = {} if cache is None else cache
    old = _files_of(base)
    faults: list[str] = []
    columns: list[str] = []
    for fragment in manifest.fragments:
        new = [f for f in fragment.files if (f.base_id, f.path) not in old]
        if new:
            faults += _fragment_faults(store, root, fragment, new, required, columns, cache)
    if faults:
        raise WriteSchemaError(
            f"refusing to commit {operation.name}: {'; '.join(faults)}", tuple(dict.fromkeys(columns))
        )


def _fragment_faults(
    store: ObjectStore,
    root: str,
    fragment: DataFragment,
    new: list[DataFile],
    required: list[tuple[LanceField, frozenset[int]]],
    columns: list[str],
    cache: NullCountCache,
) -> list[str]:
    faults = []
    for field, ids in required:
        if not any(ids.intersection(f.fields) for f in fragment.files):
            faults.append(f"fragment {fragment.id} has no data for non-nullable column {field.name!r}")
            columns.append(field.name)
    for data_file in new:
        counts = _null_counts(store, root, data_file, cache)
        if not counts:
            continue
        for field, ids in required:
            nulls = counts.get(field.id, 0)
            if nulls > fragment.num_deleted_rows and ids.intersection(data_file.fields):
                faults.append(
                    f"fragment {fragment.id} (data file {DATA_DIR}/{data_file.path}) holds {nulls} null(s) "
                    f"in non-nullable column {field.name!r}"
                )
                columns.append(field.name)
    return faults
