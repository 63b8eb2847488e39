"""Request economy of remote stores, without a server: small files are read whole once and written
in one ``pipe_file``; larger ones stream; a scan or take fetches the small files it needs together
(fsspec's memory filesystem stands in for S3)."""

from __future__ import annotations

import pickle
import threading
import time
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from fsspec.implementations.memory import MemoryFileSystem
from hypothesis import given, settings
from hypothesis import strategies as st

import lance_ops
from lance_ops.errors import MissingFileError
from lance_ops.file.reader import LanceFileReader, V2FileReader
from lance_ops.file.writer import LanceFileWriter
from lance_ops.fragment.options import ScanOptions
from lance_ops.fragment.reader import VersionFiles
from lance_ops.fragment.scan import scan_batches, take
from lance_ops.io.base import BufferedRanges, RangeReader
from lance_ops.io.context import StorageContext
from lance_ops.io.fsspec_store import FsspecOutput, FsspecStore
from lance_ops.io.memory import MemoryStore
from lance_ops.table.commit import load_manifest


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
        self.gets: list[str] = []  # the paths of the whole-file reads ("get"), in any order
        self._inner = False

    def pipe_file(self, path: str, value: bytes, *args: Any, **kwargs: Any) -> None:
        self.calls.append("pipe")
        self._inner = True  # fsspec's pipe_file opens a file itself: not a call of ours
        try:
            super().pipe_file(path, value, *args, **kwargs)
        finally:
            self._inner = False

    def _open(self, path: str, mode: str = "rb", *args: Any, **kwargs: Any) -> Any:
        if not self._inner:
            self.calls.append(f"open {mode}")
        return super()._open(path, mode, *args, **kwargs)

    def cat_ranges(self, paths: list[str], *args: Any, **kwargs: Any) -> list[bytes]:
        self.calls.append(f"ranges {len(paths)}")
        return super().cat_ranges(paths, *args, **kwargs)

    def cat(self, path: Any, *args: Any, **kwargs: Any) -> Any:
        self.calls.append(f"cat {len(path)}")  # several files at once (one call, concurrent on s3fs)
        self._inner = True
        try:
            return super().cat(path, *args, **kwargs)
        finally:
            self._inner = False

    def cat_file(self, path: str, *args: Any, **kwargs: Any) -> bytes:
        if not self._inner:
            self.calls.append("get" if kwargs.get("start") is None else "range")
            if kwargs.get("start") is None:
                self.gets.append(path)
        return super().cat_file(path, *args, **kwargs)


def _data_paths(root: str, files: VersionFiles) -> list[str]:
    return sorted(f"{root}/data/{fragment.files[0].path}" for fragment in files.manifest.fragments)


def _data_gets(root: str, fs: _Counting) -> list[str]:
    """The whole-file reads of data files (each its own request, fetched ahead on threads)."""
    return sorted(path for path in fs.gets if path.startswith(f"{root}/data/"))


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
    assert fs.calls == ["get"]  # one plain read of the whole file


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


def _remote_copy(tmp_path: Any, fragments: int) -> tuple[VersionFiles, _Counting, pa.Table]:
    """A dataset of ``fragments`` small fragments written by lance_ops (and read by pylance), copied
    onto the counting filesystem, opened there as a remote store would be."""
    import lance

    table = pa.table(
        {"id": pa.array(range(40 * fragments), pa.int64()), "name": [f"n{i}" for i in range(40 * fragments)]}
    )
    local = tmp_path / "ds.lance"
    lance_ops.write_dataset(table, str(local), max_rows_per_file=40)
    assert lance.dataset(str(local)).to_table().equals(table)
    fs = _Counting(skip_instance_cache=True)
    return _opened_on(fs, local, "/ds"), fs, table


