"""What a data file's metadata says about its columns and pages, as plain dicts.

Per physical column: its bytes, the encodings its pages use and (on request) every page with its
rows, buffers and a one-line summary of the layout and compression chain, e.g. ``mini-block
values=Rle(Flat(32), Flat(8)) def=OutOfLineBitpacking(16, Flat(1))`` (the full layout as protobuf
text too). Each page also gets a short *encoding name* (``mini-block/Rle``, ``full-zip/General(zstd)``,
``constant``) used to group bytes by encoding. Read by ``lance-ops inspect`` and by the dataset
report (:mod:`lance_ops.dataset_report`); the page layouts are protobuf, so this lives in the file layer.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from google.protobuf import text_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from lance_ops._proto import encodings_v2_1_pb2 as pb21
from lance_ops.encoding.api import FileVersion
from lance_ops.file.codecs import codec_for
from lance_ops.file.reader import FileReader
from lance_ops.file.schema import storage_field

__all__ = [
    "describe_array_encoding",
    "describe_encoding",
    "describe_layout",
    "encoding_name",
    "file_report",
    "schema_rows",
]

_LAYOUT_NAMES = {
    "mini_block_layout": "mini-block",
    "full_zip_layout": "full-zip",
    "constant_layout": "constant",
    "blob_layout": "blob",
}
# Layout fields shown in the one-line summary, under shorter names.
_LAYOUT_FIELDS = {
    "value_compression": "values",
    "rep_compression": "rep",
    "def_compression": "def",
    "dictionary": "dict",
}


# --- page layout summaries ---------------------------------------------------------------------


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def _encoding_args(message: Message) -> Iterator[str]:
    """The set fields of a compression message, compactly: nested encodings recursively,
    buffer compressions by scheme, bytes by size, numbers bare."""
    for fd, value in message.ListFields():
        if fd.message_type is pb21.CompressiveEncoding.DESCRIPTOR:
            values = value if fd.is_repeated else [value]
            yield from (describe_encoding(v) for v in values)
        elif fd.message_type is pb21.BufferCompression.DESCRIPTOR:
            scheme = pb21.CompressionScheme.Name(value.scheme).removeprefix("COMPRESSION_ALGORITHM_").lower()
            yield scheme if not value.HasField("level") else f"{scheme}:{value.level}"
        elif fd.type == FieldDescriptor.TYPE_BYTES:
            yield f"{fd.name}={len(value)}B"
        elif fd.type == FieldDescriptor.TYPE_MESSAGE:
            values = value if fd.is_repeated else [value]
            yield from (f"{_camel(fd.name)}({', '.join(_encoding_args(v))})" for v in values)
        elif fd.is_repeated:
            yield f"[{', '.join(map(str, value))}]"
        elif fd.type == FieldDescriptor.TYPE_BOOL:
            yield fd.name
        else:
            yield str(value)


def describe_encoding(encoding: pb21.CompressiveEncoding) -> str:
    """``Rle(Flat(32), Flat(8))``-style text for a compression chain."""
    which = encoding.WhichOneof("compression")
    if which is None:
        return "?"
    return f"{_camel(which)}({', '.join(_encoding_args(getattr(encoding, which)))})"


def describe_layout(layout: pb21.PageLayout) -> str:
    """One line: the structural layout, then its compressions, dictionary and rep/def layers."""
    which = layout.WhichOneof("layout")
    if which is None:
        return "unknown layout"
    message = getattr(layout, which)
    parts = [_LAYOUT_NAMES[which]]
    for fd, value in message.ListFields():
        if fd.name in _LAYOUT_FIELDS:
            parts.append(f"{_LAYOUT_FIELDS[fd.name]}={describe_encoding(value)}")
        elif fd.name == "num_dictionary_items":
            parts.append(f"dict_items={value}")
        elif fd.name == "inline_value":
            parts.append(f"inline_value={len(value)}B")
        elif fd.name == "inner_layout":
            parts.append(f"inner=[{describe_layout(value)}]")
        elif fd.name == "layers":
            names = (pb21.RepDefLayer.Name(layer).removeprefix("REPDEF_").lower() for layer in value)
            parts.append(f"layers={'/'.join(names)}")
    return " ".join(parts)


def describe_array_encoding(encoding: Message) -> str:
    """A 2.0 page: its nested encodings outermost first, e.g. ``nullable.some_nulls flat(64)``."""
    parts = []
    for fd, value in encoding.ListFields():
        if fd.containing_oneof is not None and fd.message_type is not None:
            bits = getattr(value, "bits_per_value", 0)
            parts.append(f"{fd.name}({bits})" if bits else fd.name)
        if fd.message_type is None:
            continue
        for item in value if fd.is_repeated else [value]:
            inner = describe_array_encoding(item)
            if inner:
                parts.append(inner)
    return " ".join(parts)


# --- data files --------------------------------------------------------------------------------


def _leaf_paths(name: str, dtype: pa.DataType) -> list[str]:
    if pa.types.is_struct(dtype):
        return [path for child in dtype for path in _leaf_paths(f"{name}.{child.name}", child.type)]
    if pa.types.is_map(dtype):
        return _leaf_paths(f"{name}.key", dtype.key_type) + _leaf_paths(f"{name}.value", dtype.item_type)
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype) or pa.types.is_list_view(dtype):
        return _leaf_paths(f"{name}.item", dtype.value_type)
    return [name]


def _field_paths(name: str, dtype: pa.DataType) -> list[str]:
    """Every field's path, parents before children (the order of legacy field ids)."""
    children: list[tuple[str, pa.DataType]] = []
    if pa.types.is_struct(dtype):
        children = [(f"{name}.{child.name}", child.type) for child in dtype]
    elif pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        children = [(f"{name}.item", dtype.value_type)]
    return [name, *(path for child, ctype in children for path in _field_paths(child, ctype))]


