"""The Spark data source and jobs on an ``s3://`` dataset (moto on loopback), checked by pylance
reading the same bucket with the same storage options.

One dataset goes through the whole chain: create, append, overwrite, replace-where, read back,
then every maintenance job with ``storage_options=``. Spark's Python workers are separate
processes, so every step proves the options reach the executors through the tasks.
"""

from __future__ import annotations

import datetime as dt
import importlib
import json
from typing import Any

import lance
import pyarrow.compute as pc
import pytest
from pyspark.sql import DataFrame, SparkSession

import jobs
import jobs.common
from lance_ops.encoding.plan import CONFIG_KEY as PLAN_CONFIG_KEY
from tests.s3.conftest import SECRET_KEY, S3Location

pytestmark = [pytest.mark.s3, pytest.mark.spark, pytest.mark.interop]


def _days(spark: SparkSession, days: range, per_day: int = 10, run: int = 0) -> DataFrame:
    rows = [(d * 1000 + i, d, run) for d in days for i in range(per_day)]
    return spark.createDataFrame(rows, "id LONG, day LONG, run LONG").repartition(2)


def _pylance(s3: S3Location) -> lance.LanceDataset:
    return lance.dataset(s3.uri(), storage_options=s3.storage_options)


def _operation(ds: lance.LanceDataset) -> str:
    return type(ds.read_transaction(ds.version).operation).__name__


def _write(df: DataFrame, s3: S3Location, mode: str, **options: str) -> None:
    writer = df.write.format("lance").mode(mode).option("storage_options", json.dumps(s3.storage_options))
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.save(s3.uri())


def test_data_source_and_jobs_on_s3(spark: SparkSession, s3: S3Location) -> None:
    uri, opts = s3.uri(), s3.storage_options
    _write(_days(spark, range(2)), s3, "append", max_rows_per_file="5")  # a create
    _write(_days(spark, range(2, 4)), s3, "append", max_rows_per_file="5")
    assert _pylance(s3).count_rows() == 40
    _write(_days(spark, range(6)), s3, "overwrite", max_rows_per_file="5")
    assert (_pylance(s3).version, _pylance(s3).count_rows()) == (3, 60)
    _write(_days(spark, range(2, 3), per_day=7, run=1), s3, "overwrite", replace_where="day = 2")
    ds = _pylance(s3)
    assert _operation(ds) == "Update"
    assert ds.count_rows() == 57
    assert ds.to_table(filter="day = 2").column("run").to_pylist() == [1] * 7

    read = spark.read.format("lance").option("storage_options", json.dumps(opts)).load(uri)
    assert sorted(read.toArrow().column("id").to_pylist()) == sorted(ds.to_table().column("id").to_pylist())

    deleted = jobs.delete(spark, uri, "day = 5", storage_options=opts)
    assert deleted.num_deleted_rows == 10
    assert _operation(_pylance(s3)) == "Delete"
    jobs.add_columns(spark, uri, {"double": "id * 2"}, storage_options=opts)
    table = _pylance(s3).to_table()
    assert table.column("double").to_pylist() == pc.multiply(table.column("id"), 2).to_pylist()

    before = _pylance(s3)
    fragments, rows = len(before.get_fragments()), before.count_rows()
    metrics: Any = jobs.compact(spark, uri, commit_every=2, storage_options=opts, target_rows_per_fragment=20)
    after = _pylance(s3)
    assert metrics.fragments_removed > 0
    assert after.version >= before.version + 2  # commit_every=2 over more than two tasks
    assert (len(after.get_fragments()) < fragments, after.count_rows()) == (True, rows)

    stats = jobs.rebuild_statistics(spark, uri, force=True, storage_options=opts)
    assert stats.manifest is not None and stats.manifest.version == _pylance(s3).version
    plan = jobs.profile_encodings(spark, uri, storage_options=opts)
    assert _pylance(s3).config().get(PLAN_CONFIG_KEY) == plan.to_json()

    kept = _pylance(s3).version
    dry = jobs.cleanup(spark, uri, older_than=dt.timedelta(0), dry_run=True, storage_options=opts)
    assert (dry.dry_run, dry.old_versions, len(_pylance(s3).versions())) == (True, kept - 1, kept)
    done = jobs.cleanup(spark, uri, older_than=dt.timedelta(0), storage_options=opts)
    assert (done.old_versions, done.paths) == (dry.old_versions, dry.paths)
    assert [v["version"] for v in _pylance(s3).versions()] == [kept]
    final = _pylance(s3).to_table().sort_by("id")
    expected = sorted(i for d in (0, 1, 3, 4) for i in range(d * 1000, d * 1000 + 10))
    assert final.column("id").to_pylist() == sorted([*expected, *range(2000, 2007)])
    assert final.column("double").to_pylist() == [i * 2 for i in final.column("id").to_pylist()]
    assert SECRET_KEY not in repr(metrics) + repr(stats) + repr(done)


def test_job_mains_take_storage_options(
    spark: SparkSession, s3: S3Location, main_session: None, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(_days(spark, range(3)), s3, "append", max_rows_per_file="10")
    options = [a for k, v in s3.storage_options.items() for a in ("--storage-option", f"{k}={v}")]

    def main(job: str, *argv: str) -> Any:
        return importlib.import_module(f"jobs.{job}").main(["--uri", s3.uri(), *options, *argv])

    assert main("delete", "--where", "day = 0")["deleted_rows"] == 10
    assert main("compact")["fragments_removed"] > 1
    compacted = _pylance(s3).version
    assert main("tags", "create", "compacted", str(compacted))["compacted"]["version"] == compacted
    assert main("cleanup", "--older-than", "0s")["old_versions"] == compacted - 1
    ds = _pylance(s3)
    assert (ds.version, ds.count_rows(), len(ds.get_fragments())) == (compacted, 20, 1)
    assert ds.tags.list()["compacted"]["version"] == compacted
    with pytest.raises(SystemExit):
        jobs.common.run_main(
            "python -m jobs.x", ["--uri", s3.uri(), "--storage-option", SECRET_KEY], print, print
        )
    printed = capsys.readouterr()
    assert SECRET_KEY not in printed.out + printed.err
