"""Posting lists of an INVERTED index (``part_<p>_invert.lance``), as pylance 14 writes them.

One row per token: ``_posting`` (a list of blocks), ``_max_score`` (float32), ``_length`` (the
number of documents holding the token) and ``_impacts`` (a list of skip entries). Documents are
named by their row number in ``part_<p>_docs.lance`` ("document ids"), ascending.

``_posting`` blocks hold 128 documents each, the last one fewer:

* every block opens with its maximum score (float32, little endian, see below);
* a full block: the first document id (uint32), then the document ids as deltas from their
  predecessor (the first delta is 0) bit-packed, then the frequencies bit-packed. Each packed run
  is one byte (the bit width ``w``, the widest value's bit length) and ``16 * w`` bytes in the
  four-lane layout of the ``bitpacking`` crate's ``BitPacker4x``: value ``i`` goes to lane
  ``i % 4`` as that lane's ``i // 4``-th value; each lane packs its 32 values least significant
  bit first into ``w`` 32-bit words, and the words of the four lanes are interleaved (word ``j`` of
  lane ``l`` is the file's word ``4 j + l``);
* the tail block (``posting_tail_codec`` ``varint_delta_v1``): the document ids as LEB128 varints
  of the delta from the previous document id (the first as is), then the frequencies as varints.
  (``fixed32_v1``, older indices: plain uint32 ids, then uint32 frequencies.)

Scores (BM25, float32 arithmetic throughout, as pylance computes them at build time) use the
partition's statistics: ``N`` documents (rows of the docs file), average length ``avgdl =
float32(total_tokens) / float32(N)``, and for a token in ``n`` documents ``idf = ln(1 + (N - n +
0.5) / (n + 0.5))``. A document of ``len`` tokens holding the token ``f`` times weighs ``f / (f +
K1 (1 - B + B len / avgdl))`` (K1 = 1.2, B = 0.75); a block's score is its heaviest document's
weight times ``idf (K1 + 1)``, and ``_max_score`` is the largest block score. The logarithm is
the C library's ``logf`` (pylance's float32 ``ln`` calls it; it is not correctly rounded, so a
float64 logarithm rounded to float32 differs in the last place now and then).

``_impacts`` (skip data): one entry per block, then one per group of 32 blocks (covering all their
documents). An entry is ``varint(last document id) varint(pair count)`` then the pairs of its
"impact frontier": for each frequency the shortest document having it, keeping only pairs no pair
of a higher frequency dominates (frequency and length both increase along the frontier); the
length is then quantized to one byte (the exact value below 8, else 4 significant bits and the
shift) and pairs with equal codes keep the higher frequency. Each pair is
``varint(((f - previous f - 1) << 1) | explicit)`` and, when the code does not rise by exactly 1
from the previous pair's (0 before the first), ``explicit`` is 1 and one byte with the rise
follows.

Positions (``with_position=True``, ``positions_layout`` ``shared_stream_v2``, ``positions_codec``
``packed_delta_v1``): ``_compressed_position`` holds one stream per token, the posting blocks'
position blocks one after the other, and ``_position_block_offset`` where each starts. A position
block lists, document after document, each document's positions as deltas (the first as is, then
the gap from the previous one); full groups of 128 deltas are bit-packed as above (width byte,
``16 * w`` bytes, no delta coding), the remaining deltas are varints.

:func:`decode_posting_list` and :func:`encode_posting_list` are the public, stable API (the
full-text builder and the remap use them); :func:`block_scores`, :func:`encode_impacts` and
:func:`renumber_impacts` are its parts; :func:`decode_positions` / :func:`encode_positions` the
position streams'. :func:`encode_postings` and :func:`encode_position_streams` encode every token
of a partition at once (the builder's path; numpy over all postings), byte for byte as those
token by token. Bad bytes raise :class:`~lance_ops.errors.CorruptFileError` (placeholder path
``"<posting>"``; callers name the file with :meth:`~lance_ops.errors.CorruptFileError.located`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
import pyarrow as pa

from lance_ops.errors import CorruptFileError, UnsupportedEncodingError

__all__ = [
    "BLOCK_SIZE",
    "B",
    "K1",
    "POSITIONS_PACKED_DELTA",
    "TAIL_FIXED32",
    "TAIL_VARINT_DELTA",
    "PostingRow",
    "average_length",
    "block_max_scores",
    "block_scores",
    "decode_positions",
    "decode_posting_list",
    "encode_impacts",
    "encode_position_streams",
    "encode_positions",
    "encode_posting_list",
    "encode_postings",
    "renumber_impacts",
    "idf",
    "quantize_doc_length",
]

BLOCK_SIZE = 128
IMPACT_GROUP_BLOCKS = 32
K1 = np.float32(1.2)
B = np.float32(0.75)
TAIL_VARINT_DELTA = "varint_delta_v1"
TAIL_FIXED32 = "fixed32_v1"
POSITIONS_PACKED_DELTA = "packed_delta_v1"
_TAIL_CODECS = (TAIL_VARINT_DELTA, TAIL_FIXED32)
_LANES = 4
_PLACE = "<posting>"


@dataclass(frozen=True)
class PostingRow:
    """The row values of one token in ``part_<p>_invert.lance``."""

    posting: list[bytes]
    max_score: np.float32
    length: int
    impacts: list[bytes]


def _corrupt(reason: str) -> CorruptFileError:
    return CorruptFileError(_PLACE, reason)


def _check_codec(tail_codec: str) -> None:
    if tail_codec not in _TAIL_CODECS:
        raise UnsupportedEncodingError(f"INVERTED posting tail codec {tail_codec!r} is not supported")


# ---------------------------------------------------------------------------------------------
# bit packing (BitPacker4x layout) and varints


def _unpack(data: bytes | memoryview, offset: int, width: int) -> tuple[np.ndarray, int]:
    """128 values of ``width`` bits at ``offset``; and the offset after them."""
    size = 16 * width
    if width > 32 or offset + size > len(data):
        raise _corrupt(f"bit-packed run of width {width} overruns its block")
    if width == 0:
        return np.zeros(BLOCK_SIZE, np.uint32), offset
    raw = np.frombuffer(data, np.uint8, size, offset).reshape(width, _LANES, 4)
    # per lane, its words' bytes in order: a little-endian bit stream of 32 values
    lanes = raw.transpose(1, 0, 2).reshape(_LANES, width * 4)
    bits = np.unpackbits(lanes, axis=1, bitorder="little").reshape(_LANES, 32, width)
    weights = np.left_shift(np.uint64(1), np.arange(width, dtype=np.uint64))
    values = (bits.astype(np.uint64) * weights).sum(axis=2, dtype=np.uint64)
    return values.T.reshape(BLOCK_SIZE).astype(np.uint32), offset + size


def _pack(values: np.ndarray) -> bytes:
    """The width byte and the packed run of 128 uint32 ``values``."""
    width = int(values.max()).bit_length() if len(values) else 0
    if width == 0:
        return b"\x00"
    lanes = values.astype(np.uint64).reshape(32, _LANES).T  # lane, k
    bits = ((lanes[:, :, None] >> np.arange(width, dtype=np.uint64)) & np.uint64(1)).astype(np.uint8)
    packed = np.packbits(bits.reshape(_LANES, 32 * width), axis=1, bitorder="little")
    body = packed.reshape(_LANES, width, 4).transpose(1, 0, 2).tobytes()
    return bytes([width]) + body


def _read_varints(data: bytes | memoryview, offset: int, count: int) -> tuple[np.ndarray, int]:
    """``count`` LEB128 varints (each at most 32 bits) from ``offset``; and the offset after."""
    if count == 0:
        return np.zeros(0, np.uint32), offset
    raw = np.frombuffer(data, np.uint8, len(data) - offset, offset)
    if len(raw) >= count and int(raw[:count].max()) < 0x80:  # the usual case: one byte each
        return raw[:count].astype(np.uint32), offset + count
    ends = np.flatnonzero(raw < 0x80)
    if len(ends) < count:
        raise _corrupt(f"posting tail holds fewer than {count} varints")
    stop = int(ends[count - 1]) + 1
    raw = raw[:stop]
    starts = np.concatenate(([0], ends[: count - 1] + 1))
    lengths = ends[:count] - starts + 1
    if lengths.max() > 5:
        raise _corrupt("varint longer than 5 bytes in a posting tail")
    position = np.arange(stop) - np.repeat(starts, lengths)
    parts = (raw & 0x7F).astype(np.uint64) << (7 * position).astype(np.uint64)
    values = np.bitwise_or.reduceat(parts, starts)
    if values.max() > 0xFFFFFFFF:
        raise _corrupt("varint over 32 bits in a posting tail")
    return values.astype(np.uint32), offset + stop


def _varints(values: np.ndarray) -> bytes:
    """``values`` (unsigned, below 2**35) as LEB128 varints."""
    if not len(values):
        return b""
    if int(values.max()) < 0x80:  # the usual case: one byte each
        return values.astype(np.uint8).tobytes()
    values = values.astype(np.uint64)
    nbytes = np.maximum(1, (_bit_lengths(values) + 6) // 7)
    owner = np.repeat(np.arange(len(values)), nbytes)
    position = np.arange(int(nbytes.sum())) - np.repeat(np.cumsum(nbytes) - nbytes, nbytes)
    out = (values[owner] >> (7 * position).astype(np.uint64)) & np.uint64(0x7F)
    more = position < (nbytes[owner] - 1)
    out = out | (more.astype(np.uint64) << np.uint64(7))
    return out.astype(np.uint8).tobytes()


def _bit_lengths(values: np.ndarray) -> np.ndarray:
    """Bit length of each unsigned value (0 for 0); exact below 2**53."""
    return np.frexp(np.asarray(values).astype(np.float64))[1].astype(np.int64)


# ---------------------------------------------------------------------------------------------
# decoding


def decode_posting_list(
    value: Sequence[bytes | None] | object,
    length: int,
    tail_codec: str = TAIL_VARINT_DELTA,
) -> tuple[np.ndarray, np.ndarray]:
    """The document ids and frequencies (both uint32) of one ``_posting`` value.

    ``value`` is the list of blocks (a ``pyarrow`` list scalar or any sequence of bytes);
    ``length`` the row's ``_length`` (the number of documents: it tells the tail block apart).
    """
    _check_codec(tail_codec)
    blocks = _blocks(value)
    full, tail = divmod(int(length), BLOCK_SIZE)
    if len(blocks) != full + (1 if tail else 0):
        raise _corrupt(f"{len(blocks)} posting blocks for {length} documents")
    ids = np.empty(int(length), np.uint32)
    freqs = np.empty(int(length), np.uint32)
    for index in range(full):
        start = index * BLOCK_SIZE
        ids[start : start + BLOCK_SIZE], freqs[start : start + BLOCK_SIZE] = _decode_full(blocks[index])
    if tail:
        ids[full * BLOCK_SIZE :], freqs[full * BLOCK_SIZE :] = _decode_tail(blocks[full], tail, tail_codec)
    return ids, freqs


def _blocks(value: object) -> list[bytes]:
    as_py = getattr(value, "as_py", None)
    items = as_py() if as_py is not None else value
    if items is None:
        raise _corrupt("null posting list")
    blocks = list(cast(Sequence[bytes], items))
    if any(b is None for b in blocks):
        raise _corrupt("null posting block")
    return blocks


def _decode_full(block: bytes) -> tuple[np.ndarray, np.ndarray]:
    if len(block) < 10:
        raise _corrupt("posting block shorter than its header")
    first = int.from_bytes(block[4:8], "little")
    deltas, offset = _unpack(block, 9, block[8])
    if offset >= len(block):
        raise _corrupt("posting block ends before its frequencies")
    freqs, offset = _unpack(block, offset + 1, block[offset])
    if offset != len(block):
        raise _corrupt(f"posting block has {len(block) - offset} trailing bytes")
    ids = np.cumsum(deltas, dtype=np.uint64) + np.uint64(first)
    if ids[-1] > 0xFFFFFFFF:
        raise _corrupt("document id over 32 bits in a posting block")
    return ids.astype(np.uint32), freqs


def _decode_tail(block: bytes, count: int, tail_codec: str) -> tuple[np.ndarray, np.ndarray]:
    if tail_codec == TAIL_FIXED32:
        if len(block) != 4 + 8 * count:
            raise _corrupt(f"fixed32 posting tail of {len(block)} bytes for {count} documents")
        values = np.frombuffer(block, "<u4", 2 * count, 4).astype(np.uint32)
        return values[:count].copy(), values[count:].copy()
    deltas, offset = _read_varints(block, 4, count)
    freqs, offset = _read_varints(block, offset, count)
    if offset != len(block):
        raise _corrupt(f"posting tail has {len(block) - offset} trailing bytes")
    ids = np.cumsum(deltas, dtype=np.uint64)
    if len(ids) and ids[-1] > 0xFFFFFFFF:
        raise _corrupt("document id over 32 bits in a posting tail")
    return ids.astype(np.uint32), freqs


def block_max_scores(value: Sequence[bytes] | object) -> np.ndarray:
    """The stored maximum score (float32) of each block of one ``_posting`` value."""
    return np.array([np.frombuffer(b, "<f4", 1)[0] for b in _blocks(value)], np.float32)


# ---------------------------------------------------------------------------------------------
# scores


def average_length(total_tokens: int, num_docs: int) -> np.float32:
    """``avgdl`` as pylance computes it: float32 total over float32 count."""
    return np.float32(np.float32(total_tokens) / np.float32(num_docs))


def idf(token_docs: int, num_docs: int) -> np.float32:
    """``ln(1 + (N - n + 0.5) / (n + 0.5))`` in float32 arithmetic (the logarithm rounded once)."""
    n = np.float32(num_docs)
    t = np.float32(token_docs)
    ratio = np.float32(np.float32(n - t + np.float32(0.5)) / np.float32(t + np.float32(0.5)))
    return _logf(np.float32(ratio + np.float32(1.0)))


@functools.cache
def _load_logf() -> Callable[[float], float] | None:
    """libm's ``logf``, looked up on first use (``find_library`` runs ``ldconfig``)."""
    name = ctypes.util.find_library("m")
    try:
        libm = ctypes.CDLL(name) if name else ctypes.CDLL(None)
        logf = libm.logf
    except (OSError, AttributeError):
        return None
    logf.restype = ctypes.c_float
    logf.argtypes = [ctypes.c_float]
    return cast(Callable[[float], float], logf)


