"""Statistics, encoding-profile, cleanup and tag jobs; failed tasks leave orphans cleanup reclaims;
statistics pruning when planning reads. Local[2] session, results checked with pylance."""

from __future__ import annotations

import datetime as dt
import glob
import json
import shutil
from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import jobs
import jobs.common
import jobs.tags
import lance_ops
from jobs.cleanup import main as cleanup_main
from jobs.datasource import LanceDataSource
from jobs.profile_encodings import main as profile_main
from jobs.rebuild_statistics import main as rebuild_main
from lance_ops.encoding.plan import CONFIG_KEY as PLAN_KEY
from lance_ops.encoding.plan import EncodingPlan
from lance_ops.errors import CleanupError, DatasetNotFoundError, TagNotFoundError
from lance_ops.file import LanceFileReader
from lance_ops.ops.encodings import profile
from lance_ops.table.statistics import CONFIG_KEY as STATS_KEY
from lance_ops.table.statistics import load_statistics

pytestmark = [pytest.mark.spark, pytest.mark.interop]

ZERO = dt.timedelta(0)


def _table(n: int, start: int = 0) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table(
        {
            "id": ids,
            "day": ids % 5,
            "name": [f"n{i % 13}" for i in ids],
            "score": pa.array(ids * 0.5, mask=ids % 4 == 0),
        }
    )


def _make(path: Path, rows: int = 300, per_file: int = 60) -> str:
    """A dataset whose files carry no page statistics (as pylance writes them): rebuilds have work."""
    uri = str(path / "ds.lance")
    lance_ops.write_dataset(_table(rows), uri, max_rows_per_file=per_file, page_statistics=False)
    return uri


# ---------------------------------------------------------------------------- rebuild_statistics


def test_rebuild_statistics_equals_the_library(spark: SparkSession, tmp_path: Path) -> None:
    uri = _make(tmp_path / "a")
    other = str(tmp_path / "b.lance")
    shutil.copytree(uri, other)  # the same data files: statistics must match exactly
    result = jobs.rebuild_statistics(spark, uri)
    lance_ops.dataset(other).stats.rebuild()
    assert result.fragment_ids == (0, 1, 2, 3, 4)
    ds = lance.dataset(uri)
    assert ds.version == 2
    assert ds.read_transaction(2).operation.__class__.__name__ == "UpdateConfig"
    assert STATS_KEY in ds.config()
    assert ds.to_table() == _table(300)
    ours = lance_ops.dataset(uri).manifest
    theirs = lance_ops.dataset(other).manifest
    mine, library = load_statistics(uri, ours), load_statistics(other, theirs)
    assert sorted(mine) == sorted(library) == [0, 1, 2, 3, 4]
    for fragment_id, stats in mine.items():
        expected = library[fragment_id]
        assert stats.sources == expected.sources
        assert all(stats.columns[i].equals(expected.columns[i]) for i in expected.columns)
        # merged sketches hold the same registers (their bytes may differ in order)
        assert {i: s.estimate() for i, s in stats.sketches.items()} == {
            i: s.estimate() for i, s in expected.sketches.items()
        }
    summary = lance_ops.dataset(uri).stats.column_summary("id")
    assert summary["fragments_with_statistics"] == summary["num_fragments"] == 5


def test_rebuild_statistics_keeps_nan_counts_as_the_library(spark: SparkSession, tmp_path: Path) -> None:
    """Float zones' NaN counts by sign travel from the executors and equal the library's."""
    uri, other = str(tmp_path / "a.lance"), str(tmp_path / "b.lance")
    ids = np.arange(200)
    x = np.where(ids % 7 == 3, np.nan, np.where(ids % 11 == 5, -np.nan, ids * 0.5))
    table = pa.table({"id": ids, "x": pa.array(x, mask=ids % 4 == 0)})
    lance_ops.write_dataset(table, uri, max_rows_per_file=50, page_statistics=False)
    shutil.copytree(uri, other)
    jobs.rebuild_statistics(spark, uri)
    lance_ops.dataset(other).stats.rebuild()
    mine = load_statistics(uri, lance_ops.dataset(uri).manifest)
    library = load_statistics(other, lance_ops.dataset(other).manifest)
    field_id = lance_ops.dataset(uri).manifest.schema.field("x").id
    counts = {f: s.nan_counts[field_id].tolist() for f, s in mine.items()}
    assert counts == {f: s.nan_counts[field_id].tolist() for f, s in library.items()}
    assert all(c[0][0] and c[1][0] for c in counts.values())  # both signs in every fragment
    ds = lance_ops.dataset(uri)
    for where in ("x > 90", "x < 1", "x >= 0"):
        assert ds.count_rows(where) == lance.dataset(uri).count_rows(where), where


