"""The 2.1 / 2.2 field decoder: rows of one top-level field from its leaf columns' pages.

:class:`StructuralFieldDecoder` locates the pages holding the requested rows, reads each leaf
column through the page-reader registry (:mod:`.structural.page`, keyed by the ``PageLayout``
oneof) and rebuilds the field from the leaves' levels (:mod:`.structural.repdef`). It imports
nothing of the writing side (:mod:`.compression_strategy`, :mod:`.field_encoder`).
:func:`make_field_decoder` is the file layer's entry point.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from lance_ops.encoding.api import Fetch, FieldDecoder, FileVersion, PageInfo
from lance_ops.encoding.columns import check_structural, leaf_fields
from lance_ops.encoding.structural import empty_struct
from lance_ops.encoding.structural.page import PageReader, page_reader
from lance_ops.encoding.structural.repdef import DecodedLeaf, concat_leaves, is_leaf_field, unshred
from lance_ops.errors import CorruptFileError, LanceOpsError


class StructuralFieldDecoder(FieldDecoder):
    """Reads rows of one top-level field from its leaf columns' pages."""

    def __init__(self, field: pa.Field, columns: Sequence[Sequence[PageInfo]], version: FileVersion) -> None:
        check_structural(version)
        self.field = field
        self.version = version
        self.leaves, self._depths = _field_shape(field)
        if len(columns) != len(self.leaves):
            raise CorruptFileError(
                "<file>", f"field {field.name!r} needs {len(self.leaves)} columns, got {len(columns)}"
            )
        self.columns = [list(pages) for pages in columns]
        # Per column: first row and end row of every page, for locating requested rows.
        self._bounds = [
            (
                np.array([p.first_row for p in pages], np.int64),
                np.array([p.first_row + p.num_rows for p in pages], np.int64),
            )
            for pages in self.columns
        ]
        self._readers: dict[tuple[int, int], PageReader] = {}

    def _reader(self, col: int, page: int) -> PageReader:
        key = (col, page)
        if key not in self._readers:
            info = self.columns[col][page]
            self._readers[key] = page_reader(info, self.leaves[col].type, self.version)
        return self._readers[key]

    def _read_column(self, fetch: Fetch, col: int, rows: np.ndarray) -> DecodedLeaf:
        if empty_struct.is_empty_struct(self.leaves[col].type):  # nothing stored but rows
            return empty_struct.decoded(len(rows), self._depths[col])
        return concat_leaves(
            [self._reader(col, page).read(fetch, local) for page, local in self.page_rows(col, rows)]
        )

    def page_rows(self, col: int, rows: np.ndarray) -> list[tuple[int, np.ndarray]]:
        """The pages of leaf column ``col`` holding some of the (sorted) ``rows``, each with its
        page-relative rows; :class:`CorruptFileError` when the pages do not cover them."""
        firsts, ends = self._bounds[col]
        if len(firsts) == 1:
            # One page (small files): no page lookup; rows are sorted, so the ends bound them all.
            if len(rows) and (int(rows[0]) < int(firsts[0]) or int(rows[-1]) >= int(ends[0])):
                raise CorruptFileError(
                    "<file>", f"rows of field {self.field.name!r} are not covered by its pages"
                )
            return [(0, rows - firsts[0])]
        which = np.searchsorted(firsts, rows, side="right") - 1
        if len(rows) and (which.min() < 0 or (rows >= ends[which]).any()):
            raise CorruptFileError(
                "<file>", f"rows of field {self.field.name!r} are not covered by its pages"
            )
        cuts = (np.flatnonzero(np.diff(which)) + 1).tolist()  # rows are sorted: one slice per page
        return [
            (int(which[lo]), rows[lo:hi] - firsts[int(which[lo])])
            for lo, hi in zip([0, *cuts], [*cuts, len(rows)], strict=True)
        ]

    def _read_span(self, fetch: Fetch, col: int, start: int, stop: int) -> DecodedLeaf:
        """Rows ``start`` to ``stop`` (exclusive, ``start < stop``) of leaf column ``col``, page by
        page as spans (no array of row numbers)."""
        if empty_struct.is_empty_struct(self.leaves[col].type):
            return empty_struct.decoded(stop - start, self._depths[col])
        firsts, ends = self._bounds[col]
        parts = []
        at = start
        while at < stop:
            page = int(np.searchsorted(firsts, at, side="right")) - 1
            if page < 0 or at >= int(ends[page]):
                raise CorruptFileError(
                    "<file>", f"rows of field {self.field.name!r} are not covered by its pages"
                )
            first, hi = int(firsts[page]), min(stop, int(ends[page]))
            parts.append(self._reader(col, page).read_span(fetch, at - first, hi - first))
            at = hi
        return concat_leaves(parts)

    def read(self, fetch: Fetch, rows: range | np.ndarray) -> pa.Array:
        """Rows in the order given; unsorted or repeated indices are read once and reordered."""
        if isinstance(rows, range) and rows.step == 1 and len(rows):
            return self._rebuild(
                [self._read_span(fetch, c, rows.start, rows.stop) for c in range(len(self.leaves))]
            )
        if isinstance(rows, range):
            idx = np.arange(rows.start, rows.stop, rows.step or 1, dtype=np.int64)
        else:
            idx = np.asarray(rows, dtype=np.int64)
        if len(idx) == 0:
            return pa.array([], self.field.type)
        order = None
        if len(idx) > 1 and bool((idx[1:] <= idx[:-1]).any()):
            idx, order = np.unique(idx, return_inverse=True)
        out = self._rebuild([self._read_column(fetch, col, idx) for col in range(len(self.leaves))])
        return out if order is None else out.take(pa.array(order.reshape(-1)))

    def _rebuild(self, leaves: list[DecodedLeaf]) -> pa.Array:
        """The field's array from its decoded leaves."""
        try:
            return unshred(self.field, leaves)
        except LanceOpsError:
            raise
        except (IndexError, ValueError, pa.ArrowException) as exc:
            raise CorruptFileError(
                "<file>", f"field {self.field.name!r}: levels do not rebuild: {exc}"
            ) from exc


