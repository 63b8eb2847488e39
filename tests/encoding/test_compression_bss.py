"""ByteStreamSplit in the mini-block context (spec §3.7, §7.8)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lance_ops._proto import encodings_v2_1_pb2 as pb
from lance_ops.encoding.compression.base import Context, decompressor_for, flat_desc
from lance_ops.encoding.compression.bss import ByteStreamSplitCompressor
from lance_ops.encoding.compression.general import decompress_buffer
from lance_ops.encoding.data import FixedWidthBlock
from lance_ops.errors import CorruptFileError, UnsupportedEncodingError

from .compression_helpers import (
    fixed_values,
    miniblock_chunks,
    miniblock_roundtrip,
    page_values,
    read_pages,
    write_column,
)


def test_layout_example() -> None:
    compressed, desc = ByteStreamSplitCompressor().compress(
        FixedWidthBlock.from_values(np.array([1, 2], np.int32))
    )
    assert compressed.buffers[0].tobytes() == bytes.fromhex("0102 0000 0000 0000")
    assert desc == pb.CompressiveEncoding(byte_stream_split=pb.ByteStreamSplit(values=flat_desc(32)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.uint64])
@given(
    n=st.sampled_from([0, 1, 511, 512, 513, 1023, 1024, 1025]) | st.integers(0, 5000), seed=st.integers(0, 99)
)
def test_roundtrip(dtype: type, n: int, seed: int) -> None:
    values = np.random.default_rng(seed).normal(size=n).astype(np.float64).view(np.uint64).astype(dtype)
    blocks, compressed, _ = miniblock_roundtrip(
        ByteStreamSplitCompressor(), FixedWidthBlock.from_values(values)
    )
    np.testing.assert_array_equal(fixed_values(blocks, dtype).view(np.uint8), values.view(np.uint8))
    per_chunk = 1024 if np.dtype(dtype).itemsize == 4 else 512
    assert all(1 << c.log_num_values == per_chunk for c in compressed.chunks[:-1])


def test_errors() -> None:
    with pytest.raises(UnsupportedEncodingError):
        ByteStreamSplitCompressor().compress(FixedWidthBlock.from_values(np.zeros(3, np.int16)))
    with pytest.raises(UnsupportedEncodingError):
        decompressor_for(
            Context.MINIBLOCK,
            pb.CompressiveEncoding(byte_stream_split=pb.ByteStreamSplit(values=flat_desc(16))),
        )
    dec = decompressor_for(
        Context.MINIBLOCK, pb.CompressiveEncoding(byte_stream_split=pb.ByteStreamSplit(values=flat_desc(32)))
    )
    with pytest.raises(CorruptFileError):
        dec.decompress([memoryview(b"\0" * 7)], 2)


@pytest.mark.interop
@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_pylance_bss_under_zstd(tmp_path, version: str) -> None:
    values = np.random.default_rng(0).random(10_000)
    meta = {"lance-encoding:compression": "zstd", "lance-encoding:bss": "on"}
    (page,) = read_pages(write_column(tmp_path / "b.lance", pa.array(values), meta, version))
    desc = page.layout.mini_block_layout.value_compression
    assert desc.general.values.WhichOneof("compression") == "byte_stream_split"
    np.testing.assert_array_equal(fixed_values(page_values(page), np.float64), values)
    ours, _ = ByteStreamSplitCompressor().compress(FixedWidthBlock.from_values(values))
    theirs = b"".join(
        decompress_buffer(c.values[0], desc.general.compression.scheme) for c in miniblock_chunks(page)
    )
    assert ours.buffers[0].tobytes() == theirs


@pytest.mark.parametrize("bits", [32, 64])
@pytest.mark.parametrize("counts", [[1], [512, 512, 7], [256, 256, 256, 3, 3, 100], [1024] * 5])
def test_decompress_chunks_equals_one_call_per_chunk(bits: int, counts: list[int]) -> None:
    from lance_ops.encoding.compression.base import ChunkSpans

    rng = np.random.default_rng(sum(counts) + bits)
    width = bits // 8
    dec = decompressor_for(
        Context.MINIBLOCK,
        pb.CompressiveEncoding(byte_stream_split=pb.ByteStreamSplit(values=flat_desc(bits))),
    )
    chunks = [rng.integers(0, 256, n * width + 3, dtype=np.uint8) for n in counts]  # 3 bytes of padding each
    blob = np.concatenate(chunks)
    sizes = np.array([len(c) for c in chunks], np.int64)
    spans = ChunkSpans(blob, np.cumsum(sizes) - sizes, sizes)
    batched = dec.decompress_chunks(spans, counts)
    single = b"".join(
        np.asarray(dec.decompress([memoryview(c)], n).data).tobytes()
        for c, n in zip(chunks, counts, strict=True)
    )
    assert batched.num_values == sum(counts) and np.asarray(batched.data).tobytes() == single


def test_decompress_chunks_rejects_a_short_chunk() -> None:
    from lance_ops.encoding.compression.base import ChunkSpans
    from lance_ops.errors import CorruptFileError

    dec = decompressor_for(
        Context.MINIBLOCK, pb.CompressiveEncoding(byte_stream_split=pb.ByteStreamSplit(values=flat_desc(32)))
    )
    blob = np.zeros(10, np.uint8)
    with pytest.raises(CorruptFileError, match="too short"):
        dec.decompress_chunks(ChunkSpans(blob, np.array([0]), np.array([10])), [3])
