"""The Spark jobs (delete, add_columns, compact) against a local[2] session, checked with pylance."""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import jobs
import lance_ops
from lance_ops.errors import PredicateError, SchemaError

pytestmark = [pytest.mark.spark, pytest.mark.interop]


def _table(n: int, start: int = 0) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table({"id": ids, "day": ids % 5, "name": [f"n{i}" for i in ids]})


def _make(tmp_path: Path, rows: int = 300, per_file: int = 60, stable: bool = False) -> str:
    uri = str(tmp_path / "ds.lance")
    lance_ops.write_dataset(_table(rows), uri, max_rows_per_file=per_file, enable_stable_row_ids=stable)
    return uri


# ------------------------------------------------------------------------------------------ delete


def test_delete_commits_one_delete(spark: SparkSession, tmp_path: Path) -> None:
    uri = _make(tmp_path)
    result = jobs.delete(spark, uri, "day = 2 OR id >= 240")
    assert result.num_deleted_rows == 60 + 48
    ds = lance.dataset(uri)
    assert ds.version == 2
    assert ds.read_transaction(2).operation.__class__.__name__ == "Delete"
    ids = ds.to_table().column("id").to_pylist()
    assert ids == [i for i in range(300) if i % 5 != 2 and i < 240]
    assert len(ds.get_fragments()) == 4  # the last fragment lost every row and was removed


def test_delete_matches_the_library(spark: SparkSession, tmp_path: Path) -> None:
    uri = _make(tmp_path / "a")
    other = _make(tmp_path / "b")
    jobs.delete(spark, uri, "id % 7 = 0")
    lance_ops.dataset(other).delete("id % 7 = 0")
    assert lance.dataset(uri).to_table() == lance.dataset(other).to_table()


def test_delete_bad_predicate_runs_nothing(spark: SparkSession, tmp_path: Path) -> None:
    uri = _make(tmp_path)
    with pytest.raises((PredicateError, SchemaError)):
        jobs.delete(spark, uri, "nope = 1")
    assert lance.dataset(uri).version == 1


# ------------------------------------------------------------------------------------- add_columns


def test_add_columns_sql_one_merge(spark: SparkSession, tmp_path: Path) -> None:
    uri = _make(tmp_path)
    lance.dataset(uri).delete("id % 10 = 3")
    jobs.add_columns(spark, uri, {"double": "id * 2", "tag": "concat(name, '!')"})
    ds = lance.dataset(uri)
    assert ds.read_transaction(ds.version).operation.__class__.__name__ == "Merge"
    assert ds.schema.names == ["id", "day", "name", "double", "tag"]
    table = ds.to_table()
    assert table.column("double").to_pylist() == [2 * i for i in table.column("id").to_pylist()]
    assert table.column("tag")[0].as_py() == "n0!"
    assert ds.count_rows() == 270


def test_add_columns_udf(spark: SparkSession, tmp_path: Path) -> None:
    uri = _make(tmp_path, stable=True)

    def plus_one(batch: pa.RecordBatch) -> pa.RecordBatch:
        return pa.record_batch([pa.compute.add(batch.column(0), 1)], names=["next"])

    jobs.add_columns(spark, uri, plus_one, read_columns=["id"])
    table = lance.dataset(uri).to_table(with_row_id=True)
    assert table.column("next").to_pylist() == list(range(1, 301))
    assert table.column("_rowid").to_pylist() == list(range(300))


def test_add_columns_failed_task_commits_nothing(spark: SparkSession, tmp_path: Path) -> None:
    uri = _make(tmp_path)

    def fails_on_last_fragment(batch: pa.RecordBatch) -> pa.RecordBatch:
        if pa.compute.max(batch.column(0)).as_py() >= 290:
            raise RuntimeError("boom")
        return pa.record_batch([batch.column(0)], names=["copy"])

    with pytest.raises(Exception, match="boom"):
        jobs.add_columns(spark, uri, fails_on_last_fragment, read_columns=["id"])
    ds = lance.dataset(uri)
    assert ds.version == 1
    assert ds.schema.names == ["id", "day", "name"]


