"""The dataset API: ``write_dataset``, ``dataset``, :class:`LanceDataset`, :class:`LanceOperation`.

Names and semantics follow pylance. A dataset version is a manifest (``lance_ops.table``); its
rows are the concatenation of its fragments in id order (see :mod:`lance_ops.fragment.reader`).
This module is a facade: reads go through :mod:`lance_ops.fragment`, writes and commits through
the operations in :mod:`lance_ops.ops`.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_ops.dataset_stats import LanceStats
from lance_ops.encoding.plan import EncodingPlan
from lance_ops.fragment import FragmentMetadata, FragmentReader, ScanOptions, VersionFiles, WriteOptions
from lance_ops.fragment.options import DEFAULT_BATCH_SIZE, DEFAULT_MAX_BYTES_PER_FILE
from lance_ops.fragment.scan import scan_batches, take, take_rows
from lance_ops.io import object_store
from lance_ops.ops import cleanup as cleanup_op
from lance_ops.ops import columns as columns_op
from lance_ops.ops import commit as commit_op
from lance_ops.ops import delete as delete_op
from lance_ops.ops import history as history_op
from lance_ops.ops import write as write_op
from lance_ops.ops.columns import BatchUDF, batch_udf
from lance_ops.ops.tags import Tags
from lance_ops.query.predicate import Predicate, parse_predicate
from lance_ops.table.commit import list_versions, load_manifest, load_transaction
from lance_ops.table.manifest import DataFile, Manifest
from lance_ops.table.manifest_store import ExternalManifestStore, repair
from lance_ops.table.naming import DELETIONS_DIR
from lance_ops.table.schema import LanceSchema
from lance_ops.table.transaction import (
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

if TYPE_CHECKING:
    from lance_ops.optimize import DatasetOptimizer

__all__ = [
    "BatchUDF",
    "LanceDataset",
    "LanceFragment",
    "LanceOperation",
    "batch_udf",
    "dataset",
    "write_dataset",
]

SchemaLike: TypeAlias = "pa.Schema | LanceSchema"
Filter: TypeAlias = "str | pc.Expression | None"


def _fields_of(schema: SchemaLike) -> tuple[tuple[Any, ...], dict[str, bytes]]:
    """Lance field messages and schema metadata of an Arrow schema (numbered afresh) or a LanceSchema."""
    lance_schema = schema if isinstance(schema, LanceSchema) else LanceSchema.from_arrow(schema)
    return lance_schema.to_pb(), dict(lance_schema.metadata)


class LanceOperation:
    """Factories for the operations :meth:`LanceDataset.commit` accepts (pylance's names).

    Schemas may be Arrow schemas (numbered 0, 1, 2, ... in pre-order) or a :class:`LanceSchema`
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


class LanceFragment:
    """One fragment of a dataset version (pylance's ``LanceFragment``).

    Reads stream in batches of at most ``batch_size`` live rows; a ``filter`` (SQL text or a
    ``pyarrow.compute.Expression``, see :mod:`lance_ops.query.predicate`) may name columns that are
    not in ``columns``: they are read, used and dropped.
    """

    def __init__(self, ds: LanceDataset, metadata: FragmentMetadata) -> None:
        self._ds = ds
        self.metadata = metadata

    @property
    def _reader(self) -> FragmentReader:
        return self._ds._files.fragment(self.metadata)

    @property
    def fragment_id(self) -> int:
        return self.metadata.id

    @property
    def physical_rows(self) -> int:
        return self._reader.physical_rows

    def count_rows(self, filter: Filter = None) -> int:
        return self._reader.count(self._ds._predicate(filter))

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
        options = self._ds._scan_options(columns, filter, with_row_id, with_row_address, batch_size)
        return (batch for table in self._reader.scan(options) for batch in table.to_batches())

    def to_table(
        self,
        columns: Sequence[str] | None = None,
        filter: Filter = None,
        with_row_id: bool = False,
        with_row_address: bool = False,
        batch_size: int | None = None,
    ) -> pa.Table:
        options = self._ds._scan_options(columns, filter, with_row_id, with_row_address, batch_size)
        batches = (batch for table in self._reader.scan(options) for batch in table.to_batches())
        return pa.Table.from_batches(list(batches), schema=self._ds._files.output_schema(options))

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
        manifest_store: ExternalManifestStore | None = None,
    ) -> None:
        self._uri = os.fspath(uri)
        self._storage_options = dict(storage_options) if storage_options else None
        self._manifest_store = manifest_store
        self._store, self._root = object_store(self._uri, self._storage_options)
        if manifest_store is not None:
            repair(self._store, self._root, manifest_store)
        loaded = load_manifest(self._store, self._root, self._resolve_version(version))
        self._manifest = loaded.manifest
        self._transaction = load_transaction(self._store, self._root, loaded)

    @classmethod
    def _from_manifest(
        cls,
        uri: str,
        manifest: Manifest,
        transaction: Transaction,
        storage_options: Mapping[str, str] | None,
        manifest_store: ExternalManifestStore | None = None,
    ) -> LanceDataset:
        """The version a commit just wrote (nothing is read back)."""
        ds = cls.__new__(cls)
        ds._uri = uri
        ds._storage_options = dict(storage_options) if storage_options else None
        ds._manifest_store = manifest_store
        ds._store, ds._root = object_store(uri, ds._storage_options)
        ds._manifest = manifest
        ds._transaction = transaction
        return ds

    def _resolve_version(self, version: int | str | None) -> int | None:
        if version is None or isinstance(version, int):
            return version
        return self.tags.get_version(version)

    @property
    def tags(self) -> Tags:
        """This dataset's tags (create, update, delete, list, list_ordered, get_version)."""
        return Tags(self._store, self._root)

    @cached_property
    def _files(self) -> VersionFiles:
        return VersionFiles(self._uri, self._manifest, self._storage_options)

    # ------------------------------------------------------------------ metadata

    @property
    def uri(self) -> str:
        return self._uri

    @property
    def storage_options(self) -> Mapping[str, str] | None:
        return self._storage_options

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

    @property
    def schema(self) -> pa.Schema:
        return self._files.schema

    @property
    def lance_schema(self) -> LanceSchema:
        """The Lance schema (fields with ids) of this version."""
        return self._manifest.schema

    @property
    def data_storage_version(self) -> str:
        return self._manifest.data_storage_version

    @property
    def has_stable_row_ids(self) -> bool:
        return self._manifest.uses_stable_row_ids

    @property
    def max_field_id(self) -> int:
        return self._manifest.schema.max_field_id

    def versions(self) -> list[dict[str, Any]]:
        """Every version: ``{"version", "timestamp" (naive local datetime), "metadata" (summary)}``."""
        return history_op.versions(self._store, self._root)

    def history(self) -> pa.Table:
        """One row per version (operation, message, properties, rows, files, bytes): DESCRIBE HISTORY."""
        return history_op.history(self._store, self._root)

    def read_transaction(self, version: int | None = None) -> Transaction | None:
        """The transaction that created ``version`` (this version by default)."""
        if version is None or version == self.version:
            return self._transaction
        return load_transaction(self._store, self._root, load_manifest(self._store, self._root, version))

    def checkout_version(self, version: int | str) -> LanceDataset:
        return LanceDataset(self._uri, version, self._storage_options, self._manifest_store)

    @property
    def stats(self) -> LanceStats:
        """Dataset and column statistics (:mod:`lance_ops.dataset_stats`)."""
        return LanceStats(self)

    def get_fragments(self) -> list[LanceFragment]:
        return [LanceFragment(self, f) for f in self._manifest.fragments]

    def get_fragment(self, fragment_id: int) -> LanceFragment | None:
        return next((f for f in self.get_fragments() if f.fragment_id == fragment_id), None)

    def count_rows(self, filter: Filter = None) -> int:
        predicate = self._predicate(filter)
        return sum(f.count(predicate) for f in self._files.fragments())

    def __len__(self) -> int:
        return self.count_rows()

    # ------------------------------------------------------------------ reads

    def _predicate(self, filter: Filter) -> Predicate | None:
        return None if filter is None else parse_predicate(filter, self.schema)

    def _scan_options(
        self,
        columns: Sequence[str] | None,
        filter: Filter,
        with_row_id: bool,
        with_row_address: bool,
        batch_size: int | None,
    ) -> ScanOptions:
        return ScanOptions(
            columns=self._files.resolve_columns(columns),
            predicate=self._predicate(filter),
            with_row_id=with_row_id,
            with_row_address=with_row_address,
            batch_size=batch_size or DEFAULT_BATCH_SIZE,
        )

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
        options = self._scan_options(columns, filter, with_row_id, with_row_address, batch_size)
        if (offset or 0) < 0 or (limit or 0) < 0:
            raise ValueError("limit and offset must be non-negative")
        return scan_batches(self._files, options, limit, offset or 0)

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
        options = self._scan_options(columns, filter, with_row_id, with_row_address, batch_size)
        if (offset or 0) < 0 or (limit or 0) < 0:
            raise ValueError("limit and offset must be non-negative")
        batches = scan_batches(self._files, options, limit, offset or 0)
        return pa.RecordBatchReader.from_batches(self._files.output_schema(options), batches)

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
        return take(self._files, positions, self._files.resolve_columns(columns))

    def _take_rows(
        self, row_ids: Sequence[int] | np.ndarray, columns: Sequence[str] | None = None
    ) -> pa.Table:
        """Rows by row id (stable ids when enabled, else row addresses), in the order given.

        Ids of deleted or unknown rows are skipped, as pylance does.
        """
        ids = np.asarray(row_ids, dtype=np.uint64).reshape(-1)
        return take_rows(self._files, ids, self._files.resolve_columns(columns))

    # ------------------------------------------------------------------ operations

    def delete(self, predicate: str | pc.Expression) -> int:
        """Delete the rows ``predicate`` (SQL text or an Arrow expression) selects; returns how many.

        Commits a ``Delete`` on this version (a new version even when no row matches) and makes
        this object that new version, as pylance does.
        """
        options = self._commit_options()
        result = delete_op.delete(self._files, predicate, options)
        self._adopt(result.manifest, result.transaction)
        return result.num_deleted_rows

    def add_columns(
        self,
        transforms: columns_op.Transforms,
        read_columns: Sequence[str] | None = None,
        batch_size: int | None = None,
    ) -> None:
        """Add columns: ``{name: SQL expression}``, a batch UDF, or ``pa.Field``\\ s / a ``pa.Schema``.

        A UDF (a plain function or one decorated with :func:`lance_ops.batch_udf`) maps a
        ``RecordBatch`` of ``read_columns`` (all columns by default; ``_rowid`` / ``_rowaddr`` may
        be named) to a ``RecordBatch`` or pandas DataFrame of new columns, for runs of at most
        ``batch_size`` rows. Fields add all-null columns without writing data. Commits a ``Merge``
        and makes this object the new version (see :mod:`lance_ops.ops.columns`).
        """
        options = self._commit_options()
        self._adopt(*columns_op.add_columns(self._files, transforms, read_columns, batch_size, options))

    def drop_columns(self, columns: Sequence[str]) -> None:
        """Drop columns (dotted paths for struct fields) by committing a ``Project``; no data is rewritten."""
        options = self._commit_options()
        self._adopt(*columns_op.drop_columns(self._files, columns, options))

    def alter_columns(self, *alterations: Mapping[str, Any]) -> None:
        """Alter columns, each given as ``{"path", "name"?, "nullable"?, "data_type"?}`` (as in pylance).

        Renames and nullability changes are metadata only (a ``Project``); a ``data_type`` change
        rewrites that column into new data files (a ``Merge``) and refuses casts that lose data.
        """
        options = self._commit_options()
        self._adopt(*columns_op.alter_columns(self._files, alterations, options))

    @property
    def optimize(self) -> DatasetOptimizer:
        """Maintenance operations (``compact_files``), as pylance's ``ds.optimize``."""
        from lance_ops.optimize import DatasetOptimizer  # noqa: PLC0415 (optimize imports this module)

        return DatasetOptimizer(self)

    def restore(self) -> None:
        """Make this (older) version the latest again: commits ``Restore``; this object becomes it."""
        options = self._commit_options()
        self._adopt(*history_op.restore(self._uri, self.version, options))

    def cleanup_old_versions(
        self,
        older_than: dt.timedelta | dt.datetime | None = None,
        retain_versions: int | None = None,
        *,
        delete_unverified: bool = False,
        error_if_tagged_old_versions: bool = True,
        dry_run: bool = False,
    ) -> cleanup_op.CleanupStats:
        """Remove versions older than ``older_than`` (default two weeks unless ``retain_versions``
        is given) or outside the ``retain_versions`` newest, and every file no kept version needs.

        The latest version, this version and newer ones, and tagged versions are kept; files no
        version references are removed only when older than 7 days (or ``delete_unverified``).
        ``dry_run`` reports what would be removed (``CleanupStats.paths``) and removes nothing.
        See :mod:`lance_ops.ops.cleanup`.
        """
        policy = cleanup_op.CleanupPolicy.parse(
            older_than,
            retain_versions,
            self.latest_version,
            delete_unverified=delete_unverified,
            error_if_tagged_old_versions=error_if_tagged_old_versions,
            dry_run=dry_run,
        )
        return cleanup_op.cleanup_old_versions(self._store, self._root, self.version, policy)

    def _commit_options(self) -> commit_op.CommitOptions:
        """How this dataset's operations commit (its storage options and manifest store)."""
        return commit_op.CommitOptions(
            storage_options=self._storage_options, manifest_store=self._manifest_store
        )

    def _adopt(self, manifest: Manifest, transaction: Transaction) -> None:
        """Become the version ``manifest`` (written by one of our own commits)."""
        self._manifest = manifest
        self._transaction = transaction
        self.__dict__.pop("_files", None)

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
        manifest_store: ExternalManifestStore | None = None,
    ) -> LanceDataset:
        """Commit ``operation`` (or a prepared transaction) to the dataset at ``base_uri``.

        ``enable_stable_row_ids``, ``enable_v2_manifest_paths`` and ``data_storage_version`` only
        matter when the commit creates the dataset (the file version defaults to that of the
        operation's data files). ``commit_lock(version)`` is a context manager guarding the claim
        of a version, for stores without an atomic create.
        """
        uri = base_uri.uri if isinstance(base_uri, LanceDataset) else os.fspath(base_uri)
        options = commit_op.CommitOptions(
            read_version=read_version,
            storage_options=storage_options,
            commit_lock=commit_lock,
            max_retries=max_retries,
            commit_message=commit_message,
            transaction_properties=transaction_properties,
            enable_v2_manifest_paths=enable_v2_manifest_paths,
            enable_stable_row_ids=bool(enable_stable_row_ids),
            data_storage_version=data_storage_version,
            detached=detached,
            manifest_store=manifest_store,
        )
        manifest, transaction = commit_op.commit(uri, operation, options)
        return LanceDataset._from_manifest(uri, manifest, transaction, storage_options, manifest_store)

    def __repr__(self) -> str:
        return f"LanceDataset(uri={self._uri!r}, version={self.version})"