def _opened_on(fs: _Counting, local: Any, root: str) -> VersionFiles:
    """The dataset at ``local`` copied onto ``fs`` under ``root`` and opened there, as a remote
    store would open it; the calls made so far forgotten."""
    for path in local.rglob("*"):
        if path.is_file():
            fs.pipe_file(f"{root}/{path.relative_to(local).as_posix()}", path.read_bytes())
    store = FsspecStore(fs)
    files = VersionFiles(
        StorageContext(store, root, f"{fs.protocol}://{root}"), load_manifest(store, root).manifest
    )
    fs.calls.clear()
    return files


def test_scan_and_take_fetch_small_remote_files_together(tmp_path: Any) -> None:
    files, fs, table = _remote_copy(tmp_path, fragments=5)
    options = ScanOptions(columns=("id", "name"))
    assert pa.Table.from_batches(list(scan_batches(files, options))).equals(table)
    assert fs.calls == ["cat 5"]  # every data file in one call, none again while reading
    fs.calls.clear()
    assert pa.Table.from_batches(list(scan_batches(files, options))).equals(table)
    assert fs.calls == []  # the handle keeps what it read

    files, fs, table = _remote_copy(tmp_path / "again", fragments=5)
    assert take(files, np.array([3, 170, 20]), ("id",)).column("id").to_pylist() == [3, 170, 20]
    assert fs.calls == ["cat 2"]  # the two fragments holding those rows
    fs.calls.clear()
    # A limited scan reads only what it needs, one file at a time.
    assert pa.Table.from_batches(list(scan_batches(files, options, limit=10))).num_rows == 10
    assert fs.calls == []  # fragment 0 is open already


def test_prefetch_leaves_a_missing_file_to_be_named(tmp_path: Any) -> None:
    files, fs, _ = _remote_copy(tmp_path, fragments=3)
    victim = files.manifest.fragments[1].files[0].path
    fs.rm_file(f"/ds/data/{victim}")
    with pytest.raises(MissingFileError, match=victim):
        list(scan_batches(files, ScanOptions(columns=("id",))))


def _remote_dataset(
    tmp_path: Any, fragments: int, rows: int, version: str = "2.1"
) -> tuple[str, VersionFiles, _Counting, pa.Table]:
    """A dataset written by pylance of ``fragments`` fragments of ``rows`` rows whose data files are
    larger than a remote store reads whole when opening (incompressible strings), every third row
    of the even fragments deleted, copied onto the counting filesystem."""
    import lance

    rng = np.random.default_rng(7)
    n = fragments * rows
    words = rng.integers(0, 2**62, (n, 4), dtype=np.int64)
    table = pa.table({"id": pa.array(range(n), pa.int64()), "text": [w.tobytes().hex() for w in words]})
    local = tmp_path / "ds.lance"
    lance.write_dataset(table, str(local), max_rows_per_file=rows, data_storage_version=version)
    lance.dataset(str(local)).delete(f"id % 3 = 0 AND (id / {rows}) % 2 = 0")
    fs = _Counting(skip_instance_cache=True)
    root = f"/{tmp_path.name}"
    return root, _opened_on(fs, local, root), fs, lance.dataset(str(local)).to_table()


def _check_compaction_requests(root: str, files: VersionFiles, fs: _Counting, deletion_files: int) -> None:
    """What a compaction of every fragment asked the remote store for: the deletion files in one
    call, each data file in one request; then only the commit's own reads (the manifest and
    version listing: whole small files). No ranged read at all."""
    reads = [call for call in fs.calls if not call.startswith(("pipe", "open"))]
    assert reads[0] == f"cat {deletion_files}" and set(reads[1:]) <= {"get"}, reads
    assert _data_gets(root, fs) == _data_paths(root, files)
    assert len(reads) - 1 - len(_data_gets(root, fs)) <= 4, reads


