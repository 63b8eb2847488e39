"""Committing transactions, listing versions and loading manifests.

A commit of transaction ``T`` (built on ``T.read_version``) does, as pylance 14 does:

1. write ``_transactions/{read_version}-{uuid}.txn`` (raw Transaction bytes), once;
2. list ``_versions/``; for every version newer than ``read_version`` load its transaction (inline
   section first, else its ``.txn`` file) and check ``T`` against it
   (:mod:`lance_ops.table.conflicts`): a conflict raises, a compatible one is rebased over (new
   fragment ids are simply assigned from the latest ``max_fragment_id``); a Delete sharing
   fragments with a concurrent Delete is rebased by unioning the two deletion vectors
   (:func:`lance_ops.table.deletion.rebase_delete`), a Rewrite over a Delete of rows it moved
   carries those deletions into its new fragments when row ids are stable
   (:func:`lance_ops.table.rewrite_rebase.carry_delete`), and its transaction file is rewritten;
   a Delete or Update committed over newer versions is recorded as read on the latest of them
   (pylance 14 does so for these two operations only; its ``.txn`` is renamed to match);
3. build the manifest of ``latest + 1`` from the latest manifest and ``T``
   (:func:`lance_ops.table.apply.build_manifest`), check that its new data files hold every
   non-nullable field without nulls (:mod:`lance_ops.table.write_guard`; a failure removes the
   ``.txn`` file and raises), frame it with ``T`` inline, and *claim* its name with the commit
   handler, an atomic create-if-absent;
4. on success replace ``_versions/latest_version_hint.json`` with ``{"version":N}`` (never trusted
   on read; not on object stores, where pylance 14 keeps none); if another writer claimed that
   version first, back off and go to 2, at most ``max_retries`` times.

Requests: a listing of ``_versions/`` and the latest manifest per attempt (a caller that has just
listed passes its listing for the first attempt; a manifest read for its transaction is not read
again as the base), the ``.txn`` and the claim, and a listing after a won claim (see
:func:`_claimed_late`).

Commit handlers are chosen by storage capability (:func:`commit_handler`):
:class:`ExternalManifestCommitHandler` when an external manifest store is given (the commit point is
that store's conditional put, :mod:`lance_ops.table.manifest_store`; before every attempt the handler
repairs a version claimed but not copied); :class:`LockCommitHandler` for a user lock around
check-then-write; otherwise :class:`PutIfAbsentCommitHandler`, the io layer's atomic create (a hard
link on local disks, a conditional put / exclusive create on memory and fsspec object stores).

Backoff: attempt ``k`` (1-based) sleeps a random number of 50 ms slots in ``[0, 2**(k+2))``,
the exponent capped at 6.
"""

from __future__ import annotations

import functools
import json
import os
import random
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import NamedTuple, TypeVar

from lance_ops._proto import table_pb2
from lance_ops.errors import (
    CommitConflictError,
    CommitLockError,
    CorruptFileError,
    DatasetNotFoundError,
    DetachedCommitError,
    RetryableCommitConflictError,
    UnsupportedFeatureError,
    VersionNotFoundError,
    WriteSchemaError,
)
from lance_ops.io import ObjectStore
from lance_ops.table.apply import build_manifest
from lance_ops.table.conflicts import RETRY, check_conflict, verdict
from lance_ops.table.deletion import can_rebase, rebase_delete
from lance_ops.table.legacy_dictionaries import with_legacy_dictionaries
from lance_ops.table.manifest import (
    FLAG_STABLE_ROW_IDS,
    DataStorageFormat,
    Manifest,
    WriterVersion,
    check_reader_flags,
    check_writer_flags,
    decode_manifest_file,
    decode_manifest_pb,
    frame_manifest,
)
from lance_ops.table.manifest_store import ExternalManifestStore, repair, stage_and_claim
from lance_ops.table.naming import (
    DETACHED_VERSION_BIT,
    MANIFEST_SUFFIX,
    TRANSACTIONS_DIR,
    U64_MAX,
    V2_DIGITS,
    VERSION_HINT_FILE,
    VERSIONS_DIR,
    ManifestNamingScheme,
)
from lance_ops.table.rewrite_rebase import as_delete, can_carry, can_follow, carry_delete, follow_rewrite
from lance_ops.table.schema import LanceSchema
from lance_ops.table.transaction import Delete, Overwrite, Rewrite, Transaction, Update
from lance_ops.table.write_guard import NullCountCache, check_file_families, check_new_fragments

