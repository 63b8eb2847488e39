"""``LanceFileWriter.write_batch`` from many threads at once: calls are serialised, each
batch lands whole and every row keeps its columns together."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from lance_ops.file import LanceFileReader, LanceFileWriter

THREADS = 16
BATCHES_PER_THREAD = 12
SCHEMA = pa.schema(
    [("id", pa.int64()), ("twice", pa.int64()), ("label", pa.string()), ("tags", pa.list_(pa.int32()))]
)


def _batch(first: int, rows: int) -> pa.RecordBatch:
    ids = np.arange(first, first + rows, dtype=np.int64)
    tags = pa.ListArray.from_arrays(
        pa.array(np.arange(rows + 1, dtype=np.int32) * 2),
        pa.array(np.repeat(ids % 1000, 2).astype(np.int32)),
    )
    return pa.record_batch(
        [pa.array(ids), pa.array(ids * 2), pa.array([f"row-{i}" for i in ids]), tags], schema=SCHEMA
    )


def _write_concurrently(path: Path, data_cache_bytes: int | None) -> list[int]:
    """Write from ``THREADS`` threads (released together); returns the first id of each batch."""
    barrier = threading.Barrier(THREADS)
    errors: list[BaseException] = []
    firsts: list[int] = []
    with LanceFileWriter(path, SCHEMA, version="2.2", data_cache_bytes=data_cache_bytes) as writer:

        def work(t: int) -> None:
            try:
                barrier.wait()
                for b in range(BATCHES_PER_THREAD):
                    first = (t * BATCHES_PER_THREAD + b) * 1000
                    writer.write_batch(_batch(first, 97 + (t * 7 + b) % 50))
                    firsts.append(first)
            except BaseException as exc:  # reported by the main thread
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert not errors, errors
    return firsts


@pytest.mark.parametrize("data_cache_bytes", [None, 4096], ids=["buffered", "flush-often"])
def test_concurrent_write_batch_keeps_rows_whole(tmp_path: Path, data_cache_bytes: int | None) -> None:
    path = tmp_path / "threads.lance"
    firsts = _write_concurrently(path, data_cache_bytes)
    table = LanceFileReader(path).read_all().to_table()
    ids = table.column("id").to_numpy()
    assert np.array_equal(table.column("twice").to_numpy(), ids * 2)
    assert table.column("label").to_pylist() == [f"row-{i}" for i in ids]
    tags = table.column("tags").to_pylist()
    assert tags == [[int(i % 1000)] * 2 for i in ids]
    # Each batch is contiguous: ids rise by one inside a batch and jump only at batch starts.
    starts = np.flatnonzero(np.diff(ids) != 1) + 1
    assert sorted(ids[np.concatenate(([0], starts))].tolist()) == sorted(firsts)
    expected = sum(97 + (t * 7 + b) % 50 for t in range(THREADS) for b in range(BATCHES_PER_THREAD))
    assert table.num_rows == expected


@pytest.mark.interop
def test_concurrent_writes_read_by_pylance(tmp_path: Path) -> None:
    lance_file = pytest.importorskip("lance.file")
    path = tmp_path / "threads.lance"
    _write_concurrently(path, 4096)
    ours = LanceFileReader(path).read_all().to_table()
    assert lance_file.LanceFileReader(str(path)).read_all().to_table().equals(ours)


MIXED = pa.schema(
    [
        ("id", pa.int64()),
        ("word", pa.dictionary(pa.int16(), pa.string())),
        pa.field("payload", pa.large_binary(), metadata={"lance-encoding:blob": "true"}),
        ("pair", pa.struct([("x", pa.int64()), ("y", pa.string())])),
    ]
)


def _mixed_batch(first: int, rows: int) -> pa.RecordBatch:
    ids = np.arange(first, first + rows, dtype=np.int64)
    words = pa.array([f"w{i % 5}" for i in ids]).dictionary_encode().cast(MIXED.field("word").type)
    payload = pa.array([str(i).encode() * 3 for i in ids], pa.large_binary())
    pair = pa.StructArray.from_arrays([pa.array(ids), pa.array([f"p{i}" for i in ids])], names=["x", "y"])
    return pa.record_batch([pa.array(ids), words, payload, pair], schema=MIXED)


@pytest.mark.interop
@pytest.mark.parametrize("version", ["2.0", "2.1", "2.2"])
def test_concurrent_writes_of_dictionary_blob_and_struct_columns(tmp_path: Path, version: str) -> None:
    """Every version, pages cut often: rows stay whole across a dictionary, a blob (values
    written out of line from the writing thread) and a struct column; pylance reads the same."""
    lance_file = pytest.importorskip("lance.file")
    path = tmp_path / "mixed.lance"
    threads, batches = 12, 8
    barrier = threading.Barrier(threads)
    errors: list[BaseException] = []
    with LanceFileWriter(path, MIXED, version=version, data_cache_bytes=2048, max_page_bytes=2048) as writer:

        def work(t: int) -> None:
            try:
                barrier.wait()
                for b in range(batches):
                    writer.write_batch(_mixed_batch((t * batches + b) * 1000, 40 + (t + b) % 30))
            except BaseException as exc:
                errors.append(exc)

        workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    assert not errors, errors
    for table in (
        LanceFileReader(path).read_all().to_table(),
        lance_file.LanceFileReader(str(path)).read_all().to_table(),
    ):
        ids = table.column("id").to_pylist()
        assert table.num_rows == sum(40 + (t + b) % 30 for t in range(threads) for b in range(batches))
        assert table.column("word").to_pylist() == [f"w{i % 5}" for i in ids]
        assert table.column("payload").to_pylist() == [str(i).encode() * 3 for i in ids]
        assert table.column("pair").to_pylist() == [{"x": i, "y": f"p{i}"} for i in ids]
        assert len(np.flatnonzero(np.diff(ids) != 1)) + 1 == threads * batches


@pytest.mark.parametrize("data_cache_bytes", [None, 20_000])
@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_fields_encoded_on_threads_give_the_same_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data_cache_bytes: int | None, version: str
) -> None:
    """Fields flushed together are encoded on the shared worker threads; the bytes must equal
    the serial writer's (pages are written in field order), with and without page statistics."""
    from lance_ops.file import parallel
    from lance_ops.file import writer as writer_module

    monkeypatch.setattr(writer_module, "ENCODE_THREADS_MIN_BYTES", 0)
    batches = [_batch(i * 3000, 3000) for i in range(5)]
    files = {}
    for threads in (1, 2):
        monkeypatch.setattr(parallel, "WORKER_THREADS", threads)
        for stats in (True, False):
            path = tmp_path / f"t{threads}-{stats}.lance"
            with LanceFileWriter(
                path, SCHEMA, version=version, data_cache_bytes=data_cache_bytes, page_statistics=stats
            ) as writer:
                for batch in batches:
                    writer.write_batch(batch)
            files[threads, stats] = path.read_bytes()
    assert files[1, True] == files[2, True]
    assert files[1, False] == files[2, False]
    expected = pa.Table.from_batches(batches)
    assert LanceFileReader(tmp_path / "t2-True.lance").read_all().to_table().equals(expected)


