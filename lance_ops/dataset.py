"""The dataset API: ``write_dataset``, ``dataset``, :class:`LanceDataset`, :class:`LanceOperation`.

Names and semantics follow pylance. A dataset version is a manifest (``lance_ops.table``); its
rows are the concatenation of its fragments in id order (see :mod:`lance_ops.fragment.reader`).
This module is a facade: reads go through :mod:`lance_ops.fragment`, writes and commits through
the operations in :mod:`lance_ops.ops`.
"""

from __future__ import annotations

import datetime as dt
import os
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from functools import cached_property, wraps
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple, TypeAlias, TypedDict, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_ops.dataset_fragment import LanceFragment
from lance_ops.dataset_handle import DatasetHandle
from lance_ops.dataset_mutations import DatasetDelta, MergeInsertBuilder
from lance_ops.dataset_stats import LanceStats
from lance_ops.encoding.options import check_writer_compression
from lance_ops.encoding.plan import EncodingPlan
from lance_ops.errors import (
    ArgumentTypeError,
    BatchCommitError,
    CorruptFileError,
    DatasetNotFoundError,
    InvalidArgumentError,
    UnsupportedFeatureError,
)
from lance_ops.fragment import FragmentMetadata, VersionFiles, WriteOptions
from lance_ops.fragment.options import DEFAULT_MAX_BYTES_PER_FILE
from lance_ops.fragment.scan import take, take_rows
from lance_ops.fragment.writer import to_reader
from lance_ops.io.context import StorageContext
from lance_ops.io.index_cache import BYTES_PER_CACHE_ENTRY
from lance_ops.ops import changes as changes_op
from lance_ops.ops import cleanup as cleanup_op
from lance_ops.ops import columns as columns_op
from lance_ops.ops import commit as commit_op
from lance_ops.ops import delete as delete_op
from lance_ops.ops import history as history_op
from lance_ops.ops import indices as indices_op
from lance_ops.ops import metadata as metadata_op
from lance_ops.ops import update as update_op
from lance_ops.ops import write as write_op
from lance_ops.ops.auto_cleanup import AutoCleanupConfig as AutoCleanup
from lance_ops.ops.columns import BatchUDF, batch_udf
from lance_ops.ops.indices import Index
from lance_ops.ops.tags import Tags
from lance_ops.progress import FragmentWriteProgress, ProgressCallback, as_callback
from lance_ops.query.predicate import Predicate, parse_predicate
from lance_ops.scanner import Columns, Filter, LanceScanner, ScanRequest, fragment_ids, projected_take
from lance_ops.schema import LanceSchema as PublicLanceSchema
from lance_ops.table.commit import LoadedManifest, list_versions, load_manifest, load_transaction
from lance_ops.table.dynamodb_store import manifest_store_for_uri
from lance_ops.table.manifest import DataFile, ListTuple, Manifest
from lance_ops.table.manifest_store import ExternalManifestStore, repair
from lance_ops.table.schema import LanceSchema
from lance_ops.table.transaction import (
    COMMIT_MESSAGE_KEY,
    Append,
    CreateIndex,
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
    Update,
    UpdateConfig,
    UpdateMap,
)

if TYPE_CHECKING:
    import uuid

    from lance_ops.blob import BlobFile
    from lance_ops.optimize import DatasetOptimizer
    from lance_ops.session import DatasetInternals, Session

__all__ = [
    "LANCE_COMMIT_MESSAGE_KEY",
    "AutoCleanupConfig",
    "BatchUDF",
    "BulkCommitResult",
    "Index",
    "LanceDataset",
    "LanceFragment",
    "LanceOperation",
    "batch_udf",
    "dataset",
    "write_dataset",
]

# pylance's name for the transaction property holding the commit message.
LANCE_COMMIT_MESSAGE_KEY = COMMIT_MESSAGE_KEY
_DEFAULT_MAX_RETRIES = commit_op.CommitOptions().max_retries


class AutoCleanupConfig(TypedDict):
    """pylance's ``auto_cleanup_options`` / ``ds.optimize.enable_auto_cleanup`` argument."""

    interval: int
    older_than_seconds: int


SchemaLike: TypeAlias = "pa.Schema | LanceSchema | PublicLanceSchema"

# pylance scanner arguments that tune its execution (read-ahead, ordering, I/O sizes, index use);
# accepted for compatibility, meaningless for lance-ops' sequential in-order scans.
_SCAN_TUNING = frozenset(
    {
        "prefilter",
        "use_stats",
        "fast_search",
        "io_buffer_size",
        "late_materialization",
        "use_scalar_index",
        "disable_scoring_autoprojection",
        "scan_stats_callback",
        "blob_handling",
    }
)
# pylance scanner arguments that change the result and that lance-ops does not implement.
_SCAN_UNSUPPORTED = frozenset(
    {"order_by", "include_deleted_rows", "row_addr_allowlist", "row_addr_blocklist"}
)


def _schema_of(schema: SchemaLike) -> LanceSchema:
    """The Lance schema of an Arrow schema (numbered afresh) or of a Lance schema (ids kept)."""
    if isinstance(schema, PublicLanceSchema):
        schema = schema.to_internal()
    return schema if isinstance(schema, LanceSchema) else LanceSchema.from_arrow(schema)


# The table layer's map edit, named apart from LanceOperation.UpdateMap (its factory).
MapEdit = UpdateMap


class _OperationFactory(type):
    """Metaclass of a factory class whose calls return instances of ``made``: ``isinstance(x,
    Factory)`` is ``isinstance(x, Factory.made)``."""

    made: type

    def __instancecheck__(cls, instance: object) -> bool:
        return isinstance(instance, cls.made)


