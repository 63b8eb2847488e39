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
    assert table.schema.names[-1] == "score_x10"
    rows = table.to_pylist()
    assert all(r["score"] == (r["id"] if r["category"] == "alpha" else r["id"] * 0.5) for r in rows)
    assert all(r["score_x10"] == r["score"] * 10 for r in rows)
    # cleanup kept the day's tag and the newest versions
    assert ds.tags.list()["day-1"]["version"] == ds.version
    assert len(ds.versions()) == pipeline.DEFAULT_RETAIN_VERSIONS
    assert lance.dataset(uri, version="day-1").count_rows() == ds.count_rows()


def test_the_main_job_continues_the_dataset_it_finds(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Day two: the same command again appends the next ids, computes the evolved column for them,
    evolves nothing twice, compacts, and keeps the history of both days."""
    uri = str(tmp_path / "demo.lance")
    argv = ["--uri", uri, "--rows", "70", "--appends", "2"]
    pipeline.main(argv, spark=spark)
    first = lance.dataset(uri)
    pipeline.main(argv, spark=spark)
    out = capsys.readouterr().out.splitlines()
    assert sum(line.startswith("append ") for line in out) == 4 and out[-1].startswith("{")
    ds = lance.dataset(uri)
    assert ds.schema.names == first.schema.names and ds.schema.names.count("score_x10") == 1
    table = ds.to_table()
    assert table.num_rows == 2 * first.count_rows()
    ids = table.column("id").to_pylist()
    assert sorted(ids) == sorted(i for i in range(280) if i % 7)  # the next ids, each once
    rows = table.to_pylist()
    assert all(r["score_x10"] == r["score"] * 10 for r in rows)
    assert all(r["score"] == (r["id"] if r["category"] == "alpha" else r["id"] * 0.5) for r in rows)
    assert len(ds.get_fragments()) == 1
    assert sorted(ds.tags.list()) == ["day-1", "day-2"]
    history = [v["version"] for v in ds.versions()]
    assert first.version in history and len(history) > pipeline.DEFAULT_RETAIN_VERSIONS
    assert lance.dataset(uri, version="day-1").count_rows() == first.count_rows()
    # the log file beside the dataset holds both runs
    assert (tmp_path / "pipeline.log").read_text().count("run on ") == 2


def test_a_failure_ends_with_one_line(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A column another writer added without an expression cannot be filled: the append step fails
    with one FAILED line naming it, the traceback goes to the log file, nothing is committed."""
    uri = str(tmp_path / "demo.lance")
    argv = ["--uri", uri, "--rows", "70", "--appends", "2", "--log-file", str(tmp_path / "run.log")]
    pipeline.main(argv, spark=spark)
    ds = lance.dataset(uri)
    ds.add_columns({"double_id": "id * 2"})  # pylance: non-nullable, no recorded expression
    before = lance.dataset(uri).version
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        pipeline.main(argv, spark=spark)
    assert exited.value.code == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("FAILED: append: ") and "double_id" in line, line
    assert "Traceback" in (tmp_path / "run.log").read_text()
    assert lance.dataset(uri).version == before
    lance.dataset(uri).to_table()


def test_reason_finds_the_python_error_in_a_spark_error() -> None:
    class Py4JJavaError(Exception):
        __module__ = "py4j.protocol"

    wrapped = Py4JJavaError(
        "An error occurred while calling o123.save.\n: org.apache.spark.SparkException: Job aborted\n"
        'Traceback (most recent call last):\n  File "x.py", line 1\n'
        "lance_ops.errors.SchemaError: column 'c' is missing\n\tat org.apache.Foo(Foo.java:1)"
    )
    assert pipeline.reason(wrapped) == "SchemaError: column 'c' is missing"
    assert pipeline.reason(ValueError("bad\nmore")) == "ValueError: bad"
    assert pipeline.reason(StepFailed("3 rows, expected 4")) == "3 rows, expected 4"


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