def _read_back_by_pylance(tmp_path: Any, root: str, fs: _Counting) -> Any:
    """What ``fs`` holds under ``root``, copied to local disk and opened by pylance."""
    import lance

    copy = tmp_path / "copy.lance"
    for path in fs.find(root):
        target = copy / path[len(root) + 1 :]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(fs.cat_file(path))
    return lance.dataset(str(copy))


def test_compaction_fetches_remote_data_and_deletion_files_together(tmp_path: Any) -> None:
    """A compaction reads every byte of the data files it rewrites: on a remote store it fetches
    them whole, each in one request, several ahead on threads (concurrent requests), and the
    deletion files of its fragments together, instead of a footer and then page after page of
    each file, one request at a time."""
    from lance_ops.ops.commit import CommitOptions
    from lance_ops.ops.compaction import CompactionOptions, compact

    root, files, fs, expected = _remote_dataset(tmp_path, fragments=6, rows=3000)
    sizes = [f.files[0].file_size_bytes for f in files.manifest.fragments]
    assert min(sizes) > files.store.whole_file_read_size  # opening one would not read it whole
    outcome = compact(files, CompactionOptions(num_threads=1), CommitOptions())
    assert outcome is not None
    _check_compaction_requests(root, files, fs, deletion_files=3)
    # What was committed is read back by pylance, the same rows.
    compacted = _read_back_by_pylance(tmp_path, root, fs)
    assert len(compacted.get_fragments()) == 1
    assert compacted.to_table().sort_by("id").equals(expected.sort_by("id"))


def test_compaction_names_a_missing_remote_deletion_file(tmp_path: Any) -> None:
    from lance_ops.ops.commit import CommitOptions
    from lance_ops.ops.compaction import CompactionOptions, compact

    root, files, fs, _ = _remote_dataset(tmp_path, fragments=4, rows=3000)
    victim = next(f for f in files.manifest.fragments if f.deletion_file is not None)
    name = victim.deletion_file.file_name(victim.id)  # type: ignore[union-attr]
    fs.rm_file(f"{root}/_deletions/{name}")
    with pytest.raises(MissingFileError, match=name):
        compact(files, CompactionOptions(num_threads=1), CommitOptions())
    assert load_manifest(files.store, root).manifest.version == files.manifest.version  # nothing committed


def test_scan_reads_remote_deletion_files_together(tmp_path: Any) -> None:
    _, files, fs, expected = _remote_dataset(tmp_path, fragments=6, rows=500)
    options = ScanOptions(columns=("id", "text"))
    got = pa.Table.from_batches(list(scan_batches(files, options)))
    assert got.equals(expected)
    # The 3 deletion files in one call before any fragment is read, then the 6 data files in one.
    assert fs.calls[:2] == ["cat 3", "cat 6"], fs.calls
    assert not [call for call in fs.calls if call.startswith(("get", "range"))], fs.calls


def test_compaction_fetches_older_remote_files_whole_too(tmp_path: Any) -> None:
    """2.0 files are not decoded across files, but a compaction still reads all of each: on a remote
    store they are fetched whole together too, held while read (no ranged read of any), and the
    result is still what pylance reads."""
    from lance_ops.ops.commit import CommitOptions
    from lance_ops.ops.compaction import CompactionOptions, compact

    root, files, fs, expected = _remote_dataset(tmp_path, fragments=4, rows=3000, version="2.0")
    assert compact(files, CompactionOptions(num_threads=1), CommitOptions()) is not None
    _check_compaction_requests(root, files, fs, deletion_files=2)
    assert _read_back_by_pylance(tmp_path, root, fs).to_table().sort_by("id").equals(expected.sort_by("id"))


