"""Filter predicates: SQL text (or a ``pyarrow.compute.Expression``) -> a bound Arrow expression.

pylance filters are DataFusion SQL. Here sqlglot parses the text (a Spark-flavoured dialect:
backtick identifiers, ``'...'`` and ``"..."`` string literals as Lance reads them, no backslash
escapes inside strings) and a dispatch table keyed by sqlglot node class turns the tree into a
``pyarrow.compute.Expression`` that Arrow's dataset machinery evaluates batch by batch::

    "id % 10 = 0 AND name LIKE 'a%'"
      -> And(EQ(Mod(Column id, 10), 0), Like(Column name, 'a%'))
      -> and_kleene(equal(subtract(id, multiply(divide(id, 10), 10)), 0), match_like(name, 'a%'))

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

import datetime as dt
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import sqlglot
from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import ParseError, TokenError

from lance_ops.encoding.statistics import nan_signs
from lance_ops.errors import (
    FieldNotFoundError,
    PredicateError,
    PredicateTypeError,
    UnsupportedFeatureError,
    UnsupportedSQLError,
)

__all__ = ["VIRTUAL_COLUMNS", "Bound", "BoundExpression", "Predicate", "parse_expression", "parse_predicate"]

# Columns every dataset can filter on without storing them (pylance's ``_rowid`` / ``_rowaddr``):
# a filter naming one reads it alongside the data (a dataset column of that name wins).
VIRTUAL_COLUMNS = {"_rowid": pa.uint64(), "_rowaddr": pa.uint64()}


class LanceSQL(Spark):
    """Spark's grammar with Lance's string literals: quotes double to escape, backslash is literal."""

    class Tokenizer(Spark.Tokenizer):
        STRING_ESCAPES = ["'"]

    class Parser(Spark.Parser):  # type: ignore[misc,valid-type]
        LOG_DEFAULTS_TO_LN = False  # DataFusion's log(x) is base 10


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
class Bound:
    """A condition every selected row meets, on one top-level column: what statistics can prune with.

    ``op`` is ``eq``, ``lt``, ``le``, ``gt``, ``ge`` (one value), ``in`` (the values), ``null`` or
    ``not_null`` (no value); values have the column's type and are never null or NaN.
    """

    column: str
    op: str
    values: tuple[pa.Scalar, ...] = ()


@dataclass(frozen=True)
class Predicate:
    """A bound filter: the Arrow expression, the top-level columns it reads, and the simple
    conditions (:class:`Bound`) its top-level ``AND`` implies (empty for Arrow expressions)."""

    expression: pc.Expression
    columns: tuple[str, ...]
    bounds: tuple[Bound, ...] = ()

    def filter(self, table: pa.Table) -> pa.Table:
        """Rows of ``table`` for which the predicate is TRUE (FALSE and NULL drop the row)."""
        return table.filter(self.expression)


def _bind(
    expression: str | pc.Expression, schema: pa.Schema, column_typed_literals: bool = False
) -> tuple[_Translator, _Value, tuple[str, ...], exp.Expr | None]:
    """Translate ``expression`` against ``schema``: the translator, the value, the top-level columns
    it reads and, for SQL, the parse tree."""
    virtual = [pa.field(n, t) for n, t in VIRTUAL_COLUMNS.items() if schema.get_field_index(n) < 0]
    bound_schema = pa.schema([*schema, *virtual], metadata=schema.metadata)
    translator = _Translator(bound_schema, column_typed_literals)
    if isinstance(expression, pc.Expression):
        value = translator.typed(expression, str(expression))
        named = {f.name for f in virtual if re.search(rf"\b{f.name}\b", str(expression))}
        return (
            translator,
            value,
            tuple(n for n in bound_schema.names if n in schema.names or n in named),
            None,
        )
    if isinstance(expression, str):
        tree = _parse(expression)
        value = translator.translate(tree)
        return translator, value, tuple(n for n in bound_schema.names if n in translator.columns), tree
    raise PredicateTypeError(
        f"a filter is a SQL string or a pyarrow.compute.Expression, not {type(expression).__name__}"
    )


def parse_expression(
    expression: str | pc.Expression, schema: pa.Schema, *, column_typed_literals: bool = False
) -> BoundExpression:
    """Bind a SQL expression (or an Arrow expression) of any result type to ``schema``.

    ``column_typed_literals``: a number combined with a column by arithmetic takes the column's
    type when it fits (``int32_col + 1`` is int32), as pylance types new-column expressions;
    filters keep DataFusion's promotion (``int32_col + 2147483647`` is int64).
    """
    translator, value, columns, tree = _bind(expression, schema, column_typed_literals)
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
    translator, value, columns, tree = _bind(predicate, schema)
    if not pa.types.is_boolean(value.type):
        text = str(predicate)
        raise PredicateError(f"the predicate {text!r} returns {value.type}, not a boolean condition")
    if tree is None:
        bounds = tuple(_arrow_bounds(value.expr, schema))
    else:
        found = (b for node in _conjuncts(tree) for b in _bounds(translator, node))
        bounds = tuple(b for b in found if schema.get_field_index(b.column) >= 0)
    return Predicate(value.expr, columns, bounds)


# ---------------------------------------------------------------- bounds (for statistics pruning)

_FLIPPED = {"eq": "eq", "lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}
_BOUND_OPS: dict[type[exp.Expr], str] = {
    exp.EQ: "eq",
    exp.LT: "lt",
    exp.LTE: "le",
    exp.GT: "gt",
    exp.GTE: "ge",
}


def _conjuncts(node: exp.Expr) -> list[exp.Expr]:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        return _conjuncts(node.this) + _conjuncts(node.expression)
    return [node]


def _plain_column(tr: _Translator, node: exp.Expr) -> str | None:
    """The top-level column a bare column reference names (None for anything else)."""
    if isinstance(node, exp.Column) and len(node.parts) == 1:
        name = tr._top_level(node.parts[0].name, node)
        return (
            name
            if _kind(tr.schema.field(name).type) in ("int", "float", "string", "binary", "temporal", "bool")
            else None
        )
    return None


def _bound_value(tr: _Translator, column: str, node: exp.Expr) -> pa.Scalar | None:
    """``node`` as a non-null, non-NaN literal of the column's type (None when it is not one)."""
    type_ = tr.schema.field(column).type
    _, value = _unify(_Value(pc.field(column), type_), tr.translate(node))
    literal = value.literal
    if literal is None or value.type != type_ or not literal.is_valid:
        return None
    if pa.types.is_floating(type_) and literal.as_py() != literal.as_py():
        return None
    return literal


