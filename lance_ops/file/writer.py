"""``LanceFileWriter``: stream Arrow data into one Lance v2 file (2.0, 2.1, 2.2).

Rows are buffered per top-level field. When a field's buffered Arrow data exceeds
``data_cache_bytes`` (8 MiB by default) the field is flushed: its rows are cut into
``ceil(size / 32 MiB)`` slices of equal row counts (``max_page_bytes``, default 32 MiB, applies
to 2.0 files only, as in pylance), each slice is handed to the codec's :class:`FieldEncoder`, and
the resulting page buffers are written immediately, 64-byte aligned, into the data region (blob values are
written the same way, one buffer each, just before the page that addresses them). (The 2.0
codec cuts pages itself, column by column, and only for a flush of a single array, as pylance
does.) Pages of different fields therefore interleave in the file while each column's ``pages``
stay in row order. A page's ``priority`` is the row number of its first top-level row
(always 0 in 2.0). ``close()`` flushes what is left, asks each encoder for the pages it
keeps until the end (2.0 struct headers) and writes the FileDescriptor, column metadata,
offset tables and footer
(see :mod:`lance_ops.file.format`). Data buffers go straight to the output stream, so at
most ``data_cache_bytes`` per field are held in memory.

Unless ``page_statistics=False``, the statistics of every page of each top-level field that has
them (null count, min, max; :mod:`lance_ops.encoding.statistics`) and a distinct sketch per field
are collected as pages are cut, and ``close()`` stores them as two global buffers located by the
schema metadata key ``lance-ops:page-statistics`` (:mod:`lance_ops.file.page_statistics`).

Every public method takes one writer-wide lock, so ``write_batch`` may be called from
several threads at once: calls are serialised and each batch lands whole, its columns
aligned, as with pylance's writer.
"""

from __future__ import annotations

import math
import os
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from typing import Any, NamedTuple, cast

import pyarrow as pa

from lance_ops._proto import file2_pb2 as pb2
from lance_ops._proto import file_pb2 as pb
from lance_ops.encoding.api import EncodedPage, FieldEncoder, FileVersion
from lance_ops.encoding.compression import dictionary
from lance_ops.encoding.compression.dictionary import holds_dictionary
from lance_ops.encoding.options import check_writer_compression
from lance_ops.errors import SchemaError, UnsupportedFeatureError
from lance_ops.file.codecs import Codec, codec_for
from lance_ops.file.format import RegionWriter, direct_encoding
from lance_ops.file.page_statistics import PAGE_STATISTICS_KEY, PageStatisticsCollector, StatisticsLocation
from lance_ops.file.parallel import run_tasks
from lance_ops.file.schema import (
    adopt_fields,
    check_writable,
    schema_metadata_to_pb,
    schema_to_fields,
    storage_field,
    to_storage,
)
from lance_ops.io import MemoryStore, ObjectStore, OutputStream
from lance_ops.io.base import CloseOrAbort
from lance_ops.io.context import open_path

_Encoded = list[tuple[int, list[list[EncodedPage]]]]  # (rows, pages per column) of each slice flushed


class _Taken(NamedTuple):
    """A field's buffered rows taken for a flush: joined, what its sketch is fed, the Arrow bytes
    they were buffered as, and whether they were one chunk."""

    array: pa.Array
    sketch_arrays: list[pa.Array]
    nbytes: int
    single: bool


# Fields flushed together are encoded on the shared worker threads (lance_ops.file.parallel) when
# they hold this much buffered data (a hand-off costs ~0.1 ms).
ENCODE_THREADS_MIN_BYTES = 1024 * 1024
DEFAULT_DATA_CACHE_BYTES = 8 * 1024 * 1024
DEFAULT_MAX_PAGE_BYTES = 32 * 1024 * 1024
WRITABLE_VERSIONS = (FileVersion.V2_0, FileVersion.V2_1, FileVersion.V2_2)
# The file format of the statistics stored inside a data file (a whole Lance file in a global buffer).
STATISTICS_FILE_VERSION = FileVersion.V2_1


