"""Skipping zones of a fragment that statistics prove a filter cannot select.

A zone is kept unless one of the predicate's :class:`~lance_ops.query.predicate.Bound` conditions
is impossible in it. Filters select a row only when they are TRUE, so a zone without a non-null
value fails every comparison; ``IS NULL`` needs a null, ``IS NOT NULL`` a non-null value. Unknown
bounds (null min / max of truncated strings) never prune. Zones are each field's own: the pages
of a data file with page statistics, or fixed-size zones of a statistics file.

Floats: filters order NaN by its sign bit, as pylance does: ``-NaN`` below ``-inf``, ``NaN``
above ``+inf`` (``NaN > c`` and ``-NaN < c`` are TRUE for every number ``c``), while the bounds
leave NaN out, as the format says. So ``x > c`` / ``x >= c`` is impossible in a zone when its max
rules it out *and* it holds no positive NaN, ``x < c`` / ``x <= c`` when its min rules it out and
it holds no negative NaN; the NaN counts by sign come from beside the statistics (see
:mod:`lance_ops.file.page_statistics`). Where they are unknown, float bounds never prune a
range, except in files of the older rule (a zone holding NaN of either sign records max ``+inf``,
``nan_aware``): there a zone with max ``+inf`` is kept for every range. Equality never selects
NaN (literals are never NaN, :class:`Bound`), so min / max prune it alone. ``-0.0`` and ``0.0``
compare equal, as in filters against constants, and the zero bounds are ``-0.0`` / ``+0.0``.
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


def _nan_zones(
    high: pa.Array, nan_counts: np.ndarray | None, nan_aware: bool
) -> tuple[np.ndarray, np.ndarray] | None:
    """Zones that may hold a positive NaN, and a negative one (None: bounds never prune a range)."""
    if nan_counts is not None:
        return nan_counts[0] > 0, nan_counts[1] > 0
    if nan_aware:  # the older rule: max is +inf where a zone holds NaN of either sign
        maybe = _true_unless_false(pc.equal(high, pa.scalar(np.inf, high.type)))
        return maybe, maybe
    return None


def _possible(
    bound: Bound,
    stats: pa.StructArray,
    lengths: np.ndarray,
    nan_counts: np.ndarray | None,
    nan_aware: bool,
) -> np.ndarray:
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
    if bound.op in ("eq", "in"):
        possible = np.zeros(len(stats), dtype=bool)
        for value in bound.values:
            possible |= _true_unless_false(pc.less_equal(low, value)) & _true_unless_false(
                pc.greater_equal(high, value)
            )
        return valued & possible
    value, below = bound.values[0], bound.op in ("lt", "le")
    if below:
        possible = _true_unless_false((pc.less if bound.op == "lt" else pc.less_equal)(low, value))
    else:
        possible = _true_unless_false((pc.greater if bound.op == "gt" else pc.greater_equal)(high, value))
    if pa.types.is_floating(low.type):
        nans = _nan_zones(high, nan_counts, nan_aware)
        if nans is None:
            return valued
        possible |= nans[1] if below else nans[0]  # -NaN lies below every number, NaN above
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
        nan_counts = stats.nan_counts.get(field_id)
        possible = _possible(bound, column, lengths, nan_counts, field_id in stats.nan_aware)
        zone = np.searchsorted(np.cumsum(lengths), offsets, side="right")
        if not len(possible):
            return np.zeros(len(offsets), dtype=bool)  # statistics of no rows: nothing to select
        rows = possible[np.minimum(zone, len(possible) - 1)]
        mask = rows if mask is None else mask & rows
    return mask
