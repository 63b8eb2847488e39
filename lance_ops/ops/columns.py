"""Schema evolution: adding, dropping and altering columns, written as pylance 14 writes them.

* ``add_columns`` with SQL expressions or a batch UDF commits a ``Merge``: every fragment gains one
  data file holding the new columns, their field ids numbered after the schema's ``max_field_id``.
  The file has a row per *physical* row of the fragment so that it lines up with the fragment's
  other files: the transform sees the live rows of each run of ``batch_size`` physical rows (a
  run whose rows are all deleted gives it an empty batch, as in pylance) and deleted rows are
  stored as nulls. Row-id sequences and deletion files are untouched. A SQL column is typed and
  marked nullable as pylance's planner does (a number next to a column takes the column's type;
  constants are not nullable, functions are); ``{}`` commits an empty ``Merge``, as pylance does.
  A SQL column records its expression in its field metadata (``lance-ops:expression``), so that
  writers can compute it for appended rows that lack it (``fill_missing="compute"``).
* ``add_columns`` with ``pa.Field``\\ s (or a ``pa.Schema``) commits a ``Merge`` that writes nothing:
  the nullable new fields read as nulls from fragments with no file holding them.
* ``drop_columns`` commits a ``Project``: data files keep listing the dropped ids (readers ignore
  them) and files left with none of the schema's ids leave their fragment.
* ``alter_columns``: renames and nullability are a ``Project`` that keeps field ids (a column becomes
  non-nullable only if no live row holds a null); a type change gives the column a new id at the
  same position and commits a ``Merge`` adding a data file of cast values to every fragment (the
  old files keep the old id until compaction). Casts stay within a type family (integers,
  floats, temporal types, strings, binaries, decimals, lists of those) and are refused when a value
  would not survive (overflow, truncation); pylance lets float overflow become infinity, we refuse it.
  A struct field's cast goes to a file holding it under its ancestors (which keep their ids).

Bad input raises before anything is committed; data files already written for a failed operation
are deleted.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_ops.errors import (
    ArgumentTypeError,
    CommitConflictError,
    FieldNotFoundError,
    InvalidArgumentError,
    LanceOpsError,
    RowCountMismatchError,
    SchemaChangeError,
    SchemaError,
)
from lance_ops.file.writer import as_table
from lance_ops.fragment.conform import evaluate_expressions
from lance_ops.fragment.options import WriteOptions
from lance_ops.fragment.reader import ROW_ADDRESS, ROW_ID, FragmentReader, VersionFiles
from lance_ops.fragment.writer import write_data_file
from lance_ops.ops.commit import CommitOptions, commit
from lance_ops.ops.udf_checkpoint import UDFCheckpoint
from lance_ops.progress import ADD_COLUMNS, ProgressCallback, Tracker
from lance_ops.query import expressions as ex
from lance_ops.query.predicate import parse_expression
from lance_ops.table.manifest import DataFile, DataFragment, Manifest
from lance_ops.table.naming import DATA_DIR
from lance_ops.table.schema import EXPRESSION_KEY, LanceField, LanceSchema
from lance_ops.table.transaction import Merge, Project, Transaction

__all__ = [
    "BatchUDF",
    "NewColumns",
    "add_columns",
    "alter_columns",
    "batch_udf",
    "column_compute",
    "commit_new_columns",
    "drop_columns",
    "new_columns",
    "numbered_columns",
    "write_fragment_columns",
    "write_fragment_values",
]

# Physical rows per transform call when the caller gives no batch size: a UDF's batches (what
# pylance gives it), and SQL columns' (not the caller's to see; the size changes no byte written,
# only the per-batch cost of reading and evaluating: 1,024-row batches cost ~4x the CPU).
DEFAULT_TRANSFORM_BATCH_SIZE = 1024
SQL_TRANSFORM_BATCH_SIZE = 65_536

Transforms: TypeAlias = (
    "Mapping[str, str | pc.Expression] | Callable[[pa.RecordBatch], Any]"
    " | pa.Field | Sequence[pa.Field] | pa.Schema"
)


@dataclass(frozen=True)
class BatchUDF:
    """A batch function for :func:`add_columns` with, optionally, the schema its batches must have
    and a checkpoint file that lets an interrupted run resume (:mod:`lance_ops.ops.udf_checkpoint`)."""

    func: Callable[[pa.RecordBatch], Any]
    output_schema: pa.Schema | None = None
    checkpoint_file: str | os.PathLike[str] | None = None

    def __call__(self, batch: pa.RecordBatch) -> Any:
        return self.func(batch)

    @cached_property
    def cache(self) -> UDFCheckpoint | None:
        """The checkpoint (pylance's attribute name), opened on first use."""
        return None if self.checkpoint_file is None else UDFCheckpoint(self.checkpoint_file)


def batch_udf(
    output_schema: pa.Schema | None = None,
    checkpoint_file: str | os.PathLike[str] | None = None,
) -> Callable[[Callable[[pa.RecordBatch], Any]], BatchUDF]:
    """Decorator making a function ``RecordBatch -> RecordBatch | pandas.DataFrame`` a :class:`BatchUDF`.

    With ``checkpoint_file``, results are saved as they are computed; calling ``add_columns`` again
    after a failure resumes from them, and the file is removed once the new columns are committed.
    """
    return lambda func: BatchUDF(func, output_schema, checkpoint_file)


# ---------------------------------------------------------------------------------------- computing


@dataclass(frozen=True)
class _Compute:
    """How new columns are made: the columns read from each fragment and a batch function.

    ``output_schema`` is known up front for SQL and casts; for a UDF without one it comes from
    the first batch the UDF returns.
    """

    columns: tuple[str, ...]
    func: Callable[[pa.RecordBatch], pa.RecordBatch]
    output_schema: pa.Schema | None
    with_row_id: bool = False
    with_row_address: bool = False
    checkpoint: UDFCheckpoint | None = None
    default_batch_size: int = DEFAULT_TRANSFORM_BATCH_SIZE


def _sql_compute(files: VersionFiles, expressions: Mapping[str, str | pc.Expression]) -> _Compute:
    bound = {}
    for name, text in expressions.items():
        if not isinstance(name, str):
            raise SchemaError(f"new column names must be strings, not {name!r}")
        try:
            bound[name] = parse_expression(text, files.schema, column_typed_literals=True)
        except LanceOpsError as exc:
            raise type(exc)(f"the expression for new column {name!r}: {exc}") from exc
    schema = pa.schema(
        [
            pa.field(name, b.type, b.nullable, metadata=_expression_metadata(expressions[name]))
            for name, b in bound.items()
        ]
    )
    columns = tuple(n for n in files.schema.names if any(n in b.columns for b in bound.values()))
    projection = {name: b.expression for name, b in bound.items()}

    def evaluate(batch: pa.RecordBatch) -> pa.RecordBatch:
        return pa.RecordBatch.from_arrays(evaluate_expressions(batch, projection, schema), schema=schema)

    named = {c for b in bound.values() for c in b.columns}
    virtual = (
        ROW_ID in named and ROW_ID not in files.schema.names,
        ROW_ADDRESS in named and ROW_ADDRESS not in files.schema.names,
    )
    return _Compute(columns, evaluate, schema, *virtual, default_batch_size=SQL_TRANSFORM_BATCH_SIZE)


def _expression_metadata(expression: str | pc.Expression) -> dict[str, str] | None:
    """Field metadata recording a SQL column's expression (:data:`EXPRESSION_KEY`), so writers can
    compute the column for new rows that lack it; Arrow expressions are not recorded."""
    return {EXPRESSION_KEY: expression} if isinstance(expression, str) else None


def _udf_compute(
    files: VersionFiles, func: Callable[[pa.RecordBatch], Any], read_columns: Sequence[str] | None
) -> _Compute:
    special = {ROW_ID, ROW_ADDRESS}
    names = files.schema.names if read_columns is None else [c for c in read_columns if c not in special]
    columns = files.resolve_columns(names)
    declared = getattr(func, "output_schema", None)
    if declared is not None and not isinstance(declared, pa.Schema):
        raise ArgumentTypeError(
            f"a UDF's output_schema must be a pyarrow.Schema, not {type(declared).__name__}"
        )

    def call(batch: pa.RecordBatch) -> pa.RecordBatch:
        result = func(batch)
        if isinstance(result, pa.RecordBatch):
            return result
        if isinstance(result, pa.Table) or type(result).__module__.startswith("pandas"):
            return _as_batch(as_table(result, None).replace_schema_metadata(None))
        raise SchemaError(
            f"the UDF must return a RecordBatch or a pandas DataFrame, not {type(result).__name__}"
        )

    read = set(read_columns or ())
    checkpoint = func.cache if isinstance(func, BatchUDF) else None
    return _Compute(columns, call, declared, ROW_ID in read, ROW_ADDRESS in read, checkpoint)


def _as_batch(table: pa.Table) -> pa.RecordBatch:
    if not table.num_columns:
        return pa.RecordBatch.from_struct_array(pa.nulls(table.num_rows, pa.struct([])))
    return pa.RecordBatch.from_arrays([c.combine_chunks() for c in table.columns], schema=table.schema)


def _scatter(batch: pa.RecordBatch, positions: np.ndarray, length: int) -> pa.RecordBatch:
    """``batch`` (one row per position) spread over ``length`` rows, nulls elsewhere."""
    if len(positions) == length:
        return batch
    index = np.full(length, -1, dtype=np.int64)
    index[positions] = np.arange(len(positions))
    return batch.take(pa.array(index, mask=index < 0))


def live_mask(physical_rows: int, deleted: np.ndarray) -> np.ndarray | None:
    """Per physical row, whether it is live (None: no row is deleted). Built once per fragment:
    ``np.isin`` of every batch against all of the fragment's deleted offsets was ~60 % of an
    add_columns' CPU on a fragment with 10 % of its rows deleted."""
    if not len(deleted):
        return None
    keep = np.ones(physical_rows, dtype=bool)
    keep[deleted[deleted < physical_rows]] = False
    return keep


def _fragment_batches(
    fragment: FragmentReader, compute: _Compute, batch_size: int
) -> Iterator[pa.RecordBatch]:
    """The new columns for every physical row of ``fragment``, computed from its live rows.

    With a checkpoint, each batch's result is looked up there first and saved there once computed.
    """
    keep = live_mask(fragment.physical_rows, fragment.deleted)
    checkpoint = compute.checkpoint
    for index, start in enumerate(range(0, fragment.physical_rows, batch_size)):
        offsets = np.arange(start, min(start + batch_size, fragment.physical_rows), dtype=np.int64)
        live = offsets if keep is None else offsets[keep[start : start + len(offsets)]]
        out = None if checkpoint is None else checkpoint.get_batch(fragment.id, index)
        if out is None:
            if keep is None or len(live) == len(offsets):
                table = fragment.read(compute.columns, live, compute.with_row_id, compute.with_row_address)
            else:
                # The batch's rows read as one range (the deleted ones too), then filtered: cheaper
                # than gathering the live offsets, and the same rows.
                table = fragment.read(compute.columns, offsets, compute.with_row_id, compute.with_row_address)
                table = table.filter(pa.array(keep[start : start + len(offsets)]))
            out = compute.func(_as_batch(table))
            if checkpoint is not None:
                checkpoint.insert_batch(fragment.id, index, out)
        if out.num_rows != len(live):
            raise RowCountMismatchError(
                f"the transform returned {out.num_rows} rows for a batch of {len(live)}"
            )
        yield _scatter(out, live - start, len(offsets))


def _checked(batches: Iterable[pa.RecordBatch], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        if not batch.schema.equals(schema):
            raise SchemaError(
                "Output schema of function does not match the expected schema: the transform returned "
                f"a batch with schema {batch.schema}, expected {schema}"
            )
        yield batch


def _first_schema(
    compute: _Compute, files: VersionFiles, streams: list[Iterator[pa.RecordBatch]]
) -> pa.Schema:
    """The output schema, calling the transform on the first batch (kept in ``streams``) if needed."""
    if compute.output_schema is not None:
        return compute.output_schema
    if not streams:
        empty = files.schema.empty_table().select(list(compute.columns))
        return compute.func(_as_batch(empty)).schema
    first = next(streams[0])
    streams[0] = _prepend(first, streams[0])
    return first.schema


def _prepend(first: pa.RecordBatch, rest: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield first
    yield from rest


def _write_columns(
    files: VersionFiles,
    compute: _Compute,
    batch_size: int,
    new_fields: Callable[[pa.Schema], LanceSchema],
    progress: ProgressCallback | None = None,
) -> tuple[LanceSchema, dict[int, DataFile]]:
    """Write one data file of computed columns per fragment; returns the files' schema and the files.

    ``new_fields`` numbers the output schema (and raises for clashes before any file is written).
    Files written before a failure are deleted. ``progress`` hears of every file written.
    """
    if batch_size <= 0:
        raise InvalidArgumentError("batch_size must be positive")
    fragments = files.fragments()
    streams = [_fragment_batches(f, compute, batch_size) for f in fragments]
    written: dict[int, DataFile] = {}
    checkpoint = compute.checkpoint
    try:
        schema = _first_schema(compute, files, streams)
        fields = new_fields(schema)
        tracker = Tracker.start(progress, ADD_COLUMNS, len(fragments), "fragments")
        for fragment, batches in zip(fragments, streams, strict=True):
            done = None if checkpoint is None else checkpoint.get_fragment(fragment.id)
            if done is not None and set(done.fields) <= set(fields.field_ids):
                written[fragment.id] = done
                tracker.advance(1, f"fragment {fragment.id}: already written ({DATA_DIR}/{done.path})")
                continue
            written[fragment.id] = _write_file(files, fragment, batches, schema, fields)
            if checkpoint is not None:
                checkpoint.insert_fragment(fragment.id, written[fragment.id])
            tracker.advance(1, f"fragment {fragment.id}: wrote {DATA_DIR}/{written[fragment.id].path}")
    except BaseException:
        if checkpoint is None:
            _delete(files, written.values())
        raise
    return fields, written


def _write_file(
    files: VersionFiles,
    fragment: FragmentReader,
    batches: Iterable[pa.RecordBatch],
    schema: pa.Schema,
    fields: LanceSchema,
) -> DataFile:
    options = WriteOptions(data_storage_version=files.manifest.data_storage_version).for_dataset(
        files.manifest.config
    )
    data = pa.RecordBatchReader.from_batches(schema, _checked(batches, schema))
    return write_data_file(data, files.storage, fields, fragment.physical_rows, options)


def _delete(files: VersionFiles, data_files: Iterable[DataFile]) -> None:
    for data_file in data_files:
        files.store.delete(files.store.join(files.root, DATA_DIR, data_file.path))


def _merge(
    files: VersionFiles, schema: LanceSchema, added: Mapping[int, DataFile], options: CommitOptions
) -> tuple[Manifest, Transaction]:
    """Commit a ``Merge`` of ``schema`` with the new files added (files without schema ids dropped).

    ``added`` maps fragment ids to their new file. When a concurrent commit conflicts, the new
    files are deleted (nothing refers to them).
    """
    ids = set(schema.field_ids)
    fragments: list[DataFragment] = []
    for fragment in files.manifest.fragments:
        data_files = [*fragment.files, *([added[fragment.id]] if fragment.id in added else [])]
        kept = tuple(d for d in data_files if any(i in ids for i in d.fields))
        fragments.append(replace(fragment, files=kept))
    operation = Merge(tuple(fragments), schema, preserves_nullability=True)
    try:
        return commit(files.storage, operation, replace(options, read_version=files.manifest.version))
    except CommitConflictError:
        _delete(files, added.values())
        raise


# ---------------------------------------------------------------------------------------- add


def _arrow_fields(transforms: Any) -> list[pa.Field] | None:
    """The fields of an all-null transform (a field, fields or a schema), else None."""
    if isinstance(transforms, pa.Field):
        return [transforms]
    if isinstance(transforms, pa.Schema):
        return list(transforms)
    if isinstance(transforms, Sequence) and transforms and all(isinstance(f, pa.Field) for f in transforms):
        return list(transforms)
    if isinstance(transforms, Mapping) and all(isinstance(v, str) for v in transforms.values()):
        return _null_casts(transforms)
    return None


def _null_casts(transforms: Mapping[str, str]) -> list[pa.Field] | None:
    """The fields of SQL transforms that are all ``CAST(NULL AS type)``, which pylance adds as
    metadata only (no data written); None when any other expression is among them (then pylance
    writes them all, the null casts included)."""
    fields = []
    for name, sql in transforms.items():
        try:
            from lance_ops.query.parser import parse  # noqa: PLC0415 - sqlglot, on first use

            tree = parse(sql)
        except LanceOpsError:
            return None  # the computing path reports it
        if sql.lstrip()[:8].upper() == "TRY_CAST":  # one Cast node in our tree; pylance writes these
            return None
        if not (
            isinstance(tree, ex.Cast)
            and isinstance(tree.value, ex.Literal)
            and pa.types.is_null(tree.value.value.type)
        ):
            return None
        fields.append(pa.field(name, tree.to))
    return fields


def _numbered(files: VersionFiles, schema: pa.Schema) -> LanceSchema:
    """``schema``'s fields numbered after the dataset's ``max_field_id`` (clashes raise)."""
    if len(set(schema.names)) != len(schema.names):
        raise SchemaChangeError(f"the new columns {schema.names} repeat a name")
    everything = files.lance_schema.with_new_fields(schema)
    return LanceSchema(everything.fields[len(files.lance_schema) :], {})


def add_columns(
    files: VersionFiles,
    transforms: Transforms,
    read_columns: Sequence[str] | None,
    batch_size: int | None,
    options: CommitOptions,
    progress: ProgressCallback | None = None,
) -> tuple[Manifest, Transaction]:
    """Add columns to the version ``files`` reads: SQL expressions, a batch UDF or all-null fields.

    ``progress`` hears of every fragment's new data file (:mod:`lance_ops.progress`).
    """
    if isinstance(transforms, Mapping) and not transforms:
        # pylance commits an empty Merge (a new version, nothing written) for ``{}``.
        return _merge(files, files.lance_schema, {}, options)
    fields = _arrow_fields(transforms)
    if fields is not None:
        not_nullable = [f.name for f in fields if not f.nullable]
        if not_nullable:
            raise SchemaChangeError(f"all-null columns must be nullable: {not_nullable}")
        schema = files.lance_schema.with_new_fields(fields)
        return _merge(files, schema, {}, options)
    compute = column_compute(files, transforms, read_columns)
    new, written = _write_columns(
        files, compute, batch_size or compute.default_batch_size, lambda s: _numbered(files, s), progress
    )
    committed = commit_new_columns(files, new, written, options)
    if compute.checkpoint is not None:
        compute.checkpoint.cleanup()
    return committed


def add_columns_from_reader(
    files: VersionFiles, reader: pa.RecordBatchReader, options: CommitOptions
) -> tuple[Manifest, Transaction]:
    """Add the columns of ``reader``, one row per live row of the version in scan order (pylance's
    ``add_columns(reader)``); a reader with too few or too many rows raises before any commit."""
    new = numbered_columns(files, reader.schema)
    table = reader.read_all()
    fragments = files.fragments()
    _check_value_rows(table.num_rows, sum(f.live_count for f in fragments), "the dataset")
    written: dict[int, DataFile] = {}
    start = 0
    try:
        for fragment in fragments:
            values = table.slice(start, fragment.live_count)
            start += fragment.live_count
            written[fragment.id] = write_fragment_values(
                files, fragment.id, fragment.live_offsets(), values, new
            )
    except BaseException:
        _delete(files, written.values())
        raise
    return commit_new_columns(files, new.fields, written, options)


def fragment_values_file(
    files: VersionFiles, fragment_id: int, reader: pa.RecordBatchReader
) -> tuple[DataFile, NewColumns]:
    """The data file of one fragment's new columns read from ``reader``, one row per live row of
    the fragment in order (pylance's ``fragment.merge_columns(reader)``; deleted rows are stored as
    nulls), and the new columns; too few or too many rows raise before anything is written."""
    new = numbered_columns(files, reader.schema)
    table = reader.read_all()
    fragment = files.fragment(_fragment_metadata(files, fragment_id))
    _check_value_rows(table.num_rows, fragment.live_count, f"fragment {fragment_id}")
    return write_fragment_values(files, fragment_id, fragment.live_offsets(), table, new), new


def _check_value_rows(got: int, expected: int, where: str) -> None:
    """New column values must give one row per live row of ``where`` (pylance's words first)."""
    if got != expected:
        words = (
            "Stream ended before producing values for all rows in dataset"
            if got < expected
            else "Stream produced more values than expected for dataset"
        )
        raise RowCountMismatchError(
            f"{words}: the new columns have {got} rows; {where} has {expected} live rows"
        )


# The pieces of ``add_columns`` a distributed job runs separately: the compute is rebuilt from the
# transforms wherever it runs, the new fields are numbered once (driver), one file is written per
# fragment (executors), and one ``Merge`` commits them (driver).


def column_compute(files: VersionFiles, transforms: Any, read_columns: Sequence[str] | None) -> _Compute:
    """How the new columns of SQL ``transforms`` or a batch UDF are computed from the version read."""
    if isinstance(transforms, Mapping):
        if read_columns is not None:
            raise InvalidArgumentError(
                "read_columns only applies to a UDF; SQL expressions read the columns they name"
            )
        return _sql_compute(files, transforms)
    if callable(transforms):
        return _udf_compute(files, transforms, read_columns)
    raise ArgumentTypeError(
        "transforms must be a dict of SQL expressions, a batch UDF, or pyarrow Field(s) / a Schema, "
        f"not {type(transforms).__name__}"
    )


@dataclass(frozen=True)
class NewColumns:
    """The new columns of an ``add_columns``: the Arrow schema the transform yields and its fields
    numbered after the dataset's ``max_field_id`` (what the new data files record)."""

    schema: pa.Schema
    fields: LanceSchema


def new_columns(
    files: VersionFiles, compute: _Compute, batch_size: int | None = None, fragment_id: int | None = None
) -> NewColumns:
    """Number the new columns (calling a UDF without a declared schema on the first batch of the
    version, or of fragment ``fragment_id`` when given)."""
    first = (
        files.fragments()[:1]
        if fragment_id is None
        else [files.fragment(_fragment_metadata(files, fragment_id))]
    )
    streams = [_fragment_batches(f, compute, batch_size or compute.default_batch_size) for f in first]
    schema = _first_schema(compute, files, streams)
    return NewColumns(schema, _numbered(files, schema))


def numbered_columns(files: VersionFiles, schema: pa.Schema) -> NewColumns:
    """``schema``'s fields (e.g. the value columns of a backfill) numbered as new columns."""
    return NewColumns(schema, _numbered(files, schema))


def write_fragment_columns(
    files: VersionFiles,
    fragment_id: int,
    compute: _Compute,
    new: NewColumns,
    batch_size: int | None = None,
) -> DataFile:
    """Write the data file of the new columns for one fragment of the version read (no commit)."""
    fragment = files.fragment(_fragment_metadata(files, fragment_id))
    batches = _fragment_batches(fragment, compute, batch_size or compute.default_batch_size)
    return _write_file(files, fragment, batches, new.schema, new.fields)


def write_fragment_values(
    files: VersionFiles, fragment_id: int, offsets: np.ndarray, values: pa.Table, new: NewColumns
) -> DataFile:
    """Write a data file of the new columns for one fragment from ``values`` at physical ``offsets``
    (the other rows are null); a repeated or out-of-range offset raises :class:`SchemaError`."""
    fragment = files.fragment(_fragment_metadata(files, fragment_id))
    offsets = np.asarray(offsets, dtype=np.int64)
    if len(offsets) and (offsets.min() < 0 or offsets.max() >= fragment.physical_rows):
        raise SchemaError(f"fragment {fragment_id} has {fragment.physical_rows} rows; a key is outside them")
    if len(np.unique(offsets)) != len(offsets):
        raise SchemaError(f"the values for fragment {fragment_id} repeat a row")
    order = np.argsort(offsets, kind="stable")
    batch = _as_batch(values.select(new.schema.names).cast(new.schema).take(order))
    data = _scatter(batch, offsets[order], fragment.physical_rows)
    return _write_file(files, fragment, [data], new.schema, new.fields)


def _fragment_metadata(files: VersionFiles, fragment_id: int) -> DataFragment:
    for metadata in files.manifest.fragments:
        if metadata.id == fragment_id:
            return metadata
    raise SchemaError(f"fragment {fragment_id} is not in version {files.manifest.version}")


def commit_new_columns(
    files: VersionFiles, fields: LanceSchema, written: Mapping[int, DataFile], options: CommitOptions
) -> tuple[Manifest, Transaction]:
    """Commit one ``Merge`` adding ``fields`` with the data files ``written`` (fragment id -> file)."""
    schema = replace(files.lance_schema, fields=(*files.lance_schema.fields, *fields.fields))
    return _merge(files, schema, written, options)


# ---------------------------------------------------------------------------------------- drop


def drop_columns(
    files: VersionFiles, columns: Sequence[str], options: CommitOptions
) -> tuple[Manifest, Transaction]:
    """Drop columns (dotted paths for struct fields) from the version ``files`` reads (a ``Project``)."""
    if isinstance(columns, str):
        raise ArgumentTypeError("columns must be a list of column names")
    schema = files.lance_schema
    dropped = schema.without(schema.field_at(c).id for c in columns)
    if not dropped.names:
        raise SchemaError("cannot drop all columns from a dataset")
    operation = Project(LanceSchema(dropped.fields), preserves_nullability=True)
    return commit(files.storage, operation, replace(options, read_version=files.manifest.version))


# ---------------------------------------------------------------------------------------- alter


def _family(type_: pa.DataType) -> str | None:
    """The type family a column may be cast within (None: no casts)."""
    checks = (
        ("int", pa.types.is_integer),
        ("float", pa.types.is_floating),
        ("temporal", pa.types.is_temporal),
        ("bool", pa.types.is_boolean),
        ("string", lambda t: pa.types.is_string(t) or pa.types.is_large_string(t)),
        ("binary", lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t)),
        ("decimal", pa.types.is_decimal),
    )
    return next((name for name, check in checks if check(type_)), None)


def _castable(source: pa.DataType, target: pa.DataType) -> bool:
    lists = (pa.ListType, pa.LargeListType, pa.FixedSizeListType)
    if isinstance(source, lists):
        return isinstance(target, lists) and _castable(source.value_type, target.value_type)
    family = _family(source)
    return family is not None and family == _family(target)


def _cast(array: pa.Array, target: pa.DataType, name: str) -> pa.Array:
    """``array`` cast to ``target``; raises :class:`SchemaError` when a value would not survive."""
    try:
        out = array.cast(target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        value = _first_uncastable(array, target)
        words = "" if value is None else f"Can't cast value {value} to type {_type_name(target)}: "
        raise SchemaChangeError(
            f"{words}cannot cast column {name!r} from {array.type} to {target}: {exc}"
        ) from exc
    if pa.types.is_floating(array.type):
        overflow = pc.and_(pc.is_finite(array), pc.invert(pc.is_finite(out)))
        if pc.any(overflow).as_py():
            raise SchemaChangeError(
                f"cannot cast column {name!r} from {array.type} to {target}: values overflow"
            )
    return out


# Arrow types as pylance's messages name them (Rust's DataType names).
_TYPE_NAMES = {
    "int8": "Int8",
    "int16": "Int16",
    "int32": "Int32",
    "int64": "Int64",
    "uint8": "UInt8",
    "uint16": "UInt16",
    "uint32": "UInt32",
    "uint64": "UInt64",
    "halffloat": "Float16",
    "float": "Float32",
    "double": "Float64",
    "string": "Utf8",
    "large_string": "LargeUtf8",
    "binary": "Binary",
    "large_binary": "LargeBinary",
    "bool": "Boolean",
}


def _type_name(type_: pa.DataType) -> str:
    return _TYPE_NAMES.get(str(type_), str(type_))


def _first_uncastable(array: pa.Array, target: pa.DataType) -> Any:
    """The first non-null value of ``array`` a safe cast to ``target`` refuses (None if not found)."""
    for start in range(0, len(array), 4096):
        chunk = array.slice(start, 4096)
        try:
            chunk.cast(target, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            for value in chunk:
                if value.is_valid:
                    try:
                        pa.array([value.as_py()], array.type).cast(target, safe=True)
                    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                        return value.as_py()
            return None
    return None


@dataclass(frozen=True)
class _Alteration:
    field: LanceField
    path: str
    name: str | None
    nullable: bool | None
    data_type: pa.DataType | None


def _parse_alteration(schema: LanceSchema, alteration: Mapping[str, Any]) -> _Alteration:
    unknown = sorted(set(alteration) - {"path", "name", "nullable", "data_type"})
    if unknown or "path" not in alteration:
        words = f"Unknown key: {unknown[0]}. " if unknown else ""
        raise InvalidArgumentError(
            f"{words}An alteration has a 'path' and some of 'name', 'nullable', 'data_type'; got {alteration}"
        )
    path = alteration["path"]
    try:
        field = schema.field_at(path)
    except FieldNotFoundError as exc:
        raise FieldNotFoundError(f'Column "{path}" does not exist in the dataset ({exc})') from exc
    parsed = _Alteration(
        field,
        path,
        alteration.get("name"),
        alteration.get("nullable"),
        alteration.get("data_type"),
    )
    if parsed.name is None and parsed.nullable is None and parsed.data_type is None:
        raise InvalidArgumentError(
            f"alteration of {path!r}: At least one of name, nullable, or data_type must be specified"
        )
    if parsed.name is not None and (not parsed.name or (parsed.field.parent_id == -1 and "." in parsed.name)):
        raise SchemaError(
            f"cannot rename {path!r} to {parsed.name!r}: top-level names cannot be empty or contain '.'"
        )
    return parsed


def _has_nulls(files: VersionFiles, alteration: _Alteration) -> bool:
    """Whether a live row holds a null at ``alteration.path``."""
    top, *children = alteration.path.split(".")
    for fragment in files.fragments():
        column = fragment.read([top], fragment.live_offsets()).column(0).combine_chunks()
        for name in children:
            column = pc.struct_field(column, name)
        if column.null_count:
            return True
    return False


def _renumbered(field: LanceField, arrow_field: pa.Field, next_id: int) -> tuple[LanceField, ...]:
    """``arrow_field`` as Lance fields numbered from ``next_id``, in ``field``'s place in the tree."""
    fresh = LanceSchema.from_arrow([arrow_field], start_id=next_id).fields
    return (replace(fresh[0], parent_id=field.parent_id), *fresh[1:])


def alter_columns(
    files: VersionFiles, alterations: Sequence[Mapping[str, Any]], options: CommitOptions
) -> tuple[Manifest, Transaction]:
    """Rename, change the nullability of, or cast columns of the version ``files`` reads."""
    schema = files.lance_schema
    parsed = [_parse_alteration(schema, a) for a in alterations]
    if any(a.nullable is False for a in parsed) and any(a.data_type is not None for a in parsed):
        raise SchemaChangeError(
            "cannot make a column non-nullable and cast columns in the same call (as pylance): "
            "cast first, then change the nullability"
        )
    fields = {f.id: f for f in schema.fields}
    for alteration in parsed:
        if alteration.nullable is False and alteration.field.nullable and _has_nulls(files, alteration):
            raise SchemaChangeError(f"column {alteration.path!r} holds nulls and cannot be made non-nullable")
        current = fields[alteration.field.id]
        fields[current.id] = replace(
            current,
            name=current.name if alteration.name is None else alteration.name,
            nullable=current.nullable if alteration.nullable is None else alteration.nullable,
        )
    casts = [a for a in parsed if a.data_type is not None]
    _refuse_indexed_casts(files, casts)
    renamed = replace(schema, fields=tuple(fields[f.id] for f in schema.fields))
    _check_names(renamed)
    if not casts:
        operation = Project(LanceSchema(renamed.fields), preserves_nullability=True)
        return commit(files.storage, operation, replace(options, read_version=files.manifest.version))
    return _cast_columns(files, renamed, casts, options)


def _refuse_indexed_casts(files: VersionFiles, casts: Sequence[Any]) -> None:
    """A cast rewrites the column under new field ids: pylance 14 refuses it while an index is
    attached (drop the index, cast, create it again); so do we, naming the indices."""
    cast_ids = {f.id for a in casts for f in files.lance_schema.subtree(a.field.id)}
    attached = sorted({i.name for i in files.manifest.indices if cast_ids & set(i.fields)})
    if attached:
        paths = [a.path for a in casts]
        raise SchemaChangeError(
            f"cannot cast column(s) {paths} to a new type: they have {len(attached)} index(es) "
            f"attached: {attached}; drop them with drop_index() before altering, then recreate them"
        )


def _check_names(schema: LanceSchema) -> None:
    seen: set[tuple[int, str]] = set()
    for f in schema.fields:
        if (f.parent_id, f.name) in seen:
            raise SchemaChangeError(f"the schema would have two fields called {f.name!r}")
        seen.add((f.parent_id, f.name))


def _arrow_type(schema: pa.Schema, path: str) -> pa.DataType:
    top, *children = path.split(".")
    type_ = schema.field(top).type
    for name in children:
        type_ = type_.field(name).type
    return type_


def _cast_columns(
    files: VersionFiles, renamed: LanceSchema, casts: Sequence[_Alteration], options: CommitOptions
) -> tuple[Manifest, Transaction]:
    """Give each cast field a new id in ``renamed`` and write its cast values as new data files.

    New ids follow the order of the alterations. The new files hold the cast fields under their
    ancestors (struct fields keep their ids), top-level columns in schema order, as pylance does.
    """
    by_id = {f.id: f for f in renamed.fields}
    replaced: dict[int, tuple[LanceField, ...]] = {}
    paths: dict[int, str] = {}
    next_id = renamed.max_field_id + 1
    for alteration in casts:
        assert alteration.data_type is not None
        source = _arrow_type(files.schema, alteration.path)
        if not _castable(source, alteration.data_type):
            raise SchemaChangeError(
                f'Cannot cast column "{alteration.path}" from {_type_name(source)} to '
                f"{_type_name(alteration.data_type)}"
            )
        current = by_id[alteration.field.id]
        target = pa.field(current.name, alteration.data_type, current.nullable)
        replaced[current.id] = _renumbered(current, target, next_id)
        next_id += len(replaced[current.id])
        paths[current.id] = alteration.path
    subtree = {f.id for i in replaced for f in renamed.subtree(i)}
    fields: list[LanceField] = []
    for f in renamed.fields:
        if f.id in replaced:
            fields.extend(replaced[f.id])
        elif f.id not in subtree:
            fields.append(f)
    schema = replace(renamed, fields=tuple(fields))

    ancestors: set[int] = set()
    for field_id in replaced:
        parent = by_id[field_id].parent_id
        while parent != -1:
            ancestors.add(parent)
            parent = by_id[parent].parent_id
    new_ids = {f.id for group in replaced.values() for f in group}
    new_fields = LanceSchema(tuple(f for f in schema.fields if f.id in ancestors or f.id in new_ids), {})
    output = new_fields.to_arrow()
    kept: dict[int, list[int]] = {}  # parent id -> the children the new files hold
    position: dict[int, int] = {}  # field id -> index among its siblings (as read from the files)
    count: dict[int, int] = {}
    for f in renamed.fields:
        position[f.id] = count.get(f.parent_id, 0)
        count[f.parent_id] = position[f.id] + 1
        if f.id in ancestors or f.id in replaced:
            kept.setdefault(f.parent_id, []).append(f.id)
    tops = kept[-1]

    def build(array: pa.Array, field_id: int, type_: pa.DataType) -> pa.Array:
        if field_id in replaced:
            return _cast(array, type_, paths[field_id])
        children = kept[field_id]
        arrays = [build(array.field(position[k]), k, type_.field(n).type) for n, k in enumerate(children)]
        mask = array.is_null() if array.null_count else None
        return pa.StructArray.from_arrays(arrays, fields=list(type_), mask=mask)

    names = tuple(files.schema.field(position[i]).name for i in tops)

    def cast(batch: pa.RecordBatch) -> pa.RecordBatch:
        arrays = [build(batch.column(n), i, t.type) for n, i, t in zip(names, tops, output, strict=True)]
        return pa.RecordBatch.from_arrays(arrays, schema=output)

    compute = _Compute(names, cast, output)
    _, written = _write_columns(files, compute, DEFAULT_TRANSFORM_BATCH_SIZE, lambda _: new_fields)
    return _merge(files, schema, written, options)
