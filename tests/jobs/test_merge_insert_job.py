"""``jobs.merge_insert`` against a local[2] session: equals the in-process upsert, one commit,
pylance reads it, a failed task commits nothing, bad input runs no task."""

from __future__ import annotations

import shutil
from pathlib import Path

import lance
import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

import jobs
import lance_ops
from lance_ops.errors import FieldNotFoundError, InvalidArgumentError

pytestmark = [pytest.mark.spark, pytest.mark.interop]

COLUMNS = ["id", "v", "s", "_rowid", "_row_created_at_version", "_row_last_updated_at_version"]


def _rows(ids: list[int], value: float) -> pa.Table:
    return pa.table(
        {"id": pa.array(ids, pa.int64()), "v": pa.array([value] * len(ids)), "s": [f"x{i}" for i in ids]}
    )


def _twins(tmp_path: Path, stable: bool) -> tuple[str, str]:
    uri, other = str(tmp_path / "spark.lance"), str(tmp_path / "local.lance")
    lance_ops.write_dataset(
        _rows(list(range(100)), 0.0), uri, max_rows_per_file=25, enable_stable_row_ids=stable
    )
    shutil.copytree(uri, other)
    return uri, other


@pytest.mark.parametrize("strategy", ["broadcast", "copartitioned"])
@pytest.mark.parametrize("stable", [False, True], ids=["addresses", "stable"])
@pytest.mark.parametrize(
    ("matched", "not_matched", "by_source"),
    [
        ("update_all", "insert_all", None),
        ("delete", None, None),
        (None, "insert_all", "delete"),
        ("update_all", None, "delete"),
    ],
    ids=["upsert", "matched-delete", "insert-and-prune", "update-and-prune"],
)
def test_spark_upsert_equals_the_library(
    spark: SparkSession,
    tmp_path: Path,
    strategy: str,
    stable: bool,
    matched: str | None,
    not_matched: str | None,
    by_source: str | None,
) -> None:
    uri, other = _twins(tmp_path, stable)
    source = _rows([3, 30, 31, 77, 200, 201], 1.0)
    df = spark.createDataFrame(source.to_pandas()).repartition(3)
    committed = jobs.merge_insert(
        spark, uri, df, "id", matched, not_matched, by_source, strategy=strategy, partitions=3
    )
    builder = lance_ops.dataset(other).merge_insert("id")
    if matched == "update_all":
        builder = builder.when_matched_update_all()
    if matched == "delete":
        builder = builder.when_matched_delete()
    if not_matched:
        builder = builder.when_not_matched_insert_all()
    if by_source:
        builder = builder.when_not_matched_by_source_delete()
    assert committed.result == builder.execute(source)
    assert committed.manifest.version == 2
    ours = lance.dataset(uri)
    assert type(ours.read_transaction(2).operation).__name__ == "Update"
    columns = COLUMNS if stable else COLUMNS[:3]
    expected = lance.dataset(other).to_table(columns=columns).sort_by("id").to_pydict()
    got = ours.to_table(columns=columns).sort_by("id").to_pydict()
    if stable:
        # Inserted rows get new ids in the order the (repartitioned) source delivered them.
        old = [i < 100 for i in got["id"]]
        for table in (got, expected):
            new_ids = sorted(r for r, was in zip(table["_rowid"], old, strict=True) if not was)
            table["_rowid"] = [r for r, was in zip(table["_rowid"], old, strict=True) if was] + new_ids
    assert got == expected


@pytest.mark.parametrize("strategy", ["broadcast", "copartitioned"])
def test_failed_task_commits_nothing(spark: SparkSession, tmp_path: Path, strategy: str) -> None:
    uri, _ = _twins(tmp_path, False)
    df = spark.createDataFrame(_rows([5, 500], 1.0).to_pandas())
    with pytest.raises(Exception, match="found matching row"):
        jobs.merge_insert(spark, uri, df, "id", "fail", "insert_all", strategy=strategy, partitions=2)
    duplicated = spark.createDataFrame(_rows([7, 7], 1.0).to_pandas())
    with pytest.raises(Exception, match="Ambiguous merge inserts"):
        jobs.merge_insert(spark, uri, duplicated, "id", strategy=strategy, partitions=2)
    assert lance.dataset(uri).version == 1