def _logf(value: np.float32) -> np.float32:
    """The C library's ``logf``, which pylance's float32 ``ln`` calls (it is not correctly
    rounded, so a float64 logarithm would differ in the last place now and then)."""
    logf = _load_logf()
    if logf is not None:
        return np.float32(logf(float(value)))
    return np.log(np.float32(value))


def block_scores(
    doc_ids: np.ndarray,
    freqs: np.ndarray,
    doc_lengths: np.ndarray,
    total_tokens: int,
) -> np.ndarray:
    """Each block's maximum BM25 score (float32), ``doc_lengths`` being ``_num_tokens`` of every
    document of the partition (indexed by document id) and ``total_tokens`` its sum as stored."""
    num_docs = len(doc_lengths)
    avgdl = average_length(total_tokens, num_docs)
    scale = np.float32(idf(len(doc_ids), num_docs) * np.float32(K1 + np.float32(1.0)))
    lengths = np.asarray(doc_lengths)[doc_ids].astype(np.float32)
    f = np.asarray(freqs).astype(np.float32)
    norm = K1 * ((np.float32(1.0) - B) + (B * lengths) / avgdl)
    weights = (f / (f + norm)).astype(np.float32)
    starts = np.arange(0, len(doc_ids), BLOCK_SIZE)
    if not len(starts):
        return np.zeros(0, np.float32)
    return (np.maximum.reduceat(weights, starts) * scale).astype(np.float32)