def _bounds(tr: _Translator, node: exp.Expr) -> list[Bound]:
    """The bounds one conjunct implies (none when it is not a simple column condition)."""
    if type(node) in _BOUND_OPS:
        op = _BOUND_OPS[type(node)]
        left, right = node.this, node.expression
        column = _plain_column(tr, left)
        if column is None:
            column, left, right, op = _plain_column(tr, right), right, left, _FLIPPED[op]
        value = None if column is None else _bound_value(tr, column, right)
        return [] if column is None or value is None else [Bound(column, op, (value,))]
    column = _plain_column(tr, node.this) if isinstance(node, exp.Between | exp.In | exp.Is) else None
    if isinstance(node, exp.Between) and column is not None:
        low, high = (_bound_value(tr, column, node.args[k]) for k in ("low", "high"))
        return [Bound(column, op, (v,)) for op, v in (("ge", low), ("le", high)) if v is not None]
    if isinstance(node, exp.In) and column is not None and not node.args.get("query"):
        values = [_bound_value(tr, column, item) for item in node.expressions]
        present = [v for v in values if v is not None]
        return [Bound(column, "in", tuple(present))] if len(present) == len(values) else []
    if isinstance(node, exp.Is) and column is not None and isinstance(node.expression, exp.Null):
        return [Bound(column, "null")]
    if (
        isinstance(node, exp.Not)
        and isinstance(node.this, exp.Is)
        and isinstance(node.this.expression, exp.Null)
    ):
        column = _plain_column(tr, node.this.this)
        return [] if column is None else [Bound(column, "not_null")]
    return []


# ------------------------------------------------ bounds of Arrow expressions (for statistics pruning)
#
# pyarrow does not expose an expression's tree, only its text: ``(x > 5)``, ``((x > 5) and (s ==
# "a"))``, ``is_null(x, {nan_is_null=false})``, ``is_in(x, {value_set=int64:[...], ...})``. A
# conjunct of the top-level ``and`` yields a bound only when the same expression rebuilt from the
# parsed column, operator and literal prints exactly the same text, so nothing is guessed about
# its structure. The text does not show a literal's type: a float literal may be a float32 or
# float16 value printed by its shortest digits, so each such literal stands for every value it may
# be, and bounds use the loosest (``x > v`` -> ``x > min``; ``x = v`` -> ``x IN (candidates)``).

