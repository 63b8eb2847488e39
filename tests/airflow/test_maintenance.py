"""The maintenance DAG of a declared dataset, run by Airflow's own ``dag.test()`` against a
dataset pylance made: a dry run changes nothing; a real run compacts (fewer fragments, identical
rows and row ids), cleans old versions and stamps the Airflow run into every commit; the sensor
answers due before and not due after; a missing dataset fails its task with one line."""

from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa
import pytest

from lance_ops.airflow.sensors import LanceMaintenanceDueSensor
from tests.airflow.conftest import (
    POLICY,
    datasets_file,
    entry,
    fragmented_dataset,
    run_dag,
    states,
    write_dag_file,
    xcom,
)

pytestmark = [pytest.mark.airflow, pytest.mark.interop]

THRESHOLDS = {k: v for k, v in POLICY.items() if k != "target_rows_per_fragment"}


def files_under(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*") if p.is_file()}


def rows_and_row_ids(uri: Path) -> pa.Table:
    return lance.dataset(uri).to_table(with_row_id=True).sort_by("id")


def test_maintenance_dag_dry_run_then_compacts_cleans_and_stamps(
    workdir: Path, airflow_db: None, capfd: pytest.CaptureFixture[str]
) -> None:
    uri = fragmented_dataset(workdir / "tidy.lance")
    config = datasets_file(workdir, entry("tidy", uri), entry("gone", workdir / "gone.lance"))
    dag_file = write_dag_file("tidy", config)
    sensor = LanceMaintenanceDueSensor(task_id="due", uri=str(uri), **THRESHOLDS)
    before = rows_and_row_ids(uri)
    first_version = lance.dataset(uri).version
    assert len(lance.dataset(uri).get_fragments()) == 30
    due = sensor.poke({})
    assert due.is_done and due.xcom_value["fragments"] == 30
    assert {r.split(" ")[1] for r in due.xcom_value["reasons"]} == {"fragments", "small"} | {"ratio"}

    # A dry run: every step plans, nothing is committed or removed.
    files = files_under(uri)
    run = run_dag(dag_file, "lance_tidy_maintenance", dry_run=True)
    assert set(states(run).values()) == {"success"}, states(run)
    assert files_under(uri) == files and lance.dataset(uri).version == first_version
    planned = xcom(run, "compaction")
    assert planned["dry_run"] and planned["plan_tasks"] >= 1 and planned["plan_fragments"] == 30
    assert planned["plan_deleted_rows"] == 120 and planned["version"] == first_version
    assert xcom(run, "cleanup")["dry_run"] and xcom(run, "statistics")["fragments_pending"] == 30

    # The real run (not the DAG's first: cleanup removes).
    run = run_dag(dag_file, "lance_tidy_maintenance", dry_run=False)
    assert set(states(run).values()) == {"success"}, states(run)
    ds = lance.dataset(uri)
    assert len(ds.get_fragments()) < 30
    assert ds.count_rows() == 480 and sum(f.count_rows() for f in ds.get_fragments()) == 480
    assert rows_and_row_ids(uri).equals(before)
    compaction = xcom(run, "compaction")
    assert compaction["fragments_removed"] == 30 and compaction["engine"] == "local"
    assert compaction["version"] > first_version and not compaction["dry_run"]
    statistics = xcom(run, "statistics")
    indices = xcom(run, "indices")  # no index: nothing to catch up, nothing committed
    assert indices["indices"] == 0 and indices["noop"] and indices["version"] == compaction["version"]
    cleanup = xcom(run, "cleanup")
    assert not cleanup["dry_run"] and cleanup["data_files_removed"] == cleanup["deletion_files_removed"] == 30
    # Old versions are gone (cleanup keeps the newest only); no file of the 30 fragments is left.
    (kept,) = [v["version"] for v in ds.versions()]
    assert kept == statistics["version"] and cleanup["old_versions"] == kept - 1
    assert len(list((uri / "data").iterdir())) == len(ds.get_fragments())
    # The version left carries the Airflow task try that committed it (every commit's properties
    # are checked in the Spark test, whose first run keeps every version).
    properties = ds.read_transaction(kept).transaction_properties
    assert properties == {
        "airflow.dag_id": "lance_tidy_maintenance",
        "airflow.run_id": run.run_id,
        "airflow.task_id": "statistics" if statistics["committed"] else "compaction",
        "airflow.try_number": "1",
    }
    assert not sensor.poke({}).is_done

    # A missing dataset fails the first task at once with one line; nothing downstream runs.
    capfd.readouterr()
    run = run_dag(dag_file, "lance_gone_maintenance", dry_run=False)
    log = capfd.readouterr().out
    gone = workdir / "gone.lance"
    assert f"AirflowFailException: encodings on {gone}: no Lance dataset at {gone}\n" in log
    # Its traceback stops at the operator: no frame of the library, no chained exception.
    failure = log[log.index("Task failed with exception") : log.index("AirflowFailException: encodings")]
    assert "lance_ops/airflow/operators.py" in failure and "lance_ops/dataset.py" not in failure
    assert "During handling" not in failure and "direct cause" not in failure
    assert states(run) == {
        "encodings": "failed",
        "compaction": "upstream_failed",
        "indices": "upstream_failed",
        "statistics": "upstream_failed",
        "cleanup": "upstream_failed",
    }
