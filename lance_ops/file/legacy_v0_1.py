"""``LegacyFileReader`` / ``LegacyFileWriter``: read and write legacy Lance 0.1 (v1) files.

The container (footer, metadata, embedded schema, page table, statistics) is parsed by
:mod:`lance_ops.encoding.legacy.v0_1.container` and its pages are decoded by
:mod:`lance_ops.encoding.legacy.v0_1`; this module maps them onto the file layer's reader:
the schema (:func:`~lance_ops.file.schema.fields_to_schema`), the row reads shared with v2
files (:class:`~lance_ops.file.reader.LanceFileReader`), metadata and page statistics.
:func:`lance_ops.file.reader.open_file` returns one for a file whose footer says 0.1 or 0.2.
:class:`LegacyFileWriter` writes them as pylance 14 does for a ``data_storage_version="legacy"``
dataset (footer version 0.2): rows grouped into batches of ``max_rows_per_group`` (1024), each
batch's pages field by field (:mod:`lance_ops.encoding.legacy.v0_1.encoder`), then the page
table, the dictionaries, the embedded schema and the metadata. Unlike pylance it writes no page
statistics (``Metadata.statistics``, optional in the format).
"""

from __future__ import annotations

import os
import struct
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from lance_ops._proto import file_legacy_pb2 as pbl
from lance_ops._proto import file_pb2 as pb
from lance_ops._proto import table_pb2
from lance_ops.encoding.api import FieldDecoder, FileVersion
from lance_ops.encoding.legacy.v0_1 import LegacyField, LegacyFieldDecoder, layout_of
from lance_ops.encoding.legacy.v0_1.container import (
    FOOTER_FORMAT,
    MAGIC,
    FieldNode,
    FileBytes,
    LegacyTail,
    legacy_field,
    read_legacy_tail,
    statistics_tail,
)
from lance_ops.encoding.legacy.v0_1.dictionary import decode_dictionary_values
from lance_ops.encoding.legacy.v0_1.encoder import (
    DictionaryCollector,
    check_legacy_type,
    dictionary_values_bytes,
    encode_field,
)
from lance_ops.encoding.sketch import DistinctSketch
from lance_ops.errors import SchemaError, UnsupportedFeatureError
from lance_ops.file.page_statistics import PageStatistics, column_statistics
from lance_ops.file.reader import (
    ColumnMetadata,
    FileStatistics,
    LanceFileMetadata,
    LanceFileReader,
    PageMetadata,
    RowCount,
)
from lance_ops.file.schema import (
    adopt_fields,
    field_tree,
    fields_to_schema,
    schema_metadata_to_pb,
    schema_to_fields,
    storage_field,
    to_storage,
)
from lance_ops.file.writer import FileWriterBase, as_table
from lance_ops.io import ObjectStore
from lance_ops.io.context import open_path

# The footer version pylance 14 writes into 0.1 files (and their DataFile entries).
LEGACY_FOOTER_VERSION = (0, 2)
DEFAULT_MAX_ROWS_PER_GROUP = 1024
_SIZE_PREFIX = struct.Struct("<I")


def _decoder(node: FieldNode, field: pa.Field, tail: LegacyTail) -> LegacyFieldDecoder:
    return LegacyFieldDecoder(legacy_field(node, storage_field(field)), tail.pages, tail.batch_offsets)


