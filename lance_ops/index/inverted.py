"""INVERTED (full-text) index files (pylance 14) and remapping them when no row is removed.

``metadata.lance``: schema metadata ``partitions`` (JSON list of partition numbers, e.g. ``[0]``),
``params`` (the tokenizer), ``posting_block_size``, ``posting_tail_codec``; one row
``deleted_fragments`` (a 32-bit portable Roaring bitmap). Per partition ``p``:

* ``part_<p>_tokens.lance``: the token dictionary (an FST);
* ``part_<p>_invert.lance``: one row per token, ``_posting`` blocks of compressed
  (document number, frequency) pairs, ``_max_score``, ``_length``, ``_impacts``;
* ``part_<p>_docs.lance``: one row per document, ``_rowid`` (uint64) and ``_num_tokens``.

Postings name documents by their row number in ``part_<p>_docs.lance`` (a block starts with its
first document number: 0, 128, 256, ... for a token in every document), never by row id. Moving
rows therefore only rewrites the ``_rowid`` column of the docs files; every other file is copied.
Removing rows would mean renumbering the documents inside the compressed postings and their BM25
statistics: not supported (:class:`~lance_ops.errors.UnsupportedIndexTypeError`; the caller falls
back to the Fragment Reuse Index).

Facts for building these files and searching them (read from pylance 14's bytes and scores; the
posting block layout is not yet confirmed against the format's source):

* ``metadata.lance`` ``params``: simple tokenizer, lower case, English stemming, English stop words
  removed, ASCII folding, tokens of at most 40 bytes; ``token_set_format`` ``fst``,
  ``posting_block_size`` 128, ``posting_tail_codec`` ``varint_delta_v1``.
* ``part_<p>_tokens.lance``: ``_token_fst_bytes`` (large_binary, the FST), ``_token_next_id``
  (uint32), ``_token_total_length`` (uint64). ``part_<p>_docs.lance`` carries the schema metadata
  ``total_tokens``.
* A ``_posting`` block seems to open with a float32 (the block's maximum score); full 128-document
  blocks then look bit-packed (a bit-width byte for the document numbers, one for the frequencies);
  the tail block is varint deltas.
* Scores are BM25 with k1 = 1.2, b = 0.75, idf = ln(1 + (N - n + 0.5) / (n + 0.5)) and the average
  length total_tokens / N (one ``_score`` reproduced by hand); stop words do not count towards a
  document's length; pylance orders tied scores arbitrarily.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa

from lance_ops.errors import IndexCorruptError, UnsupportedIndexTypeError
from lance_ops.index.files import IndexFileData, IndexWriter, RemapResult, index_file_names, read_index_file
from lance_ops.index.mapping import RowAddressMapping
from lance_ops.io.context import StorageContext
from lance_ops.table.manifest import IndexMetadata

__all__ = ["remap_inverted"]

METADATA = "metadata.lance"
ROW_ID = "_rowid"


def _partitions(ctx: StorageContext, index: IndexMetadata) -> list[int]:
    data = read_index_file(ctx, index, METADATA)
    try:
        parts = json.loads(data.meta("partitions", index, METADATA))
        return [int(p) for p in parts]
    except (ValueError, TypeError) as exc:
        raise IndexCorruptError(METADATA, f"index {index.name!r}: bad partitions: {exc}") from exc


def remap_inverted(ctx: StorageContext, index: IndexMetadata, mapping: RowAddressMapping) -> RemapResult:
    docs: dict[str, tuple[IndexFileData, np.ndarray]] = {}
    for partition in _partitions(ctx, index):
        name = f"part_{partition}_docs.lance"
        data = read_index_file(ctx, index, name)
        ids, kept = mapping.apply(
            np.asarray(data.column(ROW_ID, index, name).combine_chunks(), dtype=np.uint64)
        )
        if not kept.all():
            raise UnsupportedIndexTypeError(
                f"INVERTED index {index.name!r}: removing rows from a full-text index is not supported",
                index.name,
            )
        docs[name] = (data, ids)
    writer = IndexWriter(ctx)
    for name in index_file_names(ctx, index):
        if name not in docs:
            writer.copy(ctx, index, name)
    for name, (data, ids) in docs.items():
        table = data.table.set_column(
            data.table.schema.get_field_index(ROW_ID), data.schema.field(ROW_ID), pa.array(ids, pa.uint64())
        )
        writer.write(name, table, version=data.version, global_buffers=data.global_buffers)
    return writer.result(index)