def as_table(data: pa.Table | pa.RecordBatch | Any, schema: pa.Schema | None) -> pa.Table:
    """Normalise a Table, RecordBatch or pandas DataFrame to a Table."""
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if type(data).__module__.startswith("pandas"):
        return pa.Table.from_pandas(data, schema=schema, preserve_index=False)
    raise TypeError(f"expected a pyarrow Table, RecordBatch or pandas DataFrame, got {type(data).__name__}")


class _FieldState:
    """Buffered rows and written pages of one top-level field."""

    def __init__(self, field: pa.Field, codec: Codec, compression: str | None) -> None:
        stored = storage_field(field)
        self.field = field
        self.storage_type = stored.type
        self.encoder: FieldEncoder = (
            codec.make_field_encoder(stored)
            if compression is None
            else codec.make_field_encoder(stored, compression=compression)
        )
        self.columns = [
            pb2.ColumnMetadata(encoding=direct_encoding(self.encoder.column_encoding(i)))
            for i in range(self.encoder.num_columns)
        ]
        self.pending: list[pa.Array] = []
        self.pending_bytes = 0
        self.rows_written = 0


class FileWriterBase(CloseOrAbort):
    """What every file writer shares: its path, output stream and lock, discarding a partial file
    (:meth:`abort`), refusing use after close, and closing (or aborting) as a context manager."""

    path: str
    _out: OutputStream
    _lock: threading.RLock
    _closed: bool

    def abort(self) -> None:
        """Discard the partial file."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._out.abort()

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"{self.path}: the writer is closed")


class LanceFileWriter(FileWriterBase):
    """Write Arrow data to a Lance file.

    ``path`` is a local path or URI (opened with ``storage_options``), or, with ``store`` (a
    dataset's storage context passed down), a path within that store.
    ``schema`` may be omitted; the first batch then defines it. ``version`` is ``"2.0"``,
    ``"2.1"``, ``"2.2"`` or ``"stable"`` (2.2). ``page_statistics=False`` writes no page
    statistics (see the module docstring). ``lance_fields``: the Lance field messages to store as
    the file schema (a dataset's, with its field ids and dictionary markers, as pylance stores in
    the data files of a dataset); they must describe the schema field by field. Without them
    fields are numbered from 0, as pylance's file writer does. ``compression`` (2.1 / 2.2) is the
    value compression of every leaf column whose field metadata sets no
    ``lance-encoding:compression``: ``"auto"`` tries the default encodings, zstd around them and
    byte-stream-split + zstd on a sample of each page and keeps the smallest (files smaller than
    the default's, readable by pylance 14; :func:`lance_ops.encoding.compression_strategy.auto_compress`), or
    one of ``"zstd"``, ``"lz4"``, ``"fsst"``, ``"none"`` as if set on every field; ``None``
    (default) writes what pylance writes. Any other value is an ``InvalidArgumentError``. Usable
    as a context manager (closes on success, discards the partial file on error). ``close()``
    returns the number of rows written.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        schema: pa.Schema | None = None,
        *,
        version: str | FileVersion | None = "stable",
        storage_options: Mapping[str, str] | None = None,
        max_page_bytes: int | None = None,
        data_cache_bytes: int | None = None,
        page_statistics: bool = True,
        lance_fields: Sequence[pb.Field] | None = None,
        compression: str | None = None,
        store: ObjectStore | None = None,
    ) -> None:
        self.version = FileVersion.parse(version)
        self._given_fields = list(lance_fields) if lance_fields is not None else None
        self._lance_fields: list[pb.Field] = []
        self._write_statistics = page_statistics
        if self.version is FileVersion.V0_1:
            raise UnsupportedFeatureError(
                "LanceFileWriter writes 2.x files; legacy (0.1) files are written with "
                "lance_ops.file.legacy_v0_1.LegacyFileWriter (as pylance, which keeps a separate v1 writer)"
            )
        if self.version not in WRITABLE_VERSIONS:
            raise UnsupportedFeatureError(f"writing {self.version} files is not supported; use 2.0 - 2.2")
        self._codec = codec_for(self.version)
        self._compression = check_writer_compression(compression)
        if self._compression is not None and not self._codec.chooses_compression:
            raise UnsupportedFeatureError(f"compression= needs Lance 2.1 or 2.2 files, not {self.version}")
        self.max_page_bytes = max_page_bytes or DEFAULT_MAX_PAGE_BYTES
        self.data_cache_bytes = data_cache_bytes or DEFAULT_DATA_CACHE_BYTES
        if self.max_page_bytes <= 0 or self.data_cache_bytes <= 0:
            raise ValueError("max_page_bytes and data_cache_bytes must be positive")
        self._lock = threading.RLock()
        self._schema: pa.Schema | None = None
        self._fields: list[_FieldState] = []
        self._statistics: PageStatisticsCollector | None = None
        if schema is not None:
            self._set_schema(schema)  # before opening the output: a bad schema leaves no file
        store, self.path = open_path(path, storage_options, store)
        self._out = store.open_output(self.path)
        self._region = RegionWriter(self._out)
        self._extra_metadata: dict[str, bytes] = {}
        self._global_buffers: list[tuple[int, int]] = []
        self._num_rows = 0
        self._bytes_written = 0
        self._closed = False

    @property
    def schema(self) -> pa.Schema | None:
        return self._schema

    @property
    def bytes_written(self) -> int:
        """Bytes written to the output so far; after ``close()`` the size of the whole file."""
        return self._bytes_written if self._closed else self._region.position

    def _set_schema(self, schema: pa.Schema) -> None:
        fields = schema_to_fields(schema)  # raises SchemaError for types Lance cannot store
        if self._given_fields is not None:
            fields = adopt_fields(schema, self._given_fields)
        check_writable(schema, self.version)
        self._fields = [_FieldState(field, self._codec, self._compression) for field in schema]
        self._schema = schema
        self._lance_fields = fields
        if self._write_statistics:
            self._statistics = PageStatisticsCollector(schema, fields)

    def write_batch(self, data: pa.Table | pa.RecordBatch | Any) -> None:
        """Append rows (a Table, RecordBatch or pandas DataFrame) matching the file schema."""
        with self._lock:
            self._write_table(as_table(data, self._schema))

    def _write_table(self, table: pa.Table) -> None:
        self._check_open()
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
        full = []
        for state, column in zip(self._fields, table.columns, strict=True):
            for chunk in column.chunks:
                if len(chunk):
                    state.pending.append(chunk)
                    state.pending_bytes += chunk.nbytes
            # ">=": pylance counts allocated (padded) buffer sizes, so it flushes a column
            # holding exactly data_cache_bytes of Arrow data too.
            if state.pending_bytes >= self.data_cache_bytes:
                full.append(state)
        for state, encoded in self._encode_all(full):
            self._store_encoded(state, encoded)
        self._num_rows += table.num_rows

    def _encode_all(self, states: list[_FieldState]) -> Iterator[tuple[_FieldState, _Encoded]]:
        """The buffered rows of ``states`` encoded, yielded in field order.

        Each field's buffered chunks are first joined into one array (:meth:`_take_pending`), and
        the chunks released, so a flushed field's rows are held once, not twice, while it is
        encoded and sketched. Several fields holding :data:`ENCODE_THREADS_MIN_BYTES` together
        are encoded on the shared worker threads (numpy, zstd and the numba kernels release the
        GIL) unless an encoder writes external buffers (blobs), whose positions follow call order;
        pages are still written in field order, so the bytes of the file do not depend on the threads.
        """
        sizes = [s.pending_bytes for s in states]
        taken = [self._take_pending(s) for s in states]
        sketches = self._sketch_tasks(states, taken)
        external = any(s.encoder.writes_external for s in states)
        big = sum(sizes) >= ENCODE_THREADS_MIN_BYTES
        if len(states) + len(sketches) < 2 or not big or external or self._codec.cuts_pages:
            for task, _ in sketches:
                task()
            for state, rows in zip(states, taken, strict=True):
                yield state, self._encode_taken(state, rows)
            return
        # The distinct sketches are tasks of their own, run beside the fields' encoding.
        tasks: list[Callable[[], _Encoded | None]] = [
            partial(self._encode_taken, s, rows) for s, rows in zip(states, taken, strict=True)
        ]
        tasks += [task for task, _ in sketches]
        costs = [float(size) for size in sizes] + [cost for _, cost in sketches]
        results = run_tasks(tasks, costs=costs)
        yield from zip(states, cast(list[_Encoded], results[: len(states)]), strict=True)

    def _sketch_tasks(
        self, states: list[_FieldState], taken: list[_Taken | None]
    ) -> list[tuple[Callable[[], None], float]]:
        """One task per field with statistics adding its taken rows to the field's distinct
        sketch (:meth:`_encode_slice` takes the page statistics but leaves the sketch to these),
        with its cost for the task queue (hashing is cheaper than encoding per byte)."""
        statistics = self._statistics
        if statistics is None:
            return []
        return [
            (partial(statistics.update_sketch, index, rows.sketch_arrays), rows.nbytes / 4)
            for index, rows in ((self._fields.index(s), t) for s, t in zip(states, taken, strict=True))
            if rows is not None and statistics.wants(index)
        ]

    @staticmethod
    def _take_pending(state: _FieldState) -> _Taken | None:
        """The field's buffered rows, joined into one array, taken from it (None: none)."""
        if not state.pending:
            return None
        chunks, nbytes = state.pending, state.pending_bytes
        state.pending, state.pending_bytes = [], 0
        array = dictionary.concat(chunks)
        # dictionary-holding types reach the sketch chunk by chunk, as they always have
        return _Taken(array, chunks if holds_dictionary(array.type) else [array], nbytes, len(chunks) == 1)

    def _encode_taken(self, state: _FieldState, rows: _Taken | None) -> _Encoded:
        """Encode (and take statistics of) rows taken from the field: ``(rows, pages)`` per slice."""
        if rows is None:
            return []
        # Only 2.0 cuts pages by the writer's max_page_bytes, as pylance (2.1+ readers split large
        # pages themselves): 2.1+ pages are cut at the default size whatever was given.
        num_pages = max(1, math.ceil(rows.nbytes / DEFAULT_MAX_PAGE_BYTES))
        rows_per_page = math.ceil(len(rows.array) / num_pages)
        storage = to_storage(rows.array, state.field, state.storage_type)
        if self._codec.cuts_pages:
            # pylance 2.0 cuts only a flush of one array, and each column on its own.
            state.encoder.max_page_bytes = self.max_page_bytes if rows.single else None
            return [self._encode_slice(state, storage)]
        return [
            self._encode_slice(state, storage.slice(start, rows_per_page))
            for start in range(0, len(storage), rows_per_page)
        ]

    def _encode_slice(self, state: _FieldState, array: pa.Array) -> tuple[int, list[list[EncodedPage]]]:
        encoded = state.encoder.encode(array, self.write_external)
        index = self._fields.index(state)
        if self._statistics is not None and self._statistics.wants(index):
            self._statistics.add(index, array, [page.num_rows for page in encoded[0]], sketch=False)
        return len(array), encoded

    def _store_encoded(self, state: _FieldState, encoded: _Encoded) -> None:
        for rows, pages in encoded:
            self._store_pages(state, pages)
            state.rows_written += rows

    def _store_pages(self, state: _FieldState, encoded: list[list[EncodedPage]]) -> None:
        if len(encoded) != len(state.columns):
            raise RuntimeError(f"encoder returned {len(encoded)} columns, expected {len(state.columns)}")
        for column, pages in zip(state.columns, encoded, strict=True):
            first_row = state.rows_written
            for page in pages:
                located = [self._region.write_buffer(buffer) for buffer in page.buffers]
                column.pages.append(
                    pb2.ColumnMetadata.Page(
                        buffer_offsets=[position for position, _ in located],
                        buffer_sizes=[size for _, size in located],
                        length=page.num_rows,
                        encoding=direct_encoding(page.layout),
                        priority=first_row if self._codec.priority_is_first_row else 0,
                    )
                )
                first_row += page.num_rows

    def write_external(self, buffers: Sequence[memoryview]) -> list[int]:
        """Write blob bytes into the file, each its own aligned buffer; returns their positions.

        Used for blob pages (ahead of the page that addresses them) and inline ``lance.blob.v2``
        blobs (whose descriptions are ordinary column values).
        """
        with self._lock:
            self._check_open()
            return [self._region.write_buffer(buffer)[0] for buffer in buffers]

    def add_schema_metadata(self, key: str, value: str | bytes) -> None:
        """Add a key to the schema metadata stored in the file."""
        with self._lock:
            self._check_open()
            self._extra_metadata[key] = value.encode("utf-8") if isinstance(value, str) else bytes(value)

    def add_global_buffer(self, data: bytes | bytearray | memoryview) -> int:
        """Store ``data`` as a global buffer; returns its index (1, 2, ...; 0 is the schema)."""
        with self._lock:
            self._check_open()
            self._global_buffers.append(self._region.write_buffer(data))
            return len(self._global_buffers)

    def close(self) -> int:
        """Flush buffered rows, write the metadata and footer, publish the file; returns the row count."""
        with self._lock:
            return self._close()

    def _close(self) -> int:
        if self._closed:
            return self._num_rows
        if self._schema is None:
            self.abort()
            raise SchemaError(
                f"{self.path}: Schema is unknown and file cannot be created: no schema was given and "
                "no data was written"
            )
        for index, (state, encoded) in enumerate(self._encode_all(self._fields)):
            self._store_encoded(state, encoded)
            held = state.encoder.finish()
            if self._statistics is not None and held and held[0]:
                self._statistics.discard(index)  # pages not cut from arrays the statistics saw
            self._store_pages(state, held)
        schema_metadata = schema_metadata_to_pb(self._schema.metadata)
        schema_metadata.pop(PAGE_STATISTICS_KEY, None)  # copied from another file's schema: not ours
        if self._statistics is not None:
            self._store_statistics(self._statistics)
        schema_metadata.update(self._extra_metadata)
        descriptor = pb.FileDescriptor(
            schema=pb.Schema(fields=self._lance_fields, metadata=schema_metadata),
            length=self._num_rows,
        )
        columns = [column for state in self._fields for column in state.columns]
        self._region.write_tail(descriptor, columns, self._global_buffers, self.version)
        self._bytes_written = self._region.position
        self._out.close()
        self._closed = True
        return self._num_rows

    def _store_statistics(self, statistics: PageStatisticsCollector) -> None:
        """The collected statistics as a Lance file and the sketches, two global buffers and a key."""
        table = statistics.table()
        if table is None:
            return
        sketches, ranges = statistics.sketches()
        location = StatisticsLocation(
            self.add_global_buffer(_lance_file_bytes(table)),
            self.add_global_buffer(sketches),
            ranges,
            nan_counts=statistics.nan_counts(),
        )
        self._extra_metadata[PAGE_STATISTICS_KEY] = location.to_json().encode()


def _lance_file_bytes(table: pa.Table) -> bytes:
    """``table`` as the bytes of a Lance file (written through the in-memory store, then dropped)."""
    store, path = MemoryStore(), f"lance-ops-embedded/{uuid.uuid4()}.lance"
    with LanceFileWriter(
        path, table.schema, version=STATISTICS_FILE_VERSION, page_statistics=False, store=store
    ) as writer:
        writer.write_batch(table)
    try:
        return store.read(path)
    finally:
        store.delete(path)