class LegacyFileReader(LanceFileReader):
    """A :class:`LanceFileReader` over a legacy (0.1) file; ``LanceFileReader(path)`` returns one
    when the footer says 0.1 or 0.2. Same reads (``read_all``, ``read_range``, ``take_rows``).

    ``size`` is accepted as :class:`LanceFileReader` takes it (it saves asking the store)."""

    def _open(self, tail_bytes: tuple[int, memoryview]) -> None:
        self._ranges = self._store.open_ranges(self.path)
        size, tail = tail_bytes
        self._file = FileBytes(self.path, size, tail, self._fetch)
        self._legacy = read_legacy_tail(self._file)
        self.version = FileVersion.V0_1
        self.schema = fields_to_schema(self._legacy.fields, self._legacy.schema_metadata)
        self._nodes = field_tree(self._legacy.fields)

    @property
    def num_rows(self) -> RowCount:
        return RowCount(self._legacy.num_rows)

    def _all_fields(self) -> list[LegacyField]:
        """Every field of the file, nested ones included."""
        out: list[LegacyField] = []
        pending = [
            legacy_field(node, storage_field(field))
            for node, field in zip(self._nodes, self.schema, strict=True)
        ]
        while pending:
            node = pending.pop()
            out.append(node)
            pending.extend(node.children)
        return out

    def dictionary_values(self, field_id: int) -> pa.Array | None:
        """The values this file stores for dictionary field ``field_id`` (None when it has none)."""
        for node in self._all_fields():
            if node.id == field_id and node.dictionary is not None:
                offset, length = node.dictionary
                value_type = node.data_type.value_type
                return decode_dictionary_values(value_type, offset, length, self._fetch)
        return None

    def _decoder(self, field_index: int) -> FieldDecoder:
        decoder = self._decoders.get(field_index)
        if decoder is None:
            decoder = _decoder(self._nodes[field_index], self.schema.field(field_index), self._legacy)
            self._decoders[field_index] = decoder
        return decoder

    def _field_bytes(self, index: int) -> int:
        """Every field weighs the same in a parallel read (legacy pages are not sized per field here)."""
        return 1

    def read_global_buffer(self, index: int) -> bytes:
        """Legacy files have no global buffers."""
        raise IndexError(f"{self.path}: legacy (0.1) files have no global buffers")

    def metadata(self) -> LanceFileMetadata:
        """Version, rows, schema and one column per field id with one page per batch.

        Legacy pages record a value count, not a byte size: pages list no buffers, their
        ``encoding`` is the layout name (``plain``, ``var_binary``, ``dictionary``, ``list``,
        ``struct``, ``null``) and ``length`` the page table's count.
        """
        tail = self._legacy
        layouts = {node.id: layout_of(node.data_type) for node in self._all_fields()}
        columns = []
        for index, runs in enumerate(tail.pages.entries):
            layout = layouts.get(tail.pages.min_field_id + index, "none")
            pages = [PageMetadata([], layout, int(length), 0) for _, length in runs]
            columns.append(ColumnMetadata(column_buffers=[], pages=pages))
        data_bytes = int(tail.metadata.page_table_position)
        return LanceFileMetadata(
            major_version=tail.major,
            minor_version=tail.minor,
            num_rows=self.num_rows,
            schema=self.schema,
            num_data_bytes=data_bytes,
            num_column_metadata_bytes=tail.size - data_bytes,
            num_global_buffer_bytes=0,
            global_buffers=[],
            columns=columns,
        )

    def page_statistics(self) -> tuple[pa.Table, np.ndarray] | None:
        """The page statistics pylance wrote (None when there are none) and the rows of each page:
        one row per data page (:func:`~lance_ops.encoding.legacy.v0_1.container.statistics_tail`)."""
        stats = statistics_tail(self._file, self._legacy)
        if stats is None:
            return None
        schema = fields_to_schema(stats.fields, {})
        rows = range(stats.num_rows)
        columns = [
            self._decode_field(field, _decoder(node, field, stats), rows)
            if len(rows)
            else pa.array([], field.type)
            for node, field in zip(field_tree(stats.fields), schema, strict=True)
        ]
        return pa.Table.from_arrays(columns, schema=schema), np.diff(self._legacy.batch_offsets)

    def column_statistics(self) -> PageStatistics | None:
        """:meth:`page_statistics` by top-level column name; pylance's float maxima ignore NaN."""
        found = self.page_statistics()
        if found is None:
            return None
        table, page_rows = found
        ids = {f.id: f.name for f in self._legacy.fields if f.parent_id == -1}
        columns = column_statistics(self.path, table, ids, dict.fromkeys(ids.values(), page_rows))
        return PageStatistics(columns, float_max_covers_nan=False)

    def column_sketches(self) -> dict[str, DistinctSketch]:
        """None: pylance keeps no sketches in 0.1 files."""
        return {}

    def file_statistics(self) -> FileStatistics:
        """Not available: legacy page tables hold value counts, not byte sizes."""
        raise UnsupportedFeatureError(f"{self.path}: legacy (0.1) files do not record page sizes")


