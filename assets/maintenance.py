"""The maintenance operations the Dagster assets call beyond compaction, in one place.

Statistics rebuilds and encoding profiles run as Spark jobs (:func:`jobs.rebuild_statistics`,
:func:`jobs.profile_encodings`), cleanup through its driver-side job (:func:`jobs.cleanup`);
restore, tags (the versions job runs without a Spark session) and the statistics coverage the
checks read are library calls. Each function shapes its job's result into what the assets report;
every function that commits stamps ``transaction_properties`` into its transaction.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql import SparkSession

import jobs
import lance_ops
from assets.config import DeclaredIndex
from jobs.common import commit_options, latest
from lance_ops.errors import UnsupportedIndexTypeError
from lance_ops.ops import history as history_op
from lance_ops.ops import indices as indices_op
from lance_ops.ops import statistics as statistics_op
from lance_ops.ops.cleanup import CleanupStats
from lance_ops.ops.encodings import store_plan
from lance_ops.ops.engine import (
    ENCODING_PLAN_KEY,
    SUPPORTED_READER_FLAGS,
    SUPPORTED_WRITER_FLAGS,
    EncodingPlan,
)
from lance_ops.ops.scalar_index import create_scalar_index
from lance_ops.progress import ProgressCallback

__all__ = [
    "EncodingOutcome",
    "StatisticsOutcome",
    "cleanup",
    "create_tag",
    "create_missing_indices",
    "index_coverage",
    "optimize_indices",
    "profile_encodings",
    "rebuild_statistics",
    "restore",
    "statistics_coverage",
    "unsupported_feature_flags",
]


@dataclass(frozen=True)
class StatisticsOutcome:
    """A statistics rebuild: the version it committed (None: everything was fresh) and the
    fragments it computed statistics for."""

    version: int | None
    fragments_rebuilt: int


@dataclass(frozen=True)
class EncodingOutcome:
    """An encoding profile: the plan, and the version storing it (None: the stored plan was the same
    or ``store`` was off)."""

    plan: EncodingPlan
    version: int | None


def rebuild_statistics(
    spark: SparkSession,
    uri: str,
    columns: Sequence[str] | None = None,
    force: bool = False,
    *,
    storage_options: Mapping[str, str] | None = None,
    transaction_properties: Mapping[str, str] | None = None,
    progress: ProgressCallback | None = None,
) -> StatisticsOutcome:
    """Compute the column statistics the latest version lacks (all with ``force``) on executors; one
    commit."""
    result = jobs.rebuild_statistics(
        spark,
        uri,
        columns,
        force,
        storage_options=storage_options,
        transaction_properties=transaction_properties,
        progress=progress,
    )
    version = None if result.manifest is None else result.manifest.version
    return StatisticsOutcome(version, len(result.fragment_ids))


def statistics_coverage(
    uri: str, columns: Sequence[str] | None = None, storage_options: Mapping[str, str] | None = None
) -> dict[str, tuple[int, int]]:
    """Column -> (fragments with fresh statistics, fragments) in the latest version, for ``columns``
    (default: every column that can have statistics)."""
    files = latest(uri, storage_options)
    ds = lance_ops.dataset(uri, files.manifest.version, storage_options)
    coverage = {}
    for name in statistics_op.statistics_fields(files, columns).values():
        summary = ds.stats.column_summary(name)
        coverage[name] = (summary["fragments_with_statistics"], summary["num_fragments"])
    return coverage


def index_coverage(uri: str, storage_options: Mapping[str, str] | None = None) -> dict[str, tuple[int, int]]:
    """Index name -> (unindexed live rows, live rows) in the latest version (system indices left
    out), from the manifest as ``ds.stats.index_stats`` counts them."""
    files = latest(uri, storage_options)
    out = {}
    for description in indices_op.describe_indices(files):
        if description.name.startswith("__lance_"):
            continue
        stats = indices_op.index_stats(files, description.name, details=False)
        indexed, unindexed = stats["num_indexed_rows"], stats["num_unindexed_rows"]
        out[description.name] = (unindexed, indexed + unindexed)
    return out


def create_missing_indices(
    uri: str,
    declared: Sequence[DeclaredIndex],
    *,
    storage_options: Mapping[str, str] | None = None,
    transaction_properties: Mapping[str, str] | None = None,
) -> tuple[str, ...]:
    """Build each declared index no index of that name exists for (one commit each, on the
    driver); the names built. Run twice, the second run builds nothing."""
    built = []
    for index in declared:
        ds = lance_ops.dataset(uri, storage_options=dict(storage_options or {}))
        if any(d.name == index.index_name for d in ds.describe_indices()):
            continue
        options = commit_options(storage_options, None, transaction_properties)
        files = latest(uri, storage_options)
        if index.type.startswith("IVF_"):
            ds.create_index(index.column, index.type, name=index.index_name, **dict(index.params))
        else:
            create_scalar_index(
                files, index.column, index.type, index.index_name, False, options, index.params
            )
        built.append(index.index_name)
    return tuple(built)


@dataclass(frozen=True)
class IndicesOutcome:
    """An index maintenance run: indices remapped (behind a deferred compaction) and extended
    (over appended fragments); ``unsupported`` names an index no codec could extend yet (the run
    still committed the remaps; the coverage check then reports the unindexed rows)."""

    version: int | None
    remapped: tuple[str, ...]
    extended: tuple[str, ...]
    unsupported: str | None = None


def optimize_indices(
    spark: SparkSession,
    uri: str,
    *,
    storage_options: Mapping[str, str] | None = None,
    transaction_properties: Mapping[str, str] | None = None,
) -> IndicesOutcome:
    """:func:`jobs.optimize_indices`; an index type no codec extends yet is reported, not raised."""
    before = latest(uri, storage_options).manifest.version
    unsupported = None
    try:
        report = jobs.optimize_indices(
            spark, uri, storage_options=storage_options, transaction_properties=transaction_properties
        )
        remapped, extended = report.remapped, report.extended
    except UnsupportedIndexTypeError as exc:
        unsupported, remapped, extended = str(exc), (), ()
    after = latest(uri, storage_options).manifest.version
    return IndicesOutcome(None if after == before else after, remapped, extended, unsupported)


def profile_encodings(
    spark: SparkSession,
    uri: str,
    store: bool = True,
    *,
    storage_options: Mapping[str, str] | None = None,
    transaction_properties: Mapping[str, str] | None = None,
) -> EncodingOutcome:
    """Profile the latest version's columns into an encoding plan on executors; with ``store``,
    commit the plan (one ``UpdateConfig``) unless the dataset already stores that very plan."""
    files = latest(uri, storage_options)
    plan = jobs.profile_encodings(spark, uri, store=False, storage_options=storage_options)
    if not store or files.manifest.config.get(ENCODING_PLAN_KEY) == plan.to_json():
        return EncodingOutcome(plan, None)
    options = commit_options(storage_options, transaction_properties=transaction_properties)
    manifest, _ = store_plan(files, plan, options)
    return EncodingOutcome(plan, manifest.version)


def cleanup(
    spark: SparkSession,
    uri: str,
    older_than: dt.timedelta | None = None,
    retain_versions: int | None = None,
    dry_run: bool = False,
    *,
    storage_options: Mapping[str, str] | None = None,
    progress: ProgressCallback | None = None,
) -> CleanupStats:
    """Remove old untagged versions and the files only they use (nothing with ``dry_run``).

    Cleanup commits no transaction, so there are no properties to stamp."""
    return jobs.cleanup(
        spark,
        uri,
        older_than,
        retain_versions,
        error_if_tagged_old_versions=False,
        dry_run=dry_run,
        storage_options=storage_options,
        progress=progress,
    )


def restore(
    uri: str,
    version: int | str,
    *,
    storage_options: Mapping[str, str] | None = None,
    transaction_properties: Mapping[str, str] | None = None,
) -> int:
    """Commit ``Restore`` of ``version`` (a number or a tag) on top of the latest; the new version."""
    target = lance_ops.dataset(uri, version, storage_options).version
    options = commit_options(storage_options, transaction_properties=transaction_properties)
    manifest, _ = history_op.restore(uri, target, options)
    return manifest.version


def create_tag(
    uri: str, name: str, version: int | None = None, *, storage_options: Mapping[str, str] | None = None
) -> int:
    """Point tag ``name`` at ``version`` (default: the latest), creating or moving it; the version.

    Tags need no Spark (the versions job runs without a session), so this is the library call."""
    ds = lance_ops.dataset(uri, storage_options=storage_options)
    target = ds.version if version is None else version
    if name in ds.tags.list():
        ds.tags.update(name, target)
    else:
        ds.tags.create(name, target)
    return target


def unsupported_feature_flags(ds: lance_ops.LanceDataset) -> tuple[int, int]:
    """The reader and writer feature flags of ``ds`` that pylance does not know (0, 0 when readable
    and writable by it)."""
    manifest = ds.manifest
    return (
        manifest.reader_feature_flags & ~SUPPORTED_READER_FLAGS,
        manifest.writer_feature_flags & ~SUPPORTED_WRITER_FLAGS,
    )
