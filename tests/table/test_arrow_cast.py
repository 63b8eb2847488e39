"""``arrow_cast(x, 'Type')`` in SQL projections, filters and ``add_columns``, against pylance."""

from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa
import pytest

import lance_ops
from lance_ops.errors import PredicateError

TYPES = [
    "Int32",
    "UInt8",
    "Float64",
    "Float16",
    "Utf8",
    "LargeUtf8",
    "Binary",
    "Boolean",
    "Date32",
    "Timestamp(Microsecond, None)",
    'Timestamp(Millisecond, Some("UTC"))',
    'Timestamp(ms, "UTC")',
    "Time64(Microsecond)",
    "Duration(Second)",
    "Decimal128(10, 2)",
    "FixedSizeBinary(4)",
    "List(Int64)",
    "LargeList(Utf8)",
    "FixedSizeList(32, Float32)",
    "Dictionary(Int32, Utf8)",
]


def _twins(tmp_path: Path, table: pa.Table) -> tuple[lance_ops.LanceDataset, lance.LanceDataset]:
    ours = lance_ops.write_dataset(table, str(tmp_path / "ours"))
    theirs = lance.write_dataset(table, str(tmp_path / "theirs"))
    return ours, theirs


@pytest.mark.parametrize("type_text", TYPES)
def test_null_cast_types_match_pylance(tmp_path: Path, type_text: str) -> None:
    ours, theirs = _twins(tmp_path, pa.table({"id": [1, 2]}))
    columns = {"id": "id", "x": f"arrow_cast(NULL, '{type_text}')"}
    expected = theirs.to_table(columns=columns)
    got = ours.to_table(columns=columns)
    assert got.schema.field("x").type == expected.schema.field("x").type
    assert got.column("x").null_count == 2


@pytest.mark.parametrize(
    "expression",
    [
        "arrow_cast(id, 'Float32')",
        "arrow_cast(f, 'Int32')",
        "arrow_cast(id, 'Utf8')",
        "arrow_cast(s, 'Float64')",
    ],
)
def test_column_casts_match_pylance(tmp_path: Path, expression: str) -> None:
    ours, theirs = _twins(
        tmp_path, pa.table({"id": [1, 2, 3], "f": [1.5, 2.5, None], "s": ["1", "2.5", None]})
    )
    assert ours.to_table(columns={"x": expression}) == theirs.to_table(columns={"x": expression})


CAST_DATA = pa.table(
    {
        "id": [1, 300, -200],
        "f": [1.7, -2.5, 1e12],
        "ts": pa.array([1_000_001, 2, 3], pa.timestamp("us")),
    }
)


@pytest.mark.parametrize(
    "expression",
    [
        "arrow_cast(f, 'Int64')",
        "arrow_cast(ts, 'Timestamp(Second, None)')",
        "arrow_cast(id, 'Decimal128(4, 1)')",
        "arrow_cast(id, 'Int16')",
    ],
)
def test_truncating_casts_match_pylance(tmp_path: Path, expression: str) -> None:
    """Fractions and finer time units are cut off, as DataFusion's cast does."""
    ours, theirs = _twins(tmp_path, CAST_DATA)
    assert ours.to_table(columns={"x": expression}) == theirs.to_table(columns={"x": expression})


@pytest.mark.parametrize(
    "expression", ["arrow_cast(id, 'Int8')", "arrow_cast(id, 'UInt8')", "arrow_cast(f, 'Int32')"]
)
def test_out_of_range_casts_refused_like_pylance(tmp_path: Path, expression: str) -> None:
    ours, theirs = _twins(tmp_path, CAST_DATA)
    with pytest.raises(pa.ArrowInvalid):
        theirs.to_table(columns={"x": expression})
    with pytest.raises(pa.ArrowInvalid):
        ours.to_table(columns={"x": expression})


def test_filter_with_arrow_cast(tmp_path: Path) -> None:
    ours, theirs = _twins(tmp_path, pa.table({"id": [1, 2, 3]}))
    where = "arrow_cast(id, 'Float64') > 1.5 AND arrow_cast(id, 'Utf8') != '3'"
    assert ours.to_table(filter=where) == theirs.to_table(filter=where)


@pytest.mark.parametrize(
    "expression",
    [
        "arrow_cast(id, 'int32')",
        "arrow_cast(id, 'Struct(a Int32)')",
        "arrow_cast(id, 'FixedSizeList(-1, Int32)')",
        "arrow_cast(id, 'Dictionary(Utf8, Utf8)')",
        "arrow_cast(id, 'Int32) ')",
        "arrow_cast(id, '')",
        "arrow_cast(id)",
        "arrow_cast(id, s)",
        "arrow_cast(300, 'Int8')",
    ],
)
def test_bad_arrow_cast_refused_like_pylance(tmp_path: Path, expression: str) -> None:
    ours, theirs = _twins(tmp_path, pa.table({"id": [1, 2, 3], "s": ["a", "b", "c"]}))
    with pytest.raises(ValueError):
        theirs.to_table(columns={"x": expression})
    with pytest.raises(PredicateError):
        ours.to_table(columns={"x": expression})


def test_add_columns_arrow_cast_read_by_pylance(tmp_path: Path) -> None:
    """pylance's test_merge_insert_large setup: an all-null vector column added with arrow_cast."""
    ours, theirs = _twins(tmp_path, pa.table({"id": range(10), "num": [str(i) for i in range(10)]}))
    transform = {
        "vector": "arrow_cast(NULL, 'FixedSizeList(4, Float32)')",
        "half": "arrow_cast(id, 'Float32') / 2",
    }
    ours.add_columns(transform)
    theirs.add_columns(transform)
    read_back = lance.dataset(ours.uri).to_table()
    assert read_back == theirs.to_table()
    assert read_back.schema.field("vector").type == pa.list_(pa.float32(), 4)
    assert lance_ops.dataset(theirs.uri).to_table() == read_back
