"""Removing old versions and the files only they reference (pylance's ``cleanup_old_versions``).

A version is *old* when it is older than the cut-off (its manifest's commit timestamp; two weeks
by default) and, with ``retain_versions=n``, not among the ``n`` newest, and, with ``versions=[...]``
(pylance's selection), one of those. Old versions are removed,
except: the latest version and any version at or after the one cleanup was called on; tagged
versions (and with ``error_if_tagged_old_versions`` a tagged old version is an error, raised before
anything is deleted).

Files below ``data/`` (blob sidecars ``data/<stem>/...`` belong to ``data/<stem>.lance``),
``_deletions/``, ``_transactions/``, ``_indices/<uuid>/`` and ``_stats/`` (column statistics files a
version lists in its config, :mod:`lance_ops.table.statistics`) are then sorted by the retained
versions' references:

* referenced by a retained version: kept;
* referenced only by removed versions: removed;
* referenced by no version (*unverified*: left by crashed or aborted writers, including their
  partial/temporary files, or belonging to a commit still in flight): removed when its
  modification time is more than 7 days old, or always with ``delete_unverified=True``.

Unlike pylance, every file of those directories is considered whatever its name or age relative to
the retained manifests, so orphans are not missed when an old version is tagged, and temporary files
(``_transactions/.tmpXXXXXX`` of a killed pylance writer, ``.*.lance-ops-partial`` of ours) are
swept as well (pylance 14 only looks at ``.txn`` names there).

``_versions/`` holds the leftovers of killed committers too: temporary files (hidden names), a
local claim's staging copy (``{name}#...``) and external-store staging manifests
(``{name}-{uuid}``, :mod:`lance_ops.table.manifest_store`). They are unverified files (7-day rule,
``delete_unverified``) counted in ``bytes_removed`` and ``paths`` only; a staging manifest of a
version newer than the latest listed one is always kept, since it may be a claimed version that the
next reader through the store still has to finish. Manifests, detached manifests and the version
hint are never touched here (pylance leaves all of ``_versions/`` but manifests alone).

Concurrent writers: just before deleting, the versions are listed and the tags read again; every
file a version committed meanwhile references is taken off the list (a Restore of a version being
removed, say), and a version tagged meanwhile is kept with its files.
Manifests go first, so a cleanup interrupted half-way leaves orphans (removed by the next run), never
a manifest naming a missing file. A dry run computes the same plan and deletes nothing.
"""

from __future__ import annotations

import datetime as dt
import functools
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from enum import Enum

from lance_ops.errors import CleanupError, TaggedVersionsError
from lance_ops.io import FileInfo, ObjectStore
from lance_ops.ops.tags import Tags
from lance_ops.progress import CLEANUP, ProgressCallback, Tracker
from lance_ops.table.commit import (
    VersionEntry,
    list_versions,
    load_manifest,
    load_manifest_pbs,
    run_in_order,
    version_entries,
)
from lance_ops.table.manifest import (
    Manifest,
    ManifestPb,
    fragment_pb_root_files,
    fragment_root_files,
    index_uuids_pb,
)
from lance_ops.table.naming import (
    DATA_DIR,
    DELETIONS_DIR,
    MANIFEST_SUFFIX,
    TRANSACTIONS_DIR,
    VERSIONS_DIR,
    ManifestNamingScheme,
)
from lance_ops.table.statistics import STATS_DIR, statistics_files

__all__ = [
    "CleanupCandidateFile",
    "CleanupExplanation",
    "CleanupPolicy",
    "CleanupStats",
    "cleanup_old_versions",
    "explain_cleanup",
]

INDICES_DIR = "_indices"
DEFAULT_OLDER_THAN = dt.timedelta(days=14)
UNVERIFIED_THRESHOLD = dt.timedelta(days=7)


class _Kind(Enum):
    DATA = DATA_DIR
    DELETION = DELETIONS_DIR
    TRANSACTION = TRANSACTIONS_DIR
    INDEX = INDICES_DIR
    STATISTICS = STATS_DIR


@dataclass(frozen=True)
class CleanupStats:
    """What a cleanup removed (or, for a dry run, would remove); pylance's fields plus ``paths``.

    ``paths`` are relative to the dataset root, sorted; ``bytes_removed`` counts every removed file,
    manifests included.
    """

    bytes_removed: int = 0
    old_versions: int = 0
    data_files_removed: int = 0
    transaction_files_removed: int = 0
    index_files_removed: int = 0
    deletion_files_removed: int = 0
    failed_deletes: int = 0
    paths: tuple[str, ...] = ()
    dry_run: bool = False


