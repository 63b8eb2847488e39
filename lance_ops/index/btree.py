"""BTREE index files (pylance 14) and their remapping.

``page_data.lance``: columns ``values`` (the indexed column's type) and ``ids`` (uint64 row
addresses), every row of the index sorted by value with nulls first; page ``i`` is rows
``[i * batch_size, (i + 1) * batch_size)``.

``page_lookup.lance``: one row per page, ``min`` / ``max`` (first / last value of the page; null
when the page starts with nulls), ``null_count`` (uint32), ``page_idx`` (uint32); schema metadata
``batch_size`` (``"4096"``) and ``range_partitioned`` (``"false"``).

e.g. values ``[null, 3, 3, 9]`` with batch size 2: pages ``[null, 3]`` and ``[3, 9]``, lookup rows
``(null, 3, 1, 0)`` and ``(3, 9, 0, 1)``.

A remap drops removed rows, so pages are cut again at multiples of ``batch_size`` and the lookup is
rebuilt (pylance 14 does the same: 10,000 rows in 3 pages, a third deleted, come back as 2 pages).
Range-partitioned BTREEs (several page files) are not handled.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_ops.errors import IndexCorruptError, UnsupportedIndexTypeError
from lance_ops.index.files import IndexFileData, IndexWriter, RemapResult, read_index_file
from lance_ops.index.mapping import RowAddressMapping
from lance_ops.io.context import StorageContext
from lance_ops.table.manifest import IndexMetadata

__all__ = ["PAGES", "LOOKUP", "merge_btree", "remap_btree", "write_btree"]

PAGES = "page_data.lance"
LOOKUP = "page_lookup.lance"


def _read(ctx: StorageContext, index: IndexMetadata) -> tuple[IndexFileData, IndexFileData, int]:
    lookup = read_index_file(ctx, index, LOOKUP)
    if lookup.metadata.get(b"range_partitioned", b"false") != b"false":
        raise UnsupportedIndexTypeError(
            f"range-partitioned BTREE index {index.name!r} cannot be rewritten", index.name
        )
    raw = lookup.meta("batch_size", index, LOOKUP)
    try:
        batch_size = int(raw)
    except ValueError:
        batch_size = 0
    if batch_size <= 0:
        raise IndexCorruptError(LOOKUP, f"index {index.name!r}: bad batch_size {raw!r}")
    pages = read_index_file(ctx, index, PAGES)
    pages.column("values", index, PAGES)
    pages.column("ids", index, PAGES)
    return pages, lookup, batch_size


def _lookup_table(values: pa.Array, batch_size: int, schema: pa.Schema) -> pa.Table:
    """One lookup row per page of ``values`` (sorted, nulls first)."""
    n = len(values)
    starts = np.arange(0, n, batch_size, dtype=np.int64)
    ends = np.minimum(starts + batch_size, n)
    nulls = np.asarray(values.is_null(), dtype=np.int64) if n else np.zeros(0, np.int64)
    null_counts = np.add.reduceat(nulls, starts) if n else np.zeros(0, np.int64)
    columns = {
        "min": values.take(pa.array(starts)),
        "max": values.take(pa.array(ends - 1)),
        "null_count": pa.array(null_counts.astype(np.uint32)),
        "page_idx": pa.array(np.arange(starts.size, dtype=np.uint32)),
    }
    return pa.table([columns[f.name].cast(f.type) for f in schema], schema=schema)


def write_btree(
    writer: IndexWriter,
    values: pa.Array,
    ids: np.ndarray,
    pages: IndexFileData,
    lookup: IndexFileData,
    batch_size: int,
) -> None:
    """Write sorted ``values`` / ``ids`` with the schemas (and metadata) of the old files."""
    data = pa.table(
        [values.cast(pages.schema.field("values").type), pa.array(ids, pa.uint64())], schema=pages.schema
    )
    writer.write(PAGES, data, version=pages.version, global_buffers=pages.global_buffers)
    writer.write(
        LOOKUP,
        _lookup_table(data.column("values").combine_chunks(), batch_size, lookup.schema),
        version=lookup.version,
        global_buffers=lookup.global_buffers,
    )


def remap_btree(ctx: StorageContext, index: IndexMetadata, mapping: RowAddressMapping) -> RemapResult:
    pages, lookup, batch_size = _read(ctx, index)
    values = pages.table.column("values").combine_chunks()
    ids, kept = mapping.apply(np.asarray(pages.table.column("ids").combine_chunks(), dtype=np.uint64))
    writer = IndexWriter(ctx)
    write_btree(writer, values.filter(pa.array(kept)), ids, pages, lookup, batch_size)
    return writer.result(index)


def _fast_order(values: pa.Array, ids: np.ndarray) -> np.ndarray | None:
    """:func:`_value_order` for an integer or float column whose non-null values are all distinct
    (the common BTREE key): one unstable numpy sort, whose order is then the only one; ``None``
    when the type or the values (ties, several NaNs) need the general sort."""
    dtype = values.type
    if not (pa.types.is_integer(dtype) or pa.types.is_floating(dtype)) or pa.types.is_float16(dtype):
        return None
    positions = nulls = None
    if values.null_count:
        valid = np.asarray(values.is_valid(), dtype=bool)
        positions, nulls = np.flatnonzero(valid), np.flatnonzero(~valid)
        keys = np.asarray(values.fill_null(0))[positions]
    else:
        keys = np.asarray(values)
    order = np.argsort(keys)
    ordered = keys[order]
    if ordered.size > 1 and bool(np.any(ordered[1:] == ordered[:-1])):
        return None
    if pa.types.is_floating(dtype) and np.count_nonzero(np.isnan(ordered)) > 1:
        return None
    if positions is None or nulls is None:
        return order
    nulls = nulls[np.argsort(ids[nulls], kind="stable")]
    return np.concatenate([nulls, positions[order]])


def _value_order(table: pa.Table) -> np.ndarray:
    """Row order of pylance's pages: nulls first, then values ascending with NaN last (greatest),
    ties by row id. (Arrow's own null placement would put NaN with the nulls.)"""
    values = table.column("values").combine_chunks()
    fast = _fast_order(values, np.asarray(table.column("ids").combine_chunks(), dtype=np.uint64))
    if fast is not None:
        return fast
    order = np.asarray(
        pc.sort_indices(table, sort_keys=[("values", "ascending", "at_end"), ("ids", "ascending")])
    )
    null = np.asarray(values.is_null(), dtype=bool)[order]
    return np.concatenate([order[null], order[~null]])


def merge_btree(
    ctx: StorageContext,
    template: IndexMetadata,
    merged: Sequence[IndexMetadata],
    new_values: pa.Array,
    new_ids: np.ndarray,
    base: tuple[IndexFileData, IndexFileData, int] | None = None,
) -> RemapResult:
    """One segment over the rows of the segments ``merged`` and ``new_values`` at ``new_ids``
    (``merged`` empty: a delta segment of the new rows only), with ``template``'s file schemas and
    page size (or those of ``base``, empty page and lookup files and the page size, for a new
    index). pylance's optimize_indices does the same: sort everything by value again."""
    pages, lookup, batch_size = base if base is not None else _read(ctx, template)
    value_type = pages.schema.field("values").type
    try:
        parts = [pa.table({"values": new_values.cast(value_type), "ids": pa.array(new_ids, pa.uint64())})]
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise IndexCorruptError(
            PAGES, f"index {template.name!r}: new values do not fit {value_type}: {exc}"
        ) from exc
    for segment in merged:
        # the template is usually the newest segment merged: its pages are read once
        held = pages if base is None and segment.uuid == template.uuid else _read(ctx, segment)[0]
        old = held.table.select(["values", "ids"])
        parts.append(old.cast(parts[0].schema))
    table = pa.concat_tables(parts).combine_chunks()
    table = table.take(_value_order(table))
    writer = IndexWriter(ctx)
    write_btree(
        writer,
        table.column("values").combine_chunks(),
        np.asarray(table.column("ids").combine_chunks(), dtype=np.uint64),
        pages,
        lookup,
        batch_size,
    )
    return writer.result(template)
