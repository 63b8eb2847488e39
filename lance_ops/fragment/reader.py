"""Reading one fragment of a dataset version: columns, deletions, row ids and addresses.

A fragment's rows are its data files' columns side by side minus the rows of its deletion vector.
Dataset columns map to data files by field id: ``DataFile.fields`` lists, in pre-order, the ids
owning the file's columns (all fields for 2.0 files, leaf fields for 2.1+), so walking the file's own
top-level fields and counting the ids each contributes tells which dataset field a file column
holds (renamed columns keep their id). Dataset columns that no file of a fragment holds read as
nulls; file columns whose ids left the schema are ignored. Only the data files holding a requested
column are opened.

:class:`VersionFiles` is the state shared by the fragments of one version (the manifest, open file
readers, the column map); :class:`FragmentReader` reads one fragment through it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property, partial

import numpy as np
import pyarrow as pa

from lance_ops.encoding.api import FileVersion
from lance_ops.errors import CorruptFileError, DatasetNotFoundError, SchemaError
from lance_ops.file import FileReader
from lance_ops.file import open_file as open_lance_file
from lance_ops.file.format import TAIL_READ_SIZE
from lance_ops.fragment.options import ScanOptions
from lance_ops.fragment.pruning import row_mask
from lance_ops.fragment.writer import data_file_fields
from lance_ops.io import ObjectStore
from lance_ops.io.context import Location, StorageContext
from lance_ops.query.predicate import Predicate
from lance_ops.table.blob import contains_blob_v2, resolve_blob_v2_columns
from lance_ops.table.deletion import deletion_path, read_deletion_vector
from lance_ops.table.manifest import (
    BasePath,
    DataFile,
    DataFragment,
    FragmentList,
    Manifest,
    fragment_id_array,
    fragment_row_counts,
)
from lance_ops.table.naming import DATA_DIR, DELETIONS_DIR, child_uri
from lance_ops.table.paths import check_base_scheme, referenced_file
from lance_ops.table.rowids import RowIdIndex, decode_row_ids, load_sequence
from lance_ops.table.schema import LanceField, LanceSchema
from lance_ops.table.statistics import ZONE_ROWS, FragmentStatistics, field_source, load_statistics

# Rows decoded per read call; batches are sliced from it. Decoding has a fixed cost per call
# (page lookup, chunk planning), so reading a whole batch_size at a time made scans several times slower.
READ_AHEAD_ROWS = 1 << 17
#: A scan of narrow fixed-width columns reads more rows at a time, up to this many decoded bytes
#: (and :data:`SCAN_READ_MAX_ROWS` rows) a read: the fixed cost per read call is most of a scan
#: of one int64 column read 131,072 rows at a time. Any other column counts
#: :data:`VARIABLE_ROW_BYTES` a row, which keeps reads with one at :data:`READ_AHEAD_ROWS` rows.
SCAN_READ_BYTES = 16 << 20
SCAN_READ_MAX_ROWS = 1 << 20
VARIABLE_ROW_BYTES = SCAN_READ_BYTES // READ_AHEAD_ROWS

#: Where :attr:`FragmentReader.deleted` (a cached property) keeps its value once read.
_DELETED = "deleted"
_READER_CACHE_SIZE = 512  # open file readers kept per version (footer, column metadata, page tables)
#: Bytes of remote data files a scan reading every column of them fetches whole ahead and holds
#: while it reads their fragments (:meth:`VersionFiles.held_whole`).
HOLD_WHOLE_BYTES = 64 * 1024 * 1024
#: Fragments whose files :meth:`VersionFiles.held_whole` has in flight at once, ahead of the one
#: being read, within its byte budget.
FETCH_AHEAD_FRAGMENTS = 16
ROW_ID = "_rowid"
ROW_ADDRESS = "_rowaddr"


def scan_read_rows(types: Sequence[pa.DataType], row_numbers: int = 0) -> int:
    """Rows a scan reads at a time from columns of ``types`` (and ``row_numbers`` 64-bit row ids /
    addresses): :data:`READ_AHEAD_ROWS`, more for narrow fixed-width columns (see
    :data:`SCAN_READ_BYTES`)."""
    row_bytes = 8 * row_numbers + sum(_decoded_width(t) for t in types)
    return min(SCAN_READ_MAX_ROWS, max(READ_AHEAD_ROWS, SCAN_READ_BYTES // max(row_bytes, 1)))


def _decoded_width(dtype: pa.DataType) -> int:
    """Bytes a value of ``dtype`` takes decoded: its width when fixed (bits rounded up),
    :data:`VARIABLE_ROW_BYTES` for any other type (strings, lists, structs, dictionaries)."""
    if pa.types.is_dictionary(dtype):
        return VARIABLE_ROW_BYTES
    try:
        return -(-dtype.bit_width // 8)
    except ValueError:
        return VARIABLE_ROW_BYTES


def offsets_array(offsets: np.ndarray | range) -> np.ndarray:
    """``offsets`` as an int64 array (a range of rows, as :meth:`FragmentReader.live_rows` gives)."""
    if isinstance(offsets, range):
        return np.arange(offsets.start, offsets.stop, offsets.step, dtype=np.int64)
    return offsets


def row_addresses(fragment_id: int, offsets: np.ndarray) -> np.ndarray:
    """Row addresses: the fragment id in the high 32 bits, the physical offset in the low 32."""
    return (np.uint64(fragment_id) << np.uint64(32)) | offsets.astype(np.uint64)


def _opened(uri: str, store: ObjectStore, path: str, size: int, blob: memoryview) -> FileReader | None:
    """The reader of a data file fetched whole; None when it is not the size the manifest records
    (left to :meth:`VersionFiles.open_file`, which reports it)."""
    if not size or len(blob) != size:
        return None
    with referenced_file(uri, "data file"):
        return open_lance_file(path, store=store, size=size, contents=blob)


class VersionFiles:
    """Where the fragments of one dataset version are read from, and what they share.

    Holds the manifest, the dataset's Arrow schema, an LRU of open file readers (opening one reads
    its footer and metadata), the column map and one :class:`FragmentReader` per fragment.
    """

    def __init__(
        self, storage: Location, manifest: Manifest, storage_options: Mapping[str, str] | None = None
    ) -> None:
        # A URI (with its options) is opened here once: what an entry point hands over.
        self.storage = StorageContext.of(storage, storage_options)
        self.manifest = manifest
        for base in manifest.base_paths:
            check_base_scheme(base.path, self.uri, f"{self.uri} version {manifest.version}")
        self._bases: dict[int, StorageContext] = {}
        self._readers: OrderedDict[str, FileReader] = OrderedDict()
        self._held: dict[str, FileReader] = {}  # fetched whole for a scan, while it reads them
        self._fragments: dict[int, FragmentReader] = {}
        # Per data file: its URI (for messages), store and store path.
        self._file_uris: dict[DataFile, tuple[str, ObjectStore, str]] = {}
        self._file_columns: dict[DataFile, tuple[pa.Schema, dict[int, FileColumn]]] = {}
        # (fields, file version, id of the file schema) -> that schema and the mapping
        self._column_maps: dict[tuple[object, ...], tuple[pa.Schema, dict[int, FileColumn]]] = {}
        # (fragment id, with sketches) -> (the fragment's metadata, its statistics)
        self.fragment_statistics: dict[tuple[int, bool], tuple[DataFragment, FragmentStatistics | None]] = {}

    @property
    def uri(self) -> str:
        return self.storage.uri

    @property
    def storage_options(self) -> Mapping[str, str] | None:
        return self.storage.storage_options

    @property
    def store(self) -> ObjectStore:
        return self.storage.store

    @property
    def root(self) -> str:
        return self.storage.root

    @property
    def lance_schema(self) -> LanceSchema:
        return self.manifest.schema

    @cached_property
    def schema(self) -> pa.Schema:
        return self.manifest.schema.to_arrow()

    @cached_property
    def top_level_of(self) -> dict[int, int]:
        return self.manifest.schema.top_level_of()

    @cached_property
    def top_level_fields(self) -> list[LanceField]:
        return [f for f in self.manifest.schema.fields if f.parent_id == -1]

    @cached_property
    def leaves(self) -> list[set[int]]:
        """Per top-level field, the ids of its leaf fields (the ids a fragment must hold for it)."""
        schema = self.manifest.schema
        leaf_ids = set(schema.leaf_ids)
        return [{f.id for f in schema.subtree(top.id) if f.id in leaf_ids} for top in self.top_level_fields]

    @cached_property
    def side_statistics(self) -> dict[int, FragmentStatistics]:
        """Fragment id -> the usable statistics of this version's statistics files
        (:mod:`lance_ops.table.statistics`); data files' own statistics are not included."""
        return load_statistics(self.storage, self.manifest)

    def fragment(self, metadata: DataFragment) -> FragmentReader:
        reader = self._fragments.get(metadata.id)
        if reader is None or (reader.metadata is not metadata and reader.metadata != metadata):
            reader = self._fragments[metadata.id] = FragmentReader(self, metadata)
        return reader

    def fragments(self) -> list[FragmentReader]:
        return [self.fragment(f) for f in self.manifest.fragments]

    def fragment_at(self, index: int) -> FragmentReader:
        """The reader of the manifest's ``index``-th fragment (only that fragment is converted)."""
        return self.fragment(self.manifest.fragments[index])

    @cached_property
    def live_total(self) -> int:
        """Live rows of all fragments: ``live_counts.sum()``, summed from the manifest's flat counts
        when all are known (:meth:`FragmentList.known_live_total`) without building the array."""
        fragments = self.manifest.fragments
        if isinstance(fragments, FragmentList):
            total = fragments.known_live_total()
            if total is not None:
                return total
        return int(self.live_counts.sum())

    @cached_property
    def live_counts(self) -> np.ndarray:
        """Live rows of every fragment (manifest order), int64.

        From the manifest's counts; only fragments whose counts are unknown (0, written by old
        versions) are opened (see :meth:`FragmentReader.live_count`).
        """
        physical, deleted, has_deletion = fragment_row_counts(self.manifest.fragments)
        counts = physical - deleted
        for index in np.flatnonzero((physical == 0) | (has_deletion & (deleted == 0))).tolist():
            counts[index] = self.fragment_at(index).live_count
        return counts

    @cached_property
    def fragment_index(self) -> dict[int, int]:
        """Fragment id -> its position in the manifest (the first, should a damaged one repeat an id)."""
        index: dict[int, int] = {}
        for position, fid in enumerate(fragment_id_array(self.manifest.fragments).tolist()):
            index.setdefault(fid, position)
        return index

    @cached_property
    def row_id_index(self) -> RowIdIndex:
        """Stable row id -> row address of every live row (datasets with stable row ids)."""
        fragments = self.fragments()
        return RowIdIndex.build(
            [(f.id, f.row_ids(np.arange(f.physical_rows, dtype=np.int64)), f.deleted) for f in fragments]
        )

    def resolve_columns(self, columns: Sequence[str] | None) -> tuple[str, ...]:
        """``columns`` checked against the schema (all columns when None)."""
        if columns is None:
            return tuple(self.schema.names)
        if isinstance(columns, str):
            raise TypeError("columns must be a list of column names")
        missing = [c for c in columns if self.schema.get_field_index(c) < 0]
        if missing:
            raise SchemaError(f"no such column(s) {missing}; the dataset has {self.schema.names}")
        return tuple(columns)

    def output_schema(self, options: ScanOptions) -> pa.Schema:
        """The schema of what a scan with ``options`` returns."""
        fields = [self.schema.field(n) for n in options.columns]
        if options.with_row_id:
            fields.append(pa.field(ROW_ID, pa.uint64()))
        if options.with_row_address:
            fields.append(pa.field(ROW_ADDRESS, pa.uint64()))
        return pa.schema(fields, metadata=self.schema.metadata)

    def base_path(self, base_id: int, owner: str) -> BasePath:
        """The manifest's base path ``base_id`` (``owner`` names what refers to it, for the error)."""
        base = next((b for b in self.manifest.base_paths if b.id == base_id), None)
        if base is None:
            raise DatasetNotFoundError(f"{owner} names unknown base path {base_id}")
        return base

    def base_storage(self, base_id: int, owner: str) -> StorageContext:
        """The storage of base path ``base_id``, opened once per version with the dataset's options."""
        storage = self._bases.get(base_id)
        if storage is None:
            storage = self._bases[base_id] = self.storage.at(self.base_path(base_id, owner).path)
        return storage

    def _file_location(self, data_file: DataFile) -> tuple[str, ObjectStore, str]:
        """URI (for messages), store and store path of ``data_file``."""
        location = self._file_uris.get(data_file)
        if location is None:
            if data_file.base_id is None:
                storage, directory = self.storage, DATA_DIR
            else:
                owner = f"data file {data_file.path}"
                storage = self.base_storage(data_file.base_id, owner)
                directory = DATA_DIR if self.base_path(data_file.base_id, owner).is_dataset_root else ""
            location = (
                child_uri(storage.uri, directory, data_file.path),
                storage.store,
                storage.path(directory, data_file.path),
            )
            self._file_uris[data_file] = location
        return location

    def file_uri(self, data_file: DataFile) -> str:
        return self._file_location(data_file)[0]

    def file_store(self, data_file: DataFile) -> ObjectStore:
        """The store holding ``data_file`` (the dataset's, or its base path's)."""
        return self._file_location(data_file)[1]

    @cached_property
    def has_blob_v2(self) -> list[bool]:
        """Per top-level field: does it hold ``lance.blob.v2`` values (itself or in a struct)?"""
        return [contains_blob_v2(field) for field in self.schema]

    def deletion_location(self, base_id: int | None) -> tuple[ObjectStore, str]:
        """Store and root holding deletion files of base ``base_id`` (None: the dataset's)."""
        if base_id is None:
            return self.store, self.root
        storage = self.base_storage(base_id, "a deletion file")
        return storage.store, storage.root

    def open_file(self, data_file: DataFile) -> FileReader:
        """An open reader of ``data_file`` (cached)."""
        uri, store, path = self._file_location(data_file)
        held = self._held.get(uri)
        if held is not None:
            return held
        reader = self._readers.pop(uri, None)
        if reader is None:
            with referenced_file(uri, "data file"):
                reader = open_lance_file(path, store=store, size=data_file.file_size_bytes or None)
        self._keep_reader(uri, reader)
        return reader

    def _keep_reader(self, uri: str, reader: FileReader) -> None:
        self._readers[uri] = reader
        while len(self._readers) > _READER_CACHE_SIZE:
            self._readers.popitem(last=False)

    def prefetch(self, fragments: Sequence[FragmentReader], columns: Sequence[str]) -> None:
        """Open the readers of the data files of ``fragments`` holding ``columns``, fetching the
        files together where the store reads them whole (small files on remote stores:
        :meth:`~lance_ops.io.ObjectStore.read_files`, concurrent requests) rather than one request
        after another as each is opened; their deletion files too (:meth:`load_deletions`).
        Files already open, of unknown size or too large to read whole, and any this finds
        missing or of another size than recorded, are left to :meth:`open_file` (which reports
        the latter)."""
        if not self.store.whole_file_read_size and not self.manifest.base_paths:
            return  # nothing here is read whole (local disk, memory)
        self.load_deletions(fragments)
        wanted = {self.schema.get_field_index(c) for c in columns} - {-1}
        chosen: dict[int, list[DataFile]] = {}
        for fragment in fragments:
            for data_file in fragment.metadata.files:
                size = data_file.file_size_bytes
                if not size or not wanted & {self.top_level_of.get(i) for i in data_file.fields}:
                    continue
                uri, store, _ = self._file_location(data_file)
                if uri not in self._readers and size <= store.whole_file_read_size:
                    chosen.setdefault(id(store), []).append(data_file)
        # A single small file is read whole when opened anyway: only two or more gain from this.
        together = [data_file for files in chosen.values() if len(files) >= 2 for data_file in files]
        for data_file, reader in zip(together, self.fetch_whole(together), strict=True):
            if reader is not None:
                self._keep_reader(self._file_location(data_file)[0], reader)

    def open_together(self, fragments: Sequence[FragmentReader], columns: Sequence[str]) -> None:
        """:meth:`prefetch`, and the other data files of ``fragments`` holding ``columns`` (of
        recorded size, not open yet) opened with their tails (small files: all of them) read
        together: one :meth:`~lance_ops.io.ObjectStore.read_many` call per store (concurrent
        requests on remote stores), where opening them one by one reads one tail after another.
        For a take, which needs a few pages of each file: a scan reading every column fetches
        larger files whole instead (:meth:`held_whole`). A tail found missing or short is left to
        :meth:`open_file` (which reports it)."""
        if not self.store.whole_file_read_size and not self.manifest.base_paths:
            return
        self.prefetch(fragments, columns)
        wanted = {self.schema.get_field_index(c) for c in columns} - {-1}
        chosen: dict[int, tuple[ObjectStore, list[DataFile]]] = {}
        for fragment in fragments:
            for data_file in fragment.metadata.files:
                uri, store, _ = self._file_location(data_file)
                if (
                    store.whole_file_read_size
                    and data_file.file_size_bytes
                    and uri not in self._readers
                    and wanted & {self.top_level_of.get(i) for i in data_file.fields}
                ):
                    chosen.setdefault(id(store), (store, []))[1].append(data_file)
        for store, data_files in chosen.values():
            if len(data_files) < 2:
                continue  # opened when read, with the same one request
            located = [self._file_location(data_file) for data_file in data_files]
            sizes = [data_file.file_size_bytes for data_file in data_files]
            # A file the store reads whole when opening it is read whole here too (a lone one is
            # left by prefetch).
            starts = [
                0 if size <= store.whole_file_read_size else max(0, size - TAIL_READ_SIZE) for size in sizes
            ]
            requests = [
                (path, [(start, size - start)])
                for (_, _, path), start, size in zip(located, starts, sizes, strict=True)
            ]
            try:
                tails = store.read_many(requests)
            except FileNotFoundError:
                continue  # open_file names the missing one
            for (uri, _, path), start, size, (tail,) in zip(located, starts, sizes, tails, strict=True):
                if len(tail) == size - start:
                    whole = start == 0
                    with referenced_file(uri, "data file"):
                        reader = open_lance_file(
                            path,
                            store=store,
                            size=size,
                            contents=tail if whole else None,
                            tail=None if whole else tail,
                        )
                    self._keep_reader(uri, reader)

    def held_whole(
        self, fragments: Sequence[FragmentReader], columns: Sequence[str], budget: int = HOLD_WHOLE_BYTES
    ) -> Iterator[FragmentReader]:
        """``fragments`` in order. On a remote store, the data files of which a read of ``columns``
        reads every column (a full scan, a compaction) and that are too large to be read whole
        when opened are fetched whole ahead and held while their fragment is read: a file then
        costs one request, where its reads would go one after another. The files of up to
        :data:`FETCH_AHEAD_FRAGMENTS` fragments are in flight at once
        (:meth:`~lance_ops.io.ObjectStore.read_files_ahead`), up to ``budget`` bytes fetched and
        not yet read (always the next fragment's), so the requests of the fragments ahead overlap
        the reading of the one handed out. A fragment's files are released when the next is asked
        for (or the caller stops)."""
        if not self.store.whole_file_read_size:
            yield from fragments
            return
        wanted = {self.schema.get_field_index(c) for c in columns} - {-1}
        chosen = [
            [f for f in fragment.metadata.files if self._read_whole(f, wanted, budget)]
            for fragment in fragments
        ]
        sizes = [sum(f.file_size_bytes for f in files) for files in chosen]
        ahead: dict[int, list[Callable[[], FileReader | None]]] = {}
        submitted = in_flight = 0
        for i, fragment in enumerate(fragments):
            while submitted < len(fragments) and (
                submitted <= i
                or (len(ahead) < FETCH_AHEAD_FRAGMENTS and in_flight + sizes[submitted] <= budget)
            ):
                if chosen[submitted]:
                    ahead[submitted] = self._fetch_ahead(chosen[submitted])
                    in_flight += sizes[submitted]
                submitted += 1
            uris = []
            for data_file, opened in zip(chosen[i], ahead.pop(i, ()), strict=True):
                reader = opened()
                if reader is not None:
                    uri = self._file_location(data_file)[0]
                    self._held[uri] = reader
                    uris.append(uri)
            in_flight -= sizes[i]
            try:
                yield fragment
            finally:
                for uri in uris:
                    self._held.pop(uri, None)

    def _fetch_ahead(self, data_files: Sequence[DataFile]) -> list[Callable[[], FileReader | None]]:
        """Per one of ``data_files`` (of recorded sizes), a call returning its reader, the file
        fetched whole; every fetch started now. None for a file found missing or of another size
        than the manifest records, left to :meth:`open_file`, which reports it."""
        out: list[Callable[[], FileReader | None]] = []
        for data_file in data_files:
            uri, store, path = self._file_location(data_file)
            size = data_file.file_size_bytes
            (fetch,) = store.read_files_ahead([(path, size)])
            out.append(partial(self._opened_whole, uri, store, path, size, fetch))
        return out

    @staticmethod
    def _opened_whole(
        uri: str, store: ObjectStore, path: str, size: int, fetch: Callable[[], memoryview]
    ) -> FileReader | None:
        try:
            blob = fetch()
        except FileNotFoundError:
            return None
        return _opened(uri, store, path, size, blob)

    def _read_whole(self, data_file: DataFile, wanted: set[int], budget: int) -> bool:
        """Whether a scan of the ``wanted`` fields reads all of ``data_file`` (every field it holds)
        and it is worth fetching whole ahead: larger than its store reads whole when opening one
        (those are fetched by :meth:`prefetch`), at most ``budget`` bytes, not open yet."""
        uri, store, _ = self._file_location(data_file)
        size = data_file.file_size_bytes
        return (
            store.whole_file_read_size < size <= budget
            and uri not in self._readers
            and {self.top_level_of.get(i) for i in data_file.fields} <= wanted
        )

    def fetch_whole(self, data_files: Sequence[DataFile]) -> list[FileReader | None]:
        """Readers of ``data_files`` (of recorded sizes), each file fetched whole, those of one
        store in one :meth:`~lance_ops.io.ObjectStore.read_files` call (concurrent requests on
        remote stores). Not kept in the reader cache: a caller reading whole files once (a
        compaction) drops them when done. None for a file found missing or of another size than
        the manifest records, left to :meth:`open_file`, which reports it."""
        out: list[FileReader | None] = [None] * len(data_files)
        by_store: dict[int, tuple[ObjectStore, list[int]]] = {}
        for i, data_file in enumerate(data_files):
            store = self._file_location(data_file)[1]
            by_store.setdefault(id(store), (store, []))[1].append(i)
        for store, members in by_store.values():
            located = [self._file_location(data_files[i]) for i in members]
            sizes = [data_files[i].file_size_bytes for i in members]
            wanted = [(path, size) for (_, _, path), size in zip(located, sizes, strict=True)]
            try:
                contents = store.read_files(wanted)
            except FileNotFoundError:
                continue  # open_file names the missing one
            for i, (uri, _, path), size, blob in zip(members, located, sizes, contents, strict=True):
                out[i] = _opened(uri, store, path, size, blob)
        return out

    def load_deletions(self, fragments: Sequence[FragmentReader]) -> None:
        """Read the deletion files of ``fragments`` not read yet together, where the store reads
        small files concurrently (remote stores), rather than one request after another as each
        fragment's :attr:`FragmentReader.deleted` is first asked for. A file found missing is left
        to that (which reports it)."""
        pending: dict[int, tuple[ObjectStore, list[tuple[FragmentReader, str]]]] = {}
        for fragment in fragments:
            deletion = fragment.metadata.deletion_file
            if deletion is None or _DELETED in fragment.__dict__:
                continue
            store, root = self.deletion_location(deletion.base_id)
            if store.whole_file_read_size:
                path = deletion_path(store, root, fragment.id, deletion)
                pending.setdefault(id(store), (store, []))[1].append((fragment, path))
        for store, members in pending.values():
            if len(members) < 2:
                continue
            try:
                contents = store.read_files([(path, 0) for _, path in members])
            except FileNotFoundError:
                continue
            for (fragment, _), blob in zip(members, contents, strict=True):
                fragment.use_deletion_file(bytes(blob))

    def file_columns(self, data_file: DataFile, file_schema: pa.Schema) -> dict[int, FileColumn]:
        """Dataset top-level field index -> the file column holding it."""
        cached = self._file_columns.get(data_file)
        if cached is not None and cached[0] is file_schema:
            return cached[1]
        # Data files recording the same fields in files of one schema (readers share the schema
        # object of equal file schemas) map alike: mapped once for all of them.
        shape = (tuple(data_file.fields), data_file.file_version, id(file_schema))
        shared = self._column_maps.get(shape)
        if shared is not None and shared[0] is file_schema:
            columns = shared[1]
        else:
            columns = self._map_file_columns(data_file, file_schema)
            self._column_maps[shape] = (file_schema, columns)
        self._file_columns[data_file] = (file_schema, columns)
        return columns

    def _map_file_columns(self, data_file: DataFile, file_schema: pa.Schema) -> dict[int, FileColumn]:
        version = FileVersion.parse(data_file.file_version)
        out: dict[int, FileColumn] = {}
        position = 0
        for field in file_schema:
            fields = LanceSchema.from_arrow([field])
            blob = fields.fields[0].is_blob_v2_description
            recorded = (fields.fields[0].id,) if blob else data_file_fields(fields, version)
            ids = data_file.fields[position : position + len(recorded)]
            position += len(recorded)
            tops = {self.top_level_of[i] for i in ids if i in self.top_level_of}
            if len(tops) == 1:
                out[tops.pop()] = FileColumn(field.name, fields.fields, dict(zip(recorded, ids, strict=True)))
        return out


