"""InlineBitpacking / OutOfLineBitpacking and the FastLanes layout (spec §3.2, §7.4, §7.5)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lance_ops._proto import encodings_v2_1_pb2 as pb
from lance_ops.encoding.compression.base import Context, decompressor_for
from lance_ops.encoding.compression.bitpacking import (
    InlineBitpackingCompressor,
    OutOfLineBitpackingCompressor,
    estimate_inline_size,
    fastlanes_pack,
    fastlanes_unpack,
    max_bit_width,
)
from lance_ops.encoding.data import FixedWidthBlock
from lance_ops.errors import CorruptFileError, UnsupportedEncodingError

from .compression_helpers import (
    block_roundtrip,
    fixed_values,
    miniblock_chunks,
    miniblock_roundtrip,
    page_values,
    pylance_reads_our_page,
    read_pages,
    write_column,
)

EDGE_SIZES = [0, 1, 7, 1023, 1024, 1025, 2048, 3000]
_ORDER = np.array([0, 4, 2, 6, 1, 5, 3, 7])


def _reference_pack(x: np.ndarray, width: int, bits: int) -> np.ndarray:
    """Bit-by-bit FastLanes packing, written from the definition in spec §7.4 (slow oracle)."""
    lanes = 1024 // bits
    r = np.arange(bits)[:, None]
    l_ = np.arange(lanes)[None, :]
    pos = 128 * (r % 8) + 16 * _ORDER[r // 8] + l_
    v = x.astype(np.uint64)[pos] & np.uint64((1 << width) - 1)
    bitplanes = (v[:, :, None] >> np.arange(width, dtype=np.uint64)) & np.uint64(1)
    words = bitplanes.transpose(1, 0, 2).reshape(lanes, width, bits)
    w = (words << np.arange(bits, dtype=np.uint64)).sum(axis=2, dtype=np.uint64)
    return w.T.reshape(-1).astype(f"<u{bits // 8}")


@pytest.mark.parametrize("bits", [8, 16, 32, 64])
def test_fastlanes_matches_reference(bits: int) -> None:
    rng = np.random.default_rng(bits)
    dtype = np.dtype(f"<u{bits // 8}")
    for width in sorted({0, 1, 3, bits // 2, bits - 1, bits}):
        hi = 1 << width if width < 64 else None
        x = (
            rng.integers(0, hi, 1024, dtype=np.uint64, endpoint=False)
            if hi
            else rng.integers(0, 2**63, 1024, dtype=np.uint64) * 2 + 1
        ).astype(dtype)
        packed = fastlanes_pack(x.reshape(1, 1024), width)
        assert packed.shape == (1, width * 1024 // bits)
        if 0 < width < 64:
            np.testing.assert_array_equal(packed[0], _reference_pack(x, width, bits))
        np.testing.assert_array_equal(fastlanes_unpack(packed, width)[0], x)


@settings(max_examples=40, deadline=None)
@given(
    bits=st.sampled_from([8, 16, 32, 64]),
    blocks=st.sampled_from([1, 2, 3, 17]),
    width=st.integers(1, 64),
    seed=st.integers(0, 2**16),
    wide=st.booleans(),
)
def test_fastlanes_pack_of_many_blocks_matches_reference(
    bits: int, blocks: int, width: int, seed: int, wide: bool
) -> None:
    """The compiled packer, several blocks at once and from a strided view, equals the spec
    reference block by block; bits above ``width`` (``wide``) are dropped."""
    width = min(width, bits)
    dtype = np.dtype(f"<u{bits // 8}")
    raw = np.random.default_rng(seed).integers(0, 2**64 - 1, (blocks, 2048), dtype=np.uint64, endpoint=True)
    x = raw.astype(dtype)[:, ::2]  # not contiguous
    if not wide and width < bits:
        x = x & dtype.type((1 << width) - 1)
    packed = fastlanes_pack(x, width)
    assert packed.shape == (blocks, width * 1024 // bits) and packed.dtype == dtype
    fitted = x & dtype.type((1 << width) - 1) if width < bits else x
    for i in range(blocks):
        if width < 64:
            np.testing.assert_array_equal(
                packed[i], _reference_pack(np.ascontiguousarray(fitted[i]), width, bits)
            )
    np.testing.assert_array_equal(fastlanes_unpack(packed, width), fitted)


@pytest.mark.parametrize("bits", [8, 16, 32, 64])
@given(data=st.data())
def test_inline_roundtrip(bits: int, data: st.DataObject) -> None:
    n = data.draw(st.sampled_from(EDGE_SIZES) | st.integers(0, 5000))
    width = data.draw(st.integers(0, bits))
    dtype = np.dtype(f"<u{bits // 8}")
    seed = data.draw(st.integers(0, 2**32 - 1))
    values = (
        np.random.default_rng(seed).integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True)
        >> np.uint64(64 - width)
        if width
        else np.zeros(n, np.uint64)
    ).astype(dtype)
    blocks, compressed, desc = miniblock_roundtrip(
        InlineBitpackingCompressor(bits), FixedWidthBlock.from_values(values)
    )
    np.testing.assert_array_equal(fixed_values(blocks, dtype), values)
    assert desc.inline_bitpacking.uncompressed_bits_per_value == bits
    assert [c.log_num_values for c in compressed.chunks[:-1]] == [10] * (len(compressed.chunks) - 1)
    assert len(compressed.buffers[0]) == estimate_inline_size(values)
    decoded, _, _ = block_roundtrip(InlineBitpackingCompressor(bits), FixedWidthBlock.from_values(values))
    np.testing.assert_array_equal(decoded.view(dtype), values)


def test_inline_chunk_sizes_5000_int32() -> None:
    compressed, _ = InlineBitpackingCompressor(32).compress(
        FixedWidthBlock.from_values(np.arange(5000, dtype=np.int32))
    )
    assert [c.buffer_sizes[0] for c in compressed.chunks] == [1284, 1412, 1540, 1540, 1668]
    assert [c.log_num_values for c in compressed.chunks] == [10, 10, 10, 10, 0]
    assert compressed.buffers[0][:4].tobytes() == bytes.fromhex("0a000000")
    # metadata words of spec §3.2: ((size / 8) - 1) << 4 | log2 (+ the 4 header bytes and 8-alignment)
    words = [
        (((4 + 4 + c.buffer_sizes[0] + 7) // 8 * 8 // 8 - 1) << 4) | c.log_num_values
        for c in compressed.chunks
    ]
    assert words == [0x0A1A, 0x0B1A, 0x0C1A, 0x0C1A, 0x0D10]


@pytest.mark.parametrize(
    ("dtype", "width", "size"), [(np.int32, 10, 1284), (np.uint8, 4, 513), (np.int64, 7, 904)]
)
def test_inline_sizes_of_spec(dtype: type, width: int, size: int) -> None:
    values = np.full(1024, (1 << width) - 1, dtype=dtype)
    compressed, _ = InlineBitpackingCompressor(np.dtype(dtype).itemsize * 8).compress(
        FixedWidthBlock.from_values(values)
    )
    assert compressed.chunks[0].buffer_sizes == (size,)


def test_inline_block_context_levels() -> None:
    levels = (np.arange(500) % 7 == 0).astype(np.uint16)
    decoded, data, desc = block_roundtrip(InlineBitpackingCompressor(16), FixedWidthBlock.from_values(levels))
    assert len(data) == 130 and data[:2] == b"\x01\x00"
    np.testing.assert_array_equal(decoded.view(np.uint16), levels)


def test_negative_values_take_full_width() -> None:
    values = np.array([-1, 2, 3], dtype=np.int32)
    compressed, _ = InlineBitpackingCompressor(32).compress(FixedWidthBlock.from_values(values))
    assert compressed.buffers[0][:4].view("<u4")[0] == 32
    assert max_bit_width(values) == 32


@pytest.mark.parametrize(("n", "width", "size"), [(1045, 1, 170), (1178, 2, 512)])
def test_out_of_line_examples(n: int, width: int, size: int) -> None:
    levels = (np.arange(n) % (1 << width)).astype(np.uint16)
    decoded, data, desc = block_roundtrip(
        OutOfLineBitpackingCompressor(16, bit_width=width), FixedWidthBlock.from_values(levels)
    )
    assert len(data) == size
    assert desc.out_of_line_bitpacking.values.flat.bits_per_value == width
    np.testing.assert_array_equal(decoded.view(np.uint16), levels)


@pytest.mark.parametrize("bits", [8, 16, 32, 64])
@given(data=st.data())
def test_out_of_line_roundtrip(bits: int, data: st.DataObject) -> None:
    n = data.draw(st.sampled_from(EDGE_SIZES) | st.integers(0, 4000))
    width = data.draw(st.integers(1, bits))
    forced = data.draw(st.integers(width, bits))
    dtype = np.dtype(f"<u{bits // 8}")
    values = (
        np.arange(n, dtype=np.uint64) * np.uint64(2654435761) % np.uint64(1 << width if width < 64 else 2**63)
    ).astype(dtype)
    decoded, raw, _ = block_roundtrip(
        OutOfLineBitpackingCompressor(bits, bit_width=forced), FixedWidthBlock.from_values(values)
    )
    np.testing.assert_array_equal(decoded.view(dtype), values)
    full, tail = divmod(n, 1024)
    words = len(raw) // (bits // 8) - full * forced * 1024 // bits
    assert words in (tail, forced * 1024 // bits)


def test_out_of_line_rejects_values_wider_than_page_width() -> None:
    with pytest.raises(ValueError):
        OutOfLineBitpackingCompressor(16, bit_width=2).compress(
            FixedWidthBlock.from_values(np.array([9], np.uint16))
        )


def test_garbled_buffers_raise_corrupt() -> None:
    desc = pb.CompressiveEncoding(inline_bitpacking=pb.InlineBitpacking(uncompressed_bits_per_value=32))
    dec = decompressor_for(Context.MINIBLOCK, desc)
    with pytest.raises(CorruptFileError):
        dec.decompress([memoryview(bytes.fromhex("0a000000") + b"\0" * 100)], 1024)  # truncated
    with pytest.raises(CorruptFileError):
        dec.decompress([memoryview(bytes.fromhex("21000000") + b"\0" * 5000)], 10)  # width 33 > 32
    with pytest.raises(CorruptFileError):
        dec.decompress([memoryview(b"\x01\x02")], 1)  # not whole words
    ool = decompressor_for(
        Context.BLOCK,
        pb.CompressiveEncoding(
            out_of_line_bitpacking=pb.OutOfLineBitpacking(
                uncompressed_bits_per_value=16, values=pb.CompressiveEncoding(flat=pb.Flat(bits_per_value=1))
            )
        ),
    )
    with pytest.raises(CorruptFileError):
        ool.decompress(memoryview(b"\0" * 130), 1045)
    with pytest.raises(UnsupportedEncodingError):
        decompressor_for(
            Context.MINIBLOCK,
            pb.CompressiveEncoding(inline_bitpacking=pb.InlineBitpacking(uncompressed_bits_per_value=12)),
        )
    with pytest.raises(UnsupportedEncodingError):
        decompressor_for(Context.PER_VALUE, desc)


# --- pylance pages -----------------------------------------------------------------------------------


@pytest.mark.interop
@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize(
    ("values", "bits"),
    [
        (np.arange(5000, dtype=np.int32), 32),
        (np.arange(10_000, dtype=np.int16) % 301, 16),
        (np.arange(10_000, dtype=np.uint8) % 16, 8),
        (np.arange(3000, dtype=np.int64) * 7, 64),
    ],
)
def test_pylance_inline_pages(tmp_path, version: str, values: np.ndarray, bits: int) -> None:
    path = write_column(tmp_path / "bp.lance", pa.array(values), version=version)
    (page,) = read_pages(path)
    mb = page.layout.mini_block_layout
    assert mb.value_compression.inline_bitpacking.uncompressed_bits_per_value == bits
    np.testing.assert_array_equal(fixed_values(page_values(page), values.dtype), values)
    chunks = miniblock_chunks(page)
    dec = decompressor_for(Context.MINIBLOCK, mb.value_compression)
    batched = dec.decompress_chunks([c.values[0] for c in chunks], [c.num_values for c in chunks])
    np.testing.assert_array_equal(batched.view(values.dtype), values)
    ours, _ = InlineBitpackingCompressor(bits).compress(FixedWidthBlock.from_values(values))
    assert ours.buffers[0].tobytes() == b"".join(bytes(c.values[0]) for c in chunks)


@pytest.mark.interop
@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_pylance_out_of_line_def_levels(tmp_path, version: str) -> None:
    n = 10_000
    valid = np.arange(n) % 7 != 0
    arr = pa.array(np.arange(n, dtype=np.int32), mask=~valid)
    (page,) = read_pages(write_column(tmp_path / "nullable.lance", arr, version=version))
    mb = page.layout.mini_block_layout
    assert mb.def_compression.WhichOneof("compression") == "out_of_line_bitpacking"
    width = mb.def_compression.out_of_line_bitpacking.values.flat.bits_per_value
    dec = decompressor_for(Context.BLOCK, mb.def_compression)
    levels = []
    for chunk in miniblock_chunks(page):
        got = dec.decompress(chunk.def_, chunk.num_levels).view(np.uint16)
        again, _ = OutOfLineBitpackingCompressor(16, bit_width=width).compress(
            FixedWidthBlock.from_values(got)
        )
        assert again == bytes(chunk.def_)
        levels.append(got)
    np.testing.assert_array_equal(np.concatenate(levels), (~valid).astype(np.uint16))


@pytest.mark.interop
@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.int32, np.uint64])
def test_pylance_reads_our_inline_pages(tmp_path, version: str, dtype: type) -> None:
    rng = np.random.default_rng(3)
    top = min(np.iinfo(dtype).max, 2**40)
    widths = rng.integers(0, 8, 5)  # chunk widths vary, including zero-width chunks
    values = np.concatenate([rng.integers(0, max(1, top >> int(w * 5)), 1024) * (w != 0) for w in widths])
    values = np.concatenate([values, [5, 6, 7]]).astype(dtype)
    got = pylance_reads_our_page(
        tmp_path,
        pa.array(values),
        InlineBitpackingCompressor(np.dtype(dtype).itemsize * 8),
        FixedWidthBlock.from_values(values),
        version,
    )
    np.testing.assert_array_equal(got.to_numpy(), values)
