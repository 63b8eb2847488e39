"""Distinct-value sketches: the one interface over the HyperLogLog library (Apache DataSketches).

A :class:`DistinctSketch` counts the distinct non-null values of Arrow arrays; sketches of the
same ``lg_k`` merge (``a.merge(b)`` estimates the distinct values of both inputs, exactly as one
sketch fed both would) and serialise to a few KiB, so per-fragment or per-partition sketches can be
kept and combined later. Values are deduplicated with Arrow first; only distinct values reach
the sketch, as ints (integer-like types by their storage), floats or strings (binary as latin-1).

Feeding a sketch is one library call per value, so values are first cut down: DataSketches'
hash (MurmurHash3 x64-128, seed 9001, of the value's bytes as the library hashes them) is
computed for all of them at once (:mod:`lance_ops.encoding.kernels`: compiled, or numpy when small), and
one value per distinct coupon (the hash's 26-bit slot address and register value, all the library
keeps of a value) is kept; when the values reach enough register slots to put the sketch in HLL
mode, only one value with the largest register value per slot (a register keeps its largest
value). The kept values are reduced again together and reach the library only when the sketch
is read (estimate, merge, serialise): a few thousand library calls per sketch, not per update.
The sketch ends up in exactly the state (mode, registers or coupons) it would have if fed every
value (tested); only the HIP accumulator, which the estimates here never read, depends on order.
"""

from __future__ import annotations

import datasketches
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pt

from lance_ops.encoding.kernels import (
    best_coupons,
    first_of_each_coupon,
    murmur3_x64_128,
    murmur3_x64_128_words,
    word_best_coupons,
    word_first_coupons,
    word_hashes,
)

__all__ = ["DEFAULT_LG_K", "UPDATE_SLICE_ROWS", "DistinctSketch"]

DEFAULT_LG_K = 12
#: Rows of one array hashed and reduced at a time by :meth:`DistinctSketch.update` (its
#: temporaries, ~24 bytes a row, stay a few MB: a writer flushing several fields sketches them at once).
UPDATE_SLICE_ROWS = 1 << 18
# 8-bit registers: merging and serialising never change the registers' resolution.
_TARGET = datasketches.tgt_hll_type.HLL_8
# Byte 5 of a serialised HLL sketch holds its flags; "out of order" selects the estimator that
# reads the registers alone (the one a union result uses) instead of the update-order-dependent HIP one.
_FLAGS_BYTE = 5
_OUT_OF_ORDER_FLAG = 16


_SEED = 9001
_CANONICAL_NAN = np.uint64(0x7FF8000000000000)


