"""FixedSizeList: fixed-size lists of fixed-width items, flattened (spec §7.11).

Description ``FixedSizeList { items_per_value = dim, has_validity, values = Flat(item bits) }``;
nested FSL layers nest the message (outer layer outermost). One value = one FSL row.

* Mini-block: chunk buffers are one LSB-first validity bitmap per layer that has item
  validity (outer layer first; ``ceil(rows × items_per_row / 8)`` bytes for the chunk's rows,
  starting at bit 0), then the flattened data (``rows × items × item_bytes``). Rows per chunk
  follow the Flat rule with ``bytes/row = items × item_bytes + Σ ceil(items_in_layer / 8)``:
  256 rows for ``FSL<int32, 4>`` with item validity, 128 rows for ``FSL<float32, 8>``.
* Per-value (full-zip): each row is the validity bytes of every validity layer
  (``ceil(items_in_layer / 8)`` each, LSB-first) followed by the row's data, so a row of
  ``FSL<float32, 128>`` with item validity is 16 + 512 bytes (4 224 bits).

Row nulls are definition levels (structural); null rows still occupy their bytes.

``FSL<null>`` (item width 0): the leaf description is ``Constant {}`` without a value and
every validity layer is written (all items null), so a row is only its validity bytes
(``FSL<null, 20>`` = 3 bytes). pylance 14 writes it full-zip only (forcing mini-block makes
it panic), so mini-block compression of a 0-bit leaf is refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lance_ops._proto import encodings_v2_1_pb2 as pb
from lance_ops.encoding.compression.base import (
    Context,
    MiniBlockCompressed,
    MiniBlockCompressor,
    MiniBlockDecompressor,
    PerValueDecompressor,
    as_u8,
    chunk_descriptors,
    fixed_chunk_values,
    flat_bits,
    flat_desc,
    guarded,
    register,
    require,
    split_counts,
)
from lance_ops.encoding.compression.flat import FlatMiniBlockDecompressor
from lance_ops.encoding.data import DataBlock, FixedSizeListBlock, FixedWidthBlock
from lance_ops.errors import UnsupportedEncodingError, UnsupportedFeatureError


@dataclass(frozen=True)
class _Shape:
    """The FSL layers (outer first) and the leaf item width."""

    dims: tuple[int, ...]
    validity: tuple[bool, ...]
    item_bits: int

    @property
    def items_per_row(self) -> int:
        return int(np.prod(self.dims, dtype=np.int64))

    def layer_items(self, layer: int) -> int:
        """Items of layer ``layer``'s child per row."""
        return int(np.prod(self.dims[: layer + 1], dtype=np.int64))

    @property
    def validity_layers(self) -> list[int]:
        return [i for i, v in enumerate(self.validity) if v]

    def row_bytes(self) -> float:
        data = self.items_per_row * self.item_bits / 8
        return data + sum(-(-self.layer_items(i) // 8) for i in self.validity_layers)

    def description(self) -> pb.CompressiveEncoding:
        desc = flat_desc(self.item_bits)
        if self.item_bits == 0:
            desc = pb.CompressiveEncoding(constant=pb.Constant())  # FSL<null>
        for dim, valid in zip(reversed(self.dims), reversed(self.validity), strict=True):
            desc = pb.CompressiveEncoding(
                fixed_size_list=pb.FixedSizeList(items_per_value=dim, has_validity=valid, values=desc)
            )
        return desc


def _unfold(block: DataBlock) -> tuple[_Shape, list[np.ndarray | None], FixedWidthBlock]:
    """Layers of an FSL block: shape, each layer's validity bits (unpacked) and the leaf."""
    dims: list[int] = []
    valid: list[bool] = []
    bits: list[np.ndarray | None] = []
    current = block
    while isinstance(current, FixedSizeListBlock):
        dims.append(current.dimension)
        count = current.num_values * current.dimension
        if current.validity is None:
            valid.append(False)
            bits.append(None)
        else:
            valid.append(True)
            bits.append(np.unpackbits(as_u8(current.validity), bitorder="little")[:count])
        current = current.child
    if not dims or not isinstance(current, FixedWidthBlock):
        raise UnsupportedEncodingError("FixedSizeList compresses FSL blocks of fixed-width items")
    return _Shape(tuple(dims), tuple(valid), current.bits_per_value), bits, current


def _leaf_bits(leaf: FixedWidthBlock) -> np.ndarray:
    return np.unpackbits(as_u8(leaf.data), bitorder="little")[: leaf.num_values * leaf.bits_per_value]


def _chunked_bitmap(bits: np.ndarray, chunk_bits: np.ndarray) -> np.ndarray:
    """Re-pack consecutive bit ranges so that each range starts on a byte boundary."""
    padded = -(-chunk_bits // 8) * 8
    out = np.zeros(int(padded.sum()), dtype=np.uint8)
    starts = np.cumsum(padded) - padded
    src_starts = np.cumsum(chunk_bits) - chunk_bits
    owner = np.repeat(np.arange(len(chunk_bits)), chunk_bits)
    pos = np.arange(int(chunk_bits.sum())) - src_starts[owner]
    out[starts[owner] + pos] = bits[: int(chunk_bits.sum())]
    return np.packbits(out, bitorder="little")


class FixedSizeListCompressor(MiniBlockCompressor):
    """FixedSizeList: ``compress`` = mini-block, ``compress_per_value`` = full-zip rows."""

    def compress(self, block: DataBlock) -> tuple[MiniBlockCompressed, pb.CompressiveEncoding]:
        shape, validity, leaf = _unfold(block)
        if shape.item_bits == 0:
            raise UnsupportedFeatureError("a fixed_size_list of nulls cannot be stored in mini-block")
        rows = block.num_values
        counts = np.array(split_counts(rows, fixed_chunk_values(shape.row_bytes())), dtype=np.int64)
        buffers, sizes = [], []
        for layer in shape.validity_layers:
            chunk_bits = counts * shape.layer_items(layer)
            buffers.append(_chunked_bitmap(validity[layer], chunk_bits))  # type: ignore[arg-type]
            sizes.append(-(-chunk_bits // 8))
        leaf_chunk_bits = counts * shape.items_per_row * shape.item_bits
        if shape.item_bits % 8 == 0:
            buffers.append(as_u8(leaf.data)[: int(leaf_chunk_bits.sum()) // 8])
        else:
            buffers.append(_chunked_bitmap(_leaf_bits(leaf), leaf_chunk_bits))
        sizes.append(-(-leaf_chunk_bits // 8))
        size_table = np.stack(sizes, axis=1) if len(counts) else np.zeros((0, len(sizes)), np.int64)
        chunks = chunk_descriptors([int(c) for c in counts], size_table)
        return MiniBlockCompressed(tuple(buffers), chunks, rows), shape.description()

    def compress_per_value(self, block: DataBlock) -> tuple[DataBlock, pb.CompressiveEncoding]:
        shape, validity, leaf = _unfold(block)
        if shape.item_bits % 8:
            raise UnsupportedEncodingError("per-value FixedSizeList needs byte-wide items")
        rows = block.num_values
        parts = []
        for layer in shape.validity_layers:
            per_row = shape.layer_items(layer)
            bits = validity[layer].reshape(rows, per_row)  # type: ignore[union-attr]
            parts.append(np.packbits(bits, axis=1, bitorder="little"))
        row_data = shape.items_per_row * shape.item_bits // 8
        parts.append(as_u8(leaf.data)[: rows * row_data].reshape(rows, row_data))
        packed = (
            np.concatenate(parts, axis=1) if rows else np.zeros((0, sum(p.shape[1] for p in parts)), np.uint8)
        )
        width = packed.shape[1] * 8
        return FixedWidthBlock(np.ascontiguousarray(packed).reshape(-1), width, rows), shape.description()


def _parse_shape(desc: pb.FixedSizeList) -> _Shape:
    dims, valid = [], []
    current: pb.CompressiveEncoding = pb.CompressiveEncoding(fixed_size_list=desc)
    while current.WhichOneof("compression") == "fixed_size_list":
        layer = current.fixed_size_list
        if layer.items_per_value <= 0:
            raise UnsupportedEncodingError("FixedSizeList with a non-positive dimension")
        dims.append(int(layer.items_per_value))
        valid.append(bool(layer.has_validity))
        current = layer.values
    if current.WhichOneof("compression") == "constant" and not current.constant.HasField("value"):
        return _Shape(tuple(dims), tuple(valid), 0)  # FSL<null>: validity bytes only
    return _Shape(tuple(dims), tuple(valid), flat_bits(current))


def _fold(
    shape: _Shape, rows: int, validity: list[np.ndarray | None], leaf: FixedWidthBlock
) -> FixedSizeListBlock:
    block: DataBlock = leaf
    for layer in reversed(range(len(shape.dims))):
        outer_rows = rows * (shape.layer_items(layer) // shape.dims[layer])
        bits = validity[layer]
        packed = None if bits is None else np.packbits(bits, bitorder="little")
        block = FixedSizeListBlock(block, shape.dims[layer], outer_rows, packed)
    assert isinstance(block, FixedSizeListBlock)
    return block


class _FslReader:
    def __init__(self, shape: _Shape) -> None:
        self.shape = shape

    @classmethod
    def from_description(cls, desc: pb.FixedSizeList) -> _FslReader:
        return cls(_parse_shape(desc))


@register(Context.MINIBLOCK, "fixed_size_list")
class FixedSizeListMiniBlockDecompressor(_FslReader, MiniBlockDecompressor):
    @guarded
    def decompress(self, buffers: Sequence[memoryview], num_values: int) -> DataBlock:
        shape = self.shape
        layers = shape.validity_layers
        require(len(buffers) == len(layers) + 1, f"FixedSizeList expects {len(layers) + 1} buffers")
        validity: list[np.ndarray | None] = [None] * len(shape.dims)
        for buf, layer in zip(buffers, layers, strict=False):
            count = num_values * shape.layer_items(layer)
            raw = as_u8(buf)
            require(len(raw) * 8 >= count, "FixedSizeList validity buffer is too short")
            validity[layer] = np.unpackbits(raw, bitorder="little")[:count]
        items = num_values * shape.items_per_row
        data = as_u8(buffers[-1])
        nbytes = -(-items * shape.item_bits // 8)
        require(len(data) >= nbytes, "FixedSizeList data buffer is too short")
        return _fold(shape, num_values, validity, FixedWidthBlock(data[:nbytes], shape.item_bits, items))

    @guarded
    def decompress_chunks(self, buffers: Sequence[memoryview], counts: Sequence[int]) -> DataBlock:
        """Many chunks of a shape without item validity (one buffer per chunk: the flattened
        items) decoded in one call: the leaf items as Flat chunks, then the layers folded."""
        shape = self.shape
        require(not shape.validity_layers, "FixedSizeList chunks with item validity have several buffers")
        per_row = shape.items_per_row
        leaf = FlatMiniBlockDecompressor(shape.item_bits).decompress_chunks(
            buffers, [int(c) * per_row for c in counts]
        )
        assert isinstance(leaf, FixedWidthBlock)
        return _fold(shape, int(sum(counts)), [None] * len(shape.dims), leaf)


@register(Context.PER_VALUE, "fixed_size_list")
class FixedSizeListPerValueDecompressor(_FslReader, PerValueDecompressor):
    @guarded
    def decompress(self, block: DataBlock) -> DataBlock:
        shape = self.shape
        require(shape.item_bits % 8 == 0, "per-value FixedSizeList needs byte-wide items")
        require(isinstance(block, FixedWidthBlock), "per-value FixedSizeList expects fixed-width rows")
        assert isinstance(block, FixedWidthBlock)
        rows = block.num_values
        sizes = [-(-shape.layer_items(i) // 8) for i in shape.validity_layers]
        row_data = shape.items_per_row * shape.item_bits // 8
        row_bytes = sum(sizes) + row_data
        require(
            block.bits_per_value == row_bytes * 8,
            f"FixedSizeList rows are {block.bits_per_value} bits, expected {row_bytes * 8}",
        )
        table = as_u8(block.data)[: rows * row_bytes].reshape(rows, row_bytes)
        validity: list[np.ndarray | None] = [None] * len(shape.dims)
        col = 0
        for layer, size in zip(shape.validity_layers, sizes, strict=True):
            per_row = shape.layer_items(layer)
            bits = np.unpackbits(table[:, col : col + size], axis=1, bitorder="little")[:, :per_row]
            validity[layer] = bits.reshape(-1)
            col += size
        data = np.ascontiguousarray(table[:, col:]).reshape(-1)
        return _fold(
            shape, rows, validity, FixedWidthBlock(data, shape.item_bits, rows * shape.items_per_row)
        )
