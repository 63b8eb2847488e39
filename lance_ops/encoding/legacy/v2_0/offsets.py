"""Null-adjusted end offsets, shared by List (offsets column) and Binary (indices).

A page of ``n`` values stores ``n`` u64 end offsets relative to the page (Arrow's leading 0
is dropped). With ``A`` = total items (or bytes) of the page + 1, a valid value stores its end
offset and a null value (length 0) stores its end offset + ``A``. So value ``i`` is null iff
``offsets[i] >= A``, ends at ``offsets[i] mod A`` and starts where value ``i - 1`` ended.
Example ``[[1, 2], null, [], [3], [4, 5, 6]]``: A = 7, offsets ``[2, 9, 2, 3, 6]``.
"""

from __future__ import annotations

import numpy as np

from lance_ops.encoding.legacy.v2_0.page import corrupt


def encode_offsets(lengths: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, int]:
    """Stored u64 offsets and the adjustment ``A`` for value ``lengths`` (0 where null)."""
    ends = np.cumsum(lengths, dtype=np.uint64)
    adjustment = int(ends[-1]) + 1 if len(ends) else 1
    return np.where(valid, ends, ends + np.uint64(adjustment)).astype("<u8"), adjustment


def decode_offsets(stored: np.ndarray, adjustment: int) -> tuple[np.ndarray, np.ndarray]:
    """Arrow-style int64 offsets (``n + 1`` entries from 0) and the validity of each value."""
    if adjustment <= 0:
        raise corrupt(f"offset adjustment {adjustment} must be positive")
    stored = stored.astype(np.uint64, copy=False)
    valid = stored < np.uint64(adjustment)
    ends = np.where(valid, stored, stored - np.uint64(adjustment)).astype(np.int64)
    if len(ends) and ((ends < 0).any() or (ends >= adjustment).any() or (np.diff(ends) < 0).any()):
        raise corrupt("offsets are not non-decreasing within the page")
    return np.concatenate([np.zeros(1, np.int64), ends]), valid
