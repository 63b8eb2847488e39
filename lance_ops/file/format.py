"""The Lance v2 container: regions, footer, offset tables, encoding envelopes.

A v2 file (2.0, 2.1, 2.2) is laid out as::

    +--------------------------------------------+ 0
    | data buffers: page buffers and user global |  each starts at a multiple of 64; after every
    | buffers, in the order they were produced   |  non-empty buffer, 0x48 ('H') pads to 64
    +--------------------------------------------+ gbo[0].position (64-aligned)
    | global buffer 0: FileDescriptor            |  schema + row count, no padding after it
    | column metadata 0 .. N-1                   |  lance.file.v2.ColumnMetadata, back to back
    | CMO table: N x (u64 position, u64 size)    |  column metadata offsets
    | GBO table: G x (u64 position, u64 size)    |  global buffer offsets, entry 0 = descriptor
    | footer (40 bytes)                          |
    +--------------------------------------------+ EOF

Footer, little-endian (``struct "<QQQIIHH4s"``)::

    u64 column_meta_start | u64 cmo_table_start | u64 gbo_table_start |
    u32 num_global_buffers | u32 num_columns | u16 major | u16 minor | b"LANC"

Worked example (2.2, one int32 column ``[1, 2, 3]``, 342 bytes): page buffers at 0 (4 B) and
64 (24 B), FileDescriptor at 128 (31 B), column metadata at 159 (111 B), CMO table at 270,
GBO table at 286, footer at 302 = ``(159, 270, 286, 1, 1, 2, 2, "LANC")``.

Every page and column carries a ``lance.file.v2.Encoding`` whose ``direct.encoding`` is a
serialized ``google.protobuf.Any``; its ``type_url`` is ``"/"`` + the message's full name
(``/lance.encodings21.PageLayout`` for 2.1+ pages, ``/lance.encodings.ArrayEncoding`` for 2.0
pages, ``/lance.encodings.ColumnEncoding`` for columns). Readers compare only the part after
the last ``/``; which page message a version uses is decided in :mod:`lance_ops.file.codecs`.

The reader side validates the tail the way pylance's reader does (file large enough, magic,
offsets inside the file, global buffer 0 before the column metadata, each column metadata
inside ``[column_meta_start, cmo_table_start)``, CMO table ending exactly at the GBO table, at
least one global buffer, parseable protobufs) and raises :class:`CorruptFileError` naming the
path otherwise.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from google.protobuf import any_pb2
from google.protobuf.message import DecodeError, Message

from lance_ops._proto import encodings_v2_0_pb2 as pb20
from lance_ops._proto import encodings_v2_1_pb2 as pb21
from lance_ops._proto import file2_pb2 as pb2
from lance_ops._proto import file_pb2 as pb
from lance_ops.encoding.api import FileVersion
from lance_ops.errors import CorruptFileError, UnsupportedEncodingError, UnsupportedFeatureError
from lance_ops.io import ObjectStore

MAGIC = b"LANC"
FOOTER_SIZE = 40
FOOTER_FORMAT = "<QQQIIHH4s"
ALIGNMENT = 64
PAD_BYTE = 0x48
TAIL_READ_SIZE = 64 * 1024
OFFSET_ENTRY = np.dtype([("position", "<u8"), ("size", "<u8")])
_PADDING = bytes([PAD_BYTE]) * ALIGNMENT


@dataclass(frozen=True)
class Footer:
    """The 40-byte footer at the end of every v2 file."""

    column_meta_start: int
    cmo_table_start: int
    gbo_table_start: int
    num_global_buffers: int
    num_columns: int
    major: int
    minor: int

    def pack(self) -> bytes:
        return struct.pack(
            FOOTER_FORMAT,
            self.column_meta_start,
            self.cmo_table_start,
            self.gbo_table_start,
            self.num_global_buffers,
            self.num_columns,
            self.major,
            self.minor,
            MAGIC,
        )

    @classmethod
    def unpack(cls, data: bytes | memoryview) -> Footer:
        *fields, _magic = struct.unpack(FOOTER_FORMAT, data)
        return cls(*fields)


# --------------------------------------------------------------------------- encoding envelopes


def pack_any(message: Message) -> bytes:
    """Serialize ``message`` inside a ``google.protobuf.Any`` with pylance's ``/full.name`` URL."""
    envelope = any_pb2.Any(type_url="/" + message.DESCRIPTOR.full_name, value=message.SerializeToString())
    return envelope.SerializeToString()


