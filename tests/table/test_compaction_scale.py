"""Compaction at scale: row sequences moved one new fragment at a time (the same bytes as cutting
the whole task's), and the memory a compaction holds, measured in a child process with a cap."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lance_ops.ops.compaction import _cut_stream
from lance_ops.table.rowids import rechunk_row_ids, rechunk_versions

REPO = Path(__file__).resolve().parents[2]


@st.composite
def _spans_and_sizes(draw: st.DrawFn) -> tuple[list[np.ndarray], list[int]]:
    spans = []
    start = 0
    for _ in range(draw(st.integers(0, 6))):
        length = draw(st.sampled_from([0, 1, 2, 3, 1023, 1024, 1025]))
        values = np.arange(start, start + length, dtype=np.uint64)
        if length and draw(st.booleans()):  # a run with holes (deleted rows)
            values = values[np.random.default_rng(length).random(length) < 0.7]
        spans.append(values)
        start += length + draw(st.integers(0, 3))
    total = sum(len(s) for s in spans)
    sizes = []
    while total:
        size = draw(st.integers(1, total))
        sizes.append(size)
        total -= size
    return spans, sizes


@settings(max_examples=60, deadline=None)
@given(_spans_and_sizes())
def test_streamed_cut_gives_the_bytes_of_the_whole_cut(case: tuple[list[np.ndarray], list[int]]) -> None:
    spans, sizes = case
    streamed = [rechunk_row_ids(pieces, [size])[0] for size, pieces in _cut_stream(iter(spans), sizes)]
    assert streamed == rechunk_row_ids(spans, sizes)
    runs = [(span, version) for version, span in enumerate(spans, 1)]
    streamed_runs = [rechunk_versions(pieces, [size])[0] for size, pieces in _cut_stream(iter(runs), sizes)]
    assert streamed_runs == rechunk_versions([r for r in runs if len(r[0])], sizes)


def test_streamed_cut_refuses_too_few_or_too_many_rows() -> None:
    from lance_ops.errors import CorruptFileError

    spans = [np.arange(5, dtype=np.uint64)]
    with pytest.raises(CorruptFileError, match="too few"):
        list(_cut_stream(iter(spans), [3, 3]))
    with pytest.raises(CorruptFileError, match="too many"):
        list(_cut_stream(iter(spans), [2, 2]))


# The child: warm up (imports, the encoders' compiled kernels: the warm-up's pages reach the
# 65,536 values from which lance_ops loads them) on a 150,000-row compaction, then compact the
# given dataset and report the process's peak resident set (VmHWM) before and after, in MB.
_WARM_UP = r"""
import json, sys, tempfile
import numpy as np, pyarrow as pa
import lance_ops

def hwm():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024

if sys.argv[2] == "pylance":
    import lance as lance_ops
with tempfile.TemporaryDirectory() as tmp:
    for n in range(3):
        rows = np.arange(n * 50_000, (n + 1) * 50_000)
        value = pa.array(rows * 7, mask=rows % 10 == 0)
        warm = pa.table({"row": rows, "value": value, "small": (rows % 1000).astype(np.int32)})
        lance_ops.write_dataset(warm, tmp + "/w", mode="append" if n else "create")
    lance_ops.dataset(tmp + "/w").delete("row < 100")
    lance_ops.dataset(tmp + "/w").optimize.compact_files()
"""
_CHILD = (
    _WARM_UP
    + r"""
ds = lance_ops.dataset(sys.argv[1])
before = hwm()
threads = {"num_threads": int(sys.argv[3])} if len(sys.argv) > 3 else {}
ds.optimize.compact_files(**threads)
print(json.dumps({"held_mb": hwm() - before, "peak_mb": hwm(), "numba": "numba" in sys.modules}))
"""
)


def _run_child(script: str, *args: str) -> Any:
    """``script`` run with ``args`` in a child process (this checkout first on its path): the JSON
    of its last line of output."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-c", script, *args]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1800, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _compact_in_child(
    uri: str, system: str = "lance_ops", num_threads: int | None = None
) -> dict[str, float]:
    """Compact ``uri`` in a child process after a warm-up: ``held_mb`` (what the compaction added
    to the process's peak RSS), ``peak_mb`` (the process's peak) and whether numba was loaded."""
    threads = [] if num_threads is None else [str(num_threads)]
    result: dict[str, float] = _run_child(_CHILD, uri, system, *threads)
    if system == "lance_ops":
        assert result["numba"], "the warm-up did not load the compiled kernels"
    return result


