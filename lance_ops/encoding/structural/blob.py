"""Blob pages (spec/encodings-2.1.md §6): ``large_binary`` fields with ``lance-encoding:blob``.

``BlobLayout { inner_layout, layers }`` wraps a mini-block page of *descriptions*, one per
row: ``PackedStruct([64, 64])`` = ``u64 position | u64 size``. The blob bytes live in
separate buffers elsewhere in the file, addressed by absolute position:

* ``size > 0``: the value is ``[position, position + size)``;
* ``size == 0 and position == 0``: an empty value;
* ``size == 0 and position != 0``: a null, with ``position = (def << 16) | rep``
  (a top-level null is ``0x10000``).

The inner page's layers are always ``[ALL_VALID_ITEM]``; the blob field's own meanings are
``layers``. Only blob columns without list layers are supported (a descriptor per level
cannot carry the repetition of valid values).

Writing hands every non-empty value, in row order, to the file layer's
:data:`~lance_ops.encoding.api.WriteExternal` (which stores each as its own 64-byte aligned
buffer ahead of the page, as pylance 14 does) and builds the descriptions from the positions
it returns. Example, rows ``[b"abc", None, b""]`` with ``abc`` stored at byte 0::

    position: 0  0x10000  0        size: 3  0  0

Every page of a blob field is a blob page, all-null and all-empty ones included. Reading
fetches only the blobs of the requested rows.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lance_ops._proto import encodings_v2_1_pb2 as pb
from lance_ops.encoding.api import EncodedPage, Fetch, FileVersion, PageInfo, WriteExternal
from lance_ops.encoding.compression.packed_struct import PackedStructCompressor
from lance_ops.encoding.data import FixedWidthBlock, StructBlock, VariableWidthBlock
from lance_ops.encoding.structural import miniblock
from lance_ops.encoding.structural.miniblock import MiniBlockReader
from lance_ops.encoding.structural.page import PageReader, register_layout
from lance_ops.encoding.structural.repdef import ALL_VALID_ITEM, DecodedLeaf, Levels, ShreddedLeaf, is_list
from lance_ops.encoding.structural.values import from_block, to_block
from lance_ops.errors import CorruptFileError, SchemaError, UnsupportedEncodingError, UnsupportedFeatureError

DESCRIPTION_TYPE = pa.struct([("position", pa.uint64()), ("size", pa.uint64())])
LEVEL_SHIFT = 16


def check_blob_type(name: str, dtype: pa.DataType) -> None:
    """Blob fields must be ``large_binary`` (pylance 14 rejects ``binary`` too)."""
    if not pa.types.is_large_binary(dtype):
        raise SchemaError(f"blob field {name!r} must be large_binary, not {dtype}")


def encode_page(leaf: ShreddedLeaf, version: FileVersion, external: WriteExternal | None) -> EncodedPage:
    """Store the page's non-empty values through ``external`` and describe every row."""
    levels = leaf.levels
    if external is None:
        raise UnsupportedFeatureError("blob columns can only be written by a file writer")
    if levels.rep is not None or any(is_list(layer) for layer in levels.layers):
        raise UnsupportedFeatureError("blob columns inside lists are not supported")
    block = to_block(leaf.values)
    if not isinstance(block, VariableWidthBlock):
        raise SchemaError(f"blob values must be large_binary, not {leaf.values.type}")
    null = np.zeros(block.num_values, bool) if levels.defs is None else levels.defs != 0
    size = np.where(null, 0, block.lengths()).astype(np.uint64)
    position = np.zeros(block.num_values, np.uint64)
    if levels.defs is not None:
        position[null] = levels.defs[null].astype(np.uint64) << np.uint64(LEVEL_SHIFT)
    stored = np.flatnonzero(size)
    if len(stored):
        data = np.ascontiguousarray(block.data).data
        starts = block.offsets[stored].tolist()
        ends = block.offsets[stored + 1].tolist()
        position[stored] = external([data[a:b] for a, b in zip(starts, ends, strict=True)])
    descriptions = StructBlock(
        (FixedWidthBlock.from_values(position), FixedWidthBlock.from_values(size)), block.num_values
    )
    compressed, desc = PackedStructCompressor().compress(descriptions)
    flat_levels = Levels((ALL_VALID_ITEM,), None, None, block.num_values)
    buffers, inner = miniblock.encode_page(flat_levels, compressed, desc, version)
    layout = pb.PageLayout(blob_layout=pb.BlobLayout(inner_layout=inner, layers=list(levels.layers)))
    return EncodedPage(tuple(buffers), layout, leaf.num_rows)


@register_layout("blob_layout")
class BlobReader(PageReader):
    def __init__(self, info: PageInfo, dtype: pa.DataType, version: FileVersion) -> None:
        super().__init__(info, dtype, version)
        blob: pb.BlobLayout = info.layout.blob_layout
        if blob.inner_layout.WhichOneof("layout") != "mini_block_layout":
            raise UnsupportedEncodingError("blob descriptions must be a mini-block page")
        self.layers = tuple(blob.layers)
        if any(is_list(layer) for layer in self.layers):
            raise UnsupportedEncodingError("blob columns inside lists are not supported")
        inner = PageInfo(blob.inner_layout, info.buffers, info.num_rows, info.first_row)
        self.descriptions = MiniBlockReader(inner, DESCRIPTION_TYPE, version)

    def _read(self, fetch: Fetch, rows: np.ndarray) -> DecodedLeaf:
        described = self.descriptions.read(fetch, rows).values
        position = np.asarray(described.field("position").to_numpy(zero_copy_only=False), np.int64)
        size = np.asarray(described.field("size").to_numpy(zero_copy_only=False), np.int64)
        null = (size == 0) & (position != 0)
        defs = None
        if null.any():
            defs = np.where(null, position >> LEVEL_SHIFT, 0).astype(np.uint16)
        stored = np.flatnonzero(size > 0)
        pieces = fetch([(int(position[i]), int(size[i])) for i in stored]) if len(stored) else []
        if any(len(p) != size[i] for p, i in zip(pieces, stored, strict=True)):
            raise CorruptFileError("<page>", "blob extends past the end of the file")
        offsets = np.zeros(len(size) + 1, np.int64)
        np.cumsum(np.where(null, 0, size), out=offsets[1:])
        data = np.frombuffer(b"".join(pieces), np.uint8)
        values = from_block(VariableWidthBlock(offsets.astype(np.uint64), data, len(size)), self.dtype)
        return DecodedLeaf(Levels(self.layers, None, defs, len(size)), values)