def direct_encoding(message: Message) -> pb2.Encoding:
    """A ``lance.file.v2.Encoding`` holding ``message`` directly."""
    return pb2.Encoding(direct=pb2.DirectEncoding(encoding=pack_any(message)))


def values_column_encoding() -> pb2.Encoding:
    """The column-level encoding pylance writes for every 2.1+ column: ``ColumnEncoding{values{}}``."""
    column = pb20.ColumnEncoding()
    column.values.SetInParent()
    return direct_encoding(column)


def unpack_encoding(encoding: pb2.Encoding, expected: type[Message], path: str, where: str) -> Message:
    """Open an ``Encoding`` envelope and parse its payload as ``expected``.

    Non-direct encodings and unknown type URLs raise :class:`UnsupportedEncodingError`; payloads
    that do not parse raise :class:`CorruptFileError`.
    """
    kind = encoding.WhichOneof("location")
    if kind is None:
        raise UnsupportedEncodingError(f"{path}: {where} is missing its encoding")
    if kind != "direct":
        raise UnsupportedEncodingError(f"{path}: {where} uses a {kind!r} encoding; only direct is supported")
    envelope = any_pb2.Any()
    try:
        envelope.ParseFromString(encoding.direct.encoding)
    except DecodeError as exc:
        raise CorruptFileError(path, f"{where}: encoding envelope does not parse: {exc}") from exc
    if "/" not in envelope.type_url:
        raise UnsupportedEncodingError(f"{path}: {where} has an invalid type URL {envelope.type_url!r}")
    name = envelope.type_url.rsplit("/", 1)[1]
    if name != expected.DESCRIPTOR.full_name:
        raise UnsupportedEncodingError(
            f"{path}: {where} uses encoding {name!r}; expected {expected.DESCRIPTOR.full_name}"
        )
    message = expected()
    try:
        message.ParseFromString(envelope.value)
    except DecodeError as exc:
        raise CorruptFileError(path, f"{where}: {name} does not parse: {exc}") from exc
    return message


def check_column_encoding(
    column: pb2.ColumnMetadata, path: str, index: int, allowed: tuple[str, ...] = ("values",)
) -> None:
    """Accept only the column encodings in ``allowed`` (``values``; 2.0 blob columns add ``blob``)."""
    where = f"column {index}"
    encoding = unpack_encoding(column.encoding, pb20.ColumnEncoding, path, where)
    kind = encoding.WhichOneof("column_encoding")
    if kind not in allowed:
        raise UnsupportedEncodingError(
            f"{path}: {where} has column encoding {kind!r}; only {' or '.join(allowed)} supported"
        )


def page_layout(
    page: pb2.ColumnMetadata.Page, path: str, where: str, expected: type[Message] = pb21.PageLayout
) -> Message:
    """The page description: a ``PageLayout`` (2.1+) or an ``ArrayEncoding`` (2.0)."""
    return unpack_encoding(page.encoding, expected, path, where)


# --------------------------------------------------------------------------- writing


def pad_length(position: int) -> int:
    """Bytes of padding needed after ``position`` to reach the next multiple of 64."""
    return -position % ALIGNMENT


class Sink(Protocol):
    """Where a container is written: an ``OutputStream`` or any binary stream (``io.BytesIO``)."""

    def write(self, data: bytes | memoryview, /) -> object: ...

    def tell(self) -> int: ...