def test_remote_scan_fetches_the_pages_of_a_read_together(tmp_path: Any) -> None:
    """A full scan fetches remote data files whole, each in one request, several ahead of the one
    being read (concurrent requests on threads), and holds them only while it reads them. A
    projected scan reads a row range's pages, of every column it reads, in one request batch: not
    column by column."""
    root, files, fs, expected = _remote_dataset(tmp_path, fragments=4, rows=3000)
    got = pa.Table.from_batches(list(scan_batches(files, ScanOptions(columns=("id", "text")))))
    assert got.equals(expected)
    assert sorted(fs.calls) == ["cat 2"] + ["get"] * 4, fs.calls  # the deletion files together
    assert _data_gets(root, fs) == _data_paths(root, files)
    assert not files._held  # released once read
    fs.calls.clear()
    projected = pa.Table.from_batches(list(scan_batches(files, ScanOptions(columns=("text",)))))
    assert projected.column("text").equals(expected.column("text"))
    ranged = [call for call in fs.calls if call.startswith("ranges")]
    assert len(ranged) == 8, fs.calls  # per file: its tail when opened, then one batch of pages


@given(
    spans=st.lists(st.tuples(st.integers(0, 900), st.integers(0, 100)), max_size=8),
    requests=st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 60)), max_size=12),
)
@settings(max_examples=200, deadline=None)
def test_fetched_ahead_answers_as_the_file(
    spans: list[tuple[int, int]], requests: list[tuple[int, int]]
) -> None:
    """Requests held by a span fetched ahead are cut from it; the others go to the file; either
    way the bytes are the file's."""
    from lance_ops.file.reader import FetchedAhead

    data = bytes(np.random.default_rng(0).integers(0, 256, 1100, dtype=np.uint8))
    asked: list[tuple[int, int]] = []

    def fetch(ranges: Any) -> list[memoryview]:
        asked.extend(ranges)
        return [memoryview(data)[start : start + length] for start, length in ranges]

    ahead = FetchedAhead(fetch, spans, fetch(spans))
    asked.clear()
    assert [bytes(b) for b in ahead(requests)] == [data[s : s + n] for s, n in requests]
    ends = sorted((a, a + n) for a, n in spans if n)
    if all(end <= start for (_, end), (start, _) in zip(ends, ends[1:], strict=False)):
        # Disjoint spans (as a page's buffers are): only what none of them holds is asked for.
        held = [r for r in requests if not r[1] or any(a <= r[0] and r[0] + r[1] <= a + n for a, n in spans)]
        assert len(asked) == len(requests) - len(held)


def test_remote_scan_held_files_released_and_missing_ones_named(tmp_path: Any) -> None:
    root, files, fs, _ = _remote_dataset(tmp_path, fragments=4, rows=3000)
    batches = scan_batches(files, ScanOptions(columns=("id", "text"), batch_size=100))
    next(batches)
    assert files._held  # the window's files, while its fragments are read
    batches.close()  # the caller stops early
    assert not files._held
    victim = files.manifest.fragments[2].files[0].path
    fs.rm_file(f"{root}/data/{victim}")
    with pytest.raises(MissingFileError, match=victim):
        list(scan_batches(files, ScanOptions(columns=("id", "text"))))
    assert not files._held


def test_remote_take_fetches_no_whole_files(tmp_path: Any) -> None:
    """A take reads the chunks holding its rows: the files a full scan would fetch whole are not."""
    _, files, fs, expected = _remote_dataset(tmp_path, fragments=4, rows=3000)
    rows = np.array([5, 2500, 7000, 9999])
    assert take(files, rows, ("id", "text")).equals(expected.take(pa.array(rows)))
    assert not [call for call in fs.calls if call.startswith("cat") and call != "cat 2"], fs.calls


class _Slow(_Counting):
    """A counting filesystem whose whole-file reads take a while, recording how many overlap."""

    protocol = "slow"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.active = self.most = 0
        self.lock = threading.Lock()

    def cat_file(self, path: str, *args: Any, **kwargs: Any) -> bytes:
        with self.lock:
            self.active += 1
            self.most = max(self.most, self.active)
        try:
            time.sleep(0.02)
            return super().cat_file(path, *args, **kwargs)
        finally:
            with self.lock:
                self.active -= 1


