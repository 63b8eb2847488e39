"""In-memory data blocks: the currency between structural layouts and compressors.

A block is the *values* of one page (or one chunk) with no validity: nullability is
carried by definition levels in the structural layer, so a null slot is simply a slot
whose bytes are ignored. Blocks are numpy-backed and immutable by convention.

* :class:`FixedWidthBlock` — ``num_values`` values of ``bits_per_value`` bits each, packed
  little-endian in ``data`` (uint8). ``bits_per_value == 1`` is an LSB-first bitmap.
* :class:`VariableWidthBlock` — Arrow-style ``offsets`` (uint32 or uint64,
  ``num_values + 1`` entries, ``offsets[0] == 0``) into ``data`` (uint8).
* :class:`FixedSizeListBlock` — ``dimension`` child values per value, optional item validity.
* :class:`StructBlock` — one child block per struct field (packed structs).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class FixedWidthBlock:
    data: np.ndarray  # uint8
    bits_per_value: int
    num_values: int

    @property
    def bytes_per_value(self) -> int:
        return self.bits_per_value // 8

    def view(self, dtype: np.dtype | str) -> np.ndarray:
        """The values as ``dtype`` (its width must equal ``bits_per_value``)."""
        return self.data[: self.num_values * np.dtype(dtype).itemsize].view(dtype)

    @classmethod
    def from_values(cls, values: np.ndarray) -> FixedWidthBlock:
        values = np.ascontiguousarray(values)
        return cls(values.view(np.uint8).reshape(-1), values.dtype.itemsize * 8, len(values))


@dataclass(frozen=True)
class VariableWidthBlock:
    offsets: np.ndarray  # uint32 or uint64, num_values + 1 entries, starts at 0
    data: np.ndarray  # uint8
    num_values: int

    @property
    def bits_per_offset(self) -> int:
        return self.offsets.dtype.itemsize * 8

    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)


@dataclass(frozen=True)
class FixedSizeListBlock:
    child: DataBlock
    dimension: int
    num_values: int
    validity: np.ndarray | None = None  # packed LSB bitmap of num_values * dimension items


@dataclass(frozen=True)
class StructBlock:
    children: tuple[DataBlock, ...]
    num_values: int


DataBlock = FixedWidthBlock | VariableWidthBlock | FixedSizeListBlock | StructBlock
