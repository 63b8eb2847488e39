"""Page statistics as the Lance format defines them: null count, lower bound, upper bound.

One row per page, in the column's own type (the format's statistics schema is
``<field_id>: struct{null_count: i64, min_value: T, max_value: T}``). The rules, by type:

* integer-like (signed / unsigned integers, booleans, dates, times, timestamps, durations): the
  page's min and max; when unknown (all values null, or an empty page) the type's minimum and
  maximum representable values.
* floats: NaN is ignored; unknown bounds are ``-inf`` / ``+inf``; a zero max is recorded as
  ``+0.0`` and a zero min as ``-0.0`` (so ``-0.0 <= x <= +0.0`` covers both zeros). Filters sort
  a NaN by its sign bit (``-NaN`` below ``-inf``, ``NaN`` above ``+inf``), so the bounds alone
  cannot tell whether ``x > c`` or ``x < c`` may hold in a page holding NaN: writers here keep
  each page's NaN counts by sign (:func:`page_nan_counts`) outside the format's struct. (Files
  written before that recorded ``+inf`` as the max of a page holding NaN; readers still know
  them.)
* binary and strings: bounds of at most :data:`MAX_BOUND_BYTES` bytes. A longer min is
  truncated (a prefix sorts first); a longer max is truncated and its last byte (code point for
  strings) incremented so it still sorts above every value; unknown bounds, or a max with no
  such truncation (all ``0xff`` bytes), are null.

Example: a page ``["abcd", None, "abd\u00ff"]`` with a 3-byte limit has null_count 1, min
``"abc"`` and max ``"abe"``. Types without an order the format defines (nested, dictionary,
decimal, fixed-size binary) have no statistics: :func:`supports_statistics` is False.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pt

from lance_ops.encoding.kernels import COMPILED_FROM

__all__ = [
    "MAX_BOUND_BYTES",
    "float_page_summary",
    "nan_signs",
    "page_nan_counts",
    "page_statistics",
    "statistics_type",
    "supports_statistics",
]

MAX_BOUND_BYTES = 64

_MAX_CODE_POINT = 0x10FFFF
_SURROGATES = range(0xD800, 0xE000)


def _integer_like(type_: pa.DataType) -> bool:
    return bool(
        pt.is_integer(type_) or pt.is_boolean(type_) or pt.is_temporal(type_) and not pt.is_interval(type_)
    )


def _binary_like(type_: pa.DataType) -> bool:
    return bool(
        pt.is_binary(type_) or pt.is_large_binary(type_) or pt.is_string(type_) or pt.is_large_string(type_)
    )


def supports_statistics(type_: pa.DataType) -> bool:
    """Whether pages of ``type_`` get min / max statistics."""
    return _integer_like(type_) or pt.is_floating(type_) or _binary_like(type_)


def statistics_type(type_: pa.DataType) -> pa.StructType:
    """The format's statistics struct for a column of ``type_``."""
    return pa.struct(
        [pa.field("null_count", pa.int64()), pa.field("min_value", type_), pa.field("max_value", type_)]
    )


def _storage_type(type_: pa.DataType) -> pa.DataType:
    """The integer type an integer-like type is stored as (booleans stay booleans)."""
    if pt.is_integer(type_) or pt.is_boolean(type_):
        return type_
    return pa.int32() if type_.bit_width == 32 else pa.int64()


def _integer_bounds(page: pa.Array) -> tuple[Any, Any]:
    """Bounds in the column's storage type (temporal values as their integers)."""
    storage = _storage_type(page.type)
    if page.null_count == len(page):
        if pt.is_boolean(storage):
            return False, True
        info = np.iinfo(storage.to_pandas_dtype())
        return int(info.min), int(info.max)
    result = pc.min_max(page if storage == page.type else page.view(storage))
    return result["min"].as_py(), result["max"].as_py()


def _float_bounds(page: pa.Array) -> tuple[float, float]:
    values = page.drop_null().to_numpy(zero_copy_only=False)
    nan = np.isnan(values)
    numbers = values[~nan]
    if not len(numbers):
        return -np.inf, np.inf
    low, high = float(numbers.min()), float(numbers.max())
    return (-0.0 if low == 0 else low), (0.0 if high == 0 else high)


def _truncate_min(value: bytes | str, limit: int) -> bytes | str:
    if isinstance(value, str):
        encoded = value.encode("utf-8")
        return value if len(encoded) <= limit else encoded[:limit].decode("utf-8", errors="ignore")
    return value[:limit]


def _next_code_point(char: str) -> int:
    code = ord(char) + 1
    return _SURROGATES.stop if code in _SURROGATES else code


