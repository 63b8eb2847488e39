"""Asset checks on a declared dataset's latest version, and the thresholds they share with the
compaction sensor.

* ``fragmentation``: fragments and small files within the compaction policy's bounds (warning);
* ``deleted_rows``: the share of deleted rows within the policy's bound (warning);
* ``statistics_fresh``: every fragment has statistics for the policy's columns;
* ``version_seen``: the latest version was committed by a Dagster run, or Dagster has recorded it
  (the versions sensor records versions committed elsewhere);
* ``feature_flags``: the version uses only feature flags pylance knows, so pylance can read and
  write it.

No ``from __future__ import annotations`` here (Dagster inspects the check functions).
"""

from dataclasses import dataclass

import dagster as dg

import lance_ops
from assets import maintenance
from assets.config import CompactionPolicy, DatasetConfig
from assets.lance_assets import committed_by, dataset_key, dataset_resource, resource_key
from lance_ops.ops import clustering


@dataclass(frozen=True)
class Fragmentation:
    """The numbers of one version the compaction thresholds are about."""

    version: int
    fragments: int
    small_files: int
    deleted_rows: int
    physical_rows: int
    # (key, average overlap depth) of the dataset's clustering keys (config ``lance-ops.cluster-by``)
    overlap_depths: tuple[tuple[str, float], ...] = ()

    @classmethod
    def of(cls, ds: lance_ops.LanceDataset, policy: CompactionPolicy) -> "Fragmentation":
        stats = ds.stats.dataset_stats(max_rows_per_group=policy.small_file_rows)
        physical = sum(f.physical_rows for f in ds.manifest.fragments)
        return cls(
            ds.version,
            stats["num_fragments"],
            stats["num_small_files"],
            stats["num_deleted_rows"],
            physical,
            clustering_depths(ds),
        )

    @property
    def deleted_ratio(self) -> float:
        return self.deleted_rows / self.physical_rows if self.physical_rows else 0.0

    def fragment_breaches(self, policy: CompactionPolicy) -> list[str]:
        """Why the fragment layout is past the policy's bounds (empty: it is not)."""
        out = []
        if self.fragments > policy.max_fragments:
            out.append(f"{self.fragments} fragments > {policy.max_fragments}")
        if self.small_files > policy.max_small_files:
            out.append(f"{self.small_files} small files > {policy.max_small_files}")
        return out

    def deleted_breaches(self, policy: CompactionPolicy) -> list[str]:
        if self.deleted_ratio > policy.max_deleted_ratio:
            return [f"deleted-row ratio {self.deleted_ratio:.3f} > {policy.max_deleted_ratio}"]
        return []

    def clustering_breaches(self, policy: CompactionPolicy) -> list[str]:
        limit = policy.max_overlap_depth
        return [
            f"overlap depth of {key} {depth:.2f} > {limit}"
            for key, depth in self.overlap_depths
            if limit is not None and depth > limit
        ]

    def breaches(self, policy: CompactionPolicy) -> list[str]:
        """Every threshold past which compaction is due."""
        return (
            self.fragment_breaches(policy) + self.deleted_breaches(policy) + self.clustering_breaches(policy)
        )

    def metadata(self) -> dict[str, float | int]:
        return {
            "lance/version": self.version,
            "lance/fragments": self.fragments,
            "lance/small_files": self.small_files,
            "lance/deleted_rows": self.deleted_rows,
            "lance/deleted_ratio": self.deleted_ratio,
            **{f"lance/clustering/{key}/overlap_depth": depth for key, depth in self.overlap_depths},
        }


def clustering_depths(ds: lance_ops.LanceDataset) -> tuple[tuple[str, float], ...]:
    """Average overlap depth of each clustering key of the dataset config that is still a column."""
    keys = clustering.parse_keys(ds.config().get(clustering.CONFIG_CLUSTER_BY))
    present = [k for k in keys if ds.schema.get_field_index(k) >= 0]
    return tuple((k, ds.stats.clustering(k)["average_overlap_depth"]) for k in present)


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
    """The five checks of one dataset."""
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

    return [fragmentation, deleted_rows, statistics_fresh, version_seen, feature_flags]
