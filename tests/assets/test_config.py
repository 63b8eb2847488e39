"""The datasets file: the default and a test file load into Definitions; bad entries fail at load
time with a :class:`DatasetsConfigError` naming the entry and the field."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from assets.config import (
    ENV_VAR,
    CompactionPolicy,
    DatasetsConfigError,
    IngestSource,
    load_datasets,
)
from assets.definitions import build_definitions, defs
from tests.assets.conftest import dataset_entry, write_datasets_file

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.dagster


def keys(definitions: dg.Definitions) -> set[str]:
    return {k.to_user_string() for k in definitions.get_repository_def().asset_graph.get_all_asset_keys()}


def test_default_definitions_declare_the_demo_dataset() -> None:
    dg.Definitions.validate_loadable(defs)
    (demo,) = load_datasets().datasets
    assert demo.name == "demo"
    assert demo.uri == str(REPO / "data" / "demo.lance")
    repo = defs.get_repository_def()
    assert keys(defs) == {
        f"lance/demo{s}"
        for s in ("", "/ingest", "/encodings", "/compaction", "/indices", "/statistics", "/cleanup")
    }
    assert {c.name for c in repo.asset_graph.asset_check_keys} == {
        "fragmentation",
        "deleted_rows",
        "statistics_fresh",
        "version_seen",
        "feature_flags",
        "indices_coverage",
    }
    assert {s.name for s in repo.schedule_defs} == {"demo_maintenance_schedule"}
    assert {s.name for s in repo.sensor_defs} >= {"demo_compaction_sensor", "demo_versions_sensor"}
    assert {j.name for j in repo.get_all_jobs()} >= {"demo_maintenance", "demo_compaction", "demo_versions"}
    assert set(repo.get_top_level_resources()) == {"pyspark", "lance_demo"}
    ingest = repo.assets_defs_by_key[dg.AssetKey(["lance", "demo", "ingest"])]
    assert ingest.specs_by_key[ingest.key].kinds == {"spark", "lance"}
    assert ingest.backfill_policy == dg.BackfillPolicy.single_run()
    # the dataset asset's eager condition acts: the automation sensor runs by default
    automation = repo.get_sensor_def("default_automation_condition_sensor")
    assert automation.default_status == dg.DefaultSensorStatus.RUNNING
    # every run executes in one process, so its steps share one Spark session
    assert repo.get_job("demo_maintenance").executor_def == dg.in_process_executor
    assert demo.ingest is not None and demo.ingest.fill_missing == "compute"
    assert demo.reports_path == REPO / "data" / "reports" / "demo"


def test_test_file_with_two_datasets(tmp_path: Path) -> None:
    plain = {"name": "events", "uri": "s3://bucket/events.lance", "storage_options": {"region": "eu-west-1"}}
    path = write_datasets_file(tmp_path, dataset_entry(), plain)
    loaded = load_datasets(path)
    sales, events = loaded.datasets
    assert sales.uri == str(tmp_path / "sales.lance")
    assert sales.ingest == IngestSource(kind="demo", start_date="2026-11-01", rows_per_partition=50)
    assert sales.maintenance.compaction == CompactionPolicy(
        target_rows_per_fragment=100_000,
        max_fragments=3,
        max_small_files=100,
        small_file_rows=10,
        max_deleted_ratio=0.2,
    )
    assert sales.maintenance.statistics.columns == ("id", "score")
    assert (events.uri, events.ingest, dict(events.storage_options)) == (
        "s3://bucket/events.lance",
        None,
        {"region": "eu-west-1"},
    )
    assert sales.reports_path == tmp_path / "reports" / "sales"
    assert events.reports_path is None  # a remote dataset writes reports only where told
    (tmp_path / "other").mkdir()
    told = load_datasets(write_datasets_file(tmp_path / "other", {**plain, "reports_dir": "out"}))
    assert told.datasets[0].reports_path == tmp_path / "other" / "out"
    with pytest.raises(AttributeError):
        sales.name = "x"  # type: ignore[misc]
    built = build_definitions(path)
    assert "lance/sales/ingest" in keys(built) and "lance/events/ingest" not in keys(built)
    assert {"lance/events", "lance/events/compaction"} <= keys(built)
    schedule = built.get_repository_def().get_schedule_def("sales_maintenance_schedule")
    assert schedule.cron_schedule == "15 2 * * *"


def test_environment_variable_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_datasets_file(tmp_path, dataset_entry("other"))
    monkeypatch.setenv(ENV_VAR, str(path))
    assert [d.name for d in load_datasets().datasets] == ["other"]
    assert "lance/other" in keys(build_definitions())


def _bad(**changes: Any) -> dict[str, Any]:
    entry = dataset_entry()
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        target = entry
        for part in parents:
            target = target[part]
        target[last] = value
    return entry


def _without(field: str) -> Callable[[], dict[str, Any]]:
    def entry() -> dict[str, Any]:
        data = dataset_entry()
        del data[field]
        return data

    return entry


@pytest.mark.parametrize(
    ("entry", "name", "field", "reason"),
    [
        (_without("uri"), "sales", "uri", "is required"),
        (lambda: _bad(colour="red"), "sales", "colour", "unknown field"),
        (lambda: _bad(name="has space"), "has space", "name", "letters, digits and underscores"),
        (lambda: _bad(uri=5), "sales", "uri", "must be str"),
        (lambda: _bad(maintenance__cron="every day"), "sales", "maintenance.cron", "not a valid cron"),
        (lambda: _bad(maintenance__timezone="Mars/Base"), "sales", "maintenance.timezone", "time zone"),
        (
            lambda: _bad(maintenance__compaction__max_deleted_ratio=1.5),
            "sales",
            "maintenance.compaction.max_deleted_ratio",
            "between 0 and 1",
        ),
        (
            lambda: _bad(maintenance__compaction__max_fragments=0),
            "sales",
            "maintenance.compaction.max_fragments",
            "positive",
        ),
        (
            lambda: _bad(maintenance__compaction__target_rows=5),
            "sales",
            "maintenance.compaction.target_rows",
            "unknown field",
        ),
        (
            lambda: _bad(maintenance__cleanup__retain_versions="ten"),
            "sales",
            "maintenance.cleanup.retain_versions",
            "must be int",
        ),
        (
            lambda: _bad(maintenance__statistics__columns=[1]),
            "sales",
            "maintenance.statistics.columns",
            "column names",
        ),
        (lambda: _bad(ingest__kind="kafka"), "sales", "ingest.kind", "must be one of"),
        (lambda: _bad(ingest__start_date="yesterday"), "sales", "ingest.start_date", "YYYY-MM-DD"),
        (lambda: _bad(ingest__kind="files"), "sales", "ingest.path", "{partition}"),
        (lambda: _bad(storage_options={"region": 1}), "sales", "storage_options", "strings"),
        (lambda: _bad(ingest__fill_missing="zero"), "sales", "ingest.fill_missing", "must be one of"),
    ],
)
def test_bad_entry_names_entry_and_field(
    tmp_path: Path, entry: Callable[[], dict[str, Any]], name: str, field: str, reason: str
) -> None:
    path = write_datasets_file(tmp_path, entry())
    with pytest.raises(DatasetsConfigError) as raised:
        build_definitions(path)
    error = raised.value
    assert (error.entry, error.field) == (name, field)
    assert reason in error.reason
    assert isinstance(error, ValueError)
    assert str(path) in str(error) and repr(name) in str(error) and repr(field) in str(error)


@pytest.mark.parametrize(
    ("text", "entry", "field"),
    [
        ("datasets: [", "<file>", "<yaml>"),
        ("datasets: []", "<file>", "datasets"),
        ("other: 1", "<file>", "datasets"),
        ("datasets:\n  - 7", "#0", "<entry>"),
    ],
)
def test_bad_file(tmp_path: Path, text: str, entry: str, field: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(DatasetsConfigError) as raised:
        load_datasets(path)
    assert (raised.value.entry, raised.value.field) == (entry, field)


def test_repeated_name(tmp_path: Path) -> None:
    path = write_datasets_file(tmp_path, dataset_entry(), dataset_entry())
    with pytest.raises(DatasetsConfigError, match="declared twice") as raised:
        load_datasets(path)
    assert (raised.value.entry, raised.value.field) == ("sales", "name")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DatasetsConfigError, match="cannot be read"):
        load_datasets(tmp_path / "absent.yaml")
