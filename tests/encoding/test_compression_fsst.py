"""FSST symbol tables, vectorised decoding and the table-building encoder (spec §7.6)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lance_ops._proto import encodings_v2_1_pb2 as pb
from lance_ops.encoding.compression.base import Context, decompressor_for
from lance_ops.encoding.compression.fsst import (
    TABLE_SIZE,
    FsstCompressor,
    SymbolTable,
    fsst_decode,
    fsst_encode,
)
from lance_ops.encoding.compression.variable import variable_desc
from lance_ops.errors import CorruptFileError, UnsupportedEncodingError

from .compression_helpers import (
    miniblock_chunks,
    miniblock_roundtrip,
    page_values,
    per_value_roundtrip,
    pylance_reads_our_page,
    read_pages,
    strings_of,
    variable_block,
    write_column,
)


def _table(*symbols: bytes) -> SymbolTable:
    matrix = np.zeros((len(symbols), 8), np.uint8)
    for i, s in enumerate(symbols):
        matrix[i, : len(s)] = np.frombuffer(s, np.uint8)
    return SymbolTable(matrix, np.array([len(s) for s in symbols], np.uint8))


def _decode(values: list[bytes], table: SymbolTable) -> list[bytes]:
    block = variable_block(values)
    data, offs = fsst_decode(block.data, block.offsets, table)
    return [data[offs[i] : offs[i + 1]].tobytes() for i in range(len(values))]


def test_table_header_layout() -> None:
    raw = _table(b"ab", b"c").to_bytes()
    assert len(raw) == TABLE_SIZE == 2312
    assert raw[:8] == bytes.fromhex("02000001 54535346")
    assert raw[8:24] == b"ab\0\0\0\0\0\0c\0\0\0\0\0\0\0"
    assert raw[24:26] == b"\x02\x01" and set(raw[26:]) == {0}
    parsed = SymbolTable.parse(raw)
    assert parsed.coded and parsed.lengths.tolist() == [2, 1]
    empty = SymbolTable(np.zeros((0, 8), np.uint8), np.zeros(0, np.uint8), coded=False).to_bytes()
    assert empty[:8] == bytes.fromhex("00000000 54535346")


def test_decode_example_and_escapes() -> None:
    table = _table(b"ab", b"c")
    assert _decode([bytes.fromhex("00 01 00 ff 7a")], table) == [b"abcabz"]
    # runs of escaped 0xFF bytes, escapes right at string starts, empty strings in between
    coded = [b"\xff\xff\xff\xff", b"", b"\xff\xff\x00", b"\xff\x41\xff\xff\xff\x42", b"\x01"]
    assert _decode(coded, table) == [b"\xff\xff", b"", b"\xffab", b"A\xffB", b"c"]


def test_encode_with_given_table() -> None:
    block, _ = fsst_encode(variable_block([b"abcabz", b"", b"\xff"]), _table(b"ab", b"c"))
    assert strings_of([block]) == [bytes.fromhex("00 01 00 ff 7a"), b"", b"\xff\xff"]


def test_garbled() -> None:
    table = _table(b"ab")
    with pytest.raises(CorruptFileError):
        _decode([b"\x05"], table)  # code beyond the table
    with pytest.raises(CorruptFileError):
        _decode([b"\x00\xff", b"a"], table)  # escape at the end of a string
    with pytest.raises(CorruptFileError):
        SymbolTable.parse(b"\x01\0\0\x01XXXX" + b"\0" * 2304)
    with pytest.raises(CorruptFileError):
        SymbolTable.parse(b"\x01\0\0\x01TSSF")
    bad = pb.CompressiveEncoding(
        fsst=pb.Fsst(
            symbol_table=table.to_bytes(), values=pb.CompressiveEncoding(flat=pb.Flat(bits_per_value=8))
        )
    )
    with pytest.raises(UnsupportedEncodingError):
        decompressor_for(Context.MINIBLOCK, bad)
    dec = decompressor_for(
        Context.MINIBLOCK,
        pb.CompressiveEncoding(fsst=pb.Fsst(symbol_table=table.to_bytes(), values=variable_desc(32))),
    )
    with pytest.raises(CorruptFileError):
        dec.decompress([memoryview(bytes.fromhex("08000000 0a000000 0005"))], 1)


words = st.sampled_from([b"hello", b"world", b"\xff", b"lance", b" ", b"\x00", b"abc", b"zz"])
texts = st.lists(st.lists(words, max_size=12).map(b"".join), max_size=120) | st.lists(
    st.binary(max_size=30), max_size=60
)


@given(values=texts, large=st.booleans())
def test_roundtrip(values: list[bytes], large: bool) -> None:
    block = variable_block(values, large)
    blocks, _, desc = miniblock_roundtrip(FsstCompressor(), block)
    assert strings_of(blocks) == values
    assert len(desc.fsst.symbol_table) == TABLE_SIZE
    assert desc.fsst.values == variable_desc(64 if large else 32)
    decoded, _, _ = per_value_roundtrip(FsstCompressor(), block)
    assert strings_of([decoded]) == values


def test_encoder_compresses_text() -> None:
    values = [f"user-{i % 977}@example.com visited /products/{i % 131}".encode() for i in range(20_000)]
    coded, table = fsst_encode(variable_block(values))
    assert table.coded and 100 <= len(table.lengths) <= 255
    assert len(coded.data) < sum(map(len, values)) / 2
    blocks, compressed, _ = miniblock_roundtrip(FsstCompressor(), variable_block(values))
    assert strings_of(blocks) == values


def test_random_bytes_fall_back_to_uncoded() -> None:
    rng = np.random.default_rng(0)
    values = [rng.integers(0, 256, 20, dtype=np.uint8).tobytes() for _ in range(500)]
    coded, table = fsst_encode(variable_block(values))
    assert not table.coded and strings_of([coded]) == values
    assert table.to_bytes()[:8] == bytes.fromhex("00000000 54535346")


# --- pylance pages -----------------------------------------------------------------------------------

FSST_VALUES = [f"w{i * 7919 % 100003}" for i in range(10_000)]


@pytest.mark.interop
@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("large", [False, True])
def test_pylance_miniblock_fsst(tmp_path, version: str, large: bool) -> None:
    arr = pa.array(FSST_VALUES, pa.large_string() if large else pa.string())
    (page,) = read_pages(write_column(tmp_path / "f.lance", arr, version=version))
    desc = page.layout.mini_block_layout.value_compression
    assert desc.WhichOneof("compression") == "fsst"
    assert desc.fsst.values == variable_desc(64 if large else 32)
    header = desc.fsst.symbol_table[:8]
    assert header[3] & 1 and header[4:8] == b"TSSF"
    assert [s.decode() for s in strings_of(page_values(page))] == FSST_VALUES
    assert max(c.num_values for c in miniblock_chunks(page)) <= 4096


@pytest.mark.interop
def test_pylance_uncoded_table(tmp_path) -> None:
    values = [f"s{i}" for i in range(200)]
    (page,) = read_pages(
        write_column(tmp_path / "f.lance", pa.array(values), {"lance-encoding:compression": "fsst"})
    )
    desc = page.layout.mini_block_layout.value_compression
    assert desc.fsst.symbol_table[:8] == bytes.fromhex("00000000 54535346")
    assert [s.decode() for s in strings_of(page_values(page))] == values


@pytest.mark.interop
def test_pylance_full_zip_fsst(tmp_path) -> None:
    values = [f"{i} " * 90 for i in range(300)]
    (page,) = read_pages(write_column(tmp_path / "fz.lance", pa.array(values)))
    fz = page.layout.full_zip_layout
    assert fz.value_compression.WhichOneof("compression") == "fsst" and fz.bits_per_offset == 32
    buffer, pos, items = page.buffers[0], 0, []
    for _ in range(fz.num_visible_items):
        length = int.from_bytes(buffer[pos : pos + 4], "little")
        items.append(buffer[pos + 4 : pos + 4 + length])
        pos += 4 + length
    decoded = decompressor_for(Context.PER_VALUE, fz.value_compression).decompress(variable_block(items))
    assert [s.decode() for s in strings_of([decoded])] == values


@pytest.mark.interop
@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("large", [False, True])
def test_pylance_reads_our_fsst(tmp_path, version: str, large: bool) -> None:
    values = [f"w{i * 7919 % 100003} \xff-é {i % 17}" for i in range(5000)] + ["", "ÿÿÿ"]
    arr = pa.array(values, pa.large_string() if large else pa.string())
    block = variable_block([v.encode() for v in values], large)
    got = pylance_reads_our_page(tmp_path, arr, FsstCompressor(), block, version)
    assert got.to_pylist() == values


@pytest.mark.interop
def test_pylance_reads_our_fsst_binary_with_escapes(tmp_path) -> None:
    rng = np.random.default_rng(5)
    values = [
        b"\xff\xff" + bytes(rng.integers(250, 256, int(k), dtype=np.uint8)) + b"common-suffix"
        for k in rng.integers(0, 12, 3000)
    ]
    got = pylance_reads_our_page(
        tmp_path, pa.array(values, pa.binary()), FsstCompressor(), variable_block(values), "2.2"
    )
    assert got.to_pylist() == values
