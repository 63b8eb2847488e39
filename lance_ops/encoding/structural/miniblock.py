"""Mini-block pages (spec/encodings-2.1.md §3).

Page buffers: 0 = one metadata word per chunk, 1 = the chunks back to back, then the
dictionary (iff ``dictionary`` is set) and the repetition index (iff
``repetition_index_depth > 0``).

Metadata word (u16 in 2.1, u32 in 2.2 with ``has_large_chunk = true``)::

    bits 0..3  log2(values in the chunk), 0 for the last chunk
    bits 4..   chunk bytes / 8 - 1

Chunk::

    u16 num_levels | u16 rep_size (iff rep) | u16 def_size (iff def)
    | u16 (2.1) or u32 (2.2) size of each value buffer | 0xFE pad to 8
    | rep bytes, pad | def bytes, pad | value buffer 0, pad | ...

e.g. a 2.1 chunk of 1 024 bit-packed int32 values at width 10 starts
``00 00 | 04 05 | fe fe fe fe | 0a 00 00 00 ...`` and its metadata word is ``0x0a1a``.

Levels follow the values (§3.4): a non-last chunk holds every level up to and including
the level of its last visible item. The repetition index (§3.5) holds, per chunk, the
number of rows whose last level lies in it and the number of trailing levels of a row
that continues into the next chunk; random access uses it to fetch only the chunks of
the requested rows.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lance_ops._proto import encodings_v2_1_pb2 as pb
from lance_ops.encoding.api import Fetch, FileVersion
from lance_ops.encoding.compression import dictionary
from lance_ops.encoding.compression.base import (
    ChunkSpans,
    Context,
    MiniBlockCompressed,
    as_u8,
    chunk_arrays,
    decompressor_for,
    ranges,
)
from lance_ops.encoding.data import DataBlock, FixedWidthBlock
from lance_ops.encoding.kernels import copy_spans
from lance_ops.encoding.structural.page import PageReader, register_layout
from lance_ops.encoding.structural.repdef import (
    DecodedLeaf,
    LevelCodec,
    Levels,
    choose_level_codec,
    concat_leaves,
    decode_levels,
    select_rows,
    slice_rows,
)
from lance_ops.encoding.structural.values import concat_blocks, from_block, from_block_empty, take_block
from lance_ops.errors import CorruptFileError, UnsupportedEncodingError

PAD_BYTE = 0xFE
ALIGN = 8
MAX_CHUNK_BYTES_V21 = 32768  # 12-bit word count
MAX_BUFFER_BYTES_V21 = 0xFFFF  # u16 buffer size field
MAX_LEVEL_BYTES = 0xFFFF  # u16 level sizes / counts (both versions)
# A take reads flat mini-block pages with at most this many chunk bytes whole (with their chunk
# tables, many pages parsed at once) rather than looking up each page's needed chunks.
TAKE_WHOLE_PAGE_BYTES = 64 * 1024
_WHOLE_STRETCH = 4  # read all chunks from the first to the last needed one if at most this × needed bytes


def _pad(n: int) -> int:
    return -n % ALIGN


@dataclass(frozen=True)
class Dictionary:
    """An encoded dictionary for page buffer 2."""

    data: bytes
    encoding: pb.CompressiveEncoding
    num_items: int


def chunk_value_counts(words: np.ndarray, num_items: int) -> np.ndarray:
    counts = np.left_shift(1, (words & 0xF).astype(np.int64))
    if len(counts):
        counts[-1] = num_items - int(counts[:-1].sum())
        if counts[-1] < 0:
            raise CorruptFileError("<page>", "mini-block chunk counts exceed num_items")
    return counts


def _level_bounds(levels: Levels, counts: np.ndarray) -> np.ndarray:
    """Level index where each chunk ends (exclusive), per §3.4."""
    visible = levels.visible_mask()
    ends = np.cumsum(counts)
    if visible is None:
        bounds = ends.copy()
    else:
        pos = np.flatnonzero(visible)
        bounds = np.where(ends > 0, pos[np.maximum(ends - 1, 0)] + 1, 0) if len(pos) else np.zeros_like(ends)
    if len(bounds):
        bounds[-1] = levels.num_levels
    return bounds


def _padded(sizes: np.ndarray) -> np.ndarray:
    return sizes + (-sizes % ALIGN)


def _assemble_chunks(
    compressed: MiniBlockCompressed,
    level_counts: np.ndarray | None,
    level_data: dict[str, ChunkSpans],
    large: bool,
) -> tuple[bytes, memoryview]:
    """The metadata words and the chunks back to back (layout in the module docstring).

    Every chunk's header has the same shape, so headers are written as one (chunks × fields)
    array and every part lands at an offset computed for all chunks at once; the level slices
    and value buffers are copied to their offsets by one compiled pass per stream.
    """
    n = len(compressed.chunks)
    value_sizes, logs = chunk_arrays(compressed.chunks, len(compressed.buffers))
    level_sizes = np.zeros((n, len(level_data)), np.int64)
    for column, spans in enumerate(level_data.values()):
        level_sizes[:, column] = spans.sizes
    if not large and np.any(value_sizes > MAX_BUFFER_BYTES_V21):
        raise UnsupportedEncodingError("a 2.1 mini-block buffer cannot exceed 65 535 bytes")
    size_dtype = np.dtype("<u4" if large else "<u2")
    head = np.zeros((n, 1 + len(level_data)), "<u2")
    head[:, 0] = 0 if level_counts is None else level_counts
    head[:, 1:] = level_sizes
    header = np.concatenate(
        [head.view(np.uint8).reshape(n, -1), value_sizes.astype(size_dtype).view(np.uint8).reshape(n, -1)],
        axis=1,
    )
    part_sizes = np.concatenate([level_sizes, value_sizes], axis=1)
    header_width = header.shape[1] + _pad(header.shape[1])
    widths = np.concatenate([np.full((n, 1), header_width), _padded(part_sizes)], axis=1)
    chunk_sizes = widths.sum(axis=1)
    if not large and np.any(chunk_sizes > MAX_CHUNK_BYTES_V21):
        raise UnsupportedEncodingError(
            f"a 2.1 mini-block chunk cannot exceed 32 KiB ({int(chunk_sizes.max())} bytes)"
        )
    part_starts = (np.cumsum(chunk_sizes) - chunk_sizes)[:, None] + np.cumsum(widths, axis=1) - widths
    out = np.full(int(chunk_sizes.sum()), PAD_BYTE, np.uint8)
    out[(part_starts[:, :1] + np.arange(header.shape[1])).reshape(-1)] = header.reshape(-1)
    for column, spans in enumerate(level_data.values(), start=1):
        copy_spans(out, part_starts[:, column], as_u8(spans.blob), spans.starts, spans.sizes)
    for i, buffer in enumerate(compressed.buffers):
        column = 1 + len(level_data) + i
        sizes = value_sizes[:, i]
        copy_spans(out, part_starts[:, column], as_u8(buffer), np.cumsum(sizes) - sizes, sizes)
    words = ((chunk_sizes // ALIGN - 1) << 4) | logs
    return words.astype("<u4" if large else "<u2").tobytes(), out.data  # a view of the chunks: no copy


def repetition_index(rep: np.ndarray, max_rep: int, bounds: np.ndarray) -> np.ndarray:
    """``(rows, partial)`` u64 pairs per chunk, §3.5.

    ``rows`` counts the rows that start after a chunk's first level (plus the one the next chunk
    finishes when a row ends exactly at the chunk boundary), ``partial`` the levels after the
    chunk's last row start, which belong to a row continuing into the next chunk.
    """
    bounds = np.asarray(bounds, np.int64)
    n_chunks = len(bounds)
    starts = np.concatenate(([0], bounds[:-1])).astype(np.int64)
    is_start = rep == max_rep
    row_starts = np.flatnonzero(is_start)  # counts and last starts by binary search over these
    rows = np.maximum(
        np.searchsorted(row_starts, bounds) - np.searchsorted(row_starts, np.minimum(starts + 1, bounds)), 0
    )
    before = np.searchsorted(row_starts, np.maximum(bounds - 1, 0), side="right") - 1
    last = (
        np.where(before >= 0, row_starts[np.maximum(before, 0)], -1)
        if len(row_starts)
        else np.full(n_chunks, -1)
    )
    hit = (bounds > starts) & (last >= starts)
    partial = np.where(hit, bounds - last, bounds - starts)
    if n_chunks:
        rows[-1] += 1
        partial[-1] = 0
    following = np.zeros(n_chunks, bool)
    inside = starts[1:] < len(rep)
    following[:-1][inside] = is_start[starts[1:][inside]]
    closes = (partial > 0) & following
    rows[closes] += 1
    partial[closes] = 0
    return np.stack([rows, partial], axis=1).astype(np.uint64).reshape(-1)


def encode_page(
    levels: Levels,
    compressed: MiniBlockCompressed,
    value_encoding: pb.CompressiveEncoding,
    version: FileVersion,
    dictionary: Dictionary | None = None,
) -> tuple[list[bytes | memoryview], pb.PageLayout]:
    """Assemble a mini-block page from compressed values and the page's levels."""
    if not compressed.chunks:
        raise UnsupportedEncodingError("a mini-block page needs at least one value")
    large = version is not FileVersion.V2_1
    counts = np.left_shift(1, chunk_arrays(compressed.chunks, len(compressed.buffers))[1])
    if len(counts):
        counts[-1] = compressed.num_values - int(counts[:-1].sum())
    bounds = _level_bounds(levels, counts)
    level_starts = np.concatenate(([0], bounds[:-1]))
    codecs: dict[str, LevelCodec] = {}
    for name, stream in (("rep", levels.rep), ("def", levels.defs)):
        if stream is not None:
            codecs[name] = choose_level_codec(stream, version)
    num_buffers = len(compressed.buffers)
    descs: dict[str, pb.CompressiveEncoding] = {}
    if codecs and int((bounds - level_starts).max()) > MAX_LEVEL_BYTES:
        raise UnsupportedEncodingError(
            f"a mini-block chunk cannot hold {int((bounds - level_starts).max())} levels"
        )
    level_data: dict[str, ChunkSpans] = {}
    for name, stream in (("rep", levels.rep), ("def", levels.defs)):
        if stream is not None:
            level_data[name], desc = codecs[name].compress_slices(stream, level_starts, bounds)
            if desc is not None:
                descs[name] = desc
            if len(level_data[name]) and int(level_data[name].sizes.max()) > MAX_LEVEL_BYTES:
                raise UnsupportedEncodingError(f"{name} levels of a chunk exceed 65 535 bytes")
    meta, blob = _assemble_chunks(compressed, bounds - level_starts if codecs else None, level_data, large)
    buffers: list[bytes | memoryview] = [meta, blob]
    layout = pb.MiniBlockLayout(
        value_compression=value_encoding,
        layers=list(levels.layers),
        num_buffers=num_buffers,
        num_items=compressed.num_values,
        has_large_chunk=large,
    )
    for name, desc in descs.items():
        getattr(layout, f"{name}_compression").CopyFrom(desc)
    if dictionary is not None:
        layout.dictionary.CopyFrom(dictionary.encoding)
        layout.num_dictionary_items = dictionary.num_items
        buffers.append(dictionary.data)
    if levels.rep is not None:
        layout.repetition_index_depth = 1
        buffers.append(repetition_index(levels.rep, levels.max_rep, bounds).astype("<u8").tobytes())
    return buffers, pb.PageLayout(mini_block_layout=layout)