def test_remote_scan_fetches_ahead_within_its_budget(tmp_path: Any) -> None:
    """The files of the fragments ahead are requested while one is read (several requests in
    flight at once), never more than the byte budget of them fetched and not yet read (beyond
    the next fragment's own), and each fragment's file is held only while it is read."""
    root, _, _, _ = _remote_dataset(tmp_path, fragments=8, rows=3000)
    fs = _Slow(skip_instance_cache=True)  # the same files (memory filesystems share their store)
    store = FsspecStore(fs)
    files = VersionFiles(StorageContext(store, root, f"slow://{root}"), load_manifest(store, root).manifest)
    fs.calls.clear()
    fs.gets.clear()
    fragments = files.fragments()
    size = max(f.metadata.files[0].file_size_bytes for f in fragments)
    seen = []
    for i, fragment in enumerate(files.held_whole(fragments, ("id", "text"), budget=3 * size)):
        # Fetched so far: this fragment's file and at most the budget's worth ahead of it.
        assert len(_data_gets(root, fs)) <= i + 1 + 3
        assert list(files._held) == [files.file_uri(fragment.metadata.files[0])]
        seen.append(fragment.read(("id", "text"), np.arange(fragment.physical_rows)))
    assert not files._held
    assert fs.most >= 2  # requests overlapped
    assert _data_gets(root, fs) == _data_paths(root, files)  # each file once
    assert len(fs.calls) == 8, fs.calls  # and nothing else: no footer or page reads
    assert pa.concat_tables(seen).column("id").to_pylist() == list(range(8 * 3000))


class _CountingRequests(_Counting):
    """:class:`_Counting` whose ``cat_ranges`` counts as one call of its ranges (the ranged reads
    fsspec's memory filesystem makes for it are not counted again): ``ranges N`` is N requests
    sent together (concurrent on s3fs)."""

    protocol = "counting-requests"

    def cat_ranges(self, paths: list[str], *args: Any, **kwargs: Any) -> list[bytes]:
        self.calls.append(f"ranges {len(paths)}")
        self._inner = True
        try:
            return MemoryFileSystem.cat_ranges(self, paths, *args, **kwargs)
        finally:
            self._inner = False


def _remote_take_dataset(
    tmp_path: Any, table: pa.Table, rows: int, version: str = "2.1", deleted: str | None = None
) -> tuple[VersionFiles, _CountingRequests, Any]:
    """``table`` written by pylance in fragments of ``rows`` rows (``deleted``: rows then deleted),
    copied onto the counting filesystem; the dataset opened there, and pylance's on local disk."""
    import lance

    local = tmp_path / "ds.lance"
    lance.write_dataset(table, str(local), max_rows_per_file=rows, data_storage_version=version)
    theirs = lance.dataset(str(local))
    if deleted is not None:
        theirs.delete(deleted)
    fs = _CountingRequests(skip_instance_cache=True)
    return _opened_on(fs, local, f"/{tmp_path.name}"), fs, lance.dataset(str(local))


def _mixed_table(n: int) -> pa.Table:
    """Incompressible strings (files larger than a remote store reads whole), lists, a struct, and
    an all-null column; nulls every seventh row."""
    rng = np.random.default_rng(11)
    words = rng.integers(0, 2**62, (n, 8), dtype=np.int64)
    ids = np.arange(n, dtype=np.int64)
    lists = [None if i % 7 == 3 else list(range(i % 5)) for i in range(n)]
    return pa.table(
        {
            "id": pa.array(ids),
            "text": pa.array([None if i % 7 == 0 else words[i].tobytes().hex() for i in range(n)]),
            "tags": pa.array(lists, pa.list_(pa.int64())),
            "point": pa.StructArray.from_arrays(
                [pa.array(ids * 2.5), pa.array([f"p{i}" for i in ids])], names=["x", "label"]
            ),
            "nothing": pa.nulls(n, pa.int32()),
        }
    )