class LanceOperation:
    """Factories for the operations :meth:`LanceDataset.commit` accepts (pylance's names).

    Schemas may be Arrow schemas (numbered 0, 1, 2, ... in pre-order) or a :class:`LanceSchema`
    (``LanceDataset.manifest.schema``) when ids must be kept.
    """

    class Append(metaclass=_OperationFactory):  # noqa: N801
        """``LanceOperation.Append(fragments)`` makes a :class:`lance_ops.table.transaction.Append`
        (its ``fragments`` equal the list given, as pylance's), and ``isinstance(op,
        LanceOperation.Append)`` holds for one."""

        made = Append

        def __new__(cls, fragments: Iterable[FragmentMetadata]) -> Append:  # type: ignore[misc]
            return Append(ListTuple(fragments))

    @staticmethod
    def Overwrite(
        new_schema: SchemaLike,
        fragments: Iterable[FragmentMetadata],  # noqa: N802
        config_upsert_values: Mapping[str, str] | None = None,
    ) -> Overwrite:
        return Overwrite(tuple(fragments), _schema_of(new_schema), dict(config_upsert_values or {}))

    @staticmethod
    def Delete(
        updated_fragments: Iterable[FragmentMetadata],
        deleted_fragment_ids: Iterable[int],  # noqa: N802
        predicate: str,
    ) -> Delete:
        return Delete(tuple(updated_fragments), tuple(deleted_fragment_ids), predicate)

    @staticmethod
    def Merge(fragments: Iterable[FragmentMetadata], schema: SchemaLike) -> Merge:  # noqa: N802
        if isinstance(schema, pa.Schema):  # as pylance 14 warns (a LanceSchema keeps the field ids)
            warnings.warn(
                "Passing a pyarrow.Schema to Merge is deprecated. Please use a LanceSchema instead.",
                DeprecationWarning,
                stacklevel=2,
            )
        return Merge(tuple(fragments), _schema_of(schema))

    class RewriteGroup(NamedTuple):
        """Fragments replaced by a rewrite (``old_fragments``) and those taking their place."""

        old_fragments: Iterable[FragmentMetadata]
        new_fragments: Iterable[FragmentMetadata]

    @staticmethod
    def Rewrite(  # noqa: N802
        groups: Iterable[tuple[Iterable[FragmentMetadata], Iterable[FragmentMetadata]]],
        rewritten_indices: Iterable[Any] = (),
    ) -> Rewrite:
        """Groups of ``(old_fragments, new_fragments)`` (or :class:`RewriteGroup`); lance-ops
        builds no indices, so ``rewritten_indices`` must be empty."""
        if list(rewritten_indices):
            raise UnsupportedFeatureError("rewritten_indices: lance-ops does not build indices")
        return Rewrite(tuple(RewriteGroup(tuple(old), tuple(new)) for old, new in groups))

    class Update(metaclass=_OperationFactory):  # noqa: N801
        """``LanceOperation.Update(...)`` makes a :class:`lance_ops.table.transaction.Update`, and
        ``isinstance(op, LanceOperation.Update)`` holds for one, as with pylance's dataclass."""

        made = Update

        def __new__(  # type: ignore[misc]
            cls,
            removed_fragment_ids: Iterable[int] = (),
            updated_fragments: Iterable[FragmentMetadata] = (),
            new_fragments: Iterable[FragmentMetadata] = (),
            fields_modified: Iterable[int] = (),
            fields_for_preserving_frag_bitmap: Iterable[int] = (),
            update_mode: str = "",
        ) -> Update:
            """Rows rewritten: fragments removed, updated in place (``update_columns``) or added.

            ``update_mode`` is ``"rewrite_rows"`` (the default) or ``"rewrite_columns"``.
            """
            modes = {"": 0, "rewrite_rows": 0, "rewrite_columns": 1}
            if update_mode not in modes:
                raise InvalidArgumentError(
                    f"update_mode must be 'rewrite_rows' or 'rewrite_columns', not {update_mode!r}"
                )
            return Update(
                tuple(removed_fragment_ids),
                tuple(updated_fragments),
                tuple(new_fragments),
                tuple(fields_modified),
                tuple(fields_for_preserving_frag_bitmap),
                modes[update_mode],
            )

    @staticmethod
    def CreateIndex(new_indices: Iterable[Index], removed_indices: Iterable[Index]) -> CreateIndex:  # noqa: N802
        """Publish index segments (:class:`Index`, e.g. after ``merge_index_metadata``) and remove
        others, as pylance's ``LanceOperation.CreateIndex``."""
        return CreateIndex(
            tuple(i.to_metadata() for i in new_indices), tuple(i.to_metadata() for i in removed_indices)
        )

    @staticmethod
    def Restore(version: int) -> Restore:  # noqa: N802
        return Restore(version)

    @staticmethod
    def Project(schema: SchemaLike) -> Project:  # noqa: N802
        return Project(LanceSchema(_schema_of(schema).fields))

    @staticmethod
    def ReserveFragments(num_fragments: int) -> ReserveFragments:  # noqa: N802
        return ReserveFragments(num_fragments)

    @staticmethod
    def UpdateMap(updates: Mapping[str, str | None], replace: bool = False) -> MapEdit:  # noqa: N802
        """Map edits for :meth:`UpdateConfig`: a value None deletes its key; ``replace`` drops the
        keys not named."""
        return MapEdit(tuple(updates.items()), replace)

    @staticmethod
    def UpdateConfig(  # noqa: N802
        upsert_values: Mapping[str, str] | MapEdit | None = None,
        delete_keys: Iterable[str] = (),
        *,
        config_updates: MapEdit | None = None,
        table_metadata_updates: MapEdit | None = None,
        schema_metadata_updates: MapEdit | None = None,
        field_metadata_updates: Mapping[int, MapEdit] | None = None,
    ) -> UpdateConfig:
        """pylance 14's form (``config_updates``, ``table_metadata_updates``,
        ``schema_metadata_updates``, ``field_metadata_updates`` by field id, each an
        :meth:`UpdateMap`; the first may be given by position) or the older one (``upsert_values``,
        ``delete_keys``)."""
        if isinstance(upsert_values, MapEdit):
            if config_updates is not None:
                raise TypeError("config_updates given twice")
            config_updates, upsert_values = upsert_values, None
        if upsert_values or delete_keys:
            if config_updates is not None:
                raise TypeError("give config_updates or upsert_values / delete_keys, not both")
            entries = tuple((upsert_values or {}).items()) + tuple((k, None) for k in delete_keys)
            config_updates = MapEdit(entries)
        return UpdateConfig(
            config_updates=config_updates,
            table_metadata_updates=table_metadata_updates,
            schema_metadata_updates=schema_metadata_updates,
            field_metadata_updates=dict(field_metadata_updates or {}),
        )

    class DataReplacementGroup(NamedTuple):
        """One replaced data file: the fragment and the file taking the place of the one covering
        the same fields."""

        fragment_id: int
        new_file: DataFile

    @staticmethod
    def DataReplacement(replacements: Iterable[tuple[int, DataFile]]) -> DataReplacement:  # noqa: N802
        return DataReplacement(tuple((int(fid), new_file) for fid, new_file in replacements))


class DeletedRows(int):
    """The number of rows a delete removed; ``count["num_deleted_rows"]`` reads it as from the
    dict pylance 14's ``delete`` returns."""

    def __getitem__(self, key: str) -> int:
        if key != "num_deleted_rows":
            raise KeyError(key)
        return int(self)


class BulkCommitResult(TypedDict):
    """What :meth:`LanceDataset.commit_batch` returns (pylance's ``BulkCommitResult``)."""

    dataset: LanceDataset
    merged: Transaction


