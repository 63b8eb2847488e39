"""FixedSizeList in the mini-block and per-value contexts (spec §3.7, §7.11)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lance_ops._proto import encodings_v2_1_pb2 as pb
from lance_ops.encoding.compression.base import Context, decompressor_for, flat_desc
from lance_ops.encoding.compression.fsl import FixedSizeListCompressor
from lance_ops.encoding.data import DataBlock, FixedSizeListBlock, FixedWidthBlock
from lance_ops.errors import CorruptFileError, UnsupportedEncodingError

from .compression_helpers import (
    miniblock_chunks,
    miniblock_roundtrip,
    per_value_roundtrip,
    read_pages,
    split_chunks,
    write_column,
)


def fsl_block(arr: pa.Array) -> DataBlock:
    """A FixedSizeListBlock (or leaf FixedWidthBlock) holding the values of a pyarrow array."""
    if pa.types.is_fixed_size_list(arr.type):
        child = arr.values
        validity = None
        if child.null_count:
            validity = np.frombuffer(child.buffers()[0], np.uint8)[: (len(child) + 7) // 8].copy()
        return FixedSizeListBlock(fsl_block(child), arr.type.list_size, len(arr), validity)
    bits = 1 if pa.types.is_boolean(arr.type) else arr.type.bit_width
    data = np.frombuffer(arr.buffers()[1], np.uint8)[: (len(arr) * bits + 7) // 8]
    return FixedWidthBlock(data, bits, len(arr))


def _flatten(block: DataBlock) -> tuple[list[tuple[int, np.ndarray | None]], np.ndarray]:
    """Layers (dimension, unpacked validity bits) and the leaf bits, for comparisons."""
    layers = []
    while isinstance(block, FixedSizeListBlock):
        count = block.num_values * block.dimension
        bits = None if block.validity is None else np.unpackbits(block.validity, bitorder="little")[:count]
        layers.append((block.dimension, bits))
        block = block.child
    assert isinstance(block, FixedWidthBlock)
    leaf = np.unpackbits(np.asarray(block.data, np.uint8), bitorder="little")[
        : block.num_values * block.bits_per_value
    ]
    return layers, leaf


def _concat(blocks: list[DataBlock]) -> tuple[list, np.ndarray]:
    parts = [_flatten(b) for b in blocks]
    layers = []
    for i, (dim, bits) in enumerate(parts[0][0]):
        layers.append((dim, None if bits is None else np.concatenate([p[0][i][1] for p in parts])))
    return layers, np.concatenate([p[1] for p in parts])


def _assert_same(a: tuple[list, np.ndarray], b: tuple[list, np.ndarray]) -> None:
    assert [d for d, _ in a[0]] == [d for d, _ in b[0]]
    for (_, x), (_, y) in zip(a[0], b[0], strict=True):
        assert (x is None) == (y is None)
        if x is not None:
            np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(a[1], b[1])


@st.composite
def fsl_arrays(draw: st.DrawFn) -> pa.Array:
    rows = draw(st.sampled_from([1, 2, 255, 256, 257, 1025]) | st.integers(1, 1500))
    dims = draw(st.lists(st.integers(1, 9), min_size=1, max_size=2))
    item = draw(st.sampled_from([pa.bool_(), pa.int8(), pa.int32(), pa.float64()]))
    items = rows * int(np.prod(dims))
    rng = np.random.default_rng(draw(st.integers(0, 1000)))
    mask = rng.random(items) < 0.2 if draw(st.booleans()) else None
    if pa.types.is_boolean(item):
        arr = pa.array(rng.random(items) < 0.5, mask=mask)
    else:
        arr = pa.array(rng.integers(0, 100, items).astype(item.to_pandas_dtype()), item, mask=mask)
    for dim in reversed(dims):
        arr = pa.FixedSizeListArray.from_arrays(arr, dim)
    return arr


@given(arr=fsl_arrays())
def test_roundtrip(arr: pa.Array) -> None:
    block = fsl_block(arr)
    blocks, compressed, desc = miniblock_roundtrip(FixedSizeListCompressor(), block)
    _assert_same(_concat(blocks), _flatten(block))
    assert desc.fixed_size_list.items_per_value == arr.type.list_size
    if not pa.types.is_boolean(arr.type.value_type) and not pa.types.is_boolean(
        getattr(arr.type.value_type, "value_type", pa.int8())
    ):
        decoded, stored, _ = per_value_roundtrip(FixedSizeListCompressor(), block)
        _assert_same(_flatten(decoded), _flatten(block))


@given(arr=fsl_arrays())
def test_chunks_decoded_together_equal_one_by_one(arr: pa.Array) -> None:
    """``decompress_chunks`` (shapes without item validity: one buffer per chunk, the compaction
    and scan path) equals the chunks decoded one at a time, concatenated."""
    block = fsl_block(_without_item_nulls(arr))
    compressed, desc = FixedSizeListCompressor().compress(block)
    dec = decompressor_for(Context.MINIBLOCK, desc)
    chunks = split_chunks(compressed)
    one_by_one = [dec.decompress(bufs, n) for bufs, n in chunks]
    together = dec.decompress_chunks([bufs[0] for bufs, _ in chunks], [n for _, n in chunks])
    assert together.num_values == len(arr) == sum(n for _, n in chunks)
    _assert_same(_flatten(together), _concat(one_by_one))
    _assert_same(_flatten(together), _flatten(block))


def _without_item_nulls(arr: pa.Array) -> pa.Array:
    """``arr`` with the same shape and its innermost items' nulls replaced by a value."""
    if pa.types.is_fixed_size_list(arr.type):
        return pa.FixedSizeListArray.from_arrays(_without_item_nulls(arr.values), arr.type.list_size)
    return arr.fill_null(False if pa.types.is_boolean(arr.type) else 0)


