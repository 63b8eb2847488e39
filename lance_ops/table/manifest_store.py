"""External manifest stores: committing through a database that maps versions to manifest paths.

For object stores without an atomic create, the commit point can live outside the store (pylance
uses DynamoDB; spec section 6.7). The store maps ``(base_uri, version)`` to the path of that version's
manifest (relative to the dataset root) and offers two conditional writes. A commit of version ``v``:

1. writes the manifest to a *staging* object ``_versions/{final name}-{uuid}`` (hyphenated, as
   pylance names it; ignored by listings, which only take names ending in ``.manifest``);
2. ``put_if_not_exists(base_uri, v, staging path)``: the commit point. Failure means another writer
   claimed ``v`` first (the staging object is deleted and the commit retries);
3. copies the staging object to ``_versions/{final name}`` (create-if-absent: a repairing reader
   may have copied it already; if a writer that bypasses the store wrote another manifest there,
   that one stands and the commit retries on top of it);
4. ``put_if_exists(base_uri, v, final path)`` and deletes the staging object.

A writer killed between 2 and 3 leaves a version that is claimed but invisible to listings. Readers
and committers opening a dataset through the store first *repair* it: if the store's latest record
still names a staging object, they perform steps 3-4 themselves. Only the latest version can be in
that state, because a commit always builds on the listed latest version and claims the one after
it. Readers that bypass the store see every finalised version and may lag by that one.

:class:`SqliteManifestStore` is an implementation several processes share: one SQLite database file
in WAL mode (readers never block the writer) with a busy timeout, a connection per call (so the
store pickles to Spark executors and forked workers as just its path). A database that cannot be
opened or used (missing directory, not a SQLite file, locked past the timeout) raises
:class:`~lance_ops.errors.StorageError` naming it.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass

from lance_ops.errors import CorruptFileError, StorageError
from lance_ops.io import ObjectStore
from lance_ops.table.naming import MANIFEST_SUFFIX, VERSIONS_DIR

__all__ = ["ExternalManifestStore", "ManifestRecord", "SqliteManifestStore", "repair", "stage_and_claim"]


@dataclass(frozen=True)
class ManifestRecord:
    """One version in an external store: its manifest's path (relative to the root) and size."""

    version: int
    path: str
    size: int

    @property
    def is_staged(self) -> bool:
        """Claimed but not yet copied to its final name."""
        return not self.path.endswith(MANIFEST_SUFFIX)

    @property
    def final_path(self) -> str:
        """The manifest's own name: a staging path ``{final}-{uuid}`` (any uuid spelling) cut back."""
        if not self.is_staged:
            return self.path
        cut = self.path.rfind(MANIFEST_SUFFIX + "-")
        if cut < 0:
            raise CorruptFileError(self.path, f"version {self.version} names no manifest")
        return self.path[: cut + len(MANIFEST_SUFFIX)]


class ExternalManifestStore(ABC):
    """``(base_uri, version) -> manifest path`` with conditional puts (spec section 6.7)."""

    @abstractmethod
    def get(self, base_uri: str, version: int) -> ManifestRecord | None:
        """The record of ``version``, None if it was never claimed."""

    @abstractmethod
    def get_latest(self, base_uri: str) -> ManifestRecord | None:
        """The record of the highest claimed version, None if none was."""

    @abstractmethod
    def put_if_not_exists(self, base_uri: str, version: int, path: str, size: int) -> bool:
        """Claim ``version`` (the commit point); False if it is already claimed."""

    @abstractmethod
    def put_if_exists(self, base_uri: str, version: int, path: str, size: int) -> bool:
        """Re-point a claimed ``version`` (at its final manifest); False if it was never claimed."""


_SCHEMA = """
CREATE TABLE IF NOT EXISTS lance_manifests (
    base_uri TEXT NOT NULL,
    version INTEGER NOT NULL,
    path TEXT NOT NULL,
    size INTEGER NOT NULL,
    PRIMARY KEY (base_uri, version)
)
"""