class LanceDataset:
    """One version of a Lance dataset; the read side of the API.

    Opening resolves the storage once (a :class:`~lance_ops.io.context.StorageContext`, shared by
    the versions checked out from this one and passed to every operation) and reads one
    manifest; data files are opened when rows are read.
    """

    # pylance's dataset(default_scan_options=): arguments every scan of this object starts from.
    _default_scan_options: Mapping[str, Any] = MappingProxyType({})
    # pylance's dataset(commit_lock=): the lock every commit of this object (and of the versions
    # checked out from it) is claimed under.
    _commit_lock: Callable[[int], AbstractContextManager[object]] | None = None

    def __init__(
        self,
        uri: str | os.PathLike[str],
        version: int | str | None = None,
        storage_options: Mapping[str, str] | None = None,
        manifest_store: ExternalManifestStore | None = None,
    ) -> None:
        text = os.fspath(uri)
        options = dict(storage_options) if storage_options else None
        manifest_store = manifest_store or manifest_store_for_uri(text, options)
        self._load_version(StorageContext.open(text, options), version, manifest_store)

    def _load_version(
        self, storage: StorageContext, version: int | str | None, manifest_store: ExternalManifestStore | None
    ) -> None:
        """Become ``version`` (latest: None) of the dataset at ``storage``."""
        self._storage = storage
        self._manifest_store = manifest_store
        if manifest_store is not None:
            repair(storage.store, storage.root, manifest_store)
        loaded = load_manifest(storage.store, storage.root, self._resolve_version(version))
        self._manifest = loaded.manifest
        self._unread: LoadedManifest | None = loaded  # its transaction is decoded on first use
        self._transaction: Transaction | None = None

    @classmethod
    def _from_manifest(
        cls,
        storage: StorageContext,
        manifest: Manifest,
        transaction: Transaction,
        manifest_store: ExternalManifestStore | None = None,
    ) -> LanceDataset:
        """The version a commit just wrote (nothing is read back)."""
        ds = cls.__new__(cls)
        ds._storage = storage
        ds._manifest_store = manifest_store
        ds._manifest = manifest
        ds._unread = None
        ds._transaction = transaction
        return ds

    def _resolve_version(self, version: int | str | None) -> int | None:
        if version is None or isinstance(version, int):
            return version
        return self.tags.get_version(version)

    @property
    def tags(self) -> Tags:
        """This dataset's tags (create, update, delete, list, list_ordered, get_version)."""
        return Tags(self._storage.store, self._storage.root)

    @cached_property
    def _files(self) -> VersionFiles:
        return VersionFiles(self._storage, self._manifest)

    @property
    def handle(self) -> DatasetHandle:
        """Internal, not pylance API: this version's files, commit options and ``adopt``, as
        ``LanceFragment``, ``LanceScanner``, ``ds.stats`` and ``ds.optimize`` use them
        (:mod:`lance_ops.dataset_handle`)."""
        return DatasetHandle(self._files, self._commit_options, self._adopt)

    # ------------------------------------------------------------------ metadata

    @property
    def uri(self) -> str:
        return self._storage.uri

    @property
    def storage_options(self) -> Mapping[str, str] | None:
        return self._storage.storage_options

    @property
    def storage(self) -> StorageContext:
        """Internal, not pylance API: this dataset's storage, resolved once when it was opened."""
        return self._storage

    @property
    def manifest_store(self) -> ExternalManifestStore | None:
        """The external manifest store this dataset commits through (None: the store's own claim)."""
        return self._manifest_store

    @property
    def version(self) -> int:
        return self._manifest.version

    @property
    def latest_version(self) -> int:
        entries = list_versions(self._storage.store, self._storage.root)
        return entries[-1].version if entries else self.version

    @property
    def manifest(self) -> Manifest:
        return self._manifest

    @property
    def schema(self) -> pa.Schema:
        """The dataset's Arrow schema; with ``default_scan_options`` (pylance's), what a default scan
        returns (``_rowid`` / ``_rowaddr`` included when they ask for them)."""
        if self._default_scan_options:
            return self.scanner().projected_schema
        return self._files.schema

    @property
    def lance_schema(self) -> PublicLanceSchema:
        """pylance's Lance schema of this version (``fields()``, ``field(path)``, field ids); the
        table layer's schema, which manifests and operations hold, is ``ds.manifest.schema``."""
        return PublicLanceSchema(self._manifest.schema)

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
        return history_op.versions(self._storage.store, self._storage.root)

    def history(self) -> pa.Table:
        """One row per version (operation, message, properties, rows, files, bytes): DESCRIBE HISTORY."""
        return history_op.history(self._storage.store, self._storage.root)

    def read_transaction(self, version: int | None = None) -> Transaction | None:
        """The transaction that created ``version`` (this version by default)."""
        store, root = self._storage.store, self._storage.root
        if version is None or version == self.version:
            if self._unread is not None:
                self._transaction = load_transaction(store, root, self._unread)
                self._unread = None
            return self._transaction
        return load_transaction(store, root, load_manifest(store, root, version))

    def get_transactions(self, recent_transactions: int = 10) -> list[Transaction | None]:
        """The transactions of the ``recent_transactions`` versions up to this one, newest first
        (None for a version whose transaction file is gone), as pylance."""
        first = max(1, self.version - recent_transactions + 1)
        return [self.read_transaction(v) for v in range(self.version, first - 1, -1)]

    def _without_scan_defaults(self) -> LanceDataset:
        plain = LanceDataset.__new__(LanceDataset)
        plain.__dict__.update(self.__dict__)
        plain._default_scan_options = MappingProxyType({})
        return plain

    def checkout_version(self, version: int | str) -> LanceDataset:
        ds = LanceDataset.__new__(LanceDataset)
        ds._load_version(self._storage, version, self._manifest_store)
        ds._default_scan_options = self._default_scan_options
        ds._commit_lock = self._commit_lock
        return ds

    # ------------------------------------------------------------------ config and metadata

    def config(self) -> dict[str, str]:
        """The table config (``lance.auto_cleanup.*``, ``lance.compaction.*`` and user keys)."""
        return dict(self._manifest.config)

    @property
    def metadata(self) -> dict[str, str]:
        """The table metadata (free-form key -> value, separate from the schema metadata)."""
        return dict(self._manifest.table_metadata)

    @property
    def schema_metadata(self) -> dict[str, str]:
        return {k.decode(): v.decode() for k, v in (self.schema.metadata or {}).items()}

    def _update(self, edit: UpdateConfig, commit: commit_op.CommitOptions | None) -> None:
        options = self._commit_options(commit=commit)
        self._adopt(*metadata_op.update(self._storage, self._manifest, edit, options))

    def update_config(
        self,
        values: Mapping[str, str | None],
        *,
        replace: bool = False,
        commit: commit_op.CommitOptions | None = None,
    ) -> dict[str, str]:
        """Set (or, with None, delete) config keys, or with ``replace`` make ``values`` the whole
        config; commits an ``UpdateConfig`` and returns the new config. ``commit`` (an extension, as
        on every mutating method) gives the commit settings as one :class:`~lance_ops.CommitOptions`."""
        self._update(UpdateConfig(config_updates=metadata_op.update_map(values, replace)), commit)
        return self.config()

    def delete_config_keys(
        self, keys: Sequence[str], *, commit: commit_op.CommitOptions | None = None
    ) -> None:
        """Remove config keys (absent keys are ignored); commits an ``UpdateConfig``."""
        self._update(UpdateConfig(config_updates=metadata_op.delete_keys(keys)), commit)

    def update_metadata(
        self,
        values: Mapping[str, str | None],
        *,
        replace: bool = False,
        commit: commit_op.CommitOptions | None = None,
    ) -> dict[str, str]:
        """Edit the table metadata as :meth:`update_config` edits the config; returns the new metadata."""
        self._update(UpdateConfig(table_metadata_updates=metadata_op.update_map(values, replace)), commit)
        return self.metadata

    def update_schema_metadata(
        self,
        values: Mapping[str, str | None],
        *,
        replace: bool = False,
        commit: commit_op.CommitOptions | None = None,
    ) -> dict[str, str]:
        """Edit the schema metadata (``ds.schema.metadata``); returns the new schema metadata."""
        self._update(UpdateConfig(schema_metadata_updates=metadata_op.update_map(values, replace)), commit)
        return self.schema_metadata

    def update_field_metadata(
        self,
        field_updates: Mapping[str, Mapping[str, str | None]],
        *,
        replace: bool = False,
        commit: commit_op.CommitOptions | None = None,
    ) -> None:
        """Edit the metadata of fields given by dotted path (``{"a.b": {"key": "value"}}``)."""
        updates = metadata_op.field_updates(self._manifest.schema, field_updates, replace)
        self._update(UpdateConfig(field_metadata_updates=updates), commit)

    def replace_schema_metadata(self, new_metadata: Mapping[str, str]) -> None:
        """Deprecated in pylance: :meth:`update_schema_metadata` with ``replace=True``."""
        self.update_schema_metadata(new_metadata, replace=True)

    def replace_field_metadata(self, field_name: str, new_metadata: Mapping[str, str]) -> None:
        """Deprecated in pylance: :meth:`update_field_metadata` with ``replace=True``."""
        self.update_field_metadata({field_name: new_metadata}, replace=True)

    @property
    def stats(self) -> LanceStats:
        """Dataset and column statistics (:mod:`lance_ops.dataset_stats`)."""
        return LanceStats(self)

    def get_fragments(self, filter: Filter = None) -> list[LanceFragment]:
        """This version's fragments; with ``filter``, only those holding a row it selects."""
        fragments = [LanceFragment(self, fragment=f) for f in self._manifest.fragments]
        return fragments if filter is None else [f for f in fragments if f.count_rows(filter)]

    def get_fragment(self, fragment_id: int) -> LanceFragment | None:
        try:
            return LanceFragment(self, fragment_id)
        except InvalidArgumentError:
            return None

    def count_rows(self, filter: Filter = None) -> int:
        """Live rows (that ``filter`` selects, through the scalar indices that answer it, as
        pylance counts); without a filter from the manifest's counts alone."""
        if filter is None:
            return self._files.live_total
        return self.scanner(columns=[], filter=filter).count_rows()

    def __len__(self) -> int:
        return self.count_rows()

    # ------------------------------------------------------------------ reads

    def _predicate(self, filter: Filter) -> Predicate | None:
        return None if filter is None else parse_predicate(filter, self.schema)

    def scanner(
        self,
        columns: Columns = None,
        filter: Filter = None,
        limit: int | None = None,
        offset: int | None = None,
        nearest: Any = None,
        batch_size: int | None = None,
        batch_size_bytes: int | None = None,
        batch_readahead: int | None = None,
        fragment_readahead: int | None = None,
        scan_in_order: bool | None = None,
        fragments: Iterable[LanceFragment] | None = None,
        index_segments: Any = None,
        full_text_query: Any = None,
        *,
        with_row_id: bool | None = None,
        with_row_address: bool | None = None,
        strict_batch_size: bool = False,
        **tuning: Any,
    ) -> LanceScanner:
        """A :class:`~lance_ops.scanner.LanceScanner` over this version (pylance's arguments).

        ``columns`` is a list of names (dotted struct paths and ``_rowid`` / ``_rowaddr`` /
        ``_rowoffset`` included) or a dict of output name -> SQL expression; ``fragments`` restricts
        the scan to those fragments, in the order given. Read-ahead, ordering and other tuning
        arguments of pylance's scanner (``batch_readahead``, ``scan_in_order``, ``prefilter``,
        ``use_stats``, ...) are accepted and have no effect here: scans are sequential and in order.
        Batches hold ``batch_size`` rows (default ``LANCE_DEFAULT_BATCH_SIZE`` or 8192) but for
        each fragment's last, or with ``strict_batch_size`` the scan's last, as in pylance.
        ``nearest`` returns a :class:`~lance_ops.vector_search.VectorQuery` (kNN through an IVF
        index or flat), ``full_text_query`` a :class:`~lance_ops.fts.FullTextScan` (BM25 through an
        INVERTED index, flat over what it does not cover); ``index_segments`` raises
        ``NotImplementedError``. ``scan_stats_callback`` is called with a
        :class:`~lance_ops.scan_stats.ScanStatistics` when a plain or full-text scan ends (not
        for ``nearest`` scans yet).
        """
        if self._default_scan_options:
            given = {
                "columns": columns,
                "filter": filter,
                "limit": limit,
                "offset": offset,
                "batch_size": batch_size,
                "fragments": fragments,
                "with_row_id": with_row_id,
                "with_row_address": with_row_address,
                "strict_batch_size": strict_batch_size or None,
            }
            merged = {**self._default_scan_options, **{k: v for k, v in given.items() if v is not None}}
            merged.update(
                tuning, nearest=nearest, full_text_query=full_text_query, index_segments=index_segments
            )
            return LanceDataset.scanner(self._without_scan_defaults(), **merged)
        if nearest is not None and full_text_query is None and index_segments is None:
            from lance_ops.vector_search import VectorQuery  # noqa: PLC0415

            prefilter = bool(tuning.pop("prefilter", False))
            if tuning.get("include_deleted_rows"):
                raise InvalidArgumentError("Cannot include deleted rows in a nearest-neighbour search")
            if fragments is not None and not prefilter:
                raise InvalidArgumentError(
                    "This operation is not supported for fragment scan: nearest= with fragments= "
                    "needs prefilter=True"
                )
            flags = (bool(with_row_id), bool(with_row_address), limit, offset)
            fast = bool(tuning.get("fast_search"))
            return VectorQuery(self, nearest, columns, filter, prefilter, *flags, fast)  # type: ignore[return-value]
        if full_text_query is not None and nearest is None and index_segments is None:
            from lance_ops.fts import FullTextScan  # noqa: PLC0415

            if with_row_address:
                raise UnsupportedFeatureError("full-text scans do not return _rowaddr in lance_ops")
            if tuning.get("include_deleted_rows"):
                raise InvalidArgumentError("Cannot include deleted rows in a full-text search")
            prefilter = bool(tuning.pop("prefilter", False))
            unknown = set(tuning) - _SCAN_TUNING - _SCAN_UNSUPPORTED
            if unknown:
                raise TypeError(f"scanner() got unexpected keyword arguments {sorted(unknown)}")
            return FullTextScan(  # type: ignore[return-value]
                self,
                full_text_query,
                columns,
                filter,
                prefilter,
                bool(with_row_id),
                limit,
                offset,
                tuning.get("scan_stats_callback"),
            )
        if nearest is not None or full_text_query is not None or index_segments is not None:
            raise UnsupportedFeatureError(
                "nearest with full_text_query, and index_segments, are not supported by lance-ops"
            )
        requested = sorted(k for k in _SCAN_UNSUPPORTED if tuning.get(k))
        if requested:
            raise UnsupportedFeatureError(f"scanner arguments {requested} are not supported by lance-ops")
        unknown = set(tuning) - _SCAN_TUNING - _SCAN_UNSUPPORTED
        if unknown:
            raise TypeError(f"scanner() got unexpected keyword arguments {sorted(unknown)}")
        request = ScanRequest(
            columns=columns,
            filter=filter,
            limit=limit,
            offset=offset,
            with_row_id=bool(with_row_id),
            with_row_address=bool(with_row_address),
            batch_size=batch_size,
            fragment_ids=fragment_ids(fragments),
            strict_batch_size=bool(strict_batch_size),
            use_scalar_index=tuning.get("use_scalar_index") is not False,
            stats_callback=tuning.get("scan_stats_callback"),
        )
        return LanceScanner(self, request)

    def to_batches(
        self,
        columns: Columns = None,
        filter: Filter = None,
        limit: int | None = None,
        offset: int | None = None,
        nearest: Any = None,
        batch_size: int | None = None,
        *args: Any,
        **kwargs: Any,
    ) -> Iterator[pa.RecordBatch]:
        """Rows in fragment order as record batches of at most ``batch_size`` rows (see :meth:`scanner`).

        Fragments are read one batch at a time. ``offset`` and ``limit`` count rows that pass
        ``filter`` (as in pylance); without a filter, skipped fragments are not read at all.
        """
        return self.scanner(columns, filter, limit, offset, nearest, batch_size, *args, **kwargs).to_batches()

    def to_table(
        self,
        columns: Columns = None,
        filter: Filter = None,
        limit: int | None = None,
        offset: int | None = None,
        nearest: Any = None,
        batch_size: int | None = None,
        *args: Any,
        **kwargs: Any,
    ) -> pa.Table:
        """The scan's rows as one table (arguments as :meth:`scanner`)."""
        return self.scanner(columns, filter, limit, offset, nearest, batch_size, *args, **kwargs).to_table()

    def to_pandas(self, columns: Columns = None, filter: Filter = None, **kwargs: Any) -> Any:
        return self.to_table(columns, filter, **kwargs).to_pandas()

    def head(self, num_rows: int, columns: Columns = None, **kwargs: Any) -> pa.Table:
        return self.to_table(columns=columns, limit=num_rows, **kwargs)

    def sample(
        self,
        num_rows: int,
        columns: Sequence[str] | None = None,
        randomize_order: bool = True,
        seed: int | None = None,
    ) -> pa.Table:
        """``num_rows`` distinct live rows picked at random (in random order unless
        ``randomize_order`` is false, then in dataset order), as pylance; ``seed`` makes the pick
        repeatable. More rows than the dataset has raise ``ValueError``."""
        total = self.count_rows()
        if not 0 <= num_rows <= total:
            raise InvalidArgumentError(f"cannot sample {num_rows} rows from a dataset of {total}")
        picked = np.random.default_rng(seed).choice(total, size=num_rows, replace=False)
        return self.take(picked if randomize_order else np.sort(picked), columns)

    def take(
        self,
        indices: Sequence[int] | np.ndarray | pa.Array,
        columns: Sequence[str] | Mapping[str, str | pc.Expression] | None = None,
    ) -> pa.Table:
        """Rows at positional ``indices`` (live rows of this version, any order, repeats allowed).

        ``columns`` is a list of names or, as in pylance, a dict of output name -> SQL expression.
        """
        if isinstance(indices, pa.Array | pa.ChunkedArray):
            indices = indices.to_numpy(zero_copy_only=False)
        positions = np.asarray(indices, dtype=np.int64).reshape(-1)
        return projected_take(self._files, columns, lambda names: take(self._files, positions, names))

    def take_blobs(
        self,
        blob_column: str,
        ids: Sequence[int] | pa.Array | None = None,
        addresses: Sequence[int] | pa.Array | None = None,
        indices: Sequence[int] | pa.Array | None = None,
    ) -> list[BlobFile | None]:
        """The blobs of ``blob_column`` in the rows chosen by exactly one of row ``ids``, row
        ``addresses`` or positional ``indices``, as file-like :class:`~lance_ops.blob.BlobFile`
        objects (``None`` for a null value); see :mod:`lance_ops.blob`."""
        from lance_ops.blob import blob_files, blob_selection, check_blob_column

        kind, rows = blob_selection(ids, addresses, indices)
        check_blob_column(self.schema, blob_column)
        if kind == "indices":
            return blob_files(self.take(rows, columns=[blob_column]).column(0))
        if kind == "addresses" and self.has_stable_row_ids:
            raise UnsupportedFeatureError("take_blobs by addresses on a dataset with stable row ids")
        taken = self._take_rows(rows, columns=[blob_column])
        if taken.num_rows != len(rows):  # _take_rows leaves deleted rows out: one file per id here
            raise UnsupportedFeatureError(
                f"Expected {len(rows)} rows, got {taken.num_rows}. A take operation that includes row"
                " addresses must not target deleted rows."
            )
        return blob_files(taken.column(0))

    def _take_rows(
        self,
        row_ids: Sequence[int] | np.ndarray,
        columns: Sequence[str] | Mapping[str, str | pc.Expression] | None = None,
    ) -> pa.Table:
        """Rows by row id (stable ids when enabled, else row addresses), in the order given.

        Ids of deleted or unknown rows are skipped, as pylance does. ``columns`` as in :meth:`take`.
        """
        ids = np.asarray(row_ids, dtype=np.uint64).reshape(-1)
        return projected_take(self._files, columns, lambda names: take_rows(self._files, ids, names))

    # ------------------------------------------------------------------ operations

    def delete(
        self, predicate: str | pc.Expression, *, commit: commit_op.CommitOptions | None = None
    ) -> DeletedRows:
        """Delete the rows ``predicate`` (SQL text or an Arrow expression) selects; returns how many.

        Commits a ``Delete`` on this version (a new version even when no row matches) and makes
        this object that new version, as pylance does. The count is an ``int`` that also answers
        ``["num_deleted_rows"]``, the key of the dict pylance 14 returns. ``commit`` (an extension,
        as on every mutating method) gives the commit settings as one :class:`~lance_ops.CommitOptions`.
        """
        options = self._commit_options(commit=commit)
        result = delete_op.delete(self._files, predicate, options)
        self._adopt(result.manifest, result.transaction)
        return DeletedRows(result.num_deleted_rows)

    # ------------------------------------------------ row-level mutations and change feed (L16)

    def update(
        self,
        updates: Mapping[str, str],
        where: str | pc.Expression | None = None,
        conflict_retries: int = 10,
        retry_timeout: dt.timedelta = dt.timedelta(seconds=30),
        *,
        commit: commit_op.CommitOptions | None = None,
    ) -> dict[str, int]:
        """Set columns to SQL expressions on the rows ``where`` selects (all rows by default):
        rows rewritten into new fragments, one ``Update`` commit (:mod:`lance_ops.ops.update`);
        returns ``{"num_rows_updated": n}`` and makes this object the new version."""
        committed = update_op.update(
            self._files,
            updates,
            where,
            self._commit_options(commit=commit),
            conflict_retries,
            retry_timeout.total_seconds(),
        )
        self._adopt(committed.manifest, committed.transaction)
        return committed.result

    def merge_insert(self, on: str | Iterable[str]) -> MergeInsertBuilder:
        """An upsert builder keyed on ``on`` (:mod:`lance_ops.ops.merge_insert`)."""
        return MergeInsertBuilder(self, on)

    def insert(self, data: Any, *, mode: str = "append", **kwargs: Any) -> None:
        """Write ``data`` to this dataset (``write_dataset`` with ``mode``) and become the new version."""
        new = write_dataset(data, self, mode=mode, **kwargs)
        assert new._transaction is not None, "a dataset just written knows its transaction"
        self._adopt(new._manifest, new._transaction)

    def delta(
        self,
        compared_against: int | None = None,
        *,
        begin_version: int | None = None,
        end_version: int | None = None,
    ) -> DatasetDelta:
        """What changed between two versions, as pylance's ``DatasetDelta`` (:mod:`lance_ops.ops.changes`)."""
        return DatasetDelta(
            changes_op.delta(self._storage, self.version, compared_against, begin_version, end_version)
        )

    def changes(
        self,
        start_version: int,
        end_version: int | None = None,
        *,
        keys: Sequence[str] | None = None,
        require_pairs: bool = False,
    ) -> pa.Table:
        """Changed rows of commits ``start_version..end_version`` (default: this version) with
        ``_change_type`` and ``_commit_version`` (Delta's change data feed); ``keys`` (columns
        identifying a row) pair updates into pre/post images without stable row ids;
        ``require_pairs``: an update that cannot be paired raises instead of reading as
        delete + insert."""
        end = self.version if end_version is None else end_version
        return changes_op.changes(self._storage, start_version, end, keys, require_pairs)

    def add_columns(
        self,
        transforms: columns_op.Transforms | Any,
        read_columns: Sequence[str] | None = None,
        reader_schema: pa.Schema | None = None,
        batch_size: int | None = None,
        *,
        progress: ProgressCallback | None = None,
        commit: commit_op.CommitOptions | None = None,
    ) -> None:
        """Add columns: ``{name: SQL expression}``, a batch UDF, ``pa.Field``\\ s / a ``pa.Schema``,
        or the values themselves (a reader, table or pandas frame: one row per live row, in scan
        order; ``reader_schema`` casts them).

        A UDF (a plain function or one decorated with :func:`lance_ops.batch_udf`) maps a
        ``RecordBatch`` of ``read_columns`` (all columns by default; ``_rowid`` / ``_rowaddr`` may
        be named) to a ``RecordBatch`` or pandas DataFrame of new columns, for runs of at most
        ``batch_size`` rows. Fields add all-null columns without writing data. Commits a ``Merge``
        and makes this object the new version (see :mod:`lance_ops.ops.columns`). ``progress``
        hears of every fragment's new data file (:mod:`lance_ops.progress`).
        """
        options = self._commit_options(commit=commit)
        if _is_values(transforms):
            reader = to_reader(transforms, reader_schema)
            self._adopt(*columns_op.add_columns_from_reader(self._files, reader, options))
            return
        added = columns_op.add_columns(self._files, transforms, read_columns, batch_size, options, progress)
        self._adopt(*added)

    def drop_columns(self, columns: Sequence[str], *, commit: commit_op.CommitOptions | None = None) -> None:
        """Drop columns (dotted paths for struct fields) by committing a ``Project``; no data is rewritten."""
        options = self._commit_options(commit=commit)
        self._adopt(*columns_op.drop_columns(self._files, columns, options))

    def alter_columns(
        self, *alterations: Mapping[str, Any], commit: commit_op.CommitOptions | None = None
    ) -> None:
        """Alter columns, each given as ``{"path", "name"?, "nullable"?, "data_type"?}`` (as in pylance).

        Renames and nullability changes are metadata only (a ``Project``); a ``data_type`` change
        rewrites that column into new data files (a ``Merge``) and refuses casts that lose data.
        """
        options = self._commit_options(commit=commit)
        self._adopt(*columns_op.alter_columns(self._files, alterations, options))

    def create_index(
        self,
        column: str | list[str],
        index_type: str,
        name: str | None = None,
        metric: str = "l2",
        replace: bool = False,
        num_partitions: int | None = None,
        num_sub_vectors: int | None = None,
        *,
        commit: commit_op.CommitOptions | None = None,
        **kwargs: Any,
    ) -> LanceDataset:
        """Train and commit an IVF_FLAT / IVF_PQ / IVF_SQ / IVF_HNSW_* vector index (pylance's
        ``create_index``; ``num_bits``, ``sample_rate``, ``max_iters``, ``target_partition_size``,
        ``seed``, and ``m`` / ``ef_construction`` / ``max_level`` for HNSW as keywords; see
        :mod:`lance_ops.ops.vector_index`). Returns this dataset, at the new version. ``commit``
        (:class:`~lance_ops.CommitOptions`) says how to commit, as on the other mutating methods."""
        from lance_ops.ops.vector_index import create_index  # noqa: PLC0415

        if not isinstance(column, str):
            if len(column) != 1:
                raise InvalidArgumentError(f"create_index takes one column, got {list(column)}")
            column = column[0]
        if kwargs.get("fragment_ids") is not None or kwargs.get("index_uuid") is not None:
            raise UnsupportedFeatureError(
                "create_index builds over every fragment; a segment over some fragments "
                "(fragment_ids / index_uuid) is built by create_index_uncommitted"
            )
        options = self._commit_options(commit=commit)
        self._adopt(
            *create_index(
                self._files,
                column,
                index_type,
                options,
                name=name,
                metric=metric,
                replace=replace,
                num_partitions=num_partitions,
                num_sub_vectors=num_sub_vectors,
                **kwargs,
            )
        )
        return self

    def create_index_uncommitted(
        self,
        column: str | list[str],
        index_type: Any,
        name: str | None = None,
        metric: str = "l2",
        replace: bool = False,
        num_partitions: int | None = None,
        ivf_centroids: Any = None,
        pq_codebook: Any = None,
        num_sub_vectors: int | None = None,
        *,
        fragment_ids: Sequence[int] | None = None,
        index_uuid: str | None = None,
        **kwargs: Any,
    ) -> indices_op.Index:
        """Write one segment of an index over ``fragment_ids`` under ``_indices/<index_uuid>`` and
        return its :class:`~lance_ops.ops.indices.Index`, committing nothing (pylance's
        ``create_index_uncommitted``; vector types and the scalar types lance_ops builds). Merge
        with :meth:`merge_existing_index_segments`, publish with
        :meth:`commit_existing_index_segments`; see :mod:`lance_ops.ops.index_segments`."""
        from lance_ops.ops import index_segments  # noqa: PLC0415

        if not isinstance(index_type, str) and hasattr(index_type, "parameters"):
            kwargs = {**index_type.parameters, **kwargs}
            index_type = index_type.index_type
        if not isinstance(column, str):
            if len(column) != 1:
                raise InvalidArgumentError(f"create_index_uncommitted takes one column, got {list(column)}")
            column = column[0]
        if str(index_type).upper() not in index_segments.SEGMENT_SCALAR_TYPES:
            kwargs.update(metric=metric, num_partitions=num_partitions, num_sub_vectors=num_sub_vectors)
            kwargs.update(ivf_centroids=ivf_centroids, pq_codebook=pq_codebook)
        for accepted in ("storage_options", "filter_nan", "train", "accelerator", "index_cache_size"):
            kwargs.pop(accepted, None)
        return index_segments.create_index_uncommitted(
            self._files,
            column,
            index_type,
            fragment_ids=fragment_ids,
            index_uuid=index_uuid,
            name=name,
            replace=replace,
            **kwargs,
        )

    def merge_existing_index_segments(self, segments: Sequence[Any]) -> indices_op.Index:
        """Merge uncommitted segments of one column, type and model over disjoint fragments into
        one new segment, committing nothing (pylance's ``merge_existing_index_segments``)."""
        from lance_ops.ops.index_segments import merge_existing_index_segments  # noqa: PLC0415

        return merge_existing_index_segments(self._files, list(segments))

    def commit_existing_index_segments(
        self,
        index_name: str,
        column: str,
        segments: Sequence[Any],
        *,
        commit: commit_op.CommitOptions | None = None,
    ) -> LanceDataset:
        """Publish ``segments`` as the index ``index_name`` of ``column`` in one ``CreateIndex``
        (replacing an index of that name); returns this dataset at the new version (pylance's
        ``commit_existing_index_segments``)."""
        from lance_ops.ops.index_segments import commit_existing_index_segments  # noqa: PLC0415

        options = self._commit_options(commit=commit)
        self._adopt(*commit_existing_index_segments(self._files, index_name, column, list(segments), options))
        return self

    @classmethod
    def _requires_uncommitted_scalar_index(cls, index_type: Any) -> bool:
        """Whether a scalar build over ``fragment_ids`` must go through
        :meth:`create_index_uncommitted` (pylance 14's rule)."""
        from lance_ops.ops.index_segments import requires_uncommitted  # noqa: PLC0415

        return requires_uncommitted(index_type)

    @classmethod
    def _is_segment_native_scalar_index_type(cls, index_type: Any) -> bool:
        """Whether ``create_index_uncommitted`` builds ``index_type`` as a scalar segment."""
        from lance_ops.ops.index_segments import is_segment_native  # noqa: PLC0415

        return is_segment_native(index_type)

    def describe_indices(self) -> list[indices_op.IndexDescription]:
        """Every index of this version, by name, with its segments (pylance's ``describe_indices``)."""
        return indices_op.describe_indices(self._files)

    def list_indices(self) -> list[dict[str, Any]]:
        """One dict per index segment (pylance's ``list_indices``)."""
        return indices_op.list_indices(self._files)

    def index_statistics(self, index_name: str) -> dict[str, Any]:
        """pylance's deprecated ``index_statistics``: :meth:`LanceStats.index_stats`, with the
        ``DeprecationWarning`` pylance 14 gives."""
        warnings.warn(
            "LanceDataset.index_statistics() is deprecated, use LanceDataset.stats.index_stats() instead",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.stats.index_stats(index_name)

    @property
    def has_index(self) -> bool:
        """Whether this version has any index (pylance's ``has_index``)."""
        return bool(self.describe_indices())

    def prewarm_index(
        self,
        name: str,
        *,
        with_position: bool = False,
        index_segments: Iterable[str | uuid.UUID] | None = None,
    ) -> None:
        """Read index ``name`` whole into this dataset's index cache (see :mod:`lance_ops.session`)."""
        from lance_ops.session import prewarm_index  # noqa: PLC0415

        prewarm_index(self, name, with_position, index_segments)

    def session(self) -> Session:
        """The sizes of this dataset's index cache, shared with its checkouts (pylance's ``session()``)."""
        from lance_ops.session import Session  # noqa: PLC0415

        return Session(self._storage.index_cache)

    @property
    def _ds(self) -> DatasetInternals:
        """pylance's native dataset, as far as its tests read the index cache's statistics."""
        from lance_ops.session import DatasetInternals  # noqa: PLC0415

        return DatasetInternals(self._storage.index_cache)

    def drop_index(self, name: str, *, commit: commit_op.CommitOptions | None = None) -> None:
        """Drop the index ``name`` (every segment) by committing a ``CreateIndex`` that removes it;
        its files stay until cleanup. :class:`~lance_ops.errors.IndexNotFoundError` if none."""
        self._adopt(*indices_op.drop_index(self._files, name, self._commit_options(commit=commit)))

    def create_scalar_index(
        self,
        column: str,
        index_type: Any = "BTREE",
        name: str | None = None,
        *,
        replace: bool = True,
        fragment_ids: Sequence[int] | None = None,
        index_uuid: str | None = None,
        commit: commit_op.CommitOptions | None = None,
        **kwargs: Any,
    ) -> None:
        """Build a BTREE / BITMAP / LABEL_LIST / ZONEMAP / NGRAM / INVERTED index over every fragment
        and commit it (pylance's ``create_scalar_index``; see :mod:`lance_ops.ops.scalar_index`).
        With ``fragment_ids`` (INVERTED), stage the index of those fragments under ``index_uuid``
        for :meth:`merge_index_metadata` and commit nothing.
        ``index_type`` may be a :class:`lance_ops.indices.IndexConfig` (type and parameters), as in
        pylance. ``commit`` (:class:`~lance_ops.CommitOptions`) says how to commit."""
        from lance_ops.ops.scalar_index import create_scalar_index  # noqa: PLC0415

        if not isinstance(index_type, str) and hasattr(index_type, "parameters"):
            kwargs = {**index_type.parameters, **kwargs}
            index_type = index_type.index_type
        if fragment_ids is not None:  # one worker's part of a distributed build: nothing committed
            from lance_ops.ops.scalar_index import create_partial_scalar_index  # noqa: PLC0415

            create_partial_scalar_index(
                self._files, column, index_type, name, fragment_ids, index_uuid, kwargs
            )
            return
        options = self._commit_options(commit=commit)
        self._adopt(*create_scalar_index(self._files, column, index_type, name, replace, options, kwargs))

    def merge_index_metadata(
        self,
        index_uuid: str,
        index_type: str,
        batch_readhead: int | None = None,
        progress_callback: Any = None,
    ) -> None:
        """Merge the partials ``create_scalar_index(..., fragment_ids=, index_uuid=)`` staged into one
        index's files, committing nothing (pylance's ``merge_index_metadata``; INVERTED). Publish it
        with ``LanceDataset.commit(uri, LanceOperation.CreateIndex([Index(uuid=index_uuid, ...)],
        []), read_version=...)``. ``batch_readhead`` and ``progress_callback`` are accepted."""
        from lance_ops.ops.scalar_index import merge_index_metadata  # noqa: PLC0415

        merge_index_metadata(self._files, index_uuid, index_type)

    @property
    def optimize(self) -> DatasetOptimizer:
        """Maintenance operations (``compact_files``), as pylance's ``ds.optimize``."""
        from lance_ops.optimize import DatasetOptimizer  # noqa: PLC0415 (optimize imports this module)

        return DatasetOptimizer(self)

    def restore(
        self,
        *,
        transaction_properties: Mapping[str, str] | None = None,
        commit: commit_op.CommitOptions | None = None,
    ) -> None:
        """Make this (older) version the latest again: commits ``Restore``; this object becomes it.

        ``transaction_properties`` (an extension over pylance) are recorded in the transaction;
        ``commit`` (:class:`~lance_ops.CommitOptions`) says how to commit, as the keyword does."""
        options = self._commit_options(transaction_properties, commit)
        self._adopt(*history_op.restore(self._storage, self.version, options))

    def cleanup_old_versions(
        self,
        older_than: dt.timedelta | dt.datetime | None = None,
        retain_versions: int | None = None,
        *,
        delete_unverified: bool = False,
        error_if_tagged_old_versions: bool = True,
        dry_run: bool = False,
        progress: ProgressCallback | None = None,
        delete_rate_limit: int | None = None,
        versions: Sequence[int] | None = None,
        delete_concurrency: int | None = None,
    ) -> cleanup_op.CleanupStats:
        """Remove versions older than ``older_than`` (default two weeks unless ``retain_versions``
        is given) or outside the ``retain_versions`` newest, and every file no kept version needs.

        The latest version, this version and newer ones, and tagged versions are kept; files no
        version references are removed only when older than 7 days (or ``delete_unverified``).
        ``dry_run`` reports what would be removed (``CleanupStats.paths``) and removes nothing.
        ``progress`` hears of every file removed. As in pylance, ``versions`` limits the cleanup to
        those versions, ``delete_rate_limit`` caps deletions per second and ``delete_concurrency``
        the deletions in flight (default 8). See :mod:`lance_ops.ops.cleanup`.
        """
        policy = cleanup_op.CleanupPolicy.parse(
            older_than,
            retain_versions,
            self.latest_version if retain_versions is not None else self.version,  # one listing less
            delete_unverified=delete_unverified,
            error_if_tagged_old_versions=error_if_tagged_old_versions,
            dry_run=dry_run,
            versions=versions,
            delete_rate_limit=delete_rate_limit,
            delete_concurrency=delete_concurrency,
        )
        return cleanup_op.cleanup_old_versions(
            self._storage.store, self._storage.root, self.version, policy, progress
        )

    def explain_cleanup_old_versions(
        self,
        older_than: dt.timedelta | dt.datetime | None = None,
        retain_versions: int | None = None,
        *,
        delete_unverified: bool = False,
        error_if_tagged_old_versions: bool = True,
        delete_rate_limit: int | None = None,
        versions: Sequence[int] | None = None,
        include_files: bool = False,
        max_files: int = 1000,
    ) -> cleanup_op.CleanupExplanation:
        """What :meth:`cleanup_old_versions` with these arguments would remove (pylance's call);
        nothing is removed. ``include_files`` lists the files (at most ``max_files``)."""
        policy = cleanup_op.CleanupPolicy.parse(
            older_than,
            retain_versions,
            self.latest_version if retain_versions is not None else self.version,  # one listing less
            delete_unverified=delete_unverified,
            error_if_tagged_old_versions=error_if_tagged_old_versions,
            dry_run=True,
            versions=versions,
            delete_rate_limit=delete_rate_limit,
        )
        return cleanup_op.explain_cleanup(
            self._storage.store, self._storage.root, self.version, policy, include_files, max_files
        )

    def _commit_options(
        self,
        transaction_properties: Mapping[str, str] | None = None,
        commit: commit_op.CommitOptions | None = None,
    ) -> commit_op.CommitOptions:
        """How this dataset's operations commit: ``commit`` (a caller's
        :class:`~lance_ops.CommitOptions`) with ``transaction_properties`` joined in, through this
        dataset's storage options and manifest store (a different store in ``commit`` is refused)."""
        return commit_op.CommitOptions.of(
            commit,
            storage_options=self._storage.storage_options,
            manifest_store=self._manifest_store,
            transaction_properties=transaction_properties,
            commit_lock=self._commit_lock,
        )

    def _adopt(self, manifest: Manifest, transaction: Transaction) -> None:
        """Become the version ``manifest`` (written by one of our own commits)."""
        self._manifest = manifest
        self._unread = None
        self._transaction = transaction
        self.__dict__.pop("_files", None)

    def validate(self) -> None:
        """Check this version against its files, as pylance's ``validate``: fragment ids are unique,
        every data file opens and holds the fragment's rows, and deletion files read back within
        them. Raises :class:`~lance_ops.errors.MissingFileError` or
        :class:`~lance_ops.errors.CorruptFileError` at the first fault."""
        files = self._files
        seen: set[int] = set()
        for metadata in self.manifest.fragments:
            if metadata.id in seen:
                raise CorruptFileError(self.uri, f"fragment id {metadata.id} appears twice")
            seen.add(metadata.id)
            fragment = files.fragment(metadata)
            for data_file in metadata.files:
                rows = files.open_file(data_file).num_rows
                if metadata.physical_rows and rows != metadata.physical_rows:
                    raise CorruptFileError(
                        files.file_uri(data_file), f"holds {rows} rows, its fragment {metadata.physical_rows}"
                    )
            fragment.deleted  # noqa: B018 (reading the deletion file checks it)

    @staticmethod
    def drop(
        base_uri: str | os.PathLike[str],
        storage_options: Mapping[str, str] | None = None,
        ignore_not_found: bool | None = None,
    ) -> None:
        """Remove the dataset at ``base_uri``: every file below it (pylance's ``LanceDataset.drop``).

        Nothing there raises :class:`~lance_ops.errors.DatasetNotFoundError` (an ``OSError``)
        unless ``ignore_not_found``; files without a version manifest are not a dataset root and
        are left alone (:class:`~lance_ops.errors.InvalidArgumentError`, a ``ValueError``), as
        pylance 14 refuses them.
        """
        storage = StorageContext.open(os.fspath(base_uri), dict(storage_options) if storage_options else None)
        found = storage.store.walk(storage.root)
        if not found:
            if ignore_not_found:
                return
            raise DatasetNotFoundError(f"no dataset to drop at {base_uri}")
        if not list_versions(storage.store, storage.root):
            raise InvalidArgumentError(
                f"Refusing to drop {base_uri}: no Lance manifest under '_versions', not a dataset root"
            )
        for info in found:
            storage.store.delete(info.path)
        storage.store.remove_directories(storage.root)

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
        max_retries: int = _DEFAULT_MAX_RETRIES,
        *,
        commit_message: str | None = None,
        enable_stable_row_ids: bool | None = None,
        transaction_properties: Mapping[str, str] | None = None,
        data_storage_version: str | None = None,
        manifest_store: ExternalManifestStore | None = None,
        commit: commit_op.CommitOptions | None = None,
    ) -> LanceDataset:
        """Commit ``operation`` (or a prepared transaction) to the dataset at ``base_uri``.

        ``enable_stable_row_ids``, ``enable_v2_manifest_paths`` and ``data_storage_version`` only
        matter when the commit creates the dataset (the file version defaults to that of the
        operation's data files). ``commit_lock(version)`` is a context manager guarding the claim
        of a version, for stores without an atomic create. ``commit``
        (:class:`~lance_ops.CommitOptions`) gives the same settings as one object; the keywords
        are its pylance-shaped form (a setting given both ways differently is refused).
        """
        options = commit_op.CommitOptions.of(
            commit,
            read_version=read_version,
            storage_options=storage_options,
            commit_lock=commit_lock,
            max_retries=None if max_retries == _DEFAULT_MAX_RETRIES else max_retries,
            commit_message=commit_message,
            transaction_properties=transaction_properties,
            enable_v2_manifest_paths=enable_v2_manifest_paths,
            enable_stable_row_ids=enable_stable_row_ids or None,
            data_storage_version=data_storage_version,
            detached=detached or None,
            manifest_store=manifest_store,
        )
        commit_op.check_read_version(operation, options.read_version)
        storage, options = _commit_target(base_uri, options)
        manifest, transaction = commit_op.commit(storage, operation, options)
        return LanceDataset._from_manifest(storage, manifest, transaction, options.manifest_store)

    @staticmethod
    def commit_batch(
        dest: str | os.PathLike[str] | LanceDataset,
        transactions: Sequence[Transaction],
        commit_lock: Callable[[int], AbstractContextManager[object]] | None = None,
        storage_options: Mapping[str, str] | None = None,
        enable_v2_manifest_paths: bool | None = None,
        detached: bool = False,
        max_retries: int = _DEFAULT_MAX_RETRIES,
        *,
        commit: commit_op.CommitOptions | None = None,
    ) -> BulkCommitResult:
        """Commit several ``Append`` transactions as one version, as pylance 14's ``commit_batch``:
        one ``Append`` of all their fragments in order, on the first one's ``read_version``, without
        their properties. Returns ``{"dataset": ..., "merged": Transaction}``. No transactions, or
        any other operation, raise :class:`~lance_ops.errors.BatchCommitError` (an ``OSError``).
        """
        transactions = list(transactions)
        if not transactions:
            raise BatchCommitError("No transactions to commit")
        if not all(isinstance(t.operation, Append) for t in transactions):
            raise BatchCommitError("Only append transactions are supported in batch commits")
        fragments = [f for t in transactions for f in cast(Append, t.operation).fragments]
        merged = Transaction(transactions[0].read_version, LanceOperation.Append(fragments))
        ds = LanceDataset.commit(
            dest,
            merged,
            commit_lock=commit_lock,
            storage_options=storage_options,
            enable_v2_manifest_paths=enable_v2_manifest_paths,
            detached=detached,
            max_retries=max_retries,
            commit=commit,
        )
        return BulkCommitResult(dataset=ds, merged=merged)

    def __repr__(self) -> str:
        return f"LanceDataset(uri={self.uri!r}, version={self.version})"


