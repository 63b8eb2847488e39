"""``jobs.append_files``: Parquet / Arrow IPC files appended by Spark tasks reading them with pyarrow,
checked against pylance's in-process ``write_dataset(pyarrow.dataset.dataset(dir))`` of the same
files, and read and continued by pylance."""

from __future__ import annotations

import json
import os
from pathlib import Path

import lance
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql import SparkSession

import jobs
from jobs.append_files import FileSplit, plan_splits
from jobs.append_files import main as append_files_main
from lance_ops.errors import DatasetAlreadyExistsError, InvalidArgumentError, WriteSchemaError
from lance_ops.progress import ProgressEvent

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("cat", pa.string()),
        pa.field("maybe", pa.int64()),
        pa.field("tags", pa.list_(pa.int32())),
    ]
)


def _table(start: int, rows: int) -> pa.Table:
    ids = list(range(start, start + rows))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "cat": pa.array([f"c{i % 5}" for i in ids], pa.string()),
            "maybe": pa.array([None if i % 3 == 0 else i * 7 for i in ids], pa.int64()),
            "tags": pa.array([[i % 4] * (i % 3) for i in ids], pa.list_(pa.int32())),
        },
        schema=SCHEMA,
    )


def _files(directory: Path, sizes: list[int], start: int = 0, row_group_size: int = 70) -> Path:
    """Parquet files ``part-00.parquet``... of ``sizes`` rows (ids counting on from ``start``)."""
    directory.mkdir(parents=True, exist_ok=True)
    for n, rows in enumerate(sizes):
        pq.write_table(
            _table(start, rows), directory / f"part-{n:02d}.parquet", row_group_size=row_group_size
        )
        start += rows
    return directory


def _operation(ds: lance.LanceDataset) -> str:
    transaction = ds.read_transaction(ds.version)
    assert transaction is not None
    return type(transaction.operation).__name__


def _data_files(uri: str) -> set[str]:
    data = Path(uri) / "data"
    return set(os.listdir(data)) if data.exists() else set()


pytestmark = [pytest.mark.spark, pytest.mark.interop]


# --- planning (driver only) ---------------------------------------------------------------------


def _piece(path: str, group: int | None, rows: int, size: int) -> FileSplit:
    return FileSplit(path, None if group is None else (group,), rows, size)


def test_plan_splits_balances_bytes_and_joins_row_groups() -> None:
    pieces = [_piece("a", g, 10, 100) for g in range(4)] + [_piece("b", None, 10, 400)]
    assert plan_splits(pieces, 2) == [
        [FileSplit("a", (0, 1, 2, 3), 40, 400)],
        [FileSplit("b", None, 10, 400)],
    ]
    # one big piece and many small ones: the big one alone, the rest together
    pieces = [_piece("big", 0, 5, 1000), *(_piece("s", g, 1, 10) for g in range(10))]
    assert [len(g) for g in plan_splits(pieces, 2)] == [1, 1]
    # pieces without rows are left out, no group is empty
    assert plan_splits([_piece("e", 0, 0, 0), _piece("e", 1, 0, 0)], 4) == []
    assert plan_splits([_piece("a", 0, 1, 1)], 8) == [[FileSplit("a", (0,), 1, 1)]]


@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 5), st.integers(0, 10_000)), max_size=40),
    st.integers(1, 9),
)
def test_plan_splits_keeps_order_and_every_row(spec: list[tuple[int, int, int]], tasks: int) -> None:
    pieces = [_piece(f"f{file}", index, rows, size) for index, (file, rows, size) in enumerate(spec)]
    planned = plan_splits(pieces, tasks)
    assert len(planned) <= tasks and all(planned)
    flat = [(s.path, g) for group in planned for s in group for g in s.row_groups or ()]
    assert flat == [(p.path, p.row_groups[0]) for p in pieces if p.num_rows]  # type: ignore[index]
    assert sum(s.num_rows for group in planned for s in group) == sum(p.num_rows for p in pieces)


# --- the job ------------------------------------------------------------------------------------