def _increment_text(prefix: str, limit: int) -> str | None:
    """The shortest-changed string of at most ``limit`` bytes above every string starting with ``prefix``."""
    for end in range(len(prefix) - 1, -1, -1):
        code = _next_code_point(prefix[end])
        if code <= _MAX_CODE_POINT:
            candidate = prefix[:end] + chr(code)
            if len(candidate.encode("utf-8")) <= limit:
                return candidate
    return None


def _increment_bytes(prefix: bytes) -> bytes | None:
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])


def _truncate_max(value: bytes | str, limit: int) -> bytes | str | None:
    if isinstance(value, str):
        encoded = value.encode("utf-8")
        if len(encoded) <= limit:
            return value
        return _increment_text(encoded[:limit].decode("utf-8", errors="ignore"), limit)
    return value if len(value) <= limit else _increment_bytes(value[:limit])


def _binary_bounds(page: pa.Array, limit: int) -> tuple[Any, Any]:
    if page.null_count == len(page):
        return None, None
    low, high = _binary_min_max(page)
    return _truncate_min(low, limit), _truncate_max(high, limit)


_OFFSET_WIDTHS = {
    pa.string(): np.int32,
    pa.binary(): np.int32,
    pa.large_string(): np.int64,
    pa.large_binary(): np.int64,
}


def _binary_min_max(page: pa.Array) -> tuple[Any, Any]:
    """The smallest and largest valid value of a page holding at least one (Arrow's
    ``min_max``; string and binary pages of :data:`~lance_ops.encoding.kernels.COMPILED_FROM`
    values or more by a compiled loop over their offsets, in the same order)."""
    width = _OFFSET_WIDTHS.get(page.type)
    if width is None or len(page) < COMPILED_FROM:  # a small page is not worth loading numba
        result = pc.min_max(page)
        return result["min"].as_py(), result["max"].as_py()
    from lance_ops.encoding._minmax_kernels import min_max_index

    offs = np.frombuffer(page.buffers()[1], width, len(page) + 1, page.offset * np.dtype(width).itemsize)
    data = page.buffers()[2]
    raw = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
    valid = np.zeros(0, np.bool_)
    if page.null_count:
        valid = page.is_valid().to_numpy(zero_copy_only=False)
    low, high = min_max_index(raw, offs, valid)
    return page[low].as_py(), page[high].as_py()


def _bound_array(values: list[Any], type_: pa.DataType) -> pa.Array:
    if pt.is_floating(type_):
        return pa.array(np.array(values, dtype=type_.to_pandas_dtype()), type_)
    if _integer_like(type_):
        return pa.array(values, _storage_type(type_)).view(type_)
    return pa.array(values, type_)


def page_statistics(
    array: pa.Array | pa.ChunkedArray, page_lengths: Sequence[int], max_bound_bytes: int = MAX_BOUND_BYTES
) -> pa.StructArray:
    """Statistics of consecutive pages of ``array`` (``page_lengths`` rows each), one row per page.

    Raises ``ValueError`` when the page lengths do not add up to the array's length and
    ``TypeError`` for a type without statistics (see :func:`supports_statistics`).
    """
    type_ = array.type
    if not supports_statistics(type_):
        raise TypeError(f"no statistics are defined for {type_}")
    lengths = np.asarray(page_lengths, dtype=np.int64)
    if (lengths < 0).any() or int(lengths.sum()) != len(array):
        raise ValueError(f"page lengths {list(lengths)} do not cover {len(array)} rows")
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    starts = np.cumsum(lengths) - lengths
    pages = [array.slice(int(s), int(n)) for s, n in zip(starts, lengths, strict=True)]
    if _integer_like(type_):
        bounds = [_integer_bounds(p) for p in pages]
    elif pt.is_floating(type_):
        bounds = [_float_bounds(p) for p in pages]
    else:
        bounds = [_binary_bounds(p, max_bound_bytes) for p in pages]
    nulls = pa.array([p.null_count for p in pages], pa.int64())
    lows, highs = (_bound_array([b[i] for b in bounds], type_) for i in (0, 1))
    return pa.StructArray.from_arrays([nulls, lows, highs], fields=list(statistics_type(type_)))


