"""Scans that read through scalar indices (``use_scalar_index=True``, the default).

Each simple condition of the filter's top-level ``AND`` (a
:class:`~lance_ops.query.predicate.Bound`: ``=``, ``<``, ``<=``, ``>``, ``>=``, ``IN``, ``IS NULL``,
``IS NOT NULL`` on a column, or on a field inside struct columns, ``s.x``) that a BTREE, BITMAP or
ZONEMAP index of that column (field) answers (a BLOOMFILTER index ``=``, ``IN`` and ``IS NULL``),
and each
``array_has_any`` / ``array_has_all`` / ``array_has`` (``array_contains``) conjunct on a list column
with a LABEL_LIST index, and each ``contains(column, 'text')`` / ``starts_with(column, 'text')`` /
``column LIKE`` (``ILIKE``) ``'pattern'`` conjunct on a string column with an NGRAM index (those
pylance 14 answers from it), gives the rows of the fragments that index covers that may match: BTREE
pages and BITMAP / LABEL_LIST keys give the rows' addresses, ZONEMAP zones (min / max / null / NaN
counts) the row ranges of the zones kept, NGRAM the rows holding every trigram of the text (of each
literal part of the pattern) as the index folds text (a superset: a text without a whole trigram,
e.g. shorter than three characters, is not answered, left to the scan). Several conditions intersect
their rows. A conjunct that is an ``OR`` whose every alternative implies such conditions
(``a = 1 OR (a >= 5 AND a < 9)``) gives the union of its alternatives' rows (each alternative's
conditions intersected), in the fragments each alternative has an index answer for. Fragments no
index answers for are scanned whole; a covered fragment with no candidate
row is not read at all, the others read only their candidate rows (:func:`select_rows`; a fragment
with more than half its rows selected is read whole, a range read being cheaper than a take). The
whole filter is then applied to the rows read, as in a full scan, so the rows returned are always
those of a full scan (a NaN counts as a possible match of every comparison; a condition the index
answers only in part, or the rest of the filter, is decided there) -- except where the indices
answer exactly: when the filter is nothing but conditions BTREE / BITMAP indices answer on
non-float columns, the rows they select in the fragments all of them cover are the answer
(:attr:`RowSelection.exact`), read without the filter, as pylance does (no ``refine_filter``).

Left to a full scan: BITMAP, LABEL_LIST and NGRAM indices of datasets with stable row ids (their
row ids are not addresses), and indices a deferred compaction left behind (their addresses are old).

e.g. ``id = 5`` with a BTREE ``id_idx`` covering fragments {0, 1} of {0, 1, 2}, the value 5 being
at row 17 of fragment 1: fragment 1 reads its row 17 only, fragment 2 is scanned, fragment 0 skipped.
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap

from lance_ops.encoding.compression.base import ranges as row_runs
from lance_ops.errors import PredicateError
from lance_ops.file import LanceFileReader
from lance_ops.file.schema import is_json
from lance_ops.index.bitmap import BITMAP_LAYOUT
from lance_ops.index.bloomfilter import BLOOMFILTER_FILE, bloomfilter_rows
from lance_ops.index.btree import LOOKUP, PAGES
from lance_ops.index.files import cached_index_file
from lance_ops.index.json_index import JSON_DETAILS_URL, json_target
from lance_ops.index.ngram import NGRAM_FILE, ngram_tokens
from lance_ops.index.treemap import decode_bitmap64
from lance_ops.index.types import (
    BITMAP,
    BLOOMFILTER,
    BTREE,
    LABEL_LIST,
    NGRAM,
    ZONEMAP,
    index_type_of,
    scalar_type_without_details,
)
from lance_ops.index.zonemap import FILE as ZONEMAP_FILE
from lance_ops.index.zonemap import zone_rows
from lance_ops.io.context import StorageContext
from lance_ops.io.index_cache import count_comparisons
from lance_ops.query import expressions as ex
from lance_ops.query.predicate import Bound, Predicate
from lance_ops.table import frag_reuse
from lance_ops.table.indices import fragment_ids, is_system
from lance_ops.table.manifest import IndexMetadata, Manifest
from lance_ops.table.schema import LanceField

__all__ = [
    "IndexUse",
    "JsonCondition",
    "KeyRows",
    "LabelCondition",
    "RowSelection",
    "TextCondition",
    "json_conditions",
    "key_rows",
    "label_conditions",
    "select_rows",
    "text_conditions",
]

_COMPARE = {"eq": pc.equal, "lt": pc.less, "le": pc.less_equal, "gt": pc.greater, "ge": pc.greater_equal}


@dataclass(frozen=True)
class IndexUse:
    """One index a scan used: its name, type and the condition it answered."""

    name: str
    kind: str
    condition: str


def _value_set(bound: Bound, type_: pa.DataType) -> pa.Array:
    """The values of an ``eq`` / ``in`` bound as one array of ``type_`` (built once per lookup, not
    per page)."""
    return pa.array(list(bound.values), bound.values[0].type if bound.values else type_).cast(type_)


def _matches(values: pa.Array, bound: Bound, wanted: pa.Array | None = None) -> np.ndarray:
    """Which ``values`` may satisfy ``bound`` (NaN: always, as a full scan may count it);
    ``wanted``: :func:`_value_set` of an ``eq`` / ``in`` bound when already built."""
    if bound.op == "null":
        return np.asarray(values.is_null(), dtype=bool)
    if bound.op == "not_null":
        return np.asarray(values.is_valid(), dtype=bool)
    if bound.op == "in":
        value_set = _value_set(bound, values.type) if wanted is None else wanted
        hit = pc.is_in(values, value_set=value_set.cast(values.type))
    else:
        hit = _COMPARE[bound.op](values, bound.values[0].cast(values.type))
    out = np.asarray(hit.fill_null(False), dtype=bool)
    if pa.types.is_floating(values.type):
        out |= np.asarray(pc.is_nan(values).fill_null(False), dtype=bool)
    return out


def _any_within(low: pa.Array, high: pa.Array, wanted: pa.Array, low_unknown: bool) -> np.ndarray:
    """For each range ``[low[i], high[i]]``, whether one of ``wanted`` (no null, no NaN) lies in it;
    a null ``high`` holds none, a null ``low`` is below everything when ``low_unknown`` (else the
    range holds none). One dense ranking of the bounds and the values together puts them on one
    integer scale in Arrow's order, then two binary searches per range count the values inside."""
    ranges, count = len(low), len(wanted)
    if not count or not ranges:
        return np.zeros(ranges, dtype=bool)
    type_ = high.type
    combined = pa.concat_arrays([wanted.cast(type_), low.cast(type_), high])
    codes = np.asarray(pc.rank(combined, tiebreaker="dense"), dtype=np.int64)
    values = np.unique(codes[:count])
    lows, highs = codes[count : count + ranges], codes[count + ranges :]
    low_valid = np.asarray(low.is_valid(), dtype=bool)
    if low_unknown:
        lows = np.where(low_valid, lows, 0)
    inside = np.searchsorted(values, highs, side="right") - np.searchsorted(values, lows, side="left")
    keep = (inside > 0) & np.asarray(high.is_valid(), dtype=bool)
    return keep if low_unknown else keep & low_valid