class RegionWriter:
    """Appends 64-byte-aligned buffers to an output stream and records where they landed."""

    def __init__(self, out: Sink) -> None:
        self._out = out

    @property
    def position(self) -> int:
        return int(self._out.tell())

    def write_buffer(self, data: bytes | bytearray | memoryview | np.ndarray) -> tuple[int, int]:
        """Write one aligned data buffer followed by 0x48 padding; return ``(position, size)``."""
        if isinstance(data, np.ndarray):
            view = np.ascontiguousarray(data).reshape(-1).view(np.uint8).data
        else:
            view = memoryview(data).cast("B")
        position = self.position
        if view.nbytes:
            self._out.write(view)
            self._out.write(_PADDING[: pad_length(position + view.nbytes)])
        return position, view.nbytes

    def write_tail(
        self,
        descriptor: pb.FileDescriptor,
        columns: Sequence[pb2.ColumnMetadata],
        global_buffers: Sequence[tuple[int, int]],
        version: FileVersion,
    ) -> None:
        """Write global buffer 0, the column metadatas, both offset tables and the footer."""
        descriptor_bytes = descriptor.SerializeToString()
        descriptor_position = self.position
        self._out.write(descriptor_bytes)
        column_meta_start = self.position
        cmo = np.zeros(len(columns), dtype=OFFSET_ENTRY)
        for i, column in enumerate(columns):
            data = column.SerializeToString()
            cmo[i] = (self.position, len(data))
            self._out.write(data)
        cmo_table_start = self.position
        self._out.write(cmo.tobytes())
        gbo = np.zeros(1 + len(global_buffers), dtype=OFFSET_ENTRY)
        gbo[0] = (descriptor_position, len(descriptor_bytes))
        for i, entry in enumerate(global_buffers, start=1):
            gbo[i] = entry
        gbo_table_start = self.position
        self._out.write(gbo.tobytes())
        major, minor = version.footer
        footer = Footer(column_meta_start, cmo_table_start, gbo_table_start, len(gbo), len(cmo), major, minor)
        self._out.write(footer.pack())


# --------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class FileTail:
    """Everything a reader needs before touching data pages."""

    path: str
    size: int
    footer: Footer
    version: FileVersion
    descriptor: pb.FileDescriptor
    columns: tuple[pb2.ColumnMetadata, ...]
    global_buffers: tuple[tuple[int, int], ...]  # (position, size), entry 0 = descriptor


def _version_of(path: str, major: int, minor: int) -> FileVersion:
    try:
        version = FileVersion.from_footer(major, minor)
    except UnsupportedFeatureError as exc:
        raise UnsupportedFeatureError(f"{path}: {exc}") from exc
    if version is FileVersion.V0_1:
        raise UnsupportedFeatureError(
            f"{path}: file version {version} (footer {major}.{minor}); legacy files are not supported yet"
        )
    return version


def _offset_table(block: memoryview, start: int, count: int) -> np.ndarray:
    return np.frombuffer(block, dtype=OFFSET_ENTRY, count=count, offset=start)


def read_tail_bytes(store: ObjectStore, path: str, size: int | None = None) -> tuple[int, memoryview]:
    """The file's size and its last :data:`TAIL_READ_SIZE` bytes: the whole file if smaller, or if
    the store reads files of its size whole (:attr:`ObjectStore.whole_file_read_size`).

    ``size``: the file's size when known (a manifest records its data files'), saving a request."""
    if size is None:
        size = store.size(path)
    if size <= store.whole_file_read_size:
        # One plain GET, as pylance reads its small files (no range to ask for).
        tail_start, tail = 0, memoryview(store.read(path))
        if len(tail) > size:
            raise CorruptFileError(path, f"file holds {len(tail)} bytes, {size} were recorded")
    else:
        tail_start = max(0, size - TAIL_READ_SIZE)
        tail = store.read_range(path, tail_start, size - tail_start)
    if len(tail) != size - tail_start:
        raise CorruptFileError(path, "file ended while reading its tail")
    return size, tail


