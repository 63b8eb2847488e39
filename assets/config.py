"""The datasets Dagster manages: :mod:`lance_ops.datasets_config`, the one reader of
``lance_datasets.yaml`` the Dagster definitions and the Airflow DAG factory share (so both validate
the file alike and fail with the same messages). Re-exported here under the names the assets use."""

from lance_ops.datasets_config import (
    DEFAULT_PATH,
    ENV_VAR,
    CleanupPolicy,
    CompactionPolicy,
    DatasetConfig,
    DatasetsConfig,
    DatasetsConfigError,
    DeclaredIndex,
    IndicesPolicy,
    IngestSource,
    MaintenancePolicy,
    StatisticsPolicy,
    datasets_path,
    environment_references,
    load_datasets,
    parse_datasets,
    resolve_storage_options,
)

__all__ = [
    "DEFAULT_PATH",
    "ENV_VAR",
    "CleanupPolicy",
    "CompactionPolicy",
    "DatasetConfig",
    "DatasetsConfig",
    "DatasetsConfigError",
    "DeclaredIndex",
    "IndicesPolicy",
    "IngestSource",
    "MaintenancePolicy",
    "StatisticsPolicy",
    "datasets_path",
    "environment_references",
    "load_datasets",
    "parse_datasets",
    "resolve_storage_options",
]
