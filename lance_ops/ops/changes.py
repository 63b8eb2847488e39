"""Change feeds: pylance's ``DatasetDelta`` and a Delta-style change data feed (``changes``).

``delta`` (pylance 14's semantics; begin version exclusive, end inclusive) reads the row versions
of the end version: inserted rows were created after ``begin``, updated rows were created at or
before it and last updated after it. Fragments whose rows were all last updated at or before
``begin`` are skipped without reading data. Deleted row ids (stable row ids only) are the ids live
in ``begin`` and not in ``end``; only fragments that differ between the two versions are read.

``changes(start, end)`` walks the commits ``start..end`` (both included, as Delta's
``startingVersion`` / ``endingVersion``) and compares each version with the one before, reading
only fragments that are new, removed or carry a new deletion file:

* rows removed by the commit are ``delete`` rows, rows it added are ``insert`` rows;
* a removed row that comes back in the same commit is an ``update_preimage`` and its new copy an
  ``update_postimage``. With stable row ids the pairs are exact (same row id). Without them only an
  ``Update`` commit pairs rows, and only where the commit says how: by key when the caller names
  the key columns (``keys``) or the commit records them (lance-ops' ``merge_insert`` sets the
  transaction property ``lance_ops.merge_insert.on``: JSON list of the ``on`` columns), or by
  position when lance-ops' ``update`` wrote it (property ``lance_ops.update.rows = in_order``: the
  k-th removed row, in fragment / offset order, became the k-th added row). Anything else without
  stable row ids — pylance's ``update`` / ``merge_insert`` unless ``keys`` is given, appends,
  deletes, overwrites, restores — reads as delete + insert, since nothing in the files ties an
  added row to a removed one (pylance 14 writes no row id sequence and no row versions without
  stable row ids: an updated row gets the new row address as its ``_rowid``, and pylance's own
  ``delta().get_updated_rows()`` is empty there). ``require_pairs=True`` refuses such an
  ``Update`` with an error naming ``keys`` instead;
* compactions (``Rewrite``) move rows without changing them and report nothing; column-level
  commits (``Merge``/``Project``/``DataReplacement``: added, altered or dropped columns) and
  metadata-only commits report nothing either.

Each row carries ``_change_type`` and ``_commit_version``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lance_ops.errors import InvalidArgumentError
from lance_ops.fragment.reader import FragmentReader, VersionFiles
from lance_ops.io.context import StorageContext
from lance_ops.table.commit import load_manifest, load_transaction
from lance_ops.table.manifest import DataFragment, Manifest
from lance_ops.table.rowids import decode_versions, load_sequence
from lance_ops.table.transaction import (
    DataReplacement,
    Merge,
    Project,
    Rewrite,
    Transaction,
    Update,
)

ROW_ID = "_rowid"
CREATED_AT = "_row_created_at_version"
LAST_UPDATED_AT = "_row_last_updated_at_version"
CHANGE_TYPE = "_change_type"
COMMIT_VERSION = "_commit_version"
READ_ROWS = 8192
# Transaction properties lance-ops records so that a feed without stable row ids can pair updates.
MERGE_KEYS_PROPERTY = "lance_ops.merge_insert.on"
UPDATE_ROWS_PROPERTY = "lance_ops.update.rows"
IN_ORDER = "in_order"

# Commits that change columns or nothing but metadata: no row changes in the feed.
_NO_ROW_CHANGES = (Rewrite, Merge, Project, DataReplacement)


def _files(storage: StorageContext, version: int) -> VersionFiles:
    return VersionFiles(storage, load_manifest(storage.store, storage.root, version).manifest)


def _versions(files: VersionFiles, fragment: FragmentReader, value: object) -> np.ndarray:
    if value is None:
        return np.ones(fragment.physical_rows, np.uint64)
    data = load_sequence(files.store, files.root, value)  # type: ignore[arg-type]
    return decode_versions(data, fragment.physical_rows)


def _same(a: DataFragment, b: DataFragment) -> bool:
    return a.files == b.files and a.deletion_file == b.deletion_file


@dataclass(frozen=True)
class Delta:
    """The difference between ``begin`` (exclusive) and ``end`` (inclusive) of one dataset."""

    storage: StorageContext
    begin: int
    end: int

    def schema(self, files: VersionFiles) -> pa.Schema:
        extra = [
            pa.field(ROW_ID, pa.uint64()),
            pa.field(CREATED_AT, pa.uint64()),
            pa.field(LAST_UPDATED_AT, pa.uint64()),
        ]
        return pa.schema([*files.schema, *extra])

    def list_transactions(self) -> list[Transaction]:
        """The transactions of versions ``begin + 1 .. end``."""
        store, root = self.storage.store, self.storage.root
        found = (
            load_transaction(store, root, load_manifest(store, root, v))
            for v in range(self.begin + 1, self.end + 1)
        )
        return [t for t in found if t is not None]

    def rows(self, inserted: bool) -> pa.RecordBatchReader:
        """Rows of ``end`` created after ``begin`` (``inserted``), or created before and updated since."""
        files = _files(self.storage, self.end)
        return pa.RecordBatchReader.from_batches(self.schema(files), self._rows(files, inserted))

    def _rows(self, files: VersionFiles, inserted: bool) -> Iterator[pa.RecordBatch]:
        schema = self.schema(files)
        for fragment in files.fragments():
            last = _versions(files, fragment, fragment.metadata.last_updated_at_versions)
            if not len(last) or int(last.max()) <= self.begin:
                continue
            created = _versions(files, fragment, fragment.metadata.created_at_versions)
            wanted = (created > self.begin) if inserted else (created <= self.begin) & (last > self.begin)
            live = np.zeros(fragment.physical_rows, dtype=bool)
            live[fragment.live_offsets()] = True
            offsets = np.flatnonzero(wanted & live)
            for start in range(0, len(offsets), READ_ROWS):
                chunk = offsets[start : start + READ_ROWS]
                table = fragment.read(files.schema.names, chunk, with_row_id=True)
                table = table.append_column(CREATED_AT, pa.array(created[chunk])).append_column(
                    LAST_UPDATED_AT, pa.array(last[chunk])
                )
                yield from table.cast(schema).to_batches()

    def deleted_row_ids(self) -> pa.RecordBatchReader:
        """Stable row ids live in ``begin`` and not in ``end`` (one ``_rowid`` column, sorted)."""
        before = _files(self.storage, self.begin)
        if not before.manifest.uses_stable_row_ids:
            raise InvalidArgumentError(
                f"deleted row ids require stable row ids, version {self.begin} does not use them"
            )
        after = _files(self.storage, self.end)
        old = {f.id: f for f in before.manifest.fragments}
        new = {f.id: f for f in after.manifest.fragments}
        gone = _live_ids(before, [f for i, f in old.items() if i not in new or not _same(f, new[i])])
        kept = _live_ids(after, [f for i, f in new.items() if i not in old or not _same(f, old[i])])
        ids = np.setdiff1d(gone, kept)
        schema = pa.schema([pa.field(ROW_ID, pa.uint64())])
        return pa.RecordBatchReader.from_batches(
            schema, [pa.record_batch([pa.array(ids, pa.uint64())], schema=schema)]
        )


def _live_ids(files: VersionFiles, fragments: list[DataFragment]) -> np.ndarray:
    parts = [np.zeros(0, np.uint64)]
    for metadata in fragments:
        fragment = files.fragment(metadata)
        parts.append(fragment.row_ids(fragment.live_offsets()))
    return np.concatenate(parts)


def delta(
    storage: StorageContext,
    current: int,
    compared_against: int | None,
    begin_version: int | None,
    end_version: int | None,
) -> Delta:
    """pylance's argument rules: ``compared_against`` (against ``current``) or both of the range."""
    if compared_against is not None:
        return Delta(storage, compared_against, current)
    if begin_version is None and end_version is None:
        raise InvalidArgumentError(
            "Must specify either compared_against_version or both with_begin_version and with_end_version"
        )
    if begin_version is None or end_version is None:
        raise InvalidArgumentError("Must specify both with_begin_version and with_end_version")
    return Delta(storage, begin_version, end_version)


