"""Contract tests for lance_ops.io: every store must behave the same.

Stores under test: a plain local path, a file:// URL, memory://, and fsspec's local filesystem reached
through the generic fsspec adapter (``local://`` URLs), so the fsspec code path runs without network.
"""

from __future__ import annotations

import copy
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable

import numpy as np
import pytest
from fsspec.implementations.local import LocalFileSystem
from hypothesis import given
from hypothesis import strategies as st

from lance_ops.errors import ConditionalPutUnsupportedError, UnsupportedFeatureError
from lance_ops.io import FileInfo, FsspecStore, LocalStore, MemoryStore, ObjectStore, object_store
from lance_ops.io.base import _plan_few, _plan_many, plan_ranges
from lance_ops.io.local import LOCAL_COALESCE_GAP, TEMP_SUFFIX

STORE_KINDS = ["local", "file_url", "memory", "fsspec"]

# A store plus a fresh base directory (store path) for each call.
NewBase = Callable[[], tuple[ObjectStore, str]]


@pytest.fixture(scope="module", params=STORE_KINDS)
def new_base(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> NewBase:
    """Module-scoped (hypothesis-friendly) factory of empty locations on one kind of store."""
    root = tmp_path_factory.mktemp(request.param)

    def make() -> tuple[ObjectStore, str]:
        name = uuid.uuid4().hex
        uri = {
            "local": str(root / name),
            "file_url": (root / name).as_uri(),
            "memory": f"memory://test-io/{name}",
            "fsspec": f"local://{root / name}",
        }[request.param]
        return object_store(uri)

    return make


def _payload(n: int, seed: int = 0) -> bytes:
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()


def test_object_store_scheme_map(tmp_path: os.PathLike[str]) -> None:
    store, path = object_store("relative/dir")
    assert isinstance(store, LocalStore) and path == os.path.abspath("relative/dir")
    store, path = object_store("file:///tmp/a%20b/c")
    assert isinstance(store, LocalStore) and path == "/tmp/a b/c"
    store, path = object_store("memory://bucket//ds/./x/")
    assert isinstance(store, MemoryStore) and path == "bucket/ds/x"
    store, path = object_store("local:///tmp/x")
    assert isinstance(store, FsspecStore) and path == "/tmp/x"
    with pytest.raises(UnsupportedFeatureError):
        object_store("file://otherhost/tmp/x")


@pytest.mark.parametrize("size", [0, 1, 1023, 1024, 1025, 40 * 1024])
def test_write_read_size_exists(new_base: NewBase, size: int) -> None:
    store, base = new_base()
    path = store.join(base, "sub", "f.bin")
    data = _payload(size, size)
    assert not store.exists(path)
    store.write(path, data)
    assert store.exists(path)
    assert store.read(path) == data
    assert store.size(path) == size
    assert bytes(store.read_range(path, 0, size)) == data
    store.write(path, memoryview(b"replaced"))
    assert store.read(path) == b"replaced"
    assert not store.exists(store.join(base, "sub"))


def test_missing_file(new_base: NewBase) -> None:
    store, base = new_base()
    path = store.join(base, "nope")
    assert not store.exists(path)
    for call in (
        lambda: store.read(path),
        lambda: store.size(path),
        lambda: store.read_range(path, 0, 4),
        lambda: store.read_ranges(path, [(0, 4), (10, 2)]),
    ):
        with pytest.raises(FileNotFoundError):
            call()
    store.delete(path)


def test_read_past_end_is_clipped(new_base: NewBase) -> None:
    store, base = new_base()
    path = store.join(base, "f")
    store.write(path, b"0123456789")
    assert bytes(store.read_range(path, 8, 10)) == b"89"
    assert bytes(store.read_range(path, 10, 5)) == b""
    assert bytes(store.read_range(path, 50, 5)) == b""
    assert [bytes(v) for v in store.read_ranges(path, [(8, 10), (50, 1), (0, 2)])] == [b"89", b"", b"01"]


def test_negative_ranges_rejected(new_base: NewBase) -> None:
    store, base = new_base()
    path = store.join(base, "f")
    store.write(path, b"abc")
    with pytest.raises(ValueError):
        store.read_range(path, -1, 2)
    with pytest.raises(ValueError):
        store.read_ranges(path, [(0, 1), (1, -1)])


def test_walk_lists_subtree_with_partial_files(new_base: NewBase) -> None:
    store, base = new_base()
    assert store.walk(base) == []
    store.write(store.join(base, "a.txt"), b"a")
    store.write(store.join(base, "d", "e", "f.txt"), b"fff")
    store.write(store.join(base + "x", "sibling.txt"), b"s")
    partial = store.open_output(store.join(base, "d", "partial.txt"))
    partial.write(b"pp")
    walked = store.walk(base)
    paths = [info.path for info in walked]
    assert paths[0] == store.join(base, "a.txt") and store.join(base, "d", "e", "f.txt") in paths
    assert not any("sibling" in p for p in paths)
    assert [info.size for info in walked if info.path.endswith("f.txt")] == [3]
    if isinstance(store, LocalStore):
        # The temporary file of an unfinished write is visible to walk (cleanup), not to list.
        assert any(p.endswith(TEMP_SUFFIX) for p in paths)
        assert not any(i.path.endswith(TEMP_SUFFIX) for i in store.list(store.join(base, "d")))
    partial.abort()
    assert store.walk(store.join(base, "missing")) == []


def test_list_and_delete(new_base: NewBase) -> None:
    store, base = new_base()
    assert store.list(base) == []
    assert store.list(store.join(base, "missing")) == []
    before = time.time()
    store.write(store.join(base, "b.txt"), b"bb")
    store.write(store.join(base, "a.txt"), b"a")
    store.write(store.join(base, "nested", "c.txt"), b"ccc")
    listed = store.list(base)
    assert [(info.path, info.size) for info in listed] == [
        (store.join(base, "a.txt"), 1),
        (store.join(base, "b.txt"), 2),
    ]
    assert all(isinstance(info, FileInfo) and before - 5 <= info.mtime <= time.time() + 5 for info in listed)
    assert store.list(base + "/") == listed
    assert [info.path for info in store.list(store.join(base, "nested"))] == [
        store.join(base, "nested", "c.txt")
    ]
    store.delete(store.join(base, "a.txt"))
    store.delete(store.join(base, "a.txt"))
    assert not store.exists(store.join(base, "a.txt"))
    assert [info.path for info in store.list(base)] == [store.join(base, "b.txt")]


def test_list_names_are_the_listed_files_names(new_base: NewBase) -> None:
    store, base = new_base()
    assert store.list_names(base) == [] and store.list_names(store.join(base, "missing")) == []
    for name in ("b.manifest", "a.txt"):
        store.write(store.join(base, name), b"x")
    store.write(store.join(base, "nested", "c.txt"), b"ccc")  # a directory: not a file of base
    partial = store.open_output(store.join(base, "partial.manifest"))
    partial.write(b"pp")  # an unfinished write: not listed
    names = sorted(store.list_names(base))
    assert names == ["a.txt", "b.manifest"]
    assert names == [info.path.rsplit("/", 1)[-1] for info in store.list(base)]
    partial.abort()


def test_join(new_base: NewBase) -> None:
    store, base = new_base()
    assert store.join(base, "a", "b/c") == store.join(store.join(base, "a/"), "/b", "c")
    assert store.join(base) == base
    path = store.join(base, "x", "y.bin")
    store.write(path, b"1")
    assert [info.path for info in store.list(store.join(base, "x"))] == [path]


@given(
    content=st.binary(min_size=0, max_size=3000),
    ranges=st.lists(
        st.tuples(st.integers(0, 3100), st.integers(0, 400)),
        min_size=0,
        max_size=25,
    ),
    gap=st.sampled_from([0, 1, 64, LOCAL_COALESCE_GAP]),
)
def test_read_ranges_matches_slices(new_base: NewBase, content: bytes, ranges: list, gap: int) -> None:
    shared, base = new_base()
    store = copy.copy(shared)
    store.coalesce_gap = gap
    path = store.join(base, "f")
    store.write(path, content)
    got = store.read_ranges(path, ranges)
    assert [bytes(view) for view in got] == [content[s : s + n] for s, n in ranges]
    reader = store.open_ranges(path)
    try:
        for _ in range(2):  # the second call reuses the local reader's open descriptor
            got = reader.read_ranges(ranges)
            assert [bytes(view) for view in got] == [content[s : s + n] for s, n in ranges]
    finally:
        reader.close()


def test_open_ranges_missing_file_and_bad_ranges(new_base: NewBase) -> None:
    store, base = new_base()
    path = store.join(base, "f")
    reader = store.open_ranges(path)
    with pytest.raises(FileNotFoundError):
        reader.read_ranges([(0, 4)])
    store.write(path, b"0123456789")
    assert [bytes(v) for v in reader.read_ranges([(8, 10), (0, 0), (50, 1)])] == [b"89", b"", b""]
    with pytest.raises(ValueError):
        reader.read_ranges([(1, -1)])
    with pytest.raises(ValueError):
        reader.read_ranges([(0, 1), (-1, 1)])
    reader.close()


def _open_fds() -> set[str]:
    return {os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd") if _readable_fd(fd)}


def _readable_fd(fd: str) -> bool:
    try:
        os.readlink(f"/proc/self/fd/{fd}")
        return True
    except OSError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_local_range_reader_keeps_one_descriptor_and_releases_it(tmp_path: os.PathLike[str]) -> None:
    import gc
    import pickle

    from lance_ops.io.local import LocalRangeReader

    store = LocalStore()
    path = os.path.join(str(tmp_path), "f")
    store.write(path, bytes(range(256)) * 4)
    reader = store.open_ranges(path)
    assert isinstance(reader, LocalRangeReader)
    assert path not in _open_fds()  # opened on the first read, not before
    assert bytes(reader.read_ranges([(1, 3)])[0]) == bytes([1, 2, 3])
    assert path in _open_fds()
    assert bytes(reader.read_ranges([(300, 2)])[0]) == bytes([44, 45])
    assert sorted(_open_fds()).count(path) == 1  # one descriptor for both reads
    clone = pickle.loads(pickle.dumps(reader))  # pickles as store + path, no descriptor
    assert bytes(clone.read_ranges([(1, 3)])[0]) == bytes([1, 2, 3])
    clone.close()
    reader.close()
    assert path not in _open_fds()
    assert bytes(reader.read_ranges([(1, 3)])[0]) == bytes([1, 2, 3])  # reopens on demand
    del reader
    gc.collect()
    assert path not in _open_fds()  # closed when collected


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_local_range_readers_hold_a_bounded_number_of_descriptors(
    tmp_path: os.PathLike[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from lance_ops.io import local

    monkeypatch.setattr(local, "MAX_OPEN_READERS", 3)
    store = LocalStore()
    paths = [os.path.join(str(tmp_path), f"f{i}") for i in range(6)]
    for i, path in enumerate(paths):
        store.write(path, bytes([i]) * 10)
    readers = [store.open_ranges(path) for path in paths]
    for i, reader in enumerate(readers):
        assert bytes(reader.read_ranges([(0, 2)])[0]) == bytes([i, i])
    assert len(_open_fds() & set(paths)) == 3  # the three oldest gave theirs back
    for i, reader in enumerate(readers):  # and reopen when read again
        assert bytes(reader.read_ranges([(5, 1)])[0]) == bytes([i])
    for reader in readers:
        reader.close()
    assert not _open_fds() & set(paths)


def test_local_store_subclass_reading_its_own_way_gets_a_forwarding_reader(tmp_path: os.PathLike) -> None:
    calls = []

    class Counting(LocalStore):
        def _read_spans(self, path: str, spans: list[tuple[int, int]]) -> list[memoryview]:  # type: ignore[override]
            calls.append(spans)
            return super()._read_spans(path, spans)

    store = Counting()
    path = os.path.join(str(tmp_path), "f")
    store.write(path, b"abcdef")
    assert bytes(store.open_ranges(path).read_ranges([(2, 2)])[0]) == b"cd"
    assert calls == [[(2, 2)]]


def test_read_ranges_overlapping_and_duplicate(new_base: NewBase) -> None:
    store, base = new_base()
    content = _payload(100_000, 7)
    path = store.join(base, "f")
    store.write(path, content)
    ranges = [(500, 1000), (0, 10), (600, 10), (500, 1000), (99_990, 100), (40_000, 0), (1400, 50)]
    got = store.read_ranges(path, ranges)
    assert [bytes(view) for view in got] == [content[s : s + n] for s, n in ranges]
    assert store.read_ranges(path, []) == []


class _CountingStore(MemoryStore):
    """Counts the span reads issued by read_ranges."""

    def __init__(self, gap: int) -> None:
        super().__init__()
        self.coalesce_gap = gap
        self.spans: list[tuple[int, int]] = []

    def _read_spans(self, path: str, spans: list[tuple[int, int]]) -> list[memoryview]:
        self.spans.extend(spans)
        return super()._read_spans(path, spans)


def test_read_ranges_coalesces_nearby_ranges() -> None:
    store = _CountingStore(gap=100)
    path = f"test-io/{uuid.uuid4().hex}/f"
    store.write(path, _payload(10_000))
    store.read_ranges(path, [(5000, 10), (0, 10), (110, 10), (5005, 100), (3000, 0)])
    assert store.spans == [(0, 120), (5000, 105)]
    store.spans.clear()
    store.read_ranges(path, [(0, 0), (9000, 0)])
    assert store.spans == []


@given(
    ranges=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 500)), max_size=40),
    gap=st.integers(0, 2000),
)
def test_plan_ranges_properties(ranges: list, gap: int) -> None:
    plan = plan_ranges(ranges, gap)
    starts, ends = plan.span_starts, plan.span_ends
    assert (starts < ends).all()
    assert (starts[1:] > ends[:-1] + gap).all()
    for i, (start, length) in enumerate(ranges):
        span = plan.owner[i]
        if length == 0:
            assert span == -1
        else:
            assert starts[span] <= start and start + length <= ends[span]
    nonempty = [(s, s + n, plan.owner[i]) for i, (s, n) in enumerate(ranges) if n]
    for k in range(len(starts)):
        mine = [(s, e) for s, e, owner in nonempty if owner == k]
        assert min(s for s, _ in mine) == starts[k] and max(e for _, e in mine) == ends[k]


@given(
    ranges=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 500)), max_size=10),
    gap=st.integers(0, 2000),
)
def test_few_ranges_are_planned_as_the_vectorised_plan_does(ranges: list, gap: int) -> None:
    few, many = _plan_few(ranges, gap), _plan_many(ranges, gap)
    for name in ("starts", "lengths", "span_starts", "span_ends", "owner"):
        got, want = getattr(few, name), getattr(many, name)
        assert got.dtype == want.dtype and got.tolist() == want.tolist(), name
    as_array = plan_ranges(np.array(ranges, dtype=np.int64).reshape(-1, 2), gap)
    assert as_array.owner.tolist() == many.owner.tolist() and as_array.spans == many.spans


