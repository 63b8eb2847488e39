"""The Spark engine under ``dag.test()``: the ingest DAG writes a day and replaces it on a re-run;
the maintenance DAG's first run compacts, profiles and computes statistics on Spark (the test's
session), stamps every commit, and its cleanup is a dry run (the DAG's first run); the
optimize-indices and upsert operators run their Spark jobs on a dataset pylance indexed."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import lance
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from tests.airflow.conftest import (
    DAGS_FOLDER,
    datasets_file,
    entry,
    fragmented_dataset,
    run_dag,
    states,
    write_dag_file,
    xcom,
)

pytestmark = [pytest.mark.airflow, pytest.mark.spark, pytest.mark.interop]


def test_ingest_dag_writes_a_day_and_replaces_it(
    workdir: Path, airflow_db: None, spark: SparkSession
) -> None:
    uri = workdir / "daily.lance"
    ingest = {"kind": "demo", "start_date": "2026-11-01", "rows_per_partition": 40}
    config = datasets_file(workdir, {**entry("daily", uri), "ingest": ingest})
    dag_file = write_dag_file("daily", config)
    day = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    first = run_dag(dag_file, "lance_daily_ingest", logical_date=day)
    assert states(first) == {"ingest": "success"}
    assert xcom(first, "ingest") | {"uri": None} == {
        "uri": None,
        "engine": "spark",
        "partition": "2026-11-01",
        "version_before": None,
        "version": 1,
        "rows": 40,
        "mode": "replace",
    }
    rows = lance.dataset(uri).to_table().sort_by("id")
    again = run_dag(dag_file, "lance_daily_ingest", logical_date=day)
    assert states(again) == {"ingest": "success"}
    ds = lance.dataset(uri)
    assert ds.version == 2 and ds.to_table().sort_by("id").equals(rows)
    transaction = ds.read_transaction(2)
    assert type(transaction.operation).__name__ == "Update"
    assert transaction.transaction_properties["airflow.run_id"] == again.run_id
    assert transaction.transaction_properties["airflow.task_id"] == "ingest"
    # Declared ``mode: upsert`` now: the day's rows merge in by their keys (all matched: updated).
    datasets_file(workdir, {**entry("daily", uri), "ingest": {**ingest, "mode": "upsert", "keys": ["id"]}})
    upsert = run_dag(dag_file, "lance_daily_ingest", logical_date=day)
    assert states(upsert) == {"ingest": "success"}
    metrics = xcom(upsert, "ingest")
    assert (metrics["mode"], metrics["version_before"], metrics["version"], metrics["rows"]) == (
        "upsert",
        2,
        3,
        40,
    )
    assert (metrics["num_updated_rows"], metrics["num_inserted_rows"], metrics["num_deleted_rows"]) == (
        40,
        0,
        0,
    )
    ds = lance.dataset(uri)
    assert ds.version == 3 and ds.to_table().sort_by("id").equals(rows)
    transaction = ds.read_transaction(3)
    assert type(transaction.operation).__name__ == "Update"
    assert transaction.transaction_properties["airflow.run_id"] == upsert.run_id


def test_maintenance_on_spark_first_run(workdir: Path, airflow_db: None, spark: SparkSession) -> None:
    uri = fragmented_dataset(workdir / "sparky.lance", fragments=10)  # Spark tasks are slow on 2 cores
    config = datasets_file(workdir, entry("sparky", uri))
    dag_file = write_dag_file("sparky", config, engine="spark")
    before = lance.dataset(uri).to_table(with_row_id=True).sort_by("id")
    first_version = lance.dataset(uri).version
    jobs_before = len(spark.sparkContext.statusTracker().getJobIdsForGroup())

    run = run_dag(dag_file, "lance_sparky_maintenance")
    assert set(states(run).values()) == {"success"}, states(run)
    assert len(spark.sparkContext.statusTracker().getJobIdsForGroup()) > jobs_before
    compaction = xcom(run, "compaction")
    assert compaction["engine"] == "spark" and compaction["fragments_removed"] == 10
    ds = lance.dataset(uri)
    assert len(ds.get_fragments()) < 10
    assert ds.to_table(with_row_id=True).sort_by("id").equals(before)
    # The DAG's first run: cleanup only lists; every version is still there.
    cleanup = xcom(run, "cleanup")
    assert cleanup["dry_run"] and cleanup["old_versions"] > 0 and cleanup["data_files_removed"] == 10
    versions = [v["version"] for v in ds.versions()]
    assert versions == list(range(1, ds.version + 1))
    # Every commit of the run carries the Airflow task try that made it.
    tasks = []
    for version in range(first_version + 1, ds.version + 1):
        properties = ds.read_transaction(version).transaction_properties
        assert properties["airflow.dag_id"] == "lance_sparky_maintenance"
        assert properties["airflow.run_id"] == run.run_id and properties["airflow.try_number"] == "1"
        tasks.append(properties["airflow.task_id"])
    assert tasks[0] == "encodings" and "compaction" in tasks
    assert tasks == sorted(tasks, key=["encodings", "compaction", "statistics"].index)


SPARK_DAG = """
import datetime as dt

