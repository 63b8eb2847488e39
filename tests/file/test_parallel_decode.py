"""Reads decoded on several threads: :func:`lance_ops.file.parallel.run_tasks` and the file
reader's per-field / per-row-range split. A parallel read must equal the serial one exactly."""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from lance_ops.errors import CorruptFileError
from lance_ops.file import LanceFileReader, LanceFileWriter, parallel
from lance_ops.file import reader as reader_module

ROWS = 5_003


def _table(rows: int = ROWS) -> pa.Table:
    rng = np.random.default_rng(7)
    ids = np.arange(rows, dtype=np.int64)
    lengths = rng.integers(0, 4, rows)
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int32)
    tags = pa.ListArray.from_arrays(
        pa.array(offsets),
        pa.array(rng.integers(0, 100, int(offsets[-1]), dtype=np.int32)),
        mask=pa.array(rng.random(rows) < 0.1),
    )
    words = pa.array([None if i % 7 == 0 else f"w{i % 97}-{'x' * (i % 13)}" for i in range(rows)])
    vectors = pa.FixedSizeListArray.from_arrays(pa.array(rng.normal(size=rows * 8).astype(np.float32)), 8)
    return pa.table(
        {
            "id": ids,
            "score": pa.array(rng.integers(0, 1000, rows), mask=rng.random(rows) < 0.2),
            "word": words,
            "category": pa.array([f"c{i % 5}" for i in range(rows)]).dictionary_encode(),
            "tags": tags,
            "point": pa.StructArray.from_arrays([pa.array(ids * 2), words], ["x", "label"]),
            "vector": vectors,
        }
    )


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pa.Table]:
    table = _table()
    path = tmp_path_factory.mktemp("parallel") / "t.lance"
    with LanceFileWriter(path, table.schema, version="2.2", max_page_bytes=16_384) as writer:
        writer.write_batch(table)
    return path, table