@dataclass(frozen=True)
class CleanupCandidateFile:
    """A file a cleanup would remove (pylance's ``CleanupCandidateFile``): its store path, kind
    (``manifest``, ``data``, ``deletion``, ``transaction``, ``index``, ``statistics``), size, and
    whether no version references it (``unverified``: subject to the 7-day rule)."""

    path: str
    kind: str
    unverified: bool
    size_bytes: int


@dataclass(frozen=True)
class CleanupExplanation:
    """pylance's ``explain_cleanup_old_versions`` answer: the stats a run would report and, on
    request, the files it would remove (at most ``candidate_file_limit``)."""

    stats: CleanupStats
    candidate_files: tuple[CleanupCandidateFile, ...]
    candidate_files_truncated: bool
    candidate_file_limit: int
    read_version: int
    referenced_branches: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class CleanupPolicy:
    """Which versions are old: committed before ``before_ns``, below ``before_version`` and, when
    ``versions`` is given, among them; how fast to delete (``delete_rate_limit`` per second, at
    most ``delete_concurrency`` at once)."""

    before_ns: int
    before_version: int | None = None
    delete_unverified: bool = False
    error_if_tagged_old_versions: bool = True
    dry_run: bool = False
    versions: frozenset[int] | None = None
    delete_rate_limit: int | None = None
    delete_concurrency: int | None = None

    @classmethod
    def parse(
        cls,
        older_than: dt.timedelta | dt.datetime | None,
        retain_versions: int | None,
        latest_version: int,
        *,
        delete_unverified: bool = False,
        error_if_tagged_old_versions: bool = True,
        dry_run: bool = False,
        now_ns: int | None = None,
        versions: Iterable[int] | None = None,
        delete_rate_limit: int | None = None,
        delete_concurrency: int | None = None,
    ) -> CleanupPolicy:
        """Validate the user's arguments (bad ones raise :class:`CleanupError`).

        As in pylance, ``versions`` narrows the other criteria (and without ``older_than`` or
        ``retain_versions`` is the only one: no default age); versions it names that do not exist
        are ignored. ``delete_concurrency`` caps the deletes in flight (default :data:`DELETE_CONCURRENCY`).
        """
        now_ns = time.time_ns() if now_ns is None else now_ns
        chosen = None
        if versions is not None:
            chosen = frozenset(versions)
            if not chosen:
                raise CleanupError("versions must not be empty when specified")
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in chosen):
                raise CleanupError(f"versions must be integers, got {sorted(chosen, key=repr)!r}")
        limits = {"delete_rate_limit": delete_rate_limit, "delete_concurrency": delete_concurrency}
        for name, value in limits.items():
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise CleanupError(f"{name} must be a positive integer, got {value!r}")
        if older_than is None and retain_versions is None and chosen is None:
            older_than = DEFAULT_OLDER_THAN
        if older_than is None:
            before_ns = now_ns
        elif isinstance(older_than, dt.timedelta):
            if older_than < dt.timedelta(0):
                raise CleanupError(f"older_than must not be negative, got {older_than}")
            before_ns = now_ns - _ns(older_than)
        elif isinstance(older_than, dt.datetime):
            stamp = older_than if older_than.tzinfo else older_than.astimezone()
            before_ns = _ns(stamp - dt.datetime(1970, 1, 1, tzinfo=dt.UTC))
            if before_ns > now_ns:
                raise CleanupError(f"older_than {older_than.isoformat()} is in the future")
        else:
            raise CleanupError(f"older_than must be a timedelta or a datetime, got {older_than!r}")
        before_version = None
        if retain_versions is not None:
            if (
                isinstance(retain_versions, bool)
                or not isinstance(retain_versions, int)
                or retain_versions < 1
            ):
                raise CleanupError(f"retain_versions must be a positive integer, got {retain_versions!r}")
            before_version = latest_version - retain_versions + 1
        return cls(
            before_ns,
            before_version,
            delete_unverified,
            error_if_tagged_old_versions,
            dry_run,
            chosen,
            delete_rate_limit,
            delete_concurrency,
        )

    def is_old(self, manifest: Manifest) -> bool:
        return self.is_old_version(manifest.version, manifest.timestamp_ns)

    def is_old_version(self, version: int, timestamp_ns: int) -> bool:
        if timestamp_ns >= self.before_ns:
            return False
        if self.versions is not None and version not in self.versions:
            return False
        return self.before_version is None or version < self.before_version


def _ns(delta: dt.timedelta) -> int:
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


