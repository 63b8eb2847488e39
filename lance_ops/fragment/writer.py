"""Writing fragments: the executor side of a dataset write (data files only, no commit).

``write_fragments(data, uri)`` streams the input into ``{uri}/data/{name}.lance`` files of at most
``max_rows_per_file`` rows and returns one
:class:`FragmentMetadata` per file with id 0 ("assigned at commit"). A driver then commits them
with ``LanceDataset.commit(uri, LanceOperation.Append(fragments))`` (or ``Overwrite``).
A file is also closed after the input batch with which the bytes it has flushed reach
``max_bytes_per_file``, as pylance does (columns are flushed in ~8 MiB pages, so small caps do
not make tiny files). FragmentMetadata is picklable and has ``to_json`` / ``from_json`` for
shipping between processes.
:func:`write_data_file` adds one data file to an *existing* fragment (new columns, re-typed columns).

Field ids: appending to an existing dataset reuses the dataset's ids (matched by column name), read
from its latest manifest unless the caller passes them as ``fields=`` (a Spark driver does, so its
tasks never read the manifest); a new dataset (or ``mode="overwrite"``) numbers the schema 0, 1,
2, ... in pre-order. Each ``DataFile.fields`` lists the ids that own columns: every field for 2.0
files, only leaf fields for 2.1+, with ``column_indices`` 0..n-1.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

import pyarrow as pa

from lance_ops.encoding.api import FileVersion
from lance_ops.encoding.legacy.v0_1.encoder import DictionaryCollector
from lance_ops.encoding.plan import EncodingPlan
from lance_ops.errors import (
    ArgumentTypeError,
    DatasetNotFoundError,
    InvalidArgumentError,
    SchemaError,
    UnsupportedFeatureError,
    WriteSchemaError,
)
from lance_ops.file import LanceFileWriter
from lance_ops.file.legacy_v0_1 import LEGACY_FOOTER_VERSION, LegacyFileWriter
from lance_ops.file.writer import as_table
from lance_ops.fragment.conform import Conform
from lance_ops.fragment.options import (
    DEFAULT_MAX_BYTES_PER_FILE,
    DEFAULT_MAX_ROWS_PER_FILE,
    DEFAULT_MAX_ROWS_PER_GROUP,
    WriteOptions,
)
from lance_ops.io.context import Location, StorageContext
from lance_ops.progress import WRITE, Tracker, as_callback
from lance_ops.table.blob import (
    BLOB_V2_EXTENSION,
    BlobV2Writer,
    blob_v2_schema,
    contains_blob_v2,
    file_field,
)
from lance_ops.table.commit import load_manifest
from lance_ops.table.manifest import DataFile, DataFragment
from lance_ops.table.naming import DATA_DIR, child_uri, data_file_name
from lance_ops.table.schema import EXPRESSION_KEY, LanceSchema

FragmentMetadata = DataFragment


class OpenDataset(Protocol):
    """An opened dataset (``LanceDataset``, a layer above): where its files are."""

    @property
    def storage(self) -> StorageContext: ...


# A Lance schema, or (as older callers pass) its ``lance.file.Field`` messages.
FieldsLike = LanceSchema | Sequence[Any]

__all__ = [
    "FragmentMetadata",
    "WriteOptions",
    "write_data_file",
    "input_rows",
    "write_fragments",
    "write_new_fragments",
]


def to_reader(
    data: Any, schema: pa.Schema | None = None, fill_missing: str | None = None
) -> pa.RecordBatchReader:
    """Normalise write input to a reader, accepting what pylance's ``write_dataset`` accepts.

    Table, RecordBatch, RecordBatchReader, pandas DataFrame, a ``dict`` of column lists, a list of
    row dicts, an object with ``scanner()`` (a ``pyarrow.dataset.Dataset``, a ``LanceDataset``), a
    scanner (``pyarrow.dataset.Scanner``, ``LanceScanner``), anything exporting an Arrow C stream
    (``__arrow_c_stream__``), or an iterable of record batches (``schema`` required when it may
    be empty). With a ``schema`` the batches are conformed to it (:class:`Conform`: columns by
    name, cast, missing ones filled as ``fill_missing`` says, nulls in non-nullable fields refused).
    """
    if isinstance(data, Mapping):
        data = _typed(lambda hint: pa.Table.from_pydict(dict(data), schema=hint), schema, list(data))
    elif isinstance(data, list) and data and all(isinstance(row, Mapping) for row in data):
        names = list(dict.fromkeys(name for row in data for name in row))
        data = _typed(lambda hint: pa.Table.from_pylist(data, schema=hint), schema, names)
    elif hasattr(data, "scanner") and callable(data.scanner):
        data = data.scanner().to_reader()
    elif not isinstance(data, pa.Table | pa.RecordBatch) and callable(getattr(data, "to_reader", None)):
        data = data.to_reader()
    if isinstance(data, pa.RecordBatchReader):
        reader = data
    elif isinstance(data, (pa.Table, pa.RecordBatch)) or type(data).__module__.startswith("pandas"):
        frame = data
        table = (
            _typed(lambda hint: as_table(frame, hint), schema, [str(c) for c in frame.columns])
            if type(frame).__module__.startswith("pandas")
            else as_table(frame, None)
        )
        reader = pa.RecordBatchReader.from_batches(table.schema, table.to_batches())
    elif hasattr(data, "__arrow_c_stream__"):
        reader = pa.RecordBatchReader.from_stream(data)
    elif isinstance(data, Iterable):
        batches = iter(data)
        first = next(batches, None)
        if first is None:
            if schema is None:
                raise SchemaError("an empty iterable of batches needs an explicit schema")
            return pa.RecordBatchReader.from_batches(schema, [])
        if not isinstance(first, pa.RecordBatch):
            raise ArgumentTypeError(
                f"an iterable of data must yield pyarrow RecordBatches, not {type(first).__name__}"
            )
        reader = pa.RecordBatchReader.from_batches(first.schema, _chain(first, batches))
    else:
        raise ArgumentTypeError(
            f"cannot write {type(data).__name__}; expected Arrow data or a pandas DataFrame"
        )
    return reader if schema is None else Conform(schema, fill_missing).reader(reader)


def _typed(
    build: Callable[[pa.Schema | None], pa.Table], schema: pa.Schema | None, names: list[str]
) -> pa.Table:
    """Python or pandas input as a table, typed by the fields of ``schema`` it names (the others are
    filled later). Input naming a column ``schema`` lacks, or values of other types, are converted
    untyped so that the conform step reports them clearly."""
    if schema is None or any(schema.get_field_index(n) < 0 for n in names):
        return build(None)
    hint = pa.schema([schema.field(n) for n in names], metadata=schema.metadata)
    try:
        return build(hint)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError):
        return build(None)


def _chain(first: pa.RecordBatch, rest: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield first
    yield from rest


def new_dataset_reader(
    data: Any, schema: pa.Schema | None, data_storage_version: str, fill_missing: str | None = None
) -> tuple[pa.RecordBatchReader, LanceSchema]:
    """``data`` and its schema (fresh ids) for a new dataset (create, overwrite) of that file version.

    In 2.2 datasets, blob ``large_binary`` columns become ``lance.blob.v2`` columns like pylance's.
    """
    reader = to_reader(data, schema, fill_missing)
    _check_utf8_metadata(reader.schema)
    target = blob_v2_schema(reader.schema, FileVersion.parse(data_storage_version))
    if schema is None or target is not reader.schema:
        reader = Conform(target).reader(reader)
    return reader, LanceSchema.from_arrow(target)


def _check_utf8_metadata(schema: pa.Schema) -> None:
    """Refuse schema or field metadata that is not UTF-8 text, as pylance does: the manifest keeps
    metadata as strings (binary values should be base64-encoded first)."""
    for key, value in (schema.metadata or {}).items():
        try:
            key.decode()
        except UnicodeDecodeError as exc:
            raise InvalidArgumentError(f"Parser error: invalid utf-8 in schema metadata key {key!r}") from exc
        try:
            value.decode()
        except UnicodeDecodeError as exc:
            raise InvalidArgumentError(
                f"Metadata key {key!r} is not valid utf8. Consider base64 encode for generic binary metadata."
            ) from exc
    pending = list(schema)
    while pending:
        field = pending.pop()
        for item in (part for pair in (field.metadata or {}).items() for part in pair):
            try:
                item.decode()
            except UnicodeDecodeError as exc:
                raise InvalidArgumentError(
                    f"Parser error: invalid utf-8 in the metadata of field {field.name!r}: {item!r}"
                ) from exc
        pending.extend(field.flatten() if pa.types.is_struct(field.type) else [])
        if hasattr(field.type, "value_field"):
            pending.append(field.type.value_field)


def data_file_fields(fields: LanceSchema, version: FileVersion) -> tuple[int, ...]:
    """Field ids listed in ``DataFile.fields`` for a file of ``version`` holding ``fields``.

    Legacy and 2.0 files give every field a column; 2.1+ files only the leaves, a
    ``lance.blob.v2`` field being one leaf with its own id (its file column holds descriptions).
    """
    if version in (FileVersion.V0_1, FileVersion.V2_0):
        return tuple(f.id for f in fields)
    blob_v2 = {f.id for f in fields if f.extension_name == BLOB_V2_EXTENSION}
    leaves = set(fields.leaf_ids)
    return tuple(f.id for f in fields if f.id in blob_v2 or (f.id in leaves and f.parent_id not in blob_v2))


def _dataset_schema(storage: StorageContext) -> tuple[LanceSchema, str] | None:
    """``(schema, data storage version)`` of the dataset at ``storage``, or None."""
    try:
        manifest = load_manifest(storage.store, storage.root).manifest
    except DatasetNotFoundError:
        return None
    return manifest.schema, manifest.data_storage_version


def _append_version(dataset_version: str, asked: str | None) -> str:
    """The file version of data files appended to a dataset of ``dataset_version``: the asked
    version within the dataset's family (0.1 or 2.x), pylance's refusal across families."""
    if asked is None:
        return dataset_version
    ours, theirs = FileVersion.parse(asked), FileVersion.parse(dataset_version)
    if (ours is FileVersion.V0_1) != (theirs is FileVersion.V0_1):
        raise WriteSchemaError(
            f"Invalid user input: Cannot append data files in version {ours} to a dataset with "
            f"default version {theirs}: V1 and V2 storage versions cannot be mixed"
        )
    return str(ours)


def dataset_fields(
    uri: str | os.PathLike[str], storage_options: Mapping[str, str] | None = None
) -> LanceSchema | None:
    """The schema (with field ids) of the dataset at ``uri``, or None where there is none yet."""
    existing = _dataset_schema(StorageContext.open(uri, storage_options))
    return None if existing is None else existing[0]


def _without_expression(field: pa.Field) -> pa.Field:
    metadata = field.metadata or {}
    if EXPRESSION_KEY.encode() not in metadata:
        return field
    kept = {k: v for k, v in metadata.items() if k != EXPRESSION_KEY.encode()}
    return field.with_metadata(kept) if kept else field.remove_metadata()


def _as_schema(fields: FieldsLike) -> LanceSchema:
    return fields if isinstance(fields, LanceSchema) else LanceSchema.from_pb(fields)


class _FileSink:
    """Writes batches into data files, rolling over by the row limit (batches are split at it) and,
    after a batch, by the bytes the file has flushed (pylance's ``tell()`` rule)."""

    def __init__(
        self,
        storage: StorageContext,
        schema: pa.Schema,
        fields: LanceSchema,
        options: WriteOptions,
        progress: Tracker | None = None,
    ) -> None:
        self.storage, self.schema, self.options = storage, schema, options
        self.progress = progress or Tracker(None, WRITE, None, "rows")
        self.version = FileVersion.parse(options.data_storage_version)
        # Every file of a legacy write shares the dataset's dictionaries (pylance reads them from
        # the manifest file): an existing dataset's are fixed, a new one's collected here.
        self._dictionaries = DictionaryCollector(
            {f.id: (f.name, f.dictionary_values) for f in fields if f.dictionary_values is not None}
        )
        self.blob_v2 = [contains_blob_v2(field) for field in schema]
        if any(self.blob_v2) and self.version.value < FileVersion.V2_2.value:
            raise UnsupportedFeatureError(f"lance.blob.v2 columns need Lance 2.2 files, not {self.version}")
        # A recorded SQL expression describes the dataset's column, not a data file's: files are
        # written without it, as pylance writes them.
        self.file_schema = pa.schema(
            [_without_expression(file_field(field)) for field in schema],
            metadata=schema.metadata,
        )
        self.fields = fields
        self.file_fields = fields.without_expressions()
        self.field_ids = data_file_fields(fields, self.version)
        top = {f.name: f.id for f in fields if f.parent_id == -1}
        self._top_ids = [top.get(name) for name in schema.names]
        self._nulls: dict[int, int] = {}
        self.written: list[tuple[DataFile, int]] = []
        self._writer: LanceFileWriter | LegacyFileWriter | None = None
        self._blobs: BlobV2Writer | None = None
        self._name = ""
        self._rows = 0

    def write_all(self, batches: Iterable[pa.RecordBatch]) -> list[tuple[DataFile, int]]:
        """Write every batch; returns ``(data file, rows)`` per file. Aborts the open file on error."""
        try:
            for batch in batches:
                self._write(batch)
            self._close()
        except BaseException:
            if self._writer is not None:
                self._writer.abort()
                self._writer = None
            if self._blobs is not None:
                self._blobs.abort()
            raise
        return self.written

    def _write(self, batch: pa.RecordBatch) -> None:
        offset = 0
        while offset < batch.num_rows:
            if self._writer is None:
                self._open()
            take = min(batch.num_rows - offset, self.options.max_rows_per_file - self._rows)
            piece = batch.slice(offset, take)
            assert self._writer is not None
            self._writer.write_batch(self._file_batch(piece))
            for field_id, column in zip(self._top_ids, piece.columns, strict=True):
                if field_id is not None:
                    self._nulls[field_id] = self._nulls.get(field_id, 0) + column.null_count
            self._rows += take
            offset += take
            if (
                self._rows >= self.options.max_rows_per_file
                or self._writer.bytes_written >= self.options.max_bytes_per_file
            ):
                self._close()

    def _file_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """``batch`` as the data file stores it: blob v2 columns as descriptions (blobs stored)."""
        if self._blobs is None:
            return batch
        columns = [
            self._blobs.store(column, field) if blob else column
            for column, field, blob in zip(batch.columns, self.schema, self.blob_v2, strict=True)
        ]
        return pa.RecordBatch.from_arrays(columns, schema=self.file_schema)

    def _open(self) -> None:
        self._name = data_file_name()
        plan = self.options.encoding_plan
        writer: LanceFileWriter | LegacyFileWriter
        if self.version is FileVersion.V0_1:
            self._writer = LegacyFileWriter(
                self.storage.path(DATA_DIR, self._name),
                self.file_schema,
                max_rows_per_group=self.options.max_rows_per_group,
                lance_fields=self.file_fields.to_pb(),
                store=self.storage.store,
                dictionaries=self._dictionaries,
            )
            self._opened()
            return
        writer = LanceFileWriter(
            self.storage.path(DATA_DIR, self._name),
            self.file_schema if plan is None else plan.apply(self.file_schema),
            version=self.version,
            store=self.storage.store,
            page_statistics=self.options.writes_page_statistics,
            compression=self.options.compression,
            # the dataset's own field messages (ids, dictionary markers), as pylance's data files hold
            lance_fields=None if any(self.blob_v2) else self.file_fields.to_pb(),
        )
        self._writer = writer
        if any(self.blob_v2):
            self._blobs = BlobV2Writer(
                child_uri(self.storage.uri, DATA_DIR, self._name),
                lambda buffer: writer.write_external([buffer.data])[0],
                self.storage,
            )
        self._opened()

    def _opened(self) -> None:
        self._rows = 0
        self._nulls = {}
        # As pylance's begin: the fragment names the data file it is about to write, no rows yet.
        opened = DataFragment(id=0, files=(self._data_file(0),), physical_rows=0)
        self.progress.advance(0, f"writing {DATA_DIR}/{self._name}", opened)

    def _data_file(self, size: int) -> DataFile:
        legacy = self.version is FileVersion.V0_1
        major, minor = LEGACY_FOOTER_VERSION if legacy else self.version.value
        return DataFile(
            path=self._name,
            fields=self.field_ids,
            # pylance lists no column indices for 0.1 files, and their footer version (0.2)
            column_indices=() if legacy else tuple(range(len(self.field_ids))),
            file_major_version=major,
            file_minor_version=minor,
            file_size_bytes=size,
            null_counts=dict(self._nulls),
        )

    def _close(self) -> None:
        if self._writer is None:
            return
        if self._blobs is not None:
            self._blobs.close()
        self._writer.close()
        self._blobs = None
        data_file = self._data_file(self._writer.bytes_written)
        self.written.append((data_file, self._rows))
        self._writer = None
        fragment = DataFragment(id=0, files=(data_file,), physical_rows=self._rows)
        self.progress.advance(self._rows, f"wrote {DATA_DIR}/{self._name} ({self._rows} rows)", fragment)


def write_new_fragments(
    reader: pa.RecordBatchReader,
    storage: StorageContext,
    fields: LanceSchema,
    options: WriteOptions,
    progress: Tracker | None = None,
) -> list[FragmentMetadata]:
    """Write ``reader`` (already shaped like ``fields``) as new fragments (id 0) of the dataset at
    ``storage``.

    ``progress`` reports each data file opened and closed (:mod:`lance_ops.progress`).
    """
    sink = _FileSink(storage, reader.schema, fields, options, progress)
    return [DataFragment(id=0, files=(f,), physical_rows=rows) for f, rows in sink.write_all(reader)]


def input_rows(data: Any) -> int | None:
    """The number of rows of write input when known before reading it (Table, RecordBatch, pandas)."""
    if isinstance(data, (pa.Table, pa.RecordBatch)):
        return data.num_rows
    if type(data).__module__.startswith("pandas"):
        return len(data)
    return None


def write_data_file(
    data: Any, location: Location, fields: LanceSchema, num_rows: int, options: WriteOptions
) -> DataFile:
    """Write one new data file for an existing fragment of ``num_rows`` physical rows; returns it.

    ``location`` is the dataset's storage context, or its URI (opened with ``options.storage_options``).

    ``data`` holds one row per *physical* row of the fragment (deleted rows included, see
    :attr:`FragmentReader.physical_rows`), in order, with the top-level columns of ``fields``, whose
    ids (e.g. allocated by :meth:`LanceSchema.with_new_fields`) the file records. The file is
    written whole, whatever ``options.max_rows_per_file``; a row count other than ``num_rows``
    raises :class:`SchemaError` and leaves no file behind. Deleted rows are stored as nulls, so
    nulls pass in non-nullable columns here (the commit guard weighs them against the fragment's
    deleted rows). The caller commits the fragment with the
    file added to its ``files`` (a ``Merge``) or in place of another (a ``DataReplacement``).
    """
    if num_rows <= 0:
        raise SchemaError("a data file for an existing fragment needs its (positive) number of rows")
    reader = Conform(fields.to_arrow(), deleted_rows_null=True).reader(to_reader(data))
    whole = replace(options, max_rows_per_file=num_rows, max_bytes_per_file=2**63)
    storage = StorageContext.of(location, options.storage_options)
    ((data_file, _),) = _FileSink(storage, reader.schema, fields, whole).write_all(_exactly(reader, num_rows))
    return data_file


def _exactly(batches: Iterable[pa.RecordBatch], num_rows: int) -> Iterator[pa.RecordBatch]:
    """``batches``, raising (before the file is closed) unless they hold exactly ``num_rows`` rows."""
    seen = 0
    for batch in batches:
        seen += batch.num_rows
        if seen > num_rows:
            raise SchemaError(f"the fragment has {num_rows} rows but the data for its new file has more")
        yield batch
    if seen != num_rows:
        raise SchemaError(f"the fragment has {num_rows} rows but the data for its new file has {seen}")


def write_fragments(
    data: Any,
    uri: str | os.PathLike[str] | OpenDataset,
    schema: pa.Schema | None = None,
    *,
    mode: str = "append",
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
    max_rows_per_group: int = DEFAULT_MAX_ROWS_PER_GROUP,
    max_bytes_per_file: int | None = None,
    data_storage_version: str | None = None,
    storage_options: Mapping[str, str] | None = None,
    fields: FieldsLike | None = None,
    encoding_plan: EncodingPlan | None = None,
    progress: Any = None,
    page_statistics: bool = True,
    fill_missing: str | None = None,
) -> list[FragmentMetadata]:
    """Write ``data`` as new data files under ``{uri}/data/``; returns their fragments (uncommitted).
    ``uri`` may also be the ``LanceDataset`` itself, as pylance takes it.

    ``mode="append"`` reuses an existing dataset's field ids and, unless ``data_storage_version``
    names another 2.x version (as pylance, which then flags the dataset's files as mixed), its file
    version; a version of the other family (0.1 files for a 2.x dataset, or the reverse) raises
    :class:`WriteSchemaError` in pylance's words. ``"create"`` / ``"overwrite"`` number the schema
    afresh (``data_storage_version`` None is ``"stable"``). ``fields`` (the target dataset's
    schema with ids, e.g. ``LanceDataset.lance_schema`` read once on a driver) skips reading the
    manifest: the data is cast to ``schema`` (or, without one, the schema of ``fields``) and
    written with those ids as ``data_storage_version`` files, whatever ``mode``.
    ``max_rows_per_group`` (rows per batch) only applies to legacy (0.1) files. ``encoding_plan``
    (the dataset's plan, handed to every executor) fixes per-column encodings. ``progress`` is a callback of
    :class:`~lance_ops.progress.ProgressEvent` or a :class:`~lance_ops.progress.FragmentWriteProgress`.
    ``page_statistics=False`` leaves page statistics out of the data files (the driver decides,
    e.g. from the dataset config). The data is conformed to the target schema first
    (:mod:`lance_ops.fragment.conform`): ``fill_missing`` (``"compute"``, ``"null"``, ``"error"`` or
    None) says what becomes of the columns it lacks, and nulls in non-nullable fields are refused.
    """
    if mode not in ("append", "create", "overwrite"):
        raise InvalidArgumentError(f"mode must be 'create', 'append' or 'overwrite', not {mode!r}")
    if isinstance(uri, str | os.PathLike):
        storage = StorageContext.open(uri, storage_options)
    else:  # a dataset, as pylance takes it (its own store: a memory:// dataset's included)
        storage = uri.storage
    existing = _dataset_schema(storage) if mode == "append" and fields is None else None
    version_text = data_storage_version or "stable"
    if fields is not None:
        lance_schema = _as_schema(fields)
        reader = to_reader(data, schema if schema is not None else lance_schema.to_arrow(), fill_missing)
    elif existing is not None:
        lance_schema, dataset_version = existing
        version_text = _append_version(dataset_version, data_storage_version)
        reader = to_reader(data, lance_schema.to_arrow(), fill_missing)
    else:
        reader, lance_schema = new_dataset_reader(data, schema, version_text, fill_missing)
    options = WriteOptions(
        max_rows_per_file=max_rows_per_file,
        max_rows_per_group=max_rows_per_group,
        max_bytes_per_file=max_bytes_per_file or DEFAULT_MAX_BYTES_PER_FILE,
        data_storage_version=version_text,
        storage_options=storage_options,
        encoding_plan=encoding_plan,
        page_statistics=page_statistics,
    )
    tracker = Tracker.start(as_callback(progress), WRITE, input_rows(data), "rows")
    return write_new_fragments(reader, storage, lance_schema, options, tracker)
