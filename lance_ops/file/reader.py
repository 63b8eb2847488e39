"""``LanceFileReader``: read rows of a Lance file (0.1, 2.0, 2.1, 2.2).

Opening a file reads only its tail (see :func:`lance_ops.file.format.read_tail`): footer,
offset tables, schema and column metadata. Columns are assigned to top-level fields in
schema order, each field owning ``num_columns(field, version)`` consecutive columns. Pages
are described to the codec as :class:`PageInfo` (layout, absolute buffer ranges, row count,
first row), and data bytes are fetched on demand through a :data:`Fetch` backed by the
object store's coalescing ``read_ranges``, so a decoder reads only the chunks it needs.

``take_rows`` accepts indices in any order and with duplicates: they are sorted and
de-duplicated, decoded once, and put back in the caller's order with one ``take``.

Legacy (0.1) files have another container: :func:`open_file` (which ``LanceFileReader(path)``
calls) looks at the footer's version first and returns a
:class:`lance_ops.file.legacy_v0_1.LegacyFileReader` for them. Callers hold either as a
:class:`FileReader`.
"""

from __future__ import annotations

import os
import struct
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property, partial
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf import text_format

from lance_ops._proto import file2_pb2 as pb2
from lance_ops.encoding.api import Fetch, FieldDecoder, FileVersion, PageInfo
from lance_ops.encoding.sketch import DistinctSketch
from lance_ops.errors import CorruptFileError, SchemaError, TakeIndexError, UnsupportedFeatureError
from lance_ops.file.codecs import codec_for
from lance_ops.file.format import (
    MAGIC,
    FileTail,
    check_column_encoding,
    page_layout,
    read_tail,
    read_tail_bytes,
)
from lance_ops.file.page_statistics import (
    PAGE_STATISTICS_KEY,
    PageStatistics,
    StatisticsLocation,
    column_statistics,
)
from lance_ops.file.parallel import WORKER_THREADS, run_tasks
from lance_ops.file.schema import from_storage, pb_to_schema, storage_field
from lance_ops.io import MemoryStore, ObjectStore
from lance_ops.io.base import BufferedRanges, RangeReader
from lance_ops.io.context import open_path

DEFAULT_BATCH_SIZE = 1024
_VERSION_TAIL = struct.Struct("<HH4s")


# Distinct column projections a reader remembers the schema of (a few in practice).
_PROJECTIONS_KEPT = 32
# Reads of fewer cells (rows x fields) than this stay on the calling thread: for them the
# hand-off costs more than it saves (a take touching many small fragments).
PARALLEL_MIN_CELLS = 4096
# A field's rows are split into ranges decoded on separate threads from this many rows per range.
SPLIT_MIN_ROWS = 65_536
# Where a row range is split, the cut falls on a multiple of this many rows of the file: mini-block
# chunks hold a power of two of values up to this many, so that (for pages starting there too) no
# chunk is read and decoded by both sides of a cut.
SPLIT_ALIGN_ROWS = 4096


def footer_version(path: str, tail: memoryview) -> FileVersion:
    """The version in the last eight bytes of any Lance file (``tail``: the file's last bytes):
    v1 and v2 footers both end with ``u16 major | u16 minor | b"LANC"``."""
    if len(tail) < _VERSION_TAIL.size:
        raise CorruptFileError(path, f"file is {len(tail)} bytes, too short for a Lance footer")
    major, minor, magic = _VERSION_TAIL.unpack(tail[len(tail) - _VERSION_TAIL.size :])
    if magic != MAGIC:
        raise CorruptFileError(path, "file does not appear to be a Lance file (bad magic)")
    try:
        return FileVersion.from_footer(major, minor)
    except UnsupportedFeatureError as exc:
        raise UnsupportedFeatureError(f"{path}: {exc}") from exc


class RowCount(int):
    """A file's row count: an ``int`` (``reader.num_rows``, the API contract) that can also be
    called (``reader.num_rows()``, pylance's method), so code written for either works."""

    def __call__(self) -> int:
        return int(self)


@dataclass(frozen=True)
class BufferMetadata:
    """Absolute position and size of one buffer in the file."""

    position: int
    size: int


@dataclass(frozen=True)
class PageMetadata:
    """One page: its buffers, its layout as one-line protobuf text, rows and priority."""

    buffers: list[BufferMetadata]
    encoding: str
    length: int
    priority: int


@dataclass(frozen=True)
class ColumnMetadata:
    """One column: column-level buffers (never written by pylance 14) and pages."""

    column_buffers: list[BufferMetadata]
    pages: list[PageMetadata]