# ---------------------------------------------------------------------------------------------
# impacts


def quantize_doc_length(values: np.ndarray) -> np.ndarray:
    """One-byte codes of document lengths: exact below 8, else the top 4 significant bits."""
    values = np.asarray(values, np.uint64)
    bits = _bit_lengths(values)
    shift = np.maximum(bits - 4, 0).astype(np.uint64)
    coded = ((values >> shift) & np.uint64(7)) | ((shift + np.uint64(1)) << np.uint64(3))
    return np.where(bits < 4, values, coded).astype(np.uint8)


def _quantized(value: int) -> int:
    """:func:`quantize_doc_length` of one length."""
    bits = value.bit_length()
    if bits < 4:
        return value
    shift = bits - 4
    return ((value >> shift) & 7) | ((shift + 1) << 3)


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _shortest_by_freq(freqs: np.ndarray, lengths: np.ndarray) -> list[tuple[int, int]]:
    """(frequency, shortest length among its documents), frequencies ascending."""
    if len(freqs) <= 16:
        best: dict[int, int] = {}
        for f, length in zip(freqs.tolist(), lengths.tolist(), strict=True):
            if length < best.get(f, length + 1):
                best[f] = length
        return sorted(best.items())
    order = np.lexsort((lengths, freqs))
    f, dl = freqs[order], lengths[order]
    first = np.flatnonzero(np.concatenate(([True], f[1:] != f[:-1])))
    return list(zip(f[first].tolist(), dl[first].tolist(), strict=True))