def _btree_pages(
    lookup: pa.Table, bound: Bound, wanted: pa.Array | None = None, keys: np.ndarray | None = None
) -> np.ndarray:
    """Pages of a BTREE (rows of its lookup: ``min`` / ``max`` the first / last value, null when
    unknown) that may hold rows ``bound`` selects; a page ending in NaN may always. ``wanted``:
    :func:`_value_set` of an ``eq`` / ``in`` bound when already built; ``keys``: its
    :func:`_integer_keys`, when it has them."""
    low, high = lookup.column("min").combine_chunks(), lookup.column("max").combine_chunks()
    if keys is not None and bound.op in ("eq", "in") and high.type == low.type:
        # integers: the count of keys inside each page's [min, max] by two binary searches
        below = np.iinfo(keys.dtype).min
        lows = np.asarray(low.fill_null(below), dtype=keys.dtype)
        highs = np.asarray(high.fill_null(below), dtype=keys.dtype)
        inside = np.searchsorted(keys, highs, side="right") - np.searchsorted(keys, lows, side="left")
        return (inside > 0) & np.asarray(high.is_valid(), dtype=bool)
    if bound.op == "null":
        return np.asarray(lookup.column("null_count"), dtype=np.int64) > 0
    if bound.op == "not_null":
        return np.asarray(high.is_valid(), dtype=bool)

    def cmp(fn: Any, side: pa.Array, value: pa.Scalar, unknown: bool) -> np.ndarray:
        return np.asarray(fn(side, value.cast(side.type)).fill_null(unknown), dtype=bool)

    if bound.op in ("eq", "in"):
        value_set = _value_set(bound, high.type) if wanted is None else wanted
        keep = _any_within(low, high, value_set, low_unknown=True)
    elif bound.op in ("lt", "le"):
        keep = cmp(pc.less if bound.op == "lt" else pc.less_equal, low, bound.values[0], True)
        keep &= np.asarray(high.is_valid(), dtype=bool) | np.asarray(low.is_valid(), dtype=bool)
    else:
        keep = cmp(pc.greater if bound.op == "gt" else pc.greater_equal, high, bound.values[0], False)
    if pa.types.is_floating(high.type):
        keep |= np.asarray(pc.is_nan(high).fill_null(False), dtype=bool)
    return keep


def _btree(
    ctx: StorageContext, index: IndexMetadata, bound: Bound, wanted: pa.Array | None = None
) -> np.ndarray:
    """Row addresses of the BTREE's rows ``bound`` may select: the lookup file gives the pages that
    may hold them, and only those pages of the data file are read, each kept in the dataset's index
    cache (an ``IN`` list's values matched against the pages' bounds and then the pages' values all
    at once; ``wanted``: the values of an ``in`` bound as an array, instead of its scalars). Counts
    the pages' bounds and the values of the pages read as comparisons."""
    lookup = cached_index_file(ctx, index, LOOKUP).table
    if wanted is None and bound.op in ("eq", "in"):
        wanted = _value_set(bound, lookup.schema.field("max").type)
    batch_size = _page_rows(lookup)
    if batch_size <= 0:  # not a layout we know: read every page
        table = cached_index_file(ctx, index, PAGES).table
        values = table.column("values").combine_chunks()
        count_comparisons(len(values))
        ids = np.asarray(table.column("ids").combine_chunks(), dtype=np.uint64)
        return ids[_matches(values, bound, wanted)]
    count_comparisons(lookup.num_rows)  # the pages' bounds
    value_type = lookup.schema.field("max").type
    keys = _integer_keys(wanted) if wanted is not None and wanted.type == value_type else None
    found = []
    for page in _btree_page_data(
        ctx, index, np.flatnonzero(_btree_pages(lookup, bound, wanted, keys)), batch_size
    ):
        count_comparisons(len(page.values))
        hits = page.hits(bound, keys)
        if hits is None:
            hits = page.ids[_matches(page.values, bound, wanted)]
        if hits.size:
            found.append(hits)
    return np.concatenate(found) if found else np.empty(0, np.uint64)


