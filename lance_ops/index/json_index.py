"""JSON indices: a scalar index (BTREE, BITMAP or ZONEMAP) over the values at one path of a JSON
column, as pylance 14's ``create_scalar_index(column, IndexConfig(index_type="json", parameters=
{"target_index_type": "btree", "path": "x"}))`` writes it.

The index's files are those of the target index over the extracted values (a BTREE's
``page_data.lance`` / ``page_lookup.lance``, keys typed as below); the manifest entry's details are
a ``JsonIndexDetails`` (type URL ``/lance.index.pb.JsonIndexDetails``): field 1 the path as given,
field 2 the target's details as an ``Any`` (``/lance.table.BTreeIndexDetails`` ...); index
version 0.

Extraction, as pylance 14: the path is a JSONPath (``$.a.b``, or ``a.b``; see
:func:`lance_ops.query.json_functions.parse_path`); the key type is that of the first non-null
value in row order -- a boolean ``bool``, an integer ``int64``, a float ``float64``, a string
``string`` (all null: ``string``); a later value of another type is refused (integers are taken
as floats by a ``float64`` index), as is an object or array value. A missing path, a JSON null and
a null row are null keys.

A filter conjunct ``json_get_int(j, 'x') <op> literal`` (``json_get_float`` / ``json_get_bool`` /
``json_get_string``), ``op`` one of ``= < <= > >=``, whose
function and key match an index (path written as the index's, the function's type that of the
keys), is answered from the target index as pylance does; the scan then rechecks the filter on the
rows found.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from lance_ops.encoding.protowire import encode_varint, fields
from lance_ops.errors import (
    IndexColumnTypeError,
    IndexCorruptError,
    InvalidArgumentError,
    UnsupportedIndexTypeError,
)
from lance_ops.index.bitmap import BITMAP_LAYOUT
from lance_ops.index.btree import LOOKUP
from lance_ops.index.files import cached_index_file
from lance_ops.index.types import BITMAP, BTREE, ZONEMAP
from lance_ops.index.zonemap import FILE as ZONEMAP_FILE
from lance_ops.io.context import StorageContext
from lance_ops.query.json_functions import MISSING, lookup, parse_path
from lance_ops.table.manifest import IndexMetadata

__all__ = [
    "JSON_DETAILS_URL",
    "JSON_INDEX_VERSION",
    "JSON_TARGETS",
    "JSON_TARGET_URLS",
    "extract_keys",
    "json_details",
    "json_target",
    "key_type",
    "json_parameters",
    "parse_json_details",
]

JSON_DETAILS_URL = "/lance.index.pb.JsonIndexDetails"
JSON_INDEX_VERSION = 0
# target_index_type (as pylance takes it, any case) -> the target's kind
JSON_TARGETS = {"btree": BTREE, "bitmap": BITMAP, "zonemap": ZONEMAP}
# a target's details type URL -> its kind
JSON_TARGET_URLS = {
    "/lance.table.BTreeIndexDetails": BTREE,
    "/lance.table.BitmapIndexDetails": BITMAP,
    "/lance.table.ZoneMapIndexDetails": ZONEMAP,
}


def json_parameters(column: str, params: Mapping[str, Any]) -> tuple[str, str]:
    """``(target kind, path)`` of a JSON index's parameters; InvalidArgumentError when wrong."""
    unknown = set(params) - {"target_index_type", "path"}
    if unknown:
        raise InvalidArgumentError(f"JSON index: unsupported parameters {sorted(unknown)}")
    target, path = params.get("target_index_type"), params.get("path")
    if not isinstance(target, str) or not isinstance(path, str) or not path:
        raise InvalidArgumentError(
            f"JSON index on {column}: parameters need 'target_index_type' and 'path' (strings), "
            f"got {dict(params)}"
        )
    if target.lower() == "inverted":
        raise UnsupportedIndexTypeError(
            "JSON-path indexes do not support target index type 'inverted'; create an INVERTED "
            "index directly on the JSON column instead"
        )
    kind = JSON_TARGETS.get(target.lower())
    if kind is None:
        raise UnsupportedIndexTypeError(
            f"lance_ops builds JSON indices over {sorted(JSON_TARGETS)} only, not {target!r}"
        )
    parse_path(path)  # PredicateError for a path that is not one
    return kind, path


