"""Dagster side: the Definitions load, and assets materialize Lance versions stamped with the run.

No ``from __future__ import annotations`` here: the module defines a Dagster asset, whose parameter
annotations Dagster must see as classes.
"""

import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
from dagster_pyspark import PySparkResource
from pyspark.sql import SparkSession

import lance_ops
from assets.definitions import defs
from assets.lance_assets import (
    PARTITION_KEY_KEY,
    RUN_ID_KEY,
    demo_lance_dataset,
    demo_lance_dataset_stamped,
    write_dataframe,
)
from assets.resources import LanceDatasetResource
from jobs.pipeline import demo_frame

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.dagster


def test_definitions_load() -> None:
    dg.Definitions.validate_loadable(defs)
    repo = defs.get_repository_def()
    assert repo.asset_graph.get_all_asset_keys() == {demo_lance_dataset.key}
    assert set(repo.get_top_level_resources()) == {"pyspark", "lance_dataset"}
    assert demo_lance_dataset.specs_by_key[demo_lance_dataset.key].kinds == {"spark", "lance"}


def test_workspace_validates() -> None:
    result = subprocess.run(
        [str(Path(sys.executable).parent / "dagster"), "definitions", "validate", "-w", "workspace.yaml"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "passed validation" in result.stdout + result.stderr


def _resources(uri: str) -> dict[str, object]:
    # ``spark_config={}``: getOrCreate hands back the session-scoped test session.
    return {"pyspark": PySparkResource(spark_config={}), "lance_dataset": LanceDatasetResource(uri=uri)}


def _metadata(result: dg.ExecuteInProcessResult) -> dict[str, object]:
    (materialization,) = result.asset_materializations_for_node(demo_lance_dataset.op.name)
    return {key: value.value for key, value in materialization.metadata.items()}


def _run_config(rows: int, mode: str = "append") -> dg.RunConfig:
    return dg.RunConfig(ops={demo_lance_dataset.op.name: {"config": {"rows": rows, "mode": mode}}})


@pytest.mark.spark
def test_materialize_demo_dataset(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "demo.lance")
    assets = [demo_lance_dataset, demo_lance_dataset_stamped]
    first = dg.materialize(assets, resources=_resources(uri), run_config=_run_config(40))
    assert first.success
    metadata = _metadata(first)
    assert metadata["lance/version"] == 1
    assert metadata["dagster/row_count"] == 40
    assert metadata["lance/fragments"] >= 1
    assert metadata["lance/deleted_rows"] == 0
    assert metadata["lance/data_bytes"] > 0
    (check,) = first.get_asset_check_evaluations()
    assert check.passed

    second = dg.materialize([demo_lance_dataset], resources=_resources(uri), run_config=_run_config(10))
    assert (_metadata(second)["lance/version"], _metadata(second)["dagster/row_count"]) == (2, 50)

    ds = lance_ops.dataset(uri)
    assert ds.read_transaction(1).properties[RUN_ID_KEY] == first.run_id
    assert ds.read_transaction(2).properties[RUN_ID_KEY] == second.run_id
    ids = sorted(ds.to_table(columns=["id"]).column("id").to_pylist())
    assert ids == list(range(50))

    third = dg.materialize(
        [demo_lance_dataset], resources=_resources(uri), run_config=_run_config(5, "overwrite")
    )
    assert (_metadata(third)["lance/version"], _metadata(third)["dagster/row_count"]) == (3, 5)


@pytest.mark.spark
@pytest.mark.interop
def test_run_id_visible_to_pylance(spark: SparkSession, tmp_path: Path) -> None:
    import lance

    uri = str(tmp_path / "interop.lance")
    result = dg.materialize([demo_lance_dataset], resources=_resources(uri), run_config=_run_config(3))
    assert result.success
    ds = lance.dataset(uri)
    assert ds.count_rows() == 3
    assert ds.read_transaction(1).transaction_properties[RUN_ID_KEY] == result.run_id


regions = dg.StaticPartitionsDefinition(["eu", "us"])


@dg.asset(partitions_def=regions, kinds={"spark", "lance"})
def regional_rows(
    context: dg.AssetExecutionContext, pyspark: PySparkResource, lance_dataset: LanceDatasetResource
) -> dg.MaterializeResult:
    return write_dataframe(context, demo_frame(pyspark.spark_session, 4), lance_dataset)


@pytest.mark.spark
def test_partition_key_stamped(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "regional.lance")
    result = dg.materialize([regional_rows], resources=_resources(uri), partition_key="us")
    assert result.success
    properties = lance_ops.dataset(uri).read_transaction(1).properties
    assert properties[PARTITION_KEY_KEY] == "us"
    assert properties[RUN_ID_KEY] == result.run_id
    assert properties["dagster/asset_key"] == "regional_rows"
