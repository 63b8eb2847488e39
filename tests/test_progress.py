"""The progress hook (:mod:`lance_ops.progress`): every long operation reports sane events, and
pylance's ``FragmentWriteProgress`` is called as pylance calls it (compared on the same writes)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lance_ops
from lance_ops.errors import LanceOpsError
from lance_ops.fragment import write_fragments
from lance_ops.progress import (
    FileSystemFragmentWriteProgress,
    FragmentWriteProgress,
    NoopFragmentWriteProgress,
    ProgressEvent,
    as_callback,
)

ZERO = dt.timedelta(0)


def table(rows: int, start: int = 0) -> pa.Table:
    ids = pa.array(range(start, start + rows), pa.int64())
    return pa.table({"id": ids, "name": pa.array([f"n{i}" for i in range(start, start + rows)])})


def assert_sane(events: list[ProgressEvent], operation: str, unit: str, total: int | None) -> None:
    """A start at 0, non-decreasing ``done``, constant total and unit, and the end at ``total``."""
    assert events, "no progress events"
    assert {(e.operation, e.unit, e.total) for e in events} == {(operation, unit, total)}
    assert events[0].done == 0
    dones = [e.done for e in events]
    assert dones == sorted(dones)
    if total is not None:
        assert dones[-1] == total
        assert all(0 <= d <= total for d in dones)


# --- write ---------------------------------------------------------------------------------------


def test_write_events_per_data_file(tmp_path: Path) -> None:
    events: list[ProgressEvent] = []
    ds = lance_ops.write_dataset(
        table(2500), tmp_path / "a.lance", max_rows_per_file=1000, progress=events.append
    )
    assert_sane(events, "write", "rows", 2500)
    opened = [e for e in events if e.fragment is not None and not e.fragment.physical_rows]
    closed = [e for e in events if e.fragment is not None and e.fragment.physical_rows]
    assert len(opened) == len(closed) == 3
    # as pylance's begin: the fragment names the data file about to be written
    assert [e.fragment.files[0].path for e in opened] == [e.fragment.files[0].path for e in closed]  # type: ignore[union-attr]
    assert [e.fragment.physical_rows for e in closed] == [1000, 1000, 500]  # type: ignore[union-attr]
    assert [e.done for e in closed] == [1000, 2000, 2500]
    # the files reported are the files committed
    committed = [d.path for f in ds.get_fragments() for d in f.data_files()]
    assert [e.fragment.files[0].path for e in closed] == committed  # type: ignore[union-attr]
    assert all(e.message for e in events[1:])
    assert 0.0 < closed[0].fraction < 1.0 and closed[-1].fraction == 1.0  # type: ignore[operator]


def test_streamed_write_has_no_total(tmp_path: Path) -> None:
    events: list[ProgressEvent] = []
    data = table(700)
    reader = pa.RecordBatchReader.from_batches(data.schema, data.to_batches(max_chunksize=100))
    lance_ops.write_dataset(reader, tmp_path / "a.lance", max_rows_per_file=300, progress=events.append)
    assert_sane(events, "write", "rows", None)
    assert events[-1].done == 700 and events[-1].fraction is None


def test_append_and_write_fragments_report(tmp_path: Path) -> None:
    uri = tmp_path / "a.lance"
    lance_ops.write_dataset(table(10), uri)
    events: list[ProgressEvent] = []
    lance_ops.write_dataset(table(30, 10), uri, mode="append", max_rows_per_file=20, progress=events.append)
    assert_sane(events, "write", "rows", 30)
    events.clear()
    fragments = write_fragments(table(5), uri, max_rows_per_file=2, progress=events.append)
    assert_sane(events, "write", "rows", 5)
    assert [e.fragment for e in events if e.fragment is not None and e.fragment.physical_rows] == fragments


def test_a_failing_callback_aborts_the_write(tmp_path: Path) -> None:
    uri = tmp_path / "a.lance"

    def explode(event: ProgressEvent) -> None:
        if event.done:
            raise RuntimeError("stop")

    with pytest.raises(RuntimeError, match="stop"):
        lance_ops.write_dataset(table(50), uri, max_rows_per_file=20, progress=explode)
    assert not (uri / "_versions").exists()


def test_progress_must_be_callable_or_a_tracker() -> None:
    with pytest.raises(TypeError, match="progress must be"):
        as_callback(42)
    assert as_callback(None) is None


# --- pylance's FragmentWriteProgress -------------------------------------------------------------


class Recorder(FragmentWriteProgress):
    """Records ``(call, fragment JSON)``; the class body is the same for ours and pylance's base."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def begin(self, fragment: Any, **kwargs: Any) -> None:
        self.calls.append(("begin", fragment.to_json()))

    def complete(self, fragment: Any, **kwargs: Any) -> None:
        self.calls.append(("complete", fragment.to_json()))