def _is_values(transforms: Any) -> bool:
    """Whether ``add_columns`` was given the new values rather than a way to compute them."""
    if isinstance(transforms, Mapping | pa.Field | pa.Schema) or callable(transforms):
        return False
    if isinstance(transforms, Sequence) and transforms and all(isinstance(f, pa.Field) for f in transforms):
        return False
    return True


def dataset(
    uri: str | os.PathLike[str],
    version: int | str | None = None,
    storage_options: Mapping[str, str] | None = None,
    manifest_store: ExternalManifestStore | None = None,
    *,
    asof: dt.datetime | str | None = None,
    default_scan_options: Mapping[str, Any] | None = None,
    read_params: Mapping[str, Any] | None = None,
    commit_lock: Callable[[int], AbstractContextManager[object]] | None = None,
    index_cache_size_bytes: int | None = None,
    index_cache_size: int | None = None,
) -> LanceDataset:
    """Open a dataset (latest version, a version number or a tag name).

    The returned object has an index cache of its own (shared with the versions checked out from
    it) of ``index_cache_size_bytes`` (default 1 GiB; pylance's deprecated ``index_cache_size``
    counts 20 MiB an entry), see :mod:`lance_ops.session`.

    ``default_scan_options`` (pylance's) are scanner arguments every scan of the returned object
    starts from (explicit arguments win); ``ds.schema`` then is what such a scan returns.
    ``read_params`` (pylance's file reader tuning, e.g. ``cache_repetition_index``) is accepted and
    changes nothing: lance-ops' reader has no such switches. ``commit_lock(version)`` (pylance's)
    guards every commit made through the returned object and the versions checked out from it.

    With ``manifest_store`` (e.g. :class:`SqliteManifestStore`), versions are committed and
    repaired through that external store (:mod:`lance_ops.table.manifest_store`); an
    ``s3+ddb://bucket/ds?ddbTableName=T`` URI uses pylance's DynamoDB table ``T``
    (:mod:`lance_ops.table.dynamodb_store`). Without a
    ``version``, ``asof`` (a datetime or timestamp string) opens the newest version committed before
    it, as pylance does (:func:`lance_ops.ops.history.version_as_of`).
    """
    if read_params is not None and not isinstance(read_params, Mapping):
        raise TypeError(f"read_params must be a dict, not {type(read_params).__name__}")
    ds = LanceDataset(uri, version, storage_options, manifest_store)
    if index_cache_size is not None:
        warnings.warn(
            "The 'index_cache_size' parameter is deprecated. Use 'index_cache_size_bytes' instead "
            "(index_cache_size counts 20 MiB an entry).",
            DeprecationWarning,
            stacklevel=2,
        )
        if index_cache_size_bytes is None:
            index_cache_size_bytes = index_cache_size * BYTES_PER_CACHE_ENTRY
    if index_cache_size_bytes is not None:
        ds.storage.index_cache.resize(index_cache_size_bytes)
    if version is None and asof is not None:
        ds = ds.checkout_version(history_op.version_as_of(ds.storage.store, ds.storage.root, asof))
    if default_scan_options:
        ds._default_scan_options = MappingProxyType(dict(default_scan_options))
    if commit_lock is not None:
        if not callable(commit_lock):
            raise ArgumentTypeError(f"commit_lock must be a function, got {type(commit_lock).__name__}")
        ds._commit_lock = commit_lock
    return ds