# pylance 14 gates compatibility work-arounds on the writer's semantic version (manifests without
# one, or from old versions, get e.g. their physical row counts recomputed). We therefore declare
# the core version of the format level we write (pylance 14.0.2's) and name ourselves in the semver
# build metadata, which version comparisons ignore.
WRITER_VERSION = WriterVersion(library="lance", version="14.0.2", build_metadata="lance-ops.0.1.0")

_SLOT_SECONDS = 0.05
_MAX_BACKOFF_EXPONENT = 6


class CommitHandler(ABC):
    """Claims a manifest name atomically: exactly one of several racing writers succeeds."""

    @abstractmethod
    def claim(self, store: ObjectStore, path: str, data: bytes, version: int) -> bool:
        """Create ``path`` with ``data`` unless it exists; True if this call created it."""

    def prepare(self, store: ObjectStore, root: str) -> None:  # noqa: B027 (optional hook)
        """Bring the dataset's listing up to date before an attempt (nothing to do by default)."""


class PutIfAbsentCommitHandler(CommitHandler):
    """Stores with an atomic create (local link, conditional put)."""

    def claim(self, store: ObjectStore, path: str, data: bytes, version: int) -> bool:
        return store.put_if_absent(path, data)


class LockCommitHandler(CommitHandler):
    """Stores without an atomic create: ``lock(version)`` guards an exists-check and a write. An
    error the lock raises (entering or leaving) becomes :class:`CommitLockError` (an ``OSError``,
    as pylance's), chained to it; the manifest may then be written already, as in pylance."""

    def __init__(self, lock: Callable[[int], AbstractContextManager[object]]) -> None:
        self._lock = lock

    def claim(self, store: ObjectStore, path: str, data: bytes, version: int) -> bool:
        store_error: Exception | None = None
        try:
            with self._lock(version):
                try:
                    claimed = not store.exists(path)
                    if claimed:
                        store.write(path, data)
                except Exception as exc:
                    store_error = exc
                    raise
        except Exception as exc:
            if exc is store_error:
                raise
            raise CommitLockError(f"Error from commit handler: {type(exc).__name__}: {exc}") from exc
        return claimed


class ExternalManifestCommitHandler(CommitHandler):
    """The external manifest store protocol (spec section 6.7): stage, claim in the store, copy, finalise."""

    def __init__(self, manifests: ExternalManifestStore) -> None:
        self.manifests = manifests

    def claim(self, store: ObjectStore, path: str, data: bytes, version: int) -> bool:
        versions_dir, name = path.rsplit("/", 1)
        root = versions_dir.rsplit("/", 1)[0]
        return stage_and_claim(store, root, self.manifests, name, data, version)

    def prepare(self, store: ObjectStore, root: str) -> None:
        repair(store, root, self.manifests)


def commit_handler(
    manifest_store: ExternalManifestStore | None = None,
    commit_lock: Callable[[int], AbstractContextManager[object]] | None = None,
) -> CommitHandler:
    """The handler for a commit: the external store if given, else the lock, else atomic create."""
    if manifest_store is not None:
        return ExternalManifestCommitHandler(manifest_store)
    if commit_lock is not None:
        return LockCommitHandler(commit_lock)
    return PutIfAbsentCommitHandler()


class VersionEntry(NamedTuple):
    """A main-line manifest found in ``_versions/`` (a tuple: one per version of a long history)."""

    version: int
    name: str
    scheme: ManifestNamingScheme


@dataclass(frozen=True)
class LoadedManifest:
    """A manifest with where it came from and its inline transaction bytes."""

    manifest: Manifest
    path: str
    size: int
    transaction: bytes | None


@dataclass(frozen=True)
class Committed:
    """What a commit wrote: the new version's manifest and the transaction recorded with it (the
    submitted one, or its rebase over concurrent commits)."""

    manifest: Manifest
    transaction: Transaction


