"""Readable dumps of a dataset's metadata, named as pylance's ``lance.debug`` helpers.

The text is lance-ops' own (one ``name: value`` a line, nested blocks indented by four spaces);
it uses the protobuf field names (``major_version``, ``physical_rows``, ...) so that a search for
one finds it, but it is meant for people, not for parsing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from lance_ops.table.manifest import DataFile, DataFragment
from lance_ops.table.schema import LanceField, LanceSchema

if TYPE_CHECKING:
    from lance_ops.dataset import LanceDataset

__all__ = ["format_fragment", "format_manifest", "format_schema", "list_transactions"]


def _block(title: str, lines: Iterable[str]) -> list[str]:
    return [f"{title} {{", *(f"    {line}" for line in lines), "}"]


def _field_lines(field: LanceField, schema: LanceSchema) -> list[str]:
    children = [c for c in schema.fields if c.parent_id == field.id]
    lines = [
        f"name: {field.name!r}",
        f"id: {field.id}",
        f"parent_id: {field.parent_id}",
        f"logical_type: {field.logical_type}",
        f"nullable: {str(field.nullable).lower()}",
    ]
    if field.metadata:
        lines.append(f"metadata: { {k: v.decode(errors='replace') for k, v in field.metadata.items()} }")
    for child in children:
        lines += _block("Field", _field_lines(child, schema))
    return lines


def _schema_lines(schema: LanceSchema) -> list[str]:
    lines: list[str] = []
    for field in schema.fields:
        if field.parent_id == -1:
            lines += _block("Field", _field_lines(field, schema))
    return lines


def _data_file_lines(data_file: DataFile, schema: LanceSchema) -> list[str]:
    # the fields the file stores and their parents (2.1+ files list leaf ids only)
    wanted = set(data_file.fields)
    parents = {f.id: f.parent_id for f in schema.fields}
    for field_id in list(wanted):
        while parents.get(field_id, -1) != -1:
            field_id = parents[field_id]
            wanted.add(field_id)
    stored = LanceSchema(tuple(f for f in schema.fields if f.id in wanted))
    lines = [
        f"path: {data_file.path!r}",
        f"fields: {list(data_file.fields)}",
        f"column_indices: {list(data_file.column_indices)}",
        *_block("schema:", _schema_lines(stored)),
        f"major_version: {data_file.file_major_version}",
        f"minor_version: {data_file.file_minor_version}",
    ]
    if data_file.file_size_bytes:
        lines.append(f"file_size_bytes: {data_file.file_size_bytes}")
    return lines


def format_fragment(fragment: DataFragment | Any, dataset: LanceDataset) -> str:
    """A fragment's metadata (``FragmentMetadata`` or a ``LanceFragment``): its data files with the
    part of ``dataset``'s schema each stores and its file version, its deletion file and rows."""
    metadata: DataFragment = getattr(fragment, "metadata", fragment)
    schema = dataset.manifest.schema
    files: list[str] = []
    for data_file in metadata.files:
        files += _block("DataFile", _data_file_lines(data_file, schema))
    deletion = metadata.deletion_file
    lines = [
        f"id: {metadata.id}",
        *_block("files:", files),
        f"deletion_file: {None if deletion is None else deletion.to_dict()}",
        f"physical_rows: {metadata.physical_rows}",
    ]
    return "\n".join(_block("Fragment", lines)) + "\n"


def format_schema(dataset: LanceDataset) -> str:
    """The dataset's Lance schema: every field with its id, parent, type and nullability."""
    return "\n".join(_block("Schema", _schema_lines(dataset.manifest.schema))) + "\n"


def format_manifest(dataset: LanceDataset) -> str:
    """The version's manifest: version, file format, row-id mode, config, schema and fragments."""
    manifest = dataset.manifest
    lines = [
        f"version: {manifest.version}",
        f"data_storage_version: {manifest.data_storage_version}",
        f"uses_stable_row_ids: {str(manifest.uses_stable_row_ids).lower()}",
        f"config: {dict(manifest.config)}",
        *_block("schema:", _schema_lines(dataset.manifest.schema)),
    ]
    for fragment in manifest.fragments:
        lines += format_fragment(fragment, dataset).rstrip("\n").splitlines()
    return "\n".join(_block("Manifest", lines)) + "\n"


def list_transactions(dataset: LanceDataset, max_transactions: int = 10) -> list[str]:
    """One line per recent transaction, newest first: version, operation and properties."""
    out = []
    for offset, transaction in enumerate(dataset.get_transactions(max_transactions)):
        version = dataset.version - offset
        if transaction is None:
            out.append(f"version {version}: (no transaction file)")
            continue
        operation = type(transaction.operation).__name__
        out.append(
            f"version {version}: {operation} on version {transaction.read_version}, "
            f"properties {dict(transaction.properties)}"
        )
    return out
