"""The dataset API: ``write_dataset``, ``dataset``, :class:`LanceDataset`, :class:`LanceOperation`.

Names and semantics follow pylance. A dataset version is a manifest (``lance_ops.table``); its
rows are the concatenation of its fragments in id order, each fragment being the data files'
columns side by side minus the rows of its deletion vector.

Reading a fragment maps dataset columns to data files by field id: ``DataFile.fields`` lists, in
pre-order, the ids owning the file's columns (all fields for 2.0 files, leaf fields for 2.1+), so
walking the file's own top-level fields and counting the ids each contributes tells which dataset
field a file column holds (renamed columns keep their id). Dataset columns that no file of a
fragment holds read as nulls; file columns whose ids left the schema are ignored.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from functools import cached_property
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_ops._proto import file_pb2
from lance_ops.encoding.api import FileVersion
from lance_ops.errors import (
    DatasetAlreadyExistsError,
    DatasetNotFoundError,
    RetryableCommitConflictError,
    SchemaError,
    UnsupportedFeatureError,
)
from lance_ops.file import LanceFileReader
from lance_ops.file.schema import (
    fields_to_schema,
    max_field_id,
    schema_metadata_to_pb,
    schema_to_fields,
    table_fields,
)
from lance_ops.fragment import FragmentMetadata, data_file_fields, write_fragments_with_schema
from lance_ops.io import ObjectStore, object_store
from lance_ops.table.commit import (
    LockCommitHandler,
    NewDatasetSettings,
    commit_transaction,
    list_versions,
    load_manifest,
    load_manifests,
    load_transaction,
)
from lance_ops.table.deletion import read_deletion_vector
from lance_ops.table.manifest import BasePath, DataFile, DataFragment, Manifest
from lance_ops.table.naming import DATA_DIR, DELETIONS_DIR, ManifestNamingScheme, child_uri
from lance_ops.table.predicate import Predicate, parse_predicate
from lance_ops.table.rowids import decode_row_ids
from lance_ops.table.transaction import (
    COMMIT_MESSAGE_KEY,
    Append,
    DataReplacement,
    Delete,
    Merge,
    Operation,
    Overwrite,
    Project,
    ReserveFragments,
    Restore,
    Rewrite,
    RewriteGroup,
    Transaction,
    UpdateConfig,
    UpdateMap,
)

__all__ = ["LanceDataset", "LanceFragment", "LanceOperation", "dataset", "write_dataset"]

DEFAULT_BATCH_SIZE = 8192
# Rows decoded per read call; batches are sliced from it. Decoding has a fixed cost per call
# (page lookup, chunk planning), so reading a whole batch_size at a time made scans several times slower.
READ_AHEAD_ROWS = 1 << 17
_READER_CACHE_SIZE = 64
ROW_ID = "_rowid"
ROW_ADDRESS = "_rowaddr"

SchemaLike: TypeAlias = pa.Schema | Sequence[file_pb2.Field]
Filter: TypeAlias = "str | pc.Expression | None"


def _fields_of(schema: SchemaLike) -> tuple[tuple[file_pb2.Field, ...], dict[str, bytes]]:
    if isinstance(schema, pa.Schema):
        return tuple(table_fields(schema)), schema_metadata_to_pb(schema.metadata)
    return tuple(schema), {}


class LanceOperation:
    """Factories for the operations :meth:`LanceDataset.commit` accepts (pylance's names).

    Schemas may be Arrow schemas (numbered 0, 1, 2, ... in pre-order) or Lance field lists
    (``LanceDataset.lance_schema``) when ids must be kept.
    """

    @staticmethod
    def Append(fragments: Iterable[FragmentMetadata]) -> Append:  # noqa: N802
        return Append(tuple(fragments))

    @staticmethod
    def Overwrite(
        new_schema: SchemaLike,
        fragments: Iterable[FragmentMetadata],  # noqa: N802
        config_upsert_values: Mapping[str, str] | None = None,
    ) -> Overwrite:
        fields, metadata = _fields_of(new_schema)
        return Overwrite(tuple(fragments), fields, metadata, dict(config_upsert_values or {}))

    @staticmethod
    def Delete(
        updated_fragments: Iterable[FragmentMetadata],
        deleted_fragment_ids: Iterable[int],  # noqa: N802
        predicate: str,
    ) -> Delete:
        return Delete(tuple(updated_fragments), tuple(deleted_fragment_ids), predicate)

    @staticmethod
    def Merge(fragments: Iterable[FragmentMetadata], schema: SchemaLike) -> Merge:  # noqa: N802
        fields, metadata = _fields_of(schema)
        return Merge(tuple(fragments), fields, metadata)

    @staticmethod
    def Rewrite(
        groups: Iterable[tuple[Iterable[FragmentMetadata], Iterable[FragmentMetadata]]],  # noqa: N802
    ) -> Rewrite:
        return Rewrite(tuple(RewriteGroup(tuple(old), tuple(new)) for old, new in groups))

    @staticmethod
    def Restore(version: int) -> Restore:  # noqa: N802
        return Restore(version)

    @staticmethod
    def Project(schema: SchemaLike) -> Project:  # noqa: N802
        return Project(_fields_of(schema)[0])

    @staticmethod
    def ReserveFragments(num_fragments: int) -> ReserveFragments:  # noqa: N802
        return ReserveFragments(num_fragments)

    @staticmethod
    def UpdateConfig(
        upsert_values: Mapping[str, str] | None = None,  # noqa: N802
        delete_keys: Iterable[str] = (),
    ) -> UpdateConfig:
        entries = tuple((upsert_values or {}).items()) + tuple((k, None) for k in delete_keys)
        return UpdateConfig(config_updates=UpdateMap(entries))

    @staticmethod
    def DataReplacement(replacements: Iterable[tuple[int, DataFile]]) -> DataReplacement:  # noqa: N802
        return DataReplacement(tuple(replacements))


class _ColumnMap:
    """Maps each fragment's data file columns onto the dataset schema (see module docstring)."""

    def __init__(self, fields: Sequence[file_pb2.Field]) -> None:
        parents = {f.id: f.parent_id for f in fields}
        top_ids = [f.id for f in fields if f.parent_id == -1]
        top_index = {fid: n for n, fid in enumerate(top_ids)}
        self._top: dict[int, int] = {}
        for field in fields:
            root = field.id
            while parents.get(root, -1) != -1:
                root = parents[root]
            if root in top_index:
                self._top[field.id] = top_index[root]
        self._memo: dict[DataFile, dict[int, str]] = {}

    def file_columns(self, data_file: DataFile, file_schema: pa.Schema) -> dict[int, str]:
        """Dataset top-level field index -> name of the file column holding it."""
        if data_file not in self._memo:
            self._memo[data_file] = self._map(data_file, file_schema)
        return self._memo[data_file]

    def _map(self, data_file: DataFile, file_schema: pa.Schema) -> dict[int, str]:
        version = FileVersion.parse(data_file.file_version)
        out: dict[int, str] = {}
        position = 0
        for field in file_schema:
            count = len(data_file_fields(schema_to_fields([field]), version))
            ids = data_file.fields[position : position + count]
            position += count
            tops = {self._top[i] for i in ids if i in self._top}
            if len(tops) == 1:
                out[tops.pop()] = field.name
        return out


class LanceFragment:
    """One fragment of a dataset version (pylance's ``LanceFragment``).

    Reads stream in batches of at most ``batch_size`` live rows; a ``filter`` (SQL text or a
    ``pyarrow.compute.Expression``, see :mod:`lance_ops.table.predicate`) may name columns that are
    not in ``columns``: they are read, used and dropped.
    """

    def __init__(self, ds: LanceDataset, metadata: DataFragment) -> None:
        self._ds = ds
        self.metadata = metadata

    @property
    def fragment_id(self) -> int:
        return self.metadata.id

    @property
    def physical_rows(self) -> int:
        return self._ds._physical_rows(self.metadata)

    def count_rows(self, filter: Filter = None) -> int:
        return self._ds._count_fragment(self.metadata, self._ds._predicate(filter))

    def data_files(self) -> list[DataFile]:
        return list(self.metadata.files)

    def deletion_file(self) -> str | None:
        deletion = self.metadata.deletion_file
        return None if deletion is None else f"{DELETIONS_DIR}/{deletion.file_name(self.metadata.id)}"

    def to_batches(
        self,
        columns: Sequence[str] | None = None,
        filter: Filter = None,
        with_row_id: bool = False,
        with_row_address: bool = False,
        batch_size: int | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """This fragment's (filtered) rows as record batches, read one batch at a time."""
        names, predicate = self._ds._columns(columns), self._ds._predicate(filter)
        tables = self._ds._scan_fragment(
            self.metadata, None, names, predicate, with_row_id, with_row_address, batch_size
        )
        return (batch for table in tables for batch in table.to_batches())

    def to_table(
        self,
        columns: Sequence[str] | None = None,
        filter: Filter = None,
        with_row_id: bool = False,
        with_row_address: bool = False,
        batch_size: int | None = None,
    ) -> pa.Table:
        schema = self._ds._output_schema(self._ds._columns(columns), with_row_id, with_row_address)
        batches = self.to_batches(columns, filter, with_row_id, with_row_address, batch_size)
        return pa.Table.from_batches(list(batches), schema=schema)

    def __repr__(self) -> str:
        return f"LanceFragment(id={self.fragment_id}, physical_rows={self.metadata.physical_rows})"


class LanceDataset:
    """One version of a Lance dataset; the read side of the API.

    Opening reads one manifest; data files are opened when rows are read.
    """

    def __init__(
        self,
        uri: str | os.PathLike[str],
        version: int | str | None = None,
        storage_options: Mapping[str, str] | None = None,
    ) -> None:
        self._uri = os.fspath(uri)
        self._storage_options = dict(storage_options) if storage_options else None
        self._store, self._root = object_store(self._uri, self._storage_options)
        self._loaded = load_manifest(self._store, self._root, self._resolve_version(version))
        self._manifest = self._loaded.manifest
        self._deletions: dict[int, np.ndarray] = {}
        self._stable_ids: dict[int, np.ndarray] = {}
        self._readers: OrderedDict[str, LanceFileReader] = OrderedDict()

    def _resolve_version(self, version: int | str | None) -> int | None:
        if version is None or isinstance(version, int):
            return version
        path = self._store.join(self._root, "_refs", "tags", f"{version}.json")
        try:
            return int(json.loads(self._store.read(path))["version"])
        except FileNotFoundError as exc:
            raise DatasetNotFoundError(f"dataset {self._uri} has no tag {version!r}") from exc

    # ------------------------------------------------------------------ metadata

    @property
    def uri(self) -> str:
        return self._uri

    @property
    def version(self) -> int:
        return self._manifest.version

    @property
    def latest_version(self) -> int:
        entries = list_versions(self._store, self._root)
        return entries[-1].version if entries else self.version

    @property
    def manifest(self) -> Manifest:
        return self._manifest

    @cached_property
    def schema(self) -> pa.Schema:
        return fields_to_schema(self._manifest.fields, self._manifest.schema_metadata)

    @property
    def lance_schema(self) -> tuple[file_pb2.Field, ...]:
        """The Lance fields (with ids) of this version."""
        return self._manifest.fields

    @property
    def data_storage_version(self) -> str:
        return self._manifest.data_storage_version

    @property
    def has_stable_row_ids(self) -> bool:
        return self._manifest.uses_stable_row_ids

    @property
    def max_field_id(self) -> int:
        return max_field_id(self._manifest.fields)

    def versions(self) -> list[dict[str, Any]]:
        """Every version: ``{"version", "timestamp" (naive local datetime), "metadata" (summary)}``."""
        return [
            {
                "version": loaded.manifest.version,
                "timestamp": dt.datetime.fromtimestamp(loaded.manifest.timestamp_ns / 1e9),
                "metadata": _summary(loaded.manifest),
            }
            for loaded in load_manifests(self._store, self._root)
        ]

    def read_transaction(self, version: int | None = None) -> Transaction | None:
        """The transaction that created ``version`` (this version by default)."""
        loaded = self._loaded if version is None else load_manifest(self._store, self._root, version)
        return load_transaction(self._store, self._root, loaded)

    def checkout_version(self, version: int | str) -> LanceDataset:
        return LanceDataset(self._uri, version, self._storage_options)

    def get_fragments(self) -> list[LanceFragment]:
        return [LanceFragment(self, f) for f in self._manifest.fragments]

    def get_fragment(self, fragment_id: int) -> LanceFragment | None:
        return next((f for f in self.get_fragments() if f.fragment_id == fragment_id), None)

    def count_rows(self, filter: Filter = None) -> int:
        predicate = self._predicate(filter)
        return sum(self._count_fragment(f, predicate) for f in self._manifest.fragments)

    def __len__(self) -> int:
        return self.count_rows()

    # ------------------------------------------------------------------ fragment access

    def _needs_scan(self, fragment: DataFragment) -> bool:
        """Counts are unknown (0 = "unknown" for physical rows or deleted rows)."""
        return fragment.physical_rows == 0 or (
            fragment.deletion_file is not None and fragment.deletion_file.num_deleted_rows == 0
        )

    def _file_uri(self, data_file: DataFile) -> str:
        if data_file.base_id is None:
            return child_uri(self._uri, DATA_DIR, data_file.path)
        base = self._base_path(data_file.base_id, f"data file {data_file.path}")
        return child_uri(base.path, DATA_DIR if base.is_dataset_root else "", data_file.path)

    def _reader(self, data_file: DataFile) -> LanceFileReader:
        """An open reader (cached: opening reads the file's footer and metadata)."""
        uri = self._file_uri(data_file)
        reader = self._readers.pop(uri, None)
        if reader is None:
            reader = LanceFileReader(uri, storage_options=self._storage_options)
        self._readers[uri] = reader
        while len(self._readers) > _READER_CACHE_SIZE:
            self._readers.popitem(last=False)
        return reader

    def _physical_rows(self, fragment: DataFragment) -> int:
        if fragment.physical_rows or not fragment.files:
            return fragment.physical_rows
        return self._reader(fragment.files[0]).num_rows

    def _deleted(self, fragment: DataFragment) -> np.ndarray:
        if fragment.deletion_file is None:
            return np.zeros(0, np.uint32)
        if fragment.id not in self._deletions:
            store, root = self._deletion_location(fragment.deletion_file.base_id)
            self._deletions[fragment.id] = read_deletion_vector(
                store, root, fragment.id, fragment.deletion_file
            )
        return self._deletions[fragment.id]

    def _deletion_location(self, base_id: int | None) -> tuple[ObjectStore, str]:
        if base_id is None:
            return self._store, self._root
        return object_store(self._base_path(base_id, "a deletion file").path, self._storage_options)

    def _base_path(self, base_id: int, owner: str) -> BasePath:
        """The manifest's base path ``base_id`` (``owner`` names what refers to it, for the error)."""
        base = next((b for b in self._manifest.base_paths if b.id == base_id), None)
        if base is None:
            raise DatasetNotFoundError(f"{owner} names unknown base path {base_id}")
        return base

    def _live_count(self, fragment: DataFragment) -> int:
        if self._needs_scan(fragment):
            return self._physical_rows(fragment) - len(self._deleted(fragment))
        return fragment.num_rows

    def _live_offsets(self, fragment: DataFragment) -> np.ndarray:
        """Physical offsets of the fragment's live rows, ascending."""
        physical = np.arange(self._physical_rows(fragment), dtype=np.int64)
        deleted = self._deleted(fragment)
        return physical if not len(deleted) else physical[~np.isin(physical, deleted)]

    @cached_property
    def _column_map(self) -> _ColumnMap:
        return _ColumnMap(self._manifest.fields)

    def _columns(self, columns: Sequence[str] | None) -> list[str]:
        if columns is None:
            return list(self.schema.names)
        if isinstance(columns, str):
            raise TypeError("columns must be a list of column names")
        missing = [c for c in columns if self.schema.get_field_index(c) < 0]
        if missing:
            raise SchemaError(f"no such column(s) {missing}; the dataset has {self.schema.names}")
        return list(columns)

    def _read_fragment(
        self,
        fragment: DataFragment,
        columns: Sequence[str],
        offsets: np.ndarray,
        with_row_id: bool,
        with_row_address: bool,
    ) -> pa.Table:
        """Rows at physical ``offsets`` (ascending) of ``fragment``, projected to ``columns``."""
        wanted = {self.schema.get_field_index(c): c for c in columns}
        arrays: dict[int, pa.Array] = {}
        contiguous = len(offsets) > 0 and offsets[-1] - offsets[0] + 1 == len(offsets)
        for data_file in fragment.files:
            if len(arrays) == len(wanted):
                break
            reader = self._reader(data_file)
            mapping = self._column_map.file_columns(data_file, reader.schema)
            needed = {i: mapping[i] for i in wanted if i in mapping and i not in arrays}
            if not needed:
                continue
            names = list(needed.values())
            if not len(offsets):
                table = reader.read_range(0, 0, names).to_table()
            elif contiguous:
                table = reader.read_range(int(offsets[0]), len(offsets), names).to_table()
            else:
                table = reader.take_rows(offsets, names).to_table()
            for index, name in needed.items():
                arrays[index] = table.column(name).combine_chunks()
        out_fields, out_arrays = [], []
        for index in wanted:
            field = self.schema.field(index)
            array = arrays.get(index)
            if array is None:
                array = pa.nulls(len(offsets), field.type)
            elif array.type != field.type:
                array = array.cast(field.type)
            out_fields.append(field)
            out_arrays.append(array)
        if with_row_id:
            out_fields.append(pa.field(ROW_ID, pa.uint64()))
            out_arrays.append(pa.array(self._row_ids(fragment, offsets), pa.uint64()))
        if with_row_address:
            out_fields.append(pa.field(ROW_ADDRESS, pa.uint64()))
            out_arrays.append(pa.array(_addresses(fragment.id, offsets), pa.uint64()))
        if not out_arrays:
            # No columns, but still one (empty) row per offset.
            rows = pa.RecordBatch.from_struct_array(pa.nulls(len(offsets), pa.struct([])))
            return pa.Table.from_batches([rows])
        return pa.Table.from_arrays(out_arrays, schema=pa.schema(out_fields, metadata=self.schema.metadata))

    def _row_ids(self, fragment: DataFragment, offsets: np.ndarray) -> np.ndarray:
        if not self.has_stable_row_ids:
            return _addresses(fragment.id, offsets)
        if fragment.id not in self._stable_ids:
            if not isinstance(fragment.row_ids, bytes):
                raise UnsupportedFeatureError(
                    f"fragment {fragment.id}: external row id sequences are not supported"
                )
            self._stable_ids[fragment.id] = decode_row_ids(fragment.row_ids)
        return self._stable_ids[fragment.id][offsets]

    # ------------------------------------------------------------------ scans

    def _predicate(self, filter: Filter) -> Predicate | None:
        return None if filter is None else parse_predicate(filter, self.schema)

    def _count_fragment(self, fragment: DataFragment, predicate: Predicate | None) -> int:
        if predicate is None:
            return self._live_count(fragment)
        tables = self._scan_fragment(fragment, None, [], predicate, False, False, None)
        return sum(t.num_rows for t in tables)

    def _scan_fragment(
        self,
        fragment: DataFragment,
        live: np.ndarray | None,
        names: Sequence[str],
        predicate: Predicate | None,
        with_row_id: bool,
        with_row_address: bool,
        batch_size: int | None,
    ) -> Iterator[pa.Table]:
        """Tables of at most ``batch_size`` rows read from ``live`` offsets (default: all live rows).

        With a predicate, the columns it names are read too, the rows it does not select are
        dropped, and the result is projected back to ``names`` (plus the row id / address).
        """
        if live is None:
            live = self._live_offsets(fragment)
        size = batch_size or DEFAULT_BATCH_SIZE
        read = list(names)
        if predicate is not None:
            read += [c for c in predicate.columns if c not in names]
        keep = [*names, *([ROW_ID] if with_row_id else []), *([ROW_ADDRESS] if with_row_address else [])]
        step = max(size, READ_AHEAD_ROWS)
        for start in range(0, len(live), step):
            offsets = live[start : start + step]
            table = self._read_fragment(fragment, read, offsets, with_row_id, with_row_address)
            if predicate is not None:
                table = predicate.filter(table).select(keep)
            for first in range(0, max(table.num_rows, 1), size):
                # Explicit length: pyarrow does not clamp slices of zero-column tables.
                yield table.slice(first, min(size, table.num_rows - first))

    def to_batches(
        self,
        columns: Sequence[str] | None = None,
        filter: Filter = None,
        limit: int | None = None,
        offset: int | None = None,
        with_row_id: bool = False,
        with_row_address: bool = False,
        batch_size: int | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """Rows in fragment order as record batches of at most ``batch_size`` rows.

        Fragments are read one batch at a time. ``offset`` and ``limit`` count rows that pass
        ``filter`` (as in pylance); without a filter, skipped fragments are not read at all.
        """
        names, predicate = self._columns(columns), self._predicate(filter)
        if (offset or 0) < 0 or (limit or 0) < 0:
            raise ValueError("limit and offset must be non-negative")
        return self._batches(names, predicate, limit, offset or 0, with_row_id, with_row_address, batch_size)

    def _batches(
        self,
        names: Sequence[str],
        predicate: Predicate | None,
        limit: int | None,
        skip: int,
        with_row_id: bool,
        with_row_address: bool,
        batch_size: int | None,
    ) -> Iterator[pa.RecordBatch]:
        remaining = np.inf if limit is None else limit
        for fragment in self._manifest.fragments:
            if remaining <= 0:
                return
            live = None
            if predicate is None:
                count = self._live_count(fragment)
                if skip >= count:
                    skip -= count
                    continue
                live = self._live_offsets(fragment)
                live = live[skip:] if remaining == np.inf else live[skip : skip + int(remaining)]
                skip = 0
            tables = self._scan_fragment(
                fragment, live, names, predicate, with_row_id, with_row_address, batch_size
            )
            for table in tables:
                if skip >= table.num_rows:
                    skip -= table.num_rows
                    continue
                table = table.slice(skip, None if remaining == np.inf else int(remaining))
                skip = 0
                remaining -= table.num_rows
                yield from table.to_batches()
                if remaining <= 0:
                    return

    def scanner(
        self,
        columns: Sequence[str] | None = None,
        filter: Filter = None,
        limit: int | None = None,
        offset: int | None = None,
        with_row_id: bool = False,
        with_row_address: bool = False,
        batch_size: int | None = None,
    ) -> pa.RecordBatchReader:
        """A ``RecordBatchReader`` over the scan (pylance's scanner, reduced to a reader)."""
        schema = self._output_schema(self._columns(columns), with_row_id, with_row_address)
        batches = self.to_batches(columns, filter, limit, offset, with_row_id, with_row_address, batch_size)
        return pa.RecordBatchReader.from_batches(schema, batches)

    def _output_schema(self, names: Sequence[str], with_row_id: bool, with_row_address: bool) -> pa.Schema:
        fields = [self.schema.field(n) for n in names]
        if with_row_id:
            fields.append(pa.field(ROW_ID, pa.uint64()))
        if with_row_address:
            fields.append(pa.field(ROW_ADDRESS, pa.uint64()))
        return pa.schema(fields, metadata=self.schema.metadata)

    def to_table(
        self,
        columns: Sequence[str] | None = None,
        filter: Filter = None,
        limit: int | None = None,
        offset: int | None = None,
        with_row_id: bool = False,
        with_row_address: bool = False,
        batch_size: int | None = None,
    ) -> pa.Table:
        reader = self.scanner(columns, filter, limit, offset, with_row_id, with_row_address, batch_size)
        return reader.read_all()

    def head(self, num_rows: int, columns: Sequence[str] | None = None) -> pa.Table:
        return self.to_table(columns=columns, limit=num_rows)

    def take(
        self, indices: Sequence[int] | np.ndarray | pa.Array, columns: Sequence[str] | None = None
    ) -> pa.Table:
        """Rows at positional ``indices`` (live rows of this version, any order, repeats allowed)."""
        if isinstance(indices, pa.Array | pa.ChunkedArray):
            indices = indices.to_numpy(zero_copy_only=False)
        positions = np.asarray(indices, dtype=np.int64).reshape(-1)
        names = self._columns(columns)
        fragments = self._manifest.fragments
        counts = np.array([self._live_count(f) for f in fragments], dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(counts)])
        if positions.size and (positions.min() < 0 or positions.max() >= starts[-1]):
            raise IndexError(f"take index out of range: the dataset has {starts[-1]} rows")
        unique, inverse = np.unique(positions, return_inverse=True)
        owner = np.searchsorted(starts, unique, side="right") - 1
        parts = []
        for index in np.unique(owner):
            fragment = fragments[index]
            local = unique[owner == index] - starts[index]
            offsets = self._live_offsets(fragment)[local] if fragment.deletion_file else local
            parts.append(self._read_fragment(fragment, names, offsets, False, False))
        schema = self._output_schema(names, False, False)
        table = pa.concat_tables(parts) if parts else schema.empty_table()
        return table.take(pa.array(inverse.reshape(-1)))

    def _take_rows(
        self, row_ids: Sequence[int] | np.ndarray, columns: Sequence[str] | None = None
    ) -> pa.Table:
        """Rows by row id (stable ids when enabled, else row addresses), in the order given.

        Ids of deleted or unknown rows are skipped, as pylance does.
        """
        ids = np.asarray(row_ids, dtype=np.uint64).reshape(-1)
        names = self._columns(columns)
        found = np.zeros(len(ids), dtype=bool)
        parts, order = [], []
        for fragment in self._manifest.fragments:
            physical = self._physical_rows(fragment)
            if self.has_stable_row_ids:
                known = self._row_ids(fragment, np.arange(physical, dtype=np.int64))
                if not len(known):
                    continue
                sorter = np.argsort(known, kind="stable")
                candidates = sorter[np.clip(np.searchsorted(known, ids, sorter=sorter), 0, len(known) - 1)]
                match = known[candidates] == ids
            else:
                candidates = (ids & np.uint64(0xFFFFFFFF)).astype(np.int64)
                match = ((ids >> np.uint64(32)) == np.uint64(fragment.id)) & (candidates < physical)
            hit = match & ~found & ~np.isin(candidates, self._deleted(fragment))
            offsets = candidates[hit].astype(np.int64)
            if not hit.any():
                continue
            found |= hit
            ordering = np.argsort(offsets, kind="stable")
            table = self._read_fragment(fragment, names, offsets[ordering], False, False)
            parts.append(table.take(pa.array(np.argsort(ordering, kind="stable"))))
            order.append(np.flatnonzero(hit))
        if not parts:
            return self._output_schema(names, False, False).empty_table()
        table = pa.concat_tables(parts)
        return table.take(pa.array(np.argsort(np.concatenate(order), kind="stable")))

    # ------------------------------------------------------------------ commits

    @staticmethod
    def commit(
        base_uri: str | os.PathLike[str] | LanceDataset,
        operation: Operation | Transaction,
        read_version: int | None = None,
        commit_lock: Callable[[int], AbstractContextManager[object]] | None = None,
        storage_options: Mapping[str, str] | None = None,
        enable_v2_manifest_paths: bool | None = None,
        detached: bool = False,
        max_retries: int = 20,
        *,
        commit_message: str | None = None,
        enable_stable_row_ids: bool | None = None,
        transaction_properties: Mapping[str, str] | None = None,
        data_storage_version: str | None = None,
    ) -> LanceDataset:
        """Commit ``operation`` (or a prepared transaction) to the dataset at ``base_uri``.

        ``enable_stable_row_ids``, ``enable_v2_manifest_paths`` and ``data_storage_version`` only
        matter when the commit creates the dataset (the file version defaults to that of the
        operation's data files). ``commit_lock(version)`` is a context manager guarding the claim
        of a version, for stores without an atomic create.
        """
        if detached:
            raise UnsupportedFeatureError("detached commits are not supported")
        uri = base_uri.uri if isinstance(base_uri, LanceDataset) else os.fspath(base_uri)
        store, root = object_store(uri, storage_options)
        if isinstance(operation, Transaction):
            transaction = operation
        else:
            if read_version is None:
                entries = list_versions(store, root)
                read_version = entries[-1].version if entries else 0
            properties = dict(transaction_properties or {})
            if commit_message is not None:
                properties[COMMIT_MESSAGE_KEY] = commit_message
            transaction = Transaction(read_version=read_version, operation=operation, properties=properties)
        settings = NewDatasetSettings(
            data_storage_version=(
                str(FileVersion.parse(data_storage_version))
                if data_storage_version
                else _fragments_version(transaction.operation)
            ),
            enable_stable_row_ids=bool(enable_stable_row_ids),
            naming=ManifestNamingScheme.V1 if enable_v2_manifest_paths is False else ManifestNamingScheme.V2,
        )
        manifest = commit_transaction(
            store,
            root,
            transaction,
            handler=LockCommitHandler(commit_lock) if commit_lock else None,
            max_retries=max_retries,
            settings=settings,
        )
        return LanceDataset(uri, manifest.version, storage_options)

    def __repr__(self) -> str:
        return f"LanceDataset(uri={self._uri!r}, version={self.version})"


def _fragments_version(operation: Operation) -> str:
    """Data format of a new dataset: that of the operation's data files, else the default."""
    for fragment in getattr(operation, "fragments", ()):
        for data_file in fragment.files:
            return data_file.file_version
    return str(FileVersion.parse("stable"))


def _addresses(fragment_id: int, offsets: np.ndarray) -> np.ndarray:
    return (np.uint64(fragment_id) << np.uint64(32)) | offsets.astype(np.uint64)


def _summary(manifest: Manifest) -> dict[str, str]:
    """pylance's per-version summary (all values are decimal strings)."""
    files = [d for f in manifest.fragments for d in f.files]
    deletions = [f.deletion_file for f in manifest.fragments if f.deletion_file is not None]
    return {
        "total_data_file_rows": str(sum(f.physical_rows for f in manifest.fragments)),
        "total_data_files": str(len(files)),
        "total_deletion_file_rows": str(sum(d.num_deleted_rows for d in deletions)),
        "total_deletion_files": str(len(deletions)),
        "total_files_size": str(sum(d.file_size_bytes for d in files)),
        "total_fragments": str(len(manifest.fragments)),
        "total_rows": str(manifest.num_rows),
    }


def dataset(
    uri: str | os.PathLike[str],
    version: int | str | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> LanceDataset:
    """Open a dataset (latest version, a version number or a tag name)."""
    return LanceDataset(uri, version, storage_options)


def write_dataset(
    data: Any,
    uri: str | os.PathLike[str],
    schema: pa.Schema | None = None,
    mode: str = "create",
    *,
    max_rows_per_file: int = 1024 * 1024,
    max_rows_per_group: int = 1024,
    max_bytes_per_file: int | None = None,
    data_storage_version: str | None = None,
    enable_stable_row_ids: bool = False,
    enable_v2_manifest_paths: bool = True,
    storage_options: Mapping[str, str] | None = None,
    commit_message: str | None = None,
    transaction_properties: Mapping[str, str] | None = None,
    progress: Any = None,
) -> LanceDataset:
    """Write ``data`` as a new dataset (``create``), new rows (``append``) or a new content (``overwrite``).

    ``data_storage_version`` defaults to ``"stable"`` (2.2) for new datasets; appends always use the
    dataset's version and overwrites keep it unless one is given. ``progress`` (a callable, or an
    object with ``complete(fragment)``) is told about every fragment written.
    """
    if mode not in ("create", "append", "overwrite"):
        raise ValueError(f"mode must be 'create', 'append' or 'overwrite', not {mode!r}")
    uri = os.fspath(uri)
    store, root = object_store(uri, storage_options)
    entries = list_versions(store, root)
    if entries and mode == "create":
        raise DatasetAlreadyExistsError(f"a dataset already exists at {uri}")
    exists = bool(entries)
    read_version = entries[-1].version if exists else 0
    manifest = load_manifest(store, root, read_version).manifest if exists else None
    # Appends write the dataset's field ids in the dataset's file version (manifest read once, here).
    append_to = manifest if mode == "append" else None
    if manifest is not None and (append_to is not None or data_storage_version is None):
        data_storage_version = manifest.data_storage_version
    fragments, written_schema = write_fragments_with_schema(
        data,
        uri,
        schema if append_to is None else fields_to_schema(append_to.fields, append_to.schema_metadata),
        mode="overwrite" if append_to is None else "append",
        max_rows_per_file=max_rows_per_file,
        max_rows_per_group=max_rows_per_group,
        max_bytes_per_file=max_bytes_per_file,
        data_storage_version=data_storage_version or "stable",
        storage_options=storage_options,
        fields=None if append_to is None else list(append_to.fields),
    )
    for fragment in fragments:
        if callable(progress):
            progress(fragment)
        elif progress is not None:
            progress.complete(fragment)
    if append_to is not None:
        operation: Operation = Append(tuple(fragments))
    else:
        fields, metadata = _fields_of(written_schema)
        operation = Overwrite(tuple(fragments), fields, metadata)
    try:
        return LanceDataset.commit(
            uri,
            operation,
            read_version=read_version,
            storage_options=storage_options,
            enable_v2_manifest_paths=enable_v2_manifest_paths,
            commit_message=commit_message,
            enable_stable_row_ids=enable_stable_row_ids,
            transaction_properties=transaction_properties,
            data_storage_version=data_storage_version or "stable",
        )
    except RetryableCommitConflictError as exc:
        if not exists:
            raise DatasetAlreadyExistsError(f"a dataset was created concurrently at {uri}") from exc
        raise