class SqliteManifestStore(ExternalManifestStore):
    """An external manifest store in a SQLite database file shared by processes on one host.

    ``busy_timeout`` (seconds) is how long a call waits for another process's write lock.
    """

    def __init__(self, path: str | os.PathLike[str], busy_timeout: float = 30.0) -> None:
        self.path = os.fspath(path)
        self.busy_timeout = busy_timeout
        with self._connect() as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(_SCHEMA)

    def __repr__(self) -> str:
        return f"SqliteManifestStore({self.path!r})"

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        try:
            connection = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None)
            with closing(connection) as db:
                db.execute(f"PRAGMA busy_timeout={int(self.busy_timeout * 1000)}")
                yield db
        except sqlite3.Error as exc:
            raise StorageError(f"manifest store {self.path}: {exc}") from exc

    def _one(self, query: str, *args: object) -> ManifestRecord | None:
        with self._connect() as db:
            row = db.execute(query, args).fetchone()
        return None if row is None else ManifestRecord(int(row[0]), str(row[1]), int(row[2]))

    def get(self, base_uri: str, version: int) -> ManifestRecord | None:
        return self._one(
            "SELECT version, path, size FROM lance_manifests WHERE base_uri = ? AND version = ?",
            base_uri,
            version,
        )

    def get_latest(self, base_uri: str) -> ManifestRecord | None:
        return self._one(
            "SELECT version, path, size FROM lance_manifests WHERE base_uri = ? "
            "ORDER BY version DESC LIMIT 1",
            base_uri,
        )

    def put_if_not_exists(self, base_uri: str, version: int, path: str, size: int) -> bool:
        with self._connect() as db:
            cursor = db.execute(
                "INSERT INTO lance_manifests (base_uri, version, path, size) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (base_uri, version) DO NOTHING",
                (base_uri, version, path, size),
            )
            return cursor.rowcount == 1

    def put_if_exists(self, base_uri: str, version: int, path: str, size: int) -> bool:
        with self._connect() as db:
            cursor = db.execute(
                "UPDATE lance_manifests SET path = ?, size = ? WHERE base_uri = ? AND version = ?",
                (path, size, base_uri, version),
            )
            return cursor.rowcount == 1


def _finalise(
    store: ObjectStore, root: str, manifests: ExternalManifestStore, record: ManifestRecord
) -> bool:
    """Steps 3-4: copy a staged manifest to its final name, re-point the record, drop the staging copy.

    False when the final name already held another manifest (a writer that bypassed the store took
    the version): the record then names that manifest, which is what every reader sees.
    """
    staging = store.join(root, record.path)
    try:
        data = store.read(staging)
    except FileNotFoundError:
        # Another process finalised it meanwhile (and removed the staging copy).
        current = manifests.get(root, record.version)
        if current is not None and not current.is_staged:
            return True
        raise CorruptFileError(
            staging, f"version {record.version} is claimed but its manifest is missing"
        ) from None
    final = store.join(root, record.final_path)
    # The commit point is the external store: the copy needs no atomic create (the store may lack
    # one). An equal file there is a repairing reader's copy.
    ours = store.put_if_absent(final, data, require_atomic=False) or store.read(final) == data
    size = len(data) if ours else store.size(final)
    manifests.put_if_exists(root, record.version, record.final_path, size)
    store.delete(staging)
    return ours


def repair(store: ObjectStore, root: str, manifests: ExternalManifestStore) -> None:
    """Finish the latest version's commit if its writer stopped between claim and copy."""
    latest = manifests.get_latest(root)
    if latest is not None and latest.is_staged:
        _finalise(store, root, manifests, latest)


def stage_and_claim(
    store: ObjectStore, root: str, manifests: ExternalManifestStore, name: str, data: bytes, version: int
) -> bool:
    """Commit manifest ``name`` (a file name in ``_versions/``) of ``version``; False if taken."""
    staged = ManifestRecord(version, f"{VERSIONS_DIR}/{name}-{uuid.uuid4()}", len(data))
    store.write(store.join(root, staged.path), data)
    if not manifests.put_if_not_exists(root, version, staged.path, staged.size):
        store.delete(store.join(root, staged.path))
        return False
    return _finalise(store, root, manifests, staged)
