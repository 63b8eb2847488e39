"""What ``lance-ops inspect`` and ``lance-ops report`` know about files and datasets, as plain dicts.

A data file: its format version, rows, schema and, per physical column, its bytes, the encodings
its pages use and (on request) every page with its rows, buffers and a one-line summary of the
layout and compression chain, e.g. ``mini-block values=Rle(Flat(32), Flat(8))
def=OutOfLineBitpacking(16, Flat(1))`` (the full layout as protobuf text too). Each page also gets
a short *encoding name* (``mini-block/Rle``, ``full-zip/General(zstd)``, ``constant``) used to
group bytes by encoding. A dataset: its version, schema, versions, fragments with data files and
deletion files, and per column the bytes on disk by encoding next to the raw Arrow size.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
from google.protobuf import text_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from lance_ops._proto import encodings_v2_1_pb2 as pb21
from lance_ops.dataset import LanceDataset
from lance_ops.encoding.api import FileVersion
from lance_ops.errors import DatasetNotFoundError
from lance_ops.file import FileReader
from lance_ops.file import open_file as open_lance_file
from lance_ops.file.codecs import codec_for
from lance_ops.file.schema import storage_field
from lance_ops.io import object_store
from lance_ops.table.commit import list_versions
from lance_ops.table.naming import DATA_DIR, VERSIONS_DIR, child_uri

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


def _schema(schema: pa.Schema) -> list[dict[str, Any]]:
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
        "schema": _schema(metadata.schema),
        "columns": columns,
    }


def is_dataset(uri: str, storage_options: Mapping[str, str] | None) -> bool:
    store, path = object_store(uri, storage_options)
    return bool(store.list(store.join(path, VERSIONS_DIR)))


def open_file(path: str, storage_options: Mapping[str, str] | None) -> FileReader:
    """The data file at ``path``; :class:`DatasetNotFoundError` when nothing is there."""
    store, location = object_store(path, storage_options)
    if not store.exists(location):
        raise DatasetNotFoundError(f"no Lance file or dataset at {path}")
    return open_lance_file(location, store=store)


def version_rows(ds: LanceDataset) -> list[dict[str, Any]]:
    """One row per version: timestamp, rows, fragments, data files, deleted rows, bytes."""
    rows = []
    for info in ds.versions():
        summary = info["metadata"]
        rows.append(
            {
                "version": info["version"],
                "timestamp": info["timestamp"].isoformat(sep=" ", timespec="seconds"),
                "rows": int(summary["total_rows"]),
                "fragments": int(summary["total_fragments"]),
                "data_files": int(summary["total_data_files"]),
                "deleted_rows": int(summary["total_deletion_file_rows"]),
                "bytes": int(summary["total_files_size"]),
            }
        )
    return rows


def _data_file_uri(ds: LanceDataset, path: str) -> str:
    return child_uri(ds.uri, DATA_DIR, path)


def dataset_report(ds: LanceDataset, pages: bool = False) -> dict[str, Any]:
    """A dataset version: versions, schema, fragments with their files (with ``pages``, each data
    file's columns and pages as :func:`file_report` gives them)."""
    fragments = []
    for fragment in ds.get_fragments():
        deletion = fragment.metadata.deletion_file
        files = []
        for data_file in fragment.data_files():
            entry: dict[str, Any] = {
                "path": f"{DATA_DIR}/{data_file.path}",
                "version": f"{data_file.file_major_version}.{data_file.file_minor_version}",
                "bytes": data_file.file_size_bytes,
                "fields": list(data_file.fields),
            }
            if pages:
                uri = _data_file_uri(ds, data_file.path)
                reader = open_lance_file(uri, storage_options=ds.storage_options)
                entry["columns"] = file_report(uri, reader)["columns"]
            files.append(entry)
        fragments.append(
            {
                "id": fragment.fragment_id,
                "rows": fragment.count_rows(),
                "physical_rows": fragment.metadata.physical_rows,
                "files": files,
                "deletion_file": fragment.deletion_file(),
                "deleted_rows": 0 if deletion is None else deletion.num_deleted_rows,
            }
        )
    return {
        "uri": ds.uri,
        "kind": "dataset",
        "version": ds.version,
        "latest_version": ds.latest_version,
        "data_storage_version": ds.data_storage_version,
        "stable_row_ids": ds.has_stable_row_ids,
        "rows": ds.count_rows(),
        "schema": _schema(ds.schema),
        "versions": [entry.version for entry in list_versions(ds.storage.store, ds.storage.root)],
        "fragments": fragments,
    }


def _top_level(name: str) -> str:
    return name.split(".")[0].split("[")[0]


def column_storage(ds: LanceDataset) -> list[dict[str, Any]]:
    """Per top-level column of this version: bytes on disk, bytes by encoding name, and the raw
    Arrow size of the same (physical) rows, read back from every data file."""
    on_disk: dict[str, Counter[str]] = {name: Counter() for name in ds.schema.names}
    raw: Counter[str] = Counter()
    for fragment in ds.get_fragments():
        for data_file in fragment.data_files():
            uri = _data_file_uri(ds, data_file.path)
            reader = open_lance_file(uri, storage_options=ds.storage_options)
            for column in file_report(uri, reader, pages=False)["columns"]:
                name = _top_level(column["name"])
                if name in on_disk:
                    on_disk[name].update(column["encodings"])
            table = reader.read_all().to_table()
            for name in table.column_names:
                if name in on_disk:
                    raw[name] += table.column(name).nbytes
    return [
        {
            "column": name,
            "type": str(ds.schema.field(name).type),
            "bytes": sum(encodings.values()),
            "encodings": dict(encodings),
            "raw_bytes": raw[name],
            "compression_ratio": raw[name] / sum(encodings.values()) if sum(encodings.values()) else None,
        }
        for name, encodings in on_disk.items()
    ]
