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
``(batch, row in batch)``. A read becomes segments ``(batch, start, stop)`` -- one per batch for a
row range; for taken rows, short ranges (rows closer than :data:`TAKE_GAP_ROWS` share one) then
picked out with ``take`` -- and every level of the field decodes all segments with one fetch
(two for var-binary), so the number of reads does not grow with the number of batches.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from lance_ops.encoding.api import Fetch, FieldDecoder
from lance_ops.encoding.legacy.v0_1.binary import decode_binary, is_var_binary
from lance_ops.encoding.legacy.v0_1.dictionary import decode_dictionary, decode_dictionary_values
from lance_ops.encoding.legacy.v0_1.plain import Span, decode_plain
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


# (batch, first row, end row) of one read within one batch.
Segment = tuple[int, int, int]


@dataclass
class _Reads:
    """What decoding needs: the fetch, the page table, the dictionaries read so far."""

    fetch: Fetch
    pages: PageTable
    dictionaries: dict[int, pa.Array] = field(default_factory=dict)

    def spans(self, node: LegacyField, segments: Sequence[Segment], extra: int = 0) -> list[Span]:
        """``(page position, start, stop)`` of ``node`` for each segment, checking each page holds
        ``stop + extra`` values."""
        out = []
        for batch, start, stop in segments:
            position, length = self.pages.page(node.id, batch)
            if stop + extra > length:
                raise CorruptFileError(
                    "<page>", f"field {node.id} batch {batch} has {length} values, {stop + extra} needed"
                )
            out.append((position, start, stop))
        return out


Decoder = Callable[[_Reads, LegacyField, Sequence[Segment]], list[pa.Array]]


def _plain(reads: _Reads, node: LegacyField, segments: Sequence[Segment]) -> list[pa.Array]:
    return decode_plain(node.data_type, reads.spans(node, segments), reads.fetch)


def _var_binary(reads: _Reads, node: LegacyField, segments: Sequence[Segment]) -> list[pa.Array]:
    return decode_binary(node.data_type, node.nullable, reads.spans(node, segments), reads.fetch)


def _dictionary(reads: _Reads, node: LegacyField, segments: Sequence[Segment]) -> list[pa.Array]:
    values = reads.dictionaries.get(node.id)
    if values is None:
        if node.dictionary is None:
            raise CorruptFileError("<schema>", f"dictionary field {node.id} has no dictionary values")
        offset, length = node.dictionary
        values = decode_dictionary_values(node.data_type.value_type, offset, length, reads.fetch)
        reads.dictionaries[node.id] = values
    return decode_dictionary(node.data_type, values, reads.spans(node, segments), reads.fetch)


def _list(reads: _Reads, node: LegacyField, segments: Sequence[Segment]) -> list[pa.Array]:
    large = pa.types.is_large_list(node.data_type)
    offset_type = pa.int64() if large else pa.int32()
    spans = [(position, start, stop + 1) for position, start, stop in reads.spans(node, segments, extra=1)]
    positions = [array.to_numpy() for array in decode_plain(offset_type, spans, reads.fetch)]
    if any(p[0] < 0 or (np.diff(p) < 0).any() for p in positions):
        raise CorruptFileError("<page>", f"list offsets of field {node.id} are not ascending")
    (child,) = node.children
    child_segments = [
        (batch, int(p[0]), int(p[-1])) for (batch, _, _), p in zip(segments, positions, strict=True)
    ]
    values = decode_segments(reads, child, child_segments)
    array_class = pa.LargeListArray if large else pa.ListArray
    return [
        array_class.from_arrays(pa.array(p - p[0], type=offset_type), v, type=node.data_type)
        for p, v in zip(positions, values, strict=True)
    ]


def _struct(reads: _Reads, node: LegacyField, segments: Sequence[Segment]) -> list[pa.Array]:
    children = [decode_segments(reads, child, segments) for child in node.children]
    return [
        pa.StructArray.from_buffers(node.data_type, stop - start, [None], children=[c[i] for c in children])
        for i, (_, start, stop) in enumerate(segments)
    ]


def _null(reads: _Reads, node: LegacyField, segments: Sequence[Segment]) -> list[pa.Array]:
    reads.spans(node, segments)
    return [pa.nulls(stop - start) for _, start, stop in segments]


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
    if is_var_binary(data_type):
        return "var_binary"
    if pa.types.is_fixed_size_list(data_type) or _has_width(data_type):
        return "plain"
    raise UnsupportedFeatureError(f"legacy (0.1) files cannot hold {data_type}")


def _has_width(data_type: pa.DataType) -> bool:
    try:
        return int(data_type.bit_width) > 0
    except ValueError:
        return False


def decode_segments(reads: _Reads, node: LegacyField, segments: Sequence[Segment]) -> list[pa.Array]:
    """Rows ``start..stop`` of ``node`` in ``batch`` for each segment; each level of the field
    issues one fetch (two for var-binary) for all the segments together."""
    return DECODERS[layout_of(node.data_type)](reads, node, segments)


class LegacyFieldDecoder(FieldDecoder):
    """Rows of one top-level field of a legacy file, across its batches."""

    def __init__(self, node: LegacyField, pages: PageTable, batch_offsets: np.ndarray) -> None:
        layout_of(node.data_type)
        self._node = node
        self._pages = pages
        self._offsets = batch_offsets
        self._dictionaries: dict[int, pa.Array] = {}

    def read(self, fetch: Fetch, rows: range | np.ndarray) -> pa.Array:
        offsets = self._offsets
        reads = _Reads(fetch, self._pages, self._dictionaries)
        if isinstance(rows, range):
            first = int(np.searchsorted(offsets, rows.start, side="right")) - 1
            last = int(np.searchsorted(offsets, rows.stop, side="left"))
            segments = []
            for batch in range(first, last):
                base = int(offsets[batch])
                segments.append(
                    (batch, max(rows.start, base) - base, min(rows.stop, int(offsets[batch + 1])) - base)
                )
            parts = decode_segments(reads, self._node, segments)
        else:
            batches = np.searchsorted(offsets, rows, side="right") - 1
            splits = np.flatnonzero((np.diff(rows) > TAKE_GAP_ROWS) | (np.diff(batches) != 0)) + 1
            pieces = np.split(rows - offsets[batches], splits)
            firsts = batches[np.concatenate([[0], splits])].tolist()
            segments = [
                (batch, int(local[0]), int(local[-1]) + 1)
                for batch, local in zip(firsts, pieces, strict=True)
            ]
            parts = [
                array if len(array) == len(local) else array.take(pa.array(local - local[0]))
                for array, local in zip(decode_segments(reads, self._node, segments), pieces, strict=True)
            ]
        return pa.concat_arrays(parts) if len(parts) != 1 else parts[0]
