"""BLOOMFILTER index files (pylance 14): building, extending and probing them.

``bloomfilter.lance``: one row per zone of ``number_of_items`` live rows of a fragment (zones as
ZONEMAP's, :func:`lance_ops.index.zonemap.zone_numbers`): ``fragment_id``, ``zone_start`` (offset of
the zone's first row), ``zone_length`` (offsets spanned, deleted rows included) as uint64,
``has_null`` and ``bloom_filter_data`` (the zone's split block bloom filter,
:mod:`lance_ops.index.sbbf`, of its non-null values). Schema metadata ``bloomfilter_item`` and
``bloomfilter_probability`` (the build parameters as text, ``"8192"`` / ``"0.00057"`` by default)
and ``null_bitmap``, the global buffer (1) holding the addresses of the null rows (a row-address
map, :mod:`lance_ops.index.treemap`). Details ``/lance.index.pb.BloomFilterIndexDetails``, empty;
index version 0.

An inexact index: ``=`` / ``IN`` keep the zones whose filter may hold a value, ``IS NULL`` the zones
with a null; other conditions are left to the scan. Like a zone map it is positional: compaction
leaves it as it was (pylance 14 does not remap it) and an extension appends the new fragments'
zones (those of fragments no longer in the dataset are dropped).

e.g. ``values`` int64 0..9999 in one fragment: zones ``(0, 0, 8192)`` and ``(0, 8192, 1808)``, two
32 KiB filters; ``values = 1234`` keeps the first zone's 8192 rows.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_ops.errors import IndexColumnTypeError, IndexCorruptError, InvalidArgumentError
from lance_ops.index import sbbf
from lance_ops.index.files import IndexFileData, IndexWriter, RemapResult, read_index_file
from lance_ops.index.treemap import decode_row_address_map, encode_row_address_map
from lance_ops.index.zonemap import zone_numbers, zone_rows
from lance_ops.io.context import StorageContext
from lance_ops.query.predicate import Bound
from lance_ops.table.manifest import IndexMetadata

__all__ = [
    "BLOOMFILTER_DETAILS_URL",
    "BLOOMFILTER_FILE",
    "BloomFilterParams",
    "bloomfilter_params",
    "bloomfilter_rows",
    "bloomfilter_stats",
    "check_bloomfilter_column",
    "write_bloomfilter",
]

BLOOMFILTER_FILE = "bloomfilter.lance"
BLOOMFILTER_DETAILS_URL = "/lance.index.pb.BloomFilterIndexDetails"
_DEFAULT_ITEMS = 8192
_DEFAULT_PROBABILITY = 0.00057
_SCHEMA = pa.schema(
    [
        pa.field("fragment_id", pa.uint64(), nullable=False),
        pa.field("zone_start", pa.uint64(), nullable=False),
        pa.field("zone_length", pa.uint64(), nullable=False),
        pa.field("has_null", pa.bool_(), nullable=False),
        pa.field("bloom_filter_data", pa.binary(), nullable=False),
    ]
)

BloomFilterParams = tuple[int, float]  # (number_of_items, probability)


def check_bloomfilter_column(column: str, value_type: pa.DataType) -> pa.DataType:
    """``value_type`` when pylance 14 builds a bloom filter over it (integers, float32 / float64,
    strings, binaries, dates, times, timestamps), else IndexColumnTypeError naming the column."""
    t = value_type
    if (
        pa.types.is_integer(t)
        or pa.types.is_float32(t)
        or pa.types.is_float64(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_date(t)
        or pa.types.is_time(t)
        or pa.types.is_timestamp(t)
    ):
        return t
    raise IndexColumnTypeError(
        f"BLOOMFILTER index column {column}: bloom filter index does not support data type {t}. "
        "Supported types: integers, float32, float64, string, large_string, binary, large_binary, "
        "date, time, timestamp",
        column,
    )


def bloomfilter_params(params: Mapping[str, Any]) -> BloomFilterParams:
    """``number_of_items`` (a positive integer, rows per zone) and ``probability`` (the target
    false-positive rate, 0 < p < 1) from ``params``; anything else is refused."""
    unknown = set(params) - {"number_of_items", "probability"}
    if unknown:
        raise InvalidArgumentError(f"BLOOMFILTER index: unsupported parameters {sorted(unknown)}")
    items = params.get("number_of_items", _DEFAULT_ITEMS)
    if isinstance(items, bool) or not isinstance(items, int) or items <= 0:
        raise InvalidArgumentError(f"number_of_items must be a positive integer, got {items!r}")
    probability = params.get("probability", _DEFAULT_PROBABILITY)
    if (
        isinstance(probability, bool)
        or not isinstance(probability, (int, float))
        or not 0.0 < float(probability) < 1.0
    ):
        raise InvalidArgumentError(
            f"probability must be a number between 0 and 1 (exclusive), got {probability!r}"
        )
    return int(items), float(probability)


def _probability_text(probability: float) -> str:
    """As pylance writes an f64 (``0.00057``, ``0.01``: never an exponent)."""
    text = repr(probability)
    return np.format_float_positional(probability, trim="-") if "e" in text else text


def _read(ctx: StorageContext, index: IndexMetadata) -> tuple[IndexFileData, BloomFilterParams, int | None]:
    data = read_index_file(ctx, index, BLOOMFILTER_FILE)
    try:
        params = (
            int(data.meta("bloomfilter_item", index, BLOOMFILTER_FILE)),
            float(data.meta("bloomfilter_probability", index, BLOOMFILTER_FILE)),
        )
        raw = data.metadata.get(b"null_bitmap")
        nulls = int(raw) - 1 if raw is not None else None
    except ValueError as exc:
        raise IndexCorruptError(BLOOMFILTER_FILE, f"index {index.name!r}: bad metadata: {exc}") from exc
    if params[0] <= 0 or (nulls is not None and not 0 <= nulls < len(data.global_buffers)):
        raise IndexCorruptError(BLOOMFILTER_FILE, f"index {index.name!r}: bad metadata")
    for name in _SCHEMA.names:
        data.column(name, index, BLOOMFILTER_FILE)
    return data, params, nulls


def _zones(values: pa.Array, addrs: np.ndarray, params: BloomFilterParams) -> pa.Table:
    """Zone rows of the live rows ``values`` at ``addrs`` (sorted)."""
    items, probability = params
    zone = zone_numbers(addrs, items)
    num_zones = int(zone[-1]) + 1 if zone.size else 0
    data, starts, lengths, valid = sbbf.value_bytes(values)
    hashes = sbbf.xxh64(data, starts, lengths)
    filters = sbbf.set_bits(hashes, zone[valid], num_zones, sbbf.filter_bytes(items, probability))
    first = np.r_[0, np.flatnonzero(np.diff(zone)) + 1] if zone.size else np.zeros(0, np.int64)
    last = np.r_[first[1:], zone.size] - 1 if zone.size else first
    offsets = addrs & np.uint64(0xFFFFFFFF)
    has_null = np.zeros(num_zones, dtype=bool)
    has_null[zone[np.asarray(values.is_null(), dtype=bool)]] = True
    columns = [
        pa.array(addrs[first] >> np.uint64(32), pa.uint64()),
        pa.array(offsets[first], pa.uint64()),
        pa.array(offsets[last] + np.uint64(1) - offsets[first], pa.uint64()),
        pa.array(has_null),
        pa.array(filters, pa.binary()),
    ]
    return pa.Table.from_arrays(columns, schema=_SCHEMA)


def write_bloomfilter(
    ctx: StorageContext,
    template: IndexMetadata,
    values: pa.Array,
    addrs: np.ndarray,
    params: BloomFilterParams | None = None,
    merged: Sequence[IndexMetadata] = (),
    live_fragments: Collection[int] | None = None,
) -> RemapResult:
    """One segment with the zones of the segments ``merged`` (those of ``live_fragments`` when
    given) and of the new rows ``values`` at row addresses ``addrs``; ``params`` (a new index) or
    the parameters of ``template``'s file."""
    if params is None:
        params = _read(ctx, template)[1]
    addrs = np.asarray(addrs, dtype=np.uint64)
    order = np.argsort(addrs, kind="stable")
    values, addrs = values.take(pa.array(order)), addrs[order]
    parts, null_rows = [], [addrs[np.asarray(values.is_null(), dtype=bool)]]
    for segment in merged:
        old, _, old_nulls = _read(ctx, segment)
        table = old.table.select(_SCHEMA.names).cast(_SCHEMA)
        if old_nulls is not None:
            null_rows.append(decode_row_address_map(old.global_buffers[old_nulls]))
        if live_fragments is not None:
            keep = pc.is_in(
                table.column("fragment_id"), value_set=pa.array(sorted(live_fragments), pa.uint64())
            )
            table = table.filter(keep)
        parts.append(table)
    parts.append(_zones(values, addrs, params))
    table = pa.concat_tables(parts).combine_chunks()
    table = table.take(pc.sort_indices(table, [("fragment_id", "ascending"), ("zone_start", "ascending")]))
    nulls = np.unique(np.concatenate(null_rows))
    if live_fragments is not None:
        nulls = nulls[np.isin(nulls >> np.uint64(32), np.fromiter(live_fragments, np.uint64))]
    metadata = {
        "bloomfilter_item": str(params[0]),
        "bloomfilter_probability": _probability_text(params[1]),
        "null_bitmap": "1",
    }
    writer = IndexWriter(ctx)
    writer.write(
        BLOOMFILTER_FILE,
        table.replace_schema_metadata(metadata),
        global_buffers=[encode_row_address_map(nulls)],
    )
    return writer.result(template)


