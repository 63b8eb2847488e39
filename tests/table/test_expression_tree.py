"""The filter expression tree (``lance_ops.query.expressions``) and its visitors.

SQL and Arrow filters are read into one tree; SQL text, columns and pruning bounds are derived
from it. Random trees go through SQL text and back unchanged; Arrow expressions are read through
their Substrait form (never their printed text) and then select what pylance 14 selects, NaN
ordering included; pruning by statistics never drops a row the filter selects.
"""

from __future__ import annotations

import datetime
import math
import struct
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
import sqlglot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lance_ops
from lance_ops.errors import PredicateError, UnsupportedSQLError
from lance_ops.query import expressions as ex
from lance_ops.query.arrow import FUNCTIONS, sql_text
from lance_ops.query.parser import LanceSQL, from_sqlglot, parse
from lance_ops.query.predicate import parse_predicate
from lance_ops.query.substrait import NotConvertible, from_arrow
from lance_ops.query.visitors import Bound, bounds, columns, to_sql

NEG_NAN = struct.unpack("<d", struct.pack("<Q", 0xFFF8000000000000))[0]
VALUES = [1.0, -1.0, math.nan, NEG_NAN, math.inf, -math.inf, 0.0, -0.0, 2.5, None]


@pytest.fixture(scope="module")
def lance() -> Any:
    return pytest.importorskip("lance")


def _column(name: str) -> ex.Column:
    return ex.Column((name,))


def _lit(value: Any, type_: pa.DataType | None = None) -> ex.Literal:
    return ex.Literal(pa.scalar(value, type_))


# ---------------------------------------------------------------- tree <-> SQL text

_NAMES = st.sampled_from(["x", "i", "a b", "s`q", "Mixed"])
_LITERALS = st.one_of(
    st.integers(0, 2**62).map(lambda v: _lit(v, pa.int64())),
    st.floats(0, 1e300, allow_nan=False).map(lambda v: _lit(v, pa.float64())),
    st.text(max_size=6).map(lambda v: _lit(v, pa.string())),
    st.booleans().map(lambda v: _lit(v, pa.bool_())),
    st.just(ex.Literal(pa.scalar(None, pa.null()))),
)
_LEAVES = st.one_of(_NAMES.map(_column), _LITERALS)
_CAST_TYPES = st.sampled_from([pa.int8(), pa.int32(), pa.float32(), pa.float64(), pa.string(), pa.date32()])


def _extend(children: st.SearchStrategy[ex.Expr]) -> st.SearchStrategy[ex.Expr]:
    return st.one_of(
        st.builds(ex.Compare, st.sampled_from(sorted(ex.COMPARISONS)), children, children),
        st.builds(ex.And, children, children),
        st.builds(ex.Or, children, children),
        st.builds(ex.Not, children),
        st.builds(ex.In, children, st.lists(children, min_size=1, max_size=3).map(tuple)),
        st.builds(ex.Between, children, children, children),
        st.builds(ex.IsNull, children),
        st.builds(ex.Like, children, st.text(max_size=4).map(lambda v: _lit(v, pa.string())), st.booleans()),
        st.builds(ex.Arithmetic, st.sampled_from(["+", "-", "*", "/", "%"]), children, children),
        st.builds(ex.Neg, children),
        st.builds(ex.Cast, children, _CAST_TYPES),
        st.builds(ex.Call, st.sampled_from(["lower", "abs", "is_nan"]), children.map(lambda c: (c,))),
    )


