"""Request economy of remote stores, without a server: small files are read whole once and written
in one ``pipe_file``; larger ones stream (fsspec's memory filesystem stands in for S3)."""

from __future__ import annotations

import pickle
from typing import Any

import pyarrow as pa
import pytest
from fsspec.implementations.memory import MemoryFileSystem

from lance_ops.file.reader import LanceFileReader
from lance_ops.file.writer import LanceFileWriter
from lance_ops.io.base import BufferedRanges, RangeReader
from lance_ops.io.fsspec_store import FsspecOutput, FsspecStore
from lance_ops.io.memory import MemoryStore


def test_buffered_ranges_answer_as_the_store() -> None:
    store = MemoryStore()
    store.write("f", bytes(range(100)))
    buffered = BufferedRanges(store, "f", memoryview(store.read("f")))
    ranges = [(10, 5), (0, 4), (95, 10), (200, 3), (7, 0)]
    assert [bytes(b) for b in buffered.read_ranges(ranges)] == [
        bytes(b) for b in store.read_ranges("f", ranges)
    ]
    with pytest.raises(ValueError):
        buffered.read_ranges([(-1, 2)])
    revived = pickle.loads(pickle.dumps(buffered))
    assert type(revived) is RangeReader and revived.path == "f"


class _Counting(MemoryFileSystem):
    """fsspec's memory filesystem counting whole puts, opened files and ranged reads."""

    protocol = "counting"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[str] = []
        self._piping = False

    def pipe_file(self, path: str, value: bytes, *args: Any, **kwargs: Any) -> None:
        self.calls.append("pipe")
        self._piping = True  # fsspec's pipe_file opens a file itself: not a call of ours
        try:
            super().pipe_file(path, value, *args, **kwargs)
        finally:
            self._piping = False

    def _open(self, path: str, mode: str = "rb", *args: Any, **kwargs: Any) -> Any:
        if not self._piping:
            self.calls.append(f"open {mode}")
        return super()._open(path, mode, *args, **kwargs)

    def cat_ranges(self, paths: list[str], *args: Any, **kwargs: Any) -> list[bytes]:
        self.calls.append(f"ranges {len(paths)}")
        return super().cat_ranges(paths, *args, **kwargs)


def test_small_file_written_in_one_put_and_read_in_one_request() -> None:
    fs = _Counting(skip_instance_cache=True)
    store = FsspecStore(fs)
    table = pa.table({"id": pa.array(range(1000), pa.int64()), "name": [f"n{i}" for i in range(1000)]})
    with LanceFileWriter("/ds/small.lance", table.schema, store=store) as writer:
        writer.write_batch(table)
    assert fs.calls == ["pipe"]
    fs.calls.clear()
    size = store.size("/ds/small.lance")
    reader = LanceFileReader("/ds/small.lance", store=store, size=size)
    assert reader.read_all().to_table().equals(table)
    assert reader.take_rows([5, 900]).to_table().column("id").to_pylist() == [5, 900]
    assert fs.calls == ["ranges 1"]


def test_larger_output_streams() -> None:
    fs = _Counting(skip_instance_cache=True)
    out = FsspecOutput(fs, "/big", single_put_size=10)
    out.write(b"12345")
    assert fs.calls == []
    out.write(b"678901")
    out.close()
    assert fs.calls == ["open wb"] and fs.cat_file("/big") == b"12345678901"
    aborted = FsspecOutput(fs, "/gone")
    aborted.write(b"x")
    aborted.abort()
    assert not fs.exists("/gone")
