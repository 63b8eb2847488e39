"""Building an NGRAM index (pylance 14's ``create_scalar_index(column, "NGRAM")``).

The file is ``ngram_postings.lance`` (layout in :mod:`lance_ops.index.bitmap`): one row per
trigram token, tokens ascending, each with the 64-bit portable Roaring bitmap of the row ids
holding it. Observed in pylance 14's files and query behaviour:

* a value is lower-cased, then folded to ASCII (``"Crème"`` -> ``"creme"``, ``"ß"`` -> ``"ss"``);
* its trigrams are taken over characters and only those of three ASCII letters or digits are
  kept (``"x-yz9"`` gives ``"yz9"`` only);
* a trigram ``c1 c2 c3`` is the token ``37² * p(c1) + 37 * p(c2) + p(c3)`` where ``p`` is 1..10
  for ``0``..``9`` and 11..36 for ``a``..``z``;
* a null value is recorded under token ``0``; an empty or short value gives no token.

Folding is Unicode compatibility decomposition with the combining marks (and the fraction slash)
dropped, plus the few letters pylance folds that have no decomposition (``"ß"`` -> ``"ss"``,
``"ø"`` -> ``"o"``, ``"℃"`` -> ``"C"``, ...); any other non-ASCII character breaks trigrams, as
in pylance. Checked character by character against pylance 14's own index over Latin-1, the Latin
extensions, IPA, letter-like symbols, number forms, enclosed and full-width forms (the test
suite's sweep). pylance answers ``contains(column, s)`` by intersecting the sets of ``s``'s
trigrams and rechecking the rows, and answers "no rows" when a trigram has no entry: a trigram
missing from the index would lose rows, an extra one only widens what pylance rechecks.
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_ops.errors import IndexColumnTypeError, IndexCorruptError
from lance_ops.index.files import IndexWriter, RemapResult, read_index_file
from lance_ops.index.treemap import decode_bitmap64, encode_bitmap64
from lance_ops.io.context import StorageContext
from lance_ops.table.manifest import IndexMetadata

__all__ = ["NGRAM_FILE", "check_ngram_column", "fold_text", "ngram_postings", "ngram_tokens", "write_ngram"]

NGRAM_FILE = "ngram_postings.lance"
_SPAN = 37
# Characters pylance folds that Unicode does not decompose (or decomposes differently), as
# observed in its index.
_FOLDS = {
    "ß": "ss",
    "æ": "ae",
    "œ": "oe",
    "ø": "o",
    "đ": "d",
    "ð": "d",
    "þ": "th",
    "ł": "l",
    "ı": "i",
    "ħ": "h",
    "ŧ": "t",
    "ŋ": "n",
    "ĸ": "k",
    "½": "12",
    "¼": "14",
    "¾": "34",
    "ŀ": "l",
    "ŉ": "n",
    "℃": "C",
    "℉": "F",
    "ℏ": "h",
    "ᴭ": "AE",
    "ꟸ": "H",
    "\ua7f1": "S",
    "ẚ": "a",
    "ſ": "s",
}
_EXTRA_FOLDS = str.maketrans(_FOLDS)


def _code_table() -> np.ndarray:
    table = np.zeros(256, dtype=np.uint32)
    table[np.frombuffer(b"0123456789", np.uint8)] = np.arange(1, 11, dtype=np.uint32)
    table[np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", np.uint8)] = np.arange(11, 37, dtype=np.uint32)
    # Upper-case letters only appear when folding yields them ("ℂ" -> "C"); pylance's position
    # arithmetic wraps around in 8 bits for them: "A" -> 235, ..., "Z" -> 4.
    upper = np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ", np.uint8).astype(np.int64)
    table[upper] = ((upper - ord("a") + 11) % 256).astype(np.uint32)
    return table


_CODES = _code_table()
_ALNUM = np.zeros(256, dtype=bool)
_ALNUM[np.frombuffer(b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", np.uint8)] = True


def check_ngram_column(column: str, value_type: pa.DataType) -> pa.DataType:
    """NGRAM indexes strings only (as pylance 14); IndexColumnTypeError otherwise."""
    if pa.types.is_string(value_type) or pa.types.is_large_string(value_type):
        return value_type
    raise IndexColumnTypeError(f"NGRAM index column {column} must be a string, got {value_type}", column)


@functools.lru_cache(maxsize=4096)
def _fold_char(c: str) -> str:
    """One lower-cased character folded: a decomposable one loses its marks (and fraction slash);
    a character that is itself a combining mark, or has no decomposition, stays (a breaker)."""
    if c in _FOLDS:
        return _FOLDS[c]
    decomposed = unicodedata.normalize("NFKD", c)
    if decomposed == c:
        return c
    kept = "".join(d for d in decomposed if not unicodedata.combining(d) and d != "\u2044")
    return kept.translate(_EXTRA_FOLDS)


def _fold_one(text: str) -> str:
    return "".join(map(_fold_char, text.lower()))


def fold_text(values: pa.Array) -> pa.LargeStringArray:
    """``values`` lower-cased and folded to ASCII (nulls kept). ASCII values go through Arrow's
    kernels; only values with other characters are folded one by one."""
    values = values.cast(pa.large_string())
    lowered = pc.utf8_lower(values)
    ascii_mask = pc.fill_null(pc.string_is_ascii(values), True)
    if pc.all(ascii_mask).as_py() is not False:
        return lowered
    others = np.flatnonzero(~np.asarray(ascii_mask, dtype=bool))
    texts = lowered.to_pylist()
    for i in others:
        texts[i] = _fold_one(values[int(i)].as_py())
    return pa.array(texts, pa.large_string())


def ngram_tokens(values: pa.Array, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every (token, row id) pair of ``values`` (one value per id), nulls under token 0; pairs may
    repeat."""
    folded = fold_text(values)
    valid = np.asarray(folded.is_valid(), dtype=bool)
    buffers = folded.buffers()
    offsets = np.frombuffer(buffers[1], np.int64)[folded.offset : folded.offset + len(folded) + 1]
    data = buffers[2]
    raw = np.empty(0, np.uint8) if data is None else np.frombuffer(data, np.uint8)[offsets[0] : offsets[-1]]
    codes = _CODES[raw]
    lengths = np.diff(offsets)
    row = np.repeat(np.arange(len(folded), dtype=np.int64), lengths)
    if codes.size >= 3:
        c0, c1, c2 = codes[:-2], codes[1:-1], codes[2:]
        keep = (_ALNUM[raw[:-2]] & _ALNUM[raw[1:-1]] & _ALNUM[raw[2:]]) & (row[:-2] == row[2:])
        tokens = (c0 * _SPAN * _SPAN + c1 * _SPAN + c2)[keep]
        owners = row[:-2][keep]
    else:
        tokens, owners = np.empty(0, np.uint32), np.empty(0, np.int64)
    nulls = np.flatnonzero(~valid)
    tokens = np.concatenate([np.zeros(nulls.size, np.uint32), tokens.astype(np.uint32)])
    owners = np.concatenate([nulls, owners])
    return tokens, np.asarray(ids, dtype=np.uint64)[owners]