@pytest.mark.parametrize(
    ("item", "dim", "nulls", "rows"),
    [(pa.int32(), 4, True, 256), (pa.float32(), 8, False, 128), (pa.float32(), 2, False, 512)],
)
def test_rows_per_chunk(item: pa.DataType, dim: int, nulls: bool, rows: int) -> None:
    n = 5000
    mask = np.arange(n * dim) % 5 == 0 if nulls else None
    values = pa.array(np.arange(n * dim).astype(item.to_pandas_dtype()), item, mask=mask)
    compressed, _ = FixedSizeListCompressor().compress(
        fsl_block(pa.FixedSizeListArray.from_arrays(values, dim))
    )
    assert 1 << compressed.chunks[0].log_num_values == rows
    assert len(compressed.buffers) == (2 if nulls else 1)


def test_per_value_row_layout() -> None:
    values = pa.array(np.arange(16, dtype=np.float32), mask=np.arange(16) == 1)
    stored, desc = FixedSizeListCompressor().compress_per_value(
        fsl_block(pa.FixedSizeListArray.from_arrays(values, 8))
    )
    assert stored.bits_per_value == 8 * (1 + 32)
    row0 = np.asarray(stored.data[:33]).tobytes()
    assert row0[0] == 0b11111101 and row0[1:5] == np.float32(0).tobytes()
    assert desc.fixed_size_list.has_validity


def test_errors() -> None:
    with pytest.raises(UnsupportedEncodingError):
        FixedSizeListCompressor().compress(FixedWidthBlock.from_values(np.zeros(3, np.int32)))
    with pytest.raises(UnsupportedEncodingError):
        decompressor_for(
            Context.MINIBLOCK,
            pb.CompressiveEncoding(
                fixed_size_list=pb.FixedSizeList(
                    items_per_value=4,
                    values=pb.CompressiveEncoding(variable=pb.Variable(offsets=flat_desc(32))),
                )
            ),
        )
    dec = decompressor_for(
        Context.MINIBLOCK,
        pb.CompressiveEncoding(
            fixed_size_list=pb.FixedSizeList(items_per_value=4, has_validity=True, values=flat_desc(32))
        ),
    )
    with pytest.raises(CorruptFileError):
        dec.decompress([memoryview(b"\xff")], 2)
    with pytest.raises(CorruptFileError):
        dec.decompress([memoryview(b"\xff"), memoryview(b"\0" * 31)], 2)


# --- pylance pages -----------------------------------------------------------------------------------

_rng = np.random.default_rng(0)
_N = 3000
CASES = {
    "fsl4-item-nulls": pa.FixedSizeListArray.from_arrays(
        pa.array(_rng.random(_N * 4).astype(np.float32), mask=_rng.random(_N * 4) < 0.1), 4
    ),
    "fsl8": pa.FixedSizeListArray.from_arrays(pa.array(_rng.random(_N * 8).astype(np.float32)), 8),
    "nested": pa.FixedSizeListArray.from_arrays(
        pa.FixedSizeListArray.from_arrays(pa.array(np.arange(_N * 6, dtype=np.int32)), 3), 2
    ),
    "bool": pa.FixedSizeListArray.from_arrays(pa.array(_rng.random(_N * 5) < 0.5), 5),
}


@pytest.mark.interop
@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_pylance_miniblock_fsl(tmp_path, version: str, case: str) -> None:
    arr = CASES[case]
    (page,) = read_pages(write_column(tmp_path / "f.lance", arr, version=version))
    mb = page.layout.mini_block_layout
    block = fsl_block(arr)
    ours, desc = FixedSizeListCompressor().compress(block)
    assert desc == mb.value_compression
    chunks = miniblock_chunks(page)
    for i in range(len(ours.buffers)):
        assert ours.buffers[i].tobytes() == b"".join(bytes(c.values[i]) for c in chunks)
    dec = decompressor_for(Context.MINIBLOCK, mb.value_compression)
    _assert_same(_concat([dec.decompress(c.values, c.num_values) for c in chunks]), _flatten(block))


@pytest.mark.interop
def test_pylance_full_zip_vectors(tmp_path) -> None:
    rows = 200
    arr = pa.FixedSizeListArray.from_arrays(
        pa.array(_rng.random(rows * 128).astype(np.float32), mask=_rng.random(rows * 128) < 0.1), 128
    )
    (page,) = read_pages(write_column(tmp_path / "vec.lance", arr, version="2.2"))
    fz = page.layout.full_zip_layout
    assert fz.bits_per_value == 4224
    stored, desc = FixedSizeListCompressor().compress_per_value(fsl_block(arr))
    assert desc == fz.value_compression
    assert np.asarray(stored.data).tobytes() == page.buffers[0]
    theirs = FixedWidthBlock(np.frombuffer(page.buffers[0], np.uint8), fz.bits_per_value, rows)
    decoded = decompressor_for(Context.PER_VALUE, fz.value_compression).decompress(theirs)
    _assert_same(_flatten(decoded), _flatten(fsl_block(arr)))
