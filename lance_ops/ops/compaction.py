"""Compaction: merging small fragments and materialising deletions, as plan -> tasks -> commit.

The three steps are separate so that a Spark driver plans, executors run the tasks and the driver
commits (pylance's ``Compaction.plan`` / ``CompactionTask.execute`` / ``Compaction.commit``). Plans,
tasks and results are frozen, picklable, and have a JSON form (``json()`` / ``from_json``).

Planning (pylance 14's rules, fact sheet section 8.2), over the fragments of the version read, in order:

1. a fragment is a candidate *by itself* when ``materialize_deletions`` and its deleted fraction is
   above ``materialize_deletions_threshold``; a candidate *with neighbours* when it has fewer than
   ``target_rows_per_fragment`` physical rows; otherwise it is not a candidate;
2. consecutive candidates form a bin; a non-candidate ends it, and so does a change in the set of
   indices covering the fragment, through the Fragment Reuse Index too (only adjacent fragments
   are ever merged: row order is kept);
3. a bin that is a single candidate-with-neighbours fragment is dropped (nothing to merge);
4. each bin is split greedily into tasks of at least ``target_rows_per_fragment`` live rows, a
   remainder smaller than that being folded into the last task;
5. ``excluded_fragment_ids`` are not candidates (they end a bin); with ``max_source_fragments`` /
   ``max_source_rows`` / ``max_source_bytes``, tasks are kept in order up to the first one that
   would pass a cap.

Example (target 30): ten fragments of 10 rows with one row deleted each -> tasks ``[0..3]`` (36 live
rows) and ``[4..9]`` (54 live rows: the remainder ``[8, 9]`` is folded in).

Executing a task reads its fragments' live rows in order (deleted rows dropped) and writes them as
``live // target_rows_per_fragment`` new fragments (at least one) of balanced sizes, as pylance 14
does: 53 live rows with a target of 10 -> fragments of 11, 11, 11, 10, 10 rows; 800 with a target of
500 -> one fragment (``max_bytes_per_file`` may cut a fragment further). With stable row ids the
rows keep their ids: each source segment loses its deleted rows, then the segments are cut into the
new fragments' row counts, every piece re-encoded and a range extended by a range that starts where
it ends (byte for byte pylance's sequences); the created-at / last-updated-at version runs are cut
the same way. Without, the result keeps the surviving old row addresses, so that after the commit
the old -> new address mapping is known.

Committing (as pylance 14): a ``ReserveFragments`` commit claims the new fragment ids, then a
``Rewrite`` on the plan's read version replaces each group's old fragments by its new ones. Indices
covering the old fragments are kept right in that same Rewrite (:mod:`lance_ops.ops.index_remap`:
remapped with the old -> new row addresses into ``rewritten_indices``, their fragment bitmaps moved
with stable row ids, or the move recorded in the Fragment Reuse Index with ``defer_index_remap``);
the index files are written before the reservation, so a damaged index fails the compaction with
nothing committed. The
Rewrite is checked against everything committed since the read version (conflict matrix): appends
are compatible; a delete of rows of a compacted fragment is carried into the new fragments when row
ids are stable (:mod:`lance_ops.table.rewrite_rebase`), and otherwise (or for an update) makes it
fail with a :class:`~lance_ops.errors.RetryableCommitConflictError` (plan again): no deleted row
ever comes back.
With ``commit_every=N``, :func:`compact` commits every N finished tasks: an interrupted compaction
keeps what it committed and the next run plans only the rest.
"""

from __future__ import annotations

import base64
import json
import os
import threading
from collections import deque
from collections.abc import Generator, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field, fields, replace
from functools import cached_property
from typing import Any, Protocol, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap64

from lance_ops._malloc import release_free_memory
from lance_ops.encoding.api import FileVersion
from lance_ops.encoding.plan import EncodingPlan
from lance_ops.errors import (
    ClusterIndexError,
    CommitConflictError,
    CorruptFileError,
    InvalidArgumentError,
    InvalidOptionError,
    UnsupportedFeatureError,
)
from lance_ops.file.multi import joinable, read_whole_files
from lance_ops.file.reader import FileReader
from lance_ops.fragment.options import DEFAULT_BATCH_SIZE, DEFAULT_MAX_BYTES_PER_FILE, WriteOptions
from lance_ops.fragment.reader import READ_AHEAD_ROWS, FragmentReader, VersionFiles, row_addresses
from lance_ops.fragment.scan import prefetched
from lance_ops.fragment.writer import write_new_fragments
from lance_ops.io.context import Location, StorageContext
from lance_ops.ops import clustering
from lance_ops.ops.commit import CommitOptions, commit
from lance_ops.ops.index_remap import (
    GroupMove,
    IndexChanges,
    IndexRemapper,
    changes_for_rewrite,
    check_index_files,
    covering,
    discard,
    refuse_deferred_with_stable_ids,
)
from lance_ops.progress import COMPACT, ProgressCallback, Tracker
from lance_ops.table import frag_reuse
from lance_ops.table.commit import load_manifest
from lance_ops.table.indices import is_system
from lance_ops.table.manifest import DataFragment, Manifest
from lance_ops.table.rowids import (
    VersionRuns,
    decode_row_id_segments,
    decode_version_runs,
    load_sequence,
    mask_version_runs,
    rechunk_row_ids,
    rechunk_versions,
)
from lance_ops.table.transaction import ReserveFragments, Rewrite, RewriteGroup, Transaction

CONFIG_PREFIX = "lance.compaction."
# pylance 14 writes each task as one fragment (only max_bytes_per_file splits it); offsets are 32-bit.
MAX_ROWS_PER_FRAGMENT = 2**32 - 1


COMPACTION_MODES = ("reencode", "try_binary_copy", "force_binary_copy")
_LIMITS = ("max_source_fragments", "max_source_rows", "max_source_bytes")