def comparable(calls: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, Any, Any, Any]]:
    """What both implementations must agree on: call, fragment id, rows, and files' fields / versions
    (paths and sizes differ; a begun fragment's ``physical_rows`` is pylance's None, our 0)."""
    return [
        (
            call,
            f["id"],
            f["physical_rows"] or 0,
            [(d["fields"], d["file_major_version"], d["file_minor_version"]) for d in f["files"]],
        )
        for call, f in calls
    ]


@pytest.mark.interop
@pytest.mark.parametrize("max_rows", [500, 1000, 3000])
@pytest.mark.parametrize("api", ["write_dataset", "write_fragments"])
def test_fragment_write_progress_as_pylance(tmp_path: Path, max_rows: int, api: str) -> None:
    lance = pytest.importorskip("lance")

    class Theirs(lance.progress.FragmentWriteProgress):  # type: ignore[misc,name-defined]
        __init__ = Recorder.__init__
        begin = Recorder.begin
        complete = Recorder.complete

    data = table(2500)
    theirs, ours = Theirs(), Recorder()
    their_write = lance.write_dataset if api == "write_dataset" else lance.fragment.write_fragments
    their_write(data, str(tmp_path / "theirs.lance"), max_rows_per_file=max_rows, progress=theirs)
    if api == "write_dataset":
        lance_ops.write_dataset(data, tmp_path / "ours.lance", max_rows_per_file=max_rows, progress=ours)
    else:
        fragments = write_fragments(data, tmp_path / "ours.lance", max_rows_per_file=max_rows, progress=ours)
        lance_ops.LanceDataset.commit(
            tmp_path / "ours.lance", lance_ops.LanceOperation.Overwrite(data.schema, fragments)
        )
    expected = comparable(theirs.calls)
    ended = bool(expected) and expected[-1][0] == "complete"
    if not ended:
        # pylance 14 does not complete a last fragment that did not fill up; we do (module docstring)
        last_rows = 2500 - max_rows * (2500 // max_rows)
        expected.append(("complete", 0, last_rows, [([0, 1], 2, 2)]))
    assert comparable(ours.calls) == expected
    # the fragment completed is the one committed (id assigned at commit)
    completed = [f for call, f in ours.calls if call == "complete"]
    files = [
        d.path for f in lance_ops.dataset(tmp_path / "ours.lance").get_fragments() for d in f.data_files()
    ]
    assert [f["files"][0]["path"] for f in completed] == files
    # pylance reads the completed fragment JSON as its own FragmentMetadata
    assert (
        lance.FragmentMetadata.from_json(json.dumps(completed[0])).physical_rows
        == completed[0]["physical_rows"]
    )


@pytest.mark.interop
def test_pylance_tracker_instances_are_accepted(tmp_path: Path) -> None:
    """A tracker subclassing pylance's own base class works unchanged with lance_ops."""
    lance = pytest.importorskip("lance")

    class Theirs(lance.progress.FragmentWriteProgress):  # type: ignore[misc,name-defined]
        __init__ = Recorder.__init__
        begin = Recorder.begin
        complete = Recorder.complete

    tracker = Theirs()
    lance_ops.write_dataset(table(30), tmp_path / "a.lance", max_rows_per_file=20, progress=tracker)
    assert [call for call, _ in tracker.calls] == ["begin", "complete", "begin", "complete"]


def test_noop_and_file_system_trackers(tmp_path: Path) -> None:
    lance_ops.write_dataset(table(5), tmp_path / "a.lance", progress=NoopFragmentWriteProgress())
    tracker = FileSystemFragmentWriteProgress(str(tmp_path / "progress"), metadata={"host": "h1"})
    started: list[list[str]] = []

    class Watching(FileSystemFragmentWriteProgress):
        def complete(self, fragment: Any, **kwargs: Any) -> None:
            started.append(sorted(p.name for p in (tmp_path / "progress").iterdir()))
            super().complete(fragment, **kwargs)

    tracker = Watching(str(tmp_path / "progress"), metadata={"host": "h1"})
    lance_ops.write_dataset(table(5), tmp_path / "b.lance", progress=tracker)
    assert started == [["fragment_0.in_progress", "fragment_0.json"]]
    assert sorted(p.name for p in (tmp_path / "progress").iterdir()) == ["fragment_0.json"]
    state = json.loads((tmp_path / "progress" / "fragment_0.json").read_text())
    assert state["id"] == 0 and state["files"] == []


# --- maintenance operations ----------------------------------------------------------------------


def small_fragments(
    uri: Path, count: int = 6, rows: int = 10, page_statistics: bool = True
) -> lance_ops.LanceDataset:
    ds = lance_ops.write_dataset(table(rows), uri, page_statistics=page_statistics)
    for n in range(1, count):
        ds = lance_ops.write_dataset(
            table(rows, n * rows), uri, mode="append", page_statistics=page_statistics
        )
    return ds


def test_compaction_reports_each_task(tmp_path: Path) -> None:
    ds = small_fragments(tmp_path / "a.lance")
    plan = ds.optimize.compact_files(target_rows_per_fragment=20, dry_run=True)
    events: list[ProgressEvent] = []
    ds.optimize.compact_files(target_rows_per_fragment=20, num_threads=2, progress=events.append)
    assert plan.num_tasks() == 3
    assert_sane(events, "compact", "tasks", 3)
    assert [e.done for e in events] == [0, 1, 2, 3]
    assert all(e.message.startswith("compacted fragments [") for e in events[1:])


def test_nothing_to_compact_reports_nothing(tmp_path: Path) -> None:
    ds = lance_ops.write_dataset(table(10), tmp_path / "a.lance")
    events: list[ProgressEvent] = []
    ds.optimize.compact_files(progress=events.append)
    assert events == []


def test_statistics_rebuild_reports_each_fragment(tmp_path: Path) -> None:
    ds = small_fragments(tmp_path / "a.lance", count=4, page_statistics=False)  # as pylance writes
    events: list[ProgressEvent] = []
    ds.stats.rebuild(progress=events.append)
    assert_sane(events, "statistics", "fragments", 4)
    lance_ops.write_dataset(table(10, 100), tmp_path / "a.lance", mode="append", page_statistics=False)
    events.clear()
    lance_ops.dataset(tmp_path / "a.lance").stats.rebuild(progress=events.append)
    assert_sane(events, "statistics", "fragments", 1)  # only the new fragment lacks statistics


def test_cleanup_reports_each_file_and_dry_run_nothing(tmp_path: Path) -> None:
    ds = small_fragments(tmp_path / "a.lance", count=3)
    ds.optimize.compact_files()
    events: list[ProgressEvent] = []
    dry = ds.cleanup_old_versions(older_than=ZERO, dry_run=True, progress=events.append)
    assert events == [] and dry.paths
    stats = ds.cleanup_old_versions(older_than=ZERO, progress=events.append)
    assert_sane(events, "cleanup", "files", len(stats.paths))
    assert sorted(e.message.removeprefix("removed ") for e in events[1:]) == sorted(stats.paths)


def test_add_columns_reports_each_fragment(tmp_path: Path) -> None:
    ds = small_fragments(tmp_path / "a.lance", count=3)
    events: list[ProgressEvent] = []
    ds.add_columns({"twice": "id * 2"}, progress=events.append)
    assert_sane(events, "add_columns", "fragments", 3)
    events.clear()
    ds.add_columns(pa.field("empty", pa.int32()), progress=events.append)
    assert events == []


def test_errors_stay_typed(tmp_path: Path) -> None:
    """A bad request fails before any progress is reported."""
    ds = small_fragments(tmp_path / "a.lance", count=2)
    events: list[ProgressEvent] = []
    with pytest.raises(LanceOpsError):
        ds.stats.rebuild(columns=["nope"], progress=events.append)
    assert events == []