@dataclass(frozen=True)
class LanceFileMetadata:
    """What :meth:`LanceFileReader.metadata` reports (the same names as pylance's)."""

    major_version: int
    minor_version: int
    num_rows: int
    schema: pa.Schema
    num_data_bytes: int
    num_column_metadata_bytes: int
    num_global_buffer_bytes: int
    global_buffers: list[BufferMetadata]
    columns: list[ColumnMetadata]

    @property
    def version(self) -> str:
        return f"{self.major_version}.{self.minor_version}"


@dataclass(frozen=True)
class ColumnStatistics:
    num_pages: int
    size_bytes: int


@dataclass(frozen=True)
class FileStatistics:
    """Per-column page counts and data sizes, like pylance's ``file_statistics()``."""

    columns: list[ColumnStatistics]


class ReaderResults:
    """The rows of one read, decoded when consumed: ``to_table()`` or ``to_batches()``."""

    def __init__(
        self, reader: LanceFileReader, rows: range | np.ndarray, columns: Sequence[str], batch_size: int
    ) -> None:
        if batch_size <= 0:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        self._reader = reader
        self._rows = rows
        self._columns = list(columns)
        self._batch_size = batch_size

    def to_table(self) -> pa.Table:
        """All rows as one table."""
        return self._reader._read_table(self._rows, self._columns)

    def to_batches(self, batch_size: int | None = None) -> pa.RecordBatchReader:
        """A RecordBatchReader of batches of at most ``batch_size`` rows (default: the read's).

        Row ranges are decoded one batch at a time; taken rows are decoded at once and sliced.
        """
        size = batch_size or self._batch_size
        schema = self._reader._projected_schema(self._columns)
        return pa.RecordBatchReader.from_batches(schema, self._iter_batches(size))

    def _iter_batches(self, size: int) -> Iterator[pa.RecordBatch]:
        if isinstance(self._rows, range):
            for start in range(0, len(self._rows), size):
                table = self._reader._read_table(self._rows[start : start + size], self._columns)
                yield from table.combine_chunks().to_batches()
        else:
            yield from self.to_table().combine_chunks().to_batches(max_chunksize=size)


