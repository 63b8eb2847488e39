"""The legacy Lance 0.1 (v1) file container: footer, metadata, embedded schema and page table.

pylance 14 writes these for ``data_storage_version="legacy"`` datasets (footer version 0.2; 0.1
and 0.2 are the same format). Layout::

    +---------------------------------------------+ 0
    | pages, batch by batch, field by field       |  plain / var-binary / dictionary pages
    | page table: (max_id - min_id + 1) x batches |  int64 (position, length) per field and batch,
    |   x 2 int64                                 |  field-major; (0, 0) for structs and holes
    | statistics pages and their page table       |  ``Metadata.statistics`` (:func:`statistics_tail`)
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

Like the rest of the codec this does no I/O of its own: it parses the file's last bytes, already
read by the file layer, and reads anything before them through a :data:`Fetch`. The pages are
decoded by :mod:`.decoder`; the file layer's reader is :mod:`lance_ops.file.legacy_v0_1`.
Writing: pages by :mod:`.encoder`, the container by
:class:`lance_ops.file.legacy_v0_1.LegacyFileWriter`.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa
from google.protobuf.message import DecodeError, Message

from lance_ops._proto import file_legacy_pb2 as pbl
from lance_ops._proto import file_pb2 as pb
from lance_ops._proto import table_pb2
from lance_ops.encoding.api import Fetch, FileVersion
from lance_ops.encoding.legacy.v0_1.decoder import LegacyField, PageTable
from lance_ops.errors import CorruptFileError, UnsupportedFeatureError

FOOTER_SIZE = 16
FOOTER_FORMAT = "<QHH4s"
MAGIC = b"LANC"  # the same as a v2 footer's
_SIZE_PREFIX = struct.Struct("<I")

# A field of the file schema with its children, as lance_ops.file.schema.field_tree builds them.
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


@dataclass(frozen=True)
class FileBytes:
    """How the container reads a file: its size, its last bytes (read once, when the file was
    opened) and a :data:`Fetch` for anything before them."""

    path: str
    size: int
    tail: memoryview
    fetch: Fetch

    def read(self, start: int, size: int) -> bytes:
        """``size`` bytes at ``start``: from the tail already read, or with one more read."""
        tail_start = self.size - len(self.tail)
        if start < 0 or start + size > self.size:
            raise CorruptFileError(self.path, f"bytes {start}..{start + size} lie outside the file")
        if start >= tail_start:
            return bytes(self.tail[start - tail_start : start - tail_start + size])
        (data,) = self.fetch([(start, size)])
        if len(data) != size:
            raise CorruptFileError(self.path, f"file ended while reading bytes {start}..{start + size}")
        return bytes(data)

    def read_message(self, position: int, message: Message, what: str) -> None:
        """Parse ``message`` from its u32 size prefix at ``position``."""
        (size,) = _SIZE_PREFIX.unpack(self.read(position, _SIZE_PREFIX.size))
        data = self.read(position + _SIZE_PREFIX.size, size)
        try:
            message.ParseFromString(data)
        except DecodeError as exc:
            raise CorruptFileError(self.path, f"{what} does not parse: {exc}") from exc


def read_legacy_tail(file: FileBytes) -> LegacyTail:
    """Read and check the footer, Metadata, embedded schema and page table of a legacy file."""
    path, size = file.path, file.size
    if size < FOOTER_SIZE:
        raise CorruptFileError(path, f"file is {size} bytes, shorter than the {FOOTER_SIZE}-byte footer")
    metadata_position, major, minor, magic = struct.unpack(
        FOOTER_FORMAT, file.read(size - FOOTER_SIZE, FOOTER_SIZE)
    )
    if magic != MAGIC:
        raise CorruptFileError(path, "file does not appear to be a Lance file (bad magic)")
    if FileVersion.from_footer(major, minor) is not FileVersion.V0_1:
        raise CorruptFileError(path, f"footer version {major}.{minor} is not a legacy (0.1) file")
    metadata = pbl.Metadata()
    file.read_message(metadata_position, metadata, "file metadata")
    if not metadata.manifest_position:
        raise UnsupportedFeatureError(
            f"{path}: legacy files without an embedded schema (manifest_position 0) are not supported"
        )
    manifest = table_pb2.Manifest()
    file.read_message(metadata.manifest_position, manifest, "embedded schema")
    offsets = np.asarray(metadata.batch_offsets, dtype=np.int64)
    if len(offsets) and (offsets[0] != 0 or (np.diff(offsets) < 0).any()):
        raise CorruptFileError(path, f"batch offsets {offsets.tolist()} are not ascending from 0")
    fields = tuple(manifest.fields)
    num_batches = max(len(offsets) - 1, 0)
    ids = [f.id for f in fields]
    min_id = min(ids, default=0)
    num_ids = max(ids, default=-1) - min_id + 1
    table_size = 16 * num_ids * num_batches
    raw = file.read(metadata.page_table_position, table_size)
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


def statistics_tail(file: FileBytes, tail: LegacyTail) -> LegacyTail | None:
    """The page statistics pylance wrote, as a small file of its own (None when there are none).

    ``StatisticsMetadata`` is a small columnar file inside the file: its schema (columns named by
    the data field id, ``struct{null_count, min_value, max_value}``), the field ids of its columns
    and a page table with one entry per column, each column one batch of one row per data page.
    """
    stats = tail.metadata.statistics
    if not stats.schema:
        return None
    fields = tuple(stats.schema)
    ids = np.asarray(stats.fields, dtype=np.int64)
    raw = file.read(stats.page_table_position, 16 * len(ids))
    runs = np.frombuffer(raw, dtype="<i8").reshape(len(ids), 2)
    if (runs < 0).any() or (runs[:, 0] > tail.size).any():
        raise CorruptFileError(file.path, "statistics page table entries point outside the file")
    min_id = int(ids.min(initial=0))
    entries = np.zeros((int(ids.max(initial=-1)) - min_id + 1, 1, 2), dtype=np.int64)
    entries[ids - min_id, 0] = runs
    num_pages = len(tail.batch_offsets) - 1 if len(tail.batch_offsets) else 0
    return replace(
        tail,
        fields=fields,
        schema_metadata={},
        pages=PageTable(entries, min_id),
        batch_offsets=np.array([0, num_pages], dtype=np.int64),
    )


def legacy_field(node: FieldNode, arrow_field: pa.Field) -> LegacyField:
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
        children=tuple(legacy_field(c, a) for c, a in zip(children, arrow_children, strict=True)),
        dictionary=dictionary,
    )
