"""Test helpers for the compression schemes.

* Round trips through the registry (compress, split into chunks, decompress each chunk).
* pylance pages: write a column with pylance and pull out its pages' raw buffers. Only for
  tests of the compression schemes (the real page readers live in
  ``lance_ops.encoding.structural``): parses the 40-byte footer, the column-metadata offset
  table and each page's ``google.protobuf.Any``-wrapped ``PageLayout`` (spec file-container §6.2)
  and splits mini-block pages into chunks (encodings spec §3.2, §3.3).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
from google.protobuf import any_pb2

from lance_ops._proto import encodings_v2_1_pb2 as pb
from lance_ops._proto import file2_pb2
from lance_ops.encoding.compression.base import Context, MiniBlockCompressed, decompressor_for
from lance_ops.encoding.data import VariableWidthBlock


@dataclass
class RawPage:
    layout: pb.PageLayout
    buffers: list[bytes]
    num_rows: int


def write_column(path: Path, arr: pa.Array, meta: dict[str, str] | None = None, version: str = "2.2") -> Path:
    from lance.file import LanceFileWriter

    field = pa.field("c", arr.type, metadata=meta)
    with LanceFileWriter(str(path), version=version) as writer:
        writer.write_batch(pa.table({"c": arr}, schema=pa.schema([field])))
    return path


def read_pages(path: Path, column: int = 0) -> list[RawPage]:
    data = Path(path).read_bytes()
    _, cmo_start, _, _, num_columns, _, _, magic = struct.unpack("<QQQIIHH4s", data[-40:])
    assert magic == b"LANC"
    assert column < num_columns
    pos, size = struct.unpack_from("<QQ", data, cmo_start + 16 * column)
    meta = file2_pb2.ColumnMetadata.FromString(data[pos : pos + size])
    pages = []
    for page in meta.pages:
        wrapped = any_pb2.Any.FromString(page.encoding.direct.encoding)
        layout = pb.PageLayout.FromString(wrapped.value)
        bufs = [data[o : o + s] for o, s in zip(page.buffer_offsets, page.buffer_sizes, strict=True)]
        pages.append(RawPage(layout, bufs, page.length))
    return pages


@dataclass
class Chunk:
    num_values: int
    num_levels: int
    rep: bytes | None
    def_: bytes | None
    values: list[memoryview]


def miniblock_chunks(page: RawPage) -> list[Chunk]:
    """Split a mini-block page into chunks (spec §3.2, §3.3)."""
    mb = page.layout.mini_block_layout
    large = mb.has_large_chunk
    words = np.frombuffer(page.buffers[0], dtype="<u4" if large else "<u2").astype(np.int64)
    body = memoryview(page.buffers[1])
    has_rep = mb.HasField("rep_compression")
    has_def = mb.HasField("def_compression")
    out = []
    pos = 0
    remaining = mb.num_items
    for i, word in enumerate(words):
        size = ((word >> 4) + 1) * 8
        count = remaining if i == len(words) - 1 else 1 << (word & 15)
        remaining -= count
        chunk = body[pos : pos + size]
        pos += size
        off = 0
        (num_levels,) = struct.unpack_from("<H", chunk, off)
        off += 2
        rep_size = def_size = 0
        if has_rep:
            (rep_size,) = struct.unpack_from("<H", chunk, off)
            off += 2
        if has_def:
            (def_size,) = struct.unpack_from("<H", chunk, off)
            off += 2
        fmt = "<I" if large else "<H"
        sizes = []
        for _ in range(mb.num_buffers):
            sizes.append(struct.unpack_from(fmt, chunk, off)[0])
            off += struct.calcsize(fmt)

        off = -(-off // 8) * 8
        rep = dfn = None
        if has_rep:
            rep, off = _take(chunk, rep_size, off)
        if has_def:
            dfn, off = _take(chunk, def_size, off)
        values = []
        for s in sizes:
            piece, off = _take(chunk, s, off)
            values.append(piece)
        out.append(Chunk(count, num_levels, rep, dfn, values))
    return out


def _take(chunk: memoryview, n: int, at: int) -> tuple[memoryview, int]:
    """``n`` bytes at ``at`` and the next 8-aligned offset."""
    return chunk[at : at + n], -(-(at + n) // 8) * 8


def page_values(page: RawPage) -> list:
    """Decode a mini-block page's values chunk by chunk with our decompressors."""
    mb = page.layout.mini_block_layout
    dec = decompressor_for(Context.MINIBLOCK, mb.value_compression)
    return [dec.decompress(c.values, c.num_values) for c in miniblock_chunks(page)]


