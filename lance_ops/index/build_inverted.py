"""Building an INVERTED (full-text) index as pylance 14's ``create_scalar_index(column,
"INVERTED", **tokenizer params)`` writes it, and extending one after an append.

File layout in :mod:`lance_ops.index.inverted`, postings in
:mod:`lance_ops.index.inverted_postings`, terms in :mod:`lance_ops.index.tokenizer`. One
partition (``part_0_*``), as pylance writes for a small dataset (it may write several; readers
take any number).

* Documents are the rows whose text has at least one term (null, empty and all-stop-word rows
  are left out, as pylance leaves them), in row order; ``_num_tokens`` counts a document's terms
  (repeats included, stop words not) and ``total_tokens`` (docs file metadata) sums them.
* Terms are numbered in the order they first occur; the invert file has one row per term in that
  order, the FST maps each term to its number, ``_token_next_id`` is the number of terms and
  ``_token_total_length`` the sum of their UTF-8 lengths.
* Optimizing after an append (:func:`write_inverted` with ``merged`` segments) decodes the merged
  segments back into (term, document, frequency) triples and writes one index over them and the
  new rows (BM25 statistics and block scores depend on every document, so nothing is copied).

Columns: ``string`` and ``large_string``, and lists of them (a row is one document: the terms of
its strings one after the other, as pylance 14 indexes them; anything else is an
:class:`~lance_ops.errors.IndexColumnTypeError` naming the column). Arrow's kernels split the
texts, the tokenizer's filters run once per distinct token, the counting is numpy; the posting
lists, scores, impacts and positions of every term are encoded at once
(:func:`~lance_ops.index.inverted_postings.encode_postings`,
:func:`~lance_ops.index.inverted_postings.encode_position_streams`). Distributed builds stage
one partition per call and merge them (:func:`write_inverted_partial`, :func:`merge_inverted_partials`).
"""

from __future__ import annotations

import json
import re
import uuid as uuid_module
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap

from lance_ops.encoding.protowire import encode_varint
from lance_ops.errors import CorruptFileError, IndexColumnTypeError, IndexCorruptError, InvalidArgumentError
from lance_ops.file.schema import is_json
from lance_ops.index.files import IndexWriter, RemapResult, read_index_file
from lance_ops.index.fst import FstReader, build_fst
from lance_ops.index.inverted_postings import (
    BLOCK_SIZE,
    POSITIONS_PACKED_DELTA,
    TAIL_VARINT_DELTA,
    decode_positions,
    decode_posting_list,
    encode_position_streams,
    encode_postings,
)
from lance_ops.index.jieba_tokenizer import join_list_rows
from lance_ops.index.tokenizer import TokenizerParams, tokenizer_params
from lance_ops.io.context import StorageContext
from lance_ops.table.manifest import IndexMetadata

__all__ = [
    "INVERTED_DETAILS_URL",
    "INVERTED_INDEX_VERSION",
    "InvertedCorpus",
    "check_inverted_column",
    "corpus_of",
    "inverted_details",
    "read_inverted_corpus",
    "merge_inverted_partials",
    "partial_partition_id",
    "segment_tokenizer",
    "write_inverted",
    "write_inverted_partial",
]

INVERTED_DETAILS_URL = "/lance.table.InvertedIndexDetails"
INVERTED_INDEX_VERSION = 2
METADATA, FORMAT_VERSION = "metadata.lance", "2"
POSITIONS, POSITION_OFFSETS = "_compressed_position", "_position_block_offset"
POSITIONS_LAYOUT = "shared_stream_v2"


def check_inverted_column(column: str, value_type: pa.DataType) -> pa.DataType:
    """INVERTED indexes strings and lists of strings (as pylance 14); IndexColumnTypeError
    otherwise."""
    item = (
        value_type.value_type
        if pa.types.is_list(value_type) or pa.types.is_large_list(value_type)
        else value_type
    )
    if pa.types.is_string(item) or pa.types.is_large_string(item) or is_json(value_type):
        return value_type
    raise IndexColumnTypeError(
        f"INVERTED index column {column} must be a string, a large string or a list of them, "
        f"got {value_type}",
        column,
    )


