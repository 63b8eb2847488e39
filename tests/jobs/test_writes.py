"""Spark writes beyond append/overwrite: save modes, replace-where backfills, streaming; and reads
with metadata columns, row-range splits and the filter option. pylance checks the results."""

from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import jobs
from jobs.datasource import STREAM_BATCH_KEY, STREAM_ID_KEY
from lance_ops.errors import DatasetAlreadyExistsError

pytestmark = [pytest.mark.spark, pytest.mark.interop]


def _days(spark: SparkSession, days: range, per_day: int = 10, version: int = 0) -> DataFrame:
    """``per_day`` rows for each day, ``value`` tagging the backfill run that made them."""
    rows = [(d * 1000 + i, d, version) for d in days for i in range(per_day)]
    return spark.createDataFrame(rows, "id LONG, day LONG, value LONG").repartition(2)


def test_save_modes(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "modes.lance")
    jobs.save(_days(spark, range(2)), uri, mode="error")
    assert lance.dataset(uri).count_rows() == 20
    with pytest.raises(Exception, match="already exists"):
        jobs.save(_days(spark, range(2)), uri, mode="error")
    jobs.save(_days(spark, range(5)), uri, mode="ignore")
    assert lance.dataset(uri).version == 1
    jobs.save(_days(spark, range(1)), uri, mode="append")
    jobs.save(_days(spark, range(3)), uri, mode="overwrite")
    ds = lance.dataset(uri)
    assert (ds.version, ds.count_rows()) == (3, 30)
    assert issubclass(DatasetAlreadyExistsError, FileExistsError)


def test_replace_where_is_one_update_and_idempotent(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "backfill.lance")
    jobs.save(_days(spark, range(5)), uri)
    for run in (1, 2):
        _days(spark, range(2, 4), per_day=7, version=run).write.format("lance").mode("overwrite").option(
            "replace_where", "day >= 2 AND day <= 3"
        ).save(uri)
        ds = lance.dataset(uri)
        transaction = ds.read_transaction(ds.version)
        assert type(transaction.operation).__name__ == "Update"
        table = ds.to_table().sort_by("id")
        per_day = {d: table.filter(pc.equal(table.column("day"), d)).num_rows for d in range(5)}
        assert per_day == {0: 10, 1: 10, 2: 7, 3: 7, 4: 10}
        replaced = table.filter(pc.is_in(table.column("day"), pa.array([2, 3])))
        assert set(replaced.column("value").to_pylist()) == {run}
    assert lance.dataset(uri).version == 3


def test_replace_where_rejects_rows_outside_the_predicate(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "strict.lance")
    jobs.save(_days(spark, range(3)), uri)
    with pytest.raises(Exception, match="do not match replace_where"):
        _days(spark, range(1, 3)).write.format("lance").mode("overwrite").option(
            "replace_where", "day = 1"
        ).save(uri)
    assert lance.dataset(uri).version == 1


def test_streaming_replayed_batch_is_committed_once(spark: SparkSession, tmp_path: Path) -> None:
    source, checkpoint, uri = tmp_path / "in", tmp_path / "ckpt", str(tmp_path / "stream.lance")
    source.mkdir()

    def run() -> None:
        stream = spark.readStream.schema("id LONG, day LONG").json(str(source))
        query = (
            stream.writeStream.format("lance")
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start(uri)
        )
        query.awaitTermination()

    (source / "a.json").write_text("".join(f'{{"id": {i}, "day": 1}}\n' for i in range(5)))
    run()
    (source / "b.json").write_text("".join(f'{{"id": {i}, "day": 2}}\n' for i in range(5, 9)))
    run()
    ds = lance.dataset(uri)
    assert (ds.version, ds.count_rows()) == (2, 9)
    properties = ds.read_transaction(2).transaction_properties
    assert properties[STREAM_BATCH_KEY] == "1" and properties[STREAM_ID_KEY]
    # Forget that batch 1 was committed: Spark replays it on restart, the sink must skip it.
    for name in ("1", ".1.crc"):
        (checkpoint / "commits" / name).unlink()
    run()
    ds = lance.dataset(uri)
    assert (ds.version, ds.count_rows()) == (2, 9)


def test_failed_write_task_commits_nothing(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "fail.lance")
    jobs.save(_days(spark, range(2)), uri)
    bad = _days(spark, range(2, 4)).withColumn(
        "id", F.when(F.col("day") == 3, F.raise_error(F.lit("task boom"))).otherwise(F.col("id"))
    )
    with pytest.raises(Exception, match="task boom"):
        jobs.save(bad, uri)
    ds = lance.dataset(uri)
    assert (ds.version, ds.count_rows()) == (1, 20)


# ------------------------------------------------------------------------------------------- reads


def test_metadata_columns_splits_and_filter(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "read.lance")
    jobs.save(_days(spark, range(10)).coalesce(1), uri)
    lance.dataset(uri).delete("id % 4 = 0")
    read = (
        spark.read.format("lance")
        .option("columns", "id,_rowid,_rowaddr,_fragid")
        .option("split_rows", "16")
        .option("filter", "day < 5")
        .load(uri)
    )
    assert read.rdd.getNumPartitions() == 7  # one fragment of 100 rows in splits of 16
    got = sorted(tuple(r) for r in read.collect())
    expected = lance.dataset(uri).to_table(
        columns=["id"], filter="day < 5", with_row_id=True, with_row_address=True
    )
    want = sorted(
        (i, rid, addr, addr >> 32)
        for i, rid, addr in zip(
            expected.column("id").to_pylist(),
            expected.column("_rowid").to_pylist(),
            expected.column("_rowaddr").to_pylist(),
            strict=True,
        )
    )
    assert got == want and len(got) == 35


def test_version_option_and_tag_string(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "versions.lance")
    jobs.save(_days(spark, range(2)), uri)
    jobs.save(_days(spark, range(2, 3)), uri)
    assert spark.read.format("lance").option("version", 1).load(uri).count() == 20
    assert spark.read.format("lance").option("version", "2").load(uri).count() == 30
    with pytest.raises(Exception):  # noqa: B017 - a name that is no tag
        spark.read.format("lance").option("version", "no-such-tag").load(uri).count()
