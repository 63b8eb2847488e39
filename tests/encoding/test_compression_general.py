"""General (zstd / LZ4) in the mini-block, block and per-value contexts (spec §3.6, §7.9)."""

from __future__ import annotations

import struct
from concurrent.futures import ThreadPoolExecutor

import lz4.block
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lance_ops._proto import encodings_v2_1_pb2 as pb
from lance_ops.encoding.compression.base import Context, decompressor_for
from lance_ops.encoding.compression.bitpacking import InlineBitpackingCompressor
from lance_ops.encoding.compression.flat import FlatCompressor
from lance_ops.encoding.compression.general import GeneralCompressor, compress_buffer, decompress_buffer
from lance_ops.encoding.compression.rle import RleCompressor
from lance_ops.encoding.compression.variable import VariableCompressor
from lance_ops.encoding.data import FixedWidthBlock, VariableWidthBlock
from lance_ops.errors import CorruptFileError, UnsupportedEncodingError

from .compression_helpers import (
    block_roundtrip,
    fixed_values,
    miniblock_roundtrip,
    page_values,
    per_value_roundtrip,
    pylance_reads_our_page,
    read_pages,
    rewrite_single_page,
    strings_of,
    variable_block,
    write_column,
)

ZSTD = pb.COMPRESSION_ALGORITHM_ZSTD
LZ4 = pb.COMPRESSION_ALGORITHM_LZ4


@given(data=st.binary(max_size=5000), scheme=st.sampled_from([ZSTD, LZ4]))
def test_buffer_framing(data: bytes, scheme: int) -> None:
    framed = compress_buffer(data, scheme)
    if scheme == ZSTD:
        assert struct.unpack_from("<Q", framed)[0] == len(data)
        assert framed[8:12] == b"\x28\xb5\x2f\xfd"
    else:
        assert struct.unpack_from("<I", framed)[0] == len(data)
        assert lz4.block.decompress(framed) == data
    assert decompress_buffer(framed, scheme) == data


def test_bare_zstd_frame_is_accepted() -> None:
    framed = compress_buffer(b"hello" * 100, ZSTD)
    assert decompress_buffer(framed[8:], ZSTD) == b"hello" * 100


def test_reused_zstd_contexts_survive_errors_levels_and_threads() -> None:
    with pytest.raises(CorruptFileError):
        decompress_buffer(b"\x10\0\0\0\0\0\0\0garbage!", ZSTD)
    data = bytes(range(256)) * 64
    assert decompress_buffer(compress_buffer(data, ZSTD, 1), ZSTD) == data
    assert decompress_buffer(compress_buffer(data, ZSTD, 19), ZSTD) == data

    def round_trip(i: int) -> bool:
        payload = data[i:] * (i % 5 + 1)
        return all(
            decompress_buffer(compress_buffer(payload, ZSTD, level), ZSTD) == payload for level in (1, 3, 9)
        )

    with ThreadPoolExecutor(max_workers=4) as pool:
        assert all(pool.map(round_trip, range(64)))


INNERS = {
    "flat": lambda: FlatCompressor(),
    "inline": lambda: InlineBitpackingCompressor(32),
    "rle": lambda: RleCompressor(),
}


