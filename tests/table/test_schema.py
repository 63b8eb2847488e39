"""The domain schema type (``LanceSchema`` / ``LanceField``) and data files for existing fragments."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import lance_ops
from lance_ops import LanceDataset, LanceOperation
from lance_ops.errors import SchemaError
from lance_ops.fragment import WriteOptions, write_data_file
from lance_ops.table.schema import LanceField, LanceSchema
from tests.table.conftest import table


def test_round_trips_through_protobuf_and_arrow() -> None:
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("st", pa.struct([("a", pa.int32()), ("l", pa.list_(pa.string()))])),
        ],
        metadata={"k": "v"},
    )
    lance_schema = LanceSchema.from_arrow(schema)
    assert lance_schema.field_ids == (0, 1, 2, 3, 4) and lance_schema.max_field_id == 4
    assert lance_schema.leaf_ids == (0, 2, 4)
    assert lance_schema.names == ["id", "st"]
    assert LanceSchema.from_pb(lance_schema.to_pb(), lance_schema.metadata) == lance_schema
    assert lance_schema.to_arrow() == schema and lance_schema.to_arrow().metadata == {b"k": b"v"}
    assert [f.id for f in lance_schema.subtree(1)] == [1, 2, 3, 4]
    assert lance_schema.top_level_of() == {0: 0, 1: 1, 2: 1, 3: 1, 4: 1}


def test_new_fields_are_numbered_after_the_maximum_id() -> None:
    base = LanceSchema.from_arrow(pa.schema([("a", pa.int64()), ("b", pa.string())]))
    dropped = base.without([0])
    assert dropped.field_ids == (1,) and dropped.names == ["b"]
    grown = dropped.with_new_fields([pa.field("c", pa.struct([("x", pa.int8())]))])
    assert grown.field_ids == (1, 2, 3) and grown.names == ["b", "c"]
    assert grown.project(["c"]).field_ids == (2, 3)
    with pytest.raises(SchemaError, match="already exist"):
        grown.with_new_fields([pa.field("b", pa.int8())])
    with pytest.raises(SchemaError, match="no such column"):
        grown.field("zz")


def test_fields_are_frozen_domain_objects() -> None:
    field = LanceField(id=0, parent_id=-1, name="a", logical_type="int64")
    with pytest.raises(dataclasses.FrozenInstanceError):
        field.name = "b"  # type: ignore[misc]
    assert LanceField.from_pb(field.to_pb()) == field


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_a_new_data_file_for_existing_fragments_adds_a_column(tmp_path: Path, version: str) -> None:
    uri = str(tmp_path / "t.lance")
    ds = lance_ops.write_dataset(table(10), uri, max_rows_per_file=6, data_storage_version=version)
    new_schema = ds.manifest.schema.with_new_fields([pa.field("y", pa.float64())])
    added = new_schema.project(["y"])
    options = WriteOptions(data_storage_version=ds.data_storage_version)
    fragments = []
    for fragment in ds.get_fragments():
        offsets = fragment.to_table(columns=["id"]).column("id").to_numpy()
        data = pa.table({"y": (offsets * 0.5).astype(np.float64)})
        data_file = write_data_file(data, uri, added, fragment.physical_rows, options)
        assert data_file.fields == (new_schema.max_field_id,)
        fragments.append(dataclasses.replace(fragment.metadata, files=(*fragment.metadata.files, data_file)))
    merged = LanceDataset.commit(uri, LanceOperation.Merge(fragments, new_schema), read_version=ds.version)
    got = merged.to_table()
    assert got.column("y").to_pylist() == [i * 0.5 for i in range(10)]
    assert got.select(["id", "s", "st"]) == table(10)
    assert merged.to_table(columns=["y"], filter="id >= 8").column("y").to_pylist() == [4.0, 4.5]


def test_a_data_file_with_the_wrong_row_count_is_refused(tmp_path: Path) -> None:
    uri = str(tmp_path / "t.lance")
    ds = lance_ops.write_dataset(table(4), uri)
    added = ds.manifest.schema.with_new_fields([pa.field("y", pa.int64())]).project(["y"])
    options = WriteOptions(data_storage_version=ds.data_storage_version)
    for rows in (3, 5):
        with pytest.raises(SchemaError, match="4 rows"):
            write_data_file(pa.table({"y": list(range(rows))}), uri, added, 4, options)
    assert len(list((tmp_path / "t.lance" / "data").iterdir())) == 1


@pytest.mark.interop
def test_pylance_reads_the_added_column(tmp_path: Path, lance_module) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "t.lance")
    ds = lance_ops.write_dataset(table(7), uri, max_rows_per_file=4)
    new_schema = ds.manifest.schema.with_new_fields([pa.field("y", pa.string())])
    options = WriteOptions(data_storage_version=ds.data_storage_version)
    fragments = []
    for fragment in ds.get_fragments():
        ids = fragment.to_table(columns=["id"]).column("id").to_pylist()
        data = pa.table({"y": [f"y{i}" for i in ids]})
        data_file = write_data_file(data, uri, new_schema.project(["y"]), fragment.physical_rows, options)
        fragments.append(dataclasses.replace(fragment.metadata, files=(*fragment.metadata.files, data_file)))
    LanceDataset.commit(uri, LanceOperation.Merge(fragments, new_schema), read_version=ds.version)
    theirs = lance_module.dataset(uri).to_table()
    assert theirs.column("y").to_pylist() == [f"y{i}" for i in range(7)]
    assert theirs.select(["id", "s", "st"]) == table(7)