def _impact_entry(last_doc: int, freqs: np.ndarray, lengths: np.ndarray) -> bytes:
    pairs = _shortest_by_freq(freqs, lengths)
    # the frontier: a pair stays when every higher frequency needs a longer document
    frontier: list[tuple[int, int]] = []
    shortest = None
    for f, length in reversed(pairs):
        if shortest is None or length < shortest:
            frontier.append((f, length))
            shortest = length
    frontier.reverse()
    # quantized lengths; equal codes: the higher frequency stays
    codes = [_quantized(length) for _, length in frontier]
    merged: list[tuple[int, int]] = []
    for (f, _), code in zip(frontier, codes, strict=True):
        if merged and merged[-1][1] == code:
            merged[-1] = (f, code)
        else:
            merged.append((f, code))
    out = bytearray(_varint(last_doc) + _varint(len(merged)))
    previous_f = previous_code = 0
    for f, code in merged:
        rise = code - previous_code
        out += _varint(((f - previous_f - 1) << 1) | (rise != 1))
        if rise != 1:
            out.append(rise)
        previous_f, previous_code = f, code
    return bytes(out)


def encode_impacts(doc_ids: np.ndarray, freqs: np.ndarray, doc_lengths: np.ndarray) -> list[bytes]:
    """``_impacts`` of one token: an entry per block, then one per 32 blocks."""
    lengths = np.asarray(doc_lengths)[doc_ids]
    entries: list[bytes] = []
    groups: list[bytes] = []
    span = BLOCK_SIZE * IMPACT_GROUP_BLOCKS
    for start in range(0, len(doc_ids), BLOCK_SIZE):
        stop = min(start + BLOCK_SIZE, len(doc_ids))
        entries.append(_impact_entry(int(doc_ids[stop - 1]), freqs[start:stop], lengths[start:stop]))
    if len(entries) == 1:  # one block: its group entry is the same
        return entries * 2
    for start in range(0, len(doc_ids), span):
        stop = min(start + span, len(doc_ids))
        groups.append(_impact_entry(int(doc_ids[stop - 1]), freqs[start:stop], lengths[start:stop]))
    return entries + groups


