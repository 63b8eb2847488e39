"""``apply_operation`` replays pylance's own history: manifest v-1 + transaction v == manifest v."""

from __future__ import annotations

from dataclasses import replace

import pytest

from lance_ops.errors import UnsupportedFeatureError
from lance_ops.io import object_store
from lance_ops.table.apply import ApplyContext, apply_operation, build_manifest
from lance_ops.table.commit import (
    NewDatasetSettings,
    empty_manifest,
    list_versions,
    load_manifest,
    load_transaction,
)
from lance_ops.table.manifest import DataFile, DataFragment, Manifest
from lance_ops.table.schema import LanceSchema
from lance_ops.table.transaction import Append, Clone, Transaction

STAMPS = ("timestamp_ns", "writer_version", "transaction_file", "transaction_section", "index_section")


def _content(manifest: Manifest) -> Manifest:
    return replace(manifest, **dict.fromkeys(STAMPS))


@pytest.mark.interop
def test_replaying_pylance_transactions_rebuilds_its_manifests(pylance_history: dict[str, str]) -> None:
    replayed = set()
    for root_uri in pylance_history.values():
        store, root = object_store(root_uri)
        entries = list_versions(store, root)
        first = load_manifest(store, root, entries[0].version).manifest
        settings = NewDatasetSettings(
            data_storage_version=first.data_storage_version,
            enable_stable_row_ids=first.uses_stable_row_ids,
            naming=entries[0].scheme,
        )
        for previous, current in zip([None, *entries], entries, strict=False):
            base = (
                empty_manifest(settings)
                if previous is None
                else load_manifest(store, root, previous.version).manifest
            )
            loaded = load_manifest(store, root, current.version)
            transaction = load_transaction(store, root, loaded)
            assert transaction is not None
            built = build_manifest(
                base,
                transaction,
                version=current.version,
                timestamp_ns=loaded.manifest.timestamp_ns,
                writer_version=loaded.manifest.writer_version,
                load_version=lambda v, store=store, root=root: load_manifest(store, root, v).manifest,
            )
            expected = loaded.manifest
            assert built.transaction_file == expected.transaction_file
            assert _content(built) == _content(expected), (root_uri, current.version)
            replayed.add(transaction.operation.name)
    assert {"Append", "Overwrite", "Delete", "Update", "Merge", "Project", "UpdateConfig"} <= replayed
    assert {"ReserveFragments", "Rewrite", "Restore", "CreateIndex"} <= replayed


def test_fragment_ids_and_unsupported_operations() -> None:
    base = Manifest(schema=LanceSchema(()), fragments=(), version=1)
    ctx = ApplyContext(version=2)
    new = DataFragment(0, (DataFile("a", (0,), (0,), 2, 2),), 3)
    transaction = Transaction(1, Append((new, new)))
    built = build_manifest(base, transaction, version=2, timestamp_ns=0, writer_version=None)  # type: ignore[arg-type]
    assert [f.id for f in built.fragments] == [0, 1] and built.max_fragment_id == 1
    with pytest.raises(UnsupportedFeatureError):
        apply_operation(Clone(True, 1, "/x"), base, ctx)