_ARROW_OPERATORS: dict[str, tuple[str, Callable[[pc.Expression, Any], pc.Expression]]] = {
    "==": ("eq", lambda x, y: x == y),
    "<": ("lt", lambda x, y: x < y),
    "<=": ("le", lambda x, y: x <= y),
    ">": ("gt", lambda x, y: x > y),
    ">=": ("ge", lambda x, y: x >= y),
}


def _arrow_conjuncts(text: str) -> list[str]:
    """The operands of the top-level ``and`` of a printed Arrow expression (itself when none)."""
    depth, quoted, escaped = 0, False, False
    if not (text.startswith("(") and text.endswith(")")):
        return [text]
    for i, char in enumerate(text):
        if quoted:
            escaped, quoted = (not escaped and char == "\\"), quoted and (escaped or char != '"')
            continue
        if char == '"':
            quoted = True
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0 and i != len(text) - 1:
                return [text]  # the first parenthesis closes early: not one wrapped expression
        elif depth == 1 and text.startswith(" and ", i):
            return _arrow_conjuncts(text[1:i]) + _arrow_conjuncts(text[i + 5 : -1])
    return [text]


def _arrow_literal(text: str, type_: pa.DataType) -> list[Any] | None:
    """The Python values a printed literal compared with a column of ``type_`` may stand for."""
    kind = _kind(type_)
    if kind in ("int", "float") and not pa.types.is_decimal(type_):
        try:
            value: Any = int(text) if text.lstrip("-").isdigit() and text != "-0" else float(text)
        except ValueError:
            return None
        if value != value:
            return None
        with np.errstate(over="ignore"):
            narrow = {float(np.float32(value)), float(np.float16(value))} - {value}
        return [value, *sorted(v for v in narrow if v == v)]
    if (
        kind == "string"
        and len(text) >= 2
        and text[0] == text[-1] == '"'
        and not {'"', "\\"} & set(text[1:-1])
    ):
        return [text[1:-1]]
    if kind == "bool" and text in ("true", "false"):
        return [text == "true"]
    return None


def _typed(values: Sequence[Any], type_: pa.DataType) -> tuple[pa.Scalar, ...] | None:
    """``values`` as scalars of ``type_`` (None unless every cast is lossless)."""
    out = []
    for value in values:
        given = pa.scalar(value)
        try:
            cast = given.cast(type_)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OverflowError):
            return None
        if cast.cast(given.type) != given:
            return None
        out.append(cast)
    return tuple(out)


def _comparison_bounds(column: str, op: str, values: tuple[pa.Scalar, ...]) -> list[Bound]:
    if len(values) == 1 or op == "eq":
        return [Bound(column, "in" if len(values) > 1 else op, values)]
    loosest = (
        min(values, key=lambda v: v.as_py()) if op in ("gt", "ge") else max(values, key=lambda v: v.as_py())
    )
    return [Bound(column, op, (loosest,))]


def _arrow_conjunct_bounds(text: str, schema: pa.Schema) -> list[Bound]:
    for column in schema.names:
        type_ = schema.field(column).type
        field = pc.field(column)
        if text == str(field.is_null()):
            return [Bound(column, "null")]
        if text in (str(field.is_valid()), str(~field.is_null())):
            return [Bound(column, "not_null")]
        if text.startswith(f"is_in({column}, {{value_set="):
            return _is_in_bounds(text, column, type_)
        for symbol, (op, make) in _ARROW_OPERATORS.items():
            for prefix, suffix, flipped in (
                (f"({column} {symbol} ", ")", False),
                ("(", f" {symbol} {column})", True),
            ):
                if not (text.startswith(prefix) and text.endswith(suffix)) or len(text) <= len(
                    prefix + suffix
                ):
                    continue
                literal = text[len(prefix) : len(text) - len(suffix)]
                candidates = _arrow_literal(literal, type_)
                if candidates is None:
                    continue
                scalar = pa.scalar(candidates[0])
                rebuilt = make(pc.scalar(scalar), field) if flipped else make(field, pc.scalar(scalar))
                values = _typed(candidates, type_)
                if str(rebuilt) == text and values is not None:
                    return _comparison_bounds(column, _FLIPPED[op] if flipped else op, values)
    return []


