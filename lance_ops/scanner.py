"""``LanceScanner``: a configured scan of one dataset version (pylance's ``ds.scanner(...)``).

A scan request names what to return (``columns``), which rows (``filter``, ``fragments``,
``offset`` / ``limit``) and how (``batch_size``, ``with_row_id``, ``with_row_address``). Columns are:

* a list of names: top-level columns, nested struct fields as dotted paths (``"meta.source"``,
  returned under that name), and the virtual columns ``_rowid``, ``_rowaddr`` and ``_rowoffset``
  (the row's position among the live rows of the version, what :meth:`LanceDataset.take` takes);
* or a dict of output name -> SQL expression (``{"double": "id * 2", "id": "id"}``), evaluated with
  the filter dialect of :mod:`lance_ops.query.predicate`; expressions may use the virtual columns.

``with_row_id`` / ``with_row_address`` append ``_rowid`` / ``_rowaddr`` unless the projection
already returns them, as pylance does. Nothing is read until a result is asked for; each of
``to_table``, ``to_batches``, ``to_reader`` and ``count_rows`` runs the scan afresh.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_ops.errors import InvalidArgumentError, LanceOpsError, SchemaError
from lance_ops.fragment import ScanOptions
from lance_ops.fragment.options import DEFAULT_BATCH_SIZE
from lance_ops.fragment.reader import ROW_ADDRESS, ROW_ID, FragmentReader
from lance_ops.fragment.scan import TAKE_VIRTUAL_COLUMNS, scan_batches, selected_rows, take_columns
from lance_ops.index.scalar_query import IndexUse, RowSelection, select_rows
from lance_ops.io.index_cache import IndexCounter, counting_index_work
from lance_ops.io.metrics import counting_io
from lance_ops.query.predicate import BoundExpression, Predicate, parse_expression, parse_predicate
from lance_ops.scan_stats import ScanCounters, StatsCallback, report_batches

if TYPE_CHECKING:
    from lance_ops.dataset import LanceDataset
    from lance_ops.fragment import VersionFiles

__all__ = ["ROW_OFFSET", "LanceScanner", "ScanRequest", "projected_take"]

ROW_OFFSET = "_rowoffset"
VIRTUAL_COLUMNS = (ROW_ID, ROW_ADDRESS, ROW_OFFSET)

Columns: TypeAlias = "Sequence[str] | Mapping[str, str | pc.Expression] | None"
Filter: TypeAlias = "str | pc.Expression | None"


@dataclass(frozen=True)
class ScanRequest:
    """The arguments of a scan, as given to ``ds.scanner(...)`` (validated by :class:`LanceScanner`)."""

    columns: Columns = None
    filter: Filter = None
    limit: int | None = None
    offset: int | None = None
    with_row_id: bool = False
    with_row_address: bool = False
    batch_size: int | None = None
    fragment_ids: tuple[int, ...] | None = None
    strict_batch_size: bool = False
    use_scalar_index: bool = True
    stats_callback: StatsCallback | None = None


@dataclass(frozen=True)
class _Output:
    """One output column: its field (name, type, field metadata) and how it is computed from the
    rows read.

    ``path`` selects a column (or a struct field below it) of what was read; ``expression``
    evaluates a bound SQL expression instead.
    """

    field: pa.Field
    path: tuple[str, ...] = ()
    expression: BoundExpression | None = None

    @property
    def name(self) -> str:
        return str(self.field.name)

    @property
    def type(self) -> pa.DataType:
        return self.field.type


class LanceScanner:
    """A scan of one dataset version, with pylance's ``LanceScanner`` methods."""

    def __init__(self, ds: LanceDataset, request: ScanRequest) -> None:
        if (request.limit or 0) < 0:  # pylance's words, limit first
            raise InvalidArgumentError("Limit must be non-negative")
        if (request.offset or 0) < 0:
            raise InvalidArgumentError("Offset must be non-negative")
        if request.batch_size is not None and request.batch_size <= 0:
            raise InvalidArgumentError("batch_size must be positive")
        self._ds = ds
        self._files = ds.handle.files
        self._request = request
        self._outputs = self._project(request.columns)
        # As pylance: with the flag set, _rowid / _rowaddr come last (in that order), wherever the
        # columns named them.
        for flag, name in ((request.with_row_id, ROW_ID), (request.with_row_address, ROW_ADDRESS)):
            if flag:
                self._outputs = [o for o in self._outputs if o.expression is not None or o.path != (name,)]
                if name not in self._names:
                    self._outputs.append(_Output(pa.field(name, pa.uint64()), (name,)))
        self._predicate: Predicate | None = (
            None if request.filter is None else parse_predicate(request.filter, self._files.schema)
        )

    # ------------------------------------------------------------------ projection

    @property
    def _names(self) -> list[str]:
        return [o.name for o in self._outputs]

    @cached_property
    def _virtual_schema(self) -> pa.Schema:
        """The dataset schema plus the virtual columns, which expressions may name."""
        extra = [
            pa.field(name, pa.uint64()) for name in VIRTUAL_COLUMNS if name not in self._files.schema.names
        ]
        return pa.schema([*self._files.schema, *extra])

    def _project(self, columns: Columns) -> list[_Output]:
        if columns is None:
            return [_Output(f, (f.name,)) for f in self._files.schema]
        if isinstance(columns, Mapping):
            return [self._expression(name, sql) for name, sql in columns.items()]
        if isinstance(columns, str):
            raise TypeError("columns must be a list of column names or a dict of name -> SQL expression")
        return [self._path(name) for name in columns]

    def _path(self, name: str) -> _Output:
        """A column, a dotted struct path, or a virtual column named in a list of columns."""
        schema = self._virtual_schema
        if not isinstance(name, str):
            raise TypeError(f"column names must be strings, not {type(name).__name__}")
        if schema.get_field_index(name) >= 0:
            return _Output(schema.field(name), (name,))
        parts = name.split(".")
        field: pa.Field | None = None
        if schema.get_field_index(parts[0]) >= 0:
            field = schema.field(parts[0])
            for part in parts[1:]:
                if not pa.types.is_struct(field.type) or field.type.get_field_index(part) < 0:
                    field = None
                    break
                field = field.type.field(part)
        if field is None:
            raise SchemaError(f"no such column {name!r}; the dataset has {self._files.schema.names}")
        return _Output(field.with_name(name), tuple(parts))

    def _expression(self, name: str, sql: str | pc.Expression) -> _Output:
        if not isinstance(name, str):
            raise TypeError(f"output column names must be strings, not {name!r}")
        try:
            bound = parse_expression(sql, self._virtual_schema)
        except LanceOpsError as exc:
            raise type(exc)(f"the expression for column {name!r}: {exc}") from exc
        return _Output(pa.field(name, bound.type), expression=bound)

    @cached_property
    def _reads(self) -> tuple[list[str], set[str]]:
        """Dataset columns to read and virtual columns to compute."""
        needed: set[str] = set()
        for output in self._outputs:
            needed.update(output.expression.columns if output.expression is not None else output.path[:1])
        dataset = [n for n in self._files.schema.names if n in needed]
        return dataset, needed & set(VIRTUAL_COLUMNS) - set(self._files.schema.names)

    @cached_property
    def _options(self) -> ScanOptions:
        columns, virtual = self._reads
        return ScanOptions(
            columns=tuple(columns),
            predicate=self._predicate,
            with_row_id=ROW_ID in virtual,
            with_row_address=bool(virtual & {ROW_ADDRESS, ROW_OFFSET}),
            batch_size=self._request.batch_size or default_batch_size(),
        )

    @cached_property
    def _scanned_fragments(self) -> list[FragmentReader]:
        fragments = self._files.fragments()
        wanted = self._request.fragment_ids
        if wanted is None:
            return fragments
        by_id = {f.id: f for f in fragments}
        missing = [i for i in wanted if i not in by_id]
        if missing:
            raise InvalidArgumentError(
                f"fragments {missing} are not in version {self._ds.version} of the dataset"
            )
        return [by_id[i] for i in wanted]

    @cached_property
    def _index_selection(self) -> RowSelection | None:
        """Fragments and rows the filter's scalar indices leave to scan, and those indices (None:
        no index used)."""
        if self._predicate is None or not self._request.use_scalar_index:
            return None
        fragments = self._scanned_fragments
        selection = select_rows(
            self._files.storage,
            self._files.manifest,
            self._predicate,
            [f.id for f in fragments],
            self._request.filter,
        )
        return selection if selection.used else None

    @property
    def _fragments(self) -> list[FragmentReader]:
        selection = self._index_selection
        fragments = self._scanned_fragments
        return fragments if selection is None else [f for f in fragments if f.id in selection.fragments]

    @property
    def _index_rows(self) -> dict[int, np.ndarray] | None:
        return None if self._index_selection is None else self._index_selection.rows

    @cached_property
    def _live_starts(self) -> dict[int, int]:
        """Fragment id -> position (among the version's live rows) of its first live row."""
        fragments = self._files.fragments()
        starts = np.cumsum([0, *(f.live_count for f in fragments)])
        return {f.id: int(start) for f, start in zip(fragments, starts, strict=False)}

    def _row_offsets(self, addresses: np.ndarray) -> np.ndarray:
        fragment_ids = (addresses >> np.uint64(32)).astype(np.int64)
        physical = (addresses & np.uint64(0xFFFFFFFF)).astype(np.int64)
        out = np.empty(len(addresses), np.uint64)
        for fragment_id in np.unique(fragment_ids):
            mine = fragment_ids == fragment_id
            reader = self._files.fragment(
                next(f for f in self._files.manifest.fragments if f.id == fragment_id)
            )
            local = np.searchsorted(reader.live_offsets(), physical[mine])
            out[mine] = local + self._live_starts[int(fragment_id)]
        return out

    @cached_property
    def _plain_columns(self) -> list[str] | None:
        """The batch columns the outputs are, when each output is a whole column read as is."""
        if not self._outputs or ROW_OFFSET in self._reads[1]:
            return None
        if any(o.expression is not None or len(o.path) != 1 for o in self._outputs):
            return None
        return [o.path[0] for o in self._outputs]

    @cached_property
    def _schema(self) -> pa.Schema:
        return pa.schema([o.field for o in self._outputs], metadata=self._files.schema.metadata)

    def _output_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The requested columns of one batch of rows read."""
        plain = self._plain_columns
        if plain is not None:
            if batch.schema.equals(self._schema, check_metadata=True):
                return batch  # read as returned (a scan's usual case): nothing to rebuild
            columns = [batch.column(name) for name in plain]
            if all(c.type == f.type for c, f in zip(columns, self._schema, strict=True)):
                return pa.RecordBatch.from_arrays(columns, schema=self._schema)
        table = pa.Table.from_batches([batch])
        _, virtual = self._reads
        if ROW_OFFSET in virtual:
            addresses = table.column(ROW_ADDRESS).to_numpy()
            table = table.append_column(
                pa.field(ROW_OFFSET, pa.uint64()), pa.array(self._row_offsets(addresses))
            )
        expressions = {o.name: o.expression.expression for o in self._outputs if o.expression is not None}
        import pyarrow.dataset as pads  # here, not with the module: it imports pandas (startup)

        computed = pads.dataset(table).to_table(columns=expressions) if expressions else None
        arrays = []
        for output in self._outputs:
            if output.expression is not None:
                assert computed is not None
                array = computed.column(output.name).combine_chunks()
            else:
                array = table.column(output.path[0]).combine_chunks()
                for part in output.path[1:]:
                    array = pc.struct_field(array, part)
            arrays.append(array.cast(output.type) if array.type != output.type else array)
        return pa.RecordBatch.from_arrays(arrays, schema=self._schema) if arrays else _no_columns(batch)

    # ------------------------------------------------------------------ pylance's scanner API

    @property
    def projected_schema(self) -> pa.Schema:
        """The schema of the batches this scan returns."""
        return self._schema

    @property
    def dataset_schema(self) -> pa.Schema:
        """The schema of the dataset being scanned."""
        return self._files.schema

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        """The scan's rows as record batches of ``batch_size`` rows, read lazily.

        Each fragment's last batch may be shorter, as in pylance; with ``strict_batch_size`` only
        the scan's last batch.
        """
        request = self._request
        counters = ScanCounters() if request.stats_callback is not None else None
        with counters.active() if counters is not None else nullcontext():
            batches = scan_batches(
                self._files,
                self._options,
                request.limit,
                request.offset or 0,
                self._fragments,
                request.strict_batch_size,
                self._index_rows,
                self._index_selection.exact if self._index_selection is not None else (),
            )
        output = (self._output_batch(b) for b in batches)
        return output if counters is None else report_batches(request.stats_callback, output, counters)

    def to_reader(self) -> pa.RecordBatchReader:
        return pa.RecordBatchReader.from_batches(self.projected_schema, self.to_batches())

    def to_table(self) -> pa.Table:
        return pa.Table.from_batches(list(self.to_batches()), schema=self.projected_schema)

    def to_pandas(self, **kwargs: Any) -> Any:
        return self.to_table().to_pandas(**kwargs)

    def head(self, num_rows: int) -> pa.Table:
        return self.to_table()[:num_rows]

    def count_rows(self) -> int:
        """Rows the scan returns (only the filter's columns are read).

        A scan with ``limit`` or ``offset`` cannot be counted, as in pylance: count, then clamp.
        """
        if self._request.limit is not None or self._request.offset is not None:
            raise InvalidArgumentError(
                "count_rows cannot use limit / offset; apply them to the count instead"
            )
        rows = self._index_rows or {}
        if self._predicate is None or not rows:
            return sum(f.count(self._predicate) for f in self._fragments)
        assert self._index_selection is not None
        exact = self._index_selection.exact
        options = ScanOptions(predicate=self._predicate)
        total = 0
        for f in self._fragments:
            live = selected_rows(f, rows[f.id]) if f.id in rows else None
            if live is not None and f.id in exact:
                total += len(live)  # exactly the rows the filter selects: nothing to read
            else:
                total += sum(t.num_rows for t in f.scan(options, live))
        return total

    def index_query(self) -> str | None:
        """Internal, not pylance API: the scalar-index part of this scan's filter as the plan shows
        it (``[a = 1]@a_idx(BTree)``), None when no index answers it (a nearest search's prefilter
        plan names it too)."""
        selection = self._index_selection
        return None if selection is None else _index_query(selection.used)

    def explain_plan(self, verbose: bool = False) -> str:
        """How this scan runs, one step a line from the output down to the fragments (lance-ops' own text)."""
        request, options = self._request, self._options
        projection = ", ".join(
            f"{o.name}={o.expression.expression}" if o.expression is not None else ".".join(o.path)
            for o in self._outputs
        )
        lines = [f"Projection: [{projection}]"]
        if request.limit is not None or request.offset:
            lines.append(f"  Limit: offset={request.offset or 0}, limit={request.limit}")
        if self._predicate is not None:
            bounds = ", ".join(
                f"{b.column} {b.op} {[v.as_py() for v in b.values]}" for b in self._predicate.bounds
            )
            lines.append(f"  Filter: {request.filter}" + (f" (pruning on: {bounds})" if bounds else ""))
        fragments = self._fragments
        selection = self._index_selection
        if selection is not None:
            lines.append(
                f"    ScalarIndexQuery: query={_index_query(selection.used)}, "
                f"fragments={len(fragments)}/{len(self._scanned_fragments)}"
            )
            if selection.rows:
                rows = sum(len(r) for r in selection.rows.values())
                exact = f", {len(selection.exact)} answered exactly (no recheck)" if selection.exact else ""
                lines.append(f"    IndexedTake: rows={rows} in {len(selection.rows)} fragments{exact}")
        filtered = () if self._predicate is None else self._predicate.columns
        read = [*options.columns, *(c for c in filtered if c not in options.columns)]
        lines.append(
            f"    LanceRead: uri={self._ds.uri}, version={self._ds.version}, projection=[{', '.join(read)}], "
            f"fragments={len(fragments)}/{len(self._files.manifest.fragments)}, "
            f"row_id={options.with_row_id}, "
            f"row_addr={options.with_row_address}, batch_size={options.batch_size}"
        )
        if verbose:
            lines += [
                f"      fragment {f.id}: physical_rows={f.metadata.physical_rows}, "
                f"files={len(f.metadata.files)}, deletions={'yes' if f.metadata.deletion_file else 'no'}"
                for f in fragments
            ]
        return "\n".join(lines) + "\n"

    def analyze_plan(self) -> str:
        """The plan after running the scan: the ``LanceRead`` step with the rows it returned and
        the rows it read and the storage reads it made (``metrics=[output_rows=, rows_scanned=,
        bytes_read=, iops=, requests=]``, pylance's names and order; the rows an index selected
        count as scanned, as in pylance's indexed take), and the ``ScalarIndexQuery`` step with
        its index work (``metrics=[indices_loaded=, parts_loaded=, index_comparisons=,
        index_cache_hits=, index_cache_misses=]``, see :mod:`lance_ops.io.index_cache`). The I/O
        numbers count this run only (see :mod:`lance_ops.io.metrics`), the index's reads among
        them: reads of files whose metadata an earlier scan of the same dataset cached count only
        the pages read now, and index pieces already in the dataset's index cache nothing."""
        lookup = IndexCounter()
        with counting_io() as io:
            with counting_index_work(lookup):
                rows = self._index_rows or {}
            output = self.to_table().num_rows
        scanned = sum(len(rows[f.id]) if f.id in rows else f.count() for f in self._fragments)
        metrics = (
            f", metrics=[output_rows={output}, rows_scanned={scanned}, bytes_read={io.bytes_read},"
            f" iops={io.iops}, requests={io.requests}]"
        )
        lines = self.explain_plan().splitlines()
        for i, line in enumerate(lines):
            if line.lstrip().startswith("LanceRead:"):
                lines[i] = line + metrics
            elif line.lstrip().startswith("ScalarIndexQuery:"):
                lines[i] = line + f", metrics=[{lookup.metrics()}]"
        return "\n".join(lines) + "\n"


def projected_take(
    files: VersionFiles,
    columns: Sequence[str] | Mapping[str, str | pc.Expression] | None,
    read: Callable[[tuple[str, ...]], pa.Table],
) -> pa.Table:
    """``read`` the rows of ``columns`` of the version ``files`` reads (a take by position or by
    row id); a dict of SQL expressions reads the columns they name (``_rowid`` / ``_rowaddr``
    included) and evaluates them over the rows taken."""
    if not isinstance(columns, Mapping):
        return read(take_columns(files, columns))
    schema = files.schema
    virtual = [pa.field(n, pa.uint64()) for n in TAKE_VIRTUAL_COLUMNS if n not in schema.names]
    table_schema = pa.schema([*schema, *virtual])
    bound = {n: parse_expression(sql, table_schema, column_typed_literals=True) for n, sql in columns.items()}
    needed = set().union(*(b.columns for b in bound.values()))
    names = [n for n in [*schema.names, *TAKE_VIRTUAL_COLUMNS] if n in needed]
    rows = read(take_columns(files, names))
    import pyarrow.dataset as pads  # here, not with the module: it imports pandas (startup)

    exprs = {name: b.expression for name, b in bound.items()}
    computed = pads.dataset(rows).to_table(columns=exprs) if exprs else rows.select([])
    fields = [pa.field(name, b.type) for name, b in bound.items()]
    arrays = [computed.column(f.name).cast(f.type) for f in fields]
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields)) if fields else computed


