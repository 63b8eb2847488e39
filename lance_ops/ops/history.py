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

from lance_ops.errors import CorruptFileError, InvalidArgumentError, VersionNotFoundError
from lance_ops.io import ObjectStore
from lance_ops.io.context import Location, StorageContext
from lance_ops.ops.commit import CommitOptions, commit
from lance_ops.table.commit import load_manifest, load_manifest_pbs
from lance_ops.table.manifest import (
    Manifest,
    ManifestPb,
    fragment_file_totals,
    fragment_row_counts,
    manifest_pb_totals,
    read_section,
)
from lance_ops.table.manifest_scan import TransactionHead, transaction_head
from lance_ops.table.naming import TRANSACTIONS_DIR
from lance_ops.table.paths import check_relative_path
from lance_ops.table.transaction import COMMIT_MESSAGE_KEY, OPERATIONS, Restore, Transaction

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
    totals = (int(physical.sum()), int(deleted.sum()), int(has_deletion.sum()), files, size)
    return _summary(totals, len(manifest.fragments))


def _summary(totals: tuple[int, int, int, int, int], fragments: int) -> dict[str, str]:
    rows, deleted, deletions, files, size = totals
    return {
        "total_data_file_rows": str(rows),
        "total_data_files": str(files),
        "total_deletion_file_rows": str(deleted),
        "total_deletion_files": str(deletions),
        "total_files_size": str(size),
        "total_fragments": str(fragments),
        "total_rows": str(rows - deleted),
    }


def _local_datetime(ns: int) -> dt.datetime:
    """Naive local time as pylance computes it: whole seconds plus microseconds, both taken from the
    nanoseconds as a float (so its last microsecond can differ from exact truncation)."""
    as_float = float(ns)
    return dt.datetime.fromtimestamp(as_float // 1e9) + dt.timedelta(microseconds=(as_float % 1e9) // 1e3)


def versions(store: ObjectStore, root: str) -> list[dict[str, Any]]:
    """pylance's ``versions()``: ``{"version", "timestamp" (naive local datetime), "metadata"}`` each.

    Only each manifest's protobuf is decoded (:func:`~lance_ops.table.commit.load_manifest_pbs`):
    the version, the timestamp and the counts of :func:`summary` come straight from it.
    """
    return [
        {
            "version": pb.version,
            "timestamp": _local_datetime(_timestamp_ns(pb)),
            "metadata": _summary(manifest_pb_totals(pb, data, path), len(pb.fragments)),
        }
        for path, data, pb in load_manifest_pbs(store, root)
    ]


def _timestamp_ns(pb: ManifestPb) -> int:
    return pb.timestamp.seconds * 1_000_000_000 + pb.timestamp.nanos


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


def _transaction_bytes(
    store: ObjectStore, root: str, path: str, data: bytes, pb: ManifestPb
) -> tuple[str, bytes] | None:
    """Where the version's transaction is (as :func:`load_transaction` finds it) and its bytes;
    None when it has none."""
    if pb.HasField("transaction_section_position"):
        section: int | None = pb.transaction_section_position
    elif pb.HasField("transaction_section"):
        section = pb.transaction_section
    else:
        section = None
    if section is not None:
        return path, read_section(data, section, path, "transaction section")
    if pb.transaction_file:
        name = check_relative_path(pb.transaction_file, "transaction")
        txn = store.join(root, TRANSACTIONS_DIR, name)
        return txn, store.read(txn)
    return None


def _transaction_head(
    store: ObjectStore, root: str, path: str, data: bytes, pb: ManifestPb
) -> tuple[str, TransactionHead] | None:
    """The name of the version's operation and its transaction's head (read version, properties:
    the operation's body is not decoded); None when absent or of an operation this library cannot
    decode."""
    found = _transaction_bytes(store, root, path, data, pb)
    if found is None:
        return None
    where, raw = found
    try:
        head = transaction_head(raw)
    except Exception as exc:  # protobuf's DecodeError
        raise CorruptFileError(where, f"undecodable transaction: {exc}") from exc
    operation = OPERATIONS.get(head.operation or "")
    if operation is None or head.merges_mem_wal:
        return None  # what Transaction.deserialize refuses as unsupported
    return operation.__name__, head


def _row(store: ObjectStore, root: str, path: str, data: bytes, pb: ManifestPb) -> dict[str, Any]:
    rows, deleted, deletions, files, size = manifest_pb_totals(pb, data, path)
    found = _transaction_head(store, root, path, data, pb)
    name, head = found if found is not None else (None, None)
    properties = head.properties if head is not None else {}
    return {
        "version": pb.version,
        "timestamp": _timestamp_ns(pb),
        "operation": name,
        "read_version": None if head is None else head.read_version,
        "commit_message": properties.get(COMMIT_MESSAGE_KEY),
        "transaction_properties": list(properties.items()),
        "rows": rows - deleted,
        "deleted_rows": deleted,
        "fragments": len(pb.fragments),
        "data_files": files,
        "deletion_files": deletions,
        "bytes": size,
    }


def history(store: ObjectStore, root: str) -> pa.Table:
    """One row per version, oldest first (columns: :data:`HISTORY_SCHEMA`)."""
    rows = [_row(store, root, path, data, pb) for path, data, pb in load_manifest_pbs(store, root)]
    return pa.Table.from_pylist(rows, schema=HISTORY_SCHEMA)


def restore(location: Location, version: int, options: CommitOptions) -> tuple[Manifest, Transaction]:
    """Commit ``Restore(version)`` on top of the latest version (an unknown version raises first);
    ``location`` is the dataset's storage context, or its URI (opened with ``options.storage_options``)."""
    storage = StorageContext.of(location, options.storage_options)
    load_manifest(storage.store, storage.root, version)
    return commit(storage, Restore(version), replace(options, read_version=None))