def test_blob_fields_stay_serial(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A field whose encoder writes external buffers (blobs) is never encoded on a pool thread."""
    from lance_ops.file import writer as writer_module

    submitted: list[object] = []
    real = writer_module.run_tasks

    def spy(tasks: list[object], costs: object = None) -> object:
        submitted.extend(tasks)
        return real(tasks, costs)  # type: ignore[arg-type]

    monkeypatch.setattr(writer_module, "run_tasks", spy)
    monkeypatch.setattr(writer_module, "ENCODE_THREADS_MIN_BYTES", 0)
    blob = pa.field("b", pa.large_binary(), metadata={"lance-encoding:blob": "true"})
    schema = pa.schema([pa.field("id", pa.int64()), blob])
    table = pa.table(
        {"id": np.arange(100, dtype=np.int64), "b": [bytes([i % 256]) * 50 for i in range(100)]}, schema
    )
    with LanceFileWriter(tmp_path / "b.lance", schema, version="2.2") as writer:
        writer.write_batch(table)
    assert submitted == []
    assert LanceFileReader(tmp_path / "b.lance").read_all().to_table().column("id").equals(table.column("id"))
    plain = pa.schema([pa.field("id", pa.int64()), pa.field("b", pa.large_binary())])
    with LanceFileWriter(tmp_path / "p.lance", plain, version="2.2", page_statistics=False) as writer:
        writer.write_batch(table.cast(plain))
    assert len(submitted) == 2  # both plain fields went to the pool at close()
    monkeypatch.setattr(writer_module, "ENCODE_THREADS_MIN_BYTES", 1 << 20)
    with LanceFileWriter(tmp_path / "s.lance", plain, version="2.2", page_statistics=False) as writer:
        writer.write_batch(table.cast(plain))
    assert len(submitted) == 2  # a small flush stays in the caller


def test_sketch_tasks_beside_encoding_match_one_sketch_of_the_column(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The distinct sketches fed by their own pool tasks, flush by flush, hold what one sketch fed
    each whole column holds (same serialised registers, same estimate); pylance reads the file."""
    from lance.file import LanceFileReader as PylanceReader

    from lance_ops.encoding.sketch import DistinctSketch
    from lance_ops.file import parallel
    from lance_ops.file import writer as writer_module

    monkeypatch.setattr(writer_module, "ENCODE_THREADS_MIN_BYTES", 0)
    monkeypatch.setattr(parallel, "WORKER_THREADS", 2)
    batches = [_batch(i * 3000, 3000) for i in range(5)]
    path = tmp_path / "s.lance"
    with LanceFileWriter(path, SCHEMA, version="2.2", data_cache_bytes=20_000) as writer:
        for batch in batches:
            writer.write_batch(batch)
    expected = pa.Table.from_batches(batches)
    sketches = LanceFileReader(path).column_sketches()
    assert set(sketches) == {"id", "twice", "label"}
    for name, sketch in sketches.items():
        whole = DistinctSketch().update(expected.column(name))
        assert sketch.estimate() == whole.estimate(), name
        assert sketch.bounds() == whole.bounds(), name
    assert PylanceReader(str(path)).read_all().to_table().equals(expected)
