"""``take_block`` (dictionary lookups, picked rows) against a plain gather: byte rows for every
fixed width, Python slices for variable-width values (both the numpy path of small takes and
Arrow's of large ones)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lance_ops.encoding.data import FixedWidthBlock, VariableWidthBlock
from lance_ops.encoding.structural import values
from lance_ops.encoding.structural.values import take_block
from lance_ops.errors import CorruptFileError


@pytest.mark.parametrize("width", [1, 2, 3, 4, 8, 16])
@pytest.mark.parametrize("num_values", [1, 7, 1025])
def test_fixed_width_gather_equals_byte_rows(width: int, num_values: int) -> None:
    rng = np.random.default_rng(width * 1000 + num_values)
    data = rng.integers(0, 256, num_values * width + 5, dtype=np.uint8)  # trailing bytes ignored
    block = FixedWidthBlock(data[1:], width * 8, num_values)  # unaligned start
    indices = rng.integers(0, num_values, 3 * num_values)
    got = take_block(block, indices)
    rows = data[1 : 1 + num_values * width].reshape(num_values, width)
    assert got.num_values == len(indices) and got.bits_per_value == width * 8
    assert np.asarray(got.data).tobytes() == rows[indices].tobytes()


def test_empty_and_out_of_range_indices() -> None:
    block = FixedWidthBlock(np.arange(16, dtype=np.uint8), 32, 4)
    assert take_block(block, np.zeros(0, np.int64)).num_values == 0
    with pytest.raises(CorruptFileError, match="dictionary index out of range"):
        take_block(block, np.array([4]))


@settings(max_examples=60, deadline=None)
@given(
    items=st.lists(st.binary(max_size=12), min_size=1, max_size=40),
    picks=st.lists(st.integers(0, 10_000), max_size=60),
    offset_type=st.sampled_from([np.uint32, np.uint64]),
    small=st.booleans(),
)
def test_variable_width_gather_equals_slices(
    items: list[bytes], picks: list[int], offset_type: type, small: bool
) -> None:
    offsets = np.r_[0, np.cumsum([len(b) for b in items])].astype(offset_type)
    data = np.frombuffer(b"".join(items) + b"tail", np.uint8)  # bytes past the last value ignored
    block = VariableWidthBlock(offsets, data, len(items))
    indices = np.array([p % len(items) for p in picks], np.int64)  # repeats, any order, or none
    limit = values._SMALL_TAKE
    try:
        values._SMALL_TAKE = limit if small else -1  # the numpy path, or Arrow's
        got = take_block(block, indices)
    finally:
        values._SMALL_TAKE = limit
    assert isinstance(got, VariableWidthBlock) and got.num_values == len(indices)
    assert got.offsets.dtype == offsets.dtype and int(got.offsets[0]) == 0
    bounds = got.offsets.astype(np.int64)
    taken = [np.asarray(got.data)[a:b].tobytes() for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    assert taken == [items[i] for i in indices]
