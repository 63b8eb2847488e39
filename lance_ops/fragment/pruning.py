"""Skipping zones of a fragment that statistics prove a filter cannot select.

A zone is kept unless one of the predicate's :class:`~lance_ops.query.predicate.Bound` conditions
is impossible in it. Filters select a row only when they are TRUE, so a zone without a non-null
value fails every comparison; ``IS NULL`` needs a null, ``IS NOT NULL`` a non-null value. Unknown
bounds (null min / max of truncated strings) never prune. Zones are each field's own: the pages
of a data file with page statistics, or fixed-size zones of a statistics file.

Floats: filters sort NaN above every number (``NaN > c`` is TRUE), while the format leaves NaN
out of the bounds. Statistics written here record ``+inf`` as the max of a zone holding NaN, so
for them ``x > c`` / ``x >= c`` is impossible exactly when ``max < c`` (``max <= c``) as for any
type — a NaN zone has max ``+inf`` and is kept. Other writers' float maxima ignore NaN and never
prune. Literals are never NaN (:class:`Bound`); ``-0.0`` and ``0.0`` compare equal, as in filters
against constants, and the zero bounds are ``-0.0`` / ``+0.0``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_ops.query.predicate import Bound
from lance_ops.table.statistics import FragmentStatistics

__all__ = ["row_mask"]


def _true_unless_false(result: pa.Array) -> np.ndarray:
    return np.asarray(pc.fill_null(result, True).to_numpy(zero_copy_only=False), dtype=bool)


def _possible(bound: Bound, stats: pa.StructArray, lengths: np.ndarray, nan_aware: bool) -> np.ndarray:
    """Zones of ``stats`` where ``bound`` may hold for some row."""
    nulls = stats.field("null_count").to_numpy(zero_copy_only=False)
    valued = nulls < lengths
    if bound.op == "null":
        return nulls > 0
    if bound.op == "not_null":
        return valued
    low, high = stats.field("min_value"), stats.field("max_value")
    if any(v.type != low.type for v in bound.values):
        return np.ones(len(stats), dtype=bool)
    max_unknown = pa.types.is_floating(low.type) and not nan_aware

    def at_most_max(value: pa.Scalar, strict: bool) -> np.ndarray:
        if max_unknown:
            return np.ones(len(stats), dtype=bool)
        return _true_unless_false((pc.greater if strict else pc.greater_equal)(high, value))

    def at_least_min(value: pa.Scalar, strict: bool) -> np.ndarray:
        return _true_unless_false((pc.less if strict else pc.less_equal)(low, value))

    if bound.op in ("eq", "in"):
        possible = np.zeros(len(stats), dtype=bool)
        for value in bound.values:
            possible |= at_least_min(value, False) & _true_unless_false(pc.greater_equal(high, value))
    elif bound.op in ("lt", "le"):
        possible = at_least_min(bound.values[0], bound.op == "lt")
    else:
        possible = at_most_max(bound.values[0], bound.op == "gt")
    return valued & possible


def row_mask(
    stats: FragmentStatistics, bounds: Sequence[Bound], field_ids: Mapping[str, int], offsets: np.ndarray
) -> np.ndarray | None:
    """Per physical row offset, whether the filter's ``bounds`` may select it (None: no bound applies)."""
    mask = None
    for bound in bounds:
        field_id = field_ids[bound.column]
        column = stats.columns.get(field_id)
        if column is None:
            continue
        lengths = stats.lengths(field_id)
        possible = _possible(bound, column, lengths, field_id in stats.nan_aware)
        zone = np.searchsorted(np.cumsum(lengths), offsets, side="right")
        if not len(possible):
            return np.zeros(len(offsets), dtype=bool)  # statistics of no rows: nothing to select
        rows = possible[np.minimum(zone, len(possible) - 1)]
        mask = rows if mask is None else mask & rows
    return mask