def _field_bytes(number: int, value: int | bytes) -> bytes:
    if isinstance(value, bytes):
        return encode_varint(number << 3 | 2) + encode_varint(len(value)) + value
    return encode_varint(number << 3) + encode_varint(value)


def inverted_details(tokenizer: TokenizerParams) -> bytes:
    """``InvertedIndexDetails`` as pylance 14 writes it: base tokenizer, the language as a JSON
    string, the flags set, n-gram lengths, block size 128 (field 12) and format 2 (field 15)."""
    v = tokenizer.values
    out = _field_bytes(1, v["base_tokenizer"].encode()) + _field_bytes(2, json.dumps(v["language"]).encode())
    if v["with_position"]:
        out += _field_bytes(3, 1)
    if v["max_token_length"] is not None:
        out += _field_bytes(4, v["max_token_length"])
    for number, key in ((5, "lower_case"), (6, "stem"), (7, "remove_stop_words"), (8, "ascii_folding")):
        if v[key]:
            out += _field_bytes(number, 1)
    out += _field_bytes(9, v["min_ngram_length"]) + _field_bytes(10, v["max_ngram_length"])
    if v["prefix_only"]:
        out += _field_bytes(11, 1)
    return out + _field_bytes(12, v["block_size"]) + _field_bytes(15, int(FORMAT_VERSION))


@dataclass(frozen=True)
class InvertedCorpus:
    """What an INVERTED partition holds: documents (row ids, term counts), terms (by number) and
    the (term, document, frequency) triples sorted by term then document; with positions, each
    triple's ``freq`` positions (ascending) one triple after the other."""

    row_ids: np.ndarray  # uint64 [D]
    lengths: np.ndarray  # uint32 [D]
    terms: list[str]
    term: np.ndarray  # uint32 [P]
    doc: np.ndarray  # uint32 [P]
    freq: np.ndarray  # uint32 [P]
    positions: np.ndarray | None = None  # uint32 [sum(freq)]

    @staticmethod
    def empty(with_positions: bool = False) -> InvertedCorpus:
        z32 = np.empty(0, np.uint32)
        return InvertedCorpus(np.empty(0, np.uint64), z32, [], z32, z32, z32, z32 if with_positions else None)

    def triple_positions(self) -> np.ndarray:
        """Where each triple's positions start in :attr:`positions` (and their end, last)."""
        return np.concatenate(([0], np.cumsum(self.freq, dtype=np.int64)))