#: The leaves and their depths of fields met lately, by the field object (a file reader hands the
#: same storage field objects to the decoders of every file sharing its schema).
_FIELD_SHAPES_KEPT = 256
_field_shapes: dict[int, tuple[pa.Field, list[pa.Field], list[int]]] = {}
_field_shapes_lock = threading.Lock()


def _field_shape(field: pa.Field) -> tuple[list[pa.Field], list[int]]:
    with _field_shapes_lock:
        found = _field_shapes.get(id(field))
    if found is not None and found[0] is field:
        return found[1], found[2]
    leaves, depths = leaf_fields(field), _leaf_depths(field, 0)
    with _field_shapes_lock:
        _field_shapes[id(field)] = (field, leaves, depths)
        while len(_field_shapes) > _FIELD_SHAPES_KEPT:
            del _field_shapes[next(iter(_field_shapes))]
    return leaves, depths


def _leaf_depths(field: pa.Field, depth: int) -> list[int]:
    """Layers above each leaf of ``field`` (as :func:`leaf_fields` lists them); a map counts as
    a list of structs."""
    dtype = field.type
    if is_leaf_field(field):
        return [depth]
    if pa.types.is_struct(dtype):
        return [d for i in range(dtype.num_fields) for d in _leaf_depths(dtype.field(i), depth + 1)]
    if pa.types.is_map(dtype):
        return _leaf_depths(dtype.key_field, depth + 2) + _leaf_depths(dtype.item_field, depth + 2)
    return _leaf_depths(dtype.value_field, depth + 1)


def make_field_decoder(
    field: pa.Field, columns: Sequence[Sequence[PageInfo]], version: FileVersion
) -> FieldDecoder:
    return StructuralFieldDecoder(field, columns, version)