def _fragmented(uri: str, lance_module, fragments: int, rows_per_fragment: int) -> int:  # type: ignore[no-untyped-def]
    """A pylance dataset of ``fragments`` fragments (stable row ids), 10 % of rows deleted at random."""
    rows = fragments * rows_per_fragment
    rng = np.random.default_rng(0)
    values = rng.integers(0, 1 << 40, rows)
    table = pa.table(
        {
            "row": np.arange(rows, dtype=np.int64),
            "value": pa.array(values, mask=rng.random(rows) < 0.1),
            "small": (values % 1000).astype(np.int32),
        }
    )
    lance_module.write_dataset(table, uri, max_rows_per_file=rows_per_fragment, enable_stable_row_ids=True)
    doomed = np.sort(rng.choice(rows, rows // 10, replace=False))
    ds = lance_module.dataset(uri)
    for start in range(0, len(doomed), 50_000):
        ds.delete(f"row IN ({', '.join(map(str, doomed[start : start + 50_000]))})")
    return rows - len(doomed)


def _check(uri: str, lance_module, live: int) -> None:  # type: ignore[no-untyped-def]
    theirs = lance_module.dataset(uri)
    assert theirs.count_rows() == live
    assert len(theirs.get_fragments()) == max(1, live // 1_000_000)  # pylance's default target
    rows = theirs.to_table(columns=["row"], with_row_id=True)
    assert np.array_equal(rows["row"].to_numpy(), rows["_rowid"].to_numpy().astype(np.int64))


# The cap of the fast test: one task's working set (the writer's buffered 8 MiB per field, one
# flush being encoded and sketched, the decoded batches read ahead) and the allocators' slack;
# the compiled kernels are loaded before (the warm-up). Measured: ~20 MB here, ~75 MB at 1M rows.
CAP_MB = 60


@pytest.mark.interop
def test_compaction_memory_is_capped(tmp_path: Path, lance_module) -> None:  # type: ignore[no-untyped-def]
    """Fast subset: 300,000 rows in 60 fragments compact in a child process holding under the cap."""
    uri = str(tmp_path / "ds")
    live = _fragmented(uri, lance_module, 60, 5_000)
    held = _compact_in_child(uri)["held_mb"]
    assert held < CAP_MB, f"compaction held {held:.0f} MB"
    _check(uri, lance_module, live)


@pytest.mark.soak
@pytest.mark.interop
def test_compaction_memory_at_3m_rows_is_within_pylance_plus_200_mb(tmp_path: Path, lance_module) -> None:  # type: ignore[no-untyped-def]
    """L19's bound at 3M rows (300 fragments of 10,000, 10 % deleted): the peak RSS of the process
    compacting (imports, compiled kernels and the compaction: each system warmed up alike) and
    what the compaction adds to it are at most pylance's (on a copy, in a child process of its
    own) plus 200 MB."""
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    live = _fragmented(ours, lance_module, 300, 10_000)
    shutil.copytree(ours, theirs)
    mine = _compact_in_child(ours)
    pylance = _compact_in_child(theirs, system="pylance")
    assert mine["held_mb"] < pylance["held_mb"] + 200, (mine, pylance)
    assert mine["peak_mb"] < pylance["peak_mb"] + 200, (mine, pylance)
    _check(ours, lance_module, live)
    _check(theirs, lance_module, live)


@pytest.mark.soak
@pytest.mark.interop
def test_compaction_memory_is_flat_in_the_dataset_size(tmp_path: Path, lance_module) -> None:  # type: ignore[no-untyped-def]
    """One task at a time (``num_threads=1``), compacting 3M rows holds about what compacting 1M
    does: each task streams its rows (one new fragment of ~1M rows each), nothing grows with the
    rows but the row id maps (the margin: 40 MB, against ~75 MB held at 1M)."""
    small, large = str(tmp_path / "small"), str(tmp_path / "large")
    _fragmented(small, lance_module, 100, 10_000)
    live = _fragmented(large, lance_module, 300, 10_000)
    held_small = _compact_in_child(small, num_threads=1)["held_mb"]
    held_large = _compact_in_child(large, num_threads=1)["held_mb"]
    assert held_large < held_small + 40, (held_small, held_large)
    _check(large, lance_module, live)


# --------------------------------------------------- nothing of a finished task stays behind


def _result_bytes(result) -> int:  # type: ignore[no-untyped-def]
    """What a task's result itself holds: its new fragments' row id and version sequences."""
    return sum(
        len(value)
        for fragment in result.new_fragments
        for value in (fragment.row_ids, fragment.created_at_versions, fragment.last_updated_at_versions)
        if isinstance(value, bytes)
    )


@pytest.mark.interop
def test_a_task_leaves_nothing_but_its_result_behind(tmp_path: Path, lance_module) -> None:  # type: ignore[no-untyped-def]
    """Tasks run one after the other (the distributed API, in this thread): after each, the memory
    still allocated (tracemalloc: numpy and Python; Arrow's pool) is what it was before the first
    plus the results kept, and a task's peak does not grow with the number of tasks run before it:
    a compaction streams each group, so its memory is flat in the dataset's size."""
    import gc
    import tracemalloc

    import lance_ops
    from lance_ops.optimize import Compaction

    uri = str(tmp_path / "ds")
    live = _fragmented(uri, lance_module, 40, 5_000)
    ds = lance_ops.dataset(uri)
    the_plan = Compaction.plan(ds, {"target_rows_per_fragment": 18_000})
    assert the_plan.num_tasks() >= 8
    results, left, peaks = [], [], []
    tracemalloc.start()
    try:
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        # Arrow's pools (the default one and the system one the batches read come from); an
        # earlier test's garbage may be freed meanwhile, hence "at most"
        pools = (pa.default_memory_pool(), pa.system_memory_pool())
        arrow_before = [pool.bytes_allocated() for pool in pools]
        for task in the_plan.tasks:
            tracemalloc.reset_peak()
            start = tracemalloc.get_traced_memory()[0]
            results.append(task.execute(ds))
            gc.collect()  # a task's reference cycles (a few hundred KB) wait for the collector
            current, peak = tracemalloc.get_traced_memory()
            left.append(current - before - sum(map(_result_bytes, results)))
            peaks.append((peak - start) / task.num_rows)
            assert all(pool.bytes_allocated() <= held for pool, held in zip(pools, arrow_before, strict=True))
    finally:
        tracemalloc.stop()
    # a few hundred KB of first-use caches (reader metadata, protobuf classes), not rows
    assert max(left) < 512 * 1024, left
    assert max(left[1:]) < left[0] + 128 * 1024, left  # results' own objects: ~6 KB each
    # per row moved, the later tasks' peaks are within a third of the first's (the read-ahead
    # thread's queue depth varies with timing: hence a margin, not equality)
    assert max(peaks[1:]) < peaks[0] * 1.34, peaks
    Compaction.commit(ds, results)
    theirs = lance_module.dataset(uri)
    assert theirs.count_rows() == live
    rows = theirs.to_table(columns=["row"], with_row_id=True)
    assert np.array_equal(rows["row"].to_numpy(), rows["_rowid"].to_numpy().astype(np.int64))
    assert ds.to_table().equals(theirs.to_table())


# The child: after the warm-up, the tasks of a plan executed one after the other (this thread),
# the resident set (VmRSS) after each, less the one before the first, in MB; then the commit.
_TASKS_CHILD = (
    _WARM_UP
    + r"""
from lance_ops.optimize import Compaction

def rss():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024

ds = lance_ops.dataset(sys.argv[1])
the_plan = Compaction.plan(ds, {"target_rows_per_fragment": int(sys.argv[3])})
before, after, results = rss(), [], []
for task in the_plan.tasks:
    results.append(task.execute(ds))
    after.append(rss() - before)
Compaction.commit(ds, results)
print(json.dumps(after))
"""
)

#: What a finished task may leave resident, in MB: its result, first-use caches and the allocators'
#: pages still in use. Measured at 1M rows in tasks of ~250,000 (bench's table): 9-16 MB; 31-49 MB
#: before the Arrow pool's free pages were handed back after each task (they added up).
LEFT_MB = 24


@pytest.mark.soak
@pytest.mark.interop
def test_compaction_tasks_hand_back_their_memory(tmp_path: Path, lance_module) -> None:  # type: ignore[no-untyped-def]
    """Tasks executed one after the other in one process leave only a few MB resident each: the
    heaps' and Arrow pool's free pages are returned at each task's end, so a long compaction's
    resident set does not climb with the number of tasks it has run."""
    uri = str(tmp_path / "ds")
    live = _fragmented(uri, lance_module, 100, 10_000)
    after = _run_child(_TASKS_CHILD, uri, "lance_ops", "250000")
    assert len(after) >= 3
    assert max(after) < LEFT_MB, after
    theirs = lance_module.dataset(uri)
    assert theirs.count_rows() == live
    rows = theirs.to_table(columns=["row"], with_row_id=True)
    assert np.array_equal(rows["row"].to_numpy(), rows["_rowid"].to_numpy().astype(np.int64))