def nan_signs(array: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Per row of a float array: whether it is a NaN with the sign bit clear, and one with it set."""
    dtype = np.dtype(array.type.to_pandas_dtype())
    buffer = array.buffers()[1]
    raw = np.zeros(0, dtype) if buffer is None else np.frombuffer(buffer, dtype)
    raw = raw[array.offset : array.offset + len(array)]
    nan = np.isnan(raw)
    if array.null_count:
        nan &= np.asarray(array.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    negative = np.signbit(raw)
    return nan & ~negative, nan & negative


def page_nan_counts(array: pa.Array | pa.ChunkedArray, page_lengths: Sequence[int]) -> np.ndarray:
    """NaN values of each page of a float ``array`` by sign: ``[[positive, ...], [negative, ...]]``.

    The format's statistics leave NaN out of the bounds; these counts (kept beside them, not in
    the format's struct) let a reader prune ``x > c`` / ``x < c`` exactly all the same.
    """
    if not pt.is_floating(array.type):
        raise TypeError(f"NaN counts are defined for floating-point columns, not {array.type}")
    lengths = np.asarray(page_lengths, dtype=np.int64)
    if (lengths < 0).any() or int(lengths.sum()) != len(array):
        raise ValueError(f"page lengths {list(lengths)} do not cover {len(array)} rows")
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    ends = np.cumsum(lengths)
    out = np.zeros((2, len(lengths)), dtype=np.int64)
    for row, flags in enumerate(nan_signs(array)):
        running = np.concatenate([[0], np.cumsum(flags, dtype=np.int64)])
        out[row] = running[ends] - running[ends - lengths]
    return out


def merge_statistics(stats: pa.StructArray, page_lengths: Sequence[int] | np.ndarray) -> pa.StructArray:
    """One row of statistics bounding consecutive pages (``page_lengths`` rows each), by the same rules.

    Pages without a non-null value do not narrow the bounds (their integer bounds are the type's
    extremes); a null (unknown) max of any other page makes the max unknown.
    """
    type_ = stats.type.field("min_value").type
    counts = stats.field("null_count").to_numpy(zero_copy_only=False)
    valued = counts < np.asarray(page_lengths, dtype=np.int64)
    nulls = pa.array([int(counts.sum())], pa.int64())
    if not valued.any():
        empty = page_statistics(pa.array([], type_), [0])
        return pa.StructArray.from_arrays(
            [nulls, empty.field("min_value"), empty.field("max_value")], fields=list(stats.type)
        )
    mask = pa.array(valued)
    lows, highs = stats.field("min_value").filter(mask), stats.field("max_value").filter(mask)
    if _integer_like(type_):  # on the integers: Arrow has no min / max kernel for some (durations)
        storage = _storage_type(type_)
        lows, highs = lows.view(storage), highs.view(storage)
    low = pc.min(lows)
    high = pa.scalar(None, highs.type) if highs.null_count else pc.max(highs)
    bounds = [pa.array([s], highs.type).view(type_) for s in (low, high)]
    return pa.StructArray.from_arrays([nulls, *bounds], fields=list(stats.type))


def float_page_summary(
    array: pa.Array | pa.ChunkedArray, page_lengths: Sequence[int]
) -> tuple[pa.StructArray, np.ndarray]:
    """:func:`page_statistics` and :func:`page_nan_counts` of a float ``array`` together: for float32
    and float64 arrays of :data:`~lance_ops.encoding.kernels.COMPILED_FROM` values or more, one
    compiled pass over the values computes both (the same values)."""
    type_ = array.type
    lengths = np.asarray(page_lengths, dtype=np.int64)
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if (
        len(array) < COMPILED_FROM
        or type_ not in (pa.float32(), pa.float64())
        or array.buffers()[1] is None
        or (lengths < 0).any()
        or int(lengths.sum()) != len(array)
    ):  # small, float16, or bad lengths (the general functions raise)
        return page_statistics(array, page_lengths), page_nan_counts(array, page_lengths)
    from lance_ops.encoding._minmax_kernels import float_pages

    dtype = np.dtype(type_.to_pandas_dtype())
    values = np.frombuffer(array.buffers()[1], dtype, len(array), array.offset * dtype.itemsize)
    valid = np.zeros(0, np.bool_)
    if array.null_count:
        valid = np.asarray(array.is_valid().to_numpy(zero_copy_only=False), np.bool_)
    lows, highs, positive, negative = float_pages(values, valid, np.cumsum(lengths))
    starts = np.cumsum(lengths) - lengths
    nulls = pa.array(
        [array.slice(int(s), int(n)).null_count for s, n in zip(starts, lengths, strict=True)], pa.int64()
    )
    stats = pa.StructArray.from_arrays(
        [nulls, pa.array(lows.astype(dtype), type_), pa.array(highs.astype(dtype), type_)],
        fields=list(statistics_type(type_)),
    )
    return stats, np.stack([positive, negative])