@dataclass(frozen=True)
class CompactionOptions:
    """pylance 14's compaction options and defaults (``lance.optimize.CompactionOptions``).

    ``max_bytes_per_file`` None is the write default; ``num_threads`` None is the CPU count;
    ``batch_size`` None is the scan default. ``max_rows_per_group`` only matters for legacy files.
    ``max_source_fragments`` / ``max_source_rows`` (live) / ``max_source_bytes`` (data files) cap
    one run: tasks are taken in order until the next one would pass a cap. ``excluded_fragment_ids``
    are left alone and bound the groups around them. ``data_storage_version`` is the version of the
    files written (default: the dataset's; another V2 version marks the dataset with feature flag
    0x100, mixed file versions, as pylance does; the dataset's own default is unchanged).
    ``cluster_by`` / ``cluster_mode`` / ``cluster_memory_bytes`` / ``cluster_spill_location`` /
    ``cluster_incremental`` (lance_ops, L20) rewrite the rows in key order
    (:mod:`lance_ops.ops.clustering`; defaults: config ``lance-ops.cluster-*``);
    ``purge`` makes every fragment with a deletion file a candidate whatever the threshold.
    ``compaction_mode``
    ``"try_binary_copy"`` re-encodes (the fallback pylance takes when a copy is not possible);
    ``"force_binary_copy"`` is refused
    (:class:`~lance_ops.errors.UnsupportedFeatureError`): pages are never copied undecoded.
    ``io_buffer_size`` and ``binary_copy_read_batch_bytes`` are accepted and have no effect.
    ``defer_index_remap`` records the compaction in the Fragment Reuse Index instead of remapping
    the indices (refused with stable row ids, as pylance does; :mod:`lance_ops.ops.index_remap`).
    """

    target_rows_per_fragment: int = 1024 * 1024
    max_rows_per_group: int = 1024
    max_bytes_per_file: int | None = None
    materialize_deletions: bool = True
    materialize_deletions_threshold: float = 0.1
    num_threads: int | None = None
    batch_size: int | None = None
    io_buffer_size: int | None = None
    defer_index_remap: bool = False
    compaction_mode: str | None = None
    binary_copy_read_batch_bytes: int | None = None
    max_source_fragments: int | None = None
    max_source_rows: int | None = None
    max_source_bytes: int | None = None
    excluded_fragment_ids: tuple[int, ...] = ()
    data_storage_version: str | None = None
    # L20 (lance_ops.ops.clustering): keys ordering the rewritten rows, and purge of deletions
    cluster_by: tuple[str, ...] = ()
    cluster_mode: str | None = None
    cluster_memory_bytes: int | None = None
    cluster_spill_location: str | None = None
    cluster_incremental: bool = False
    purge: bool = False

    def __post_init__(self) -> None:
        if self.target_rows_per_fragment <= 0 or self.max_rows_per_group <= 0:
            raise InvalidOptionError("target_rows_per_fragment and max_rows_per_group must be positive")
        for name in ("num_threads", "batch_size", "max_bytes_per_file", *_LIMITS):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise InvalidOptionError(f"compaction option {name} must be positive (None for the default)")
        excluded = tuple(int(i) for i in (self.excluded_fragment_ids or ()))
        if any(i < 0 for i in excluded):
            raise InvalidOptionError(f"excluded_fragment_ids must be fragment ids, not {list(excluded)}")
        object.__setattr__(self, "excluded_fragment_ids", excluded)
        if self.compaction_mode is not None:
            mode = str(self.compaction_mode).lower()
            if mode not in COMPACTION_MODES:
                raise InvalidOptionError(
                    f"invalid compaction mode {self.compaction_mode!r}; valid: {', '.join(COMPACTION_MODES)}"
                )
            object.__setattr__(self, "compaction_mode", mode)
        if self.data_storage_version is not None:
            version = _file_version(self.data_storage_version)
            object.__setattr__(self, "data_storage_version", str(version))
        object.__setattr__(self, "cluster_by", clustering.parse_keys(self.cluster_by))
        object.__setattr__(self, "cluster_mode", clustering.check_mode(self.cluster_mode))

    @classmethod
    def resolve(cls, config: Mapping[str, str], **explicit: Any) -> CompactionOptions:
        """Explicit (non-None) values, else manifest config ``lance.compaction.<name>``, else defaults."""
        unknown = set(explicit) - {f.name for f in fields(cls)}
        if unknown:
            raise TypeError(f"unknown compaction options {sorted(unknown)}")
        values: dict[str, Any] = {}
        for f in fields(cls):
            value = explicit.get(f.name)
            text = config.get(CONFIG_PREFIX + f.name)
            if value is None and text is not None:
                value = _parse_config(f.name, text)
            if value is not None:
                values[f.name] = value
        return cls(**clustering.config_defaults(config, values))

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["excluded_fragment_ids"] = list(self.excluded_fragment_ids)
        data["cluster_by"] = list(self.cluster_by)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CompactionOptions:
        return cls(**data)


def _file_version(text: str) -> FileVersion:
    try:
        version = FileVersion.parse(text)
    except UnsupportedFeatureError as exc:
        raise InvalidOptionError(f"unknown data_storage_version {text!r}") from exc
    return version


def _parse_config(name: str, text: str) -> Any:
    if name in ("materialize_deletions", "defer_index_remap", "purge", "cluster_incremental"):
        return text.strip().lower() in ("true", "1", "yes")
    if name == "materialize_deletions_threshold":
        return float(text)
    if name in ("compaction_mode", "data_storage_version", "cluster_mode", "cluster_spill_location"):
        return text.strip()
    if name == "cluster_by":
        return clustering.parse_keys(text)
    if name == "excluded_fragment_ids":
        return tuple(int(part) for part in text.replace(" ", "").split(",") if part)
    return int(text)


@dataclass(frozen=True)
class CompactionMetrics:
    """What a compaction did (pylance's fields); files count data files and deletion files."""

    fragments_removed: int = 0
    fragments_added: int = 0
    files_removed: int = 0
    files_added: int = 0

    def __add__(self, other: CompactionMetrics) -> CompactionMetrics:
        return CompactionMetrics(
            *(getattr(self, f.name) + getattr(other, f.name) for f in fields(CompactionMetrics))
        )


class DatasetLike(Protocol):
    """What a task needs of a dataset to execute on it: where it is and how to reach it."""

    @property
    def uri(self) -> str: ...

    @property
    def storage_options(self) -> Mapping[str, str] | None: ...


