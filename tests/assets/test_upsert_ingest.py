"""The ``upsert`` ingest mode: a day's rows merged into the dataset by their keys, one Update per
run, checked with pylance; its configuration refused when incomplete."""

from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from pyspark.sql import SparkSession

from assets.config import DatasetsConfigError, load_datasets
from assets.definitions import build_definitions
from tests.assets.conftest import dataset_entry, write_datasets_file

INGEST = dg.AssetKey(["lance", "sales", "ingest"])


def _entry(**ingest: Any) -> dict[str, Any]:
    entry = dataset_entry()
    entry["ingest"] = {**entry["ingest"], **ingest}
    return entry


def _run(defs: dg.Definitions, instance: dg.DagsterInstance, day: str) -> dict[str, Any]:
    job = defs.resolve_implicit_global_asset_job_def()
    result = job.execute_in_process(asset_selection=[INGEST], instance=instance, partition_key=day)
    assert result.success
    (event,) = [m for m in result.get_asset_materialization_events() if m.asset_key == INGEST]
    return {k: v.value for k, v in event.step_materialization_data.materialization.metadata.items()}


@pytest.mark.dagster
@pytest.mark.spark
def test_upsert_ingest_merges_days_by_key(
    spark: SparkSession, tmp_path: Path, instance: dg.DagsterInstance
) -> None:
    import lance

    path = write_datasets_file(tmp_path, _entry(mode="upsert", keys=["id"]))
    (config,) = load_datasets(path).datasets
    assert config.ingest is not None and (config.ingest.mode, config.ingest.keys) == ("upsert", ("id",))
    defs = build_definitions(path)
    uri = str(tmp_path / "sales.lance")
    _run(defs, instance, "2026-11-01")
    assert lance.dataset(uri).count_rows() == 50
    # The same day again: every row matched and updated in place of itself, nothing duplicated.
    again = _run(defs, instance, "2026-11-01")
    ds = lance.dataset(uri)
    assert (ds.version, ds.count_rows()) == (2, 50)
    assert type(ds.read_transaction(2).operation).__name__ == "Update"
    assert (again["lance/num_updated_rows"], again["lance/num_inserted_rows"]) == (50, 0)
    # The next day: new keys, inserted.
    nxt = _run(defs, instance, "2026-11-02")
    assert (nxt["lance/num_updated_rows"], nxt["lance/num_inserted_rows"]) == (0, 50)
    ids = lance.dataset(uri).to_table(columns=["id"]).column("id").to_pylist()
    assert len(ids) == len(set(ids)) == 100


@pytest.mark.parametrize(
    ("ingest", "reason"),
    [
        ({"mode": "upsert"}, "needs its key columns"),
        ({"mode": "replace", "keys": ["id"]}, "only apply to mode upsert"),
        ({"mode": "merge"}, "must be one of"),
        ({"mode": "upsert", "keys": []}, "list of column names"),
    ],
)
def test_bad_upsert_config(tmp_path: Path, ingest: dict[str, Any], reason: str) -> None:
    path = write_datasets_file(tmp_path, _entry(**ingest))
    with pytest.raises(DatasetsConfigError) as raised:
        load_datasets(path)
    assert raised.value.field in ("ingest.keys", "ingest.mode") and reason in raised.value.reason