def test_put_if_absent_basic(new_base: NewBase) -> None:
    store, base = new_base()
    path = store.join(base, "_versions", "1.manifest")
    assert store.put_if_absent(path, b"first")
    assert not store.put_if_absent(path, b"second")
    assert store.read(path) == b"first"
    assert [info.path for info in store.list(store.join(base, "_versions"))] == [path]


def _race_put_if_absent(store: ObjectStore, path: str, writers: int) -> list[bool]:
    """``writers`` threads released together, each trying to create ``path`` with its own payload."""
    barrier = threading.Barrier(writers)
    results = [False] * writers

    def attempt(i: int) -> None:
        payload = _payload(20_000, i)
        barrier.wait()
        results[i] = store.put_if_absent(path, payload)

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def test_put_if_absent_race_has_one_winner(new_base: NewBase) -> None:
    store, base = new_base()
    for round_ in range(10):
        path = store.join(base, f"{round_}.manifest")
        results = _race_put_if_absent(store, path, writers=8)
        assert sum(results) == 1
        assert store.read(path) == _payload(20_000, results.index(True))
    assert len(store.list(base)) == 10


def test_open_output_appears_on_close(new_base: NewBase) -> None:
    store, base = new_base()
    path = store.join(base, "data", "f.lance")
    out = store.open_output(path)
    out.write(b"abc")
    out.write(bytearray(b"de"))
    out.write(memoryview(np.arange(3, dtype=np.int32)))
    assert out.tell() == 17
    assert not store.exists(path)
    assert store.list(store.join(base, "data")) == []
    out.close()
    out.close()
    assert store.read(path) == b"abcde" + np.arange(3, dtype=np.int32).tobytes()
    with pytest.raises(ValueError):
        out.write(b"late")