def _tokenize(
    values: pa.Array, ids: np.ndarray, tokenizer: TokenizerParams, known: dict[str, int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Term numbers of every term occurrence (``known`` grows with new terms, numbered in the
    order they first occur), the document of each, per-document counts, the row ids of the
    documents with at least one term, and each occurrence's position: its base token's number in
    the row (stop words and over-long tokens count; the strings of a list row follow one
    another), as pylance 14 records positions. Arrow splits the texts; the filters run once per
    distinct token."""
    texts, owner = values, None
    if tokenizer.json:
        tokens, parents, positions = _json_tokens(values, tokenizer)
        term = str
    elif tokenizer.char_positions and (pa.types.is_list(values.type) or pa.types.is_large_list(values.type)):
        texts = join_list_rows(values)  # jieba cuts a list row as one text, as pylance 14
    elif pa.types.is_list(values.type) or pa.types.is_large_list(values.type):
        texts = pc.list_flatten(values)
        owner = np.asarray(pc.list_parent_indices(values), dtype=np.int64)
    if not tokenizer.json:
        tokens, parents, starts = tokenizer.split_with_starts(texts)
        if owner is not None:
            parents = owner[parents]
        # tokens come row after row: a token's position is its distance from its row's first token
        # (for jieba: the character it starts at in its string)
        positions = tokenizer.positions(parents) if starts is None else starts
        term = tokenizer.term  # type: ignore[assignment]
    encoded = pc.dictionary_encode(tokens)
    number = known.setdefault
    distinct = encoded.dictionary.to_pylist()
    term_of = np.asarray(
        [-1 if (t := term(u)) is None else number(t, len(known)) for u in distinct], dtype=np.int64
    )
    occurrences = (
        term_of[np.asarray(encoded.indices, dtype=np.int64)] if len(tokens) else np.empty(0, np.int64)
    )
    keep = occurrences >= 0
    occurrences, parents, positions = occurrences[keep], parents[keep], positions[keep]
    counts = np.bincount(parents, minlength=len(values))
    kept = counts > 0
    doc_of_row = np.cumsum(kept) - 1
    return occurrences, doc_of_row[parents], counts[kept], np.asarray(ids, np.uint64)[kept], positions


def _json_tokens(values: pa.Array, tokenizer: TokenizerParams) -> tuple[pa.Array, np.ndarray, np.ndarray]:
    """A JSON column's terms (:meth:`TokenizerParams.json_terms`), the row of each and its number
    in its row. One parse per document: JSON has no vectorised form."""
    if isinstance(values, pa.ExtensionArray):
        values = values.storage
    terms: list[str] = []
    rows: list[int] = []
    positions: list[int] = []
    for row, text in enumerate(values.to_pylist()):
        if text is None:
            continue
        found = tokenizer.json_terms(json.loads(text))
        terms += found
        rows += [row] * len(found)
        positions += range(len(found))
    return pa.array(terms, pa.string()), np.asarray(rows, np.int64), np.asarray(positions, np.int64)


def _pairs(
    occurrence_term: np.ndarray, occurrence_doc: np.ndarray, num_docs: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(term, doc, frequency) triples, sorted by term then document."""
    span = max(num_docs, 1)
    keys, freqs = np.unique(occurrence_term * span + occurrence_doc, return_counts=True)
    return (keys // span).astype(np.uint32), (keys % span).astype(np.uint32), freqs.astype(np.uint32)


def corpus_of(
    values: pa.Array, ids: np.ndarray, tokenizer: TokenizerParams, with_positions: bool | None = None
) -> InvertedCorpus:
    """The documents and triples of ``values`` (keyed by ``ids``), terms numbered as they occur;
    positions too when ``with_positions`` (default: the tokenizer's ``with_position``)."""
    if with_positions is None:
        with_positions = bool(tokenizer.values["with_position"])
    known: dict[str, int] = {}
    occurrences, docs, counts, row_ids, positions = _tokenize(values, ids, tokenizer, known)
    term, doc, freq = _pairs(occurrences, docs, len(counts))
    ordered = None
    if with_positions:  # by term, document, then position: each triple's positions ascending
        ordered = positions[np.lexsort((positions, docs, occurrences))].astype(np.uint32)
    return InvertedCorpus(row_ids, counts.astype(np.uint32), list(known), term, doc, freq, ordered)


def _positions_metadata(with_positions: bool) -> dict[str, str]:
    """The positions keys pylance 14 adds to ``metadata.lance`` and the invert files."""
    if not with_positions:
        return {}
    return {"positions_layout": POSITIONS_LAYOUT, "positions_codec": POSITIONS_PACKED_DELTA}


def _metadata(tokenizer: TokenizerParams, partitions: Sequence[int], staged: bool = False) -> pa.Table:
    """``metadata.lance``: one empty ``deleted_fragments`` bitmap, or, for a staged partial
    (``staged``), no columns at all, as pylance 14 writes them."""
    metadata = {
        "partitions": json.dumps(list(partitions)),
        "params": tokenizer.to_json(),
        "token_set_format": "fst",
        "posting_block_size": str(BLOCK_SIZE),
        "format_version": FORMAT_VERSION,
        "posting_tail_codec": TAIL_VARINT_DELTA,
        **_positions_metadata(bool(tokenizer.values["with_position"])),
    }
    if staged:
        return pa.schema([], metadata=metadata).empty_table()
    schema = pa.schema([pa.field("deleted_fragments", pa.binary(), nullable=False)], metadata=metadata)
    return pa.table([pa.array([BitMap().serialize()], pa.binary())], schema=schema)


def _write_partition(writer: IndexWriter, corpus: InvertedCorpus, partition: int, prefix: str = "") -> None:
    total_tokens = int(corpus.lengths.sum(dtype=np.uint64))
    columns = list(
        encode_postings(corpus.term, corpus.doc, corpus.freq, corpus.lengths, total_tokens, len(corpus.terms))
    )
    blocks = pa.list_(pa.large_binary())
    fields = [
        pa.field("_posting", blocks, nullable=False),
        pa.field("_max_score", pa.float32(), nullable=False),
        pa.field("_length", pa.uint32(), nullable=False),
        pa.field("_impacts", blocks, nullable=False),
    ]
    if corpus.positions is not None:
        columns += encode_position_streams(corpus.term, corpus.freq, corpus.positions, len(corpus.terms))
        fields += [
            pa.field(POSITIONS, pa.large_binary(), nullable=False),
            pa.field(POSITION_OFFSETS, pa.list_(pa.uint32()), nullable=False),
        ]
    invert = pa.table(
        columns,
        schema=pa.schema(
            fields,
            metadata={
                "posting_tail_codec": TAIL_VARINT_DELTA,
                "posting_block_size": str(BLOCK_SIZE),
                "format_version": FORMAT_VERSION,
                **_positions_metadata(corpus.positions is not None),
            },
        ),
    )
    encoded = [t.encode() for t in corpus.terms]
    order = sorted(range(len(encoded)), key=encoded.__getitem__)
    tokens = pa.table(
        [
            pa.array([build_fst((encoded[i], i) for i in order)], pa.large_binary()),
            pa.array([len(encoded)], pa.uint32()),
            pa.array([sum(map(len, encoded))], pa.uint64()),
        ],
        schema=pa.schema(
            [
                pa.field("_token_fst_bytes", pa.large_binary(), nullable=False),
                pa.field("_token_next_id", pa.uint32(), nullable=False),
                pa.field("_token_total_length", pa.uint64(), nullable=False),
            ]
        ),
    )
    docs = pa.table(
        [pa.array(corpus.row_ids, pa.uint64()), pa.array(corpus.lengths, pa.uint32())],
        schema=pa.schema(
            [
                pa.field("_rowid", pa.uint64(), nullable=False),
                pa.field("_num_tokens", pa.uint32(), nullable=False),
            ],
            metadata={"total_tokens": str(total_tokens)},
        ),
    )
    writer.write(f"{prefix}part_{partition}_invert.lance", invert)
    writer.write(f"{prefix}part_{partition}_tokens.lance", tokens)
    writer.write(f"{prefix}part_{partition}_docs.lance", docs)


def segment_tokenizer(
    ctx: StorageContext, index: IndexMetadata, name: str = METADATA
) -> tuple[TokenizerParams, list[int]]:
    """The tokenizer (``params``) and partition numbers of an INVERTED segment (``name``: the
    metadata file of a staged partial instead)."""
    data = read_index_file(ctx, index, name)
    try:
        params = json.loads(data.meta("params", index, name))
        partitions = [int(p) for p in json.loads(data.meta("partitions", index, name))]
    except (ValueError, TypeError) as exc:
        raise IndexCorruptError(name, f"index {index.name!r}: bad metadata: {exc}") from exc
    return tokenizer_params(params), partitions


def read_inverted_corpus(
    ctx: StorageContext, index: IndexMetadata, partition: int, prefix: str = ""
) -> InvertedCorpus:
    """Decode one partition of an INVERTED segment (or, with ``prefix`` ``"staging/"``, of a
    staged partial) back into its documents and triples (and positions, when it has them)."""
    names = {k: f"{prefix}part_{partition}_{k}.lance" for k in ("tokens", "docs", "invert")}
    tokens = read_index_file(ctx, index, names["tokens"])
    docs = read_index_file(ctx, index, names["docs"])
    invert = read_index_file(ctx, index, names["invert"])
    tail_codec = invert.metadata.get(b"posting_tail_codec", TAIL_VARINT_DELTA.encode()).decode()
    try:
        fst = FstReader(tokens.column("_token_fst_bytes", index, names["tokens"])[0].as_py())
        by_id = {value: key.decode() for key, value in fst.items()}
        lengths = invert.column("_length", index, names["invert"]).to_pylist()
        postings = invert.column("_posting", index, names["invert"])
        decoded = [decode_posting_list(postings[i], n, tail_codec) for i, n in enumerate(lengths)]
        positions = None
        if POSITIONS in invert.table.column_names:
            streams = invert.column(POSITIONS, index, names["invert"]).to_pylist()
            offsets = invert.column(POSITION_OFFSETS, index, names["invert"]).to_pylist()
            parts = [decode_positions(streams[i], offsets[i], f) for i, (_, f) in enumerate(decoded)]
            positions = np.concatenate(parts).astype(np.uint32) if parts else np.empty(0, np.uint32)
    except CorruptFileError as exc:
        raise IndexCorruptError(names["invert"], f"index {index.name!r}: {exc.reason}") from exc
    if sorted(by_id) != list(range(len(lengths))):
        raise IndexCorruptError(names["tokens"], f"index {index.name!r}: token ids do not match the postings")
    counts = np.asarray(lengths, np.int64)
    return InvertedCorpus(
        np.asarray(docs.column("_rowid", index, names["docs"]).combine_chunks(), np.uint64),
        np.asarray(docs.column("_num_tokens", index, names["docs"]).combine_chunks(), np.uint32),
        [by_id[i] for i in range(len(lengths))],
        np.repeat(np.arange(len(lengths), dtype=np.uint32), counts),
        np.concatenate([d for d, _ in decoded]).astype(np.uint32) if decoded else np.empty(0, np.uint32),
        np.concatenate([f for _, f in decoded]).astype(np.uint32) if decoded else np.empty(0, np.uint32),
        positions,
    )


def write_inverted(
    ctx: StorageContext,
    template: IndexMetadata,
    values: pa.Array,
    ids: np.ndarray,
    tokenizer: TokenizerParams,
    merged: Sequence[IndexMetadata] = (),
) -> RemapResult:
    """Write an INVERTED index of ``values`` (keyed by ``ids``: row ids) holding the documents of
    the segments ``merged`` too (optimize after an append), with ``tokenizer``'s terms (and
    positions when it has ``with_position``; every merged segment must have them then)."""
    with_positions = bool(tokenizer.values["with_position"])
    parts = []
    for segment in merged:
        for partition in segment_tokenizer(ctx, segment)[1]:
            part = read_inverted_corpus(ctx, segment, partition)
            if with_positions and part.positions is None:
                raise IndexCorruptError(
                    f"part_{partition}_invert.lance",
                    f"index {segment.name!r}: with_position is set but the postings have no positions",
                )
            parts.append(part)
    parts.append(corpus_of(values, ids, tokenizer))
    corpus = _merge(parts, with_positions)
    writer = IndexWriter(ctx)
    partitions = [0] if corpus.terms else []  # no term: metadata alone, as pylance 14 writes it
    for partition in partitions:
        _write_partition(writer, corpus, partition)
    writer.write(METADATA, _metadata(tokenizer, partitions))
    return writer.result(template)


def _merge(parts: Sequence[InvertedCorpus], with_positions: bool) -> InvertedCorpus:
    """The documents of ``parts`` one part after the other, terms numbered as they first occur
    (each part's in its own order); positions when every part has them (an empty corpus:
    ``with_positions``). One sort for all."""
    parts = [p for p in parts if len(p.row_ids)]
    if len(parts) <= 1:
        return parts[0] if parts else InvertedCorpus.empty(with_positions)
    known: dict[str, int] = {}
    terms, docs, base = [], [], 0
    for part in parts:
        mapping = np.asarray([known.setdefault(t, len(known)) for t in part.terms], np.int64)
        terms.append(mapping[part.term.astype(np.int64)])
        docs.append(part.doc.astype(np.int64) + base)
        base += len(part.row_ids)
    term, doc = np.concatenate(terms), np.concatenate(docs)
    freq = np.concatenate([p.freq for p in parts])
    order = np.lexsort((doc, term))
    positions = None
    if all(p.positions is not None for p in parts):
        # each triple's run of positions follows it to its new place
        flat = np.concatenate([p.positions for p in parts if p.positions is not None])
        starts = np.concatenate(([0], np.cumsum(freq, dtype=np.int64)))[:-1]
        moved = freq[order].astype(np.int64)
        new_starts = np.cumsum(moved) - moved
        gather = np.repeat(starts[order] - new_starts, moved) + np.arange(int(moved.sum()))
        positions = flat[gather]
    return InvertedCorpus(
        np.concatenate([p.row_ids for p in parts]),
        np.concatenate([p.lengths for p in parts]),
        list(known),
        term[order].astype(np.uint32),
        doc[order].astype(np.uint32),
        freq[order],
        positions,
    )


# Distributed builds (pylance 14's ``create_scalar_index(..., fragment_ids=, index_uuid=)`` then
# ``merge_index_metadata(index_uuid, "INVERTED")``): each call over some fragments stages one
# partition under ``_indices/<uuid>/staging/``, numbered ``first fragment id << 32``, as
# ``part_<n>_{invert,tokens,docs}.lance`` and a column-less ``part_<n>_metadata.lance`` (a call
# whose fragments hold no document stages only ``part_empty_<n>_metadata.lance``); the merge
# joins the staged partitions in partition order into the one partition of a whole build (BM25
# statistics and block scores are over every document, so postings are re-encoded, not copied)
# and removes the staged files.
STAGING = "staging/"
_STAGED_METADATA = re.compile(r"part_(empty_)?(\d+)_metadata\.lance")


def partial_partition_id(fragment_ids: Sequence[int]) -> int:
    """The partition number a partial build over ``fragment_ids`` stages (pylance 14's)."""
    return int(fragment_ids[0]) << 32


def _staging_index(index_uuid: bytes) -> IndexMetadata:
    return IndexMetadata(
        uuid=index_uuid, fields=(), name=str(uuid_module.UUID(bytes=index_uuid)), dataset_version=0
    )


def write_inverted_partial(
    ctx: StorageContext,
    index_uuid: bytes,
    partition: int,
    values: pa.Array,
    ids: np.ndarray,
    tokenizer: TokenizerParams,
) -> None:
    """Stage partition ``partition`` of the index ``index_uuid``: the documents of ``values``
    (keyed by row ids ``ids``)."""
    corpus = corpus_of(values, ids, tokenizer)
    writer = IndexWriter(ctx)
    writer.uuid = index_uuid  # the shared directory of every partial of this build
    if not len(corpus.row_ids):
        writer.write(f"{STAGING}part_empty_{partition}_{METADATA}", _metadata(tokenizer, [], staged=True))
        return
    _write_partition(writer, corpus, partition, STAGING)
    writer.write(f"{STAGING}part_{partition}_{METADATA}", _metadata(tokenizer, [partition], staged=True))


def merge_inverted_partials(
    ctx: StorageContext, index_uuid: bytes, template: IndexMetadata | None = None
) -> RemapResult | None:
    """Merge the partitions staged for ``index_uuid`` into the files of one index, remove the
    staged files and return the files written, with ``template``'s details (None when nothing
    was staged but the directory holds a merged index already, as after a second call). A
    directory with neither is an :class:`~lance_ops.errors.InvalidArgumentError`; staged
    partials of different tokenizers an :class:`~lance_ops.errors.IndexCorruptError`."""
    index = _staging_index(index_uuid)
    directory = ctx.path("_indices", index.name)
    names = [
        info.path.rsplit("/", 1)[-1] for info in ctx.store.list(ctx.path("_indices", index.name, STAGING))
    ]
    staged = sorted(
        (int(m.group(2)), name) for name in names if (m := _STAGED_METADATA.fullmatch(name)) is not None
    )
    if not staged:
        if ctx.store.exists(ctx.path("_indices", index.name, METADATA)):
            return None
        raise InvalidArgumentError(f"No partition metadata files found in index directory: {directory}")
    tokenizer = segment_tokenizer(ctx, index, STAGING + staged[0][1])[0]
    parts = []
    for _, name in staged:
        params, partitions = segment_tokenizer(ctx, index, STAGING + name)
        if params.values != tokenizer.values:
            raise IndexCorruptError(name, f"index {index.name}: partials built with different tokenizers")
        parts += [read_inverted_corpus(ctx, index, partition, STAGING) for partition in partitions]
    corpus = _merge(parts, bool(tokenizer.values["with_position"]))
    writer = IndexWriter(ctx)
    writer.uuid = index_uuid
    _write_partition(writer, corpus, 0)
    writer.write(METADATA, _metadata(tokenizer, [0]))
    staging = ctx.path("_indices", index.name, STAGING)
    for info in ctx.store.list(staging):
        ctx.store.delete(info.path)
    ctx.store.remove_directories(staging)
    return writer.result(template or index)
