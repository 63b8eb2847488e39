"""Writing fragments: the executor side of a dataset write (data files only, no commit).

``write_fragments(data, uri)`` streams the input into ``{uri}/data/{name}.lance`` files of at most
``max_rows_per_file`` rows (and roughly ``max_bytes_per_file`` bytes) and returns one
:class:`FragmentMetadata` per file with id 0 ("assigned at commit"). A driver then commits them
with ``LanceDataset.commit(uri, LanceOperation.Append(fragments))`` (or ``Overwrite``).
FragmentMetadata is picklable and has ``to_json`` / ``from_json`` for shipping between processes.

Field ids: appending to an existing dataset reuses the dataset's ids (matched by column name), read
from its latest manifest unless the caller passes them as ``fields=`` (a Spark driver does, so its
tasks never read the manifest); a new dataset (or ``mode="overwrite"``) numbers the schema 0, 1,
2, ... in pre-order. Each ``DataFile.fields`` lists the ids that own columns: every field for 2.0
files, only leaf fields for 2.1+, with ``column_indices`` 0..n-1.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa

from lance_ops._proto import file_pb2
from lance_ops.encoding.api import FileVersion
from lance_ops.errors import DatasetNotFoundError, SchemaError, UnsupportedFeatureError
from lance_ops.file import LanceFileWriter
from lance_ops.file.schema import fields_to_schema, leaf_field_ids, schema_to_fields
from lance_ops.file.writer import as_table
from lance_ops.io import object_store
from lance_ops.table.commit import load_manifest
from lance_ops.table.manifest import DataFile, DataFragment
from lance_ops.table.naming import DATA_DIR, child_uri, data_file_name

FragmentMetadata = DataFragment

DEFAULT_MAX_ROWS_PER_FILE = 1024 * 1024
DEFAULT_MAX_ROWS_PER_GROUP = 1024
DEFAULT_MAX_BYTES_PER_FILE = 90 * 1024**3

__all__ = ["FragmentMetadata", "write_fragments", "write_fragments_with_schema"]


def to_reader(data: Any, schema: pa.Schema | None = None) -> pa.RecordBatchReader:
    """Normalise write input: Table, RecordBatch, RecordBatchReader, batches, or pandas DataFrame."""
    if isinstance(data, pa.RecordBatchReader):
        reader = data
    elif isinstance(data, (pa.Table, pa.RecordBatch)) or type(data).__module__.startswith("pandas"):
        table = as_table(data, schema)
        reader = pa.RecordBatchReader.from_batches(table.schema, table.to_batches())
    elif isinstance(data, Iterable):
        batches = iter(data)
        first = next(batches, None)
        if first is None:
            if schema is None:
                raise SchemaError("an empty iterable of batches needs an explicit schema")
            return pa.RecordBatchReader.from_batches(schema, [])
        reader = pa.RecordBatchReader.from_batches(first.schema, _chain(first, batches))
    else:
        raise TypeError(f"cannot write {type(data).__name__}; expected Arrow data or a pandas DataFrame")
    if schema is not None and not reader.schema.equals(schema):
        return _cast_reader(reader, schema)
    return reader


def _chain(first: pa.RecordBatch, rest: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield first
    yield from rest


def _cast_reader(reader: pa.RecordBatchReader, schema: pa.Schema) -> pa.RecordBatchReader:
    """Reorder columns by name and cast them to ``schema``."""
    missing = [n for n in schema.names if reader.schema.get_field_index(n) < 0]
    extra = [n for n in reader.schema.names if schema.get_field_index(n) < 0]
    if missing or extra:
        raise SchemaError(
            f"data columns do not match the dataset schema (missing {missing}, unexpected {extra})"
        )

    def cast(batch: pa.RecordBatch) -> pa.RecordBatch:
        try:
            return batch.select(schema.names).cast(schema)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise SchemaError(f"data does not match the dataset schema: {exc}") from exc

    return pa.RecordBatchReader.from_batches(schema, (cast(b) for b in reader))


def data_file_fields(fields: Sequence[file_pb2.Field], version: FileVersion) -> tuple[int, ...]:
    """Field ids listed in ``DataFile.fields`` for a file of ``version`` holding ``fields``.

    Legacy and 2.0 files give every field a column; 2.1+ files only the leaves.
    """
    if version in (FileVersion.V0_1, FileVersion.V2_0):
        return tuple(f.id for f in fields)
    return tuple(leaf_field_ids(fields))


def _dataset_fields(uri: str, storage_options: Mapping[str, str] | None) -> tuple[list, Mapping, str] | None:
    """``(fields, schema metadata, data storage version)`` of the dataset at ``uri``, or None."""
    store, root = object_store(uri, storage_options)
    try:
        manifest = load_manifest(store, root).manifest
    except DatasetNotFoundError:
        return None
    return list(manifest.fields), manifest.schema_metadata, manifest.data_storage_version


class _FileSink:
    """Rolls over data files by row and byte limits."""

    def __init__(
        self,
        uri: str,
        schema: pa.Schema,
        fields: Sequence[file_pb2.Field],
        version: FileVersion,
        max_rows: int,
        max_bytes: int,
        storage_options: Mapping[str, str] | None,
    ) -> None:
        self.uri, self.schema, self.version = uri, schema, version
        self.max_rows, self.max_bytes = max_rows, max_bytes
        self.storage_options = storage_options
        self.field_ids = data_file_fields(fields, version)
        self.fragments: list[DataFragment] = []
        self._writer: LanceFileWriter | None = None
        self._name = ""
        self._rows = 0
        self._bytes = 0

    def write(self, batch: pa.RecordBatch) -> None:
        offset = 0
        while offset < batch.num_rows:
            if self._writer is None:
                self._open()
            take = min(batch.num_rows - offset, self.max_rows - self._rows)
            piece = batch.slice(offset, take)
            assert self._writer is not None
            self._writer.write_batch(piece)
            self._rows += take
            self._bytes += piece.nbytes
            offset += take
            if self._rows >= self.max_rows or self._bytes >= self.max_bytes:
                self.close()

    def _open(self) -> None:
        self._name = data_file_name()
        self._writer = LanceFileWriter(
            child_uri(self.uri, DATA_DIR, self._name),
            self.schema,
            version=self.version,
            storage_options=self.storage_options,
        )
        self._rows = self._bytes = 0

    def close(self) -> None:
        if self._writer is None:
            return
        self._writer.close()
        data_file = DataFile(
            path=self._name,
            fields=self.field_ids,
            column_indices=tuple(range(len(self.field_ids))),
            file_major_version=self.version.major,
            file_minor_version=self.version.minor,
            file_size_bytes=self._writer.bytes_written,
        )
        self.fragments.append(DataFragment(id=0, files=(data_file,), physical_rows=self._rows))
        self._writer = None

    def abort(self) -> None:
        if self._writer is not None:
            self._writer.abort()
            self._writer = None


def write_fragments_with_schema(
    data: Any,
    uri: str | os.PathLike[str],
    schema: pa.Schema | None = None,
    *,
    mode: str = "append",
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
    max_rows_per_group: int = DEFAULT_MAX_ROWS_PER_GROUP,
    max_bytes_per_file: int | None = None,
    data_storage_version: str | None = "stable",
    storage_options: Mapping[str, str] | None = None,
    fields: Sequence[file_pb2.Field] | None = None,
) -> tuple[list[FragmentMetadata], pa.Schema]:
    """:func:`write_fragments`, also returning the Arrow schema the files were written with."""
    if max_rows_per_file <= 0 or max_rows_per_group <= 0:
        raise ValueError("max_rows_per_file and max_rows_per_group must be positive")
    if mode not in ("append", "create", "overwrite"):
        raise ValueError(f"mode must be 'create', 'append' or 'overwrite', not {mode!r}")
    uri = os.fspath(uri)
    existing = _dataset_fields(uri, storage_options) if mode == "append" and fields is None else None
    if fields is not None:
        reader = to_reader(data, schema if schema is not None else fields_to_schema(fields))
        version_text = data_storage_version or "stable"
    elif existing is not None:
        fields, metadata, version_text = existing
        reader = to_reader(data, fields_to_schema(fields, metadata))
    else:
        reader = to_reader(data, schema)
        version_text = data_storage_version or "stable"
        fields = schema_to_fields(reader.schema)
    version = FileVersion.parse(version_text)
    if version is FileVersion.V0_1:
        raise UnsupportedFeatureError(
            "legacy (0.1) datasets are read-only: writing 0.1 data files is not supported"
        )
    sink = _FileSink(
        uri,
        reader.schema,
        fields,
        version,
        max_rows_per_file,
        max_bytes_per_file or DEFAULT_MAX_BYTES_PER_FILE,
        storage_options,
    )
    try:
        for batch in reader:
            sink.write(batch)
        sink.close()
    except BaseException:
        sink.abort()
        raise
    return sink.fragments, reader.schema


def write_fragments(
    data: Any,
    uri: str | os.PathLike[str],
    schema: pa.Schema | None = None,
    *,
    mode: str = "append",
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
    max_rows_per_group: int = DEFAULT_MAX_ROWS_PER_GROUP,
    max_bytes_per_file: int | None = None,
    data_storage_version: str | None = "stable",
    storage_options: Mapping[str, str] | None = None,
    fields: Sequence[file_pb2.Field] | None = None,
) -> list[FragmentMetadata]:
    """Write ``data`` as new data files under ``{uri}/data/``; returns their fragments (uncommitted).

    ``mode="append"`` reuses an existing dataset's field ids and file version; ``"create"`` /
    ``"overwrite"`` number the schema afresh. ``fields`` (the target dataset's Lance fields, with
    ids, e.g. ``LanceDataset.lance_schema`` read once on a driver) skips reading the manifest: the
    data is cast to ``schema`` (or, without one, the schema of ``fields``) and written with those
    ids as ``data_storage_version`` files, whatever ``mode``. ``max_rows_per_group`` only applies to
    legacy files, which this implementation does not write.
    """
    fragments, _ = write_fragments_with_schema(
        data,
        uri,
        schema,
        mode=mode,
        max_rows_per_file=max_rows_per_file,
        max_rows_per_group=max_rows_per_group,
        max_bytes_per_file=max_bytes_per_file,
        data_storage_version=data_storage_version,
        storage_options=storage_options,
        fields=fields,
    )
    return fragments