def _accepts_data_obj(write: Callable[..., LanceDataset]) -> Callable[..., LanceDataset]:
    """pylance names ``write_dataset``'s first parameter ``data_obj``: take that keyword as well."""

    @wraps(write)
    def wrapper(*args: Any, **kwargs: Any) -> LanceDataset:
        if "data_obj" in kwargs:
            if args or "data" in kwargs:
                raise ArgumentTypeError("write_dataset() got its data twice (data and data_obj)")
            args = (kwargs.pop("data_obj"),)
        return write(*args, **kwargs)

    return wrapper


def _commit_target(
    target: str | os.PathLike[str] | LanceDataset, options: commit_op.CommitOptions
) -> tuple[StorageContext, commit_op.CommitOptions]:
    """The storage to commit to and ``options`` completed: an open dataset lends its storage
    options, manifest store and commit lock unless others are given (and its own storage when no options are:
    a memory:// dataset's uri alone names no store); an ``s3+ddb://`` URI its DynamoDB store."""
    if isinstance(target, LanceDataset):
        given = options
        options = replace(
            given,
            storage_options=target.storage_options
            if given.storage_options is None
            else given.storage_options,
            manifest_store=target.manifest_store if given.manifest_store is None else given.manifest_store,
            commit_lock=target._commit_lock if given.commit_lock is None else given.commit_lock,
        )
        uri = target.uri
        storage = (
            target.storage
            if given.storage_options is None
            else StorageContext.open(uri, options.storage_options)
        )
    else:
        uri = os.fspath(target)
        storage = StorageContext.open(uri, options.storage_options)
    if options.manifest_store is None:
        options = replace(options, manifest_store=manifest_store_for_uri(uri, options.storage_options))
    return storage, options