def test_append_files_equals_in_process_write(spark: SparkSession, tmp_path: Path) -> None:
    """Create, then append on yesterday's dataset: the rows, their order and the schema (with its
    nullability) are pylance's in-process write of the same files; pylance continues the history."""
    source = _files(tmp_path / "day1", [300, 0, 1, 1023, 1025, 64])
    uri, reference = str(tmp_path / "jobs.lance"), str(tmp_path / "pylance.lance")
    result = jobs.append_files(spark, uri, str(source), mode="create", tasks=3, max_rows_per_file=500)
    lance.write_dataset(pads.dataset(str(source)), reference)
    ours, theirs = lance.dataset(uri), lance.dataset(reference)
    assert (result.version, result.num_rows, result.num_files, result.num_tasks) == (1, 2413, 6, 3)
    assert result.num_fragments == len(ours.get_fragments()) >= 3
    assert max(f.count_rows() for f in ours.get_fragments()) <= 500
    assert ours.schema == theirs.schema and not ours.schema.field("id").nullable
    assert ours.to_table().equals(theirs.to_table())

    # day 2, on the dataset day 1 left behind: one Append, rows after day 1's in file order
    day2 = _files(tmp_path / "day2", [10, 500], start=10_000)
    again = jobs.append_files(spark, uri, [str(p) for p in sorted(day2.iterdir())])
    lance.write_dataset(pads.dataset(str(day2)), reference, mode="append")
    ours, theirs = lance.dataset(uri), lance.dataset(reference)
    assert again.version == ours.version == 2
    assert _operation(ours) == "Append"
    assert ours.to_table().equals(theirs.to_table())

    # pylance continues the history (rows as read from Parquet: its list child is named "element");
    # we read its commit
    lance.write_dataset(pq.read_table(day2 / "part-00.parquet").slice(0, 5), uri, mode="append")
    import lance_ops

    assert lance_ops.dataset(uri).to_table().equals(lance.dataset(uri).to_table())
    assert lance_ops.dataset(uri).count_rows() == 2413 + 510 + 5


def test_append_files_overwrite_and_arrow_ipc(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "ipc.lance")
    _files(tmp_path / "old", [50]).rename(tmp_path / "old_done")
    jobs.append_files(spark, uri, str(tmp_path / "old_done"))  # an append creates
    ipc = tmp_path / "ipc"
    ipc.mkdir()
    feather.write_feather(_table(0, 700), ipc / "a.arrow", compression="uncompressed", chunksize=100)
    feather.write_feather(_table(700, 0), ipc / "b.arrow")
    feather.write_feather(_table(700, 33), ipc / "c.arrow", compression="lz4")
    result = jobs.append_files(spark, uri, str(ipc), format="arrow", mode="overwrite")
    ds = lance.dataset(uri)
    assert result.version == ds.version == 2
    assert _operation(ds) == "Overwrite"
    assert ds.to_table().equals(pads.dataset(str(ipc), format="ipc").to_table())
    with pytest.raises(DatasetAlreadyExistsError):
        jobs.append_files(spark, uri, str(ipc), format="arrow", mode="create")
    assert lance.dataset(uri).version == 2


def test_append_files_other_writer_commits_meanwhile(spark: SparkSession, tmp_path: Path) -> None:
    """pylance appends after the job planned, before its tasks run: both appends are kept, the
    job's after pylance's."""
    uri = str(tmp_path / "race.lance")
    lance.write_dataset(_table(0, 20), uri)
    source = _files(tmp_path / "src", [100, 100])

    def other_writer(event: ProgressEvent) -> None:
        if event.done == 0:
            lance.write_dataset(_table(1000, 3), uri, mode="append")

    result = jobs.append_files(spark, uri, str(source), progress=other_writer)
    ds = lance.dataset(uri)
    assert result.version == ds.version == 3
    assert ds.count_rows() == 223
    ids = ds.to_table(columns=["id"]).column("id").to_pylist()
    assert ids[:23] == [*range(20), 1000, 1001, 1002]
    assert ids[23:] == list(range(200))


def test_append_files_refuses_bad_schemas_before_writing(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "strict.lance")
    lance.write_dataset(_table(0, 10), uri)
    before = _data_files(uri)
    bad = tmp_path / "bad"
    bad.mkdir()
    pq.write_table(pa.table({"id": pa.array([1], pa.int64()), "unknown": pa.array([1.5])}), bad / "x.parquet")
    with pytest.raises(WriteSchemaError, match="unknown"):
        jobs.append_files(spark, uri, str(bad))
    # files that disagree among themselves: refused on the driver, naming the file
    mixed = _files(tmp_path / "mixed", [5])
    pq.write_table(pa.table({"id": pa.array(["x"]), "cat": pa.array(["c"])}), mixed / "part-99.parquet")
    with pytest.raises(WriteSchemaError, match="part-99"):
        jobs.append_files(spark, uri, str(mixed))
    with pytest.raises(InvalidArgumentError):
        jobs.append_files(spark, uri, str(mixed), format="csv")
    with pytest.raises(InvalidArgumentError):
        jobs.append_files(spark, uri, str(mixed), mode="merge")
    assert lance.dataset(uri).version == 1 and _data_files(uri) == before


