"""A (not packed) struct marked ``lance-encoding:blob``, both ways against pylance 14.

pylance 14 takes such a struct, wherever it sits (top level, inside a struct, as a list item),
for one blob column: in 2.2 it writes a file without rows holding one empty column for it and
refuses rows for it; in 2.1 it refuses the schema. We read its files, write the same column
layout and refuse what it refuses, with typed errors.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from lance_ops.errors import LanceOpsError
from lance_ops.file import LanceFileReader, LanceFileWriter

pytestmark = pytest.mark.interop
lance_file = pytest.importorskip("lance.file")

BLOB = {"lance-encoding:blob": "true"}
PAIR = pa.struct([("data", pa.large_binary()), ("uri", pa.string())])
DEEP = pa.struct([("data", pa.large_binary()), ("uri", pa.string()), ("z", pa.struct([("q", pa.int8())]))])

SCHEMAS = {
    "top": pa.schema([pa.field("id", pa.int64()), pa.field("b", PAIR, metadata=BLOB)]),
    "in_struct": pa.schema(
        [pa.field("o", pa.struct([pa.field("b", PAIR, metadata=BLOB), pa.field("x", pa.int32())]))]
    ),
    "in_list": pa.schema([pa.field("l", pa.list_(pa.field("b", PAIR, metadata=BLOB)))]),
    "deep": pa.schema([pa.field("b", DEEP, metadata=BLOB), pa.field("id", pa.int64())]),
}


def _columns(reader: LanceFileReader) -> int:
    return len(reader.metadata().columns)


@pytest.mark.parametrize("name", SCHEMAS)
def test_we_read_pylance_empty_blob_struct(tmp_path: Path, name: str) -> None:
    schema = SCHEMAS[name]
    path = tmp_path / "p.lance"
    with lance_file.LanceFileWriter(str(path), schema=schema, version="2.2"):
        pass
    theirs = lance_file.LanceFileReader(str(path))
    expected = theirs.read_all().to_table()
    reader = LanceFileReader(path)
    assert _columns(reader) == len(theirs.metadata().columns)
    assert reader.num_rows == 0
    got = reader.read_all().to_table()
    assert got.schema == expected.schema == schema
    assert got.num_rows == 0
    assert reader.read_range(0, 0).to_table().schema == schema
    assert reader.take_rows([]).to_table().num_rows == 0


@pytest.mark.parametrize("name", SCHEMAS)
def test_pylance_reads_our_empty_blob_struct(tmp_path: Path, name: str) -> None:
    schema = SCHEMAS[name]
    ours, theirs = tmp_path / "o.lance", tmp_path / "p.lance"
    with LanceFileWriter(ours, schema=schema, version="2.2"):
        pass
    with lance_file.LanceFileWriter(str(theirs), schema=schema, version="2.2"):
        pass
    reader = lance_file.LanceFileReader(str(ours))
    assert len(reader.metadata().columns) == len(lance_file.LanceFileReader(str(theirs)).metadata().columns)
    table = reader.read_all().to_table()
    assert table.schema == schema
    assert table.num_rows == 0
    assert LanceFileReader(ours).read_all().to_table().schema == schema


@pytest.mark.parametrize("rows", [1, 3])
def test_blob_struct_rows_refused_like_pylance(tmp_path: Path, rows: int) -> None:
    schema = SCHEMAS["top"]
    values = [{"data": b"x" * i, "uri": f"u{i}"} for i in range(rows)]
    table = pa.table([pa.array(range(rows), pa.int64()), pa.array(values, PAIR)], schema=schema)
    with pytest.raises(ValueError, match="[Bb]lob"):
        with lance_file.LanceFileWriter(str(tmp_path / "p.lance"), schema=schema, version="2.2") as writer:
            writer.write_batch(table)
    with pytest.raises(LanceOpsError, match="blob field 'b'"):
        with LanceFileWriter(tmp_path / "o.lance", schema=schema, version="2.2") as writer:
            writer.write_batch(table)


def test_blob_struct_refused_in_2_1_like_pylance(tmp_path: Path) -> None:
    schema = SCHEMAS["top"]
    with pytest.raises(ValueError, match="Blob encoding is not available"):
        with lance_file.LanceFileWriter(str(tmp_path / "p.lance"), schema=schema, version="2.1"):
            pass
    with pytest.raises(LanceOpsError, match="blob field 'b'"):
        with LanceFileWriter(tmp_path / "o.lance", schema=schema, version="2.1"):
            pass
