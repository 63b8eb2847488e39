"""Legacy Lance 0.1 (v1) data files: the container, read-only.

pylance 14 writes these for ``data_storage_version="legacy"`` datasets (footer version 0.2; 0.1
and 0.2 are the same format). Layout::

    +---------------------------------------------+ 0
    | pages, batch by batch, field by field       |  plain / var-binary / dictionary pages
    | page table: (max_id - min_id + 1) x batches |  int64 (position, length) per field and batch,
    |   x 2 int64                                 |  field-major; (0, 0) for structs and holes
    | statistics pages and their page table       |  :meth:`LegacyFileReader.page_statistics`
    | dictionary values                           |  located by Field.dictionary (offset, length)
    | u32 size + lance.table.Manifest             |  the schema (field ids, types, dictionaries)
    | u32 size + lance.file.Metadata              |  batch_offsets, page_table_position,
    |                                             |  manifest_position
    | footer (16 bytes)                           |
    +---------------------------------------------+ EOF

Footer, little-endian (``struct "<QHH4s"``): ``u64 metadata position | u16 major | u16 minor |
b"LANC"``. A v2 footer ends with the same eight bytes (major, minor, magic), so the version of
any Lance file is in its last eight bytes (:func:`lance_ops.file.reader.footer_version`).

``Metadata.batch_offsets`` is ``[0, rows of batch 0, rows of batches 0..1, ...]``; the page of
field ``f`` in batch ``b`` is entry ``(f - min_field_id) * num_batches + b`` of the page table,
where ``min_field_id`` / ``max_field_id`` are the smallest / largest field ids of the file's
schema. Worked example (pylance, one batch, int32 ``a = [1, 2, 3]``): the page is 12 bytes at 0,
the page table at 12 is ``(0, 3)``, and ``Metadata`` has ``batch_offsets [0, 3]``.

Decoding pages is the legacy codec's job (:mod:`lance_ops.encoding.legacy.v0_1`). Writing
legacy files is not supported: they are read-only here.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa
from google.protobuf.message import DecodeError, Message

from lance_ops._proto import file_legacy_pb2 as pbl
from lance_ops._proto import file_pb2 as pb
from lance_ops._proto import table_pb2
from lance_ops.encoding.api import FieldDecoder, FileVersion
from lance_ops.encoding.legacy.v0_1 import LegacyField, LegacyFieldDecoder, PageTable, layout_of
from lance_ops.encoding.sketch import DistinctSketch
from lance_ops.errors import CorruptFileError, UnsupportedFeatureError
from lance_ops.file.format import MAGIC
from lance_ops.file.page_statistics import PageStatistics, column_statistics
from lance_ops.file.reader import (
    ColumnMetadata,
    FileStatistics,
    LanceFileMetadata,
    LanceFileReader,
    PageMetadata,
    RowCount,
)
from lance_ops.file.schema import field_tree, fields_to_schema, storage_field
from lance_ops.io import ObjectStore
from lance_ops.io.context import open_path

FOOTER_SIZE = 16
FOOTER_FORMAT = "<QHH4s"
TAIL_READ_SIZE = 64 * 1024
_SIZE_PREFIX = struct.Struct("<I")

FieldNode = tuple[pb.Field, list]


@dataclass(frozen=True)
class LegacyTail:
    """The parsed tail of a legacy file: footer version, Metadata, schema fields and page table."""

    size: int
    major: int
    minor: int
    metadata: pbl.Metadata
    fields: tuple[pb.Field, ...]
    schema_metadata: Mapping[str, bytes]
    pages: PageTable
    batch_offsets: np.ndarray

    @property
    def num_rows(self) -> int:
        return int(self.batch_offsets[-1]) if len(self.batch_offsets) else 0


def _read_block(
    store: ObjectStore, path: str, tail: memoryview, tail_start: int, start: int, size: int
) -> bytes:
    """``size`` bytes at ``start``: from the tail already read, or with one more read."""
    if start < 0 or start + size > tail_start + len(tail):
        raise CorruptFileError(path, f"bytes {start}..{start + size} lie outside the file")
    if start >= tail_start:
        return bytes(tail[start - tail_start : start - tail_start + size])
    data = store.read_range(path, start, size)
    if len(data) != size:
        raise CorruptFileError(path, f"file ended while reading bytes {start}..{start + size}")
    return bytes(data)


def _read_message(
    store: ObjectStore,
    path: str,
    tail: memoryview,
    tail_start: int,
    position: int,
    message: Message,
    what: str,
) -> None:
    """Parse ``message`` from its u32 size prefix at ``position``."""
    (size,) = _SIZE_PREFIX.unpack(_read_block(store, path, tail, tail_start, position, _SIZE_PREFIX.size))
    data = _read_block(store, path, tail, tail_start, position + _SIZE_PREFIX.size, size)
    try:
        message.ParseFromString(data)
    except DecodeError as exc:
        raise CorruptFileError(path, f"{what} does not parse: {exc}") from exc


def read_legacy_tail(store: ObjectStore, path: str) -> LegacyTail:
    """Read and check the footer, Metadata, embedded schema and page table of a legacy file."""
    size = store.size(path)
    if size < FOOTER_SIZE:
        raise CorruptFileError(path, f"file is {size} bytes, shorter than the {FOOTER_SIZE}-byte footer")
    tail_start = max(0, size - TAIL_READ_SIZE)
    tail = store.read_range(path, tail_start, size - tail_start)
    metadata_position, major, minor, magic = struct.unpack(FOOTER_FORMAT, tail[-FOOTER_SIZE:])
    if magic != MAGIC:
        raise CorruptFileError(path, "file does not appear to be a Lance file (bad magic)")
    if FileVersion.from_footer(major, minor) is not FileVersion.V0_1:
        raise CorruptFileError(path, f"footer version {major}.{minor} is not a legacy (0.1) file")
    metadata = pbl.Metadata()
    _read_message(store, path, tail, tail_start, metadata_position, metadata, "file metadata")
    if not metadata.manifest_position:
        raise UnsupportedFeatureError(
            f"{path}: legacy files without an embedded schema (manifest_position 0) are not supported"
        )
    manifest = table_pb2.Manifest()
    _read_message(store, path, tail, tail_start, metadata.manifest_position, manifest, "embedded schema")
    offsets = np.asarray(metadata.batch_offsets, dtype=np.int64)
    if len(offsets) and (offsets[0] != 0 or (np.diff(offsets) < 0).any()):
        raise CorruptFileError(path, f"batch offsets {offsets.tolist()} are not ascending from 0")
    fields = tuple(manifest.fields)
    num_batches = max(len(offsets) - 1, 0)
    ids = [f.id for f in fields]
    min_id = min(ids, default=0)
    num_ids = max(ids, default=-1) - min_id + 1
    table_size = 16 * num_ids * num_batches
    raw = _read_block(store, path, tail, tail_start, metadata.page_table_position, table_size)
    entries = np.frombuffer(raw, dtype="<i8").reshape(num_ids, num_batches, 2)
    if (entries < 0).any() or (entries[:, :, 0] > size).any():
        raise CorruptFileError(path, "page table entries point outside the file")
    return LegacyTail(
        size,
        major,
        minor,
        metadata,
        fields,
        dict(manifest.schema_metadata),
        PageTable(entries, min_id),
        offsets,
    )


def _legacy_field(node: FieldNode, arrow_field: pa.Field) -> LegacyField:
    """The codec's view of one field: id, storage type, children by field id, dictionary location."""
    field, children = node
    data_type = arrow_field.type
    if pa.types.is_struct(data_type):
        arrow_children = [data_type.field(i) for i in range(data_type.num_fields)]
    elif pa.types.is_list(data_type) or pa.types.is_large_list(data_type):
        arrow_children = [data_type.value_field]
    else:
        arrow_children = []
    dictionary = (
        (int(field.dictionary.offset), int(field.dictionary.length)) if field.HasField("dictionary") else None
    )
    return LegacyField(
        id=field.id,
        data_type=data_type,
        nullable=arrow_field.nullable,
        children=tuple(_legacy_field(c, a) for c, a in zip(children, arrow_children, strict=True)),
        dictionary=dictionary,
    )


