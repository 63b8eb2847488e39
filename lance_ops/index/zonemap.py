"""ZONEMAP index files (pylance 14) and extending them over appended fragments.

``zonemap.lance``: one row per zone of ``rows_per_zone`` live rows (schema metadata, ``"8192"``)
of each fragment, columns ``min`` / ``max`` (the column's type; nulls and NaN left out of ``min``,
``max`` is NaN when the zone holds a NaN), ``null_count`` / ``nan_count`` (uint32),
``fragment_id``, ``zone_start`` (offset of the zone's first row) and ``zone_length`` (offsets
spanned, deleted rows included) as uint64. ``null_bitmap`` names the global buffer holding the
addresses of the null rows (a row-address map, see :mod:`lance_ops.index.treemap`).

e.g. a fragment of 20,000 rows with offsets 100..1099 deleted: zones ``(start 0, length 9192)``,
``(9192, 8192)``, ``(17384, 2616)``.

Zones are positional, so pylance never remaps a zone map after compaction (its fragment list keeps
the old ids); extension appends the zones of the new fragments.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_ops.errors import IndexCorruptError
from lance_ops.index.files import IndexFileData, IndexWriter, RemapResult, read_index_file
from lance_ops.index.treemap import decode_row_address_map, encode_row_address_map
from lance_ops.io.context import StorageContext
from lance_ops.table.manifest import IndexMetadata

__all__ = ["extend_zonemap", "zone_numbers"]

FILE = "zonemap.lance"


def _read(ctx: StorageContext, index: IndexMetadata) -> tuple[IndexFileData, int, int | None]:
    data = read_index_file(ctx, index, FILE)
    raw = data.meta("rows_per_zone", index, FILE)
    nulls_raw = data.metadata.get(b"null_bitmap")
    try:
        rows_per_zone = int(raw)
        nulls = int(nulls_raw) - 1 if nulls_raw is not None else None
    except ValueError as exc:
        raise IndexCorruptError(FILE, f"index {index.name!r}: bad zone map metadata: {exc}") from exc
    if rows_per_zone <= 0 or (nulls is not None and not 0 <= nulls < len(data.global_buffers)):
        raise IndexCorruptError(FILE, f"index {index.name!r}: bad zone map metadata")
    for name in ("min", "max", "null_count", "nan_count", "fragment_id", "zone_start", "zone_length"):
        data.column(name, index, FILE)
    return data, rows_per_zone, nulls


def zone_numbers(addrs: np.ndarray, rows_per_zone: int) -> np.ndarray:
    """The zone (0, 1, ...) of each live row at ``addrs`` (fragment after fragment, offsets
    ascending): a new zone at each fragment's first row and after every ``rows_per_zone`` rows."""
    fragment = addrs >> np.uint64(32)
    first_of_fragment = np.r_[True, fragment[1:] != fragment[:-1]] if addrs.size else np.zeros(0, bool)
    starts = np.flatnonzero(first_of_fragment)
    position = np.arange(addrs.size) - np.repeat(starts, np.diff(np.r_[starts, addrs.size]))
    return np.cumsum(first_of_fragment | (position % rows_per_zone == 0)) - 1


def zone_rows(zones: pa.Table, keep: np.ndarray) -> np.ndarray:
    """Row addresses of every row of the zones ``keep`` marks, in a table with ``fragment_id``,
    ``zone_start`` and ``zone_length`` columns (a zone map's or a bloom filter's)."""
    fragment = np.asarray(zones.column("fragment_id"), dtype=np.uint64)[keep]
    start = np.asarray(zones.column("zone_start"), dtype=np.int64)[keep]
    count = np.asarray(zones.column("zone_length"), dtype=np.int64)[keep]
    # every offset of every zone kept: the zone's start repeated, plus 0, 1, ... within the zone
    first = np.repeat(np.cumsum(count) - count, count)
    offsets = np.repeat(start, count) + (np.arange(int(count.sum())) - first)
    return (np.repeat(fragment, count) << np.uint64(32)) | offsets.astype(np.uint64)