def _is_in_bounds(text: str, column: str, type_: pa.DataType) -> list[Bound]:
    """``is_in(column, {value_set=T:[v, ...], null_matching_behavior=MATCH})``: an ``in`` bound."""
    start, end = text.find(":[\n"), text.rfind("\n], null_matching_behavior=MATCH})")
    if start < 0 or end < start:
        return []
    items = [item.strip() for item in text[start + 3 : end].split(",\n")]
    parsed = [_arrow_literal(item, type_) for item in items]
    if any(p is None for p in parsed):
        return []
    candidates = [values for values in parsed if values is not None]
    if str(pc.field(column).isin([values[0] for values in candidates])) != text:
        return []
    typed = _typed([v for values in candidates for v in values], type_)
    return [] if typed is None else [Bound(column, "in", typed)]


def _arrow_bounds(expression: pc.Expression, schema: pa.Schema) -> list[Bound]:
    """The bounds an Arrow expression's top-level ``and`` implies (see above)."""
    names = [n for n in schema.names if _kind(schema.field(n).type) in ("int", "float", "string", "bool")]
    narrowed = pa.schema([schema.field(n) for n in names])
    return [b for text in _arrow_conjuncts(str(expression)) for b in _arrow_conjunct_bounds(text, narrowed)]


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


@dataclass(frozen=True)
class _Value:
    """A translated operand: its expression, its Arrow type, its value when it is a constant, and
    the SQL it was translated from (for error messages; None for values built along the way)."""

    expr: pc.Expression
    type: pa.DataType
    literal: pa.Scalar | None = None
    node: exp.Expr | None = field(default=None, compare=False, repr=False)


# How a literal's type is named to the user: the family, not Arrow's width (``5`` is an integer).
_LITERAL_KINDS = {
    "int": "integer",
    "float": "float",
    "string": "string",
    "binary": "binary",
    "bool": "boolean",
}


def _describe(value: _Value) -> str:
    """An operand in the user's words: ``column 'note' (string)``, ``5 (integer)``, ``'x' + 1 (string)``."""
    node = value.node
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Column):
        return f"column {'.'.join(p.name for p in node.parts)!r} ({value.type})"
    if pa.types.is_null(value.type):
        return "NULL"
    text = _sql(node) if node is not None else str(value.literal) if value.literal is not None else "a value"
    kind = _LITERAL_KINDS.get(_kind(value.type)) if value.literal is not None else None
    return f"{text} ({kind or value.type})"


def _listed(values: Sequence[_Value]) -> str:
    """Operands described and joined: ``A and B`` or ``A, B, C``."""
    described = [_describe(v) for v in values]
    return " and ".join(described) if len(described) <= 2 else ", ".join(described)


def _constant(scalar: pa.Scalar) -> _Value:
    return _Value(pc.scalar(scalar), scalar.type, scalar)


# Not ``pa.scalar(None, ...)``: converting a Python object makes pyarrow import pandas (0.15 s), and
# this runs when the module is imported.
_NULL_BOOL = pa.nulls(1, pa.bool_())[0]


def _kind(type_: pa.DataType) -> str:
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


def _retype(value: _Value, target: pa.DataType) -> _Value:
    """``value`` cast to ``target`` when it is a literal and the cast is lossless."""
    if value.literal is None or value.type == target:
        return value
    if pa.types.is_null(value.type):
        return _constant(pa.scalar(None, target))
    if _kind(target) not in _RETYPE.get(_kind(value.type), set()):
        return value
    try:
        return _constant(value.literal.cast(target, safe=True))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return value


