"""General: zstd / LZ4 around another encoding's output (spec §7.9).

Description ``General { compression = BufferCompression { scheme, level? }, values = inner }``.

Framing of one compressed buffer:

* ZSTD: ``u64 uncompressed_length`` then one zstd frame (which carries the content size);
  a buffer starting directly with the frame magic ``28 b5 2f fd`` is accepted too.
* LZ4: ``u32 uncompressed_length`` then one raw LZ4 *block* — python-lz4's
  ``lz4.block.compress(data, store_size=True)``. Example (2.2 dictionary of 88 902 bytes):
  ``46 5b 01 00`` + block.

Contexts:

* mini-block: only value buffer 0 of each chunk is compressed; the others pass through.
* block: the whole buffer (2.2 dictionaries use ``General(LZ4, Flat|Variable)``).
* per-value (full-zip, variable width): each value on its own, stored as
  ``u64 raw_len | zstd frame`` (the structural layer adds the u32/u64 length prefix).
  pylance records ``level: 0`` here when no level is configured.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import lz4.block
import numpy as np
import zstandard

from lance_ops._proto import encodings_v2_1_pb2 as pb
from lance_ops.encoding.compression.base import (
    BlockDecompressor,
    ChunkSpans,
    Context,
    MiniBlockChunk,
    MiniBlockCompressed,
    MiniBlockCompressor,
    MiniBlockDecompressor,
    PerValueDecompressor,
    as_u8,
    corrupt,
    decompressor_for,
    gather_spans,
    guarded,
    register,
    require,
)
from lance_ops.encoding.data import DataBlock, VariableWidthBlock
from lance_ops.errors import UnsupportedEncodingError

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_SCHEMES = {
    "zstd": pb.COMPRESSION_ALGORITHM_ZSTD,
    "lz4": pb.COMPRESSION_ALGORITHM_LZ4,
}

# zstandard (de)compressor objects are costly to build and not thread-safe: keep one per thread
# (compressors per level) and reuse it for every buffer, e.g. every value of a full-zip page.
_ZSTD_CACHE = threading.local()


def _zstd_compressor(level: int) -> zstandard.ZstdCompressor:
    compressors: dict[int, zstandard.ZstdCompressor] | None = getattr(_ZSTD_CACHE, "compressors", None)
    if compressors is None:
        compressors = _ZSTD_CACHE.compressors = {}
    compressor = compressors.get(level)
    if compressor is None:
        compressor = compressors[level] = zstandard.ZstdCompressor(level=level, write_content_size=True)
    return compressor


def _zstd_decompressor() -> zstandard.ZstdDecompressor:
    decompressor: zstandard.ZstdDecompressor | None = getattr(_ZSTD_CACHE, "decompressor", None)
    if decompressor is None:
        decompressor = _ZSTD_CACHE.decompressor = zstandard.ZstdDecompressor()
    return decompressor


def compress_buffer(data: bytes | memoryview | np.ndarray, scheme: int, level: int | None = None) -> bytes:
    """Compress one buffer with the Lance framing of ``scheme`` (a ``CompressionScheme`` value)."""
    raw = as_u8(data).tobytes()
    if scheme == pb.COMPRESSION_ALGORITHM_ZSTD:
        frame = _zstd_compressor(level or 3).compress(raw)
        return len(raw).to_bytes(8, "little") + frame
    if scheme == pb.COMPRESSION_ALGORITHM_LZ4:
        return bytes(lz4.block.compress(raw, store_size=True))
    raise UnsupportedEncodingError(f"unsupported general compression scheme {scheme}")


def decompress_buffer(data: bytes | memoryview | np.ndarray, scheme: int) -> bytes:
    """Undo :func:`compress_buffer`; garbled input raises ``CorruptFileError``."""
    raw = as_u8(data).tobytes()
    try:
        if scheme == pb.COMPRESSION_ALGORITHM_ZSTD:
            if raw[:4] == ZSTD_MAGIC:
                return bytes(_zstd_decompressor().decompressobj().decompress(raw))
            require(len(raw) >= 8, "zstd buffer is shorter than its length header")
            size = int.from_bytes(raw[:8], "little")
            out = _zstd_decompressor().decompress(raw[8:], max_output_size=max(size, 1))
        elif scheme == pb.COMPRESSION_ALGORITHM_LZ4:
            require(len(raw) >= 4, "lz4 buffer is shorter than its length header")
            size = int.from_bytes(raw[:4], "little")
            out = lz4.block.decompress(raw)
        else:
            raise UnsupportedEncodingError(f"unsupported general compression scheme {scheme}")
    except (zstandard.ZstdError, lz4.block.LZ4BlockError) as exc:
        raise corrupt(f"general decompression failed: {exc}") from exc
    require(len(out) == size, f"decompressed {len(out)} bytes, header says {size}")
    return bytes(out)


def decompress_spans(blob: np.ndarray, starts: list[int], sizes: list[int], scheme: int) -> list[bytes]:
    """:func:`decompress_buffer` of ``blob[start : start + size]`` for every span. zstd spans with
    the length header are inflated straight from ``blob`` (no copy of each span on the way in)."""
    if scheme != pb.COMPRESSION_ALGORITHM_ZSTD:
        return [decompress_buffer(blob[a : a + n], scheme) for a, n in zip(starts, sizes, strict=True)]
    decompressor = _zstd_decompressor()
    out = []
    for a, n in zip(starts, sizes, strict=True):
        span = blob[a : a + n]
        if n < 8 or span[:4].tobytes() == ZSTD_MAGIC:
            out.append(decompress_buffer(span, scheme))  # short, or a bare frame: the checked path
            continue
        size = int.from_bytes(span[:8].tobytes(), "little")
        try:
            piece = decompressor.decompress(span[8:].data, max_output_size=max(size, 1))
        except zstandard.ZstdError as exc:
            raise corrupt(f"general decompression failed: {exc}") from exc
        require(len(piece) == size, f"decompressed {len(piece)} bytes, header says {size}")
        out.append(piece)
    return out


# From this many chunks on, zstd chunks are inflated as one stream of frames (one codec call).
_STREAM_MIN_SPANS = 16


def decompress_spans_joined(
    blob: np.ndarray, starts: np.ndarray, sizes: np.ndarray, scheme: int
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`decompress_spans` joined into one array, and each span's inflated size.

    Many zstd spans that all carry the ``u64`` length header have their frames gathered back to
    back and inflated by one stream reader across frames into an array sized from the headers:
    one codec call instead of one per chunk. The headers must add up to what the frames hold.
    """
    starts = np.asarray(starts, np.int64)
    sizes = np.asarray(sizes, np.int64)
    many = len(starts) >= _STREAM_MIN_SPANS and bool((sizes >= 12).all())
    if scheme == pb.COMPRESSION_ALGORITHM_ZSTD and many:
        heads = blob[starts[:, None] + np.arange(8)]
        if not bool((heads[:, :4] == np.frombuffer(ZSTD_MAGIC, np.uint8)).all(axis=1).any()):
            out_sizes = np.ascontiguousarray(heads).view("<u8").reshape(-1).astype(np.int64)
            frames = gather_spans(blob, starts + 8, sizes - 8)
            out = np.empty(int(out_sizes.sum()), np.uint8)
            filled = 0
            try:
                reader = _zstd_decompressor().stream_reader(frames.data, read_across_frames=True)
                view = out.data
                while filled < len(out):
                    got = reader.readinto(view[filled:])
                    if not got:
                        break
                    filled += got
                extra = reader.read(1)
            except zstandard.ZstdError as exc:
                raise corrupt(f"general decompression failed: {exc}") from exc
            require(
                filled == len(out) and not extra,
                f"zstd chunks inflate to {filled + len(extra)}+ bytes, their headers say {len(out)}",
            )
            return out, out_sizes
    pieces = decompress_spans(blob, starts.tolist(), sizes.tolist(), scheme)
    lengths = np.array([len(p) for p in pieces], np.int64)
    return np.frombuffer(b"".join(pieces), np.uint8), lengths