@dataclass(frozen=True)
class NewDatasetSettings:
    """Settings that only matter for the commit creating a dataset; and ``overwrite_version``,
    the data file version an ``Overwrite`` gives an existing dataset when the writer asked for one
    (pylance's rule; None keeps the dataset's)."""

    data_storage_version: str = "2.2"
    enable_stable_row_ids: bool = False
    naming: ManifestNamingScheme = ManifestNamingScheme.V2
    overwrite_version: str | None = None


def list_versions(store: ObjectStore, root: str) -> list[VersionEntry]:
    """Main-line versions, ascending. Mixed naming schemes are refused, as pylance does."""
    directory = store.join(root, VERSIONS_DIR)
    return version_entries(store.list_names(directory), directory)


def version_entries(names: Iterable[str], directory: str) -> list[VersionEntry]:
    """The main-line versions among the file ``names`` of the ``_versions/`` directory, ascending
    (see :func:`list_versions`; for callers that listed the directory themselves)."""
    # What ManifestNamingScheme.parse accepts, for a whole listing at once (50,000 names at scale):
    # a digits-only stem, V2 when it has V2's fixed width (then newest first in name order).
    cut = len(MANIFEST_SUFFIX)
    stems = [name[:-cut] for name in names if name.endswith(MANIFEST_SUFFIX)]
    stems = [stem for stem in stems if stem.isdigit()]
    widths = set(map(len, stems))
    if V2_DIGITS in widths:
        if len(widths) > 1:
            raise CorruptFileError(directory, "found multiple manifest naming schemes in the same directory")
        scheme = ManifestNamingScheme.V2
        stems.sort(reverse=True)
        numbered = [(U64_MAX - int(stem), stem) for stem in stems]
    else:
        scheme = ManifestNamingScheme.V1
        numbered = sorted((int(stem), stem) for stem in stems)
    return [VersionEntry(n, stem + MANIFEST_SUFFIX, scheme) for n, stem in numbered]


def _read_manifest(store: ObjectStore, root: str, entry: VersionEntry) -> LoadedManifest:
    path = store.join(root, VERSIONS_DIR, entry.name)
    data = store.read(path)
    manifest, transaction = decode_manifest_file(data, path)
    return LoadedManifest(manifest, path, len(data), transaction)


def load_entry(store: ObjectStore, root: str, entry: VersionEntry) -> LoadedManifest:
    """The manifest of a version already listed (no second listing), checked as readable."""
    loaded = _read_manifest(store, root, entry)
    check_reader_flags(loaded.manifest.reader_feature_flags, loaded.path)
    return loaded


def _detached_entry(version: int) -> VersionEntry:
    """Where a detached version's manifest is (``_versions/d{version}.manifest``, whatever the
    dataset's naming scheme, as pylance writes it)."""
    return VersionEntry(version, ManifestNamingScheme.V2.manifest_name(version), ManifestNamingScheme.V2)


def load_manifest(store: ObjectStore, root: str, version: int | None = None) -> LoadedManifest:
    """The manifest of ``version`` (latest when None; a detached version is read by its number,
    it is never listed). Raises :class:`DatasetNotFoundError`."""
    if version is not None and version & DETACHED_VERSION_BIT:
        try:
            return load_entry(store, root, _detached_entry(version))
        except FileNotFoundError as exc:
            raise VersionNotFoundError(f"Not found: detached version {version} of dataset {root}") from exc
    entries = list_versions(store, root)
    if not entries:
        raise DatasetNotFoundError(f"no Lance dataset at {root}")
    if version is None:
        entry = entries[-1]
    else:
        match = [e for e in entries if e.version == version]
        if not match:
            raise VersionNotFoundError(f"Not found: version {version} of dataset {root}")
        entry = match[0]
    return load_entry(store, root, entry)


def load_manifests(store: ObjectStore, root: str, *, skip_missing: bool = False) -> Iterator[LoadedManifest]:
    """The manifest of every main-line version, ascending (one listing for all of them).

    ``skip_missing`` passes over a listed manifest that is gone when it is read (a concurrent
    cleanup removed it) instead of raising ``FileNotFoundError``.
    """
    yield from load_entries(store, root, list_versions(store, root), skip_missing=skip_missing)