def _integer_keys(wanted: pa.Array | None) -> np.ndarray | None:
    """The values of an ``eq`` / ``in`` bound (:func:`_value_set`, of the index's value type) as
    sorted distinct numpy integers, when they are integers and none is null (None: not such a
    bound)."""
    if wanted is None or not pa.types.is_integer(wanted.type) or wanted.null_count:
        return None
    return np.unique(wanted.to_numpy())


@dataclass(frozen=True)
class _Page:
    """One BTREE page as the index cache keeps it: its values, their row addresses, and ``keys``,
    the non-null values as numpy when they are integers in ascending order after the nulls (as
    pylance and lance-ops write them): then a bound's rows are one or a few runs of the page that
    binary searches find, with no compare of every value (None: the page is searched by
    :func:`_matches`)."""

    values: pa.Array
    ids: np.ndarray
    keys: np.ndarray | None

    @classmethod
    def of(cls, values: pa.Array, ids: np.ndarray) -> _Page:
        keys = None
        if pa.types.is_integer(values.type):
            tail = values.slice(values.null_count)
            if not tail.null_count:
                sorted_keys = tail.to_numpy(zero_copy_only=False)
                if bool((sorted_keys[1:] >= sorted_keys[:-1]).all()):
                    keys = sorted_keys
        return cls(values, ids, keys)

    @property
    def nbytes(self) -> int:
        # ``keys`` is a view of ``values``' buffer
        return int(self.values.nbytes + self.ids.nbytes)

    def hits(self, bound: Bound, wanted: np.ndarray | None) -> np.ndarray | None:
        """The row addresses of the page's rows that meet ``bound`` (``wanted``:
        :func:`_integer_keys` of an ``eq`` / ``in`` bound), found by binary search; None when
        the page has no ``keys`` or the bound is an ``eq`` / ``in`` without ``wanted``."""
        keys = self.keys
        if keys is None:
            return None
        nulls = len(self.ids) - len(keys)
        if bound.op == "null":
            return self.ids[:nulls]
        if bound.op == "not_null":
            return self.ids[nulls:]
        if bound.op in ("eq", "in"):
            if wanted is None:
                return None
            lows = np.searchsorted(keys, wanted, side="left") + nulls
            highs = np.searchsorted(keys, wanted, side="right") + nulls
            if len(wanted) == 1:
                return self.ids[int(lows[0]) : int(highs[0])]
            some = highs > lows
            return self.ids[row_runs(lows[some], highs[some] - lows[some])]
        value = bound.values[0].cast(self.values.type).as_py()
        if bound.op in ("lt", "le"):
            return self.ids[
                nulls : nulls + int(np.searchsorted(keys, value, "left" if bound.op == "lt" else "right"))
            ]
        return self.ids[nulls + int(np.searchsorted(keys, value, "right" if bound.op == "gt" else "left")) :]


def _page_rows(lookup: pa.Table) -> int:
    """Rows per page of a BTREE's page file (0: not a layout we know)."""
    try:
        return int((lookup.schema.metadata or {})[b"batch_size"])
    except (KeyError, ValueError):
        return 0


def prewarm(ctx: StorageContext, index: IndexMetadata, kind: str) -> None:
    """Read the whole of a scalar index (not INVERTED) into the dataset's index cache."""
    if kind != BTREE:
        cached_index_file(ctx, index, _FILE_OF[kind])
        return
    lookup = cached_index_file(ctx, index, LOOKUP).table
    batch_size = _page_rows(lookup)
    if batch_size <= 0:
        cached_index_file(ctx, index, PAGES)
    else:
        _btree_page_data(ctx, index, np.arange(lookup.num_rows), batch_size)


def _btree_page_data(
    ctx: StorageContext, index: IndexMetadata, pages: np.ndarray, batch_size: int
) -> list[_Page]:
    """Values and row addresses of BTREE ``pages`` (``batch_size`` rows each of its page file),
    through the dataset's index cache; the pages not kept are read, each run of adjacent ones in
    one read."""

    def load(positions: list[int]) -> list[_Page]:
        reader = _pages_reader(ctx, index)
        rows = int(reader.num_rows)
        remote = ctx.store.whole_file_read_size > 0  # requests cost more than bytes there
        chosen = pages[positions]
        loaded = []
        for run in np.split(chosen, np.flatnonzero(np.diff(chosen) != 1) + 1):
            start = int(run[0]) * batch_size
            stop = min((int(run[-1]) + 1) * batch_size, rows)
            values, ids = _read_pages(reader, start, max(stop - start, 0), remote)
            for page in run.tolist():
                first = page * batch_size - start
                last = min(first + batch_size, len(ids))
                loaded.append(_Page.of(values.slice(first, max(last - first, 0)), ids[first:last]))
        return loaded

    keys = [("btree-page", index.uuid, int(page)) for page in pages.tolist()]
    return ctx.index_cache.get_many(keys, load, lambda page: page.nbytes)


def _read_pages(reader: LanceFileReader, start: int, count: int, remote: bool) -> tuple[pa.Array, np.ndarray]:
    """Values and row addresses of rows ``[start, start + count)`` of a BTREE page file. On a local
    disk each column is read on its own, on the calling thread: a read of one page's two columns
    would be handed to the worker threads, and that hand-off costs more than decoding a page (it
    showed in the wall time of a cold point query); a long read (a prewarm) still splits each
    column's rows across them. On a ``remote`` store the two columns are read together, so that
    their requests overlap on the worker threads rather than wait one for the other."""
    if remote:
        table = reader.read_range(start, count).to_table()
        values, ids = table.column("values"), table.column("ids")
    else:
        values = reader.read_range(start, count, ["values"]).to_table().column(0)
        ids = reader.read_range(start, count, ["ids"]).to_table().column(0)
    return values.combine_chunks(), np.asarray(ids.combine_chunks(), dtype=np.uint64)


