"""Compression contracts and the decoder registry.

Three contexts exist (see spec/encodings-2.1.md §7):

* **mini-block**: a page's values are cut into chunks; each chunk has one or more value
  buffers. The compressor decides the chunking (power-of-two value counts except the
  last chunk) and returns every value buffer as the concatenation of its per-chunk slices.
* **block**: one opaque buffer (rep/def level slices, dictionaries, constant-page levels).
* **per-value**: full-zip pages; each value is transformed independently.

A compressor returns its data *and* its own protobuf description
(``encodings_v2_1_pb2.CompressiveEncoding``); a decompressor is built from that
description. Decompressors are found through :func:`decompressor_for`, keyed by the
``compression`` oneof name, recursing into nested descriptions.
"""

from __future__ import annotations

import functools
import struct
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeVar

import numpy as np

from lance_ops._proto import encodings_v2_1_pb2 as pb
from lance_ops.encoding.data import DataBlock
from lance_ops.errors import CorruptFileError, LanceOpsError, UnsupportedEncodingError

Buffer = bytes | memoryview | np.ndarray
_LONG_SPAN = 512  # average span size (bytes) from which gather_spans copies slice by slice


class Context(Enum):
    MINIBLOCK = "miniblock"
    BLOCK = "block"
    PER_VALUE = "per_value"


@dataclass(frozen=True)
class MiniBlockChunk:
    buffer_sizes: tuple[int, ...]  # bytes of each value buffer in this chunk
    log_num_values: int  # log2 of the chunk's value count; 0 for the last chunk