def load_entries(
    store: ObjectStore, root: str, entries: Iterable[VersionEntry], *, skip_missing: bool = False
) -> Iterator[LoadedManifest]:
    """The manifests of versions already listed, in order (see :func:`load_manifests`)."""
    for entry in entries:
        try:
            yield load_entry(store, root, entry)
        except FileNotFoundError:
            if not skip_missing:
                raise


_R = TypeVar("_R")

# Manifests read ahead of the one being decoded by load_manifest_pbs (object stores: requests in flight).
READ_AHEAD = 16


def load_manifest_pbs(
    store: ObjectStore,
    root: str,
    entries: Iterable[VersionEntry] | None = None,
    *,
    skip_missing: bool = False,
) -> Iterator[tuple[str, bytes, table_pb2.Manifest]]:
    """``(path, file bytes, manifest protobuf)`` of every main-line version (or of ``entries``
    already listed), ascending; :data:`READ_AHEAD` files are read ahead on threads, each decoded
    on the caller's thread and dropped once the next is asked for.

    For readers of a few fields of many versions (``versions()``, ``history()``, cleanup): only
    the protobuf is decoded. An undecodable manifest or one needing reader features this library
    lacks raises, as opening that version does; its paths are not checked here (the caller checks
    any path it reads or writes through). ``skip_missing`` as in :func:`load_manifests`.
    """
    directory = store.join(root, VERSIONS_DIR)
    listed = list_versions(store, root) if entries is None else entries
    paths = [store.join(directory, entry.name) for entry in listed]
    for path, data in zip(paths, _read_ahead(store, paths), strict=True):
        if data is None:
            if not skip_missing:
                raise FileNotFoundError(path)
            continue
        pb = decode_manifest_pb(data, path)
        check_reader_flags(pb.reader_feature_flags, path)
        yield path, data, pb


def _read_or_none(store: ObjectStore, path: str) -> bytes | None:
    try:
        return store.read(path)
    except FileNotFoundError:
        return None


def _read_ahead(store: ObjectStore, paths: list[str]) -> Iterator[bytes | None]:
    """The bytes of ``paths`` in order (None for a missing file), read on threads ahead of the
    caller: on stores where a request is dear (remote ones) up to :data:`READ_AHEAD` reads in
    flight; where it is cheap (local disk, memory: ``whole_file_read_size`` 0) one thread reads
    groups of :data:`READ_AHEAD` files, a group ahead (one hand-over per group, not per file).
    Memory holds at most ``2 * READ_AHEAD`` files either way."""
    if len(paths) < 2:
        yield from (_read_or_none(store, path) for path in paths)
        return
    if store.whole_file_read_size:
        tasks = [functools.partial(_read_or_none, store, path) for path in paths]
        yield from run_in_order(tasks, min(READ_AHEAD, len(paths)))
        return
    groups = [
        functools.partial(_read_group, store, paths[start : start + READ_AHEAD])
        for start in range(0, len(paths), READ_AHEAD)
    ]
    for group in run_in_order(groups, 1):
        yield from group


def _read_group(store: ObjectStore, paths: list[str]) -> list[bytes | None]:
    return [_read_or_none(store, path) for path in paths]


