"""PackedStruct (mini-block, per-value) and VariablePackedStruct (per-value) (spec §7.12, §7.13)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lance_ops._proto import encodings_v2_1_pb2 as pb
from lance_ops.encoding.compression.base import Context, decompressor_for, flat_desc
from lance_ops.encoding.compression.packed_struct import (
    PackedStructCompressor,
    VariablePackedStructCompressor,
)
from lance_ops.encoding.data import FixedWidthBlock, StructBlock, VariableWidthBlock
from lance_ops.errors import CorruptFileError, UnsupportedEncodingError

from .compression_helpers import (
    miniblock_chunks,
    miniblock_roundtrip,
    per_value_roundtrip,
    read_pages,
    strings_of,
    variable_block,
    write_column,
)

SCHEMA = pa.struct([("a", pa.int32()), ("b", pa.float64()), ("c", pa.uint8())])


def _block(n: int) -> StructBlock:
    return StructBlock(
        (
            FixedWidthBlock.from_values(np.arange(n, dtype=np.int32)),
            FixedWidthBlock.from_values(np.arange(n) / 2),
            FixedWidthBlock.from_values((np.arange(n) % 256).astype(np.uint8)),
        ),
        n,
    )


def _children(blocks: list[StructBlock]) -> list[np.ndarray]:
    return [np.concatenate([np.asarray(b.children[i].data) for b in blocks]) for i in range(3)]


def test_row_layout_example() -> None:
    block = StructBlock(
        (
            FixedWidthBlock.from_values(np.array([1], np.int32)),
            FixedWidthBlock.from_values(np.array([0.5])),
            FixedWidthBlock.from_values(np.array([7], np.uint8)),
        ),
        1,
    )
    compressed, desc = PackedStructCompressor().compress(block)
    assert compressed.buffers[0].tobytes() == bytes.fromhex("01000000 000000000000e03f 07")
    assert list(desc.packed_struct.bits_per_value) == [32, 64, 8]
    assert desc.packed_struct.values == flat_desc(104)


@given(n=st.sampled_from([0, 1, 511, 512, 513, 1025]) | st.integers(0, 3000))
def test_roundtrip(n: int) -> None:
    block = _block(n)
    blocks, compressed, _ = miniblock_roundtrip(PackedStructCompressor(), block)
    assert all(1 << c.log_num_values == 512 for c in compressed.chunks[:-1])
    expected = [np.asarray(c.data) for c in block.children]
    if n:
        for got, want in zip(_children(blocks), expected, strict=True):
            np.testing.assert_array_equal(got, want)
    decoded, stored, _ = per_value_roundtrip(PackedStructCompressor(), block)
    assert stored.bits_per_value == 104
    for got, want in zip(_children([decoded]), expected, strict=True):
        np.testing.assert_array_equal(got, want)


def test_errors() -> None:
    with pytest.raises(UnsupportedEncodingError):
        PackedStructCompressor().compress(StructBlock((FixedWidthBlock(np.zeros(1, np.uint8), 1, 3),), 3))
    with pytest.raises(UnsupportedEncodingError):
        decompressor_for(
            Context.MINIBLOCK,
            pb.CompressiveEncoding(
                packed_struct=pb.PackedStruct(bits_per_value=[32, 32], values=flat_desc(32))
            ),
        )


@pytest.mark.interop
@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_pylance_packed_struct(tmp_path, version: str) -> None:
    n = 3000
    arr = pa.array([{"a": i, "b": i / 2, "c": i % 256} for i in range(n)], SCHEMA)
    (page,) = read_pages(write_column(tmp_path / "p.lance", arr, {"lance-encoding:packed": "true"}, version))
    mb = page.layout.mini_block_layout
    ours, desc = PackedStructCompressor().compress(_block(n))
    assert desc == mb.value_compression
    chunks = miniblock_chunks(page)
    assert ours.buffers[0].tobytes() == b"".join(bytes(c.values[0]) for c in chunks)
    dec = decompressor_for(Context.MINIBLOCK, mb.value_compression)
    got = _children([dec.decompress(c.values, c.num_values) for c in chunks])
    np.testing.assert_array_equal(got[0].view(np.int32), np.arange(n))
    np.testing.assert_array_equal(got[1].view(np.float64), np.arange(n) / 2)


# --- VariablePackedStruct ----------------------------------------------------------------------------


def test_variable_packed_example() -> None:
    block = StructBlock((FixedWidthBlock.from_values(np.array([1], np.int32)), variable_block([b"x"])), 1)
    items, desc = VariablePackedStructCompressor().compress_per_value(block)
    assert strings_of([items]) == [bytes.fromhex("01000000 01000000 78")]
    fields = desc.variable_packed_struct.fields
    assert fields[0].bits_per_value == 32 and fields[0].value == flat_desc(32)
    assert fields[1].bits_per_length == 32 and fields[1].value.variable.offsets == flat_desc(32)


@given(
    rows=st.lists(
        st.tuples(st.integers(-(2**31), 2**31 - 1), st.binary(max_size=30), st.binary(max_size=5)),
        max_size=60,
    )
)
def test_variable_packed_roundtrip(rows: list[tuple[int, bytes, bytes]]) -> None:
    n = len(rows)
    block = StructBlock(
        (
            FixedWidthBlock.from_values(np.array([r[0] for r in rows], np.int32)),
            variable_block([r[1] for r in rows]),
            variable_block([r[2] for r in rows], large=True),
        ),
        n,
    )
    decoded, items, _ = per_value_roundtrip(VariablePackedStructCompressor(), block)
    assert isinstance(items, VariableWidthBlock)
    assert np.asarray(decoded.children[0].data).view(np.int32).tolist() == [r[0] for r in rows]
    assert strings_of([decoded.children[1]]) == [r[1] for r in rows]
    assert strings_of([decoded.children[2]]) == [r[2] for r in rows]
    assert decoded.children[2].offsets.dtype == np.uint64


def test_variable_packed_garbled() -> None:
    block = StructBlock((FixedWidthBlock.from_values(np.array([1], np.int32)), variable_block([b"xyz"])), 1)
    items, desc = VariablePackedStructCompressor().compress_per_value(block)
    dec = decompressor_for(Context.PER_VALUE, desc)
    raw = strings_of([items])[0]
    for bad in (raw[:-1], raw + b"!", raw[:3], raw[:4] + b"\xff\xff\xff\x7f" + raw[8:]):
        with pytest.raises(CorruptFileError):
            dec.decompress(variable_block([bad]))
    with pytest.raises(UnsupportedEncodingError):
        decompressor_for(Context.MINIBLOCK, desc)


@pytest.mark.interop
def test_pylance_variable_packed_struct(tmp_path) -> None:
    t = pa.struct([("a", pa.int32()), ("s", pa.string()), ("b", pa.float64()), ("l", pa.large_binary())])
    rows = [
        {"a": i, "s": "x" * (i % 4), "b": i / 2, "l": b"yy" * (i % 3)} if i % 5 else None for i in range(300)
    ]
    (page,) = read_pages(
        write_column(tmp_path / "vps.lance", pa.array(rows, t), {"lance-encoding:packed": "true"})
    )
    fz = page.layout.full_zip_layout
    assert fz.bits_per_offset == 32 and fz.bits_def == 1
    buffer, pos, theirs = page.buffers[0], 0, []
    for row in rows:  # 1-byte control word, then u32 length + item for valid rows
        assert buffer[pos] == (0 if row else 1)
        pos += 1
        if row:
            length = int.from_bytes(buffer[pos : pos + 4], "little")
            theirs.append(buffer[pos + 4 : pos + 4 + length])
            pos += 4 + length
    valid = [r for r in rows if r]
    block = StructBlock(
        (
            FixedWidthBlock.from_values(np.array([r["a"] for r in valid], np.int32)),
            variable_block([r["s"].encode() for r in valid]),
            FixedWidthBlock.from_values(np.array([r["b"] for r in valid])),
            variable_block([r["l"] for r in valid], large=True),
        ),
        len(valid),
    )
    items, desc = VariablePackedStructCompressor().compress_per_value(block)
    assert desc == fz.value_compression
    assert strings_of([items]) == theirs
    decoded = decompressor_for(Context.PER_VALUE, fz.value_compression).decompress(variable_block(theirs))
    assert [s.decode() for s in strings_of([decoded.children[1]])] == [r["s"] for r in valid]
    assert strings_of([decoded.children[3]]) == [r["l"] for r in valid]
