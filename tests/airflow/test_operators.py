"""The operators the factory's DAGs do not use -- tag, delete, add columns, restore -- in one DAG
under ``dag.test()``, reaching the dataset through a ``lance`` connection: each commit is what
pylance reads, stamped with its task."""

from __future__ import annotations

import json
from pathlib import Path

import lance
import pyarrow as pa
import pytest

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

pytestmark = [pytest.mark.airflow, pytest.mark.interop]

DAG_FILE = """
import datetime as dt

from airflow.sdk import DAG

from lance_ops.airflow.operators import (
    LanceAddColumnsOperator, LanceDeleteOperator, LanceRestoreOperator, LanceTagOperator,
)

with DAG("lance_operators_chain", schedule=None, start_date=dt.datetime(2026, 1, 1)) as dag:
    where = {"lance_conn_id": "lance_chain"}
    tag = LanceTagOperator(task_id="tag", tag="before", **where)
    delete = LanceDeleteOperator(task_id="delete", predicate="id < {{ params.below }}", **where)
    add = LanceAddColumnsOperator(task_id="add_columns", columns={"twice": "id * 2"}, **where)
    restore = LanceRestoreOperator(task_id="restore", version="before", **where)
    tag >> delete >> add >> restore
"""


def test_tag_delete_add_columns_restore(
    workdir: Path, airflow_db: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = workdir / "chain.lance"
    lance.write_dataset(pa.table({"id": pa.array(range(100), pa.int64())}), uri)
    connection = {"conn_type": "lance", "host": str(uri), "extra": {"storage_options": {}}}
    monkeypatch.setenv("AIRFLOW_CONN_LANCE_CHAIN", json.dumps(connection))
    dag_file = DAGS_FOLDER / "chain.py"
    dag_file.write_text(DAG_FILE)

    run = run_dag(dag_file, "lance_operators_chain", below=10)
    assert set(states(run).values()) == {"success"}, states(run)
    ds = lance.dataset(uri)
    assert ds.tags.list()["before"]["version"] == 1
    assert xcom(run, "delete") | {"uri": None} == {
        "uri": None,
        "engine": "local",
        "version_before": 1,
        "version": 2,
        "deleted_rows": 10,
    }
    added = lance.dataset(uri, version=3).to_table()
    assert added.column("id").to_pylist() == list(range(10, 100))
    assert added.column("twice").to_pylist() == [2 * i for i in range(10, 100)]
    assert xcom(run, "restore")["restored_version"] == 1 and ds.version == 4
    assert ds.to_table().equals(lance.dataset(uri, version=1).to_table())
    committed = {}
    for version in (2, 3, 4):
        transaction = ds.read_transaction(version)
        properties = transaction.transaction_properties
        assert properties["airflow.dag_id"] == "lance_operators_chain"
        assert properties["airflow.run_id"] == run.run_id
        committed[properties["airflow.task_id"]] = type(transaction.operation).__name__
    assert committed == {"delete": "Delete", "add_columns": "Merge", "restore": "Restore"}


def test_event_dag_compacts_when_due_and_skips_when_not(workdir: Path, airflow_db: None) -> None:
    uri = fragmented_dataset(workdir / "busy.lance", fragments=10)
    dag_file = write_dag_file("busy", datasets_file(workdir, entry("busy", uri)))
    run = run_dag(dag_file, "lance_busy_events")
    assert states(run) == {"maintenance_due": "success", "compaction": "success"}
    assert xcom(run, "maintenance_due")["fragments"] == 10
    assert xcom(run, "compaction")["fragments_removed"] == 10
    assert len(lance.dataset(uri).get_fragments()) == 1
    # Within the policy now: the sensor skips (soft fail) and compaction with it.
    run = run_dag(dag_file, "lance_busy_events")
    assert states(run) == {"maintenance_due": "skipped", "compaction": "skipped"}
