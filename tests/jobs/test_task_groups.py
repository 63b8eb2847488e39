"""Per-fragment jobs run their fragments in groups, a Spark task per slot of the session, each
Python worker opening the pinned version once per job (L19: a task's fixed cost paid per group,
not per fragment). Local[2] session."""

from __future__ import annotations

import os
from pathlib import Path

import lance
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql import SparkSession

import jobs
from jobs.common import PINNED_KEPT, groups, on_executors, pinned_version, task_slots
from lance_ops.progress import ProgressEvent, Tracker

pytestmark = pytest.mark.spark  # one worker: the session fixture


@given(st.integers(0, 1025), st.integers(1, 70))
def test_groups_are_contiguous_balanced_and_cover_every_item(items: int, count: int) -> None:
    parts = groups(list(range(items)), count)
    assert [x for part in parts for x in part] == list(range(items))
    assert len(parts) == max(1, min(count, items))
    sizes = [len(p) for p in parts]
    assert sizes == sorted(sizes, reverse=True) and max(sizes) - min(sizes) <= 1


def _pid_and_double(item: int) -> tuple[int, int]:
    return os.getpid(), item * 2


def test_grouped_tasks_keep_item_order_and_count_progress_per_item(spark: SparkSession) -> None:
    items = list(range(-5, 6))
    plain = on_executors(spark, items, _pid_and_double)
    assert [r for _, r in plain] == [x * 2 for x in items]
    events: list[ProgressEvent] = []
    tracker = Tracker.start(events.append, "test", len(items), "tasks")
    grouped = on_executors(spark, items, _pid_and_double, tracker, tasks=3)
    assert [r for _, r in grouped] == [x * 2 for x in items]
    # Each of the three groups ran in one task, so on one worker.
    for part in groups(list(range(len(items))), 3):
        assert len({grouped[n][0] for n in part}) == 1
    done = [e.done for e in events]
    assert done[0] == 0 and done[-1] == len(items) and done == sorted(done)
    assert events[-1].message == f"{len(items)} of {len(items)} tasks finished"
    assert tracker.done == len(items)