@dataclass
class _References:
    """Relative paths (data, deletion, transaction files) and index uuids some versions reference."""

    paths: set[str] = field(default_factory=set)
    index_uuids: set[str] = field(default_factory=set)

    def add(self, manifest: Manifest) -> None:
        self.paths.update(fragment_root_files(manifest.fragments))  # no fragment converted
        self._add_common(manifest.transaction_file, manifest)
        self.index_uuids.update(str(uuid.UUID(bytes=index.uuid)) for index in manifest.indices)

    def add_pb(self, pb: ManifestPb, data: bytes, path: str) -> None:
        """:meth:`add` of a manifest protobuf read from the file bytes ``data`` (nothing else decoded)."""
        self.paths.update(fragment_pb_root_files(pb.fragments))
        self._add_common(pb.transaction_file, pb)
        self.index_uuids.update(str(uuid.UUID(bytes=value)) for value in index_uuids_pb(pb, data, path))

    def _add_common(self, transaction_file: str, manifest: Manifest | ManifestPb) -> None:
        if transaction_file:
            self.paths.add(f"{TRANSACTIONS_DIR}/{transaction_file}")
        self.paths.update(f"{STATS_DIR}/{name}" for name in statistics_files(manifest))

    def holds(self, relative: str) -> bool:
        """Whether ``relative`` (a path below the root) belongs to a referenced file or index."""
        parts = relative.split("/")
        if parts[0] == INDICES_DIR:
            return len(parts) < 3 or parts[1] in self.index_uuids
        if parts[0] == DATA_DIR and len(parts) > 2:
            # A blob sidecar data/<stem>/<id>.blob belongs to data/<stem>.lance.
            return f"{DATA_DIR}/{parts[1]}.lance" in self.paths
        return relative in self.paths


def _relative(store: ObjectStore, root: str) -> Callable[[str], str]:
    """A function of a path below ``root`` giving it relative to the root, '/'-separated (as
    manifests name files)."""
    prefix = store.join(root, "x")[:-1]  # the root with the store's separator appended
    return lambda path: path[len(prefix) :] if path.startswith(prefix) else path


def _kind(relative: str) -> _Kind:
    return _Kind(relative.split("/", 1)[0])


def _plan_files(
    store: ObjectStore,
    root: str,
    retained: _References,
    removed: _References,
    policy: CleanupPolicy,
    now_ns: int,
) -> list[tuple[str, FileInfo]]:
    """``(relative path, info)`` of every file below the swept directories that is to be removed."""
    young_after = (now_ns - _ns(UNVERIFIED_THRESHOLD)) / 1e9
    plan = []
    relative_to_root = _relative(store, root)
    for kind in _Kind:
        for info in store.walk(store.join(root, kind.value)):
            relative = relative_to_root(info.path)
            if retained.holds(relative):
                continue
            verified = removed.holds(relative)
            if verified or policy.delete_unverified or info.mtime < young_after:
                plan.append((relative, info))
    return plan


def _staged_version(name: str) -> int | None:
    """The version of an external-store staging manifest name ``{manifest name}-{uuid}``, else None."""
    head, dash, tail = name.partition(f"{MANIFEST_SUFFIX}-")
    if not dash or not tail:
        return None
    parsed = ManifestNamingScheme.parse(head + MANIFEST_SUFFIX)
    return None if parsed is None else parsed[1]


def _versions_dir(store: ObjectStore, root: str) -> tuple[list[VersionEntry], list[FileInfo]]:
    """One listing of ``_versions/``: its main-line versions (as :func:`list_versions`) and the
    files directly in it."""
    directory = store.join(root, VERSIONS_DIR)
    relative = _relative(store, root)
    files = [info for info in store.walk(directory) if relative(info.path).count("/") == 1]
    return version_entries((info.path.rsplit("/", 1)[-1] for info in files), directory), files


def _plan_versions_dir(
    store: ObjectStore, root: str, files: Iterable[FileInfo], latest: int, policy: CleanupPolicy, now_ns: int
) -> list[tuple[str, FileInfo]]:
    """Leftovers of killed committers among the ``files`` of ``_versions/`` that are to be removed
    (see module doc)."""
    young_after = (now_ns - _ns(UNVERIFIED_THRESHOLD)) / 1e9
    plan = []
    relative_to_root = _relative(store, root)
    for info in files:
        relative = relative_to_root(info.path)
        name = relative.split("/")[1]
        staged = _staged_version(name)
        leftover = name.startswith(".") or "#" in name or staged is not None
        if not leftover or (staged is not None and staged > latest):
            continue
        if policy.delete_unverified or info.mtime < young_after:
            plan.append((relative, info))
    return plan


