"""Shared pieces of the 2.0 page codec: page buffers, the decoder registry, bitmaps.

A 2.0 page is an ``ArrayEncoding`` tree whose ``Flat`` / ``PackedStruct`` leaves name page
buffers by index (``Buffer{buffer_index, buffer_type=page}``). Encoding hands indices out
depth-first through a :class:`BufferSink`; decoding reads them from a :class:`PageBuffers`.
Decoders are found by the name of the ``array_encoding`` oneof (:func:`register`,
:func:`decode`); each turns its message plus ``num_values`` into an Arrow array of the
requested type.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from lance_ops._proto import encodings_v2_0_pb2 as pb
from lance_ops.errors import CorruptFileError, UnsupportedEncodingError

Decoder = Callable[[Any, "PageBuffers", int, pa.DataType], pa.Array]
_DECODERS: dict[str, Decoder] = {}


def register(name: str) -> Callable[[Decoder], Decoder]:
    """Register the decoder of the ``array_encoding`` oneof ``name``."""

    def add(decoder: Decoder) -> Decoder:
        _DECODERS[name] = decoder
        return decoder

    return add


def corrupt(reason: str) -> CorruptFileError:
    return CorruptFileError("<file>", f"2.0 page: {reason}")


def decode(encoding: pb.ArrayEncoding, page: PageBuffers, num_values: int, dtype: pa.DataType) -> pa.Array:
    """Decode ``num_values`` values of type ``dtype`` described by ``encoding``."""
    name = encoding.WhichOneof("array_encoding")
    if name is None:
        raise corrupt("an ArrayEncoding has no encoding set")
    decoder = _DECODERS.get(name)
    if decoder is None:
        raise UnsupportedEncodingError(f"2.0 array encoding {name!r} is not supported")
    return decoder(getattr(encoding, name), page, num_values, dtype)


@dataclass(frozen=True)
class PageBuffers:
    """The fetched buffers of one page, in page-buffer index order."""

    buffers: Sequence[memoryview]

    def get(self, buffer: pb.Buffer) -> np.ndarray:
        """The bytes of ``buffer`` as uint8 (only page buffers are ever written)."""
        if buffer.buffer_type != pb.Buffer.page:
            raise UnsupportedEncodingError("2.0 column and file buffers are not supported")
        if buffer.buffer_index >= len(self.buffers):
            raise corrupt(f"buffer {buffer.buffer_index} missing (the page has {len(self.buffers)})")
        return np.frombuffer(self.buffers[buffer.buffer_index], dtype=np.uint8)


@dataclass
class BufferSink:
    """Collects a page's buffers while its encoding is built; hands out buffer indices."""

    buffers: list[bytes | memoryview | np.ndarray] = field(default_factory=list)

    def add(self, data: bytes | memoryview | np.ndarray) -> pb.Buffer:
        self.buffers.append(data)
        return pb.Buffer(buffer_index=len(self.buffers) - 1)


def pack_bits(mask: np.ndarray) -> np.ndarray:
    """An LSB-first bitmap of a boolean array."""
    return np.packbits(mask, bitorder="little")


def unpack_bits(bitmap: np.ndarray, count: int) -> np.ndarray:
    """The first ``count`` bits of an LSB-first bitmap as booleans."""
    if len(bitmap) * 8 < count:
        raise corrupt(f"bitmap of {len(bitmap)} bytes is too short for {count} values")
    return np.unpackbits(bitmap, count=count, bitorder="little").astype(bool)


def validity(array: pa.Array) -> np.ndarray:
    """True where ``array`` is valid."""
    if array.null_count == 0:
        return np.ones(len(array), dtype=bool)
    return np.asarray(array.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
