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

:func:`decode_posting_list` and :func:`encode_posting_list` are the public, stable API (the
full-text builder and the remap use them); :func:`block_scores` and :func:`encode_impacts` are
its parts. Bad bytes raise :class:`~lance_ops.errors.CorruptFileError` (placeholder path
``"<posting>"``; callers name the file with :meth:`~lance_ops.errors.CorruptFileError.located`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np

from lance_ops.errors import CorruptFileError, UnsupportedEncodingError

__all__ = [
    "BLOCK_SIZE",
    "B",
    "K1",
    "TAIL_FIXED32",
    "TAIL_VARINT_DELTA",
    "PostingRow",
    "average_length",
    "block_scores",
    "decode_posting_list",
    "encode_impacts",
    "encode_posting_list",
    "idf",
    "quantize_doc_length",
]

BLOCK_SIZE = 128
IMPACT_GROUP_BLOCKS = 32
K1 = np.float32(1.2)
B = np.float32(0.75)
TAIL_VARINT_DELTA = "varint_delta_v1"
TAIL_FIXED32 = "fixed32_v1"
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
    values = values.astype(np.uint64)
    if not len(values):
        return b""
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


def _load_logf() -> Callable[[float], float] | None:
    name = ctypes.util.find_library("m")
    try:
        libm = ctypes.CDLL(name) if name else ctypes.CDLL(None)
        logf = libm.logf
    except (OSError, AttributeError):
        return None
    logf.restype = ctypes.c_float
    logf.argtypes = [ctypes.c_float]
    return cast(Callable[[float], float], logf)


_LIBM_LOGF = _load_logf()


def _logf(value: np.float32) -> np.float32:
    """The C library's ``logf``, which pylance's float32 ``ln`` calls (it is not correctly
    rounded, so a float64 logarithm would differ in the last place now and then)."""
    if _LIBM_LOGF is not None:
        return np.float32(_LIBM_LOGF(float(value)))
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


def _impact_entry(last_doc: int, freqs: np.ndarray, lengths: np.ndarray) -> bytes:
    order = np.argsort(freqs, kind="stable")
    f, dl = freqs[order].astype(np.int64), lengths[order].astype(np.int64)
    starts = np.flatnonzero(np.concatenate(([True], f[1:] != f[:-1])))
    f, dl = f[starts], np.minimum.reduceat(dl, starts)
    # keep a pair when every higher frequency needs a longer document
    after = np.concatenate((np.minimum.accumulate(dl[::-1])[::-1][1:], [np.iinfo(np.int64).max]))
    keep = dl < after
    f, codes = f[keep], quantize_doc_length(dl[keep]).astype(np.int64)
    # equal codes: the higher frequency stays
    last_of_code = np.concatenate((codes[1:] != codes[:-1], [True]))
    f, codes = f[last_of_code], codes[last_of_code]
    freq_deltas = np.diff(f, prepend=0) - 1
    code_deltas = np.diff(codes, prepend=0)
    explicit = code_deltas != 1
    packed = (freq_deltas.astype(np.uint64) << np.uint64(1)) | explicit.astype(np.uint64)
    out = bytearray(_varints(np.array([last_doc, len(f)], np.uint64)))
    if not explicit.any():
        out += _varints(packed)
        return bytes(out)
    for value, extra, delta in zip(packed.tolist(), explicit.tolist(), code_deltas.tolist(), strict=True):
        out += _varints(np.array([value], np.uint64))
        if extra:
            out.append(delta)
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
    for start in range(0, len(doc_ids), span):
        stop = min(start + span, len(doc_ids))
        groups.append(_impact_entry(int(doc_ids[stop - 1]), freqs[start:stop], lengths[start:stop]))
    return entries + groups


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
) -> PostingRow:
    """The ``_posting``, ``_max_score``, ``_length`` and ``_impacts`` values of one token.

    ``doc_ids`` ascending (uint32), ``freqs`` (>= 1) the token's count in each; ``doc_lengths``
    the ``_num_tokens`` column of the partition's docs file (every document, indexed by document
    id) and ``total_tokens`` its ``total_tokens`` metadata (default: the sum of ``doc_lengths``).
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
        impacts=encode_impacts(doc_ids, freqs, doc_lengths),
    )
