"""Errors raised while decoding a file name the file, the column and the page (real codec)."""

from __future__ import annotations

import pickle
from pathlib import Path

import pyarrow as pa
import pytest

from lance_ops.errors import CorruptFileError
from lance_ops.file import LanceFileReader, LanceFileWriter


def test_codec_errors_name_file_column_and_page(tmp_path: Path) -> None:
    """A garbled page surfaces as CorruptFileError carrying the file path, the column and the page."""
    path = str(tmp_path / "garbled.lance")
    field = pa.field("x", pa.string(), metadata={"lance-encoding:compression": "zstd"})
    table = pa.table({"x": [f"value-{i % 37}" for i in range(5000)]}, schema=pa.schema([field]))
    with LanceFileWriter(path, table.schema) as writer:
        writer.write_batch(table)
    buffer = LanceFileReader(path).metadata().columns[0].pages[0].buffers[1]
    data = bytearray(Path(path).read_bytes())
    data[buffer.position : buffer.position + buffer.size] = b"\xff" * buffer.size
    Path(path).write_bytes(bytes(data))
    with pytest.raises(CorruptFileError) as info:
        LanceFileReader(path).read_all().to_table()
    assert (info.value.path, info.value.column, info.value.page) == (path, "x", "page at row 0")
    assert str(info.value).startswith(f"{path}, column 'x', page at row 0: ")
    assert pickle.loads(pickle.dumps(info.value)).column == "x"