def _zones(values: pa.Array, addrs: np.ndarray, rows_per_zone: int, schema: pa.Schema) -> pa.Table:
    """Zone rows of live rows ``values`` at ``addrs`` (fragment after fragment, offsets ascending)."""
    fragment = (addrs >> np.uint64(32)).astype(np.int64)
    offset = (addrs & np.uint64(0xFFFFFFFF)).astype(np.int64)
    zone = zone_numbers(addrs, rows_per_zone)
    is_nan = pc.is_nan(values).fill_null(False) if pa.types.is_floating(values.type) else None
    plain = values if is_nan is None else pc.if_else(is_nan, pa.scalar(None, values.type), values)
    table = pa.table(
        {
            "zone": pa.array(zone),
            "v": plain,
            "null": pa.array(np.asarray(values.is_null(), dtype=np.int64)),
            "nan": pa.array(
                np.zeros(addrs.size, np.int64) if is_nan is None else np.asarray(is_nan, dtype=np.int64)
            ),
            "fragment": pa.array(fragment),
            "offset": pa.array(offset),
        }
    )
    grouped = table.group_by("zone", use_threads=False).aggregate(
        [
            ("v", "min"),
            ("v", "max"),
            ("null", "sum"),
            ("nan", "sum"),
            ("fragment", "min"),
            ("offset", "min"),
            ("offset", "max"),
        ]
    )
    grouped = grouped.take(pc.sort_indices(grouped, [("zone", "ascending")]))
    nan_count = np.asarray(grouped["nan_sum"], dtype=np.int64)
    maximum = grouped["v_max"].combine_chunks()
    if is_nan is not None:
        maximum = pc.if_else(pa.array(nan_count > 0), pa.scalar(float("nan"), values.type), maximum)
    start = np.asarray(grouped["offset_min"], dtype=np.int64)
    columns = {
        "min": grouped["v_min"],
        "max": maximum,
        "null_count": grouped["null_sum"],
        "nan_count": pa.array(nan_count),
        "fragment_id": grouped["fragment_min"],
        "zone_start": pa.array(start),
        "zone_length": pa.array(np.asarray(grouped["offset_max"], dtype=np.int64) + 1 - start),
    }
    return pa.table([pa.chunked_array(columns[f.name]).cast(f.type) for f in schema], schema=schema)


def extend_zonemap(
    ctx: StorageContext,
    template: IndexMetadata,
    merged: Sequence[IndexMetadata],
    values: pa.Array,
    addrs: np.ndarray,
    base: tuple[IndexFileData, int, int | None] | None = None,
) -> RemapResult:
    """One segment with the zones of the segments ``merged`` and of the new rows ``values`` at
    row addresses ``addrs`` (``merged`` empty: a delta segment of the new zones only; ``base``:
    the empty file, zone size and null-buffer position of a new index instead of the template's)."""
    data, rows_per_zone, nulls = base if base is not None else _read(ctx, template)
    order = np.argsort(addrs, kind="stable")
    values, addrs = values.take(pa.array(order)), np.asarray(addrs, dtype=np.uint64)[order]
    parts, null_rows = [], [addrs[np.asarray(values.is_null(), dtype=bool)]]
    for segment in merged:
        old, _, old_nulls = _read(ctx, segment)
        parts.append(old.table.cast(data.schema))
        if old_nulls is not None:
            null_rows.append(decode_row_address_map(old.global_buffers[old_nulls]))
    parts.append(_zones(values, addrs, rows_per_zone, data.schema))
    table = pa.concat_tables(parts).combine_chunks()
    table = table.take(pc.sort_indices(table, [("fragment_id", "ascending"), ("zone_start", "ascending")]))
    buffers = list(data.global_buffers)
    if nulls is not None:
        buffers[nulls] = encode_row_address_map(np.unique(np.concatenate(null_rows)))
    writer = IndexWriter(ctx)
    writer.write(FILE, table, version=data.version, global_buffers=buffers)
    return writer.result(template)
