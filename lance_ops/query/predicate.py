"""Filter predicates: SQL text (or a ``pyarrow.compute.Expression``) -> a bound Arrow expression.

pylance filters are DataFusion SQL. Here sqlglot parses the text (a Spark-flavoured dialect:
backtick identifiers, ``'...'`` and ``"..."`` string literals as Lance reads them, no backslash
escapes inside strings) and a dispatch table keyed by sqlglot node class turns the tree into a
``pyarrow.compute.Expression`` that Arrow's dataset machinery evaluates batch by batch::

    "id % 10 = 0 AND name LIKE 'a%'"
      -> And(EQ(Mod(Column id, 10), 0), Like(Column name, 'a%'))
      -> and_kleene(equal(subtract(id, multiply(divide(id, 10), 10)), 0), match_like(name, 'a%'))

A filter is also read into the expression tree of :mod:`lance_ops.query.expressions` (SQL through
:mod:`~lance_ops.query.parser`, an Arrow expression through its Substrait form,
:mod:`~lance_ops.query.substrait`); the pruning bounds are a visitor over that tree
(:mod:`~lance_ops.query.visitors`), and an Arrow filter's tree is translated here as SQL is, so it
selects what pylance selects. An Arrow expression with no Substrait form is evaluated as given.

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
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from lance_ops.encoding.statistics import nan_signs
from lance_ops.errors import (
    FieldNotFoundError,
    LanceOpsError,
    PredicateError,
    PredicateTypeError,
    UnsupportedFeatureError,
    UnsupportedSQLError,
)
from lance_ops.query import expressions as ex
from lance_ops.query import visitors
from lance_ops.query.parser import LanceSQL, from_sqlglot, sql_text, to_sqlglot
from lance_ops.query.parser import arrow_type as _arrow_type
from lance_ops.query.substrait import from_arrow
from lance_ops.query.values import (
    NULL_BOOL,
    Value,
    constant,
    promote,
    retype,
    temporal_literal,
    type_kind,
    unify,
)
from lance_ops.query.visitors import Bound, bounds

__all__ = ["VIRTUAL_COLUMNS", "Bound", "BoundExpression", "Predicate", "parse_expression", "parse_predicate"]

# Columns every dataset can filter on without storing them (pylance's ``_rowid`` / ``_rowaddr``):
# a filter naming one reads it alongside the data (a dataset column of that name wins).
VIRTUAL_COLUMNS = {"_rowid": pa.uint64(), "_rowaddr": pa.uint64()}


@dataclass(frozen=True)
class BoundExpression:
    """A bound SQL / Arrow expression: the Arrow expression, its type, the top-level columns it
    reads, and whether it can be null (DataFusion's inference for SQL, see :func:`_nullable`;
    always for an Arrow expression)."""

    expression: pc.Expression
    type: pa.DataType
    columns: tuple[str, ...]
    nullable: bool = True


@dataclass(frozen=True)
class Predicate:
    """A bound filter: the Arrow expression, the top-level columns it reads, and the simple
    conditions (:class:`Bound`) its top-level ``AND`` implies (none for an Arrow expression with no
    Substrait form)."""

    expression: pc.Expression
    columns: tuple[str, ...]
    bounds: tuple[Bound, ...] = ()

    def filter(self, table: pa.Table) -> pa.Table:
        """Rows of ``table`` for which the predicate is TRUE (FALSE and NULL drop the row)."""
        return table.filter(self.expression)


def _bind(
    expression: str | pc.Expression,
    schema: pa.Schema,
    column_typed_literals: bool = False,
    condition: bool = False,
) -> tuple[_Translator, Value, tuple[str, ...], exp.Expr | None, ex.Expr | None]:
    """Translate ``expression`` against ``schema``: the translator, the value, the top-level columns
    it reads, the sqlglot tree (SQL only) and the expression tree (SQL, or an Arrow ``condition``
    that :func:`~lance_ops.query.substrait.from_arrow` can read; None otherwise)."""
    virtual = [pa.field(n, t) for n, t in VIRTUAL_COLUMNS.items() if schema.get_field_index(n) < 0]
    bound_schema = pa.schema([*schema, *virtual], metadata=schema.metadata)
    translator = _Translator(bound_schema, column_typed_literals)
    if isinstance(expression, pc.Expression):
        converted = _arrow_condition(expression, translator) if condition else None
        if converted is not None:
            # an Arrow filter reads every column (as before it was walked), and the virtual ones it names
            tree, value = converted
            named = {path[0] for path in visitors.columns(tree)}
            return (
                translator,
                value,
                (*schema.names, *(f.name for f in virtual if f.name in named)),
                None,
                tree,
            )
        value = translator.typed(expression, str(expression))
        return translator, value, _opaque_columns(expression, schema, virtual), None, None
    if isinstance(expression, str):
        sql_tree = _parse(expression)
        value = translator.translate(sql_tree)
        columns = tuple(n for n in bound_schema.names if n in translator.columns)
        return translator, value, columns, sql_tree, from_sqlglot(sql_tree, fold=translator.fold)
    raise PredicateTypeError(
        f"a filter is a SQL string or a pyarrow.compute.Expression, not {type(expression).__name__}"
    )


def _arrow_condition(expression: pc.Expression, translator: _Translator) -> tuple[ex.Expr, Value] | None:
    """The tree of an Arrow condition and its translation, when it has a tree that translates to
    a boolean: it is then evaluated as pylance evaluates it (DataFusion's NaN ordering, for one)."""
    try:
        tree = from_arrow(expression, translator.schema)
        value = translator.translate(to_sqlglot(tree))
    except LanceOpsError:
        return None
    return (tree, value) if pa.types.is_boolean(value.type) else None


def _opaque_columns(expression: pc.Expression, schema: pa.Schema, virtual: list[pa.Field]) -> tuple[str, ...]:
    """The columns an Arrow expression that is not walked may read: all of them, and the virtual
    ones it needs (the fewest it binds with: none, one, or all of them)."""
    for extra in ([], *([f] for f in virtual)):
        try:
            _Translator(pa.schema([*schema, *extra])).typed(expression, str(expression))
        except FieldNotFoundError:
            continue
        return (*schema.names, *(f.name for f in extra))
    return (*schema.names, *(f.name for f in virtual))


def parse_expression(
    expression: str | pc.Expression, schema: pa.Schema, *, column_typed_literals: bool = False
) -> BoundExpression:
    """Bind a SQL expression (or an Arrow expression) of any result type to ``schema``.

    ``column_typed_literals``: a number combined with a column by arithmetic takes the column's
    type when it fits (``int32_col + 1`` is int32), as pylance types new-column expressions;
    filters keep DataFusion's promotion (``int32_col + 2147483647`` is int64).
    """
    translator, value, columns, tree, _ = _bind(expression, schema, column_typed_literals)
    nullable = True if tree is None else _nullable(tree, translator)
    return BoundExpression(value.expr, value.type, columns, nullable)


def _nullable(node: exp.Expr, tr: _Translator) -> bool:
    """Whether DataFusion would mark ``node``'s result nullable: a column as its field (and struct
    ancestors), literals never, NULL always; ``IS [NOT] NULL`` never; ``coalesce`` only when every
    argument is; casts as their operand; other functions always; operators when an operand is."""
    if isinstance(node, exp.Column):
        parts = [p.name for p in node.parts]
        field = tr.schema.field(tr._top_level(parts[0], node))
        nullable = field.nullable
        for name in parts[1:]:
            field = field.type.field(name)
            nullable = nullable or field.nullable
        return nullable
    if isinstance(node, exp.Null):
        return True
    if isinstance(node, exp.Literal | exp.Boolean | exp.Is):
        return False
    if isinstance(node, exp.Coalesce):
        return all(_nullable(child, tr) for child in node.iter_expressions())
    if isinstance(node, exp.Cast):
        return _nullable(node.this, tr)
    if isinstance(node, exp.Func):
        return True
    return any(_nullable(child, tr) for child in node.iter_expressions())


def parse_predicate(predicate: str | pc.Expression, schema: pa.Schema) -> Predicate:
    """Bind a SQL filter (or an Arrow expression) to ``schema``."""
    translator, value, columns, _, tree = _bind(predicate, schema, condition=True)
    if not pa.types.is_boolean(value.type):
        text = str(predicate)
        raise PredicateError(f"the predicate {text!r} returns {value.type}, not a boolean condition")
    found = (
        ()
        if tree is None
        else bounds(tree, lambda c: _prunable(schema, c), lambda n, c: _bound_value(schema, n, c))
    )
    return Predicate(value.expr, columns, tuple(found))


def _prunable(schema: pa.Schema, node: ex.Column) -> str | None:
    """The stored top-level column ``node`` names (matched case-insensitively when unique, as the
    translator does) when statistics hold values of its type (None otherwise)."""
    name = node.path[0]
    if schema.get_field_index(name) < 0:
        folded = [n for n in schema.names if n.lower() == name.lower()]
        if len(folded) != 1:
            return None
        name = folded[0]
    kinds = ("int", "float", "string", "binary", "temporal", "bool")
    return name if type_kind(schema.field(name).type) in kinds else None


def _bound_value(schema: pa.Schema, node: ex.Expr, column: str) -> pa.Scalar | None:
    """``node`` as a non-null, non-NaN literal of the column's type (None when it is not one)."""
    if not isinstance(node, ex.Literal):
        return None
    type_ = schema.field(column).type
    _, value = unify(Value(pc.field(column), type_), constant(node.value))
    literal = value.literal
    if literal is None or value.type != type_ or not literal.is_valid:
        return None
    if pa.types.is_floating(type_) and literal.as_py() != literal.as_py():
        return None
    return literal


def _parse(sql: str) -> exp.Expr:
    try:
        tree = sqlglot.parse_one(sql, dialect=LanceSQL)
    except (ParseError, TokenError) as exc:
        raise PredicateError(f"cannot parse predicate {sql!r}: {_syntax_problem(exc)}") from exc
    if tree is None:
        raise PredicateError(f"cannot parse predicate {sql!r}: it is empty")
    return tree


# sqlglot's descriptions of what went wrong, as a person would say it.
_MISSING_ARGUMENT = re.compile(r"Required keyword: '(\w+)' missing for <class '[\w.]*?(\w+)'>")
_ARGUMENT_ROLES = {
    "this": "left operand",
    "expression": "right operand",
    "low": "lower bound",
    "high": "upper bound",
}
_UNEXPECTED = {"Invalid expression / Unexpected token": "unexpected {token!r}", "Expecting )": "missing ')'"}


def _syntax_problem(error: ParseError | TokenError) -> str:
    """``syntax error near '=' (column 6): '=' is missing its right operand``: what is wrong with the
    text and where, without sqlglot's class names.

    A :class:`TokenError` says only how far it read (an unclosed quote, usually); a
    :class:`ParseError` names the token that stopped the parser and its (1-based, last) column.
    """
    if isinstance(error, TokenError):
        return "syntax error: a quote is not closed, or a character is not SQL"
    if not error.errors:
        return "it is empty"
    detail = error.errors[0]
    description, token = str(detail.get("description", "")), str(detail.get("highlight", ""))
    missing = _MISSING_ARGUMENT.fullmatch(description)
    if missing is not None:
        role = _ARGUMENT_ROLES.get(missing.group(1), "an argument")
        kind = getattr(exp, missing.group(2), None)
        name = _operator_of(kind) if isinstance(kind, type) else missing.group(2).upper()
        problem = f"{name!r} is missing its {role}"
    else:
        problem = _UNEXPECTED.get(description, description).format(token=token)
    column, line = detail.get("col"), detail.get("line")
    if not token or not isinstance(column, int):
        return f"syntax error: {problem}"
    where = f"line {line}, column" if isinstance(line, int) and line > 1 else "column"
    return f"syntax error near {token!r} ({where} {column - len(token) + 1}): {problem}"


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
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Column):
        return f"column {'.'.join(p.name for p in node.parts)!r} ({value.type})"
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


