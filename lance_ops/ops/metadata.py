"""Editing a dataset's config and metadata: one ``UpdateConfig`` transaction per call.

Four maps can change, each as pylance 14 records it (an ``UpdateMap`` of key -> value, a missing
value deleting the key, ``replace`` dropping the keys not given):

* the table config (``lance.auto_cleanup.*``, ``lance.compaction.*``, user keys),
* the table metadata (``ds.metadata``),
* the schema metadata (``ds.schema.metadata``),
* the metadata of single fields, addressed by dotted path and recorded by field id.

Data files are untouched; the new manifest differs from the one read only in those maps.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from lance_ops.io.context import StorageContext
from lance_ops.ops.commit import CommitOptions, commit
from lance_ops.table.manifest import Manifest
from lance_ops.table.schema import LanceSchema
from lance_ops.table.transaction import Transaction, UpdateConfig, UpdateMap

__all__ = ["delete_keys", "field_updates", "update", "update_map"]


def update_map(values: Mapping[str, str | None], replace: bool = False) -> UpdateMap:
    """The edits ``values`` (None deletes a key) as an ``UpdateMap``."""
    entries = []
    for key, value in values.items():
        if not isinstance(key, str) or not (value is None or isinstance(value, str)):
            raise TypeError(f"config and metadata keys and values must be strings, not {key!r}: {value!r}")
        entries.append((key, value))
    return UpdateMap(tuple(entries), replace)


def delete_keys(keys: Iterable[str]) -> UpdateMap:
    return UpdateMap(tuple((key, None) for key in keys))


def update(
    storage: StorageContext, manifest: Manifest, edit: UpdateConfig, options: CommitOptions
) -> tuple[Manifest, Transaction]:
    """Commit ``edit`` on the version ``manifest`` (field paths already resolved to ids)."""
    return commit(storage, edit, replace(options, read_version=manifest.version))


def field_updates(
    schema: LanceSchema, updates: Mapping[str, Mapping[str, str | None]], replace: bool = False
) -> dict[int, UpdateMap]:
    """Field path -> metadata edits, as field id -> ``UpdateMap`` (unknown paths raise first)."""
    return {schema.field_at(path).id: update_map(values, replace) for path, values in updates.items()}
