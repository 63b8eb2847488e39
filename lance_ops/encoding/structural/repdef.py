"""Repetition and definition levels (spec/encodings-2.1.md §2).

Lance folds every struct / list validity and every list offset array above a leaf into
two u16 streams with one entry ("level") per leaf value slot plus one per null or empty
list (and per null struct that hides a list):

* **layers** are listed innermost first; each is a ``RepDefLayer`` meaning chosen per
  page (a nullable field whose page has no null is ``ALL_VALID_ITEM``).
* **def** codes are handed out from ``max_def`` downwards, visiting layers outermost
  first: a NULLABLE layer takes one code (null), an EMPTYABLE list one (empty), a
  NULL_AND_EMPTY list two (empty = the larger, null = the smaller). A level's def is the
  code of the outermost layer at which it is null/empty, else 0.
* **rep** codes: list layers get ``max_rep`` (outermost) down to 1. A level whose rep is
  ``r > 0`` starts a new list at every list layer with code ``<= r``; ``max_rep`` starts
  a row.

Worked example, ``list<int32>`` rows ``[[1, 2], null, [], [3]]`` with layers
``[ALL_VALID_ITEM, NULL_AND_EMPTY_LIST]`` (list null = 1, list empty = 2)::

    rep: 1 0 1 1 1        def: 0 0 1 2 0        visible slots: 1 2 - - 3

Writing (:func:`shred`) walks the Arrow array outermost layer first with numpy
``repeat``/``cumsum`` over whole pages; reading (:func:`unshred`) selects, for every
layer, the levels that start one of its elements and rebuilds offsets with running counts
(over the selected levels only for a list of leaf items with no def code outside it: its
hidden levels are all selected ones) and validity with comparisons, never looping per value.

This module also chooses and applies the block compression of level streams (§2.8):
raw ``Flat(16)``, ``InlineBitpacking(16)`` (≤ 1 024 levels), ``OutOfLineBitpacking(16,
Flat W)`` or, in 2.2, ``Rle(Flat 16, Flat 8)``, whichever is smallest, decided once per
page and applied to each chunk's slice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from lance_ops._proto import encodings_v2_1_pb2 as pb
from lance_ops.encoding.api import FileVersion
from lance_ops.encoding.compression import bitpacking, dictionary, flat, rle
from lance_ops.encoding.compression.base import ChunkSpans, Context, decompressor_for
from lance_ops.encoding.data import FixedWidthBlock
from lance_ops.encoding.structural.values import with_validity
from lance_ops.errors import CorruptFileError, UnsupportedFeatureError

Layer = pb.RepDefLayer  # one RepDefLayer meaning

ALL_VALID_ITEM = pb.REPDEF_ALL_VALID_ITEM
ALL_VALID_LIST = pb.REPDEF_ALL_VALID_LIST
NULLABLE_ITEM = pb.REPDEF_NULLABLE_ITEM
NULLABLE_LIST = pb.REPDEF_NULLABLE_LIST
EMPTYABLE_LIST = pb.REPDEF_EMPTYABLE_LIST
NULL_AND_EMPTY_LIST = pb.REPDEF_NULL_AND_EMPTY_LIST

LIST_LAYERS = frozenset({ALL_VALID_LIST, NULLABLE_LIST, EMPTYABLE_LIST, NULL_AND_EMPTY_LIST})
_NULLABLE = frozenset({NULLABLE_ITEM, NULLABLE_LIST, NULL_AND_EMPTY_LIST})
_EMPTYABLE = frozenset({EMPTYABLE_LIST, NULL_AND_EMPTY_LIST})

# Level block compression (§2.8).
LEVEL_BITS = 16
INLINE_LEVEL_LIMIT = 1024  # pages with more levels use out-of-line bit-packing
RLE_HEADER_BYTES = 8


def is_list(layer: Layer) -> bool:
    return layer in LIST_LAYERS


@dataclass(frozen=True)
class LayerCodes:
    """Def codes of one layer (0 = the layer cannot be null / empty)."""

    null: int
    empty: int
    inner: int  # largest code owned by the layers inside this one (valid here iff def <= inner)
    highest: int  # largest code owned by this layer or any layer inside it


def layer_codes(layers: Sequence[Layer]) -> list[LayerCodes]:
    """Codes per layer, innermost first (§2.3)."""
    codes: list[LayerCodes] = []
    d = 0
    for layer in layers:
        below = d
        null = empty = 0
        if layer == NULL_AND_EMPTY_LIST:
            null, empty = d + 1, d + 2
            d += 2
        elif layer in _NULLABLE:
            null = d = d + 1
        elif layer in _EMPTYABLE:
            empty = d = d + 1
        elif layer not in (ALL_VALID_ITEM, ALL_VALID_LIST):
            raise UnsupportedFeatureError(f"unknown rep/def layer {layer}")
        codes.append(LayerCodes(null=null, empty=empty, inner=below, highest=d))
    return codes


def max_def(layers: Sequence[Layer]) -> int:
    return layer_codes(layers)[-1].highest if layers else 0


def max_rep(layers: Sequence[Layer]) -> int:
    return sum(1 for layer in layers if is_list(layer))


def max_visible_def(layers: Sequence[Layer]) -> int:
    """Def codes up to this value own a value slot (visible levels, §2.3)."""
    codes = layer_codes(layers)
    for i, layer in enumerate(layers):
        if is_list(layer):
            return codes[i].inner
    return codes[-1].highest if codes else 0


@dataclass(frozen=True)
class Levels:
    """The rep/def levels of one leaf page; ``None`` streams are absent (all zero)."""

    layers: tuple[Layer, ...]  # innermost first
    rep: np.ndarray | None  # uint16 per level
    defs: np.ndarray | None  # uint16 per level
    num_levels: int

    @property
    def max_rep(self) -> int:
        return max_rep(self.layers)

    @property
    def max_def(self) -> int:
        return max_def(self.layers)

    def visible_mask(self) -> np.ndarray | None:
        """Bool per level: does it own a value slot? ``None`` means every level does."""
        if self.defs is None:
            return None
        mvd = max_visible_def(self.layers)
        if mvd >= self.max_def:
            return None
        return self.defs <= mvd

    def row_starts(self) -> np.ndarray:
        """Level index of the first level of every row (computed once per ``Levels``; callers
        must not modify the array)."""
        cached = self.__dict__.get("_row_starts")
        if cached is not None:
            return cached  # type: ignore[no-any-return]
        if self.rep is None:
            starts = np.arange(self.num_levels, dtype=np.int64)
        else:
            starts = np.flatnonzero(self.rep == self.max_rep)
        object.__setattr__(self, "_row_starts", starts)
        return starts

    def slice(self, start: int, stop: int) -> Levels:
        if start == 0 and stop == self.num_levels:
            return self
        out = Levels(
            self.layers,
            None if self.rep is None else self.rep[start:stop],
            None if self.defs is None else self.defs[start:stop],
            stop - start,
        )
        cached = self.__dict__.get("_row_starts")
        if cached is not None:  # the row starts inside the slice, re-based
            lo, hi = np.searchsorted(cached, [start, stop]).tolist()
            object.__setattr__(out, "_row_starts", cached[lo:hi] - start)
        return out

    @classmethod
    def concat(cls, parts: Sequence[Levels]) -> Levels:
        layers = parts[0].layers
        total = sum(p.num_levels for p in parts)

        def cat(attr: str) -> np.ndarray | None:
            if all(getattr(p, attr) is None for p in parts):
                return None
            return np.concatenate(
                [
                    np.zeros(p.num_levels, np.uint16) if getattr(p, attr) is None else getattr(p, attr)
                    for p in parts
                ]
            ).astype(np.uint16, copy=False)

        return cls(layers, cat("rep"), cat("defs"), total)


# ---------------------------------------------------------------------------------------------
# Writing: Arrow -> levels + visible leaf values


@dataclass(frozen=True)
class ShreddedLeaf:
    """One leaf column of a page: its levels and the values of its visible slots."""

    levels: Levels
    values: pa.Array  # leaf-typed array, one entry per visible level (nulls are ignored)
    num_rows: int


def is_leaf_type(dtype: pa.DataType) -> bool:
    """Leaf = anything but a struct, (large) list or map; a primitive FSL (also one of nulls,
    which pylance stores as item-validity bytes only) and an empty struct
    (:mod:`.empty_struct`) are leaves."""
    if pa.types.is_struct(dtype):
        return dtype.num_fields == 0
    if pa.types.is_fixed_size_list(dtype):
        inner = dtype.value_type
        while pa.types.is_fixed_size_list(inner):
            inner = inner.value_type
        if not (
            pa.types.is_primitive(inner)
            or pa.types.is_fixed_size_binary(inner)
            or pa.types.is_decimal(inner)
            or pa.types.is_null(inner)
        ):
            raise UnsupportedFeatureError(f"fixed_size_list of {dtype.value_type} is not supported")
        return True
    return not (pa.types.is_list(dtype) or pa.types.is_large_list(dtype) or pa.types.is_map(dtype))


PACKED_KEY = b"lance-encoding:packed"
FALSE_WORDS = frozenset({"", "false", "0", "no", "off"})


def is_packed_struct(field: pa.Field) -> bool:
    """A struct field stored row-major in one column (``lance-encoding:packed``)."""
    if not pa.types.is_struct(field.type) or not field.metadata:
        return False
    value = field.metadata.get(PACKED_KEY)
    return value is not None and value.decode().strip().lower() not in FALSE_WORDS


def is_leaf_field(field: pa.Field) -> bool:
    return is_packed_struct(field) or is_leaf_type(field.type)


def child_field(field: pa.Field) -> pa.Field:
    """Item field of a list-like layer; a map is ``list<struct<key, value>>`` (Lance 2.2)."""
    dtype = field.type
    if pa.types.is_map(dtype):
        return pa.field("entries", pa.struct([dtype.key_field, dtype.item_field]), nullable=False)
    return dtype.value_field


def as_field(field: pa.Field | pa.DataType) -> pa.Field:
    return field if isinstance(field, pa.Field) else pa.field("", field)


def count_leaves(field: pa.Field | pa.DataType) -> int:
    """Leaf columns under ``field`` (a packed struct is one leaf)."""
    field = as_field(field)
    if is_leaf_field(field):
        return 1
    if pa.types.is_struct(field.type):
        return sum(count_leaves(field.type.field(i)) for i in range(field.type.num_fields))
    return count_leaves(child_field(field))


def _validity(array: pa.Array) -> np.ndarray | None:
    if pa.types.is_null(array.type):
        return np.zeros(len(array), bool)
    if array.null_count == 0:
        return None
    return np.asarray(array.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def _null_at(valid: np.ndarray, idx: np.ndarray, live: np.ndarray) -> np.ndarray:
    """Bool per slot: live and null in the current array."""
    out = np.zeros(len(idx), bool)
    out[live] = ~valid[idx[live]]
    return out


@dataclass(frozen=True)
class _Walk:
    """Per-slot state while descending.

    ``order`` is the pending repetition as a list *ordinal* (1 = outermost list of the
    path, 0 = continue): codes depend on how many lists the path holds, known only at
    the leaf. ``mark`` is ``2 * depth + (0 null | 1 empty)`` of the outermost null/empty
    layer, -1 if none. ``idx`` indexes the current array, -1 once the slot ended above.
    """

    order: np.ndarray  # uint16
    mark: np.ndarray  # int32
    idx: np.ndarray  # int64
    hidden: frozenset[int] = frozenset()  # item depths holding slots of a null outer struct


def shred(array: pa.Array, field: pa.Field | None = None) -> list[ShreddedLeaf]:
    """Split ``array`` into one :class:`ShreddedLeaf` per leaf column, in pre-order.

    ``field`` (default: an unnamed field of the array's type) supplies the metadata that
    marks packed structs, which are leaves.
    """
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    n = len(array)
    field = field or pa.field("", array.type)
    if is_leaf_field(field):
        return [_flat_leaf(array)]
    leaf = _top_list_leaf(array, field)
    if leaf is not None:
        return [leaf]
    start = _Walk(np.ones(n, np.uint16), np.full(n, -1, np.int32), np.arange(n, dtype=np.int64))
    out: list[ShreddedLeaf] = []
    _shred_node(array, field, start, [], n, out)
    return out


def _flat_leaf(array: pa.Array) -> ShreddedLeaf:
    """:func:`shred` of a top-level leaf (no struct or list above it) without walking slots:
    one level per row, a def level only where the row is null, every value kept."""
    if pa.types.is_dictionary(array.type):
        array = dictionary.normalize_nulls(array)
    valid = _validity(array)
    nulls = valid is not None and not bool(valid.all())
    layers = (NULLABLE_ITEM if nulls else ALL_VALID_ITEM,)
    code = layer_codes(layers)[-1]
    defs = None
    if code.highest:
        defs = np.zeros(len(array), np.uint16)
        if valid is not None:
            defs[~valid] = code.null
    return ShreddedLeaf(Levels(layers, None, defs, len(array)), array, len(array))


def _top_list_leaf(array: pa.Array, field: pa.Field) -> ShreddedLeaf | None:
    """:func:`shred` of a top-level list of leaf items without walking slots, or ``None`` when
    the general walk is needed (a map; items that are not leaves, or dictionary or null-typed
    items). Each row is one level for a null or empty list, else one level per item; rep is 1
    at each row's first level; the items are the child's span ``offsets[0] .. offsets[-1]`` in
    order less those a null list covers, so item nulls map onto the levels that are not
    null/empty lists."""
    dtype = array.type
    if not (pa.types.is_list(dtype) or pa.types.is_large_list(dtype)) or len(array) == 0:
        return None
    item_field = child_field(field)
    item_type = item_field.type
    if not is_leaf_field(item_field) or pa.types.is_dictionary(item_type) or pa.types.is_null(item_type):
        return None
    offsets = np.asarray(array.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
    lengths = np.diff(offsets)
    list_valid = _validity(array)
    null_rows = None if list_valid is None else ~list_valid
    first, stop = int(offsets[0]), int(offsets[-1])
    values = array.values.slice(first, stop - first)
    if null_rows is not None and bool(np.any(lengths[null_rows])):  # items hidden by null lists
        assert list_valid is not None
        values = values.filter(pa.array(np.repeat(list_valid, lengths)))
        lengths = np.where(list_valid, lengths, 0)
    item_valid = _validity(values)
    empty_rows = lengths == 0
    if null_rows is not None:
        empty_rows &= list_valid
    has_null = null_rows is not None and bool(null_rows.any())
    has_empty = bool(empty_rows.any())
    item_nulls = item_valid is not None
    layers = tuple(reversed(_leaf_layers([True, False], [has_null, item_nulls], [has_empty, False])))
    codes = layer_codes(layers)
    counts = np.maximum(lengths, 1)
    row_start = np.cumsum(counts) - counts
    total = int(row_start[-1] + counts[-1])
    rep = np.zeros(total, np.uint16)
    rep[row_start] = 1
    defs = None
    if codes[-1].highest:
        defs = np.zeros(total, np.uint16)
        if item_nulls:
            assert item_valid is not None
            item_null = ~item_valid
            if has_null or has_empty:
                is_item = np.ones(total, bool)
                is_item[row_start[lengths == 0]] = False
                defs[np.flatnonzero(is_item)[item_null]] = codes[0].null
            else:
                defs[item_null] = codes[0].null
        if has_null:
            assert null_rows is not None
            defs[row_start[null_rows]] = codes[1].null
        if has_empty:
            defs[row_start[empty_rows]] = codes[1].empty
    return ShreddedLeaf(Levels(layers, rep, defs, total), values, len(array))


def _leaf_layers(path: Sequence[bool], has_null: Sequence[bool], has_empty: Sequence[bool]) -> list[Layer]:
    """Each layer's meaning (outermost first) from whether it is a list and holds a null / empty."""
    outer: list[Layer] = []
    for lst, null, empty in zip(path, has_null, has_empty, strict=True):
        if not lst:
            outer.append(NULLABLE_ITEM if null else ALL_VALID_ITEM)
        elif null and empty:
            outer.append(NULL_AND_EMPTY_LIST)
        else:
            outer.append(NULLABLE_LIST if null else EMPTYABLE_LIST if empty else ALL_VALID_LIST)
    return outer


def _shred_node(
    array: pa.Array, field: pa.Field, walk: _Walk, path: list[bool], num_rows: int, out: list[ShreddedLeaf]
) -> None:
    """``path`` says, outermost first, whether each layer above is a list."""
    dtype = array.type
    depth = len(path)
    if pa.types.is_dictionary(dtype):
        array = dictionary.normalize_nulls(array)
    if is_leaf_field(field):
        _finish_leaf(array, walk, [*path, False], num_rows, out)
        return
    live = walk.idx >= 0
    valid = _validity(array)
    safe = np.where(live, walk.idx, 0)
    if pa.types.is_struct(dtype):
        mark = walk.mark
        hidden = _note_hidden(walk, live, depth)
        if valid is not None:
            mark = mark.copy()
            mark[(mark < 0) & _null_at(valid, walk.idx, live)] = 2 * depth
        for i in range(dtype.num_fields):
            child = _Walk(walk.order, mark, walk.idx, hidden)
            _shred_node(array.field(i), dtype.field(i), child, [*path, False], num_rows, out)
        return
    ordinal = sum(path) + 1
    hidden = _note_hidden(walk, live, depth)
    offsets = np.asarray(array.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
    if len(offsets) == 0:
        offsets = np.zeros(1, np.int64)
    starts = offsets[np.minimum(safe, len(offsets) - 1)]
    lengths = np.where(live, offsets[np.minimum(safe + 1, len(offsets) - 1)] - starts, 0)
    mark = walk.mark.copy()
    # A slot already null at an outer struct ends here, at the nearest list below it.
    ended = ~live | (mark >= 0)
    if valid is not None:
        mark[~ended & _null_at(valid, walk.idx, live)] = 2 * depth
    ended |= mark >= 0
    mark[~ended & (lengths == 0)] = 2 * depth + 1
    expand = mark < 0
    counts = np.where(expand, lengths, 1)
    group_start = np.cumsum(counts) - counts
    total = int(counts.sum())
    order = np.zeros(total, np.uint16)
    order[group_start] = np.where(walk.order == 0, ordinal, walk.order)
    # Item j of group g is starts[g] + (j - group_start[g]) when g expands, -1 (one item) if not:
    # one repeat of the per-group shift instead of three repeats and a select.
    shift = np.where(expand, starts - group_start, -1 - group_start)
    idx = np.arange(total, dtype=np.int64) + np.repeat(shift, counts)
    child = _Walk(order, np.repeat(mark, counts), idx, hidden)
    _shred_node(array.values, child_field(field), child, [*path, True], num_rows, out)


def _note_hidden(walk: _Walk, live: np.ndarray, depth: int) -> frozenset[int]:
    """Record that this item or list layer holds slots of a null outer struct.

    pylance treats such a layer as nullable (Arrow's logical nulls propagate from a struct
    to its children) even when the child array itself has no nulls; its reader rejects a
    page whose list layer under a null struct is not.
    """
    if np.any(live & (walk.mark >= 0)):
        return walk.hidden | {depth}
    return walk.hidden


def _finish_leaf(
    array: pa.Array, walk: _Walk, path: list[bool], num_rows: int, out: list[ShreddedLeaf]
) -> None:
    depth = len(path) - 1
    live = walk.idx >= 0
    mark = walk.mark
    hidden = _note_hidden(walk, live, depth)
    valid = _validity(array)
    if valid is not None:
        mark = mark.copy()
        mark[(mark < 0) & _null_at(valid, walk.idx, live)] = 2 * depth
    # Layer meanings (outermost first) from what actually occurs in this page.
    seen = np.bincount(mark[mark >= 0], minlength=2 * (depth + 1)) > 0
    outer = _leaf_layers(
        path,
        [bool(seen[2 * d]) or d in hidden for d in range(len(path))],
        [bool(seen[2 * d + 1]) for d in range(len(path))],
    )
    layers = tuple(reversed(outer))
    codes = layer_codes(layers)
    table = np.zeros(2 * (depth + 1), np.uint16)
    for d in range(depth + 1):
        table[2 * d] = codes[depth - d].null
        table[2 * d + 1] = codes[depth - d].empty
    mrep = max_rep(layers)
    defs = None
    if codes[-1].highest:
        defs = np.concatenate(([0], table)).astype(np.uint16)[mark + 1]  # mark -1 (no null) -> 0
    rep = None
    if mrep:
        # order 0 (continuing) -> 0, list ordinal o -> mrep + 1 - o
        rep_of = np.array([0, *range(mrep, 0, -1)], np.uint16)
        rep = rep_of[walk.order]
    visible_idx = walk.idx[live]
    if len(visible_idx) == len(array) and (len(visible_idx) == 0 or _is_identity(visible_idx)):
        values = array
    else:
        values = array.take(pa.array(visible_idx, pa.int64()))
    out.append(ShreddedLeaf(Levels(layers, rep, defs, len(mark)), values, num_rows))


def _is_identity(idx: np.ndarray) -> bool:
    return bool(idx[0] == 0 and np.all(np.diff(idx) == 1))


# ---------------------------------------------------------------------------------------------
# Reading: levels + visible leaf values -> Arrow


@dataclass(frozen=True)
class DecodedLeaf:
    """A leaf column's decoded page data: levels and its visible values (leaf type, no nulls)."""

    levels: Levels
    values: pa.Array


def canonical_layers(layers: Sequence[Layer]) -> tuple[Layer, ...]:
    """The widest meaning of each layer (every item nullable, every list null-and-empty)."""
    return tuple(NULL_AND_EMPTY_LIST if is_list(layer) else NULLABLE_ITEM for layer in layers)


def canonicalize(levels: Levels) -> Levels:
    """Re-code ``levels`` under :func:`canonical_layers` so pages can be concatenated."""
    target = canonical_layers(levels.layers)
    if target == levels.layers:
        return levels
    old, new = layer_codes(levels.layers), layer_codes(target)
    table = np.zeros(max(old[-1].highest, 0) + 1, np.uint16)
    for o, t in zip(old, new, strict=True):
        if o.null:
            table[o.null] = t.null
        if o.empty:
            table[o.empty] = t.empty
    defs = levels.defs
    if new[-1].highest:
        defs = np.zeros(levels.num_levels, np.uint16) if defs is None else table[defs]
    return Levels(target, levels.rep, defs, levels.num_levels)


def _visible_before(visible: np.ndarray | None, index: int) -> int:
    return index if visible is None else int(np.count_nonzero(visible[:index]))


def slice_rows(leaf: DecodedLeaf, a: int, b: int) -> DecodedLeaf:
    """Keep rows ``a`` to ``b`` (exclusive; ``0 <= a < b <=`` the decoded rows, counted from the
    first row start of ``leaf``)."""
    lv = leaf.levels
    if lv.rep is None:
        lo, hi = a, b
    else:
        starts = lv.row_starts()
        lo = int(starts[a])
        hi = int(starts[b]) if b < len(starts) else lv.num_levels
    if lo == 0 and hi == lv.num_levels:
        return leaf
    visible = lv.visible_mask()
    v_lo = _visible_before(visible, lo)
    v_hi = _visible_before(visible, hi)
    return DecodedLeaf(lv.slice(lo, hi), leaf.values.slice(v_lo, v_hi - v_lo))


def select_rows(leaf: DecodedLeaf, rows: np.ndarray) -> DecodedLeaf:
    """Keep the given rows (sorted, unique, counted from the first row start of ``leaf``)."""
    lv = leaf.levels
    rows = np.asarray(rows, dtype=np.int64)
    if len(rows) == 0:
        return DecodedLeaf(lv.slice(0, 0), leaf.values.slice(0, 0))
    num_rows = lv.num_levels if lv.rep is None else len(lv.row_starts())  # one level per row w/o rep
    if rows[-1] >= num_rows:
        raise CorruptFileError("<page>", f"row {int(rows[-1])} is beyond the {num_rows} decoded rows")
    if rows[-1] - rows[0] + 1 == len(rows):
        return slice_rows(leaf, int(rows[0]), int(rows[-1]) + 1)
    visible = lv.visible_mask()
    starts = lv.row_starts()
    is_start = np.zeros(lv.num_levels, bool)
    is_start[starts] = True
    row_of = np.cumsum(is_start) - 1
    want = np.zeros(len(starts), bool)
    want[rows] = True
    mask = want[np.maximum(row_of, 0)] & (row_of >= 0)
    value_mask = mask if visible is None else mask[visible]
    picked = Levels(
        lv.layers,
        None if lv.rep is None else lv.rep[mask],
        None if lv.defs is None else lv.defs[mask],
        int(np.count_nonzero(mask)),
    )
    return DecodedLeaf(picked, leaf.values.filter(pa.array(value_mask)))


def concat_leaves(parts: Sequence[DecodedLeaf]) -> DecodedLeaf:
    """Concatenate decoded pieces of one leaf column (pages may differ in layer meanings)."""
    if len({p.levels.layers for p in parts}) > 1:
        parts = [DecodedLeaf(canonicalize(p.levels), p.values) for p in parts]
    if len(parts) == 1:
        return parts[0]
    values = pa.concat_arrays([p.values for p in parts])
    return DecodedLeaf(Levels.concat([p.levels for p in parts]), values)


class _LeafCursor:
    """One leaf's levels and the depth-indexed codes along its path (outermost = 0)."""

    def __init__(self, leaf: DecodedLeaf) -> None:
        self.leaf = leaf
        lv = leaf.levels
        self.n = lv.num_levels
        self.rep = lv.rep if lv.rep is not None else np.zeros(self.n, np.uint16)
        self.defs = lv.defs if lv.defs is not None else np.zeros(self.n, np.uint16)
        self.codes = list(reversed(layer_codes(lv.layers)))  # outermost first
        self.layers = list(reversed(lv.layers))
        # rep code of each list layer, outermost first.
        self.rep_code = [0] * len(self.layers)
        c = max_rep(lv.layers)
        for d, layer in enumerate(self.layers):
            if is_list(layer):
                self.rep_code[d] = c
                c -= 1

    def threshold(self, depth: int) -> int:
        """Rep code of the nearest list layer at or below ``depth`` (0 if none)."""
        for d in range(depth, len(self.layers)):
            if self.rep_code[d]:
                return self.rep_code[d]
        return 0

    def element_mask(self, depth: int) -> np.ndarray:
        """Bool per level: does it start an element of the array at ``depth``?"""
        mask = self.defs <= self.codes[depth].highest
        thr = self.threshold(depth)
        if thr:
            mask &= self.rep >= thr
        return mask

    def elements(self, depth: int) -> np.ndarray:
        """Level indices that start an element of the array at ``depth``."""
        return np.flatnonzero(self.element_mask(depth))


def unshred(field: pa.Field | pa.DataType, leaves: Sequence[DecodedLeaf]) -> pa.Array:
    """Rebuild the rows of ``field`` from its leaf columns (pre-order), §2.7."""
    field = as_field(field)
    if len(leaves) == 1 and is_leaf_field(field) and leaves[0].levels.rep is None:
        return _unshred_flat(leaves[0])
    cursors = [_LeafCursor(leaf) for leaf in leaves]
    return _build(field, cursors, [c.leaf.levels.row_starts() for c in cursors], 0, True)


def _unshred_flat(leaf: DecodedLeaf) -> pa.Array:
    """A leaf column without repetition (one level and one value per row): what :func:`_build`
    makes of it, without its per-level arrays (row starts, zero levels)."""
    levels = leaf.levels
    values = leaf.values
    if len(values) != levels.num_levels:
        raise CorruptFileError("<page>", f"{levels.num_levels} visible levels but {len(values)} values")
    if levels.defs is None or not layer_codes(levels.layers)[-1].highest:
        return values
    valid = levels.defs == 0
    return _with_validity(values, None if valid.all() else valid)


def _build(
    field: pa.Field, cursors: list[_LeafCursor], sels: list[np.ndarray], depth: int, exact: bool
) -> pa.Array:
    """The array at ``depth`` whose elements start at the levels ``sels`` (one per leaf).

    ``exact``: the selected levels have no def code above those of this layer and the layers
    inside it (true for rows and for elements selected under a list; a struct's children also
    see the levels of slots null at the struct).
    """
    dtype = field.type
    lead, sel = cursors[0], sels[0]
    codes = lead.codes[depth]
    if is_leaf_field(field):
        values = lead.leaf.values
        if len(values) != len(sel):
            raise CorruptFileError("<page>", f"{len(sel)} visible levels but {len(values)} values")
        if exact and not codes.highest:  # no layer at or inside the leaf can be null
            return values
        valid = lead.defs[sel] == 0
        return _with_validity(values, None if valid.all() else valid)
    mask = None
    d: np.ndarray | None = None
    if exact:  # a selected element is null only at this very layer
        if codes.null:
            d = lead.defs[sel]
            null = d == codes.null
            if null.any():
                mask = pa.array(null)
    else:
        d = lead.defs[sel]
        valid = d <= codes.inner
        if codes.empty:
            valid |= d == codes.empty
        if not valid.all():
            mask = pa.array(~valid)
    if pa.types.is_struct(dtype):
        children = []
        pos = 0
        for i in range(dtype.num_fields):
            sub = dtype.field(i)
            k = count_leaves(sub)
            children.append(
                _build(sub, cursors[pos : pos + k], sels[pos : pos + k], depth + 1, exact and not codes.null)
            )
            pos += k
        return pa.StructArray.from_arrays(children, fields=list(dtype), mask=mask)
    large = pa.types.is_large_list(dtype)
    off_type = pa.int64() if large else pa.int32()
    item = child_field(field)
    if exact and len(cursors) == 1 and codes.highest == lead.codes[0].highest and is_leaf_field(item):
        offsets, child = _leaf_list(lead, sel, d, depth, large)
    else:
        lead_mask = lead.element_mask(depth + 1)
        child_sels = [np.flatnonzero(lead_mask)] + [c.elements(depth + 1) for c in cursors[1:]]
        child = _build(item, cursors, child_sels, depth + 1, True)
        # Offsets: how many child elements start before each selected level (a running count,
        # which is cheaper than a binary search per row), counted directly in the offset width.
        started = np.empty(lead.n + 1, np.int64 if large else np.int32)
        started[0] = 0
        np.cumsum(lead_mask, out=started[1:])
        offsets = np.empty(len(sel) + 1, started.dtype)
        np.take(started, sel, out=offsets[:-1])
        offsets[-1] = started[-1]
    off_arr = pa.array(offsets, off_type)
    if pa.types.is_map(dtype):
        return pa.MapArray.from_arrays(off_arr, child.field(0), child.field(1), type=dtype, mask=mask)
    cls = pa.LargeListArray if large else pa.ListArray
    return cls.from_arrays(off_arr, child, type=dtype, mask=mask)


def _leaf_list(
    lead: _LeafCursor, sel: np.ndarray, d: np.ndarray | None, depth: int, large: bool
) -> tuple[np.ndarray, pa.Array]:
    """Offsets and items of a list of leaf items whose elements start at ``sel``, when no layer
    outside the list owns a def code (so every level hidden from the items, a null or empty
    list, is itself one of the selected levels). Then a list's first item is its level minus the
    hidden levels before it, which needs a running count over the selected levels only."""
    codes = lead.codes[depth]
    if d is None:
        d = lead.defs[sel]
    hidden = d > codes.inner
    before = np.cumsum(hidden)
    offsets = np.empty(len(sel) + 1, np.int64)
    np.subtract(sel, before, out=offsets[:-1])
    offsets[:-1] += hidden
    num_items = lead.n - (int(before[-1]) if len(before) else 0)
    offsets[-1] = num_items
    leaf = lead.leaf.values
    if len(leaf) != num_items:
        raise CorruptFileError("<page>", f"{num_items} visible levels but {len(leaf)} values")
    if lead.codes[depth + 1].highest:  # items can be null: their validity comes from their levels
        items_at = np.flatnonzero(lead.element_mask(depth + 1))
        valid = lead.defs[items_at] == 0
        leaf = _with_validity(leaf, None if valid.all() else valid)
    return (offsets if large else offsets.astype(np.int32)), leaf


def _with_validity(values: pa.Array, valid: np.ndarray | None) -> pa.Array:
    """Attach validity to a decoded leaf array (which has no nulls of its own)."""
    if valid is None or pa.types.is_null(values.type):
        return values
    return with_validity(values, valid)


# ---------------------------------------------------------------------------------------------
# Level block compression (§2.8)


@dataclass(frozen=True)
class LevelCodec:
    """The page-wide choice for one level stream; compresses each chunk's slice."""

    kind: str  # "flat" | "inline" | "out_of_line" | "rle"
    width: int

    def compress(self, levels: np.ndarray) -> tuple[bytes, pb.CompressiveEncoding]:
        block = FixedWidthBlock.from_values(np.ascontiguousarray(levels, dtype=np.uint16))
        compressor: Any
        if self.kind == "flat":
            compressor = flat.FlatCompressor()
        elif self.kind == "inline":
            compressor = bitpacking.InlineBitpackingCompressor(LEVEL_BITS)
        elif self.kind == "out_of_line":
            compressor = bitpacking.OutOfLineBitpackingCompressor(LEVEL_BITS, bit_width=self.width)
        else:
            compressor = rle.RleCompressor()
        data, desc = compressor.compress_block(block)
        return bytes(data), desc

    def compress_slices(
        self, levels: np.ndarray, starts: np.ndarray, stops: np.ndarray
    ) -> tuple[ChunkSpans, pb.CompressiveEncoding | None]:
        """:meth:`compress` of ``levels[a:b]`` for every slice, as spans of one byte array
        (out-of-line bit-packing packs all slices in one call); the description is ``None``
        when there are no slices."""
        if self.kind == "out_of_line" and self.width > 0 and len(starts):
            values = np.ascontiguousarray(levels, dtype=np.uint16)
            return bitpacking.pack_out_of_line_slices(values, starts, stops, self.width)
        pairs = [
            self.compress(levels[a:b])
            for a, b in zip(np.asarray(starts).tolist(), np.asarray(stops).tolist(), strict=True)
        ]
        return ChunkSpans.of([data for data, _ in pairs]), (pairs[-1][1] if pairs else None)


def choose_level_codec(levels: np.ndarray, version: FileVersion) -> LevelCodec:
    """Pick the smallest level encoding for a page's levels (ties favour the simpler form)."""
    n = len(levels)
    width = int(levels.max()).bit_length() if n else 0
    raw = 2 * n
    if n <= INLINE_LEVEL_LIMIT:
        packed, kind = bitpacking.estimate_inline_size(levels.astype(np.uint16)), "inline"
    else:
        packed, kind = bitpacking.estimate_out_of_line_size(n, LEVEL_BITS, width), "out_of_line"
    best = LevelCodec("flat", 16) if raw < packed else LevelCodec(kind, width)
    best_size = min(raw, packed)
    if version is FileVersion.V2_2:
        # Runs split at 255 are at least the maximal runs: count those first (no index arrays).
        if RLE_HEADER_BYTES + 3 * rle.run_count(levels) >= best_size:
            return best
        rle_size = RLE_HEADER_BYTES + 3 * rle.split_run_count(levels)
        if rle_size < best_size:
            return LevelCodec("rle", 16)
    return best


def decode_levels(data: memoryview, desc: pb.CompressiveEncoding, num_levels: int) -> np.ndarray:
    """Decode one block-compressed level stream into ``num_levels`` u16 values."""
    block = decompressor_for(Context.BLOCK, desc).decompress(data, num_levels)
    if not isinstance(block, FixedWidthBlock) or block.bits_per_value != LEVEL_BITS:
        raise CorruptFileError("<page>", "rep/def levels did not decode to 16-bit values")
    return block.view("<u2")[:num_levels].astype(np.uint16)


def raw_levels(data: memoryview, num_levels: int) -> np.ndarray:
    """Raw little-endian u16 levels (constant layouts, 2.1)."""
    arr = np.frombuffer(data, dtype="<u2")
    if len(arr) < num_levels:
        raise CorruptFileError("<page>", "level buffer shorter than its level count")
    return arr[:num_levels].astype(np.uint16)
