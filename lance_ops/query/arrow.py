"""The expression tree's Arrow visitor: a tree (:mod:`lance_ops.query.expressions`) -> a typed
``pyarrow.compute.Expression``, checked against a schema.

A dispatch table keyed by node class (:data:`_HANDLERS`; calls by name through :data:`FUNCTIONS`,
:mod:`~lance_ops.query._functions`) builds the expression; the binding API over it is
:mod:`lance_ops.query.predicate`.

Semantics follow pylance where Arrow's kernels differ from DataFusion's:

* three-valued logic: AND/OR/NOT are Kleene, comparisons with NULL are NULL, ``x IN (.., NULL)``
  is NULL when nothing matches, and a row is selected only when the predicate is TRUE;
* floats compare as arrow-rs does: a NaN is ordered by its sign bit, ``-NaN`` below -inf and
  ``NaN`` above +inf, equal to a NaN of its own sign only (``x > 0`` never selects ``-NaN``,
  ``x < 0`` does); two non-constant floats compare in IEEE total order (``-0.0 < 0.0``), a float
  and a constant with ``-0.0 = 0.0`` (what pylance returns). Arrow's kernels cannot see a NaN's
  sign bit, so a small registered kernel (:data:`NAN_RANK_FUNCTION`) ranks them;
* ``%`` is the truncated remainder (sign of the dividend), ``/`` of two integers truncates;
* a literal compared with a column takes the column's type when that cast is lossless
  (``int8_col = 5``, ``ts_col > timestamp '2024-01-01 00:00:00'``, ``large_string_col = 'x'``);
  lossy cases (``int_col = 1.5``) compare in the wider type instead of failing as pylance does.

Every column reference is checked against the schema (:class:`SchemaError`); constructs and
functions outside the table raise :class:`UnsupportedFeatureError` naming the SQL fragment; text
that does not parse, or operands whose types do not combine, raise :class:`PredicateError` in the
user's words, never sqlglot's or Arrow's (a filter is often typed by a person, at a prompt)::

    cannot parse predicate 'id = = 3': syntax error near '=' (column 6): '=' is missing its right operand
    cannot compare column 'note' (string) with 5 (integer) using '='
    cannot apply '+' to column 'note' (string) and 1 (integer)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_ops.encoding.statistics import nan_signs
from lance_ops.errors import (
    FieldNotFoundError,
    LanceOpsError,
    PredicateError,
    UnsupportedFeatureError,
    UnsupportedSQLError,
)
from lance_ops.query import expressions as ex
from lance_ops.query import visitors
from lance_ops.query.values import (
    NULL_BOOL,
    Value,
    constant,
    datafusion_cast,
    promote,
    retype,
    temporal_literal,
    type_kind,
    unify,
)

__all__ = ["FUNCTIONS", "NAN_RANK_FUNCTION", "ArrowTranslator", "compare", "sql_text"]


# How a literal's type is named to the user: the family, not Arrow's width (``5`` is an integer).
_LITERAL_KINDS = {
    "int": "integer",
    "float": "float",
    "string": "string",
    "binary": "binary",
    "bool": "boolean",
}


def _describe(value: Value) -> str:
    """An operand in the user's words: ``column 'note' (string)``, ``5 (integer)``, ``'x' + 1 (string)``."""
    node = value.node
    if isinstance(node, ex.Column):
        return f"column {'.'.join(node.path)!r} ({value.type})"
    if pa.types.is_null(value.type):
        return "NULL"
    text = (
        sql_text(node) if node is not None else str(value.literal) if value.literal is not None else "a value"
    )
    kind = _LITERAL_KINDS.get(type_kind(value.type)) if value.literal is not None else None
    return f"{text} ({kind or value.type})"


def _listed(values: Sequence[Value]) -> str:
    """Operands described and joined: ``A and B`` or ``A, B, C``."""
    described = [_describe(v) for v in values]
    return " and ".join(described) if len(described) <= 2 else ", ".join(described)


