"""SQL <-> the expression tree of :mod:`lance_ops.query.expressions`, through sqlglot's syntax tree.

:func:`from_sqlglot` reads a parsed filter into the tree: operators, ``IN``, ``BETWEEN``, ``IS NULL``,
``LIKE``, casts and arithmetic become their own nodes; any other construct (a function, a subscript)
becomes a :class:`~lance_ops.query.expressions.Call` named by its lower-case SQL name over its
operands. With ``fold``, a constant sub-expression (``now()``, ``DATE '2024-01-01'``, ``-5``) is
replaced by the literal ``fold`` evaluates it to, so later visitors see plain values.

:func:`to_sqlglot` writes a tree back as sqlglot nodes (every operand that is not a leaf is
parenthesised, so no precedence is lost); their SQL text in Lance's dialect is
:func:`lance_ops.query.visitors.to_sql`. A literal SQL cannot spell exactly (a float16, a timestamp
with a time zone) raises :class:`NotRepresentable`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
from sqlglot import exp
from sqlglot.dialects.spark import Spark

from lance_ops.errors import UnsupportedFeatureError
from lance_ops.query import expressions as ex

__all__ = [
    "SQL_TYPES",
    "LanceSQL",
    "NotRepresentable",
    "arrow_type",
    "from_sqlglot",
    "sql_text",
    "to_sqlglot",
]


class LanceSQL(Spark):
    """Spark's grammar with Lance's string literals: quotes double to escape, backslash is literal."""

    class Tokenizer(Spark.Tokenizer):
        STRING_ESCAPES = ["'"]

    class Parser(Spark.Parser):  # type: ignore[misc,valid-type]
        LOG_DEFAULTS_TO_LN = False  # DataFusion's log(x) is base 10


class NotRepresentable(UnsupportedFeatureError):
    """A tree node (a literal's type, usually) that Lance's SQL cannot write exactly."""


SQL_TYPES: dict[exp.DType, pa.DataType] = {
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

# The SQL name of each Arrow type a cast may target (the first SQL type mapping to it).
_TYPE_NAMES: dict[pa.DataType, exp.DType] = {}
for _dtype, _arrow in SQL_TYPES.items():
    _TYPE_NAMES.setdefault(_arrow, _dtype)


def arrow_type(node: exp.DataType) -> pa.DataType:
    """The Arrow type a SQL type names (``DECIMAL(p, s)`` included)."""
    if node.this == exp.DType.DECIMAL and len(node.expressions) == 2:
        precision, scale = (int(p.this.name) for p in node.expressions)
        return pa.decimal128(precision, scale)
    target = SQL_TYPES.get(node.this)
    if target is None:
        raise UnsupportedFeatureError(f"unsupported type in a filter CAST: {sql_text(node)}")
    return target


def sql_text(node: exp.Expr) -> str:
    """A sqlglot node as Lance SQL text (how errors quote the part of a filter they are about)."""
    return node.sql(dialect=LanceSQL)


def _sql_type(type_: pa.DataType) -> exp.DataType:
    if pa.types.is_decimal128(type_):
        return exp.DataType.build(f"DECIMAL({type_.precision}, {type_.scale})", dialect=LanceSQL)
    if type_ not in _TYPE_NAMES:
        raise NotRepresentable(f"no SQL type is {type_}")
    return exp.DataType(this=_TYPE_NAMES[type_])


# ---------------------------------------------------------------- sqlglot -> tree

_COMPARISONS: dict[type[exp.Expr], str] = {
    exp.EQ: "eq",
    exp.NEQ: "ne",
    exp.LT: "lt",
    exp.LTE: "le",
    exp.GT: "gt",
    exp.GTE: "ge",
}
_ARITHMETIC: dict[type[exp.Expr], str] = {
    exp.Add: "+",
    exp.Sub: "-",
    exp.Mul: "*",
    exp.Div: "/",
    exp.Mod: "%",
}
_SQL_COMPARISONS = {op: kind for kind, op in _COMPARISONS.items()}
_SQL_ARITHMETIC = {op: kind for kind, op in _ARITHMETIC.items()}

Fold = Callable[[exp.Expr], pa.Scalar | None]


def _literal(node: exp.Literal) -> ex.Literal:
    if node.is_string:
        return ex.Literal(pa.scalar(node.this, pa.string()))
    try:
        return ex.Literal(pa.scalar(int(node.this), pa.int64()))
    except ValueError:
        return ex.Literal(pa.scalar(float(node.this), pa.float64()))


def _has_column(node: exp.Expr) -> bool:
    return any(isinstance(n, exp.Column) for n in node.walk())


def from_sqlglot(node: exp.Expr, fold: Fold | None = None) -> ex.Expr:
    """The tree of a parsed SQL expression (see the module docstring for ``fold``)."""
    while isinstance(node, exp.Paren):
        node = node.this
    if (
        fold is not None
        and not isinstance(node, exp.Literal | exp.Null | exp.Boolean)
        and not _has_column(node)
    ):
        value = fold(node)
        if value is not None:
            return ex.Literal(value)

    def tree(child: exp.Expr) -> ex.Expr:
        return from_sqlglot(child, fold)

    kind = type(node)
    if isinstance(node, exp.Column):
        return ex.Column(tuple(p.name for p in node.parts))
    if isinstance(node, exp.Literal):
        return _literal(node)
    if kind is exp.Boolean:
        return ex.Literal(pa.scalar(bool(node.this), pa.bool_()))
    if kind is exp.Null:
        return ex.Literal(pa.scalar(None, pa.null()))
    if kind in _COMPARISONS:
        return ex.Compare(_COMPARISONS[kind], tree(node.this), tree(node.expression))
    if kind in _ARITHMETIC:
        return ex.Arithmetic(_ARITHMETIC[kind], tree(node.this), tree(node.expression))
    if kind is exp.And:
        return ex.And(tree(node.this), tree(node.expression))
    if kind is exp.Or:
        return ex.Or(tree(node.this), tree(node.expression))
    if kind is exp.Not:
        return ex.Not(tree(node.this))
    if kind is exp.Neg:
        return ex.Neg(tree(node.this))
    if kind is exp.Between:
        return ex.Between(tree(node.this), tree(node.args["low"]), tree(node.args["high"]))
    if kind is exp.In and not any(node.args.get(k) for k in ("query", "unnest", "field")):
        return ex.In(tree(node.this), tuple(tree(e) for e in node.expressions))
    if kind is exp.Is and isinstance(node.expression, exp.Null):
        return ex.IsNull(tree(node.this))
    if kind in (exp.Like, exp.ILike) and not node.args.get("escape"):
        like = ex.Like(tree(node.this), tree(node.expression), ignore_case=kind is exp.ILike)
        return ex.Not(like) if node.args.get("negate") else like
    if isinstance(node, exp.Cast):  # TryCast included
        try:
            return ex.Cast(tree(node.this), arrow_type(node.to))
        except UnsupportedFeatureError:
            pass
    operands = tuple(tree(child) for child in node.iter_expressions())
    return ex.Call(_name(node), operands)


def _name(node: exp.Expr) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    if isinstance(node, exp.Func):
        return node.sql_name().lower()
    return type(node).__name__.lower()


# ---------------------------------------------------------------- tree -> sqlglot


def _number(value: int | float) -> exp.Expr:
    """A finite number as SQL: ``5``, ``-(1.5)``; -0.0 keeps its sign."""
    negative = value < 0 or (value == 0 and str(value).startswith("-"))
    literal = exp.Literal.number(repr(abs(value)) if isinstance(value, float) else str(abs(value)))
    return exp.Neg(this=literal) if negative else literal


def _literal_sql(value: pa.Scalar) -> exp.Expr:
    type_ = value.type
    if pa.types.is_null(type_) or not value.is_valid:
        return exp.Null() if pa.types.is_null(type_) else exp.Cast(this=exp.Null(), to=_sql_type(type_))
    python = value.as_py()
    if pa.types.is_boolean(type_):
        return exp.Boolean(this=python)
    if pa.types.is_integer(type_):
        number = _number(python)
        return number if type_ == pa.int64() else exp.Cast(this=number, to=_sql_type(type_))
    if pa.types.is_float32(type_) or pa.types.is_float64(type_):
        if python != python or python in (float("inf"), float("-inf")):
            # NaN's sign bit: negate a positive NaN to get one with the bit set
            text = "NaN" if python != python else "inf"
            special: exp.Expr = exp.Cast(this=exp.Literal.string(text), to=_sql_type(pa.float64()))
            negative = python == float("-inf") or (python != python and _sign_bit(value))
            special = exp.Neg(this=special) if negative else special
        else:
            special = _number(float(python))
        return special if type_ == pa.float64() else exp.Cast(this=special, to=_sql_type(type_))
    if pa.types.is_string(type_) or pa.types.is_large_string(type_):
        return exp.Literal.string(python)
    if pa.types.is_binary(type_) or pa.types.is_large_binary(type_):
        return exp.HexString(this=python.hex())
    if pa.types.is_date32(type_) or (pa.types.is_timestamp(type_) and type_.tz is None):
        target = pa.date32() if pa.types.is_date32(type_) else pa.timestamp("ns")
        return exp.Cast(this=exp.Literal.string(value.cast(pa.string()).as_py()), to=_sql_type(target))
    if pa.types.is_decimal128(type_):
        return exp.Cast(this=exp.Literal.string(str(python)), to=_sql_type(type_))
    raise NotRepresentable(f"a {type_} literal has no exact SQL spelling")


def _sign_bit(value: pa.Scalar) -> bool:
    return bool(np.signbit(np.float64(value.as_py())))


def _operand(node: ex.Expr) -> exp.Expr:
    """An operand of an operator, parenthesised unless it is a leaf."""
    sql = to_sqlglot(node)
    return sql if isinstance(node, ex.Column | ex.Call | ex.Literal) else exp.Paren(this=sql)


def _column(path: tuple[str, ...]) -> exp.Expr:
    if len(path) > 4:
        raise NotRepresentable(f"a field {len(path)} levels deep: {'.'.join(path)}")
    parts = [exp.to_identifier(p, quoted=True) for p in reversed(path)]
    return exp.Column(**dict(zip(("this", "table", "db", "catalog"), parts, strict=False)))


def to_sqlglot(node: ex.Expr) -> exp.Expr:
    """The sqlglot nodes of a tree (see the module docstring)."""
    if isinstance(node, ex.Column):
        return _column(node.path)
    if isinstance(node, ex.Literal):
        return _literal_sql(node.value)
    if isinstance(node, ex.Compare):
        return _SQL_COMPARISONS[node.op](this=_operand(node.left), expression=_operand(node.right))
    if isinstance(node, ex.Arithmetic):
        return _SQL_ARITHMETIC[node.op](this=_operand(node.left), expression=_operand(node.right))
    if isinstance(node, ex.And | ex.Or):
        kind = exp.And if isinstance(node, ex.And) else exp.Or
        return kind(this=_operand(node.left), expression=_operand(node.right))
    if isinstance(node, ex.Not):
        return exp.Not(this=_operand(node.operand))
    if isinstance(node, ex.Neg):
        return exp.Neg(this=_operand(node.value))
    if isinstance(node, ex.Between):
        return exp.Between(this=_operand(node.value), low=_operand(node.low), high=_operand(node.high))
    if isinstance(node, ex.In):
        return exp.In(this=_operand(node.value), expressions=[to_sqlglot(i) for i in node.items])
    if isinstance(node, ex.IsNull):
        return exp.Is(this=_operand(node.value), expression=exp.Null())
    if isinstance(node, ex.Like):
        like = exp.ILike if node.ignore_case else exp.Like
        return like(this=_operand(node.value), expression=_operand(node.pattern))
    if isinstance(node, ex.Cast):
        return exp.Cast(this=to_sqlglot(node.value), to=_sql_type(node.to))
    if isinstance(node, ex.Call):
        args = [to_sqlglot(a) for a in node.args]
        try:
            return exp.func(node.name, *args, dialect=LanceSQL)
        except (ValueError, TypeError) as exc:
            raise NotRepresentable(f"function {node.name!r} with {len(args)} arguments") from exc
    raise NotRepresentable(f"no SQL for {type(node).__name__}")