@dataclass(frozen=True)
class FileColumn:
    """A top-level column of a data file: its name, its fields as numbered in the file (pre-order
    from 0), and the dataset field id of each file field the data file records.
    """

    name: str
    nodes: tuple[LanceField, ...]
    ids: Mapping[int, int]

    def dataset_ids(self, node: int) -> set[int]:
        """Dataset ids recorded for file field ``node`` and its descendants."""
        below = {node}
        for f in self.nodes:
            if f.parent_id in below:
                below.add(f.id)
        return {self.ids[n] for n in below if n in self.ids}

    def children(self, node: int) -> list[int]:
        return [f.id for f in self.nodes if f.parent_id == node]


# A piece of a dataset field held by one data file: the file column, the file field, its values.
Part = tuple[FileColumn, int, pa.Array | pa.ChunkedArray]


def _combined(array: pa.Array | pa.ChunkedArray) -> pa.Array:
    return array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array


def conform(parts: Sequence[Part], schema: LanceSchema, target: LanceField, type_: pa.DataType) -> pa.Array:
    """The dataset field ``target`` (of Arrow type ``type_``) from the pieces data files hold of it.

    Struct children are matched by field id, not name: renamed struct fields keep their values,
    dropped ones are left out, and a child re-typed into a newer data file is taken from it (the
    struct's validity comes from the first file). Other type differences are cast.
    """
    column, node, array = parts[0]
    if len(parts) == 1 and array.type == type_:
        return array
    if not (pa.types.is_struct(type_) and pa.types.is_struct(array.type)):
        if array.type == type_:
            return array
        try:
            return array.cast(type_)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            # The manifest maps this file column to a field of an incompatible type: they disagree.
            raise CorruptFileError(
                "<data file>", f"holds {array.type} for field {target.name!r} of type {type_}: {exc}"
            ) from exc
    children = []
    for n, child in enumerate(f for f in schema.fields if f.parent_id == target.id):
        wanted = {f.id for f in schema.subtree(child.id)}
        matches = [
            (col, kid, values.field(k))
            for col, parent, values in parts
            for k, kid in enumerate(col.children(parent))
            if wanted & col.dataset_ids(kid)
        ]
        child_type = type_.field(n).type
        children.append(
            conform(matches, schema, child, child_type) if matches else pa.nulls(len(array), child_type)
        )
    mask = array.is_null() if array.null_count else None
    return pa.StructArray.from_arrays(children, fields=list(type_), mask=mask)


