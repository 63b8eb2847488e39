"""The values a filter is translated into, and the typing rules that combine them.

A :class:`Value` is an operand on its way to Arrow: its ``pyarrow.compute.Expression``, its Arrow
type and, for a constant, its value. The rules here are DataFusion's where Arrow's differ: a literal
compared with a column takes the column's type when that cast is lossless (:func:`unify`), two
numbers of different types meet in DataFusion's common type (:func:`promote`), and temporal text
literals read as ISO text (:func:`temporal_literal`). Shared by the SQL translator
(:mod:`lance_ops.query.arrow`) and its functions (:mod:`lance_ops.query._functions`).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lance_ops.errors import PredicateError
from lance_ops.query import expressions as ex

__all__ = [
    "NULL_BOOL",
    "Value",
    "as_type",
    "constant",
    "datafusion_cast",
    "promote",
    "retype",
    "temporal_literal",
    "type_kind",
    "unify",
]


@dataclass(frozen=True)
class Value:
    """A translated operand: its expression, its Arrow type, its value when it is a constant, and
    the tree node it was translated from (for error messages; None for values built along the way)."""

    expr: pc.Expression
    type: pa.DataType
    literal: pa.Scalar | None = None
    node: ex.Expr | None = field(default=None, compare=False, repr=False)


def constant(scalar: pa.Scalar) -> Value:
    return Value(pc.scalar(scalar), scalar.type, scalar)


# Not ``pa.scalar(None, ...)``: converting a Python object makes pyarrow import pandas (0.15 s), and
# this runs when the module is imported.
NULL_BOOL = pa.nulls(1, pa.bool_())[0]


def type_kind(type_: pa.DataType) -> str:
    """Coarse type family deciding whether a literal may be cast to a column's type."""
    if pa.types.is_integer(type_):
        return "int"
    if pa.types.is_floating(type_) or pa.types.is_decimal(type_):
        return "float"
    if pa.types.is_string(type_) or pa.types.is_large_string(type_) or pa.types.is_string_view(type_):
        return "string"
    if pa.types.is_binary(type_) or pa.types.is_large_binary(type_) or pa.types.is_binary_view(type_):
        return "binary"
    if pa.types.is_temporal(type_):
        return "temporal"
    if pa.types.is_boolean(type_):
        return "bool"
    if pa.types.is_null(type_):
        return "null"
    return "other"


# Literal kind -> column kinds it may be cast to (a string also goes to what it spells: '2', '2024-01-01').
_RETYPE = {
    "int": {"int", "float"},
    "float": {"float"},
    "string": {"string", "binary", "int", "float", "temporal", "bool"},
    "temporal": {"temporal"},
    "bool": {"bool"},
}


def retype(value: Value, target: pa.DataType) -> Value:
    """``value`` cast to ``target`` when it is a literal and the cast is lossless."""
    if value.literal is None or value.type == target:
        return value
    if pa.types.is_null(value.type):
        return constant(pa.scalar(None, target))
    if type_kind(target) not in _RETYPE.get(type_kind(value.type), set()):
        return value
    literal = value.literal
    if pa.types.is_integer(literal.type) and pa.types.is_decimal(target):
        # Arrow casts an integer only to a decimal wide enough for any of its type's values; an
        # integer too wide for ``target`` stays a wide decimal, which Arrow compares with it.
        try:
            literal = literal.cast(pa.decimal128(38, target.scale), safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return value
        value = constant(literal)
    try:
        return constant(literal.cast(target, safe=True))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return value


def _common_numeric(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    """DataFusion's result type for two different numeric types (None: not both int/float)."""
    if (
        a == b
        or {type_kind(a), type_kind(b)} - {"int", "float"}
        or pa.types.is_decimal(a)
        or pa.types.is_decimal(b)
    ):
        return None
    if pa.types.is_floating(a) or pa.types.is_floating(b):
        return pa.float64()
    if pa.types.is_unsigned_integer(a) and pa.types.is_unsigned_integer(b):
        return a if a.bit_width > b.bit_width else b
    return pa.int64()


def as_type(value: Value, target: pa.DataType) -> Value:
    if value.type == target:
        return value
    if value.literal is not None:
        return constant(value.literal.cast(target))
    return Value(value.expr.cast(target), target)


# DataFusion's decimal for an integer type meeting a decimal: as many digits as the type can hold.
_INTEGER_DIGITS = {8: 3, 16: 5, 32: 10, 64: 20}


def _integer_as_decimal(value: Value, other: pa.DataType) -> Value:
    """``value`` as DataFusion's decimal when it is an integer meeting a decimal (Arrow casts an
    integer only to a decimal holding any of its values, and has no integer-decimal kernels)."""
    if not (pa.types.is_integer(value.type) and pa.types.is_decimal(other)):
        return value
    return as_type(value, pa.decimal128(_INTEGER_DIGITS[value.type.bit_width], 0))


def promote(left: Value, right: Value) -> tuple[Value, Value]:
    """Cast two numeric operands to their common type explicitly.

    Arrow's binder would otherwise narrow an integer literal to the column's type
    (``int32_col + 2147483647`` overflowing in int32).
    """
    common = _common_numeric(left.type, right.type)
    if common is None:
        return _integer_as_decimal(left, right.type), _integer_as_decimal(right, left.type)
    try:
        return as_type(left, common), as_type(right, common)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise PredicateError(f"cannot convert {left.type} and {right.type} to {common}: {exc}") from exc


def unify(left: Value, right: Value) -> tuple[Value, Value]:
    """Give a literal operand the type of the other (non-literal) operand when possible."""
    if left.literal is not None and right.literal is None:
        return retype(left, right.type), right
    if right.literal is not None and left.literal is None:
        return left, retype(right, left.type)
    if pa.types.is_null(left.type):
        return retype(left, right.type), right
    if pa.types.is_null(right.type):
        return left, retype(right, left.type)
    return left, right


def temporal_literal(text: str, target: pa.DataType) -> pa.Scalar:
    """``timestamp '...'`` / ``date '...'``: ISO text; an explicit offset is converted to UTC."""
    try:
        if pa.types.is_date(target):
            return pa.scalar(dt.date.fromisoformat(text.strip()), target)
        try:
            return pa.scalar(text.strip(), pa.string()).cast(target)
        except pa.ArrowInvalid:
            moment = dt.datetime.fromisoformat(text.strip())
    except ValueError as exc:
        raise PredicateError(f"invalid {target} literal {text!r}") from exc
    if moment.tzinfo is not None:
        moment = moment.astimezone(dt.UTC).replace(tzinfo=None)
    return pa.scalar(moment, target)


def datafusion_cast(value: Any, source: pa.DataType, target: pa.DataType) -> Any:
    """``value`` (an Arrow expression or scalar of type ``source``) cast as DataFusion casts (SQL
    ``CAST``, ``arrow_cast``, an Arrow expression's unsafe cast): fractions and finer time units are
    cut off (but a float becomes the nearest decimal, halves away from zero), values out of the
    target's range refused."""
    if pa.types.is_floating(source) and pa.types.is_integer(target):
        value = pc.trunc(value)  # then the cast only checks the range
    if pa.types.is_floating(source) and pa.types.is_decimal(target):
        value = pc.round(value, target.scale, round_mode="half_towards_infinity")  # Arrow would cut
    if pa.types.is_integer(source) and pa.types.is_decimal(target):
        # Arrow wants a decimal wide enough for any integer first; the narrowing step is checked.
        value = value.cast(pa.decimal128(38, target.scale))
    return value.cast(options=pc.CastOptions(target, allow_time_truncate=True))
