"""Full-zip pages (spec/encodings-2.1.md §4), for values of 256 bytes and more.

Buffer 0 zips, level by level, a control word and the level's payload:

* control word ``(rep << bits_def) | def``: absent when ``bits_rep + bits_def == 0``, else
  1, 2 or 4 little-endian bytes for totals up to 8, 16, or more bits;
* fixed payload (``bits_per_value``): ``bits_per_value / 8`` bytes for every *visible*
  level, null or not; invisible levels (null / empty lists) have none;
* variable payload (``bits_per_offset`` 32 or 64): a u32/u64 length and that many bytes
  for visible *valid* levels (``def == 0``), nothing otherwise.

Buffer 1, present iff the page has repetition or a variable payload, is the repetition
index: ``rows + 1`` integers of one width (1/2/4/8 bytes, derived by readers as
``size / (rows + 1)``): the byte offset of each row's first control word, then the length
of buffer 0. Example: nullable ``large_string`` rows ``[null, <81 bytes>]`` give
``01 | 00 51 00 00 00 00 00 00 00 <81 bytes>`` with index ``00 01 5b`` (u8 widths).

Values pass through a *per-value* compressor first (Flat / Variable / FSST / zstd per
value), so each stored value can be located without decompressing its neighbours.
Booleans, the one sub-byte type, are stored a byte per value (0 or 1, ``bits_per_value =
8``) as pylance does, and packed back into a bitmap on read.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lance_ops._proto import encodings_v2_1_pb2 as pb
from lance_ops.encoding.api import Fetch, FileVersion, PageInfo
from lance_ops.encoding.compression.base import Context, decompressor_for, ranges
from lance_ops.encoding.data import DataBlock, FixedWidthBlock, VariableWidthBlock
from lance_ops.encoding.structural.miniblock import runs_of
from lance_ops.encoding.structural.page import PageReader, register_layout
from lance_ops.encoding.structural.repdef import (
    DecodedLeaf,
    Levels,
    max_visible_def,
)
from lance_ops.encoding.structural.values import expand_block, from_block
from lance_ops.errors import CorruptFileError, UnsupportedEncodingError


def control_width(bits_rep: int, bits_def: int) -> int:
    total = bits_rep + bits_def
    return 0 if total == 0 else 1 if total <= 8 else 2 if total <= 16 else 4


def _read_uint(buf: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    """Little-endian unsigned integers of ``width`` bytes at byte positions ``pos``."""
    out = np.zeros(len(pos), np.uint64)
    for k in range(width):
        out |= buf[pos + k].astype(np.uint64) << np.uint64(8 * k)
    return out


def _write_uint(out: np.ndarray, pos: np.ndarray, values: np.ndarray, width: int) -> None:
    v = values.astype(np.uint64)
    for k in range(width):
        out[pos + k] = ((v >> np.uint64(8 * k)) & np.uint64(0xFF)).astype(np.uint8)


def _span_mask(size: int, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Bool mask of ``size`` bytes, true inside every (disjoint) ``[start, start + length)`` span."""
    keep = lengths > 0
    delta = np.zeros(size + 1, np.int8)
    delta[starts[keep]] = 1
    delta[starts[keep] + lengths[keep]] -= 1
    return np.cumsum(delta[:-1], dtype=np.int8) > 0


def _payload_mask(size: int, level_pos: np.ndarray, header_len: np.ndarray) -> np.ndarray:
    """Bool mask of the value bytes of a buffer tiled by levels: all but each level's control
    word and length prefix (``header_len`` bytes at ``level_pos``)."""
    mask = np.ones(size, bool)
    mask[ranges(level_pos, header_len)] = False
    return mask


def byte_aligned(block: DataBlock) -> DataBlock:
    """``block`` ready for per-value compression: a 1-bit (boolean, LSB-first) block is
    widened to one 0/1 byte per value; anything else is returned as is."""
    if not isinstance(block, FixedWidthBlock) or block.bits_per_value != 1:
        return block
    bits = np.unpackbits(np.asarray(block.data, np.uint8), count=block.num_values, bitorder="little")
    return FixedWidthBlock(bits, 8, block.num_values)


def _bytes_as_bools(block: FixedWidthBlock) -> FixedWidthBlock:
    """One byte per boolean (non-zero is true) packed into an LSB-first bitmap."""
    flags = np.asarray(block.data, np.uint8)[: block.num_values] != 0
    return FixedWidthBlock(np.packbits(flags, bitorder="little"), 1, block.num_values)