def _general_take(lance_ds: Any, rows: np.ndarray, columns: list[str]) -> pa.Table:
    """lance_ops' take of the same dataset on local disk (no request batching there)."""
    return lance_ops.dataset(lance_ds.uri).take(rows, columns=columns)


def test_remote_take_reads_tails_together_then_every_page_in_one_batch(tmp_path: Any) -> None:
    """A take of rows of four fragments (two with deletion files) of files too large to read whole
    costs three request batches: the deletion files, the four tails, and one span per file
    holding every page the take reads of both columns. A take on the warm handle: one batch."""
    table = _mixed_table(12_000)
    files, fs, theirs = _remote_take_dataset(tmp_path, table, 3000, deleted="id % 3 = 0 AND id % 2000 < 1000")
    rows = np.array([5, 2500, 3001, 7000, 7001, 7999])
    expected = theirs.take(rows, columns=["id", "text"])
    assert take(files, rows, ("id", "text")).equals(expected)
    assert fs.calls == ["cat 4", "ranges 4", "ranges 4"], fs.calls
    fs.calls.clear()
    assert take(files, rows, ("text", "id")).equals(expected.select(["text", "id"]))
    assert fs.calls == ["ranges 4"], fs.calls
    # Nothing fetched ahead stays with the readers once the take is done.
    assert all(type(reader._ranges) is RangeReader for reader in files._readers.values())


def test_remote_take_of_one_fragment_costs_a_tail_and_one_batch(tmp_path: Any) -> None:
    table = _mixed_table(6000)
    files, fs, theirs = _remote_take_dataset(tmp_path, table, 3000)
    columns = ["id", "text", "tags", "point", "nothing"]
    for rows in (np.array([3100]), np.array([3000, 4023, 4024, 4025, 5999])):
        fs.calls.clear()
        files._readers.clear()
        got = take(files, rows, tuple(columns))
        assert got.equals(theirs.take(rows, columns=columns))
        assert got.equals(_general_take(theirs, rows, columns))
        assert fs.calls == ["ranges 1", "ranges 1"], fs.calls


@pytest.mark.parametrize("rows_per_file", [1023, 1024, 1025])
def test_remote_take_of_many_fragments_and_columns_equals_pylance(tmp_path: Any, rows_per_file: int) -> None:
    table = _mixed_table(8 * rows_per_file + 3)
    files, fs, theirs = _remote_take_dataset(tmp_path, table, rows_per_file, deleted="id % 5 = 1")
    live = theirs.count_rows()
    rows = np.unique(np.r_[0, 1, live - 1, np.random.default_rng(3).integers(0, live, 60)])
    columns = ["point", "id", "tags", "nothing", "text"]
    got = take(files, rows, tuple(columns))
    assert got.equals(theirs.take(rows, columns=columns))
    assert got.equals(_general_take(theirs, rows, columns))
    fragments = files.manifest.fragments
    with_deletions = sum(f.deletion_file is not None for f in fragments)
    # The deletion files, the tails (the last, small, file whole), the pages of the others.
    assert fs.calls == [f"cat {with_deletions}", f"ranges {len(fragments)}", f"ranges {len(fragments) - 1}"]
    assert take(files, np.zeros(0, np.int64), tuple(columns)).num_rows == 0


def test_remote_take_of_2_0_files_falls_back_to_reads_on_demand(tmp_path: Any) -> None:
    """2.0 files (nested columns' pages count items, not rows) are not fetched ahead: their tails
    are read together, their pages as the decoders ask; the rows are the same."""
    table = _mixed_table(6000).select(["id", "text", "tags"])
    files, fs, theirs = _remote_take_dataset(tmp_path, table, 3000, version="2.0")
    rows = np.array([1, 2999, 3000, 5998])
    got = take(files, rows, ("id", "text", "tags"))
    assert got.equals(theirs.take(rows, columns=["id", "text", "tags"]))
    assert fs.calls[0] == "ranges 2" and "ranges 2" not in fs.calls[1:], fs.calls


