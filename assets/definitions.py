"""The one ``Definitions`` of lance-ops, loaded by ``workspace.yaml`` (``dagster dev`` in the repo root).

Built from the datasets file (``lance_datasets.yaml`` beside ``workspace.yaml``, or the file named
by ``LANCE_OPS_DATASETS``; see :mod:`assets.config`): for each dataset its assets (ingest when it
has a source, the dataset, the four maintenance assets), its checks, its maintenance, compaction
and versions jobs, its schedule and its two sensors, and a ``lance_<name>`` resource. Spark is the
``pyspark`` resource; runs execute in one process (``in_process_executor``), so the steps of a run
share one Spark session; the automation sensor (running by default) applies the dataset asset's
``eager`` condition. A bad file fails the load with :class:`assets.config.DatasetsConfigError`.
``change_feed_jobs`` (``{dataset name: job}``) adds each job with a ``<name>_change_feed_sensor``
(:mod:`assets.change_feed`) starting it for every new range of versions of that dataset.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import dagster as dg
from dagster_pyspark import PySparkResource

from assets.automation import (
    automation_sensor,
    compaction_job,
    compaction_sensor,
    maintenance_job,
    maintenance_schedule,
    versions_job,
    versions_sensor,
)
from assets.change_feed import change_feed_sensor
from assets.checks import dataset_checks
from assets.config import DatasetConfig, load_datasets
from assets.lance_assets import dataset_asset, ingest_asset, resource_key
from assets.maintenance_assets import maintenance_assets
from assets.resources import LanceDatasetResource, spark_resource
from lance_ops.errors import InvalidArgumentError


def dataset_definitions(config: DatasetConfig) -> dg.Definitions:
    """Everything Dagster knows about one declared dataset (its Spark resource excepted)."""
    maintenance, compaction = maintenance_job(config), compaction_job(config)
    assets = [dataset_asset(config), *maintenance_assets(config)]
    if config.ingest is not None:
        assets.insert(0, ingest_asset(config))
    return dg.Definitions(
        assets=assets,
        asset_checks=dataset_checks(config),
        jobs=[maintenance, compaction, versions_job(config)],
        schedules=[maintenance_schedule(config, maintenance)],
        sensors=[compaction_sensor(config, compaction), versions_sensor(config)],
        resources={
            resource_key(config): LanceDatasetResource(
                uri=config.uri, storage_options=dict(config.storage_options)
            )
        },
    )


def build_definitions(
    path: str | os.PathLike[str] | None = None,
    pyspark: PySparkResource | None = None,
    change_feed_jobs: Mapping[str, dg.JobDefinition] | None = None,
) -> dg.Definitions:
    """The Definitions of every dataset the file at ``path`` (default: the datasets file) declares;
    ``pyspark`` replaces the default Spark resource (:func:`assets.resources.spark_resource`);
    ``change_feed_jobs`` are started by change-feed sensors of the datasets they are keyed by."""
    datasets = load_datasets(path).datasets
    spark = {"pyspark": pyspark if pyspark is not None else spark_resource()}
    by_name = {d.name: d for d in datasets}
    jobs = dict(change_feed_jobs or {})
    unknown = sorted(set(jobs) - set(by_name))
    if unknown:
        raise InvalidArgumentError(f"change_feed_jobs name datasets the file does not declare: {unknown}")
    shared = dg.Definitions(
        resources=spark,
        jobs=list(jobs.values()),
        sensors=[automation_sensor(), *(change_feed_sensor(by_name[n], job) for n, job in jobs.items())],
        # Every step of a run in one process: the run's steps share its one Spark session (a
        # process per step would start a JVM per step, tripling a maintenance run's wall time).
        executor=dg.in_process_executor,
    )
    return dg.Definitions.merge(*(dataset_definitions(d) for d in datasets), shared)


defs = build_definitions()