# ------------------------------------------------------------------ change data feed


def changes(
    storage: StorageContext,
    start_version: int,
    end_version: int,
    keys: Sequence[str] | None = None,
    require_pairs: bool = False,
) -> pa.Table:
    """The row changes of commits ``start_version .. end_version`` (see the module docstring);
    ``keys``: the columns that identify a row, pairing the rows of ``Update`` commits without
    stable row ids. ``require_pairs``: refuse (:class:`InvalidArgumentError`, nothing returned)
    an ``Update`` commit that removed and added rows with nothing to pair them by (no stable row
    ids, no pairing recorded, no ``keys``), instead of reading it as deletes and inserts."""
    if start_version < 1 or end_version < start_version:
        raise InvalidArgumentError(
            f"changes needs 1 <= start_version <= end_version, not {start_version}..{end_version}"
        )
    store, root = storage.store, storage.root
    tables = []
    before: Manifest | None = None if start_version == 1 else _manifest(storage, start_version - 1)
    for version in range(start_version, end_version + 1):
        loaded = load_manifest(store, root, version)
        after = loaded.manifest
        transaction = load_transaction(store, root, loaded)
        if transaction is None or not isinstance(transaction.operation, _NO_ROW_CHANGES):
            pairing = _pairing(transaction, keys)
            is_update = transaction is not None and isinstance(transaction.operation, Update)
            unpaired = require_pairs and pairing is None and is_update
            tables.append(_commit_changes(storage, before, after, pairing, refuse_unpaired=unpaired))
        before = after
    schema = _manifest(storage, end_version).schema.to_arrow()
    out = [_conformed(t, schema) for t in tables if t.num_rows]
    return pa.concat_tables(out) if out else _conformed(pa.table({}), schema)


