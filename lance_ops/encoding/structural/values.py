"""Conversions between Arrow leaf arrays and the codec's :mod:`~lance_ops.encoding.data` blocks.

Writing turns the visible values of a leaf (any offset, validity ignored) into a block
whose buffers start at value 0: fixed-width types become :class:`FixedWidthBlock`
(booleans as an LSB-first bitmap re-aligned to bit 0), string/binary types a
:class:`VariableWidthBlock` with offsets rebased to 0 (u32 for ``string``/``binary``, u64 for
the ``large_`` types), primitive fixed-size lists a :class:`FixedSizeListBlock`, packed
structs a :class:`StructBlock`. Reading turns a decoded block back into an Arrow array of
the requested type with no validity (nulls come from definition levels). :func:`take_block`
gathers block values by index (dictionary decoding, constant pages) and
:func:`expand_block` spreads stored values over null slots, both vectorised with
``repeat``/``cumsum``.
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np
import pyarrow as pa

from lance_ops.encoding.compression import dictionary
from lance_ops.encoding.compression.base import gather_spans
from lance_ops.encoding.data import (
    DataBlock,
    FixedSizeListBlock,
    FixedWidthBlock,
    StructBlock,
    VariableWidthBlock,
)
from lance_ops.errors import CorruptFileError, UnsupportedFeatureError


def is_variable_width(dtype: pa.DataType) -> bool:
    return (
        pa.types.is_string(dtype)
        or pa.types.is_binary(dtype)
        or pa.types.is_large_string(dtype)
        or pa.types.is_large_binary(dtype)
    )


def is_large(dtype: pa.DataType) -> bool:
    return pa.types.is_large_string(dtype) or pa.types.is_large_binary(dtype)


def fixed_bits(dtype: pa.DataType) -> int:
    """Bits per value of a fixed-width Arrow type (a primitive FSL counts its whole row)."""
    if pa.types.is_boolean(dtype):
        return 1
    if pa.types.is_fixed_size_list(dtype):
        return dtype.list_size * fixed_bits(dtype.value_type)
    try:
        return int(dtype.bit_width)
    except ValueError as exc:
        raise UnsupportedFeatureError(f"{dtype} is not a fixed-width type") from exc


def _buffer_bytes(buf: pa.Buffer | None, start: int, stop: int) -> np.ndarray:
    if buf is None or stop <= start:
        return np.zeros(max(stop - start, 0), np.uint8)
    return np.frombuffer(buf, dtype=np.uint8, count=stop - start, offset=start)


def _bits(buf: pa.Buffer | None, offset: int, n: int) -> np.ndarray:
    """Bitmap of ``n`` bits starting at bit ``offset``, re-packed to start at bit 0."""
    if buf is None:
        return np.packbits(np.ones(n, bool), bitorder="little")
    nbytes = (offset + n + 7) // 8
    raw = np.frombuffer(buf, dtype=np.uint8, count=nbytes)
    if offset % 8 == 0:
        out = raw[offset // 8 : offset // 8 + (n + 7) // 8].copy()
    else:
        out = np.packbits(np.unpackbits(raw, bitorder="little")[offset : offset + n], bitorder="little")
    if n % 8:
        out[-1] &= (1 << (n % 8)) - 1
    return out


def to_block(array: pa.Array) -> DataBlock:
    """The values of ``array`` (validity ignored) as a block starting at value 0."""
    dtype = array.type
    n = len(array)
    off = array.offset
    buffers = array.buffers()
    if pa.types.is_boolean(dtype):
        return FixedWidthBlock(_bits(buffers[1], off, n), 1, n)
    if is_variable_width(dtype):
        odt = np.int64 if is_large(dtype) else np.int32
        width = np.dtype(odt).itemsize
        offsets = (
            np.frombuffer(buffers[1], dtype=odt, count=n + 1, offset=off * width) if n or buffers[1] else None
        )
        if offsets is None:
            offsets = np.zeros(1, odt)
        base = int(offsets[0])
        data = _buffer_bytes(buffers[2], base, int(offsets[-1]))
        rebased = (offsets - base).astype(np.uint64 if is_large(dtype) else np.uint32)
        return VariableWidthBlock(rebased, data, n)
    if pa.types.is_fixed_size_list(dtype):
        dim = dtype.list_size
        child = array.values.slice(off * dim, n * dim)
        validity = None
        if pa.types.is_null(child.type):
            # every item null; written even so, as pylance does
            validity = np.zeros(-(-n * dim // 8), np.uint8)
        elif child.null_count:
            validity = _bits(child.buffers()[0], child.offset, n * dim)
        return FixedSizeListBlock(to_block(child), dim, n, validity)
    if pa.types.is_null(dtype):
        return FixedWidthBlock(np.zeros(0, np.uint8), 0, n)
    if pa.types.is_struct(dtype):
        return StructBlock(tuple(to_block(array.field(i)) for i in range(dtype.num_fields)), n)
    width = fixed_bits(dtype) // 8
    return FixedWidthBlock(_buffer_bytes(buffers[1], off * width, (off + n) * width), width * 8, n)


def from_block(block: DataBlock, dtype: pa.DataType) -> pa.Array:
    """An Arrow array of ``dtype`` (no validity) holding the block's values."""
    if pa.types.is_dictionary(dtype):
        return dictionary.from_values(from_block(block, dtype.value_type), dtype)
    n = block.num_values
    if isinstance(block, VariableWidthBlock):
        if not is_variable_width(dtype):
            raise CorruptFileError("<page>", f"variable-width data for a {dtype} column")
        odt = np.int64 if is_large(dtype) else np.int32
        offsets = np.asarray(block.offsets).astype(odt)
        if len(offsets) != n + 1 or (n and int(offsets[-1]) > len(block.data)):
            raise CorruptFileError("<page>", "variable-width block offsets are inconsistent")
        return pa.Array.from_buffers(
            dtype, n, [None, pa.py_buffer(offsets), pa.py_buffer(np.asarray(block.data))]
        )
    if isinstance(block, FixedSizeListBlock):
        if not pa.types.is_fixed_size_list(dtype):
            raise CorruptFileError("<page>", f"fixed-size-list data for a {dtype} column")
        child = from_block(block.child, dtype.value_type)
        if block.validity is not None and not pa.types.is_null(dtype.value_type):
            child = with_bitmap(child, pa.py_buffer(np.asarray(block.validity)))
        return pa.FixedSizeListArray.from_arrays(child, type=dtype)
    if isinstance(block, StructBlock):
        if not pa.types.is_struct(dtype) or dtype.num_fields != len(block.children):
            raise CorruptFileError("<page>", f"packed struct data for a {dtype} column")
        children = [from_block(c, dtype.field(i).type) for i, c in enumerate(block.children)]
        return pa.StructArray.from_arrays(children, fields=list(dtype))
    if isinstance(block, FixedWidthBlock):
        if pa.types.is_null(dtype):
            return pa.nulls(n)
        if pa.types.is_fixed_size_list(dtype):
            return from_block(_split_fsl(block, dtype), dtype)
        bits = fixed_bits(dtype)
        if block.bits_per_value != bits:
            raise CorruptFileError(
                "<page>", f"{block.bits_per_value}-bit data for a {bits}-bit {dtype} column"
            )
        nbytes = (n * bits + 7) // 8
        data = np.asarray(block.data)[:nbytes]
        if len(data) < nbytes:
            raise CorruptFileError("<page>", "fixed-width block is shorter than its value count")
        return pa.Array.from_buffers(dtype, n, [None, pa.py_buffer(np.ascontiguousarray(data))])
    raise UnsupportedFeatureError(f"cannot turn a {type(block).__name__} into {dtype}")


