"""Per-operation storage read counters (lance_ops.io.metrics) and analyze_plan's I/O metrics."""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

import lance
import pyarrow as pa
from lance.file import LanceFileReader

import lance_ops
from lance_ops.io.local import LocalStore
from lance_ops.io.memory import MemoryStore
from lance_ops.io.metrics import IoCounter, counting_io, current

# pylance's own test (test_analyze_scan / test_analyze_take) matches its plan with this.
PYLANCE_LINE = re.compile(r"^\s*LanceRead:.*bytes_read=\d+.*iops=\d+.*requests=\d+.*$", re.MULTILINE)
METRICS = re.compile(
    r"metrics=\[output_rows=(\d+), rows_scanned=(\d+), bytes_read=(\d+), iops=(\d+), requests=(\d+)\]"
)


def metrics_of(plan: str) -> tuple[int, ...]:
    found = METRICS.search(plan)
    assert found, plan
    return tuple(int(g) for g in found.groups())


def _one_column(path: Path, rows: int = 300_000) -> str:
    uri = str(path / "ds.lance")
    lance_ops.write_dataset(pa.table({"a": pa.array(range(rows), pa.int64())}), uri)
    assert lance.dataset(uri).count_rows() == rows
    return uri


def test_store_reads_count_exactly(tmp_path: Path) -> None:
    path = str(tmp_path / "f.bin")
    payload = bytes(range(256)) * 64  # 16 KiB
    with open(path, "wb") as f:
        f.write(payload)
    store = LocalStore()
    gap = store.coalesce_gap
    far = gap + 1000
    ranges = [(0, 10), (10, 5), (far + 100, 7)]
    with counting_io() as io:
        got = store.read_ranges(path, ranges)
    assert [bytes(b) for b in got] == [payload[s : s + n] for s, n in ranges]
    # Two spans after coalescing: [0, 15) and [far + 100, far + 107).
    assert (io.bytes_read, io.iops, io.requests) == (15 + 7, 2, 1)
    with counting_io() as io:
        store.read(path)
        store.read_range(path, 100, 50)
        store.open_ranges(path).read_ranges([(0, 3), (far, 4)])
        store.read_range(path, len(payload) - 5, 100)  # clipped at the end: 5 bytes come back
    assert (io.bytes_read, io.iops, io.requests) == (len(payload) + 50 + 3 + 4 + 5, 1 + 1 + 2 + 1, 4)
    # Nothing counts outside a block, and blocks nest without mixing.
    assert current() is None
    with counting_io() as outer:
        store.read_range(path, 0, 8)
        with counting_io() as inner:
            store.read_range(path, 0, 16)
        store.read_range(path, 0, 1)
    assert (outer.bytes_read, inner.bytes_read) == (9, 16)


def test_memory_store_counts() -> None:
    store = MemoryStore()
    store.write("/a/b", b"x" * 100)
    with counting_io() as io:
        store.read("/a/b")
        store.read_ranges("/a/b", [(0, 10), (50, 10)])
    assert io.bytes_read == 120 and io.requests >= 2 and io.iops >= 2


def test_scan_counts_each_run_and_matches_pylance_regex(tmp_path: Path) -> None:
    uri = _one_column(tmp_path)
    ds = lance_ops.dataset(uri)
    (data_file,) = (tmp_path / "ds.lance" / "data").iterdir()
    size = os.path.getsize(data_file)
    meta = LanceFileReader(str(data_file)).metadata()
    page_bytes = sum(b.size for p in meta.columns[0].pages for b in p.buffers)

    first = ds.scanner(columns=["a"]).analyze_plan()
    assert PYLANCE_LINE.search(first), first
    rows, scanned, nbytes, iops, requests = metrics_of(first)
    assert (rows, scanned) == (300_000, 300_000)
    # Opening the file reads its tail and metadata; small metadata buffers may be read again.
    assert page_bytes <= nbytes <= 1.5 * size and 1 <= iops and 1 <= requests
    # A second and third run of the same handle count again (the pages are read again).
    second = metrics_of(ds.scanner(columns=["a"]).analyze_plan())
    third = metrics_of(ds.scanner(columns=["a"]).analyze_plan())
    assert second == third
    # Exactly the pages' value buffers (the chunk metadata buffers stay cached from the first run).
    value_bytes = sum(b.size for p in meta.columns[0].pages for b in p.buffers[1:])
    assert second[2] == value_bytes
    # A limited take reads less than the whole column.
    take = metrics_of(ds.scanner(columns=["a"], limit=10).analyze_plan())
    assert take[0] == 10 and 0 < take[2] < second[2]


def test_concurrent_counts_do_not_mix(tmp_path: Path) -> None:
    uri = _one_column(tmp_path)
    ds = lance_ops.dataset(uri)
    ds.to_table()  # metadata cached: every later run reads the same pages
    with counting_io() as alone:
        ds.to_table()
    results: list[IoCounter] = []
    lock = threading.Lock()

    def run() -> None:
        with counting_io() as io:
            ds.to_table()
        with lock:
            results.append(io)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [(r.bytes_read, r.iops) for r in results] == [(alone.bytes_read, alone.iops)] * 3


def test_pylance_written_dataset_is_counted(tmp_path: Path) -> None:
    uri = str(tmp_path / "py.lance")
    lance.write_dataset(pa.table({"a": list(range(5000)), "s": [str(i) for i in range(5000)]}), uri)
    plan = lance_ops.dataset(uri).scanner(filter="a < 100").analyze_plan()
    assert PYLANCE_LINE.search(plan), plan
    rows, scanned, nbytes, iops, requests = metrics_of(plan)
    assert (rows, scanned) == (100, 5000) and nbytes > 0 and iops >= 1 and requests >= 1