def _common_numeric(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    """DataFusion's result type for two different numeric types (None: not both int/float)."""
    if a == b or {_kind(a), _kind(b)} - {"int", "float"} or pa.types.is_decimal(a) or pa.types.is_decimal(b):
        return None
    if pa.types.is_floating(a) or pa.types.is_floating(b):
        return pa.float64()
    if pa.types.is_unsigned_integer(a) and pa.types.is_unsigned_integer(b):
        return a if a.bit_width > b.bit_width else b
    return pa.int64()


def _as(value: _Value, target: pa.DataType) -> _Value:
    if value.type == target:
        return value
    if value.literal is not None:
        return _constant(value.literal.cast(target))
    return _Value(value.expr.cast(target), target)


def _promote(left: _Value, right: _Value) -> tuple[_Value, _Value]:
    """Cast two numeric operands to their common type explicitly.

    Arrow's binder would otherwise narrow an integer literal to the column's type
    (``int32_col + 2147483647`` overflowing in int32).
    """
    common = _common_numeric(left.type, right.type)
    if common is None:
        return left, right
    try:
        return _as(left, common), _as(right, common)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise PredicateError(f"cannot convert {left.type} and {right.type} to {common}: {exc}") from exc


def _unify(left: _Value, right: _Value) -> tuple[_Value, _Value]:
    """Give a literal operand the type of the other (non-literal) operand when possible."""
    if left.literal is not None and right.literal is None:
        return _retype(left, right.type), right
    if right.literal is not None and left.literal is None:
        return left, _retype(right, left.type)
    if pa.types.is_null(left.type):
        return _retype(left, right.type), right
    if pa.types.is_null(right.type):
        return left, _retype(right, left.type)
    return left, right


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

    def translate(self, node: exp.Expr) -> _Value:
        """``node`` as a value that remembers it came from ``node`` (unless it names a deeper one)."""
        handler = _HANDLERS.get(type(node))
        if handler is None:
            raise UnsupportedSQLError(f"unsupported SQL in a filter: {_sql(node)}")
        value = handler(self, node)
        return value if value.node is not None else replace(value, node=node)

    def typed(self, expr: pc.Expression, where: str, mismatch: Callable[[], str] | None = None) -> _Value:
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
        return _Value(expr, type_)

    def call(self, node: exp.Expr, expr: pc.Expression) -> _Value:
        """``expr`` computing ``node`` from its operands, typed; an operand type mismatch names them."""
        return self.typed(expr, _sql(node), lambda: self._mismatch(node))

    def _mismatch(self, node: exp.Expr) -> str:
        """``cannot apply '+' to column 'note' (string) and 1 (integer)``: re-translates the operands
        (they translated once already, so they do again) to describe them."""
        operands = [self.translate(child) for child in node.iter_expressions() if type(child) in _HANDLERS]
        return f"cannot apply {_operator(node)!r} to {_listed(operands)}"

    def column(self, node: exp.Column) -> _Value:
        parts = [p.name for p in node.parts]
        top = self._top_level(parts[0], node)
        type_ = self.schema.field(top).type
        for name in parts[1:]:
            if not pa.types.is_struct(type_) or type_.get_field_index(name) < 0:
                raise FieldNotFoundError(f"no such field {'.'.join(parts)!r} in the dataset schema")
            type_ = type_.field(name).type
        self.columns.add(top)
        return _Value(pc.field(top, *parts[1:]), type_)

    def _top_level(self, name: str, node: exp.Column) -> str:
        if self.schema.get_field_index(name) >= 0:
            return name
        folded = [n for n in self.schema.names if n.lower() == name.lower()]
        if len(folded) == 1:
            return folded[0]
        raise FieldNotFoundError(
            f"the filter names unknown column {_sql(node)!r}; the schema has {self.schema.names}"
        )

    def pattern(self, node: exp.Expr, what: str) -> str:
        """A string literal argument (LIKE patterns, regular expressions, affixes)."""
        value = self.translate(node)
        if value.literal is None or not isinstance(value.literal.as_py(), str):
            raise UnsupportedFeatureError(f"the {what} must be a string literal, not {_sql(node)}")
        return value.literal.as_py()


def _sql(node: exp.Expr) -> str:
    return node.sql(dialect=LanceSQL)


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


Handler = Callable[[_Translator, Any], _Value]

# ---------------------------------------------------------------- literals and columns


def _number(tr: _Translator, node: exp.Literal) -> _Value:
    if node.is_string:
        return _constant(pa.scalar(node.this, pa.string()))
    text = node.this
    try:
        return _constant(pa.scalar(int(text)))
    except ValueError:
        return _constant(pa.scalar(float(text), pa.float64()))
    except (OverflowError, pa.ArrowInvalid) as exc:
        raise PredicateError(f"integer literal out of range: {text}") from exc


def _boolean(tr: _Translator, node: exp.Boolean) -> _Value:
    return _constant(pa.scalar(bool(node.this), pa.bool_()))


def _null(tr: _Translator, node: exp.Null) -> _Value:
    return _constant(pa.scalar(None))


def _paren(tr: _Translator, node: exp.Paren) -> _Value:
    return tr.translate(node.this)


def _array(tr: _Translator, node: exp.Array) -> _Value:
    """``[1.0, 2.0]``: a list constant of constant elements (an update casts it to the column's
    list or fixed-size-list type, as pylance's ``update({"vec": "[1.0, 2.0]"})`` does)."""
    items = [tr.translate(e) for e in node.expressions]
    if not items or any(v.literal is None for v in items):
        raise UnsupportedSQLError(f"an array literal needs constant elements: {_sql(node)}")
    try:
        return _constant(pa.scalar([v.literal.as_py() for v in items if v.literal is not None]))
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise PredicateError(f"array literal of mixed types: {_sql(node)}") from exc


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


def _number_literal(value: _Value) -> bool:
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
    tr: _Translator, op: str, left: _Value, right: _Value, where: str, using: str | None = None
) -> _Value:
    """``left op right`` with pylance's semantics; ``using`` names the operator the user wrote
    (``BETWEEN``, ``IN``; default: ``op``'s symbol) when the operand types cannot be compared."""
    given = left, right
    left, right = _unify(left, right)
    if pa.types.is_null(left.type) or pa.types.is_null(right.type):
        return _constant(_NULL_BOOL)
    left, right = _promote(left, right)
    order = _ARROW
    if pa.types.is_floating(left.type) and pa.types.is_floating(right.type):
        constant = left.literal is not None or right.literal is not None
        order = _FLOAT_CONSTANT if constant else _FLOAT_TOTAL
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
    def handle(tr: _Translator, node: exp.Binary) -> _Value:
        return compare(tr, op, tr.translate(node.this), tr.translate(node.expression), _sql(node))

    return handle


