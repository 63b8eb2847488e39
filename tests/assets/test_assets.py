"""Every asset, check and job of a declared dataset, run against a real local dataset and the test
Spark session, with pylance checking what was committed.

No ``from __future__ import annotations`` here, to match the asset modules.
"""

import datetime as dt
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG
from pyspark.sql import SparkSession

import lance_ops
from assets.lance_assets import (
    ASSET_KEY_KEY,
    DATA_VERSION_TAG,
    PARTITION_KEY_KEY,
    PARTITION_RANGE_KEY,
    RUN_ID_KEY,
)
from tests.assets.conftest import dataset_entry

pytestmark = [pytest.mark.dagster, pytest.mark.spark]

DATASET = dg.AssetKey(["lance", "sales"])
INGEST = dg.AssetKey(["lance", "sales", "ingest"])


def key(operation: str) -> dg.AssetKey:
    return dg.AssetKey(["lance", "sales", operation])


def run(
    defs: dg.Definitions,
    selection: Sequence[dg.AssetKey],
    instance: dg.DagsterInstance,
    **kwargs: Any,
) -> dg.ExecuteInProcessResult:
    job = defs.resolve_implicit_global_asset_job_def()
    result = job.execute_in_process(asset_selection=list(selection), instance=instance, **kwargs)
    assert result.success
    return result


def metadata(result: dg.ExecuteInProcessResult, asset: dg.AssetKey) -> dict[str, Any]:
    (event,) = [m for m in result.get_asset_materialization_events() if m.asset_key == asset]
    return {k: v.value for k, v in event.step_materialization_data.materialization.metadata.items()}


def checks(result: dg.ExecuteInProcessResult) -> dict[str, bool]:
    return {c.check_name: c.passed for c in result.get_asset_check_evaluations()}


def data_version(instance: dg.DagsterInstance) -> str:
    """The data version Dagster last recorded for the dataset asset."""
    record = instance.get_latest_data_version_record(DATASET)
    assert record is not None and record.asset_materialization is not None
    return record.asset_materialization.tags[DATA_VERSION_TAG]


def ingest(defs: dg.Definitions, instance: dg.DagsterInstance, *days: str) -> dg.ExecuteInProcessResult:
    if len(days) == 1:
        return run(defs, [INGEST], instance, partition_key=days[0])
    tags = {ASSET_PARTITION_RANGE_START_TAG: days[0], ASSET_PARTITION_RANGE_END_TAG: days[-1]}
    return run(defs, [INGEST], instance, tags=tags)


def uri_of(tmp_path: Path) -> str:
    return str(tmp_path / "sales.lance")


def test_ingest_days_replace_and_backfill(
    spark: SparkSession,
    make_defs: Callable[..., dg.Definitions],
    instance: dg.DagsterInstance,
    tmp_path: Path,
) -> None:
    import lance

    defs, uri = make_defs(), uri_of(tmp_path)
    first = ingest(defs, instance, "2026-11-01")
    ds = lance.dataset(uri)
    assert (ds.version, ds.count_rows()) == (1, 50)
    assert ds.read_transaction(1).transaction_properties == {
        RUN_ID_KEY: first.run_id,
        ASSET_KEY_KEY: "lance/sales/ingest",
        PARTITION_KEY_KEY: "2026-11-01",
    }
    # A re-run replaces the day: same rows, one Update.
    again = ingest(defs, instance, "2026-11-01")
    ds = lance.dataset(uri)
    assert (ds.version, ds.count_rows()) == (2, 50)
    assert sorted(ds.to_table(columns=["id"]).column("id").to_pylist()) == sorted(
        lance.dataset(uri, version=1).to_table(columns=["id"]).column("id").to_pylist()
    )
    assert ds.read_transaction(2).transaction_properties[RUN_ID_KEY] == again.run_id
    described = metadata(again, INGEST)
    assert described["lance/version"] == 2
    assert described["dagster/row_count"] == 50
    # The day's old fragment held only that day: the Update dropped it whole.
    assert described["lance/deleted_rows"] == 0
    assert described["lance/operation"] == "Update"
    assert described["lance/fragments"] == len(ds.get_fragments()) == 1
    assert [c.name for c in described["dagster/column_schema"].columns] == ds.schema.names
    # A backfill of three days is one run and one transaction.
    backfill = ingest(defs, instance, "2026-11-02", "2026-11-03", "2026-11-04")
    ds = lance.dataset(uri)
    assert (ds.version, ds.count_rows()) == (3, 200)
    properties = ds.read_transaction(3).transaction_properties
    assert properties[RUN_ID_KEY] == backfill.run_id
    assert properties[PARTITION_RANGE_KEY] == "2026-11-02...2026-11-04"
    days = ds.to_table(columns=["ts"]).column("ts").to_pylist()
    assert sorted({t.date().isoformat() for t in days}) == [f"2026-11-0{d}" for d in range(1, 5)]

    recorded = run(defs, [DATASET], instance)
    assert recorded.asset_materializations_for_node("lance__sales")[0].metadata["lance/version"].value == 3
    assert data_version(instance) == "3"
    assert checks(recorded) == {
        "fragmentation": len(ds.get_fragments()) <= 3,
        "deleted_rows": True,
        "statistics_fresh": True,  # the data files Spark wrote carry page statistics
        "version_seen": True,
        "feature_flags": True,
        "indices_coverage": True,  # no index: nothing unindexed
    }


