"""``LanceFragment``: one fragment of a dataset version, with pylance's fragment API.

Reads (``to_table``, ``to_batches``, ``scanner``, ``take``, ``count_rows``, ``head``) go through a
:class:`~lance_ops.scanner.LanceScanner` limited to this fragment. The writing methods follow
pylance's "internal API" contract: they write files and return new :class:`FragmentMetadata`
without committing anything, for the caller to commit (``LanceOperation.Append`` / ``Merge`` /
``Delete`` / ``Overwrite``) through :meth:`LanceDataset.commit`:

* :meth:`LanceFragment.create` writes the data as one new fragment (id 0 unless given) of a dataset
  that may not exist yet;
* :meth:`merge_columns` writes a data file of new columns (SQL expressions or a batch UDF) and
  returns the fragment with it and the schema with the new fields;
* :meth:`update_columns` rewrites columns of the rows whose ``_rowid`` (or another key) matches
  rows of the new data: the new values go to a new data file and the old file's entries for those
  fields become tombstones (-2), as pylance does;
* :meth:`delete` writes a deletion file and returns the updated fragment (None when no row is left).
"""

from __future__ import annotations

import operator
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap

from lance_ops.encoding.api import FileVersion
from lance_ops.errors import (
    InvalidArgumentError,
    SchemaError,
    TakeIndexError,
    WriteSchemaError,
)
from lance_ops.fragment import FragmentMetadata, FragmentReader, WriteOptions, write_fragments
from lance_ops.fragment.reader import ROW_ADDRESS, ROW_ID
from lance_ops.fragment.writer import data_file_fields, dataset_fields, to_reader, write_data_file
from lance_ops.ops import columns as columns_op
from lance_ops.ops.delete import delete_in_fragment
from lance_ops.progress import ProgressCallback, ProgressEvent, as_callback
from lance_ops.query.predicate import parse_predicate
from lance_ops.scanner import Columns, Filter, LanceScanner
from lance_ops.schema import LanceSchema
from lance_ops.table.manifest import DataFile
from lance_ops.table.naming import DATA_DIR, DELETIONS_DIR

if TYPE_CHECKING:
    from lance_ops.dataset import LanceDataset

__all__ = ["FragmentSession", "LanceFragment"]


