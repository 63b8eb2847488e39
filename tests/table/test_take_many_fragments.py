"""A positional take across many small fragments: the joined decode
(:func:`lance_ops.fragment.take.take_fragments`) against reading each fragment on its own, and
against pylance's take of the same dataset (written by lance_ops and by pylance)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import lance
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lance_ops
from lance_ops.encoding.structural import miniblock
from lance_ops.file import LanceFileWriter
from lance_ops.fragment import scan as scan_module
from lance_ops.fragment import take as take_module
from lance_ops.ops.commit import CommitOptions, commit
from lance_ops.table.transaction import Append

# Fragment sizes around the mini-block chunk sizes, and single rows.
SIZES = (1, 7, 1023, 1024, 1025, 2, 100, 1, 3)
COLUMNS = ("id", "f", "s", "cat", "tags", "st", "vec", "twice")


def _table(start: int, rows: int, version: str = "2.1") -> pa.Table:
    """``rows`` rows of ids from ``start``: nulls in every column that may hold them (2.0 files
    keep no struct validity)."""
    rng = np.random.default_rng(start + 7 * rows)
    ids = np.arange(start, start + rows, dtype=np.int64)
    f = pa.array(rng.random(rows), mask=rng.random(rows) < 0.2)
    words = np.array(["alpha", "", "beta gamma", "delta-epsilon-zeta", "η"])
    s = pa.array(words[rng.integers(0, len(words), rows)].tolist(), mask=rng.random(rows) < 0.1)
    cat = pa.array(np.array(["red", "green", "blue"])[rng.integers(0, 3, rows)].tolist())
    lengths = rng.integers(0, 4, rows)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    items = pa.array(
        rng.integers(-50, 50, int(offsets[-1])).astype(np.int32), mask=rng.random(int(offsets[-1])) < 0.1
    )
    tags = pa.ListArray.from_arrays(pa.array(offsets), items, mask=pa.array(rng.random(rows) < 0.15))
    struct = pa.StructArray.from_arrays(
        [pa.array(ids.astype(np.int32) % 97), pa.array([f"v{i % 13}" for i in ids.tolist()])],
        names=["a", "b"],
        mask=pa.array(rng.random(rows) < 0.1) if version != "2.0" else None,
    )
    # Small vectors: fixed-size lists in mini-block pages, whose values are decoded whole.
    vec = pa.FixedSizeListArray.from_arrays(pa.array(rng.random(rows * 8, dtype=np.float32)), 8)
    return pa.table({"id": ids, "f": f, "s": s, "cat": cat, "tags": tags, "st": struct, "vec": vec})


def _paged_fragment(uri: str, version: str, start: int, rows: int, name: str) -> None:
    """Append one fragment whose data file has several pages per column (a lance_ops file written
    in batches of 300 rows with no data cache), registered like the dataset's first fragment."""
    ds = lance_ops.dataset(uri)
    template = ds.manifest.fragments[-1]
    (data_file,) = template.files
    table = _table(start, rows).append_column("twice", pa.array(np.arange(start, start + rows) * 2))
    table = table.select(ds.schema.names).cast(ds.schema)
    path = os.path.join(uri, "data", name)
    writer = LanceFileWriter(path, ds.schema, version=version, data_cache_bytes=1)
    for batch in table.to_batches(max_chunksize=300):
        writer.write_batch(batch)
    writer.close()
    copy = replace(data_file, path=name, file_size_bytes=os.path.getsize(path))
    commit(
        uri,
        Append(
            (
                replace(
                    template,
                    id=0,
                    files=(copy,),
                    physical_rows=rows,
                    deletion_file=None,
                    row_ids=None,
                    last_updated_at_versions=None,
                    created_at_versions=None,
                ),
            )
        ),
        CommitOptions(),
    )


def _build(uri: str, writer: str, version: str, stable: bool) -> None:
    module = lance_ops if writer == "lance_ops" else lance
    start = 0
    for n, rows in enumerate(SIZES):
        mode = "create" if n == 0 else "append"
        extra = {"enable_stable_row_ids": True} if stable and n == 0 else {}
        module.write_dataset(
            _table(start, rows, version), uri, mode=mode, data_storage_version=version, **extra
        )
        start += rows
    # Every fragment gets a second data file; the fragments appended after hold it in their one file.
    module.dataset(uri).add_columns({"twice": "id * 2"})
    module.write_dataset(
        _table(start, 50, version).append_column("twice", pa.array(np.arange(start, start + 50) * 2)),
        uri,
        mode="append",
    )
    start += 50
    if version != "2.0":
        _paged_fragment(uri, version, start, 1700, "paged.lance")
        start += 1700
    module.dataset(uri).delete("id % 7 = 3 OR id = 0")


