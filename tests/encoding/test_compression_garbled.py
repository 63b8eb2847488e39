"""Fuzzing the decoders.

* valid input decodes to exactly what was encoded: each mini-block scheme's own output,
  decoded chunk by chunk, and whole pages (random shapes × ``lance-encoding:*`` options);
* the same input with a flipped byte or a truncated buffer either raises a typed
  :class:`~lance_ops.errors.LanceOpsError` or decodes to the right number of values of the
  right type (a flipped payload byte can be a valid, different value — only the shape is
  checkable then);
* random bytes under every decompressor raise :class:`CorruptFileError` or decode to the
  requested number of values.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lance_ops._proto import encodings_v2_1_pb2 as pb
from lance_ops.encoding.api import FileVersion, PageInfo
from lance_ops.encoding.compression.base import Context, decompressor_for, flat_desc
from lance_ops.encoding.compression.bitpacking import InlineBitpackingCompressor
from lance_ops.encoding.compression.bss import ByteStreamSplitCompressor
from lance_ops.encoding.compression.flat import FlatCompressor
from lance_ops.encoding.compression.fsst import FsstCompressor, SymbolTable
from lance_ops.encoding.compression.general import GeneralCompressor, general_desc
from lance_ops.encoding.compression.rle import RleCompressor, rle_desc
from lance_ops.encoding.compression.variable import VariableCompressor, variable_desc
from lance_ops.encoding.data import DataBlock, FixedWidthBlock, VariableWidthBlock
from lance_ops.encoding.field_decoder import make_field_decoder
from lance_ops.errors import CorruptFileError, LanceOpsError
from tests.encoding.compression_helpers import split_chunks, strings_of, variable_block
from tests.encoding.harness import MemoryFile, assert_same, encode_to_memory, flat_arrays, nested_arrays

_table = SymbolTable(np.frombuffer(b"ab\0\0\0\0\0\0", np.uint8), np.array([2], np.uint8)).to_bytes()
MINIBLOCK = {
    "flat": (flat_desc(32), 1),
    "variable32": (variable_desc(32), 1),
    "variable64": (variable_desc(64), 1),
    "inline": (
        pb.CompressiveEncoding(inline_bitpacking=pb.InlineBitpacking(uncompressed_bits_per_value=16)),
        1,
    ),
    "rle": (rle_desc(32), 2),
    "bss": (pb.CompressiveEncoding(byte_stream_split=pb.ByteStreamSplit(values=flat_desc(64))), 1),
    "fsst": (pb.CompressiveEncoding(fsst=pb.Fsst(symbol_table=_table, values=variable_desc(32))), 1),
    "zstd": (general_desc(pb.COMPRESSION_ALGORITHM_ZSTD, None, flat_desc(32)), 1),
    "lz4": (general_desc(pb.COMPRESSION_ALGORITHM_LZ4, None, variable_desc(32)), 1),
    "fsl": (
        pb.CompressiveEncoding(
            fixed_size_list=pb.FixedSizeList(items_per_value=3, has_validity=True, values=flat_desc(16))
        ),
        2,
    ),
    "packed": (
        pb.CompressiveEncoding(packed_struct=pb.PackedStruct(bits_per_value=[8, 32], values=flat_desc(40))),
        1,
    ),
}
BLOCK = {
    "flat": flat_desc(16),
    "variable": variable_desc(32),
    "inline": pb.CompressiveEncoding(inline_bitpacking=pb.InlineBitpacking(uncompressed_bits_per_value=16)),
    "ool": pb.CompressiveEncoding(
        out_of_line_bitpacking=pb.OutOfLineBitpacking(uncompressed_bits_per_value=16, values=flat_desc(3))
    ),
    "rle": rle_desc(16),
    "lz4": general_desc(pb.COMPRESSION_ALGORITHM_LZ4, None, variable_desc(32)),
    "zstd": general_desc(pb.COMPRESSION_ALGORITHM_ZSTD, None, flat_desc(64)),
}


def _decodes_to_count(decode: Callable[[], DataBlock], count: int) -> None:
    """``decode()`` raises CorruptFileError or yields exactly ``count`` values."""
    try:
        block = decode()
    except CorruptFileError:
        return
    assert block.num_values == count


@pytest.mark.parametrize("name", sorted(MINIBLOCK))
@given(data=st.data())
def test_miniblock_garbage(name: str, data: st.DataObject) -> None:
    desc, nbuf = MINIBLOCK[name]
    dec = decompressor_for(Context.MINIBLOCK, desc)
    bufs = [memoryview(data.draw(st.binary(max_size=300))) for _ in range(nbuf)]
    count = data.draw(st.integers(0, 2000))
    _decodes_to_count(lambda: dec.decompress(bufs, count), count)


@pytest.mark.parametrize("name", sorted(BLOCK))
@given(data=st.data())
def test_block_garbage(name: str, data: st.DataObject) -> None:
    dec = decompressor_for(Context.BLOCK, BLOCK[name])
    raw = memoryview(data.draw(st.binary(max_size=3000)))
    count = data.draw(st.integers(0, 3000))
    _decodes_to_count(lambda: dec.decompress(raw, count), count)


def _ints(data: st.DataObject, dtype: str) -> FixedWidthBlock:
    n = data.draw(st.sampled_from([1, 7, 1023, 1024, 1025, 3000]))
    runs = data.draw(st.booleans())
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    values = rng.integers(0, 300, n).astype(dtype)
    if runs:
        values = np.repeat(values[: max(1, n // 300)], 300)[:n]
    return FixedWidthBlock(values.view(np.uint8), values.dtype.itemsize * 8, len(values))


def _texts(data: st.DataObject) -> VariableWidthBlock:
    words = data.draw(
        st.lists(st.binary(max_size=60) | st.sampled_from([b"alpha", b"beta"]), min_size=1, max_size=400)
    )
    return variable_block(words, large=data.draw(st.booleans()))


VALID: dict[str, tuple[Callable[[], Any], Callable[[st.DataObject], DataBlock]]] = {
    "flat": (FlatCompressor, lambda d: _ints(d, "<i4")),
    "variable": (VariableCompressor, _texts),
    "inline": (lambda: InlineBitpackingCompressor(16), lambda d: _ints(d, "<u2")),
    "rle": (RleCompressor, lambda d: _ints(d, "<i8")),
    "bss": (ByteStreamSplitCompressor, lambda d: _ints(d, "<u8")),
    "fsst": (FsstCompressor, _texts),
    "zstd": (lambda: GeneralCompressor(FlatCompressor(), "zstd"), lambda d: _ints(d, "<i4")),
    "lz4": (lambda: GeneralCompressor(VariableCompressor(), "lz4"), _texts),
}


def _same_values(blocks: list[DataBlock], block: DataBlock) -> None:
    if isinstance(block, VariableWidthBlock):
        assert strings_of(blocks) == strings_of([block])
    else:
        assert isinstance(block, FixedWidthBlock)
        width = block.bits_per_value // 8
        got = b"".join(np.asarray(b.data)[: b.num_values * width].tobytes() for b in blocks)
        assert got == np.asarray(block.data)[: block.num_values * width].tobytes()


@pytest.mark.parametrize("name", sorted(VALID))
@given(data=st.data())
def test_miniblock_valid_then_flipped(name: str, data: st.DataObject) -> None:
    """A scheme's own chunks decode to its input; one flipped byte gives the same count or a typed error."""
    make, values = VALID[name]
    block = values(data)
    compressed, desc = make().compress(block)
    dec = decompressor_for(Context.MINIBLOCK, desc)
    chunks = split_chunks(compressed)
    _same_values([dec.decompress(bufs, n) for bufs, n in chunks], block)
    c = data.draw(st.integers(0, len(chunks) - 1))
    bufs, n = chunks[c]
    b = data.draw(st.integers(0, len(bufs) - 1))
    if not len(bufs[b]):
        return
    raw = bytearray(bufs[b])
    raw[data.draw(st.integers(0, len(raw) - 1))] ^= data.draw(st.integers(1, 255))
    garbled = [memoryview(bytes(raw)) if i == b else buf for i, buf in enumerate(bufs)]
    _decodes_to_count(lambda: dec.decompress(garbled, n), n)


