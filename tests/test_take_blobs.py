"""LanceDataset.take_blobs / BlobFile, two-way against pylance 14."""

from __future__ import annotations

import io
from pathlib import Path

import lance
import pyarrow as pa
import pytest

import lance_ops
from lance_ops.errors import FieldNotFoundError, InvalidArgumentError

BLOB = pa.field("blob", pa.large_binary(), metadata={"lance-encoding:blob": "true"})
SCHEMA = pa.schema([pa.field("id", pa.int64()), BLOB])
VALUES = [b"ab", None, b"", bytes(range(256)) * 300, b"x" * 70_000]  # inline, null, empty, packed


def _table(values: list[bytes | None] = VALUES, first: int = 0) -> pa.Table:
    ids = list(range(first, first + len(values)))
    return pa.table({"id": ids, "blob": pa.array(values, pa.large_binary())}, schema=SCHEMA)


def _contents(files: list) -> list[bytes | None]:  # type: ignore[type-arg]
    return [None if f is None else f.readall() for f in files]


VERSIONS = ["2.0", "2.1", "2.2"]


@pytest.mark.parametrize("version", VERSIONS)
def test_pylance_writes_we_take(tmp_path: Path, version: str) -> None:
    uri = str(tmp_path / "ds")
    theirs = lance.write_dataset(_table(), uri, data_storage_version=version, max_rows_per_file=3)
    ours = lance_ops.dataset(uri)
    for kw in ({"indices": [4, 0, 1, 2, 3]}, {"ids": [2, 0, 1]}, {"addresses": [(1 << 32) | 1, 0]}):
        got = ours.take_blobs("blob", **kw)
        want = theirs.take_blobs("blob", **kw)
        assert _contents(got) == _contents(want)
        assert [None if f is None else f.size() for f in got] == [
            None if f is None else f.size() for f in want
        ]


@pytest.mark.parametrize("version", VERSIONS)
def test_we_write_pylance_takes_after_delete_and_compaction(tmp_path: Path, version: str) -> None:
    uri = str(tmp_path / "ds")
    lance_ops.write_dataset(_table(), uri, data_storage_version=version, max_rows_per_file=2)
    lance_ops.write_dataset(_table([b"later", b"z" * 5000], first=5), uri, mode="append")
    ds = lance_ops.dataset(uri)
    ds.delete("id = 0 OR id = 5")
    want = [v for i, v in enumerate([*VALUES, b"later", b"z" * 5000]) if i not in (0, 5)]
    indices = list(range(len(want)))
    assert _contents(ds.take_blobs("blob", indices=indices)) == want
    assert _contents(lance.dataset(uri).take_blobs("blob", indices=indices)) == want
    ds.optimize.compact_files(num_threads=1)
    assert len(ds.get_fragments()) == 1
    assert _contents(ds.take_blobs("blob", indices=indices)) == want
    theirs = lance.dataset(uri)
    assert len(theirs.get_fragments()) == 1
    assert _contents(theirs.take_blobs("blob", indices=indices)) == want
    # pylance compacts again on top of our compaction; we read its result.
    lance.write_dataset(_table([b"more"], first=9), uri, mode="append")
    lance.dataset(uri).optimize.compact_files(num_threads=1)
    assert _contents(lance_ops.dataset(uri).take_blobs("blob", indices=[*indices, len(want)])) == [
        *want,
        b"more",
    ]


def test_pylance_blob_compaction_case(tmp_path: Path) -> None:
    """pylance's own test_blob_compaction, with each side writing and reading."""
    blobs = [b"\x01\x02", b"\x03\x04\x05"]
    table = pa.table({"id": pa.array([0, 1], pa.int32()), "blob": pa.array(blobs, pa.large_binary())})
    table = table.cast(pa.schema([pa.field("id", pa.int32()), BLOB]))
    ours = lance_ops.write_dataset(
        table, str(tmp_path / "a"), max_rows_per_file=1, data_storage_version="stable"
    )
    ours.optimize.compact_files(num_threads=1)
    assert len(ours.get_fragments()) == 1
    assert _contents(ours.take_blobs("blob", indices=[0, 1])) == blobs
    assert _contents(lance.dataset(str(tmp_path / "a")).take_blobs("blob", indices=[0, 1])) == blobs