class LegacyFileWriter(FileWriterBase):
    """Write Arrow data to a legacy (0.1) Lance file, as pylance 14 writes a legacy dataset's.

    ``path`` / ``store`` / ``storage_options`` / ``lance_fields`` / ``schema`` as for
    :class:`~lance_ops.file.writer.LanceFileWriter`; ``max_rows_per_group`` rows make one batch
    (the last may be shorter). ``dictionaries`` (shared by the files of one dataset write) holds
    the dictionary of each dictionary field; by default the file collects its own. Types a 0.1
    file cannot hold raise
    :class:`~lance_ops.errors.UnsupportedFeatureError` before anything is written. Rows are
    buffered until a batch is full, so at most one batch is held in memory.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        schema: pa.Schema | None = None,
        *,
        max_rows_per_group: int = DEFAULT_MAX_ROWS_PER_GROUP,
        storage_options: Mapping[str, str] | None = None,
        lance_fields: Sequence[pb.Field] | None = None,
        store: ObjectStore | None = None,
        dictionaries: DictionaryCollector | None = None,
    ) -> None:
        if max_rows_per_group <= 0:
            raise ValueError("max_rows_per_group must be positive")
        self.version = FileVersion.V0_1
        self.max_rows_per_group = max_rows_per_group
        self._given_fields = list(lance_fields) if lance_fields is not None else None
        self._lock = threading.RLock()
        self._schema: pa.Schema | None = None
        self._fields: list[pb.Field] = []
        self._nodes: list[LegacyField] = []
        if schema is not None:
            self._set_schema(schema)
        store, self.path = open_path(path, storage_options, store)
        self._out = store.open_output(self.path)
        self._pending: list[pa.Table] = []
        self._pending_rows = 0
        self._batch_offsets = [0]
        self._entries: list[dict[int, tuple[int, int]]] = []
        self._dictionaries = DictionaryCollector() if dictionaries is None else dictionaries
        self._bytes_written = 0
        self._closed = False

    @property
    def schema(self) -> pa.Schema | None:
        return self._schema

    @property
    def bytes_written(self) -> int:
        """Bytes written to the output so far; after ``close()`` the size of the whole file."""
        return self._bytes_written if self._closed else int(self._out.tell())

    def _set_schema(self, schema: pa.Schema) -> None:
        for field in schema:
            check_legacy_type(field.name, storage_field(field).type)
        fields = schema_to_fields(schema)
        if self._given_fields is not None:
            fields = adopt_fields(schema, self._given_fields)
        self._schema = schema
        self._fields = fields
        self._nodes = [
            legacy_field(node, storage_field(field))
            for node, field in zip(field_tree(fields), schema, strict=True)
        ]

    def _write(self, data: bytes | memoryview) -> int:
        position = int(self._out.tell())
        if len(data):
            self._out.write(data)
        return position

    def write_batch(self, data: pa.Table | pa.RecordBatch | Any) -> None:
        """Append rows (a Table, RecordBatch or pandas DataFrame) matching the file schema."""
        with self._lock:
            self._check_open()
            table = as_table(data, self._schema)
            if self._schema is None:
                self._set_schema(table.schema)
            assert self._schema is not None
            if [(f.name, f.type) for f in table.schema] != [(f.name, f.type) for f in self._schema]:
                raise SchemaError(
                    f"{self.path}: batch schema does not match the file schema:\n{table.schema}\n"
                    f"expected:\n{self._schema}"
                )
            if table.num_rows == 0:
                return
            self._pending.append(table)
            self._pending_rows += table.num_rows
            while self._pending_rows >= self.max_rows_per_group:
                self._flush(self.max_rows_per_group)

    def _flush(self, rows: int) -> None:
        """Write the first ``rows`` buffered rows as one batch."""
        buffered = pa.concat_tables(self._pending)
        batch, rest = buffered.slice(0, rows), buffered.slice(rows)
        self._pending = [rest] if rest.num_rows else []
        self._pending_rows = rest.num_rows
        entries: dict[int, tuple[int, int]] = {}
        for node, field, column in zip(self._nodes, self._schema or [], batch.columns, strict=True):
            array = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
            array = to_storage(array, field, storage_field(field).type)
            encode_field(node, array, self._write, entries, self._dictionaries)
        self._entries.append(entries)
        self._batch_offsets.append(self._batch_offsets[-1] + rows)

    def close(self) -> int:
        """Write the last batch, the page table, dictionaries, schema, metadata and footer;
        publish the file; returns the number of rows written."""
        with self._lock:
            if self._closed:
                return self._batch_offsets[-1]
            if self._schema is None:
                self.abort()
                raise SchemaError(
                    f"{self.path}: Schema is unknown and file cannot be created: no schema was given "
                    "and no data was written"
                )
            if self._pending_rows:
                self._flush(self._pending_rows)
            page_table_position = self._write(self._page_table().tobytes())
            fields = [pb.Field.FromString(field.SerializeToString()) for field in self._fields]
            for field in fields:
                values = self._dictionaries.values.get(field.id)
                if values is not None:
                    offset = dictionary_values_bytes(values, self._write)
                    field.dictionary.CopyFrom(pb.Dictionary(offset=offset, length=len(values)))
            manifest = table_pb2.Manifest(
                fields=fields,
                schema_metadata=schema_metadata_to_pb(self._schema.metadata),
                version=1,
                writer_version=table_pb2.Manifest.WriterVersion(library="lance", version="14.0.2"),
                data_format=table_pb2.Manifest.DataStorageFormat(file_format="lance", version="0.1"),
            )
            if not self._out.tell():
                # a file without rows: position 0 would read as "no embedded schema"
                self._write(b"\0")
            manifest_position = self._write_message(manifest)
            metadata = pbl.Metadata(
                manifest_position=manifest_position,
                batch_offsets=self._batch_offsets,
                page_table_position=page_table_position,
            )
            metadata_position = self._write_message(metadata)
            self._write(struct.pack(FOOTER_FORMAT, metadata_position, *LEGACY_FOOTER_VERSION, MAGIC))
            self._bytes_written = int(self._out.tell())
            self._out.close()
            self._closed = True
            return self._batch_offsets[-1]

    def _page_table(self) -> np.ndarray:
        """``(position, length)`` int64 per field id (smallest to largest) and batch."""
        ids = [field.id for field in self._fields]
        min_id = min(ids, default=0)
        table = np.zeros((max(ids, default=-1) - min_id + 1, len(self._entries), 2), dtype="<i8")
        for batch, entries in enumerate(self._entries):
            for field_id, entry in entries.items():
                table[field_id - min_id, batch] = entry
        return table

    def _write_message(self, message: Any) -> int:
        data = message.SerializeToString()
        return self._write(_SIZE_PREFIX.pack(len(data)) + data)
