"""Making incoming data fit a dataset's schema, or refusing it with a clear error.

Every writer (``write_dataset`` appends, ``write_fragments`` given the dataset's fields, the Spark
writer's tasks, :func:`jobs.types.conform_batch`) passes its input through one :class:`Conform`
before anything is written, so no writer can put into a data file what the dataset cannot hold:

* columns are selected by name, in the dataset's order, and cast to the dataset's types; a value
  that does not convert (``"abc"`` into ``int64``, ``3e9`` into ``int32``) raises naming the column,
  both types and the value;
* a column the dataset does not have raises;
* a column the data lacks is governed by ``fill_missing``:

  ======================  ===================================================================
  ``None`` (default)      nullable: filled with nulls; not nullable: error
  ``"compute"``           a column added from a SQL expression (its field records it under
                          :data:`~lance_ops.table.schema.EXPRESSION_KEY`) is computed from that
                          expression over the incoming rows; other columns as the default
  ``"null"``              nullable: nulls; not nullable: error
  ``"error"``             any missing column is an error
  ======================  ===================================================================

* nulls in a non-nullable column (or in a non-nullable child of a struct or list, where the
  parent value is present) raise with the column's path and the number of nulls.

Errors are :class:`~lance_ops.errors.WriteSchemaError` (a ``SchemaError``). :meth:`Conform.plan`
checks what the schemas alone decide (missing, extra and uncastable columns), so a driver can refuse
a write before any task runs; :meth:`Conform.batch` then also checks the values.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property

import pyarrow as pa
import pyarrow.compute as pc

from lance_ops.errors import InvalidArgumentError, LanceOpsError, WriteSchemaError
from lance_ops.query.predicate import parse_expression
from lance_ops.table.blob import contains_blob_v2, input_field, shape_blob_v2
from lance_ops.table.schema import EXPRESSION_KEY

__all__ = ["FILL_MISSING", "Conform", "ConformPlan", "check_fill_missing", "evaluate_expressions"]

FILL_MISSING = ("compute", "null", "error")
# Longest value repr quoted in an error message.
_MAX_VALUE_REPR = 60


def check_fill_missing(fill_missing: str | None) -> None:
    """Raise :class:`InvalidArgumentError` unless ``fill_missing`` is one of :data:`FILL_MISSING` or None."""
    if fill_missing is not None and fill_missing not in FILL_MISSING:
        raise InvalidArgumentError(
            f"fill_missing must be one of {FILL_MISSING} or None, not {fill_missing!r}"
        )


def evaluate_expressions(
    batch: pa.RecordBatch, expressions: Mapping[str, pc.Expression], schema: pa.Schema
) -> list[pa.Array]:
    """The arrays of bound ``expressions`` (one per field of ``schema``, same order) over ``batch``."""
    import pyarrow.dataset as pads  # here, not with the module: it imports pandas (startup)

    table = pads.dataset(pa.Table.from_batches([batch])).to_table(columns=dict(expressions))
    return [c.combine_chunks().cast(f.type) for c, f in zip(table.columns, schema, strict=True)]


@dataclass(frozen=True)
class _Take:
    """Output column ``field`` from input column ``index`` (cast unless ``same_type``)."""

    field: pa.Field
    index: int
    same_type: bool
    blob_v2: bool


@dataclass(frozen=True)
class _Nulls:
    field: pa.Field


@dataclass(frozen=True)
class _Compute:
    field: pa.Field
    text: str
    expression: pc.Expression


_Step = _Take | _Nulls | _Compute


@dataclass(frozen=True)
class ConformPlan:
    """How batches of the input schema ``source`` become batches of ``target``: one step per output
    column."""

    source: pa.Schema
    target: pa.Schema
    steps: tuple[_Step, ...]
    deleted_rows_null: bool = False

    @property
    def filled(self) -> tuple[str, ...]:
        """The columns the input lacks (filled with nulls or computed)."""
        return tuple(s.field.name for s in self.steps if not isinstance(s, _Take))

    def apply(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        columns: dict[str, pa.Array] = {}
        for step in self.steps:
            if isinstance(step, _Take):
                columns[step.field.name] = _taken(batch.column(step.index), step)
            elif isinstance(step, _Nulls):
                columns[step.field.name] = pa.nulls(batch.num_rows, step.field.type)
        computed = [s for s in self.steps if isinstance(s, _Compute)]
        if computed:
            known = pa.RecordBatch.from_pydict(columns) if columns else batch.select([])
            schema = pa.schema([s.field for s in computed])
            try:
                arrays = evaluate_expressions(known, {s.field.name: s.expression for s in computed}, schema)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
                names = tuple(s.field.name for s in computed)
                raise WriteSchemaError(
                    f"could not compute column(s) {list(names)} from their expressions "
                    f"{[s.text for s in computed]} for the new rows: {exc}",
                    names,
                ) from exc
            columns.update((s.field.name, a) for s, a in zip(computed, arrays, strict=True))
        ordered = [columns[f.name] for f in self.target]
        faults = [
            fault
            for array, f in zip(ordered, self.target, strict=True)
            for fault in _null_faults(array, f.with_nullable(True) if self.deleted_rows_null else f)
        ]
        if faults:
            described = "; ".join(
                f"column {path!r} is not nullable but holds {n} null(s)" for path, n in faults
            )
            raise WriteSchemaError(
                f"the data does not fit the dataset: {described}",
                tuple(path for path, _ in faults),
            )
        return pa.RecordBatch.from_arrays(ordered, schema=self.target)


@dataclass(frozen=True)
class Conform:
    """The dataset schema ``schema`` as the target of a write, with the ``fill_missing`` policy.

    ``deleted_rows_null``: the data is a new column file of an existing fragment, whose deleted
    rows are stored as nulls whatever the columns' nullability, so top-level nulls are let through
    (the commit guard, :mod:`lance_ops.table.write_guard`, weighs them against the deleted rows).
    """

    schema: pa.Schema
    fill_missing: str | None = None
    deleted_rows_null: bool = False

    def __post_init__(self) -> None:
        check_fill_missing(self.fill_missing)

    @cached_property
    def expressions(self) -> dict[str, str]:
        """Column name -> the SQL expression it was added from (only columns that record one)."""
        out = {}
        for f in self.schema:
            value = (f.metadata or {}).get(EXPRESSION_KEY.encode())
            if value is not None:
                out[f.name] = value.decode("utf-8")
        return out

    def plan(self, incoming: pa.Schema) -> ConformPlan:
        """How data of schema ``incoming`` is conformed; raises :class:`WriteSchemaError` for what the
        schemas alone decide: extra columns, missing columns that cannot be filled, and types
        without a cast to the dataset's."""
        return _plan(self, incoming)

    def batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """``batch`` conformed to the dataset schema (values checked)."""
        return self.plan(batch.schema).apply(batch)

    def reader(self, reader: pa.RecordBatchReader) -> pa.RecordBatchReader:
        """``reader``'s batches conformed (the plan is made, and checked, before the first batch)."""
        plan = self.plan(reader.schema)
        return pa.RecordBatchReader.from_batches(plan.target, (plan.apply(b) for b in reader))