def _murmur3(data: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """MurmurHash3 x64-128 (seed 9001) of each byte string ``data[offsets[i]:offsets[i + 1]]``
    (:mod:`lance_ops.encoding.kernels`)."""
    h1 = np.empty(len(offsets) - 1, dtype=np.uint64)
    h2 = np.empty(len(offsets) - 1, dtype=np.uint64)
    murmur3_x64_128(np.ascontiguousarray(data, np.uint8), offsets.astype(np.int64), _SEED, h1, h2)
    return h1, h2


def _fixed_width_hashes(words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_murmur3` of 8-byte values (the library hashes ints and doubles as 8 bytes)."""
    h1 = np.empty(len(words), dtype=np.uint64)
    h2 = np.empty(len(words), dtype=np.uint64)
    murmur3_x64_128_words(np.ascontiguousarray(words, dtype=np.uint64), _SEED, h1, h2)
    return h1, h2


def _hll_mode_slots(lg_k: int) -> int:
    """Values reaching more register slots than this put a sketch in HLL mode: its coupon list and
    set hold at most 3/4 of k/8 coupons (a quarter of the slots leaves a wide margin)."""
    return (1 << lg_k) // 4


_Hashed = tuple[pa.Array, np.ndarray, np.ndarray, np.ndarray]


def _hashes(array: pa.Array) -> _Hashed | None:
    """The library's hashes of the values of ``array`` (None: no vectorised hash for the type).

    Returned as ``(values, h1, h2, keep)``: hash *i* is of ``values[i]``, and ``keep`` (bool; empty:
    all) marks the values the library counts (not null; strings not empty, which it ignores).
    """
    type_ = array.type
    everything = np.zeros(0, dtype=np.bool_)
    if pt.is_floating(type_):
        array = array.drop_null()
        doubles = array.to_numpy(zero_copy_only=False).astype(np.float64)
        words = np.where(doubles == 0, 0.0, doubles).view(np.uint64)
        return array, *_fixed_width_hashes(np.where(np.isnan(doubles), _CANONICAL_NAN, words)), everything
    if pt.is_integer(type_) or pt.is_temporal(type_) and not pt.is_interval(type_):
        array = array.drop_null()
        return array, *_fixed_width_hashes(_int64_values(array).view(np.uint64)), everything
    if pt.is_string(type_) or pt.is_large_string(type_):
        offset_type = np.int64 if pt.is_large_string(type_) else np.int32
        _, offsets_buffer, data_buffer = array.buffers()
        offsets = np.frombuffer(offsets_buffer, dtype=offset_type)[array.offset :][: len(array) + 1]
        offsets = offsets.astype(np.int64)
        data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer else np.zeros(0, dtype=np.uint8)
        keep = np.diff(offsets) > 0
        if array.null_count:
            keep &= array.is_valid().to_numpy(zero_copy_only=False)
        return array, *_murmur3(data, offsets), everything if keep.all() else keep
    return None


def _representatives(array: pa.Array, lg_k: int) -> pa.Array:
    """Values of ``array`` (non-null) that leave a sketch exactly as all of them would.

    The library keeps a value only as its coupon (the hash's 26-bit slot address and register
    value), so one value per distinct coupon changes nothing; and when the values reach many
    register slots (the sketch is then certainly in HLL mode, where a register keeps only its
    largest value), one value with the largest register value per slot. Types without a
    vectorised hash: the distinct values. Values of 8 bytes or fewer (numbers, temporal types)
    are hashed as they are reduced, a block at a time, by compiled passes over the column's own
    words that skip the nulls (:func:`~lance_ops.encoding.kernels.word_first_coupons`, then
    :func:`~lance_ops.encoding.kernels.word_best_coupons` when the coupons are many); the same
    values come out as from :func:`_hashed_representatives`, in the same order.
    """
    fixed = _words(array)
    if fixed is None:
        return _hashed_representatives(array, lg_k)
    words, valid, floats = fixed
    # The coupons first: the pass stops early (at a table's worth) when there are many, and when
    # there are few it is the only pass: the slots they reach (each value's slot is its coupon's)
    # show whether the register pass below would have been taken.
    index, complete = word_first_coupons(words, valid, floats, _SEED, lg_k + 2)
    if complete:
        reached = np.unique(word_hashes(words[index], floats, _SEED)[0] & np.uint64((1 << lg_k) - 1))
        if len(reached) <= _hll_mode_slots(lg_k):
            return array.take(pa.array(index))
    best = np.zeros(1 << lg_k, dtype=np.uint8)
    first = np.full(1 << lg_k, -1, dtype=np.int64)
    if word_best_coupons(words, valid, floats, _SEED, lg_k, best, first) > _hll_mode_slots(lg_k):
        return array.take(pa.array(np.sort(first[first >= 0])))
    return pc.unique(array.drop_null())  # few slots, more coupons than the table holds


def _words(array: pa.Array) -> tuple[np.ndarray, np.ndarray, bool] | None:
    """Numbers and temporal values as the 8-byte words the library hashes (nulls included, as
    whatever their slots hold), which rows are valid (empty: all) and whether the words are
    doubles; None for other types."""
    type_ = array.type
    if pt.is_floating(type_):
        floats = True
        dtype = np.dtype(type_.to_pandas_dtype())
    elif pt.is_integer(type_) or pt.is_temporal(type_) and not pt.is_interval(type_):
        floats = False
        dtype = (
            np.dtype(type_.to_pandas_dtype())
            if pt.is_integer(type_)
            else np.dtype(f"i{type_.bit_width // 8}")
        )
    else:
        return None
    buffer = array.buffers()[1]
    if buffer is None or not len(array):
        raw = np.zeros(len(array), dtype)
    else:
        raw = np.frombuffer(buffer, dtype, len(array), array.offset * dtype.itemsize)
    if dtype.itemsize == 8:
        words = raw.view(np.uint64)
    else:  # widened as the library takes them: floats as doubles, integers as int64
        words = raw.astype(np.float64 if floats else np.int64).view(np.uint64)
    valid = np.zeros(0, np.bool_)
    if array.null_count:
        valid = np.asarray(array.is_valid().to_numpy(zero_copy_only=False), np.bool_)
    return words, valid, floats


def _hashed_representatives(array: pa.Array, lg_k: int) -> pa.Array:
    """:func:`_representatives` from arrays of the values' hashes (:func:`_hashes`): the general
    form, for strings, and the reference the fixed-width fast path is tested against."""
    hashed = _hashes(array)
    if hashed is None:
        return pc.unique(array.drop_null())
    array, h1, h2, keep = hashed
    best = np.zeros(1 << lg_k, dtype=np.uint8)
    first = np.full(1 << lg_k, -1, dtype=np.int64)
    if best_coupons(h1, h2, keep, lg_k, best, first) > _hll_mode_slots(lg_k):
        return array.take(pa.array(np.sort(first[first >= 0])))
    # Few slots: the sketch may be in list or set mode, keeping each coupon.
    index, complete = first_of_each_coupon(h1, h2, keep, lg_k + 2)
    if not complete:  # more distinct coupons than the table holds
        return pc.unique(array.filter(pa.array(keep)) if len(keep) else array)
    return array.take(pa.array(index))


def _int64_values(array: pa.Array) -> np.ndarray:
    """Integer-like values as the int64 the library hashes (unsigned 64-bit by their bits)."""
    type_ = array.type
    if pt.is_temporal(type_):
        array = array.view(pa.int32() if type_.bit_width == 32 else pa.int64())
    if array.type == pa.uint64():
        return array.to_numpy(zero_copy_only=False).view(np.int64)
    return array.to_numpy(zero_copy_only=False).astype(np.int64)


def _prepared(array: pa.Array | pa.ChunkedArray) -> pa.Array:
    """``array`` as one plain (not dictionary-encoded) array."""
    if pt.is_dictionary(array.type):
        array = array.cast(array.type.value_type)
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    return array


def _python_values(values: pa.Array) -> list[int | float | str]:
    """Non-null values as the Python values the library takes (and hashes as :func:`_hashes` does)."""
    type_ = values.type
    if pt.is_floating(type_):
        return values.to_numpy(zero_copy_only=False).astype(np.float64).tolist()  # type: ignore[no-any-return]
    if pt.is_boolean(type_):
        return [int(v) for v in values.to_pylist()]
    if pt.is_integer(type_) or pt.is_temporal(type_) and not pt.is_interval(type_):
        return _int64_values(values).tolist()  # type: ignore[no-any-return]
    if pt.is_string(type_) or pt.is_large_string(type_):
        return values.to_pylist()  # type: ignore[no-any-return]
    if pt.is_binary(type_) or pt.is_large_binary(type_) or pt.is_fixed_size_binary(type_):
        return [v.decode("latin-1") for v in values.to_pylist()]
    return [str(v) for v in values.to_pylist()]


class DistinctSketch:
    """A mergeable HyperLogLog estimate of the number of distinct non-null values."""

    def __init__(self, lg_k: int = DEFAULT_LG_K) -> None:
        self._sketch = datasketches.hll_sketch(lg_k, _TARGET)
        # Representatives not yet fed to the library (:meth:`_flush`), all of one type.
        self._pending: list[pa.Array] = []
        self._pending_rows = 0

    @property
    def lg_k(self) -> int:
        return int(self._sketch.lg_config_k)

    def update(self, array: pa.Array | pa.ChunkedArray) -> DistinctSketch:
        """Add the values of ``array``; returns the sketch.

        The values are reduced to their representatives (:func:`_representatives`) and kept;
        they reach the library (one call per value) only when the sketch is read, once per sketch
        rather than once per update, after the kept ones are reduced again together.
        """
        values = _prepared(array)
        if len(values) > UPDATE_SLICE_ROWS:
            # Long arrays a slice at a time: the hashes and masks stay a few MB instead of
            # hundreds (which the allocator maps and unmaps page by page). The same values are
            # kept: representatives of parts, reduced together, represent the whole.
            for start in range(0, len(values), UPDATE_SLICE_ROWS):
                self.update(values.slice(start, UPDATE_SLICE_ROWS))
            return self
        if self._pending and values.type != self._pending[0].type:
            self._flush()
        representatives = _representatives(values, self.lg_k)
        self._pending.append(representatives)
        self._pending_rows += len(representatives)
        if self._pending_rows > 4 << self.lg_k:
            self._reduce()
        return self

    def _reduce(self) -> None:
        """Reduce the kept representatives together (the same registers: a union of representatives
        of parts represents the whole)."""
        if len(self._pending) > 1:
            self._pending = [_representatives(pa.concat_arrays(self._pending), self.lg_k)]
            self._pending_rows = len(self._pending[0])

    def _flush(self) -> datasketches.hll_sketch:
        """The library sketch, fed the kept representatives first."""
        self._reduce()
        for values in self._pending:
            for value in _python_values(values):
                self._sketch.update(value)
        self._pending, self._pending_rows = [], 0
        return self._sketch

    def merge(self, other: DistinctSketch) -> DistinctSketch:
        """A new sketch of both inputs."""
        union = datasketches.hll_union(self.lg_k)
        union.update(self._flush())
        union.update(other._flush())
        out = DistinctSketch.__new__(DistinctSketch)
        out._sketch = union.get_result(_TARGET)
        out._pending, out._pending_rows = [], 0
        return out

    def _registers_only(self) -> datasketches.hll_sketch:
        """This sketch read as a union result, so equal registers give equal estimates.

        Merged sketches and a sketch fed the same values in one go hold the same registers; their
        estimates must not depend on which of them a Spark partition or a rebuild produced.
        """
        data = bytearray(self._flush().serialize_compact())
        data[_FLAGS_BYTE] |= _OUT_OF_ORDER_FLAG
        return datasketches.hll_sketch.deserialize(bytes(data))

    def estimate(self) -> float:
        return float(self._registers_only().get_estimate())

    def bounds(self, num_std_dev: int = 3) -> tuple[float, float]:
        """The sketch's own lower and upper bounds at ``num_std_dev`` standard deviations."""
        sketch = self._registers_only()
        return float(sketch.get_lower_bound(num_std_dev)), float(sketch.get_upper_bound(num_std_dev))

    def to_bytes(self) -> bytes:
        return bytes(self._flush().serialize_compact())

    def __reduce__(self) -> tuple[object, tuple[bytes]]:
        """Pickle as the serialised sketch, so sketches travel between Spark executors and the driver."""
        return (DistinctSketch.from_bytes, (self.to_bytes(),))

    @classmethod
    def from_bytes(cls, data: bytes) -> DistinctSketch:
        out = cls.__new__(cls)
        out._sketch = datasketches.hll_sketch.deserialize(data)
        out._pending, out._pending_rows = [], 0
        return out