def test_maintenance_job_compacts_rebuilds_and_cleans(
    spark: SparkSession,
    make_defs: Callable[..., dg.Definitions],
    instance: dg.DagsterInstance,
    tmp_path: Path,
) -> None:
    import lance

    defs, uri = make_defs(), uri_of(tmp_path)
    for day in ("2026-11-01", "2026-11-02", "2026-11-03", "2026-11-04"):
        ingest(defs, instance, day)
    lance_ops.dataset(uri).delete("id % 5 = 0")
    before = lance.dataset(uri)
    rows, first_new = before.count_rows(), before.version + 1
    expected_ids = sorted(before.to_table(columns=["id"]).column("id").to_pylist())

    # A dry run plans and logs, and commits nothing.
    dry = run(
        defs,
        [key("compaction")],
        instance,
        run_config={"ops": {"lance__sales__compaction": {"config": {"dry_run": True}}}},
    )
    assert lance.dataset(uri).version == before.version
    planned = metadata(dry, key("compaction"))
    assert (planned["lance/dry_run"], planned["lance/plan/tasks"], planned["lance/plan/fragments"]) == (
        True,
        1,
        4,
    )

    # The whole maintenance job, cleanup told to keep every version for now; the compacted files
    # carry page statistics, so the statistics step is forced to recompute (and commit) them.
    keep_all = {
        "ops": {
            "lance__sales__cleanup": {"config": {"retain_versions": 100}},
            "lance__sales__statistics": {"config": {"force": True}},
        }
    }
    result = defs.resolve_job_def("sales_maintenance").execute_in_process(
        instance=instance, run_config=keep_all
    )
    assert result.success
    after = lance.dataset(uri)
    assert after.count_rows() == rows
    assert sorted(after.to_table(columns=["id"]).column("id").to_pylist()) == expected_ids
    assert len(after.get_fragments()) == 1
    assert after.stats.dataset_stats()["num_deleted_rows"] == 0
    # Every version the job committed carries its run id and the asset that committed it.
    committed = set()
    for version in range(first_new, after.version + 1):
        properties = after.read_transaction(version).transaction_properties
        assert properties[RUN_ID_KEY] == result.run_id
        committed.add(properties[ASSET_KEY_KEY])
    assert committed == {"lance/sales/encodings", "lance/sales/compaction", "lance/sales/statistics"}

    compaction = metadata(result, key("compaction"))
    assert compaction["lance/compaction/fragments_removed"] == 4
    assert compaction["lance/compaction/fragments_added"] == 1
    assert compaction["lance/plan/deleted_rows"] == before.stats.dataset_stats()["num_deleted_rows"] == 40
    assert compaction["lance/seconds"] > 0
    events = [e.event_type_value for e in result.all_events if e.step_key == "lance__sales__compaction"]
    assert events.index("ASSET_OBSERVATION") < events.index("ASSET_MATERIALIZATION")
    # the Spark tasks' progress reaches the run's log (lance_ops.progress -> context.log)
    logged = [
        r.user_message for r in instance.all_logs(result.run_id) if r.step_key == "lance__sales__compaction"
    ]
    assert "compact: 0/1 tasks" in logged and "compact: 1/1 tasks 1 of 1 tasks finished" in logged
    statistics = metadata(result, key("statistics"))
    assert statistics["lance/statistics/fragments_rebuilt"] == 1
    assert statistics["lance/statistics/columns"] == 2
    summary = lance_ops.dataset(uri).stats.column_summary("score")
    assert summary["fragments_with_statistics"] == summary["num_fragments"] == 1
    encodings = metadata(result, key("encodings"))
    assert encodings["lance/encodings/stored"] is True
    assert encodings["lance/encodings/columns"] >= 3
    kept = metadata(result, key("cleanup"))
    assert (kept["lance/cleanup/old_versions"], kept["lance/cleanup/files_removed"]) == (0, 0)

    # Cleanup with the policy (keep one version): the dry run's list is what goes.
    cleaned = run(defs, [key("cleanup")], instance)
    assert [v["version"] for v in lance.dataset(uri).versions()] == [after.version]
    cleanup = metadata(cleaned, key("cleanup"))
    assert cleanup["lance/cleanup/old_versions"] == after.version - 1
    assert cleanup["lance/bytes_reclaimed"] > 0
    assert cleanup["lance/cleanup/planned_files"] == cleanup["lance/cleanup/files_removed"] > 0
    report = Path(cleanup["lance/report"])  # the dataset's HTML report, linked from the run
    assert report.name == f"v{after.version}.html" and report.read_text().count("<svg") >= 4
    assert cleanup["lance/version"] == after.version
    assert lance.dataset(uri).count_rows() == rows

    recorded = run(defs, [DATASET], instance)
    assert all(checks(recorded).values()), checks(recorded)


