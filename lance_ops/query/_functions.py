"""DataFusion scalar functions and literals for filters and SQL expressions (pylance 14's set).

Each entry maps a sqlglot node class (or, for functions sqlglot does not know, the lower-case
function name) to a handler building an Arrow expression from the translated arguments, with
DataFusion's semantics where Arrow's kernels differ:

* constants: ``CURRENT_DATE``, ``now()`` / ``CURRENT_TIMESTAMP`` (UTC, fixed when the filter is
  bound), ``pi()``, binary literals ``X'4142'``;
* lists: ``array_has`` / ``array_contains`` / ``list_has``, ``array_has_any``, ``array_has_all``,
  ``array_length``, ``cardinality``, ``array_position``, ``array_empty`` / ``empty`` and 1-based
  subscripts ``tags[1]`` (out of range -> NULL, negative counts from the end); Arrow has no kernels
  for these, so they are vectorised scalar UDFs registered with Arrow once per element type;
* strings: ``btrim`` / ``ltrim`` / ``rtrim``, ``replace``, ``strpos`` / ``instr``, ``left``,
  ``right``, ``reverse``, ``lpad`` / ``rpad`` (truncating to the width, as DataFusion does),
  ``repeat``, ``initcap``, ``concat_ws`` (NULLs skipped), ``regexp_replace`` (first match unless
  flag ``g``), ``regexp_count``, ``bit_length``, ``split_part``;
* numbers: ``round(x[, digits])`` (half away from zero), ``sqrt``, ``power`` / ``pow``, ``exp``,
  ``ln``, ``log`` (base 10 with one argument, ``log(base, x)``), ``log10``, ``log2``, ``signum``,
  ``sin`` / ``cos`` / ``tan`` / ``asin`` / ``acos`` / ``atan``, ``degrees``, ``radians``, ``iszero``;
* conditionals: ``greatest`` / ``least`` (NULLs ignored), ``nullif``, ``nvl2``,
  ``IS [NOT] DISTINCT FROM``;
* dates: ``date_trunc(unit, t)``, ``date_part(part, t)``, ``to_date(text)``.

Functions pylance refuses in filters (``substr``, ``trim``, ``floor``, ``ceil``, ``CASE``,
``EXTRACT``) stay unsupported here too.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from lance_ops.errors import PredicateError, UnsupportedFeatureError, UnsupportedSQLError
from lance_ops.query import predicate as p
from lance_ops.query.parser import sql_text
from lance_ops.query.values import Value, as_type, constant, promote, retype, temporal_literal, unify

__all__ = ["ANONYMOUS", "HANDLERS"]

Handler = Callable[[Any, Any], "Value"]
Anonymous = Callable[[Any, exp.Expr, Sequence[exp.Expr]], "Value"]


# ---------------------------------------------------------------- constants


def _current_date(tr: Any, node: exp.Expr) -> Value:
    return constant(pa.scalar(dt.datetime.now(dt.UTC).date(), pa.date32()))


def _now(tr: Any, node: exp.Expr, args: Sequence[exp.Expr] = ()) -> Value:
    moment = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    return constant(pa.scalar(moment, pa.timestamp("ns")))


def _hex_string(tr: Any, node: exp.HexString) -> Value:
    try:
        return constant(pa.scalar(bytes.fromhex(str(node.this)), pa.binary()))
    except ValueError as exc:
        raise PredicateError(f"invalid binary literal {sql_text(node)}") from exc


def _pi(tr: Any, node: exp.Expr) -> Value:
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


def _list_arg(tr: Any, node: exp.Expr, value: Value) -> Value:
    if not (pa.types.is_list(value.type) or pa.types.is_large_list(value.type)):
        raise PredicateError(f"{sql_text(node)} needs a list column, not {value.type}")
    return value


def _element(tr: Any, node: exp.Expr, lists: Value, item: exp.Expr) -> Value:
    value = retype(tr.translate(item), lists.type.value_type)
    if value.type != lists.type.value_type:
        raise PredicateError(f"{sql_text(node)}: {value.type} values cannot be looked up in {lists.type}")
    return value


def _list_call(tr: Any, node: exp.Expr, name: str, lists: Value, second: Value) -> Value:
    function = _udf(name, lists.type, second.type)
    return tr.call(node, pc.Expression._call(function, [lists.expr, second.expr]))


def _array_has_node(tr: Any, node: exp.Expr, list_node: exp.Expr, item: exp.Expr) -> Value:
    lists = _list_arg(tr, node, tr.translate(list_node))
    return _list_call(tr, node, "array_has", lists, _element(tr, node, lists, item))


def _array_contains(tr: Any, node: exp.ArrayContains) -> Value:
    return _array_has_node(tr, node, node.this, node.expression)


def _items(node: exp.Expr) -> list[exp.Expr]:
    if not isinstance(node, exp.Array):
        raise UnsupportedFeatureError(f"the values must be a list literal ([...]): {sql_text(node)}")
    return list(node.expressions)


def _any_or_all(tr: Any, node: exp.Expr, list_node: exp.Expr, values: exp.Expr, combine: Any) -> Value:
    items = _items(values)
    if not items:
        return constant(pa.scalar(combine is pc.and_kleene))
    result = _array_has_node(tr, node, list_node, items[0]).expr
    for item in items[1:]:
        result = combine(result, _array_has_node(tr, node, list_node, item).expr)
    return tr.call(node, result)


def _array_contains_all(tr: Any, node: exp.ArrayContainsAll) -> Value:
    return _any_or_all(tr, node, node.this, node.expression, pc.and_kleene)


def _array_has_any(tr: Any, node: exp.Expr, args: Sequence[exp.Expr]) -> Value:
    _arity(node, args, 2)
    return _any_or_all(tr, node, args[0], args[1], pc.or_kleene)


def _array_has_all(tr: Any, node: exp.Expr, args: Sequence[exp.Expr]) -> Value:
    _arity(node, args, 2)
    return _any_or_all(tr, node, args[0], args[1], pc.and_kleene)


def _array_has_call(tr: Any, node: exp.Expr, args: Sequence[exp.Expr]) -> Value:
    _arity(node, args, 2)
    return _array_has_node(tr, node, args[0], args[1])


def _array_size(tr: Any, node: exp.ArraySize) -> Value:
    lists = _list_arg(tr, node, tr.translate(node.this))
    return tr.call(node, pc.list_value_length(lists.expr).cast(pa.uint64()))


def _cardinality(tr: Any, node: exp.Expr, args: Sequence[exp.Expr]) -> Value:
    _arity(node, args, 1)
    lists = _list_arg(tr, node, tr.translate(args[0]))
    return tr.call(node, pc.list_value_length(lists.expr).cast(pa.uint64()))


def _array_empty(tr: Any, node: exp.Expr, args: Sequence[exp.Expr]) -> Value:
    _arity(node, args, 1)
    lists = _list_arg(tr, node, tr.translate(args[0]))
    return tr.call(node, pc.equal(pc.list_value_length(lists.expr), 0))


def _array_position_node(tr: Any, node: exp.ArrayPosition) -> Value:
    lists = _list_arg(tr, node, tr.translate(node.this))
    return _list_call(tr, node, "array_position", lists, _element(tr, node, lists, node.expression))


def _bracket(tr: Any, node: exp.Bracket) -> Value:
    value = tr.translate(node.this)
    if len(node.expressions) != 1:
        raise UnsupportedFeatureError(f"only single subscripts are supported: {sql_text(node)}")
    if pa.types.is_struct(value.type):
        name = tr.pattern(node.expressions[0], "field name")
        return tr.call(node, pc.struct_field(value.expr, name))
    lists = _list_arg(tr, node, value)
    index = retype(tr.translate(node.expressions[0]), pa.int64())
    if not pa.types.is_integer(index.type):
        raise PredicateError(f"a list subscript must be an integer: {sql_text(node)}")
    return _list_call(tr, node, "list_get", lists, as_type(index, pa.int64()))


# ---------------------------------------------------------------- strings


def _arity(node: exp.Expr, args: Sequence[Any], *counts: int) -> None:
    if len(args) not in counts:
        raise PredicateError(f"wrong number of arguments: {sql_text(node)}")


def _literal(tr: Any, node: exp.Expr, what: str) -> Any:
    value = tr.translate(node)
    if value.literal is None:
        raise UnsupportedFeatureError(f"the {what} must be a literal, not {sql_text(node)}")
    return value.literal.as_py()


def _trim(tr: Any, node: exp.Trim) -> Value:
    position = str(node.args.get("position") or "BOTH").upper()
    kernels = {
        "LEADING": ("utf8_ltrim", "utf8_ltrim_whitespace"),
        "TRAILING": ("utf8_rtrim", "utf8_rtrim_whitespace"),
    }
    if position not in kernels:
        # Plain TRIM(...) is refused by pylance; btrim is the spelling it accepts.
        raise UnsupportedSQLError(f"unsupported SQL in a filter: {sql_text(node)}")
    return _trim_with(tr, node, node.this, node.expression, kernels[position])


def _trim_with(
    tr: Any, node: exp.Expr, subject: exp.Expr, characters: exp.Expr | None, kernels: tuple[str, str]
) -> Value:
    value = tr.translate(subject).expr
    if characters is None:
        return tr.call(node, pc.Expression._call(kernels[1], [value]))
    chars = tr.pattern(characters, "trim characters")
    return tr.call(node, pc.Expression._call(kernels[0], [value], pc.TrimOptions(chars)))


def _btrim(tr: Any, node: exp.Expr, args: Sequence[exp.Expr]) -> Value:
    _arity(node, args, 1, 2)
    return _trim_with(
        tr, node, args[0], args[1] if len(args) == 2 else None, ("utf8_trim", "utf8_trim_whitespace")
    )


def _replace(tr: Any, node: exp.Replace) -> Value:
    pattern = tr.pattern(node.expression, "search string")
    replacement = tr.pattern(node.args["replacement"], "replacement")
    return tr.call(node, pc.replace_substring(tr.translate(node.this).expr, pattern, replacement))


def _strpos(tr: Any, node: exp.StrPosition) -> Value:
    if node.args.get("position") is not None:
        raise UnsupportedFeatureError(f"strpos with a start position is not supported: {sql_text(node)}")
    needle = tr.pattern(node.args["substr"], "substring")
    found = pc.find_substring(tr.translate(node.this).expr, needle)
    return tr.call(node, pc.add(found.cast(pa.int64()), 1))


def _slice(tr: Any, node: exp.Expr, from_left: bool) -> Value:
    """``left(s, n)`` / ``right(s, n)``; a negative ``n`` drops that many characters from the other end."""
    count = _literal(tr, node.expression, "length")
    if not isinstance(count, int):
        raise PredicateError(f"the length must be an integer: {sql_text(node)}")
    value = tr.translate(node.this).expr
    if from_left:
        return tr.call(node, pc.utf8_slice_codeunits(value, 0, count))
    start = -count if count > 0 else -count
    return tr.call(
        node, pc.utf8_slice_codeunits(value, start) if count else pc.utf8_slice_codeunits(value, 0, 0)
    )


def _pad(tr: Any, node: exp.Pad) -> Value:
    width = _literal(tr, node.expression, "width")
    fill = node.args.get("fill_pattern")
    padding = " " if fill is None else tr.pattern(fill, "padding")
    if len(padding) != 1:
        raise UnsupportedFeatureError(f"only one-character padding is supported: {sql_text(node)}")
    kernel = pc.utf8_lpad if node.args.get("is_left") else pc.utf8_rpad
    padded = kernel(tr.translate(node.this).expr, width=width, padding=padding)
    return tr.call(node, pc.utf8_slice_codeunits(padded, 0, width))


def _repeat(tr: Any, node: exp.Repeat) -> Value:
    times = as_type(tr.translate(node.args["times"]), pa.int64())
    return tr.call(node, pc.binary_repeat(tr.translate(node.this).expr, times.expr))


def _concat_ws(tr: Any, node: exp.ConcatWs) -> Value:
    """``concat_ws(sep, a, b, ...)``: NULL arguments are skipped (folded pairwise: Arrow's own
    null-skipping join drops whole rows when a value is NULL)."""
    separator, *parts = node.expressions
    sep = tr.pattern(separator, "separator")
    values = [tr.translate(e).expr for e in parts]
    if not values:
        raise PredicateError(f"concat_ws needs values to join: {sql_text(node)}")
    joined = values[0]
    for value in values[1:]:
        both = pc.binary_join_element_wise(joined, value, sep)
        joined = pc.if_else(pc.is_null(joined), value, pc.if_else(pc.is_null(value), joined, both))
    return tr.call(node, joined)


def _regexp_replace(tr: Any, node: exp.RegexpReplace) -> Value:
    pattern = tr.pattern(node.expression, "regular expression")
    replacement = tr.pattern(node.args["replacement"], "replacement")
    modifiers = node.args.get("modifiers")
    flags = "" if modifiers is None else tr.pattern(modifiers, "flags")
    if set(flags) - {"g"}:
        raise UnsupportedFeatureError(f"unsupported regular-expression flags {flags!r}: {sql_text(node)}")
    limit = None if "g" in flags else 1
    return tr.call(
        node,
        pc.replace_substring_regex(
            tr.translate(node.this).expr, pattern, replacement, max_replacements=limit
        ),
    )


def _regexp_count(tr: Any, node: exp.RegexpCount) -> Value:
    pattern = tr.pattern(node.expression, "regular expression")
    return tr.call(node, pc.count_substring_regex(tr.translate(node.this).expr, pattern).cast(pa.int64()))


def _bit_length(tr: Any, node: exp.BitLength) -> Value:
    return tr.call(node, pc.multiply(pc.binary_length(tr.translate(node.this).expr).cast(pa.int64()), 8))


def _split_part(tr: Any, node: exp.SplitPart) -> Value:
    delimiter = tr.pattern(node.args["delimiter"], "delimiter")
    index = _literal(tr, node.args["part_index"], "part number")
    if not isinstance(index, int) or index == 0:
        raise PredicateError(f"split_part's part number must be a non-zero integer: {sql_text(node)}")
    value = tr.translate(node.this)
    parts = pc.split_pattern(value.expr, delimiter)
    lists = Value(parts, pa.list_(value.type))
    got = _list_call(tr, node, "list_get", lists, constant(pa.scalar(index, pa.int64())))
    return tr.call(node, pc.if_else(pc.is_null(value.expr), got.expr, pc.coalesce(got.expr, "")))


# ---------------------------------------------------------------- numbers


def _float(tr: Any, node: exp.Expr) -> pc.Expression:
    return as_type(tr.translate(node), pa.float64()).expr


def _math(kernel: Callable[[pc.Expression], pc.Expression]) -> Handler:
    def handle(tr: Any, node: exp.Func) -> Value:
        return tr.call(node, kernel(_float(tr, node.this)))

    return handle


def _round(tr: Any, node: exp.Round) -> Value:
    """``round(x[, digits])``: halves round away from zero, as in DataFusion."""
    digits = node.args.get("decimals")
    ndigits = 0 if digits is None else _literal(tr, digits, "number of digits")
    return tr.call(node, pc.round(_float(tr, node.this), ndigits=ndigits, round_mode="half_towards_infinity"))


def _pow(tr: Any, node: exp.Pow) -> Value:
    base, exponent = tr.translate(node.this), tr.translate(node.expression)
    if pa.types.is_integer(base.type) and pa.types.is_integer(exponent.type):
        return tr.call(node, pc.power(as_type(base, pa.int64()).expr, as_type(exponent, pa.int64()).expr))
    return tr.call(node, pc.power(_float(tr, node.this), _float(tr, node.expression)))


def _log(tr: Any, node: exp.Log) -> Value:
    if node.expression is None:
        return tr.call(node, pc.log10(_float(tr, node.this)))
    return tr.call(node, pc.logb(_float(tr, node.expression), _float(tr, node.this)))


def _log_named(kernel: Callable[[pc.Expression], pc.Expression]) -> Anonymous:
    def handle(tr: Any, node: exp.Expr, args: Sequence[exp.Expr]) -> Value:
        _arity(node, args, 1)
        return tr.call(node, kernel(_float(tr, args[0])))

    return handle


def _sign(tr: Any, node: exp.Sign) -> Value:
    return tr.call(node, pc.sign(tr.translate(node.this).expr))


def _iszero(tr: Any, node: exp.Expr, args: Sequence[exp.Expr]) -> Value:
    _arity(node, args, 1)
    return tr.call(node, pc.equal(_float(tr, args[0]), 0.0))


# ---------------------------------------------------------------- conditionals


def _extremum(kernel: Callable[..., pc.Expression]) -> Handler:
    def handle(tr: Any, node: exp.Func) -> Value:
        values = [tr.translate(node.this), *(tr.translate(e) for e in node.expressions)]
        column = next((v for v in values if v.literal is None), values[0])
        values = [retype(v, column.type) for v in values]
        common = values[0]
        for other in values[1:]:
            common, _ = promote(common, other)
        return tr.call(node, kernel(*(as_type(v, common.type).expr for v in values), skip_nulls=True))

    return handle


def _nullif(tr: Any, node: exp.Nullif) -> Value:
    value, other = unify(tr.translate(node.this), tr.translate(node.expression))
    equal = p.compare(tr, "eq", value, other, sql_text(node))
    return tr.call(node, pc.if_else(pc.coalesce(equal.expr, False), pa.scalar(None, value.type), value.expr))


def _nvl2(tr: Any, node: exp.Nvl2) -> Value:
    test = tr.translate(node.this)
    when_set, otherwise = unify(tr.translate(node.args["true"]), tr.translate(node.args["false"]))
    return tr.call(node, pc.if_else(pc.is_valid(test.expr), when_set.expr, otherwise.expr))


def _distinct(negate: bool) -> Handler:
    def handle(tr: Any, node: exp.Binary) -> Value:
        left, right = tr.translate(node.this), tr.translate(node.expression)
        equal = p.compare(tr, "eq", left, right, sql_text(node)).expr
        both_null = pc.and_kleene(pc.is_null(left.expr), pc.is_null(right.expr))
        same = pc.if_else(pc.is_null(equal), both_null, equal)
        return tr.call(node, pc.invert(same) if negate else same)

    return handle


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


def _date_trunc(tr: Any, node: exp.TimestampTrunc) -> Value:
    unit = str(
        node.args["unit"].name if isinstance(node.args["unit"], exp.Expr) else node.args["unit"]
    ).lower()
    if unit not in _TRUNC_UNITS:
        raise PredicateError(f"unsupported date_trunc unit {unit!r}: {sql_text(node)}")
    value = tr.translate(node.this)
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


def _date_part(tr: Any, node: exp.Expr, args: Sequence[exp.Expr]) -> Value:
    _arity(node, args, 2)
    part = str(_literal(tr, args[0], "date part")).lower()
    if part not in _PARTS:
        raise PredicateError(f"unsupported date_part {part!r}: {sql_text(node)}")
    return tr.call(node, _PARTS[part](tr.translate(args[1]).expr).cast(pa.int32()))


def _to_date(tr: Any, node: exp.TsOrDsToDate) -> Value:
    if node.args.get("format") is not None:
        raise UnsupportedFeatureError(f"to_date with a format is not supported: {sql_text(node)}")
    value = tr.translate(node.this)
    if value.literal is not None and isinstance(value.literal.as_py(), str):
        return constant(temporal_literal(value.literal.as_py(), pa.date32()))
    return tr.call(node, value.expr.cast(pa.date32()))


HANDLERS: dict[type[exp.Expr], Handler] = {
    exp.CurrentDate: _current_date,
    exp.CurrentTimestamp: _now,
    exp.HexString: _hex_string,
    exp.Pi: _pi,
    exp.ArrayContains: _array_contains,
    exp.ArrayContainsAll: _array_contains_all,
    exp.ArraySize: _array_size,
    exp.ArrayPosition: _array_position_node,
    exp.Bracket: _bracket,
    exp.Trim: _trim,
    exp.Replace: _replace,
    exp.StrPosition: _strpos,
    exp.Left: lambda tr, node: _slice(tr, node, True),
    exp.Right: lambda tr, node: _slice(tr, node, False),
    exp.Reverse: lambda tr, node: tr.call(node, pc.utf8_reverse(tr.translate(node.this).expr)),
    exp.Pad: _pad,
    exp.Repeat: _repeat,
    exp.Initcap: lambda tr, node: tr.call(node, pc.utf8_title(tr.translate(node.this).expr)),
    exp.ConcatWs: _concat_ws,
    exp.RegexpReplace: _regexp_replace,
    exp.RegexpCount: _regexp_count,
    exp.BitLength: _bit_length,
    exp.SplitPart: _split_part,
    exp.Round: _round,
    exp.Sqrt: _math(pc.sqrt),
    exp.Exp: _math(pc.exp),
    exp.Ln: _math(pc.ln),
    exp.Log: _log,
    exp.Pow: _pow,
    exp.Sign: _sign,
    exp.Sin: _math(pc.sin),
    exp.Cos: _math(pc.cos),
    exp.Tan: _math(pc.tan),
    exp.Asin: _math(pc.asin),
    exp.Acos: _math(pc.acos),
    exp.Atan: _math(pc.atan),
    exp.Degrees: _math(lambda v: pc.multiply(v, 180.0 / math.pi)),
    exp.Radians: _math(lambda v: pc.multiply(v, math.pi / 180.0)),
    exp.Greatest: _extremum(pc.max_element_wise),
    exp.Least: _extremum(pc.min_element_wise),
    exp.Nullif: _nullif,
    exp.Nvl2: _nvl2,
    exp.NullSafeEQ: _distinct(negate=False),
    exp.NullSafeNEQ: _distinct(negate=True),
    exp.TimestampTrunc: _date_trunc,
    exp.TsOrDsToDate: _to_date,
}

ANONYMOUS: dict[str, Anonymous] = {
    "now": _now,
    "array_has_any": _array_has_any,
    "list_has_any": _array_has_any,
    "array_has_all": _array_has_all,
    "list_has_all": _array_has_all,
    "list_has": _array_has_call,
    "cardinality": _cardinality,
    "array_empty": _array_empty,
    "empty": _array_empty,
    "btrim": _btrim,
    "log10": _log_named(pc.log10),
    "log2": _log_named(pc.log2),
    "iszero": _iszero,
    "date_part": _date_part,
}