def index_width(limit: int) -> int:
    """Smallest of 1/2/4/8 bytes whose unsigned range holds ``limit``."""
    for width in (1, 2, 4):
        if limit < 1 << (8 * width):
            return width
    return 8


def encode_page(
    levels: Levels, block: DataBlock, value_encoding: pb.CompressiveEncoding, version: FileVersion
) -> tuple[list[bytes], pb.PageLayout]:
    """Zip levels and (per-value compressed) values into a full-zip page."""
    del version  # the full-zip grammar is the same in 2.1 and 2.2
    bits_rep = levels.max_rep.bit_length()
    bits_def = levels.max_def.bit_length()
    cw = control_width(bits_rep, bits_def)
    n = levels.num_levels
    visible = levels.visible_mask()
    vis = np.ones(n, bool) if visible is None else visible
    defs = np.zeros(n, np.uint16) if levels.defs is None else levels.defs
    layout = pb.FullZipLayout(
        bits_rep=bits_rep,
        bits_def=bits_def,
        num_items=n,
        num_visible_items=int(np.count_nonzero(vis)),
        value_compression=value_encoding,
        layers=list(levels.layers),
    )
    if isinstance(block, VariableWidthBlock):
        lw = block.bits_per_offset // 8
        layout.bits_per_offset = block.bits_per_offset
        offsets = np.asarray(block.offsets, np.int64)
        lengths_all = np.diff(offsets)
        valid_vis = (defs == 0)[vis]
        has_payload = np.zeros(n, bool)
        has_payload[np.flatnonzero(vis)[valid_vis]] = True
        value_len = np.zeros(n, np.int64)
        value_len[has_payload] = lengths_all[valid_vis]
        payload = np.where(has_payload, lw + value_len, 0)
        raw = np.asarray(block.data)
        if bool(valid_vis.all()):
            data = raw[int(offsets[0]) : int(offsets[-1])]
        else:
            data = raw[_span_mask(len(raw), offsets[:-1][valid_vis], lengths_all[valid_vis])]
    elif isinstance(block, FixedWidthBlock):
        if block.bits_per_value % 8:
            raise UnsupportedEncodingError("full-zip fixed-width values must be whole bytes")
        layout.bits_per_value = block.bits_per_value
        lw = 0
        has_payload = vis
        value_len = np.where(vis, block.bits_per_value // 8, 0)
        payload = value_len
        data = np.asarray(block.data)[: block.num_values * block.bits_per_value // 8]
    else:
        raise UnsupportedEncodingError(f"full-zip cannot store a {type(block).__name__}")
    one_value_per_row = levels.rep is None and bool(vis.all())
    if isinstance(block, FixedWidthBlock) and one_value_per_row and block.num_values == n:
        # One control word and one value per row: the page is an n x (cw + value bytes) grid.
        width = block.bits_per_value // 8
        if not cw:
            return [data.tobytes()], pb.PageLayout(full_zip_layout=layout)
        grid = np.empty((n, cw + width), np.uint8)
        word = defs.astype(np.uint64)  # no repetition: the control word is the def level
        for k in range(cw):
            grid[:, k] = (word >> np.uint64(8 * k)).astype(np.uint8)
        grid[:, cw:] = data.reshape(n, width)
        return [grid.tobytes()], pb.PageLayout(full_zip_layout=layout)
    level_size = cw + payload
    starts = np.zeros(n + 1, np.int64)
    np.cumsum(level_size, out=starts[1:])
    total = int(starts[-1])
    out = np.zeros(total, np.uint8)
    if cw:
        rep = np.zeros(n, np.uint64) if levels.rep is None else levels.rep.astype(np.uint64)
        word = (rep << np.uint64(bits_def)) | defs.astype(np.uint64)
        _write_uint(out, starts[:-1], word, cw)
    if lw:
        _write_uint(out, starts[:-1][has_payload] + cw, value_len[has_payload], lw)
    out[_payload_mask(total, starts[:-1], np.where(has_payload, cw + lw, cw))] = data
    buffers = [out.tobytes()]
    if levels.rep is not None or isinstance(block, VariableWidthBlock):
        row_starts = starts[levels.row_starts()]
        index = np.concatenate((row_starts, [total]))
        width = index_width(total)
        buffers.append(index.astype(f"<u{width}").tobytes())
    return buffers, pb.PageLayout(full_zip_layout=layout)


@register_layout("full_zip_layout")
class FullZipReader(PageReader):
    _index: np.ndarray | None = None

    def __init__(self, info: PageInfo, dtype: pa.DataType, version: FileVersion) -> None:
        super().__init__(info, dtype, version)
        layout = self.info.layout.full_zip_layout
        self.layout = layout
        self.layers = tuple(layout.layers)
        self.cw = control_width(layout.bits_rep, layout.bits_def)
        self.variable = layout.WhichOneof("details") == "bits_per_offset"
        self.max_visible = max_visible_def(self.layers) if self.layers else 0
        if self.variable:
            self.lw = int(layout.bits_per_offset) // 8
            if self.lw not in (4, 8):
                raise UnsupportedEncodingError(f"full-zip bits_per_offset {layout.bits_per_offset}")
        else:
            if layout.bits_per_value % 8:
                raise UnsupportedEncodingError("full-zip fixed-width values must be whole bytes")
            self.value_bytes = int(layout.bits_per_value) // 8
        self.decompressor = decompressor_for(Context.PER_VALUE, layout.value_compression)

    def _row_ranges(self, fetch: Fetch, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Byte start / end of each requested row in buffer 0."""
        n_rows = self.info.num_rows
        size = self.info.buffers[0][1]
        if len(self.info.buffers) < 2:
            stride = self.cw + self.value_bytes
            if n_rows * stride > size:
                raise CorruptFileError("<page>", "full-zip rows extend past their buffer")
            return rows * stride, (rows + 1) * stride
        if self._index is None:
            (raw,) = fetch([self.info.buffers[1]])
            if len(raw) % (n_rows + 1):
                raise CorruptFileError(
                    "<page>", "full-zip repetition index size does not match the row count"
                )
            width = len(raw) // (n_rows + 1)
            if width not in (1, 2, 4, 8):
                raise CorruptFileError("<page>", f"full-zip repetition index width {width}")
            index = np.frombuffer(raw, f"<u{width}").astype(np.int64)
            if np.any(np.diff(index) < 0) or index[-1] > size:
                raise CorruptFileError(
                    "<page>", "full-zip repetition index is not increasing within its buffer"
                )
            self._index = index
        return self._index[rows], self._index[rows + 1]

    def _read(self, fetch: Fetch, rows: np.ndarray) -> DecodedLeaf:
        starts, ends = self._row_ranges(fetch, rows)
        base = self.info.buffers[0][0]
        runs = runs_of(rows)
        bounds = np.searchsorted(rows, [a for a, _ in runs])
        ranges = []
        for (a, b), i in zip(runs, bounds, strict=True):
            lo, hi = int(starts[i]), int(ends[i + (b - a) - 1])
            ranges.append((base + lo, hi - lo))
        if not runs:
            return DecodedLeaf(Levels(self.layers, None, None, 0), pa.array([], self.dtype))
        # The runs' bytes back to back: a run's last row ends where the next run begins.
        datas = [np.frombuffer(d, np.uint8) for d in fetch(ranges)]
        buf = datas[0] if len(datas) == 1 else np.concatenate(datas)
        run_base = np.cumsum([0] + [len(d) for d in datas[:-1]])
        if len(self.info.buffers) < 2 and not self.variable and not self.layout.bits_rep and self.value_bytes:
            fixed = self._decode_fixed_stride(buf, len(rows))
            if fixed is not None:
                return fixed
        run_of_row = np.repeat(np.arange(len(runs)), [b - a for a, b in runs])
        rel = run_base[run_of_row] + starts - starts[bounds][run_of_row]
        return self._decode(buf, rel, len(buf))

    def _decode_fixed_stride(self, buf: np.ndarray, n: int) -> DecodedLeaf | None:
        """Rows of fixed-width values without repetition: every row is one control word and one
        value, so the buffer is an ``n x stride`` grid; None when some level has no value (a
        null parent), which the general parser handles."""
        stride = self.cw + self.value_bytes
        if len(buf) != n * stride:
            raise CorruptFileError("<page>", "full-zip rows do not fill their bytes")
        grid = buf.reshape(n, stride)
        defs_arr = None
        if self.cw:
            word = np.zeros(n, np.uint64)
            for k in range(self.cw):
                word |= grid[:, k].astype(np.uint64) << np.uint64(8 * k)
            bits_def = int(self.layout.bits_def)
            if bits_def:
                defs_arr = (word & np.uint64((1 << bits_def) - 1)).astype(np.uint16)
                if int(defs_arr.max(initial=0)) > self.max_visible:
                    return None
            data = np.ascontiguousarray(grid[:, self.cw :]).reshape(-1)
        else:
            data = buf
        block = self.decompressor.decompress(FixedWidthBlock(data, self.value_bytes * 8, n))
        if pa.types.is_boolean(self.dtype) and isinstance(block, FixedWidthBlock):
            block = _bytes_as_bools(block) if block.bits_per_value == 8 else block
        return DecodedLeaf(Levels(self.layers, None, defs_arr, n), from_block(block, self.dtype))

    def _decode(self, buf: np.ndarray, row_starts: np.ndarray, size: int) -> DecodedLeaf:
        """Parse whole rows: scan all rows in parallel, one level per row per step."""
        bits_def = int(self.layout.bits_def)
        row_ends = np.concatenate((row_starts[1:], [size]))
        ptr = row_starts.copy()
        pos_parts, word_parts, head_len, pay_len = [], [], [], []
        active = np.flatnonzero(ptr < row_ends)
        while len(active):
            p = ptr[active]
            word = _read_uint(buf, p, self.cw) if self.cw else np.zeros(len(p), np.uint64)
            defs = (word & np.uint64((1 << bits_def) - 1)).astype(np.int64)
            visible = defs <= self.max_visible
            if self.variable:
                has = visible & (defs == 0)
                length = np.zeros(len(p), np.int64)
                length[has] = _read_uint(buf, p[has] + self.cw, self.lw).astype(np.int64)
                start = p + self.cw + self.lw
                step = self.cw + np.where(has, self.lw + length, 0)
            else:
                has = visible
                length = np.where(visible, self.value_bytes, 0)
                start = p + self.cw
                step = self.cw + length
            pos_parts.append(p)
            word_parts.append(word)
            head_len.append(np.where(has, start - p, self.cw))
            pay_len.append(np.where(has, length, 0))
            if np.any(step <= 0):
                raise CorruptFileError("<page>", "full-zip level without bytes")
            ptr[active] = p + step
            if np.any(ptr[active] > row_ends[active]):
                raise CorruptFileError("<page>", "full-zip level runs past its row")
            active = active[ptr[active] < row_ends[active]]
        pos = np.concatenate(pos_parts) if pos_parts else np.zeros(0, np.int64)
        order = np.argsort(pos, kind="stable")
        pos = pos[order]
        word = np.concatenate(word_parts)[order] if pos_parts else np.zeros(0, np.uint64)
        p_head = np.concatenate(head_len)[order] if pos_parts else np.zeros(0, np.int64)
        p_len = np.concatenate(pay_len)[order] if pos_parts else np.zeros(0, np.int64)
        n = len(word)
        rep = (word >> np.uint64(bits_def)).astype(np.uint16) if self.layout.bits_rep else None
        defs_arr = (word & np.uint64((1 << bits_def) - 1)).astype(np.uint16) if bits_def else None
        levels = Levels(self.layers, rep, defs_arr, n)
        vis_mask = levels.visible_mask()
        vis_idx = np.arange(n) if vis_mask is None else np.flatnonzero(vis_mask)
        if self.variable:
            # Only valid visible levels carry a stored value; nulls become empty values.
            lengths = p_len[vis_idx]
            has = np.ones(len(vis_idx), bool) if defs_arr is None else defs_arr[vis_idx] == 0
            stored_offsets = np.zeros(int(np.count_nonzero(has)) + 1, np.int64)
            np.cumsum(lengths[has], out=stored_offsets[1:])
            data = buf[_payload_mask(size, pos, p_head)]
            odt = np.uint64 if self.lw == 8 else np.uint32
            stored = VariableWidthBlock(stored_offsets.astype(odt), data, len(stored_offsets) - 1)
            block = expand_block(self.decompressor.decompress(stored), has)
        else:
            data = buf[_payload_mask(size, pos, p_head)]
            block = self.decompressor.decompress(FixedWidthBlock(data, self.value_bytes * 8, len(vis_idx)))
            if (
                pa.types.is_boolean(self.dtype)
                and isinstance(block, FixedWidthBlock)
                and block.bits_per_value == 8
            ):
                block = _bytes_as_bools(block)
        values = from_block(block, self.dtype)
        return DecodedLeaf(levels, values)
