"""Asset checks on a declared dataset's latest version; the fragmentation thresholds are those of
the compaction sensor (:class:`lance_ops.fragmentation.Fragmentation`).

* ``fragmentation``: fragments and small files within the compaction policy's bounds (warning);
* ``deleted_rows``: the share of deleted rows within the policy's bound (warning);
* ``statistics_fresh``: every fragment has statistics for the policy's columns;
* ``version_seen``: the latest version was committed by a Dagster run, or Dagster has recorded it
  (the versions sensor records versions committed elsewhere);
* ``feature_flags``: the version uses only feature flags pylance knows, so pylance can read and
  write it;
* ``indices_coverage``: no index leaves more than ``maintenance.indices.max_unindexed_ratio`` of
  the live rows unindexed.

No ``from __future__ import annotations`` here (Dagster inspects the check functions).
"""

import dagster as dg

from assets import maintenance
from assets.config import DatasetConfig
from assets.lance_assets import committed_by, dataset_key, dataset_resource, resource_key
from lance_ops.fragmentation import Fragmentation


def latest_recorded_version(instance: dg.DagsterInstance, key: dg.AssetKey) -> int | None:
    """The Lance version of the last materialization Dagster recorded for ``key`` (None: none)."""
    event = instance.get_latest_materialization_event(key)
    materialization = None if event is None else event.asset_materialization
    value = None if materialization is None else materialization.metadata.get("lance/version")
    return None if value is None else int(value.value)  # type: ignore[arg-type]


def _warning(state: Fragmentation, breaches: list[str]) -> dg.AssetCheckResult:
    """A WARN-severity check result: passed without breaches, else naming them."""
    return dg.AssetCheckResult(
        passed=not breaches,
        severity=dg.AssetCheckSeverity.WARN,
        description="; ".join(breaches) or None,
        metadata=state.metadata(),
    )


def dataset_checks(config: DatasetConfig) -> list[dg.AssetChecksDefinition]:
    """The six checks of one dataset."""
    policy = config.maintenance.compaction
    key = dataset_key(config)
    resources = {resource_key(config)}

    @dg.asset_check(
        asset=key,
        name="fragmentation",
        required_resource_keys=resources,
        description=f"At most {policy.max_fragments} fragments and {policy.max_small_files} small files "
        f"(< {policy.small_file_rows} rows).",
    )
    def fragmentation(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        state = Fragmentation.of(dataset_resource(context, config).load(), policy)
        return _warning(state, state.fragment_breaches(policy))

    @dg.asset_check(
        asset=key,
        name="deleted_rows",
        required_resource_keys=resources,
        description=f"At most {policy.max_deleted_ratio:.0%} of the stored rows are deleted.",
    )
    def deleted_rows(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        state = Fragmentation.of(dataset_resource(context, config).load(), policy)
        return _warning(state, state.deleted_breaches(policy))

    @dg.asset_check(
        asset=key,
        name="statistics_fresh",
        required_resource_keys=resources,
        description="Every fragment of the latest version has column statistics.",
    )
    def statistics_fresh(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        resource = dataset_resource(context, config)
        coverage = maintenance.statistics_coverage(
            resource.uri, config.maintenance.statistics.columns, resource.resolved_storage_options()
        )
        stale = {name: f"{have}/{total}" for name, (have, total) in coverage.items() if have < total}
        return dg.AssetCheckResult(
            passed=not stale,
            description=None if not stale else f"fragments with statistics: {stale}",
            metadata={
                "lance/version": resource.load().version,
                "lance/statistics/stale_columns": len(stale),
                "lance/statistics/columns": len(coverage),
            },
        )

    @dg.asset_check(
        asset=key,
        name="version_seen",
        required_resource_keys=resources,
        description="The latest version was committed by a Dagster run or recorded by Dagster.",
    )
    def version_seen(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        ds = dataset_resource(context, config).load()
        run_id = committed_by(ds)
        recorded = latest_recorded_version(context.instance, key)
        return dg.AssetCheckResult(
            passed=run_id is not None or recorded == ds.version,
            metadata={
                "lance/version": ds.version,
                "lance/recorded_version": -1 if recorded is None else recorded,
                "lance/committed_by": run_id or "outside Dagster",
            },
        )

    @dg.asset_check(
        asset=key,
        name="feature_flags",
        required_resource_keys=resources,
        description="The latest version uses only feature flags pylance can read and write.",
    )
    def feature_flags(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        ds = dataset_resource(context, config).load()
        reader, writer = maintenance.unsupported_feature_flags(ds)
        return dg.AssetCheckResult(
            passed=reader == 0 and writer == 0,
            description=None
            if reader == writer == 0
            else f"unknown flags: reader {reader:#x}, writer {writer:#x}",
            metadata={
                "lance/reader_feature_flags": ds.manifest.reader_feature_flags,
                "lance/writer_feature_flags": ds.manifest.writer_feature_flags,
                "lance/data_storage_version": ds.data_storage_version,
            },
        )

    ratio = config.maintenance.indices.max_unindexed_ratio

    @dg.asset_check(
        asset=key,
        name="indices_coverage",
        required_resource_keys=resources,
        description=f"No index leaves more than {ratio:.0%} of the live rows unindexed.",
    )
    def indices_coverage(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        resource = dataset_resource(context, config)
        coverage = maintenance.index_coverage(resource.uri, resource.resolved_storage_options())
        shares = {name: (u / t if t else 0.0) for name, (u, t) in coverage.items()}
        over = {name: f"{share:.1%}" for name, share in shares.items() if share > ratio}
        return dg.AssetCheckResult(
            passed=not over,
            description=None if not over else f"unindexed share above {ratio:.0%}: {over}",
            metadata={
                "lance/version": resource.load().version,
                "lance/indices/count": len(coverage),
                "lance/indices/unindexed_rows": sum(u for u, _ in coverage.values()),
                "lance/indices/max_unindexed_ratio": max(shares.values(), default=0.0),
            },
        )

    return [fragmentation, deleted_rows, statistics_fresh, version_seen, feature_flags, indices_coverage]