def _manifest(storage: StorageContext, version: int) -> Manifest:
    return load_manifest(storage.store, storage.root, version).manifest


def _conformed(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with the columns of ``schema`` (missing ones null) then the change columns."""
    n = table.num_rows
    columns = [
        table.column(f.name).cast(f.type) if f.name in table.column_names else pa.nulls(n, f.type)
        for f in schema
    ]
    columns += [
        table.column(CHANGE_TYPE) if n else pa.array([], pa.string()),
        table.column(COMMIT_VERSION) if n else pa.array([], pa.int64()),
    ]
    fields = [*schema, pa.field(CHANGE_TYPE, pa.string()), pa.field(COMMIT_VERSION, pa.int64())]
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


def _pairing(transaction: Transaction | None, keys: Sequence[str] | None) -> tuple[str, ...] | str | None:
    """How an ``Update`` commit's removed and added rows pair without stable row ids: key columns,
    ``IN_ORDER`` (by position) or None (they do not)."""
    if transaction is None or not isinstance(transaction.operation, Update):
        return None
    if keys:
        return tuple(keys)
    properties = transaction.transaction_properties or {}
    recorded = properties.get(MERGE_KEYS_PROPERTY)
    if recorded:
        try:
            columns = json.loads(recorded)
        except ValueError:
            return None
        if isinstance(columns, list) and columns and all(isinstance(c, str) for c in columns):
            return tuple(columns)
        return None
    return IN_ORDER if properties.get(UPDATE_ROWS_PROPERTY) == IN_ORDER else None


def _paired(
    removed: pa.Table | None,
    removed_ids: np.ndarray,
    added: pa.Table | None,
    added_ids: np.ndarray,
    stable: bool,
    pairing: tuple[str, ...] | str | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Which removed and which added rows are the two images of one update."""
    if stable:
        return np.isin(removed_ids, added_ids), np.isin(added_ids, removed_ids)
    none_old, none_new = np.zeros(len(removed_ids), bool), np.zeros(len(added_ids), bool)
    if removed is None or added is None or pairing is None:
        return none_old, none_new
    if pairing == IN_ORDER:
        if removed.num_rows != added.num_rows:
            return none_old, none_new
        return ~none_old, ~none_new
    on = list(pairing)
    if any(c not in removed.column_names or c not in added.column_names for c in on):
        return none_old, none_new
    return _key_in(removed, added, on), _key_in(added, removed, on)


def _key_in(table: pa.Table, other: pa.Table, on: list[str]) -> np.ndarray:
    """Rows of ``table`` whose key (``on``) some row of ``other`` has (a vectorised semi join)."""
    index = "__lance_ops_row"
    left = table.select(on).append_column(index, pa.array(np.arange(table.num_rows, dtype=np.int64)))
    right = other.select(on).group_by(on).aggregate([])
    found = left.join(right, on, join_type="left semi").column(index).to_numpy()
    mask = np.zeros(table.num_rows, bool)
    mask[found] = True
    return mask


def _commit_changes(
    storage: StorageContext,
    before: Manifest | None,
    after: Manifest,
    pairing: tuple[str, ...] | str | None = None,
    refuse_unpaired: bool = False,
) -> pa.Table:
    """Rows removed and added between ``before`` (None: nothing) and ``after``;
    ``refuse_unpaired``: raise when rows were both removed and added and no stable row ids pair
    them (the commit is an ``Update`` with no other pairing)."""
    old = {} if before is None else {f.id: f for f in before.fragments}
    new = {f.id: f for f in after.fragments}
    removed, removed_ids = _rows_between(storage, before, old, new, dropped=True)
    added, added_ids = _rows_between(storage, after, new, old, dropped=False)
    stable = after.uses_stable_row_ids and before is not None and before.uses_stable_row_ids
    if refuse_unpaired and not stable and removed is not None and added is not None:
        raise InvalidArgumentError(
            f"cannot pair the update images of version {after.version}: the dataset has no stable "
            "row ids and the Update commit records no pairing (pylance's update and merge_insert "
            "write none); pass keys=[...] (the columns that identify a row), or write the dataset "
            "with enable_stable_row_ids=True"
        )
    paired_old, paired_new = _paired(removed, removed_ids, added, added_ids, stable, pairing)
    parts = []
    if removed is not None:
        kinds = np.where(paired_old, "update_preimage", "delete")
        parts.append(_tagged(removed, kinds, after.version))
    if added is not None:
        kinds = np.where(paired_new, "update_postimage", "insert")
        parts.append(_tagged(added, kinds, after.version))
    parts = [p for p in parts if p.num_rows]
    return pa.concat_tables(parts, promote_options="default") if parts else pa.table({})


def _tagged(table: pa.Table, kinds: np.ndarray, version: int) -> pa.Table:
    return table.append_column(CHANGE_TYPE, pa.array(kinds.astype(object), pa.string())).append_column(
        COMMIT_VERSION, pa.array(np.full(table.num_rows, version, np.int64))
    )


def _rows_between(
    storage: StorageContext,
    manifest: Manifest | None,
    mine: dict[int, DataFragment],
    other: dict[int, DataFragment],
    dropped: bool,
) -> tuple[pa.Table | None, np.ndarray]:
    """Live rows of ``mine`` (fragments of ``manifest``) that ``other`` does not have: whole fragments
    absent from ``other``, or rows whose deletion differs (``dropped``: deleted in ``other``)."""
    if manifest is None:
        return None, np.zeros(0, np.uint64)
    files = VersionFiles(storage, manifest)
    tables, ids = [], [np.zeros(0, np.uint64)]
    for fid, metadata in mine.items():
        twin = other.get(fid)
        if twin is not None and _same(metadata, twin):
            continue
        kept_files = twin is not None and twin.files == metadata.files
        if kept_files and not dropped:
            continue  # the same rows under a new deletion file: nothing added
        fragment = files.fragment(metadata)
        offsets = fragment.live_offsets()
        if kept_files:
            assert twin is not None
            offsets = offsets[np.isin(offsets, files.fragment(twin).deleted)]
        if not len(offsets):
            continue
        tables.append(fragment.read(files.schema.names, offsets))
        ids.append(fragment.row_ids(offsets))
    if not tables:
        return None, np.zeros(0, np.uint64)
    return pa.concat_tables(tables), np.concatenate(ids)
