"""Takes across fragments read the fragments on the worker threads when large enough; the result
must equal the serial read (and pylance's), in the caller's order, deletions and repeats included."""

from __future__ import annotations

import threading

import numpy as np
import pyarrow as pa
import pytest

import lance_ops
from lance_ops.file import parallel
from lance_ops.fragment import scan as scan_module

ROWS, PER_FRAGMENT = 6_000, 1_000


@pytest.fixture(scope="module")
def uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    rng = np.random.default_rng(5)
    table = pa.table(
        {
            "id": np.arange(ROWS, dtype=np.int64),
            "word": pa.array([None if i % 9 == 0 else f"w{i % 77}" for i in range(ROWS)]),
            "tags": pa.array([list(range(i % 4)) for i in range(ROWS)], pa.list_(pa.int32())),
            "score": rng.normal(size=ROWS),
        }
    )
    path = str(tmp_path_factory.mktemp("take") / "ds.lance")
    lance_ops.write_dataset(table, path, max_rows_per_file=PER_FRAGMENT, enable_stable_row_ids=True)
    lance_ops.dataset(path).delete("id % 7 = 3")
    return path


@pytest.fixture
def threads_seen(monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """Every take is parallel (two threads); returns the names of the threads that read fragments."""
    monkeypatch.setattr(parallel, "WORKER_THREADS", 2)
    monkeypatch.setattr(scan_module, "PARALLEL_MIN_CELLS", 1)
    seen: set[str] = set()
    read = scan_module._read

    def spy(*args: object) -> pa.Table:
        seen.add(threading.current_thread().name)
        return read(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(scan_module, "_read", spy)
    return seen


def _serial(monkeypatch: pytest.MonkeyPatch, call):  # type: ignore[no-untyped-def]
    with monkeypatch.context() as m:
        m.setattr(scan_module, "PARALLEL_MIN_CELLS", 10**12)
        return call()


def test_take_across_fragments_in_parallel(
    uri: str, threads_seen: set[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import lance

    ds = lance_ops.dataset(uri)
    indices = np.random.default_rng(1).integers(0, ds.count_rows(), 700)  # unsorted, with repeats
    got = ds.take(indices)
    assert len(threads_seen) == 2
    assert got.equals(_serial(monkeypatch, lambda: ds.take(indices)))
    assert got.equals(lance.dataset(uri).take(indices.tolist()))


def test_take_rows_across_fragments_in_parallel(
    uri: str, threads_seen: set[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import lance

    ds = lance_ops.dataset(uri)
    ids = ds.to_table(columns=[], with_row_id=True).column("_rowid").to_numpy()
    picked = np.random.default_rng(2).choice(ids, 500)[::-1]
    got = ds._take_rows(picked, columns=["id", "tags"])
    assert len(threads_seen) == 2
    assert got.equals(_serial(monkeypatch, lambda: ds._take_rows(picked, columns=["id", "tags"])))
    assert got.equals(lance.dataset(uri)._take_rows(picked.tolist(), columns=["id", "tags"]))