class LegacyFileReader(LanceFileReader):
    """A :class:`LanceFileReader` over a legacy (0.1) file; ``LanceFileReader(path)`` returns one
    when the footer says 0.1 or 0.2. Same reads (``read_all``, ``read_range``, ``take_rows``)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        storage_options: Mapping[str, str] | None = None,
        columns: Sequence[str] | None = None,
        store: ObjectStore | None = None,
        size: int | None = None,
        contents: memoryview | None = None,
    ) -> None:
        """``size`` and ``contents`` are accepted as :class:`LanceFileReader` takes them; legacy
        files are opened by their own tail reads, which ask the store for the size."""
        opened = self.__dict__.pop("_opened", None)
        if opened is None:
            store, store_path = open_path(path, storage_options, store)
        else:
            store, store_path, _ = opened
        self._store = store
        self.path = store_path
        self._ranges = store.open_ranges(store_path)
        self._legacy = read_legacy_tail(store, store_path)
        self.version = FileVersion.V0_1
        self.schema = fields_to_schema(self._legacy.fields, self._legacy.schema_metadata)
        self._nodes = field_tree(self._legacy.fields)
        self._decoders = {}
        self._default_columns = list(self.schema.names)
        self._default_columns = self._resolve(columns)

    @property
    def num_rows(self) -> RowCount:
        return RowCount(self._legacy.num_rows)

    def _top_field(self, field_index: int) -> LegacyField:
        return _legacy_field(self._nodes[field_index], storage_field(self.schema.field(field_index)))

    def _all_fields(self) -> list[LegacyField]:
        """Every field of the file, nested ones included."""
        out: list[LegacyField] = []
        pending = [self._top_field(i) for i in range(len(self.schema))]
        while pending:
            node = pending.pop()
            out.append(node)
            pending.extend(node.children)
        return out

    def _decoder(self, field_index: int) -> FieldDecoder:
        decoder = self._decoders.get(field_index)
        if decoder is None:
            node = self._top_field(field_index)
            decoder = LegacyFieldDecoder(node, self._legacy.pages, self._legacy.batch_offsets)
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
        """The page statistics pylance wrote (None when there are none) and the rows of each page.

        ``StatisticsMetadata`` is a small columnar file inside the file: its schema (columns named by
        the data field id, ``struct{null_count, min_value, max_value}``), the field ids of its columns
        and a page table with one entry per column, each column one batch of one row per data page.
        """
        stats = self._legacy.metadata.statistics
        if not stats.schema:
            return None
        fields = tuple(stats.schema)
        ids = np.asarray(stats.fields, dtype=np.int64)
        tail = self._legacy
        raw = _read_block(
            self._store, self.path, memoryview(b""), tail.size, stats.page_table_position, 16 * len(ids)
        )
        runs = np.frombuffer(raw, dtype="<i8").reshape(len(ids), 2)
        if (runs < 0).any() or (runs[:, 0] > tail.size).any():
            raise CorruptFileError(self.path, "statistics page table entries point outside the file")
        min_id = int(ids.min(initial=0))
        entries = np.zeros((int(ids.max(initial=-1)) - min_id + 1, 1, 2), dtype=np.int64)
        entries[ids - min_id, 0] = runs
        page_rows = np.diff(tail.batch_offsets)
        view = object.__new__(LegacyFileReader)
        view.__dict__.update(self.__dict__)
        view._legacy = replace(
            tail,
            fields=fields,
            schema_metadata={},
            pages=PageTable(entries, min_id),
            batch_offsets=np.array([0, len(page_rows)], dtype=np.int64),
        )
        view.schema = fields_to_schema(fields, {})
        view._nodes = field_tree(fields)
        view._decoders = {}
        view._default_columns = list(view.schema.names)
        return view.read_all().to_table(), page_rows

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