def read_tail(store: ObjectStore, path: str, tail_bytes: tuple[int, memoryview] | None = None) -> FileTail:
    """Read and validate the footer, offset tables, FileDescriptor and column metadata of a file.

    ``tail_bytes``: what :func:`read_tail_bytes` returned, when the caller has read them already."""
    size, tail = tail_bytes or read_tail_bytes(store, path)
    if size < FOOTER_SIZE:
        raise CorruptFileError(path, f"file is {size} bytes, shorter than the {FOOTER_SIZE}-byte footer")
    tail_start = size - len(tail)
    footer_bytes = tail[-FOOTER_SIZE:]
    if bytes(footer_bytes[-4:]) != MAGIC:
        raise CorruptFileError(path, "file does not appear to be a Lance file (bad magic)")
    footer = Footer.unpack(footer_bytes)
    version = _version_of(path, footer.major, footer.minor)
    footer_start = size - FOOTER_SIZE
    if footer.num_global_buffers == 0:
        raise CorruptFileError(path, "file does not contain any global buffers")
    gbo_end = footer.gbo_table_start + 16 * footer.num_global_buffers
    ordered = footer.column_meta_start <= footer.cmo_table_start <= footer.gbo_table_start
    if not ordered or gbo_end > footer_start:
        raise CorruptFileError(
            path,
            f"footer offsets out of range (column metadata {footer.column_meta_start}, CMO table "
            f"{footer.cmo_table_start}, GBO table {footer.gbo_table_start}, footer {footer_start})",
        )
    if footer.cmo_table_start + 16 * footer.num_columns != footer.gbo_table_start:
        raise CorruptFileError(path, "the column metadata offset table must end at the global buffer table")
    gbo = _read_table(store, path, tail, tail_start, footer.gbo_table_start, footer.num_global_buffers)
    gb0_position, gb0_size = int(gbo[0]["position"]), int(gbo[0]["size"])
    if gb0_position + gb0_size > footer.column_meta_start:
        raise CorruptFileError(
            path, f"global buffer 0 ({gb0_position}+{gb0_size}) must lie before the column metadata"
        )
    if (gbo["position"] + gbo["size"] > size).any():
        raise CorruptFileError(path, "a global buffer lies outside the file")
    if gb0_position < tail_start:
        block = store.read_range(path, gb0_position, size - gb0_position)
        if len(block) != size - gb0_position:
            raise CorruptFileError(path, "file ended while reading its metadata")
        block_start = gb0_position
    else:
        block, block_start = tail, tail_start
    descriptor = pb.FileDescriptor()
    _parse(descriptor, _slice(block, gb0_position - block_start, gb0_size), path, "schema")
    cmo = _offset_table(block, footer.cmo_table_start - block_start, footer.num_columns)
    columns = []
    for i, (position, length) in enumerate(cmo.tolist()):
        if position < footer.column_meta_start or position + length > footer.cmo_table_start:
            raise CorruptFileError(
                path, f"column {i} metadata ({position}+{length}) is outside the metadata region"
            )
        column = pb2.ColumnMetadata()
        _parse(column, _slice(block, position - block_start, length), path, f"column {i} metadata")
        columns.append(column)
    global_buffers = tuple((int(p), int(s)) for p, s in gbo.tolist())
    return FileTail(path, size, footer, version, descriptor, tuple(columns), global_buffers)


def _read_table(
    store: ObjectStore, path: str, tail: memoryview, tail_start: int, start: int, count: int
) -> np.ndarray:
    if start >= tail_start:
        return _offset_table(tail, start - tail_start, count)
    data = store.read_range(path, start, 16 * count)
    if len(data) != 16 * count:
        raise CorruptFileError(path, "file ended while reading the global buffer table")
    return _offset_table(data, 0, count)


def _slice(block: memoryview, start: int, length: int) -> memoryview:
    return block[start : start + length]


def _parse(message: Message, data: memoryview, path: str, what: str) -> None:
    try:
        message.ParseFromString(bytes(data))
    except DecodeError as exc:
        raise CorruptFileError(path, f"{what} does not parse: {exc}") from exc