class _Translator:
    """Walks a sqlglot tree through :data:`_HANDLERS`, checking columns against the schema."""

    def __init__(self, schema: pa.Schema, column_typed_literals: bool = False) -> None:
        # Imported here, not with the module: pyarrow.dataset loads pandas, and importing this
        # module (through the dataset layer) should not cost that before a filter is bound.
        import pyarrow.dataset as pads

        self.schema = schema
        self.column_typed_literals = column_typed_literals
        self.columns: set[str] = set()
        self._probe = pads.dataset(schema.empty_table())

    def translate(self, node: exp.Expr) -> Value:
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

    def call(self, node: exp.Expr, expr: pc.Expression) -> Value:
        """``expr`` computing ``node`` from its operands, typed; an operand type mismatch names them."""
        return self.typed(expr, sql_text(node), lambda: self._mismatch(node))

    def _mismatch(self, node: exp.Expr) -> str:
        """``cannot apply '+' to column 'note' (string) and 1 (integer)``: re-translates the operands
        (they translated once already, so they do again) to describe them."""
        operands = [self.translate(child) for child in node.iter_expressions() if type(child) in _HANDLERS]
        return f"cannot apply {_operator(node)!r} to {_listed(operands)}"

    def column(self, node: exp.Column) -> Value:
        parts = [p.name for p in node.parts]
        top = self._top_level(parts[0], node)
        type_ = self.schema.field(top).type
        for name in parts[1:]:
            if not pa.types.is_struct(type_) or type_.get_field_index(name) < 0:
                raise FieldNotFoundError(f"no such field {'.'.join(parts)!r} in the dataset schema")
            type_ = type_.field(name).type
        self.columns.add(top)
        return Value(pc.field(top, *parts[1:]), type_)

    def _top_level(self, name: str, node: exp.Column) -> str:
        if self.schema.get_field_index(name) >= 0:
            return name
        folded = [n for n in self.schema.names if n.lower() == name.lower()]
        if len(folded) == 1:
            return folded[0]
        raise FieldNotFoundError(
            f"the filter names unknown column {sql_text(node)!r}; the schema has {self.schema.names}"
        )

    def fold(self, node: exp.Expr) -> pa.Scalar | None:
        """A constant sub-expression's value (None when it is not a constant this translates)."""
        try:
            return self.translate(node).literal
        except (LanceOpsError, pa.ArrowException):
            return None

    def pattern(self, node: exp.Expr, what: str) -> str:
        """A string literal argument (LIKE patterns, regular expressions, affixes)."""
        value = self.translate(node)
        if value.literal is None or not isinstance(value.literal.as_py(), str):
            raise UnsupportedFeatureError(f"the {what} must be a string literal, not {sql_text(node)}")
        return value.literal.as_py()