def test_rebuild_statistics_only_what_is_missing(
    spark: SparkSession, tmp_path: Path, main_session: None, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = _make(tmp_path, rows=120)
    jobs.rebuild_statistics(spark, uri, columns=["id"])
    lance.write_dataset(_table(60, start=120), uri, mode="append")  # pylance adds fragment 2
    result = jobs.rebuild_statistics(spark, uri, columns=["id", "name"])
    assert result.fragment_ids == (0, 1, 2)  # name is missing everywhere, id only in fragment 2
    assert jobs.rebuild_statistics(spark, uri).fragment_ids == (0, 1, 2)  # day and score
    assert jobs.rebuild_statistics(spark, uri).manifest is None  # nothing left: no commit
    version = lance.dataset(uri).version
    printed = rebuild_main(["--uri", uri, "--force", "--columns", "id"])
    assert printed == {"version": version + 1, "fragment_ids": [0, 1, 2]}
    assert json.loads(capsys.readouterr().out)["version"] == version + 1
    assert lance.dataset(uri).count_rows() == 180


# ----------------------------------------------------------------------------- profile_encodings


def _two_kinds(spark: SparkSession, rows: int = 2000) -> Any:
    """Two partitions: one with 10 distinct long strings, one with ``rows / 2`` (each twice). Alone,
    the first is a dictionary and the second not; together the column is clearly a dictionary."""
    frame = spark.range(0, 2 * rows, numPartitions=2)
    key = F.when(F.col("id") < rows, F.col("id") % 10).otherwise(F.col("id") % (rows // 2))
    return frame.select("id", F.concat(F.lit("x" * 40 + "-"), F.lpad(key.cast("string"), 5, "0")).alias("s"))


def _page_kinds(uri: str, column: int) -> list[list[str]]:
    """Per data file (in no particular order), the encoding kind of every page of ``column``."""
    return [
        ["dictionary" if "dictionary" in page.encoding else "plain" for page in file.pages]
        for file in (
            LanceFileReader(path).metadata().columns[column]
            for path in sorted(glob.glob(f"{uri}/data/*.lance"))
        )
    ]


def test_profile_encodings_of_a_dataset_equals_the_library(
    spark: SparkSession, tmp_path: Path, main_session: None
) -> None:
    uri = _make(tmp_path, rows=600, per_file=100)
    expected = profile(lance_ops.dataset(uri))
    plan = jobs.profile_encodings(spark, uri)
    assert plan == expected
    ds = lance.dataset(uri)
    assert ds.read_transaction(ds.version).operation.__class__.__name__ == "UpdateConfig"
    assert EncodingPlan.from_json(ds.config()[PLAN_KEY]) == expected
    assert ds.count_rows() == 600
    printed = profile_main(["--uri", uri, "--columns", "name", "--no-store"])
    assert printed == json.loads(EncodingPlan({"name": expected.columns["name"]}).to_json())
    assert lance.dataset(uri).version == ds.version


def test_stored_plan_is_honoured_by_every_executor(spark: SparkSession, tmp_path: Path) -> None:
    frame = _two_kinds(spark)
    auto = str(tmp_path / "auto.lance")
    jobs.save(frame, auto)
    assert sorted(_page_kinds(auto, 1)) == [["dictionary"], ["plain"]]  # each partition decided alone

    uri = str(tmp_path / "planned.lance")
    jobs.save(frame.limit(0), uri)  # an empty dataset with the frame's schema
    plan = jobs.profile_encodings(spark, frame, target=uri)
    assert plan.columns["s"].dictionary and not plan.columns["id"].dictionary
    assert EncodingPlan.from_config(lance_ops.dataset(uri).manifest.config) == plan
    jobs.save(frame, uri)  # append: two partitions, two files
    frame.filter("id < 2000").write.format("lance").mode("overwrite").option(
        "replace_where", "id < 2000"
    ).save(uri)
    assert _page_kinds(uri, 1) == [["dictionary"]] * 3
    assert lance.dataset(uri).to_table().sort_by("id") == lance.dataset(auto).to_table().sort_by("id")
    # A streaming micro-batch of data that alone would be plain (like the second partition).
    source = tmp_path / "in"
    source.mkdir()
    lines = (json.dumps({"id": 4000 + i, "s": f"{'x' * 40}-{i % 1000:05d}"}) for i in range(2000))
    (source / "a.json").write_text("\n".join(lines) + "\n")
    stream = spark.readStream.schema("id LONG, s STRING").json(str(source))
    stream.writeStream.format("lance").option("checkpointLocation", str(tmp_path / "ckpt")).trigger(
        availableNow=True
    ).start(uri).awaitTermination()
    assert lance.dataset(uri).count_rows() == 6000
    assert _page_kinds(uri, 1) == [["dictionary"]] * 4

    created = str(tmp_path / "created.lance")
    jobs.save(frame, created, encoding_plan=plan.to_json())
    assert _page_kinds(created, 1) == [["dictionary"]] * 2
    assert EncodingPlan.from_json(lance.dataset(created).config()[PLAN_KEY]) == plan
    with pytest.raises(DatasetNotFoundError):
        jobs.profile_encodings(spark, frame, target=str(tmp_path / "none.lance"))


# ------------------------------------------------------------------------------- cleanup and tags


def test_tags_and_cleanup_jobs(spark: SparkSession, tmp_path: Path, main_session: None) -> None:
    uri = _make(tmp_path, rows=60, per_file=30)
    lance_ops.dataset(uri).delete("id < 10")
    lance_ops.dataset(uri).delete("id < 20")
    jobs.tags.create_tag(spark, uri, "first", 1)
    jobs.tags.update_tag(spark, uri, "first", 2)
    assert jobs.tags.main(["--uri", uri, "create", "base", "first"])["base"]["version"] == 2
    assert {n: t["version"] for n, t in jobs.tags.list_tags(spark, uri).items()} == {"base": 2, "first": 2}
    jobs.tags.delete_tag(spark, uri, "first")
    with pytest.raises(TagNotFoundError):
        jobs.tags.delete_tag(spark, uri, "first")
    assert list(lance.dataset(uri).tags.list()) == ["base"]

    with pytest.raises(CleanupError, match="tag"):
        jobs.cleanup(spark, uri, ZERO, dry_run=True)  # version 2 is old but tagged
    dry = jobs.cleanup(spark, uri, ZERO, error_if_tagged_old_versions=False, dry_run=True)
    assert dry.dry_run and dry.old_versions == 1 and lance.dataset(uri).version == 3
    assert [v["version"] for v in lance.dataset(uri).versions()] == [1, 2, 3]
    printed = cleanup_main(["--uri", uri, "--older-than", "0s", "--allow-tagged"])
    assert sorted(printed["paths"]) == sorted(dry.paths)
    assert [v["version"] for v in lance.dataset(uri).versions()] == [2, 3]
    assert lance.dataset(uri, version="base").count_rows() == 50
    assert lance.dataset(uri).count_rows() == 40


# ----------------------------------------------------------------------- failed tasks and orphans


def _data_files(uri: str) -> set[str]:
    return {Path(p).name for p in glob.glob(f"{uri}/data/*.lance")}


def _referenced(uri: str) -> set[str]:
    return {Path(f.path).name for fr in lance.dataset(uri).get_fragments() for f in fr.data_files()}


def _check_orphans_reclaimed(spark: SparkSession, uri: str, version: int) -> None:
    """Nothing was committed; the failed job's files are orphans a cleanup dry run lists and a
    cleanup removes, leaving a dataset pylance reads."""
    ds = lance.dataset(uri)
    assert ds.version == version
    orphans = _data_files(uri) - _referenced(uri)
    assert orphans  # the tasks that finished before the failure wrote files
    dry = jobs.cleanup(spark, uri, ZERO, delete_unverified=True, dry_run=True)
    assert {f"data/{name}" for name in orphans} <= set(dry.paths)
    done = jobs.cleanup(spark, uri, ZERO, delete_unverified=True)
    assert set(done.paths) == set(dry.paths)
    assert _data_files(uri) == _referenced(uri)
    assert lance.dataset(uri).to_table().num_rows == ds.count_rows()


def test_failed_write_task_leaves_orphans_cleanup_removes(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "fail.lance")
    jobs.save(spark.range(0, 10, numPartitions=1), uri)
    # Three partitions on two task slots: the third starts only after one of the first two has
    # written its file, then fails.
    failing = spark.range(10, 40, numPartitions=3).select(
        F.when(F.spark_partition_id() == 2, F.raise_error(F.lit("partition boom")))
        .otherwise(F.col("id"))
        .alias("id")
    )
    with pytest.raises(Exception, match="partition boom"):
        jobs.save(failing, uri)
    _check_orphans_reclaimed(spark, uri, 1)
    assert lance.dataset(uri).to_table().column("id").to_pylist() == list(range(10))


def test_failed_add_columns_task_leaves_orphans_cleanup_removes(spark: SparkSession, tmp_path: Path) -> None:
    uri = _make(tmp_path)  # five fragments: the last task starts after three have finished

    def fails_on_last_fragment(batch: pa.RecordBatch) -> pa.RecordBatch:
        if pa.compute.max(batch.column(0)).as_py() >= 240:
            raise RuntimeError("udf boom")
        return pa.record_batch([batch.column(0)], names=["copy"])

    with pytest.raises(Exception, match="udf boom"):
        jobs.add_columns(spark, uri, fails_on_last_fragment, read_columns=["id"])
    _check_orphans_reclaimed(spark, uri, 1)
    assert lance.dataset(uri).to_table() == _table(300)


# ------------------------------------------------------------------ statistics pruning of reads


def _planned(uri: str, **options: str) -> list[tuple[int | None, int, int]]:
    source = LanceDataSource({"path": uri, **options})
    reader = source.reader(source.schema())
    return [(p.fragment_id, p.start, p.stop) for p in reader.partitions()]  # type: ignore[attr-defined]


def test_statistics_prune_partitions_at_planning(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "pruned.lance")
    big = 4 * 8192 + 100  # one fragment of five statistics zones, then three small fragments
    # without page statistics in the data files, so that a statistics file is what prunes
    lance_ops.write_dataset(_table(big), uri, max_rows_per_file=big, page_statistics=False)
    lance_ops.write_dataset(
        _table(300, start=big), uri, mode="append", max_rows_per_file=100, page_statistics=False
    )
    split = {"split_rows": "8192"}
    everything = _planned(uri, **split)
    assert len(everything) == 5 + 3
    selective = {**split, "filter": f"id >= {3 * 8192 + 5} AND id < {big + 150}"}
    assert _planned(uri, **selective) == everything  # no statistics yet: nothing is pruned

    lance_ops.dataset(uri).stats.rebuild()
    assert _planned(uri, **selective) == [
        (0, 3 * 8192, 4 * 8192),
        (0, 4 * 8192, big),
        (1, 0, 100),
        (2, 0, 100),
    ]
    assert _planned(uri, **split, filter="name = 'n5x'") == everything  # within every zone's bounds: kept
    assert _planned(uri, **split, filter="id < 0") == [(None, 0, 0)]
    assert _planned(uri, **split, filter="score IS NULL AND day = 7") == [(None, 0, 0)]

    for where in (selective["filter"], "id < 0", "id % 1000 = 3 OR day = 1", "name = 'n3' AND id > 20000"):
        read = spark.read.format("lance").options(**split).option("filter", where).load(uri)
        got = sorted(row.id for row in read.select("id").collect())
        assert got == sorted(lance.dataset(uri).to_table(filter=where).column("id").to_pylist()), where

    # the page statistics our data files carry prune too, with no rebuild
    paged = str(tmp_path / "paged.lance")
    lance_ops.write_dataset(_table(big), paged, max_rows_per_file=big)
    lance_ops.write_dataset(_table(300, start=big), paged, mode="append", max_rows_per_file=100)
    planned = _planned(paged, **selective)
    assert (1, 0, 100) in planned and (3, 0, 100) not in planned and len(planned) < len(everything)
    read = spark.read.format("lance").options(**selective).load(paged)
    expected = lance.dataset(paged).to_table(filter=selective["filter"]).column("id").to_pylist()
    assert sorted(row.id for row in read.select("id").collect()) == sorted(expected)


# ---------------------------------------------------------------------------- nothing to do


def test_every_job_is_a_clean_no_op_when_there_is_nothing_to_do(
    spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A dataset of one compact fragment with statistics and a stored plan, cleaned: each job, run
    twice (and compaction with ``commit_every``), succeeds, says so in the log and commits nothing."""
    uri = str(tmp_path / "quiet.lance")
    lance_ops.write_dataset(_table(200), uri)
    jobs.profile_encodings(spark, uri)
    jobs.rebuild_statistics(spark, uri)
    jobs.cleanup(spark, uri, dt.timedelta(0))
    settled = lance.dataset(uri).version
    caplog.set_level("INFO", logger="jobs")
    for _ in range(2):
        assert jobs.compact(spark, uri) == jobs.compact(spark, uri, commit_every=1)
        assert jobs.compact(spark, uri).fragments_added == 0
        assert jobs.profile_encodings(spark, uri) == EncodingPlan.from_config(
            lance_ops.dataset(uri).manifest.config
        )
        assert jobs.rebuild_statistics(spark, uri).manifest is None
        assert jobs.cleanup(spark, uri, dt.timedelta(0)).paths == ()
        assert lance.dataset(uri).version == settled
    assert "nothing to compact" in caplog.text and "encoding plan" in caplog.text
    lance.dataset(uri).to_table()
