"""DataFusion's scalar functions for filters and SQL expressions (pylance 14's set), over the calls
of the expression tree.

Each entry maps a call's name (as :mod:`lance_ops.query.parser` names it: the lower-case SQL name,
``ltrim`` / ``lpad`` as written) to a handler building an Arrow expression from the call's argument
nodes, with DataFusion's semantics where Arrow's kernels differ:

* constants: ``CURRENT_DATE``, ``now()`` / ``CURRENT_TIMESTAMP`` (UTC, fixed when the filter is
  bound), ``pi()``, binary literals ``X'4142'``;
* lists: ``array_has`` / ``array_contains`` / ``list_has``, ``array_has_any``, ``array_has_all``,
  ``array_length``, ``cardinality``, ``array_position``, ``array_empty`` / ``empty`` and 1-based
  subscripts ``tags[1]`` (out of range -> NULL, negative counts from the end); Arrow has no kernels
  for these, so they are vectorised scalar UDFs registered with Arrow once per element type;
* strings: ``lower`` / ``upper``, ``length``, ``starts_with`` / ``ends_with`` / ``contains``,
  ``LIKE ... ESCAPE '\\'``, ``regexp_like`` / ``regexp_match``, ``||`` / ``concat``, ``octet_length``,
  ``btrim`` / ``ltrim`` / ``rtrim``, ``replace``, ``strpos`` / ``instr``, ``left``,
  ``right``, ``reverse``, ``lpad`` / ``rpad`` (truncating to the width, as DataFusion does),
  ``repeat``, ``initcap``, ``concat_ws`` (NULLs skipped), ``regexp_replace`` (first match unless
  flag ``g``), ``regexp_count``, ``bit_length``, ``split_part``;
* numbers: ``abs``, ``isnan``, ``round(x[, digits])`` (half away from zero), ``sqrt``, ``power`` /
  ``pow``, ``exp``, ``ln``, ``log`` (base 10 with one argument, ``log(base, x)``), ``log10``,
  ``log2``, ``signum``, ``sin`` / ``cos`` / ``tan`` / ``asin`` / ``acos`` / ``atan``, ``degrees``,
  ``radians``, ``iszero``;
* conditionals: ``coalesce``, ``greatest`` / ``least`` (NULLs ignored), ``nullif``, ``nvl2``,
  ``IS [NOT] DISTINCT FROM``, ``IS [NOT] TRUE`` / ``FALSE``;
* dates: ``date_trunc(unit, t)``, ``date_part(part, t)``, ``to_date(text)``;
* casts: ``arrow_cast(x, 'Type')`` with DataFusion's Arrow type names (``Int32``, ``Utf8``,
  ``Timestamp(Microsecond, None)``, ``Timestamp(ms, "UTC")``, ``Decimal128(10, 2)``,
  ``FixedSizeList(32, Float32)``, ``List(Int64)``, ``Dictionary(Int32, Utf8)``, ...).

Functions pylance refuses in filters (``substr``, ``trim``, ``floor``, ``ceil``, ``CASE``,
``EXTRACT``) stay unsupported here too.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_ops.errors import PredicateError, UnsupportedFeatureError, UnsupportedSQLError
from lance_ops.file.schema import is_json
from lance_ops.query import arrow as p
from lance_ops.query import expressions as ex
from lance_ops.query.json_functions import JSON_FUNCTIONS, json_function
from lance_ops.query.values import (
    Value,
    as_type,
    constant,
    datafusion_cast,
    promote,
    retype,
    temporal_literal,
    type_kind,
    unify,
)

__all__ = ["FUNCTIONS"]

# A handler: (the translator, the call node) -> the call's value.
Handler = Callable[[Any, ex.Call], Value]


def _text(node: ex.Expr) -> str:
    return p.sql_text(node)


def _arity(node: ex.Call, *counts: int) -> tuple[ex.Expr, ...]:
    """The call's arguments, when there are as many as one of ``counts``."""
    if len(node.args) not in counts:
        raise PredicateError(f"wrong number of arguments: {_text(node)}")
    return node.args


def _literal(tr: Any, node: ex.Expr, what: str) -> Any:
    value = tr.translate(node)
    if value.literal is None:
        raise UnsupportedFeatureError(f"the {what} must be a literal, not {_text(node)}")
    return value.literal.as_py()


def _unary(kernel: Callable[..., pc.Expression]) -> Handler:
    def handle(tr: Any, node: ex.Call) -> Value:
        # the first argument only: initcap's parsed form carries its default delimiters after it
        return tr.call(node, kernel(tr.translate(node.args[0]).expr))

    return handle


# ---------------------------------------------------------------- constants


def _current_date(tr: Any, node: ex.Call) -> Value:
    return constant(pa.scalar(dt.datetime.now(dt.UTC).date(), pa.date32()))


def _now(tr: Any, node: ex.Call) -> Value:
    moment = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    return constant(pa.scalar(moment, pa.timestamp("ns")))