def general_desc(scheme: int, level: int | None, inner: pb.CompressiveEncoding) -> pb.CompressiveEncoding:
    compression = pb.BufferCompression(scheme=scheme)  # type: ignore[arg-type, attr-defined]
    if level is not None:
        compression.level = level
    return pb.CompressiveEncoding(general=pb.General(compression=compression, values=inner))


class GeneralCompressor(MiniBlockCompressor):
    """Wrap ``inner`` (a compressor of the same context) in zstd or LZ4.

    ``compress`` = mini-block (inner must be a mini-block compressor), ``compress_block`` (inner
    must have ``compress_block``) and ``compress_per_value`` (inner must have
    ``compress_per_value`` and produce variable-width values).
    """

    def __init__(self, inner: Any, scheme: str = "zstd", level: int | None = None) -> None:
        if scheme not in _SCHEMES:
            raise UnsupportedEncodingError(f"general compression must be zstd or lz4, not {scheme!r}")
        self.inner = inner
        self.scheme = _SCHEMES[scheme]
        self.level = level

    def compress(self, block: DataBlock) -> tuple[MiniBlockCompressed, pb.CompressiveEncoding]:
        inner, inner_desc = self.inner.compress(block)
        first = as_u8(inner.buffers[0])
        bounds = np.cumsum([0] + [c.buffer_sizes[0] for c in inner.chunks])
        pieces = [
            compress_buffer(first[bounds[i] : bounds[i + 1]], self.scheme, self.level)
            for i in range(len(inner.chunks))
        ]
        chunks = tuple(
            MiniBlockChunk((len(p), *c.buffer_sizes[1:]), c.log_num_values)
            for p, c in zip(pieces, inner.chunks, strict=True)
        )
        buffer0 = np.frombuffer(b"".join(pieces), dtype=np.uint8)
        compressed = MiniBlockCompressed((buffer0, *inner.buffers[1:]), chunks, inner.num_values)
        return compressed, general_desc(self.scheme, self.level, inner_desc)

    def compress_block(self, block: DataBlock) -> tuple[bytes, pb.CompressiveEncoding]:
        data, inner_desc = self.inner.compress_block(block)
        return compress_buffer(data, self.scheme, self.level), general_desc(
            self.scheme, self.level, inner_desc
        )

    def compress_per_value(self, block: DataBlock) -> tuple[DataBlock, pb.CompressiveEncoding]:
        values, inner_desc = self.inner.compress_per_value(block)
        if not isinstance(values, VariableWidthBlock):
            raise UnsupportedEncodingError("per-value general compression needs variable-width values")
        offs = values.offsets.astype(np.int64)
        data = as_u8(values.data)
        pieces = [
            compress_buffer(data[offs[i] : offs[i + 1]], self.scheme, self.level)
            for i in range(values.num_values)
        ]
        lengths = np.array([len(p) for p in pieces], dtype=np.int64)
        new_offsets = np.concatenate(([0], np.cumsum(lengths))).astype(values.offsets.dtype)
        out = VariableWidthBlock(
            new_offsets, np.frombuffer(b"".join(pieces), dtype=np.uint8), values.num_values
        )
        level = 0 if self.level is None else self.level
        return out, general_desc(self.scheme, level, inner_desc)


