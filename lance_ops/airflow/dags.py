"""``dags_from_config``: the Airflow DAGs of every dataset declared in ``lance_datasets.yaml``.

The file is the one the Dagster definitions read, parsed by the same code
(:mod:`lance_ops.datasets_config`: same validation, same :class:`DatasetsConfigError` messages,
no Dagster import). For each dataset ``<name>``:

* ``lance_<name>_maintenance``: encodings -> compaction -> indices -> statistics -> cleanup (the
  Dagster maintenance job's order and policy; ``indices`` builds the declared indices and catches
  every index up, a no-op on a dataset without indices) on the policy's cron in its time zone.
  The run configuration ``{"dry_run": true}`` makes compaction and cleanup plan only (and indices
  only measure); cleanup is a dry run on the DAG's first run in any case (see
  :class:`~lance_ops.airflow.operators.LanceCleanupOperator`).
* ``lance_<name>_ingest`` (datasets with an ``ingest`` source): one run per day from
  ``start_date`` with catchup, each writing its day with ``replace_where`` (a re-run or a backfill
  replaces the day), or with ``mode: upsert`` merging it in by the source's ``keys``.
  ``end_offset: 0`` runs a day once it is over; ``end_offset`` >= 1 runs it at its start (today's
  partition is available, as in the Dagster partitions).
* ``lance_<name>_events``: scheduled on an asset whose ``AssetWatcher`` runs
  :class:`~lance_ops.airflow.triggers.LanceNewVersionTrigger`, so it runs when anyone commits a
  new version; it checks the compaction thresholds (the Dagster compaction sensor's) and compacts
  when one is passed, else skips.

Storage options keep their ``${NAME}`` references in the DAGs (and in the serialized trigger); the
operators resolve them in the task's process.
"""

from __future__ import annotations

import datetime as dt
import os
from typing import Any

from airflow.sdk import DAG, Asset, AssetWatcher, CronDataIntervalTimetable, CronTriggerTimetable, Param

from lance_ops.airflow.operators import (
    DRY_RUN_PARAM,
    Engine,
    LanceCleanupOperator,
    LanceCompactOperator,
    LanceIngestOperator,
    LanceOptimizeIndicesOperator,
    LanceProfileEncodingsOperator,
    LanceStatisticsOperator,
)
from lance_ops.airflow.sensors import LanceMaintenanceDueSensor
from lance_ops.airflow.triggers import LanceNewVersionTrigger
from lance_ops.datasets_config import DatasetConfig, load_datasets

# Where the maintenance and event DAGs start counting (they do not catch up).
EPOCH = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
TAGS = ["lance", "lance-ops"]


def asset_uri(uri: str) -> str:
    """The dataset's URI as an Airflow asset URI (local paths as ``file://``)."""
    return uri if "://" in uri else f"file://{os.path.abspath(uri)}"


def _location(config: DatasetConfig, engine: Engine, spark_master: str | None) -> dict[str, Any]:
    return {
        "uri": config.uri,
        "storage_options": dict(config.storage_options),
        "engine": engine,
        "spark_master": spark_master,
    }


def maintenance_dag(config: DatasetConfig, engine: Engine = "local", spark_master: str | None = None) -> DAG:
    policy = config.maintenance
    where = _location(config, engine, spark_master)
    with DAG(
        dag_id=f"lance_{config.name}_maintenance",
        description=f"Maintenance of {config.name}: encoding profile, compaction, indices, statistics, "
        "cleanup.",
        schedule=CronTriggerTimetable(policy.cron, timezone=policy.timezone),
        start_date=EPOCH,
        catchup=False,
        max_active_runs=1,
        tags=[*TAGS, config.name],
        params={
            DRY_RUN_PARAM: Param(
                False, type="boolean", description="Every step only plans: nothing is committed or removed."
            )
        },
        doc_md=config.description or None,
    ) as dag:
        encodings = LanceProfileEncodingsOperator(task_id="encodings", **where)
        compaction = LanceCompactOperator(
            task_id="compaction",
            target_rows_per_fragment=policy.compaction.target_rows_per_fragment,
            commit_every=policy.compaction.commit_every,
            **where,
        )
        indices = LanceOptimizeIndicesOperator(task_id="indices", declare=policy.indices.declare, **where)
        statistics = LanceStatisticsOperator(
            task_id="statistics",
            columns=None if policy.statistics.columns is None else list(policy.statistics.columns),
            **where,
        )
        cleanup = LanceCleanupOperator(
            task_id="cleanup",
            older_than_days=policy.cleanup.older_than_days,
            retain_versions=policy.cleanup.retain_versions,
            **where,
        )
        encodings >> compaction >> indices >> statistics >> cleanup
    return dag


