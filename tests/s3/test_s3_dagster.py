"""Dagster on an ``s3://`` dataset (moto on loopback): a datasets file whose storage options take
the secret from the environment (``${NAME}`` / ``{env: NAME}``), a day ingested and the maintenance
job run, pylance reading the bucket after; the secret shows in no log, metadata or configuration.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import lance
import pytest
from dagster_pyspark import PySparkResource
from pyspark.sql import SparkSession

from assets.config import DatasetsConfigError, load_datasets, resolve_storage_options
from assets.definitions import build_definitions
from lance_ops.errors import StorageOptionError
from tests.assets.conftest import dataset_entry, write_datasets_file
from tests.s3.conftest import ACCESS_KEY, SECRET_KEY, S3Location

SECRET_VAR = "LANCE_OPS_TEST_S3_SECRET"
KEY_VAR = "LANCE_OPS_TEST_S3_KEY"
INGEST = dg.AssetKey(["lance", "sales", "ingest"])


def _entry(s3: S3Location) -> dict[str, Any]:
    options: dict[str, Any] = {
        **s3.storage_options,
        "aws_secret_access_key": f"${{{SECRET_VAR}}}",
        "aws_access_key_id": {"env": KEY_VAR},
    }
    return dataset_entry(uri=s3.uri("sales.lance"), storage_options=options)


@pytest.fixture
def secret_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_VAR, SECRET_KEY)
    monkeypatch.setenv(KEY_VAR, ACCESS_KEY)


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test() as test_instance:
        yield test_instance


@pytest.mark.s3
def test_storage_options_keep_environment_references(
    s3: S3Location, secret_env: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (config,) = load_datasets(write_datasets_file(tmp_path, _entry(s3))).datasets
    assert config.storage_options["aws_secret_access_key"] == f"${{{SECRET_VAR}}}"
    assert config.storage_options["aws_access_key_id"] == f"${{{KEY_VAR}}}"
    assert SECRET_KEY not in repr(config)
    assert resolve_storage_options(config.storage_options) == s3.storage_options
    monkeypatch.delenv(SECRET_VAR)
    with pytest.raises(StorageOptionError, match=SECRET_VAR):
        resolve_storage_options(config.storage_options)
    with pytest.raises(DatasetsConfigError, match=f"storage_options.*aws_secret_access_key.*{SECRET_VAR}"):
        load_datasets(write_datasets_file(tmp_path, _entry(s3)))
    bad = {**_entry(s3), "storage_options": {"aws_region": {"env": "not a name"}}}
    with pytest.raises(DatasetsConfigError, match="storage_options.*aws_region.*env must name"):
        load_datasets(write_datasets_file(tmp_path, bad))


@pytest.mark.s3
@pytest.mark.dagster
@pytest.mark.spark
@pytest.mark.interop
def test_ingest_and_maintenance_on_s3(
    spark: SparkSession, s3: S3Location, secret_env: None, instance: dg.DagsterInstance, tmp_path: Path
) -> None:
    defs = build_definitions(write_datasets_file(tmp_path, _entry(s3)), PySparkResource(spark_config={}))
    resource = defs.resources["lance_sales"]
    assert SECRET_KEY not in repr(resource) + str(resource.storage_options)

    runs = []
    job = defs.resolve_implicit_global_asset_job_def()
    for day in ("2026-11-01", "2026-11-02"):
        result = job.execute_in_process(asset_selection=[INGEST], instance=instance, partition_key=day)
        assert result.success
        runs.append(result)
    uri = s3.uri("sales.lance")
    ingested = lance.dataset(uri, storage_options=s3.storage_options)
    assert (ingested.version, ingested.count_rows(), len(ingested.get_fragments())) == (2, 100, 2)
    ids = sorted(ingested.to_table(columns=["id"]).column("id").to_pylist())

    keep_all = {"ops": {"lance__sales__statistics": {"config": {"force": True}}}}
    maintenance = defs.resolve_job_def("sales_maintenance").execute_in_process(
        instance=instance, run_config=keep_all
    )
    assert maintenance.success
    runs.append(maintenance)
    after = lance.dataset(uri, storage_options=s3.storage_options)
    assert after.count_rows() == 100 and len(after.get_fragments()) == 1
    assert [v["version"] for v in after.versions()] == [after.version]  # retain_versions: 1
    assert sorted(after.to_table(columns=["id"]).column("id").to_pylist()) == ids

    for result in runs:
        records = instance.all_logs(result.run_id)
        assert records
        run = instance.get_run_by_id(result.run_id)
        assert run is not None
        for record in records:
            assert SECRET_KEY not in str(record), record.dagster_event
        assert SECRET_KEY not in repr(run.run_config) + repr(run.tags)