# Arrow's words when a function has no kernel for its argument types.
_NO_KERNEL = "has no kernel matching input types"

_SYMBOLS: dict[type[exp.Expr], str] = {
    exp.EQ: "=",
    exp.NEQ: "<>",
    exp.LT: "<",
    exp.LTE: "<=",
    exp.GT: ">",
    exp.GTE: ">=",
    exp.Add: "+",
    exp.Sub: "-",
    exp.Mul: "*",
    exp.Div: "/",
    exp.Mod: "%",
    exp.Neg: "-",
    exp.DPipe: "||",
    exp.And: "AND",
    exp.Or: "OR",
    exp.Not: "NOT",
    exp.Between: "BETWEEN",
    exp.In: "IN",
    exp.Is: "IS",
    exp.Like: "LIKE",
    exp.ILike: "ILIKE",
}


def _operator_of(kind: type) -> str:
    """The SQL a node class stands for: an operator symbol or keyword, or a function's name."""
    if kind in _SYMBOLS:
        return _SYMBOLS[kind]
    if isinstance(kind, type) and issubclass(kind, exp.Func):
        return kind.sql_name()
    return kind.__name__.upper()


def _operator(node: exp.Expr) -> str:
    """The operator or function ``node`` applies, as written (``+``, ``LOWER``, ``my_udf``)."""
    return str(node.this) if isinstance(node, exp.Anonymous) else _operator_of(type(node))