def _pages_reader(ctx: StorageContext, index: IndexMetadata) -> LanceFileReader:
    """The open BTREE page file (its metadata read once per opened dataset)."""

    def load() -> LanceFileReader:
        path = ctx.path("_indices", str(uuid.UUID(bytes=index.uuid)), PAGES)
        size = next((f.size_bytes for f in index.files if f.path == PAGES), None)
        return LanceFileReader(path, store=ctx.store, size=size or None)

    # an open reader holds the file's metadata (a few KiB), counted as such
    return ctx.index_cache.get(("btree-reader", index.uuid), load, lambda _: 4096, kind="index")


def _sets(table: pa.Table, hit: Callable[[pa.Array], np.ndarray], union: bool) -> np.ndarray:
    """Row addresses of the keys ``hit`` selects in a BITMAP / LABEL_LIST file's ``table``: their
    union, or their intersection (no key: none)."""
    keys = table.column("keys").combine_chunks()
    count_comparisons(len(keys))
    positions = np.flatnonzero(hit(keys))
    if not positions.size:
        return np.empty(0, np.uint64)
    blobs = table.column("bitmaps").take(pa.array(positions)).to_pylist()
    sets = [BITMAP_LAYOUT.decode(b) if b else np.empty(0, np.uint64) for b in blobs]
    if union:
        return _sorted_unique(np.concatenate(sets).astype(np.uint64, copy=False))
    out = np.asarray(sets[0], np.uint64)
    for other in sets[1:]:
        out = np.intersect1d(out, np.asarray(other, np.uint64))
    return out


def _bitmap(
    ctx: StorageContext, index: IndexMetadata, bound: Bound, wanted: pa.Array | None = None
) -> np.ndarray:
    table = cached_index_file(ctx, index, BITMAP_LAYOUT.file).table
    if wanted is None and bound.op in ("eq", "in"):
        wanted = _value_set(bound, table.schema.field("keys").type)
    return _sets(table, lambda keys: _matches(keys, bound, wanted), union=True)


def _zonemap(ctx: StorageContext, index: IndexMetadata, bound: Bound) -> np.ndarray:
    zones = cached_index_file(ctx, index, ZONEMAP_FILE).table
    count_comparisons(zones.num_rows)
    low, high = zones.column("min").combine_chunks(), zones.column("max").combine_chunks()
    nulls = np.asarray(zones.column("null_count"), dtype=np.int64)
    nans = np.asarray(zones.column("nan_count"), dtype=np.int64)
    length = np.asarray(zones.column("zone_length"), dtype=np.int64)
    if bound.op == "null":
        keep = nulls > 0
    elif bound.op == "not_null":
        keep = nulls < length
    else:

        def cmp(fn: object, side: pa.Array, value: pa.Scalar) -> np.ndarray:
            return np.asarray(fn(side, value.cast(side.type)).fill_null(False), dtype=bool)  # type: ignore[operator]

        values = bound.values
        if bound.op == "in" or bound.op == "eq":
            keep = _any_within(low, high, _value_set(bound, high.type), low_unknown=False)
        elif bound.op in ("lt", "le"):
            keep = cmp(pc.less if bound.op == "lt" else pc.less_equal, low, values[0])
        else:
            keep = cmp(pc.greater if bound.op == "gt" else pc.greater_equal, high, values[0])
        keep |= nans > 0
        # no min / max though not all null: unknown (pylance 14 keeps none for fixed-size binaries)
        keep |= ~np.asarray(low.is_valid(), dtype=bool) & (nulls < length)
    return zone_rows(zones, keep)


def _bloomfilter(ctx: StorageContext, index: IndexMetadata, bound: Bound) -> np.ndarray | None:
    """Rows of the zones whose bloom filter may hold an ``=`` / ``IN`` value, or that hold a null
    (``IS NULL``); None (left to the scan) for other conditions."""
    data = cached_index_file(ctx, index, BLOOMFILTER_FILE)
    count_comparisons(data.table.num_rows)
    return bloomfilter_rows(data, bound)


_FILE_OF = {
    BITMAP: BITMAP_LAYOUT.file,
    LABEL_LIST: BITMAP_LAYOUT.file,
    ZONEMAP: ZONEMAP_FILE,
    BLOOMFILTER: BLOOMFILTER_FILE,
    NGRAM: NGRAM_FILE,
}

_LOOKUP: dict[str, Callable[[StorageContext, IndexMetadata, Bound], np.ndarray | None]] = {
    BTREE: _btree,
    BITMAP: _bitmap,
    ZONEMAP: _zonemap,
    BLOOMFILTER: _bloomfilter,
}


