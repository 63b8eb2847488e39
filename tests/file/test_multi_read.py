"""L19: :func:`lance_ops.file.multi.read_whole_files`, every row of many small files read with each
column decoded across the files at once (runs of mini-block pages of one layout in one call).
Checked against the general path (each file read on its own) and the rows written, for files
written by pylance and by us, at the page and file boundaries where shapes matter."""

from __future__ import annotations

from pathlib import Path

import lance.file as lance_file
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lance_ops.encoding.structural.miniblock import _joinable_key
from lance_ops.errors import CorruptFileError, SchemaError
from lance_ops.file import LanceFileReader, LanceFileWriter
from lance_ops.file.multi import read_whole_files

SIZES = [0, 1, 2, 1023, 1024, 1025, 3000]


def _table(start: int, rows: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = np.arange(start, start + rows, dtype=np.int64)
    nulls = rng.random(rows) < 0.1
    lengths = rng.integers(0, 4, rows)
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int32)
    words = pa.array(
        [None if i % 7 == 0 else f"w{i % 97}-{'x' * (i % 13)}" for i in ids.tolist()], pa.string()
    )
    return pa.table(
        {
            "id": ids,
            "maybe": pa.array(rng.integers(-(2**62), 2**62, rows), mask=nulls),
            "small": pa.array(rng.integers(0, 1000, rows, dtype=np.int32)),
            "score": pa.array(rng.normal(size=rows)),
            "word": words,
            "tags": pa.ListArray.from_arrays(
                pa.array(offsets),
                pa.array(rng.integers(0, 100, int(offsets[-1]), dtype=np.int32)),
                mask=pa.array(rng.random(rows) < 0.1),
            ),
            "point": pa.StructArray.from_arrays([pa.array(ids * 2), words], ["x", "label"]),
            "vector": pa.FixedSizeListArray.from_arrays(
                pa.array(rng.normal(size=rows * 4).astype(np.float32)), 4
            ),
        }
    )


def _write(path: Path, table: pa.Table, writer: str, version: str, page_bytes: int | None) -> None:
    options = {} if page_bytes is None else {"max_page_bytes": page_bytes}
    if writer == "pylance":
        with lance_file.LanceFileWriter(str(path), table.schema, version=version, **options) as out:
            out.write_batch(table)
    else:
        with LanceFileWriter(str(path), table.schema, version=version, **options) as out:
            out.write_batch(table)


def _files(
    tmp: Path, sizes: list[int], writers: list[str], version: str, page_bytes: int | None
) -> tuple[list[Path], pa.Table]:
    paths, tables, start = [], [], 0
    for n, (rows, writer) in enumerate(zip(sizes, writers, strict=False)):
        table = _table(start, rows, n)
        path = tmp / f"{n}.lance"
        _write(path, table, writer, version, page_bytes)
        paths.append(path)
        tables.append(table)
        start += rows
    return paths, pa.concat_tables(tables)


def _each_alone(paths: list[Path], names: list[str]) -> pa.Table:
    return pa.concat_tables([LanceFileReader(str(p)).read_all(names).to_table() for p in paths])


@settings(max_examples=25, deadline=None)
@given(
    sizes=st.lists(st.sampled_from(SIZES), min_size=1, max_size=5),
    writers=st.lists(st.sampled_from(["pylance", "lance_ops"]), min_size=5, max_size=5),
    version=st.sampled_from(["2.1", "2.2"]),
    page_bytes=st.sampled_from([None, 4096]),
)
def test_whole_files_read_together_equal_each_file_read_alone(
    tmp_path_factory: pytest.TempPathFactory,
    sizes: list[int],
    writers: list[str],
    version: str,
    page_bytes: int | None,
) -> None:
    tmp = tmp_path_factory.mktemp("multi")
    paths, expected = _files(tmp, sizes, writers, version, page_bytes)
    names = expected.schema.names
    got = read_whole_files([LanceFileReader(str(p)) for p in paths], names)
    assert got.schema.names == names
    assert got.num_rows == expected.num_rows
    assert got.equals(_each_alone(paths, names))
    assert got.equals(expected.cast(got.schema))
    projected = read_whole_files([LanceFileReader(str(p)) for p in paths], ["word", "id"])
    assert projected.equals(got.select(["word", "id"]))