def _between(tr: _Translator, node: exp.Between) -> _Value:
    value, where = tr.translate(node.this), _sql(node)
    low = compare(tr, "ge", value, tr.translate(node.args["low"]), where, "BETWEEN")
    high = compare(tr, "le", value, tr.translate(node.args["high"]), where, "BETWEEN")
    return tr.call(node, pc.and_kleene(low.expr, high.expr))


def _in(tr: _Translator, node: exp.In) -> _Value:
    if any(node.args.get(key) for key in ("query", "unnest", "field")):
        raise UnsupportedFeatureError(f"only IN (value, ...) lists are supported in filters: {_sql(node)}")
    value = tr.translate(node.this)
    items = [_unify(value, tr.translate(item))[1] for item in node.expressions]
    where = _sql(node)
    set_lookup = (
        items
        and _kind(value.type) not in ("float", "null")
        and all(i.literal is not None and i.type in (value.type, pa.null()) for i in items)
    )
    if not set_lookup:
        result = compare(tr, "eq", value, items[0], where, "IN") if items else _constant(pa.scalar(False))
        for item in items[1:]:
            equal = compare(tr, "eq", value, item, where, "IN")
            result = tr.call(node, pc.or_kleene(result.expr, equal.expr))
        return result
    present = [i.literal for i in items if i.literal is not None and i.literal.is_valid]
    found = pc.is_in(
        value.expr, value_set=pa.array([s.as_py() for s in present], value.type), skip_nulls=True
    )
    if len(present) < len(items):
        return tr.call(node, pc.if_else(found, pa.scalar(True), _NULL_BOOL))
    return tr.call(node, pc.if_else(pc.is_null(value.expr), _NULL_BOOL, found))


def _is(tr: _Translator, node: exp.Is) -> _Value:
    value, target = tr.translate(node.this), node.expression
    if isinstance(target, exp.Null):
        return tr.call(node, pc.is_null(value.expr))
    if isinstance(target, exp.Boolean):
        truth = value.expr if target.this else pc.invert(value.expr)
        return tr.call(node, pc.coalesce(truth, pa.scalar(False)))
    raise UnsupportedFeatureError(f"unsupported IS test in a filter: {_sql(node)}")


# ---------------------------------------------------------------- logic


def _logic(kernel: Callable[..., pc.Expression]) -> Handler:
    def handle(tr: _Translator, node: exp.Binary) -> _Value:
        left, right = tr.translate(node.this), tr.translate(node.expression)
        left, right = (_retype(v, pa.bool_()) for v in (left, right))
        return tr.call(node, kernel(left.expr, right.expr))

    return handle


def _not(tr: _Translator, node: exp.Not) -> _Value:
    return tr.call(node, pc.invert(_retype(tr.translate(node.this), pa.bool_()).expr))


# ---------------------------------------------------------------- arithmetic