CASES = [
    ("lance_ops", "2.0", False),
    ("lance_ops", "2.1", False),
    ("lance_ops", "2.2", True),
    ("pylance", "2.0", False),
    ("pylance", "2.1", True),
    ("pylance", "2.2", False),
]


@pytest.fixture(scope="module", params=CASES, ids=["-".join(map(str, case)) for case in CASES])
def built(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    writer, version, stable = request.param
    uri = str(tmp_path_factory.mktemp("take") / "ds")
    _build(uri, writer, version, stable)
    return uri


@contextmanager
def _pages_by_chunks(on: bool) -> Iterator[None]:
    """With ``on``, a take finds each page's needed chunks (the path of large pages) instead of
    reading small pages whole."""
    saved = miniblock.TAKE_WHOLE_PAGE_BYTES
    miniblock.TAKE_WHOLE_PAGE_BYTES = -1 if on else saved
    try:
        yield
    finally:
        miniblock.TAKE_WHOLE_PAGE_BYTES = saved


@contextmanager
def _each_fragment_alone() -> Iterator[None]:
    """The general path: every fragment read by ``FragmentReader.read`` on its own."""
    saved = take_module.MIN_FRAGMENTS
    take_module.MIN_FRAGMENTS = 1 << 30
    try:
        yield
    finally:
        take_module.MIN_FRAGMENTS = saved


def _positions(total: int) -> st.SearchStrategy[list[int]]:
    edges = [0, 1, total - 1, 1023 % total, 1024 % total, 1025 % total]
    return st.lists(st.one_of(st.integers(0, total - 1), st.sampled_from(edges)), max_size=80)


@given(data=st.data())
def test_take_joined_equals_each_fragment_and_pylance(built: str, data: st.DataObject) -> None:
    ours = lance_ops.dataset(built)
    total = ours.count_rows()
    positions = data.draw(_positions(total), label="positions")
    columns = data.draw(
        st.lists(st.sampled_from(COLUMNS), min_size=1, max_size=len(COLUMNS), unique=True), label="columns"
    )
    with _pages_by_chunks(data.draw(st.booleans(), label="pages by chunks")):
        joined = ours.take(positions, columns=columns)
    with _each_fragment_alone():
        alone = lance_ops.dataset(built).take(positions, columns=columns)
    assert joined.equals(alone)
    theirs = lance.dataset(built).take(positions, columns=columns)
    assert joined.equals(theirs)


@given(data=st.data())
def test_take_with_row_ids_and_addresses(built: str, data: st.DataObject) -> None:
    ours = lance_ops.dataset(built)
    positions = data.draw(_positions(ours.count_rows()), label="positions")
    columns = data.draw(st.sampled_from([["_rowid", "id"], ["s", "_rowaddr", "_rowid"], ["_rowaddr"]]))
    joined = ours.take(positions, columns=columns)
    with _each_fragment_alone():
        alone = lance_ops.dataset(built).take(positions, columns=columns)
    assert joined.equals(alone)
    # The rows are the right ones: their ids follow the positions through a scan of the dataset.
    scanned = ours.to_table(columns=["id"], with_row_id=True, with_row_address=True)
    for name, source in (("_rowid", "_rowid"), ("_rowaddr", "_rowaddr")):
        if name in columns:
            assert (
                joined.column(name).to_pylist()
                == scanned.column(source).take(pa.array(positions, pa.int64())).to_pylist()
            )


@given(data=st.data())
def test_take_rows_by_id_joined_equals_each_fragment_and_pylance(built: str, data: st.DataObject) -> None:
    """``_take_rows`` (stable row ids or row addresses, any order, repeats) through the joined
    read, against the per-fragment read and pylance."""
    ours = lance_ops.dataset(built)
    live = ours.to_table(columns=["id"], with_row_id=True).column("_rowid").to_numpy()
    ids = data.draw(st.lists(st.sampled_from(live.tolist()), max_size=60), label="ids")
    columns = data.draw(st.lists(st.sampled_from(COLUMNS), min_size=1, unique=True), label="columns")
    joined = ours._take_rows(ids, columns=columns)
    with _each_fragment_alone():
        alone = lance_ops.dataset(built)._take_rows(ids, columns=columns)
    assert joined.equals(alone)
    assert joined.equals(lance.dataset(built)._take_rows(ids, columns=columns))


def test_every_row_of_every_fragment(built: str) -> None:
    """All rows at once, reversed (every fragment and page touched, rows reordered)."""
    ours = lance_ops.dataset(built)
    positions = np.arange(ours.count_rows())[::-1]
    joined = ours.take(positions)
    with _pages_by_chunks(True):
        assert lance_ops.dataset(built).take(positions).equals(joined)
    saved = scan_module.PREFETCH_FRAGMENTS
    scan_module.PREFETCH_FRAGMENTS = 3  # fragments read in windows of 3 (and a shorter last one)
    try:
        assert lance_ops.dataset(built).take(positions).equals(joined)
    finally:
        scan_module.PREFETCH_FRAGMENTS = saved
    assert joined.equals(lance.dataset(built).take(positions))
    assert joined.equals(ours.to_table().take(pa.array(positions)))


def test_a_damaged_chunk_names_its_file(tmp_path: pytest.TempPathFactory) -> None:
    """A truncated data file in a joined decode raises CorruptFileError naming the file; the
    committed dataset is left as it was."""
    uri = str(tmp_path / "ds")  # type: ignore[operator]
    for n in range(3):
        lance_ops.write_dataset(
            _table(10 * n, 10), uri, mode="create" if n == 0 else "append", data_storage_version="2.1"
        )
    ds = lance_ops.dataset(uri)
    victim = ds.manifest.fragments[1].files[0].path
    path = os.path.join(uri, "data", str(victim))
    with open(path, "r+b") as handle:
        handle.seek(0)
        handle.write(b"\xff" * 64)  # the first page's chunk bytes, ahead of the footer
    with pytest.raises(lance_ops.errors.CorruptFileError):
        lance_ops.dataset(uri).take([1, 12, 25], columns=["id", "s", "tags"])
    assert lance_ops.dataset(uri).count_rows() == 30


def test_small_file_read_with_one_request(tmp_path: pytest.TempPathFactory) -> None:
    """A file no longer than the tail read on opening is read from local disk once: the pages of
    a take come from that buffer. A larger file still reads its pages from the store."""
    from lance_ops.file import open_file
    from lance_ops.io.metrics import counting_io

    small, large = str(tmp_path / "small.lance"), str(tmp_path / "large.lance")  # type: ignore[operator]
    for path, rows in ((small, 100), (large, 20_000)):
        table = _table(0, rows)
        writer = LanceFileWriter(path, table.schema, version="2.1")
        writer.write_batch(table)
        writer.close()
        with counting_io() as counter:
            reader = open_file(path)
            taken = reader.take_rows([0, rows // 2, rows - 1]).to_table()
        assert taken.equals(table.take([0, rows // 2, rows - 1]))
        if rows == 100:
            assert os.path.getsize(path) <= 64 * 1024
            assert counter.requests == 1
        else:
            assert counter.requests > 1


def test_row_counts_from_the_scan_match_the_fragments(built: str) -> None:
    """The manifest's row counts (from its scan when no fragment has a deletion file) are those of
    the fragments, before and after deletes."""
    from lance_ops.table.manifest import fragment_row_counts

    uri = built + "-nodel"
    lance_ops.write_dataset(_table(0, 10), uri, mode="create")
    for n in range(1, 4):
        lance_ops.write_dataset(_table(10 * n, n), uri, mode="append")
    for path in (uri, built):
        fragments = lance_ops.dataset(path).manifest.fragments
        physical, deleted, has_deletion = fragment_row_counts(fragments)
        assert physical.tolist() == [f.physical_rows for f in fragments]
        assert deleted.tolist() == [f.num_deleted_rows for f in fragments]
        assert has_deletion.tolist() == [f.deletion_file is not None for f in fragments]
    assert fragment_row_counts(lance_ops.dataset(uri).manifest.fragments)[0].tolist() == [10, 1, 2, 3]
