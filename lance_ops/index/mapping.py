"""Old -> new row addresses after a compaction, applied to whole arrays of addresses at once.

A row address is ``fragment_id << 32 | offset``. Compaction moves the surviving rows of the
fragments it rewrites to new fragments (``old_addrs[i] -> new_addrs[i]``) and drops the rows
deleted in them (``removed``). Addresses in neither array belong to fragments compaction did not
touch and keep their value, as pylance's remap does with the addresses its mapping lacks.

Example: fragment 0 had offsets 0..3 with offset 1 deleted, compacted into fragment 5::

    old_addrs = [0, 2, 3]        new_addrs = [5 << 32, 5 << 32 | 1, 5 << 32 | 2]    removed = [1]
    apply([3, 1, 1 << 32]) -> addresses [5 << 32 | 2, 1 << 32], kept [True, False, True]
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lance_ops.errors import InvalidArgumentError

__all__ = ["RowAddressMapping"]


def _u64(values: np.ndarray | None) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(values if values is not None else (), dtype=np.uint64).ravel())


def _any_in(values: np.ndarray, sorted_values: np.ndarray) -> bool:
    """Whether any of ``values`` is in ``sorted_values`` (ascending)."""
    at = np.minimum(np.searchsorted(sorted_values, values), sorted_values.size - 1)
    return bool((sorted_values[at] == values).any())


@dataclass(frozen=True)
class RowAddressMapping:
    """Surviving old addresses (sorted) with their new addresses, and the old addresses removed."""

    old_addrs: np.ndarray
    new_addrs: np.ndarray
    removed: np.ndarray = field(default_factory=lambda: np.empty(0, np.uint64))

    def __post_init__(self) -> None:
        old, new, removed = _u64(self.old_addrs), _u64(self.new_addrs), _u64(self.removed)
        if removed.size > 1 and not bool(np.all(removed[1:] > removed[:-1])):
            removed = np.unique(removed)
        if old.shape != new.shape:
            raise InvalidArgumentError(f"old_addrs ({old.size}) and new_addrs ({new.size}) differ in length")
        if old.size > 1 and not bool(np.all(old[1:] > old[:-1])):
            raise InvalidArgumentError("old_addrs must be sorted ascending without repeats")
        if removed.size and old.size and _any_in(removed, old):
            raise InvalidArgumentError("an address is both moved and removed")
        object.__setattr__(self, "old_addrs", old)
        object.__setattr__(self, "new_addrs", new)
        object.__setattr__(self, "removed", removed)

    @classmethod
    def identity(cls) -> RowAddressMapping:
        """The mapping that moves and removes nothing."""
        return cls(np.empty(0, np.uint64), np.empty(0, np.uint64))

    @property
    def is_identity(self) -> bool:
        return not self.removed.size and bool(np.array_equal(self.old_addrs, self.new_addrs))

    def removes_any(self, addrs: np.ndarray) -> bool:
        """Whether any of ``addrs`` is removed by this mapping."""
        return bool(self.removed.size) and _any_in(_u64(addrs), self.removed)

    def apply(self, addrs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(new addresses of the kept rows, kept mask)`` for ``addrs`` (any order, repeats allowed)."""
        addrs = _u64(addrs)
        kept = np.ones(addrs.size, dtype=bool)
        if self.removed.size:
            at = np.searchsorted(self.removed, addrs)
            hit = at < self.removed.size
            hit[hit] = self.removed[at[hit]] == addrs[hit]
            kept &= ~hit
        out = addrs[kept]
        if self.old_addrs.size and out.size:
            at = np.searchsorted(self.old_addrs, out)
            hit = at < self.old_addrs.size
            hit[hit] = self.old_addrs[at[hit]] == out[hit]
            out[hit] = self.new_addrs[at[hit]]
        return out, kept