@pytest.fixture
def eager(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every read is parallel and split into 700-row ranges, on two threads."""
    monkeypatch.setattr(parallel, "WORKER_THREADS", 2)
    monkeypatch.setattr(reader_module, "WORKER_THREADS", 8)
    monkeypatch.setattr(reader_module, "PARALLEL_MIN_CELLS", 1)
    monkeypatch.setattr(reader_module, "SPLIT_MIN_ROWS", 700)
    monkeypatch.setattr(reader_module, "SPLIT_ALIGN_ROWS", 1)  # pieces of 700+ rows, cut anywhere


def _serial(
    path: Path, read: Callable[[LanceFileReader], pa.Table], monkeypatch: pytest.MonkeyPatch
) -> pa.Table:
    with monkeypatch.context() as m:
        m.setattr(parallel, "WORKER_THREADS", 1)
        m.setattr(reader_module, "WORKER_THREADS", 1)
        m.setattr(reader_module, "PARALLEL_MIN_CELLS", 10**12)
        return read(LanceFileReader(path))


READS: dict[str, Callable[[LanceFileReader], pa.Table]] = {
    "all": lambda r: r.read_all().to_table(),
    "range": lambda r: r.read_range(1_021, 3_001).to_table(),
    "projected": lambda r: r.read_all(columns=["tags", "word"]).to_table(),
    "take_sorted": lambda r: r.take_rows(np.arange(0, ROWS, 3)).to_table(),
    "take_unsorted_duplicates": lambda r: r.take_rows(
        np.random.default_rng(1).integers(0, ROWS, 4_000)
    ).to_table(),
    "batches": lambda r: pa.Table.from_batches(
        r.read_all().to_batches(batch_size=1_500).read_all().to_batches()
    ),
}


@pytest.mark.usefixtures("eager")
@pytest.mark.parametrize("name", list(READS))
def test_parallel_read_equals_serial_and_source(
    written: tuple[Path, pa.Table], name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, source = written
    read = READS[name]
    got = read(LanceFileReader(path))
    expected = _serial(path, read, monkeypatch)
    assert got.schema == expected.schema
    assert got.equals(expected)
    if name == "all":
        assert got.equals(source)
        # Split into ranges of >= 700 rows, at most WORKER_THREADS of them: the field's chunks.
        assert got.column("id").num_chunks == 7
        assert sum(len(c) for c in got.column("tags").chunks) == ROWS


def test_small_reads_stay_on_the_calling_thread(
    written: tuple[Path, pa.Table], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, source = written
    seen: set[str] = set()
    decode = reader_module.LanceFileReader._read_field

    def spy(self: LanceFileReader, *args: object) -> pa.Array:
        seen.add(threading.current_thread().name)
        return decode(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(reader_module.LanceFileReader, "_read_field", spy)
    got = LanceFileReader(path).take_rows([5, 17, 4_000]).to_table()
    assert got.equals(source.take([5, 17, 4_000]))
    assert seen == {threading.current_thread().name}


@pytest.mark.usefixtures("eager")
def test_a_failing_field_is_located_in_a_parallel_read(
    written: tuple[Path, pa.Table], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _ = written
    reader = LanceFileReader(path)
    broken = reader._decoder(reader.schema.get_field_index("word"))

    def fail(fetch: object, rows: object) -> pa.Array:
        raise CorruptFileError("<page>", "garbled")

    monkeypatch.setattr(broken, "read", fail)
    with pytest.raises(CorruptFileError, match="garbled") as info:
        reader.read_all().to_table()
    assert "word" in str(info.value) and str(path) in str(info.value)


# ---------------------------------------------------------------- run_tasks


@pytest.fixture
def two_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel, "WORKER_THREADS", 2)


@pytest.mark.usefixtures("two_threads")
def test_run_tasks_returns_results_in_task_order() -> None:
    tasks = [lambda i=i: np.full(10_000, i).sum() for i in range(40)]
    assert parallel.run_tasks(tasks, costs=[i % 7 for i in range(40)]) == [i * 10_000 for i in range(40)]


@pytest.mark.usefixtures("two_threads")
def test_run_tasks_uses_a_second_thread_and_starts_with_the_costliest() -> None:
    started: list[int] = []
    names: set[str] = set()
    gate = threading.Barrier(2, timeout=10)

    def task(i: int) -> int:
        started.append(i)
        names.add(threading.current_thread().name)
        if i in (3, 4):
            gate.wait()  # the two costliest run at the same time, on two threads
        return i

    assert parallel.run_tasks([lambda i=i: task(i) for i in range(5)], costs=[1, 2, 3, 9, 8]) == list(
        range(5)
    )
    assert set(started[:2]) == {3, 4}
    assert len(names) == 2


@pytest.mark.usefixtures("two_threads")
def test_run_tasks_raises_the_first_failure_in_task_order_after_all_tasks_ended() -> None:
    ran: list[int] = []

    def task(i: int) -> int:
        ran.append(i)
        if i in (2, 5):
            raise ValueError(f"task {i}")
        return i

    with pytest.raises(ValueError, match="task 2"):
        parallel.run_tasks([lambda i=i: task(i) for i in range(8)], costs=[0, 0, 0, 0, 0, 9, 0, 0])
    assert sorted(ran) == list(range(8))


@pytest.mark.usefixtures("two_threads")
def test_nested_run_tasks_do_not_deadlock() -> None:
    def outer(i: int) -> list[int]:
        return parallel.run_tasks([lambda j=j: i * 10 + j for j in range(3)])

    done: list[list[list[int]]] = []
    worker = threading.Thread(
        target=lambda: done.append(parallel.run_tasks([lambda i=i: outer(i) for i in range(4)]))
    )
    worker.start()
    worker.join(timeout=30)
    assert done == [[[i * 10 + j for j in range(3)] for i in range(4)]]


def _child(queue: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    parallel.WORKER_THREADS = 2
    queue.put(parallel.run_tasks([lambda i=i: i * i for i in range(6)]))


@pytest.mark.usefixtures("two_threads")
def test_run_tasks_works_in_a_forked_child_after_the_parent_used_the_pool() -> None:
    parallel.run_tasks([lambda: 1, lambda: 2])  # the parent's pool exists
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_child, args=(queue,))
    child.start()
    assert queue.get(timeout=60) == [i * i for i in range(6)]
    child.join(timeout=30)
    assert child.exitcode == 0


@pytest.mark.usefixtures("eager")
@pytest.mark.parametrize("name", ["all", "range", "batches"])
def test_cuts_on_aligned_rows_read_as_serial(
    written: tuple[Path, pa.Table], name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reader_module, "SPLIT_ALIGN_ROWS", 256)
    path, _ = written
    got = READS[name](LanceFileReader(path))
    assert got.equals(_serial(path, READS[name], monkeypatch))
    if name == "all":
        ends = np.cumsum([len(c) for c in got.column("id").chunks])[:-1]
        assert len(ends) >= 2 and all(end % 256 == 0 for end in ends)


@pytest.mark.parametrize("start", [0, 1, 4095, 4096, 131_072, 150_001])
@pytest.mark.parametrize("n", [1, 4096, 65_536, 150_000, 300_000, 1_000_003])
@pytest.mark.parametrize("parts", [1, 2, 3, 4])
def test_range_cuts_fall_on_aligned_rows(start: int, n: int, parts: int) -> None:
    """A row range split for threads is cut at multiples of SPLIT_ALIGN_ROWS rows of the file
    (no mini-block chunk then lies on both sides of a cut), in order, covering every row once,
    each piece within an alignment step of an equal share; other row sets split evenly."""
    align = reader_module.SPLIT_ALIGN_ROWS
    cuts = reader_module._cuts(range(start, start + n), parts)
    assert cuts[0] == 0 and cuts[-1] == n and cuts == sorted(set(cuts))
    assert all((start + cut) % align == 0 for cut in cuts[1:-1])
    even = [n * k // parts for k in range(parts + 1)]
    if len(cuts) == len(even):
        assert all(abs(a - b) <= align // 2 for a, b in zip(cuts, even, strict=True))
    else:  # merged where a piece would have been empty after alignment
        assert n < parts * align
    offsets = np.arange(start, start + n, 3)
    assert reader_module._cuts(offsets, parts) == [len(offsets) * k // parts for k in range(parts + 1)]