def dataset(
    uri: str | os.PathLike[str],
    version: int | str | None = None,
    storage_options: Mapping[str, str] | None = None,
    manifest_store: ExternalManifestStore | None = None,
) -> LanceDataset:
    """Open a dataset (latest version, a version number or a tag name).

    With ``manifest_store`` (e.g. :class:`SqliteManifestStore`), versions are committed and
    repaired through that external store (:mod:`lance_ops.table.manifest_store`).
    """
    return LanceDataset(uri, version, storage_options, manifest_store)


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
    manifest_store: ExternalManifestStore | None = None,
    encoding_plan: EncodingPlan | None = None,
    page_statistics: bool | None = None,
) -> LanceDataset:
    """Write ``data`` as a new dataset (``create``), new rows (``append``) or a new content (``overwrite``).

    ``data_storage_version`` defaults to ``"stable"`` (2.2) for new datasets; appends always use the
    dataset's version and overwrites keep it unless one is given. ``progress`` (a callable, or an
    object with ``complete(fragment)``) is told about every fragment written. ``encoding_plan``
    (:func:`lance_ops.ops.encodings.profile`) fixes per-column encodings and is stored in the
    dataset's config by creates / overwrites; appends follow the stored plan by default.
    ``page_statistics=False`` writes data files without page statistics (default: with them,
    unless an append's dataset config sets ``lance-ops.page-statistics`` to ``false``).
    """
    uri = os.fspath(uri)
    write_options = WriteOptions(
        max_rows_per_file=max_rows_per_file,
        max_rows_per_group=max_rows_per_group,
        max_bytes_per_file=max_bytes_per_file or DEFAULT_MAX_BYTES_PER_FILE,
        storage_options=storage_options,
        encoding_plan=encoding_plan,
        page_statistics=page_statistics,
    )
    commit_options = commit_op.CommitOptions(
        storage_options=storage_options,
        commit_message=commit_message,
        transaction_properties=transaction_properties,
        enable_v2_manifest_paths=enable_v2_manifest_paths,
        enable_stable_row_ids=enable_stable_row_ids,
        data_storage_version=data_storage_version,
        manifest_store=manifest_store,
    )
    if manifest_store is not None:
        repair(*object_store(uri, storage_options), manifest_store)
    report = progress if callable(progress) or progress is None else progress.complete
    manifest, transaction = write_op.write(data, uri, mode, schema, write_options, commit_options, report)
    return LanceDataset._from_manifest(uri, manifest, transaction, storage_options, manifest_store)