def _plan(conform: Conform, incoming: pa.Schema) -> ConformPlan:
    schema = conform.schema
    extra = [n for n in incoming.names if schema.get_field_index(n) < 0]
    if extra:
        raise WriteSchemaError(
            f"the data has column(s) {extra} that the dataset does not have (its columns: {schema.names})",
            tuple(extra),
        )
    duplicated = sorted({n for n in incoming.names if incoming.names.count(n) > 1})
    if duplicated:
        raise WriteSchemaError(f"the data has column(s) {duplicated} more than once", tuple(duplicated))
    target = pa.schema([input_field(f) for f in schema], metadata=schema.metadata)
    steps: list[_Step] = []
    unfilled: list[str] = []
    for f, out in zip(schema, target, strict=True):
        index = incoming.get_field_index(f.name)
        if index >= 0:
            steps.append(_take(incoming.field(index), out, index, contains_blob_v2(f)))
            continue
        step = _fill(conform, schema, out)
        if step is None:
            unfilled.append(f.name)
        else:
            steps.append(step)
    if unfilled:
        raise WriteSchemaError(_missing_message(conform, unfilled), tuple(unfilled))
    return ConformPlan(incoming, target, tuple(steps), conform.deleted_rows_null)


def _fill(conform: Conform, schema: pa.Schema, out: pa.Field) -> _Step | None:
    """How a column the data lacks is filled under the policy, or None when it cannot be."""
    policy = conform.fill_missing
    if policy == "error":
        return None
    text = conform.expressions.get(out.name)
    if policy == "compute" and text is not None:
        others = pa.schema([f for f in schema if f.name != out.name])
        try:
            bound = parse_expression(text, others, column_typed_literals=True)
        except LanceOpsError as exc:
            raise WriteSchemaError(
                f"column {out.name!r} cannot be computed from its expression {text!r}: {exc}", (out.name,)
            ) from exc
        return _Compute(out, text, bound.expression)
    return _Nulls(out) if out.nullable else None


def _missing_message(conform: Conform, names: list[str]) -> str:
    if conform.fill_missing == "error":
        return f"the data lacks column(s) {names} of the dataset (fill_missing='error')"
    hints = []
    for name in names:
        text = conform.expressions.get(name)
        if text is None:
            hints.append(f"{name!r} is not nullable and records no expression to compute it from")
        else:
            hints.append(
                f"{name!r} is not nullable; fill_missing='compute' computes it from its expression {text!r}"
            )
    return f"the data lacks column(s) {names} of the dataset: {'; '.join(hints)}"


