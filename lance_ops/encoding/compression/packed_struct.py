"""PackedStruct and VariablePackedStruct: struct rows stored row-major (spec §7.12, §7.13).

Description ``PackedStruct { bits_per_value = [child widths...], values = Flat(sum) }``. One
value = one struct row: the children's bytes concatenated in child order, no padding.
Example ``struct<a: int32, b: float64, c: uint8>`` row ``{a: 1, b: 0.5, c: 7}`` →
``01000000 000000000000e03f 07`` (13 bytes; ``PackedStruct([32, 64, 8], Flat(104))``, 512 rows
per mini-block chunk by the Flat rule). The blob descriptor column uses ``[64, 64]``.
Null rows keep their bytes (nulls are definition levels).

**VariablePackedStruct** (2.2, full-zip only; per-value context): used when a packed struct
has a variable-width child. Description ``VariablePackedStruct { fields = [FieldEncoding {
value = Flat(bits), bits_per_value = bits } | FieldEncoding { value = Variable(Flat w),
bits_per_length = w }, ...] }``. Each row is one variable-width item: the fields in order, a
fixed field as its bytes, a variable field as a ``w``-bit length then its bytes. Example
``struct<a: int32, s: string>`` row ``{a: 1, s: "x"}`` → item ``01000000 01000000 78`` (the
structural layer adds the u32 item length ``09000000``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lance_ops._proto import encodings_v2_1_pb2 as pb
from lance_ops.encoding.compression.base import (
    Context,
    MiniBlockCompressed,
    MiniBlockCompressor,
    MiniBlockDecompressor,
    PerValueCompressor,
    PerValueDecompressor,
    as_u8,
    decompressor_for,
    flat_desc,
    guarded,
    register,
    require,
)
from lance_ops.encoding.compression.flat import FlatCompressor
from lance_ops.encoding.compression.variable import variable_desc
from lance_ops.encoding.data import DataBlock, FixedWidthBlock, StructBlock, VariableWidthBlock
from lance_ops.errors import UnsupportedEncodingError


def pack_rows(block: DataBlock) -> tuple[FixedWidthBlock, list[int]]:
    """Row-major bytes of a struct of byte-wide fixed-width children, and the child widths."""
    if not isinstance(block, StructBlock) or not all(
        isinstance(c, FixedWidthBlock) and c.bits_per_value % 8 == 0 and c.bits_per_value > 0
        for c in block.children
    ):
        raise UnsupportedEncodingError("PackedStruct needs a struct of byte-wide fixed-width children")
    rows = block.num_values
    columns = [
        as_u8(c.data)[: rows * c.bytes_per_value].reshape(rows, c.bytes_per_value)  # type: ignore[union-attr]
        for c in block.children
    ]
    widths = [c.bits_per_value for c in block.children]  # type: ignore[union-attr]
    packed = np.concatenate(columns, axis=1) if columns else np.zeros((rows, 0), np.uint8)
    return FixedWidthBlock(np.ascontiguousarray(packed).reshape(-1), sum(widths), rows), widths


def unpack_rows(rows: FixedWidthBlock, widths: Sequence[int]) -> StructBlock:
    """Split row-major bytes back into one fixed-width block per child."""
    total = sum(widths)
    require(
        rows.bits_per_value == total, f"packed rows are {rows.bits_per_value} bits, children sum to {total}"
    )
    n = rows.num_values
    table = as_u8(rows.data)[: n * total // 8].reshape(n, total // 8)
    bounds = np.cumsum([0, *(w // 8 for w in widths)])
    children = tuple(
        FixedWidthBlock(np.ascontiguousarray(table[:, bounds[i] : bounds[i + 1]]).reshape(-1), w, n)
        for i, w in enumerate(widths)
    )
    return StructBlock(children, n)


def _desc(widths: list[int], inner: pb.CompressiveEncoding) -> pb.CompressiveEncoding:
    return pb.CompressiveEncoding(packed_struct=pb.PackedStruct(bits_per_value=widths, values=inner))


class PackedStructCompressor(MiniBlockCompressor):
    """PackedStruct: ``compress`` = mini-block (Flat chunking), ``compress_per_value`` = full-zip."""

    def compress(self, block: DataBlock) -> tuple[MiniBlockCompressed, pb.CompressiveEncoding]:
        rows, widths = pack_rows(block)
        compressed, inner = FlatCompressor().compress(rows)
        return compressed, _desc(widths, inner)

    def compress_per_value(self, block: DataBlock) -> tuple[DataBlock, pb.CompressiveEncoding]:
        rows, widths = pack_rows(block)
        return FlatCompressor().compress_per_value(rows)[0], _desc(
            widths, pb.CompressiveEncoding(flat=pb.Flat(bits_per_value=rows.bits_per_value))
        )


class _PackedReader:
    context: Context

    def __init__(self, widths: list[int], inner: object) -> None:
        if not widths or any(w <= 0 or w % 8 for w in widths):
            raise UnsupportedEncodingError(f"PackedStruct child widths {widths} are not whole bytes")
        self.widths = widths
        self.inner = inner

    @classmethod
    def from_description(cls, desc: pb.PackedStruct) -> _PackedReader:
        if desc.values.WhichOneof("compression") != "flat":
            raise UnsupportedEncodingError("PackedStruct values must be Flat")
        widths = [int(w) for w in desc.bits_per_value]
        if desc.values.flat.bits_per_value != sum(widths):
            raise UnsupportedEncodingError("PackedStruct Flat width differs from the sum of its children")
        return cls(widths, decompressor_for(cls.context, desc.values))


@register(Context.MINIBLOCK, "packed_struct")
class PackedStructMiniBlockDecompressor(_PackedReader, MiniBlockDecompressor):
    context = Context.MINIBLOCK

    @guarded
    def decompress(self, buffers: Sequence[memoryview], num_values: int) -> DataBlock:
        return unpack_rows(self.inner.decompress(buffers, num_values), self.widths)  # type: ignore[attr-defined]


@register(Context.PER_VALUE, "packed_struct")
class PackedStructPerValueDecompressor(_PackedReader, PerValueDecompressor):
    context = Context.PER_VALUE

    @guarded
    def decompress(self, block: DataBlock) -> DataBlock:
        return unpack_rows(self.inner.decompress(block), self.widths)  # type: ignore[attr-defined]


# --- VariablePackedStruct ------------------------------------------------------------------------


def _field_desc(child: DataBlock) -> pb.VariablePackedStruct.FieldEncoding:
    if isinstance(child, FixedWidthBlock) and child.bits_per_value % 8 == 0 and child.bits_per_value > 0:
        bits = child.bits_per_value
        return pb.VariablePackedStruct.FieldEncoding(value=flat_desc(bits), bits_per_value=bits)
    if isinstance(child, VariableWidthBlock):
        bits = child.bits_per_offset
        return pb.VariablePackedStruct.FieldEncoding(value=variable_desc(bits), bits_per_length=bits)
    raise UnsupportedEncodingError(
        "VariablePackedStruct children must be byte-wide fixed-width or variable-width"
    )


class VariablePackedStructCompressor(PerValueCompressor):
    """VariablePackedStruct (per-value context only): ``compress`` = ``compress_per_value``.

    Produces one variable-width item per row with u32 offsets.
    """

    def compress(self, block: DataBlock) -> tuple[DataBlock, pb.CompressiveEncoding]:
        if not isinstance(block, StructBlock) or not block.children:
            raise UnsupportedEncodingError("VariablePackedStruct compresses struct blocks")
        fields = [_field_desc(c) for c in block.children]
        n = block.num_values
        sizes = np.zeros(n, dtype=np.int64)
        for child, field in zip(block.children, fields, strict=True):
            if field.WhichOneof("layout") == "bits_per_value":
                sizes += field.bits_per_value // 8
            else:
                assert isinstance(child, VariableWidthBlock)
                lengths: np.ndarray = np.diff(child.offsets.astype(np.int64))
                sizes += lengths + field.bits_per_length // 8
        item_offsets = np.concatenate(([0], np.cumsum(sizes)))
        out = np.empty(int(item_offsets[-1]), dtype=np.uint8)
        pos = item_offsets[:-1].copy()
        for child, field in zip(block.children, fields, strict=True):
            if field.WhichOneof("layout") == "bits_per_value":
                assert isinstance(child, FixedWidthBlock)
                width = field.bits_per_value // 8
                out[pos[:, None] + np.arange(width)] = as_u8(child.data)[: n * width].reshape(n, width)
                pos += width
                continue
            assert isinstance(child, VariableWidthBlock)
            width = field.bits_per_length // 8
            offs = child.offsets.astype(np.int64)
            lengths = np.diff(offs)
            out[pos[:, None] + np.arange(width)] = (
                lengths.astype(f"<u{width}").view(np.uint8).reshape(n, width)
            )
            pos += width
            out[_gather_index(pos, offs)] = as_u8(child.data)[offs[0] : offs[-1]]
            pos += lengths
        items = VariableWidthBlock(item_offsets.astype(np.uint32), out, n)
        return items, pb.CompressiveEncoding(variable_packed_struct=pb.VariablePackedStruct(fields=fields))

    compress_per_value = compress


def _gather_index(starts: np.ndarray, offs: np.ndarray) -> np.ndarray:
    """Positions ``starts[i] + j`` for ``j < len_i`` of every value, in order (``offs`` = Arrow offsets)."""
    lengths = np.diff(offs)
    return np.repeat(starts - offs[:-1], lengths) + np.arange(int(offs[0]), int(offs[-1]))


@register(Context.PER_VALUE, "variable_packed_struct")
class VariablePackedStructDecompressor(PerValueDecompressor):
    def __init__(self, fields: list[tuple[str, int]]) -> None:
        self.fields = fields  # ("fixed" | "variable", bits)

    @classmethod
    def from_description(cls, desc: pb.VariablePackedStruct) -> VariablePackedStructDecompressor:
        fields = []
        for f in desc.fields:
            kind = f.value.WhichOneof("compression")
            layout = f.WhichOneof("layout")
            if (
                kind == "flat"
                and layout == "bits_per_value"
                and f.value.flat.bits_per_value == f.bits_per_value
            ):
                if f.bits_per_value <= 0 or f.bits_per_value % 8:
                    raise UnsupportedEncodingError(
                        f"packed field width {f.bits_per_value} is not whole bytes"
                    )
                fields.append(("fixed", int(f.bits_per_value)))
            elif kind == "variable" and layout == "bits_per_length" and f.bits_per_length in (32, 64):
                fields.append(("variable", int(f.bits_per_length)))
            else:
                raise UnsupportedEncodingError(f"unsupported VariablePackedStruct field ({kind}, {layout})")
        if not fields:
            raise UnsupportedEncodingError("VariablePackedStruct without fields")
        return cls(fields)

    @guarded
    def decompress(self, block: DataBlock) -> DataBlock:
        require(isinstance(block, VariableWidthBlock), "VariablePackedStruct expects variable-width items")
        assert isinstance(block, VariableWidthBlock)
        data = as_u8(block.data)
        item_offsets = block.offsets.astype(np.int64)
        n = block.num_values
        pos = item_offsets[:-1].copy()
        children: list[DataBlock] = []
        for kind, bits in self.fields:
            width = bits // 8
            require(bool(np.all(pos + width <= item_offsets[1:])), "VariablePackedStruct item is truncated")
            raw = data[pos[:, None] + np.arange(width)]
            pos += width
            if kind == "fixed":
                children.append(FixedWidthBlock(raw.reshape(-1), bits, n))
                continue
            lengths = raw.reshape(-1).view(f"<u{width}").astype(np.int64)
            require(
                bool(np.all(pos + lengths <= item_offsets[1:])),
                "VariablePackedStruct value runs past its item",
            )
            offs = np.concatenate(([0], np.cumsum(lengths)))
            values = data[_gather_index(pos, offs)]
            children.append(
                VariableWidthBlock(offs.astype(np.uint32 if bits == 32 else np.uint64), values, n)
            )
            pos += lengths
        require(bool(np.all(pos == item_offsets[1:])), "VariablePackedStruct item has trailing bytes")
        return StructBlock(tuple(children), n)
