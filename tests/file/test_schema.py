"""Arrow <-> Lance schema mapping, checked field by field against what pylance 14 writes."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from lance_ops._proto import file_pb2 as pb
from lance_ops.errors import SchemaError
from lance_ops.file.format import read_tail
from lance_ops.file.schema import (
    arrow_type,
    field_ids_by_path,
    fields_to_schema,
    leaf_field_ids,
    logical_type,
    max_field_id,
    pb_to_schema,
    schema_to_fields,
    schema_to_pb,
    storage_field,
)
from lance_ops.io import object_store

BF16 = {b"ARROW:extension:name": b"lance.bfloat16", b"ARROW:extension:metadata": b""}

TYPES: dict[str, tuple[pa.DataType, str]] = {
    "null": (pa.null(), "null"),
    "bool": (pa.bool_(), "bool"),
    "int8": (pa.int8(), "int8"),
    "uint8": (pa.uint8(), "uint8"),
    "int16": (pa.int16(), "int16"),
    "uint16": (pa.uint16(), "uint16"),
    "int32": (pa.int32(), "int32"),
    "uint32": (pa.uint32(), "uint32"),
    "int64": (pa.int64(), "int64"),
    "uint64": (pa.uint64(), "uint64"),
    "float16": (pa.float16(), "halffloat"),
    "float32": (pa.float32(), "float"),
    "float64": (pa.float64(), "double"),
    "date32": (pa.date32(), "date32:day"),
    "date64": (pa.date64(), "date64:ms"),
    "time32s": (pa.time32("s"), "time32:s"),
    "time32ms": (pa.time32("ms"), "time32:ms"),
    "time64us": (pa.time64("us"), "time64:us"),
    "time64ns": (pa.time64("ns"), "time64:ns"),
    "ts_s": (pa.timestamp("s"), "timestamp:s:-"),
    "ts_ms": (pa.timestamp("ms"), "timestamp:ms:-"),
    "ts_us_utc": (pa.timestamp("us", "UTC"), "timestamp:us:UTC"),
    "ts_ns_ny": (pa.timestamp("ns", "America/New_York"), "timestamp:ns:America/New_York"),
    "ts_us_offset": (pa.timestamp("us", "+05:30"), "timestamp:us:+05:30"),
    "dur_s": (pa.duration("s"), "duration:s"),
    "dur_ms": (pa.duration("ms"), "duration:ms"),
    "dur_us": (pa.duration("us"), "duration:us"),
    "dur_ns": (pa.duration("ns"), "duration:ns"),
    "dec128": (pa.decimal128(10, 2), "decimal:128:10:2"),
    "dec256": (pa.decimal256(40, 2), "decimal:256:40:2"),
    "binary": (pa.binary(), "binary"),
    "large_binary": (pa.large_binary(), "large_binary"),
    "string": (pa.string(), "string"),
    "large_string": (pa.large_string(), "large_string"),
    "fsb": (pa.binary(16), "fixed_size_binary:16"),
    "list": (pa.list_(pa.int32()), "list"),
    "list_struct": (pa.list_(pa.struct([("x", pa.int32())])), "list.struct"),
    "large_list": (pa.large_list(pa.field("element", pa.int8(), nullable=False)), "large_list"),
    "large_list_struct": (pa.large_list(pa.struct([("x", pa.string())])), "large_list.struct"),
    "fsl": (pa.list_(pa.float32(), 2), "fixed_size_list:float:2"),
    "fsl_fsl": (pa.list_(pa.list_(pa.int32(), 2), 2), "fixed_size_list:fixed_size_list:int32:2:2"),
    "fsl_ts": (pa.list_(pa.timestamp("us", "+05:30"), 3), "fixed_size_list:timestamp:us:+05:30:3"),
    "fsl_bf16": (
        pa.list_(pa.field("item", pa.binary(2), metadata=BF16), 4),
        "fixed_size_list:lance.bfloat16:4",
    ),
    "struct": (pa.struct([("x", pa.int32()), ("y", pa.string())]), "struct"),
    "empty_struct": (pa.struct([]), "struct"),
    "nested": (pa.struct([("l", pa.list_(pa.struct([("z", pa.large_string())])))]), "struct"),
    "dict": (pa.dictionary(pa.int32(), pa.string()), "dict:string:int32:false"),
    "dict_u16": (pa.dictionary(pa.uint16(), pa.int64()), "dict:int64:uint16:false"),
    "dict_f16": (pa.dictionary(pa.int8(), pa.float16()), "dict:halffloat:int8:false"),
    "map": (pa.map_(pa.string(), pa.int32()), "map"),
    "uuid": (pa.uuid(), "fixed_size_binary:16"),
}


@pytest.mark.parametrize("name", list(TYPES))
def test_logical_type_both_ways(name: str) -> None:
    data_type, expected = TYPES[name]
    assert logical_type(data_type) == expected
    if name not in ("uuid", "fsl_bf16") and expected not in ("struct", "map") and "list" not in expected:
        assert arrow_type(expected) == data_type


def _schema(name: str) -> pa.Schema:
    data_type, _ = TYPES[name]
    return pa.schema([pa.field(name, data_type), pa.field("tail", pa.int64(), nullable=False)])


def _pylance_descriptor(tmp_path: Path, schema: pa.Schema) -> pb.FileDescriptor:
    from lance.file import LanceFileWriter

    path = str(tmp_path / "pylance.lance")
    LanceFileWriter(path, schema, version="2.2").close()
    store, store_path = object_store(path)
    return read_tail(store, store_path).descriptor


@pytest.mark.interop
@pytest.mark.parametrize("name", list(TYPES))
def test_fields_match_pylance(tmp_path: Path, name: str) -> None:
    import lance.file

    schema = _schema(name)
    theirs = _pylance_descriptor(tmp_path, schema).schema
    assert schema_to_fields(schema) == list(theirs.fields)
    ours = pb_to_schema(theirs)
    pylance_schema = lance.file.LanceFileReader(str(tmp_path / "pylance.lance")).metadata().schema
    assert ours.equals(pylance_schema, check_metadata=False), (ours, pylance_schema)


@pytest.mark.interop
def test_metadata_and_primary_key_match_pylance(tmp_path: Path) -> None:
    schema = pa.schema(
        [
            pa.field(
                "id", pa.int64(), nullable=False, metadata={"lance-schema:unenforced-primary-key": "true"}
            ),
            pa.field("s", pa.struct([pa.field("x", pa.int32(), metadata={"k": "v"})]), metadata={"a": "b"}),
        ],
        metadata={"schema-key": "schema-value"},
    )
    theirs = _pylance_descriptor(tmp_path, schema).schema
    assert schema_to_pb(schema) == theirs
    assert theirs.fields[0].unenforced_primary_key
    back = pb_to_schema(theirs)
    assert back.equals(schema, check_metadata=True)


def test_pre_order_ids_and_helpers() -> None:
    schema = pa.schema(
        [
            ("a", pa.int32()),
            ("s", pa.struct([("x", pa.list_(pa.int8())), ("y", pa.string())])),
            ("m", pa.map_(pa.string(), pa.float64())),
        ]
    )
    fields = schema_to_fields(schema)
    assert [(f.name, f.id, f.parent_id) for f in fields] == [
        ("a", 0, -1),
        ("s", 1, -1),
        ("x", 2, 1),
        ("item", 3, 2),
        ("y", 4, 1),
        ("m", 5, -1),
        ("entries", 6, 5),
        ("key", 7, 6),
        ("value", 8, 6),
    ]
    assert leaf_field_ids(fields) == [0, 3, 4, 7, 8]
    assert max_field_id(fields) == 8 and max_field_id([]) == -1
    assert field_ids_by_path(fields)[("s", "x", "item")] == 3
    shifted = schema_to_fields(schema, start_id=10)
    assert [f.id for f in shifted] == [f.id + 10 for f in fields]
    assert fields_to_schema(shifted) == schema
    assert fields_to_schema(fields, {"k": b"v"}).metadata == {b"k": b"v"}


def test_non_contiguous_ids_and_bad_trees() -> None:
    fields = schema_to_fields(pa.schema([("s", pa.struct([("x", pa.int32())]))]))
    fields[0].id, fields[1].id, fields[1].parent_id = 5, 9, 5
    assert fields_to_schema(fields) == pa.schema([("s", pa.struct([("x", pa.int32())]))])
    fields[1].parent_id = 7
    with pytest.raises(SchemaError):
        fields_to_schema(fields)
    with pytest.raises(SchemaError):
        fields_to_schema([fields[0], fields[0]])
    with pytest.raises(SchemaError):
        arrow_type("no_such_type")
    with pytest.raises(SchemaError):
        arrow_type("decimal:512:1:1")
    with pytest.raises(SchemaError):
        arrow_type("list")


@pytest.mark.parametrize(
    "data_type",
    [
        pa.decimal32(5, 2),
        pa.decimal64(12, 2),
        pa.month_day_nano_interval(),
        pa.list_view(pa.int32()),
        pa.list_(pa.list_(pa.int32()), 2),
        pa.map_(pa.string(), pa.int32(), keys_sorted=True),
        pa.dictionary(pa.int32(), pa.struct([("x", pa.int32())])),
        pa.dictionary(pa.int8(), pa.decimal128(5, 1)),
        pa.dictionary(pa.int8(), pa.timestamp("us")),
        pa.run_end_encoded(pa.int32(), pa.string()),
        pa.dense_union([pa.field("x", pa.int32())]),
    ],
)
def test_unsupported_types(data_type: pa.DataType) -> None:
    with pytest.raises(SchemaError):
        schema_to_fields(pa.schema([("x", data_type)]))


def test_extension_types_round_trip() -> None:
    schema = pa.schema([("u", pa.uuid()), ("fb", pa.list_(pa.field("item", pa.binary(2), metadata=BF16), 2))])
    fields = schema_to_fields(schema)
    assert fields[0].extension_name == "arrow.uuid"
    assert fields[0].metadata["ARROW:extension:name"] == b"arrow.uuid"
    back = fields_to_schema(fields)
    assert back.field("u").type == pa.uuid()
    assert back.field("fb").type.value_field.metadata == BF16


def test_json_maps_to_lance_json() -> None:
    (field,) = schema_to_fields(pa.schema([("j", pa.json_())]))
    assert (field.logical_type, field.extension_name, field.encoding) == ("json", "lance.json", pb.VAR_BINARY)
    back = fields_to_schema([field])
    # read back as arrow.json text (as pylance 14); stored as JSONB large_binary
    assert back.field("j").type == pa.json_()
    assert storage_field(back.field("j")).type == pa.large_binary()
    assert storage_field(back.field("j")).metadata[b"ARROW:extension:name"] == b"lance.json"
    assert schema_to_fields(back) == [field]


def test_views_are_stored_as_plain() -> None:
    fields = schema_to_fields(pa.schema([("s", pa.string_view()), ("b", pa.binary_view())]))
    assert [f.logical_type for f in fields] == ["string", "binary"]