_TREES = st.recursive(_LEAVES, _extend, max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(tree=_TREES)
def test_tree_to_sql_and_back_is_the_same_tree(tree: ex.Expr) -> None:
    text = to_sql(tree)
    assert from_sqlglot(sqlglot.parse_one(text, dialect=LanceSQL)) == tree, text


def test_sql_is_read_into_the_tree() -> None:
    tree = from_sqlglot(
        sqlglot.parse_one("x NOT IN (1, 2) AND NOT s LIKE 'a%' OR y IS NOT NULL", dialect=LanceSQL)
    )
    assert tree == ex.Or(
        ex.And(
            ex.Not(ex.In(_column("x"), (_lit(1, pa.int64()), _lit(2, pa.int64())))),
            ex.Not(ex.Like(_column("s"), _lit("a%"))),
        ),
        ex.Not(ex.IsNull(_column("y"))),
    )
    assert columns(tree) == [("x",), ("s",), ("y",)]
    nested = from_sqlglot(sqlglot.parse_one("st.a.b > 1 AND lower(s) = 'q'", dialect=LanceSQL))
    assert columns(nested) == [("st", "a", "b"), ("s",)]


# ---------------------------------------------------------------- Arrow expressions -> tree

_SCHEMA = pa.schema(
    [
        ("x", pa.float64()),
        ("f", pa.float32()),
        ("i", pa.int32()),
        ("s", pa.string()),
        ("t", pa.timestamp("us")),
        ("st", pa.struct([("a", pa.int64())])),
    ]
)


@pytest.mark.parametrize(
    ("expression", "tree"),
    [
        (pc.field("x") > 0, ex.Compare("gt", _column("x"), _lit(0.0))),
        (
            (pc.field("i") >= 3) & ~pc.field("s").is_null(),
            ex.And(ex.Compare("ge", _column("i"), _lit(3, pa.int32())), ex.Not(ex.IsNull(_column("s")))),
        ),
        (pc.field("s").is_valid(), ex.Not(ex.IsNull(_column("s")))),
        (
            pc.field("f") < pa.scalar(0.1, pa.float32()),
            ex.Compare("lt", _column("f"), _lit(0.1, pa.float32())),
        ),
        (
            pc.field("x").isin([1.0, math.nan]),
            ex.In(_column("x"), (_lit(1.0), _lit(math.nan))),
        ),
        (pc.field(("st", "a")) == 7, ex.Compare("eq", ex.Column(("st", "a")), _lit(7, pa.int64()))),
        (
            pc.field("t") > pa.scalar(5, pa.timestamp("us")),
            ex.Compare("gt", _column("t"), _lit(5, pa.timestamp("us"))),
        ),
        (
            pc.field("x").cast(pa.float32(), safe=False) > 1,
            ex.Compare("gt", ex.Cast(_column("x"), pa.float32()), _lit(1.0, pa.float32())),
        ),
        (pc.is_nan(pc.field("x")) | (pc.field("x") * 2 > 1), None),
    ],
    ids=str,
)
def test_arrow_expressions_are_read_through_substrait(
    expression: pc.Expression, tree: ex.Expr | None
) -> None:
    found = from_arrow(expression, _SCHEMA)
    if tree is not None:
        assert found == tree
    else:
        assert found == ex.Or(
            ex.Call("is_nan", (_column("x"),)),
            ex.Compare("gt", ex.Arithmetic("*", _column("x"), _lit(2.0)), _lit(1.0)),
        )


def test_arrow_expressions_without_a_tree_are_evaluated_as_given() -> None:
    expression = pc.match_like(pc.field("s"), "a%")
    with pytest.raises(NotConvertible):
        from_arrow(expression, _SCHEMA)
    table = pa.table({"s": ["ab", "ba", None]})
    predicate = parse_predicate(expression, table.schema)
    assert predicate.bounds == ()
    assert predicate.filter(table).column("s").to_pylist() == ["ab"]


def test_bounds_visitor() -> None:
    tree = ex.And(
        ex.And(
            ex.Compare("lt", _lit(5, pa.int64()), _column("i")),
            ex.Between(_column("x"), _lit(1.0), _lit(2.0)),
        ),
        ex.And(ex.Not(ex.IsNull(_column("s"))), ex.Compare("ne", _column("i"), _lit(3, pa.int64()))),
    )

    def constant(node: ex.Expr, column: str) -> pa.Scalar | None:
        return node.value if isinstance(node, ex.Literal) else None

    found = bounds(tree, lambda c: c.path[0], constant)
    assert found == [
        Bound("i", "gt", (pa.scalar(5, pa.int64()),)),
        Bound("x", "ge", (pa.scalar(1.0),)),
        Bound("x", "le", (pa.scalar(2.0),)),
        Bound("s", "not_null"),
    ]
    assert bounds(ex.Or(tree, tree), lambda c: c.path[0], constant) == []


# ---------------------------------------------------------------- NaN ordering, against pylance


def _ids(ds: Any, where: Any) -> list[int]:
    return sorted(ds.to_table(columns=["id"], filter=where).column("id").to_pylist())


def _nan_filters() -> list[tuple[str, pc.Expression]]:
    x = pc.field("x")
    nan = pa.scalar(math.nan)
    pairs = []
    for literal, text in ((0.0, "0.0"), (-1.0, "-1.0"), (math.inf, "cast('inf' as double)"), (nan, None)):
        sql = text or "cast('NaN' as double)"
        for symbol, arrow in (
            ("<", x < literal),
            ("<=", x <= literal),
            (">", x > literal),
            (">=", x >= literal),
            ("=", x == literal),
            ("!=", x != literal),
        ):
            pairs.append((f"x {symbol} {sql}", arrow))
    pairs += [
        ("x BETWEEN -1.0 AND 1.0", (x >= -1.0) & (x <= 1.0)),
        ("x IN (1.0, 0.0)", x.isin([1.0, 0.0])),
        ("x IN (1.0, cast('NaN' as double))", x.isin([1.0, math.nan])),
        ("x = x", x == x),
        ("x < y", x < pc.field("y")),
        ("NOT (x > 0)", ~(x > 0)),
        ("(-x) > 0", pc.negate(x) > 0),
        ("x IS NULL OR x > 2", x.is_null() | (x > 2)),
    ]
    return pairs


@pytest.mark.interop
@pytest.mark.parametrize("type_", [pa.float64(), pa.float32()], ids=str)
def test_sql_and_arrow_filters_order_nan_as_pylance(tmp_path: Path, lance: Any, type_: pa.DataType) -> None:
    table = pa.table(
        {
            "id": pa.array(range(len(VALUES)), pa.int64()),
            "x": pa.array(VALUES, type_),
            "y": pa.array(VALUES[::-1], type_),
        }
    )
    theirs = lance.write_dataset(table, str(tmp_path / "theirs"))
    uri = str(tmp_path / "ours")
    lance_ops.write_dataset(table, uri, max_rows_per_file=3)
    ours, pylance_on_ours = lance_ops.dataset(uri), lance.dataset(uri)
    for sql, arrow in _nan_filters():
        expected = _ids(theirs, sql)
        assert _ids(theirs, arrow) == expected, (sql, str(arrow))  # pylance: both forms agree
        assert _ids(ours, sql) == expected, sql
        assert _ids(ours, arrow) == expected, str(arrow)  # pruned by statistics
        assert _ids(ours, arrow | pc.scalar(False)) == expected, str(arrow)  # no bounds
        assert _ids(pylance_on_ours, arrow) == expected, str(arrow)


_FLOATS = (
    st.none()
    | st.floats(allow_nan=False)
    | st.sampled_from([0.0, -0.0, math.nan, NEG_NAN, math.inf, -math.inf])
)
_CONSTANTS = st.sampled_from([0.0, -0.0, 1.5, -1.5, 1e308, math.inf, -math.inf]) | st.floats(
    -1e6, 1e6, allow_nan=False
)


@st.composite
def _arrow_conditions(draw: st.DrawFn, depth: int = 2) -> pc.Expression:
    x, i = pc.field("x"), pc.field("i")
    kind = draw(
        st.sampled_from(["cmp", "icmp", "isin", "null", "and", "or", "not"] if depth else ["cmp", "icmp"])
    )
    if kind == "cmp":
        op = draw(st.sampled_from(["lt", "le", "gt", "ge", "eq", "ne"]))
        value = draw(_CONSTANTS)
        return {
            "lt": x < value,
            "le": x <= value,
            "gt": x > value,
            "ge": x >= value,
            "eq": x == value,
            "ne": x != value,
        }[op]
    if kind == "icmp":
        value = pa.scalar(draw(st.integers(-5, 40)), pa.int64())
        return draw(st.sampled_from([i < value, i >= value, i == value]))
    if kind == "isin":
        return x.isin(draw(st.lists(_CONSTANTS, min_size=1, max_size=3)))
    if kind == "null":
        return x.is_null() if draw(st.booleans()) else x.is_valid()
    if kind == "not":
        return ~draw(_arrow_conditions(depth - 1))
    left, right = draw(_arrow_conditions(depth - 1)), draw(_arrow_conditions(depth - 1))
    return (left & right) if kind == "and" else (left | right)


@pytest.mark.interop
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    values=st.lists(_FLOATS, min_size=0, max_size=30),
    rows_per_file=st.sampled_from([1, 3, 7, 1024]),
    condition=_arrow_conditions(),
)
def test_arrow_filters_pruned_equal_unpruned_equal_pylance(
    tmp_path_factory: pytest.TempPathFactory,
    lance: Any,
    values: list[float | None],
    rows_per_file: int,
    condition: pc.Expression,
) -> None:
    root = tmp_path_factory.mktemp("arrow")
    table = pa.table(
        {
            "id": pa.array(range(len(values)), pa.int64()),
            "x": pa.array(values, pa.float64()),
            "i": pa.array(range(len(values)), pa.int32()),
        }
    )
    uri = str(root / "ours")
    ours = lance_ops.write_dataset(table, uri, max_rows_per_file=rows_per_file)
    expected = _ids(lance.dataset(uri), condition)
    assert _ids(ours, condition) == expected, str(condition)
    assert _ids(ours, condition | pc.scalar(False)) == expected, str(condition)
    whole = parse_predicate(condition, table.schema).filter(table)
    assert sorted(whole.column("id").to_pylist()) == expected