def _query_hashes(bound: Bound) -> np.ndarray:
    """The hashes of the values an ``=`` / ``IN`` bound asks for (the bound's values have the
    column's type): ``0.0`` and ``-0.0`` both for a float zero, whose bytes differ."""
    values = pa.array([v.as_py() for v in bound.values], bound.values[0].type)
    if pa.types.is_floating(values.type):
        values = pa.concat_arrays([values, pc.negate(values.filter(pc.equal(values, 0)))])
    data, starts, lengths, _ = sbbf.value_bytes(values)
    return sbbf.xxh64(data, starts, lengths)


def bloomfilter_rows(data: IndexFileData, bound: Bound) -> np.ndarray | None:
    """Row addresses of the zones of a bloom filter file ``data`` that may hold rows ``bound``
    selects (``=``, ``IN``, ``IS NULL``); None for a condition it does not answer."""
    table = data.table
    if bound.op == "null":
        keep = np.asarray(table.column("has_null"), dtype=bool)
    elif bound.op in ("eq", "in"):
        filters = table.column("bloom_filter_data").to_pylist()
        keep = sbbf.may_contain(filters, _query_hashes(bound))
    else:
        return None
    return zone_rows(table, keep)


def bloomfilter_stats(ctx: StorageContext, index: IndexMetadata) -> dict[str, Any]:
    """``type``, ``num_blocks`` (zones), ``number_of_items`` and ``probability``, as pylance 14
    reports them."""
    data, (items, probability), _ = _read(ctx, index)
    return {
        "type": "BloomFilter",  # pylance 14 names the type in this index's entries (only)
        "num_blocks": data.table.num_rows,
        "number_of_items": items,
        "probability": probability,
    }
