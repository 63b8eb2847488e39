"""INVERTED (full-text) index files (pylance 14) and remapping them after compaction.

``metadata.lance``: schema metadata ``partitions`` (JSON list of partition numbers, e.g. ``[0]``),
``params`` (the tokenizer), ``posting_block_size``, ``posting_tail_codec``; one row
``deleted_fragments`` (a 32-bit portable Roaring bitmap). Per partition ``p``:

* ``part_<p>_tokens.lance``: the token dictionary (an FST from token to token id);
* ``part_<p>_invert.lance``: one row per token id, ``_posting`` blocks of compressed
  (document number, frequency) pairs, ``_max_score``, ``_length``, ``_impacts`` (see
  :mod:`lance_ops.index.inverted_postings`);
* ``part_<p>_docs.lance``: one row per document, ``_rowid`` (uint64) and ``_num_tokens``.

Postings name documents by their row number in ``part_<p>_docs.lance`` (a block starts with its
first document number: 0, 128, 256, ... for a token in every document), never by row id.

Remapping (as pylance 14's own compaction does, observed on its files): a partition none of
whose rows is removed only gets its docs' ``_rowid`` column rewritten (every other file is
copied). A partition losing rows is renumbered: its removed documents leave the docs file (the
others keep their order, with their new row ids) and ``total_tokens`` becomes the sum of the
remaining ``_num_tokens``; every posting list drops the removed documents and shifts the later
numbers down; as the partition's document count and average length changed, every token's block
scores, ``_max_score`` and ``_impacts`` are computed again. A token left in no document is dropped
and the later token ids shift down: the token FST is rebuilt (``_token_next_id`` and
``_token_total_length`` follow). Positions (``with_position=True``) leave with their documents
and each token's position stream is cut into blocks again. A layout that cannot be renumbered
(posting blocks other than 128 documents, positions other than pylance 14's shared packed-delta
stream, a token set other than an FST losing tokens) raises
:class:`~lance_ops.errors.UnsupportedIndexTypeError` and the caller falls back to the Fragment
Reuse Index.

Facts for building these files and searching them (read from pylance 14's bytes and scores):

* ``metadata.lance`` ``params``: simple tokenizer, lower case, English stemming, English stop words
  removed, ASCII folding, tokens of at most 40 bytes; ``token_set_format`` ``fst``,
  ``posting_block_size`` 128, ``posting_tail_codec`` ``varint_delta_v1``.
* ``part_<p>_tokens.lance``: ``_token_fst_bytes`` (large_binary, the FST), ``_token_next_id``
  (uint32), ``_token_total_length`` (uint64). ``part_<p>_docs.lance`` carries the schema metadata
  ``total_tokens``.
* The ``_posting`` blocks, scores and impacts: :mod:`lance_ops.index.inverted_postings`.
* Scores are BM25 with k1 = 1.2, b = 0.75, idf = ln(1 + (N - n + 0.5) / (n + 0.5)) and the average
  length total_tokens / N (one ``_score`` reproduced by hand); stop words do not count towards a
  document's length; pylance orders tied scores arbitrarily.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa

from lance_ops.errors import CorruptFileError, IndexCorruptError, UnsupportedIndexTypeError
from lance_ops.index import inverted_postings as postings
from lance_ops.index.files import IndexFileData, IndexWriter, RemapResult, index_file_names, read_index_file
from lance_ops.index.fst import FstReader, build_fst
from lance_ops.index.mapping import RowAddressMapping
from lance_ops.io.context import StorageContext
from lance_ops.table.manifest import IndexMetadata

__all__ = ["remap_inverted"]

METADATA = "metadata.lance"
ROW_ID = "_rowid"
NUM_TOKENS = "_num_tokens"
TOTAL_TOKENS = "total_tokens"
POSTING = "_posting"
MAX_SCORE = "_max_score"
LENGTH = "_length"
IMPACTS = "_impacts"
FST_BYTES = "_token_fst_bytes"
POSITIONS = "_compressed_position"
POSITION_OFFSETS = "_position_block_offset"
LEGACY_POSITIONS = "_position"


def _partitions(index: IndexMetadata, metadata: IndexFileData) -> list[int]:
    try:
        parts = json.loads(metadata.meta("partitions", index, METADATA))
        return [int(p) for p in parts]
    except (ValueError, TypeError) as exc:
        raise IndexCorruptError(METADATA, f"index {index.name!r}: bad partitions: {exc}") from exc


def remap_inverted(ctx: StorageContext, index: IndexMetadata, mapping: RowAddressMapping) -> RemapResult:
    metadata = read_index_file(ctx, index, METADATA)
    plans: dict[int, tuple[IndexFileData, np.ndarray, np.ndarray]] = {}
    for partition in _partitions(index, metadata):
        name = f"part_{partition}_docs.lance"
        data = read_index_file(ctx, index, name)
        ids, kept = mapping.apply(
            np.asarray(data.column(ROW_ID, index, name).combine_chunks(), dtype=np.uint64)
        )
        plans[partition] = (data, ids, kept)
    renumbered = [p for p, (_, _, kept) in plans.items() if not kept.all()]
    if renumbered:
        _check_renumberable(index, metadata)
    rewritten = {f"part_{p}_docs.lance" for p in plans}
    for partition in renumbered:
        rewritten |= {f"part_{partition}_invert.lance", f"part_{partition}_tokens.lance"}
    writer = IndexWriter(ctx)
    for name in index_file_names(ctx, index):
        if name not in rewritten:
            writer.copy(ctx, index, name)
    for partition, (data, ids, kept) in plans.items():
        if kept.all():
            _write_docs(writer, f"part_{partition}_docs.lance", data, ids, None)
        else:
            _renumber(ctx, index, writer, partition, data, ids, kept)
    return writer.result(index)


def _check_renumberable(index: IndexMetadata, metadata: IndexFileData) -> None:
    block = metadata.metadata.get(b"posting_block_size", b"128")
    if block != b"128":
        raise UnsupportedIndexTypeError(
            f"INVERTED index {index.name!r}: {block.decode()}-document posting blocks cannot be renumbered",
            index.name,
        )


def _write_docs(
    writer: IndexWriter, name: str, data: IndexFileData, ids: np.ndarray, kept: np.ndarray | None
) -> int:
    """The docs file with the kept rows (all when ``kept`` is None) under their new row ids;
    ``total_tokens`` recomputed when rows leave. Returns the new total."""
    table = data.table if kept is None else data.table.filter(pa.array(kept))
    table = table.set_column(
        table.schema.get_field_index(ROW_ID), data.schema.field(ROW_ID), pa.array(ids, pa.uint64())
    )
    total = int(np.asarray(table.column(NUM_TOKENS), dtype=np.uint64).sum())
    if kept is not None:
        table = table.replace_schema_metadata({**data.metadata, TOTAL_TOKENS.encode(): str(total).encode()})
    writer.write(name, table, version=data.version, global_buffers=data.global_buffers)
    return total


def _tail_codec(index: IndexMetadata, data: IndexFileData) -> str:
    codec = data.metadata.get(b"posting_tail_codec")
    if codec is None:  # indices before the tail codec was recorded: fixed 32-bit tails
        return postings.TAIL_FIXED32
    text = codec.decode()
    if text not in (postings.TAIL_VARINT_DELTA, postings.TAIL_FIXED32):
        raise UnsupportedIndexTypeError(
            f"INVERTED index {index.name!r}: posting tail codec {text!r} cannot be renumbered", index.name
        )
    return text


def _renumber(
    ctx: StorageContext,
    index: IndexMetadata,
    writer: IndexWriter,
    partition: int,
    docs: IndexFileData,
    ids: np.ndarray,
    kept: np.ndarray,
) -> None:
    """Partition ``partition`` without its removed documents (see the module docstring)."""
    docs_name, invert_name = f"part_{partition}_docs.lance", f"part_{partition}_invert.lance"
    tokens_name = f"part_{partition}_tokens.lance"
    invert = read_index_file(ctx, index, invert_name)
    positions = _positions_layout(index, invert)
    codec = _tail_codec(index, invert)
    lengths = np.asarray(docs.column(NUM_TOKENS, index, docs_name).combine_chunks(), dtype=np.uint32)[kept]
    total = _write_docs(writer, docs_name, docs, ids, kept)
    new_number = (np.cumsum(kept, dtype=np.int64) - 1).astype(np.uint32)
    columns: dict[str, list[Any]] = {POSTING: [], MAX_SCORE: [], LENGTH: [], IMPACTS: []}
    if positions:
        columns |= {POSITIONS: [], POSITION_OFFSETS: []}
        streams = invert.column(POSITIONS, index, invert_name).to_pylist()
        offsets = invert.column(POSITION_OFFSETS, index, invert_name).to_pylist()
    dropped: list[int] = []
    blocks = _list_values(invert, index, invert_name, POSTING)
    old_impacts = (
        _list_values(invert, index, invert_name, IMPACTS) if IMPACTS in invert.table.column_names else None
    )
    counts = np.asarray(invert.column(LENGTH, index, invert_name).combine_chunks(), dtype=np.int64)
    for token, (value, count) in enumerate(zip(blocks, counts.tolist(), strict=True)):
        try:
            doc_ids, freqs = postings.decode_posting_list(value, count, codec)
            if positions:
                token_positions = postings.decode_positions(streams[token], offsets[token], freqs)
        except CorruptFileError as exc:
            raise IndexCorruptError(
                invert_name, f"index {index.name!r}: token {token}: {exc.reason}"
            ) from exc
        if len(doc_ids) and int(doc_ids.max()) >= len(kept):
            raise IndexCorruptError(
                invert_name, f"index {index.name!r}: token {token} names a missing document"
            )
        alive = kept[doc_ids]
        if not alive.any():
            dropped.append(token)
            continue
        # a token that lost no document keeps its impacts but for their document numbers
        row = postings.encode_posting_list(
            new_number[doc_ids[alive]],
            freqs[alive],
            lengths,
            total,
            tail_codec=codec,
            impacts=old_impacts[token] if old_impacts is not None and alive.all() else None,
        )
        columns[POSTING].append(row.posting)
        columns[MAX_SCORE].append(row.max_score)
        columns[LENGTH].append(row.length)
        columns[IMPACTS].append(row.impacts)
        if positions:
            stream, starts = postings.encode_positions(token_positions[np.repeat(alive, freqs)], freqs[alive])
            columns[POSITIONS].append(stream)
            columns[POSITION_OFFSETS].append(starts)
    schema = invert.schema
    arrays = []
    for field in schema:
        if field.name not in columns:
            raise UnsupportedIndexTypeError(
                f"INVERTED index {index.name!r}: column {field.name!r} of {invert_name} cannot be renumbered",
                index.name,
            )
        arrays.append(pa.array(columns[field.name], field.type))
    writer.write(
        invert_name,
        pa.Table.from_arrays(arrays, schema=schema),
        version=invert.version,
        global_buffers=invert.global_buffers,
    )
    if dropped:
        _write_tokens(ctx, index, writer, tokens_name, dropped)
    else:
        writer.copy(ctx, index, tokens_name)


def _positions_layout(index: IndexMetadata, invert: IndexFileData) -> bool:
    """Whether the postings carry positions (in the shared packed-delta stream pylance 14 writes;
    other layouts cannot be renumbered)."""
    names = invert.table.column_names
    if POSITIONS not in names and LEGACY_POSITIONS not in names:
        return False
    layout = invert.metadata.get(b"positions_layout", b"").decode()
    codec = invert.metadata.get(b"positions_codec", b"").decode()
    if LEGACY_POSITIONS in names or layout != "shared_stream_v2" or codec != postings.POSITIONS_PACKED_DELTA:
        raise UnsupportedIndexTypeError(
            f"INVERTED index {index.name!r}: positions stored as {layout or 'per document'!r} / "
            f"{codec or 'legacy'!r} cannot be renumbered",
            index.name,
        )
    return True


def _list_values(data: IndexFileData, index: IndexMetadata, name: str, column: str) -> list[list[bytes]]:
    values = data.column(column, index, name).to_pylist()
    if any(v is None for v in values):
        raise IndexCorruptError(name, f"index {index.name!r}: null {column} value")
    return values


def _write_tokens(
    ctx: StorageContext, index: IndexMetadata, writer: IndexWriter, name: str, dropped: list[int]
) -> None:
    """The token dictionary without the ``dropped`` token ids, later ids shifted down."""
    data = read_index_file(ctx, index, name)
    if FST_BYTES not in data.table.column_names:
        raise UnsupportedIndexTypeError(
            f"INVERTED index {index.name!r}: only an FST token set can lose tokens", index.name
        )
    value = data.column(FST_BYTES, index, name)[0].as_py()
    try:
        items = sorted(FstReader(value).items())
    except CorruptFileError as exc:
        raise IndexCorruptError(name, f"index {index.name!r}: {exc.reason}") from exc
    gone = set(dropped)
    shift = np.asarray(sorted(gone), np.int64)
    kept = [(key, tid - int(np.searchsorted(shift, tid))) for key, tid in items if tid not in gone]
    values = {
        FST_BYTES: build_fst(kept),
        "_token_next_id": len(kept),
        "_token_total_length": sum(len(key) for key, _ in kept),
    }
    missing = [f.name for f in data.schema if f.name not in values]
    if missing:
        raise IndexCorruptError(name, f"index {index.name!r}: unexpected token columns {missing}")
    table = pa.Table.from_arrays(
        [pa.array([values[f.name]], f.type) for f in data.schema], schema=data.schema
    )
    writer.write(name, table, version=data.version, global_buffers=data.global_buffers)