def _tagged_error(tags: Tags, tagged_old: Iterable[int]) -> TaggedVersionsError:
    versions = set(tagged_old)
    named = {name: tag.version for name, tag in tags.contents().items() if tag.version in versions}
    return TaggedVersionsError(
        f"Cleanup error: {len(named)} tagged version(s) have been marked for cleanup. Either set "
        f"`error_if_tagged_old_versions=False` or delete the following tag(s) to enable cleanup: {named}",
        named,
    )


@dataclass(frozen=True)
class _OldVersion:
    """A version to remove: its number and its manifest file (path, bytes); the manifest itself is
    not kept, so planning holds one manifest at a time however many versions there are."""

    version: int
    path: str
    size: int


@dataclass(frozen=True)
class _Plan:
    """What a cleanup removes: the old versions' manifests, the swept files (relative path, info),
    the ``_versions/`` leftovers, and the references of the removed versions (for verification)."""

    old: tuple[_OldVersion, ...]
    files: tuple[tuple[str, FileInfo], ...]
    leftovers: tuple[tuple[str, FileInfo], ...]
    removed: _References

    def stats(self, store: ObjectStore, root: str, dry_run: bool) -> CleanupStats:
        relative = _relative(store, root)
        manifests = [(relative(entry.path), entry.size) for entry in self.old]
        manifests += [(relative, info.size) for relative, info in self.leftovers]
        files = self.files
        return CleanupStats(
            bytes_removed=sum(size for _, size in manifests) + sum(info.size for _, info in files),
            old_versions=len(self.old),
            data_files_removed=sum(_kind(r) is _Kind.DATA for r, _ in files),
            transaction_files_removed=sum(_kind(r) is _Kind.TRANSACTION for r, _ in files),
            index_files_removed=sum(_kind(r) is _Kind.INDEX for r, _ in files),
            deletion_files_removed=sum(_kind(r) is _Kind.DELETION for r, _ in files),
            paths=tuple(sorted([r for r, _ in manifests] + [r for r, _ in files])),
            dry_run=dry_run,
        )


def _plan(store: ObjectStore, root: str, current_version: int, policy: CleanupPolicy) -> _Plan:
    """Decide what a cleanup removes (see module doc); raises before anything is removed."""
    now_ns = time.time_ns()
    tags = Tags(store, root)
    tagged = {tag.version for tag in tags.contents().values()}
    listed, versions_files = _versions_dir(store, root)
    latest = listed[-1].version if listed else 0
    retained, removed = _References(), _References()
    old: list[_OldVersion] = []
    tagged_old = []
    known = set()
    # One manifest at a time, only its protobuf decoded (another cleanup may remove a listed one:
    # skipped).
    for path, data, pb in load_manifest_pbs(store, root, listed, skip_missing=True):
        version = pb.version
        known.add(version)
        stamp = pb.timestamp.seconds * 1_000_000_000 + pb.timestamp.nanos
        candidate = version < min(current_version, latest) and policy.is_old_version(version, stamp)
        if candidate and version in tagged:
            tagged_old.append(version)
        if candidate and version not in tagged:
            old.append(_OldVersion(version, path, len(data)))
            removed.add_pb(pb, data, path)
        else:
            retained.add_pb(pb, data, path)
    if tagged_old and policy.error_if_tagged_old_versions:
        raise _tagged_error(tags, tagged_old)
    files = _plan_files(store, root, retained, removed, policy, now_ns)
    leftovers = _plan_versions_dir(store, root, versions_files, latest, policy, now_ns)
    # Versions committed since the listing above keep what they reference (``_versions/`` is
    # listed a second time for them, after planning).
    newer = [e.version for e in list_versions(store, root) if e.version not in known]
    for version in newer:
        try:
            retained.add(load_manifest(store, root, version).manifest)
        except FileNotFoundError:  # VersionNotFoundError too: another cleanup removed it meanwhile
            continue
    # Versions tagged since the tags were read are kept with their files.
    late = {tag.version for tag in tags.contents().values()} - tagged
    for entry in [e for e in old if e.version in late]:
        old.remove(entry)
        try:
            retained.add(load_manifest(store, root, entry.version).manifest)
        except FileNotFoundError:  # another cleanup removed it meanwhile: nothing left to keep
            continue
    files = [(relative, info) for relative, info in files if not retained.holds(relative)]
    return _Plan(tuple(old), tuple(files), tuple(leftovers), removed)


