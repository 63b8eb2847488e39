"""Filter predicates: SQL text (or a ``pyarrow.compute.Expression``) -> a bound Arrow expression.

pylance filters are DataFusion SQL. The parser (:mod:`~lance_ops.query.parser`, a Spark-flavoured
dialect: backtick identifiers, ``'...'`` and ``"..."`` string literals as Lance reads them, no
backslash escapes inside strings) reads the text into the expression tree of
:mod:`lance_ops.query.expressions`; an Arrow expression is read into the same tree through its
Substrait form (:mod:`~lance_ops.query.substrait`). The tree's Arrow visitor
(:mod:`~lance_ops.query.arrow`) builds a ``pyarrow.compute.Expression`` that Arrow's dataset
machinery evaluates batch by batch::

    "id % 10 = 0 AND name LIKE 'a%'"
      -> And(Compare('eq', Arithmetic('%', Column id, 10), 0), Like(Column name, 'a%'))
      -> and_kleene(equal(subtract(id, multiply(divide(id, 10), 10)), 0), match_like(name, 'a%'))

The pruning bounds are another visitor over the same tree (:mod:`~lance_ops.query.visitors`), run
once constant sub-expressions are folded to literals; an Arrow filter's tree is translated as SQL's
is, so it selects what pylance selects. An Arrow expression with no Substrait form is evaluated as
given.

The semantics (pylance's, where Arrow's kernels differ) and the errors are the visitor's:
see :mod:`~lance_ops.query.arrow`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from lance_ops.errors import FieldNotFoundError, LanceOpsError, PredicateError, PredicateTypeError
from lance_ops.file.parallel import in_task
from lance_ops.query import expressions as ex
from lance_ops.query import visitors
from lance_ops.query.arrow import ArrowTranslator
from lance_ops.query.substrait import from_arrow
from lance_ops.query.values import Value, constant, type_kind, unify
from lance_ops.query.visitors import Bound, bounds

__all__ = ["VIRTUAL_COLUMNS", "Bound", "BoundExpression", "Predicate", "parse_expression", "parse_predicate"]

# Columns every dataset can filter on without storing them (pylance's ``_rowid`` / ``_rowaddr``):
# a filter naming one reads it alongside the data (a dataset column of that name wins).
VIRTUAL_COLUMNS = {"_rowid": pa.uint64(), "_rowaddr": pa.uint64()}
_THREADED_FILTER_ROWS = 1 << 16


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
    # the filter is exactly the AND of ``bounds`` and ``field_bounds`` (see
    # :func:`~lance_ops.query.visitors.bounds_are_exact`)
    exact: bool = False
    # bounds on fields inside struct columns (``Bound.column`` the dotted path, ``s.x``) and on
    # fixed-size binary columns: for scalar indices of those (statistics prune neither)
    field_bounds: tuple[Bound, ...] = ()
    # per top-level OR conjunct, the bounds of each of its alternatives (top-level columns and
    # struct fields alike; see :func:`~lance_ops.query.visitors.disjunctions`): for scalar indices
    any_of: tuple[tuple[tuple[Bound, ...], ...], ...] = ()

    def filter(self, table: pa.Table) -> pa.Table:
        """Rows of ``table`` for which the predicate is TRUE (FALSE and NULL drop the row).

        A small table (the rows an index selected, say) is filtered on the calling thread: Arrow's
        thread pool would cost a hand-off per call, more than the filter itself. So is any table
        filtered by a task of :func:`~lance_ops.file.parallel.run_tasks`: its caller already
        keeps the cores busy, and on a loaded machine each hand-off waits for a core."""
        threaded = table.num_rows > _THREADED_FILTER_ROWS and not in_task()
        if threaded or not isinstance(table, pa.Table):
            return table.filter(self.expression)
        from pyarrow import acero  # noqa: PLC0415 - imports pyarrow.dataset: not at startup

        source = acero.Declaration("table_source", acero.TableSourceNodeOptions(table))
        keep = acero.Declaration("filter", acero.FilterNodeOptions(self.expression))
        return acero.Declaration.from_sequence([source, keep]).to_table(use_threads=False)


def _bind(
    expression: str | pc.Expression,
    schema: pa.Schema,
    column_typed_literals: bool = False,
    condition: bool = False,
) -> tuple[ArrowTranslator, Value, tuple[str, ...], ex.Expr | None]:
    """Translate ``expression`` against ``schema``: the translator, the value, the top-level columns
    it reads and the expression tree (SQL, or an Arrow ``condition`` that
    :func:`~lance_ops.query.substrait.from_arrow` can read; None otherwise)."""
    virtual = [pa.field(n, t) for n, t in VIRTUAL_COLUMNS.items() if schema.get_field_index(n) < 0]
    bound_schema = pa.schema([*schema, *virtual], metadata=schema.metadata)
    translator = ArrowTranslator(bound_schema, column_typed_literals)
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
                tree,
            )
        value = translator.typed(expression, str(expression))
        return translator, value, _opaque_columns(expression, schema, virtual), None
    if isinstance(expression, str):
        from lance_ops.query.parser import parse  # noqa: PLC0415 - sqlglot, on first use

        tree = parse(expression)
        value = translator.translate(tree)
        columns = tuple(n for n in bound_schema.names if n in translator.columns)
        return translator, value, columns, tree
    raise PredicateTypeError(
        f"a filter is a SQL string or a pyarrow.compute.Expression, not {type(expression).__name__}"
    )


def _arrow_condition(expression: pc.Expression, translator: ArrowTranslator) -> tuple[ex.Expr, Value] | None:
    """The tree of an Arrow condition and its translation, when it has a tree that translates to
    a boolean: it is then evaluated as pylance evaluates it (DataFusion's NaN ordering, for one)."""
    try:
        tree = from_arrow(expression, translator.schema)
        visitors.to_sql(tree)  # a tree SQL cannot spell (a float16 literal) is evaluated as given
        value = translator.translate(tree)
    except LanceOpsError:
        return None
    return (tree, value) if pa.types.is_boolean(value.type) else None


def _opaque_columns(expression: pc.Expression, schema: pa.Schema, virtual: list[pa.Field]) -> tuple[str, ...]:
    """The columns an Arrow expression that is not walked may read: all of them, and the virtual
    ones it needs (the fewest it binds with: none, one, or all of them)."""
    for extra in ([], *([f] for f in virtual)):
        try:
            ArrowTranslator(pa.schema([*schema, *extra])).typed(expression, str(expression))
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
    translator, value, columns, tree = _bind(expression, schema, column_typed_literals)
    nullable = True if tree is None else _nullable(tree, translator)
    return BoundExpression(value.expr, value.type, columns, nullable)


# Calls standing for SQL operators, not functions: nullable when an operand is (functions always are).
_OPERATOR_CALLS = {"bracket", "dpipe", "escape", "hexstring", "nullsafeeq", "nullsafeneq"}


def _nullable(node: ex.Expr, tr: ArrowTranslator) -> bool:
    """Whether DataFusion would mark ``node``'s result nullable: a column as its field (and struct
    ancestors), literals never, NULL always; ``IS [NOT] NULL`` / ``IS TRUE`` never; ``coalesce``
    only when every argument is; casts as their operand; ``AND`` / ``OR`` and functions always;
    other operators when an operand is."""
    if isinstance(node, ex.Column):
        field = tr.schema.field(tr.top_level(node))
        nullable = field.nullable
        for name in node.path[1:]:
            field = field.type.field(name)
            nullable = nullable or field.nullable
        return nullable
    if isinstance(node, ex.Literal):
        return pa.types.is_null(node.value.type)
    if isinstance(node, ex.IsNull) or (isinstance(node, ex.Call) and node.name == "is"):
        return False
    if isinstance(node, ex.Call) and node.name == "coalesce":
        return all(_nullable(child, tr) for child in node.args)
    if isinstance(node, ex.Cast):
        return _nullable(node.value, tr)
    if isinstance(node, ex.And | ex.Or) or (isinstance(node, ex.Call) and node.name not in _OPERATOR_CALLS):
        return True
    return any(_nullable(child, tr) for child in ex.children(node))


def parse_predicate(predicate: str | pc.Expression, schema: pa.Schema) -> Predicate:
    """Bind a SQL filter (or an Arrow expression) to ``schema``."""
    translator, value, columns, tree = _bind(predicate, schema, condition=True)
    if not pa.types.is_boolean(value.type):
        text = str(predicate)
        raise PredicateError(f"The filter {text} does not return a boolean: it returns {value.type}")
    if tree is None:
        return Predicate(value.expr, columns)
    folded = ex.transform(tree, translator.fold)

    def column(node: ex.Column) -> str | None:
        return _prunable(schema, node)

    def nested(node: ex.Column) -> str | None:
        if len(node.path) == 1:
            return _fixed_size_binary(schema, node)
        return ".".join(node.path) if _struct_field(schema, node.path) else None

    def either(node: ex.Column) -> str | None:
        return column(node) or nested(node)

    def literal(node: ex.Expr, name: str) -> pa.Scalar | None:
        return _bound_value(schema, node, name)

    found = bounds(folded, column, literal)
    inside = bounds(folded, nested, literal)
    exact = bool(found or inside) and visitors.bounds_are_exact(folded, either, literal)
    any_of = tuple(visitors.disjunctions(folded, either, literal))
    return Predicate(value.expr, columns, tuple(found), exact, tuple(inside), any_of)


def _struct_field(schema: pa.Schema, path: Sequence[str]) -> pa.Field | None:
    """The field at ``path`` (top-level column, then struct fields, names as stored) when it holds
    values bounds can compare (None otherwise)."""
    if schema.get_field_index(path[0]) < 0:
        return None
    field = schema.field(path[0])
    for part in path[1:]:
        if not pa.types.is_struct(field.type) or field.type.get_field_index(part) < 0:
            return None
        field = field.type.field(part)
    kinds = ("int", "float", "string", "binary", "temporal", "bool")
    return field if type_kind(field.type) in kinds else None


def _fixed_size_binary(schema: pa.Schema, node: ex.Column) -> str | None:
    """The top-level column ``node`` names when it holds fixed-size binaries (``arrow.uuid`` too):
    statistics do not prune those, scalar indices answer them."""
    if schema.get_field_index(node.path[0]) < 0:
        return None
    type_ = schema.field(node.path[0]).type
    if isinstance(type_, pa.BaseExtensionType):
        type_ = type_.storage_type
    return node.path[0] if pa.types.is_fixed_size_binary(type_) else None


def _prunable(schema: pa.Schema, node: ex.Column) -> str | None:
    """The stored top-level column ``node`` names (matched case-insensitively when unique, as the
    translator does) when statistics hold values of its type (None otherwise)."""
    if len(node.path) != 1:
        return None
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
    field = schema.field(column) if schema.get_field_index(column) >= 0 else None
    if field is None:  # a struct field's dotted path
        field = _struct_field(schema, column.split("."))
        if field is None:
            return None
    type_ = field.type
    if isinstance(type_, pa.BaseExtensionType):  # bounds on its storage, as filters compare it
        type_ = type_.storage_type
    _, value = unify(Value(pc.field(column), type_), constant(node.value))
    literal = value.literal
    if literal is None or value.type != type_ or not literal.is_valid:
        return None
    if pa.types.is_floating(type_) and literal.as_py() != literal.as_py():
        return None
    return literal