class FileReader(Protocol):
    """What a reader of a Lance file offers whatever the file's version: the type callers hold.

    :func:`open_file` (and ``LanceFileReader(path)``) returns one: a :class:`V2FileReader` for
    2.0 / 2.1 / 2.2 files, a :class:`~lance_ops.file.legacy_v0_1.LegacyFileReader` for 0.1 files.
    """

    path: str
    version: FileVersion
    schema: pa.Schema

    @property
    def num_rows(self) -> RowCount: ...

    def read_all(
        self, columns: Sequence[str] | None = None, *, batch_size: int = DEFAULT_BATCH_SIZE
    ) -> ReaderResults: ...

    def read_range(
        self,
        start: int,
        num_rows: int,
        columns: Sequence[str] | None = None,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> ReaderResults: ...

    def take_rows(
        self,
        indices: Sequence[int] | np.ndarray | pa.Array,
        columns: Sequence[str] | None = None,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> ReaderResults: ...

    def read_global_buffer(self, index: int) -> bytes: ...

    def column_statistics(self) -> PageStatistics | None: ...

    def column_sketches(self) -> dict[str, DistinctSketch]: ...

    def metadata(self) -> LanceFileMetadata: ...

    def file_statistics(self) -> FileStatistics: ...


class _OpensAnyVersion(type):
    """Calling :class:`LanceFileReader` itself is :func:`open_file` (pylance's constructor, for a
    file of any version); its subclasses are constructed as usual."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if cls is LanceFileReader:
            return open_file(*args, **kwargs)
        return super().__call__(*args, **kwargs)


class LanceFileReader(metaclass=_OpensAnyVersion):
    """Read a Lance file. ``columns`` sets the default projection (top-level field names).

    ``LanceFileReader(path)`` (pylance's name) opens a file of any version with :func:`open_file`,
    which returns the subclass for the file's container: :class:`V2FileReader` or
    :class:`~lance_ops.file.legacy_v0_1.LegacyFileReader`. This base holds what they share: the
    row reads (projection, ranges, takes, decoding fields on threads) over the decoders each
    container provides.

    ``path`` is a local path or URI (opened with ``storage_options``), or, with ``store`` (a
    dataset's storage context passed down), a path within that store.

    ``num_rows`` is a property holding the file's row count (pylance has a method of the same
    name); ``schema`` is the file's Arrow schema.

    ``size``: the file's size in bytes when the caller knows it (a manifest records it), which saves
    the request asking the store. ``tail_bytes``: what :func:`~lance_ops.file.format.read_tail_bytes`
    returned, when the caller (:func:`open_file`) has read the tail already. A file the store
    reads whole (:attr:`~lance_ops.io.ObjectStore.whole_file_read_size`: small files on remote
    stores) is read in one request when opened, and every later read is served from that buffer.
    """

    path: str
    version: FileVersion
    schema: pa.Schema

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        storage_options: Mapping[str, str] | None = None,
        columns: Sequence[str] | None = None,
        store: ObjectStore | None = None,
        size: int | None = None,
        tail_bytes: tuple[int, memoryview] | None = None,
    ) -> None:
        store, store_path = open_path(path, storage_options, store)
        self._store: ObjectStore = store
        self.path = store_path
        self._ranges: RangeReader
        self._open(tail_bytes or read_tail_bytes(store, store_path, size))
        self._decoders: dict[int, FieldDecoder] = {}
        self._default_columns: list[str] = list(self.schema.names)
        self._default_columns = self._resolve(columns)

    # What each container provides (the subclasses override every one of these).

    def _open(self, tail_bytes: tuple[int, memoryview]) -> None:
        """Parse the container from the file's size and last bytes: set ``_ranges``, ``version``
        and ``schema``, and whatever the container's decoders need."""
        raise NotImplementedError

    @property
    def num_rows(self) -> RowCount:
        raise NotImplementedError

    def _decoder(self, field_index: int) -> FieldDecoder:
        """The decoder of top-level field ``field_index``, made once per reader."""
        raise NotImplementedError

    def _field_bytes(self, index: int) -> int:
        """Stored bytes of a field's pages: per row read, what orders the tasks of a parallel read."""
        raise NotImplementedError

    def read_global_buffer(self, index: int) -> bytes:
        """The bytes of global buffer ``index`` (0 is the serialized FileDescriptor)."""
        raise NotImplementedError

    def column_statistics(self) -> PageStatistics | None:
        """The page statistics the file carries, by top-level column (None when it has none)."""
        raise NotImplementedError

    def column_sketches(self) -> dict[str, DistinctSketch]:
        """The distinct-value sketch of each top-level column that has page statistics."""
        raise NotImplementedError

    def metadata(self) -> LanceFileMetadata:
        """Version, row count, schema, byte accounting and per-column pages."""
        raise NotImplementedError

    def file_statistics(self) -> FileStatistics:
        """Number of pages and bytes of page data per column."""
        raise NotImplementedError

    def _resolve(self, columns: Sequence[str] | None) -> list[str]:
        if columns is None:
            return self._default_columns
        if isinstance(columns, str):
            raise TypeError("columns must be a list of field names, not a string")
        missing = [name for name in columns if self.schema.get_field_index(name) < 0]
        if missing:
            raise SchemaError(f"{self.path}: no such column(s) {missing}; the file has {self.schema.names}")
        return list(columns)

    def _fetch(self, ranges: Sequence[tuple[int, int]]) -> list[memoryview]:
        buffers = self._ranges.read_ranges(ranges)
        for (start, length), data in zip(ranges, buffers, strict=True):
            if len(data) != length:
                raise CorruptFileError(self.path, f"file ended while reading bytes {start}..{start + length}")
        return buffers

    def _read_table(self, rows: range | np.ndarray, columns: Sequence[str]) -> pa.Table:
        if isinstance(rows, np.ndarray) and len(rows) > 1 and (np.diff(rows) <= 0).any():
            unique, inverse = np.unique(rows, return_inverse=True)
            return self._read_table(unique, columns).take(pa.array(inverse.reshape(-1)))
        schema, indices = self._projection(columns)
        if len(rows) == 0:
            return pa.Table.from_arrays([pa.array([], type=f.type) for f in schema], schema=schema)
        # One task per field, and per row range of a field on long reads; the pieces of a field
        # become the chunks of its column.
        parts = max(1, min(WORKER_THREADS, len(rows) // SPLIT_MIN_ROWS))
        parallel = len(rows) * len(indices) >= PARALLEL_MIN_CELLS
        cuts = _cuts(rows, parts) if parallel else [0, len(rows)]
        spans = list(zip(cuts[:-1], cuts[1:], strict=True))
        fetch = self._fetch_for(rows, indices)
        tasks = [
            partial(self._read_field, field, index, rows[lo:hi], fetch)
            for field, index in zip(schema, indices, strict=True)
            for lo, hi in spans
        ]
        if parallel:
            costs = [self._field_bytes(index) * (hi - lo) for index in indices for lo, hi in spans]
            pieces = run_tasks(tasks, costs)
        else:
            pieces = [task() for task in tasks]
        step = len(spans)
        columns_out = [
            pieces[i] if step == 1 else pa.chunked_array(pieces[i : i + step], field.type)
            for i, field in zip(range(0, len(pieces), step), schema, strict=True)
        ]
        return pa.Table.from_arrays(columns_out, schema=schema)

    def _fetch_for(self, rows: range | np.ndarray, indices: Sequence[int]) -> Fetch:
        """How the fields ``indices`` read ``rows``: :meth:`_fetch` (each decoder's requests as
        it makes them) unless a subclass fetches ahead."""
        return self._fetch

    def _read_field(self, field: pa.Field, index: int, rows: range | np.ndarray, fetch: Fetch) -> pa.Array:
        return self._decode_field(field, self._decoder(index), rows, fetch)

    def _decode_field(
        self, field: pa.Field, decoder: FieldDecoder, rows: range | np.ndarray, fetch: Fetch | None = None
    ) -> pa.Array:
        try:
            array = decoder.read(fetch or self._fetch, rows)
        except CorruptFileError as exc:
            raise exc.located(path=self.path, column=field.name) from exc
        return from_storage(array, field)

    def _projected_schema(self, columns: Sequence[str]) -> pa.Schema:
        return self._projection(columns)[0]

    def _projection(self, columns: Sequence[str]) -> tuple[pa.Schema, list[int]]:
        """The schema of ``columns`` and each one's field index, kept per projection (a take over
        many small files asks each for the same few)."""
        cache: dict[tuple[str, ...], tuple[pa.Schema, list[int]]]
        cache = self.__dict__.setdefault("_projections", {})
        key = tuple(columns)
        found = cache.get(key)
        if found is None:
            fields = [self.schema.field(name) for name in columns]
            found = (
                pa.schema(fields, metadata=self.schema.metadata),
                [self.schema.get_field_index(field.name) for field in fields],
            )
            if len(cache) >= _PROJECTIONS_KEPT:
                cache.clear()
            cache[key] = found
        return found

    # ------------------------------------------------------------------ public API

    def read_all(
        self, columns: Sequence[str] | None = None, *, batch_size: int = DEFAULT_BATCH_SIZE
    ) -> ReaderResults:
        """Every row of the file."""
        return ReaderResults(self, range(self.num_rows), self._resolve(columns), batch_size)

    def read_range(
        self,
        start: int,
        num_rows: int,
        columns: Sequence[str] | None = None,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> ReaderResults:
        """``num_rows`` rows starting at row ``start``."""
        if start < 0 or num_rows < 0 or start + num_rows > self.num_rows:
            raise TakeIndexError(
                f"{self.path}: rows {start}..{start + num_rows} out of range (file has {self.num_rows})"
            )
        return ReaderResults(self, range(start, start + num_rows), self._resolve(columns), batch_size)

    def take_rows(
        self,
        indices: Sequence[int] | np.ndarray | pa.Array,
        columns: Sequence[str] | None = None,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> ReaderResults:
        """The rows at ``indices`` (any order, duplicates allowed), in the order given."""
        if isinstance(indices, pa.Array | pa.ChunkedArray):
            indices = indices.to_numpy(zero_copy_only=False)
        rows = np.asarray(indices)
        if rows.size and not np.issubdtype(rows.dtype, np.integer):
            raise TypeError(f"row indices must be integers, got {rows.dtype}")
        rows = rows.astype(np.int64, copy=False).reshape(-1)
        if rows.size and (rows.min() < 0 or rows.max() >= self.num_rows):
            raise TakeIndexError(f"{self.path}: row index out of range (file has {self.num_rows} rows)")
        return ReaderResults(self, rows, self._resolve(columns), batch_size)


#: Arrow schemas of the file schemas met lately, by their serialized bytes (oldest dropped first).
_SCHEMAS_KEPT = 64
_schemas: dict[bytes, pa.Schema] = {}
_schemas_lock = threading.Lock()


#: Per file schema met lately (the shared objects :func:`_file_schema` returns) and file version:
#: each top-level field's storage field and the range of the file's columns holding it.
_shapes: dict[tuple[int, FileVersion], tuple[pa.Schema, list[pa.Field], list[range]]] = {}


def _cuts(rows: range | np.ndarray, parts: int) -> list[int]:
    """Where ``rows`` is split into ``parts`` nearly equal pieces, ``[0, ..., len(rows)]``; in a
    contiguous range each inner cut moved to the nearest multiple of :data:`SPLIT_ALIGN_ROWS` rows
    of the file (pieces that would then be empty are merged)."""
    n = len(rows)
    cuts = [n * k // parts for k in range(parts + 1)]
    if not isinstance(rows, range) or rows.step != 1:
        return cuts
    start = rows.start
    aligned = [0]
    for cut in cuts[1:-1]:
        moved = round((start + cut) / SPLIT_ALIGN_ROWS) * SPLIT_ALIGN_ROWS - start
        if aligned[-1] < moved < n:
            aligned.append(moved)
    return [*aligned, n]


def _schema_shape(schema: pa.Schema, version: FileVersion) -> tuple[list[pa.Field], list[range]]:
    """The storage fields of ``schema`` and the columns each takes in a file of ``version``,
    worked out once for all the files sharing the schema object (a dataset's small files)."""
    key = (id(schema), version)
    with _schemas_lock:
        found = _shapes.get(key)
    if found is not None and found[0] is schema:
        return found[1], found[2]
    codec = codec_for(version)
    fields = [storage_field(field) for field in schema]
    ranges, start = [], 0
    for field in fields:
        count = codec.num_columns(field)
        ranges.append(range(start, start + count))
        start += count
    with _schemas_lock:
        _shapes[key] = (schema, fields, ranges)
        while len(_shapes) > _SCHEMAS_KEPT:
            del _shapes[next(iter(_shapes))]
    return fields, ranges


def _file_schema(message: Any) -> pa.Schema:
    """The Arrow schema of a file's ``lance.file.Schema`` message, converted once per distinct
    schema: the data files of a dataset mostly share one, and opening many small files (a
    compaction, a scan of many fragments) then converts it once. The one object is shared by
    those readers (Arrow schemas are immutable), so caches keyed by it hit across files."""
    key = message.SerializeToString()
    with _schemas_lock:
        schema = _schemas.get(key)
    if schema is None:
        schema = pb_to_schema(message)
        with _schemas_lock:
            schema = _schemas.setdefault(key, schema)
            while len(_schemas) > _SCHEMAS_KEPT:
                del _schemas[next(iter(_schemas))]
    return schema


class V2FileReader(LanceFileReader):
    """A reader of a Lance v2 file (2.0, 2.1, 2.2): the container of :mod:`lance_ops.file.format`.

    A file the store reads whole (:attr:`~lance_ops.io.ObjectStore.whole_file_read_size`: small
    files on remote stores) is read in one request when opened, and every later read is served
    from that buffer; so is a file no longer than the tail read when opening it
    (:data:`~lance_ops.file.format.TAIL_READ_SIZE`, on any store), which that read got whole.
    """

    def _open(self, tail_bytes: tuple[int, memoryview]) -> None:
        store, store_path = self._store, self.path
        file_size, tail = tail_bytes
        if len(tail) == file_size:
            # The tail read holds the whole file (a small file: at most TAIL_READ_SIZE bytes, or
            # one the store reads whole): every later read is served from it, with no request.
            self._ranges = BufferedRanges(store, store_path, tail)
        else:
            # One handle for all of this reader's ranged reads (a local file stays open between them).
            self._ranges = store.open_ranges(store_path)
        self._tail: FileTail = read_tail(store, store_path, tail_bytes)
        self.version = self._tail.version
        self._codec = codec_for(self.version)
        self.schema = _file_schema(self._tail.descriptor.schema)
        self._column_ranges = self._assign_columns()
        self._pages = [self._page_infos(i) for i in range(len(self._tail.columns))]

    @property
    def num_rows(self) -> RowCount:
        return RowCount(self._tail.descriptor.length)

    def _assign_columns(self) -> list[range]:
        self._storage_fields, ranges = _schema_shape(self.schema, self.version)
        start = ranges[-1].stop if ranges else 0
        if start != len(self._tail.columns):
            raise CorruptFileError(
                self.path, f"schema needs {start} columns but the file has {len(self._tail.columns)}"
            )
        return ranges

    def _page_infos(self, column_index: int) -> list[PageInfo]:
        column = self._tail.columns[column_index]
        check_column_encoding(column, self.path, column_index, self._codec.column_encodings)
        limit = self._tail.footer.column_meta_start
        infos, first_row = [], 0
        for page_index, page in enumerate(column.pages):
            where = f"column {column_index} page {page_index}"
            if len(page.buffer_offsets) != len(page.buffer_sizes):
                raise CorruptFileError(self.path, f"{where}: buffer offsets and sizes differ in length")
            buffers = tuple(zip(page.buffer_offsets, page.buffer_sizes, strict=True))
            if any(position + size > limit for position, size in buffers):
                raise CorruptFileError(self.path, f"{where}: a buffer lies outside the data region")
            layout = page_layout(page, self.path, where, self._codec.layout_type)
            infos.append(PageInfo(layout, buffers, int(page.length), first_row))
            first_row += int(page.length)
        if self._codec.every_column_holds_rows and first_row != self.num_rows:
            raise CorruptFileError(
                self.path, f"column {column_index} pages hold {first_row} rows, the file has {self.num_rows}"
            )
        return infos

    def _check_rows(self, column_index: int) -> None:
        """A top-level field's first column holds one value per row in every version."""
        pages = self._pages[column_index]
        held = pages[-1].first_row + pages[-1].num_rows if pages else 0
        if held != self.num_rows:
            raise CorruptFileError(
                self.path, f"column {column_index} pages hold {held} rows, the file has {self.num_rows}"
            )

    def _decoder(self, field_index: int) -> FieldDecoder:
        decoder = self._decoders.get(field_index)
        if decoder is None:
            field = self._storage_fields[field_index]
            pages = [self._pages[i] for i in self._column_ranges[field_index]]
            self._check_rows(self._column_ranges[field_index].start)
            decoder = self._codec.make_field_decoder(field, pages)
            self._decoders[field_index] = decoder
        return decoder

    def _field_bytes(self, index: int) -> int:
        return self._field_sizes[index]

    def _fetch_for(self, rows: range | np.ndarray, indices: Sequence[int]) -> Fetch:
        """On a remote store, a read of a row range fetches the pages it covers mostly (at least
        half their rows) in one request batch before decoding (concurrent on async drivers, and
        coalesced: the columns of a small file come in one request), and serves the decoders'
        reads from them; what else they ask for is fetched as they ask. Rows given one by one
        count as their range when they are at least half of it (the live rows of a fragment with
        deletions). Local disks and files held whole read as before, and so do sparse takes:
        they need a few chunks of each page."""
        if isinstance(self._ranges, BufferedRanges) or not self._store.whole_file_read_size:
            return self._fetch
        if not len(rows):
            return self._fetch
        start, stop = int(rows[0]), int(rows[-1]) + 1
        if 2 * len(rows) < stop - start:
            return self._fetch
        spans = [
            buffer
            for index in indices
            for column in self._column_ranges[index]
            for page in self._pages[column]
            if 2 * (min(stop, page.first_row + page.num_rows) - max(start, page.first_row)) >= page.num_rows
            for buffer in page.buffers
            if buffer[1] > 0
        ]
        if len(spans) < 2:
            return self._fetch
        return FetchedAhead(self._fetch, spans, self._fetch(spans))

    @property
    def take_spans_apply(self) -> bool:
        """Whether a take fetches pages of this file ahead: not of a file held whole, nor of a 2.0
        file (whose nested columns' pages count items, not rows)."""
        return not isinstance(self._ranges, BufferedRanges) and self._codec.every_column_holds_rows

    def take_spans(
        self, indices: Sequence[int], rows: np.ndarray, limit: int
    ) -> tuple[list[tuple[int, int]], list[int]]:
        """The buffers of the pages of fields ``indices`` holding some of the sorted ``rows``,
        those of pages of at most ``limit`` bytes: what a take of ``rows`` may read, for a caller
        fetching it ahead (:meth:`serving`); and the fields having larger pages among them. None
        of a file held whole, nor of a 2.0 file (whose nested columns' pages count items, not
        rows)."""
        if not self.take_spans_apply:
            return [], []
        spans: list[tuple[int, int]] = []
        large: list[int] = []
        for index in indices:
            for column in self._column_ranges[index]:
                pages = self._pages[column]
                touched = np.unique(np.searchsorted(self._page_ends[column], rows, side="right"))
                for page in (pages[i] for i in touched.tolist() if i < len(pages)):
                    if sum(size for _, size in page.buffers) <= limit:
                        spans.extend(buffer for buffer in page.buffers if buffer[1] > 0)
                    elif not large or large[-1] != index:
                        large.append(index)
        return spans, large

    @cached_property
    def _page_ends(self) -> list[np.ndarray]:
        """Per column, the row after each of its pages."""
        return [np.array([p.first_row + p.num_rows for p in pages], np.int64) for pages in self._pages]

    @contextmanager
    def serving(self, spans: Sequence[tuple[int, int]], buffers: Sequence[memoryview]) -> Iterator[None]:
        """While the block runs, reads within ``spans`` (byte ranges of this file fetched ahead,
        whose bytes are ``buffers``) are served from them; other reads go to the store."""
        base = self._ranges
        while isinstance(base, _AheadRanges):  # another thread's take, reading this file too
            base = base.inner
        ahead = _AheadRanges(base, FetchedAhead(base.read_ranges, spans, buffers))
        self._ranges = ahead
        try:
            yield
        finally:
            # Another take that began meanwhile may have put its own in place: whichever ends
            # first puts the file's reads back (the other then reads from the store).
            if self._ranges is ahead:
                self._ranges = base

    @cached_property
    def _field_sizes(self) -> list[int]:
        return [
            sum(size for i in columns for page in self._pages[i] for _, size in page.buffers)
            for columns in self._column_ranges
        ]

    def read_global_buffer(self, index: int) -> bytes:
        """The bytes of global buffer ``index`` (0 is the serialized FileDescriptor)."""
        if not 0 <= index < len(self._tail.global_buffers):
            raise IndexError(f"{self.path}: no global buffer {index}")
        position, size = self._tail.global_buffers[index]
        return bytes(self._fetch([(position, size)])[0])

    @cached_property
    def _statistics_location(self) -> StatisticsLocation | None:
        text = (self.schema.metadata or {}).get(PAGE_STATISTICS_KEY.encode())
        return None if text is None else StatisticsLocation.from_json(self.path, text)

    def column_statistics(self) -> PageStatistics | None:
        """The page statistics the file carries, by top-level column (None when it has none).

        Reads one global buffer (:mod:`lance_ops.file.page_statistics`); the sketches are not read.
        """
        location = self._statistics_location
        if location is None:
            return None
        table = _lance_file_table(self.read_global_buffer(location.statistics_buffer))
        fields = self._tail.descriptor.schema.fields
        # Blob v2 description children carry id -1 in the file schema: not top-level columns.
        ids = {f.id: f.name for f in fields if f.parent_id == -1 and f.id >= 0}
        page_rows = {
            field.name: np.array([p.num_rows for p in self._pages[columns.start]], dtype=np.int64)
            for field, columns in zip(self.schema, self._column_ranges, strict=True)
            if len(columns)
        }
        columns = column_statistics(self.path, table, ids, page_rows, location.nan_counts)
        return PageStatistics(columns, location.float_max_covers_nan)

    def column_sketches(self) -> dict[str, DistinctSketch]:
        """The distinct-value sketch of each top-level column that has page statistics."""
        location = self._statistics_location
        if location is None:
            return {}
        blob = self.read_global_buffer(location.sketches_buffer)
        names = {f.id: f.name for f in self._tail.descriptor.schema.fields if f.parent_id == -1}
        return {
            names[i]: DistinctSketch.from_bytes(blob[start : start + size])
            for i, (start, size) in location.sketch_ranges.items()
            if i in names
        }

    def metadata(self) -> LanceFileMetadata:
        """Version, row count, schema, byte accounting and per-column pages."""
        return self._metadata

    @cached_property
    def _metadata(self) -> LanceFileMetadata:
        tail = self._tail
        global_bytes = sum(size for _, size in tail.global_buffers)
        return LanceFileMetadata(
            major_version=tail.footer.major,
            minor_version=tail.footer.minor,
            num_rows=self.num_rows,
            schema=self.schema,
            num_data_bytes=tail.footer.column_meta_start - global_bytes,
            num_column_metadata_bytes=tail.footer.gbo_table_start - tail.footer.column_meta_start,
            num_global_buffer_bytes=global_bytes,
            global_buffers=[BufferMetadata(p, s) for p, s in tail.global_buffers],
            columns=[
                self._column_metadata(column, pages)
                for column, pages in zip(tail.columns, self._pages, strict=True)
            ],
        )

    @staticmethod
    def _column_metadata(column: pb2.ColumnMetadata, infos: list[PageInfo]) -> ColumnMetadata:
        pages = [
            PageMetadata(
                buffers=[BufferMetadata(p, s) for p, s in info.buffers],
                encoding=text_format.MessageToString(info.layout, as_one_line=True),
                length=info.num_rows,
                priority=int(page.priority),
            )
            for page, info in zip(column.pages, infos, strict=True)
        ]
        buffers = [
            BufferMetadata(p, s) for p, s in zip(column.buffer_offsets, column.buffer_sizes, strict=True)
        ]
        return ColumnMetadata(column_buffers=buffers, pages=pages)

    def file_statistics(self) -> FileStatistics:
        """Number of pages and bytes of page data per column."""
        return FileStatistics(
            columns=[
                ColumnStatistics(len(column.pages), sum(sum(page.buffer_sizes) for page in column.pages))
                for column in self._tail.columns
            ]
        )


class FetchedAhead:
    """A :data:`~lance_ops.encoding.api.Fetch` answering from byte ranges fetched before (``spans``,
    whose bytes are ``buffers``) the requests they hold, and passing the others to ``fetch``."""

    def __init__(self, fetch: Fetch, spans: Sequence[tuple[int, int]], buffers: Sequence[memoryview]) -> None:
        order = sorted((i for i in range(len(spans)) if spans[i][1] > 0), key=lambda i: spans[i][0])
        self._fetch = fetch
        self._starts = np.array([spans[i][0] for i in order], np.int64)
        self._ends = np.array([spans[i][0] + spans[i][1] for i in order], np.int64)
        self._buffers = [buffers[i] for i in order]

    def __call__(self, ranges: Sequence[tuple[int, int]]) -> list[memoryview]:
        out: list[memoryview | None] = [None] * len(ranges)
        missing = []
        for i, (start, length) in enumerate(ranges):
            if not length:
                out[i] = memoryview(b"")
                continue
            at = int(np.searchsorted(self._starts, start, side="right")) - 1
            if at >= 0 and start + length <= self._ends[at]:
                offset = start - int(self._starts[at])
                out[i] = self._buffers[at][offset : offset + length]
            else:
                missing.append(i)
        if missing:
            for i, data in zip(missing, self._fetch([ranges[i] for i in missing]), strict=True):
                out[i] = data
        return out  # type: ignore[return-value]


class _AheadRanges(RangeReader):
    """The ranged reads of a file through a :class:`FetchedAhead` (see :meth:`V2FileReader.serving`)."""

    def __init__(self, inner: RangeReader, ahead: FetchedAhead) -> None:
        super().__init__(inner.store, inner.path)
        self.inner = inner
        self._ahead = ahead

    def read_ranges(self, ranges: Sequence[tuple[int, int]] | np.ndarray) -> list[memoryview]:
        pairs = ranges.tolist() if isinstance(ranges, np.ndarray) else ranges
        return self._ahead(pairs)

    def __reduce__(self) -> tuple[type[RangeReader], tuple[ObjectStore, str]]:
        return (RangeReader, (self.store, self.path))


def open_file(
    path: str | os.PathLike[str],
    *,
    storage_options: Mapping[str, str] | None = None,
    columns: Sequence[str] | None = None,
    store: ObjectStore | None = None,
    size: int | None = None,
    contents: memoryview | None = None,
    tail: memoryview | None = None,
) -> FileReader:
    """Open the Lance file at ``path`` with the reader of its version: the one place the version
    picks a reader. The tail is read once, here: its last eight bytes give the version (v1 and
    v2 footers both end ``u16 major | u16 minor | b"LANC"``), and the reader parses it.
    ``contents``: the whole file, when the caller has read it already (a scan fetches small files
    together); nothing more is read from the store. ``tail``: the file's last bytes (those
    :func:`~lance_ops.file.format.read_tail_bytes` would read), when the caller has read them
    already (a take reads the tails of the files it opens together); ``size`` is then needed."""
    # Imported here: lance_ops.file.legacy_v0_1 subclasses LanceFileReader.
    from lance_ops.file.legacy_v0_1 import LegacyFileReader

    store, store_path = open_path(path, storage_options, store)
    if contents is not None:
        tail_bytes = (len(contents), contents)
    elif tail is not None:
        if size is None:
            raise ValueError("open_file: a tail read ahead needs the file's size")
        tail_bytes = (size, tail)
    else:
        tail_bytes = read_tail_bytes(store, store_path, size)
    legacy = footer_version(store_path, tail_bytes[1]) is FileVersion.V0_1
    reader_type: type[LanceFileReader] = LegacyFileReader if legacy else V2FileReader
    return reader_type(store_path, store=store, columns=columns, tail_bytes=tail_bytes)


def file_null_counts(store: ObjectStore, path: str) -> dict[int, int] | None:
    """Nulls per top-level field id of the Lance file at ``path`` (the file's own field ids), from
    its page statistics; None when the file has none. Reads the file's tail and its statistics
    buffer, never its columns; fields without statistics (structs, lists) are left out."""
    tail = read_tail(store, path)
    text = tail.descriptor.schema.metadata.get(PAGE_STATISTICS_KEY)
    if text is None:
        return None
    location = StatisticsLocation.from_json(path, text)
    if not 0 <= location.statistics_buffer < len(tail.global_buffers):
        raise CorruptFileError(path, f"no global buffer {location.statistics_buffer} for the page statistics")
    position, size = tail.global_buffers[location.statistics_buffer]
    table = _lance_file_table(bytes(store.read_range(path, position, size)))
    top = {f.id for f in tail.descriptor.schema.fields if f.parent_id == -1}
    out = {}
    for name in table.column_names:
        column = table.column(name).combine_chunks()
        if not name.isdigit() or int(name) not in top or not pa.types.is_struct(column.type):
            continue
        if column.type.get_field_index("null_count") < 0:
            continue
        out[int(name)] = int(pc.sum(column.field("null_count")).as_py() or 0)
    return out


def _lance_file_table(data: bytes) -> pa.Table:
    """The rows of the Lance file whose bytes are ``data`` (read through the in-memory store)."""
    store, path = MemoryStore(), f"lance-ops-embedded/{uuid.uuid4()}.lance"
    store.put_if_absent(path, data)
    try:
        return open_file(path, store=store).read_all().to_table()
    finally:
        store.delete(path)
