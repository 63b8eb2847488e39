"""The main job: the maintenance cycle on a local[2] session, checked with pylance."""

from __future__ import annotations

from pathlib import Path

import lance
import pytest
from pyspark.sql import SparkSession

from jobs import pipeline
from jobs.delete import delete
from jobs.pipeline import StepFailed, run, run_step
from lance_ops.ops.delete import DeleteResult

pytestmark = [pytest.mark.spark, pytest.mark.interop]


def test_cycle_runs_every_step(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = str(tmp_path / "demo.lance")
    reports = run(spark, uri, rows=140, appends=2)
    assert [r.step for r in reports] == [
        "append",
        "append",
        "backfill",
        "delete",
        "add_column",
        "profile",
        "compact",
        "tag",
        "statistics",
        "cleanup",
    ]
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(reports) and all("version=" in line and "bytes=" in line for line in lines)
    ds = lance.dataset(uri)
    assert ds.count_rows() == 280 - 40 == reports[-1].rows  # ids divisible by 7 have no note
    assert len(ds.get_fragments()) == 1
    table = ds.to_table()
    assert table.schema.names[-1].startswith("score_x10_v")
    rows = table.to_pylist()
    assert all(r["score"] == (r["id"] if r["category"] == "alpha" else r["id"] * 0.5) for r in rows)
    # cleanup kept the tagged compacted version, which is the latest: every data file the cycle
    # wrote carries page statistics, so the statistics step had nothing to rebuild or commit
    (tag,) = ds.tags.list()
    assert [v["version"] for v in ds.versions()] == [ds.tags.list()[tag]["version"]] == [ds.version]
    assert lance.dataset(uri, version=tag).count_rows() == ds.count_rows()


def test_a_wrong_result_fails_the_step(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = str(tmp_path / "wrong.lance")
    run_step(spark, uri, "append", pipeline.append_step(20))

    def deletes_everything(spark: SparkSession, uri: str, predicate: str) -> DeleteResult:
        return delete(spark, uri, "id >= 0")

    monkeypatch.setattr(pipeline.jobs, "delete", deletes_everything)
    with pytest.raises(StepFailed, match="delete"):
        run_step(spark, uri, "delete", pipeline.delete_step)


def test_snapshot_of_a_missing_dataset(tmp_path: Path) -> None:
    assert pipeline.snapshot(str(tmp_path / "none.lance")) is None