def split_chunks(compressed: MiniBlockCompressed) -> list[tuple[list[memoryview], int]]:
    """Per-chunk buffers and value counts of a compressor's output."""
    bounds = [
        np.cumsum([0] + [c.buffer_sizes[i] for c in compressed.chunks])
        for i in range(len(compressed.buffers))
    ]
    out = []
    remaining = compressed.num_values
    for j, chunk in enumerate(compressed.chunks):
        last = j == len(compressed.chunks) - 1
        count = remaining if last else 1 << chunk.log_num_values
        remaining -= count
        bufs = [
            memoryview(np.ascontiguousarray(b)[bounds[i][j] : bounds[i][j + 1]].tobytes())
            for i, b in enumerate(compressed.buffers)
        ]
        out.append((bufs, count))
    return out


def miniblock_roundtrip(compressor, block) -> tuple[list, MiniBlockCompressed, pb.CompressiveEncoding]:
    """Compress in the mini-block context, check the chunk grammar, decode chunk by chunk."""
    compressed, desc = compressor.compress(block)
    for i, b in enumerate(compressed.buffers):
        assert len(b) == sum(c.buffer_sizes[i] for c in compressed.chunks)
    for c in compressed.chunks[:-1]:
        assert 1 <= c.log_num_values <= 15  # 0 marks the last chunk only
    if compressed.chunks:
        assert compressed.chunks[-1].log_num_values == 0
    dec = decompressor_for(Context.MINIBLOCK, pb.CompressiveEncoding.FromString(desc.SerializeToString()))
    return [dec.decompress(bufs, n) for bufs, n in split_chunks(compressed)], compressed, desc


def block_roundtrip(compressor, block):
    data, desc = (
        compressor.compress_block(block)
        if hasattr(compressor, "compress_block")
        else compressor.compress(block)
    )
    dec = decompressor_for(Context.BLOCK, desc)
    return dec.decompress(memoryview(data), block.num_values), data, desc


def per_value_roundtrip(compressor, block):
    stored, desc = compressor.compress_per_value(block)
    dec = decompressor_for(Context.PER_VALUE, desc)
    return dec.decompress(stored), stored, desc


def fixed_values(blocks, dtype) -> np.ndarray:
    """Concatenate decoded fixed-width blocks as ``dtype`` values."""
    if not blocks:
        return np.zeros(0, dtype)
    return np.concatenate([b.view(dtype) for b in blocks])


def strings_of(blocks) -> list[bytes]:
    """Concatenate decoded variable-width blocks as a list of bytes."""
    out = []
    for b in blocks:
        data = np.asarray(b.data).tobytes()
        offs = np.asarray(b.offsets, dtype=np.int64)
        out += [data[offs[i] : offs[i + 1]] for i in range(b.num_values)]
    return out


def variable_block(values: list[bytes], large: bool = False):
    offs = np.concatenate(([0], np.cumsum([len(v) for v in values]))).astype(
        np.uint64 if large else np.uint32
    )
    return VariableWidthBlock(offs, np.frombuffer(b"".join(values), dtype=np.uint8), len(values))


