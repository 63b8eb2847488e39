"""``take_block`` (dictionary lookups, picked rows) against a plain byte-row gather, every width."""

from __future__ import annotations

import numpy as np
import pytest

from lance_ops.encoding.data import FixedWidthBlock
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