class ChunkTable(Sequence[MiniBlockChunk]):
    """Chunk records held as arrays: ``sizes`` (chunks × buffers, bytes) and ``logs`` (log2 of each
    chunk's value count, 0 for the last). A sequence of :class:`MiniBlockChunk` made on access;
    the page writer reads the arrays, so a page of thousands of chunks makes no object per chunk."""

    def __init__(self, sizes: np.ndarray, logs: np.ndarray) -> None:
        self.sizes = sizes
        self.logs = logs

    def __len__(self) -> int:
        return len(self.logs)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        return MiniBlockChunk(tuple(self.sizes[index].tolist()), int(self.logs[index]))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return tuple(self) == tuple(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ChunkTable({list(self)!r})"


def chunk_arrays(chunks: Sequence[MiniBlockChunk], num_buffers: int) -> tuple[np.ndarray, np.ndarray]:
    """``(sizes, logs)`` of chunk records as arrays (chunks × ``num_buffers``, and chunks)."""
    if isinstance(chunks, ChunkTable):
        return chunks.sizes, chunks.logs
    n = len(chunks)
    sizes = np.array([c.buffer_sizes for c in chunks], np.int64).reshape(n, -1 if n else num_buffers)
    return sizes, np.array([c.log_num_values for c in chunks], np.int64)


@dataclass(frozen=True)
class MiniBlockCompressed:
    buffers: tuple[np.ndarray, ...]  # uint8; buffer i = all chunks' slices of value buffer i
    chunks: Sequence[MiniBlockChunk]  # a ChunkTable, or a tuple of records
    num_values: int


class MiniBlockCompressor(ABC):
    @abstractmethod
    def compress(self, block: DataBlock) -> tuple[MiniBlockCompressed, pb.CompressiveEncoding]:
        """Chunk and compress ``block``; describe the result."""


class MiniBlockDecompressor(ABC):
    @abstractmethod
    def decompress(self, buffers: Sequence[memoryview], num_values: int) -> DataBlock:
        """Decode one chunk's value buffers holding ``num_values`` values."""


class BlockCompressor(ABC):
    @abstractmethod
    def compress(self, block: DataBlock) -> tuple[bytes, pb.CompressiveEncoding]:
        """Compress ``block`` into one opaque buffer; describe it."""


class BlockDecompressor(ABC):
    @abstractmethod
    def decompress(self, data: memoryview, num_values: int) -> DataBlock:
        """Decode one buffer holding ``num_values`` values."""


class PerValueCompressor(ABC):
    @abstractmethod
    def compress(self, block: DataBlock) -> tuple[DataBlock, pb.CompressiveEncoding]:
        """Transform each value independently (fixed stays fixed, variable stays variable)."""


class PerValueDecompressor(ABC):
    @abstractmethod
    def decompress(self, block: DataBlock) -> DataBlock:
        """Undo :meth:`PerValueCompressor.compress` on a block of stored values."""


Decompressor = MiniBlockDecompressor | BlockDecompressor | PerValueDecompressor
D = TypeVar("D")
_Factory = Callable[[Any], Decompressor]
_REGISTRY: dict[tuple[Context, str], _Factory] = {}


def register(context: Context, oneof_name: str) -> Callable[[D], D]:
    """Class/function decorator: ``factory(variant_message) -> decompressor``.

    A decorated class is called with the variant message (e.g. ``pb.Flat``); a class
    exposing ``from_description`` is called through it.
    """

    def deco(factory: D) -> D:
        make = getattr(factory, "from_description", factory)
        _REGISTRY[(context, oneof_name)] = make  # type: ignore[assignment]
        return factory

    return deco


def decompressor_for(context: Context, desc: pb.CompressiveEncoding) -> Any:
    """Build the decompressor described by ``desc`` for ``context``."""
    _ensure_loaded()
    name = desc.WhichOneof("compression")
    if name is None:
        raise UnsupportedEncodingError("compressive encoding has no variant set")
    factory = _REGISTRY.get((context, name))
    if factory is None:
        raise UnsupportedEncodingError(
            f"{name!r} compression is not supported in the {context.value} context"
        )
    return factory(getattr(desc, name))


def _ensure_loaded() -> None:
    # Importing the package registers every scheme module.
    import lance_ops.encoding.compression  # noqa: F401


# --- shared helpers for scheme modules ------------------------------------------------------------

_CORRUPT_PATH = "<encoded buffer>"


def corrupt(reason: str) -> CorruptFileError:
    """The error for a truncated or garbled compressed buffer (the caller knows no file path)."""
    return CorruptFileError(_CORRUPT_PATH, reason)


def require(condition: bool, reason: str) -> None:
    """Raise :func:`corrupt` unless ``condition`` holds."""
    if not condition:
        raise corrupt(reason)


F = TypeVar("F", bound=Callable[..., Any])


def guarded(method: F) -> F:
    """Decorate a ``decompress`` method so malformed input surfaces as :class:`CorruptFileError`.

    numpy and struct signal short or garbled input with their own exceptions (``IndexError``,
    ``ValueError``, ``struct.error``, ...); those become ``CorruptFileError`` (a ``ValueError``).
    Deliberate lance_ops errors pass through; general.py converts zstd / lz4 errors itself.
    """

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except LanceOpsError:
            raise
        except (IndexError, ValueError, TypeError, OverflowError, struct.error, RuntimeError) as exc:
            raise corrupt(f"{type(args[0]).__name__}: {exc}") from exc

    return wrapper  # type: ignore[return-value]


def as_u8(buf: Buffer) -> np.ndarray:
    """Zero-copy uint8 view of a bytes-like object or array."""
    if isinstance(buf, np.ndarray):
        return buf.reshape(-1).view(np.uint8)
    return np.frombuffer(buf, dtype=np.uint8)


def ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The indices ``starts[i] .. starts[i] + lengths[i] - 1`` for every i, concatenated."""
    lengths = np.asarray(lengths, np.int64)
    shift = np.asarray(starts, np.int64) - (np.cumsum(lengths) - lengths)
    return np.repeat(shift, lengths) + np.arange(int(lengths.sum()), dtype=np.int64)


def span_mask(starts: np.ndarray, sizes: np.ndarray, length: int) -> np.ndarray:
    """Bool array of ``length``: True inside ``[starts[i], starts[i] + sizes[i])`` for every i
    (spans sorted, disjoint and within ``length``)."""
    bounds = np.empty(2 * len(starts) + 2, np.int64)
    bounds[0] = 0
    bounds[1:-1:2] = starts
    bounds[2:-1:2] = np.asarray(starts, np.int64) + sizes
    bounds[-1] = length
    inside = np.zeros(len(bounds) - 1, bool)
    inside[1::2] = True
    return np.repeat(inside, np.diff(bounds))


def gather_spans(blob: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """``blob[starts[i] : starts[i] + sizes[i]]`` for every i, concatenated. Long spans are
    copied slice by slice; many short sorted, disjoint spans (chunk layouts) are cut out with
    one element mask; anything else uses an index gather. The result may be a view of ``blob``."""
    starts = np.asarray(starts, np.int64)
    sizes = np.asarray(sizes, np.int64)
    if len(starts) == 0:
        return blob[:0]
    if len(starts) == 1:
        return blob[int(starts[0]) : int(starts[0] + sizes[0])]
    stops = starts + sizes
    if int(starts[0]) == 0 and int(stops[-1]) == len(blob) and bool(np.all(starts[1:] == stops[:-1])):
        return blob  # the spans tile the whole array
    total = int(sizes.sum())
    if total >= _LONG_SPAN * len(starts):
        return np.concatenate([blob[a:b] for a, b in zip(starts.tolist(), stops.tolist(), strict=True)])
    if bool(np.all(starts[1:] >= stops[:-1])) and int(starts[0]) >= 0 and int(stops[-1]) <= len(blob):
        return blob[span_mask(starts, sizes, len(blob))]
    return blob[ranges(starts, sizes)]


class ChunkSpans(Sequence[memoryview]):
    """Buffers that are spans of one byte array: ``blob[starts[i] : starts[i] + sizes[i]]``.

    It is a sequence of memoryviews for decoders that take one buffer at a time; batched
    decoders (``decompress_chunks``) use ``blob``, ``starts`` and ``sizes`` directly instead of
    making one view per chunk.
    """

    def __init__(self, blob: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> None:
        self.blob = blob
        self.starts = np.asarray(starts, np.int64)
        self.sizes = np.asarray(sizes, np.int64)

    @classmethod
    def of(cls, buffers: Sequence[Buffer]) -> ChunkSpans:
        """``buffers`` as spans (joined into one array unless they already are spans)."""
        if isinstance(buffers, ChunkSpans):
            return buffers
        raws = [as_u8(b) for b in buffers]
        sizes = np.array([len(r) for r in raws], np.int64)
        blob = np.concatenate(raws) if raws else np.zeros(0, np.uint8)
        return cls(blob, np.cumsum(sizes) - sizes, sizes)

    def joined(self) -> np.ndarray:
        """All spans back to back."""
        return gather_spans(self.blob, self.starts, self.sizes)

    def words(self, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
        """The spans as ``dtype`` words: an array and each span's first word in it. It is
        ``blob`` itself, reinterpreted, when every span starts on a word boundary (no copy),
        else the spans joined. Span sizes must be whole words."""
        item = dtype.itemsize
        blob = self.blob
        if blob.ndim == 1 and len(blob) % item == 0 and not (self.starts % item).any():
            return blob.view(dtype), self.starts // item
        lens = self.sizes // item
        return self.joined().view(dtype), np.cumsum(lens) - lens

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        start = int(self.starts[index])
        return self.blob[start : start + int(self.sizes[index])].data


def chunk_descriptors(counts: Sequence[int] | np.ndarray, sizes: np.ndarray) -> ChunkTable:
    """Chunk records for per-chunk value ``counts`` and a (chunks, buffers) array of byte ``sizes``.

    Every chunk but the last must hold a power-of-two count of at least two (log2 = 0 marks
    the last chunk, so readers reject a non-last chunk of one value); the last records 0.
    """
    values = np.asarray(counts, dtype=np.int64).reshape(-1)
    if len(values) == 0:
        return ChunkTable(np.zeros((0, 0), np.int64), values)
    table = np.asarray(sizes, dtype=np.int64).reshape(len(values), -1)
    body = values[:-1]
    bad = (body < 2) | (body & (body - 1) != 0)
    if bad.any():
        count = int(body[np.argmax(bad)])
        raise ValueError(f"non-last mini-block chunk holds {count} values (not a power of two >= 2)")
    logs = np.zeros(len(values), np.int64)
    logs[:-1] = np.frexp(body)[1] - 1  # log2 of the powers of two
    return ChunkTable(table, logs)


def fixed_chunk_values(bytes_per_value: float, max_values: int = 4096) -> int:
    """Values per non-last mini-block chunk for fixed-width data (spec §3.7).

    Start at 2 and double while the doubled chunk stays below 8 186 bytes and 4 096 values.
    """
    n = 2
    while 2 * n * bytes_per_value < 8186 and 2 * n <= max_values:
        n *= 2
    return n


def split_counts(num_values: int, per_chunk: int) -> list[int]:
    """Uniform chunking: ``per_chunk`` values per chunk, the remainder in the last one."""
    if num_values == 0:
        return []
    full, rest = divmod(num_values, per_chunk)
    return [per_chunk] * full + ([rest] if rest else [])


def flat_desc(bits_per_value: int) -> pb.CompressiveEncoding:
    """``CompressiveEncoding { flat { bits_per_value } }``."""
    return pb.CompressiveEncoding(flat=pb.Flat(bits_per_value=bits_per_value))


def flat_bits(desc: pb.CompressiveEncoding, allowed: Sequence[int] | None = None) -> int:
    """The width of a nested description that must be ``Flat`` (optionally one of ``allowed``)."""
    if desc.WhichOneof("compression") != "flat":
        raise UnsupportedEncodingError(f"expected a Flat description, got {desc.WhichOneof('compression')!r}")
    bits = int(desc.flat.bits_per_value)
    if desc.flat.HasField("data"):
        raise UnsupportedEncodingError("Flat with buffer compression is not supported")
    if allowed is not None and bits not in allowed:
        raise UnsupportedEncodingError(f"Flat({bits}) is not allowed here (expected one of {list(allowed)})")
    return bits


class BlockAdapter(BlockCompressor):
    """Expose a multi-context compressor's ``compress_block`` as a :class:`BlockCompressor`."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def compress(self, block: DataBlock) -> tuple[bytes, pb.CompressiveEncoding]:
        return self.inner.compress_block(block)  # type: ignore[no-any-return]


class PerValueAdapter(PerValueCompressor):
    """Expose a multi-context compressor's ``compress_per_value`` as a :class:`PerValueCompressor`."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def compress(self, block: DataBlock) -> tuple[DataBlock, pb.CompressiveEncoding]:
        return self.inner.compress_per_value(block)  # type: ignore[no-any-return]