def test_arrow_filters_on_virtual_columns() -> None:
    schema = pa.schema([("x", pa.float64()), ("i", pa.int32())])
    walked = parse_predicate((pc.field("_rowid") < pa.scalar(3, pa.uint64())) & (pc.field("i") > 1), schema)
    assert walked.columns == ("x", "i", "_rowid")
    assert walked.bounds == (Bound("i", "gt", (pa.scalar(1, pa.int32()),)),)  # none on _rowid
    opaque = parse_predicate(pc.field("_rowaddr") < 3, schema)  # a safe cast: no Substrait form
    assert opaque.columns == ("x", "i", "_rowaddr") and opaque.bounds == ()
    assert parse_predicate(pc.field("x") > 1, schema).columns == ("x", "i")


# ---------------------------------------------------------------- one tree, one translator

# Each spelling the translator supports, as the parser names its call (a sqlglot upgrade that
# renames a construct would leave the handler unreachable: this catches it).
_FUNCTION_SPELLINGS = [
    "current_date",
    "now()",
    "CURRENT_TIMESTAMP",
    "X'41'",
    "pi()",
    "array_has(t, 1)",
    "array_contains(t, 1)",
    "list_has(t, 1)",
    "array_has_all(t, [1, 2])",
    "array_has_any(t, [1])",
    "array_length(t)",
    "cardinality(t)",
    "array_empty(t)",
    "array_position(t, 1)",
    "t[1]",
    "lower(s)",
    "upper(s)",
    "length(s)",
    "octet_length(s)",
    "starts_with(s, 'a')",
    "ends_with(s, 'a')",
    "contains(s, 'a')",
    "s LIKE 'a' ESCAPE '\\'",
    "regexp_like(s, 'a')",
    "regexp_match(s, 'a')",
    "s || s",
    "concat(s, s)",
    "btrim(s)",
    "ltrim(s)",
    "rtrim(s, 'x')",
    "replace(s, 'a', 'b')",
    "strpos(s, 'a')",
    "left(s, 1)",
    "right(s, 1)",
    "reverse(s)",
    "lpad(s, 3)",
    "rpad(s, 3, 'x')",
    "repeat(s, 2)",
    "initcap(s)",
    "concat_ws(',', s, s)",
    "regexp_replace(s, 'a', 'b')",
    "regexp_count(s, 'a')",
    "bit_length(s)",
    "split_part(s, ',', 1)",
    "abs(x)",
    "isnan(x)",
    "round(x, 1)",
    "sqrt(x)",
    "power(x, 2)",
    "exp(x)",
    "ln(x)",
    "log(x)",
    "log10(x)",
    "log2(x)",
    "signum(x)",
    "sin(x)",
    "degrees(x)",
    "iszero(x)",
    "coalesce(x, 1)",
    "greatest(x, 1)",
    "least(x, 1)",
    "nullif(x, 1)",
    "nvl2(x, 1, 2)",
    "x IS NOT DISTINCT FROM 1",
    "x IS DISTINCT FROM 1",
    "x IS TRUE",
    "date_trunc('day', d)",
    "date_part('year', d)",
    "to_date(s)",
]