def test_append_files_task_failure_commits_nothing(spark: SparkSession, tmp_path: Path) -> None:
    """A source file removed after planning fails the task reading it after it wrote fragments of
    the file before: nothing is committed, and those fragments' files are orphans cleanup removes.
    (One task, so the job has failed only once it has ended: no write can come after the check.)"""
    import datetime as dt

    import lance_ops

    uri = str(tmp_path / "fail.lance")
    lance.write_dataset(_table(0, 10), uri)
    source = _files(tmp_path / "src", [200, 200])

    def remove_second(event: ProgressEvent) -> None:
        if event.done == 0:
            (source / "part-01.parquet").unlink()

    with pytest.raises(Exception, match="part-01"):
        jobs.append_files(spark, uri, str(source), tasks=1, max_rows_per_file=100, progress=remove_second)
    ds = lance.dataset(uri)
    assert (ds.version, ds.count_rows()) == (1, 10)
    assert len(_data_files(uri)) == 1 + 2  # pylance's file and the task's two of part-00
    lance_ops.dataset(uri).cleanup_old_versions(older_than=dt.timedelta(0), delete_unverified=True)
    assert len(_data_files(uri)) == 1
    assert lance.dataset(uri).to_table().equals(_table(0, 10))


def test_append_files_of_no_rows(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "empty.lance")
    with pytest.raises(InvalidArgumentError, match="no source files"):
        jobs.append_files(spark, uri, [])
    empty = _files(tmp_path / "zero", [0])
    created = jobs.append_files(spark, uri, str(empty), mode="create")  # an empty dataset with the schema
    ds = lance.dataset(uri)
    assert (created.version, created.num_rows, ds.count_rows()) == (1, 0, 0)
    assert ds.schema == SCHEMA
    assert jobs.append_files(spark, uri, []).version is None
    assert jobs.append_files(spark, uri, str(empty)).version is None
    (tmp_path / "none").mkdir()
    assert jobs.append_files(spark, uri, str(tmp_path / "none")).num_files == 0
    assert lance.dataset(uri).version == 1


def test_append_files_replace_where_and_fill_missing(spark: SparkSession, tmp_path: Path) -> None:
    """A day's files replacing the rows a predicate selects (one Update; a file row outside it
    fails the job, nothing committed), and a column the files lack filled with nulls."""
    uri = str(tmp_path / "replace.lance")
    lance.write_dataset(_table(0, 50), uri)
    corrected = tmp_path / "corrected"
    corrected.mkdir()
    rows = pa.table({"id": pa.array([1000, 1001], pa.int64()), "cat": ["c1", "c1"], "maybe": [7, None]})
    pq.write_table(rows, corrected / "c1.parquet")
    for _ in range(2):  # run twice: the same rows again, one Update each
        jobs.append_files(
            spark, uri, str(corrected), mode="overwrite", replace_where="cat = 'c1'", fill_missing="null"
        )
        ds = lance.dataset(uri)
        assert _operation(ds) == "Update"
        replaced = ds.to_table(filter="cat = 'c1'")
        assert replaced.column("id").to_pylist() == [1000, 1001]
        assert replaced.column("tags").to_pylist() == [None, None]
        assert ds.count_rows() == 50 - 10 + 2
    version = lance.dataset(uri).version
    with pytest.raises(Exception, match="do not match replace_where"):
        jobs.append_files(spark, uri, str(corrected), mode="overwrite", replace_where="cat = 'c2'")
    with pytest.raises(InvalidArgumentError, match="overwrite"):
        jobs.append_files(spark, uri, str(corrected), replace_where="cat = 'c1'")
    assert lance.dataset(uri).version == version


def test_append_files_main(
    spark: SparkSession, tmp_path: Path, main_session: None, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = str(tmp_path / "main.lance")
    one, two = _files(tmp_path / "a", [30]), _files(tmp_path / "b", [12], start=30)
    result = append_files_main(["--uri", uri, "--source", str(one), "--source", str(two), "--mode", "create"])
    assert result == {"version": 1, "rows": 42, "fragments": 2, "files": 2, "tasks": 2}
    assert json.loads(capsys.readouterr().out) == result
    assert lance.dataset(uri).to_table().column("id").to_pylist() == list(range(42))
