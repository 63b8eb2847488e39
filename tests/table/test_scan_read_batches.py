"""A dataset scan cuts its batches out of whole reads (``FragmentReader.scan_reads`` and
``fragment.scan._cut``): the batches, their sizes and their order are those of the general path
(every batch a table sliced from the read, then rebuilt) and of pylance, for reads of several
chunks whose ends do not fall on batch boundaries, deletions, nulls, limits and offsets."""

from __future__ import annotations

from collections.abc import Iterator

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_ops
from lance_ops.file import reader as file_reader
from lance_ops.fragment import reader as fragment_reader
from lance_ops.fragment import scan as fragment_scan
from lance_ops.fragment.options import ScanOptions
from lance_ops.fragment.reader import FragmentReader

ROWS = (1025, 1023, 1, 1024)  # rows of each fragment


def _table(start: int, n: int) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table(
        {
            "id": ids,
            "x": pa.array(np.where(ids % 3 == 0, None, ids * 7 % 1000), pa.int32()),
            "f": pa.array(ids * 0.5, pa.float64()),
        }
    )


@pytest.fixture(scope="module", params=["2.1", "2.2"])
def written(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """Fragments of 1025, 1023, 1 and 1024 rows written by pylance, rows deleted in two of them."""
    uri = str(tmp_path_factory.mktemp("reads") / "ds.lance")
    start = 0
    for n in ROWS:
        lance.write_dataset(
            _table(start, n),
            uri,
            mode="append" if start else "create",
            data_storage_version=request.param,
        )
        start += n
    lance.dataset(uri).delete("(id >= 100 AND id < 150) OR id = 2049 OR (id > 3000 AND id % 5 = 0)")
    return uri


@pytest.fixture(autouse=True)
def small_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reads of 300 rows, each decoded in three pieces (chunks ending at rows 100 and 200)."""
    monkeypatch.setattr(fragment_reader, "READ_AHEAD_ROWS", 300)
    monkeypatch.setattr(fragment_reader, "SCAN_READ_MAX_ROWS", 300)
    monkeypatch.setattr(file_reader, "SPLIT_MIN_ROWS", 70)
    monkeypatch.setattr(file_reader, "WORKER_THREADS", 3)


_WHOLE_READS = FragmentReader.scan_reads


def _sliced_reads(self: FragmentReader, options: ScanOptions, live: object = None) -> Iterator[pa.Table]:
    """The general path: each read cut into tables of at most a batch (what
    :meth:`FragmentReader.scan` returns), each then rebuilt as a batch by the scan."""
    for table in _WHOLE_READS(self, options, live):  # type: ignore[arg-type]
        for first in range(0, max(table.num_rows, 1), options.batch_size):
            yield table.slice(first, min(options.batch_size, table.num_rows - first))


def _batches(
    uri: str, monkeypatch: pytest.MonkeyPatch | None = None, **kwargs: object
) -> list[pa.RecordBatch]:
    if monkeypatch is None:
        return list(lance_ops.dataset(uri).to_batches(**kwargs))  # type: ignore[arg-type]
    with monkeypatch.context() as patch:
        patch.setattr(FragmentReader, "scan_reads", _sliced_reads)
        return list(lance_ops.dataset(uri).to_batches(**kwargs))  # type: ignore[arg-type]


def _same(ours: list[pa.RecordBatch], general: list[pa.RecordBatch]) -> None:
    assert [b.num_rows for b in ours] == [b.num_rows for b in general]
    for a, b in zip(ours, general, strict=True):
        assert a.schema.equals(b.schema, check_metadata=True)
        assert a.equals(b)


@pytest.mark.parametrize("batch_size", [1, 7, 64, 100, 299, 300, 301, 1023, 1024, 1025, 5000])
@pytest.mark.parametrize("strict", [False, True])
def test_batches_as_general_path_and_pylance(
    written: str, monkeypatch: pytest.MonkeyPatch, batch_size: int, strict: bool
) -> None:
    kwargs = {"batch_size": batch_size, "strict_batch_size": strict}
    ours = _batches(written, **kwargs)
    _same(ours, _batches(written, monkeypatch, **kwargs))
    theirs = list(lance.dataset(written).to_batches(**kwargs))
    assert [b.num_rows for b in ours] == [b.num_rows for b in theirs]
    assert pa.Table.from_batches(ours).equals(pa.Table.from_batches(theirs))


@pytest.mark.parametrize("columns", [["id"], ["x"], ["f", "id"], []])
@pytest.mark.parametrize(
    ("offset", "limit"), [(0, None), (0, 1), (99, 1000), (1025, 1), (1024, 2049), (3000, None), (5000, 3)]
)
def test_limits_offsets_and_projections(
    written: str, monkeypatch: pytest.MonkeyPatch, columns: list[str], offset: int, limit: int | None
) -> None:
    kwargs = {"columns": columns, "batch_size": 128, "offset": offset, "limit": limit}
    ours = _batches(written, **kwargs)
    _same(ours, _batches(written, monkeypatch, **kwargs))
    if columns:
        theirs = lance.dataset(written).to_table(columns=columns, offset=offset, limit=limit)
        assert pa.Table.from_batches(ours, schema=theirs.schema).equals(theirs)
    else:
        rest = max(0, lance.dataset(written).count_rows() - offset)
        assert sum(b.num_rows for b in ours) == (rest if limit is None else min(limit, rest))


@pytest.mark.parametrize("batch_size", [1, 50, 128, 1024])
def test_filtered_scans(written: str, monkeypatch: pytest.MonkeyPatch, batch_size: int) -> None:
    kwargs = {"columns": ["id", "x"], "filter": "x > 300", "batch_size": batch_size}
    ours = _batches(written, **kwargs)
    _same(ours, _batches(written, monkeypatch, **kwargs))
    theirs = lance.dataset(written).to_table(columns=["id", "x"], filter="x > 300")
    assert pa.Table.from_batches(ours, schema=theirs.schema).equals(theirs)


def _naive(table: pa.Table, stop: int, size: int) -> list[pa.RecordBatch]:
    return [fragment_scan._one_batch(table.slice(s, size)) for s in range(0, stop, size)]


@pytest.mark.parametrize("size", [1, 3, 4, 5, 8, 13])
@pytest.mark.parametrize("cuts", [[16], [4, 4, 4, 4], [3, 0, 5, 8], [1, 15], [0, 16, 0], [7, 2, 7]], ids=str)
def test_cut_as_slicing_each_batch(size: int, cuts: list[int]) -> None:
    """Chunk ends anywhere (empty chunks too), other columns chunked otherwise."""
    values = np.arange(16)
    parts, at = [], 0
    for n in cuts:
        parts.append(pa.array(values[at : at + n]))
        at += n
    table = pa.table(
        {
            "a": pa.chunked_array(parts, pa.int64()),
            "b": pa.chunked_array(
                [pa.array([str(v) for v in values[:9]]), pa.array([None] * 7, pa.string())]
            ),
        }
    )
    stop = 16 - 16 % size
    got = list(fragment_scan._cut(table, stop, size))
    assert [b.num_rows for b in got] == [size] * (stop // size)
    _same(got, _naive(table, stop, size))
    assert pa.Table.from_batches(got, schema=table.schema).equals(table.slice(0, stop)) if got else True


def test_cut_without_columns() -> None:
    table = pa.Table.from_batches([pa.RecordBatch.from_struct_array(pa.nulls(10, pa.struct([])))])
    got = list(fragment_scan._cut(table, 9, 3))
    assert [b.num_rows for b in got] == [3, 3, 3]
    assert all(b.num_columns == 0 for b in got)


def test_read_rows_by_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """Narrow fixed-width columns are read in longer runs; any other column keeps the default."""
    monkeypatch.undo()
    rows = fragment_reader.scan_read_rows
    most, least = fragment_reader.SCAN_READ_MAX_ROWS, fragment_reader.READ_AHEAD_ROWS
    assert rows([pa.int64()]) == most
    assert rows([pa.int64()] * 4) == fragment_reader.SCAN_READ_BYTES // 32
    assert rows([pa.int64()] * 4, 2) == fragment_reader.SCAN_READ_BYTES // 48
    assert rows([pa.bool_(), pa.int8()]) == most
    assert rows([pa.float64()] * 1000) == least
    for other in (
        pa.string(),
        pa.list_(pa.int32()),
        pa.list_(pa.float32(), 2),
        pa.struct([("a", pa.int8())]),
    ):
        assert rows([pa.int64(), other]) == least
    assert rows([pa.dictionary(pa.int8(), pa.string())]) == least
    assert rows([]) == most


@pytest.mark.parametrize("columns", [["id"], ["id", "x", "f"]])
def test_wide_reads_as_small_reads(written: str, monkeypatch: pytest.MonkeyPatch, columns: list[str]) -> None:
    """Whole fragments read at once (the default for these narrow columns) give the batches of
    reads of 300 rows."""
    kwargs = {"columns": columns, "batch_size": 100, "with_row_id": True}
    small = _batches(written, **kwargs)
    monkeypatch.undo()
    assert fragment_reader.scan_read_rows([pa.int64()] * 3) >= max(ROWS)
    _same(_batches(written, **kwargs), small)