def test_open_output_replaces_whole(new_base: NewBase) -> None:
    store, base = new_base()
    path = store.join(base, "f")
    store.write(path, b"old")
    with store.open_output(path) as out:
        out.write(b"new contents")
        assert store.read(path) == b"old"
    assert store.read(path) == b"new contents"


def test_open_output_error_leaves_nothing(new_base: NewBase) -> None:
    store, base = new_base()
    path = store.join(base, "f")
    with pytest.raises(RuntimeError), store.open_output(path) as out:
        out.write(b"partial")
        raise RuntimeError("boom")
    assert not store.exists(path)
    out = store.open_output(path)
    out.write(b"x")
    out.abort()
    assert not store.exists(path)
    assert store.list(base) == []


def test_local_leaves_no_temp_files(tmp_path: os.PathLike[str]) -> None:
    store, base = object_store(tmp_path)
    path = store.join(base, "m")
    assert store.put_if_absent(path, b"1")
    assert not store.put_if_absent(path, b"2")
    store.write(path, b"3")
    with pytest.raises(KeyError), store.open_output(store.join(base, "n")) as out:
        out.write(b"x")
        raise KeyError
    assert sorted(os.listdir(base)) == ["m"]
    assert not any(name.endswith(TEMP_SUFFIX) for name in os.listdir(base))


