"""Schema and field metadata that is not UTF-8 is refused on write, as pylance refuses it (the
manifest keeps metadata as text); base64-encoded binary metadata is written and read back."""

from __future__ import annotations

import base64
import pickle
from pathlib import Path

import lance
import pyarrow as pa
import pytest

import lance_ops
from lance_ops.errors import InvalidArgumentError

BAD = pickle.dumps("foo")
TABLE = pa.table({"a": range(5), "s": pa.array([{"x": i} for i in range(5)])})


def _field_metadata(path: tuple[str, ...]) -> pa.Table:
    if path == ("a",):
        schema = TABLE.schema.set(0, TABLE.schema.field("a").with_metadata({"k": BAD}))
    else:
        inner = pa.struct([pa.field("x", pa.int64(), metadata={"k": BAD})])
        schema = TABLE.schema.set(1, pa.field("s", inner))
    return TABLE.cast(schema)


@pytest.mark.parametrize(
    "table",
    [
        TABLE.replace_schema_metadata({"foo": BAD}),
        TABLE.replace_schema_metadata({BAD: "x"}),
        _field_metadata(("a",)),
        _field_metadata(("s", "x")),
    ],
    ids=["schema_value", "schema_key", "field", "nested_field"],
)
def test_refused_as_pylance(tmp_path: Path, table: pa.Table) -> None:
    with pytest.raises(ValueError):
        lance.write_dataset(table, tmp_path / "theirs")
    with pytest.raises(InvalidArgumentError):
        lance_ops.write_dataset(table, str(tmp_path / "ours"))
    assert not (tmp_path / "ours" / "_versions").exists()


def test_base64_metadata_written(tmp_path: Path) -> None:
    table = TABLE.replace_schema_metadata({"foo": base64.b64encode(BAD)})
    lance_ops.write_dataset(table, str(tmp_path / "ours"))
    assert lance.dataset(tmp_path / "ours").schema.metadata[b"foo"] == base64.b64encode(BAD)
    assert lance_ops.dataset(str(tmp_path / "ours")).schema.metadata[b"foo"] == base64.b64encode(BAD)
