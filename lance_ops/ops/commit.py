"""Committing one operation (or a prepared transaction) to a dataset; returns the manifest written."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, fields, replace
from typing import Any

from lance_ops.encoding.api import FileVersion
from lance_ops.errors import InvalidArgumentError, InvalidOptionError
from lance_ops.io.context import Location, StorageContext
from lance_ops.ops import auto_cleanup
from lance_ops.table.commit import (
    NewDatasetSettings,
    VersionEntry,
    commit_detached,
    commit_handler,
    commit_recorded,
    list_versions,
)
from lance_ops.table.dynamodb_store import manifest_store_for_uri
from lance_ops.table.manifest import Manifest
from lance_ops.table.manifest_store import ExternalManifestStore
from lance_ops.table.naming import ManifestNamingScheme
from lance_ops.table.transaction import COMMIT_MESSAGE_KEY, Operation, Overwrite, Restore, Transaction


@dataclass(frozen=True)
class CommitOptions:
    """How to commit: the version read, retries, a lock for stores without atomic create or an
    external manifest store, the transaction's properties, and the settings that only matter when
    the commit creates the dataset. ``storage_options`` only serve a commit given the dataset's
    URI (an entry point); a commit given the dataset's storage context uses the context's.

    Public as ``lance_ops.CommitOptions`` (delta-rs's ``CommitProperties`` is the model): the Spark
    jobs take ``commit=CommitOptions(...)`` beside their keyword forms (:meth:`of` joins the two).
    """

    read_version: int | None = None
    storage_options: Mapping[str, str] | None = field(default=None, hash=False)
    commit_lock: Callable[[int], AbstractContextManager[object]] | None = None
    max_retries: int = 20
    commit_message: str | None = None
    transaction_properties: Mapping[str, str] | None = field(default=None, hash=False)
    enable_v2_manifest_paths: bool | None = None
    enable_stable_row_ids: bool = False
    data_storage_version: str | None = None
    detached: bool = False
    manifest_store: ExternalManifestStore | None = field(default=None, hash=False)
    new_dataset_config: Mapping[str, str] | None = field(default=None, hash=False)
    conflict_check: Callable[[Transaction, int], None] | None = field(default=None, hash=False)

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise InvalidOptionError(f"max_retries must not be negative, not {self.max_retries}")
        if self.read_version is not None and self.read_version < 0:
            raise InvalidOptionError(f"read_version must be a version number, not {self.read_version}")

    @classmethod
    def of(cls, commit: CommitOptions | None = None, **keywords: Any) -> CommitOptions:
        """``commit`` with the keyword forms (pylance's ``storage_options=``, ``commit_message=``,
        ...) given beside it filled in; keywords left None are not given. A field given both ways
        with different values is refused (:class:`~lance_ops.errors.InvalidArgumentError`)."""
        base = commit or cls()
        given = {name: value for name, value in keywords.items() if value is not None}
        unknown = set(given) - {f.name for f in fields(cls)}
        if unknown:
            raise TypeError(f"unknown commit options {sorted(unknown)}")
        default = cls()
        twice = sorted(
            name
            for name, value in given.items()
            if getattr(base, name) not in (getattr(default, name), value)
        )
        if twice:
            raise InvalidArgumentError(f"commit options given both as keywords and in commit=: {twice}")
        return replace(base, **given) if given else base


def _fragments_version(operation: Operation) -> str:
    """Data format of a new dataset: that of the operation's data files, else the default."""
    for fragment in getattr(operation, "fragments", ()):
        for data_file in fragment.files:
            return data_file.file_version
    return str(FileVersion.parse("stable"))


def check_read_version(operation: Operation | Transaction, read_version: int | None) -> None:
    """pylance's rule for ``LanceDataset.commit``: an operation other than ``Overwrite`` and
    ``Restore`` names the version it was built on (a ``Transaction`` carries its own)."""
    if (
        read_version is None
        and isinstance(operation, Operation)
        and not isinstance(operation, Overwrite | Restore)
    ):
        raise InvalidArgumentError("read_version is required for all operations except Overwrite and Restore")


def transaction_for(
    operation: Operation, storage: StorageContext, options: CommitOptions
) -> tuple[Transaction, list[VersionEntry] | None]:
    """``operation`` as a transaction on ``options.read_version`` (default: the latest version),
    and the listing of versions that found the latest (None when the version was given)."""
    read_version = options.read_version
    entries = None
    if read_version is None:
        entries = list_versions(storage.store, storage.root)
        read_version = entries[-1].version if entries else 0
    properties = dict(options.transaction_properties or {})
    if options.commit_message is not None:
        properties[COMMIT_MESSAGE_KEY] = options.commit_message
    return Transaction(read_version=read_version, operation=operation, properties=properties), entries


def commit(
    location: Location, operation: Operation | Transaction, options: CommitOptions
) -> tuple[Manifest, Transaction]:
    """Commit ``operation`` to the dataset at ``location`` (its storage context, or its URI opened
    with ``options.storage_options``); returns the manifest written and the transaction recorded
    with it (the submitted one rebased over concurrent commits, if it was).

    ``enable_stable_row_ids``, ``enable_v2_manifest_paths`` and ``data_storage_version`` only
    matter when the commit creates the dataset (the file version defaults to that of the
    operation's data files). ``commit_lock(version)`` is a context manager guarding the claim
    of a version, for stores without an atomic create; an ``s3+ddb://`` URI commits through its
    DynamoDB table unless another ``manifest_store`` is given. A commit may be followed by the automatic
    cleanup the dataset's config asks for (:mod:`lance_ops.ops.auto_cleanup`). ``detached=True``
    writes a version outside the main line (:func:`lance_ops.table.commit.commit_detached`).
    """
    storage = StorageContext.of(location, options.storage_options)
    transaction, listed = (
        (operation, None)
        if isinstance(operation, Transaction)
        else transaction_for(operation, storage, options)
    )
    if options.detached:
        detached = commit_detached(storage.store, storage.root, transaction, max_retries=options.max_retries)
        return detached.manifest, detached.transaction
    settings = NewDatasetSettings(
        data_storage_version=(
            str(FileVersion.parse(options.data_storage_version))
            if options.data_storage_version
            else _fragments_version(transaction.operation)
        ),
        enable_stable_row_ids=options.enable_stable_row_ids,
        naming=(
            ManifestNamingScheme.V1 if options.enable_v2_manifest_paths is False else ManifestNamingScheme.V2
        ),
        overwrite_version=(
            str(FileVersion.parse(options.data_storage_version)) if options.data_storage_version else None
        ),
    )
    manifest_store = options.manifest_store or manifest_store_for_uri(storage.uri, storage.storage_options)
    committed = commit_recorded(
        storage.store,
        storage.root,
        transaction,
        handler=commit_handler(manifest_store, options.commit_lock),
        max_retries=options.max_retries,
        settings=settings,
        conflict_check=options.conflict_check,
        # An external store's handler repairs unfinished versions before listing: it lists itself.
        listed=listed if manifest_store is None else None,
    )
    auto_cleanup.after_commit(storage.store, storage.root, committed.manifest)
    return committed.manifest, committed.transaction
