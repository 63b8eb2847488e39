"""Flat in the mini-block, block and per-value contexts (spec §3.7, §7.1)."""

from __future__ import annotations

import decimal

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lance_ops._proto import encodings_v2_1_pb2 as pb
from lance_ops.encoding.compression.base import Context, decompressor_for, fixed_chunk_values
from lance_ops.encoding.compression.flat import FlatCompressor
from lance_ops.encoding.data import FixedWidthBlock, VariableWidthBlock
from lance_ops.errors import CorruptFileError, UnsupportedEncodingError

from .compression_helpers import (
    block_roundtrip,
    miniblock_chunks,
    miniblock_roundtrip,
    page_values,
    per_value_roundtrip,
    read_pages,
    write_column,
)

WIDTHS = [1, 3, 8, 16, 24, 32, 64, 104, 128]


def _bits(block: FixedWidthBlock) -> np.ndarray:
    return np.unpackbits(np.asarray(block.data, np.uint8), bitorder="little")[
        : block.num_values * block.bits_per_value
    ]


@pytest.mark.parametrize(
    ("bytes_per_value", "expected"),
    [(1, 4096), (2, 2048), (4, 1024), (8, 512), (16, 256), (13, 512), (1 / 8, 4096)],
)
def test_chunk_rule(bytes_per_value: float, expected: int) -> None:
    assert fixed_chunk_values(bytes_per_value) == expected


@pytest.mark.parametrize("bits", WIDTHS)
@given(
    n=st.sampled_from([0, 1, 7, 1023, 1024, 1025, 4097]) | st.integers(0, 9000),
    seed=st.integers(0, 2**32 - 1),
)
def test_roundtrip_all_contexts(bits: int, n: int, seed: int) -> None:
    nbytes = (n * bits + 7) // 8
    data = np.random.default_rng(seed).integers(0, 256, nbytes, dtype=np.uint8)
    block = FixedWidthBlock(data, bits, n)
    blocks, compressed, desc = miniblock_roundtrip(FlatCompressor(), block)
    assert desc.flat.bits_per_value == bits
    per_chunk = fixed_chunk_values(bits / 8)
    assert all(c.log_num_values == per_chunk.bit_length() - 1 for c in compressed.chunks[:-1])
    got = np.concatenate([_bits(b) for b in blocks]) if blocks else np.zeros(0, np.uint8)
    np.testing.assert_array_equal(got, _bits(block))
    decoded, raw, _ = block_roundtrip(FlatCompressor(), block)
    assert len(raw) == nbytes
    np.testing.assert_array_equal(_bits(decoded), _bits(block))
    same, stored, _ = per_value_roundtrip(FlatCompressor(), block)
    assert same.num_values == n


def test_boolean_chunks_are_4096() -> None:
    bits = np.packbits(np.arange(10_000) % 3 == 0, bitorder="little")
    compressed, _ = FlatCompressor().compress(FixedWidthBlock(bits, 1, 10_000))
    assert [c.buffer_sizes[0] for c in compressed.chunks] == [512, 512, 226]
    assert [c.log_num_values for c in compressed.chunks] == [12, 12, 0]


def test_errors() -> None:
    with pytest.raises(UnsupportedEncodingError):
        FlatCompressor().compress(VariableWidthBlock(np.zeros(1, np.uint32), np.zeros(0, np.uint8), 0))
    dec = decompressor_for(Context.MINIBLOCK, pb.CompressiveEncoding(flat=pb.Flat(bits_per_value=32)))
    with pytest.raises(CorruptFileError):
        dec.decompress([memoryview(b"\0" * 7)], 2)
    with pytest.raises(CorruptFileError):
        dec.decompress([memoryview(b"\0" * 8), memoryview(b"")], 2)
    with pytest.raises(UnsupportedEncodingError):
        decompressor_for(Context.BLOCK, pb.CompressiveEncoding(flat=pb.Flat(bits_per_value=0)))
    with pytest.raises(UnsupportedEncodingError):
        decompressor_for(Context.BLOCK, pb.CompressiveEncoding())


# --- pylance pages -----------------------------------------------------------------------------------

_rng = np.random.default_rng(7)
CASES = {
    "int32-none": (pa.array(np.arange(5000, dtype=np.int32)), {"lance-encoding:compression": "none"}, 32),
    "uint8": (pa.array(_rng.integers(0, 256, 10_000, dtype=np.uint8)), None, 8),
    "float64": (pa.array(_rng.normal(size=3000)), None, 64),
    "float16": (pa.array(_rng.normal(size=3000).astype(np.float16)), None, 16),
    "bool": (pa.array(_rng.integers(0, 2, 10_001).astype(bool)), None, 1),
    "decimal128": (
        pa.array(
            [decimal.Decimal(int(x)) / 100 for x in _rng.integers(-(10**12), 10**12, 2000)],
            pa.decimal128(20, 2),
        ),
        None,
        128,
    ),
}


@pytest.mark.interop
@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_pylance_flat_pages(tmp_path, version: str, case: str) -> None:
    arr, meta, bits = CASES[case]
    (page,) = read_pages(write_column(tmp_path / "flat.lance", arr, meta, version))
    mb = page.layout.mini_block_layout
    assert mb.value_compression.flat.bits_per_value == bits
    decoded = page_values(page)
    if bits == 1:
        got = np.concatenate([_bits(b) for b in decoded]).astype(bool)
        np.testing.assert_array_equal(got, arr.to_numpy(zero_copy_only=False))
        data = np.frombuffer(arr.buffers()[1], np.uint8)
    else:
        data = np.frombuffer(arr.buffers()[1], np.uint8)[: len(arr) * bits // 8]
        np.testing.assert_array_equal(np.concatenate([np.asarray(b.data) for b in decoded]), data)
    ours, _ = FlatCompressor().compress(FixedWidthBlock(data, bits, len(arr)))
    chunks = miniblock_chunks(page)
    assert [c.num_values for c in chunks] == [1 << c.log_num_values for c in ours.chunks[:-1]] + [
        len(arr) - sum(1 << c.log_num_values for c in ours.chunks[:-1])
    ]
    assert ours.buffers[0].tobytes() == b"".join(bytes(c.values[0]) for c in chunks)
