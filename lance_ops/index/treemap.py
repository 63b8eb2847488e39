"""The two serialized sets of row addresses found in pylance 14's scalar index files.

**Row-address map** (BITMAP / LABEL_LIST bitmaps, the LABEL_LIST null-rows global buffer)::

    u32 LE  number of fragments
    per fragment, ascending:  u32 LE fragment id | u32 LE byte size | 32-bit portable Roaring of offsets
                              (byte size 0 = every row of the fragment)

e.g. rows {0, 1 << 32 | 7}: ``02000000 | 00000000 10000000 <roaring {0}> | 01000000 10000000 <roaring {7}>``;
the empty set is ``00000000``.

**64-bit portable Roaring** (NGRAM posting lists, pyroaring's ``BitMap64`` format)::

    u64 LE  number of 32-bit bitmaps | per bitmap: u32 LE high 32 bits | 32-bit portable Roaring

Both decode to and encode from sorted uint64 numpy arrays (encoded without run containers, as
pylance 14 writes them); the Python loops run per fragment
(per high key), never per row.
"""

from __future__ import annotations

import struct

import numpy as np
from pyroaring import BitMap, BitMap64

from lance_ops.errors import UnsupportedIndexTypeError

__all__ = [
    "decode_bitmap64",
    "decode_row_address_map",
    "encode_bitmap64",
    "encode_row_address_map",
    "split_by_fragment",
]

_U32 = struct.Struct("<I")
_ENTRY = struct.Struct("<II")


def split_by_fragment(addrs: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """``(fragment id, offsets)`` runs of sorted addresses ``addrs``."""
    if not addrs.size:
        return []
    frags = (addrs >> np.uint64(32)).astype(np.uint32)
    starts = np.flatnonzero(np.r_[True, frags[1:] != frags[:-1]])
    ends = np.r_[starts[1:], addrs.size]
    offsets = (addrs & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    return [(int(frags[s]), offsets[s:e]) for s, e in zip(starts, ends, strict=True)]


def _join(fragment: int, offsets: np.ndarray) -> np.ndarray:
    return (np.uint64(fragment) << np.uint64(32)) | offsets.astype(np.uint64)


def _concat(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.empty(0, np.uint64)


def decode_row_address_map(data: bytes, what: str = "bitmap") -> np.ndarray:
    """Sorted addresses of a row-address map. A whole-fragment entry cannot be listed without the
    fragment's length: :class:`UnsupportedIndexTypeError` (pylance writes none in index files).
    Malformed bytes raise ``ValueError``."""
    view = memoryview(data)
    (count,) = _U32.unpack_from(view, 0)
    pos = _U32.size
    parts = []
    for _ in range(count):
        fragment, size = _ENTRY.unpack_from(view, pos)
        pos += _ENTRY.size
        if size == 0:
            raise UnsupportedIndexTypeError(f"{what} selects all of fragment {fragment}; cannot remap it")
        if pos + size > len(view):
            raise ValueError(f"{what}: bitmap of fragment {fragment} runs past the end")
        offsets = np.frombuffer(BitMap.deserialize(bytes(view[pos : pos + size])).to_array(), dtype=np.uint32)
        parts.append(_join(fragment, offsets))
        pos += size
    if pos != len(view):
        raise ValueError(f"{what}: {len(view) - pos} trailing bytes")
    return _concat(parts)


def encode_row_address_map(addrs: np.ndarray) -> bytes:
    """Row-address map of sorted, unique ``addrs``."""
    out = [_U32.pack(0)]
    count = 0
    for fragment, offsets in split_by_fragment(addrs):
        blob = BitMap(offsets, optimize=False).serialize()
        out.append(_ENTRY.pack(fragment, len(blob)))
        out.append(blob)
        count += 1
    out[0] = _U32.pack(count)
    return b"".join(out)


def decode_bitmap64(data: bytes) -> np.ndarray:
    """Sorted addresses of a 64-bit portable Roaring bitmap."""
    return np.frombuffer(BitMap64.deserialize(bytes(data)).to_array(), dtype=np.uint64)


def encode_bitmap64(addrs: np.ndarray) -> bytes:
    """64-bit portable Roaring bitmap of sorted, unique ``addrs`` (the layout pyroaring writes)."""
    out = [struct.pack("<Q", 0)]
    count = 0
    for fragment, offsets in split_by_fragment(addrs):
        out.append(_U32.pack(fragment))
        out.append(BitMap(offsets, optimize=False).serialize())
        count += 1
    out[0] = struct.pack("<Q", count)
    return b"".join(out)
