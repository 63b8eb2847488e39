"""Scans that prune fragments through scalar indices (``use_scalar_index=True``, the default).

Each simple condition of the filter's top-level ``AND`` (a :class:`~lance_ops.query.predicate.Bound`:
``=``, ``<``, ``<=``, ``>``, ``>=``, ``IN``, ``IS NULL``, ``IS NOT NULL`` on a column) that a
BTREE, BITMAP or ZONEMAP index of that column answers gives the fragments its index covers that
may hold a matching row: BTREE pages and BITMAP keys give the rows' addresses, ZONEMAP zones their
min / max / null / NaN counts. Fragments the index does not cover are always scanned. The filter is
then applied to the rows of the fragments kept, as in a full scan, so the rows returned are always
those of a full scan (a NaN counts as a possible match of every comparison).

Left to a full scan: LABEL_LIST (its ``array_has_*`` filters are not simple conditions), BITMAP
indices of datasets with stable row ids (their row ids are not addresses), and indices a deferred
compaction left behind (their addresses are old).

e.g. ``id = 5`` with a BTREE ``id_idx`` covering fragments {0, 1} of {0, 1, 2}, the value 5 being
in fragment 1: fragments {1, 2} are scanned.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap

from lance_ops.index.bitmap import BITMAP_LAYOUT
from lance_ops.index.btree import PAGES
from lance_ops.index.files import read_index_file
from lance_ops.index.types import BITMAP, BTREE, ZONEMAP, index_type_of
from lance_ops.index.zonemap import FILE as ZONEMAP_FILE
from lance_ops.io.context import StorageContext
from lance_ops.query.predicate import Bound, Predicate
from lance_ops.table import frag_reuse
from lance_ops.table.indices import fragment_ids, is_system
from lance_ops.table.manifest import IndexMetadata, Manifest

__all__ = ["IndexUse", "prune_fragments"]

_COMPARE = {"eq": pc.equal, "lt": pc.less, "le": pc.less_equal, "gt": pc.greater, "ge": pc.greater_equal}


@dataclass(frozen=True)
class IndexUse:
    """One index a scan used: its name, type and the condition it answered."""

    name: str
    kind: str
    condition: str


def _matches(values: pa.Array, bound: Bound) -> np.ndarray:
    """Which ``values`` may satisfy ``bound`` (NaN: always, as a full scan may count it)."""
    if bound.op == "null":
        return np.asarray(values.is_null(), dtype=bool)
    if bound.op == "not_null":
        return np.asarray(values.is_valid(), dtype=bool)
    if bound.op == "in":
        hit = pc.is_in(values, value_set=pa.array([v.as_py() for v in bound.values], values.type))
    else:
        hit = _COMPARE[bound.op](values, bound.values[0].cast(values.type))
    out = np.asarray(hit.fill_null(False), dtype=bool)
    if pa.types.is_floating(values.type):
        out |= np.asarray(pc.is_nan(values).fill_null(False), dtype=bool)
    return out


def _fragments_of(addresses: np.ndarray) -> set[int]:
    return set(np.unique(np.asarray(addresses, dtype=np.uint64) >> np.uint64(32)).tolist())


def _btree(ctx: StorageContext, index: IndexMetadata, bound: Bound) -> set[int]:
    table = read_index_file(ctx, index, PAGES).table
    values = table.column("values").combine_chunks()
    ids = np.asarray(table.column("ids").combine_chunks(), dtype=np.uint64)
    return _fragments_of(ids[_matches(values, bound)])


def _bitmap(ctx: StorageContext, index: IndexMetadata, bound: Bound) -> set[int]:
    table = read_index_file(ctx, index, BITMAP_LAYOUT.file).table
    keys = table.column("keys").combine_chunks()
    blobs = table.column("bitmaps").to_pylist()
    found: set[int] = set()
    for position in np.flatnonzero(_matches(keys, bound)):
        if blobs[position]:
            found |= _fragments_of(BITMAP_LAYOUT.decode(blobs[position]))
    return found


def _zonemap(ctx: StorageContext, index: IndexMetadata, bound: Bound) -> set[int]:
    zones = read_index_file(ctx, index, ZONEMAP_FILE).table
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
            keep = np.zeros(len(zones), dtype=bool)
            for v in values:
                keep |= cmp(pc.less_equal, low, v) & cmp(pc.greater_equal, high, v)
        elif bound.op in ("lt", "le"):
            keep = cmp(pc.less if bound.op == "lt" else pc.less_equal, low, values[0])
        else:
            keep = cmp(pc.greater if bound.op == "gt" else pc.greater_equal, high, values[0])
        keep |= nans > 0
    return set(np.asarray(zones.column("fragment_id"), dtype=np.int64)[keep].tolist())


_LOOKUP = {BTREE: _btree, BITMAP: _bitmap, ZONEMAP: _zonemap}


def _usable(ctx: StorageContext, manifest: Manifest) -> dict[str, tuple[str, list[IndexMetadata]]]:
    """Column name -> (type, segments) of the first index per top-level column that can answer."""
    by_id = {f.id: f for f in manifest.schema}
    names: dict[str, list[IndexMetadata]] = {}
    for index in manifest.indices:
        if not is_system(index):
            names.setdefault(index.name, []).append(index)
    out: dict[str, tuple[str, list[IndexMetadata]]] = {}
    for name in sorted(names):
        segments = names[name]
        first = segments[0]
        field = by_id.get(first.fields[0]) if len(first.fields) == 1 else None
        if field is None or field.parent_id >= 0 or field.name in out:
            continue
        try:
            kind = index_type_of(first, ctx)
        except Exception:  # noqa: BLE001 - an index of a type we do not read is simply not used
            continue
        if kind not in _LOOKUP or any(frag_reuse.is_behind(manifest, s) for s in segments):
            continue
        if kind == BITMAP and manifest.uses_stable_row_ids:
            continue
        out[field.name] = (kind, segments)
    return out


def prune_fragments(
    ctx: StorageContext, manifest: Manifest, predicate: Predicate, candidates_in: Sequence[int]
) -> tuple[set[int], list[IndexUse]]:
    """The fragment ids among ``candidates_in`` that may hold rows ``predicate`` selects, and the indices
    that said so (``candidates_in`` unchanged and no index when none applies)."""
    keep = set(candidates_in)
    if not predicate.bounds or not manifest.indices:
        return keep, []
    usable = _usable(ctx, manifest)
    used: list[IndexUse] = []
    for bound in predicate.bounds:
        if bound.column not in usable:
            continue
        kind, segments = usable[bound.column]
        covered = BitMap()
        candidates: set[int] = set()
        for segment in segments:
            covered |= fragment_ids(segment)
            candidates |= _LOOKUP[kind](ctx, segment, bound)
        keep = {f for f in keep if f not in covered or f in candidates}
        values = ", ".join(str(v.as_py()) for v in bound.values)
        used.append(IndexUse(segments[0].name, kind, f"{bound.column} {bound.op} [{values}]"))
    return keep, used