def sql_text(node: ex.Expr) -> str:
    """How errors quote a node: the SQL it was parsed from, or (built otherwise) its SQL text."""
    if node.source is not None:
        return node.source
    try:
        return visitors.to_sql(node)
    except LanceOpsError:
        return repr(node)


class ArrowTranslator:
    """The Arrow visitor: walks an expression tree through :data:`_HANDLERS` (a call through
    :data:`FUNCTIONS`, by name), checking columns against the schema."""

    def __init__(self, schema: pa.Schema, column_typed_literals: bool = False) -> None:
        # Imported here, not with the module: pyarrow.dataset loads pandas, and importing this
        # module (through the dataset layer) should not cost that before a filter is bound.
        import pyarrow.dataset as pads

        self.schema = schema
        self.column_typed_literals = column_typed_literals
        self.columns: set[str] = set()
        self._probe = pads.dataset(schema.empty_table())

    def translate(self, node: ex.Expr) -> Value:
        """``node`` as a value that remembers it came from ``node`` (unless it names a deeper one)."""
        handler = _HANDLERS.get(type(node))
        if handler is None:
            raise UnsupportedSQLError(f"unsupported SQL in a filter: {sql_text(node)}")
        value = handler(self, node)
        return value if value.node is not None else replace(value, node=node)

    def typed(self, expr: pc.Expression, where: str, mismatch: Callable[[], str] | None = None) -> Value:
        """``expr`` with its result type (binding it also checks that the operand types combine).

        ``mismatch`` words the error when Arrow has no kernel for the operand types (naming the
        operands and their types as the user wrote them); without it the error names ``where``.
        """
        try:
            type_ = self._probe.scanner(columns={"v": expr}).projected_schema.field(0).type
        except pa.ArrowInvalid as exc:
            if "No match for FieldRef" in str(exc):
                raise FieldNotFoundError(f"{where}: {exc}") from exc
            raise PredicateError(f"cannot evaluate {where}: {exc}") from exc
        except (pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            if mismatch is not None and _NO_KERNEL in str(exc):
                raise PredicateError(mismatch()) from exc
            raise PredicateError(f"cannot evaluate {where}: {exc}") from exc
        return Value(expr, type_)

    def call(self, node: ex.Expr, expr: pc.Expression) -> Value:
        """``expr`` computing ``node`` from its operands, typed; an operand type mismatch names them."""
        return self.typed(expr, sql_text(node), lambda: self._mismatch(node))

    def _mismatch(self, node: ex.Expr) -> str:
        """``cannot apply '+' to column 'note' (string) and 1 (integer)``: re-translates the operands
        (they translated once already, so they do again) to describe them."""
        operands = [self.translate(child) for child in ex.children(node)]
        return f"cannot apply {_operator(node)!r} to {_listed(operands)}"

    def column(self, node: ex.Column) -> Value:
        top = self.top_level(node)
        type_ = self.schema.field(top).type
        for name in node.path[1:]:
            if not pa.types.is_struct(type_) or type_.get_field_index(name) < 0:
                raise FieldNotFoundError(f"no such field {'.'.join(node.path)!r} in the dataset schema")
            type_ = type_.field(name).type
        self.columns.add(top)
        if isinstance(type_, pa.BaseExtensionType):  # compared as its storage (arrow.uuid: 16 bytes)
            return Value(pc.field(top, *node.path[1:]).cast(type_.storage_type), type_.storage_type)
        return Value(pc.field(top, *node.path[1:]), type_)

    def top_level(self, node: ex.Column) -> str:
        name = node.path[0]
        if self.schema.get_field_index(name) >= 0:
            return name
        folded = [n for n in self.schema.names if n.lower() == name.lower()]
        if len(folded) == 1:
            return folded[0]
        raise FieldNotFoundError(  # pylance's words first, then which of the filter's names it is
            f"Invalid user input: No field named {name}. Valid fields are {', '.join(self.schema.names)}"
            f" (the filter names unknown column {sql_text(node)!r})"
        )

    def fold(self, node: ex.Expr) -> ex.Expr:
        """A constant sub-expression as the literal it evaluates to (``now()``, ``DATE '2024-01-01'``,
        ``-5``), so the bounds visitor sees plain values; any other node as it is."""
        if isinstance(node, ex.Literal) or visitors.columns(node):
            return node
        try:
            value = self.translate(node).literal
        except (LanceOpsError, pa.ArrowException):
            return node
        return node if value is None else ex.Literal(value, source=node.source)

    def pattern(self, node: ex.Expr, what: str) -> str:
        """A string literal argument (LIKE patterns, regular expressions, affixes)."""
        value = self.translate(node)
        if value.literal is None or not isinstance(value.literal.as_py(), str):
            raise UnsupportedFeatureError(f"the {what} must be a string literal, not {sql_text(node)}")
        return value.literal.as_py()


# Arrow's words when a function has no kernel for its argument types.
_NO_KERNEL = "has no kernel matching input types"

_OPERATOR_SYMBOLS = {"eq": "=", "ne": "<>", "lt": "<", "gt": ">", "le": "<=", "ge": ">="}
# Calls standing for operators and keywords, by the name the parser gives them.
_CALL_SYMBOLS = {"dpipe": "||", "is": "IS"}
_NODE_SYMBOLS: dict[type[ex.Expr], str] = {
    ex.And: "AND",
    ex.Or: "OR",
    ex.Not: "NOT",
    ex.Neg: "-",
    ex.Between: "BETWEEN",
    ex.In: "IN",
    ex.IsNull: "IS",
    ex.Cast: "CAST",
}


def _operator(node: ex.Expr) -> str:
    """The operator or function ``node`` applies, as written (``+``, ``LOWER``, ``my_udf``)."""
    if isinstance(node, ex.Compare):
        return _OPERATOR_SYMBOLS[node.op]
    if isinstance(node, ex.Arithmetic):
        return node.op
    if isinstance(node, ex.Like):
        return "ILIKE" if node.ignore_case else "LIKE"
    if isinstance(node, ex.Call):
        if node.name in _CALL_SYMBOLS:
            return _CALL_SYMBOLS[node.name]
        from lance_ops.query.parser import is_construct  # noqa: PLC0415 - sqlglot, on first use

        return node.name.upper() if is_construct(node.name) else node.name
    return _NODE_SYMBOLS.get(type(node), type(node).__name__.upper())


Handler = Callable[[ArrowTranslator, Any], Value]

# ---------------------------------------------------------------- literals


def _literal(tr: ArrowTranslator, node: ex.Literal) -> Value:
    return constant(node.value)


# ---------------------------------------------------------------- comparisons


NAN_RANK_FUNCTION = "lance_ops_nan_rank"


def _nan_rank_kernel(context: Any, values: pa.Array | pa.Scalar) -> pa.Array | pa.Scalar:
    """-1 for a NaN with its sign bit set, 1 for any other NaN, 0 for a number, null for null."""
    if isinstance(values, pa.Scalar):
        return pa.scalar(_nan_rank_kernel(context, pa.array([values], values.type))[0].as_py(), pa.int8())
    positive, negative = nan_signs(values)
    rank = positive.astype(np.int8) - negative.astype(np.int8)
    return pa.array(rank, pa.int8(), mask=None if not values.null_count else ~np.asarray(values.is_valid()))


def _register_nan_rank() -> None:
    try:
        pc.get_function(NAN_RANK_FUNCTION)
    except KeyError:
        pc.register_scalar_function(
            _nan_rank_kernel,
            NAN_RANK_FUNCTION,
            {"summary": "NaN rank by sign bit", "description": "-1: -NaN, 1: NaN, 0: number"},
            {"values": pa.float64()},
            pa.int8(),
        )


_register_nan_rank()


def _nan_rank(x: pc.Expression) -> pc.Expression:
    """``x``'s place among NaNs: -1 (``-NaN``, below every number), 1 (``NaN``, above), 0 (a number)."""
    return pc.Expression._call(NAN_RANK_FUNCTION, [x.cast(pa.float64())])


def _nan_eq(x: pc.Expression, y: pc.Expression) -> pc.Expression:
    # if_else yields NULL when its condition is NULL, so the result is NULL exactly when x or y is.
    rx, ry = _nan_rank(x), _nan_rank(y)
    return pc.if_else(pc.equal(rx, ry), pc.if_else(pc.equal(rx, 0), pc.equal(x, y), True), False)


def _nan_lt(x: pc.Expression, y: pc.Expression) -> pc.Expression:
    rx, ry = _nan_rank(x), _nan_rank(y)
    return pc.if_else(pc.equal(rx, ry), pc.if_else(pc.equal(rx, 0), pc.less(x, y), False), pc.less(rx, ry))


def _number_literal(value: Value) -> bool:
    """Whether ``value`` is a float literal holding a number (not NaN, not null)."""
    literal = value.literal
    return literal is not None and literal.is_valid and not math.isnan(literal.as_py())


def _against_number(number: pc.Expression) -> _Order:
    """``=`` / ``<`` of a float against the constant ``number`` (not NaN): Arrow's kernels, with a
    NaN on the other side placed by its sign (one rank per row of that side only)."""

    def lt(x: pc.Expression, y: pc.Expression) -> pc.Expression:
        # IEEE ``<`` is FALSE for NaN: a -NaN lies below the number, a NaN above it
        if y.equals(number):
            return pc.or_kleene(pc.less(x, y), pc.less(_nan_rank(x), 0))
        return pc.or_kleene(pc.less(x, y), pc.greater(_nan_rank(y), 0))

    return _Order(pc.equal, lt)  # a NaN never equals a number


def _both_zero(x: pc.Expression, y: pc.Expression) -> pc.Expression:
    return pc.if_else(pc.equal(x, 0.0), pc.equal(y, 0.0), False)


def _negative_zero(x: pc.Expression) -> pc.Expression:
    """For a zero ``x``: whether it is -0.0 (1 / -0.0 is -inf)."""
    return pc.less(pc.divide(pc.scalar(1.0), x), 0.0)


def _total_eq(x: pc.Expression, y: pc.Expression) -> pc.Expression:
    return pc.if_else(_both_zero(x, y), pc.equal(_negative_zero(x), _negative_zero(y)), _nan_eq(x, y))


def _total_lt(x: pc.Expression, y: pc.Expression) -> pc.Expression:
    negative_first = pc.and_kleene(_negative_zero(x), pc.invert(_negative_zero(y)))
    return pc.if_else(_both_zero(x, y), negative_first, _nan_lt(x, y))


Compare = Callable[[pc.Expression, pc.Expression], pc.Expression]


@dataclass(frozen=True)
class _Order:
    """``=`` and ``<`` of one comparison flavour; the other four operators derive from them."""

    eq: Compare
    lt: Compare


# Arrow's kernels; floats against a constant (NaN = NaN, NaN above +inf, -0.0 = 0.0); floats
# against floats (arrow-rs total order, which also puts -0.0 below 0.0).
_ARROW = _Order(pc.equal, pc.less)
_FLOAT_CONSTANT = _Order(_nan_eq, _nan_lt)
_FLOAT_TOTAL = _Order(_total_eq, _total_lt)

_OPERATORS: dict[str, Callable[[_Order, pc.Expression, pc.Expression], pc.Expression]] = {
    "eq": lambda order, x, y: order.eq(x, y),
    "ne": lambda order, x, y: pc.invert(order.eq(x, y)),
    "lt": lambda order, x, y: order.lt(x, y),
    "gt": lambda order, x, y: order.lt(y, x),
    "le": lambda order, x, y: pc.invert(order.lt(y, x)),
    "ge": lambda order, x, y: pc.invert(order.lt(x, y)),
}


def compare(
    tr: ArrowTranslator, op: str, left: Value, right: Value, where: str, using: str | None = None
) -> Value:
    """``left op right`` with pylance's semantics; ``using`` names the operator the user wrote
    (``BETWEEN``, ``IN``; default: ``op``'s symbol) when the operand types cannot be compared."""
    given = left, right
    left, right = unify(left, right)
    if pa.types.is_null(left.type) or pa.types.is_null(right.type):
        return constant(NULL_BOOL)
    left, right = promote(left, right)
    order = _ARROW
    if pa.types.is_floating(left.type) and pa.types.is_floating(right.type):
        against_constant = left.literal is not None or right.literal is not None
        order = _FLOAT_CONSTANT if against_constant else _FLOAT_TOTAL
        for side in (left, right):
            if _number_literal(side):
                order = _against_number(side.expr)
    symbol = using or _OPERATOR_SYMBOLS[op]
    return tr.typed(
        _OPERATORS[op](order, left.expr, right.expr),
        where,
        lambda: f"cannot compare {_describe(given[0])} with {_describe(given[1])} using {symbol!r}",
    )


def _comparison(tr: ArrowTranslator, node: ex.Compare) -> Value:
    return compare(tr, node.op, tr.translate(node.left), tr.translate(node.right), sql_text(node))


def _between(tr: ArrowTranslator, node: ex.Between) -> Value:
    value, where = tr.translate(node.value), sql_text(node)
    low = compare(tr, "ge", value, tr.translate(node.low), where, "BETWEEN")
    high = compare(tr, "le", value, tr.translate(node.high), where, "BETWEEN")
    return tr.call(node, pc.and_kleene(low.expr, high.expr))


def _in(tr: ArrowTranslator, node: ex.In) -> Value:
    value = tr.translate(node.value)
    items = [unify(value, tr.translate(item))[1] for item in node.items]
    where = sql_text(node)
    set_lookup = (
        items
        and type_kind(value.type) not in ("float", "null")
        and all(i.literal is not None and i.type in (value.type, pa.null()) for i in items)
    )
    if not set_lookup:
        result = compare(tr, "eq", value, items[0], where, "IN") if items else constant(pa.scalar(False))
        for item in items[1:]:
            equal = compare(tr, "eq", value, item, where, "IN")
            result = tr.call(node, pc.or_kleene(result.expr, equal.expr))
        return result
    present = [i.literal for i in items if i.literal is not None and i.literal.is_valid]
    found = pc.is_in(
        value.expr, value_set=pa.array([s.as_py() for s in present], value.type), skip_nulls=True
    )
    if len(present) < len(items):
        return tr.call(node, pc.if_else(found, pa.scalar(True), NULL_BOOL))
    return tr.call(node, pc.if_else(pc.is_null(value.expr), NULL_BOOL, found))


def _is_null(tr: ArrowTranslator, node: ex.IsNull) -> Value:
    return tr.call(node, pc.is_null(tr.translate(node.value).expr))


# ---------------------------------------------------------------- logic


def _logic(kernel: Callable[..., pc.Expression]) -> Handler:
    def handle(tr: ArrowTranslator, node: ex.And | ex.Or) -> Value:
        left, right = tr.translate(node.left), tr.translate(node.right)
        left, right = (retype(v, pa.bool_()) for v in (left, right))
        return tr.call(node, kernel(left.expr, right.expr))

    return handle


def _not(tr: ArrowTranslator, node: ex.Not) -> Value:
    return tr.call(node, pc.invert(retype(tr.translate(node.operand), pa.bool_()).expr))


# ---------------------------------------------------------------- arithmetic


def _operands(tr: ArrowTranslator, node: ex.Arithmetic | ex.Call) -> tuple[Value, Value]:
    """Arithmetic operands: only NULL literals are retyped, so ``int32_col + 2147483647`` is int64
    (with ``column_typed_literals`` a number that fits takes the other operand's numeric type)."""
    this, other = (node.left, node.right) if isinstance(node, ex.Arithmetic) else node.args
    left, right = tr.translate(this), tr.translate(other)
    numbers = {type_kind(left.type), type_kind(right.type)} <= {"int", "float"}
    if tr.column_typed_literals and numbers and (_is_number(this) or _is_number(other)):
        left, right = unify(left, right)
    if pa.types.is_null(left.type):
        left = retype(left, right.type)
    if pa.types.is_null(right.type):
        right = retype(right, left.type)
    return promote(left, right)


def _is_number(node: ex.Expr) -> bool:
    """A number as SQL writes one (``2``, ``-2.5``), not a computed one (a cast)."""
    while isinstance(node, ex.Neg):
        node = node.value
    if not isinstance(node, ex.Literal) or node.value.type not in (pa.int64(), pa.uint64(), pa.float64()):
        return False
    return node.value.is_valid and math.isfinite(node.value.as_py())


_ARITHMETIC: dict[str, Callable[..., pc.Expression]] = {
    "+": pc.add,
    "-": pc.subtract,
    "*": pc.multiply,
    "/": pc.divide,
}


def _arithmetic(tr: ArrowTranslator, node: ex.Arithmetic) -> Value:
    left, right = _operands(tr, node)
    if node.op != "%":
        return tr.call(node, _ARITHMETIC[node.op](left.expr, right.expr))
    # truncated remainder x - trunc(x / y) * y (SQL's %: the sign follows the dividend)
    quotient = pc.divide(left.expr, right.expr)
    if not (pa.types.is_integer(left.type) and pa.types.is_integer(right.type)):
        quotient = pc.trunc(quotient)
    return tr.call(node, pc.subtract(left.expr, pc.multiply(quotient, right.expr)))


def _neg(tr: ArrowTranslator, node: ex.Neg) -> Value:
    value = tr.translate(node.value)
    if value.literal is not None and value.literal.is_valid:
        return constant(pc.negate(value.literal))
    return tr.call(node, pc.negate(value.expr))


# ---------------------------------------------------------------- casts and temporal literals


def _cast(tr: ArrowTranslator, node: ex.Cast) -> Value:
    target = node.to
    value = tr.translate(node.value)
    if value.literal is None:
        return tr.call(node, datafusion_cast(value.expr, value.type, target))
    if pa.types.is_temporal(target) and isinstance(value.literal.as_py(), str):
        return constant(temporal_literal(value.literal.as_py(), target))
    try:
        return constant(datafusion_cast(value.literal, value.type, target))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise PredicateError(f"cannot evaluate {sql_text(node)}: {exc}") from exc


# ---------------------------------------------------------------- LIKE


def _like(tr: ArrowTranslator, node: ex.Like) -> Value:
    pattern = tr.pattern(node.pattern, "LIKE pattern")
    return tr.call(
        node, pc.match_like(tr.translate(node.value).expr, pattern=pattern, ignore_case=node.ignore_case)
    )


def _call(tr: ArrowTranslator, node: ex.Call) -> Value:
    handler = FUNCTIONS.get(node.name)
    if handler is None:
        from lance_ops.query.parser import is_construct  # noqa: PLC0415 - sqlglot, on first use

        if is_construct(node.name):
            raise UnsupportedSQLError(f"unsupported SQL in a filter: {sql_text(node)}")
        raise UnsupportedSQLError(f"unsupported function in a filter: {sql_text(node)}")
    return handler(tr, node)


_HANDLERS: dict[type[ex.Expr], Handler] = {
    ex.Column: ArrowTranslator.column,
    ex.Literal: _literal,
    ex.Compare: _comparison,
    ex.Between: _between,
    ex.In: _in,
    ex.IsNull: _is_null,
    ex.And: _logic(pc.and_kleene),
    ex.Or: _logic(pc.or_kleene),
    ex.Not: _not,
    ex.Arithmetic: _arithmetic,
    ex.Neg: _neg,
    ex.Cast: _cast,
    ex.Like: _like,
    ex.Call: _call,
}

# DataFusion's scalar functions, by name, in their own module (it builds on the helpers above).
from lance_ops.query import _functions  # noqa: E402

FUNCTIONS = _functions.FUNCTIONS