def test_remote_take_reads_chunk_tables_then_chunks_of_large_pages(tmp_path: Any) -> None:
    """Pages larger than a request is worth (the store's coalesce gap) are not fetched whole: the
    chunk tables of those not loaded yet come in one batch (with the small pages), then the
    chunks holding the rows in a second; once loaded, a take needs one batch."""
    table = _mixed_table(6000)
    files, fs, theirs = _remote_take_dataset(tmp_path, table, 3000)
    files.store.coalesce_gap = 1024
    rows = np.array([10, 3500])
    columns = ["id", "text", "tags"]
    expected = theirs.take(rows, columns=columns)
    assert take(files, rows, tuple(columns)).equals(expected)
    # The tails of two files; the chunk tables of the strings' pages; the chunks (and the
    # other pages, whose chunks are few bytes, whole).
    assert fs.calls == ["ranges 2", "ranges 2", "ranges 5"], fs.calls
    fs.calls.clear()
    assert take(files, rows, tuple(columns)).equals(expected)
    assert fs.calls == ["ranges 5"], fs.calls
    fs.calls.clear()
    assert take(files, np.array([5999]), tuple(columns)).equals(theirs.take([5999], columns=columns))
    assert len(fs.calls) == 1, fs.calls


def test_takes_overlapping_on_one_file_leave_its_reads_as_they_were(tmp_path: Any) -> None:
    """Two takes fetching ahead from one open file at once (threads), ending in either order:
    afterwards the file reads from the store again, nothing fetched ahead kept."""
    files, _, _ = _remote_take_dataset(tmp_path, _mixed_table(3000), 3000)
    reader = files.open_file(files.manifest.fragments[0].files[0])
    assert isinstance(reader, V2FileReader)
    base = reader._ranges
    spans = [(0, 10), (100, 10)]
    for first_out in (True, False):
        one = reader.serving(spans, base.read_ranges(spans))
        two = reader.serving(spans[:1], base.read_ranges(spans[:1]))
        one.__enter__()
        two.__enter__()
        assert bytes(reader._fetch([(100, 10)])[0]) == bytes(base.read_ranges([(100, 10)])[0])
        (one if first_out else two).__exit__(None, None, None)
        (two if first_out else one).__exit__(None, None, None)
        assert reader._ranges is base


def test_read_many_answers_as_read_ranges() -> None:
    fs = _CountingRequests(skip_instance_cache=True)
    store = FsspecStore(fs, coalesce_gap=4)
    memory = MemoryStore()
    for name, size in (("a", 100), ("b", 50), ("c", 0)):
        data = bytes(range(size))
        fs.pipe_file(f"/{name}", data)
        memory.write(name, data)
    fs.calls.clear()
    requests = [("a", [(10, 5), (0, 4), (90, 20), (60, 0)]), ("b", [(3, 3)]), ("a", [(50, 1)])]
    want = [[bytes(b) for b in memory.read_ranges(path, ranges)] for path, ranges in requests]
    for got in (store.read_many([(f"/{p}", r) for p, r in requests]), memory.read_many(requests)):
        assert [[bytes(b) for b in buffers] for buffers in got] == want
    assert fs.calls == ["ranges 5"], fs.calls  # spans of a: [0,15) [90,100), of b, of a again
    fs.calls.clear()
    assert [[bytes(b) for b in x] for x in store.read_many([("/a", [(1, 2)])])] == [[b"\x01\x02"]]
    assert store.read_many([("/a", [(5, 0)]), ("/b", [])]) == [[memoryview(b"")], []]
    with pytest.raises(FileNotFoundError):
        store.read_many([("/a", [(0, 1)]), ("/missing", [(0, 1)])])