def test_copartitioned_composite_keys_condition_and_auto_choice(spark: SparkSession, tmp_path: Path) -> None:
    """Composite string/int keys and a matched condition, co-partitioned (chosen by ``auto`` past
    ``broadcast_rows``), equal the library's merge; pylance reads the result."""
    uri, other = _twins(tmp_path, False)
    source = _rows([4, 5, 6, 300], 1.0)
    source = source.set_column(2, "s", pa.array(["x4", "other", "x6", "x300"]))
    source = source.set_column(1, "v", pa.array([1.0, 1.0, -1.0, 1.0]))
    df = spark.createDataFrame(source.to_pandas())
    condition = "source.v > target.v"
    committed = jobs.merge_insert(
        spark, uri, df, ["s", "id"], matched_condition=condition, broadcast_rows=2, partitions=4
    )
    library = (
        lance_ops.dataset(other)
        .merge_insert(["s", "id"])
        .when_matched_update_all(condition)
        .when_not_matched_insert_all()
        .execute(source)
    )
    assert (
        committed.result == library == {"num_inserted_rows": 2, "num_updated_rows": 1, "num_deleted_rows": 0}
    )
    expected = lance.dataset(other).to_table().sort_by([("id", "ascending"), ("s", "ascending")])
    assert lance.dataset(uri).to_table().sort_by([("id", "ascending"), ("s", "ascending")]) == expected
    with pytest.raises(InvalidArgumentError, match="strategy"):
        jobs.merge_insert(spark, uri, df, "id", strategy="shuffle")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="partitions"):
        jobs.merge_insert(spark, uri, df, "id", strategy="copartitioned", partitions=-1)
    assert lance.dataset(uri).version == 2


def test_bad_input_runs_no_task(spark: SparkSession, tmp_path: Path) -> None:
    uri, _ = _twins(tmp_path, False)
    df = spark.createDataFrame(_rows([1], 1.0).to_pandas())
    with pytest.raises(FieldNotFoundError):
        jobs.merge_insert(spark, uri, df, "nope")
    with pytest.raises(InvalidArgumentError):
        jobs.merge_insert(spark, uri, df, "id", "upsert_everything")
    with pytest.raises(InvalidArgumentError):
        jobs.merge_insert(spark, uri, df, "id", None, None)
    assert lance.dataset(uri).version == 1


def test_change_feed_read_option(spark: SparkSession, tmp_path: Path) -> None:
    jobs.register(spark)
    uri, _ = _twins(tmp_path, True)
    ds = lance_ops.dataset(uri)
    ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(
        _rows([1, 500], 2.0)
    )
    ds.delete("id = 2")
    df = spark.read.format("lance").option("read_change_feed", "true").option("starting_version", 2).load(uri)
    assert df.columns == ["id", "v", "s", "_change_type", "_commit_version"]
    got = sorted((r["_commit_version"], r["_change_type"], r["id"]) for r in df.collect())
    expected = ds.changes(2)
    assert got == sorted(
        zip(
            expected.column("_commit_version").to_pylist(),
            expected.column("_change_type").to_pylist(),
            expected.column("id").to_pylist(),
            strict=True,
        )
    )
    assert got == [
        (2, "insert", 500),
        (2, "update_postimage", 1),
        (2, "update_preimage", 1),
        (3, "delete", 2),
    ]
    ranged = spark.read.format("lance").option("read_change_feed", "true").option("starting_version", 3)
    assert ranged.option("ending_version", 3).load(uri).count() == 1
    with pytest.raises(Exception, match="starting_version <= ending_version"):
        spark.read.format("lance").option("read_change_feed", "true").option("starting_version", 9).load(
            uri
        ).collect()


def test_broadcast_merges_in_one_job_and_workers_take_each_merges_source(
    spark: SparkSession, tmp_path: Path
) -> None:
    """20 fragments in at most 4 × parallelism tasks (several fragments a task), one Spark job
    beside the source's collection, inserts written by the driver; then a second merge on the same
    Python workers with another source: the workers must read the new source, not the one they
    cached for the first merge. Both equal the library's; pylance reads each result."""
    uri, other = str(tmp_path / "spark.lance"), str(tmp_path / "local.lance")
    lance_ops.write_dataset(_rows(list(range(100)), 0.0), uri, max_rows_per_file=5)
    shutil.copytree(uri, other)
    context = spark.sparkContext
    for round_, ids in enumerate(([3, 30, 31, 77, 99, 200], [3, 31, 50, 201, 300])):
        source = _rows(ids, float(round_ + 1))
        df = spark.createDataFrame(source.to_pandas()).cache()
        df.count()
        group = f"merge-{round_}-{tmp_path.name}"
        context.setJobGroup(group, "test")
        try:
            committed = jobs.merge_insert(spark, uri, df, "id")
        finally:
            context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
        assert len(context.statusTracker().getJobIdsForGroup(group)) <= 2
        library = (
            lance_ops.dataset(other)
            .merge_insert("id")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute(source)
        )
        assert committed.result == library
        assert lance.dataset(uri).to_table().sort_by("id") == lance.dataset(other).to_table().sort_by("id")
    assert lance.dataset(uri).version == 3


def test_fragment_groups_and_known_source_rows(spark: SparkSession, tmp_path: Path) -> None:
    from jobs.merge_insert import _groups, _known_rows

    assert _groups([], 8) == []
    assert _groups([4, 5, 9], 8) == [[4], [5], [9]]
    assert _groups(list(range(10)), 4) == [[0, 1, 2], [3, 4, 5], [6, 7], [8, 9]]
    local = spark.createDataFrame(_rows([1, 2, 3], 1.0).to_pandas())
    assert _known_rows(local) == 3
    local.write.parquet(str(tmp_path / "source.parquet"))
    assert _known_rows(spark.read.parquet(str(tmp_path / "source.parquet"))) is None