Handler = Callable[[_Translator, Any], Value]

# ---------------------------------------------------------------- literals and columns


def _number(tr: _Translator, node: exp.Literal) -> Value:
    if node.is_string:
        return constant(pa.scalar(node.this, pa.string()))
    text = node.this
    try:
        return constant(pa.scalar(int(text)))
    except ValueError:
        return constant(pa.scalar(float(text), pa.float64()))
    except (OverflowError, pa.ArrowInvalid) as exc:
        raise PredicateError(f"integer literal out of range: {text}") from exc


def _boolean(tr: _Translator, node: exp.Boolean) -> Value:
    return constant(pa.scalar(bool(node.this), pa.bool_()))


def _null(tr: _Translator, node: exp.Null) -> Value:
    return constant(pa.scalar(None))


def _paren(tr: _Translator, node: exp.Paren) -> Value:
    return tr.translate(node.this)


def _array(tr: _Translator, node: exp.Array) -> Value:
    """``[1.0, 2.0]``: a list constant of constant elements (an update casts it to the column's
    list or fixed-size-list type, as pylance's ``update({"vec": "[1.0, 2.0]"})`` does)."""
    items = [tr.translate(e) for e in node.expressions]
    if not items or any(v.literal is None for v in items):
        raise UnsupportedSQLError(f"an array literal needs constant elements: {sql_text(node)}")
    try:
        return constant(pa.scalar([v.literal.as_py() for v in items if v.literal is not None]))
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise PredicateError(f"array literal of mixed types: {sql_text(node)}") from exc


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