def test_pages_of_files_written_alike_are_decoded_together(tmp_path: Path) -> None:
    """The flat columns without nulls of small files from one writer share their page layout
    (the fast path applies), whichever of the two wrote them (a nullable column's level
    encoding may change from page to page: a run of joined pages ends there); lists never join."""
    for writer in ("pylance", "lance_ops"):
        paths, _ = _files(tmp_path / writer, [1024, 1025, 3000], [writer] * 3, "2.2", None)
        readers = [LanceFileReader(str(p)) for p in paths]
        for name in ("id", "small", "score"):
            index = readers[0].schema.get_field_index(name)
            keys = {
                _joinable_key(r._decoder(index)._reader(0, page))
                for r in readers
                for page in range(len(r._decoder(index).columns[0]))
            }
            assert len(keys) == 1 and None not in keys, (writer, name)
        tags = readers[0]._decoder(readers[0].schema.get_field_index("tags"))
        assert _joinable_key(tags._reader(0, 0)) is None


def test_files_of_other_versions_or_types_are_read_file_by_file(tmp_path: Path) -> None:
    """A 2.0 file among 2.1 files falls back to reading each file alone: the rows are the same.
    A column of another type in one of the files is refused (a :class:`SchemaError`)."""
    tmp_path.mkdir(exist_ok=True)
    first = _table(0, 1500, 1)
    second = _table(1500, 700, 2)
    _write(tmp_path / "a.lance", first, "pylance", "2.1", None)
    _write(tmp_path / "b.lance", second, "lance_ops", "2.0", None)
    _write(tmp_path / "c.lance", _table(2200, 10, 3), "lance_ops", "2.1", None)
    paths = [tmp_path / f"{name}.lance" for name in "abc"]
    names = first.schema.names
    got = read_whole_files([LanceFileReader(str(p)) for p in paths], names)
    assert got.equals(_each_alone(paths, names))

    wider = first.set_column(2, "small", first.column("small").cast(pa.int64()))
    _write(tmp_path / "d.lance", wider, "lance_ops", "2.2", None)
    _write(tmp_path / "e.lance", second, "lance_ops", "2.2", None)
    readers = [LanceFileReader(str(tmp_path / f"{name}.lance")) for name in "de"]
    assert read_whole_files(readers, ["id", "word"]).equals(
        _each_alone([tmp_path / "d.lance", tmp_path / "e.lance"], ["id", "word"])
    )
    with pytest.raises(SchemaError, match="'small' is int32 in .*e.lance but int64"):
        read_whole_files(readers, ["id", "small"])


def test_a_missing_column_and_no_files_are_refused(tmp_path: Path) -> None:
    _write(tmp_path / "a.lance", _table(0, 10, 1), "lance_ops", "2.2", None)
    reader = LanceFileReader(str(tmp_path / "a.lance"))
    with pytest.raises(CorruptFileError, match="nope"):
        read_whole_files([reader], ["id", "nope"])
    with pytest.raises(ValueError, match="at least one file"):
        read_whole_files([], ["id"])


def test_damaged_chunk_table_is_a_corrupt_file_error(tmp_path: Path) -> None:
    """The chunk table of one file's page claims more bytes than its buffer holds: the joined
    decode raises :class:`CorruptFileError` naming the column, as reading that file alone does."""
    paths = []
    for n in range(3):
        path = tmp_path / f"{n}.lance"
        _write(path, _table(n * 2000, 2000, n), "pylance", "2.2", None)
        paths.append(path)
    reader = LanceFileReader(str(paths[1]))
    info = reader._decoder(reader.schema.get_field_index("id")).columns[0][0]
    position, size = info.buffers[0]  # the chunk table: 16-bit words, size in 8-byte units above 4 bits
    data = bytearray(paths[1].read_bytes())
    data[position : position + size] = b"\xff" * size
    paths[1].write_bytes(bytes(data))
    with pytest.raises(CorruptFileError) as alone:
        LanceFileReader(str(paths[1])).read_all(["id"]).to_table()
    with pytest.raises(CorruptFileError) as joined:
        read_whole_files([LanceFileReader(str(p)) for p in paths], ["id", "word"])
    assert joined.value.column == "id"
    assert joined.value.path == str(paths[1])  # the damaged file, not the first of the set
    assert joined.value.reason == alone.value.reason
