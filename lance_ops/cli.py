"""The ``lance-ops`` command line.

    lance-ops inspect PATH [--version N] [--json]   a .lance data file or a dataset directory
    lance-ops versions URI [--json]                  every version of a dataset
    lance-ops demo [--uri URI] [--rows N] [--master M]   the main Spark job (jobs.pipeline)

``inspect`` on a data file prints its format version, rows, schema and, per column, every page
with its row count, buffer sizes and a one-line summary of the page layout and its compression
chain, e.g. ``mini-block values=Rle(Flat(32), Flat(8)) def=OutOfLineBitpacking(16, Flat(1))``
(``--json`` gives the full layouts as protobuf text). On a dataset it prints the schema, the
version, the list of versions and each fragment with its data files, deletion file and rows.

Deliberate errors (:class:`lance_ops.errors.LanceOpsError`) print one line to stderr and exit
with status 2; argparse usage errors also exit 2. ``demo`` runs the Spark job as a separate
process (``python -m jobs.pipeline``), so the core library never imports ``jobs``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from google.protobuf import text_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from lance_ops._proto import encodings_v2_1_pb2 as pb21
from lance_ops.dataset import LanceDataset, dataset
from lance_ops.encoding.api import FileVersion
from lance_ops.errors import DatasetNotFoundError, LanceOpsError, UnsupportedFeatureError
from lance_ops.file import LanceFileMetadata, LanceFileReader
from lance_ops.file.codecs import codec_for
from lance_ops.file.schema import storage_field
from lance_ops.io import object_store
from lance_ops.table.commit import list_versions
from lance_ops.table.naming import DATA_DIR, VERSIONS_DIR

EXIT_ERROR = 2

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


def _layout_summary(encoding_text: str, layout_type: type[Message]) -> str:
    layout = layout_type()
    text_format.Parse(encoding_text, layout)
    if isinstance(layout, pb21.PageLayout):
        return describe_layout(layout)
    return describe_array_encoding(layout)


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


def _column_names(reader: LanceFileReader) -> list[str]:
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


def _schema_lines(schema: pa.Schema) -> list[str]:
    return [f"  {field.name}: {field.type}{'' if field.nullable else ' not null'}" for field in schema]


def _file_report(path: str, reader: LanceFileReader, metadata: LanceFileMetadata) -> dict[str, Any]:
    columns = []
    names = _column_names(reader)
    if len(names) != len(metadata.columns):
        names = [f"column {i}" for i in range(len(metadata.columns))]
    for name, column in zip(names, metadata.columns, strict=True):
        pages: list[dict[str, Any]] = [
            {
                "rows": page.length,
                "buffers": [[b.position, b.size] for b in page.buffers],
                "bytes": sum(b.size for b in page.buffers),
                "summary": page.encoding
                if reader.version is FileVersion.V0_1
                else _layout_summary(page.encoding, codec_for(reader.version).layout_type),
                "layout": page.encoding,
            }
            for page in column.pages
        ]
        columns.append({"name": name, "bytes": sum(p["bytes"] for p in pages), "pages": pages})
    return {
        "path": path,
        "kind": "file",
        "version": metadata.version,
        "rows": metadata.num_rows,
        "data_bytes": metadata.num_data_bytes,
        "column_metadata_bytes": metadata.num_column_metadata_bytes,
        "global_buffer_bytes": metadata.num_global_buffer_bytes,
        "schema": [{"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in metadata.schema],
        "columns": columns,
    }


def _print_file(report: dict[str, Any], schema: pa.Schema) -> None:
    print(f"Lance file {report['path']}")
    print(f"  format version {report['version']}, {report['rows']} rows")
    print(
        f"  {report['data_bytes']} data bytes, {report['column_metadata_bytes']} column metadata bytes, "
        f"{report['global_buffer_bytes']} global buffer bytes"
    )
    print("Schema:")
    print("\n".join(_schema_lines(schema)))
    print("Columns:")
    for index, column in enumerate(report["columns"]):
        count = len(column["pages"])
        print(f"  [{index}] {column['name']}: {count} page{'s' * (count != 1)}, {column['bytes']} bytes")
        first_row = 0
        for number, page in enumerate(column["pages"]):
            rows = f"rows {first_row}..{first_row + page['rows']}"
            print(f"      page {number}: {rows}, {page['bytes']} bytes in {len(page['buffers'])} buffers")
            print(f"        {page['summary']}")
            first_row += page["rows"]


# --- datasets ----------------------------------------------------------------------------------


def _is_dataset(uri: str, storage_options: dict[str, str] | None) -> bool:
    store, path = object_store(uri, storage_options)
    return bool(store.list(store.join(path, VERSIONS_DIR)))


def _version_rows(ds: LanceDataset) -> list[dict[str, Any]]:
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


def _dataset_report(ds: LanceDataset, storage_options: dict[str, str] | None) -> dict[str, Any]:
    fragments = []
    for fragment in ds.get_fragments():
        deletion = fragment.metadata.deletion_file
        fragments.append(
            {
                "id": fragment.fragment_id,
                "rows": fragment.count_rows(),
                "physical_rows": fragment.metadata.physical_rows,
                "files": [
                    {
                        "path": f"{DATA_DIR}/{data_file.path}",
                        "version": f"{data_file.file_major_version}.{data_file.file_minor_version}",
                        "bytes": data_file.file_size_bytes,
                        "fields": list(data_file.fields),
                    }
                    for data_file in fragment.data_files()
                ],
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
        "schema": [{"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in ds.schema],
        "versions": [entry.version for entry in list_versions(*object_store(ds.uri, storage_options))],
        "fragments": fragments,
    }


def _print_dataset(report: dict[str, Any], schema: pa.Schema) -> None:
    print(f"Lance dataset {report['uri']}")
    print(
        f"  version {report['version']} (latest {report['latest_version']}), "
        f"data storage version {report['data_storage_version']}, {report['rows']} rows, "
        f"{len(report['fragments'])} fragments, stable row ids: {'yes' if report['stable_row_ids'] else 'no'}"
    )
    print(f"  versions: {', '.join(map(str, report['versions']))}")
    print("Schema:")
    print("\n".join(_schema_lines(schema)))
    print("Fragments:")
    for fragment in report["fragments"]:
        print(
            f"  fragment {fragment['id']}: {fragment['rows']} rows "
            f"({fragment['physical_rows']} physical, {fragment['deleted_rows']} deleted)"
        )
        for data_file in fragment["files"]:
            print(
                f"    {data_file['path']}  (file {data_file['version']}, {data_file['bytes']} bytes, "
                f"fields {data_file['fields']})"
            )
        if fragment["deletion_file"]:
            print(f"    {fragment['deletion_file']}")


def _print_versions(rows: list[dict[str, Any]]) -> None:
    header = ("version", "timestamp", "rows", "fragments", "data_files", "deleted_rows", "bytes")
    table = [header] + [tuple(str(row[key]) for key in header) for row in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    for line in table:
        print("  ".join(cell.rjust(width) for cell, width in zip(line, widths, strict=True)).rstrip())


# --- commands ----------------------------------------------------------------------------------


def _emit_json(report: Any) -> None:
    print(json.dumps(report, indent=2))


def cmd_inspect(args: argparse.Namespace) -> None:
    options = _storage_options(args.storage_option)
    if _is_dataset(args.path, options):
        ds = dataset(args.path, version=args.version, storage_options=options)
        report = _dataset_report(ds, options)
        if args.json:
            _emit_json(report)
        else:
            _print_dataset(report, ds.schema)
        return
    store, path = object_store(args.path, options)
    if not store.exists(path):
        raise DatasetNotFoundError(f"no Lance file or dataset at {args.path}")
    if args.version is not None:
        raise UnsupportedFeatureError("--version applies to datasets, not to single data files")
    reader = LanceFileReader(args.path, storage_options=options)
    report = _file_report(args.path, reader, reader.metadata())
    if args.json:
        _emit_json(report)
    else:
        _print_file(report, reader.schema)


def cmd_versions(args: argparse.Namespace) -> None:
    rows = _version_rows(dataset(args.uri, storage_options=_storage_options(args.storage_option)))
    if args.json:
        _emit_json(rows)
    else:
        _print_versions(rows)


def cmd_demo(args: argparse.Namespace) -> None:
    """Run ``python -m jobs.pipeline`` in its own process: the library never imports ``jobs``."""
    if importlib.util.find_spec("jobs") is None:
        raise UnsupportedFeatureError("the demo needs the Spark jobs (pip install 'lance-ops[spark]')")
    argv = []
    for option in ("uri", "rows", "master"):
        value = getattr(args, option)
        if value is not None:
            argv += [f"--{option}", str(value)]
    if subprocess.run([sys.executable, "-m", "jobs.pipeline", *argv], check=False).returncode:
        raise SystemExit(1)


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def _storage_options(pairs: Sequence[tuple[str, str]]) -> dict[str, str] | None:
    return dict(pairs) or None


def _add_storage_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--storage-option",
        action="append",
        default=[],
        type=_key_value,
        metavar="KEY=VALUE",
        help="object store option for remote URIs (repeatable)",
    )


def _version_arg(text: str) -> int | str:
    return int(text) if text.isdigit() else text


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lance-ops", description="Inspect and maintain Lance files and datasets."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    inspect = commands.add_parser("inspect", help="describe a .lance data file or a dataset directory")
    inspect.add_argument("path", metavar="PATH", help="a .lance data file or a dataset URI")
    inspect.add_argument(
        "--version", type=_version_arg, help="dataset version number or tag (default: latest)"
    )
    inspect.add_argument("--json", action="store_true", help="print JSON instead of text")
    _add_storage_option(inspect)
    inspect.set_defaults(run=cmd_inspect)

    versions = commands.add_parser("versions", help="list the versions of a dataset")
    versions.add_argument("uri", metavar="URI", help="dataset URI")
    versions.add_argument("--json", action="store_true", help="print JSON instead of a table")
    _add_storage_option(versions)
    versions.set_defaults(run=cmd_versions)

    demo = commands.add_parser("demo", help="run the main Spark job (jobs.pipeline) on a demo dataset")
    demo.add_argument("--uri", help="dataset to append to (default: the pipeline's data/demo.lance)")
    demo.add_argument("--rows", type=int, help="rows to append (default: the pipeline's)")
    demo.add_argument("--master", help="Spark master (default: the pipeline's)")
    demo.set_defaults(run=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit status (0, or 2 after a one-line error on stderr)."""
    args = build_parser().parse_args(argv)
    try:
        args.run(args)
    except LanceOpsError as exc:
        print(f"lance-ops: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:
        # The reader of our output went away (``lance-ops inspect x | head``): stop quietly and keep
        # the interpreter from complaining again when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
