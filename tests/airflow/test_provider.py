"""The provider's pieces outside a DAG run: the DAG file under Airflow's DagBag, the datasets file's
errors, the provider metadata, the ``lance`` connection and its secrets, the sensors and triggers."""

from __future__ import annotations

import asyncio
import importlib
import json
import tomllib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import jsonschema
import lance
import pyarrow as pa
import pytest

import lance_ops
from lance_ops.airflow import LanceHook, get_provider_info
from lance_ops.airflow.sensors import LanceMaintenanceDueSensor, LanceNewVersionSensor
from lance_ops.airflow.triggers import LanceMaintenanceDueTrigger, LanceNewVersionTrigger
from lance_ops.datasets_config import DatasetsConfigError, IngestSource, load_datasets
from tests.airflow.conftest import POLICY, datasets_file, entry, fragmented_dataset

pytestmark = pytest.mark.airflow

REPO = Path(__file__).resolve().parents[2]
THRESHOLDS = {k: v for k, v in POLICY.items() if k != "target_rows_per_fragment"}


def test_dag_file_loads_in_airflow_dagbag(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.dag_processing.dagbag import DagBag

    monkeypatch.delenv("LANCE_OPS_DATASETS", raising=False)
    bag = DagBag(dag_folder=str(REPO / "dags"))
    assert bag.import_errors == {}
    assert set(bag.dags) == {"lance_demo_maintenance", "lance_demo_ingest", "lance_demo_events"}
    maintenance = bag.dags["lance_demo_maintenance"]
    assert [t.task_id for t in maintenance.topological_sort()] == [
        "encodings",
        "compaction",
        "indices",
        "statistics",
        "cleanup",
    ]
    assert maintenance.timetable.expression == "0 3 * * *" and not maintenance.catchup
    ingest = bag.dags["lance_demo_ingest"]
    assert ingest.catchup and str(ingest.start_date.date()) == "2026-11-01"
    (asset,) = bag.dags["lance_demo_events"].timetable.asset_condition.objects
    (watcher,) = asset.watchers
    assert isinstance(watcher.trigger, LanceNewVersionTrigger)
    assert asset.uri == f"file://{REPO / 'data' / 'demo.lance'}"


def test_a_bad_datasets_file_is_the_dag_file_import_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.dag_processing.dagbag import DagBag

    bad = entry("bad", tmp_path / "bad.lance", cron="61 * * * *")
    path = datasets_file(tmp_path, bad)
    with pytest.raises(DatasetsConfigError) as expected:
        load_datasets(path)
    assert str(expected.value) == (
        f"{path}: dataset 'bad', field 'maintenance.cron': is not a valid cron expression: '61 * * * *'"
    )
    monkeypatch.setenv("LANCE_OPS_DATASETS", str(path))
    bag = DagBag(dag_folder=str(REPO / "dags"))
    (error,) = bag.import_errors.values()
    assert str(expected.value) in error and not bag.dags


def test_provider_info_matches_airflow_schema_and_entry_point() -> None:
    import airflow

    schema = json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text())
    info = get_provider_info()
    jsonschema.validate(info, schema)
    for kind in ("operators", "sensors", "triggers", "hooks"):
        for module in info[kind][0]["python-modules"]:
            importlib.import_module(module)
    (connection,) = info["connection-types"]
    module, _, name = connection["hook-class-name"].rpartition(".")
    hook = getattr(importlib.import_module(module), name)
    assert hook.conn_type == connection["connection-type"] == "lance"
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    target = project["entry-points"]["apache_airflow_provider"]["provider_info"]
    module, _, name = target.partition(":")
    assert getattr(importlib.import_module(module), name) is get_provider_info
    assert any(r.startswith("apache-airflow>=3") for r in project["optional-dependencies"]["airflow"])


def test_connection_secrets_become_storage_options_and_stay_masked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.sdk._shared.secrets_masker import redact

    uri = tmp_path / "conn.lance"
    lance.write_dataset(pa.table({"id": [1, 2, 3]}), uri)
    extra = {"storage_options": {"region": "eu-west-1", "session_token": "${LANCE_TEST_TOKEN}"}}
    connection = {"conn_type": "lance", "host": str(uri), "login": "AKIDEXAMPLE", "password": "pa55-w0rd"}
    monkeypatch.setenv("AIRFLOW_CONN_LANCE_TEST", json.dumps({**connection, "extra": extra}))
    monkeypatch.setenv("LANCE_TEST_TOKEN", "t0ken-value")
    hook = LanceHook("lance_test")
    target = hook.target()
    assert target.uri == str(uri)
    assert dict(target.storage_options) == {
        "region": "eu-west-1",
        "session_token": "t0ken-value",
        "aws_access_key_id": "AKIDEXAMPLE",
        "aws_secret_access_key": "pa55-w0rd",
    }
    assert "pa55-w0rd" not in repr(target) and "t0ken-value" not in repr(target)
    assert redact("pa55-w0rd and t0ken-value") == "*** and ***"
    assert hook.test_connection() == (True, f"version 1 of {uri}")
    assert hook.get_conn().count_rows() == 3
    # An explicit uri wins over the connection's.
    other = tmp_path / "other.lance"
    assert LanceHook("lance_test", uri=str(other)).test_connection()[0] is False