def _hex_string(tr: Any, node: ex.Call) -> Value:
    (digits,) = _arity(node, 1)
    try:
        return constant(pa.scalar(bytes.fromhex(str(_literal(tr, digits, "hex digits"))), pa.binary()))
    except ValueError as exc:
        raise PredicateError(f"invalid binary literal {_text(node)}") from exc


def _pi(tr: Any, node: ex.Call) -> Value:
    return constant(pa.scalar(math.pi, pa.float64()))


# ---------------------------------------------------------------- lists (registered UDFs)


def _flat(lists: pa.Array) -> tuple[pa.Array, np.ndarray, np.ndarray]:
    """The values of ``lists``, the list each belongs to, and each value's 0-based position in it."""
    flat = pc.list_flatten(lists)
    parents = pc.list_parent_indices(lists).to_numpy()
    offsets = lists.offsets.to_numpy()
    local = np.arange(len(flat)) + offsets[0] - offsets[parents] if len(flat) else np.zeros(0, np.int64)
    return flat, parents, local


def _hits(lists: pa.Array, value: pa.Array | pa.Scalar) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Parents and positions of the list values equal to ``value`` (per row when an array)."""
    flat, parents, local = _flat(lists)
    target = value.take(pa.array(parents)) if isinstance(value, pa.Array) else value
    equal = pc.fill_null(pc.equal(flat, target), False).to_numpy(zero_copy_only=False)
    return parents[equal], local[equal], parents


def _array_has(ctx: Any, lists: pa.Array, value: pa.Array | pa.Scalar) -> pa.Array:
    rows, _, _ = _hits(lists, value)
    out = np.zeros(len(lists), bool)
    out[rows] = True
    return pa.array(out, mask=lists.is_null().to_numpy(zero_copy_only=False))


def _array_position(ctx: Any, lists: pa.Array, value: pa.Array | pa.Scalar) -> pa.Array:
    rows, positions, _ = _hits(lists, value)
    out = np.zeros(len(lists), np.int64)
    out[rows[::-1]] = positions[::-1] + 1  # the last write per row wins: the first match
    return pa.array(out, mask=out == 0)


def _list_get(ctx: Any, lists: pa.Array, index: pa.Array | pa.Scalar) -> pa.Array:
    position = np.broadcast_to(
        np.asarray(index.to_numpy(zero_copy_only=False) if isinstance(index, pa.Array) else index.as_py()),
        (len(lists),),
    ).astype(np.int64)
    lengths = pc.fill_null(pc.list_value_length(lists), 0).to_numpy()
    zero_based = np.where(position > 0, position - 1, lengths + position)
    valid = (position != 0) & (zero_based >= 0) & (zero_based < lengths) & lists.is_valid().to_numpy(False)
    starts = lists.offsets.to_numpy()[:-1] - lists.offsets.to_numpy()[0]
    flat = pc.list_flatten(lists)
    take = np.where(valid, starts + zero_based, -1)
    return flat.take(pa.array(take, mask=~valid))


_UDFS: dict[str, Callable[..., pa.Array]] = {
    "array_has": _array_has,
    "array_position": _array_position,
    "list_get": _list_get,
}
_OUT_TYPES: dict[str, Callable[[pa.DataType], pa.DataType]] = {
    "array_has": lambda _: pa.bool_(),
    "array_position": lambda _: pa.int64(),
    "list_get": lambda value_type: value_type,
}


def _udf(name: str, list_type: pa.DataType, second: pa.DataType) -> str:
    """The Arrow function ``name`` for lists of ``list_type`` (registered on first use)."""
    registered = f"lance_ops.{name}[{list_type}, {second}]"
    try:
        pc.get_function(registered)
    except pa.ArrowKeyError:
        pc.register_scalar_function(
            _UDFS[name],
            registered,
            {"summary": f"DataFusion's {name}", "description": f"lance-ops' {name} over {list_type}"},
            {"list": list_type, "arg": second},
            _OUT_TYPES[name](list_type.value_type),
        )
    return registered


def _list_arg(tr: Any, node: ex.Expr, value: Value) -> Value:
    if not (pa.types.is_list(value.type) or pa.types.is_large_list(value.type)):
        raise PredicateError(f"{_text(node)} needs a list column, not {value.type}")
    return value


def _element(tr: Any, node: ex.Expr, lists: Value, item: ex.Expr) -> Value:
    value = retype(tr.translate(item), lists.type.value_type)
    if value.type != lists.type.value_type:
        raise PredicateError(f"{_text(node)}: {value.type} values cannot be looked up in {lists.type}")
    return value


def _list_call(tr: Any, node: ex.Expr, name: str, lists: Value, second: Value) -> Value:
    function = _udf(name, lists.type, second.type)
    return tr.call(node, pc.Expression._call(function, [lists.expr, second.expr]))


def _array_has_node(tr: Any, node: ex.Call, list_node: ex.Expr, item: ex.Expr) -> Value:
    lists = _list_arg(tr, node, tr.translate(list_node))
    return _list_call(tr, node, "array_has", lists, _element(tr, node, lists, item))


def _array_has_call(tr: Any, node: ex.Call) -> Value:
    return _array_has_node(tr, node, *_arity(node, 2))


def _items(node: ex.Expr) -> tuple[ex.Expr, ...]:
    if not (isinstance(node, ex.Call) and node.name == "array"):
        raise UnsupportedFeatureError(f"the values must be a list literal ([...]): {_text(node)}")
    return node.args


def _any_or_all(combine: Callable[..., pc.Expression]) -> Handler:
    def handle(tr: Any, node: ex.Call) -> Value:
        list_node, values = _arity(node, 2)
        items = _items(values)
        if not items:
            return constant(pa.scalar(combine is pc.and_kleene))
        result = _array_has_node(tr, node, list_node, items[0]).expr
        for item in items[1:]:
            result = combine(result, _array_has_node(tr, node, list_node, item).expr)
        return tr.call(node, result)

    return handle


def _cardinality(tr: Any, node: ex.Call) -> Value:
    (argument,) = _arity(node, 1)
    lists = _list_arg(tr, node, tr.translate(argument))
    return tr.call(node, pc.list_value_length(lists.expr).cast(pa.uint64()))


def _array_empty(tr: Any, node: ex.Call) -> Value:
    (argument,) = _arity(node, 1)
    lists = _list_arg(tr, node, tr.translate(argument))
    return tr.call(node, pc.equal(pc.list_value_length(lists.expr), 0))


def _array_position_call(tr: Any, node: ex.Call) -> Value:
    list_node, item = _arity(node, 2)
    lists = _list_arg(tr, node, tr.translate(list_node))
    return _list_call(tr, node, "array_position", lists, _element(tr, node, lists, item))


def _bracket(tr: Any, node: ex.Call) -> Value:
    subject, *subscripts = node.args
    value = tr.translate(subject)
    if len(subscripts) != 1:
        raise UnsupportedFeatureError(f"only single subscripts are supported: {_text(node)}")
    if pa.types.is_struct(value.type):
        name = tr.pattern(subscripts[0], "field name")
        return tr.call(node, pc.struct_field(value.expr, name))
    lists = _list_arg(tr, node, value)
    index = retype(tr.translate(subscripts[0]), pa.int64())
    if not pa.types.is_integer(index.type):
        raise PredicateError(f"a list subscript must be an integer: {_text(node)}")
    return _list_call(tr, node, "list_get", lists, as_type(index, pa.int64()))


# ---------------------------------------------------------------- strings


def _length(tr: Any, node: ex.Call) -> Value:
    (argument,) = _arity(node, 1)
    value = tr.translate(argument)
    kernel = pc.binary_length if type_kind(value.type) == "binary" else pc.utf8_length
    return tr.call(node, kernel(value.expr))


def _octet_length(tr: Any, node: ex.Call) -> Value:
    if len(node.args) != 1:
        raise PredicateError(f"octet_length takes one argument: {_text(node)}")
    return tr.call(node, pc.binary_length(tr.translate(node.args[0]).expr))


def _affix(kernel: Callable[..., pc.Expression], what: str) -> Handler:
    def handle(tr: Any, node: ex.Call) -> Value:
        subject, affix = _arity(node, 2)
        pattern = tr.pattern(affix, what)
        return tr.call(node, kernel(tr.translate(subject).expr, pattern=pattern))

    return handle


def _escape(tr: Any, node: ex.Call) -> Value:
    """``LIKE ... ESCAPE '\\'`` is what LIKE does anyway; other escape characters are not supported."""
    like, character = _arity(node, 2)
    if tr.pattern(character, "ESCAPE character") != "\\":
        raise UnsupportedFeatureError(f"only ESCAPE '\\' is supported in filters: {_text(node)}")
    return tr.translate(like)


def _regexp(tr: Any, node: ex.Call, subject: ex.Expr, args: tuple[ex.Expr, ...]) -> Value:
    if not args or len(args) > 2:
        raise PredicateError(f"a regular-expression match takes a string and a pattern: {_text(node)}")
    flags = tr.pattern(args[1], "regular-expression flag") if len(args) == 2 else ""
    if set(flags) - {"i"}:
        raise UnsupportedFeatureError(f"unsupported regular-expression flags {flags!r}: {_text(node)}")
    pattern = tr.pattern(args[0], "regular expression")
    return tr.call(
        node, pc.match_substring_regex(tr.translate(subject).expr, pattern=pattern, ignore_case="i" in flags)
    )


def _regexp_like(tr: Any, node: ex.Call) -> Value:
    """``regexp_like``, and DataFusion's ``regexp_match`` coerced to "has a match" in a filter, as
    pylance does."""
    if not node.args:
        raise PredicateError(f"{node.name} takes a string and a pattern: {_text(node)}")
    return _regexp(tr, node, node.args[0], node.args[1:])


def _concat_pipe(tr: Any, node: ex.Call) -> Value:
    left, right = (tr.translate(a) for a in _arity(node, 2))
    return tr.call(node, pc.binary_join_element_wise(left.expr, right.expr, ""))


def _concat(tr: Any, node: ex.Call) -> Value:
    """``concat(a, b, ...)``: NULL arguments count as empty strings (DataFusion's rule)."""
    parts = [tr.translate(e).expr for e in node.args]
    return tr.call(
        node, pc.binary_join_element_wise(*parts, "", null_handling="replace", null_replacement="")
    )


_TRIM_KERNELS = {
    "ltrim": ("utf8_ltrim", "utf8_ltrim_whitespace"),
    "rtrim": ("utf8_rtrim", "utf8_rtrim_whitespace"),
    "btrim": ("utf8_trim", "utf8_trim_whitespace"),
}


def _trim(tr: Any, node: ex.Call) -> Value:
    if node.name == "trim":
        # Plain TRIM(...) is refused by pylance; btrim is the spelling it accepts.
        raise UnsupportedSQLError(f"unsupported SQL in a filter: {_text(node)}")
    subject, *characters = _arity(node, 1, 2)
    kernels = _TRIM_KERNELS[node.name]
    value = tr.translate(subject).expr
    if not characters:
        return tr.call(node, pc.Expression._call(kernels[1], [value]))
    chars = tr.pattern(characters[0], "trim characters")
    return tr.call(node, pc.Expression._call(kernels[0], [value], pc.TrimOptions(chars)))


def _replace(tr: Any, node: ex.Call) -> Value:
    subject, search, replacement = _arity(node, 3)
    pattern = tr.pattern(search, "search string")
    replacement_text = tr.pattern(replacement, "replacement")
    return tr.call(node, pc.replace_substring(tr.translate(subject).expr, pattern, replacement_text))


def _strpos(tr: Any, node: ex.Call) -> Value:
    if len(node.args) > 2:
        raise UnsupportedFeatureError(f"strpos with a start position is not supported: {_text(node)}")
    subject, substring = _arity(node, 2)
    needle = tr.pattern(substring, "substring")
    found = pc.find_substring(tr.translate(subject).expr, needle)
    return tr.call(node, pc.add(found.cast(pa.int64()), 1))


def _slice(tr: Any, node: ex.Call) -> Value:
    """``left(s, n)`` / ``right(s, n)``; a negative ``n`` drops that many characters from the other end."""
    subject, length = _arity(node, 2)
    count = _literal(tr, length, "length")
    if not isinstance(count, int):
        raise PredicateError(f"the length must be an integer: {_text(node)}")
    value = tr.translate(subject).expr
    if node.name == "left":
        return tr.call(node, pc.utf8_slice_codeunits(value, 0, count))
    return tr.call(
        node, pc.utf8_slice_codeunits(value, -count) if count else pc.utf8_slice_codeunits(value, 0, 0)
    )


def _pad(tr: Any, node: ex.Call) -> Value:
    subject, width_node, *fill = _arity(node, 2, 3)
    width = _literal(tr, width_node, "width")
    padding = tr.pattern(fill[0], "padding") if fill else " "
    if len(padding) != 1:
        raise UnsupportedFeatureError(f"only one-character padding is supported: {_text(node)}")
    kernel = pc.utf8_lpad if node.name == "lpad" else pc.utf8_rpad
    padded = kernel(tr.translate(subject).expr, width=width, padding=padding)
    return tr.call(node, pc.utf8_slice_codeunits(padded, 0, width))


def _repeat(tr: Any, node: ex.Call) -> Value:
    subject, count = _arity(node, 2)
    times = as_type(tr.translate(count), pa.int64())
    return tr.call(node, pc.binary_repeat(tr.translate(subject).expr, times.expr))


def _concat_ws(tr: Any, node: ex.Call) -> Value:
    """``concat_ws(sep, a, b, ...)``: NULL arguments are skipped (folded pairwise: Arrow's own
    null-skipping join drops whole rows when a value is NULL)."""
    separator, *parts = node.args
    sep = tr.pattern(separator, "separator")
    values = [tr.translate(e).expr for e in parts]
    if not values:
        raise PredicateError(f"concat_ws needs values to join: {_text(node)}")
    joined = values[0]
    for value in values[1:]:
        both = pc.binary_join_element_wise(joined, value, sep)
        joined = pc.if_else(pc.is_null(joined), value, pc.if_else(pc.is_null(value), joined, both))
    return tr.call(node, joined)


def _regexp_replace(tr: Any, node: ex.Call) -> Value:
    subject, search, replacement, *modifiers = _arity(node, 3, 4)
    pattern = tr.pattern(search, "regular expression")
    replacement_text = tr.pattern(replacement, "replacement")
    flags = tr.pattern(modifiers[0], "flags") if modifiers else ""
    if set(flags) - {"g"}:
        raise UnsupportedFeatureError(f"unsupported regular-expression flags {flags!r}: {_text(node)}")
    limit = None if "g" in flags else 1
    return tr.call(
        node,
        pc.replace_substring_regex(
            tr.translate(subject).expr, pattern, replacement_text, max_replacements=limit
        ),
    )


def _regexp_count(tr: Any, node: ex.Call) -> Value:
    subject, search = node.args[:2]
    pattern = tr.pattern(search, "regular expression")
    return tr.call(node, pc.count_substring_regex(tr.translate(subject).expr, pattern).cast(pa.int64()))


def _bit_length(tr: Any, node: ex.Call) -> Value:
    (argument,) = _arity(node, 1)
    return tr.call(node, pc.multiply(pc.binary_length(tr.translate(argument).expr).cast(pa.int64()), 8))


def _split_part(tr: Any, node: ex.Call) -> Value:
    subject, delimiter_node, index_node = _arity(node, 3)
    delimiter = tr.pattern(delimiter_node, "delimiter")
    index = _literal(tr, index_node, "part number")
    if not isinstance(index, int) or index == 0:
        raise PredicateError(f"split_part's part number must be a non-zero integer: {_text(node)}")
    value = tr.translate(subject)
    parts = pc.split_pattern(value.expr, delimiter)
    lists = Value(parts, pa.list_(value.type))
    got = _list_call(tr, node, "list_get", lists, constant(pa.scalar(index, pa.int64())))
    return tr.call(node, pc.if_else(pc.is_null(value.expr), got.expr, pc.coalesce(got.expr, "")))


# ---------------------------------------------------------------- numbers


def _float(tr: Any, node: ex.Expr) -> pc.Expression:
    return as_type(tr.translate(node), pa.float64()).expr


def _math(kernel: Callable[[pc.Expression], pc.Expression]) -> Handler:
    def handle(tr: Any, node: ex.Call) -> Value:
        (argument,) = _arity(node, 1)
        return tr.call(node, kernel(_float(tr, argument)))

    return handle


def _round(tr: Any, node: ex.Call) -> Value:
    """``round(x[, digits])``: halves round away from zero, as in DataFusion."""
    subject, *digits = _arity(node, 1, 2)
    ndigits = _literal(tr, digits[0], "number of digits") if digits else 0
    return tr.call(node, pc.round(_float(tr, subject), ndigits=ndigits, round_mode="half_towards_infinity"))


def _pow(tr: Any, node: ex.Call) -> Value:
    base_node, exponent_node = _arity(node, 2)
    base, exponent = tr.translate(base_node), tr.translate(exponent_node)
    if pa.types.is_integer(base.type) and pa.types.is_integer(exponent.type):
        return tr.call(node, pc.power(as_type(base, pa.int64()).expr, as_type(exponent, pa.int64()).expr))
    return tr.call(node, pc.power(_float(tr, base_node), _float(tr, exponent_node)))


def _log(tr: Any, node: ex.Call) -> Value:
    """``log(x)`` is base 10 (DataFusion's), ``log(base, x)``."""
    args = _arity(node, 1, 2)
    if len(args) == 1:
        return tr.call(node, pc.log10(_float(tr, args[0])))
    return tr.call(node, pc.logb(_float(tr, args[1]), _float(tr, args[0])))


def _sign(tr: Any, node: ex.Call) -> Value:
    (argument,) = _arity(node, 1)
    return tr.call(node, pc.sign(tr.translate(argument).expr))


def _iszero(tr: Any, node: ex.Call) -> Value:
    (argument,) = _arity(node, 1)
    return tr.call(node, pc.equal(_float(tr, argument), 0.0))


# ---------------------------------------------------------------- conditionals


def _coalesce(tr: Any, node: ex.Call) -> Value:
    values = [tr.translate(e) for e in node.args]
    column = next((v for v in values if v.literal is None), values[0])
    return tr.call(node, pc.coalesce(*(retype(v, column.type).expr for v in values)))


def _extremum(kernel: Callable[..., pc.Expression]) -> Handler:
    def handle(tr: Any, node: ex.Call) -> Value:
        values = [tr.translate(e) for e in node.args]
        column = next((v for v in values if v.literal is None), values[0])
        values = [retype(v, column.type) for v in values]
        common = values[0]
        for other in values[1:]:
            common, _ = promote(common, other)
        return tr.call(node, kernel(*(as_type(v, common.type).expr for v in values), skip_nulls=True))

    return handle


def _nullif(tr: Any, node: ex.Call) -> Value:
    value, other = unify(*(tr.translate(a) for a in _arity(node, 2)))
    equal = p.compare(tr, "eq", value, other, _text(node))
    return tr.call(node, pc.if_else(pc.coalesce(equal.expr, False), pa.scalar(None, value.type), value.expr))


def _nvl2(tr: Any, node: ex.Call) -> Value:
    test_node, when_set_node, otherwise_node = _arity(node, 3)
    test = tr.translate(test_node)
    when_set, otherwise = unify(tr.translate(when_set_node), tr.translate(otherwise_node))
    return tr.call(node, pc.if_else(pc.is_valid(test.expr), when_set.expr, otherwise.expr))


def _distinct(tr: Any, node: ex.Call) -> Value:
    left, right = (tr.translate(a) for a in _arity(node, 2))
    equal = p.compare(tr, "eq", left, right, _text(node)).expr
    both_null = pc.and_kleene(pc.is_null(left.expr), pc.is_null(right.expr))
    same = pc.if_else(pc.is_null(equal), both_null, equal)
    return tr.call(node, pc.invert(same) if node.name == "nullsafeneq" else same)


def _is(tr: Any, node: ex.Call) -> Value:
    """``x IS [NOT] TRUE`` / ``FALSE`` (``IS NULL`` is a node of its own)."""
    subject, target = _arity(node, 2)
    if isinstance(target, ex.Literal) and pa.types.is_boolean(target.value.type):
        value = tr.translate(subject)
        truth = value.expr if target.value.as_py() else pc.invert(value.expr)
        return tr.call(node, pc.coalesce(truth, pa.scalar(False)))
    raise UnsupportedFeatureError(f"unsupported IS test in a filter: {_text(node)}")


def _in_other(tr: Any, node: ex.Call) -> Value:
    """``IN`` over a subquery or ``UNNEST`` (a list of values is an :class:`~ex.In` node)."""
    raise UnsupportedFeatureError(f"only IN (value, ...) lists are supported in filters: {_text(node)}")


# ---------------------------------------------------------------- dates

_TRUNC_UNITS = {
    "year",
    "quarter",
    "month",
    "week",
    "day",
    "hour",
    "minute",
    "second",
    "millisecond",
    "microsecond",
}


def _date_trunc(tr: Any, node: ex.Call) -> Value:
    subject, unit_node = node.args[:2]
    if isinstance(unit_node, ex.Literal):
        unit = str(unit_node.value.as_py()).lower()
    elif isinstance(unit_node, ex.Column):
        unit = unit_node.path[-1].lower()
    else:
        unit = _text(unit_node).lower()
    if unit not in _TRUNC_UNITS:
        raise PredicateError(f"unsupported date_trunc unit {unit!r}: {_text(node)}")
    value = tr.translate(subject)
    return tr.call(node, pc.floor_temporal(value.expr, unit=unit))


_PARTS: dict[str, Callable[[pc.Expression], pc.Expression]] = {
    "year": pc.year,
    "quarter": pc.quarter,
    "month": pc.month,
    "week": pc.iso_week,
    "day": pc.day,
    "dow": lambda v: pc.day_of_week(v, count_from_zero=True, week_start=7),
    "doy": pc.day_of_year,
    "hour": pc.hour,
    "minute": pc.minute,
    "second": pc.second,
    "millisecond": pc.millisecond,
    "microsecond": pc.microsecond,
}


def _date_part(tr: Any, node: ex.Call) -> Value:
    part_node, subject = _arity(node, 2)
    part = str(_literal(tr, part_node, "date part")).lower()
    if part not in _PARTS:
        raise PredicateError(f"unsupported date_part {part!r}: {_text(node)}")
    return tr.call(node, _PARTS[part](tr.translate(subject).expr).cast(pa.int32()))


def _to_date(tr: Any, node: ex.Call) -> Value:
    if len(node.args) > 1:
        raise UnsupportedFeatureError(f"to_date with a format is not supported: {_text(node)}")
    (subject,) = _arity(node, 1)
    value = tr.translate(subject)
    if value.literal is not None and isinstance(value.literal.as_py(), str):
        return constant(temporal_literal(value.literal.as_py(), pa.date32()))
    return tr.call(node, value.expr.cast(pa.date32()))


def _array_literal(tr: Any, node: ex.Call) -> Value:
    """``[1.0, 2.0]``: a list constant of constant elements (an update casts it to the column's
    list or fixed-size-list type, as pylance's ``update({"vec": "[1.0, 2.0]"})`` does)."""
    items = [tr.translate(e) for e in node.args]
    if not items or any(v.literal is None for v in items):
        raise UnsupportedSQLError(f"an array literal needs constant elements: {_text(node)}")
    try:
        return constant(pa.scalar([v.literal.as_py() for v in items if v.literal is not None]))
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise PredicateError(f"array literal of mixed types: {_text(node)}") from exc


# ---------------------------------------------------------------- arrow_cast

_SIMPLE_TYPES: dict[str, pa.DataType] = {
    "Null": pa.null(),
    "Boolean": pa.bool_(),
    "Int8": pa.int8(),
    "Int16": pa.int16(),
    "Int32": pa.int32(),
    "Int64": pa.int64(),
    "UInt8": pa.uint8(),
    "UInt16": pa.uint16(),
    "UInt32": pa.uint32(),
    "UInt64": pa.uint64(),
    "Float16": pa.float16(),
    "Float32": pa.float32(),
    "Float64": pa.float64(),
    "Utf8": pa.string(),
    "LargeUtf8": pa.large_string(),
    "Utf8View": pa.string_view(),
    "Binary": pa.binary(),
    "LargeBinary": pa.large_binary(),
    "BinaryView": pa.binary_view(),
    "Date32": pa.date32(),
    "Date64": pa.date64(),
}
_UNITS = {
    "Second": "s",
    "Millisecond": "ms",
    "Microsecond": "us",
    "Nanosecond": "ns",
    "s": "s",
    "ms": "ms",
    "us": "us",
    "ns": "ns",
}
_TYPE_TOKEN = re.compile(r'\s*(?:([A-Za-z_][A-Za-z0-9_]*)|(-?\d+)|"([^"]*)"|([(),]))')


class _TypeText:
    """A recursive-descent reader of an Arrow type name as DataFusion's ``arrow_cast`` spells it."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[tuple[str, str]] = []
        position = 0
        while position < len(text.rstrip()):
            match = _TYPE_TOKEN.match(text, position)
            if match is None:
                raise self.error()
            kind = ("name", "int", "str", "punct")[match.lastindex - 1 if match.lastindex else 0]
            self.tokens.append((kind, match.group(match.lastindex or 0)))
            position = match.end()
        self.at = 0

    def error(self) -> PredicateError:
        return PredicateError(
            f"Unsupported type '{self.text}'. "
            "Must be a supported arrow type name such as 'Int32' or 'Timestamp(ns)'"
        )

    def take(self, kind: str, value: str | None = None) -> str:
        if self.at >= len(self.tokens):
            raise self.error()
        got_kind, got = self.tokens[self.at]
        if got_kind != kind or (value is not None and got != value):
            raise self.error()
        self.at += 1
        return got

    def peek(self, value: str) -> bool:
        return self.at < len(self.tokens) and self.tokens[self.at][1] == value

    def unit(self) -> str:
        unit = _UNITS.get(self.take("name"))
        if unit is None:
            raise self.error()
        return unit

    def timezone(self) -> str | None:
        if self.peek("None"):
            self.take("name")
            return None
        if self.peek("Some"):
            self.take("name")
            self.take("punct", "(")
            zone = self.take("str")
            self.take("punct", ")")
            return zone
        return self.take("str")

    def parse(self) -> pa.DataType:
        type_ = self.type_()
        if self.at != len(self.tokens):
            raise self.error()
        return type_

    def type_(self) -> pa.DataType:
        name = self.take("name")
        if name in _SIMPLE_TYPES:
            return _SIMPLE_TYPES[name]
        self.take("punct", "(")
        if name == "Timestamp":
            unit = self.unit()
            zone = self.timezone() if self.peek(",") and self.take("punct", ",") else None
            result: pa.DataType = pa.timestamp(unit, zone)
        elif name in ("Time32", "Time64", "Duration"):
            unit = self.unit()
            result = {"Time32": pa.time32, "Time64": pa.time64, "Duration": pa.duration}[name](unit)
        elif name in ("Decimal128", "Decimal256"):
            precision = int(self.take("int"))
            self.take("punct", ",")
            scale = int(self.take("int"))
            result = (pa.decimal128 if name == "Decimal128" else pa.decimal256)(precision, scale)
        elif name == "FixedSizeBinary":
            result = pa.binary(int(self.take("int")))
        elif name in ("List", "LargeList"):
            result = (pa.list_ if name == "List" else pa.large_list)(self.type_())
        elif name == "FixedSizeList":
            size = int(self.take("int"))
            self.take("punct", ",")
            result = pa.list_(self.type_(), size)
        elif name == "Dictionary":
            key = self.type_()
            self.take("punct", ",")
            result = pa.dictionary(key, self.type_())
        else:
            raise self.error()
        self.take("punct", ")")
        return result


def arrow_type(text: str) -> pa.DataType:
    """The Arrow type DataFusion's ``arrow_cast`` reads from ``text`` (``'Int32'``,
    ``'Timestamp(Microsecond, None)'``, ``'FixedSizeList(32, Float32)'``)."""
    reader = _TypeText(text)
    try:
        return reader.parse()
    except PredicateError:
        raise
    except (ValueError, TypeError, pa.ArrowException) as exc:  # a bad width, precision, key type
        raise reader.error() from exc


def _arrow_cast(tr: Any, node: ex.Call) -> Value:
    if len(node.args) != 2:
        raise PredicateError(f"Function 'arrow_cast' expects 2 arguments but received {len(node.args)}")
    subject, type_node = node.args
    type_value = tr.translate(type_node)
    if type_value.literal is None or not isinstance(type_value.literal.as_py(), str):
        raise PredicateError(
            f"arrow_cast requires its second argument to be a constant string, got {_text(type_node)}"
        )
    target = arrow_type(type_value.literal.as_py())
    value = tr.translate(subject)
    if value.literal is None:
        return tr.call(node, datafusion_cast(value.expr, value.type, target))
    try:
        return constant(datafusion_cast(value.literal, value.type, target))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise PredicateError(f"cannot evaluate {_text(node)}: {exc}") from exc


def _cast_list_f16(tr: Any, node: ex.Call) -> Value:
    """Lance's ``_cast_list_f16(v)``: a list / fixed-size list of floats as float16 (projections)."""
    value = tr.translate(_arity(node, 1)[0])
    kind = value.type
    if not (pa.types.is_fixed_size_list(kind) or pa.types.is_list(kind)) or not pa.types.is_floating(
        kind.value_type
    ):
        raise PredicateError(f"cast_list_f16 only supports FixedSizeList/List arguments, got {kind}")
    size = kind.list_size if pa.types.is_fixed_size_list(kind) else -1
    return tr.call(node, value.expr.cast(pa.list_(pa.float16(), size)))