class LanceFragment:
    """One fragment of a dataset version (pylance's ``LanceFragment``)."""

    def __init__(
        self, dataset: LanceDataset, fragment_id: int | None = None, *, fragment: Any = None
    ) -> None:
        self._ds = dataset
        metadata = fragment if fragment is not None else _find(dataset, fragment_id)
        self._metadata: FragmentMetadata = metadata

    # ------------------------------------------------------------------ metadata

    @property
    def _reader(self) -> FragmentReader:
        return self._ds.handle.files.fragment(self._metadata)

    @property
    def metadata(self) -> FragmentMetadata:
        """The fragment's metadata (files, physical rows, deletion file, row ids)."""
        return self._metadata

    @property
    def fragment_id(self) -> int:
        return self._metadata.id

    @property
    def physical_rows(self) -> int:
        """Rows written to the fragment, deleted rows included (``count_rows()`` excludes them)."""
        return self._reader.physical_rows

    @property
    def num_deletions(self) -> int:
        return len(self._reader.deleted)

    @property
    def schema(self) -> pa.Schema:
        return self._ds.schema

    def data_files(self) -> list[DataFile]:
        return list(self._metadata.files)

    def deletion_file(self) -> str | None:
        """The deletion file's path relative to the dataset root (None without deletions)."""
        deletion = self._metadata.deletion_file
        return None if deletion is None else f"{DELETIONS_DIR}/{deletion.file_name(self.fragment_id)}"

    # ------------------------------------------------------------------ reads

    def scanner(
        self,
        *,
        columns: Columns = None,
        batch_size: int | None = None,
        filter: Filter = None,
        limit: int | None = None,
        offset: int | None = None,
        with_row_id: bool = False,
        with_row_address: bool = False,
        **tuning: Any,
    ) -> LanceScanner:
        """A scan of this fragment only (arguments as :meth:`LanceDataset.scanner`)."""
        return self._ds.scanner(
            columns,
            filter,
            limit,
            offset,
            batch_size=batch_size,
            fragments=[self],
            with_row_id=with_row_id,
            with_row_address=with_row_address,
            **{k: v for k, v in tuning.items() if k != "batch_readahead"},
        )

    def to_batches(self, **kwargs: Any) -> Iterator[pa.RecordBatch]:
        """This fragment's (filtered) rows as record batches, read one batch at a time."""
        return self.scanner(**kwargs).to_batches()

    def to_table(
        self,
        columns: Columns = None,
        filter: Filter = None,
        limit: int | None = None,
        offset: int | None = None,
        with_row_id: bool = False,
        with_row_address: bool = False,
        **kwargs: Any,
    ) -> pa.Table:
        return self.scanner(
            columns=columns,
            filter=filter,
            limit=limit,
            offset=offset,
            with_row_id=with_row_id,
            with_row_address=with_row_address,
            **kwargs,
        ).to_table()

    def to_pandas(self, **kwargs: Any) -> Any:
        return self.to_table(**kwargs).to_pandas()

    def head(self, num_rows: int) -> pa.Table:
        return self.scanner(limit=num_rows).to_table()

    def count_rows(self, filter: Filter = None) -> int:
        return self.scanner(filter=filter).count_rows()

    def take(
        self, indices: Sequence[int] | np.ndarray | pa.Array, columns: Sequence[str] | None = None
    ) -> pa.Table:
        """Rows at positions ``indices`` among this fragment's live rows (any order, repeats allowed)."""
        return self._take(indices, self._ds.handle.files.resolve_columns(columns), with_row_address=False)

    def _take(
        self, indices: Sequence[int] | np.ndarray | pa.Array, columns: Sequence[str], with_row_address: bool
    ) -> pa.Table:
        if isinstance(indices, pa.Array | pa.ChunkedArray):
            indices = indices.to_numpy(zero_copy_only=False)
        positions = np.asarray(indices, dtype=np.int64).reshape(-1)
        live = self._reader.live_offsets()
        if positions.size and (positions.min() < 0 or positions.max() >= len(live)):
            raise TakeIndexError(f"take index out of range: fragment {self.fragment_id} has {len(live)} rows")
        unique, inverse = np.unique(live[positions], return_inverse=True)
        table = self._reader.read(columns, unique, False, with_row_address)
        return table.take(pa.array(inverse.reshape(-1)))

    def open_session(
        self, columns: Sequence[str] | None = None, with_row_address: bool | None = None
    ) -> FragmentSession:
        """A reader of ``columns`` of this fragment for repeated :meth:`FragmentSession.take` calls
        (pylance's ``open_session``)."""
        return FragmentSession(self, columns, bool(with_row_address))

    # ------------------------------------------------------------------ writes (uncommitted)

    @staticmethod
    def create_from_file(filename: str, dataset: LanceDataset, fragment_id: int) -> FragmentMetadata:
        """A fragment made of one data file already under ``dataset``'s ``data/`` directory (written
        with ``LanceFileWriter``), as pylance's ``create_from_file``: its columns are matched to the
        dataset's fields by name. Nothing is committed; an ``Append`` assigns the final id."""
        files = dataset.handle.files
        reader = files.open_file(
            DataFile(path=filename, fields=(), column_indices=(), file_major_version=2, file_minor_version=0)
        )
        metadata = reader.metadata()
        names = metadata.schema.names
        missing = [n for n in names if files.schema.get_field_index(n) < 0]
        if missing:
            raise SchemaError(f"{filename}: columns {missing} are not in the dataset ({files.schema.names})")
        fields = files.lance_schema.project(names)
        version = FileVersion.from_footer(metadata.major_version, metadata.minor_version)
        ids = data_file_fields(fields, version)
        data_file = DataFile(
            path=filename,
            fields=ids,
            column_indices=tuple(range(len(ids))),
            file_major_version=version.major,
            file_minor_version=version.minor,
            file_size_bytes=dataset.storage.store.size(dataset.storage.path(DATA_DIR, filename)),
        )
        return FragmentMetadata(id=fragment_id, files=(data_file,), physical_rows=metadata.num_rows)

    @staticmethod
    def create(
        dataset_uri: str | os.PathLike[str],
        data: Any,
        fragment_id: int | None = None,
        schema: pa.Schema | None = None,
        max_rows_per_group: int = 1024,
        progress: Any = None,
        mode: str = "append",
        *,
        data_storage_version: str | None = None,
        use_legacy_format: bool | None = None,
        storage_options: Mapping[str, str] | None = None,
    ) -> FragmentMetadata:
        """Write ``data`` as one new fragment (uncommitted); the dataset need not exist yet.

        The fragment has id ``fragment_id`` (0 by default; ids are reassigned when an ``Append``
        commits it). ``mode="append"`` writes with the existing dataset's field ids and, unless
        ``data_storage_version`` names one, its file version; a named version is written whatever
        the dataset's, 0.1 into a 2.x dataset too (as pylance 14; committing such a mix is refused).
        ``progress`` is a ``FragmentWriteProgress`` (pylance's interface: ``begin`` gets the
        fragment about to be written, ``complete`` the written one) or a callable taking
        :class:`~lance_ops.progress.ProgressEvent`\\ s.
        """
        if use_legacy_format:
            data_storage_version = "legacy"
        reader = to_reader(data, schema)
        callback = as_callback(progress, begin_with_files=True)
        fields = None
        if data_storage_version is not None and mode == "append":
            fields = dataset_fields(dataset_uri, storage_options)
        written = write_fragments(
            reader,
            dataset_uri,
            schema,
            mode=mode,
            max_rows_per_file=2**63 - 1,
            max_rows_per_group=max_rows_per_group,
            data_storage_version=data_storage_version,
            storage_options=storage_options,
            fields=fields,
            # the fragment reported carries its id, as pylance's
            progress=None if callback is None else _with_fragment_id(callback, fragment_id or 0),
        )
        if len(written) != 1:
            # an OSError too, as pylance's refusal of empty data
            raise WriteSchemaError(f"LanceFragment.create writes one fragment; the data made {len(written)}")
        return replace(written[0], id=fragment_id or 0)

    def merge_columns(
        self,
        value_func: Any,
        columns: Sequence[str] | None = None,
        batch_size: int | None = None,
        reader_schema: pa.Schema | None = None,
    ) -> tuple[FragmentMetadata, LanceSchema]:
        """Write new columns for this fragment (as :meth:`LanceDataset.add_columns` computes them),
        or, given the values themselves (a reader, an iterable of batches, a table; ``reader_schema``
        types them), one row per live row of the fragment, as pylance's ``merge_columns(reader)``.

        Returns the fragment with the new data file and the dataset schema with the new fields,
        for a ``LanceOperation.Merge`` of all the dataset's fragments.
        """
        if getattr(value_func, "checkpoint_file", None) is not None:
            raise InvalidArgumentError(
                "A checkpoint file cannot be used with merge_columns: it resumes a whole "
                "add_columns run (use LanceDataset.add_columns)"
            )
        files = self._ds.handle.files
        if not isinstance(value_func, Mapping) and not callable(value_func):
            values = to_reader(value_func, reader_schema)
            data_file, new = columns_op.fragment_values_file(files, self.fragment_id, values)
        else:
            # SQL expressions read the columns they name; ``columns`` selects what a UDF is given.
            read = None if isinstance(value_func, Mapping) else columns
            compute = columns_op.column_compute(files, value_func, read)
            if reader_schema is not None:
                compute = replace(compute, output_schema=reader_schema)
            new = columns_op.new_columns(files, compute, batch_size, fragment_id=self.fragment_id)
            data_file = columns_op.write_fragment_columns(files, self.fragment_id, compute, new, batch_size)
        fields = files.lance_schema
        schema = replace(fields, fields=(*fields.fields, *new.fields.fields))
        return replace(self._metadata, files=(*self._metadata.files, data_file)), LanceSchema(schema)

    def merge(
        self, data_obj: Any, left_on: str, right_on: str | None = None, schema: pa.Schema | None = None
    ) -> tuple[FragmentMetadata, LanceSchema]:
        """New columns for this fragment from ``data_obj``, joined on ``left_on`` (a column or
        ``_rowid`` / ``_rowaddr``) = ``right_on`` (default ``left_on``); rows without a match get
        nulls. Returns the fragment with one more data file and the schema for a
        ``LanceOperation.Merge`` (nothing is committed), as pylance's ``merge``."""
        right_on = right_on or left_on
        table = to_reader(data_obj, schema).read_all()
        if table.schema.get_field_index(right_on) < 0:
            raise SchemaError(f"the new data has no key column {right_on!r}")
        files = self._ds.handle.files
        names = [n for n in table.schema.names if n != right_on]
        clash = [n for n in names if files.schema.get_field_index(n) >= 0]
        if clash or not names:
            raise SchemaError(f"merge needs new columns besides the key; already in the dataset: {clash}")
        current = self.to_table(columns=[left_on], with_row_address=True)
        keys = current.column(left_on)
        right = table.column(right_on)
        if keys.type != right.type:
            right = right.cast(keys.type)
        found = pc.index_in(keys, value_set=right.combine_chunks())
        matched = found.is_valid().to_numpy(zero_copy_only=False)
        physical = (current.column(ROW_ADDRESS).to_numpy() & np.uint64(0xFFFFFFFF)).astype(np.int64)
        values = table.select(names).take(found.filter(found.is_valid()))
        new = columns_op.numbered_columns(files, values.schema)
        data_file = columns_op.write_fragment_values(files, self.fragment_id, physical[matched], values, new)
        lance_schema = files.lance_schema
        merged = replace(lance_schema, fields=(*lance_schema.fields, *new.fields.fields))
        return replace(self._metadata, files=(*self._metadata.files, data_file)), LanceSchema(merged)

    def update_columns(
        self,
        data_obj: Any,
        left_on: str = ROW_ID,
        right_on: str | None = None,
        schema: pa.Schema | None = None,
        *,
        with_offsets: bool = False,
    ) -> tuple[FragmentMetadata, list[int]] | tuple[FragmentMetadata, list[int], bytes]:
        """Replace values of existing columns for the rows matching ``data_obj`` on a key.

        Each live row whose ``left_on`` (``_rowid`` by default) equals the ``right_on`` of a row of
        ``data_obj`` takes that row's values for the other columns of ``data_obj``; other rows keep
        theirs. The new values go to a new data file with the fields' ids; older files keep the
        ids as tombstones (-2). Returns the updated fragment and the ids of the fields rewritten
        (and, with ``with_offsets``, the updated physical row offsets as a portable RoaringBitmap).
        """
        right_on = right_on or left_on
        table = to_reader(data_obj, schema).read_all()
        if table.schema.get_field_index(right_on) < 0:
            raise SchemaError(f"the new data has no key column {right_on!r}")
        names = [n for n in table.schema.names if n != right_on]
        lance_schema = self._ds.handle.files.lance_schema
        top = {f.name: f for f in lance_schema.fields if f.parent_id == -1}
        reserved = [n for n in names if n in (ROW_ID, ROW_ADDRESS) and n not in top]
        if reserved:
            raise SchemaError(f"column {reserved[0]} is a reserved metadata column and cannot be updated")
        unknown = [n for n in names if n not in top]
        if unknown:
            raise SchemaError(f"column {unknown[0]} of the new data does not exist in the fragment")
        if not names:
            raise SchemaError("update_columns needs at least one column to update besides the key")
        current = self.to_table(columns=[left_on], with_row_address=True)
        keys = current.column(left_on).to_numpy(zero_copy_only=False)
        new_keys = table.column(right_on).to_numpy(zero_copy_only=False)
        order = np.argsort(new_keys, kind="stable")
        at = np.minimum(np.searchsorted(new_keys[order], keys), max(len(new_keys) - 1, 0))
        matched = new_keys[order][at] == keys if len(new_keys) else np.zeros(len(keys), bool)
        physical = (current.column(ROW_ADDRESS).to_numpy() & np.uint64(0xFFFFFFFF)).astype(np.int64)
        rows = self.physical_rows
        # Old values at [0, rows), new values after them: take old or new per physical row.
        pick = np.arange(rows, dtype=np.int64)
        pick[physical[matched]] = rows + np.arange(int(matched.sum()))
        old = self._reader.read(names, np.arange(rows, dtype=np.int64))
        new = table.select(names).take(pa.array(order[at][matched])).cast(old.schema)
        batch = pa.concat_tables([old, new]).take(pa.array(pick)).combine_chunks().to_batches()
        field_ids = [f.id for n in names for f in lance_schema.subtree(top[n].id)]
        fields = replace(lance_schema, fields=tuple(f for f in lance_schema.fields if f.id in set(field_ids)))
        options = WriteOptions(data_storage_version=self._ds.data_storage_version)
        data_file = write_data_file(batch, self._ds.storage, fields, rows, options)
        wanted = set(field_ids)
        old_files = tuple(
            replace(f, fields=tuple(-2 if i in wanted else i for i in f.fields)) for f in self._metadata.files
        )
        updated = replace(self._metadata, files=(*old_files, data_file))
        if with_offsets:
            return updated, field_ids, BitMap(physical[matched].astype(np.uint32)).serialize()
        return updated, field_ids

    def delete(self, predicate: str | Any) -> FragmentMetadata | None:
        """Write a deletion file for the rows ``predicate`` selects; returns the updated fragment.

        None when no row is left; the fragment unchanged when no row matches. Nothing is committed.
        """
        bound = parse_predicate(predicate, self._ds.schema)
        deletion = delete_in_fragment(self._reader, bound, self._ds.version)
        return self._metadata if deletion is None else deletion.updated

    def __repr__(self) -> str:
        return f"LanceFragment(id={self.fragment_id}, physical_rows={self._metadata.physical_rows})"