def _column_names(reader: FileReader) -> list[str]:
    """A name for each physical column: the leaf path when the columns are the leaves.

    Legacy 0.1 files hold a column per field id, parents included.
    """
    if reader.version is FileVersion.V0_1:
        return [path for field in reader.schema for path in _field_paths(field.name, field.type)]
    names = []
    for field in reader.schema:
        count = codec_for(reader.version).num_columns(storage_field(field))
        leaves = _leaf_paths(field.name, field.type)
        names += leaves if len(leaves) == count else [f"{field.name}[{i}]" for i in range(count)]
    return names


def schema_rows(schema: pa.Schema) -> list[dict[str, Any]]:
    return [{"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in schema]


def encoding_name(layout: Message) -> str:
    """A short name for a page's encoding: the structural layout and its outermost value compression
    (``mini-block/Rle``, ``full-zip/General(zstd)``, ``mini-block/InlineBitpacking+dict``); for 2.0
    pages the outermost array encoding."""
    if not isinstance(layout, pb21.PageLayout):
        return describe_array_encoding(layout).split(" ")[0] or "unknown"
    which = layout.WhichOneof("layout")
    if which is None:
        return "unknown"
    message = getattr(layout, which)
    name = _LAYOUT_NAMES[which]
    values = getattr(message, "value_compression", None)
    if values is not None and message.HasField("value_compression"):
        inner = values.WhichOneof("compression") or "?"
        name += f"/{_camel(inner)}"
        if inner == "general":
            scheme = pb21.CompressionScheme.Name(values.general.compression.scheme)
            name += f"({scheme.removeprefix('COMPRESSION_ALGORITHM_').lower()})"
    if which == "blob_layout" and message.HasField("inner_layout"):
        name += f"/{encoding_name(message.inner_layout)}"
    if getattr(message, "num_dictionary_items", 0):
        name += "+dict"
    return name


def _page(reader: FileReader, page: Any) -> dict[str, Any]:
    if reader.version is FileVersion.V0_1:
        summary, name = page.encoding, "legacy"
    else:
        layout = codec_for(reader.version).layout_type()
        text_format.Parse(page.encoding, layout)
        summary = (
            describe_layout(layout)
            if isinstance(layout, pb21.PageLayout)
            else describe_array_encoding(layout)
        )
        name = encoding_name(layout)
    return {
        "rows": page.length,
        "buffers": [[b.position, b.size] for b in page.buffers],
        "bytes": sum(b.size for b in page.buffers),
        "encoding": name,
        "summary": summary,
        "layout": page.encoding,
    }


def file_report(path: str, reader: FileReader, pages: bool = True) -> dict[str, Any]:
    """A data file: versions, sizes, schema and per column its bytes, encodings (bytes by encoding
    name) and, with ``pages``, every page."""
    metadata = reader.metadata()
    names = _column_names(reader)
    if len(names) != len(metadata.columns):
        names = [f"column {i}" for i in range(len(metadata.columns))]
    columns = []
    for name, column in zip(names, metadata.columns, strict=True):
        described = [_page(reader, page) for page in column.pages]
        encodings: Counter[str] = Counter()
        for page in described:
            encodings[page["encoding"]] += page["bytes"]
        entry: dict[str, Any] = {
            "name": name,
            "bytes": sum(p["bytes"] for p in described),
            "num_pages": len(described),
            "encodings": dict(encodings),
        }
        if pages:
            entry["pages"] = described
        columns.append(entry)
    return {
        "path": path,
        "kind": "file",
        "version": metadata.version,
        "rows": metadata.num_rows,
        "data_bytes": metadata.num_data_bytes,
        "column_metadata_bytes": metadata.num_column_metadata_bytes,
        "global_buffer_bytes": metadata.num_global_buffer_bytes,
        "schema": schema_rows(metadata.schema),
        "columns": columns,
    }