def _pad64(n: int) -> int:
    return -(-n // 64) * 64


def assemble_miniblock(compressed: MiniBlockCompressed, version: str) -> tuple[bytes, bytes]:
    """Page buffers 0 (metadata words) and 1 (chunks) for values without rep/def (spec §3.2, §3.3)."""
    large = version != "2.1"
    words, body = [], bytearray()
    for j, (bufs, _) in enumerate(split_chunks(compressed)):
        chunk = bytearray(struct.pack("<H", 0))
        for b in bufs:
            chunk += struct.pack("<I" if large else "<H", len(b))
        for b in bufs:
            chunk += b"\xfe" * (-len(chunk) % 8)
            chunk += bytes(b)
        chunk += b"\xfe" * (-len(chunk) % 8)
        words.append(((len(chunk) // 8 - 1) << 4) | compressed.chunks[j].log_num_values)
        body += chunk
    return np.array(words, dtype="<u4" if large else "<u2").tobytes(), bytes(body)


def rewrite_single_page(template: Path, out: Path, buffers: list[bytes], layout: pb.PageLayout) -> Path:
    """Copy a one-column, one-page pylance file, replacing the page's buffers and layout."""
    data = Path(template).read_bytes()
    _, cmo_start, gbo_start, num_global, num_columns, major, minor, _ = struct.unpack(
        "<QQQIIHH4s", data[-40:]
    )
    assert num_global == 1 and num_columns == 1
    gb_pos, gb_size = struct.unpack_from("<QQ", data, gbo_start)
    pos, size = struct.unpack_from("<QQ", data, cmo_start)
    meta = file2_pb2.ColumnMetadata.FromString(data[pos : pos + size])
    (page,) = meta.pages
    wrapped = any_pb2.Any.FromString(page.encoding.direct.encoding)
    wrapped.value = layout.SerializeToString()
    page.encoding.direct.encoding = wrapped.SerializeToString()
    blob = bytearray()
    del page.buffer_offsets[:]
    del page.buffer_sizes[:]
    for b in buffers:
        page.buffer_offsets.append(len(blob))
        page.buffer_sizes.append(len(b))
        blob += b + b"\0" * (_pad64(len(b)) - len(b))
    schema_pos = len(blob)
    blob += data[gb_pos : gb_pos + gb_size]
    blob += b"\0" * (_pad64(len(blob)) - len(blob))
    meta_pos = len(blob)
    meta_bytes = meta.SerializeToString()
    blob += meta_bytes
    cmo = len(blob)
    blob += struct.pack("<QQ", meta_pos, len(meta_bytes))
    gbo = len(blob)
    blob += struct.pack("<QQ", schema_pos, gb_size)
    blob += struct.pack("<QQQIIHH4s", meta_pos, cmo, gbo, 1, 1, major, minor, b"LANC")
    Path(out).write_bytes(bytes(blob))
    return Path(out)


def pylance_reads_our_page(
    tmp: Path, arr: pa.Array, compressor, block, version: str, meta: dict[str, str] | None = None
) -> pa.Array:
    """Write ``arr`` with pylance as a plain mini-block page, swap in our compressed values, read it back."""
    from lance.file import LanceFileReader

    meta = {"lance-encoding:compression": "none", **(meta or {})}
    template = write_column(tmp / f"template-{version}.lance", arr, meta, version)
    (page,) = read_pages(template)
    layout = pb.PageLayout()
    layout.CopyFrom(page.layout)
    mb = layout.mini_block_layout
    assert not mb.HasField("dictionary") and not mb.HasField("def_compression")
    compressed, desc = compressor.compress(block)
    mb.value_compression.CopyFrom(desc)
    mb.num_buffers = len(compressed.buffers)
    mb.num_items = compressed.num_values
    meta, body = assemble_miniblock(compressed, version)
    out = rewrite_single_page(template, tmp / f"ours-{version}.lance", [meta, body], layout)
    return LanceFileReader(str(out)).read_all().to_table().column(0).combine_chunks()