PAGE_OPTIONS = st.fixed_dictionaries(
    {},
    optional={
        "structural-encoding": st.sampled_from(["miniblock", "fullzip"]),
        "compression": st.sampled_from(["none", "zstd", "lz4", "fsst"]),
        "bss": st.sampled_from(["on", "off"]),
        "rle-threshold": st.sampled_from(["0.5", "0.9"]),
        "dict-divisor": st.sampled_from(["1", "100"]),
    },
)


@given(
    array=st.one_of(flat_arrays(), nested_arrays()),
    options=PAGE_OPTIONS,
    version=st.sampled_from([FileVersion.V2_1, FileVersion.V2_2]),
    data=st.data(),
)
def test_page_valid_then_garbled(
    array: pa.Array, options: dict[str, str], version: FileVersion, data: st.DataObject
) -> None:
    """Whole pages: valid bytes decode to the input; a flipped byte or a truncated buffer
    decodes to the right row count and type, or raises a typed error."""
    field = pa.field("c", array.type, metadata={f"lance-encoding:{k}": v for k, v in options.items()} or None)
    try:
        mem, _ = encode_to_memory(field, [array], version)
    except LanceOpsError:
        return  # a refused combination leaves nothing to decode
    rows = range(len(array))
    assert_same(make_field_decoder(field, mem.columns, version).read(mem.fetch, rows), array, "valid page")
    pages = [(c, p) for c, col in enumerate(mem.columns) for p, info in enumerate(col) if info.buffers]
    if not pages:
        return
    c, p = data.draw(st.sampled_from(pages))
    info = mem.columns[c][p]
    b = data.draw(st.integers(0, len(info.buffers) - 1))
    pos, size = info.buffers[b]
    garbled = MemoryFile(bytearray(mem.data), [list(col) for col in mem.columns])
    if size and data.draw(st.booleans()):
        garbled.data[pos + data.draw(st.integers(0, size - 1))] ^= data.draw(st.integers(1, 255))
    else:
        buffers = list(info.buffers)
        buffers[b] = (pos, data.draw(st.integers(0, max(size - 1, 0))))
        garbled.columns[c][p] = PageInfo(info.layout, tuple(buffers), info.num_rows, info.first_row)
    try:
        got = make_field_decoder(field, garbled.columns, version).read(garbled.fetch, rows)
    except LanceOpsError:
        return
    assert len(got) == len(array)
    assert got.type == array.type


@given(items=st.lists(st.binary(max_size=40), max_size=20))
def test_per_value_garbage(items: list[bytes]) -> None:
    offs = np.concatenate(([0], np.cumsum([len(i) for i in items]))).astype(np.uint32)
    block = VariableWidthBlock(offs, np.frombuffer(b"".join(items), np.uint8), len(items))
    for desc in (MINIBLOCK["fsst"][0], general_desc(pb.COMPRESSION_ALGORITHM_ZSTD, 0, variable_desc(32))):
        try:
            decompressor_for(Context.PER_VALUE, desc).decompress(block)
        except CorruptFileError:
            pass
    fsl = decompressor_for(Context.PER_VALUE, MINIBLOCK["fsl"][0])
    with pytest.raises(CorruptFileError):
        fsl.decompress(FixedWidthBlock(np.zeros(len(items) * 8, np.uint8), 64, len(items)))