@pytest.mark.parametrize("stable", [False, True])
def test_add_columns_from_dataframe(spark: SparkSession, tmp_path: Path, stable: bool) -> None:
    uri = _make(tmp_path, stable=stable)
    lance.dataset(uri).delete("id < 10")
    key = "_rowid" if stable else "_rowaddr"
    source = spark.read.format("lance").option("columns", f"id,{key}").load(uri)
    backfill = source.filter("id % 2 = 0").select(key, (F.col("id") * 100).alias("score"))
    jobs.add_columns(spark, uri, backfill)
    ds = lance.dataset(uri)
    assert ds.read_transaction(ds.version).operation.__class__.__name__ == "Merge"
    table = ds.to_table()
    expected = [i * 100 if i % 2 == 0 else None for i in range(10, 300)]
    assert table.column("score").to_pylist() == expected


def test_add_columns_from_dataframe_repeated_key(spark: SparkSession, tmp_path: Path) -> None:
    uri = _make(tmp_path)
    keys = spark.createDataFrame([(0, 1), (0, 2)], "_rowaddr LONG, v LONG")
    with pytest.raises(Exception, match="repeat"):
        jobs.add_columns(spark, uri, keys)
    assert lance.dataset(uri).version == 1


# ----------------------------------------------------------------------------------------- compact


def _operations(uri: str, since: int) -> list[str]:
    """The operations committed after version ``since`` (pylance shows ReserveFragments as a
    ``BaseOperation``)."""
    ds = lance.dataset(uri)
    names = [type(ds.read_transaction(v).operation).__name__ for v in range(since + 1, ds.version + 1)]
    return ["ReserveFragments" if n == "BaseOperation" else n for n in names]


def test_compact_keeps_rows_and_stable_row_ids(spark: SparkSession, tmp_path: Path) -> None:
    uri = _make(tmp_path, rows=400, per_file=40, stable=True)
    lance.dataset(uri).delete("id % 3 = 0")
    before = lance.dataset(uri).to_table(with_row_id=True)
    metrics = jobs.compact(spark, uri, target_rows_per_fragment=150)
    ds = lance.dataset(uri)
    assert _operations(uri, 2) == ["ReserveFragments", "Rewrite"]
    assert ds.to_table(with_row_id=True) == before
    assert len(ds.get_fragments()) == metrics.fragments_added < 10
    assert metrics.fragments_removed == 10


def test_compact_commit_every_and_dry_run(spark: SparkSession, tmp_path: Path) -> None:
    uri = _make(tmp_path, rows=400, per_file=20)
    planned = jobs.compact(spark, uri, dry_run=True, target_rows_per_fragment=100)
    rows = planned.orderBy("task").collect()
    assert [len(r.fragment_ids) for r in rows] == [5, 5, 5, 5]
    assert sum(r.rows for r in rows) == 400 and {r.read_version for r in rows} == {1}
    assert lance.dataset(uri).version == 1
    before = lance.dataset(uri).to_table()
    jobs.compact(spark, uri, commit_every=2, target_rows_per_fragment=100)
    assert _operations(uri, 1) == ["ReserveFragments", "Rewrite"] * 2
    ds = lance.dataset(uri)
    assert len(ds.get_fragments()) == 4
    assert ds.to_table().sort_by("id") == before


# ---------------------------------------------------------------------------------------- progress


def _steps(events: list) -> list[tuple[str, int, int | None, str]]:  # type: ignore[type-arg]
    return [(e.operation, e.done, e.total, e.unit) for e in events]