def _operands(tr: _Translator, node: exp.Binary) -> tuple[_Value, _Value]:
    """Arithmetic operands: only NULL literals are retyped, so ``int32_col + 2147483647`` is int64
    (with ``column_typed_literals`` a number that fits takes the other operand's numeric type)."""
    left, right = tr.translate(node.this), tr.translate(node.expression)
    numbers = {_kind(left.type), _kind(right.type)} <= {"int", "float"}
    if tr.column_typed_literals and numbers and (_is_number(node.this) or _is_number(node.expression)):
        left, right = _unify(left, right)
    if pa.types.is_null(left.type):
        left = _retype(left, right.type)
    if pa.types.is_null(right.type):
        right = _retype(right, left.type)
    return _promote(left, right)


def _is_number(node: exp.Expr) -> bool:
    """A number written in the SQL text (``2``, ``-2.5``, ``(2)``), not a computed one (a cast)."""
    while isinstance(node, exp.Paren | exp.Neg):
        node = node.this
    return isinstance(node, exp.Literal) and not node.is_string


def _arithmetic(kernel: Callable[..., pc.Expression]) -> Handler:
    def handle(tr: _Translator, node: exp.Binary) -> _Value:
        left, right = _operands(tr, node)
        return tr.call(node, kernel(left.expr, right.expr))

    return handle


def _mod(tr: _Translator, node: exp.Mod) -> _Value:
    """Truncated remainder ``x - trunc(x / y) * y`` (SQL's ``%``: the sign follows the dividend)."""
    x, y = _operands(tr, node)
    quotient = pc.divide(x.expr, y.expr)
    if not (pa.types.is_integer(x.type) and pa.types.is_integer(y.type)):
        quotient = pc.trunc(quotient)
    return tr.call(node, pc.subtract(x.expr, pc.multiply(quotient, y.expr)))


def _neg(tr: _Translator, node: exp.Neg) -> _Value:
    value = tr.translate(node.this)
    if value.literal is not None and value.literal.is_valid:
        return _constant(pc.negate(value.literal))
    return tr.call(node, pc.negate(value.expr))


# ---------------------------------------------------------------- casts and temporal literals

_SQL_TYPES: dict[exp.DType, pa.DataType] = {
    exp.DType.BOOLEAN: pa.bool_(),
    exp.DType.TINYINT: pa.int8(),
    exp.DType.SMALLINT: pa.int16(),
    exp.DType.INT: pa.int32(),
    exp.DType.BIGINT: pa.int64(),
    exp.DType.UTINYINT: pa.uint8(),
    exp.DType.USMALLINT: pa.uint16(),
    exp.DType.UINT: pa.uint32(),
    exp.DType.UBIGINT: pa.uint64(),
    exp.DType.FLOAT: pa.float32(),
    exp.DType.DOUBLE: pa.float64(),
    exp.DType.TEXT: pa.string(),
    exp.DType.VARCHAR: pa.string(),
    exp.DType.CHAR: pa.string(),
    exp.DType.BINARY: pa.binary(),
    exp.DType.VARBINARY: pa.binary(),
    exp.DType.DATE: pa.date32(),
    exp.DType.TIMESTAMP: pa.timestamp("ns"),
    exp.DType.TIMESTAMPTZ: pa.timestamp("ns"),
    exp.DType.TIMESTAMPNTZ: pa.timestamp("ns"),
    exp.DType.DATETIME: pa.timestamp("ns"),
}


def _arrow_type(node: exp.DataType) -> pa.DataType:
    if node.this == exp.DType.DECIMAL and len(node.expressions) == 2:
        precision, scale = (int(p.this.name) for p in node.expressions)
        return pa.decimal128(precision, scale)
    target = _SQL_TYPES.get(node.this)
    if target is None:
        raise UnsupportedFeatureError(f"unsupported type in a filter CAST: {_sql(node)}")
    return target


def _temporal_literal(text: str, target: pa.DataType) -> pa.Scalar:
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


def _cast(tr: _Translator, node: exp.Cast) -> _Value:
    target = _arrow_type(node.to)
    value = tr.translate(node.this)
    if value.literal is None:
        return tr.call(node, value.expr.cast(target))
    if pa.types.is_temporal(target) and isinstance(value.literal.as_py(), str):
        return _constant(_temporal_literal(value.literal.as_py(), target))
    try:
        return _constant(value.literal.cast(target))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise PredicateError(f"cannot evaluate {_sql(node)}: {exc}") from exc


# ---------------------------------------------------------------- functions


def _unary(kernel: Callable[..., pc.Expression]) -> Handler:
    def handle(tr: _Translator, node: exp.Func) -> _Value:
        return tr.call(node, kernel(tr.translate(node.this).expr))

    return handle