@dataclass(frozen=True)
class CompactionTask:
    """One group of adjacent fragments of version ``read_version`` to rewrite together.

    ``cluster_splits`` (an incremental clustering, :mod:`lance_ops.ops.clustering`): the routing
    keys cutting the group's sorted rows into ranges written as separate fragments."""

    read_version: int
    # a list, as pylance's ``CompactionTask.fragments`` (equal to ``[f.metadata for f in ...]``)
    fragments: Sequence[DataFragment] = field(hash=False)
    options: CompactionOptions
    cluster_splits: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "fragments", list(self.fragments))

    @property
    def fragment_ids(self) -> tuple[int, ...]:
        return tuple(f.id for f in self.fragments)

    @property
    def num_rows(self) -> int:
        """Live rows: the rows the new fragments will hold."""
        return sum(f.num_rows for f in self.fragments)

    @property
    def num_deleted_rows(self) -> int:
        """Deleted rows this task materialises (drops from the data files)."""
        return sum(f.num_deleted_rows for f in self.fragments)

    @property
    def num_bytes(self) -> int:
        """Bytes of the data files read (as recorded in the manifest)."""
        return sum(d.file_size_bytes or 0 for f in self.fragments for d in f.files)

    def execute(
        self, dataset: DatasetLike | str, storage_options: Mapping[str, str] | None = None
    ) -> RewriteResult:
        """Write the new fragments (nothing is committed); returns what :func:`commit_compaction` needs."""
        if isinstance(dataset, str):
            return execute_task(open_version(dataset, self.read_version, storage_options), self)
        options = storage_options or dataset.storage_options
        return execute_task(open_version(dataset.uri, self.read_version, options), self)

    def to_json(self) -> dict[str, Any]:
        splits = {} if self.cluster_splits is None else {"cluster_splits": list(self.cluster_splits)}
        return {
            "read_version": self.read_version,
            "fragments": [f.to_json() for f in self.fragments],
            "options": self.options.to_json(),
            **splits,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CompactionTask:
        splits = data.get("cluster_splits")
        return cls(
            read_version=data["read_version"],
            fragments=[DataFragment.from_json(f) for f in data["fragments"]],
            options=CompactionOptions.from_json(data["options"]),
            cluster_splits=None if splits is None else tuple(int(v) for v in splits),
        )

    def json(self) -> str:
        return json.dumps(self.to_json())

    @classmethod
    def from_json(cls, text: str) -> CompactionTask:
        return cls.from_dict(json.loads(text))


@dataclass(frozen=True)
class CompactionPlan:
    """The tasks of one compaction of version ``read_version``; what a dry run reports."""

    read_version: int
    tasks: tuple[CompactionTask, ...]
    options: CompactionOptions

    def num_tasks(self) -> int:
        return len(self.tasks)

    @property
    def num_fragments(self) -> int:
        return sum(len(t.fragments) for t in self.tasks)

    @property
    def num_rows(self) -> int:
        return sum(t.num_rows for t in self.tasks)

    @property
    def num_deleted_rows(self) -> int:
        return sum(t.num_deleted_rows for t in self.tasks)

    @property
    def num_bytes(self) -> int:
        return sum(t.num_bytes for t in self.tasks)

    def summary(self) -> list[dict[str, Any]]:
        """One dict per group: fragment ids, live rows, deleted rows to materialise, bytes read."""
        return [
            {
                "fragment_ids": list(t.fragment_ids),
                "rows": t.num_rows,
                "deleted_rows": t.num_deleted_rows,
                "bytes": t.num_bytes,
            }
            for t in self.tasks
        ]

    def to_json(self) -> dict[str, Any]:
        return {
            "read_version": self.read_version,
            "tasks": [t.to_json() for t in self.tasks],
            "options": self.options.to_json(),
        }

    def json(self) -> str:
        return json.dumps(self.to_json())

    @classmethod
    def from_json(cls, text: str) -> CompactionPlan:
        data = json.loads(text)
        return cls(
            read_version=data["read_version"],
            tasks=tuple(CompactionTask.from_dict(t) for t in data["tasks"]),
            options=CompactionOptions.from_json(data["options"]),
        )

    def __repr__(self) -> str:  # pylance's
        return (
            f"CompactionPlan(read_version={self.read_version}, tasks=<{self.num_tasks()} compaction tasks>)"
        )

    def __str__(self) -> str:
        return (
            f"CompactionPlan(read_version={self.read_version}, tasks={self.num_tasks()}, "
            f"fragments={self.num_fragments}, rows={self.num_rows}, "
            f"deleted_rows={self.num_deleted_rows}, bytes={self.num_bytes})"
        )


@dataclass(frozen=True, eq=False)
class RewriteResult:
    """A task's outcome: new fragments (ids assigned at commit) replacing ``original_fragments``.

    ``row_addrs`` are the surviving old row addresses in the order the rows were written, i.e. the
    ``n``-th is the ``n``-th row of the new fragments (indices holding addresses are remapped with
    them, with stable row ids too). With stable row ids and no index covering the fragments they
    are None (not held for every moved row: :func:`commit_compaction` computes them from the
    original fragments if an index covers them by then).
    """

    read_version: int
    original_fragments: tuple[DataFragment, ...]
    new_fragments: tuple[DataFragment, ...]
    metrics: CompactionMetrics
    row_addrs: np.ndarray | None = None
    defer_index_remap: bool = False

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RewriteResult):
            return NotImplemented
        mine, theirs = self.row_addrs, other.row_addrs
        return (
            (self.read_version, self.original_fragments, self.new_fragments, self.metrics)
            == (other.read_version, other.original_fragments, other.new_fragments, other.metrics)
            and self.defer_index_remap == other.defer_index_remap
            and (mine is None) == (theirs is None)
            and (mine is None or theirs is None or bool(np.array_equal(mine, theirs)))
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:  # pylance's
        return (
            f"RewriteResult(read_version={self.read_version}, new_fragments={list(self.new_fragments)!r}, "
            f"old_fragments={list(self.original_fragments)!r})"
        )

    def to_json(self) -> dict[str, Any]:
        addrs = raw = None
        if self.row_addrs is not None and bool(np.all(np.diff(self.row_addrs.astype(np.int64)) > 0)):
            addrs = base64.b64encode(BitMap64(self.row_addrs).serialize()).decode("ascii")
        elif self.row_addrs is not None:  # clustered: the order matters (a bitmap would sort it)
            raw = base64.b64encode(self.row_addrs.astype("<u8").tobytes()).decode("ascii")
        return {
            "read_version": self.read_version,
            "original_fragments": [f.to_json() for f in self.original_fragments],
            "new_fragments": [f.to_json() for f in self.new_fragments],
            "metrics": asdict(self.metrics),
            "row_addrs": addrs,
            "defer_index_remap": self.defer_index_remap,
            **({"row_addrs_u64": raw} if raw is not None else {}),
        }

    def json(self) -> str:
        return json.dumps(self.to_json())

    @classmethod
    def from_json(cls, text: str) -> RewriteResult:
        data = json.loads(text)
        addrs = data.get("row_addrs")
        raw = data.get("row_addrs_u64")
        return cls(
            read_version=data["read_version"],
            original_fragments=tuple(DataFragment.from_json(f) for f in data["original_fragments"]),
            new_fragments=tuple(DataFragment.from_json(f) for f in data["new_fragments"]),
            metrics=CompactionMetrics(**data["metrics"]),
            row_addrs=(
                np.frombuffer(base64.b64decode(raw), dtype="<u8").astype(np.uint64)
                if raw is not None
                else None
                if addrs is None
                else np.array(BitMap64.deserialize(base64.b64decode(addrs)), dtype=np.uint64)
            ),
            defer_index_remap=bool(data.get("defer_index_remap", False)),
        )


@dataclass(frozen=True, eq=False)
class CompactionOutcome:
    """What committing compaction results wrote.

    ``row_address_map`` is ``(old, new)`` uint64 row addresses of every moved row (datasets
    without stable row ids; None with them, since row ids do not change). It is built at its
    first access from ``moves`` (the committed groups), not by the commit: nothing in the commit
    reads it (indices are remapped from the moves), and at 10M rows building it costs ~0.25 s.
    A group whose task left its old addresses out (no index covered its fragments) has them read
    from its old fragments' deletion files then, from ``storage``.
    """

    manifest: Manifest
    transaction: Transaction
    metrics: CompactionMetrics
    moves: tuple[GroupMove, ...] = ()
    indices: IndexChanges = IndexChanges()
    storage: StorageContext | None = None

    @cached_property
    def row_address_map(self) -> tuple[np.ndarray, np.ndarray] | None:
        if not self.moves:
            return None
        files = None if self.storage is None else VersionFiles(self.storage, self.manifest)
        old: list[np.ndarray] = []
        for move in self.moves:
            if move.row_addrs is None:
                assert files is not None
                old.append(_live_addresses([files.fragment(f) for f in move.old]))
            else:
                old.append(move.row_addrs)
        return _joined(old), _joined([_new_addresses(move.new) for move in self.moves])


def open_version(
    location: Location, version: int, storage_options: Mapping[str, str] | None = None
) -> VersionFiles:
    """The files of ``version`` of the dataset at ``location``: its storage context, or its URI
    opened with ``storage_options`` (what an executor does, once per task)."""
    storage = StorageContext.of(location, storage_options)
    return VersionFiles(storage, load_manifest(storage.store, storage.root, version).manifest)


# ---------------------------------------------------------------------------------------- planning


def _index_sets(manifest: Manifest) -> dict[int, frozenset[bytes]]:
    """Fragment id -> uuids of the indices covering it (through the Fragment Reuse Index too)."""
    covering: dict[int, set[bytes]] = {}
    for index in manifest.indices:
        if is_system(index):
            continue
        for fragment_id in frag_reuse.effective_fragment_ids(manifest, index):
            covering.setdefault(fragment_id, set()).add(index.uuid)
    return {k: frozenset(v) for k, v in covering.items()}


def _bins(manifest: Manifest, options: CompactionOptions) -> Iterator[list[DataFragment]]:
    """Runs of adjacent candidates sharing their index coverage (rules 1-3 of the module doc)."""
    covering = _index_sets(manifest)
    current: list[DataFragment] = []
    current_indices: frozenset[bytes] = frozenset()
    alone = False

    def flush() -> Iterator[list[DataFragment]]:
        if len(current) > 1 or (current and alone):
            yield list(current)

    excluded = set(options.excluded_fragment_ids)
    for fragment in manifest.fragments:
        physical = fragment.physical_rows
        by_itself = (
            options.materialize_deletions
            and physical > 0
            and fragment.num_deleted_rows / physical > options.materialize_deletions_threshold
        ) or (options.purge and fragment.deletion_file is not None)
        with_neighbours = physical < options.target_rows_per_fragment
        indices = covering.get(fragment.id, frozenset())
        if fragment.id in excluded or not (by_itself or with_neighbours):
            yield from flush()
            current, alone = [], False
            continue
        if current and indices != current_indices:
            yield from flush()
            current, alone = [], False
        current.append(fragment)
        current_indices = indices
        alone = alone or by_itself
    yield from flush()


def _split(fragments: list[DataFragment], target: int) -> list[list[DataFragment]]:
    """Greedy groups of at least ``target`` live rows, a short remainder joining the last group."""
    groups: list[list[DataFragment]] = []
    current: list[DataFragment] = []
    rows = 0
    for fragment in fragments:
        current.append(fragment)
        rows += fragment.num_rows
        if rows >= target:
            groups.append(current)
            current, rows = [], 0
    if current:
        if groups:
            groups[-1].extend(current)
        else:
            groups.append(current)
    return groups


def _capped(tasks: Sequence[CompactionTask], options: CompactionOptions) -> tuple[CompactionTask, ...]:
    """The leading tasks that stay within ``max_source_fragments / rows / bytes`` (pylance stops at
    the first task that would pass a cap, even if a later, smaller one would fit)."""
    caps = [getattr(options, name) for name in _LIMITS]
    totals = [0, 0, 0]
    kept: list[CompactionTask] = []
    for task in tasks:
        sizes = (len(task.fragments), task.num_rows, task.num_bytes)
        totals = [t + n for t, n in zip(totals, sizes, strict=True)]
        if any(cap is not None and total > cap for cap, total in zip(caps, totals, strict=True)):
            break
        kept.append(task)
    return tuple(kept)


def plan(manifest: Manifest, options: CompactionOptions) -> CompactionPlan:
    """The compaction tasks for version ``manifest`` (nothing is read but the manifest)."""
    if options.compaction_mode == "force_binary_copy":
        raise UnsupportedFeatureError(
            "compaction_mode='force_binary_copy': pages are never copied without re-encoding; use "
            "'reencode' or 'try_binary_copy' (which re-encodes)"
        )
    if options.data_storage_version is not None:
        target = FileVersion.parse(options.data_storage_version)
        current = FileVersion.parse(manifest.data_storage_version)
        if (target is FileVersion.V0_1) != (current is FileVersion.V0_1):
            raise InvalidOptionError(
                f"cannot write {target} files into a {current} dataset: V1 and V2 storage versions "
                "cannot be mixed"
            )
    tasks = _capped(
        [
            CompactionTask(manifest.version, tuple(group), options)
            for fragments in _bins(manifest, options)
            for group in _split(fragments, options.target_rows_per_fragment)
        ],
        options,
    )
    if tasks:
        refuse_deferred_with_stable_ids(manifest, options.defer_index_remap)
    return CompactionPlan(manifest.version, tasks, options)


# --------------------------------------------------------------------------------------- execution


def _scan(readers: Sequence[FragmentReader], schema: pa.Schema, batch_size: int) -> Iterator[pa.RecordBatch]:
    """Live rows of ``readers`` in order. Each fragment is decoded whole (a contiguous read is much
    cheaper than a take of the surviving offsets) and its deleted rows are filtered out. Small
    fragments held in one data file each are read together, up to ``COALESCE_ROWS`` rows and
    ``WINDOW_FILE_BYTES`` of files at a time, each column across their files in one decode
    (:func:`read_whole_files`); the rows of small fragments are handed on together
    (:func:`_coalesced`)."""
    columns = tuple(schema.names)

    def one(reader: FragmentReader) -> Iterator[pa.Table]:
        live = _live_mask(reader) if len(reader.deleted) else None
        for start in range(0, reader.physical_rows, READ_AHEAD_ROWS):
            stop = min(start + READ_AHEAD_ROWS, reader.physical_rows)
            table = reader.read(columns, np.arange(start, stop, dtype=np.int64))
            yield table if live is None else _filtered(table, live[start:stop])

    def joined(window: list[tuple[FragmentReader, FileReader]], names: tuple[str, ...]) -> pa.Table:
        table = read_whole_files([file for _, file in window], names)
        table = pa.Table.from_arrays(table.columns, schema=schema)
        if not any(len(reader.deleted) for reader, _ in window):
            return table
        return _filtered(table, np.concatenate([_live_mask(reader) for reader, _ in window]))

    def tables() -> Iterator[pa.Table]:
        window: list[tuple[FragmentReader, FileReader]] = []
        window_names: tuple[str, ...] = ()
        rows = size = 0
        for reader, whole in _joinable(readers, columns):
            file_bytes = reader.metadata.files[0].file_size_bytes if whole is not None else 0
            if window and (
                whole is None
                or whole[1] != window_names
                or rows + reader.physical_rows > COALESCE_ROWS
                or size + file_bytes > WINDOW_FILE_BYTES
            ):
                yield joined(window, window_names)
                window, rows, size = [], 0, 0
            if whole is None:
                yield from one(reader)
                continue
            window.append((reader, whole[0]))
            window_names = whole[1]
            rows += reader.physical_rows
            size += file_bytes
        if window:
            yield joined(window, window_names)

    return _coalesced(tables(), batch_size)


#: The pool of the batches a task's reading thread builds (the live rows filtered and gathered):
#: the system allocator's, whose free pages :func:`release_free_memory` hands back from any thread,
#: where Arrow's default pool (mimalloc) keeps free pages in the heap of the thread that allocated
#: them. These batches are what the writer buffers (8 MiB per field); with the default pool, one
#: 1M-row task's peak RSS was 5-13 MB higher (three runs each, one task at a time).
_POOL = pa.system_memory_pool()


def _filtered(table: pa.Table, live: np.ndarray) -> pa.Table:
    """The rows of ``table`` where ``live`` is true (allocated in :data:`_POOL`)."""
    return pc.filter(table, pa.array(live), memory_pool=_POOL)


def _joinable(
    readers: Sequence[FragmentReader], columns: Sequence[str]
) -> Iterator[tuple[FragmentReader, tuple[FileReader, tuple[str, ...]] | None]]:
    """Each of ``readers`` with its :func:`_whole_file` when it is small enough to be read with
    others (None otherwise).

    A compaction reads every byte of the files it rewrites: on a remote store the data files of
    the next fragments are fetched whole together (concurrent requests), up to
    :data:`WINDOW_FILE_BYTES` of them at a time, and held while they are read
    (:func:`~lance_ops.fragment.scan.prefetched`), where opening them one by one would cost a
    footer request and then page reads, one after another, per file."""
    if not readers:
        return
    for reader in prefetched(readers[0].files, readers, columns, whole=True, budget=WINDOW_FILE_BYTES):
        yield reader, _whole_file(reader, columns) if reader.physical_rows < COALESCE_ROWS else None


def _whole_file(
    reader: FragmentReader, columns: Sequence[str], file: FileReader | None = None
) -> tuple[FileReader, tuple[str, ...]] | None:
    """The data file of a fragment held in one 2.1+ file, and the names of ``columns`` in it, when
    the file's columns are the dataset's fields as they are (whole, of the same types, no blob
    descriptions): its rows are then the fragment's rows with no conversion (what
    :meth:`FragmentReader.read` would return); None otherwise. ``file``: that file's reader, when
    the caller opened it already."""
    files, meta = reader.files, reader.metadata
    if len(meta.files) != 1:
        return None
    data_file = meta.files[0]
    if file is None:
        file = files.open_file(data_file)
    if not joinable(file) or int(file.num_rows) != reader.physical_rows:
        return None
    mapping = files.file_columns(data_file, file.schema)
    names = []
    for name in columns:
        index = files.schema.get_field_index(name)
        column = mapping.get(index)
        if (
            column is None
            or files.has_blob_v2[index]
            or not files.leaves[index] <= column.dataset_ids(column.nodes[0].id)
            or file.schema.field(column.name).type != files.schema.field(index).type
        ):
            return None
        names.append(column.name)
    return file, tuple(names)


#: Bytes of data files (as the manifest records them) up to which :func:`_scan` reads small
#: fragments together: with ``COALESCE_ROWS``, what bounds the memory of one joined read.
WINDOW_FILE_BYTES = 16 * 1024 * 1024

#: Rows / bytes up to which :func:`_coalesced` gathers the tables of small fragments into one batch.
COALESCE_ROWS = 1 << 16
COALESCE_BYTES = 4 * 1024 * 1024


def _coalesced(tables: Iterator[pa.Table], batch_size: int) -> Iterator[pa.RecordBatch]:
    """The rows of ``tables`` in order, in batches of ``batch_size`` rows or, where the tables are
    small (the fragments a compaction merges), gathered into batches of up to ``COALESCE_ROWS``
    rows or ``COALESCE_BYTES`` bytes: the writer then pays its per-batch costs (buffering, the
    distinct sketches, the hand-off between the reading and writing threads) once per batch of
    many fragments instead of once per few thousand rows."""
    rows_cap = max(batch_size, COALESCE_ROWS)
    pending: list[pa.Table] = []
    rows = size = 0

    def flush() -> Iterator[pa.RecordBatch]:
        nonlocal rows, size
        table = pending[0] if len(pending) == 1 else pa.concat_tables(pending, memory_pool=_POOL)
        pending.clear()
        rows = size = 0
        yield from table.combine_chunks(memory_pool=_POOL).to_batches(max_chunksize=rows_cap)

    for table in tables:
        if not table.num_rows:
            continue
        if table.num_rows >= rows_cap or table.nbytes >= COALESCE_BYTES:  # large: as it is
            if pending:
                yield from flush()
            yield from table.to_batches(max_chunksize=batch_size)
            continue
        if pending and (rows + table.num_rows > rows_cap or size + table.nbytes > COALESCE_BYTES):
            yield from flush()
        pending.append(table)
        rows += table.num_rows
        size += table.nbytes
    if pending:
        yield from flush()


#: Bytes of decoded batches the reading thread of a task may hold ahead of its writer: two or so
#: batches of small fragments (:data:`COALESCE_BYTES`) keep the writer fed; the writer encodes
#: slower than the reader decodes, so the queue stays full and this much is held per task.
READ_AHEAD_BYTES = 4 * 1024 * 1024


class _Handoff:
    """Batches passed from one thread to another, at most ``budget`` bytes of them waiting (one
    batch always fits), until the producer finishes or fails, or the consumer leaves."""

    def __init__(self, budget: int) -> None:
        self._cond = threading.Condition()
        self._items: deque[tuple[pa.RecordBatch | BaseException | None, int]] = deque()
        self._bytes = 0
        self._budget = budget
        self.closed = False

    def put(self, item: pa.RecordBatch | BaseException | None, size: int = 0) -> bool:
        """Queue ``item`` (a batch, the producer's failure, or None at the end); False when the
        consumer has left."""
        with self._cond:
            self._cond.wait_for(lambda: self.closed or not self._items or self._bytes + size <= self._budget)
            if self.closed:
                return False
            self._items.append((item, size))
            self._bytes += size
            self._cond.notify_all()
            return True

    def get(self) -> pa.RecordBatch | BaseException | None:
        with self._cond:
            self._cond.wait_for(lambda: bool(self._items))
            item, size = self._items.popleft()
            self._bytes -= size
            self._cond.notify_all()
            return item

    def close(self) -> None:
        with self._cond:
            self.closed = True
            self._items.clear()
            self._cond.notify_all()


def _read_ahead(
    batches: Iterator[pa.RecordBatch], budget: int = READ_AHEAD_BYTES
) -> Generator[pa.RecordBatch, None, None]:
    """``batches`` produced on a thread of their own, so that the source fragments are read and
    decoded while the writer encodes what came before (at most ``budget`` bytes ahead: memory
    stays bounded whatever the task's size). A failure of the producer is raised here, in order."""
    handoff = _Handoff(budget)

    def produce() -> None:
        try:
            for batch in batches:
                if not handoff.put(batch, batch.nbytes):
                    return
            handoff.put(None)
        except BaseException as exc:  # handed to the consumer, raised there
            handoff.put(exc)
        finally:
            close = getattr(batches, "close", None)
            if close is not None:
                close()

    thread = threading.Thread(target=produce, name="lance-ops-compaction-read", daemon=True)
    thread.start()
    try:
        while True:
            item = handoff.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        handoff.close()
        thread.join()


def _live_mask(reader: FragmentReader) -> np.ndarray:
    live = np.ones(reader.physical_rows, dtype=bool)
    live[reader.deleted.astype(np.int64)] = False
    return live


def _moved_sequences(
    files: VersionFiles, readers: Sequence[FragmentReader], new: Sequence[DataFragment]
) -> list[DataFragment]:
    """``new`` with the row ids and versions of the rows they received (in order), as pylance 14.

    Each source fragment's segments (and version runs) lose their deleted rows, segment by segment;
    then they are cut into the new fragments' row counts (:func:`rechunk_row_ids`,
    :func:`rechunk_versions`, one new fragment at a time). The source fragments are read as the
    cut goes, so the expanded ids and versions of at most one new fragment (plus one source
    fragment) are held at once, however many rows the task moves.
    """
    sizes = [f.physical_rows for f in new]
    ids = (
        rechunk_row_ids(spans, [size]) for size, spans in _cut_stream(_row_id_spans(files, readers), sizes)
    )
    created, updated = (
        (
            rechunk_versions(list(pieces), [size])
            for size, pieces in _cut_stream(_version_runs(files, readers, attr), sizes)
        )
        for attr in ("created_at_versions", "last_updated_at_versions")
    )
    return [
        replace(fragment, row_ids=i, created_at_versions=c, last_updated_at_versions=u)
        for fragment, (i,), (c,), (u,) in zip(new, ids, created, updated, strict=True)
    ]


def _row_id_spans(files: VersionFiles, readers: Sequence[FragmentReader]) -> Iterator[np.ndarray]:
    """The live row ids of ``readers``, in order, segment by segment (deleted rows removed)."""
    for reader in readers:
        meta, live = reader.metadata, _live_mask(reader)
        if meta.row_ids is None:
            raise UnsupportedFeatureError(f"fragment {meta.id} has no row id sequence")
        position = 0
        for segment in decode_row_id_segments(load_sequence(files.store, files.root, meta.row_ids)):
            yield segment[live[position : position + len(segment)]]
            position += len(segment)
        if position != reader.physical_rows:
            raise CorruptFileError(
                f"fragment {meta.id}", f"row id sequence holds {position} ids for {reader.physical_rows} rows"
            )


def _version_runs(
    files: VersionFiles, readers: Sequence[FragmentReader], attr: str
) -> Iterator[tuple[np.ndarray, int]]:
    """The live rows' version runs of ``readers`` (``attr``: created / last updated), in order."""
    for reader in readers:
        value = getattr(reader.metadata, attr)
        runs: VersionRuns = (
            [(np.arange(reader.physical_rows, dtype=np.uint64), 1)]
            if value is None
            else decode_version_runs(load_sequence(files.store, files.root, value), reader.physical_rows)
        )
        yield from mask_version_runs(runs, _live_mask(reader))


_Span = TypeVar("_Span", np.ndarray, tuple[np.ndarray, int])


def _cut_stream(spans: Iterator[_Span], sizes: Sequence[int]) -> Iterator[tuple[int, list[_Span]]]:
    """Per chunk of ``sizes`` rows, ``(size, the non-empty pieces of spans it takes)`` in order (a
    span is an array, or an ``(array, tag)`` pair cut on its array); raises
    :class:`CorruptFileError` when the spans hold fewer or more rows than the chunks."""

    def values(span: _Span) -> np.ndarray:
        return span[0] if isinstance(span, tuple) else span

    def piece(span: _Span, start: int, stop: int | None = None) -> _Span:
        if isinstance(span, tuple):
            return (span[0][start:stop], span[1])  # type: ignore[return-value]
        return span[start:stop]  # type: ignore[return-value]

    carry: _Span | None = None
    for size in sizes:
        pieces: list[_Span] = []
        remaining = size
        while remaining > 0:
            span = carry if carry is not None else next(spans, None)
            carry = None
            if span is None:
                raise CorruptFileError(
                    "<compaction>", f"the row sequences hold too few rows for {list(sizes)}"
                )
            count = len(values(span))
            if not count:
                continue
            if count > remaining:
                carry = piece(span, remaining)
                span = piece(span, 0, remaining)
                count = remaining
            pieces.append(span)
            remaining -= count
        yield size, pieces
    if carry is not None or any(len(values(span)) for span in spans):
        raise CorruptFileError("<compaction>", f"the row sequences hold too many rows for {list(sizes)}")


def output_row_counts(live_rows: int, target_rows_per_fragment: int) -> list[int]:
    """Rows of each new fragment of a task, as pylance 14 splits them: ``live // target`` fragments
    (at least one) of balanced sizes, the first ones a row larger. 53 rows, target 10 ->
    ``[11, 11, 11, 10, 10]``; 800 rows, target 500 -> ``[800]``."""
    if live_rows <= 0:
        return []
    count = max(1, live_rows // target_rows_per_fragment)
    size, extra = divmod(live_rows, count)
    return [size + 1] * extra + [size] * (count - extra)


class _RowStream:
    """Batches of a stream handed out in pieces of a given number of rows."""

    def __init__(self, batches: Iterator[pa.RecordBatch]) -> None:
        self._batches = batches
        self._carry: pa.RecordBatch | None = None

    def left(self) -> bool:
        """Whether rows remain after what was taken."""
        if self._carry is not None and self._carry.num_rows:
            return True
        return any(batch.num_rows for batch in self._batches)

    def take(self, rows: int) -> Iterator[pa.RecordBatch]:
        while rows > 0:
            batch = self._carry if self._carry is not None else next(self._batches, None)
            self._carry = None
            if batch is None:
                raise CorruptFileError("<compaction>", f"the fragments ran out of rows ({rows} short)")
            if batch.num_rows > rows:
                self._carry = batch.slice(rows)
                batch = batch.slice(0, rows)
            rows -= batch.num_rows
            if batch.num_rows:
                yield batch


def write_rows(
    files: VersionFiles, options: CompactionOptions, batches: Iterator[pa.RecordBatch], live_rows: int
) -> list[DataFragment]:
    """``batches`` (exactly ``live_rows`` rows of the dataset's schema) written as the new fragments
    of a task (:func:`output_row_counts`), with the dataset's write settings; nothing committed."""
    stream = _RowStream(batches)
    write_options = WriteOptions(
        max_rows_per_file=MAX_ROWS_PER_FRAGMENT,
        max_rows_per_group=options.max_rows_per_group,
        max_bytes_per_file=options.max_bytes_per_file or DEFAULT_MAX_BYTES_PER_FILE,
        data_storage_version=options.data_storage_version or files.manifest.data_storage_version,
        # The dataset's encoding plan, like every other writer of the dataset.
        encoding_plan=EncodingPlan.from_config(files.manifest.config),
    ).for_dataset(files.manifest.config)
    new: list[DataFragment] = []
    for rows in output_row_counts(live_rows, options.target_rows_per_fragment):
        reader = pa.RecordBatchReader.from_batches(files.schema, stream.take(rows))
        chunk_options = replace(write_options, max_rows_per_file=rows)
        new.extend(write_new_fragments(reader, files.storage, files.lance_schema, chunk_options))
    if stream.left():
        raise CorruptFileError("<compaction>", f"the fragments hold more than their {live_rows} live rows")
    return new


def execute_task(files: VersionFiles, task: CompactionTask) -> RewriteResult:
    """Rewrite the fragments of ``task`` (from the version ``files`` reads) into new fragments.

    The memory its threads freed is handed back to the kernel when it ends
    (:func:`~lance_ops._malloc.release_free_memory`), so that what one task's heaps keep free
    does not add up with the next task's working set."""
    try:
        return _rewrite(files, task)
    finally:
        release_free_memory()


def _rewrite(files: VersionFiles, task: CompactionTask) -> RewriteResult:
    if task.cluster_splits is not None:  # incremental clustering: ranges written apart
        return clustering.execute_split_task(files, task)
    options = task.options
    readers = [files.fragment(f) for f in task.fragments]
    schema = files.schema
    batch_size = options.batch_size or DEFAULT_BATCH_SIZE
    files.load_deletions(readers)  # together, on a remote store
    live_rows = sum(r.physical_rows - len(r.deleted) for r in readers)
    order: np.ndarray | None = None
    if options.cluster_by:  # rows in key order; ``order`` is the permutation (lance_ops.ops.clustering)
        batches, order = clustering.ordered_batches(files, readers, options, batch_size)
        new = write_rows(files, options, batches, live_rows)
    else:  # the next rows are read while the writer encodes
        ahead = _read_ahead(_scan(readers, schema, batch_size))
        try:
            new = write_rows(files, options, ahead, live_rows)
        finally:
            ahead.close()
    if files.manifest.uses_stable_row_ids:
        new = (
            _moved_sequences(files, readers, new)
            if order is None
            else clustering.moved_sequences(files, readers, new, order)
        )
    # with stable row ids too when an index covers the rows: pylance 14's BTREE holds row
    # addresses (otherwise they are left out; commit_compaction computes them if the version it
    # commits on has an index covering these fragments)
    row_addrs = None
    if (
        order is not None
        or not files.manifest.uses_stable_row_ids
        or covering(files.manifest, task.fragments)
    ):
        in_order = clustering.addresses_in_order
        row_addrs = _live_addresses(readers) if order is None else in_order(readers, order)
    metrics = CompactionMetrics(
        fragments_removed=len(task.fragments),
        fragments_added=len(new),
        files_removed=sum(len(f.files) + (f.deletion_file is not None) for f in task.fragments),
        files_added=sum(len(f.files) for f in new),
    )
    return RewriteResult(
        task.read_version, tuple(task.fragments), tuple(new), metrics, row_addrs, options.defer_index_remap
    )


def _live_addresses(readers: Sequence[FragmentReader]) -> np.ndarray:
    """The row addresses of the live rows of ``readers``, in order."""
    return np.concatenate(
        [row_addresses(r.id, np.flatnonzero(_live_mask(r))) for r in readers] or [np.zeros(0, np.uint64)]
    )


# ------------------------------------------------------------------------------------------ commit


def _with_row_addrs(
    storage: StorageContext, manifest: Manifest, results: Sequence[RewriteResult]
) -> list[RewriteResult]:
    """``results`` with the surviving old row addresses of every group, computed from the original
    fragments (and their deletion files) where a task left them out (stable row ids and no index
    covering its fragments when it ran: they are needed when one covers them now)."""
    files = VersionFiles(storage, manifest)
    return [
        r
        if r.row_addrs is not None
        else replace(r, row_addrs=_live_addresses([files.fragment(f) for f in r.original_fragments]))
        for r in results
    ]


def _refuse_deferred_permutation(
    storage: StorageContext, results: Sequence[RewriteResult], changes: IndexChanges
) -> None:
    """A clustering's permutation cannot go through the Fragment Reuse Index: refuse it, removing
    the index directories already rewritten for it (nothing is committed)."""
    try:
        clustering.refuse_deferred_permutation(results, changes.deferred)
    except ClusterIndexError:
        discard(storage, changes.rewritten)
        raise


def commit_compaction(
    location: Location,
    results: Sequence[RewriteResult],
    options: CommitOptions,
    remapper: IndexRemapper | None = None,
) -> CompactionOutcome:
    """Commit finished tasks: reserve the new fragment ids, then one ``Rewrite`` on the plan's version.

    ``location`` is the dataset's storage context, or its URI (opened with ``options.storage_options``).
    ``remapper`` rewrites the files of the indices to remap (default: here, one after the other;
    the Spark job remaps on its executors); rewritten files that end up not committed are removed.

    Raises :class:`~lance_ops.errors.RetryableCommitConflictError` when a fragment being compacted
    was changed since the plan's read version (updated, rewritten, or deleted from without stable
    row ids; deletes are carried into the new fragments with them).
    """
    if not results:
        raise InvalidArgumentError("no compaction results to commit")
    versions = {r.read_version for r in results}
    if len(versions) != 1:
        raise InvalidArgumentError(f"compaction results come from different read versions {sorted(versions)}")
    count = sum(len(r.new_fragments) for r in results)
    storage = StorageContext.of(location, options.storage_options)
    latest = load_manifest(storage.store, storage.root).manifest
    defer = any(r.defer_index_remap for r in results)
    covered = covering(latest, [f for r in results for f in r.original_fragments])
    changes = IndexChanges()
    if covered:
        refuse_deferred_with_stable_ids(latest, defer)
        check_index_files(storage, covered)
        results = _with_row_addrs(storage, latest, results)
        # Indices are rewritten before anything is committed (a corrupt index file fails the
        # compaction with nothing committed), for the ids the reservation will give: the next ones,
        # unless another writer reserves first (then they are rewritten again).
        first = 0 if latest.max_fragment_id is None else latest.max_fragment_id + 1
        moves, _ = _moves(results, first)
        changes = changes_for_rewrite(
            storage, latest, moves, defer=defer, reuse_version=latest.version + 1, remapper=remapper
        )
        _refuse_deferred_permutation(storage, results, changes)
    try:
        reserved, _ = commit(storage, ReserveFragments(count), replace(options, read_version=None))
    except CommitConflictError:  # surely not committed (after an I/O error it might be)
        discard(storage, changes.rewritten)
        raise
    assert reserved.max_fragment_id is not None
    moves, groups = _moves(results, reserved.max_fragment_id - count + 1)
    if covered and (reserved.max_fragment_id != first + count - 1 or reserved.version != latest.version + 1):
        discard(storage, changes.rewritten)  # written for the ids another writer reserved first
        changes = changes_for_rewrite(
            storage, reserved, moves, defer=defer, reuse_version=reserved.version, remapper=remapper
        )
        _refuse_deferred_permutation(storage, results, changes)
    operation = Rewrite(tuple(groups), changes.rewritten, changes.frag_reuse_index)
    try:
        manifest, transaction = commit(storage, operation, replace(options, read_version=versions.pop()))
    except CommitConflictError:  # surely not committed: the rewritten files are nobody's
        discard(storage, changes.rewritten)
        raise
    metrics = sum((r.metrics for r in results), CompactionMetrics())
    moved = () if latest.uses_stable_row_ids else tuple(moves)
    return CompactionOutcome(manifest, transaction, metrics, moved, changes, storage)


def _new_addresses(fragments: Sequence[DataFragment]) -> np.ndarray:
    """The row addresses of every row of ``fragments``, in order, built in one array."""
    out = np.empty(sum(f.physical_rows for f in fragments), dtype=np.uint64)
    start = 0
    for f in fragments:
        part = out[start : start + f.physical_rows]
        part[:] = np.arange(f.physical_rows, dtype=np.uint64)
        part |= np.uint64(f.id) << np.uint64(32)
        start += f.physical_rows
    return out


def _joined(parts: Sequence[np.ndarray]) -> np.ndarray:
    """``parts`` concatenated (the only part itself: no copy of a row-per-entry array)."""
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _moves(results: Sequence[RewriteResult], first_id: int) -> tuple[list[GroupMove], list[RewriteGroup]]:
    """Each result's new fragments numbered from ``first_id`` on (in order)."""
    moves, groups = [], []
    next_id = first_id
    for result in results:
        new = tuple(f.with_id(next_id + n) for n, f in enumerate(result.new_fragments))
        next_id += len(new)
        moves.append(GroupMove(result.original_fragments, new, result.row_addrs))
        groups.append(RewriteGroup(result.original_fragments, new))
    return moves, groups


def _done_message(result: RewriteResult) -> str:
    old = [f.id for f in result.original_fragments]
    return f"compacted fragments {old} into {len(result.new_fragments)}"


def _merge(outcomes: Sequence[CompactionOutcome]) -> CompactionOutcome:
    return CompactionOutcome(
        outcomes[-1].manifest,
        outcomes[-1].transaction,
        sum((o.metrics for o in outcomes), CompactionMetrics()),
        tuple(m for o in outcomes for m in o.moves),
        IndexChanges(
            remapped=tuple(n for o in outcomes for n in o.indices.remapped),
            deferred=tuple(n for o in outcomes for n in o.indices.deferred),
            moved=tuple(n for o in outcomes for n in o.indices.moved),
        ),
        outcomes[-1].storage,
    )


class TaskRunner(Protocol):
    """Runs compaction tasks somewhere and yields ``(plan index, result)`` as each finishes.

    ``group`` is the number of results :func:`compact` commits together (``commit_every``, else
    every task); ``tracker`` is advanced by one per finished task. A failed task raises, after the
    results already finished have been yielded: those are committed by whole groups first. The
    default runs the tasks in threads of this process (:func:`local_runner`); the Spark job runs
    each group as one Spark job on its executors (:mod:`jobs.compact`).
    """

    def __call__(
        self, tasks: Sequence[CompactionTask], group: int, tracker: Tracker
    ) -> Iterator[tuple[int, RewriteResult]]: ...


def local_runner(files: VersionFiles, num_threads: int | None = None) -> TaskRunner:
    """Tasks executed ``num_threads`` (default: the CPU count) at a time in this process, against
    the version ``files`` holds; results are yielded in the order they finish."""

    def run(
        tasks: Sequence[CompactionTask], group: int, tracker: Tracker
    ) -> Iterator[tuple[int, RewriteResult]]:
        failure: BaseException | None = None
        with ThreadPoolExecutor(max_workers=num_threads or os.cpu_count() or 1) as pool:
            order: dict[Future[RewriteResult], int] = {
                pool.submit(execute_task, VersionFiles(files.storage, files.manifest), task): n
                for n, task in enumerate(tasks)
            }
            pending = set(order)
            try:
                while pending and failure is None:
                    done, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for future in done:
                        try:
                            result = future.result()
                        except BaseException as exc:  # raised once the others finished are yielded
                            failure = failure or exc
                            for waiting in pending:  # start no further task
                                waiting.cancel()
                            continue
                        tracker.advance(1, _done_message(result))
                        yield order[future], result
            finally:
                for future in pending:
                    future.cancel()
        if failure is not None:
            raise failure

    return run


def check_commit_every(commit_every: int | None) -> None:
    if commit_every is not None and commit_every <= 0:
        raise InvalidOptionError("commit_every must be positive")


def compact(
    files: VersionFiles,
    options: CompactionOptions,
    commit_options: CommitOptions,
    commit_every: int | None = None,
    progress: ProgressCallback | None = None,
    runner: TaskRunner | None = None,
    remapper: IndexRemapper | None = None,
) -> CompactionOutcome | None:
    """Plan, execute and commit; None when there is nothing to do.

    ``runner`` executes the tasks (default: ``options.num_threads`` at a time in this process,
    :func:`local_runner`), ``remapper`` rewrites the indices the tasks' rows move under (default:
    in this process, :func:`~lance_ops.ops.index_remap.remap_indices`); ``progress`` hears of every
    task finished (:mod:`lance_ops.progress`).

    ``commit_every=N`` commits every N finished tasks (partial progress); otherwise all results are
    committed together at the end. A failing task stops the run: what was committed stays.
    """
    check_commit_every(commit_every)
    the_plan = plan(files.manifest, options)
    if options.cluster_by:
        the_plan = clustering.plan(files, the_plan)
    if not the_plan.tasks:
        return None
    run = runner or local_runner(files, options.num_threads)
    group = commit_every or len(the_plan.tasks)
    tracker = Tracker.start(progress, COMPACT, len(the_plan.tasks), "tasks")
    outcomes: list[CompactionOutcome] = []
    finished: list[tuple[int, RewriteResult]] = []

    def commit_first(count: int) -> None:
        nonlocal finished
        # new fragment ids follow plan order (as pylance's), whatever order tasks finish in
        chunk, finished = sorted(finished[:count], key=lambda item: item[0]), finished[count:]
        outcomes.append(commit_compaction(files.storage, [r for _, r in chunk], commit_options, remapper))

    for item in run(the_plan.tasks, group, tracker):
        finished.append(item)
        if len(finished) >= group:
            commit_first(group)
    if finished:
        commit_first(len(finished))
    return _merge(outcomes)
