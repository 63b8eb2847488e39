"""The numbers of a dataset version that say whether compaction is due, and the thresholds' verdict.

One rule for both orchestrators: the Dagster compaction sensor and fragmentation checks
(:mod:`assets.checks`, :mod:`assets.automation`) and the Airflow ``LanceMaintenanceDueSensor``
and its trigger (:mod:`lance_ops.airflow.sensors`) compare these numbers with a dataset's
compaction policy (:class:`lance_ops.datasets_config.CompactionPolicy`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from lance_ops.dataset import LanceDataset
from lance_ops.ops import clustering

if TYPE_CHECKING:
    from lance_ops.datasets_config import CompactionPolicy


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
    def of(cls, ds: LanceDataset, policy: CompactionPolicy) -> Fragmentation:
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


def clustering_depths(ds: LanceDataset) -> tuple[tuple[str, float], ...]:
    """Average overlap depth of each clustering key of the dataset config that is still a column."""
    keys = clustering.parse_keys(ds.config().get(clustering.CONFIG_CLUSTER_BY))
    present = [k for k in keys if ds.schema.get_field_index(k) >= 0]
    return tuple((k, ds.stats.clustering(k)["average_overlap_depth"]) for k in present)
