"""Distinct-value sketches: the one interface over the HyperLogLog library (Apache DataSketches).

A :class:`DistinctSketch` counts the distinct non-null values of Arrow arrays; sketches of the
same ``lg_k`` merge (``a.merge(b)`` estimates the distinct values of both inputs, exactly as one
sketch fed both would) and serialise to a few KiB, so per-fragment or per-partition sketches can be
kept and combined later. Values are deduplicated with Arrow first; only distinct values reach
the sketch, as ints (integer-like types by their storage), floats or strings (binary as latin-1).
"""

from __future__ import annotations

import datasketches
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pt

__all__ = ["DEFAULT_LG_K", "DistinctSketch"]

DEFAULT_LG_K = 12
# 8-bit registers: merging and serialising never change the registers' resolution.
_TARGET = datasketches.tgt_hll_type.HLL_8
# Byte 5 of a serialised HLL sketch holds its flags; "out of order" selects the estimator that
# reads the registers alone (the one a union result uses) instead of the update-order-dependent HIP one.
_FLAGS_BYTE = 5
_OUT_OF_ORDER_FLAG = 16


def _distinct_values(array: pa.Array | pa.ChunkedArray) -> list[int | float | str]:
    """The distinct non-null values of ``array`` as Python values the sketch accepts."""
    if pt.is_dictionary(array.type):
        array = array.cast(array.type.value_type)
    unique = pc.unique(array).drop_null()
    type_ = unique.type
    if pt.is_floating(type_):
        return [float(v) for v in unique.to_numpy(zero_copy_only=False).astype(np.float64)]
    if pt.is_boolean(type_):
        return [int(v) for v in unique.to_pylist()]
    if pt.is_integer(type_):
        return unique.to_numpy(zero_copy_only=False).tolist()  # type: ignore[no-any-return]
    if pt.is_temporal(type_) and not pt.is_interval(type_):
        storage = pa.int32() if type_.bit_width == 32 else pa.int64()
        return unique.view(storage).to_numpy(zero_copy_only=False).tolist()  # type: ignore[no-any-return]
    if pt.is_string(type_) or pt.is_large_string(type_):
        return unique.to_pylist()  # type: ignore[no-any-return]
    if pt.is_binary(type_) or pt.is_large_binary(type_) or pt.is_fixed_size_binary(type_):
        return [v.decode("latin-1") for v in unique.to_pylist()]
    return [str(v) for v in unique.to_pylist()]


class DistinctSketch:
    """A mergeable HyperLogLog estimate of the number of distinct non-null values."""

    def __init__(self, lg_k: int = DEFAULT_LG_K) -> None:
        self._sketch = datasketches.hll_sketch(lg_k, _TARGET)

    @property
    def lg_k(self) -> int:
        return int(self._sketch.lg_config_k)

    def update(self, array: pa.Array | pa.ChunkedArray) -> DistinctSketch:
        """Add the values of ``array``; returns the sketch."""
        for value in _distinct_values(array):
            self._sketch.update(value)
        return self

    def merge(self, other: DistinctSketch) -> DistinctSketch:
        """A new sketch of both inputs."""
        union = datasketches.hll_union(self.lg_k)
        union.update(self._sketch)
        union.update(other._sketch)
        out = DistinctSketch.__new__(DistinctSketch)
        out._sketch = union.get_result(_TARGET)
        return out

    def _registers_only(self) -> datasketches.hll_sketch:
        """This sketch read as a union result, so equal registers give equal estimates.

        Merged sketches and a sketch fed the same values in one go hold the same registers; their
        estimates must not depend on which of them a Spark partition or a rebuild produced.
        """
        data = bytearray(self._sketch.serialize_compact())
        data[_FLAGS_BYTE] |= _OUT_OF_ORDER_FLAG
        return datasketches.hll_sketch.deserialize(bytes(data))

    def estimate(self) -> float:
        return float(self._registers_only().get_estimate())

    def bounds(self, num_std_dev: int = 3) -> tuple[float, float]:
        """The sketch's own lower and upper bounds at ``num_std_dev`` standard deviations."""
        sketch = self._registers_only()
        return float(sketch.get_lower_bound(num_std_dev)), float(sketch.get_upper_bound(num_std_dev))

    def to_bytes(self) -> bytes:
        return bytes(self._sketch.serialize_compact())

    def __reduce__(self) -> tuple[object, tuple[bytes]]:
        """Pickle as the serialised sketch, so sketches travel between Spark executors and the driver."""
        return (DistinctSketch.from_bytes, (self.to_bytes(),))

    @classmethod
    def from_bytes(cls, data: bytes) -> DistinctSketch:
        out = cls.__new__(cls)
        out._sketch = datasketches.hll_sketch.deserialize(data)
        return out
