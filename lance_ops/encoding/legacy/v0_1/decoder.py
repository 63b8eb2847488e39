"""Reading one top-level field of a legacy (0.1) file, batch by batch, nested fields by field id.

Every field of the file schema (nested ones included, fixed-size lists counting as one) has a
run in the page table: one ``(position, length)`` per batch. Which encoding a page uses follows
from the field's Arrow type, looked up in :data:`DECODERS`:

=================  ======================================================================
layout             page content
=================  ======================================================================
``plain``          fixed-stride values (:mod:`.plain`); length = values in the batch
``var_binary``     string / binary values and their positions (:mod:`.binary`)
``dictionary``     plain keys; values stored once per file (:mod:`.dictionary`)
``list``           plain int32 (list) or int64 (large list) offsets into the child field's
                   values of the same batch, one more than lists (length = lists + 1); no
                   validity (null lists read empty)
``struct``         no page (the run is ``(0, 0)``); the children are read by their field ids,
                   no validity (a null struct reads as its children's values)
``null``           no data; length = rows in the batch
=================  ======================================================================

Rows are addressed by batch: ``batch_offsets`` (``[0, rows in batch 0, ...]``) maps file rows to
``(batch, row in batch)``. Taken rows are read as short ranges (rows closer than
:data:`TAKE_GAP_ROWS` share one range) and picked out with ``take``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from lance_ops.encoding.api import Fetch, FieldDecoder
from lance_ops.encoding.legacy.v0_1.binary import decode_binary
from lance_ops.encoding.legacy.v0_1.dictionary import decode_dictionary, decode_dictionary_values
from lance_ops.encoding.legacy.v0_1.plain import decode_plain
from lance_ops.errors import CorruptFileError, UnsupportedFeatureError

TAKE_GAP_ROWS = 64


@dataclass(frozen=True)
class LegacyField:
    """One field of the file schema: its id, storage type and children (struct fields, list item)."""

    id: int
    data_type: pa.DataType
    nullable: bool
    children: tuple[LegacyField, ...] = ()
    dictionary: tuple[int, int] | None = None  # (offset, number of values) of dictionary values


@dataclass(frozen=True)
class PageTable:
    """``entries[field_id - min_field_id, batch] = (position, length)``, int64."""

    entries: np.ndarray
    min_field_id: int

    def page(self, field_id: int, batch: int) -> tuple[int, int]:
        index = field_id - self.min_field_id
        if not 0 <= index < self.entries.shape[0] or not 0 <= batch < self.entries.shape[1]:
            raise CorruptFileError("<page table>", f"no page for field {field_id} in batch {batch}")
        position, length = self.entries[index, batch]
        return int(position), int(length)


@dataclass
class _Batch:
    """What decoding one batch needs: the fetch, the page table, the dictionaries read so far."""

    fetch: Fetch
    pages: PageTable
    batch: int
    dictionaries: dict[int, pa.Array] = field(default_factory=dict)

    def page(self, node: LegacyField, stop: int) -> int:
        """Position of ``node``'s page in this batch, checking that it holds ``stop`` values."""
        position, length = self.pages.page(node.id, self.batch)
        if stop > length:
            raise CorruptFileError(
                "<page>", f"field {node.id} batch {self.batch} has {length} values, {stop} needed"
            )
        return position


Decoder = Callable[[_Batch, LegacyField, int, int], pa.Array]


def _plain(ctx: _Batch, node: LegacyField, start: int, stop: int) -> pa.Array:
    return decode_plain(node.data_type, ctx.page(node, stop), start, stop, ctx.fetch)


def _var_binary(ctx: _Batch, node: LegacyField, start: int, stop: int) -> pa.Array:
    return decode_binary(node.data_type, node.nullable, ctx.page(node, stop), start, stop, ctx.fetch)


def _dictionary(ctx: _Batch, node: LegacyField, start: int, stop: int) -> pa.Array:
    values = ctx.dictionaries.get(node.id)
    if values is None:
        if node.dictionary is None:
            raise CorruptFileError("<schema>", f"dictionary field {node.id} has no dictionary values")
        offset, length = node.dictionary
        values = decode_dictionary_values(node.data_type.value_type, offset, length, ctx.fetch)
        ctx.dictionaries[node.id] = values
    return decode_dictionary(node.data_type, values, ctx.page(node, stop), start, stop, ctx.fetch)