def test_sensors_and_schedule(
    spark: SparkSession,
    make_defs: Callable[..., dg.Definitions],
    instance: dg.DagsterInstance,
    tmp_path: Path,
) -> None:
    import lance

    defs, uri = make_defs(), uri_of(tmp_path)
    repo = defs.get_repository_def()
    resources = {"lance_sales": repo.get_top_level_resources()["lance_sales"]}
    compaction = repo.get_sensor_def("sales_compaction_sensor")
    versions = repo.get_sensor_def("sales_versions_sensor")

    def evaluate(sensor: dg.SensorDefinition, cursor: str | None = None) -> Any:
        return sensor.evaluate_tick(
            dg.build_sensor_context(instance=instance, resources=resources, cursor=cursor)
        )

    def skipped(data: Any) -> str:
        assert not data.run_requests and not data.asset_events and data.skip_message
        return str(data.skip_message)

    assert "no dataset" in skipped(evaluate(compaction))
    for day in ("2026-11-01", "2026-11-02", "2026-11-03"):
        ingest(defs, instance, day)
    # 3 fragments, nothing deleted: at the fragment bound, not past it.
    assert "within the policy" in skipped(evaluate(compaction))
    ingest(defs, instance, "2026-11-04")
    (request,) = evaluate(compaction).run_requests
    assert request.run_key == "sales-compaction-v4"
    assert request.tags["lance/reason"] == "4 fragments > 3"

    # Versions committed by pylance: the check fails until the sensor records them.
    recorded = run(defs, [DATASET], instance)
    assert checks(recorded)["version_seen"]
    assert "already recorded" in skipped(evaluate(versions))
    lance.write_dataset(lance.dataset(uri).to_table(limit=1), uri, mode="append")
    lance.dataset(uri).delete("category = 'alpha'")
    assert not check(defs, instance, "version_seen").passed
    noticed = evaluate(versions)
    assert noticed.cursor == "6" and not noticed.run_requests
    (event,) = noticed.asset_events
    assert isinstance(event, dg.AssetMaterialization) and event.asset_key == DATASET
    numbers = ("lance/version", "lance/new_versions", "lance/outside_versions")
    assert [event.metadata[k].value for k in numbers] == [6, 2, 2]
    assert event.metadata["lance/committed_by"].value == "outside Dagster"
    assert event.metadata["dagster/row_count"].value == lance.dataset(uri).count_rows()
    instance.report_runless_asset_event(event)  # what the sensor daemon does with the result
    assert check(defs, instance, "version_seen").passed
    assert data_version(instance) == "6"
    assert "already recorded" in skipped(evaluate(versions, cursor="6"))
    # Past the deleted-row ratio (and still past the fragment bound).
    (deleted,) = evaluate(compaction).run_requests
    assert deleted.run_key == "sales-compaction-v6"
    assert "deleted-row ratio" in deleted.tags["lance/reason"]

    schedule = repo.get_schedule_def("sales_maintenance_schedule")
    assert (schedule.job_name, schedule.cron_schedule, schedule.execution_timezone) == (
        "sales_maintenance",
        "15 2 * * *",
        "UTC",
    )
    tick = schedule.evaluate_tick(
        dg.build_schedule_context(
            instance=instance, scheduled_execution_time=dt.datetime(2026, 11, 20, 2, 15)
        )
    )
    assert len(tick.run_requests or []) == 1


