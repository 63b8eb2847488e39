"""SQL <-> the expression tree of :mod:`lance_ops.query.expressions`, through sqlglot's syntax tree.

:func:`parse` reads SQL text into the tree (:func:`from_sqlglot` a parsed sqlglot node): operators,
``IN``, ``BETWEEN``, ``IS NULL``, ``LIKE``, casts and arithmetic become their own nodes; any other
construct (a function, a subscript, ``||``) becomes a :class:`~lance_ops.query.expressions.Call`
named by its lower-case SQL name over its operands as written. Every node keeps its SQL text. This
is the only module that reads SQL: the rest of the library sees the tree.

:func:`to_sqlglot` writes a tree back as sqlglot nodes (every operand that is not a leaf is
parenthesised, so no precedence is lost); :func:`to_sql` is their SQL text in Lance's dialect.
A literal SQL cannot spell exactly (a float16, a timestamp with a time zone) raises
:class:`NotRepresentable`.
"""

from __future__ import annotations

import functools
import re
from dataclasses import replace

import numpy as np
import pyarrow as pa
import sqlglot
from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import ParseError, TokenError
from sqlglot.parser import build_trim

from lance_ops.errors import PredicateError, UnsupportedFeatureError
from lance_ops.query import expressions as ex

__all__ = [
    "SQL_TYPES",
    "LanceSQL",
    "NotRepresentable",
    "arrow_type",
    "from_sqlglot",
    "is_construct",
    "parse",
    "sql_text",
    "to_sql",
    "to_sqlglot",
]


class LanceSQL(Spark):
    """Spark's grammar with Lance's string literals (quotes double to escape, backslash is literal)
    and ``values`` an ordinary name."""

    class Tokenizer(Spark.Tokenizer):
        STRING_ESCAPES = ["'"]
        # ``values`` names a column (``values > 50``), as in DataFusion: a filter has no VALUES list
        KEYWORDS = {k: v for k, v in Spark.Tokenizer.KEYWORDS.items() if k != "VALUES"}

    class Parser(Spark.Parser):  # type: ignore[misc,valid-type]
        LOG_DEFAULTS_TO_LN = False  # DataFusion's log(x) is base 10
        # DataFusion's ltrim / rtrim(string, characters); Spark's take the characters first
        FUNCTIONS = {
            **Spark.Parser.FUNCTIONS,
            "LTRIM": lambda args: build_trim(args),
            "RTRIM": lambda args: build_trim(args, is_left=False),
        }


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


def parse(sql: str) -> ex.Expr:
    """The tree of a SQL filter or expression; text that does not parse raises
    :class:`~lance_ops.errors.PredicateError` saying what is wrong and where.

    Trees are immutable and depend on the text alone, so the last texts parsed are kept (a
    repeated query, or the scan and the index lookup of one query, parse once)."""
    return _parse_cached(sql)


@functools.lru_cache(maxsize=256)
def _parse_cached(sql: str) -> ex.Expr:
    try:
        node = sqlglot.parse_one(sql, dialect=LanceSQL)
    except (ParseError, TokenError) as exc:
        raise PredicateError(f"cannot parse predicate {sql!r}: {_syntax_problem(exc)}") from exc
    if node is None:
        raise PredicateError(f"cannot parse predicate {sql!r}: it is empty")
    return from_sqlglot(node)


def _literal(node: exp.Literal) -> ex.Literal:
    if node.is_string:
        return ex.Literal(pa.scalar(node.this, pa.string()))
    text = node.this
    try:
        return ex.Literal(pa.scalar(int(text)))
    except ValueError:
        return ex.Literal(pa.scalar(float(text), pa.float64()))
    except (OverflowError, pa.ArrowInvalid) as exc:
        raise PredicateError(f"integer literal out of range: {text}") from exc


# Functions whose sqlglot form keeps part of what was written outside its operands: the tree's
# call is named and argued as written (``lpad(s, 3)``, ``ltrim(s)``, ``regexp_replace(s, p, r, flags)``).
_TRIMS = {None: "trim", "BOTH": "trim", "LEADING": "ltrim", "TRAILING": "rtrim"}