def _find(dataset: LanceDataset, fragment_id: int | None) -> FragmentMetadata:
    try:
        index = dataset.handle.files.fragment_index.get(operator.index(fragment_id))  # type: ignore[arg-type]
    except TypeError:
        index = None
    if index is not None:
        return dataset.manifest.fragments[index]
    raise InvalidArgumentError(f"fragment {fragment_id} is not in version {dataset.version} of the dataset")


def _with_fragment_id(callback: ProgressCallback, fragment_id: int) -> ProgressCallback:
    """``callback`` seeing the fragments of write events with id ``fragment_id``."""

    def report(event: ProgressEvent) -> None:
        if event.fragment is not None:
            event = replace(event, fragment=replace(event.fragment, id=fragment_id))
        callback(event)

    return report


class FragmentSession:
    """Repeated takes of fixed columns from one fragment (pylance's ``FragmentSession``)."""

    def __init__(
        self, fragment: LanceFragment, columns: Sequence[str] | None, with_row_address: bool
    ) -> None:
        self._fragment = fragment
        self._columns = fragment._ds.handle.files.resolve_columns(columns)
        self._with_row_address = with_row_address

    def take(self, indices: Sequence[int] | np.ndarray | pa.Array) -> pa.Table:
        """Rows at positions ``indices`` among the fragment's live rows, ``_rowaddr`` last if asked."""
        return self._fragment._take(indices, self._columns, self._with_row_address)