def check(defs: dg.Definitions, instance: dg.DagsterInstance, name: str) -> dg.AssetCheckResult:
    """Evaluate one check of the dataset on its own (its resources are bound by the Definitions)."""
    check_def = defs.get_repository_def().asset_checks_defs_by_key[dg.AssetCheckKey(DATASET, name)]
    result: dg.AssetCheckResult = check_def(dg.build_asset_check_context(instance=instance))
    return result


def test_versions_job_tags_restores_and_checks_out(
    spark: SparkSession,
    make_defs: Callable[..., dg.Definitions],
    instance: dg.DagsterInstance,
    tmp_path: Path,
) -> None:
    import lance

    defs, uri = make_defs(), uri_of(tmp_path)
    ingest(defs, instance, "2026-11-01")
    ingest(defs, instance, "2026-11-02")
    job = defs.resolve_job_def("sales_versions")

    def act(**config: Any) -> dict[str, Any]:
        result = job.execute_in_process(
            instance=instance, run_config={"ops": {"sales_version_action": {"config": config}}}
        )
        assert result.success
        (event,) = result.asset_materializations_for_node("sales_version_action")
        assert event.asset_key == DATASET
        return {"run_id": result.run_id, **{k: v.value for k, v in event.metadata.items()}}

    tagged = act(action="tag", tag="first", version=1)
    assert lance.dataset(uri).tags.list()["first"]["version"] == 1
    assert (tagged["lance/tag"], tagged["lance/tagged_version"], tagged["lance/version"]) == ("first", 1, 2)

    restored = act(action="restore", tag="first")
    ds = lance.dataset(uri)
    assert (ds.version, ds.count_rows()) == (3, 50)
    assert ds.read_transaction(3).transaction_properties[RUN_ID_KEY] == restored["run_id"]
    assert (restored["lance/restored_version"], restored["lance/version"], restored["lance/operation"]) == (
        1,
        3,
        "Restore",
    )
    assert data_version(instance) == "3"

    checked = act(action="checkout", tag="first")
    assert (checked["lance/checkout/version"], checked["lance/checkout/rows"], checked["lance/version"]) == (
        1,
        50,
        3,
    )
    assert lance.dataset(uri).version == 3

    both = job.execute_in_process(
        instance=instance,
        run_config={
            "ops": {"sales_version_action": {"config": {"action": "restore", "tag": "first", "version": 1}}}
        },
        raise_on_error=False,
    )
    assert not both.success
    assert lance.dataset(uri).version == 3


def test_files_source_partitioned_by_a_string_column(
    spark: SparkSession,
    make_defs: Callable[..., dg.Definitions],
    instance: dg.DagsterInstance,
    tmp_path: Path,
) -> None:
    import lance
    import pyarrow as pa
    import pyarrow.parquet as pq

    incoming = tmp_path / "incoming"
    incoming.mkdir()

    def day_file(day: str, values: list[int]) -> None:
        pq.write_table(pa.table({"day": [day] * len(values), "value": values}), incoming / f"{day}.parquet")

    day_file("2026-11-01", [1, 2, 3])
    day_file("2026-11-02", [4, 5])
    source = {
        "kind": "files",
        "start_date": "2026-11-01",
        "path": "incoming/{partition}.parquet",
        "partition_column": "day",
    }
    defs = make_defs(dataset_entry("events", ingest=source))
    events = dg.AssetKey(["lance", "events", "ingest"])
    tags = {ASSET_PARTITION_RANGE_START_TAG: "2026-11-01", ASSET_PARTITION_RANGE_END_TAG: "2026-11-02"}
    run(defs, [events], instance, tags=tags)
    uri = str(tmp_path / "events.lance")
    assert sorted(lance.dataset(uri).to_table().column("value").to_pylist()) == [1, 2, 3, 4, 5]
    # The corrected file for one day replaces that day only.
    day_file("2026-11-01", [10, 20])
    replaced = run(defs, [events], instance, partition_key="2026-11-01")
    ds = lance.dataset(uri)
    assert sorted(ds.to_table().column("value").to_pylist()) == [4, 5, 10, 20]
    assert ds.read_transaction(ds.version).transaction_properties[PARTITION_KEY_KEY] == "2026-11-01"
    assert metadata(replaced, events)["lance/operation"] == "Update"