class _GeneralReader:
    context: Context

    def __init__(self, scheme: int, inner: Any) -> None:
        if scheme not in _SCHEMES.values():
            raise UnsupportedEncodingError(f"unsupported general compression scheme {scheme}")
        self.scheme = scheme
        self.inner = inner

    @classmethod
    def from_description(cls, desc: pb.General) -> _GeneralReader:
        if not desc.HasField("values"):
            raise UnsupportedEncodingError("General compression without an inner encoding")
        return cls(int(desc.compression.scheme), decompressor_for(cls.context, desc.values))


@register(Context.MINIBLOCK, "general")
class GeneralMiniBlockDecompressor(_GeneralReader, MiniBlockDecompressor):
    context = Context.MINIBLOCK

    @guarded
    def decompress(self, buffers: Sequence[memoryview], num_values: int) -> DataBlock:
        require(len(buffers) >= 1, "General expects at least one mini-block buffer")
        first = memoryview(decompress_buffer(buffers[0], self.scheme))
        return self.inner.decompress([first, *buffers[1:]], num_values)  # type: ignore[no-any-return]

    def _inflated(self, buffers: Sequence[memoryview]) -> ChunkSpans:
        """Every chunk's buffer decompressed (one codec call each), as spans of one array."""
        spans = ChunkSpans.of(buffers)
        joined, sizes = decompress_spans_joined(spans.blob, spans.starts, spans.sizes, self.scheme)
        return ChunkSpans(joined, np.cumsum(sizes) - sizes, sizes)

    # The reader probes ``decompress_chunks`` / ``decompress_chunks_at`` with getattr: each is
    # offered only when the inner scheme offers it, and then inflates every chunk (one codec
    # call each) and hands them all to the inner scheme in one call.
    @property
    def decompress_chunks(self) -> Any:
        return self._batched("decompress_chunks")

    @property
    def decompress_chunks_at(self) -> Any:
        return self._batched("decompress_chunks_at")

    def _batched(self, name: str) -> Any:
        inner = getattr(self.inner, name, None)
        if inner is None:
            raise AttributeError(name)

        @guarded
        def run(buffers: Sequence[memoryview], counts: Sequence[int], *positions: np.ndarray) -> DataBlock:
            return inner(self._inflated(buffers), counts, *positions)  # type: ignore[no-any-return]

        return run


@register(Context.BLOCK, "general")
class GeneralBlockDecompressor(_GeneralReader, BlockDecompressor):
    context = Context.BLOCK

    @guarded
    def decompress(self, data: memoryview, num_values: int) -> DataBlock:
        return self.inner.decompress(memoryview(decompress_buffer(data, self.scheme)), num_values)  # type: ignore[no-any-return]


@register(Context.PER_VALUE, "general")
class GeneralPerValueDecompressor(_GeneralReader, PerValueDecompressor):
    context = Context.PER_VALUE

    @guarded
    def decompress(self, block: DataBlock) -> DataBlock:
        require(isinstance(block, VariableWidthBlock), "per-value General expects variable-width values")
        assert isinstance(block, VariableWidthBlock)
        offs = block.offsets.astype(np.int64)
        # Every value is its own buffer: inflated together (one codec call for many zstd values).
        joined, lengths = decompress_spans_joined(as_u8(block.data), offs[:-1], np.diff(offs), self.scheme)
        offsets = np.concatenate(([0], np.cumsum(lengths))).astype(block.offsets.dtype)
        raw = VariableWidthBlock(offsets, joined, block.num_values)
        return self.inner.decompress(raw)  # type: ignore[no-any-return]