def test_memory_stores_are_per_opening() -> None:
    """As pylance's: each opening of a memory:// URI is a new, empty store; a store keeps its files."""
    path = f"test-io/{uuid.uuid4().hex}/kept"
    store, store_path = object_store(f"memory://{path}")
    store.write(store_path, b"seen by this store")
    assert store.read(store_path) == b"seen by this store" and store_path == path
    again, _ = object_store(f"memory://{path}")
    assert again is not store and not again.exists(path) and again.walk("") == []
    assert not MemoryStore().exists(path)


def test_fsspec_store_from_uri_passes_storage_options(tmp_path: os.PathLike[str]) -> None:
    store, path = FsspecStore.from_uri(f"local://{tmp_path}", {"auto_mkdir": True})
    assert isinstance(store, FsspecStore) and store.fs.auto_mkdir
    store.write(store.join(path, "d", "f"), b"ok")
    assert store.read(store.join(path, "d", "f")) == b"ok"


def test_s3_stores_keep_connections_for_the_requests_in_flight() -> None:
    """botocore's pool of 10 connections would queue a scan's requests ahead: 64 unless the options
    say otherwise (no request is made here)."""
    pytest.importorskip("s3fs")
    options = {"aws_access_key_id": "k", "aws_secret_access_key": "s", "aws_region": "us-east-1"}
    store, _ = FsspecStore.from_uri("s3://bucket/ds.lance", {**options, "skip_instance_cache": True})
    assert store.fs.config_kwargs["max_pool_connections"] == 64
    assert store.fs.config_kwargs["retries"]["total_max_attempts"] == 1  # defaults kept side by side
    given = {**options, "skip_instance_cache": True, "config_kwargs": {"max_pool_connections": 5}}
    store, _ = FsspecStore.from_uri("s3://bucket/ds.lance", given)
    assert store.fs.config_kwargs["max_pool_connections"] == 5