@_accepts_data_obj
def write_dataset(
    data: Any,
    uri: str | os.PathLike[str] | LanceDataset,
    schema: pa.Schema | None = None,
    mode: str = "create",
    *,
    max_rows_per_file: int = 1024 * 1024,
    max_rows_per_group: int = 1024,
    max_bytes_per_file: int | None = None,
    commit_lock: Callable[[int], AbstractContextManager[object]] | None = None,
    data_storage_version: str | None = None,
    use_legacy_format: bool | None = None,
    enable_stable_row_ids: bool = False,
    enable_v2_manifest_paths: bool = True,
    auto_cleanup_options: Mapping[str, int] | None = None,
    storage_options: Mapping[str, str] | None = None,
    commit_message: str | None = None,
    transaction_properties: Mapping[str, str] | None = None,
    progress: ProgressCallback | FragmentWriteProgress | None = None,
    manifest_store: ExternalManifestStore | None = None,
    encoding_plan: EncodingPlan | None = None,
    page_statistics: bool | None = None,
    compression: str | None = None,
    fill_missing: str | None = None,
    commit: commit_op.CommitOptions | None = None,
) -> LanceDataset:
    """Write ``data`` as a new dataset (``create``), new rows (``append``) or a new content (``overwrite``).

    ``data_storage_version`` defaults to ``"stable"`` (2.2) for new datasets; appends always use the
    dataset's version and overwrites keep it unless one is given. ``progress`` (a callable taking
    :class:`~lance_ops.progress.ProgressEvent`\\ s, or pylance's ``FragmentWriteProgress``) hears
    of every data file written (:mod:`lance_ops.progress`). ``encoding_plan``
    (:func:`lance_ops.ops.encodings.profile`) fixes per-column encodings and is stored in the
    dataset's config by creates / overwrites; appends follow the stored plan by default.
    ``uri`` may be an open dataset (its location is written to, through its manifest store).
    ``auto_cleanup_options`` (``{"interval": N, "older_than_seconds": S}``) turns on automatic
    cleanup for a new dataset
    (:mod:`lance_ops.ops.auto_cleanup`). ``use_legacy_format=True`` is pylance's older spelling of
    ``data_storage_version="legacy"`` (0.1 files). ``page_statistics=False`` writes
    data files without page statistics (default: with them, unless an append's dataset config sets
    ``lance-ops.page-statistics`` to ``false``). ``compression="auto"`` writes smaller data files
    that pylance still reads (``LanceFileWriter``'s option; also ``"zstd"``, ``"lz4"``, ``"fsst"``,
    ``"none"`` for every column); a create / overwrite stores it in the dataset's config
    (``lance-ops.compression``) and appends follow it unless given their own.

    Appended data must fit the dataset (:mod:`lance_ops.fragment.conform`), else
    :class:`~lance_ops.errors.WriteSchemaError` is raised and nothing is written: columns are
    matched by name and cast; nulls in non-nullable columns, values that do not convert and columns
    the dataset lacks are refused. ``fill_missing`` (lance-ops' extension) governs columns the data
    lacks: None fills nullable ones with nulls and refuses non-nullable ones; ``"compute"`` also
    computes a column added by a SQL expression (``add_columns``) from that expression; ``"null"``
    is the same without computing; ``"error"`` refuses any missing column.

    ``commit`` (:class:`~lance_ops.CommitOptions`) gives how to commit as one object (storage
    options, commit message, transaction properties, manifest store, commit lock, the new
    dataset's settings); the keywords are its pylance-shaped form (a setting given both ways
    differently is refused).
    """
    if use_legacy_format:  # pylance's deprecated spelling of data_storage_version="legacy"
        data_storage_version = "legacy"
    auto_cleanup = None if auto_cleanup_options is None else AutoCleanup.from_options(auto_cleanup_options)
    commit_options = commit_op.CommitOptions.of(
        commit,
        storage_options=storage_options,
        commit_message=commit_message,
        transaction_properties=transaction_properties,
        enable_v2_manifest_paths=None if enable_v2_manifest_paths else False,
        enable_stable_row_ids=enable_stable_row_ids or None,
        data_storage_version=data_storage_version,
        manifest_store=manifest_store,
        commit_lock=commit_lock,
        new_dataset_config=None if auto_cleanup is None else auto_cleanup.to_config(),
    )
    storage, commit_options = _commit_target(uri, commit_options)
    write_options = WriteOptions(
        max_rows_per_file=max_rows_per_file,
        max_rows_per_group=max_rows_per_group,
        max_bytes_per_file=max_bytes_per_file or DEFAULT_MAX_BYTES_PER_FILE,
        storage_options=commit_options.storage_options,
        encoding_plan=encoding_plan,
        page_statistics=page_statistics,
        compression=check_writer_compression(compression),
    )
    if commit_options.manifest_store is not None:
        repair(storage.store, storage.root, commit_options.manifest_store)
    manifest, transaction = write_op.write(
        data, storage, mode, schema, write_options, commit_options, as_callback(progress), fill_missing
    )
    return LanceDataset._from_manifest(storage, manifest, transaction, commit_options.manifest_store)