@pytest.mark.parametrize("inner", sorted(INNERS))
@pytest.mark.parametrize("scheme", ["zstd", "lz4"])
@given(n=st.sampled_from([0, 1, 1023, 1024, 1025]) | st.integers(0, 6000), seed=st.integers(0, 1000))
def test_miniblock_roundtrip(inner: str, scheme: str, n: int, seed: int) -> None:
    values = (np.random.default_rng(seed).integers(0, 50, n) // 7).astype(np.int32)
    comp = GeneralCompressor(INNERS[inner](), scheme)
    blocks, compressed, desc = miniblock_roundtrip(comp, FixedWidthBlock.from_values(values))
    np.testing.assert_array_equal(fixed_values(blocks, np.int32), values)
    assert desc.general.compression.scheme == (ZSTD if scheme == "zstd" else LZ4)
    assert not desc.general.compression.HasField("level")
    if inner == "rle" and n:
        # only buffer 0 is compressed; the run lengths pass through
        assert compressed.buffers[1].dtype == np.uint8


@given(values=st.lists(st.binary(max_size=50), max_size=200), scheme=st.sampled_from(["zstd", "lz4"]))
def test_block_and_per_value_roundtrip(values: list[bytes], scheme: str) -> None:
    block = variable_block(values)
    decoded, _, _ = block_roundtrip(GeneralCompressor(VariableCompressor(), scheme), block)
    assert strings_of([decoded]) == values
    decoded, stored, desc = per_value_roundtrip(
        GeneralCompressor(VariableCompressor(), scheme, level=5), block
    )
    assert strings_of([decoded]) == values
    assert desc.general.compression.level == 5
    assert isinstance(stored, VariableWidthBlock) and stored.num_values == len(values)


def test_per_value_writes_level_zero_and_raw_length() -> None:
    stored, desc = GeneralCompressor(VariableCompressor(), "zstd").compress_per_value(
        variable_block([b"a" * 40_000])
    )
    assert desc.general.compression.HasField("level") and desc.general.compression.level == 0
    item = np.asarray(stored.data).tobytes()
    assert struct.unpack_from("<Q", item)[0] == 40_000 and item[8:12] == b"\x28\xb5\x2f\xfd"


def test_errors() -> None:
    with pytest.raises(UnsupportedEncodingError):
        GeneralCompressor(FlatCompressor(), "snappy")
    bad = pb.CompressiveEncoding(
        general=pb.General(
            compression=pb.BufferCompression(scheme=0),
            values=pb.CompressiveEncoding(flat=pb.Flat(bits_per_value=8)),
        )
    )
    with pytest.raises(UnsupportedEncodingError):
        decompressor_for(Context.BLOCK, bad)
    with pytest.raises(CorruptFileError):
        decompress_buffer(b"\x10\0\0\0\0\0\0\0garbage!", ZSTD)
    with pytest.raises(CorruptFileError):
        decompress_buffer(b"\x10\0\0\0\xff\xff", LZ4)
    with pytest.raises(CorruptFileError):
        decompress_buffer(b"\x01", ZSTD)
    framed = compress_buffer(b"abc", ZSTD)
    with pytest.raises(CorruptFileError):
        decompress_buffer(b"\x05" + framed[1:], ZSTD)  # wrong length header


# --- pylance pages -----------------------------------------------------------------------------------


@pytest.mark.interop
@pytest.mark.parametrize(
    ("values", "meta", "inner"),
    [
        (
            np.random.default_rng(0).random(10_000),
            {"lance-encoding:compression": "zstd", "lance-encoding:bss": "on"},
            "byte_stream_split",
        ),
        (
            np.arange(10_000, dtype=np.int32),
            {"lance-encoding:compression": "lz4", "lance-encoding:bss": "off"},
            "inline_bitpacking",
        ),
        (
            np.arange(10_000, dtype=np.int32),
            {
                "lance-encoding:compression": "zstd",
                "lance-encoding:bss": "off",
                "lance-encoding:compression-level": "9",
            },
            "inline_bitpacking",
        ),
    ],
)
@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_pylance_general_miniblock(
    tmp_path, values: np.ndarray, meta: dict, inner: str, version: str
) -> None:
    (page,) = read_pages(write_column(tmp_path / "g.lance", pa.array(values), meta, version))
    desc = page.layout.mini_block_layout.value_compression
    assert desc.general.values.WhichOneof("compression") == inner
    np.testing.assert_array_equal(fixed_values(page_values(page), values.dtype), values)


@pytest.mark.interop
def test_pylance_lz4_dictionary_2_2(tmp_path) -> None:
    values = [f"value-{i % 500}" for i in range(10_000)]
    (page,) = read_pages(write_column(tmp_path / "d.lance", pa.array(values), version="2.2"))
    mb = page.layout.mini_block_layout
    assert mb.dictionary.general.compression.scheme == LZ4
    assert not mb.dictionary.general.compression.HasField("level")
    buffer = page.buffers[2]
    raw = lz4.block.decompress(buffer)  # python-lz4's size-prepended block form is exactly the framing
    assert struct.unpack_from("<I", buffer)[0] == len(raw)
    decoded = decompressor_for(Context.BLOCK, mb.dictionary).decompress(
        memoryview(buffer), mb.num_dictionary_items
    )
    assert strings_of([decoded]) == [f"value-{i}".encode() for i in range(500)]
    ours, desc = GeneralCompressor(VariableCompressor(), "lz4").compress_block(
        variable_block(strings_of([decoded]))
    )
    assert desc == mb.dictionary and lz4.block.decompress(ours) == raw


@pytest.mark.interop
@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_pylance_lz4_fixed_dictionary(tmp_path, version: str) -> None:
    values = np.arange(10_000, dtype=np.int64) % 100
    (page,) = read_pages(write_column(tmp_path / "d.lance", pa.array(values), version=version))
    mb = page.layout.mini_block_layout
    if version == "2.1":
        assert not mb.HasField("dictionary")
        return
    assert mb.dictionary.general.values.flat.bits_per_value == 64
    decoded = decompressor_for(Context.BLOCK, mb.dictionary).decompress(memoryview(page.buffers[2]), 100)
    np.testing.assert_array_equal(np.sort(decoded.view(np.int64)), np.arange(100))


def _full_zip_items(buffer: bytes, count: int) -> VariableWidthBlock:
    """Items of a full-zip page without control words and with u32 length prefixes."""
    pos, items = 0, []
    for _ in range(count):
        (length,) = struct.unpack_from("<I", buffer, pos)
        items.append(buffer[pos + 4 : pos + 4 + length])
        pos += 4 + length
    assert pos == len(buffer)
    return variable_block(items)


@pytest.mark.interop
def test_pylance_per_value_zstd(tmp_path) -> None:
    values = [(f"{i} " * 20_000) for i in range(4)]
    (page,) = read_pages(write_column(tmp_path / "big.lance", pa.array(values), version="2.2"))
    fz = page.layout.full_zip_layout
    desc = fz.value_compression
    assert desc.general.compression.scheme == ZSTD and desc.general.compression.level == 0
    stored = _full_zip_items(page.buffers[0], fz.num_visible_items)
    decoded = decompressor_for(Context.PER_VALUE, desc).decompress(stored)
    assert [s.decode() for s in strings_of([decoded])] == values
    ours, our_desc = GeneralCompressor(VariableCompressor(), "zstd").compress_per_value(
        variable_block([v.encode() for v in values])
    )
    assert our_desc == desc
    assert strings_of([decompressor_for(Context.PER_VALUE, desc).decompress(ours)]) == [
        v.encode() for v in values
    ]


@pytest.mark.interop
@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize(
    ("inner", "scheme"), [("inline", "zstd"), ("flat", "lz4"), ("rle", "zstd"), ("bss", "lz4")]
)
def test_pylance_reads_our_general_miniblock(tmp_path, version: str, inner: str, scheme: str) -> None:
    from lance_ops.encoding.compression.bss import ByteStreamSplitCompressor

    values = np.repeat(np.arange(3000, dtype=np.int32) * 3, 3)
    comp = ByteStreamSplitCompressor() if inner == "bss" else INNERS[inner]()
    got = pylance_reads_our_page(
        tmp_path,
        pa.array(values),
        GeneralCompressor(comp, scheme),
        FixedWidthBlock.from_values(values),
        version,
    )
    np.testing.assert_array_equal(got.to_numpy(), values)


@pytest.mark.interop
@pytest.mark.parametrize("scheme", ["lz4", "zstd"])
def test_pylance_reads_our_compressed_dictionary(tmp_path, scheme: str) -> None:
    from lance.file import LanceFileReader

    values = [f"value-{i % 500}" for i in range(10_000)]
    path = write_column(tmp_path / "d.lance", pa.array(values), version="2.2")
    (page,) = read_pages(path)
    dictionary = decompressor_for(Context.BLOCK, page.layout.mini_block_layout.dictionary).decompress(
        memoryview(page.buffers[2]), 500
    )
    ours, desc = GeneralCompressor(VariableCompressor(), scheme).compress_block(dictionary)
    layout = pb.PageLayout()
    layout.CopyFrom(page.layout)
    layout.mini_block_layout.dictionary.CopyFrom(desc)
    out = rewrite_single_page(path, tmp_path / "ours.lance", [page.buffers[0], page.buffers[1], ours], layout)
    assert LanceFileReader(str(out)).read_all().to_table().column(0).to_pylist() == values


# ---------------------------------------------------------------- many chunks inflated as one stream


def _zstd_spans(pieces: list[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    framed = [compress_buffer(p, pb.COMPRESSION_ALGORITHM_ZSTD) for p in pieces]
    gap = b"\x00\x07"  # spans need not touch
    blob = np.frombuffer(gap.join(framed), np.uint8)
    sizes = np.array([len(f) for f in framed], np.int64)
    starts = np.cumsum([0, *(sizes[:-1] + len(gap))]).astype(np.int64)
    return blob, starts, sizes


@pytest.mark.parametrize("count", [1, 15, 16, 300])
def test_joined_spans_equal_one_call_per_span(count: int) -> None:
    from lance_ops.encoding.compression.general import decompress_spans, decompress_spans_joined

    rng = np.random.default_rng(count)
    pieces = [rng.integers(0, 4, int(rng.integers(0, 5000)), dtype=np.uint8).tobytes() for _ in range(count)]
    blob, starts, sizes = _zstd_spans(pieces)
    joined, lengths = decompress_spans_joined(blob, starts, sizes, pb.COMPRESSION_ALGORITHM_ZSTD)
    one_by_one = decompress_spans(blob, starts.tolist(), sizes.tolist(), pb.COMPRESSION_ALGORITHM_ZSTD)
    assert joined.tobytes() == b"".join(pieces) == b"".join(one_by_one)
    assert lengths.tolist() == [len(p) for p in pieces]


@pytest.mark.parametrize("change", ["header_larger", "header_smaller", "frame_garbled", "bare_frame"])
def test_joined_spans_check_headers_and_frames(change: str) -> None:
    from lance_ops.encoding.compression.general import decompress_spans_joined

    pieces = [bytes([i]) * (100 + i) for i in range(40)]
    blob, starts, sizes = _zstd_spans(pieces)
    blob = blob.copy()
    at = int(starts[7])
    if change == "header_larger":
        blob[at : at + 8] = np.frombuffer(struct.pack("<Q", 108), np.uint8)
    elif change == "header_smaller":
        blob[at : at + 8] = np.frombuffer(struct.pack("<Q", 106), np.uint8)
    elif change == "frame_garbled":
        blob[at + 8 : at + 14] = 0xFF
    else:  # a span that is a bare frame (no length header) is read by the checked path
        bare = compress_buffer(pieces[7], pb.COMPRESSION_ALGORITHM_ZSTD)[8:]
        blob = np.concatenate([blob, np.frombuffer(bare, np.uint8)])
        starts = np.append(starts, len(blob) - len(bare))
        sizes = np.append(sizes, len(bare))
        joined, lengths = decompress_spans_joined(blob, starts, sizes, pb.COMPRESSION_ALGORITHM_ZSTD)
        assert joined.tobytes() == b"".join(pieces) + pieces[7] and lengths[-1] == len(pieces[7])
        return
    with pytest.raises(CorruptFileError):
        decompress_spans_joined(blob, starts, sizes, pb.COMPRESSION_ALGORITHM_ZSTD)


def test_per_value_zstd_values_inflate_together_and_check_their_headers() -> None:
    """Many per-value zstd buffers are inflated as one stream; a length header that does not
    match its frame still raises."""
    values = [bytes([i % 7]) * (i * 13 % 300) for i in range(60)]  # empty values included
    codec = GeneralCompressor(VariableCompressor(), "zstd")
    stored, desc = codec.compress_per_value(variable_block(values))
    decoder = decompressor_for(Context.PER_VALUE, desc)
    assert strings_of([decoder.decompress(stored)]) == values
    data = np.asarray(stored.data).copy()
    at = int(np.asarray(stored.offsets)[5])
    data[at : at + 8] = np.frombuffer(struct.pack("<Q", len(values[5]) + 1), np.uint8)
    garbled = VariableWidthBlock(stored.offsets, data, stored.num_values)
    with pytest.raises(CorruptFileError):
        decoder.decompress(garbled)