def with_validity(array: pa.Array, valid: np.ndarray) -> pa.Array:
    """``array`` (any offset, no nulls of its own) with one validity flag per element."""
    if pa.types.is_struct(array.type):
        children = [array.field(i) for i in range(array.type.num_fields)]
        return pa.StructArray.from_arrays(children, fields=list(array.type), mask=pa.array(~valid))
    if pa.types.is_dictionary(array.type):
        indices = with_validity(array.indices, valid)
        return pa.DictionaryArray.from_arrays(indices, array.dictionary, ordered=array.type.ordered)
    if array.offset:
        valid = np.concatenate((np.ones(array.offset, bool), valid))
    return with_bitmap(array, pa.py_buffer(np.packbits(valid, bitorder="little")))


def with_bitmap(array: pa.Array, bitmap: pa.Buffer) -> pa.Array:
    """``array`` (no nulls of its own) with ``bitmap`` as validity, aligned to ``array.offset``."""
    if pa.types.is_fixed_size_list(array.type):
        return pa.FixedSizeListArray.from_buffers(
            array.type, len(array), [bitmap], offset=array.offset, children=[array.values]
        )
    return pa.Array.from_buffers(array.type, len(array), [bitmap, *array.buffers()[1:]], offset=array.offset)


def _split_fsl(block: FixedWidthBlock, dtype: pa.FixedSizeListType) -> FixedSizeListBlock:
    """A flat fixed-width row block seen as FSL rows (no item validity)."""
    dim = dtype.list_size
    inner = dtype.value_type
    items = FixedWidthBlock(block.data, block.bits_per_value // dim, block.num_values * dim)
    child = _split_fsl(items, inner) if pa.types.is_fixed_size_list(inner) else items
    return FixedSizeListBlock(child, dim, block.num_values)


# Up to this many variable-width values are gathered in numpy (Arrow's take is faster beyond).
_SMALL_TAKE = 4096


def take_block(block: DataBlock, indices: np.ndarray) -> DataBlock:
    """Gather values of ``block`` at ``indices`` (dictionary lookup, constant expansion)."""
    indices = np.asarray(indices, dtype=np.int64)
    if len(indices) and (indices.min() < 0 or indices.max() >= block.num_values):
        raise CorruptFileError("<page>", "dictionary index out of range")
    if isinstance(block, VariableWidthBlock) and len(indices) <= _SMALL_TAKE:
        # a few values (an indexed take): their spans cut out in numpy, no Arrow round trip,
        # whose per-call cost dominates at this size
        bounds = np.asarray(block.offsets, np.int64)
        starts = bounds[indices]
        sizes = bounds[indices + 1] - starts
        offsets = np.zeros(len(indices) + 1, np.int64)
        np.cumsum(sizes, out=offsets[1:])
        data = gather_spans(np.asarray(block.data, np.uint8), starts, sizes)
        return VariableWidthBlock(offsets.astype(block.offsets.dtype), data, len(indices))
    if isinstance(block, VariableWidthBlock):
        items = pa.Array.from_buffers(
            pa.large_binary(),
            block.num_values,
            [
                None,
                pa.py_buffer(np.ascontiguousarray(block.offsets, dtype=np.int64)),
                pa.py_buffer(np.ascontiguousarray(block.data, dtype=np.uint8)),
            ],
        )
        taken = items.take(pa.array(indices))
        _, offsets_buf, data_buf = taken.buffers()
        offsets = np.frombuffer(offsets_buf, np.int64)[taken.offset : taken.offset + len(indices) + 1]
        data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
        data = data[int(offsets[0]) : int(offsets[-1])]
        return VariableWidthBlock((offsets - offsets[0]).astype(block.offsets.dtype), data, len(indices))
    if isinstance(block, FixedWidthBlock) and block.bits_per_value % 8 == 0:
        width = block.bits_per_value // 8
        data = np.asarray(block.data)[: block.num_values * width]
        if width in (1, 2, 4, 8):
            # One typed gather (an order of magnitude faster than gathering rows of bytes).
            taken = np.ascontiguousarray(data).view(f"<u{width}").take(indices).view(np.uint8)
            return FixedWidthBlock(taken, block.bits_per_value, len(indices))
        rows = data.reshape(block.num_values, width)
        return FixedWidthBlock(rows[indices].reshape(-1), block.bits_per_value, len(indices))
    if isinstance(block, FixedWidthBlock) and block.bits_per_value == 1:
        bits = np.unpackbits(np.asarray(block.data), bitorder="little")[: block.num_values]
        return FixedWidthBlock(np.packbits(bits[indices], bitorder="little"), 1, len(indices))
    raise UnsupportedFeatureError(f"cannot gather from a {type(block).__name__}")


def concat_blocks(blocks: list[DataBlock]) -> DataBlock:
    """Concatenate blocks of one kind (chunks of a page) into one block."""
    first = blocks[0]
    if len(blocks) == 1:
        return first
    total = sum(b.num_values for b in blocks)
    if isinstance(first, VariableWidthBlock):
        return _concat_variable([_as(b, VariableWidthBlock) for b in blocks], total)
    if isinstance(first, FixedWidthBlock):
        fixed = [_as(b, FixedWidthBlock) for b in blocks]
        bits = first.bits_per_value
        if bits % 8 == 0:
            data = np.concatenate([np.asarray(b.data)[: b.num_values * bits // 8] for b in fixed])
        else:
            data = _concat_bits([np.asarray(b.data) for b in fixed], [b.num_values * bits for b in fixed])
        return FixedWidthBlock(data, bits, total)
    if isinstance(first, FixedSizeListBlock):
        lists = [_as(b, FixedSizeListBlock) for b in blocks]
        child = concat_blocks([b.child for b in lists])
        validity = None
        if any(b.validity is not None for b in lists):
            maps = [
                np.packbits(np.ones(b.num_values * b.dimension, bool), bitorder="little")
                if b.validity is None
                else np.asarray(b.validity)
                for b in lists
            ]
            validity = _concat_bits(maps, [b.num_values * first.dimension for b in lists])
        return FixedSizeListBlock(child, first.dimension, total, validity)
    if isinstance(first, StructBlock):
        structs = [_as(b, StructBlock) for b in blocks]
        children = tuple(concat_blocks([b.children[i] for b in structs]) for i in range(len(first.children)))
        return StructBlock(children, total)
    raise UnsupportedFeatureError(f"cannot concatenate {type(first).__name__} blocks")


def expand_block(block: DataBlock, present: np.ndarray) -> DataBlock:
    """Spread ``block``'s values over the true slots of ``present``; other slots get empty / zero values."""
    n = len(present)
    if block.num_values == n:
        return block
    if isinstance(block, VariableWidthBlock):
        lengths = np.zeros(n, np.int64)
        lengths[present] = block.lengths()
        offsets = np.zeros(n + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        data = np.asarray(block.data)[int(block.offsets[0]) : int(block.offsets[-1])]
        return VariableWidthBlock(offsets.astype(block.offsets.dtype), data, n)
    if isinstance(block, FixedWidthBlock) and block.bits_per_value == 1:
        bits = np.zeros(n, np.uint8)
        bits[present] = np.unpackbits(np.asarray(block.data, np.uint8), bitorder="little")[: block.num_values]
        return FixedWidthBlock(np.packbits(bits, bitorder="little"), 1, n)
    if isinstance(block, FixedWidthBlock) and block.bits_per_value % 8 == 0:
        width = block.bits_per_value // 8
        rows = np.zeros((n, width), np.uint8)
        rows[present] = np.asarray(block.data)[: block.num_values * width].reshape(-1, width)
        return FixedWidthBlock(rows.reshape(-1), block.bits_per_value, n)
    if isinstance(block, StructBlock):
        return StructBlock(tuple(expand_block(c, present) for c in block.children), n)
    raise UnsupportedFeatureError(f"cannot spread a {type(block).__name__} over null slots")


T = TypeVar("T")


def _as(block: DataBlock, kind: type[T]) -> T:
    if not isinstance(block, kind):
        raise CorruptFileError("<page>", "chunks of one page decoded to different block kinds")
    return block


def _concat_variable(blocks: list[VariableWidthBlock], total: int) -> VariableWidthBlock:
    parts = [np.asarray(blocks[0].offsets, dtype=np.int64)]
    base = int(parts[0][-1])
    for b in blocks[1:]:
        offs = np.asarray(b.offsets, dtype=np.int64)
        parts.append(offs[1:] - offs[0] + base)
        base = int(parts[-1][-1]) if len(offs) > 1 else base
    data = np.concatenate([np.asarray(b.data)[int(b.offsets[0]) : int(b.offsets[-1])] for b in blocks])
    wide = any(b.offsets.dtype == np.uint64 for b in blocks) or base >= 2**32
    return VariableWidthBlock(np.concatenate(parts).astype(np.uint64 if wide else np.uint32), data, total)


def all_equal(block: DataBlock) -> bool:
    """Do all values of a (non-empty) fixed- or variable-width block hold the same bytes?"""
    if isinstance(block, VariableWidthBlock):
        lengths = block.lengths()
        if not np.all(lengths == lengths[0]):
            return False
        rows = np.asarray(block.data)[int(block.offsets[0]) : int(block.offsets[-1])]
        return bool(np.all(rows.reshape(block.num_values, -1) == rows.reshape(block.num_values, -1)[0]))
    if isinstance(block, FixedWidthBlock) and block.bits_per_value == 1:
        bits = np.unpackbits(np.asarray(block.data, dtype=np.uint8), bitorder="little")[: block.num_values]
        return bool(np.all(bits == bits[0]))
    if isinstance(block, FixedWidthBlock) and block.bits_per_value % 8 == 0:
        width = block.bits_per_value // 8
        rows = np.asarray(block.data)[: width * block.num_values].reshape(block.num_values, width)
        return bool(np.all(rows == rows[0]))
    return False


def _concat_bits(maps: list[np.ndarray], nbits: list[int]) -> np.ndarray:
    bits = np.concatenate(
        [
            np.unpackbits(m.astype(np.uint8, copy=False), bitorder="little")[:n]
            for m, n in zip(maps, nbits, strict=True)
        ]
    )
    return np.packbits(bits, bitorder="little")


def from_block_empty(dtype: pa.DataType) -> pa.Array:
    """A zero-length array of ``dtype`` (pages or chunk runs without visible values)."""
    return pa.array([], type=dtype)