class FragmentReader:
    """Reads one fragment: its live rows, deletions, row ids / addresses, with an optional predicate.

    Offsets are physical row positions in the fragment (deleted rows included); "live" rows are
    those not in the deletion vector.
    """

    def __init__(self, files: VersionFiles, metadata: DataFragment) -> None:
        self.files = files
        self.metadata = metadata

    @property
    def id(self) -> int:
        return self.metadata.id

    @cached_property
    def physical_rows(self) -> int:
        if self.metadata.physical_rows or not self.metadata.files:
            return self.metadata.physical_rows
        return self.files.open_file(self.metadata.files[0]).num_rows

    @cached_property
    def deleted(self) -> np.ndarray:
        """Deleted row offsets, sorted unique uint32."""
        return self._read_deleted(None)

    def use_deletion_file(self, data: bytes) -> None:
        """Take ``data``, fetched by the caller, as the bytes of this fragment's deletion file
        (decoded and checked as :attr:`deleted` would, which then reads nothing)."""
        self.__dict__[_DELETED] = self._read_deleted(data)

    def _read_deleted(self, data: bytes | None) -> np.ndarray:
        deletion = self.metadata.deletion_file
        if deletion is None:
            return np.zeros(0, np.uint32)
        store, root = self.files.deletion_location(deletion.base_id)
        deleted = read_deletion_vector(store, root, self.id, deletion, data)
        if len(deleted) and self.metadata.physical_rows and int(deleted[-1]) >= self.metadata.physical_rows:
            raise CorruptFileError(
                store.join(root, DELETIONS_DIR, deletion.file_name(self.id)),
                f"deletes row {int(deleted[-1])} of a fragment of {self.metadata.physical_rows} rows",
            )
        return deleted

    def _counts_unknown(self) -> bool:
        """Counts are unknown (0 = "unknown" for physical rows or deleted rows)."""
        deletion = self.metadata.deletion_file
        return self.metadata.physical_rows == 0 or (deletion is not None and deletion.num_deleted_rows == 0)

    @property
    def live_count(self) -> int:
        if self._counts_unknown():
            return self.physical_rows - len(self.deleted)
        return self.metadata.num_rows

    def live_offsets(self) -> np.ndarray:
        """Physical offsets of the live rows, ascending."""
        physical = np.arange(self.physical_rows, dtype=np.int64)
        deleted = self.deleted
        return physical if not len(deleted) else physical[~np.isin(physical, deleted)]

    def live_rows(self) -> np.ndarray | range:
        """:meth:`live_offsets`, as a range when no row is deleted: a scan of every row builds no
        array of them (an int64 per row)."""
        return range(self.physical_rows) if not len(self.deleted) else self.live_offsets()

    @cached_property
    def _stable_row_ids(self) -> np.ndarray:
        sequence = self.metadata.row_ids
        if sequence is None:
            raise CorruptFileError(self.files.uri, f"fragment {self.id} has no row id sequence")
        ids = decode_row_ids(load_sequence(self.files.store, self.files.root, sequence))
        if len(ids) != self.physical_rows:
            raise CorruptFileError(
                self.files.uri, f"fragment {self.id}: {len(ids)} row ids for {self.physical_rows} rows"
            )
        return ids

    def row_ids(self, offsets: np.ndarray) -> np.ndarray:
        """Row ids of the rows at ``offsets`` (stable ids when enabled, else row addresses)."""
        if not self.files.manifest.uses_stable_row_ids:
            return row_addresses(self.id, offsets)
        return self._stable_row_ids[offsets]

    def read(
        self,
        columns: Sequence[str],
        offsets: np.ndarray | range,
        with_row_id: bool = False,
        with_row_address: bool = False,
    ) -> pa.Table:
        """Rows at physical ``offsets`` (ascending; deleted rows are read too), projected to ``columns``."""
        schema = self.files.schema
        wanted = {schema.get_field_index(c): c for c in columns}
        parts: dict[int, list[Part]] = {}
        done: set[int] = set()
        contiguous = len(offsets) > 0 and offsets[-1] - offsets[0] + 1 == len(offsets)
        for data_file in self.metadata.files:
            if len(done) == len(wanted):
                break
            reader = self.files.open_file(data_file)
            mapping = self.files.file_columns(data_file, reader.schema)
            needed = {i: mapping[i] for i in wanted if i in mapping and i not in done}
            if not needed:
                continue
            names = [column.name for column in needed.values()]
            if not len(offsets):
                table = reader.read_range(0, 0, names).to_table()
            elif contiguous:
                table = reader.read_range(int(offsets[0]), len(offsets), names).to_table()
            else:
                table = reader.take_rows(offsets, names).to_table()
            for index, column in needed.items():
                # Chunked as read (a long read is decoded in row ranges): combined only where a
                # field is rebuilt from pieces, so a plain column is never copied.
                array = table.column(column.name)
                blob = self.files.has_blob_v2[index]
                if blob:
                    uri = self.files.file_uri(data_file)
                    array = resolve_blob_v2_columns(
                        array.combine_chunks(), schema.field(index), uri, self.files.storage
                    )
                pieces = parts.setdefault(index, [])
                pieces.append((column, column.nodes[0].id, array))
                held = set().union(*(c.dataset_ids(node) for c, node, _ in pieces))
                if blob or self.files.leaves[index] <= held:
                    done.add(index)
        out_fields, out_arrays = [], []
        for index in wanted:
            field = schema.field(index)
            if index in parts and len(parts[index]) == 1 and parts[index][0][2].type == field.type:
                array = parts[index][0][2]
            elif index in parts:
                top = self.files.top_level_fields[index]
                pieces = [(c, n, _combined(a)) for c, n, a in parts[index]]
                try:
                    array = conform(pieces, self.files.lance_schema, top, field.type)
                except CorruptFileError as exc:
                    raise exc.located(f"{self.files.uri} fragment {self.id}") from exc
            else:
                array = pa.nulls(len(offsets), field.type)
            out_fields.append(field)
            out_arrays.append(array)
        if with_row_id:
            out_fields.append(pa.field(ROW_ID, pa.uint64()))
            out_arrays.append(pa.array(self.row_ids(offsets_array(offsets)), pa.uint64()))
        if with_row_address:
            out_fields.append(pa.field(ROW_ADDRESS, pa.uint64()))
            out_arrays.append(pa.array(row_addresses(self.id, offsets_array(offsets)), pa.uint64()))
        if not out_arrays:
            # No columns, but still one (empty) row per offset.
            rows = pa.RecordBatch.from_struct_array(pa.nulls(len(offsets), pa.struct([])))
            return pa.Table.from_batches([rows])
        return pa.Table.from_arrays(out_arrays, schema=pa.schema(out_fields, metadata=schema.metadata))

    def scan(self, options: ScanOptions, live: np.ndarray | range | None = None) -> Iterator[pa.Table]:
        """Tables of at most ``options.batch_size`` rows read from ``live`` offsets (default: all live rows).

        With a predicate, the columns it names are read too, the rows it does not select are
        dropped, and the result is projected back to the requested columns (plus row id / address).
        """
        size = options.batch_size
        for table in self.scan_reads(options, live):
            for first in range(0, max(table.num_rows, 1), size):
                # Explicit length: pyarrow does not clamp slices of zero-column tables.
                yield table.slice(first, min(size, table.num_rows - first))

    def scan_reads(self, options: ScanOptions, live: np.ndarray | range | None = None) -> Iterator[pa.Table]:
        """What :meth:`scan` returns, one table per read instead of per batch: the rows of up to
        ``max(options.batch_size, READ_AHEAD_ROWS)`` of the ``live`` offsets at a time (fewer
        when a predicate drops some). For callers cutting batches themselves (a dataset scan):
        they skip building a table per batch only to take it apart again."""
        if live is None:
            live = self.live_rows()
        names, predicate, size = options.columns, options.predicate, options.batch_size
        if predicate is not None and predicate.bounds:
            live = self._prune(predicate, offsets_array(live))
        read = list(names)
        with_row_id, with_row_address = options.with_row_id, options.with_row_address
        if predicate is not None:
            stored = self.files.schema.names
            read += [c for c in predicate.columns if c not in names and c in stored]
            with_row_id |= ROW_ID in predicate.columns and ROW_ID not in stored
            with_row_address |= ROW_ADDRESS in predicate.columns and ROW_ADDRESS not in stored
        keep = [
            *names,
            *([ROW_ID] if options.with_row_id else []),
            *([ROW_ADDRESS] if options.with_row_address else []),
        ]
        schema = self.files.schema
        types = [schema.field(i).type for i in map(schema.get_field_index, read) if i >= 0]
        step = max(size, scan_read_rows(types, with_row_id + with_row_address))
        for start in range(0, len(live), step):
            offsets = live[start : start + step]
            table = self.read(read, offsets, with_row_id, with_row_address)
            if predicate is not None:
                table = predicate.filter(table).select(keep)
            yield table

    def statistics(self, sketches: bool = False) -> FragmentStatistics | None:
        """The column statistics usable for this fragment (None when there are none).

        A field's page statistics in the data file it is read from (always fresh: they belong to
        that file) win over a statistics file's. ``sketches`` also loads the data files' sketches
        (a second read per file; pruning does not need them).
        """
        key = (self.id, sketches)
        cache = self.files.fragment_statistics
        if key not in cache or cache[key][0] != self.metadata:
            side = self.files.side_statistics.get(self.id)
            own = self._own_statistics(sketches)
            merged = own if side is None else side if own is None else side.merged_with(own)
            cache[key] = (self.metadata, merged)
        return cache[key][1]

    def _own_statistics(self, sketches: bool) -> FragmentStatistics | None:
        """The page statistics the fragment's data files carry, by dataset field id."""
        columns: dict[int, pa.StructArray] = {}
        page_rows: dict[int, np.ndarray] = {}
        sources: dict[int, str] = {}
        found_sketches = {}
        nan_aware = set()
        nan_counts = {}
        for data_file in self.metadata.files:
            reader = self.files.open_file(data_file)
            found = reader.column_statistics()
            if found is None:
                continue
            held = reader.column_sketches() if sketches else {}
            for index, column in self.files.file_columns(data_file, reader.schema).items():
                field = self.files.top_level_fields[index]
                stats = found.columns.get(column.name)
                if (
                    stats is None
                    or field.id in columns
                    or field_source(self.metadata, field.id) != data_file.path
                    or int(stats.page_rows.sum()) != self.physical_rows
                    or stats.statistics.type.field("min_value").type != self.files.schema.field(index).type
                ):
                    continue
                columns[field.id], page_rows[field.id] = stats.statistics, stats.page_rows
                sources[field.id] = data_file.path
                if column.name in held:
                    found_sketches[field.id] = held[column.name]
                if found.float_max_covers_nan:
                    nan_aware.add(field.id)
                if stats.nan_counts is not None:
                    nan_counts[field.id] = stats.nan_counts
        if not columns:
            return None
        return FragmentStatistics(
            self.id,
            self.physical_rows,
            ZONE_ROWS,
            columns,
            sources,
            found_sketches,
            page_rows,
            frozenset(nan_aware),
            nan_counts,
        )

    def _prune(self, predicate: Predicate, offsets: np.ndarray) -> np.ndarray:
        """``offsets`` minus those in zones the statistics show ``predicate`` cannot select."""
        stats = self.statistics()
        if stats is None:
            return offsets
        ids = {b.column: self.files.lance_schema.field(b.column).id for b in predicate.bounds}
        mask = row_mask(stats, predicate.bounds, ids, offsets)
        return offsets if mask is None else offsets[mask]

    def matching_offsets(self, predicate: Predicate) -> np.ndarray:
        """Physical offsets of the live rows ``predicate`` selects, ascending."""
        options = ScanOptions(predicate=predicate, with_row_address=True, batch_size=READ_AHEAD_ROWS)
        parts = [t.column(ROW_ADDRESS).to_numpy() for t in self.scan(options) if t.num_rows]
        if not parts:
            return np.zeros(0, np.int64)
        return (np.concatenate(parts) & np.uint64(0xFFFFFFFF)).astype(np.int64)

    def count(self, predicate: Predicate | None = None) -> int:
        if predicate is None:
            return self.live_count
        return sum(t.num_rows for t in self.scan(ScanOptions(predicate=predicate)))