from airflow.sdk import DAG

from lance_ops.airflow.operators import LanceOptimizeIndicesOperator, LanceUpsertOperator

with DAG("lance_spark_upsert", schedule=None, start_date=dt.datetime(2026, 1, 1)) as dag:
    where = {"uri": URI, "engine": "spark"}
    indices = LanceOptimizeIndicesOperator(task_id="indices", **where)
    upsert = LanceUpsertOperator(task_id="upsert", on="id", source="{{ params.source }}", **where)
    indices >> upsert
"""


def test_optimize_indices_and_upsert_on_spark(workdir: Path, airflow_db: None, spark: SparkSession) -> None:
    uri = workdir / "keyed.lance"
    lance.write_dataset(
        pa.table({"id": pa.array(range(20), pa.int64()), "v": pa.array(range(20), pa.int64())}), uri
    )
    lance.dataset(uri).create_scalar_index("id", "BTREE")
    more = pa.table({"id": pa.array(range(20, 30), pa.int64()), "v": pa.array(range(20, 30), pa.int64())})
    lance.write_dataset(more, uri, mode="append")
    source = workdir / "changes.parquet"
    pq.write_table(
        pa.table({"id": pa.array([5, 40], pa.int64()), "v": pa.array([-5, -40], pa.int64())}), source
    )
    dag_file = DAGS_FOLDER / "spark_upsert.py"
    dag_file.write_text(SPARK_DAG.replace("URI", repr(str(uri))))

    run = run_dag(dag_file, "lance_spark_upsert", source=str(source))
    assert set(states(run).values()) == {"success"}, states(run)
    indices = xcom(run, "indices")
    assert indices["engine"] == "spark" and indices["extended"] == ["id_idx"]
    assert (indices["unindexed_rows_before"], indices["unindexed_rows"]) == (10, 0)
    upsert = xcom(run, "upsert")
    assert (upsert["num_updated_rows"], upsert["num_inserted_rows"], upsert["num_deleted_rows"]) == (1, 1, 0)
    ds = lance.dataset(uri)
    assert ds.version == 5
    assert lance.dataset(uri, version=4).stats.index_stats("id_idx")["num_unindexed_rows"] == 0
    table = ds.to_table().sort_by("id")
    assert table.column("id").to_pylist() == [*range(30), 40]
    assert table.column("v").to_pylist() == [*range(5), -5, *range(6, 30), -40]
    for version, task in ((4, "indices"), (5, "upsert")):
        properties = ds.read_transaction(version).transaction_properties
        assert (properties["airflow.task_id"], properties["airflow.run_id"]) == (task, run.run_id)
