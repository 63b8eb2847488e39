"""A ``pyarrow.compute.Expression`` -> the expression tree, through its Substrait form.

pyarrow shows an expression's structure only one way: ``Expression.to_substrait(schema)``, the
Substrait ``ExtendedExpression`` message pylance itself hands to DataFusion. This module walks that
message's protobuf wire format (field numbers of substrait ``algebra.proto`` /
``extended_expression.proto``; no Substrait package needed) into
:mod:`lance_ops.query.expressions` nodes::

    pc.field("x") > 0      ->  scalar_function "gt" (field 0, fp64 literal 0.0)
                           ->  Compare('gt', Column(('x',)), Literal(0.0))

Literals and cast targets are not decoded by hand: each is wrapped in a one-literal message that
``pyarrow.substrait.deserialize_expressions`` reads back and Arrow evaluates, so every type keeps
the exact value and type pyarrow wrote. :class:`NotConvertible` is raised for what the tree does
not model (an Arrow function with no Substrait mapping, ``if_else``, functions outside
:data:`FUNCTIONS`); the caller then evaluates the Arrow expression as it is, without pruning.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from lance_ops.encoding.protowire import fields, length_delimited
from lance_ops.errors import UnsupportedFeatureError
from lance_ops.query import expressions as ex

__all__ = ["FUNCTIONS", "NotConvertible", "from_arrow"]


class NotConvertible(UnsupportedFeatureError):
    """An Arrow expression the tree cannot hold (it is then evaluated by Arrow as given)."""


# Substrait function name -> how it becomes a tree node.
_COMPARE = {"equal": "eq", "not_equal": "ne", "lt": "lt", "lte": "le", "gt": "gt", "gte": "ge"}
_ARITHMETIC = {"add": "+", "subtract": "-", "multiply": "*", "divide": "/"}
# Functions kept as calls, by their SQL name (the SQL translator gives them DataFusion's meaning).
_CALLS = {"is_nan": "is_nan", "abs": "abs", "coalesce": "coalesce"}
FUNCTIONS = frozenset(
    {*_COMPARE, *_ARITHMETIC, *_CALLS, "and", "or", "not", "is_null", "is_not_null", "negate"}
)


def _message(data: bytes) -> dict[int, list[int | bytes]]:
    out: dict[int, list[int | bytes]] = {}
    try:
        for number, value in fields(data):
            out.setdefault(number, []).append(value)
    except ValueError as exc:
        raise NotConvertible(f"malformed Substrait message: {exc}") from exc
    return out


def _one(message: dict[int, list[int | bytes]], number: int) -> bytes:
    value = message.get(number, [b""])[-1]
    return value if isinstance(value, bytes) else b""


# ---------------------------------------------------------------- the walk


_CAST = "lance_ops.cast"  # a placeholder Call's name, no SQL function's


@dataclass(frozen=True)
class _Slot(ex.Expr):
    """A literal not yet evaluated: its index among the message's literals."""

    index: int


class _Walker:
    def __init__(self, schema: pa.Schema, functions: dict[int, str]) -> None:
        self.schema = schema
        self.functions = functions
        self.literals: list[bytes] = []  # Literal messages, evaluated together at the end

    def literal(self, data: bytes) -> _Slot:
        self.literals.append(data)
        return _Slot(len(self.literals) - 1)

    def expression(self, data: bytes) -> ex.Expr:
        message = _message(data)
        if 1 in message:
            return self.literal(_one(message, 1))
        if 2 in message:
            return self.reference(_message(_one(message, 2)))
        if 3 in message:
            return self.function(_message(_one(message, 3)))
        if 8 in message:  # SingularOrList: value IN (options)
            body = _message(_one(message, 8))
            options = tuple(self.expression(o) for o in body.get(2, []) if isinstance(o, bytes))
            return ex.In(self.expression(_one(body, 1)), options)
        if 11 in message:  # Cast: type 1, input 2
            body = _message(_one(message, 11))
            # a typed null literal (Literal.null = 29) carries the target type until literals are
            # evaluated; from_arrow then turns this placeholder call into a Cast
            target = self.literal(length_delimited(29, _one(body, 1)))
            return ex.Call(_CAST, (self.expression(_one(body, 2)), target))
        raise NotConvertible(f"Substrait expression kind {sorted(message)} is not supported")

    def reference(self, message: dict[int, list[int | bytes]]) -> ex.Expr:
        if 4 not in message or 1 not in message:  # only direct references from the root
            raise NotConvertible("only direct field references are supported")
        path: list[str] = []
        type_: pa.DataType = pa.struct(list(self.schema))
        segment = _message(_one(message, 1))
        while segment:
            if 2 not in segment or not pa.types.is_struct(type_):
                raise NotConvertible("only struct field references are supported")
            struct_field = _message(_one(segment, 2))
            index = struct_field.get(1, [0])[-1]
            if not isinstance(index, int) or index >= type_.num_fields:
                raise NotConvertible("a field reference outside the schema")
            child = type_.field(index)
            path.append(child.name)
            type_ = child.type
            segment = _message(_one(struct_field, 2)) if 2 in struct_field else {}
        return ex.Column(tuple(path))

    def function(self, message: dict[int, list[int | bytes]]) -> ex.Expr:
        anchor = message.get(1, [0])[-1]
        name = self.functions.get(anchor if isinstance(anchor, int) else -1, "")
        if name not in FUNCTIONS:
            raise NotConvertible(f"Substrait function {name!r} is not supported")
        for option in message.get(5, []):
            # arithmetic states its overflow behaviour; any other option changes the meaning
            if _one(_message(option if isinstance(option, bytes) else b""), 1) != b"overflow":
                raise NotConvertible(f"Substrait function {name!r} with options is not supported")
        args = []
        for argument in message.get(4, []):
            value = _message(argument if isinstance(argument, bytes) else b"")
            if 3 not in value:
                raise NotConvertible(f"Substrait function {name!r} takes a non-value argument")
            args.append(self.expression(_one(value, 3)))
        return _node(name, args)