def test_blob_file_behaves_as_pylance(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    lance.write_dataset(_table(), uri)
    (ours,) = lance_ops.dataset(uri).take_blobs("blob", indices=[3])
    (theirs,) = lance.dataset(uri).take_blobs("blob", indices=[3])
    assert isinstance(ours, io.IOBase) and isinstance(ours, lance_ops.BlobFile)
    assert repr(ours) == repr(theirs) == f"<BlobFile size={len(VALUES[3])}>"
    for f in (ours, theirs):
        f.seek(0)
    steps = [
        ("read", 10),
        ("tell",),
        ("seek", 5, io.SEEK_CUR),
        ("read", 3),
        ("seek", -4, io.SEEK_END),
        ("read", 100),
    ]
    steps += [("tell",), ("read", 5), ("seek", 10**6), ("read", 1), ("seek", 0), ("read", -1)]
    for step in steps:
        assert getattr(ours, step[0])(*step[1:]) == getattr(theirs, step[0])(*step[1:]), step
    buf, their_buf = bytearray(7), bytearray(7)
    ours.seek(1)
    theirs.seek(1)
    assert ours.readinto(buf) == theirs.readinto(their_buf) and buf == their_buf
    with ours, theirs:
        pass
    assert ours.closed and theirs.closed
    for f in (ours, theirs):
        with pytest.raises(ValueError, match="closed file"):
            f.read()


def test_errors_as_pylance(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    lance.write_dataset(_table(), uri)
    ds = lance_ops.dataset(uri)
    for kw in ({}, {"ids": [0], "indices": [0]}):
        with pytest.raises(InvalidArgumentError, match="Exactly one of ids, indices, or addresses"):
            ds.take_blobs("blob", **kw)
        with pytest.raises(ValueError, match="Exactly one of ids, indices, or addresses"):
            lance.dataset(uri).take_blobs("blob", **kw)
    with pytest.raises(InvalidArgumentError, match="the column 'id' is not a blob column"):
        ds.take_blobs("id", indices=[0])
    with pytest.raises(FieldNotFoundError, match="Field 'nope' not found"):
        ds.take_blobs("nope", indices=[0])
    with pytest.raises(IndexError):
        ds.take_blobs("blob", indices=[99])
    assert ds.take_blobs("blob", indices=[]) == []


@pytest.mark.parametrize("version", VERSIONS)
def test_filtered_scan_of_blob_dataset(tmp_path: Path, version: str) -> None:
    """Page statistics of a file with a blob column (2.2: description children with id -1) are read
    without mistaking a child for a column; the filter prunes and returns the row."""
    uri = str(tmp_path / "ds")
    schema = pa.schema([BLOB, pa.field("idx", pa.uint64())])  # the blob column first, as pylance's test
    table = pa.table(
        [pa.array([b"foo", b"bar", b"baz"], pa.large_binary()), pa.array([0, 1, 2], pa.uint64())],
        schema=schema,
    )
    lance_ops.write_dataset(table, uri, data_storage_version=version)
    ours = lance_ops.dataset(uri).scanner(filter="idx = 2").to_table()
    theirs = lance.dataset(uri).scanner(filter="idx = 2").to_table()
    assert ours.column("idx").to_pylist() == theirs.column("idx").to_pylist() == [2]
    assert _contents(lance_ops.dataset(uri).take_blobs("blob", indices=[2])) == [b"baz"]


def test_deleted_row_ids_refused_as_pylance(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    lance_ops.write_dataset(_table(), uri)
    ours = lance_ops.dataset(uri)
    ours.delete("id = 1")
    theirs = lance.dataset(uri)
    for ds in (ours, theirs):
        with pytest.raises(NotImplementedError, match="must not target deleted rows"):
            ds.take_blobs("blob", ids=[0, 1, 2])
    assert _contents(ours.take_blobs("blob", ids=[0, 2])) == _contents(theirs.take_blobs("blob", ids=[0, 2]))
