"""Maintenance assets of a declared dataset: encoding profile, compaction, indices, statistics, cleanup.

They hang below the dataset asset in that order (``lance/<name>/encodings`` ->
``compaction`` -> ``indices`` -> ``statistics`` -> ``cleanup``), which is the order the maintenance
job and schedule run them in: the encoding plan is stored before compaction rewrites the data with
it, the indices are caught up with compaction and appends, statistics are computed for the
compacted fragments, and cleanup then removes the versions and files (old index directories
included) compaction made obsolete. Compaction runs as the distributed Spark job (:func:`jobs.compact`);
the others go through :mod:`assets.maintenance` until their Spark jobs exist.

Compaction and cleanup first make a dry run and log its plan as an observation of the asset (so
the plan is in the UI before anything changes); ``dry_run: true`` in the run config stops there.
Each materialization carries the version's metadata (:func:`assets.lance_assets.dataset_metadata`)
plus the run's own numbers (fragments removed/added, files removed, bytes reclaimed, seconds).

No ``from __future__ import annotations`` here (Dagster reads the config annotations).
"""

import datetime as dt
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import Field

import jobs
from assets import maintenance
from assets.config import DatasetConfig
from assets.lance_assets import (
    dagster_progress,
    dagster_transaction_properties,
    dataset_key,
    dataset_resource,
    resource_key,
    spark_session,
    version_result,
)
from lance_ops.dataset import LanceDataset
from lance_ops.fragmentation import clustering_depths
from lance_ops.ops.compaction import CompactionMetrics


def maintenance_key(dataset: DatasetConfig, operation: str) -> dg.AssetKey:
    return dg.AssetKey(["lance", dataset.name, operation])


MAINTENANCE_ORDER = ("encodings", "compaction", "indices", "statistics", "cleanup")
# Metadata of a maintenance step that found nothing to do (and committed no version).
NOOP = {"lance/noop": True}


class CompactionConfig(dg.Config):
    """Run options of a compaction (unset: the dataset's policy)."""

    dry_run: bool = Field(default=False, description="Only plan: log the plan, commit nothing.")
    target_rows_per_fragment: int | None = Field(default=None, description="Rows per new fragment.")
    commit_every: int | None = Field(default=None, description="Commit after every N tasks.")


class StatisticsConfig(dg.Config):
    """Run options of a statistics rebuild."""

    force: bool = Field(default=False, description="Recompute fresh statistics too.")


class EncodingsConfig(dg.Config):
    """Run options of an encoding profile."""

    store: bool = Field(default=True, description="Store the plan, so later writes follow it.")


class CleanupConfig(dg.Config):
    """Run options of a cleanup (unset: the dataset's policy)."""

    dry_run: bool = Field(default=False, description="Only list what would be removed.")
    older_than_days: float | None = Field(default=None, description="Remove versions older than this.")
    retain_versions: int | None = Field(default=None, description="Keep at least this many versions.")


def table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> dg.MetadataValue:
    """Rows as a table metadata value (columns typed by their first value)."""
    kinds = {bool: "bool", int: "int", float: "float"}
    first = rows[0] if rows else {}
    schema = dg.TableSchema(
        columns=[dg.TableColumn(c, kinds.get(type(first.get(c)), "string")) for c in columns]
    )
    records = [
        dg.TableRecord({c: r[c] if isinstance(r[c], bool | int | float) else str(r[c]) for c in columns})
        for r in rows
    ]
    return dg.MetadataValue.table(records, schema)