async def _first_event(trigger: Any, action: Callable[[], Any] | None = None, timeout: float = 10.0) -> Any:
    events: AsyncIterator[Any] = trigger.run()
    waiting = asyncio.ensure_future(anext(events))
    try:
        if action is not None:
            await asyncio.to_thread(action)
        return (await asyncio.wait_for(waiting, timeout)).payload
    finally:
        await events.aclose()


def test_sensors_and_triggers_before_and_after(tmp_path: Path) -> None:
    from airflow.sdk.exceptions import TaskDeferred

    uri = fragmented_dataset(tmp_path / "due.lance", fragments=12)
    location = {"uri": str(uri), "storage_options": {}}
    due = LanceMaintenanceDueTrigger(**location, policy=POLICY, poll_interval=0.05)
    classpath, kwargs = due.serialize()
    module, _, name = classpath.rpartition(".")
    assert getattr(importlib.import_module(module), name) is LanceMaintenanceDueTrigger
    event = asyncio.run(_first_event(LanceMaintenanceDueTrigger(**kwargs)))
    assert event["due"] and event["fragments"] == 12 and event["version"] == 13

    # A new version committed by another writer (pylance) wakes the event trigger and the sensor.
    sensor = LanceNewVersionSensor(task_id="new_version", uri=str(uri))
    assert not sensor.poke({}).is_done and sensor.after_version == 13
    watch = LanceNewVersionTrigger(**location, after_version=13, poll_interval=0.05)
    append = lambda: lance.write_dataset(pa.table({"id": [10**6], "name": ["x"]}), uri, mode="append")  # noqa: E731
    assert asyncio.run(_first_event(watch, append)) == {"uri": str(uri), "version": 14, "previous": 13}
    assert sensor.poke({}).xcom_value == {"uri": str(uri), "version": 14, "previous": 13}

    lance_ops.dataset(uri).optimize.compact_files(target_rows_per_fragment=10_000)
    assert not LanceMaintenanceDueSensor(task_id="due", **location, **THRESHOLDS).poke({}).is_done
    with pytest.raises(TimeoutError):
        asyncio.run(_first_event(due, timeout=0.5))
    # Deferrable: not due in the worker, so the waiting goes to the triggerer (with no secret).
    deferrable = LanceMaintenanceDueSensor(
        task_id="due", **location, **THRESHOLDS, deferrable=True, poke_interval=30
    )
    with pytest.raises(TaskDeferred) as deferred:
        deferrable.execute({})  # type: ignore[arg-type]
    assert isinstance(deferred.value.trigger, LanceMaintenanceDueTrigger)
    assert deferred.value.trigger.serialize()[1]["policy"]["max_fragments"] == THRESHOLDS["max_fragments"]
    assert deferred.value.method_name == "execute_complete"


def test_bad_operator_arguments_are_typed_errors(tmp_path: Path) -> None:
    from lance_ops.airflow.operators import LanceCompactOperator, LanceIngestOperator, LanceUpsertOperator
    from lance_ops.errors import InvalidArgumentError

    uri = str(tmp_path / "ds.lance")
    with pytest.raises(InvalidArgumentError, match="engine must be one of"):
        LanceCompactOperator(task_id="compact", uri=uri, engine="dask")
    with pytest.raises(InvalidArgumentError, match="pass uri or lance_conn_id"):
        LanceCompactOperator(task_id="compact")
    with pytest.raises(InvalidArgumentError, match="when_matched must be one of"):
        LanceUpsertOperator(task_id="upsert", uri=uri, on=["id"], source="x.parquet", when_matched="merge")
    with pytest.raises(InvalidArgumentError, match="engine must be 'spark'"):
        source = IngestSource(kind="demo", start_date="2026-11-01")
        LanceIngestOperator(task_id="ingest", uri=uri, engine="local", source=source)