def run_in_order(tasks: Iterable[Callable[[], _R]], workers: int) -> Iterator[_R]:
    """The results of ``tasks`` in order, run on ``workers`` threads, at most ``max(workers, 2)``
    submitted and not yet handed out (one running while the caller has the previous). ``tasks``
    is consumed as results are taken, so a generator can pace the submissions."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        pending: deque[Future[_R]] = deque()
        for task in tasks:
            pending.append(pool.submit(task))
            if len(pending) >= max(workers, 2):
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def load_transaction(store: ObjectStore, root: str, loaded: LoadedManifest) -> Transaction | None:
    """The transaction that created a version (inline copy first, else its ``.txn`` file)."""
    if loaded.transaction is not None:
        return Transaction.deserialize(loaded.transaction, loaded.path)
    if loaded.manifest.transaction_file:
        path = store.join(root, TRANSACTIONS_DIR, loaded.manifest.transaction_file)
        return Transaction.deserialize(store.read(path), path)
    return None


def write_version_hint(store: ObjectStore, root: str, version: int) -> None:
    """Replace ``latest_version_hint.json`` (skipped when ``LANCE_USE_VERSION_HINT`` is 0/false,
    and on stores that keep no hint: object stores, as pylance)."""
    if not store.keeps_version_hint or os.environ.get("LANCE_USE_VERSION_HINT", "").lower() in ("0", "false"):
        return
    hint = json.dumps({"version": version}, separators=(",", ":")).encode()
    store.write(store.join(root, VERSIONS_DIR, VERSION_HINT_FILE), hint)


def empty_manifest(settings: NewDatasetSettings) -> Manifest:
    """The base a dataset-creating commit is applied to (version 0, creation settings only)."""
    flags = FLAG_STABLE_ROW_IDS if settings.enable_stable_row_ids else 0
    return Manifest(
        schema=LanceSchema(()),
        fragments=(),
        version=0,
        data_format=DataStorageFormat("lance", settings.data_storage_version),
        reader_feature_flags=flags,
        writer_feature_flags=flags,
    )


def _their_transaction(
    store: ObjectStore, root: str, loaded: LoadedManifest, entry: VersionEntry
) -> Transaction:
    theirs = load_transaction(store, root, loaded)
    if theirs is None:
        # A version without any transaction is treated as an Overwrite (as pylance does).
        return Transaction(read_version=entry.version - 1, operation=Overwrite((), LanceSchema(())))
    return theirs


def _rebase(
    store: ObjectStore, root: str, ours: Transaction, theirs: Transaction, their_version: int
) -> Transaction | None:
    """``ours`` rebased over ``theirs`` when the matrix's retry can be avoided, else None.

    Two deletes sharing a fragment are merged (deletion vectors unioned), as pylance's ``delete``
    does; a compaction (Rewrite) over a delete or an update carries the deleted rows into its new
    fragments, and an update over a compaction follows it, when row ids are stable
    (:mod:`lance_ops.table.rewrite_rebase`); every other pair goes through
    :func:`check_conflict`.
    """
    mine, other = ours.operation, theirs.operation
    if verdict(mine, other) != RETRY:
        return None
    if isinstance(mine, Update) and isinstance(other, Rewrite) and can_follow(mine, other):
        return replace(ours, operation=follow_rewrite(store, root, mine, other, their_version))
    if isinstance(mine, Rewrite) and isinstance(other, Update):
        other = as_delete(other)
    if not isinstance(other, Delete):
        return None
    if isinstance(mine, Delete) and can_rebase(mine, other):
        return replace(ours, operation=rebase_delete(store, root, mine, other, their_version))
    if isinstance(mine, Rewrite) and can_carry(mine, other):
        return replace(ours, operation=carry_delete(store, root, mine, other, their_version))
    return None


def _on_latest(transaction: Transaction, latest: int) -> Transaction:
    """A Delete / Update committed over newer versions, as pylance 14 records it: read on ``latest``."""
    if isinstance(transaction.operation, Delete | Update) and transaction.read_version < latest:
        return replace(transaction, read_version=latest)
    return transaction


def _files_of(manifest: Manifest) -> set[tuple[object, ...]]:
    """What a commit adds to a manifest, identified: data file paths and deletion files."""
    out: set[tuple[object, ...]] = set()
    for fragment in manifest.fragments:
        out.update(("data", f.base_id, f.path) for f in fragment.files)
        d = fragment.deletion_file
        if d is not None:
            out.add(("deletion", fragment.id, d.read_version, d.id))
    return out


def _claimed_late(store: ObjectStore, root: str, ours: Manifest, base: Manifest) -> bool:
    """Whether the version just claimed with ``ours`` lies in the past: a newer version exists
    that was not built on it. That happens when a cleanup had removed the manifest of an older
    commit holding this version number (its name was free again) while newer versions landed.

    A newer version is also there when another writer committed on top of ours in the meantime;
    it then holds what our commit added (its data and deletion files). Withdrawing in that case
    would leave a gap in the history and apply our commit twice, so only a newest version that
    holds none of our new files counts as "late". A commit adding no files is never late.
    """
    entries = list_versions(store, root)
    if not entries or entries[-1].version <= ours.version:
        return False
    added = _files_of(ours) - _files_of(base)
    if not added:
        return False
    try:
        newest = _read_manifest(store, root, entries[-1]).manifest
    except FileNotFoundError:
        return False  # the newest is never cleaned up; a vanished one was withdrawn: keep ours
    return not (added & _files_of(newest))


def commit_transaction(
    store: ObjectStore,
    root: str,
    transaction: Transaction,
    *,
    handler: CommitHandler | None = None,
    max_retries: int = 20,
    settings: NewDatasetSettings | None = None,
    writer_version: WriterVersion = WRITER_VERSION,
) -> Manifest:
    """Commit ``transaction`` to the dataset at ``root``; returns the new version's manifest
    (:func:`commit_recorded` also returns the transaction recorded with it)."""
    return commit_recorded(
        store,
        root,
        transaction,
        handler=handler,
        max_retries=max_retries,
        settings=settings,
        writer_version=writer_version,
    ).manifest


def commit_detached(
    store: ObjectStore,
    root: str,
    transaction: Transaction,
    *,
    max_retries: int = 20,
    writer_version: WriterVersion = WRITER_VERSION,
) -> Committed:
    """Commit ``transaction`` as a detached version, as pylance's ``commit(detached=True)``.

    The new manifest is ``transaction`` applied to its read version (main-line or detached; nothing
    is rebased: a detached version has no successor to race with), numbered by a random u64 with
    the top bit set and written as ``_versions/d{version}.manifest`` with put-if-absent (a taken
    number draws again). Listings skip ``d`` names, so the version never becomes the latest and
    is reached only by its number (``checkout_version``); no version hint is written. Datasets
    named with V1 manifest paths are refused, as pylance refuses them.
    """
    entries = list_versions(store, root)
    if entries and entries[-1].scheme is ManifestNamingScheme.V1:
        raise DetachedCommitError("detached commits cannot be used with v1 manifest paths")
    base = load_manifest(store, root, transaction.read_version)
    check_writer_flags(base.manifest.writer_feature_flags, base.path)
    payload = transaction.serialize()
    store.write(store.join(root, TRANSACTIONS_DIR, transaction.file_name), payload)
    handler = PutIfAbsentCommitHandler()
    for _ in range(max_retries + 1):
        version = random.getrandbits(64) | DETACHED_VERSION_BIT
        manifest = build_manifest(
            base.manifest,
            transaction,
            version=version,
            timestamp_ns=time.time_ns(),
            writer_version=writer_version,
            load_version=lambda v: load_manifest(store, root, v).manifest,
        )
        check_new_fragments(store, root, base.manifest, manifest, transaction.operation, {})
        framed, data = frame_manifest(manifest, payload)
        path = store.join(root, VERSIONS_DIR, _detached_entry(version).name)
        if handler.claim(store, path, data, version):
            return Committed(framed, transaction)
    raise RetryableCommitConflictError(
        f"no free detached version number for {root} after {max_retries} tries"
    )


def commit_recorded(
    store: ObjectStore,
    root: str,
    transaction: Transaction,
    *,
    handler: CommitHandler | None = None,
    max_retries: int = 20,
    settings: NewDatasetSettings | None = None,
    writer_version: WriterVersion = WRITER_VERSION,
    conflict_check: Callable[[Transaction, int], None] | None = None,
    listed: list[VersionEntry] | None = None,
) -> Committed:
    """Commit ``transaction`` to the dataset at ``root``; returns the new version's manifest and
    the transaction recorded in it (rebased over concurrent commits where that applies).

    ``settings`` apply when the commit creates the dataset; ``conflict_check(theirs, version)``
    is also asked about every concurrent commit (it raises to refuse). ``listed``: the versions the
    caller has just listed (:func:`list_versions`), used for the first attempt instead of listing
    again. Raises :class:`CommitConflictError` for an incompatible concurrent commit,
    :class:`RetryableCommitConflictError` for a retryable one or when every attempt lost the race
    for the next version.
    """
    handler = handler or PutIfAbsentCommitHandler()
    settings = settings or NewDatasetSettings()
    handler.prepare(store, root)
    entries = list_versions(store, root) if listed is None else listed
    if not entries and not isinstance(transaction.operation, Overwrite):
        raise DatasetNotFoundError(f"no Lance dataset at {root} to commit a {transaction.operation.name} to")
    payload = transaction.serialize()
    store.write(store.join(root, TRANSACTIONS_DIR, transaction.file_name), payload)
    written = transaction
    checked: set[int] = set()
    null_counts: NullCountCache = {}
    # Manifests read in the current attempt, by name (a claimed manifest does not change).
    read: dict[str, LoadedManifest] = {}

    def manifest_of(entry: VersionEntry) -> LoadedManifest:
        if entry.name not in read:
            read[entry.name] = _read_manifest(store, root, entry)
        return read[entry.name]

    for attempt in range(max_retries + 1):
        if attempt:
            exponent = min(attempt + 2, _MAX_BACKOFF_EXPONENT)
            time.sleep(random.randrange(2**exponent) * _SLOT_SECONDS)
            handler.prepare(store, root)
            entries = list_versions(store, root)
        read.clear()
        if entries:
            latest = entries[-1]
            if transaction.read_version > latest.version:
                raise CommitConflictError(
                    f"read version {transaction.read_version} is newer than the latest {latest.version}"
                )
            for entry in entries:
                if entry.version > transaction.read_version and entry.version not in checked:
                    try:
                        theirs = _their_transaction(store, root, manifest_of(entry), entry)
                    except FileNotFoundError as exc:
                        raise RetryableCommitConflictError(
                            f"version {entry.version} of {root} was removed (by a cleanup) before this "
                            f"commit could be checked against it; retry from the latest version"
                        ) from exc
                    rebased = _rebase(store, root, transaction, theirs, entry.version)
                    if rebased is None:
                        check_conflict(transaction, theirs, entry.version)
                    else:
                        transaction = rebased
                    if conflict_check is not None:
                        conflict_check(theirs, entry.version)
                    checked.add(entry.version)
            transaction = _on_latest(transaction, latest.version)
            if transaction != written:
                payload = transaction.serialize()
                store.write(store.join(root, TRANSACTIONS_DIR, transaction.file_name), payload)
                if transaction.file_name != written.file_name:
                    store.delete(store.join(root, TRANSACTIONS_DIR, written.file_name))
                written = transaction
            try:
                loaded = manifest_of(latest)
            except FileNotFoundError:
                continue  # a cleanup removed it after a newer version landed: list again
            base = loaded.manifest
            check_writer_flags(base.writer_feature_flags, loaded.path)
            scheme = latest.scheme
        elif isinstance(transaction.operation, Overwrite):
            base = empty_manifest(settings)
            scheme = settings.naming
        else:
            raise DatasetNotFoundError(
                f"no Lance dataset at {root} to commit a {transaction.operation.name} to"
            )
        version = base.version + 1
        if isinstance(transaction.operation, Overwrite) and settings.overwrite_version is not None:
            base = replace(base, data_format=DataStorageFormat("lance", settings.overwrite_version))

        def load_version(v: int) -> Manifest:
            return load_manifest(store, root, v).manifest

        manifest = build_manifest(
            base,
            transaction,
            version=version,
            timestamp_ns=time.time_ns(),
            writer_version=writer_version,
            load_version=load_version,
        )
        try:
            check_file_families(manifest)
            manifest = with_legacy_dictionaries(store, root, manifest)
            check_new_fragments(store, root, base, manifest, transaction.operation, null_counts)
        except (WriteSchemaError, UnsupportedFeatureError):
            store.delete(store.join(root, TRANSACTIONS_DIR, written.file_name))
            raise
        framed, data = frame_manifest(manifest, payload)
        path = store.join(root, VERSIONS_DIR, scheme.manifest_name(version))
        if handler.claim(store, path, data, version):
            if _claimed_late(store, root, manifest, base):
                # Cleanup had removed this version's manifest after a newer version landed: the
                # name was free but the slot is in the past. Withdraw it and try again on top.
                store.delete(path)
                continue
            write_version_hint(store, root, version)
            return Committed(framed, transaction)
    raise RetryableCommitConflictError(
        f"could not claim a new version of {root} after {max_retries} retries (concurrent writers)"
    )
