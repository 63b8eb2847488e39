"""RLE in the mini-block and block contexts (spec §3.7, §5, §7.7)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lance_ops._proto import encodings_v2_1_pb2 as pb
from lance_ops.encoding.compression.base import Context, decompressor_for, flat_desc
from lance_ops.encoding.compression.rle import RleCompressor, encode_runs, estimate_rle_size, rle_desc
from lance_ops.encoding.data import FixedWidthBlock
from lance_ops.errors import CorruptFileError, UnsupportedEncodingError

from .compression_helpers import (
    block_roundtrip,
    fixed_values,
    miniblock_chunks,
    miniblock_roundtrip,
    page_values,
    read_pages,
    write_column,
)


def test_example_4096_sevens() -> None:
    compressed, desc = RleCompressor().compress(FixedWidthBlock.from_values(np.full(4096, 7, np.int32)))
    assert desc == rle_desc(32)
    (chunk,) = compressed.chunks
    assert chunk.buffer_sizes == (68, 17)
    assert compressed.buffers[1].tobytes() == b"\xff" * 16 + b"\x10"
    assert compressed.buffers[0].view("<i4").tolist() == [7] * 17


def test_long_run_split() -> None:
    values, lengths = encode_runs(np.array([5] * 1000 + [6], np.uint16))
    assert values.tolist() == [5, 5, 5, 5, 6]
    assert lengths.tolist() == [255, 255, 255, 235, 1]


def test_block_form_example() -> None:
    data, desc = RleCompressor().compress_block(FixedWidthBlock.from_values(np.ones(3000, np.uint16)))
    assert data == bytes.fromhex("1800000000000000") + b"\x01\x00" * 12 + b"\xff" * 11 + b"\xc3"


def test_estimate() -> None:
    assert estimate_rle_size(np.repeat(np.arange(100, dtype=np.int32), 100)) == (100 + 10_000 // 255) * 5


@pytest.mark.parametrize("bits", [8, 16, 32, 64])
@given(
    runs=st.lists(
        st.tuples(st.integers(0, 3), st.sampled_from([1, 2, 3, 255, 256, 600]) | st.integers(1, 40)),
        max_size=200,
    )
)
def test_roundtrip(bits: int, runs: list[tuple[int, int]]) -> None:
    dtype = np.dtype(f"<u{bits // 8}")
    values = np.repeat(np.array([v for v, _ in runs], dtype=dtype), [k for _, k in runs]).astype(dtype)
    blocks, compressed, _ = miniblock_roundtrip(RleCompressor(), FixedWidthBlock.from_values(values))
    np.testing.assert_array_equal(fixed_values(blocks, dtype), values)
    assert all(sum(c.buffer_sizes) <= 8186 for c in compressed.chunks)
    assert all(c.log_num_values <= 12 for c in compressed.chunks)
    decoded, _, _ = block_roundtrip(RleCompressor(), FixedWidthBlock.from_values(values))
    np.testing.assert_array_equal(decoded.view(dtype), values)


@pytest.mark.parametrize("n", [0, 1, 1023, 1024, 1025, 4097, 9000])
def test_edge_sizes_distinct_values(n: int) -> None:
    values = np.arange(n, dtype=np.int64)
    blocks, compressed, _ = miniblock_roundtrip(RleCompressor(), FixedWidthBlock.from_values(values))
    np.testing.assert_array_equal(fixed_values(blocks, np.int64), values)
    assert all(1 << c.log_num_values == 512 for c in compressed.chunks[:-1])


def test_grammar_and_garbled() -> None:
    with pytest.raises(UnsupportedEncodingError):
        decompressor_for(
            Context.MINIBLOCK,
            pb.CompressiveEncoding(rle=pb.Rle(values=flat_desc(32), run_lengths=flat_desc(16))),
        )
    with pytest.raises(UnsupportedEncodingError):
        decompressor_for(
            Context.MINIBLOCK,
            pb.CompressiveEncoding(rle=pb.Rle(values=flat_desc(24), run_lengths=flat_desc(8))),
        )
    dec = decompressor_for(Context.MINIBLOCK, rle_desc(32))
    with pytest.raises(CorruptFileError):
        dec.decompress([memoryview(b"\x07\0\0\0"), memoryview(b"\x05")], 6)
    with pytest.raises(CorruptFileError):
        dec.decompress([memoryview(b"\x07\0\0"), memoryview(b"\x05")], 5)
    block = decompressor_for(Context.BLOCK, rle_desc(16))
    with pytest.raises(CorruptFileError):
        block.decompress(memoryview(bytes.fromhex("ff00000000000000 0100")), 1)


# --- pylance pages -----------------------------------------------------------------------------------

_rng = np.random.default_rng(1)
CASES = {
    "runs-of-100": np.repeat(np.arange(100, dtype=np.int32), 100),
    "runs-of-2": np.repeat(_rng.integers(-(2**31), 2**31 - 1, 5000, dtype=np.int32), 2),
    "runs-of-3": np.repeat(_rng.integers(-(2**31), 2**31 - 1, 5000, dtype=np.int32), 3),
    "mixed-runs": np.repeat(
        _rng.integers(-(2**31), 2**31 - 1, 4000, dtype=np.int32), _rng.integers(1, 6, 4000)
    ),
    "float64-runs": np.repeat(_rng.normal(size=3000), _rng.integers(1, 5, 3000)),
}


@pytest.mark.interop
@pytest.mark.parametrize("case", sorted(CASES))
def test_pylance_rle_pages(tmp_path, case: str) -> None:
    values = CASES[case]
    (page,) = read_pages(write_column(tmp_path / "rle.lance", pa.array(values), version="2.1"))
    mb = page.layout.mini_block_layout
    assert mb.value_compression == rle_desc(values.dtype.itemsize * 8)
    np.testing.assert_array_equal(fixed_values(page_values(page), values.dtype), values)
    ours, _ = RleCompressor().compress(FixedWidthBlock.from_values(values))
    chunks = miniblock_chunks(page)
    for i in (0, 1):
        assert ours.buffers[i].tobytes() == b"".join(bytes(c.values[i]) for c in chunks)
    assert [c.buffer_sizes for c in ours.chunks] == [tuple(len(b) for b in c.values) for c in chunks]


@pytest.mark.interop
def test_pylance_rle_def_levels_2_2(tmp_path) -> None:
    n = 10_000
    valid = np.arange(n) % 1000 != 3
    arr = pa.array(np.arange(n, dtype=np.int32), mask=~valid)
    (page,) = read_pages(write_column(tmp_path / "nullable.lance", arr, version="2.2"))
    mb = page.layout.mini_block_layout
    assert mb.def_compression == rle_desc(16)
    dec = decompressor_for(Context.BLOCK, mb.def_compression)
    levels = []
    for chunk in miniblock_chunks(page):
        got = dec.decompress(chunk.def_, chunk.num_levels).view(np.uint16)
        assert RleCompressor().compress_block(FixedWidthBlock.from_values(got))[0] == bytes(chunk.def_)
        levels.append(got)
    np.testing.assert_array_equal(np.concatenate(levels), (~valid).astype(np.uint16))


@given(st.lists(st.integers(0, 3), max_size=1200), st.sampled_from([1, 100, 300]))
def test_run_count_is_the_number_of_maximal_runs(values: list[int], stretch: int) -> None:
    from lance_ops.encoding.compression.rle import _run_bounds, run_count, split_run_count

    arr = np.repeat(np.array(values, np.uint16), stretch)
    assert run_count(arr) == len(_run_bounds(arr)[0]) <= split_run_count(arr) == len(encode_runs(arr)[1])
