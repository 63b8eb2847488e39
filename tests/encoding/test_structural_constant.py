"""Constant pages (spec §5): all-null form in 2.1 / 2.2, constant-value form in 2.2 only."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from lance_ops.encoding import FileVersion
from lance_ops.encoding.structural import constant
from lance_ops.encoding.structural.repdef import shred
from lance_ops.errors import UnsupportedEncodingError
from tests.encoding.harness import round_trip

V21, V22 = FileVersion.V2_1, FileVersion.V2_2


@pytest.mark.parametrize("version", [V21, V22], ids=str)
def test_plain_all_null_has_no_buffers(version: FileVersion) -> None:
    rt = round_trip(
        pa.nulls(3000, pa.int32()), version, expect="constant_layout/no-inline", takes=[[0, 2999]]
    )
    assert rt.memory.columns[0][0].buffers == ()
    assert list(rt.layouts[0][0].constant_layout.layers) == [3]  # NULLABLE_ITEM


def test_all_null_list_levels_2_1_raw() -> None:
    arr = pa.array([[] if i % 2 == 0 else None for i in range(3000)], pa.list_(pa.int32()))
    rt = round_trip(arr, V21, expect="constant_layout", slices=[(5, 17)], takes=[[1, 2, 2999]])
    page = rt.memory.columns[0][0]
    data = rt.memory.data
    rep = bytes(data[page.buffers[0][0] : sum(page.buffers[0])])
    defs = bytes(data[page.buffers[1][0] : sum(page.buffers[1])])
    assert len(rep) == len(defs) == 6000
    assert rep[:4] == bytes.fromhex("01000100") and defs[:4] == bytes.fromhex("02000100")
    layout = rt.layouts[0][0].constant_layout
    assert not layout.HasField("rep_compression") and not layout.HasField("def_compression")


def test_all_null_list_levels_2_2_compressed() -> None:
    arr = pa.array([None if i % 2 == 0 else [] for i in range(3000)], pa.list_(pa.int32()))
    rt = round_trip(arr, V22, expect="constant_layout", takes=[[0, 1, 1500]])
    layout = rt.layouts[0][0].constant_layout
    assert layout.rep_compression.WhichOneof("compression") == "rle"
    assert layout.def_compression.WhichOneof("compression") == "out_of_line_bitpacking"
    page = rt.memory.columns[0][0]
    rep = bytes(rt.memory.data[page.buffers[0][0] : sum(page.buffers[0])])
    assert rep == bytes.fromhex("1800000000000000") + bytes.fromhex("0100") * 12 + b"\xff" * 11 + b"\xc3"
    assert layout.num_rep_values == layout.num_def_values == 3000


@pytest.mark.parametrize(
    ("array", "inline"),
    [
        (pa.array([7] * 100, pa.int64()), bytes.fromhex("0700000000000000")),
        (pa.array([True, None, True]), b"\x01"),
        (pa.array([1.5, None, 1.5], pa.float32()), np.float32(1.5).tobytes()),
    ],
)
def test_inline_constant(array: pa.Array, inline: bytes) -> None:
    rt = round_trip(array, V22, expect="constant_layout/inline", takes=[[0, len(array) - 1]])
    assert rt.layouts[0][0].constant_layout.inline_value == inline


def test_value_buffer_constant_string() -> None:
    arr = pa.array(["hello", None] * 50)
    rt = round_trip(arr, V22, expect="constant_layout/no-inline", takes=[[0, 1, 99]])
    page = rt.memory.columns[0][0]
    value = bytes(rt.memory.data[page.buffers[0][0] : sum(page.buffers[0])])
    assert value == bytes.fromhex("02000000080000000500000000000000050000006865 6c6c6f".replace(" ", ""))
    assert len(page.buffers) == 3  # value, rep (empty), def


def test_wide_fixed_constant_uses_value_buffer() -> None:
    arr = pa.array([b"z" * 40] * 10, pa.binary(40))
    rt = round_trip(arr, V22, expect="constant_layout/no-inline")
    assert len(rt.memory.columns[0][0].buffers) == 1


def test_2_1_never_writes_value_constants() -> None:
    (leaf,) = shred(pa.array([1, 1, 1], pa.int32()))
    with pytest.raises(UnsupportedEncodingError):
        constant.encode_constant(leaf.levels, pa.array([1], pa.int32()), V21)
    round_trip(pa.array([1] * 10, pa.int32()), V21, expect="mini_block_layout")


def test_constant_in_struct_with_lists() -> None:
    arr = pa.array([{"a": [5, 5], "b": "k"} if i % 3 else None for i in range(300)])
    round_trip(arr, V22, takes=[[0, 1, 2, 299]])
    round_trip(arr, V21, takes=[[0, 1, 2, 299]])
