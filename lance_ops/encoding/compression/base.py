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

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeVar

import numpy as np

from lance_ops._proto import encodings_v2_1_pb2 as pb
from lance_ops.encoding.data import DataBlock
from lance_ops.errors import UnsupportedEncodingError

Buffer = bytes | memoryview | np.ndarray


class Context(Enum):
    MINIBLOCK = "miniblock"
    BLOCK = "block"
    PER_VALUE = "per_value"


@dataclass(frozen=True)
class MiniBlockChunk:
    buffer_sizes: tuple[int, ...]  # bytes of each value buffer in this chunk
    log_num_values: int  # log2 of the chunk's value count; 0 for the last chunk


@dataclass(frozen=True)
class MiniBlockCompressed:
    buffers: tuple[np.ndarray, ...]  # uint8; buffer i = all chunks' slices of value buffer i
    chunks: tuple[MiniBlockChunk, ...]
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
        raise UnsupportedEncodingError(f"{name!r} compression is not supported in the {context.value} context")
    return factory(getattr(desc, name))


def _ensure_loaded() -> None:
    # Importing the package registers every scheme module.
    import lance_ops.encoding.compression  # noqa: F401