_OPERATOR_SYMBOLS = {"eq": "=", "ne": "<>", "lt": "<", "gt": ">", "le": "<=", "ge": ">="}


def compare(
    tr: _Translator, op: str, left: Value, right: Value, where: str, using: str | None = None
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


def _comparison(op: str) -> Handler:
    def handle(tr: _Translator, node: exp.Binary) -> Value:
        return compare(tr, op, tr.translate(node.this), tr.translate(node.expression), sql_text(node))

    return handle


def _between(tr: _Translator, node: exp.Between) -> Value:
    value, where = tr.translate(node.this), sql_text(node)
    low = compare(tr, "ge", value, tr.translate(node.args["low"]), where, "BETWEEN")
    high = compare(tr, "le", value, tr.translate(node.args["high"]), where, "BETWEEN")
    return tr.call(node, pc.and_kleene(low.expr, high.expr))


def _in(tr: _Translator, node: exp.In) -> Value:
    if any(node.args.get(key) for key in ("query", "unnest", "field")):
        raise UnsupportedFeatureError(
            f"only IN (value, ...) lists are supported in filters: {sql_text(node)}"
        )
    value = tr.translate(node.this)
    items = [unify(value, tr.translate(item))[1] for item in node.expressions]
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


def _is(tr: _Translator, node: exp.Is) -> Value:
    value, target = tr.translate(node.this), node.expression
    if isinstance(target, exp.Null):
        return tr.call(node, pc.is_null(value.expr))
    if isinstance(target, exp.Boolean):
        truth = value.expr if target.this else pc.invert(value.expr)
        return tr.call(node, pc.coalesce(truth, pa.scalar(False)))
    raise UnsupportedFeatureError(f"unsupported IS test in a filter: {sql_text(node)}")


# ---------------------------------------------------------------- logic


def _logic(kernel: Callable[..., pc.Expression]) -> Handler:
    def handle(tr: _Translator, node: exp.Binary) -> Value:
        left, right = tr.translate(node.this), tr.translate(node.expression)
        left, right = (retype(v, pa.bool_()) for v in (left, right))
        return tr.call(node, kernel(left.expr, right.expr))

    return handle


def _not(tr: _Translator, node: exp.Not) -> Value:
    return tr.call(node, pc.invert(retype(tr.translate(node.this), pa.bool_()).expr))


# ---------------------------------------------------------------- arithmetic


def _operands(tr: _Translator, node: exp.Binary) -> tuple[Value, Value]:
    """Arithmetic operands: only NULL literals are retyped, so ``int32_col + 2147483647`` is int64
    (with ``column_typed_literals`` a number that fits takes the other operand's numeric type)."""
    left, right = tr.translate(node.this), tr.translate(node.expression)
    numbers = {type_kind(left.type), type_kind(right.type)} <= {"int", "float"}
    if tr.column_typed_literals and numbers and (_is_number(node.this) or _is_number(node.expression)):
        left, right = unify(left, right)
    if pa.types.is_null(left.type):
        left = retype(left, right.type)
    if pa.types.is_null(right.type):
        right = retype(right, left.type)
    return promote(left, right)


def _is_number(node: exp.Expr) -> bool:
    """A number written in the SQL text (``2``, ``-2.5``, ``(2)``), not a computed one (a cast)."""
    while isinstance(node, exp.Paren | exp.Neg):
        node = node.this
    return isinstance(node, exp.Literal) and not node.is_string


def _arithmetic(kernel: Callable[..., pc.Expression]) -> Handler:
    def handle(tr: _Translator, node: exp.Binary) -> Value:
        left, right = _operands(tr, node)
        return tr.call(node, kernel(left.expr, right.expr))

    return handle


def _mod(tr: _Translator, node: exp.Mod) -> Value:
    """Truncated remainder ``x - trunc(x / y) * y`` (SQL's ``%``: the sign follows the dividend)."""
    x, y = _operands(tr, node)
    quotient = pc.divide(x.expr, y.expr)
    if not (pa.types.is_integer(x.type) and pa.types.is_integer(y.type)):
        quotient = pc.trunc(quotient)
    return tr.call(node, pc.subtract(x.expr, pc.multiply(quotient, y.expr)))


def _neg(tr: _Translator, node: exp.Neg) -> Value:
    value = tr.translate(node.this)
    if value.literal is not None and value.literal.is_valid:
        return constant(pc.negate(value.literal))
    return tr.call(node, pc.negate(value.expr))


# ---------------------------------------------------------------- casts and temporal literals


def _cast(tr: _Translator, node: exp.Cast) -> Value:
    target = _arrow_type(node.to)
    value = tr.translate(node.this)
    if value.literal is None:
        return tr.call(node, value.expr.cast(target))
    if pa.types.is_temporal(target) and isinstance(value.literal.as_py(), str):
        return constant(temporal_literal(value.literal.as_py(), target))
    try:
        return constant(value.literal.cast(target))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise PredicateError(f"cannot evaluate {sql_text(node)}: {exc}") from exc


# ---------------------------------------------------------------- functions


def _unary(kernel: Callable[..., pc.Expression]) -> Handler:
    def handle(tr: _Translator, node: exp.Func) -> Value:
        return tr.call(node, kernel(tr.translate(node.this).expr))

    return handle


def _length(tr: _Translator, node: exp.Length) -> Value:
    value = tr.translate(node.this)
    kernel = pc.binary_length if type_kind(value.type) == "binary" else pc.utf8_length
    return tr.call(node, kernel(value.expr))


def _affix(kernel: Callable[..., pc.Expression], what: str) -> Handler:
    def handle(tr: _Translator, node: exp.Func) -> Value:
        pattern = tr.pattern(node.expression, what)
        return tr.call(node, kernel(tr.translate(node.this).expr, pattern=pattern))

    return handle


def _like(ignore_case: bool) -> Handler:
    def handle(tr: _Translator, node: exp.Like) -> Value:
        pattern = tr.pattern(node.expression, "LIKE pattern")
        result = pc.match_like(tr.translate(node.this).expr, pattern=pattern, ignore_case=ignore_case)
        return tr.call(node, pc.invert(result) if node.args.get("negate") else result)

    return handle


def _escape(tr: _Translator, node: exp.Escape) -> Value:
    """``LIKE ... ESCAPE '\\'`` is what LIKE does anyway; other escape characters are not supported."""
    if tr.pattern(node.expression, "ESCAPE character") != "\\":
        raise UnsupportedFeatureError(f"only ESCAPE '\\' is supported in filters: {sql_text(node)}")
    return tr.translate(node.this)


def _regexp(tr: _Translator, node: exp.Expr, subject: exp.Expr, args: Sequence[exp.Expr]) -> Value:
    if not args or len(args) > 2:
        raise PredicateError(f"a regular-expression match takes a string and a pattern: {sql_text(node)}")
    flags = tr.pattern(args[1], "regular-expression flag") if len(args) == 2 else ""
    if set(flags) - {"i"}:
        raise UnsupportedFeatureError(f"unsupported regular-expression flags {flags!r}: {sql_text(node)}")
    pattern = tr.pattern(args[0], "regular expression")
    return tr.call(
        node, pc.match_substring_regex(tr.translate(subject).expr, pattern=pattern, ignore_case="i" in flags)
    )


def _regexp_like(tr: _Translator, node: exp.RegexpLike) -> Value:
    flag = node.args.get("flag")
    return _regexp(tr, node, node.this, [node.expression, *([flag] if flag else [])])


def _coalesce(tr: _Translator, node: exp.Coalesce) -> Value:
    values = [tr.translate(node.this), *(tr.translate(e) for e in node.expressions)]
    column = next((v for v in values if v.literal is None), values[0])
    return tr.call(node, pc.coalesce(*(retype(v, column.type).expr for v in values)))


def _concat_pipe(tr: _Translator, node: exp.DPipe) -> Value:
    left, right = tr.translate(node.this), tr.translate(node.expression)
    return tr.call(node, pc.binary_join_element_wise(left.expr, right.expr, ""))


def _concat(tr: _Translator, node: exp.Concat) -> Value:
    """``concat(a, b, ...)``: NULL arguments count as empty strings (DataFusion's rule)."""
    parts = [tr.translate(e).expr for e in node.expressions]
    return tr.call(
        node, pc.binary_join_element_wise(*parts, "", null_handling="replace", null_replacement="")
    )


def _octet_length(tr: _Translator, node: exp.Anonymous, args: Sequence[exp.Expr]) -> Value:
    if len(args) != 1:
        raise PredicateError(f"octet_length takes one argument: {sql_text(node)}")
    return tr.call(node, pc.binary_length(tr.translate(args[0]).expr))


def _regexp_match(tr: _Translator, node: exp.Anonymous, args: Sequence[exp.Expr]) -> Value:
    """DataFusion's ``regexp_match`` in a filter is coerced to "has a match", as pylance does."""
    if not args:
        raise PredicateError(f"regexp_match takes a string and a pattern: {sql_text(node)}")
    return _regexp(tr, node, args[0], args[1:])


_ANONYMOUS: dict[str, Callable[[_Translator, exp.Anonymous, Sequence[exp.Expr]], Value]] = {
    "octet_length": _octet_length,
    "regexp_match": _regexp_match,
}


def _anonymous(tr: _Translator, node: exp.Anonymous) -> Value:
    handler = _ANONYMOUS.get(str(node.this).lower())
    if handler is None:
        raise UnsupportedSQLError(f"unsupported function in a filter: {sql_text(node)}")
    return handler(tr, node, node.expressions)


_HANDLERS: dict[type[exp.Expr], Handler] = {
    exp.Column: _Translator.column,
    exp.Literal: _number,
    exp.Boolean: _boolean,
    exp.Null: _null,
    exp.Paren: _paren,
    exp.Array: _array,
    exp.EQ: _comparison("eq"),
    exp.NEQ: _comparison("ne"),
    exp.LT: _comparison("lt"),
    exp.LTE: _comparison("le"),
    exp.GT: _comparison("gt"),
    exp.GTE: _comparison("ge"),
    exp.Between: _between,
    exp.In: _in,
    exp.Is: _is,
    exp.And: _logic(pc.and_kleene),
    exp.Or: _logic(pc.or_kleene),
    exp.Not: _not,
    exp.Add: _arithmetic(pc.add),
    exp.Sub: _arithmetic(pc.subtract),
    exp.Mul: _arithmetic(pc.multiply),
    exp.Div: _arithmetic(pc.divide),
    exp.Mod: _mod,
    exp.Neg: _neg,
    exp.Cast: _cast,
    exp.TryCast: _cast,
    exp.Like: _like(ignore_case=False),
    exp.ILike: _like(ignore_case=True),
    exp.Escape: _escape,
    exp.Lower: _unary(pc.utf8_lower),
    exp.Upper: _unary(pc.utf8_upper),
    exp.Abs: _unary(pc.abs),
    exp.IsNan: _unary(pc.is_nan),
    exp.Length: _length,
    exp.StartsWith: _affix(pc.starts_with, "prefix"),
    exp.EndsWith: _affix(pc.ends_with, "suffix"),
    exp.Contains: _affix(pc.match_substring, "substring"),
    exp.RegexpLike: _regexp_like,
    exp.Coalesce: _coalesce,
    exp.DPipe: _concat_pipe,
    exp.Concat: _concat,
    exp.Anonymous: _anonymous,
}

# DataFusion's scalar functions and literals, kept in their own module (it builds on the helpers above).
from lance_ops.query import _functions  # noqa: E402

_HANDLERS.update(_functions.HANDLERS)
_ANONYMOUS.update(_functions.ANONYMOUS)
