"""Arrow schema <-> Lance schema (``lance.file.Schema`` / repeated ``lance.file.Field``).

Lance flattens an Arrow schema into a list of fields in pre-order (parent before
children, depth first). Each field carries its own ``id`` (0, 1, 2, ... in pre-order
when written fresh) and the ``parent_id`` of its parent (-1 at the top level). Types are
stored as strings (``Field.logical_type``):

=====================================  ======================================================
Arrow type                             logical_type
=====================================  ======================================================
null, bool, int8..uint64               ``null``, ``bool``, ``int8`` ... ``uint64``
float16 / float32 / float64            ``halffloat`` / ``float`` / ``double``
date32 / date64                        ``date32:day`` / ``date64:ms``
time32[s|ms] / time64[us|ns]           ``time32:s`` ... ``time64:ns``
timestamp[unit, tz]                    ``timestamp:{unit}:{tz or -}``
duration[unit]                         ``duration:{unit}``
decimal128(p,s) / decimal256(p,s)      ``decimal:128:{p}:{s}`` / ``decimal:256:{p}:{s}``
binary / large_binary / string / ...   ``binary`` / ``large_binary`` / ``string`` / ``large_string``
fixed_size_binary(n)                   ``fixed_size_binary:{n}``
list<T> / large_list<T>                ``list`` / ``large_list`` (``.struct`` suffix when T is a
                                       struct); T follows as a child field
fixed_size_list<T, n>                  ``fixed_size_list:{logical_type(T)}:{n}`` (no child field;
                                       a ``lance.bfloat16`` child is written as that name)
struct                                 ``struct``; children follow as fields
dictionary<K, V>                       ``dict:{logical_type(V)}:{logical_type(K)}:false`` (V without
                                       parameters, e.g. no decimals or timestamps)
map<K, V>                              ``map``; child ``entries`` (struct) -> ``key``, ``value``
arrow.json extension                   ``json`` (Lance JSON: JSONB in ``lance.json`` large_binary, read
                                       back as arrow.json text; :mod:`lance_ops.encoding.jsonb`)
=====================================  ======================================================

Other extension types are stored as their storage type, with ``ARROW:extension:name`` and
``ARROW:extension:metadata`` in the field metadata (and the name copied into the deprecated
``extension_name``), and rebuilt on read when pyarrow knows the extension. ``string_view`` /
``binary_view`` are stored as ``string`` / ``binary``. Field and schema metadata are maps of
UTF-8 keys to bytes. The deprecated v1 ``Field.encoding`` is still filled in the way pylance
does (PLAIN, VAR_BINARY, DICTIONARY or NONE); readers ignore it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from lance_ops._proto import file_pb2 as pb
from lance_ops.encoding import jsonb
from lance_ops.encoding.api import FileVersion
from lance_ops.errors import SchemaError

EXTENSION_NAME_KEY = b"ARROW:extension:name"
EXTENSION_METADATA_KEY = b"ARROW:extension:metadata"
PRIMARY_KEY_KEY = b"lance-schema:unenforced-primary-key"
BLOB_KEY = "lance-encoding:blob"
BLOB_V2_DESCRIPTION_FIELDS = ("kind", "position", "size", "blob_id", "blob_uri")
BFLOAT16_EXTENSION = "lance.bfloat16"
JSON_EXTENSION = "lance.json"
ARROW_JSON_EXTENSION = "arrow.json"
_TRUE_STRINGS = {b"true", b"1", b"yes"}

_PRIMITIVES: dict[str, pa.DataType] = {
    "null": pa.null(),
    "bool": pa.bool_(),
    "int8": pa.int8(),
    "uint8": pa.uint8(),
    "int16": pa.int16(),
    "uint16": pa.uint16(),
    "int32": pa.int32(),
    "uint32": pa.uint32(),
    "int64": pa.int64(),
    "uint64": pa.uint64(),
    "halffloat": pa.float16(),
    "float": pa.float32(),
    "double": pa.float64(),
    "date32:day": pa.date32(),
    "date64:ms": pa.date64(),
    "time32:s": pa.time32("s"),
    "time32:ms": pa.time32("ms"),
    "time64:us": pa.time64("us"),
    "time64:ns": pa.time64("ns"),
    "duration:s": pa.duration("s"),
    "duration:ms": pa.duration("ms"),
    "duration:us": pa.duration("us"),
    "duration:ns": pa.duration("ns"),
    "binary": pa.binary(),
    "large_binary": pa.large_binary(),
    "string": pa.string(),
    "large_string": pa.large_string(),
    "json": pa.large_binary(),
}
_PRIMITIVE_NAMES: dict[pa.DataType, str] = {t: n for n, t in _PRIMITIVES.items() if n != "json"}
_PRIMITIVE_NAMES[pa.string_view()] = "string"
_PRIMITIVE_NAMES[pa.binary_view()] = "binary"
_VAR_BINARY = {"binary", "large_binary", "string", "large_string", "json"}


# --------------------------------------------------------------------------- Arrow -> Lance


def logical_type(data_type: pa.DataType, field_metadata: Mapping[bytes, bytes] | None = None) -> str:
    """The ``logical_type`` string of an Arrow type (children of nested types are separate fields)."""
    metadata = field_metadata or {}
    if isinstance(data_type, pa.BaseExtensionType):
        if data_type.extension_name == ARROW_JSON_EXTENSION:
            return "json"
        return logical_type(data_type.storage_type)
    if metadata.get(EXTENSION_NAME_KEY) == JSON_EXTENSION.encode():
        return "json"
    name = _PRIMITIVE_NAMES.get(data_type)
    if name is not None:
        return name
    if pa.types.is_timestamp(data_type):
        return f"timestamp:{data_type.unit}:{data_type.tz or '-'}"
    if pa.types.is_decimal128(data_type):
        return f"decimal:128:{data_type.precision}:{data_type.scale}"
    if pa.types.is_decimal256(data_type):
        return f"decimal:256:{data_type.precision}:{data_type.scale}"
    if pa.types.is_fixed_size_binary(data_type):
        return f"fixed_size_binary:{data_type.byte_width}"
    if pa.types.is_map(data_type):
        if data_type.keys_sorted:
            raise SchemaError("Lance cannot store map types with keys_sorted=true")
        return "map"
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type):
        base = "list" if pa.types.is_list(data_type) else "large_list"
        return base + ".struct" if pa.types.is_struct(data_type.value_type) else base
    if pa.types.is_fixed_size_list(data_type):
        child = data_type.value_field
        if _is_nested_variable(child.type):
            raise SchemaError(f"Lance cannot store fixed_size_list of {child.type}")
        if _extension_name(child) == BFLOAT16_EXTENSION:
            inner = BFLOAT16_EXTENSION
        else:
            inner = logical_type(child.type, child.metadata)
        return f"fixed_size_list:{inner}:{data_type.list_size}"
    if pa.types.is_struct(data_type):
        return "struct"
    if pa.types.is_dictionary(data_type):
        value = data_type.value_type
        if not (_is_primitive_value(value)):
            raise SchemaError(f"Lance cannot store dictionaries of {value}")
        if not pa.types.is_integer(data_type.index_type):
            raise SchemaError(f"dictionary indices must be integers, got {data_type.index_type}")
        return f"dict:{logical_type(value)}:{logical_type(data_type.index_type)}:false"
    raise SchemaError(f"Lance cannot store Arrow type {data_type}")


def _extension_name(field: pa.Field) -> str:
    if isinstance(field.type, pa.BaseExtensionType):
        return str(field.type.extension_name)
    return (field.metadata or {}).get(EXTENSION_NAME_KEY, b"").decode("utf-8")


def _is_nested_variable(data_type: pa.DataType) -> bool:
    return (
        pa.types.is_list(data_type)
        or pa.types.is_large_list(data_type)
        or pa.types.is_map(data_type)
        or pa.types.is_list_view(data_type)
        or pa.types.is_large_list_view(data_type)
    )


def _is_primitive_value(data_type: pa.DataType) -> bool:
    """Dictionary values pylance can store: primitives whose logical type has no parameters."""
    try:
        name = logical_type(data_type)
    except SchemaError:
        return False
    return ":" not in name and name not in ("struct", "map", "null", "list", "large_list", "json")


def _legacy_encoding(name: str) -> pb.Encoding:
    if name in _VAR_BINARY:
        return pb.VAR_BINARY
    if name.startswith("dict:"):
        return pb.DICTIONARY
    if name in ("struct", "null"):
        return pb.NONE
    return pb.PLAIN


def _extension_metadata(data_type: pa.BaseExtensionType) -> bytes:
    serialize = getattr(data_type, "__arrow_ext_serialize__", None)
    if serialize is not None:
        return bytes(serialize())
    if data_type.extension_name in ("arrow.uuid", "arrow.json", "arrow.bool8", BFLOAT16_EXTENSION):
        return b""
    if isinstance(data_type, pa.FixedShapeTensorType):
        # Arrow's canonical serialization (C++ FixedShapeTensorType::Serialize): compact JSON.
        tensor: dict[str, Any] = {"shape": list(data_type.shape)}
        if data_type.dim_names:
            tensor["dim_names"] = list(data_type.dim_names)
        if data_type.permutation:
            tensor["permutation"] = list(data_type.permutation)
        return json.dumps(tensor, separators=(",", ":")).encode()
    if isinstance(data_type, pa.OpaqueType):
        opaque = {"type_name": data_type.type_name, "vendor_name": data_type.vendor_name}
        return json.dumps(opaque, separators=(",", ":")).encode()
    raise SchemaError(f"cannot serialize the metadata of extension type {data_type.extension_name}")


def _children(data_type: pa.DataType) -> list[pa.Field]:
    if isinstance(data_type, pa.BaseExtensionType):
        return _children(data_type.storage_type)
    if pa.types.is_struct(data_type):
        return [data_type.field(i) for i in range(data_type.num_fields)]
    if pa.types.is_map(data_type):
        entries = pa.struct([data_type.key_field, data_type.item_field])
        return [pa.field("entries", entries, nullable=False)]
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type):
        return [data_type.value_field]
    return []


def _field_to_pb(field: pa.Field, field_id: int, parent_id: int) -> pb.Field:
    metadata: dict[bytes, bytes] = dict(field.metadata or {})
    data_type = field.type
    name = logical_type(data_type, metadata)
    extension_name = ""
    if isinstance(data_type, pa.BaseExtensionType):
        extension_name = data_type.extension_name
        if extension_name == ARROW_JSON_EXTENSION:
            extension_name = JSON_EXTENSION
            metadata[EXTENSION_METADATA_KEY] = b""
        else:
            metadata[EXTENSION_METADATA_KEY] = _extension_metadata(data_type)
        metadata[EXTENSION_NAME_KEY] = extension_name.encode()
    elif EXTENSION_NAME_KEY in metadata:
        extension_name = metadata[EXTENSION_NAME_KEY].decode("utf-8")
    out = pb.Field(
        name=field.name,
        id=field_id,
        parent_id=parent_id,
        logical_type=name,
        nullable=field.nullable,
        encoding=_legacy_encoding(name),
        extension_name=extension_name,
        unenforced_primary_key=metadata.get(PRIMARY_KEY_KEY, b"").lower() in _TRUE_STRINGS,
    )
    for key, value in metadata.items():
        out.metadata[key.decode("utf-8")] = value
    return out


def schema_to_fields(schema: pa.Schema | Iterable[pa.Field], start_id: int = 0) -> list[pb.Field]:
    """Flatten an Arrow schema (or fields) into Lance fields in pre-order, ids from ``start_id``.

    Like pylance, the children of a blob v2 description (:func:`is_blob_v2_description`) get id
    and parent id -1 and take no id from the count.
    """
    out: list[pb.Field] = []
    next_id = start_id

    def visit(field: pa.Field, parent_id: int) -> None:
        nonlocal next_id
        field_id = next_id
        next_id += 1
        out.append(_field_to_pb(field, field_id, parent_id))
        if is_blob_v2_description(out[-1]) and _has_description_layout(field.type):
            out.extend(_field_to_pb(child, -1, -1) for child in _children(field.type))
            return
        for child in _children(field.type):
            visit(child, field_id)

    for field in schema:
        visit(field, -1)
    return out


def adopt_fields(schema: pa.Schema, given: Sequence[pb.Field]) -> list[pb.Field]:
    """``given`` (a dataset's Lance fields for ``schema``: its field ids, dictionary markers) after
    checking that they describe ``schema`` field by field as :func:`schema_to_fields` would.

    pylance stores a dataset's own field messages in each data file it writes; a file written
    on its own numbers its fields from 0.
    """
    derived = schema_to_fields(schema)
    if len(given) != len(derived):
        raise SchemaError(f"{len(given)} Lance fields cannot describe a schema of {len(derived)} fields")
    index_of = {field.id: i for i, field in enumerate(given) if field.id >= 0}
    position = {field.id: i for i, field in enumerate(derived) if field.id >= 0}
    for ours, theirs in zip(derived, given, strict=True):
        parent = -1 if theirs.parent_id < 0 else index_of.get(theirs.parent_id, -2)
        if (
            ours.name != theirs.name
            or ours.logical_type != theirs.logical_type
            or (-1 if ours.parent_id < 0 else position[ours.parent_id]) != parent
        ):
            raise SchemaError(
                f"Lance field {theirs.name!r} ({theirs.logical_type}, id {theirs.id}) does not match "
                f"the schema's {ours.name!r} ({ours.logical_type})"
            )
    return [pb.Field.FromString(field.SerializeToString()) for field in given]


def table_fields(schema: pa.Schema | Iterable[pa.Field], start_id: int = 0) -> list[pb.Field]:
    """:func:`schema_to_fields` for a dataset manifest: as in pylance's manifests, dictionary fields
    carry an empty ``dictionary`` message (a 2.x file keeps no dictionary values in its schema;
    readers ignore the message)."""
    fields = schema_to_fields(schema, start_id)
    for field in fields:
        if field.logical_type.startswith("dict:"):
            field.dictionary.SetInParent()
    return fields


def schema_metadata_to_pb(metadata: Mapping[bytes | str, bytes | str] | None) -> dict[str, bytes]:
    """Arrow schema metadata as the ``map<string, bytes>`` Lance stores."""
    return {_as_str(k): _as_bytes(v) for k, v in (metadata or {}).items()}


def schema_to_pb(schema: pa.Schema) -> pb.Schema:
    """A full ``lance.file.Schema`` message (fields + schema metadata)."""
    return pb.Schema(fields=schema_to_fields(schema), metadata=schema_metadata_to_pb(schema.metadata))


def _as_str(value: bytes | str) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value


def _as_bytes(value: bytes | str) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else bytes(value)


# --------------------------------------------------------------------------- Lance -> Arrow


def arrow_type(name: str, children: Sequence[pa.Field] = ()) -> pa.DataType:
    """The Arrow type of a ``logical_type`` string; ``children`` are the child fields, built already."""
    primitive = _PRIMITIVES.get(name)
    if primitive is not None:
        return primitive
    head, _, rest = name.partition(":")
    try:
        if head == "timestamp":
            unit, _, tz = rest.partition(":")
            return pa.timestamp(unit, None if tz in ("", "-") else tz)
        if head == "decimal":
            width, precision, scale = rest.split(":")
            factory = {"128": pa.decimal128, "256": pa.decimal256}[width]
            return factory(int(precision), int(scale))
        if head == "fixed_size_binary":
            return pa.binary(int(rest))
        if head == "fixed_size_list":
            inner, _, size = rest.rpartition(":")
            return pa.list_(_fsl_child(inner), int(size))
        if head == "dict":
            body, _, ordered = rest.rpartition(":")
            value, _, key = body.rpartition(":")
            return pa.dictionary(arrow_type(key), arrow_type(value), ordered=ordered == "true")
    except (ValueError, KeyError, TypeError, pa.ArrowException) as exc:
        raise SchemaError(f"invalid Lance logical type {name!r}: {exc}") from exc
    if name in ("list", "list.struct", "large_list", "large_list.struct"):
        if len(children) != 1:
            raise SchemaError(f"Lance {name} field needs exactly one child, found {len(children)}")
        return pa.list_(children[0]) if name.startswith("list") else pa.large_list(children[0])
    if name == "struct":
        return pa.struct(list(children))
    if name == "map":
        if len(children) != 1 or len(children[0].type) != 2:
            raise SchemaError("Lance map field needs one struct child with key and value")
        entries = children[0].type
        return pa.map_(entries.field(0), entries.field(1))
    raise SchemaError(f"unsupported Lance logical type {name!r}")


def _fsl_child(inner: str) -> pa.Field:
    if inner == BFLOAT16_EXTENSION:
        metadata = {EXTENSION_NAME_KEY: BFLOAT16_EXTENSION.encode(), EXTENSION_METADATA_KEY: b""}
        return pa.field("item", pa.binary(2), metadata=metadata)
    return pa.field("item", arrow_type(inner))


def _pb_field_to_arrow(field: pb.Field, children: Sequence[pa.Field]) -> pa.Field:
    metadata = {k.encode("utf-8"): bytes(v) for k, v in field.metadata.items()}
    if field.logical_type == "json":
        # Lance JSON (JSONB in the files) reads as arrow.json text, as pylance returns it.
        for key in (EXTENSION_NAME_KEY, EXTENSION_METADATA_KEY):
            metadata.pop(key, None)
        return pa.field(field.name, pa.json_(), nullable=field.nullable, metadata=metadata or None)
    if field.extension_name and EXTENSION_NAME_KEY not in metadata:
        metadata[EXTENSION_NAME_KEY] = field.extension_name.encode("utf-8")
    data_type = arrow_type(field.logical_type, children)
    return pa.field(field.name, data_type, nullable=field.nullable, metadata=metadata or None)


def field_tree(fields: Sequence[pb.Field]) -> list[tuple[pb.Field, list]]:
    """Rebuild the field tree from ``parent_id``: a list of ``(field, children)`` for top-level fields.

    Fields with id -1 right after a blob v2 description are its children
    (:func:`is_blob_v2_description`).
    """
    nodes: dict[int, tuple[pb.Field, list]] = {}
    roots: list[tuple[pb.Field, list]] = []
    description: tuple[pb.Field, list] | None = None
    for field in fields:
        node: tuple[pb.Field, list] = (field, [])
        if field.id == -1 and description is not None:
            description[1].append(node)
            continue
        description = node if is_blob_v2_description(field) else None
        if field.id in nodes:
            raise SchemaError(f"duplicate Lance field id {field.id}")
        nodes[field.id] = node
        if field.parent_id == -1:
            roots.append(node)
        elif field.parent_id in nodes:
            nodes[field.parent_id][1].append(node)
        else:
            raise SchemaError(f"field {field.name!r} (id {field.id}) has unknown parent id {field.parent_id}")
    return roots


def fields_to_schema(fields: Sequence[pb.Field], metadata: Mapping[str, bytes] | None = None) -> pa.Schema:
    """Rebuild an Arrow schema from Lance fields (parents must precede children) and metadata."""

    def build(node: tuple[pb.Field, list]) -> pa.Field:
        field, children = node
        return _pb_field_to_arrow(field, [build(child) for child in children])

    arrow_fields = [build(root) for root in field_tree(fields)]
    schema_metadata = {k.encode("utf-8"): bytes(v) for k, v in (metadata or {}).items()}
    schema = pa.schema(arrow_fields, metadata=schema_metadata or None)
    if any(_carries_extension(f) for f in fields):
        # An IPC round trip turns extension metadata into registered pyarrow extension types.
        schema = pa.ipc.read_schema(pa.py_buffer(schema.serialize()))
    return schema


def _has_description_layout(data_type: pa.DataType) -> bool:
    """The children of a ``lance.blob.v2`` description; any other struct marked blob (a user's,
    in a file of its own) numbers its children as pylance's file writer does."""
    return tuple(data_type.field(i).name for i in range(data_type.num_fields)) == BLOB_V2_DESCRIPTION_FIELDS


def is_blob_v2_description(field: pb.Field) -> bool:
    """A data file's ``lance.blob.v2`` column: a packed struct marked ``lance-encoding:blob``.

    pylance 14 writes its children (kind, position, size, blob_id, blob_uri) right after it,
    with id and parent id -1; :func:`field_tree` attaches them to it.
    """
    return field.logical_type == "struct" and field.metadata.get(BLOB_KEY, b"").lower() in _TRUE_STRINGS


def _carries_extension(field: pb.Field) -> bool:
    return (
        bool(field.extension_name)
        or BFLOAT16_EXTENSION in field.logical_type
        or (EXTENSION_NAME_KEY.decode() in field.metadata)
    )


def pb_to_schema(schema: pb.Schema) -> pa.Schema:
    """Arrow schema of a ``lance.file.Schema`` message."""
    return fields_to_schema(schema.fields, schema.metadata)


# --------------------------------------------------------------------------- field ids


def field_ids_by_path(fields: Sequence[pb.Field]) -> dict[tuple[str, ...], int]:
    """Map each field's name path (top-level name first) to its id."""
    out: dict[tuple[str, ...], int] = {}

    def visit(node: tuple[pb.Field, list], prefix: tuple[str, ...]) -> None:
        path = (*prefix, node[0].name)
        out[path] = node[0].id
        for child in node[1]:
            visit(child, path)

    for root in field_tree(fields):
        visit(root, ())
    return out


def max_field_id(fields: Iterable[pb.Field]) -> int:
    """The largest id in ``fields`` (-1 when empty); new fields start at ``max_field_id + 1``."""
    return max((f.id for f in fields), default=-1)


def leaf_field_ids(fields: Sequence[pb.Field]) -> list[int]:
    """Ids of fields without children, in pre-order (the fields that own columns in 2.1+).

    A blob v2 description is one leaf (its children have id -1).
    """
    parents = {f.parent_id for f in fields}
    return [f.id for f in fields if f.id not in parents and f.id != -1]


def storage_type(data_type: pa.DataType) -> pa.DataType:
    """``data_type`` with every extension type replaced by its storage type (what the codec sees)."""
    if isinstance(data_type, pa.BaseExtensionType):
        if data_type.extension_name == ARROW_JSON_EXTENSION:
            return pa.large_binary()  # JSONB (lance_ops.encoding.jsonb)
        return storage_type(data_type.storage_type)
    if pa.types.is_struct(data_type):
        return pa.struct([storage_field(data_type.field(i)) for i in range(data_type.num_fields)])
    if pa.types.is_map(data_type):
        return pa.map_(storage_field(data_type.key_field), storage_field(data_type.item_field))
    if pa.types.is_list(data_type):
        return pa.list_(storage_field(data_type.value_field))
    if pa.types.is_large_list(data_type):
        return pa.large_list(storage_field(data_type.value_field))
    if pa.types.is_fixed_size_list(data_type):
        return pa.list_(storage_field(data_type.value_field), data_type.list_size)
    return data_type


def storage_field(field: pa.Field) -> pa.Field:
    """``field`` with extension types replaced by storage types; extension names move to metadata."""
    metadata = dict(field.metadata or {})
    if is_json(field.type):
        metadata[EXTENSION_NAME_KEY] = JSON_EXTENSION.encode()
        metadata[EXTENSION_METADATA_KEY] = b""
    elif isinstance(field.type, pa.BaseExtensionType):
        metadata[EXTENSION_NAME_KEY] = field.type.extension_name.encode()
    return pa.field(field.name, storage_type(field.type), field.nullable, metadata=metadata or None)


def is_json(data_type: pa.DataType) -> bool:
    """An ``arrow.json`` column: stored as Lance JSON (JSONB bytes), read back as JSON text."""
    return isinstance(data_type, pa.BaseExtensionType) and data_type.extension_name == ARROW_JSON_EXTENSION


def contains_json(data_type: pa.DataType) -> bool:
    """``data_type`` is, or holds (in structs and lists), an ``arrow.json`` column."""
    if is_json(data_type):
        return True
    if pa.types.is_struct(data_type):
        return any(contains_json(f.type) for f in data_type)
    if _is_list_type(data_type):
        return contains_json(data_type.value_type)
    return False


def _is_list_type(data_type: pa.DataType) -> bool:
    return (
        pa.types.is_list(data_type)
        or pa.types.is_large_list(data_type)
        or pa.types.is_fixed_size_list(data_type)
    )


def _map_json(array: pa.Array, data_type: pa.DataType, convert: Any) -> pa.Array:
    """``array`` (of ``data_type``, or of its storage type) with every JSON column inside it
    converted by ``convert`` (text to JSONB or back)."""
    if is_json(data_type):
        return convert(array)
    if not contains_json(data_type):
        return array
    mask = array.is_null() if array.null_count else None
    if pa.types.is_struct(data_type):
        children = [
            _map_json(child, f.type, convert) for child, f in zip(array.flatten(), data_type, strict=True)
        ]
        fields = [f.with_type(c.type) for f, c in zip(data_type, children, strict=True)]
        return pa.StructArray.from_arrays(children, fields=fields, mask=mask)
    if pa.types.is_fixed_size_list(data_type):
        size = data_type.list_size
        values = _map_json(
            array.values.slice(array.offset * size, len(array) * size), data_type.value_type, convert
        )
        item = data_type.value_field.with_type(values.type)
        return pa.FixedSizeListArray.from_arrays(values, type=pa.list_(item, size), mask=mask)
    offsets = array.offsets.to_numpy()
    start = int(offsets[0])
    values = _map_json(array.values.slice(start, int(offsets[-1]) - start), data_type.value_type, convert)
    item = data_type.value_field.with_type(values.type)
    rebased = pa.array(offsets - start)
    if pa.types.is_large_list(data_type):
        return pa.LargeListArray.from_arrays(rebased, values, type=pa.large_list(item), mask=mask)
    return pa.ListArray.from_arrays(rebased, values, type=pa.list_(item), mask=mask)


def to_storage(array: pa.Array, field: pa.Field, stored: pa.DataType) -> pa.Array:
    """``array`` (of ``field``'s type) as the codec stores it (``stored``, its storage type): JSON
    text encoded as JSONB, other extension arrays viewed as their storage."""
    if contains_json(field.type):
        array = _map_json(array, field.type, jsonb.encode_array)
    return array if array.type == stored else array.view(stored)


def from_storage(array: pa.Array, field: pa.Field) -> pa.Array:
    """The inverse of :func:`to_storage`: a decoded storage array as ``field``'s type."""
    if array.type == field.type:
        return array
    if contains_json(field.type):
        array = _map_json(array, field.type, jsonb.decode_array)
        if array.type == field.type:
            return array
    return array.view(field.type)


def check_writable(schema: pa.Schema, version: FileVersion) -> None:
    """Raise :class:`SchemaError` for types the given file version cannot store."""
    for field in schema_to_fields(schema):
        if field.logical_type == "map" and version not in (FileVersion.V2_2,):
            raise SchemaError(f"field {field.name!r}: map types need file version 2.2 or later")