def _list(ctx: _Batch, node: LegacyField, start: int, stop: int) -> pa.Array:
    large = pa.types.is_large_list(node.data_type)
    offset_type = pa.int64() if large else pa.int32()
    position = ctx.page(node, stop + 1)
    positions = decode_plain(offset_type, position, start, stop + 1, ctx.fetch).to_numpy()
    if (np.diff(positions) < 0).any():
        raise CorruptFileError("<page>", f"list offsets of field {node.id} are not ascending")
    (child,) = node.children
    values = decode_rows(ctx, child, int(positions[0]), int(positions[-1]))
    offsets = pa.array(positions - positions[0], type=offset_type)
    array_class = pa.LargeListArray if large else pa.ListArray
    return array_class.from_arrays(offsets, values, type=node.data_type)


def _struct(ctx: _Batch, node: LegacyField, start: int, stop: int) -> pa.Array:
    children = [decode_rows(ctx, child, start, stop) for child in node.children]
    return pa.StructArray.from_buffers(node.data_type, stop - start, [None], children=children)


def _null(ctx: _Batch, node: LegacyField, start: int, stop: int) -> pa.Array:
    ctx.page(node, stop)
    return pa.nulls(stop - start)


DECODERS: dict[str, Decoder] = {
    "plain": _plain,
    "var_binary": _var_binary,
    "dictionary": _dictionary,
    "list": _list,
    "struct": _struct,
    "null": _null,
}


def layout_of(data_type: pa.DataType) -> str:
    """The page layout a legacy file uses for ``data_type`` (a key of :data:`DECODERS`)."""
    if pa.types.is_null(data_type):
        return "null"
    if pa.types.is_struct(data_type):
        return "struct"
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type):
        return "list"
    if pa.types.is_dictionary(data_type):
        return "dictionary"
    if (
        pa.types.is_string(data_type)
        or pa.types.is_binary(data_type)
        or pa.types.is_large_string(data_type)
        or pa.types.is_large_binary(data_type)
    ):
        return "var_binary"
    if pa.types.is_fixed_size_list(data_type) or _has_width(data_type):
        return "plain"
    raise UnsupportedFeatureError(f"legacy (0.1) files cannot hold {data_type}")


def _has_width(data_type: pa.DataType) -> bool:
    try:
        return int(data_type.bit_width) > 0
    except ValueError:
        return False


def decode_rows(ctx: _Batch, node: LegacyField, start: int, stop: int) -> pa.Array:
    """Rows ``start..stop`` of ``node`` within the batch of ``ctx``."""
    return DECODERS[layout_of(node.data_type)](ctx, node, start, stop)


class LegacyFieldDecoder(FieldDecoder):
    """Rows of one top-level field of a legacy file, across its batches."""

    def __init__(self, node: LegacyField, pages: PageTable, batch_offsets: np.ndarray) -> None:
        layout_of(node.data_type)
        self._node = node
        self._pages = pages
        self._offsets = batch_offsets
        self._dictionaries: dict[int, pa.Array] = {}

    def _batch(self, fetch: Fetch, batch: int) -> _Batch:
        return _Batch(fetch, self._pages, batch, self._dictionaries)

    def read(self, fetch: Fetch, rows: range | np.ndarray) -> pa.Array:
        offsets = self._offsets
        parts: list[pa.Array] = []
        if isinstance(rows, range):
            first = int(np.searchsorted(offsets, rows.start, side="right")) - 1
            last = int(np.searchsorted(offsets, rows.stop, side="left"))
            for batch in range(first, last):
                base = int(offsets[batch])
                start = max(rows.start, base) - base
                stop = min(rows.stop, int(offsets[batch + 1])) - base
                parts.append(decode_rows(self._batch(fetch, batch), self._node, start, stop))
        else:
            batches = np.searchsorted(offsets, rows, side="right") - 1
            splits = np.flatnonzero((np.diff(rows) > TAKE_GAP_ROWS) | (np.diff(batches) != 0)) + 1
            for cluster in np.split(rows, splits):
                batch = int(batches[np.searchsorted(rows, cluster[0])])
                local = cluster - offsets[batch]
                start, stop = int(local[0]), int(local[-1]) + 1
                array = decode_rows(self._batch(fetch, batch), self._node, start, stop)
                parts.append(array if stop - start == len(local) else array.take(pa.array(local - start)))
        return pa.concat_arrays(parts) if len(parts) != 1 else parts[0]