@dataclass(frozen=True)
class DecodedChunks:
    """Levels and values of some chunks decoded back to back, and each chunk's level count."""

    levels: Levels
    values: DataBlock | None
    level_counts: np.ndarray


class MiniBlockPage:
    """Search-cache state of one mini-block page: chunk table, dictionary, repetition index."""

    def __init__(
        self,
        layout: pb.MiniBlockLayout,
        meta: memoryview,
        dictionary: memoryview | None,
        rep_index: memoryview | None,
        dtype: pa.DataType,
    ) -> None:
        self.layout = layout
        self.large = layout.has_large_chunk
        words = np.frombuffer(meta, "<u4" if self.large else "<u2").astype(np.int64)
        self.sizes = ((words >> 4) + 1) * ALIGN
        self.offsets = np.concatenate(([0], np.cumsum(self.sizes)))
        self.counts = chunk_value_counts(words, int(layout.num_items))
        # Cumulative value counts (each chunk's end), for locating rows without a per-call cumsum.
        self.count_ends = np.cumsum(self.counts)
        self.layers = tuple(layout.layers)
        self.has_rep = layout.HasField("rep_compression")
        self.has_def = layout.HasField("def_compression")
        # Chunk header shape (§3.3), the same for every chunk of the page.
        self.size_width = 4 if self.large else 2
        self.level_streams = [name for name, has in (("rep", self.has_rep), ("def", self.has_def)) if has]
        self.num_buffers = int(layout.num_buffers)
        self.head_fixed = 2 * (1 + len(self.level_streams))
        head_len = self.head_fixed + self.size_width * self.num_buffers
        self.head_len = head_len + _pad(head_len)
        self.head_span = np.arange(self.head_len)
        self.values = decompressor_for(Context.MINIBLOCK, layout.value_compression)
        self._level_decoders: dict[str, object] = {}
        self.dictionary: DataBlock | None = None
        # A dictionary-typed column keeps the keys: its values are a dictionary array over ``items``.
        self.items: pa.Array | None = None
        if layout.HasField("dictionary"):
            if dictionary is None:
                raise CorruptFileError("<page>", "dictionary page without a dictionary buffer")
            dec = decompressor_for(Context.BLOCK, layout.dictionary)
            self.dictionary = dec.decompress(dictionary, int(layout.num_dictionary_items))
            if pa.types.is_dictionary(dtype):
                self.items = from_block(self.dictionary, dtype.value_type)
        self.rep_index: np.ndarray | None = None
        if layout.repetition_index_depth > 0:
            if rep_index is None:
                raise CorruptFileError("<page>", "list page without a repetition index")
            depth = int(layout.repetition_index_depth) + 1
            idx = np.frombuffer(rep_index, "<u8").astype(np.int64).reshape(-1, depth)
            if len(idx) != len(words):
                raise CorruptFileError("<page>", "repetition index does not match the chunk count")
            self.rep_index = idx[:, [0, depth - 1]]

    @property
    def num_chunks(self) -> int:
        return len(self.sizes)

    def decode_chunks(
        self,
        blob: np.ndarray,
        starts: np.ndarray,
        chunk_ids: np.ndarray,
        select: np.ndarray | None = None,
        pick: Callable[[Levels, np.ndarray], tuple[Levels, np.ndarray]] | None = None,
    ) -> DecodedChunks:
        """Decode the chunks ``chunk_ids`` whose bytes begin at ``starts`` in ``blob`` (§3.3).

        Chunk headers are parsed for all chunks at once; each level stream and the values are
        decoded in one call over all chunks when the scheme offers ``decompress_chunks``.
        ``select`` (pages without repetition only) keeps just those level positions, before
        dictionary indices are looked up; schemes offering ``decompress_chunks_at`` decode only
        those positions. ``pick`` (pages with repetition) maps all decoded levels and each
        chunk's level count to the levels to keep and the positions of the values they own; only
        those values are decoded when the scheme allows.
        """
        counts = self.counts[chunk_ids]
        ends = starts + self.sizes[chunk_ids]
        if len(starts) and int(ends[-1]) > len(blob):
            raise CorruptFileError("<page>", "mini-block chunk is truncated")
        size_width = self.size_width
        n_level_streams = len(self.level_streams)
        num_buffers = self.num_buffers
        fixed = self.head_fixed
        head_len = self.head_len
        if len(starts) and bool((ends - starts < head_len).any()):
            raise CorruptFileError("<page>", "mini-block chunk is truncated")
        head = blob[starts[:, None] + self.head_span]
        shorts = np.ascontiguousarray(head[:, :fixed]).view("<u2").astype(np.int64)
        sizes = (
            np.ascontiguousarray(head[:, fixed : fixed + size_width * num_buffers])
            .view(f"<u{size_width}")
            .astype(np.int64)
        )
        num_levels = shorts[:, 0] if n_level_streams else counts
        pos = starts + head_len
        streams: dict[str, np.ndarray] = {}
        for col, name in enumerate(self.level_streams, start=1):
            size = shorts[:, col]
            streams[name] = self._levels(name, _views(blob, pos, size, ends), num_levels, select)
            pos = pos + size + (-size % ALIGN)
        bufs = []
        for i in range(num_buffers):
            bufs.append(_views(blob, pos, sizes[:, i], ends))
            pos = pos + sizes[:, i] + (-sizes[:, i] % ALIGN)
        total = int(num_levels.sum()) if select is None else len(select)
        levels = Levels(self.layers, streams.get("rep"), streams.get("def"), total)
        if pick is not None:
            levels, select = pick(levels, num_levels)
        values: DataBlock | None
        batched = getattr(self.values, "decompress_chunks", None)
        picked = getattr(self.values, "decompress_chunks_at", None)
        count_list = counts.tolist()
        if not any(count_list):
            values = None
        elif select is not None and picked is not None and num_buffers == 1:
            values = picked(bufs[0], count_list, select)
            select = None
        elif batched is not None and num_buffers == 1:
            values = batched(bufs[0], count_list)
        else:
            per_chunk = zip(*bufs, strict=True) if bufs else ([] for _ in count_list)
            blocks = [
                self.values.decompress(list(b), c) for b, c in zip(per_chunk, count_list, strict=True) if c
            ]
            values = concat_blocks(blocks)
        if select is not None and values is not None:
            values = take_block(values, select)
        if values is not None and self.dictionary is not None and self.items is None:
            values = take_block(self.dictionary, _indices(values))
        return DecodedChunks(levels, values, num_levels)

    def _levels(
        self, name: str, views: ChunkSpans, num_levels: np.ndarray, select: np.ndarray | None
    ) -> np.ndarray:
        """One level stream of many chunks, decoded and concatenated (u16); only the positions
        ``select`` when given."""
        desc = self.layout.rep_compression if name == "rep" else self.layout.def_compression
        dec = self._level_decoders.get(name)
        if dec is None:
            dec = self._level_decoders[name] = decompressor_for(Context.BLOCK, desc)
        batched = getattr(dec, "decompress_chunks", None)
        picked = getattr(dec, "decompress_chunks_at", None)
        counts = num_levels.tolist()
        if select is not None and picked is not None:
            return _u16_levels(picked(views, counts, select))
        if batched is not None:
            levels = _u16_levels(batched(views, counts))
        else:
            parts = [decode_levels(v, desc, n) for v, n in zip(views, counts, strict=True)]
            levels = np.concatenate(parts) if parts else np.zeros(0, np.uint16)
        return levels if select is None else levels[select]

    def flat_chunks_for_rows(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Chunks to read for page-relative ``rows`` of a page without repetition (one level
        per row): the sorted chunk indices, and each row's level position within those chunks
        decoded back to back."""
        ends = self.count_ends
        if len(rows) == 0:
            return np.zeros(0, np.int64), rows
        if len(ends) == 1:
            # One chunk (small pages): every row is in it, at its own position.
            if rows[-1] >= ends[0]:
                raise CorruptFileError("<page>", "requested rows lie beyond the page's chunks")
            return np.zeros(1, np.int64), rows.copy()
        if rows[-1] - rows[0] + 1 == len(rows):
            a, b = np.searchsorted(ends, [rows[0], rows[-1]], side="right")
            needed = np.arange(a, b + 1)
            if b >= self.num_chunks:
                raise CorruptFileError("<page>", "requested rows lie beyond the page's chunks")
            return needed, rows - int(ends[a] - self.counts[a])
        row_chunk = np.searchsorted(ends, rows, side="right")
        needed = row_chunk[np.concatenate(([True], row_chunk[1:] != row_chunk[:-1]))]
        if needed[-1] >= self.num_chunks:
            raise CorruptFileError("<page>", "requested rows lie beyond the page's chunks")
        decoded_first = np.cumsum(self.counts[needed]) - self.counts[needed]
        slot = np.searchsorted(needed, row_chunk)
        return needed, decoded_first[slot] + rows - (ends - self.counts)[row_chunk]

    def chunks_for_rows(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Chunks to read for page-relative ``rows`` (sorted, unique) of a page with a
        repetition index.

        Returns ``(needed, first_row)``: ``needed`` is a sorted array of chunk indices and
        ``first_row[c]`` the number of the first row that *starts* in chunk ``c`` (after the
        tail of a row begun in an earlier chunk).
        """
        assert self.rep_index is not None
        n_rows, partial = self.rep_index[:, 0], self.rep_index[:, 1]
        cum = np.cumsum(n_rows)
        before = cum - n_rows
        carried = np.concatenate(([False], partial[:-1] > 0))
        first_row = before + carried
        if len(rows) > 1 and int(rows[-1] - rows[0]) + 1 == len(rows):
            # A range of rows (scans): the chunks from the first row's end chunk (and the chunks
            # holding its earlier levels) to the last row's end chunk; no per-row search.
            first, last = np.searchsorted(cum, [rows[0], rows[-1]], side="right").tolist()
            if last >= self.num_chunks:
                raise CorruptFileError("<page>", "requested rows lie beyond the page's chunks")
            s = first
            while s > 0 and partial[s - 1] > 0:
                s -= 1
                if n_rows[s] > 0:
                    break
            return np.arange(s, last + 1, dtype=np.int64), first_row
        row_chunk = np.searchsorted(cum, rows, side="right")
        if len(rows) and row_chunk[-1] >= self.num_chunks:
            raise CorruptFileError("<page>", "requested rows lie beyond the page's chunks")
        end_chunks = row_chunk[np.concatenate(([True], row_chunk[1:] != row_chunk[:-1]))]
        wanted = np.zeros(self.num_chunks, bool)
        wanted[end_chunks] = True
        # Walk back from an end chunk over chunks holding earlier levels of its first row; a
        # walk stops at a chunk where a row ends, so none starts beside another end chunk.
        walks = end_chunks[end_chunks > 0]
        walks = walks[(partial[walks - 1] > 0) & ~wanted[walks - 1]]
        for e in walks.tolist():
            s = int(e)
            while s > 0 and partial[s - 1] > 0:
                s -= 1
                wanted[s] = True
                if n_rows[s] > 0:
                    break
        return np.flatnonzero(wanted), first_row


def _rows_in_runs(
    leaf: DecodedLeaf, level_counts: np.ndarray, needed: np.ndarray, first_row: np.ndarray, rows: np.ndarray
) -> DecodedLeaf:
    """The page-relative ``rows`` (sorted, unique) of ``leaf``, which holds the chunks ``needed``
    (sorted, with gaps) decoded back to back with ``level_counts`` levels each; ``first_row[c]``
    is the page row of the first row that starts in chunk ``c``."""
    lv = leaf.levels
    if len(needed) == int(needed[-1] - needed[0]) + 1 and int(rows[-1] - rows[0]) + 1 == len(rows):
        # One run of chunks and a range of rows: drop the leading partial row, then slice.
        starts = lv.row_starts()
        if len(starts) and starts[0] > 0:
            skip = int(starts[0])
            visible = lv.visible_mask()
            shown = skip if visible is None else int(np.count_nonzero(visible[:skip]))
            leaf = DecodedLeaf(lv.slice(skip, lv.num_levels), leaf.values.slice(shown))
        return select_rows(leaf, rows - int(first_row[needed[0]]))
    picked, value_idx = _row_levels(lv, level_counts, needed, first_row, rows)
    return DecodedLeaf(picked, leaf.values.take(pa.array(value_idx, pa.int64())))


def _row_levels(
    lv: Levels, level_counts: np.ndarray, needed: np.ndarray, first_row: np.ndarray, rows: np.ndarray
) -> tuple[Levels, np.ndarray]:
    """The levels of ``rows`` (as for :func:`_rows_in_runs`) and the positions of the values
    they own among the values of ``lv``.

    A row runs from its start to the next row start, but never past the end of its run of
    consecutive chunks: the next run begins with the tail of a row begun in a chunk not read.
    """
    chunk_first = np.concatenate(([0], np.cumsum(level_counts)[:-1]))
    new_run = np.concatenate(([True], np.diff(needed) != 1))
    run_first = chunk_first[new_run]  # level where each run of consecutive chunks begins
    run_first_row = first_row[needed[new_run]]  # page row of the first row starting in each run
    starts = lv.row_starts()
    n = lv.num_levels
    # Row starts of run r are starts[run_start[r]:run_start[r + 1]], page rows run_first_row[r]...
    run_start = np.searchsorted(starts, np.append(run_first, n))
    run = np.searchsorted(run_first_row, rows, side="right") - 1
    if len(rows) and int(run[0]) < 0:
        raise CorruptFileError("<page>", "requested rows are missing from the decoded chunks")
    k = run_start[run] + rows - run_first_row[run]
    if len(rows) and bool(np.any(k >= run_start[run + 1])):
        raise CorruptFileError("<page>", "requested rows are missing from the decoded chunks")
    # ... and a row ends at the next row start, or at the end of its run.
    run_stop = np.append(run_first[1:], n)
    lo = starts[k]
    hi = np.minimum(np.append(starts, n)[k + 1], run_stop[run])
    idx = ranges(lo, hi - lo)
    picked = Levels(
        lv.layers,
        None if lv.rep is None else lv.rep[idx],
        None if lv.defs is None else lv.defs[idx],
        len(idx),
    )
    visible = lv.visible_mask()
    if visible is None:
        return picked, idx
    # A row's values are those of its visible levels, back to back: count the hidden levels
    # (null or empty lists, few) before each row's ends rather than all visible levels.
    hidden = np.flatnonzero(~visible)
    v_lo = lo - np.searchsorted(hidden, lo)
    v_hi = hi - np.searchsorted(hidden, hi)
    return picked, ranges(v_lo, v_hi - v_lo)


def _pick_levels(leaf: DecodedLeaf, positions: np.ndarray) -> DecodedLeaf:
    """The levels (and their values) at ``positions`` of a decoded flat leaf: one level and one
    value per row, so rows are picked by position."""
    defs = leaf.levels.defs
    picked = Levels(leaf.levels.layers, None, None if defs is None else defs[positions], len(positions))
    return DecodedLeaf(picked, leaf.values.take(pa.array(positions)))


def _can_pick(page: MiniBlockPage) -> bool:
    """Whether values of ``page`` can be decoded at chosen positions only (bit-packed values)
    or picked before the dictionary lookup."""
    return page.dictionary is not None or hasattr(page.values, "decompress_chunks_at")


def _u16_levels(block: DataBlock) -> np.ndarray:
    if not isinstance(block, FixedWidthBlock) or block.bits_per_value != 16:
        raise CorruptFileError("<page>", "rep/def levels did not decode to 16-bit values")
    return block.view("<u2").astype(np.uint16, copy=False)


def _indices(block: DataBlock) -> np.ndarray:
    if not isinstance(block, FixedWidthBlock) or block.bits_per_value not in (8, 16, 32, 64):
        raise CorruptFileError("<page>", "dictionary indices are not 8/16/32/64-bit integers")
    return block.view(f"<u{block.bits_per_value // 8}").astype(np.int64)


def _views(blob: np.ndarray, pos: np.ndarray, size: np.ndarray, ends: np.ndarray) -> ChunkSpans:
    """The spans ``blob[pos:pos + size]``, checked against each chunk's end."""
    if bool((pos + size > ends).any()):
        raise CorruptFileError("<page>", "mini-block chunk is truncated")
    return ChunkSpans(np.ascontiguousarray(blob), pos, size)


def runs_of(chunks: np.ndarray) -> list[tuple[int, int]]:
    """Group sorted chunk indices into ``(first, stop)`` runs of consecutive chunks."""
    if len(chunks) == 0:
        return []
    breaks = np.flatnonzero(np.diff(chunks) != 1) + 1
    firsts = chunks[np.concatenate(([0], breaks))]
    lasts = chunks[np.concatenate((breaks - 1, [len(chunks) - 1]))]
    return [(int(a), int(b) + 1) for a, b in zip(firsts, lasts, strict=True)]


@register_layout("mini_block_layout")
class MiniBlockReader(PageReader):
    """Reads rows of a mini-block page: metadata (+ dictionary, repetition index) once, then chunks."""

    _page: MiniBlockPage | None = None

    def _load(self, fetch: Fetch) -> MiniBlockPage:
        if self._page is None:
            layout = self.info.layout.mini_block_layout
            if layout.has_large_chunk != (self.version is not FileVersion.V2_1):
                raise CorruptFileError(
                    "<page>", f"has_large_chunk={layout.has_large_chunk} in a {self.version} file"
                )
            wanted = [0]
            next_buffer = 2
            if layout.HasField("dictionary"):
                wanted.append(next_buffer)
                next_buffer += 1
            if layout.repetition_index_depth > 0:
                wanted.append(next_buffer)
            if max(wanted) >= len(self.info.buffers):
                raise CorruptFileError("<page>", "mini-block page has too few buffers")
            got = dict(zip(wanted, fetch([self.info.buffers[i] for i in wanted]), strict=True))
            dictionary = got.get(2) if layout.HasField("dictionary") else None
            rep_index = got.get(next_buffer) if layout.repetition_index_depth > 0 else None
            self._page = MiniBlockPage(layout, got[0], dictionary, rep_index, self.dtype)
            if self._page.offsets[-1] > self.info.buffers[1][1]:
                raise CorruptFileError("<page>", "mini-block chunks extend past their buffer")
        return self._page

    def _read(self, fetch: Fetch, rows: np.ndarray) -> DecodedLeaf:
        page = self._load(fetch)
        if page.rep_index is None:
            if page.has_rep:
                raise CorruptFileError("<page>", "list page without a repetition index")
            return self._read_flat(fetch, page, rows)
        needed, first_row = page.chunks_for_rows(rows)
        if not len(needed):
            return self._empty(page, rows)
        blob, starts = self._fetch_chunks(fetch, page, needed)
        scattered = len(needed) != int(needed[-1] - needed[0]) + 1 or int(rows[-1] - rows[0]) + 1 != len(rows)
        if scattered and _can_pick(page):

            def pick(levels: Levels, level_counts: np.ndarray) -> tuple[Levels, np.ndarray]:
                return _row_levels(levels, level_counts, needed, first_row, rows)

            return self._leaf(page.decode_chunks(blob, starts, needed, pick=pick))
        decoded = page.decode_chunks(blob, starts, needed)
        return _rows_in_runs(self._leaf(decoded), decoded.level_counts, needed, first_row, rows)

    def _read_span(self, fetch: Fetch, lo: int, hi: int) -> DecodedLeaf:
        page = self._load(fetch)
        if page.rep_index is not None or page.has_rep:
            return super()._read_span(fetch, lo, hi)
        # One level per row: the chunks holding rows lo..hi-1, decoded, then sliced.
        ends = page.count_ends
        if hi > int(ends[-1]):
            raise CorruptFileError("<page>", "requested rows lie beyond the page's chunks")
        a, b = (int(i) for i in np.searchsorted(ends, [lo, hi - 1], side="right"))
        needed = np.arange(a, b + 1)
        blob, starts = self._fetch_chunks(fetch, page, needed)
        leaf = self._leaf(page.decode_chunks(blob, starts, needed))
        first = int(ends[a] - page.counts[a])
        if hi - first > leaf.levels.num_levels:
            raise CorruptFileError(
                "<page>", f"row {hi - 1 - first} is beyond the {leaf.levels.num_levels} decoded rows"
            )
        return slice_rows(leaf, lo - first, hi - first)

    def _read_flat(self, fetch: Fetch, page: MiniBlockPage, rows: np.ndarray) -> DecodedLeaf:
        """One level and one value per row (so every level is visible): every needed chunk is
        decoded in one go, and rows are picked by position."""
        needed, pos = page.flat_chunks_for_rows(rows)
        if not len(needed):
            return self._empty(page, rows)
        blob, starts = self._fetch_chunks(fetch, page, needed)
        contiguous = int(pos[-1] - pos[0]) + 1 == len(pos)
        if not contiguous and _can_pick(page):
            return self._leaf(page.decode_chunks(blob, starts, needed, select=pos))
        leaf = self._leaf(page.decode_chunks(blob, starts, needed))
        return select_rows(leaf, pos) if contiguous else _pick_levels(leaf, pos)

    def _fetch_chunks(
        self, fetch: Fetch, page: MiniBlockPage, needed: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The bytes of the sorted chunks ``needed`` (read as :meth:`_chunk_ranges` says), back
        to back, and where each chunk starts in them."""
        offs = page.offsets
        ranges = self._chunk_ranges(page, needed)
        datas = [as_u8(d) for d in fetch(ranges)]
        if len(datas) == 1:
            return datas[0], offs[needed] - offs[needed[0]]
        firsts = np.array([a for a, _ in runs_of(needed)], np.int64)
        run_base = np.cumsum([0] + [len(d) for d in datas[:-1]])
        run = np.searchsorted(firsts, needed, side="right") - 1
        starts = run_base[run] + offs[needed] - offs[firsts[run]]
        return np.concatenate(datas), starts

    def _chunk_ranges(self, page: MiniBlockPage, needed: np.ndarray) -> list[tuple[int, int]]:
        """The byte ranges (absolute) holding the sorted chunks ``needed``: one per run of
        consecutive chunks, or, when the needed chunks make up a good part of the bytes from the
        first to the last of them, that whole stretch (fewer, larger reads; the chunks are then
        picked out of it)."""
        base = self.info.buffers[1][0]
        offs = page.offsets
        first, stop = int(offs[needed[0]]), int(offs[needed[-1] + 1])
        if stop - first <= _WHOLE_STRETCH * int(page.sizes[needed].sum()):
            return [(base + first, stop - first)]
        return [(base + int(offs[a]), int(offs[b] - offs[a])) for a, b in runs_of(needed)]

    def _empty(self, page: MiniBlockPage, rows: np.ndarray) -> DecodedLeaf:
        return select_rows(
            DecodedLeaf(Levels(page.layers, None, None, 0), from_block_empty(self.dtype)), rows
        )

    def _leaf(self, decoded: DecodedChunks) -> DecodedLeaf:
        if decoded.values is None:
            return DecodedLeaf(decoded.levels, from_block_empty(self.dtype))
        page = self._page
        if page is not None and page.items is not None:
            levels = decoded.levels
            visible = levels.visible_mask()
            defs = None if levels.defs is None else levels.defs if visible is None else levels.defs[visible]
            valid = None if defs is None else defs == 0
            keys = _indices(decoded.values)
            return DecodedLeaf(levels, dictionary.to_dictionary_array(keys, page.items, self.dtype, valid))
        return DecodedLeaf(decoded.levels, from_block(decoded.values, self.dtype))


def _joinable_key(reader: PageReader) -> bytes | None:
    """What a page must share with others to be decoded together with them in one call: its
    mini-block layout but for its value count (None for pages that cannot be: other layouts,
    dictionaries, which differ from page to page, and lists)."""
    info = reader.info
    if info.layout.WhichOneof("layout") != "mini_block_layout" or not info.num_rows:
        return None
    layout = info.layout.mini_block_layout
    if layout.HasField("dictionary") or layout.repetition_index_depth or layout.HasField("rep_compression"):
        return None
    shape = pb.MiniBlockLayout()
    shape.CopyFrom(layout)
    shape.num_items = 0
    return shape.SerializeToString(deterministic=True)


def read_whole_pages(pages: Sequence[tuple[PageReader, Fetch, str]]) -> DecodedLeaf:
    """Every row of ``pages`` (readers of one leaf column's pages, each with the fetch of its
    file and the file's name for errors; in order, often of many files), as one leaf.

    Runs of flat mini-block pages of one layout (the pages of small files written alike) are
    decoded together, their chunks back to back in one :meth:`MiniBlockPage.decode_chunks` call:
    the per-call cost of decoding a small page is paid once per run, not once per page. Other
    pages are read one by one.
    """
    parts: list[DecodedLeaf] = []
    run: list[tuple[MiniBlockReader, Fetch, str]] = []
    run_key: bytes | None = None
    for reader, fetch, path in pages:
        key = _joinable_key(reader) if isinstance(reader, MiniBlockReader) else None
        if run and key != run_key:
            parts.append(_read_run(run))
            run = []
        if key is None or not isinstance(reader, MiniBlockReader):
            parts.append(_read_page(reader, fetch, path))
            continue
        run.append((reader, fetch, path))
        run_key = key
    if run:
        parts.append(_read_run(run))
    return concat_leaves(parts)


def _read_page(reader: PageReader, fetch: Fetch, path: str) -> DecodedLeaf:
    try:
        return reader.read(fetch, np.arange(reader.info.num_rows, dtype=np.int64))
    except CorruptFileError as exc:
        raise exc.located(path=path) from exc


def _located(exc: Exception, path: str, page: str) -> CorruptFileError:
    """``exc`` (raised while decoding pages) as a :class:`CorruptFileError` of ``path``."""
    if isinstance(exc, CorruptFileError):
        return exc.located(path=path, page=page)
    return CorruptFileError(path, f"MiniBlockReader: {exc}", page=page)


_DECODE_ERRORS = (CorruptFileError, IndexError, ValueError, TypeError, OverflowError, pa.ArrowException)


def _read_run(run: Sequence[tuple[MiniBlockReader, Fetch, str]]) -> DecodedLeaf:
    """All rows of flat mini-block pages of one layout, their chunks decoded in one call. The
    chunk tables of all the pages are parsed together too (one page's search-cache state, its
    decoders, serves them all: they share the layout)."""
    if len(run) == 1:
        return _read_page(*run[0])
    table, blob, starts = _joined_chunks(run)
    return _decode_joined(run, table.page, blob, starts, np.arange(len(starts)), None)


@dataclass
class _JoinedChunks:
    """The chunk tables of a run of pages parsed together, as one page's: its chunks' sizes and
    value counts, and the first chunk and first value of each page."""

    page: MiniBlockPage
    firsts: np.ndarray  # per page: its first chunk
    value_starts: np.ndarray  # per page: its first value (= level: flat pages) of the run


def _joined_chunks(
    run: Sequence[tuple[MiniBlockReader, Fetch, str]],
) -> tuple[_JoinedChunks, np.ndarray, np.ndarray]:
    """Each page's chunk table and chunks (its two first buffers, whole) fetched, the tables
    parsed and checked together: the joined table (its page is the first page's state with every
    chunk's size and value count), the chunks back to back, and where each chunk starts in them."""
    first, first_fetch, _ = run[0]
    large = first.info.layout.mini_block_layout.has_large_chunk
    width = 4 if large else 2
    metas, blobs = [], []
    for reader, fetch, path in run:
        info = reader.info
        try:
            if large != (reader.version is not FileVersion.V2_1):
                raise CorruptFileError("<page>", f"has_large_chunk={large} in a {reader.version} file")
            if len(info.buffers) < 2:
                raise CorruptFileError("<page>", "mini-block page has too few buffers")
            meta, data = fetch([info.buffers[0], info.buffers[1]])
            if not len(meta) or len(meta) % width:
                raise CorruptFileError("<page>", f"a chunk table of {len(meta)} bytes")
        except _DECODE_ERRORS as exc:
            raise _located(exc, path, f"page at row {info.first_row}") from exc
        metas.append(meta)
        blobs.append(as_u8(data))
    chunks = np.array([len(m) // width for m in metas], np.int64)
    words = np.frombuffer(b"".join(metas), f"<u{width}").astype(np.int64)
    sizes = ((words >> 4) + 1) * ALIGN
    counts = np.left_shift(1, words & 0xF)
    firsts = np.cumsum(chunks) - chunks
    lasts = firsts + chunks - 1
    rows = np.array([reader.info.num_rows for reader, _, _ in run], np.int64)
    items = np.array([reader.info.layout.mini_block_layout.num_items for reader, _, _ in run], np.int64)
    counts[lasts] = items - (np.add.reduceat(counts, firsts) - counts[lasts])
    page_bytes = np.add.reduceat(sizes, firsts)
    problems = (
        (counts[lasts] < 0, "mini-block chunk counts exceed num_items"),
        (items != rows, "the chunks hold another number of rows than the page"),
        (page_bytes > np.array([len(b) for b in blobs]), "mini-block chunks extend past their buffer"),
    )
    for bad, reason in problems:
        if bad.any():
            n = int(np.argmax(bad))
            raise CorruptFileError(run[n][2], reason, page=f"page at row {run[n][0].info.first_row}")
    page_of = np.repeat(np.arange(len(run)), chunks)
    bases = np.cumsum([0] + [len(b) for b in blobs[:-1]])
    ends = np.cumsum(sizes)
    starts = ends - sizes - (ends - sizes)[firsts][page_of] + bases[page_of]
    try:
        joined = copy.copy(first._load(first_fetch))
    except _DECODE_ERRORS as exc:
        raise _located(exc, run[0][2], f"page at row {first.info.first_row}") from exc
    joined.counts, joined.sizes = counts, sizes
    return _JoinedChunks(joined, firsts, np.cumsum(items) - items), np.concatenate(blobs), starts


def _decode_joined(
    run: Sequence[tuple[MiniBlockReader, Fetch, str]]
    | Sequence[tuple[MiniBlockReader, Fetch, str, np.ndarray]],
    joined: MiniBlockPage,
    blob: np.ndarray,
    starts: np.ndarray,
    chunk_ids: np.ndarray,
    select: np.ndarray | None,
) -> DecodedLeaf:
    """The chunks ``chunk_ids`` of a joined run decoded in one call (keeping the levels
    ``select`` when given), errors located at the run's files."""
    try:
        if select is None or _can_pick(joined):
            return run[0][0]._leaf(joined.decode_chunks(blob, starts, chunk_ids, select=select))
        # Values that cannot be decoded at chosen positions (e.g. fixed-size lists): all of them.
        return _pick_levels(run[0][0]._leaf(joined.decode_chunks(blob, starts, chunk_ids)), select)
    except _DECODE_ERRORS as exc:
        paths = sorted({item[2] for item in run})
        where = paths[0] if len(paths) == 1 else f"{paths[0]} and {len(paths) - 1} more files"
        raise _located(exc, where, f"{len(run)} pages decoded together") from exc


def take_metadata_ranges(reader: PageReader) -> list[tuple[int, int]]:
    """The byte ranges a take of a mini-block page not loaded yet reads before its chunks: every
    buffer but the chunk data (chunk table, dictionary, repetition index). None for other pages,
    and for pages loaded already: for a caller fetching them ahead of the take."""
    if not isinstance(reader, MiniBlockReader) or reader._page is not None or _small_data(reader):
        return []
    return [buffer for i, buffer in enumerate(reader.info.buffers) if i != 1 and buffer[1] > 0]


def _small_data(reader: MiniBlockReader) -> bool:
    return len(reader.info.buffers) > 1 and reader.info.buffers[1][1] <= TAKE_WHOLE_PAGE_BYTES


def take_chunk_ranges(reader: PageReader, fetch: Fetch, rows: np.ndarray) -> list[tuple[int, int]]:
    """The byte ranges of the chunks a take of the (sorted, page-relative) ``rows`` reads of a
    mini-block page, the page loaded through ``fetch`` if it is not yet (all its buffers when
    its chunks are few bytes): for a caller fetching them ahead of the take. None for other
    pages, nor where the read would fail (it reports that)."""
    if not isinstance(reader, MiniBlockReader) or not len(rows):
        return []
    if _small_data(reader):
        # What a take of such pages reads (:func:`_take_small_pages` fetches them whole).
        return [buffer for buffer in reader.info.buffers if buffer[1] > 0]
    try:
        page = reader._load(fetch)
        if page.rep_index is None:
            needed = page.flat_chunks_for_rows(rows)[0] if not page.has_rep else np.zeros(0, np.int64)
        else:
            needed = page.chunks_for_rows(rows)[0]
    except _DECODE_ERRORS:
        return []
    return reader._chunk_ranges(page, needed) if len(needed) else []


def take_pages(pages: Sequence[tuple[PageReader, Fetch, str, np.ndarray]]) -> DecodedLeaf:
    """The rows ``rows`` (page-relative, sorted, unique, not empty) of each of ``pages``
    (``(reader, fetch, file name, rows)`` of one leaf column, in order, often of many files), as
    one leaf: what reading each page and concatenating gives.

    The take counterpart of :func:`read_whole_pages`: runs of flat mini-block pages of one layout
    have their needed chunks fetched page by page and decoded together in one
    :meth:`MiniBlockPage.decode_chunks` call, keeping only the requested positions; a take of a few
    rows from each of many small files then pays the decode's per-call cost once per run, not once
    per file. Other pages are read one by one.
    """
    parts: list[DecodedLeaf] = []
    run: list[tuple[MiniBlockReader, Fetch, str, np.ndarray]] = []
    run_key: bytes | None = None
    for reader, fetch, path, rows in pages:
        key = _joinable_key(reader) if isinstance(reader, MiniBlockReader) else None
        if run and key != run_key:
            parts.append(_take_run(run))
            run = []
        if key is None or not isinstance(reader, MiniBlockReader):
            parts.append(_take_page(reader, fetch, path, rows))
            continue
        run.append((reader, fetch, path, rows))
        run_key = key
    if run:
        parts.append(_take_run(run))
    return concat_leaves(parts)


def _take_page(reader: PageReader, fetch: Fetch, path: str, rows: np.ndarray) -> DecodedLeaf:
    try:
        return reader.read(fetch, rows)
    except CorruptFileError as exc:
        raise exc.located(path=path) from exc


def _take_run(run: Sequence[tuple[MiniBlockReader, Fetch, str, np.ndarray]]) -> DecodedLeaf:
    """Rows of flat mini-block pages of one layout, their needed chunks decoded in one call.

    Small pages (chunk bytes up to :data:`TAKE_WHOLE_PAGE_BYTES`: those of small files) are
    fetched whole and their chunk tables parsed together (:func:`_joined_chunks`), the chunks
    holding the rows found for all pages at once; other pages find and fetch their needed
    chunks as a lone read would (their search-cache state kept for the next take)."""
    if len(run) == 1:
        return _take_page(*run[0])
    if all(reader.info.buffers[1][1] <= TAKE_WHOLE_PAGE_BYTES for reader, _, _, _ in run):
        return _take_small_pages(run)
    blobs, starts, counts, sizes, selects = [], [], [], [], []
    byte_base = level_base = 0
    for reader, fetch, path, rows in run:
        try:
            page = reader._load(fetch)
            if page.rep_index is not None or page.has_rep:
                raise CorruptFileError("<page>", "a list page where a flat page was expected")
            needed, positions = page.flat_chunks_for_rows(rows)
            blob, chunk_starts = reader._fetch_chunks(fetch, page, needed)
        except _DECODE_ERRORS as exc:
            raise _located(exc, path, f"page at row {reader.info.first_row}") from exc
        held = page.counts[needed]
        blobs.append(blob)
        starts.append(chunk_starts + byte_base)
        counts.append(held)
        sizes.append(page.sizes[needed])
        selects.append(positions + level_base)
        byte_base += len(blob)
        level_base += int(held.sum())
    joined = copy.copy(run[0][0]._load(run[0][1]))  # loaded above: its layout's decoders
    joined.counts, joined.sizes = np.concatenate(counts), np.concatenate(sizes)
    chunk_ids = np.arange(len(joined.counts))
    return _decode_joined(
        run, joined, np.concatenate(blobs), np.concatenate(starts), chunk_ids, np.concatenate(selects)
    )


def _take_small_pages(run: Sequence[tuple[MiniBlockReader, Fetch, str, np.ndarray]]) -> DecodedLeaf:
    """:func:`_take_run` of small pages: one joined chunk table, the rows' chunks and positions
    found for every page at once (a flat page holds one level per row)."""
    for reader, _, path, rows in run:
        if int(rows[0]) < 0 or int(rows[-1]) >= reader.info.num_rows:
            raise CorruptFileError(
                path, "requested rows lie beyond the page", page=f"page at row {reader.info.first_row}"
            )
    table, blob, starts = _joined_chunks([(reader, fetch, path) for reader, fetch, path, _ in run])
    counts = table.page.counts
    level_ends = np.cumsum(counts)
    lengths = [len(rows) for _, _, _, rows in run]
    rows = np.concatenate([rows for _, _, _, rows in run]) + np.repeat(table.value_starts, lengths)
    chunk = np.searchsorted(level_ends, rows, side="right")
    needed = chunk[np.concatenate(([True], chunk[1:] != chunk[:-1]))]  # rows ascend across the run
    held = counts[needed]
    needed_starts = np.cumsum(held) - held
    positions = rows - (level_ends - counts)[chunk] + needed_starts[np.searchsorted(needed, chunk)]
    return _decode_joined(run, table.page, blob, starts[needed], needed, positions)
