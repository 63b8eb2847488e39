"""Compressive Constant decoding (spec §7.3) and registry behaviour shared by every scheme."""

from __future__ import annotations

import numpy as np
import pytest

from lance_ops._proto import encodings_v2_1_pb2 as pb
from lance_ops.encoding.compression.base import Context, decompressor_for
from lance_ops.encoding.data import FixedWidthBlock
from lance_ops.errors import UnsupportedEncodingError


def test_constant_block_and_per_value() -> None:
    desc = pb.CompressiveEncoding(constant=pb.Constant(value=np.int32(7).tobytes()))
    block = decompressor_for(Context.BLOCK, desc).decompress(memoryview(b""), 5)
    assert block.view(np.int32).tolist() == [7] * 5
    stored = FixedWidthBlock.from_values(np.zeros(3, np.int32))
    assert decompressor_for(Context.PER_VALUE, desc).decompress(stored).view(np.int32).tolist() == [7] * 3
    assert decompressor_for(Context.BLOCK, desc).decompress(memoryview(b""), 0).num_values == 0


def test_constant_without_value_or_in_miniblock_is_unsupported() -> None:
    with pytest.raises(UnsupportedEncodingError):
        decompressor_for(Context.BLOCK, pb.CompressiveEncoding(constant=pb.Constant()))
    with pytest.raises(UnsupportedEncodingError):
        decompressor_for(Context.MINIBLOCK, pb.CompressiveEncoding(constant=pb.Constant(value=b"\x01")))


@pytest.mark.parametrize("name", ["dictionary"])
def test_unwritten_variants_are_unsupported(name: str) -> None:
    desc = pb.CompressiveEncoding()
    getattr(desc, name).SetInParent()
    for context in Context:
        with pytest.raises(UnsupportedEncodingError):
            decompressor_for(context, desc)


def test_registry_contexts() -> None:
    from lance_ops.encoding.compression import base

    base._ensure_loaded()
    registered = {(c.value, n) for c, n in base._REGISTRY}
    expected = {
        ("miniblock", "flat"),
        ("block", "flat"),
        ("per_value", "flat"),
        ("miniblock", "variable"),
        ("block", "variable"),
        ("per_value", "variable"),
        ("miniblock", "inline_bitpacking"),
        ("block", "inline_bitpacking"),
        ("block", "out_of_line_bitpacking"),
        ("miniblock", "rle"),
        ("block", "rle"),
        ("miniblock", "general"),
        ("block", "general"),
        ("per_value", "general"),
        ("miniblock", "byte_stream_split"),
        ("miniblock", "fsst"),
        ("per_value", "fsst"),
        ("miniblock", "fixed_size_list"),
        ("per_value", "fixed_size_list"),
        ("miniblock", "packed_struct"),
        ("per_value", "packed_struct"),
        ("block", "constant"),
        ("per_value", "constant"),
    }
    assert expected <= registered
