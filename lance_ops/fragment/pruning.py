"""Skipping zones of a fragment that statistics prove a filter cannot select.

A zone is kept unless one of the predicate's :class:`~lance_ops.query.predicate.Bound` conditions
is impossible in it. Filters select a row only when they are TRUE, so a zone without a non-null
value fails every comparison; ``IS NULL`` needs a null, ``IS NOT NULL`` a non-null value. Unknown
bounds (null min / max of truncated strings) never prune. Floats: NaN is not in the bounds and
sorts above every number in filters, so ``>`` / ``>=`` never prune a float zone by its max.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_ops.query.predicate import Bound
from lance_ops.table.statistics import FragmentStatistics

__all__ = ["zone_mask"]


def _true_unless_false(result: pa.Array) -> np.ndarray:
    return np.asarray(pc.fill_null(result, True).to_numpy(zero_copy_only=False), dtype=bool)


def _possible(bound: Bound, stats: pa.StructArray, lengths: np.ndarray) -> np.ndarray:
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
    floating = pa.types.is_floating(low.type)

    def at_most_max(value: pa.Scalar, strict: bool) -> np.ndarray:
        if floating:
            return np.ones(len(stats), dtype=bool)
        return _true_unless_false((pc.greater if strict else pc.greater_equal)(high, value))

    def at_least_min(value: pa.Scalar, strict: bool) -> np.ndarray:
        return _true_unless_false((pc.less if strict else pc.less_equal)(low, value))

    def equal(value: pa.Scalar) -> np.ndarray:
        inside = _true_unless_false(pc.less_equal(low, value)) & _true_unless_false(
            pc.greater_equal(high, value)
        )
        return inside

    if bound.op in ("eq", "in"):
        possible = np.zeros(len(stats), dtype=bool)
        for value in bound.values:
            possible |= equal(value)
    elif bound.op in ("lt", "le"):
        possible = at_least_min(bound.values[0], bound.op == "lt")
    else:
        possible = at_most_max(bound.values[0], bound.op == "gt")
    return valued & possible


def zone_mask(
    stats: FragmentStatistics, bounds: Sequence[Bound], field_ids: Mapping[str, int]
) -> np.ndarray | None:
    """Per zone of ``stats``, whether the filter's ``bounds`` may select a row (None: no bound applies)."""
    lengths = stats.zone_lengths
    mask = None
    for bound in bounds:
        column = stats.columns.get(field_ids[bound.column])
        if column is None:
            continue
        possible = _possible(bound, column, lengths)
        mask = possible if mask is None else mask & possible
    return mask