_UNARY = {"not", "is_null", "is_not_null", "negate", "is_nan", "abs"}


def _node(name: str, args: list[ex.Expr]) -> ex.Expr:
    binary = name in _COMPARE or name in _ARITHMETIC
    if not args or (name in _UNARY and len(args) != 1) or (binary and len(args) != 2):
        raise NotConvertible(f"Substrait function {name!r} with {len(args)} arguments")
    if name in _COMPARE:
        return ex.Compare(_COMPARE[name], args[0], args[1])
    if name in _ARITHMETIC:
        return ex.Arithmetic(_ARITHMETIC[name], args[0], args[1])
    if name in ("and", "or"):
        kind = ex.And if name == "and" else ex.Or
        result = args[0]
        for arg in args[1:]:
            result = kind(result, arg)
        return result
    if name == "not":
        return ex.Not(args[0])
    if name == "is_null":
        return ex.IsNull(args[0])
    if name == "is_not_null":
        return ex.Not(ex.IsNull(args[0]))
    if name == "negate":
        return ex.Neg(args[0])
    return ex.Call(_CALLS[name], tuple(args))


def _evaluate(literals: list[bytes], original: bytes) -> list[pa.Scalar]:
    """Each Literal message's value, read back by pyarrow and evaluated by Arrow (the ``original``
    message's schema and extension declarations come along: types may refer to them)."""
    import pyarrow.dataset as pads
    import pyarrow.substrait as pas

    if not literals:
        return []
    context = b"".join(length_delimited(n, v) for n, v in fields(original) if n != 3 and isinstance(v, bytes))
    names = [f"v{i}" for i in range(len(literals))]
    message = b"".join(
        length_delimited(
            3, length_delimited(1, length_delimited(1, literal)) + length_delimited(3, name.encode())
        )
        for name, literal in zip(names, literals, strict=True)
    )
    try:
        decoded = pas.deserialize_expressions(context + message).expressions
        row = pads.dataset(pa.table({"_": [0]})).to_table(columns={n: decoded[n] for n in names})
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise NotConvertible(f"a literal pyarrow cannot read back: {exc}") from exc
    return [row.column(i)[0] for i in range(len(literals))]


def from_arrow(expression: pc.Expression, schema: pa.Schema) -> ex.Expr:
    """The tree of ``expression``, whose fields are resolved against ``schema``."""
    try:
        data = bytes(expression.to_substrait(schema))
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise NotConvertible(f"the Arrow expression has no Substrait form: {exc}") from exc
    message = _message(data)
    functions: dict[int, str] = {}
    for declaration in message.get(2, []):
        function = _message(_one(_message(declaration if isinstance(declaration, bytes) else b""), 3))
        anchor, name = function.get(2, [0])[-1], _one(function, 3)
        if isinstance(anchor, int):
            functions[anchor] = name.decode().split(":")[0]
    references = [r for r in message.get(3, []) if isinstance(r, bytes)]
    if len(references) != 1:
        raise NotConvertible("expected one expression in the Substrait message")
    walker = _Walker(schema, functions)
    tree = walker.expression(_one(_message(references[0]), 1))
    values = _evaluate(walker.literals, data)

    def fill(node: ex.Expr) -> ex.Expr:
        if isinstance(node, _Slot):
            return ex.Literal(values[node.index])
        if isinstance(node, ex.Call) and node.name == _CAST:
            value, target = node.args
            assert isinstance(target, ex.Literal)
            return ex.Cast(value, target.value.type)
        return node

    return ex.transform(tree, fill)