def ingest_dag(config: DatasetConfig, spark_master: str | None = None) -> DAG:
    source = config.ingest
    assert source is not None
    start = dt.datetime.fromisoformat(source.start_date).replace(tzinfo=dt.UTC)
    daily = "0 0 * * *"
    schedule = (
        CronTriggerTimetable(daily, timezone="UTC")
        if source.end_offset
        else CronDataIntervalTimetable(daily, timezone="UTC")
    )
    with DAG(
        dag_id=f"lance_{config.name}_ingest",
        description=(
            f"Daily rows of {config.name} ({source.kind} source), replace_where on "
            f"{source.partition_column}: re-running a day replaces it."
            if source.mode == "replace"
            else f"Daily rows of {config.name} ({source.kind} source), upserted by {list(source.keys)}."
        ),
        schedule=schedule,
        start_date=start,
        catchup=True,
        max_active_runs=1,
        tags=[*TAGS, config.name],
    ) as dag:
        LanceIngestOperator(
            task_id="ingest", source=source, partition="{{ ds }}", **_location(config, "spark", spark_master)
        )
    return dag


def events_dag(config: DatasetConfig, engine: Engine = "local", spark_master: str | None = None) -> DAG:
    policy = config.maintenance.compaction
    where = _location(config, engine, spark_master)
    watcher = AssetWatcher(
        name=f"lance_{config.name}_new_version",
        trigger=LanceNewVersionTrigger(uri=config.uri, storage_options=dict(config.storage_options)),
    )
    asset = Asset(name=f"lance_{config.name}", uri=asset_uri(config.uri), group="lance", watchers=[watcher])
    with DAG(
        dag_id=f"lance_{config.name}_events",
        description=f"Compacts {config.name} when a new version passes the compaction thresholds.",
        schedule=[asset],
        start_date=EPOCH,
        catchup=False,
        max_active_runs=1,
        tags=[*TAGS, config.name],
    ) as dag:
        due = LanceMaintenanceDueSensor(
            task_id="maintenance_due",
            uri=config.uri,
            storage_options=dict(config.storage_options),
            max_fragments=policy.max_fragments,
            max_small_files=policy.max_small_files,
            small_file_rows=policy.small_file_rows,
            max_deleted_ratio=policy.max_deleted_ratio,
            mode="poke",
            poke_interval=1,
            timeout=0,
            soft_fail=True,
        )
        compaction = LanceCompactOperator(
            task_id="compaction",
            target_rows_per_fragment=policy.target_rows_per_fragment,
            commit_every=policy.commit_every,
            **where,
        )
        due >> compaction
    return dag


def dags_from_config(
    path: str | os.PathLike[str] | None = None,
    *,
    engine: Engine = "local",
    spark_master: str | None = None,
) -> dict[str, DAG]:
    """``dag_id -> DAG`` for every dataset the datasets file declares (default: ``$LANCE_OPS_DATASETS``,
    else ``lance_datasets.yaml`` in the repository root). ``engine`` runs the maintenance operators
    in the task's process (``local``) or on Spark (``spark``, on ``spark_master``); ingest always
    uses Spark. A bad file raises :class:`~lance_ops.datasets_config.DatasetsConfigError`, which
    Airflow shows as the DAG file's import error."""
    dags: dict[str, DAG] = {}
    for config in load_datasets(path).datasets:
        built = [maintenance_dag(config, engine, spark_master), events_dag(config, engine, spark_master)]
        if config.ingest is not None:
            built.append(ingest_dag(config, spark_master))
        dags.update({dag.dag_id: dag for dag in built})
    return dags
