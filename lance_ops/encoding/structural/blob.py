"""Blob pages (spec/encodings-2.1.md §6), read side.

``BlobLayout { inner_layout, layers }`` wraps a mini-block page of *descriptions*, one per
row: ``PackedStruct([64, 64])`` = ``u64 position | u64 size``. The blob bytes live in
separate buffers elsewhere in the file, addressed by absolute position:

* ``size > 0``: the value is ``[position, position + size)``;
* ``size == 0 and position == 0``: an empty value;
* ``size == 0 and position != 0``: a null, with ``position = (def << 16) | rep``
  (a top-level null is ``0x10000``).

The inner page's layers are always ``[ALL_VALID_ITEM]``; the blob field's own meanings are
``layers``. Only blob columns without list layers are supported (a descriptor per level
cannot carry the repetition of valid values). Writing blobs needs file-level buffers
outside the page and is not supported by this codec.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lance_ops._proto import encodings_v2_1_pb2 as pb
from lance_ops.encoding.api import Fetch, FileVersion, PageInfo
from lance_ops.encoding.data import VariableWidthBlock
from lance_ops.encoding.structural.miniblock import MiniBlockReader
from lance_ops.encoding.structural.page import PageReader, register_layout
from lance_ops.encoding.structural.repdef import DecodedLeaf, Levels, is_list
from lance_ops.encoding.structural.values import from_block
from lance_ops.errors import CorruptFileError, UnsupportedEncodingError

DESCRIPTION_TYPE = pa.struct([("position", pa.uint64()), ("size", pa.uint64())])
LEVEL_SHIFT = 16


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