def _length(tr: _Translator, node: exp.Length) -> _Value:
    value = tr.translate(node.this)
    kernel = pc.binary_length if _kind(value.type) == "binary" else pc.utf8_length
    return tr.call(node, kernel(value.expr))


def _affix(kernel: Callable[..., pc.Expression], what: str) -> Handler:
    def handle(tr: _Translator, node: exp.Func) -> _Value:
        pattern = tr.pattern(node.expression, what)
        return tr.call(node, kernel(tr.translate(node.this).expr, pattern=pattern))

    return handle


def _like(ignore_case: bool) -> Handler:
    def handle(tr: _Translator, node: exp.Like) -> _Value:
        pattern = tr.pattern(node.expression, "LIKE pattern")
        result = pc.match_like(tr.translate(node.this).expr, pattern=pattern, ignore_case=ignore_case)
        return tr.call(node, pc.invert(result) if node.args.get("negate") else result)

    return handle


def _escape(tr: _Translator, node: exp.Escape) -> _Value:
    """``LIKE ... ESCAPE '\\'`` is what LIKE does anyway; other escape characters are not supported."""
    if tr.pattern(node.expression, "ESCAPE character") != "\\":
        raise UnsupportedFeatureError(f"only ESCAPE '\\' is supported in filters: {_sql(node)}")
    return tr.translate(node.this)


def _regexp(tr: _Translator, node: exp.Expr, subject: exp.Expr, args: Sequence[exp.Expr]) -> _Value:
    if not args or len(args) > 2:
        raise PredicateError(f"a regular-expression match takes a string and a pattern: {_sql(node)}")
    flags = tr.pattern(args[1], "regular-expression flag") if len(args) == 2 else ""
    if set(flags) - {"i"}:
        raise UnsupportedFeatureError(f"unsupported regular-expression flags {flags!r}: {_sql(node)}")
    pattern = tr.pattern(args[0], "regular expression")
    return tr.call(
        node, pc.match_substring_regex(tr.translate(subject).expr, pattern=pattern, ignore_case="i" in flags)
    )


def _regexp_like(tr: _Translator, node: exp.RegexpLike) -> _Value:
    flag = node.args.get("flag")
    return _regexp(tr, node, node.this, [node.expression, *([flag] if flag else [])])


def _coalesce(tr: _Translator, node: exp.Coalesce) -> _Value:
    values = [tr.translate(node.this), *(tr.translate(e) for e in node.expressions)]
    column = next((v for v in values if v.literal is None), values[0])
    return tr.call(node, pc.coalesce(*(_retype(v, column.type).expr for v in values)))


def _concat_pipe(tr: _Translator, node: exp.DPipe) -> _Value:
    left, right = tr.translate(node.this), tr.translate(node.expression)
    return tr.call(node, pc.binary_join_element_wise(left.expr, right.expr, ""))


def _concat(tr: _Translator, node: exp.Concat) -> _Value:
    """``concat(a, b, ...)``: NULL arguments count as empty strings (DataFusion's rule)."""
    parts = [tr.translate(e).expr for e in node.expressions]
    return tr.call(
        node, pc.binary_join_element_wise(*parts, "", null_handling="replace", null_replacement="")
    )


def _octet_length(tr: _Translator, node: exp.Anonymous, args: Sequence[exp.Expr]) -> _Value:
    if len(args) != 1:
        raise PredicateError(f"octet_length takes one argument: {_sql(node)}")
    return tr.call(node, pc.binary_length(tr.translate(args[0]).expr))


def _regexp_match(tr: _Translator, node: exp.Anonymous, args: Sequence[exp.Expr]) -> _Value:
    """DataFusion's ``regexp_match`` in a filter is coerced to "has a match", as pylance does."""
    if not args:
        raise PredicateError(f"regexp_match takes a string and a pattern: {_sql(node)}")
    return _regexp(tr, node, args[0], args[1:])


_ANONYMOUS: dict[str, Callable[[_Translator, exp.Anonymous, Sequence[exp.Expr]], _Value]] = {
    "octet_length": _octet_length,
    "regexp_match": _regexp_match,
}


def _anonymous(tr: _Translator, node: exp.Anonymous) -> _Value:
    handler = _ANONYMOUS.get(str(node.this).lower())
    if handler is None:
        raise UnsupportedSQLError(f"unsupported function in a filter: {_sql(node)}")
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