def _length_delimited(number: int, data: bytes) -> bytes:
    return encode_varint(number << 3 | 2) + encode_varint(len(data)) + data


def json_details(path: str, target_url: str, target_value: bytes) -> bytes:
    """The ``JsonIndexDetails`` message: the path and the target's details as an ``Any``."""
    target = _length_delimited(1, target_url.encode()) + (
        _length_delimited(2, target_value) if target_value else b""
    )
    return _length_delimited(1, path.encode()) + _length_delimited(2, target)


def _two_fields(data: bytes) -> tuple[bytes, bytes]:
    """The length-delimited fields 1 and 2 of a message (empty when absent)."""
    found = {1: b"", 2: b""}
    for number, value in fields(data):
        if number in found and isinstance(value, bytes | memoryview):
            found[number] = bytes(value)
    return found[1], found[2]


def parse_json_details(data: bytes) -> tuple[str, str, bytes]:
    """``(path, target type URL, target details)`` of a ``JsonIndexDetails`` message."""
    path, target = _two_fields(data)
    url, details = _two_fields(target)  # the target's Any: type URL, value
    return path.decode(), url.decode(), details


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "Boolean"
    if isinstance(value, int):
        return "Int64"
    if isinstance(value, float):
        return "Float64"
    if isinstance(value, str):
        return "Utf8"
    return "Array" if isinstance(value, list) else "Object"


_ARROW = {"Boolean": pa.bool_(), "Int64": pa.int64(), "Float64": pa.float64(), "Utf8": pa.string()}


def key_type(ctx: StorageContext, kind: str, index: IndexMetadata) -> pa.DataType:
    """The key type of a JSON index's target files (``kind``: the target's)."""
    name, column = {
        BTREE: (LOOKUP, "min"),
        BITMAP: (BITMAP_LAYOUT.file, "keys"),
        ZONEMAP: (ZONEMAP_FILE, "min"),
    }[kind]
    return cached_index_file(ctx, index, name).table.schema.field(column).type


def json_target(ctx: StorageContext, index: IndexMetadata) -> tuple[str, str, pa.DataType]:
    """``(path, target kind, key type)`` of a JSON index segment; IndexCorruptError when its
    details name no target lance_ops reads."""
    details = index.details[1] if index.details is not None else b""
    path, url, _ = parse_json_details(details)
    kind = JSON_TARGET_URLS.get(url)
    if kind is None:
        raise IndexCorruptError("<manifest>", f"JSON index {index.name!r}: unknown target {url!r}")
    return path, kind, key_type(ctx, kind, index)


def extract_keys(
    documents: pa.Array | pa.ChunkedArray, path: str, column: str, known: pa.DataType | None = None
) -> pa.Array:
    """The keys a JSON index at ``path`` holds for each row of ``documents`` (JSON text); with
    ``known`` (an existing index's key type, when extending it) values must fit that type."""
    if isinstance(documents, pa.ChunkedArray):
        documents = documents.combine_chunks()
    if isinstance(documents, pa.ExtensionArray):
        documents = documents.storage
    steps = parse_path(path)
    keys: list[Any] = []
    kind: str | None = None
    if known is not None:
        kind = next((name for name, t in _ARROW.items() if t == known), None)
        if kind is None:
            raise IndexCorruptError("<index>", f"JSON index on {column}: keys of type {known}")
    for row, text in enumerate(documents.to_pylist()):
        value = None if text is None else lookup(json.loads(text), steps)
        if value is None or value is MISSING or not isinstance(value, bool | int | float | str | list | dict):
            keys.append(None)
            continue
        found = _json_type(value)
        if found in ("Array", "Object"):
            raise IndexColumnTypeError(
                f"Cannot create a JSON index for JSON path '{path}' with JSON type {found}; only scalar "
                "values are supported",
                column,
            )
        if kind is None:
            kind = found
        elif found != kind and not (kind == "Float64" and found == "Int64"):
            raise IndexColumnTypeError(
                f"JSON path '{path}' expected {kind}, but batch row {row} has JSON type {found}", column
            )
        keys.append(float(value) if kind == "Float64" and isinstance(value, int | float) else value)
    return pa.array(keys, _ARROW[kind or "Utf8"])
