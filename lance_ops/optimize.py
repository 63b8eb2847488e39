"""Dataset maintenance in pylance's shape: ``lance_ops.optimize.Compaction`` and ``ds.optimize``.

Distributed compaction (a Spark driver and its executors)::

    plan = Compaction.plan(ds, CompactionOptions(target_rows_per_fragment=1_000_000))   # driver
    results = [task.execute(ds.uri) for task in plan.tasks]                            # executors
    metrics = Compaction.commit(ds, results)                                           # driver

Plans, tasks and results pickle and have ``json()`` / ``from_json``. ``CompactionOptions`` is a
frozen dataclass; ``Compaction.plan`` also takes pylance's dict form. Options left unset come from
the manifest config (``lance.compaction.<name>``), then pylance's defaults. The rules are in
:mod:`lance_ops.ops.compaction`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any, Literal, TypedDict, Unpack, overload

from lance_ops.dataset import LanceDataset
from lance_ops.errors import InvalidArgumentError, UnsupportedFeatureError
from lance_ops.ops import clustering
from lance_ops.ops import compaction as ops
from lance_ops.ops import indices as indices_op
from lance_ops.ops.auto_cleanup import INTERVAL_KEY, OLDER_THAN_KEY
from lance_ops.ops.auto_cleanup import AutoCleanupConfig as AutoCleanup
from lance_ops.ops.commit import CommitOptions
from lance_ops.ops.compaction import (
    CompactionMetrics,
    CompactionOptions,
    CompactionOutcome,
    CompactionPlan,
    CompactionTask,
    RewriteResult,
)
from lance_ops.ops.indices import OptimizeReport
from lance_ops.progress import ProgressCallback

__all__ = [
    "Compaction",
    "CompactionKeywords",
    "CompactionMetrics",
    "CompactionOptions",
    "CompactionOutcome",
    "CompactionPlan",
    "CompactionTask",
    "DatasetOptimizer",
    "RewriteResult",
]


def _options(ds: LanceDataset, options: CompactionOptions | Mapping[str, Any] | None) -> CompactionOptions:
    explicit = asdict(options) if isinstance(options, CompactionOptions) else dict(options or {})
    return CompactionOptions.resolve(ds.manifest.config, **explicit)


def _commit_options(
    ds: LanceDataset,
    transaction_properties: Mapping[str, str] | None = None,
    commit: CommitOptions | None = None,
) -> CommitOptions:
    return ds.handle.commit_options(transaction_properties, commit)


class CompactionKeywords(TypedDict, total=False):
    """The keyword form of :class:`CompactionOptions` that ``compact_files`` takes (pylance 14's
    keywords, then lance_ops's); None leaves an option to the config, then the default. Its
    overloads name them through this one type (tests check it against the options and the
    signature)."""

    target_rows_per_fragment: int | None
    max_rows_per_group: int | None
    max_bytes_per_file: int | None
    materialize_deletions: bool | None
    materialize_deletions_threshold: float | None
    defer_index_remap: bool | None
    num_threads: int | None
    batch_size: int | None
    compaction_mode: str | None
    binary_copy_read_batch_bytes: int | None
    max_source_fragments: int | None
    max_source_rows: int | None
    max_source_bytes: int | None
    excluded_fragment_ids: Sequence[int] | None
    data_storage_version: str | None
    cluster_by: Sequence[str] | None
    cluster_mode: str | None
    cluster_memory_bytes: int | None
    cluster_spill_location: str | None
    cluster_incremental: bool | None
    purge: bool | None


class Compaction:
    """pylance's ``lance.optimize.Compaction``: plan on a driver, execute tasks anywhere, commit."""

    @staticmethod
    def plan(
        ds: LanceDataset, options: CompactionOptions | Mapping[str, Any] | None = None
    ) -> CompactionPlan:
        """The tasks compacting version ``ds.version`` (nothing is written)."""
        resolved = _options(ds, options)
        the_plan = ops.plan(ds.manifest, resolved)
        return clustering.plan(ds.handle.files, the_plan) if resolved.cluster_by else the_plan

    @staticmethod
    def execute(
        ds: LanceDataset,
        options: CompactionOptions | Mapping[str, Any] | None = None,
        *,
        commit: CommitOptions | None = None,
    ) -> CompactionMetrics:
        """Plan, execute and commit in one go; ``ds`` becomes the new version. ``commit`` (an
        extension) gives the commit settings (:class:`~lance_ops.CommitOptions`)."""
        outcome = ops.compact(ds.handle.files, _options(ds, options), _commit_options(ds, commit=commit))
        return _adopt(ds, outcome)

    @staticmethod
    def commit(
        ds: LanceDataset, results: Sequence[RewriteResult], *, commit: CommitOptions | None = None
    ) -> CompactionMetrics:
        """Commit executed tasks (``ReserveFragments`` + ``Rewrite``); ``ds`` becomes the new version.
        ``commit`` (an extension) gives the commit settings (:class:`~lance_ops.CommitOptions`)."""
        if not results:
            return CompactionMetrics()
        return _adopt(ds, ops.commit_compaction(ds.storage, results, _commit_options(ds, commit=commit)))


def _adopt(ds: LanceDataset, outcome: CompactionOutcome | None) -> CompactionMetrics:
    if outcome is None:
        return CompactionMetrics()
    ds.handle.adopt(outcome.manifest, outcome.transaction)
    return outcome.metrics


class DatasetOptimizer:
    """``ds.optimize``: maintenance operations on a dataset."""

    def __init__(self, ds: LanceDataset) -> None:
        self._ds = ds

    def enable_auto_cleanup(self, auto_cleanup_config: Mapping[str, int], **kwargs: Any) -> None:
        """Turn on automatic cleanup (pylance's ``AutoCleanupConfig`` dict: ``interval``,
        ``older_than_seconds``): one ``UpdateConfig`` commit of the ``lance.auto_cleanup.*`` keys."""
        self._ds.update_config(AutoCleanup.from_options(auto_cleanup_config).to_config())

    def disable_auto_cleanup(self, **kwargs: Any) -> None:
        """Turn automatic cleanup off: one commit deleting the ``lance.auto_cleanup.*`` keys."""
        self._ds.delete_config_keys([INTERVAL_KEY, OLDER_THAN_KEY])

    @overload
    def compact_files(
        self,
        *,
        options: CompactionOptions | None = ...,
        dry_run: Literal[False] = ...,
        commit_every: int | None = ...,
        progress: ProgressCallback | None = ...,
        transaction_properties: Mapping[str, str] | None = ...,
        commit: CommitOptions | None = ...,
        **keywords: Unpack[CompactionKeywords],
    ) -> CompactionMetrics: ...

    @overload
    def compact_files(
        self,
        *,
        options: CompactionOptions | None = ...,
        dry_run: Literal[True],
        commit_every: int | None = ...,
        progress: ProgressCallback | None = ...,
        transaction_properties: Mapping[str, str] | None = ...,
        commit: CommitOptions | None = ...,
        **keywords: Unpack[CompactionKeywords],
    ) -> CompactionPlan: ...

    def compact_files(
        self,
        *,
        target_rows_per_fragment: int | None = None,
        max_rows_per_group: int | None = None,
        max_bytes_per_file: int | None = None,
        materialize_deletions: bool | None = None,
        materialize_deletions_threshold: float | None = None,
        defer_index_remap: bool | None = None,
        num_threads: int | None = None,
        batch_size: int | None = None,
        compaction_mode: str | None = None,
        binary_copy_read_batch_bytes: int | None = None,
        max_source_fragments: int | None = None,
        max_source_rows: int | None = None,
        max_source_bytes: int | None = None,
        excluded_fragment_ids: Sequence[int] | None = None,
        data_storage_version: str | None = None,
        cluster_by: Sequence[str] | None = None,
        cluster_mode: str | None = None,
        cluster_memory_bytes: int | None = None,
        cluster_spill_location: str | None = None,
        cluster_incremental: bool | None = None,
        purge: bool | None = None,
        options: CompactionOptions | None = None,
        dry_run: bool = False,
        commit_every: int | None = None,
        progress: ProgressCallback | None = None,
        transaction_properties: Mapping[str, str] | None = None,
        commit: CommitOptions | None = None,
    ) -> CompactionMetrics | CompactionPlan:
        """Merge small adjacent fragments and materialise deletions (pylance's ``compact_files``).

        The compaction options are pylance 14's keywords, with its defaults
        (:class:`CompactionOptions`; :class:`CompactionKeywords` lists them), or one
        ``options=CompactionOptions(...)`` object instead. Unset keyword options come from the
        manifest config ``lance.compaction.<name>``, then the defaults.
        ``cluster_by`` / ``cluster_mode`` ("sort" or "zorder"; default: the config keys
        ``lance-ops.cluster-by`` / ``lance-ops.cluster-mode``) rewrite every fragment with its rows in
        key order unless already so (:mod:`lance_ops.ops.clustering`: ``cluster_memory_bytes`` bounds
        the external sort, which spills below ``cluster_spill_location``, a local path or object-store
        URI, default the local temporary directory; ``cluster_incremental=True`` rewrites only the
        fragments that new rows overlap); ``purge=True`` rewrites every
        fragment with a deletion file, whatever the threshold.
        ``dry_run=True`` returns the :class:`CompactionPlan` (groups with their fragments, live rows,
        deleted rows to materialise and bytes) and writes nothing. ``commit_every=N`` commits every
        N finished groups, so an interrupted run keeps them. Otherwise returns the metrics and
        ``ds`` becomes the new version. ``progress`` hears of every group compacted
        (:mod:`lance_ops.progress`). ``transaction_properties`` (an extension over pylance) are
        recorded in every transaction the compaction commits; ``commit`` (an extension) gives the
        commit settings as one :class:`~lance_ops.CommitOptions` (its ``transaction_properties``
        too, refused when given both ways differently).
        """
        # pylance's explicit keywords (its signature, kept for callers and introspection) are the
        # keyword form of CompactionOptions: gathered by name, then resolved in one place.
        keywords = {
            name: value for name, value in locals().items() if name in CompactionKeywords.__annotations__
        }
        if options is not None and any(value is not None for value in keywords.values()):
            raise InvalidArgumentError("compact_files takes options= or compaction keywords, not both")
        resolved = _options(self._ds, options if options is not None else keywords)
        if dry_run:
            the_plan = ops.plan(self._ds.manifest, resolved)
            return clustering.plan(self._ds.handle.files, the_plan) if resolved.cluster_by else the_plan
        commit_options = _commit_options(self._ds, transaction_properties, commit)
        outcome = ops.compact(self._ds.handle.files, resolved, commit_options, commit_every, progress)
        return _adopt(self._ds, outcome)

    def optimize_indices(
        self,
        index_names: Sequence[str] | None = None,
        num_indices_to_merge: int = 1,
        *,
        transaction_properties: Mapping[str, str] | None = None,
        commit: CommitOptions | None = None,
        **kwargs: Any,
    ) -> OptimizeReport:
        """Bring indices up to date, as pylance's ``optimize_indices``: indices a deferred
        compaction left behind are remapped through the Fragment Reuse Index (which is then
        trimmed), and fragments appended since an index was built are added to it. ``retrain``
        (pylance's) is not supported. ``ds`` becomes the version it leaves; returns what it did
        (an extension: pylance returns None). See :func:`lance_ops.ops.indices.optimize_indices`.
        """
        if kwargs.get("retrain"):
            raise UnsupportedFeatureError("optimize_indices(retrain=True) is not supported")
        unknown = set(kwargs) - {"retrain"}
        if unknown:
            raise TypeError(f"unknown optimize_indices arguments {sorted(unknown)}")
        report, committed = indices_op.optimize_indices(
            self._ds.handle.files,
            _commit_options(self._ds, transaction_properties, commit),
            None if index_names is None else list(index_names),
            num_indices_to_merge,
        )
        if committed is not None:
            self._ds.handle.adopt(*committed)
        return report

    def compact_files_with_outcome(
        self,
        options: CompactionOptions | None = None,
        commit_every: int | None = None,
        *,
        commit: CommitOptions | None = None,
    ) -> CompactionOutcome | None:
        """Like :meth:`compact_files`, returning the full outcome (manifest, metrics and, without
        stable row ids, the old -> new row address map callers use to remap their references)."""
        resolved = _options(self._ds, options)
        commit_options = _commit_options(self._ds, commit=commit)
        outcome = ops.compact(self._ds.handle.files, resolved, commit_options, commit_every)
        _adopt(self._ds, outcome)
        return outcome