def _calls(node: ex.Expr) -> list[ex.Call]:
    found = [node] if isinstance(node, ex.Call) else []
    return found + [c for child in ex.children(node) for c in _calls(child)]


@pytest.mark.parametrize("sql", _FUNCTION_SPELLINGS)
def test_every_function_spelling_reaches_its_handler(sql: str) -> None:
    calls = _calls(parse(sql))
    assert calls, sql
    assert all(c.name in FUNCTIONS or c.name == "array" for c in calls), [c.name for c in calls]


def test_parsed_nodes_keep_their_sql_text_which_errors_quote() -> None:
    tree = parse("(x > 1) AND lower(s) = 'a'")
    assert isinstance(tree, ex.And) and tree.right.source == "LOWER(s) = 'a'"
    assert tree.left.source == "x > 1"  # parentheses are the parser's, not a node
    assert tree == ex.And(ex.Compare("gt", _column("x"), _lit(1)), tree.right)  # source is not compared
    built = ex.Compare("gt", _column("x"), _lit(1))
    assert sql_text(tree.right) == "LOWER(s) = 'a'" and sql_text(built) == "`x` > 1"
    schema = pa.schema([("x", pa.float64()), ("s", pa.string())])
    with pytest.raises(PredicateError, match=r"cannot apply 'LOWER' to column 'x' \(double\)"):
        parse_predicate("LOWER(x) = 'a'", schema)
    with pytest.raises(PredicateError, match=r"cannot apply 'btrim' to column 'x' \(double\)"):
        parse_predicate("btrim(x) = 'a'", schema)  # a function sqlglot does not know, named as written
    with pytest.raises(UnsupportedSQLError, match=r"unsupported function in a filter: MY_UDF\(x\)"):
        parse_predicate("my_udf(x) > 1", schema)
    with pytest.raises(UnsupportedSQLError, match=r"unsupported SQL in a filter: SUBSTRING\(s, 1\)"):
        parse_predicate("substr(s, 1) = 'a'", schema)


def test_bounds_see_folded_constants() -> None:
    """Constant sub-expressions are folded once the tree is translated: the bounds hold values."""
    schema = pa.schema([("x", pa.int64()), ("d", pa.date32())])
    sql = "x > -5 AND d >= DATE '2024-01-02' AND x IN (CAST('2' AS BIGINT), -(3))"
    found = parse_predicate(sql, schema).bounds
    assert found == (
        Bound("x", "gt", (pa.scalar(-5, pa.int64()),)),
        Bound("d", "ge", (pa.scalar(datetime.date(2024, 1, 2), pa.date32()),)),
        Bound("x", "in", (pa.scalar(2, pa.int64()), pa.scalar(-3, pa.int64()))),
    )
