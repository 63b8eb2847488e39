"""A dataset's history: pylance's ``versions()``, a ``DESCRIBE HISTORY``-style table, and restore.

:func:`history` is the counterpart of Delta's ``DESCRIBE HISTORY`` (pylance has none): one row per
version, oldest first, with the operation that made it, its commit message and transaction
properties, and the version's size (rows, deleted rows, fragments, data files, bytes of data files).

:func:`restore` commits ``Restore(version)`` on the latest version: the new version's content
(schema, fragments, indices, config) is the restored version's; every version stays in the history.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from typing import Any

import pyarrow as pa

from lance_ops.errors import InvalidArgumentError, UnsupportedFeatureError, VersionNotFoundError
from lance_ops.io import ObjectStore
from lance_ops.io.context import Location, StorageContext
from lance_ops.ops.commit import CommitOptions, commit
from lance_ops.table.commit import LoadedManifest, load_manifest, load_manifests, load_transaction
from lance_ops.table.manifest import Manifest, fragment_file_totals, fragment_row_counts
from lance_ops.table.transaction import COMMIT_MESSAGE_KEY, Restore, Transaction

__all__ = ["HISTORY_SCHEMA", "history", "restore", "summary", "version_as_of", "versions"]

HISTORY_SCHEMA = pa.schema(
    [
        pa.field("version", pa.uint64(), nullable=False),
        pa.field("timestamp", pa.timestamp("ns", tz="UTC"), nullable=False),
        pa.field("operation", pa.string()),
        pa.field("read_version", pa.uint64()),
        pa.field("commit_message", pa.string()),
        pa.field("transaction_properties", pa.map_(pa.string(), pa.string())),
        pa.field("rows", pa.uint64(), nullable=False),
        pa.field("deleted_rows", pa.uint64(), nullable=False),
        pa.field("fragments", pa.uint64(), nullable=False),
        pa.field("data_files", pa.uint64(), nullable=False),
        pa.field("deletion_files", pa.uint64(), nullable=False),
        pa.field("bytes", pa.uint64(), nullable=False),
    ]
)


def summary(manifest: Manifest) -> dict[str, str]:
    """pylance's per-version summary (``versions()[i]["metadata"]``; values are decimal strings)."""
    # From the manifest's counts, without converting its fragments (see FragmentList).
    physical, deleted, has_deletion = fragment_row_counts(manifest.fragments)
    files, size = fragment_file_totals(manifest.fragments)
    return {
        "total_data_file_rows": str(int(physical.sum())),
        "total_data_files": str(files),
        "total_deletion_file_rows": str(int(deleted.sum())),
        "total_deletion_files": str(int(has_deletion.sum())),
        "total_files_size": str(size),
        "total_fragments": str(len(manifest.fragments)),
        "total_rows": str(int(physical.sum() - deleted.sum())),
    }


def _local_datetime(ns: int) -> dt.datetime:
    """Naive local time as pylance computes it: whole seconds plus microseconds, both taken from the
    nanoseconds as a float (so its last microsecond can differ from exact truncation)."""
    as_float = float(ns)
    return dt.datetime.fromtimestamp(as_float // 1e9) + dt.timedelta(microseconds=(as_float % 1e9) // 1e3)


def versions(store: ObjectStore, root: str) -> list[dict[str, Any]]:
    """pylance's ``versions()``: ``{"version", "timestamp" (naive local datetime), "metadata"}`` each."""
    return [
        {
            "version": loaded.manifest.version,
            "timestamp": _local_datetime(loaded.manifest.timestamp_ns),
            "metadata": summary(loaded.manifest),
        }
        for loaded in load_manifests(store, root)
    ]


def version_as_of(store: ObjectStore, root: str, asof: dt.datetime | str) -> int:
    """pylance's ``dataset(uri, asof=...)``: the newest version committed strictly before ``asof``.

    ``asof`` is a datetime (naive = local time, as ``versions()`` reports; aware ones are converted)
    or an ISO 8601 / ``YYYY-MM-DD HH:MM:SS`` string. No such version raises
    :class:`VersionNotFoundError`.
    """
    if isinstance(asof, str):
        try:
            cutoff = dt.datetime.fromisoformat(asof)
        except ValueError:
            raise InvalidArgumentError(f"Failed to parse timestamp string {asof!r}") from None
    elif isinstance(asof, dt.datetime):
        cutoff = asof
    else:
        raise InvalidArgumentError(f"Unrecognized version timestamp {asof!r} of type {type(asof).__name__}")
    if cutoff.tzinfo is not None:
        cutoff = cutoff.astimezone().replace(tzinfo=None)
    found = [v["version"] for v in versions(store, root) if v["timestamp"] < cutoff]
    if not found:
        raise VersionNotFoundError(f"{cutoff} is earlier than the first version of the dataset at {root}")
    return max(found)


def _transaction(store: ObjectStore, root: str, loaded: LoadedManifest) -> Transaction | None:
    """The version's transaction; None when absent or of an operation this library cannot decode."""
    try:
        return load_transaction(store, root, loaded)
    except UnsupportedFeatureError:
        return None


def _row(store: ObjectStore, root: str, loaded: LoadedManifest) -> dict[str, Any]:
    manifest = loaded.manifest
    counts = summary(manifest)
    transaction = _transaction(store, root, loaded)
    properties = dict(transaction.properties) if transaction is not None else {}
    return {
        "version": manifest.version,
        "timestamp": manifest.timestamp_ns,
        "operation": None if transaction is None else transaction.operation.name,
        "read_version": None if transaction is None else transaction.read_version,
        "commit_message": properties.get(COMMIT_MESSAGE_KEY),
        "transaction_properties": list(properties.items()),
        "rows": manifest.num_rows,
        "deleted_rows": int(counts["total_deletion_file_rows"]),
        "fragments": len(manifest.fragments),
        "data_files": int(counts["total_data_files"]),
        "deletion_files": int(counts["total_deletion_files"]),
        "bytes": int(counts["total_files_size"]),
    }


def history(store: ObjectStore, root: str) -> pa.Table:
    """One row per version, oldest first (columns: :data:`HISTORY_SCHEMA`)."""
    rows = [_row(store, root, loaded) for loaded in load_manifests(store, root)]
    return pa.Table.from_pylist(rows, schema=HISTORY_SCHEMA)


def restore(location: Location, version: int, options: CommitOptions) -> tuple[Manifest, Transaction]:
    """Commit ``Restore(version)`` on top of the latest version (an unknown version raises first);
    ``location`` is the dataset's storage context, or its URI (opened with ``options.storage_options``)."""
    storage = StorageContext.of(location, options.storage_options)
    load_manifest(storage.store, storage.root, version)
    return commit(storage, Restore(version), replace(options, read_version=None))
