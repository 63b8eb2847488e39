"""Every writer refuses what the dataset cannot hold (issue L13): the conform step of appends and
executor writes (:mod:`lance_ops.fragment.conform`), the SQL expression recorded by ``add_columns``,
and the commit guard (:mod:`lance_ops.table.write_guard`). Each refusal leaves the version as it
was and the dataset readable by pylance."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lance_ops
from lance_ops.errors import InvalidArgumentError, SchemaError, WriteSchemaError
from lance_ops.file import LanceFileWriter
from lance_ops.fragment import write_fragments
from lance_ops.fragment.conform import Conform
from lance_ops.table.manifest import DataFile, DataFragment
from lance_ops.table.schema import EXPRESSION_KEY

pytestmark = pytest.mark.interop

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("score", pa.float64(), nullable=False),
        pa.field("note", pa.string()),
    ]
)


def _rows(start: int, count: int) -> pa.Table:
    ids = list(range(start, start + count))
    return pa.table({"id": ids, "score": [i / 2 for i in ids], "note": [f"n{i}" for i in ids]}, schema=SCHEMA)


@pytest.fixture
def with_expression(tmp_path: Path) -> str:
    """A dataset that gained the non-nullable ``score_x10_v5`` from a SQL expression."""
    uri = str(tmp_path / "ds.lance")
    lance_ops.write_dataset(_rows(0, 10), uri, max_rows_per_file=4)
    lance_ops.dataset(uri).add_columns({"score_x10_v5": "score * 10"})
    return uri


def _unchanged(uri: str, version: int, lance_module: Any) -> None:
    """Nothing was committed and pylance still scans every row."""
    assert lance_ops.dataset(uri).version == version
    theirs = lance_module.dataset(uri)
    assert theirs.version == version
    table = theirs.to_table()
    assert table.num_rows == theirs.count_rows()


def test_sql_column_records_its_expression(with_expression: str, lance_module: Any) -> None:
    field = lance_ops.dataset(with_expression).manifest.schema.field("score_x10_v5")
    assert field.expression == "score * 10" and not field.nullable
    theirs = lance_module.dataset(with_expression)
    assert theirs.schema.field("score_x10_v5").metadata == {EXPRESSION_KEY.encode(): b"score * 10"}
    assert theirs.to_table().column("score_x10_v5").to_pylist() == [i * 5.0 for i in range(10)]
    # pylance appends a plain table (no field metadata) and keeps the recorded expression
    plain = _rows(10, 2).append_column("score_x10_v5", pa.array([50.0, 55.0]))
    lance_module.write_dataset(plain, with_expression, mode="append")
    ours = lance_ops.dataset(with_expression)
    assert ours.manifest.schema.field("score_x10_v5").expression == "score * 10"
    assert ours.to_table().column("score_x10_v5").to_pylist()[-2:] == [50.0, 55.0]
    # the expression follows the column through a rename
    ours.alter_columns({"path": "score_x10_v5", "name": "scaled"})
    assert lance_ops.dataset(with_expression).manifest.schema.field("scaled").expression == "score * 10"
    assert lance_module.dataset(with_expression).to_table().num_rows == 12


def test_missing_non_nullable_column_is_refused(with_expression: str, lance_module: Any) -> None:
    version = lance_ops.dataset(with_expression).version
    for fill_missing in (None, "null", "error"):
        with pytest.raises(WriteSchemaError, match="lacks column.*'score_x10_v5'") as caught:
            lance_ops.write_dataset(_rows(10, 3), with_expression, mode="append", fill_missing=fill_missing)
        assert caught.value.columns == ("score_x10_v5",)
        assert isinstance(caught.value, SchemaError) and isinstance(caught.value, OSError)
    with pytest.raises(WriteSchemaError, match="fill_missing='compute' computes it"):
        lance_ops.write_dataset(_rows(10, 3), with_expression, mode="append")
    _unchanged(with_expression, version, lance_module)


def test_fill_missing_compute(with_expression: str, lance_module: Any) -> None:
    version = lance_ops.dataset(with_expression).version
    ds = lance_ops.write_dataset(_rows(10, 3), with_expression, mode="append", fill_missing="compute")
    assert ds.version == version + 1
    table = lance_module.dataset(with_expression).to_table()
    assert table.column("score_x10_v5").to_pylist() == [i * 5.0 for i in range(13)]
    # a re-run of the same write works (one more version, the same values again)
    lance_ops.write_dataset(_rows(10, 3), with_expression, mode="append", fill_missing="compute")
    table = lance_module.dataset(with_expression).to_table()
    assert table.num_rows == 16 and table.column("score_x10_v5").null_count == 0
    # rows that do carry the column are written as given
    given = _rows(20, 1).append_column("score_x10_v5", pa.array([-1.0]))
    lance_ops.write_dataset(given, with_expression, mode="append", fill_missing="compute")
    assert lance_module.dataset(with_expression).to_table().column("score_x10_v5")[-1].as_py() == -1.0


def test_missing_nullable_column_gets_nulls(with_expression: str, lance_module: Any) -> None:
    data = _rows(10, 2).drop_columns(["note"])
    lance_ops.write_dataset(data, with_expression, mode="append", fill_missing="compute")
    lance_ops.write_dataset(
        {"id": [12], "score": [6.0], "score_x10_v5": [60.0]}, with_expression, mode="append"
    )
    table = lance_module.dataset(with_expression).to_table()
    assert table.column("note").to_pylist()[-3:] == [None, None, None]
    assert table.column("score_x10_v5").to_pylist()[-3:] == [50.0, 55.0, 60.0]
    version = lance_ops.dataset(with_expression).version
    with pytest.raises(WriteSchemaError, match=r"lacks column.*'note'.*fill_missing='error'"):
        lance_ops.write_dataset(data, with_expression, mode="append", fill_missing="error")
    _unchanged(with_expression, version, lance_module)


def test_nulls_in_non_nullable_column_are_refused(with_expression: str, lance_module: Any) -> None:
    version = lance_ops.dataset(with_expression).version
    # the user's bug: the column filled with nulls by hand, typed nullable
    nulls = _rows(10, 2000).append_column("score_x10_v5", pa.nulls(2000, pa.float64()))
    with pytest.raises(WriteSchemaError, match="'score_x10_v5' is not nullable but holds 2000 null"):
        lance_ops.write_dataset(nulls, with_expression, mode="append")
    # a table claiming non-nullable types while holding nulls (pyarrow does not check)
    schema = lance_ops.dataset(with_expression).schema
    lying = pa.Table.from_arrays([*_rows(10, 2).columns, pa.array([1.0, None])], schema=schema)
    with pytest.raises(WriteSchemaError, match="'score_x10_v5' is not nullable but holds 1 null"):
        lance_ops.write_dataset(lying, with_expression, mode="append")
    _unchanged(with_expression, version, lance_module)


def test_uncastable_and_extra_columns_are_refused(with_expression: str, lance_module: Any) -> None:
    version = lance_ops.dataset(with_expression).version
    data = {"id": ["1", "abc"], "score": [1.0, 2.0], "score_x10_v5": [1.0, 2.0]}
    with pytest.raises(WriteSchemaError, match=r"column 'id' is int64.*string value 'abc'") as caught:
        lance_ops.write_dataset(data, with_expression, mode="append")
    assert "Failed to parse" not in str(caught.value)
    with pytest.raises(WriteSchemaError, match=r"column 'id' is int64.*list<item: int64> does not convert"):
        lance_ops.write_dataset(
            {"id": [[1]], "score": [1.0], "score_x10_v5": [1.0]}, with_expression, mode="append"
        )
    with pytest.raises(WriteSchemaError, match=r"\['other'\] that the dataset does not have"):
        lance_ops.write_dataset(
            {"id": [1], "score": [1.0], "score_x10_v5": [1.0], "other": [1]}, with_expression, mode="append"
        )
    with pytest.raises(InvalidArgumentError, match="fill_missing"):
        lance_ops.write_dataset(_rows(1, 1), with_expression, mode="append", fill_missing="zero")
    _unchanged(with_expression, version, lance_module)


def test_overflow_is_refused(tmp_path: Path, lance_module: Any) -> None:
    uri = str(tmp_path / "small.lance")
    lance_ops.write_dataset(pa.table({"n": pa.array([1], pa.int32())}), uri)
    with pytest.raises(WriteSchemaError, match=r"column 'n' is int32.*int64 value 3000000000"):
        lance_ops.write_dataset(pa.table({"n": [2, 3_000_000_000]}), uri, mode="append")
    _unchanged(uri, 1, lance_module)


def test_nested_non_nullable_children(tmp_path: Path, lance_module: Any) -> None:
    inner = pa.struct([pa.field("x", pa.int64(), nullable=False)])
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("s", inner)])
    uri = str(tmp_path / "nested.lance")
    lance_ops.write_dataset(pa.table({"id": [1], "s": [{"x": 1}]}, schema=schema), uri)
    # a null struct may hide a null child; a present struct may not
    ok = pa.StructArray.from_arrays(
        [pa.array([None, 2])], fields=[pa.field("x", pa.int64())], mask=pa.array([True, False])
    )
    lance_ops.write_dataset(pa.table({"id": [2, 3], "s": ok}), uri, mode="append")
    bad = pa.array([{"x": 4}, {"x": None}], pa.struct([pa.field("x", pa.int64())]))
    with pytest.raises(WriteSchemaError, match="'s.x' is not nullable but holds 1 null"):
        lance_ops.write_dataset(pa.table({"id": [4, 5], "s": bad}), uri, mode="append")
    _unchanged(uri, 2, lance_module)
    assert lance_module.dataset(uri).to_table().column("s").to_pylist() == [{"x": 1}, None, {"x": 2}]


def test_write_fragments_with_fields_conforms(with_expression: str, lance_module: Any) -> None:
    ds = lance_ops.dataset(with_expression)
    with pytest.raises(WriteSchemaError, match="lacks column"):
        write_fragments(_rows(10, 2), with_expression, fields=ds.manifest.schema)
    fragments = write_fragments(
        _rows(10, 2), with_expression, fields=ds.manifest.schema, fill_missing="compute"
    )
    lance_ops.LanceDataset.commit(
        with_expression, lance_ops.LanceOperation.Append(fragments), read_version=ds.version
    )
    assert lance_module.dataset(with_expression).to_table().column("score_x10_v5").to_pylist()[-2:] == [
        50.0,
        55.0,
    ]


def test_commit_guard_refuses_nulls_in_hand_made_fragments(with_expression: str, lance_module: Any) -> None:
    ds = lance_ops.dataset(with_expression)
    version = ds.version
    lance = ds.manifest.schema
    # executor-style: data typed nullable, written with the dataset's field ids
    nullable = pa.schema([f.with_nullable(True) for f in ds.schema])
    data = _rows(10, 3).append_column("score_x10_v5", pa.array([1.0, None, None]))
    fragments = write_fragments(data.cast(nullable), with_expression, schema=nullable, fields=lance)
    append = lance_ops.LanceOperation.Append(fragments)
    with pytest.raises(WriteSchemaError, match="holds 2 null.*'score_x10_v5'"):
        lance_ops.LanceDataset.commit(with_expression, append, read_version=version)
    # the same fragments shipped as JSON (null counts lost): the page statistics tell
    shipped = [DataFragment.from_json(f.to_json()) for f in fragments]
    assert shipped[0].files[0].null_counts is None
    with pytest.raises(WriteSchemaError, match="holds 2 null.*'score_x10_v5'"):
        lance_ops.LanceDataset.commit(
            with_expression, lance_ops.LanceOperation.Append(shipped), read_version=version
        )
    # a fragment whose files lack a non-nullable column
    partial = write_fragments(
        _rows(10, 3).select(["id", "score"]),
        with_expression,
        schema=SCHEMA.remove(2),
        fields=lance.project(["id", "score"]),
    )
    with pytest.raises(WriteSchemaError, match="no data for non-nullable column 'score_x10_v5'"):
        lance_ops.LanceDataset.commit(
            with_expression, lance_ops.LanceOperation.Append(partial), read_version=version
        )
    _unchanged(with_expression, version, lance_module)
    assert not list(Path(with_expression, "_transactions").glob(f"{version}-*"))


def test_commit_guard_reads_page_statistics_of_foreign_files(with_expression: str, lance_module: Any) -> None:
    """A data file written outside the fragment writer (by hand, with the dataset's field ids)."""
    ds = lance_ops.dataset(with_expression)
    data = _rows(10, 2).append_column("score_x10_v5", pa.array([None, 1.0]))
    name = "hand-made.lance"
    with LanceFileWriter(
        f"{with_expression}/data/{name}",
        pa.schema([f.with_nullable(True) for f in ds.schema]),
        lance_fields=ds.manifest.schema.to_pb(),
    ) as writer:
        writer.write_batch(data)
    ids = ds.manifest.schema.leaf_ids
    data_file = DataFile(name, ids, tuple(range(len(ids))), 2, 2)
    fragment = DataFragment(id=0, files=(data_file,), physical_rows=2)
    with pytest.raises(WriteSchemaError, match="holds 1 null"):
        lance_ops.LanceDataset.commit(
            with_expression, lance_ops.LanceOperation.Append([fragment]), read_version=ds.version
        )
    _unchanged(with_expression, ds.version, lance_module)


def test_compaction_and_deletions_pass_the_guard(with_expression: str, lance_module: Any) -> None:
    ds = lance_ops.dataset(with_expression)
    ds.delete("id % 3 = 0")
    # a column added to fragments with deleted rows stores them as nulls: within the deleted rows
    ds.add_columns({"twice": "id * 2"})
    assert not ds.manifest.schema.field("twice").nullable
    ds.optimize.compact_files(target_rows_per_fragment=100)
    theirs = lance_module.dataset(with_expression).to_table()
    assert theirs.column("twice").to_pylist() == [i * 2 for i in range(10) if i % 3]
    assert theirs.column("score_x10_v5").null_count == 0


def test_pylance_added_column(tmp_path: Path, lance_module: Any) -> None:
    """A column pylance added records no expression: it must be given; compute cannot make it."""
    uri = str(tmp_path / "theirs.lance")
    lance_module.write_dataset(_rows(0, 4), uri)
    lance_module.dataset(uri).add_columns({"plus": "id + 1"})
    assert lance_ops.dataset(uri).manifest.schema.field("plus").expression is None
    with pytest.raises(WriteSchemaError, match="'plus' is not nullable and records no expression"):
        lance_ops.write_dataset(_rows(4, 2), uri, mode="append", fill_missing="compute")
    _unchanged(uri, 2, lance_module)
    given = _rows(4, 2).append_column("plus", pa.array([5, 6]))
    lance_ops.write_dataset(given, uri, mode="append")
    assert lance_module.dataset(uri).to_table().column("plus").to_pylist() == [1, 2, 3, 4, 5, 6]


def test_conform_plan_checks_schemas_only() -> None:
    target = pa.schema([pa.field("a", pa.int64(), False), pa.field("b", pa.string())])
    plan = Conform(target).plan(pa.schema([pa.field("a", pa.string())]))
    assert plan.filled == ("b",)
    with pytest.raises(WriteSchemaError, match="'a' is int64.*struct<x: int64> does not convert"):
        Conform(target).plan(pa.schema([pa.field("a", pa.struct([pa.field("x", pa.int64())]))]))
