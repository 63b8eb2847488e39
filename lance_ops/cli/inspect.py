"""What ``lance-ops inspect`` knows about files and datasets, as plain dicts.

A data file: its format version, rows, schema and per physical column its bytes, encodings and
(on request) pages (:func:`lance_ops.file.describe.file_report`). A dataset: its version, schema,
versions, fragments with data files and deletion files (with ``pages``, each data file's columns).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lance_ops.dataset import LanceDataset
from lance_ops.dataset_report import data_file_uri
from lance_ops.errors import DatasetNotFoundError
from lance_ops.file import FileReader
from lance_ops.file import open_file as open_lance_file
from lance_ops.file.describe import file_report, schema_rows
from lance_ops.io import object_store
from lance_ops.table.commit import list_versions
from lance_ops.table.naming import DATA_DIR, VERSIONS_DIR


def is_dataset(uri: str, storage_options: Mapping[str, str] | None) -> bool:
    store, path = object_store(uri, storage_options)
    return bool(store.list(store.join(path, VERSIONS_DIR)))


def open_file(path: str, storage_options: Mapping[str, str] | None) -> FileReader:
    """The data file at ``path``; :class:`DatasetNotFoundError` when nothing is there."""
    store, location = object_store(path, storage_options)
    if not store.exists(location):
        raise DatasetNotFoundError(f"no Lance file or dataset at {path}")
    return open_lance_file(location, store=store)


def version_rows(ds: LanceDataset) -> list[dict[str, Any]]:
    """One row per version: timestamp, rows, fragments, data files, deleted rows, bytes."""
    rows = []
    for info in ds.versions():
        summary = info["metadata"]
        rows.append(
            {
                "version": info["version"],
                "timestamp": info["timestamp"].isoformat(sep=" ", timespec="seconds"),
                "rows": int(summary["total_rows"]),
                "fragments": int(summary["total_fragments"]),
                "data_files": int(summary["total_data_files"]),
                "deleted_rows": int(summary["total_deletion_file_rows"]),
                "bytes": int(summary["total_files_size"]),
            }
        )
    return rows


def dataset_report(ds: LanceDataset, pages: bool = False) -> dict[str, Any]:
    """A dataset version: versions, schema, fragments with their files (with ``pages``, each data
    file's columns and pages as :func:`file_report` gives them)."""
    fragments = []
    for fragment in ds.get_fragments():
        deletion = fragment.metadata.deletion_file
        files = []
        for data_file in fragment.data_files():
            entry: dict[str, Any] = {
                "path": f"{DATA_DIR}/{data_file.path}",
                "version": f"{data_file.file_major_version}.{data_file.file_minor_version}",
                "bytes": data_file.file_size_bytes,
                "fields": list(data_file.fields),
            }
            if pages:
                uri = data_file_uri(ds, data_file.path)
                reader = open_lance_file(uri, storage_options=ds.storage_options)
                entry["columns"] = file_report(uri, reader)["columns"]
            files.append(entry)
        fragments.append(
            {
                "id": fragment.fragment_id,
                "rows": fragment.count_rows(),
                "physical_rows": fragment.metadata.physical_rows,
                "files": files,
                "deletion_file": fragment.deletion_file(),
                "deleted_rows": 0 if deletion is None else deletion.num_deleted_rows,
            }
        )
    return {
        "uri": ds.uri,
        "kind": "dataset",
        "version": ds.version,
        "latest_version": ds.latest_version,
        "data_storage_version": ds.data_storage_version,
        "stable_row_ids": ds.has_stable_row_ids,
        "rows": ds.count_rows(),
        "schema": schema_rows(ds.schema),
        "versions": [entry.version for entry in list_versions(ds.storage.store, ds.storage.root)],
        "fragments": fragments,
    }