def test_jobs_report_progress_per_task(spark: SparkSession, tmp_path: Path) -> None:
    """Every job reports done == 0 first, then finished tasks in increasing counts up to the total,
    across commit_every groups too; the driver log callback formats each event."""
    uri = _make(tmp_path, rows=400, per_file=20)
    events: list = []  # type: ignore[type-arg]
    jobs.compact(spark, uri, commit_every=2, target_rows_per_fragment=100, progress=events.append)
    steps = _steps(events)
    assert steps[0] == ("compact", 0, 4, "tasks") and steps[-1] == ("compact", 4, 4, "tasks")
    assert [d for _, d, _, _ in steps] == sorted({d for _, d, _, _ in steps})
    events.clear()
    jobs.delete(spark, uri, "id % 7 = 0", progress=events.append)
    assert _steps(events)[0] == ("delete", 0, 4, "tasks") and _steps(events)[-1][1] == 4
    events.clear()
    jobs.add_columns(spark, uri, {"twice": "id * 2"}, progress=events.append)
    assert _steps(events)[-1] == ("add_columns", 4, 4, "tasks")
    events.clear()
    jobs.rebuild_statistics(spark, uri, force=True, progress=events.append)
    assert _steps(events)[-1][:2] == ("statistics", _steps(events)[-1][2])
    assert lance.dataset(uri).count_rows() == 400 - len(range(0, 400, 7))


def test_driver_log_formats_events(caplog: pytest.LogCaptureFixture) -> None:
    from jobs.common import driver_log
    from lance_ops.progress import ProgressEvent

    with caplog.at_level("INFO", logger="jobs"):
        driver_log(ProgressEvent("compact", 3, 4, "tasks", "3 of 4 tasks finished"))
        driver_log(ProgressEvent("write", 10, None, "rows"))
    assert caplog.messages == ["compact: 3/4 tasks 3 of 4 tasks finished", "write: 10/? rows "]


def _mixed(rows: int) -> pa.Table:
    """Nulls, NaN, strings and lists, in rows where ``k % 7``, ``% 11``, ... pick them."""
    ks = range(rows)
    return pa.table(
        {
            "id": pa.array(ks, pa.int64()),
            "x": pa.array([None if k % 7 == 0 else k for k in ks], pa.int64()),
            "f": pa.array(
                [float("nan") if k % 11 == 0 else None if k % 13 == 0 else k / rows for k in ks], pa.float64()
            ),
            "s": pa.array([None if k % 17 == 0 else f"{'ab'[k % 2]}{k % 50}" for k in ks], pa.string()),
            "l": pa.array([None if k % 19 == 0 else list(range(k % 4)) for k in ks], pa.list_(pa.int32())),
        }
    )


@pytest.mark.parametrize(
    "predicate",
    [
        "x IS NULL",
        "f > 0.5",  # NaN sorts above every number (DataFusion): selected
        "isnan(f)",
        "f IS NULL OR x < 100",
        "s LIKE 'a%'",
        "s = 'b1'",
        "NOT (s IN ('a2', 'b3'))",  # NULL s: not selected
        "array_has(l, 2)",
        "array_length(l) >= 2",
        "l IS NULL",
        "_rowid % 3 = 0",
        "id >= 1024",  # the one-row fragment loses its row: removed
        "id < 0",  # nothing: a version all the same
    ],
)
def test_delete_job_matches_pylance_on_nulls_nan_strings_and_lists(
    spark: SparkSession, tmp_path: Path, predicate: str
) -> None:
    """1,025 rows in fragments of 1,024 and 1, some rows already deleted: the Spark job leaves the
    rows (by address) pylance's delete leaves, counts what it took as the library does, and
    pylance reads its deletion files."""
    ours, theirs, library = (str(tmp_path / n) for n in ("job.lance", "pylance.lance", "lib.lance"))
    for uri in (ours, theirs, library):
        lance.write_dataset(_mixed(1025), uri, max_rows_per_file=1024)
        lance.dataset(uri).delete("id % 5 = 4")
    result = jobs.delete(spark, ours, predicate)
    lance.dataset(theirs).delete(predicate)
    expected = lance_ops.dataset(library).delete(predicate)
    mine, pylance_rows = lance.dataset(ours), lance.dataset(theirs)
    assert mine.version == pylance_rows.version == 3
    addresses = mine.to_table(columns=["id"], with_row_address=True).column("_rowaddr")
    assert addresses.equals(pylance_rows.to_table(columns=["id"], with_row_address=True).column("_rowaddr"))
    assert result.num_deleted_rows == expected["num_deleted_rows"] == 820 - pylance_rows.count_rows()
    assert [f.fragment_id for f in mine.get_fragments()] == [
        f.fragment_id for f in pylance_rows.get_fragments()
    ]