def _call(node: exp.Expr) -> ex.Expr:
    """A construct with no node of its own, as a call of its lower-case SQL name."""
    if isinstance(node, exp.Pad):
        name = "lpad" if node.args.get("is_left") else "rpad"
        return ex.Call(name, tuple(from_sqlglot(a) for a in node.iter_expressions()))
    if isinstance(node, exp.Trim):
        position = node.args.get("position")
        operands = [node.this, *([node.expression] if node.expression is not None else [])]
        name = _TRIMS.get(str(position).upper() if position else None, "trim")
        return ex.Call(name, tuple(from_sqlglot(a) for a in operands))
    if isinstance(node, exp.RegexpReplace):
        modifiers = node.args.get("modifiers")
        operands = [node.this, node.expression, node.args["replacement"], *([modifiers] if modifiers else [])]
        return ex.Call("regexp_replace", tuple(from_sqlglot(a) for a in operands))
    if isinstance(node, exp.JSONExtract) and isinstance(node.expression, exp.JSONPath):
        # keep the JSONPath as the text written ('$.a.b'), not sqlglot's parsed path
        path = node.expression.sql()[1:-1].replace("''", "'")
        return ex.Call("json_extract", (from_sqlglot(node.this), ex.Literal(pa.scalar(path, pa.string()))))
    if isinstance(node, exp.HexString):
        return ex.Call("hexstring", (ex.Literal(pa.scalar(str(node.this), pa.string())),))
    return ex.Call(_name(node), tuple(from_sqlglot(child) for child in node.iter_expressions()))


def from_sqlglot(node: exp.Expr) -> ex.Expr:
    """The tree of a parsed SQL expression, each node keeping its SQL text (``source``)."""
    while isinstance(node, exp.Paren):
        node = node.this
    return replace(_tree(node), source=sql_text(node))


def _tree(node: exp.Expr) -> ex.Expr:
    tree = from_sqlglot
    kind = type(node)
    if isinstance(node, exp.Column):
        return ex.Column(tuple(p.name for p in node.parts))
    if isinstance(node, exp.Literal):
        return _literal(node)
    if kind is exp.Var:
        return ex.Literal(pa.scalar(node.name, pa.string()))
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
        return ex.Cast(tree(node.this), arrow_type(node.to))
    return _call(node)


@functools.cache
def _constructs() -> frozenset[str]:
    found: set[str] = set()
    pending: list[type] = [exp.Expr]
    while pending:
        kind = pending.pop()
        pending.extend(kind.__subclasses__())
        if kind is exp.Anonymous:
            continue
        try:
            found.add(kind.sql_name().lower() if issubclass(kind, exp.Func) else kind.__name__.lower())
        except NotImplementedError:  # an abstract function class
            continue
    return frozenset(found)


def is_construct(name: str) -> bool:
    """Whether a call of this name stands for SQL the grammar knows (``CASE``, ``EXTRACT``,
    ``substr``), not a function it does not (errors word the two differently)."""
    return name in _constructs()


def _name(node: exp.Expr) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    if isinstance(node, exp.Func):
        return node.sql_name().lower()
    return type(node).__name__.lower()


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


def _operator_of(kind: type) -> str:
    """The SQL a sqlglot node class stands for: an operator symbol or keyword, or a function's name."""
    symbol = _SQL_SYMBOLS.get(kind)
    if symbol is not None:
        return symbol
    if issubclass(kind, exp.Func):
        return kind.sql_name()
    return kind.__name__.upper()


_SQL_SYMBOLS: dict[type, str] = {
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


def to_sql(node: ex.Expr) -> str:
    """The tree as Lance SQL text (parsing it gives the same tree back)."""
    return sql_text(to_sqlglot(node))


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
        if node.name in ("ltrim", "rtrim"):  # as called, not TRIM(LEADING ...), which pylance refuses
            return exp.Anonymous(this=node.name.upper(), expressions=args)
        try:
            return exp.func(node.name, *args, dialect=LanceSQL)
        except (ValueError, TypeError) as exc:
            raise NotRepresentable(f"function {node.name!r} with {len(args)} arguments") from exc
    raise NotRepresentable(f"no SQL for {type(node).__name__}")
