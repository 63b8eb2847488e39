"""Constant pages: ``PageLayout.constant_layout`` (spec/encodings-2.1.md §5).

Two forms:

* **all-null** (2.1 and 2.2): no ``inline_value``. A plain nullable leaf stores no
  buffers at all; with structure above the leaf the page holds ``[rep, def]`` (an absent
  stream is a 0-byte buffer). 2.1 stores raw u16 levels; 2.2 may block-compress them
  (``rep_compression``/``def_compression`` with ``num_rep_values``/``num_def_values``).
* **constant value** (2.2 only): every non-null visible value is equal. A fixed-width
  value of at most 32 bytes is ``inline_value`` (the Arrow value buffer of a length-1
  array, e.g. ``07 00 00 00 00 00 00 00`` for int64 7, ``01`` for boolean true); any
  other value is a first page buffer ``u32 n_buffers | n_buffers × u32 length | buffers``
  (``"hello"``: ``02000000 08000000 05000000 | 00000000 05000000 | 68656c6c6f``). Levels
  follow as raw u16 ``[rep, def]`` when the page has any.

Readers tell the forms apart by buffer count: 0 or 2 buffers carry no value buffer, 1 or
3 do.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lance_ops._proto import encodings_v2_1_pb2 as pb
from lance_ops.encoding.api import Fetch, FileVersion
from lance_ops.encoding.data import FixedWidthBlock
from lance_ops.encoding.structural.page import PageReader, register_layout
from lance_ops.encoding.structural.repdef import (
    DecodedLeaf,
    Levels,
    choose_level_codec,
    decode_levels,
    layer_codes,
    raw_levels,
    select_rows,
)
from lance_ops.encoding.structural.values import (
    fixed_bits,
    from_block,
    is_variable_width,
    take_block,
    to_block,
)
from lance_ops.errors import CorruptFileError, UnsupportedEncodingError

MAX_INLINE_BYTES = 32


def _raw(stream: np.ndarray | None) -> bytes:
    return b"" if stream is None else np.asarray(stream, "<u2").tobytes()


def encode_all_null(levels: Levels, version: FileVersion) -> tuple[list[bytes], pb.PageLayout]:
    """An all-null page (no visible value is valid)."""
    layout = pb.ConstantLayout(layers=list(levels.layers))
    if len(levels.layers) <= 1:
        return [], pb.PageLayout(constant_layout=layout)
    buffers = []
    for name, stream in (("rep", levels.rep), ("def", levels.defs)):
        if stream is None or version is FileVersion.V2_1:
            buffers.append(_raw(stream))
            continue
        codec = choose_level_codec(stream, version)
        if codec.kind == "flat":
            buffers.append(_raw(stream))
            continue
        data, desc = codec.compress(stream)
        getattr(layout, f"{name}_compression").CopyFrom(desc)
        setattr(layout, f"num_{name}_values", len(stream))
        buffers.append(data)
    return buffers, pb.PageLayout(constant_layout=layout)


def scalar_buffer(value: pa.Array) -> bytes:
    """The value-buffer form of a length-1 array: counts, lengths, then its Arrow buffers."""
    bufs = [bytes(b) if b is not None else b"" for b in value.buffers()[1:]]
    header = np.array([len(bufs), *(len(b) for b in bufs)], "<u4").tobytes()
    return header + b"".join(bufs)


def encode_constant(
    levels: Levels, value: pa.Array, version: FileVersion
) -> tuple[list[bytes], pb.PageLayout]:
    """A 2.2 constant-value page; ``value`` is a length-1, offset-0, non-null array."""
    if version is FileVersion.V2_1:
        raise UnsupportedEncodingError("Lance 2.1 only accepts the all-null form of constant pages")
    layout = pb.ConstantLayout(layers=list(levels.layers))
    buffers: list[bytes] = []
    dtype = value.type
    if not is_variable_width(dtype) and (fixed_bits(dtype) + 7) // 8 <= MAX_INLINE_BYTES:
        block = to_block(value)
        layout.inline_value = np.asarray(block.data)[: (block.bits_per_value + 7) // 8].tobytes()  # type: ignore[union-attr]
    else:
        buffers.append(scalar_buffer(value))
    if levels.rep is not None or levels.defs is not None:
        buffers += [_raw(levels.rep), _raw(levels.defs)]
    return buffers, pb.PageLayout(constant_layout=layout)


def parse_scalar_buffer(data: memoryview, dtype: pa.DataType) -> pa.Array:
    raw = np.frombuffer(data, np.uint8)
    count = int(np.frombuffer(data, "<u4", count=1)[0])
    lengths = np.frombuffer(data, "<u4", count=count, offset=4).astype(np.int64)
    pos = 4 + 4 * count
    if pos + int(lengths.sum()) > len(raw):
        raise CorruptFileError("<page>", "constant value buffer is truncated")
    bufs = []
    for n in lengths:
        bufs.append(pa.py_buffer(raw[pos : pos + n].tobytes()))
        pos += int(n)
    return pa.Array.from_buffers(dtype, 1, [None, *bufs])


@register_layout("constant_layout")
class ConstantReader(PageReader):
    _leaf: DecodedLeaf | None = None

    def _load(self, fetch: Fetch) -> DecodedLeaf:
        layout = self.info.layout.constant_layout
        n_bufs = len(self.info.buffers)
        has_value_buffer = n_bufs in (1, 3)
        if n_bufs not in (0, 1, 2, 3):
            raise CorruptFileError("<page>", f"constant page with {n_bufs} buffers")
        if self.version is FileVersion.V2_1 and (
            layout.HasField("inline_value")
            or layout.HasField("rep_compression")
            or layout.HasField("def_compression")
        ):
            raise CorruptFileError("<page>", "Lance 2.1 only accepts the all-null form of constant pages")
        data = fetch(list(self.info.buffers)) if n_bufs else []
        layers = tuple(layout.layers)
        rep = defs = None
        if n_bufs >= 2:
            rep = self._stream(data[-2], layout, "rep")
            defs = self._stream(data[-1], layout, "def")
        all_null = not has_value_buffer and not layout.HasField("inline_value")
        if rep is None and defs is None:
            n = self.info.num_rows
            if all_null and layers and layer_codes(layers)[0].null:
                defs = np.full(n, layer_codes(layers)[0].null, np.uint16)
            num_levels = n
        else:
            num_levels = len(rep) if rep is not None else len(defs)  # type: ignore[arg-type]
        levels = Levels(layers, rep, defs, num_levels)
        visible = levels.visible_mask()
        n_visible = num_levels if visible is None else int(np.count_nonzero(visible))
        if all_null:
            values = pa.nulls(n_visible, self.dtype)
        else:
            if has_value_buffer:
                one = to_block(parse_scalar_buffer(data[0], self.dtype))
            else:
                bits = fixed_bits(self.dtype)
                one = FixedWidthBlock(np.frombuffer(layout.inline_value, np.uint8), bits, 1)
            values = from_block(take_block(one, np.zeros(n_visible, np.int64)), self.dtype)
        return DecodedLeaf(levels, values)

    def _stream(self, data: memoryview, layout: pb.ConstantLayout, name: str) -> np.ndarray | None:
        if layout.HasField(f"{name}_compression"):
            count = int(getattr(layout, f"num_{name}_values"))
            return decode_levels(data, getattr(layout, f"{name}_compression"), count)
        if len(data) == 0:
            return None
        return raw_levels(data, len(data) // 2)

    def _read(self, fetch: Fetch, rows: np.ndarray) -> DecodedLeaf:
        if self._leaf is None:
            self._leaf = self._load(fetch)
        return select_rows(self._leaf, rows)