def cleanup_old_versions(
    store: ObjectStore,
    root: str,
    current_version: int,
    policy: CleanupPolicy,
    progress: ProgressCallback | None = None,
) -> CleanupStats:
    """Remove old versions of the dataset at ``root`` and the files only they reference.

    ``current_version`` is the version the caller has open: it and every newer version are kept.
    ``progress`` hears of every file removed (:mod:`lance_ops.progress`).
    """
    plan = _plan(store, root, current_version, policy)
    stats = plan.stats(store, root, policy.dry_run)
    if policy.dry_run:
        return stats
    manifests = [entry.path for entry in plan.old]
    files = [info.path for _, info in plan.leftovers + plan.files]
    tracker = Tracker.start(progress, CLEANUP, len(manifests) + len(files), "files")
    deleter = _Deleter(store, policy, tracker, _relative(store, root))
    # Every manifest is gone before the first file goes (see module doc).
    failed = deleter.run(manifests) + deleter.run(files)
    return replace(stats, failed_deletes=failed)


# Deletes in flight when the caller does not say (``delete_concurrency``), and at most whatever it
# says: a delete waits on the disk or the network, not on the CPU. Each thread takes a group of
# DELETE_GROUP paths at a time (one hand-over per group), one path at a time under a rate limit.
DELETE_CONCURRENCY = 8
MAX_DELETE_CONCURRENCY = 64
DELETE_GROUP = 16


class _Deleter:
    """Deletes paths with up to ``delete_concurrency`` in flight on threads, paced to
    ``delete_rate_limit`` per second; progress reported in the paths' order."""

    def __init__(
        self, store: ObjectStore, policy: CleanupPolicy, tracker: Tracker, relative: Callable[[str], str]
    ) -> None:
        self.store, self.tracker, self.relative = store, tracker, relative
        self.interval = 0.0 if policy.delete_rate_limit is None else 1.0 / policy.delete_rate_limit
        self.group = 1 if self.interval else DELETE_GROUP
        self.next_at = time.monotonic()
        self.workers = min(policy.delete_concurrency or DELETE_CONCURRENCY, MAX_DELETE_CONCURRENCY)

    def _delete(self, paths: list[str]) -> list[bool]:
        done = []
        for path in paths:
            try:
                self.store.delete(path)
                done.append(True)
            except OSError:
                done.append(False)
        return done

    def _paced(self, groups: list[list[str]]) -> Iterator[Callable[[], list[bool]]]:
        for group in groups:
            if self.interval:
                time.sleep(max(0.0, self.next_at - time.monotonic()))
                self.next_at = max(self.next_at, time.monotonic()) + self.interval
            yield functools.partial(self._delete, group)

    def run(self, paths: list[str]) -> int:
        """Delete ``paths``, every one finished on return; the number that failed."""
        groups = [paths[start : start + self.group] for start in range(0, len(paths), self.group)]
        if not groups:
            return 0
        failed = 0
        results = run_in_order(self._paced(groups), min(self.workers, len(groups)))
        for group, done in zip(groups, results, strict=True):
            for path in group:
                self.tracker.advance(1, f"removed {self.relative(path)}")
            failed += done.count(False)
        return failed


def explain_cleanup(
    store: ObjectStore,
    root: str,
    current_version: int,
    policy: CleanupPolicy,
    include_files: bool = False,
    max_files: int = 1000,
) -> CleanupExplanation:
    """What :func:`cleanup_old_versions` would do with ``policy``; nothing is removed."""
    if isinstance(max_files, bool) or not isinstance(max_files, int) or max_files < 1:
        raise CleanupError(f"max_files must be positive, got {max_files!r}")
    plan = _plan(store, root, current_version, policy)
    candidates: list[CleanupCandidateFile] = []
    if include_files:
        candidates = [CleanupCandidateFile(e.path, "manifest", False, e.size) for e in plan.old]
        candidates += [CleanupCandidateFile(i.path, "manifest", True, i.size) for _, i in plan.leftovers]
        candidates += [
            CleanupCandidateFile(
                info.path, _kind(relative).name.lower(), not plan.removed.holds(relative), info.size
            )
            for relative, info in plan.files
        ]
        candidates.sort(key=lambda c: c.path)
    return CleanupExplanation(
        stats=plan.stats(store, root, dry_run=True),
        candidate_files=tuple(candidates[:max_files]),
        candidate_files_truncated=len(candidates) > max_files,
        candidate_file_limit=max_files,
        read_version=current_version,
    )