def renumber_impacts(impacts: Sequence[bytes], doc_ids: np.ndarray) -> list[bytes]:
    """``_impacts`` of a token whose documents kept their frequencies and lengths but were
    renumbered to ``doc_ids``: only each entry's leading last-document varint changes."""
    n = len(doc_ids)
    blocks = -(-n // BLOCK_SIZE)
    if len(impacts) != blocks + -(-blocks // IMPACT_GROUP_BLOCKS):
        raise _corrupt(f"{len(impacts)} impact entries for {n} documents")
    lasts = [min(n, (i + 1) * BLOCK_SIZE) - 1 for i in range(blocks)]
    span = BLOCK_SIZE * IMPACT_GROUP_BLOCKS
    lasts += [min(n, (g + 1) * span) - 1 for g in range(-(-n // span))]
    out = []
    for entry, last in zip(impacts, lasts, strict=True):
        head = next((i + 1 for i, byte in enumerate(entry[:5]) if byte < 0x80), None)
        if head is None:
            raise _corrupt("impact entry without a last-document varint")
        out.append(_varint(int(doc_ids[last])) + entry[head:])
    return out


# ---------------------------------------------------------------------------------------------
# encoding


def _encode_blocks(
    doc_ids: np.ndarray, freqs: np.ndarray, scores: np.ndarray, tail_codec: str
) -> list[bytes]:
    blocks: list[bytes] = []
    for index, start in enumerate(range(0, len(doc_ids), BLOCK_SIZE)):
        ids = doc_ids[start : start + BLOCK_SIZE].astype(np.uint32)
        fr = freqs[start : start + BLOCK_SIZE].astype(np.uint32)
        head = np.float32(scores[index]).astype("<f4").tobytes()
        if len(ids) == BLOCK_SIZE:
            deltas = np.diff(ids.astype(np.int64), prepend=int(ids[0])).astype(np.uint32)
            blocks.append(head + int(ids[0]).to_bytes(4, "little") + _pack(deltas) + _pack(fr))
        elif tail_codec == TAIL_FIXED32:
            blocks.append(head + ids.astype("<u4").tobytes() + fr.astype("<u4").tobytes())
        else:
            tail_deltas = np.diff(ids.astype(np.int64), prepend=0)
            blocks.append(head + _varints(tail_deltas) + _varints(fr))
    return blocks


def encode_posting_list(
    doc_ids: np.ndarray,
    freqs: np.ndarray,
    doc_lengths: np.ndarray,
    total_tokens: int | None = None,
    *,
    tail_codec: str = TAIL_VARINT_DELTA,
    impacts: Sequence[bytes] | None = None,
) -> PostingRow:
    """The ``_posting``, ``_max_score``, ``_length`` and ``_impacts`` values of one token.

    ``doc_ids`` ascending (uint32), ``freqs`` (>= 1) the token's count in each; ``doc_lengths``
    the ``_num_tokens`` column of the partition's docs file (every document, indexed by document
    id) and ``total_tokens`` its ``total_tokens`` metadata (default: the sum of ``doc_lengths``).
    ``impacts``: the token's ``_impacts`` when only its document numbers changed (see
    :func:`renumber_impacts`), else they are computed.
    """
    _check_codec(tail_codec)
    doc_ids = np.asarray(doc_ids, np.uint32)
    freqs = np.asarray(freqs, np.uint32)
    doc_lengths = np.asarray(doc_lengths, np.uint32)
    if len(doc_ids) != len(freqs) or not len(doc_ids):
        raise ValueError("a posting list needs as many frequencies as documents, and at least one")
    if len(doc_ids) > 1 and not (np.diff(doc_ids.astype(np.int64)) > 0).all():
        raise ValueError("posting list document ids must be strictly ascending")
    if int(doc_ids[-1]) >= len(doc_lengths):
        raise ValueError(f"document id {int(doc_ids[-1])} beyond the {len(doc_lengths)} documents")
    if total_tokens is None:
        total_tokens = int(doc_lengths.sum(dtype=np.uint64))
    scores = block_scores(doc_ids, freqs, doc_lengths, total_tokens)
    return PostingRow(
        posting=_encode_blocks(doc_ids, freqs, scores, tail_codec),
        max_score=np.float32(scores.max()),
        length=len(doc_ids),
        impacts=encode_impacts(doc_ids, freqs, doc_lengths)
        if impacts is None
        else renumber_impacts(impacts, doc_ids),
    )


# ---------------------------------------------------------------------------------------------
# positions (shared stream, packed deltas)


def _doc_starts(freqs: np.ndarray) -> np.ndarray:
    return np.concatenate(([0], np.cumsum(freqs.astype(np.int64))))


def decode_positions(stream: bytes, block_offsets: Sequence[int], freqs: np.ndarray) -> np.ndarray:
    """Every document's positions (uint32), documents in posting order: document ``i``'s are
    ``positions[s[i]:s[i + 1]]`` with ``s`` the running sum of ``freqs`` from 0."""
    freqs = np.asarray(freqs, np.int64)
    bounds = [*(int(o) for o in block_offsets), len(stream)]
    if len(bounds) - 1 != -(-len(freqs) // BLOCK_SIZE) or (np.diff(bounds) < 0).any():
        raise _corrupt(f"{len(bounds) - 1} position blocks for {len(freqs)} documents")
    deltas = []
    for index in range(len(bounds) - 1):
        block = memoryview(stream)[bounds[index] : bounds[index + 1]]
        count = int(freqs[index * BLOCK_SIZE : (index + 1) * BLOCK_SIZE].sum())
        offset = 0
        for _ in range(count // BLOCK_SIZE):
            if offset >= len(block):
                raise _corrupt("position block ends before its packed deltas")
            group, offset = _unpack(block, offset + 1, block[offset])
            deltas.append(group)
        tail, offset = _read_varints(block, offset, count % BLOCK_SIZE)
        if offset != len(block):
            raise _corrupt(f"position block has {len(block) - offset} trailing bytes")
        deltas.append(tail)
    flat = np.concatenate(deltas).astype(np.int64) if deltas else np.zeros(0, np.int64)
    starts = _doc_starts(freqs)[:-1]
    # positions restart at each document: a running sum reset at the document starts
    total = np.cumsum(flat)
    base = np.repeat(total[starts] - flat[starts], freqs) if len(flat) else flat
    positions = total - base
    if len(positions) and positions.max() > 0xFFFFFFFF:
        raise _corrupt("position over 32 bits")
    return positions.astype(np.uint32)


def encode_positions(positions: np.ndarray, freqs: np.ndarray) -> tuple[bytes, list[int]]:
    """``_compressed_position`` and ``_position_block_offset`` of one token (see
    :func:`decode_positions` for the arguments; each document's positions ascending)."""
    freqs = np.asarray(freqs, np.int64)
    positions = np.asarray(positions, np.int64)
    starts = _doc_starts(freqs)
    if starts[-1] != len(positions):
        raise ValueError(f"{len(positions)} positions for frequencies summing to {int(starts[-1])}")
    deltas = np.diff(positions, prepend=0)
    first = starts[:-1][freqs > 0]
    deltas[first] = positions[first]
    if (deltas < 0).any():
        raise ValueError("positions must ascend within a document")
    stream = bytearray()
    offsets: list[int] = []
    for start in range(0, len(freqs), BLOCK_SIZE):
        offsets.append(len(stream))
        block = deltas[starts[start] : starts[min(start + BLOCK_SIZE, len(freqs))]]
        full = len(block) // BLOCK_SIZE * BLOCK_SIZE
        for group in range(0, full, BLOCK_SIZE):
            stream += _pack(block[group : group + BLOCK_SIZE].astype(np.uint32))
        stream += _varints(block[full:])
    return bytes(stream), offsets


# ---------------------------------------------------------------------------------------------
# every token of a partition at once (the builder's path)
#
# The same bytes as :func:`encode_posting_list` token after token, computed with numpy over all
# postings: blocks and impact entries are segments of the (term, document)-sorted postings, their
# bytes are laid out in one buffer per column (Arrow offsets, no Python object per block).

_PACK_CHUNK = 4096  # blocks packed at once (bounds the bit matrix: 4096 x 128 x width bytes)


def _varint_stream(values: np.ndarray, raw: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """LEB128 bytes of ``values`` one after the other, and each value's byte count; where ``raw``
    is set the value is one plain byte instead (below 256)."""
    values = np.asarray(values, np.uint64)
    nbytes = np.maximum(1, (_bit_lengths(values) + 6) // 7)
    if raw is not None:
        nbytes[raw] = 1
    owner = np.repeat(np.arange(len(values)), nbytes)
    starts = np.cumsum(nbytes) - nbytes
    position = np.arange(int(nbytes.sum())) - np.repeat(starts, nbytes)
    out = (values[owner] >> (7 * position).astype(np.uint64)) & np.uint64(0x7F)
    out |= (position < (nbytes[owner] - 1)).astype(np.uint64) << np.uint64(7)
    if raw is not None and raw.any():
        out[starts[raw]] = values[raw]
    return out.astype(np.uint8), nbytes


def _scatter(out: np.ndarray, starts: np.ndarray, rows: np.ndarray) -> None:
    """``out[starts[i] : starts[i] + rows.shape[1]] = rows[i]`` for every ``i``."""
    if len(starts):
        out[starts[:, None] + np.arange(rows.shape[1])] = rows


def _pack_rows(values: np.ndarray, width: int) -> np.ndarray:
    """:func:`_pack` of each row of ``values`` (k x 128) without its width byte: k x 16*width."""
    k = len(values)
    lanes = values.astype(np.uint32).reshape(k, 32, _LANES).transpose(0, 2, 1)  # block, lane, i
    bits = ((lanes[..., None] >> np.arange(width, dtype=np.uint32)) & np.uint32(1)).astype(np.uint8)
    packed = np.packbits(bits.reshape(k, _LANES, 32 * width), axis=2, bitorder="little")
    return packed.reshape(k, _LANES, width, 4).transpose(0, 2, 1, 3).reshape(k, 16 * width)


def _place_packed(
    out: np.ndarray, at: np.ndarray, values: np.ndarray, starts: np.ndarray, widths: np.ndarray
) -> None:
    """Pack the 128 ``values`` from ``starts[i]`` at ``out[at[i]:]`` with width ``widths[i]``."""
    for width in np.unique(widths[widths > 0]).tolist():
        chosen = np.flatnonzero(widths == width)
        for lo in range(0, len(chosen), _PACK_CHUNK):
            part = chosen[lo : lo + _PACK_CHUNK]
            rows = values[starts[part][:, None] + np.arange(BLOCK_SIZE)]
            _scatter(out, at[part], _pack_rows(rows, width))


def _idf_all(token_docs: np.ndarray, num_docs: int) -> np.ndarray:
    """:func:`idf` of each count (float32; the C ``logf`` once per distinct count)."""
    distinct, inverse = np.unique(token_docs, return_inverse=True)
    n = np.float32(num_docs)
    t = distinct.astype(np.float32)
    ratio = ((n - t + np.float32(0.5)) / (t + np.float32(0.5))).astype(np.float32)
    logs = np.array([_logf(np.float32(r + np.float32(1.0))) for r in ratio.tolist()], np.float32)
    return logs[inverse]


def _sorted_triples(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(a, b, c)`` (non-negative int64) sorted by ``a``, then ``b``, then ``c``: one sort of a
    packed key when the three fit in 63 bits, else a lexsort."""
    if not len(a):
        return a, b, c
    width_b, width_c = int(b.max()).bit_length(), int(c.max()).bit_length()
    if int(a.max()).bit_length() + width_b + width_c > 63:
        order = np.lexsort((c, b, a))
        return a[order], b[order], c[order]
    key = np.sort((a << (width_b + width_c)) | (b << width_c) | c)
    return key >> (width_b + width_c), (key >> width_c) & ((1 << width_b) - 1), key & ((1 << width_c) - 1)


def _impact_entries(
    segment: np.ndarray, freqs: np.ndarray, lengths: np.ndarray, last_doc: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_impact_entry` of every segment ``0 .. len(last_doc) - 1`` (``segment`` names each
    posting's): the entries' bytes one after the other, and each entry's size."""
    s, f, dl = _sorted_triples(segment, np.asarray(freqs, np.int64), np.asarray(lengths, np.int64))
    first = np.concatenate(([True], (s[1:] != s[:-1]) | (f[1:] != f[:-1])))  # shortest per frequency
    s, f, dl = s[first], f[first], dl[first]
    # the frontier: from the highest frequency down, a pair stays when shorter than all above it
    keyed = (dl + s * (1 << 33))[::-1]
    running = np.minimum.accumulate(keyed)
    above = np.concatenate(([np.iinfo(np.int64).max], running[:-1]))
    stays = (keyed < above)[::-1]
    s, f, code = s[stays], f[stays], quantize_doc_length(dl[stays]).astype(np.int64)
    # equal codes: the higher frequency stays
    last_of_code = np.concatenate(((s[1:] != s[:-1]) | (code[1:] != code[:-1]), [True]))
    s, f, code = s[last_of_code], f[last_of_code], code[last_of_code]
    opens = np.concatenate(([True], s[1:] != s[:-1]))
    previous_f = np.where(opens, 0, np.roll(f, 1))
    rise = code - np.where(opens, 0, np.roll(code, 1))
    explicit = rise != 1
    pairs = np.bincount(s, minlength=len(last_doc))
    # tokens of each entry: last document, pair count, then per pair its varint (and rise byte)
    per_pair = 1 + explicit.astype(np.int64)
    tokens = 2 + np.bincount(s, weights=per_pair, minlength=len(last_doc)).astype(np.int64)
    base = np.cumsum(tokens) - tokens
    values = np.empty(int(tokens.sum()), np.uint64)
    raw = np.zeros(len(values), bool)
    values[base] = last_doc
    values[base + 1] = pairs
    before = np.cumsum(per_pair) - per_pair  # tokens of the earlier pairs (all segments)
    seg_first = np.searchsorted(s, s)  # index of the first pair of each pair's segment
    at = base[s] + 2 + before - before[seg_first]
    values[at] = ((f - previous_f - 1) << 1) | explicit
    values[at[explicit] + 1] = rise[explicit]
    raw[at[explicit] + 1] = True
    data, nbytes = _varint_stream(values, raw)
    return data, np.add.reduceat(nbytes, base)


def _list_of_binaries(data: np.ndarray, sizes: np.ndarray, list_offsets: np.ndarray) -> pa.Array:
    offsets = np.concatenate(([0], np.cumsum(sizes, dtype=np.int64)))
    items = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(sizes), [None, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(data))]
    )
    return pa.ListArray.from_arrays(pa.array(list_offsets, pa.int32()), items)


def encode_postings(
    term: np.ndarray,
    doc: np.ndarray,
    freq: np.ndarray,
    doc_lengths: np.ndarray,
    total_tokens: int,
    num_terms: int,
) -> tuple[pa.Array, pa.Array, pa.Array, pa.Array]:
    """The ``_posting``, ``_max_score``, ``_length`` and ``_impacts`` columns of a partition's
    tokens ``0 .. num_terms - 1`` (each in at least one document) from its postings sorted by
    term then document (``varint_delta_v1`` tails): :func:`encode_posting_list` of every token,
    byte for byte, computed at once."""
    term = np.asarray(term, np.int64)
    doc = np.asarray(doc, np.int64)
    freq = np.asarray(freq, np.int64)
    doc_lengths = np.asarray(doc_lengths, np.uint32)
    n = len(term)
    if not num_terms:
        empty = pa.array([], pa.list_(pa.large_binary()))
        return empty, pa.array([], pa.float32()), pa.array([], pa.uint32()), empty
    counts = np.bincount(term, minlength=num_terms).astype(np.int64)
    if (counts == 0).any():
        raise ValueError("every token needs at least one document")
    term_start = np.concatenate(([0], np.cumsum(counts)))
    rank = np.arange(n, dtype=np.int64) - term_start[term]
    block_start = np.flatnonzero(rank % BLOCK_SIZE == 0)
    block_len = np.diff(np.append(block_start, n))
    blocks_per_term = -(-counts // BLOCK_SIZE)
    term_blocks = np.concatenate(([0], np.cumsum(blocks_per_term)))
    num_blocks = len(block_start)

    # scores (as block_scores, token after token)
    avgdl = average_length(total_tokens, len(doc_lengths))
    lengths = doc_lengths[doc]
    f32 = freq.astype(np.float32)
    norm = K1 * ((np.float32(1.0) - B) + (B * lengths.astype(np.float32)) / avgdl)
    weights = (f32 / (f32 + norm)).astype(np.float32)
    scale = (_idf_all(counts, len(doc_lengths)) * np.float32(K1 + np.float32(1.0))).astype(np.float32)
    block_term = term[block_start]
    scores = (
        (np.maximum.reduceat(weights, block_start) * scale[block_term]).astype(np.float32) if n else weights
    )
    max_scores = np.maximum.reduceat(scores, term_blocks[:-1]) if num_terms else scores

    # posting blocks: score, then (full) first id, packed deltas, packed frequencies, or (tail) varints
    full = block_len == BLOCK_SIZE
    deltas = np.diff(doc, prepend=0)
    deltas[block_start[full]] = 0
    deltas[block_start[~full]] = doc[block_start[~full]]
    width_d = _bit_lengths(np.maximum.reduceat(deltas, block_start))
    width_f = _bit_lengths(np.maximum.reduceat(freq, block_start))
    in_tail = ~full[np.repeat(np.arange(num_blocks), block_len)]
    tail_blocks = np.flatnonzero(~full)
    tail_len = block_len[tail_blocks]
    # per tail block: its deltas then its frequencies
    tail_values = np.empty(2 * int(tail_len.sum()), np.uint64)
    tail_first = np.cumsum(2 * tail_len) - 2 * tail_len
    slot = np.repeat(tail_first, tail_len) + (rank[in_tail] % BLOCK_SIZE)
    tail_values[slot] = deltas[in_tail]
    tail_values[slot + np.repeat(tail_len, tail_len)] = freq[in_tail]
    tail_data, tail_nbytes = _varint_stream(tail_values)
    tail_sizes = np.add.reduceat(tail_nbytes, tail_first) if len(tail_first) else np.zeros(0, np.int64)
    sizes = np.where(full, 10 + 16 * (width_d + width_f), 4)
    sizes[tail_blocks] += tail_sizes
    offsets = np.cumsum(sizes) - sizes
    out = np.zeros(int(sizes.sum()), np.uint8)
    _scatter(out, offsets, scores.astype("<f4").view(np.uint8).reshape(num_blocks, 4))
    whole = np.flatnonzero(full)
    at = offsets[whole]
    _scatter(out, at + 4, doc[block_start[whole]].astype("<u4").view(np.uint8).reshape(len(whole), 4))
    out[at + 8] = width_d[whole]
    out[at + 9 + 16 * width_d[whole]] = width_f[whole]
    _place_packed(out, at + 9, deltas, block_start[whole], width_d[whole])
    _place_packed(out, at + 10 + 16 * width_d[whole], freq, block_start[whole], width_f[whole])
    if len(tail_blocks):
        tail_at = offsets[tail_blocks] + 4
        starts = np.cumsum(tail_sizes) - tail_sizes
        out[np.repeat(tail_at - starts, tail_sizes) + np.arange(len(tail_data))] = tail_data
    posting = _list_of_binaries(out, sizes, term_blocks)

    # impacts: per token its block entries, then one per 32 blocks; segments numbered in that order
    groups_per_term = -(-blocks_per_term // IMPACT_GROUP_BLOCKS)
    entries_per_term = blocks_per_term + groups_per_term
    term_entries = np.concatenate(([0], np.cumsum(entries_per_term)))
    block_segment = term_entries[term] + rank // BLOCK_SIZE
    group_segment = term_entries[term] + blocks_per_term[term] + rank // (BLOCK_SIZE * IMPACT_GROUP_BLOCKS)
    segment = np.concatenate((block_segment, group_segment))
    last_doc = np.zeros(int(term_entries[-1]), np.int64)
    for segments in (block_segment, group_segment):  # ascending: a segment's last posting has its last doc
        ends = np.flatnonzero(np.append(segments[1:] != segments[:-1], True))
        last_doc[segments[ends]] = doc[ends]
    data, entry_sizes = _impact_entries(
        segment, np.concatenate((freq, freq)), np.concatenate((lengths, lengths)), last_doc
    )
    impacts = _list_of_binaries(data, entry_sizes, term_entries)
    return posting, pa.array(max_scores, pa.float32()), pa.array(counts, pa.uint32()), impacts


def _place_runs(out: np.ndarray, at: np.ndarray, data: np.ndarray, sizes: np.ndarray) -> None:
    """Copy the runs of ``data`` (``sizes`` bytes each, one after the other) to ``out[at[i]:]``."""
    starts = np.cumsum(sizes) - sizes
    out[np.repeat(at - starts, sizes) + np.arange(len(data))] = data


def encode_position_streams(
    term: np.ndarray, freq: np.ndarray, positions: np.ndarray, num_terms: int
) -> tuple[pa.Array, pa.Array]:
    """The ``_compressed_position`` and ``_position_block_offset`` columns of a partition's tokens
    (postings sorted by term then document, each posting's positions ascending, one posting after
    the other): :func:`encode_positions` of every token, byte for byte, computed at once."""
    term = np.asarray(term, np.int64)
    freq = np.asarray(freq, np.int64)
    positions = np.asarray(positions, np.int64)
    counts = np.bincount(term, minlength=num_terms).astype(np.int64)
    term_start = np.concatenate(([0], np.cumsum(counts)))
    rank = np.arange(len(term), dtype=np.int64) - term_start[term]
    block_start = np.flatnonzero(rank % BLOCK_SIZE == 0)
    term_blocks = np.concatenate(([0], np.cumsum(-(-counts // BLOCK_SIZE))))
    doc_start = _doc_starts(freq)
    if doc_start[-1] != len(positions):
        raise ValueError(f"{len(positions)} positions for frequencies summing to {int(doc_start[-1])}")
    deltas = np.diff(positions, prepend=0)
    deltas[doc_start[:-1]] = positions[doc_start[:-1]]
    if (deltas < 0).any():
        raise ValueError("positions must ascend within a document")
    # each block: its positions' deltas, full groups of 128 bit-packed, the rest varints
    first = doc_start[block_start]
    count = np.diff(np.append(first, len(positions)))
    groups = count // BLOCK_SIZE
    group_block = np.repeat(np.arange(len(block_start)), groups)
    group_first = first[group_block] + BLOCK_SIZE * (
        np.arange(len(group_block)) - np.repeat(np.cumsum(groups) - groups, groups)
    )
    widths = (
        _bit_lengths(deltas[group_first[:, None] + np.arange(BLOCK_SIZE)].max(axis=1))
        if len(group_first)
        else group_first
    )
    rest_first = first + BLOCK_SIZE * groups
    rest_len = first + count - rest_first
    in_rest = np.repeat(rest_first, rest_len) + (
        np.arange(int(rest_len.sum())) - np.repeat(np.cumsum(rest_len) - rest_len, rest_len)
    )
    rest_data, rest_nbytes = _varint_stream(deltas[in_rest])
    run_sizes = np.bincount(
        np.repeat(np.arange(len(block_start)), rest_len), weights=rest_nbytes, minlength=len(block_start)
    ).astype(np.int64)
    group_sizes = 1 + 16 * widths
    group_bytes = np.bincount(group_block, weights=group_sizes, minlength=len(block_start)).astype(np.int64)
    sizes = group_bytes + run_sizes
    block_at = np.cumsum(sizes) - sizes
    out = np.zeros(int(sizes.sum()), np.uint8)
    if len(group_first):
        group_at = (
            block_at[group_block]
            + (np.cumsum(group_sizes) - group_sizes)
            - np.repeat(np.cumsum(group_bytes) - group_bytes, groups)
        )
        out[group_at] = widths
        _place_packed(out, group_at + 1, deltas, group_first, widths)
    _place_runs(out, block_at + group_bytes, rest_data, run_sizes)
    term_at = block_at[term_blocks[:-1]] if num_terms else np.zeros(0, np.int64)
    stream_offsets = np.append(term_at, len(out)).astype(np.int64)
    streams = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), num_terms, [None, pa.py_buffer(stream_offsets), pa.py_buffer(out)]
    )
    block_term = term[block_start]
    relative = (
        (block_at - term_at[block_term]).astype(np.uint32) if len(block_start) else block_at.astype(np.uint32)
    )
    offsets = pa.ListArray.from_arrays(pa.array(term_blocks, pa.int32()), pa.array(relative, pa.uint32()))
    return streams, offsets