# ---------------------------------------------------------------- JSON (lance_ops.query.json_functions)


def _column_type(tr: Any, node: ex.Column) -> pa.DataType:
    type_ = tr.schema.field(tr.top_level(node)).type
    for name in node.path[1:]:
        type_ = type_.field(name).type
    return type_


def _json_call(tr: Any, node: ex.Call) -> Value:
    document_node, *text_nodes = _arity(node, JSON_FUNCTIONS[node.name][2] + 1)
    document = tr.translate(document_node)
    # a JSON column translates to its text (its storage), json_get gives JSONB; anything else is
    # refused, as pylance refuses it
    nested = isinstance(document_node, ex.Call) and document_node.name == "json_get"
    column = isinstance(document_node, ex.Column) and is_json(_column_type(tr, document_node))
    if not (nested or column):
        raise PredicateError(f"{_text(node)} needs a JSON column, not {document.type}")
    texts = [retype(tr.translate(n), pa.string()) for n in text_nodes]
    if any(t.type != pa.string() for t in texts):
        raise PredicateError(f"{_text(node)}: the key / path / value must be a string")
    function = json_function(node.name, document.type)
    return tr.call(node, pc.Expression._call(function, [document.expr, *(t.expr for t in texts)]))


FUNCTIONS: dict[str, Handler] = {
    # JSON
    **dict.fromkeys(JSON_FUNCTIONS, _json_call),
    # constants
    "current_date": _current_date,
    "current_timestamp": _now,
    "now": _now,
    "hexstring": _hex_string,
    "pi": _pi,
    # lists
    "array": _array_literal,
    "array_contains": _array_has_call,
    "list_has": _array_has_call,
    "array_contains_all": _any_or_all(pc.and_kleene),
    "array_has_all": _any_or_all(pc.and_kleene),
    "list_has_all": _any_or_all(pc.and_kleene),
    "array_has_any": _any_or_all(pc.or_kleene),
    "list_has_any": _any_or_all(pc.or_kleene),
    "array_size": _cardinality,
    "cardinality": _cardinality,
    "array_empty": _array_empty,
    "empty": _array_empty,
    "array_position": _array_position_call,
    "bracket": _bracket,
    # strings
    "lower": _unary(pc.utf8_lower),
    "upper": _unary(pc.utf8_upper),
    "length": _length,
    "octet_length": _octet_length,
    "starts_with": _affix(pc.starts_with, "prefix"),
    "ends_with": _affix(pc.ends_with, "suffix"),
    "contains": _affix(pc.match_substring, "substring"),
    "escape": _escape,
    "regexp_like": _regexp_like,
    "regexp_match": _regexp_like,
    "dpipe": _concat_pipe,
    "concat": _concat,
    "trim": _trim,
    "ltrim": _trim,
    "rtrim": _trim,
    "btrim": _trim,
    "replace": _replace,
    "str_position": _strpos,
    "left": _slice,
    "right": _slice,
    "reverse": _unary(pc.utf8_reverse),
    "lpad": _pad,
    "rpad": _pad,
    "repeat": _repeat,
    "initcap": _unary(pc.utf8_title),
    "concat_ws": _concat_ws,
    "regexp_replace": _regexp_replace,
    "regexp_count": _regexp_count,
    "bit_length": _bit_length,
    "split_part": _split_part,
    # numbers
    "abs": _unary(pc.abs),
    "is_nan": _unary(pc.is_nan),
    "round": _round,
    "sqrt": _math(pc.sqrt),
    "exp": _math(pc.exp),
    "ln": _math(pc.ln),
    "log": _log,
    "log10": _math(pc.log10),
    "log2": _math(pc.log2),
    "power": _pow,
    "sign": _sign,
    "sin": _math(pc.sin),
    "cos": _math(pc.cos),
    "tan": _math(pc.tan),
    "asin": _math(pc.asin),
    "acos": _math(pc.acos),
    "atan": _math(pc.atan),
    "degrees": _math(lambda v: pc.multiply(v, 180.0 / math.pi)),
    "radians": _math(lambda v: pc.multiply(v, math.pi / 180.0)),
    "iszero": _iszero,
    # conditionals
    "coalesce": _coalesce,
    "greatest": _extremum(pc.max_element_wise),
    "least": _extremum(pc.min_element_wise),
    "nullif": _nullif,
    "nvl2": _nvl2,
    "nullsafeeq": _distinct,
    "nullsafeneq": _distinct,
    "is": _is,
    "in": _in_other,
    # dates
    "timestamp_trunc": _date_trunc,
    "date_part": _date_part,
    "ts_or_ds_to_date": _to_date,
    # casts
    "arrow_cast": _arrow_cast,
    "_cast_list_f16": _cast_list_f16,
}
