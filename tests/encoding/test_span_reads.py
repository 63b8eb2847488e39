"""A read of a row range decodes page by page as spans (``PageReader.read_span``: mini-block pages
slice their decoded chunks, other layouts read an array of the rows): it must give exactly what
the row-array read of the same rows gives, across pages, layouts and versions, and pylance's
read of the same file."""

from __future__ import annotations

import lance
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lance_ops.errors import CorruptFileError
from lance_ops.file import LanceFileReader, LanceFileWriter
from tests.encoding.harness import flat_arrays, nested_arrays

VERSIONS = ["2.0", "2.1", "2.2"]


def _write(path: str, table: pa.Table, version: str, page_bytes: int) -> None:
    with LanceFileWriter(path, table.schema, version=version, max_page_bytes=page_bytes) as writer:
        # Several batches: each flush may cut pages, so spans cross page boundaries.
        for batch in table.to_batches(max_chunksize=max(1, table.num_rows // 3 or 1)):
            writer.write_batch(batch)


def _check_range(path: str, start: int, stop: int) -> None:
    reader = LanceFileReader(path)
    spanned = reader.read_range(start, stop - start).to_table()
    listed = reader.take_rows(np.arange(start, stop, dtype=np.int64)).to_table()
    assert spanned.equals(listed)
    assert spanned.num_rows == stop - start


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    array=st.one_of(flat_arrays(), nested_arrays()),
    version=st.sampled_from(VERSIONS),
    page_bytes=st.sampled_from([256, 4096, 1 << 20]),
    data=st.data(),
)
def test_span_read_equals_the_row_array_read(tmp_path, array, version, page_bytes, data) -> None:  # type: ignore[no-untyped-def]
    path = str(tmp_path / f"f-{version}-{page_bytes}-{len(array)}.lance")
    table = pa.table({"a": array, "n": pa.array(np.arange(len(array), dtype=np.int64))})
    _write(path, table, version, page_bytes)
    n = len(array)
    if n == 0:
        assert LanceFileReader(path).read_range(0, 0).to_table().num_rows == 0
        return
    start = data.draw(st.integers(0, n - 1))
    stop = data.draw(st.integers(start + 1, n))
    _check_range(path, start, stop)
    read = LanceFileReader(path).read_range(start, stop - start).to_table()
    assert read.equals(table.slice(start, stop - start))


@pytest.mark.parametrize("version", VERSIONS)
def test_span_reads_across_many_pages_and_layouts_match_pylance(tmp_path, version: str) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(11)
    n = 5000
    ints = rng.integers(-(2**40), 2**40, n)
    table = pa.table(
        {
            "i": pa.array(ints, mask=rng.random(n) < 0.1),
            "d": pa.array(rng.choice(["red", "green", "blue"], n)),  # dictionary pages
            "c": pa.array(np.full(n, 7, np.int32)),  # constant
            "s": pa.array([f"value {v}" * (1 + v % 3) for v in range(n)]),
            "l": pa.array([list(range(v % 4)) for v in range(n)], pa.list_(pa.int32())),
            "v": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 4, dtype=np.float32)), 4),
            "st": pa.StructArray.from_arrays([pa.array(ints), pa.array(ints % 3 == 0)], ["x", "y"]),
            "e": pa.array([{}] * n, pa.struct([])),
        }
    )
    path = str(tmp_path / "many.lance")
    _write(path, table, version, 2048)
    theirs = lance.file.LanceFileReader(path)
    for start, stop in [(0, n), (0, 1), (n - 1, n), (1023, 1025), (1000, 4100), (2047, 2049)]:
        _check_range(path, start, stop)
        ours = LanceFileReader(path).read_range(start, stop - start).to_table()
        assert ours.equals(table.slice(start, stop - start))
        assert ours.equals(theirs.read_range(start, stop - start).to_table())


def test_a_span_beyond_the_pages_is_a_corrupt_file_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = str(tmp_path / "short.lance")
    _write(path, pa.table({"a": pa.array(np.arange(100, dtype=np.int64))}), "2.1", 1 << 20)
    reader = LanceFileReader(path)
    decoder = reader._decoder(0)  # the file's decoder of column a, asked for rows it lacks
    with pytest.raises(CorruptFileError):
        decoder.read(reader._fetch, range(50, 150))
    with pytest.raises(CorruptFileError):
        decoder.read(reader._fetch, np.arange(50, 150))