@pytest.fixture
def parallelism_four(spark: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    """``spark.default.parallelism`` read as 4, what :mod:`jobs.session` sets (the test session
    sets 2, which would hide a job sized by it)."""
    monkeypatch.setattr(type(spark.sparkContext), "defaultParallelism", property(lambda _: 4))
    assert spark.sparkContext.defaultParallelism == 4


@pytest.mark.usefixtures("parallelism_four")
def test_task_slots_are_the_executors_slots_not_the_default_parallelism(spark: SparkSession) -> None:
    """local[2]: two slots, one wave, though ``spark.default.parallelism`` is 4 (two waves)."""
    assert spark.sparkContext.master == "local[2]"
    assert task_slots(spark) == 2


@pytest.mark.usefixtures("parallelism_four")
def test_task_slots_fall_back_to_the_default_parallelism(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When Spark counts no slot (no executor registered yet) or its internal API is missing."""

    class NoSlots:
        def __getattr__(self, name: str) -> object:
            raise AttributeError(name)

    monkeypatch.setattr(spark.sparkContext, "_jsc", NoSlots())
    assert task_slots(spark) == 4


def _tasks_of_group(spark: SparkSession, group: str) -> list[int]:
    status = spark.sparkContext.statusTracker()
    counts = []
    for job in sorted(status.getJobIdsForGroup(group)):
        info = status.getJobInfo(job)
        for stage in info.stageIds if info is not None else ():
            stage_info = status.getStageInfo(stage)
            counts.append(stage_info.numTasks if stage_info is not None else -1)
    return counts


@pytest.mark.usefixtures("parallelism_four")
def test_delete_and_add_columns_run_one_task_per_slot_in_one_wave(
    spark: SparkSession, tmp_path: Path
) -> None:
    """11 fragments under local[2]: each job is one Spark job of exactly two tasks (was four), and
    its result is pylance's."""
    ours, theirs = str(tmp_path / "ours.lance"), str(tmp_path / "theirs.lance")
    for uri in (ours, theirs):
        _write(uri, 1001, 100)
    context = spark.sparkContext
    try:
        context.setJobGroup("slots-delete", "delete")
        jobs.delete(spark, ours, "id % 4 = 1")
        context.setJobGroup("slots-add", "add_columns")
        jobs.add_columns(spark, ours, {"twice": "id * 2"})
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    assert _tasks_of_group(spark, "slots-delete") == [2]
    assert _tasks_of_group(spark, "slots-add") == [2]
    lance.dataset(theirs).delete("id % 4 = 1")
    lance.dataset(theirs).add_columns({"twice": "id * 2"})
    assert lance.dataset(ours).to_table().equals(lance.dataset(theirs).to_table())


def _write(uri: str, rows: int, per_file: int, offset: int = 0) -> None:
    table = pa.table({"id": pa.array(range(offset, offset + rows), pa.int64())})
    lance.write_dataset(table, uri, max_rows_per_file=per_file, mode="overwrite")


def test_a_pinned_version_is_opened_once_per_job_and_afresh_by_the_next(tmp_path: Path) -> None:
    uri = str(tmp_path / "p.lance")
    _write(uri, 30, 10)
    first = pinned_version("job-a", uri, 1, {})
    assert pinned_version("job-a", uri, 1, {}) is first
    assert first.manifest.version == 1 and len(first.manifest.fragments) == 3
    # The dataset removed and written again at the same URI: version 1 again, other rows. The next
    # job reads the new files, not what the earlier job kept.
    import shutil

    shutil.rmtree(uri)
    _write(uri, 20, 5, offset=100)
    second = pinned_version("job-b", uri, 1, {})
    assert second is not first and len(second.manifest.fragments) == 4
    # Bounded: the oldest kept version is dropped.
    for n in range(PINNED_KEPT):
        pinned_version(f"job-{n}", uri, 1, {})
    assert pinned_version("job-a", uri, 1, {}) is not first


def test_delete_and_add_columns_over_many_fragments_in_grouped_tasks(
    spark: SparkSession, tmp_path: Path
) -> None:
    """More fragments than slots (11 fragments, some of one row, over task_slots tasks): every
    fragment is handled once, the results match pylance's on a copy, and pylance reads ours."""
    ours, theirs = str(tmp_path / "ours.lance"), str(tmp_path / "theirs.lance")
    for uri in (ours, theirs):
        _write(uri, 1001, 100)  # 10 fragments of 100 and one of 1 row
    assert len(lance.dataset(ours).get_fragments()) == 11 > task_slots(spark)
    events: list[ProgressEvent] = []
    result = jobs.delete(spark, ours, "id % 3 = 0 OR id = 1000", progress=events.append)
    lance.dataset(theirs).delete("id % 3 = 0 OR id = 1000")
    assert result.num_deleted_rows == len([i for i in range(1001) if i % 3 == 0 or i == 1000])
    assert events[-1].done == events[-1].total == 11
    jobs.add_columns(spark, ours, {"twice": "id * 2"})
    lance.dataset(theirs).add_columns({"twice": "id * 2"})
    mine, pylance_rows = lance.dataset(ours), lance.dataset(theirs)
    assert mine.to_table().sort_by("id").equals(pylance_rows.to_table().sort_by("id"))
    assert [len(f.data_files()) for f in mine.get_fragments()] == [2] * 10  # the 1-row one deleted
    assert mine.count_rows() == pylance_rows.count_rows()


def test_sql_columns_in_large_batches_write_the_bytes_of_the_in_process_default(
    spark: SparkSession, tmp_path: Path
) -> None:
    """SQL columns are evaluated in batches of SQL_TRANSFORM_BATCH_SIZE rows by default (the job
    and the library): the data files are byte for byte the ones 1,024-row batches give (deleted
    rows too)."""
    import glob

    import lance_ops
    from lance_ops.ops.columns import SQL_TRANSFORM_BATCH_SIZE as SQL_BATCH_ROWS

    ours, in_process = str(tmp_path / "job.lance"), str(tmp_path / "lib.lance")
    rows = SQL_BATCH_ROWS + 1025
    for uri in (ours, in_process):
        _write(uri, rows, rows // 2 + 1)
        lance.dataset(uri).delete("id % 1000 = 7 OR (id > 3000 AND id < 5000)")
    jobs.add_columns(spark, ours, {"y": "id * 3 - 1", "z": "CAST(id AS DOUBLE) / 4"})
    lance_ops.dataset(in_process).add_columns(
        {"y": "id * 3 - 1", "z": "CAST(id AS DOUBLE) / 4"}, batch_size=1024
    )

    def new_files(uri: str) -> list[bytes]:
        names = [f.data_files()[-1].path for f in lance.dataset(uri).get_fragments()]
        return [Path(glob.glob(f"{uri}/data/{name}")[0]).read_bytes() for name in names]

    assert new_files(ours) == new_files(in_process) and len(new_files(ours)) == 2
    assert lance.dataset(ours).to_table().equals(lance.dataset(in_process).to_table())