def ngram_postings(tokens: np.ndarray, ids: np.ndarray) -> pa.Table:
    """The ``ngram_postings.lance`` rows: distinct tokens ascending and their row-id sets."""
    order = np.lexsort((ids, tokens))
    tokens, ids = tokens[order], ids[order]
    first = np.ones(tokens.size, dtype=bool)
    first[1:] = (tokens[1:] != tokens[:-1]) | (ids[1:] != ids[:-1])
    tokens, ids = tokens[first], ids[first]
    starts = np.flatnonzero(np.r_[True, tokens[1:] != tokens[:-1]]) if tokens.size else np.empty(0, np.int64)
    bounds = np.r_[starts, tokens.size]
    sets = [encode_bitmap64(ids[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    schema = pa.schema(
        [
            pa.field("tokens", pa.uint32()),
            pa.field(
                "posting_list", pa.binary(), nullable=False, metadata={"lance-encoding:compression": "none"}
            ),
        ]
    )
    return pa.table([pa.array(tokens[starts], pa.uint32()), pa.array(sets, pa.binary())], schema=schema)


def write_ngram(
    ctx: StorageContext,
    template: IndexMetadata,
    values: pa.Array,
    ids: np.ndarray,
    merged: Sequence[IndexMetadata] = (),
) -> RemapResult:
    """Write an NGRAM index of ``values`` (keyed by ``ids``: row ids) as ``template``, holding
    the (token, row) pairs of the segments ``merged`` too (optimize after an append; their sets
    are kept as they are, deleted rows included, as for BITMAP)."""
    tokens, owners = ngram_tokens(values, ids)
    token_parts, id_parts = [tokens], [owners]
    for segment in merged:
        data = read_index_file(ctx, segment, NGRAM_FILE)
        keys = np.asarray(data.column("tokens", segment, NGRAM_FILE).combine_chunks().fill_null(0), np.uint32)
        blobs = data.column("posting_list", segment, NGRAM_FILE).to_pylist()
        try:
            sets = [decode_bitmap64(b) for b in blobs]
        except (ValueError, OverflowError) as exc:
            raise IndexCorruptError(
                NGRAM_FILE, f"index {segment.name!r}: undecodable row set: {exc}"
            ) from exc
        token_parts.append(np.repeat(keys, [s.size for s in sets]))
        id_parts.append(np.concatenate(sets) if sets else np.empty(0, np.uint64))
    writer = IndexWriter(ctx)
    writer.write(NGRAM_FILE, ngram_postings(np.concatenate(token_parts), np.concatenate(id_parts)))
    return writer.result(template)