_PLAN_OPS = {"eq": "=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def _value_text(value: pa.Scalar) -> str:
    if pa.types.is_boolean(value.type):
        return "true" if value.as_py() else "false"
    if isinstance(value.as_py(), bytes):  # hex, the first 10 bytes of a longer value then "..."
        data = value.as_py()
        return data[:10].hex() + ("..." if len(data) > 10 else "")
    if pa.types.is_temporal(value.type):
        return str(value.value)  # type: ignore[attr-defined]  # the stored integer, as pylance prints it
    return str(value.as_py())


def bound_text(bound: Bound) -> str:
    """A condition as pylance's plans print an index query: ``id >= 10``, ``name = abc`` (strings
    unquoted), ``id IS NULL``; ``IN`` (an ``OR`` of equalities in pylance's plans) as ``id IN [1, 2]``."""
    if bound.op == "null":
        return f"{bound.column} IS NULL"
    if bound.op == "not_null":
        return f"{bound.column} IS NOT NULL"
    if bound.op == "in":
        return f"{bound.column} IN [{', '.join(_value_text(v) for v in bound.values)}]"
    return f"{bound.column} {_PLAN_OPS[bound.op]} {_value_text(bound.values[0])}"


@dataclass(frozen=True)
class LabelCondition:
    """A LABEL_LIST-answerable conjunct: ``column`` holds any (``all_=False``) or all of ``values``."""

    column: str
    values: tuple[Any, ...]
    all_: bool

    def __str__(self) -> str:
        """As pylance's plans print it: ``array_has_any(tags, List([a, b]))``."""
        function = "array_has_all" if self.all_ else "array_has_any"
        return f"{function}({self.column}, List([{', '.join(str(v) for v in self.values)}]))"


def _conjuncts(filter: Any) -> list[ex.Expr]:
    """The top-level ``AND`` terms of a SQL ``filter`` (none when it is not SQL text or does not
    parse: the scan then decides it)."""
    if not isinstance(filter, str):
        return []
    try:
        from lance_ops.query.parser import parse  # noqa: PLC0415 - sqlglot, on first use

        return ex.conjuncts(parse(filter))
    except PredicateError:
        return []


def label_conditions(filter: Any, schema: pa.Schema) -> list[LabelCondition]:
    """The ``array_has_any`` / ``array_has_all`` / ``array_has`` conjuncts of a SQL ``filter``'s
    top-level ``AND`` on a top-level list column with literal values (none for anything else)."""
    found = []
    for node in _conjuncts(filter):
        if not isinstance(node, ex.Call) or node.name not in _LABEL_FUNCTIONS or len(node.args) != 2:
            continue
        column, items = node.args
        if not isinstance(column, ex.Column) or len(column.path) != 1:
            continue
        if schema.get_field_index(column.path[0]) < 0:
            continue
        elements = items.args if isinstance(items, ex.Call) and items.name == "array" else (items,)
        if not elements or not all(isinstance(e, ex.Literal) for e in elements):
            continue
        values = tuple(e.value.as_py() for e in elements if isinstance(e, ex.Literal))
        found.append(LabelCondition(column.path[0], values, _LABEL_FUNCTIONS[node.name]))
    return found


_LABEL_FUNCTIONS = {  # the tree's names (sqlglot's spellings of array_has / array_has_all)
    "array_contains": False,
    "array_contains_all": True,
    "array_has_any": False,
    "list_has_any": False,
    "array_has_all": True,
    "list_has_all": True,
    "array_has": False,
    "list_has": False,
}


def _labels(ctx: StorageContext, index: IndexMetadata, condition: LabelCondition) -> np.ndarray | None:
    """Rows holding the labels (None when a value does not fit the key type: left to the scan)."""
    table = cached_index_file(ctx, index, BITMAP_LAYOUT.file).table
    key_type = table.schema.field("keys").type
    try:
        wanted = pa.array(list(condition.values)).cast(key_type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None

    def hit(keys: pa.Array) -> np.ndarray:
        return np.asarray(pc.is_in(keys, value_set=wanted).fill_null(False), bool)

    if condition.all_ and int(hit(table.column("keys").combine_chunks()).sum()) < len(pc.unique(wanted)):
        return np.empty(0, np.uint64)  # a label no row has
    return _sets(table, hit, union=not condition.all_)


@dataclass(frozen=True)
class TextCondition:
    """An NGRAM-answerable conjunct: ``column`` holds each of ``parts`` somewhere (the text of a
    ``contains`` / ``starts_with``, the literal parts of a ``LIKE`` pattern); ``text`` names it."""

    column: str
    parts: tuple[str, ...]
    text: str

    def __str__(self) -> str:
        return self.text


def _like_parts(pattern: str) -> tuple[str, ...]:
    """The literal runs of a LIKE pattern: split at ``%`` and ``_`` (and at ``\\``, whose escaped
    character then starts a run of its own: shorter runs only ever widen the candidate rows)."""
    parts = [pattern]
    for wildcard in ("%", "_", "\\"):
        parts = [p for part in parts for p in part.split(wildcard)]
    return tuple(p for p in parts if p)


def _like_regex(pattern: str) -> str:
    """A LIKE pattern as the regular expression pylance's plans print for it (``%abc%`` ->
    ``.*abc.*``)."""
    out, escaped = [], False
    for char in pattern:
        if escaped:
            out.append(re.escape(char))
            escaped = False
        elif char == "\\":
            escaped = True
        else:
            out.append(".*" if char == "%" else "." if char == "_" else re.escape(char))
    return "".join(out)


def text_conditions(filter: Any, schema: pa.Schema) -> list[TextCondition]:
    """The ``contains`` / ``starts_with`` / ``LIKE`` / ``ILIKE`` conjuncts of a SQL ``filter``'s
    top-level ``AND`` on a top-level column with a literal string (none for anything else)."""
    found = []
    for node in _conjuncts(filter):
        if isinstance(node, ex.Call) and node.name in ("contains", "starts_with") and len(node.args) == 2:
            column, literal = node.args
        elif isinstance(node, ex.Like):
            column, literal = node.value, node.pattern
        else:
            continue
        if not isinstance(column, ex.Column) or len(column.path) != 1 or not isinstance(literal, ex.Literal):
            continue
        value = literal.value.as_py()
        if not isinstance(value, str) or schema.get_field_index(column.path[0]) < 0:
            continue
        name = column.path[0]
        if isinstance(node, ex.Like):
            parts = _like_parts(value)
            if node.ignore_case:
                text = f"{name} ILIKE {value!r}"
            else:
                text = f'regexp_like({name}, Utf8("{_like_regex(value)}"))'
        elif node.name == "starts_with":
            parts = (value,)
            text = f'regexp_like({name}, Utf8("{re.escape(value)}.*"))'
        else:
            parts = (value,)
            text = f'contains({name}, Utf8("{value}"))'
        found.append(TextCondition(column.path[0], parts, text))
    return found


@dataclass(frozen=True)
class JsonCondition:
    """A JSON-index-answerable conjunct: ``function(column, key) <op> value`` (``bound`` holds the
    column, op and value, typed as the function returns it)."""

    function: str
    key: str
    bound: Bound

    def __str__(self) -> str:
        """As pylance's plans print it: ``Json(jsons = 10->x)``."""
        return f"Json({bound_text(self.bound)}->{self.key})"


_JSON_TYPES = {
    "json_get_int": pa.int64(),
    "json_get_float": pa.float64(),
    "json_get_bool": pa.bool_(),
    "json_get_string": pa.string(),
}
_FLIPPED = {"eq": "eq", "lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}


def json_conditions(filter: Any, schema: pa.Schema) -> list[JsonCondition]:
    """The ``json_get_int / _float / _bool / _string(column, 'key') <op> literal`` conjuncts of a
    SQL ``filter``'s top-level ``AND`` on a top-level JSON column (none for anything else;
    ``json_extract`` gives JSON text, which no index holds)."""
    found = []
    for node in _conjuncts(filter):
        if not isinstance(node, ex.Compare) or node.op not in _FLIPPED:
            continue
        call, literal, op = node.left, node.right, node.op
        if isinstance(literal, ex.Call) and isinstance(call, ex.Literal):
            call, literal, op = literal, call, _FLIPPED[op]
        if (
            not isinstance(call, ex.Call)
            or call.name not in _JSON_TYPES
            or not isinstance(literal, ex.Literal)
        ):
            continue
        if (
            len(call.args) != 2
            or not isinstance(call.args[0], ex.Column)
            or not isinstance(call.args[1], ex.Literal)
        ):
            continue
        column, key = call.args[0].path, call.args[1].value.as_py()
        if len(column) != 1 or not isinstance(key, str) or schema.get_field_index(column[0]) < 0:
            continue
        if not is_json(schema.field(column[0]).type) or not literal.value.is_valid:
            continue
        try:
            value = literal.value.cast(_JSON_TYPES[call.name])
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            continue
        if pa.types.is_floating(value.type) and math.isnan(value.as_py()):
            continue
        found.append(JsonCondition(call.name, key, Bound(column[0], op, (value,))))
    return found


@dataclass(frozen=True)
class _JsonIndex:
    column: str
    path: str
    kind: str  # the target's
    key_type: pa.DataType
    segments: list[IndexMetadata]


def _json_indices(ctx: StorageContext, manifest: Manifest) -> list[_JsonIndex]:
    """The JSON indices that can answer (one entry per name, in manifest order)."""
    by_id = {f.id: f for f in manifest.schema}
    names: dict[str, list[IndexMetadata]] = {}
    for index in manifest.indices:
        if index.details is not None and index.details[0] == JSON_DETAILS_URL and len(index.fields) == 1:
            names.setdefault(index.name, []).append(index)
    out = []
    for segments in names.values():
        column = _field_path(by_id, segments[0].fields[0])
        if column is None or any(frag_reuse.is_behind(manifest, s) for s in segments):
            continue
        try:
            path, kind, key_type = json_target(ctx, segments[0])
        except Exception:  # noqa: BLE001 - an index we cannot read is simply not used
            continue
        if kind == BITMAP and manifest.uses_stable_row_ids:
            continue
        out.append(_JsonIndex(column, path, kind, key_type, segments))
    return out


def _ngram(ctx: StorageContext, index: IndexMetadata, condition: TextCondition) -> np.ndarray | None:
    """Rows whose value holds every trigram of the condition's parts (None when the parts have no
    trigram the index keeps: left to the scan)."""
    parts = pa.array(condition.parts, pa.string())
    wanted = np.unique(ngram_tokens(parts, np.zeros(len(parts), np.uint64))[0])
    if not wanted.size:
        return None
    table = cached_index_file(ctx, index, NGRAM_FILE).table
    count_comparisons(int(wanted.size))
    tokens = np.asarray(table.column("tokens").combine_chunks().fill_null(0), np.uint32)
    at = np.searchsorted(tokens, wanted)
    if (at >= tokens.size).any() or (tokens[np.minimum(at, tokens.size - 1)] != wanted).any():
        return np.empty(0, np.uint64)  # a trigram no row has
    blobs = table.column("posting_list").take(pa.array(at)).to_pylist()
    sets = sorted((decode_bitmap64(b) for b in blobs), key=len)
    out = sets[0]
    for other in sets[1:]:
        out = np.intersect1d(out, other, assume_unique=True)
    return out


def _field_path(by_id: Mapping[int, LanceField], field_id: int) -> str | None:
    """The column (``id``), or the dotted path of a field inside struct columns (``s.x``), of a
    field id (None when unknown or below a list or map)."""
    field = by_id.get(field_id)
    if field is None:
        return None
    path = [field.name]
    while field.parent_id >= 0:
        field = by_id.get(field.parent_id)  # type: ignore[assignment]
        if field is None or field.logical_type != "struct":
            return None
        path.append(field.name)
    return ".".join(reversed(path))


def _usable(ctx: StorageContext, manifest: Manifest) -> dict[str, tuple[str, list[IndexMetadata]]]:
    """Column (or struct field path, ``s.x``) -> (type, segments) of the first index (in manifest
    order) per column or field that can answer."""
    by_id = {f.id: f for f in manifest.schema}
    names: dict[str, list[IndexMetadata]] = {}
    for index in manifest.indices:
        if not is_system(index):
            names.setdefault(index.name, []).append(index)
    out: dict[str, tuple[str, list[IndexMetadata]]] = {}
    for name in names:  # manifest order: the first index created on a column answers, as pylance
        segments = names[name]
        first = segments[0]
        path = _field_path(by_id, first.fields[0]) if len(first.fields) == 1 else None
        if path is None or path in out:
            continue
        try:
            if first.details is None:
                # no details (a CreateIndex given an Index without them): pylance 14 guesses
                list_column = by_id[first.fields[0]].logical_type == "list"
                kind = scalar_type_without_details(ctx, first, list_column)
            else:
                kind = index_type_of(first, ctx)
        except Exception:  # noqa: BLE001 - an index of a type we do not read is simply not used
            continue
        if kind not in (*_LOOKUP, LABEL_LIST, NGRAM) or any(
            frag_reuse.is_behind(manifest, s) for s in segments
        ):
            continue
        if kind in (BITMAP, LABEL_LIST, NGRAM) and manifest.uses_stable_row_ids:
            continue
        out[path] = (kind, segments)
    return out


@dataclass(frozen=True)
class RowSelection:
    """What the indices leave a scan to read: the fragments, and for some of them the physical
    offsets (ascending) of the only rows that may match; and the indices used. ``exact`` are the
    fragments of ``rows`` whose offsets are exactly the (live or deleted) rows the filter selects:
    they need no recheck."""

    fragments: set[int]
    rows: dict[int, np.ndarray] = field(default_factory=dict)
    used: list[IndexUse] = field(default_factory=list)
    exact: frozenset[int] = frozenset()


def _exact(kind: str, condition: Bound | LabelCondition | TextCondition | JsonCondition) -> bool:
    """Whether the index answers ``condition`` exactly: BTREE and BITMAP comparisons, ``IN`` and
    null tests (a NaN matches every comparison of a floating index as a possible match; an empty
    ``IN`` list, whose type is unknown, is rechecked)."""
    if kind not in (BTREE, BITMAP) or not isinstance(condition, Bound):
        return False
    if condition.op in ("null", "not_null"):
        return True
    return bool(condition.values) and not pa.types.is_floating(condition.values[0].type)


def _sorted_unique(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)``, without the sort when they already ascend strictly (one bitmap's
    addresses, say)."""
    if len(values) < 2 or bool((values[1:] > values[:-1]).all()):
        return values
    return np.unique(values)


def _by_fragment(addresses: np.ndarray) -> dict[int, np.ndarray]:
    addresses = _sorted_unique(np.asarray(addresses, dtype=np.uint64))
    fragment = (addresses >> np.uint64(32)).astype(np.int64)
    offsets = (addresses & np.uint64(0xFFFFFFFF)).astype(np.int64)
    # fragment ids ascend with the addresses: each fragment's offsets are one run
    starts = np.flatnonzero(np.r_[True, fragment[1:] != fragment[:-1]]) if len(fragment) else fragment
    ends = np.r_[starts[1:], len(fragment)][: len(starts)]
    return {int(fragment[a]): offsets[a:b] for a, b in zip(starts.tolist(), ends.tolist(), strict=True)}


def select_rows(
    ctx: StorageContext,
    manifest: Manifest,
    predicate: Predicate,
    candidates_in: Sequence[int],
    filter: Any = None,
) -> RowSelection:
    """The fragments among ``candidates_in`` that may hold rows ``predicate`` (the SQL ``filter``,
    for LABEL_LIST and NGRAM conditions) selects, the rows of those the indices answered for, and
    the indices used (``candidates_in`` unchanged and no index when none applies)."""
    keep = set(candidates_in)
    if not manifest.indices:
        return RowSelection(keep)
    usable = _usable(ctx, manifest)
    kinds = {kind for kind, _ in usable.values()}
    labels: list[LabelCondition] = []
    texts: list[TextCondition] = []
    jsons: list[tuple[str, JsonCondition]] = []
    json_indices = _json_indices(ctx, manifest)
    if kinds & {LABEL_LIST, NGRAM} or json_indices:  # parse the SQL text only when such an index can answer
        schema = manifest.schema.to_arrow()
        labels = label_conditions(filter, schema) if LABEL_LIST in kinds else []
        texts = text_conditions(filter, schema) if NGRAM in kinds else []
        for wanted in json_conditions(filter, schema) if json_indices else []:
            for index in json_indices:  # the first index of that column and path whose keys fit
                if (index.column, index.path) == (wanted.bound.column, wanted.key) and (
                    index.key_type == wanted.bound.values[0].type
                ):
                    key = f"json:{index.segments[0].name}"
                    usable[key] = (index.kind, index.segments)
                    jsons.append((key, wanted))
                    break
    bounds = (*predicate.bounds, *predicate.field_bounds)
    if not (bounds or labels or texts or jsons or predicate.any_of):
        return RowSelection(keep)
    used: list[IndexUse] = []
    rows: dict[int, np.ndarray] = {}
    conditions: list[tuple[str, Bound | LabelCondition | TextCondition | JsonCondition]] = [
        (b.column, b) for b in bounds if b.column in usable and usable[b.column][0] in _LOOKUP
    ]
    conditions += [(c.column, c) for c in labels if c.column in usable and usable[c.column][0] == LABEL_LIST]
    conditions += [(c.column, c) for c in texts if c.column in usable and usable[c.column][0] == NGRAM]
    conditions += jsons
    # No recheck where the filter is exactly its bounds and each is answered exactly: then in the
    # fragments every condition's index covers.
    exact: BitMap | None = None
    if (
        predicate.exact
        and not manifest.uses_stable_row_ids
        and len(conditions) == len(bounds)
        and all(_exact(usable[column][0], c) for column, c in conditions)
    ):
        exact = BitMap(keep)

    def narrow(matched: Mapping[int, np.ndarray]) -> None:
        """Keep, of each fragment in ``matched``, only its rows there (none: the fragment goes)."""
        for fragment in [f for f in keep if f in matched]:
            offsets = matched[fragment]
            if fragment in rows:
                offsets = np.intersect1d(rows[fragment], offsets)
            if offsets.size:
                rows[fragment] = offsets
            else:
                keep.discard(fragment)
                rows.pop(fragment, None)

    for column, condition in conditions:
        kind, segments = usable[column]
        answer = _answer(ctx, kind, segments, condition)
        if answer is None:
            exact = None
            continue
        covered, matched = answer
        narrow({f: matched.get(f, _NO_ROWS) for f in keep if f in covered})
        text = (
            str(condition)
            if isinstance(condition, (LabelCondition, TextCondition, JsonCondition))
            else bound_text(condition)
        )
        used.append(IndexUse(segments[0].name, kind, text))
        if exact is not None:
            exact &= covered
    for alternatives in predicate.any_of:
        union = _any_of(ctx, usable, alternatives, keep)
        if union is not None:
            narrow(union[0])
            used.append(union[1])
    exact_rows = frozenset() if exact is None else frozenset(f for f in rows if f in exact)
    return RowSelection(keep, rows, used, exact_rows)


_NO_ROWS = np.empty(0, np.int64)


def _answer(
    ctx: StorageContext,
    kind: str,
    segments: Sequence[IndexMetadata],
    condition: Bound | LabelCondition | TextCondition | JsonCondition,
) -> tuple[BitMap, dict[int, np.ndarray]] | None:
    """The fragments the index's segments cover and, per fragment, the offsets of its rows that
    may meet ``condition`` (None: the index does not answer it)."""
    covered = BitMap()
    found = []
    for segment in segments:
        covered |= fragment_ids(segment)
        if isinstance(condition, LabelCondition):
            hit = _labels(ctx, segment, condition)
        elif isinstance(condition, TextCondition):
            hit = _ngram(ctx, segment, condition)
        elif isinstance(condition, JsonCondition):
            hit = _LOOKUP[kind](ctx, segment, condition.bound)
        else:
            hit = _LOOKUP[kind](ctx, segment, condition)
        if hit is None:
            return None
        found.append(hit)
    return covered, _by_fragment(np.concatenate(found) if found else np.empty(0, np.uint64))


def _any_of(
    ctx: StorageContext,
    usable: Mapping[str, tuple[str, list[IndexMetadata]]],
    alternatives: Sequence[Sequence[Bound]],
    keep: set[int],
) -> tuple[dict[int, np.ndarray], IndexUse] | None:
    """The rows of each fragment in ``keep`` that may meet an ``OR`` of ``alternatives`` (each the
    bounds one operand implies): the union over the alternatives of the rows their indices
    answer (several bounds of one alternative: the intersection, in a fragment each index
    covers). Only fragments every alternative has an answer for are given; None when an
    alternative has no bound an index answers (no fragment can be narrowed)."""
    answers: list[list[tuple[BitMap, dict[int, np.ndarray]]]] = []
    texts, names = [], {}
    for bounds in alternatives:
        found, parts = [], []
        for bound in bounds:
            if bound.column not in usable or usable[bound.column][0] not in _LOOKUP:
                continue
            kind, segments = usable[bound.column]
            answer = _answer(ctx, kind, segments, bound)
            if answer is not None:
                found.append(answer)
                parts.append(bound_text(bound))
                names[segments[0].name] = kind
        if not found:
            return None
        answers.append(found)
        texts.append(" && ".join(parts))
    out: dict[int, np.ndarray] = {}
    for fragment in keep:
        union = []
        for found in answers:
            known = [matched.get(fragment, _NO_ROWS) for covered, matched in found if fragment in covered]
            if not known:
                break  # this alternative may select any row of the fragment
            rows = known[0]
            for other in known[1:]:
                rows = np.intersect1d(rows, other, assume_unique=True)
            union.append(rows)
        else:
            out[fragment] = np.unique(np.concatenate(union))
    kinds = set(names.values())
    use = IndexUse("|".join(names), kinds.pop() if len(kinds) == 1 else "mixed", " || ".join(texts))
    return out, use


@dataclass(frozen=True)
class KeyRows:
    """Where a scalar index puts a set of key values: the index's name and type, the fragments it
    covers, and the row addresses of its rows holding one of the values -- deleted rows included,
    as the index still lists them."""

    name: str
    kind: str
    covered: BitMap
    rows: np.ndarray

    def by_fragment(self) -> dict[int, np.ndarray]:
        """The rows' physical offsets (ascending, unique) per fragment id."""
        return _by_fragment(self.rows)


def key_rows(ctx: StorageContext, manifest: Manifest, column: str, keys: pa.Array) -> KeyRows | None:
    """The rows a BTREE or BITMAP index of the top-level ``column`` lists for the values ``keys``
    (nulls match nothing), all looked up at once; None when no such index can answer (none on the
    column, another type, or one a deferred compaction left behind)."""
    if not manifest.indices:
        return None
    found = _usable(ctx, manifest).get(column)
    if found is None or found[0] not in (BTREE, BITMAP):
        return None
    kind, segments = found
    wanted = pc.unique(keys.drop_null())
    bound = Bound(column, "in", ())
    covered = BitMap()
    rows = [np.empty(0, np.uint64)]
    for segment in segments:
        covered |= fragment_ids(segment)
        if len(wanted):
            rows.append(
                _btree(ctx, segment, bound, wanted) if kind == BTREE else _bitmap(ctx, segment, bound, wanted)
            )
    return KeyRows(segments[0].name, kind, covered, np.concatenate(rows).astype(np.uint64, copy=False))