def default_batch_size() -> int:
    """Rows per batch when a scan names none: ``LANCE_DEFAULT_BATCH_SIZE`` if set, as in pylance."""
    text = os.environ.get("LANCE_DEFAULT_BATCH_SIZE")
    if not text:
        return DEFAULT_BATCH_SIZE
    try:
        size = int(text)
    except ValueError:
        size = 0
    if size <= 0:
        raise InvalidArgumentError(f"LANCE_DEFAULT_BATCH_SIZE must be a positive integer, got {text!r}")
    return size


def _no_columns(batch: pa.RecordBatch) -> pa.RecordBatch:
    return pa.RecordBatch.from_struct_array(pa.nulls(batch.num_rows, pa.struct([])))


# How pylance's plans name the index kinds.
_PLAN_KINDS = {
    "BTREE": "BTree",
    "BITMAP": "Bitmap",
    "LABEL_LIST": "LabelList",
    "ZONEMAP": "ZoneMap",
    "NGRAM": "NGram",
    "BLOOMFILTER": "BloomFilter",
}


def _index_query(used: Sequence[IndexUse]) -> str:
    """The indices' part of a filter as pylance's plans print it: ``[a >= 1 && a <= 9]@a_idx(BTree)``
    per index (its conditions joined by ``&&``), several indices in nested ``AND(x,y)``."""
    grouped: dict[tuple[str, str], list[str]] = {}
    for use in used:
        grouped.setdefault((use.name, use.kind), []).append(use.condition)
    parts = [
        f"[{' && '.join(conditions)}]@{name}({_PLAN_KINDS.get(kind, kind)})"
        for (name, kind), conditions in grouped.items()
    ]
    query = parts[0]
    for part in parts[1:]:
        query = f"AND({query},{part})"
    return query


def fragment_ids(fragments: Iterable[Any] | None) -> tuple[int, ...] | None:
    """Ids of the ``fragments=`` argument (``LanceFragment``\\ s, ``FragmentMetadata`` or ids)."""
    if fragments is None:
        return None
    return tuple(
        f if isinstance(f, int) else f.fragment_id if hasattr(f, "fragment_id") else f.id for f in fragments
    )