def _take(source: pa.Field, out: pa.Field, index: int, blob_v2: bool) -> _Take:
    """The step taking ``source`` into ``out``; raises when its type has no cast to ``out``'s."""
    same = source.type == out.type
    if not (same or blob_v2 or pa.types.is_null(source.type)):
        try:
            _cast(pa.array([], source.type), out.type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            raise WriteSchemaError(
                f"column {out.name!r} is {out.type} in the dataset; the data's {source.type} does not "
                f"convert to it",
                (out.name,),
            ) from exc
    return _Take(out, index, same, blob_v2)


def _taken(array: pa.Array, step: _Take) -> pa.Array:
    if step.blob_v2:
        array = shape_blob_v2(array, step.field)
    if step.same_type or array.type == step.field.type:
        # no cast (pyarrow refuses to cast fixed_size_list<null> even to its own type)
        return array
    try:
        return _cast(array, step.field.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise WriteSchemaError(_cast_message(array, step.field), (step.field.name,)) from exc


def _relaxed(data_type: pa.DataType) -> pa.DataType:
    """``data_type`` with every field inside it nullable."""
    if pa.types.is_struct(data_type):
        return pa.struct([f.with_type(_relaxed(f.type)).with_nullable(True) for f in data_type])
    item = data_type.value_field if _is_list(data_type) else None
    if item is None:
        return data_type
    relaxed = item.with_type(_relaxed(item.type)).with_nullable(True)
    if pa.types.is_fixed_size_list(data_type):
        return pa.list_(relaxed, data_type.list_size)
    return pa.large_list(relaxed) if pa.types.is_large_list(data_type) else pa.list_(relaxed)


def _cast(array: pa.Array, target: pa.DataType) -> pa.Array:
    """``array`` cast to ``target``. Nested values are cast to the relaxed type and then rebuilt as
    ``target``: pyarrow refuses a struct cast (or view) when a non-nullable child holds nulls under
    null parents, which is legitimate data; the null checks of :meth:`ConformPlan.apply` find the
    real faults."""
    return _retyped(array.cast(_relaxed(target)), target)


def _retyped(array: pa.Array, target: pa.DataType) -> pa.Array:
    """``array``, of ``target``'s relaxed type, rebuilt as ``target`` (same buffers)."""
    if array.type == target:
        return array
    mask = array.is_null() if array.null_count else None
    if pa.types.is_struct(target):
        children = [_retyped(array.field(i), target.field(i).type) for i in range(target.num_fields)]
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    if pa.types.is_fixed_size_list(target):
        size = target.list_size
        values = array.values.slice(array.offset * size, len(array) * size)
        return pa.FixedSizeListArray.from_arrays(_retyped(values, target.value_type), type=target, mask=mask)
    build = pa.LargeListArray if pa.types.is_large_list(target) else pa.ListArray
    return build.from_arrays(array.offsets, _retyped(array.values, target.value_type), type=target, mask=mask)


def _cast_fails(array: pa.Array, target: pa.DataType) -> bool:
    try:
        _cast(array, target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return True
    return False


def _is_list(data_type: pa.DataType) -> bool:
    return (
        pa.types.is_list(data_type)
        or pa.types.is_large_list(data_type)
        or pa.types.is_fixed_size_list(data_type)
    )


def _cast_message(array: pa.Array, field: pa.Field) -> str:
    """Which value of ``array`` does not convert to ``field``'s type, found by halving the array."""
    start, stop = 0, len(array)
    while stop - start > 1:
        middle = (start + stop) // 2
        if _cast_fails(array.slice(start, middle - start), field.type):
            stop = middle
        else:
            start = middle
    prefix = f"column {field.name!r} is {field.type} in the dataset; the data's {array.type}"
    if stop - start != 1 or not _cast_fails(array.slice(start, 1), field.type):
        return f"{prefix} values do not convert to it"
    value = repr(array[start].as_py())
    if len(value) > _MAX_VALUE_REPR:
        value = value[: _MAX_VALUE_REPR - 3] + "..."
    return f"{prefix} value {value} does not convert to it (not a valid {field.type}, or out of its range)"


def _requires_inside(data_type: pa.DataType) -> bool:
    """Whether a struct or list type has a non-nullable field somewhere inside."""
    if pa.types.is_struct(data_type):
        return any(not f.nullable or _requires_inside(f.type) for f in data_type)
    if _is_list(data_type):
        item = data_type.value_field
        return not item.nullable or _requires_inside(item.type)
    return False


def _null_faults(array: pa.Array, field: pa.Field, path: str | None = None) -> Iterator[tuple[str, int]]:
    """``(path, nulls)`` of each non-nullable field holding nulls in ``array``: the field itself,
    then its struct children and list items where the parent value is present."""
    path = field.name if path is None else path
    if not field.nullable and array.null_count:
        yield path, array.null_count
    data_type = field.type
    if not _requires_inside(data_type):
        return
    if isinstance(array, pa.ExtensionArray):
        array = array.storage
    if array.null_count:
        array = array.filter(array.is_valid())
    if pa.types.is_struct(data_type):
        for i, child in enumerate(data_type):
            yield from _null_faults(array.field(i), child, f"{path}.{child.name}")
    else:
        item = data_type.value_field
        yield from _null_faults(array.flatten(), item, f"{path}.{item.name}")