class _NoExclusiveCreate(LocalFileSystem):
    """fsspec local filesystem pretending not to know mode "xb", like some remote drivers."""

    protocol = ("noxb",)

    def _open(self, path: str, mode: str = "rb", **kwargs: object) -> object:
        if "x" in mode:
            raise NotImplementedError("File mode not supported")
        return super()._open(path, mode=mode, **kwargs)


def test_fsspec_put_if_absent_without_exclusive_create_falls_back(
    tmp_path: os.PathLike[str], caplog: pytest.LogCaptureFixture
) -> None:
    store = FsspecStore(_NoExclusiveCreate())
    path = store.join(str(tmp_path), "v", "1.manifest")
    with pytest.raises(ConditionalPutUnsupportedError, match="SqliteManifestStore"):
        store.put_if_absent(path, b"one")
    assert not store.exists(path)
    with caplog.at_level(logging.WARNING, logger="lance_ops.io.fsspec_store"):
        assert store.put_if_absent(path, b"one", require_atomic=False)
    assert "not atomic" in caplog.text
    assert not store.put_if_absent(path, b"two", require_atomic=False)
    assert store.read(path) == b"one"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_local_range_reader_works_across_fork(tmp_path: os.PathLike) -> None:
    store = LocalStore()
    path = os.path.join(str(tmp_path), "f")
    store.write(path, bytes(range(200)))
    reader = store.open_ranges(path)
    assert bytes(reader.read_ranges([(10, 2)])[0]) == bytes([10, 11])  # descriptor open before the fork
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit status
        ok = bytes(reader.read_ranges([(100, 3)])[0]) == bytes([100, 101, 102])
        reader.close()
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    # the child closed its own copy of the descriptor, not the parent's
    assert bytes(reader.read_ranges([(150, 2), (0, 1)])[0]) == bytes([150, 151])
    reader.close()


def test_patched_local_read_spans_sees_range_reader_reads(
    tmp_path: os.PathLike, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = []
    original = LocalStore._read_spans

    def counting(self: LocalStore, path: str, spans: list[tuple[int, int]]) -> list[memoryview]:
        seen.append(list(spans))
        return original(self, path, spans)

    monkeypatch.setattr(LocalStore, "_read_spans", counting)
    store = LocalStore()
    path = os.path.join(str(tmp_path), "f")
    store.write(path, b"abcdef")
    assert bytes(store.open_ranges(path).read_ranges([(1, 3)])[0]) == b"bcd"
    assert seen == [[(1, 3)]]