def timed(func: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    result = func()
    return result, time.perf_counter() - started


def plan_metadata(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A compaction plan (rows of :func:`jobs.compact`'s dry run) as metadata."""
    return {
        "lance/plan/tasks": len(rows),
        "lance/plan/fragments": sum(len(r["fragment_ids"]) for r in rows),
        "lance/plan/rows": sum(r["rows"] for r in rows),
        "lance/plan/deleted_rows": sum(r["deleted_rows"] for r in rows),
        "lance/plan/bytes": sum(r["bytes"] for r in rows),
        "lance/plan": table(rows, ("task", "fragment_ids", "rows", "deleted_rows", "bytes")),
    }


def compaction_asset(dataset: DatasetConfig) -> dg.AssetsDefinition:
    policy = dataset.maintenance.compaction

    @dg.asset(
        key=maintenance_key(dataset, "compaction"),
        deps=[maintenance_key(dataset, "encodings")],
        kinds={"spark", "lance"},
        group_name=dataset.name,
        required_resource_keys={"pyspark", resource_key(dataset)},
        description="Distributed compaction (plan on the driver, tasks on executors, one Rewrite); "
        "the plan is logged first.",
    )
    def compaction(context: dg.AssetExecutionContext, config: CompactionConfig) -> dg.MaterializeResult:
        spark = spark_session(context)
        resource = dataset_resource(context, dataset)
        target = config.target_rows_per_fragment or policy.target_rows_per_fragment
        common: dict[str, Any] = {
            "storage_options": resource.resolved_storage_options(),
            "target_rows_per_fragment": target,
        }
        plan = jobs.compact(spark, resource.uri, dry_run=True, **common)
        assert not isinstance(plan, CompactionMetrics)
        planned = plan_metadata([row.asDict() for row in plan.collect()])
        context.log_event(dg.AssetObservation(asset_key=context.asset_key, metadata=planned))
        if config.dry_run:
            return version_result(resource, dataset, {**planned, "lance/dry_run": True})
        if not planned["lance/plan/tasks"]:
            context.log.info(f"nothing to compact in {resource.uri}: no fragment to merge or rewrite")
            return version_result(resource, dataset, {**planned, **NOOP, "lance/dry_run": False})
        before = resource.load()
        before_bytes = sum(d.file_size_bytes or 0 for f in before.manifest.fragments for d in f.files)
        metrics, seconds = timed(
            lambda: jobs.compact(
                spark,
                resource.uri,
                commit_every=config.commit_every or policy.commit_every,
                transaction_properties=dagster_transaction_properties(context),
                progress=dagster_progress(context),
                **common,
            )
        )
        after = resource.load()
        after_bytes = sum(d.file_size_bytes or 0 for f in after.manifest.fragments for d in f.files)
        done = {f"lance/compaction/{k}": v for k, v in asdict(metrics).items()}
        return version_result(
            resource,
            dataset,
            {
                **planned,
                **done,
                "lance/bytes_reclaimed": before_bytes - after_bytes,
                **{f"lance/clustering/{k}/overlap_depth": d for k, d in clustering_depths(after)},
                "lance/seconds": seconds,
                "lance/dry_run": False,
                "lance/noop": False,
            },
        )

    return compaction


def statistics_asset(dataset: DatasetConfig) -> dg.AssetsDefinition:
    columns = dataset.maintenance.statistics.columns

    @dg.asset(
        key=maintenance_key(dataset, "statistics"),
        deps=[maintenance_key(dataset, "indices")],
        kinds={"lance"},
        group_name=dataset.name,
        required_resource_keys={"pyspark", resource_key(dataset)},
        description=f"Column statistics ({', '.join(columns) if columns else 'all columns'}) for "
        "every fragment that lacks them; one UpdateConfig.",
    )
    def statistics(context: dg.AssetExecutionContext, config: StatisticsConfig) -> dg.MaterializeResult:
        resource = dataset_resource(context, dataset)
        outcome, seconds = timed(
            lambda: maintenance.rebuild_statistics(
                spark_session(context),
                resource.uri,
                columns,
                config.force,
                storage_options=resource.resolved_storage_options(),
                transaction_properties=dagster_transaction_properties(context),
                progress=dagster_progress(context),
            )
        )
        coverage = maintenance.statistics_coverage(resource.uri, columns, resource.resolved_storage_options())
        if outcome.version is None:
            context.log.info(
                f"statistics of {resource.uri} are current: nothing to rebuild, nothing committed"
            )
        return version_result(
            resource,
            dataset,
            {
                "lance/statistics/fragments_rebuilt": outcome.fragments_rebuilt,
                "lance/statistics/committed": outcome.version is not None,
                "lance/statistics/columns": len(coverage),
                "lance/seconds": seconds,
                "lance/noop": outcome.version is None,
            },
        )

    return statistics


def indices_asset(dataset: DatasetConfig) -> dg.AssetsDefinition:
    @dg.asset(
        key=maintenance_key(dataset, "indices"),
        deps=[maintenance_key(dataset, "compaction")],
        kinds={"spark", "lance"},
        group_name=dataset.name,
        required_resource_keys={"pyspark", resource_key(dataset)},
        description="Indices caught up after compaction: those a deferred compaction left behind are "
        "remapped, appended fragments are added (jobs.optimize_indices); coverage as metadata.",
    )
    def indices(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        resource = dataset_resource(context, dataset)
        options = resource.resolved_storage_options()
        created = maintenance.create_missing_indices(
            resource.uri,
            dataset.maintenance.indices.declare,
            storage_options=options,
            transaction_properties=dagster_transaction_properties(context),
        )
        if created:
            context.log.info(f"built the declared indices {list(created)} of {resource.uri}")
        before = maintenance.index_coverage(resource.uri, options)
        if before:
            outcome, seconds = timed(
                lambda: maintenance.optimize_indices(
                    spark_session(context),
                    resource.uri,
                    storage_options=options,
                    transaction_properties=dagster_transaction_properties(context),
                )
            )
        else:
            context.log.info(f"{resource.uri} has no index: nothing to maintain")
            outcome, seconds = maintenance.IndicesOutcome(None, (), ()), 0.0
        if outcome.unsupported is not None:
            context.log.warning(f"indices of {resource.uri} not fully optimized: {outcome.unsupported}")
        after = maintenance.index_coverage(resource.uri, options)
        return version_result(
            resource,
            dataset,
            {
                "lance/indices/count": len(after),
                "lance/indices/unindexed_rows_before": sum(u for u, _ in before.values()),
                "lance/indices/unindexed_rows": sum(u for u, _ in after.values()),
                "lance/indices/max_unindexed_ratio": max(
                    (u / t for u, t in after.values() if t), default=0.0
                ),
                "lance/indices/created": len(created),
                "lance/indices/remapped": len(outcome.remapped),
                "lance/indices/extended": len(outcome.extended),
                "lance/indices/unsupported": outcome.unsupported is not None,
                "lance/seconds": seconds,
                "lance/noop": outcome.version is None and not created,
            },
        )

    return indices


def encodings_asset(dataset: DatasetConfig) -> dg.AssetsDefinition:
    @dg.asset(
        key=maintenance_key(dataset, "encodings"),
        deps=[dataset_key(dataset)],
        kinds={"lance"},
        group_name=dataset.name,
        required_resource_keys={"pyspark", resource_key(dataset)},
        description="Profile the columns (distinct counts, sizes) into an encoding plan and store it; "
        "compaction and later writes then encode with it.",
    )
    def encodings(context: dg.AssetExecutionContext, config: EncodingsConfig) -> dg.MaterializeResult:
        resource = dataset_resource(context, dataset)
        outcome, seconds = timed(
            lambda: maintenance.profile_encodings(
                spark_session(context),
                resource.uri,
                config.store,
                storage_options=resource.resolved_storage_options(),
                transaction_properties=dagster_transaction_properties(context),
            )
        )
        rows = [{"column": name, **asdict(plan)} for name, plan in sorted(outcome.plan.columns.items())]
        if outcome.version is None:
            reason = "the stored plan is the same" if config.store else "store is off"
            context.log.info(f"encoding plan of {resource.uri} not committed: {reason}")
        return version_result(
            resource,
            dataset,
            {
                "lance/encodings/columns": len(rows),
                "lance/encodings/dictionary_columns": sum(r["dictionary"] for r in rows),
                "lance/encodings/stored": outcome.version is not None,
                "lance/encodings/plan": table(rows, ("column", "dictionary", "compression", "bss")),
                "lance/seconds": seconds,
                "lance/noop": outcome.version is None,
            },
        )

    return encodings


def cleanup_asset(dataset: DatasetConfig) -> dg.AssetsDefinition:
    policy = dataset.maintenance.cleanup

    @dg.asset(
        key=maintenance_key(dataset, "cleanup"),
        deps=[maintenance_key(dataset, "statistics")],
        kinds={"lance"},
        group_name=dataset.name,
        required_resource_keys={"pyspark", resource_key(dataset)},
        description=f"Remove untagged versions older than {policy.older_than_days} days"
        + (f" beyond the newest {policy.retain_versions}" if policy.retain_versions else "")
        + " and the files only they use; the dry run's list is logged first.",
    )
    def cleanup(context: dg.AssetExecutionContext, config: CleanupConfig) -> dg.MaterializeResult:
        resource = dataset_resource(context, dataset)
        days = policy.older_than_days if config.older_than_days is None else config.older_than_days
        arguments: dict[str, Any] = {
            "older_than": dt.timedelta(days=days),
            "retain_versions": config.retain_versions or policy.retain_versions,
            "storage_options": resource.resolved_storage_options(),
        }
        spark = spark_session(context)
        dry = maintenance.cleanup(spark, resource.uri, dry_run=True, **arguments)
        listed: dict[str, Any] = {
            "lance/cleanup/planned_files": len(dry.paths),
            "lance/cleanup/planned_bytes": dry.bytes_removed,
            "lance/cleanup/planned_versions": dry.old_versions,
            "lance/cleanup/paths": dg.MetadataValue.md("\n".join(f"- `{p}`" for p in dry.paths) or "nothing"),
        }
        context.log_event(dg.AssetObservation(asset_key=context.asset_key, metadata=listed))
        if config.dry_run:
            return version_result(resource, dataset, {**listed, "lance/dry_run": True})
        if dry.paths:
            stats, seconds = timed(
                lambda: maintenance.cleanup(
                    spark, resource.uri, progress=dagster_progress(context), **arguments
                )
            )
        else:
            context.log.info(f"nothing to clean up in {resource.uri}: every version and file is still needed")
            stats, seconds = dry, 0.0
        report = write_report(context, dataset, resource.load())
        linked = {} if report is None else {"lance/report": dg.MetadataValue.path(str(report))}
        return version_result(
            resource,
            dataset,
            {
                **listed,
                "lance/bytes_reclaimed": stats.bytes_removed,
                "lance/cleanup/old_versions": stats.old_versions,
                "lance/cleanup/files_removed": len(stats.paths),
                "lance/cleanup/data_files_removed": stats.data_files_removed,
                "lance/cleanup/deletion_files_removed": stats.deletion_files_removed,
                "lance/cleanup/transaction_files_removed": stats.transaction_files_removed,
                "lance/cleanup/index_files_removed": stats.index_files_removed,
                "lance/seconds": seconds,
                "lance/dry_run": False,
                "lance/noop": not dry.paths,
                **linked,
            },
        )

    return cleanup


def write_report(context: dg.AssetExecutionContext, dataset: DatasetConfig, ds: LanceDataset) -> Path | None:
    """The dataset's one-page HTML report (history, column sizes and encodings, compression,
    fragment sizes: :mod:`lance_ops.report`) for its current version, written to the dataset's
    reports directory (:attr:`DatasetConfig.reports_path`: beside a local dataset unless the datasets
    file names one), which outlives the Dagster instance; the end of every maintenance run links
    it. None (and a log line) for a remote dataset without a reports directory."""
    from lance_ops.report import render

    directory = dataset.reports_path
    if directory is None:
        context.log.info(f"no report written: {dataset.uri} is remote and 'reports_dir' is not set")
        return None
    path = directory / f"v{ds.version}.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(ds), encoding="utf-8")
    return path


def maintenance_assets(dataset: DatasetConfig) -> list[dg.AssetsDefinition]:
    """The five maintenance assets of a dataset, in :data:`MAINTENANCE_ORDER`."""
    return [
        encodings_asset(dataset),
        compaction_asset(dataset),
        indices_asset(dataset),
        statistics_asset(dataset),
        cleanup_asset(dataset),
    ]
