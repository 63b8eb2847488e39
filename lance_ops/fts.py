"""Full-text search: ``scanner(full_text_query=...)`` over INVERTED indices, as pylance 14 answers it.

``full_text_query`` is a string (searched in the one column an INVERTED index covers) or
``{"query": str, "columns": [column]}``. The query is split into terms by the index's tokenizer
(plain words when the column has no index); a row matches when it holds any term
(OR), and its ``_score`` (float32) is BM25 (k1 1.2, b 0.75) summed over the query's terms, a term
given twice counting twice. Observed in pylance 14:

* rows the index covers are scored with the index's statistics (documents, their average length
  and each term's document count, summed over all segments and partitions); rows deleted since
  the build are left out, the statistics stay;
* rows of fragments no segment covers are tokenized and scored with the index's statistics plus
  theirs (``FlatMatchQuery``); without an index on the column every row is searched that way,
  split into plain words (pylance's simple tokenizer with no lower-casing, stemming, stop words
  or folding, for the query as for the rows);
* rows come by descending ``_score``, ties by ascending row id (pylance orders ties arbitrarily);
  ``limit`` / ``offset`` apply to that order; ``filter`` applies after them unless
  ``prefilter=True`` (then before), as in pylance.

Not supported (:class:`~lance_ops.errors.UnsupportedFeatureError`): several columns in one
query, query objects (``MatchQuery``, ``PhraseQuery``, boolean and boost queries: lance_ops does
not import pylance's classes), fuzziness and operators, ``_rowaddr``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from pyroaring import BitMap

from lance_ops.errors import InvalidArgumentError, UnsupportedFeatureError
from lance_ops.fragment.scan import take_columns, take_rows
from lance_ops.index.build_inverted import InvertedCorpus, corpus_of, read_inverted_corpus, segment_tokenizer
from lance_ops.index.inverted_postings import K1, B, average_length, idf
from lance_ops.index.tokenizer import TokenizerParams, tokenizer_params
from lance_ops.index.types import INVERTED, index_type_of
from lance_ops.io.context import StorageContext
from lance_ops.schema import LanceSchema
from lance_ops.table.manifest import IndexMetadata

if TYPE_CHECKING:
    from lance_ops.dataset import LanceDataset

__all__ = ["FullTextQuery"]


# Index files never change under a uuid: the decoded partitions of the last few segments searched
# are kept for the next query (as pylance keeps index partitions in its cache).
_CORPORA: OrderedDict[tuple[str, bytes, int], InvertedCorpus] = OrderedDict()
_CORPORA_KEPT = 8
_PLAIN_WORDS = {"lower_case": False, "stem": False, "remove_stop_words": False, "ascii_folding": False}


def _cached_corpus(ctx: StorageContext, segment: IndexMetadata, partition: int) -> InvertedCorpus:
    key = (ctx.root, segment.uuid, partition)
    corpus = _CORPORA.get(key)
    if corpus is None:
        corpus = _CORPORA[key] = read_inverted_corpus(ctx, segment, partition)
        while len(_CORPORA) > _CORPORA_KEPT:
            _CORPORA.popitem(last=False)
    _CORPORA.move_to_end(key)
    return corpus


def _parse(query: Any) -> tuple[str, list[str] | None]:
    if isinstance(query, str):
        return query, None
    if isinstance(query, Mapping):
        unknown = set(query) - {"query", "columns"}
        if unknown or not isinstance(query.get("query"), str):
            raise InvalidArgumentError(
                f"full_text_query: a dict takes 'query' (a string) and 'columns', got {sorted(query)}"
            )
        columns = query.get("columns")
        if columns is not None:
            if isinstance(columns, str) or not all(isinstance(c, str) for c in columns):
                raise InvalidArgumentError("full_text_query: 'columns' must be a list of column names")
            columns = list(columns)
        return query["query"], columns
    raise UnsupportedFeatureError(
        f"full_text_query of type {type(query).__name__} is not supported by lance_ops "
        "(a string or {'query': ..., 'columns': [...]})"
    )


@dataclass(frozen=True)
class _Stats:
    """BM25 statistics: documents, their total length, and documents per query term."""

    docs: int
    tokens: int
    term_docs: dict[str, int]

    def __add__(self, other: _Stats) -> _Stats:
        terms = {t: self.term_docs.get(t, 0) + other.term_docs.get(t, 0) for t in self.term_docs}
        return _Stats(self.docs + other.docs, self.tokens + other.tokens, terms)


def _corpus_stats(corpus: InvertedCorpus, terms: list[str]) -> _Stats:
    ids = {t: i for i, t in enumerate(corpus.terms)}
    counts = (
        np.bincount(corpus.term, minlength=len(corpus.terms)) if len(corpus.terms) else np.zeros(0, np.int64)
    )
    return _Stats(
        len(corpus.row_ids),
        int(corpus.lengths.sum(dtype=np.uint64)),
        {t: int(counts[ids[t]]) if t in ids else 0 for t in terms},
    )


def _scores(corpus: InvertedCorpus, terms: list[str], stats: _Stats) -> tuple[np.ndarray, np.ndarray]:
    """Row ids of ``corpus``'s documents holding a query term and their BM25 scores (float32)."""
    if not stats.docs:
        return np.empty(0, np.uint64), np.empty(0, np.float32)
    avgdl = average_length(stats.tokens, stats.docs)
    total = np.zeros(len(corpus.row_ids), np.float32)
    hit = np.zeros(len(corpus.row_ids), bool)
    ids = {t: i for i, t in enumerate(corpus.terms)}
    for term in terms:
        if term not in ids:
            continue
        mine = corpus.term == ids[term]
        docs, f = corpus.doc[mine].astype(np.int64), corpus.freq[mine].astype(np.float32)
        lengths = corpus.lengths[docs].astype(np.float32)
        norm = K1 * ((np.float32(1.0) - B) + (B * lengths) / avgdl)
        scale = np.float32(idf(stats.term_docs[term], stats.docs) * np.float32(K1 + np.float32(1.0)))
        total[docs] += ((f / (f + norm)).astype(np.float32) * scale).astype(np.float32)
        hit[docs] = True
    return corpus.row_ids[hit], total[hit]


class FullTextQuery:
    """A full-text scan of one dataset version (``to_table``, ``to_batches``, ``explain_plan``)."""

    def __init__(
        self,
        ds: LanceDataset,
        query: Any,
        columns: Any,
        filter: Any,
        prefilter: bool,
        with_row_id: bool,
        limit: int | None,
        offset: int | None,
    ) -> None:
        self._ds = ds
        self.text, targets = _parse(query)
        if columns is not None and not isinstance(columns, (list, tuple)):
            raise UnsupportedFeatureError("full-text scans take a list of column names")
        self._columns = None if columns is None else [c for c in columns if c != "_score"]
        self._filter, self._prefilter, self._with_row_id = filter, prefilter, with_row_id
        self._limit, self._offset = limit, offset
        indexed = self._indexed_columns()
        if targets is None:
            targets = sorted(indexed)
            if not targets:
                raise InvalidArgumentError(
                    "full_text_query: no INVERTED index in the dataset; name the column with "
                    "{'query': ..., 'columns': [column]}"
                )
        if len(targets) != 1:
            raise UnsupportedFeatureError(
                f"full_text_query over several columns {targets} is not supported by lance_ops"
            )
        self.column = targets[0]
        field = LanceSchema(ds.manifest.schema).field(self.column)
        if field is None:
            raise InvalidArgumentError(f"full_text_query: column {self.column!r} is not in the schema")
        dtype = field.to_arrow().type
        item = dtype.value_type if pa.types.is_list(dtype) or pa.types.is_large_list(dtype) else dtype
        if not (pa.types.is_string(item) or pa.types.is_large_string(item)):
            raise InvalidArgumentError(
                f"full_text_query: column {self.column!r} of type {dtype} is not a text column"
            )
        self.segments = indexed.get(self.column, [])
        if self.segments:
            self.tokenizer = segment_tokenizer(ds.storage, self.segments[0])[0]
        else:  # pylance splits unindexed text into plain words: no case, stem, stop-word or folding
            self.tokenizer = tokenizer_params(_PLAIN_WORDS)

    def _indexed_columns(self) -> dict[str, list[IndexMetadata]]:
        """Dotted column path -> segments of the (first) INVERTED index on it."""
        manifest, ctx = self._ds.manifest, self._ds.storage
        by_id = {f.id: f for f in manifest.schema}
        found: dict[str, list[IndexMetadata]] = {}
        for name in dict.fromkeys(i.name for i in manifest.indices):
            segments = [i for i in manifest.indices if i.name == name]
            field = by_id.get(segments[0].fields[0]) if segments[0].fields else None
            if field is None or index_type_of(segments[0], ctx) != INVERTED:
                continue
            parts = [field.name]
            while field.parent_id >= 0 and field.parent_id in by_id:
                field = by_id[field.parent_id]
                parts.append(field.name)
            found.setdefault(".".join(reversed(parts)), segments)
        return found

    def _flat_corpus(self, tokenizer: TokenizerParams) -> tuple[InvertedCorpus, bool]:
        covered = BitMap()
        for segment in self.segments:
            if segment.fragment_bitmap:
                covered |= BitMap.deserialize(segment.fragment_bitmap)
        fragments = [f for f in self._ds.get_fragments() if f.fragment_id not in covered]
        if not fragments:
            return InvertedCorpus.empty(), False
        # with a prefilter pylance reads (and counts in the statistics) only the rows passing it
        where = self._filter if self._prefilter else None
        table = self._ds.to_table(columns=[self.column], with_row_id=True, fragments=fragments, filter=where)
        ids = np.asarray(table.column("_rowid"), np.uint64)
        return corpus_of(table.column(0).combine_chunks(), ids, tokenizer), True

    def _row_ids(self, filter: Any) -> np.ndarray:
        table = self._ds.to_table(columns=[], filter=filter, with_row_id=True)
        return np.asarray(table.column("_rowid"), dtype=np.uint64)

    def _candidates(self) -> tuple[np.ndarray, np.ndarray]:
        terms = self.tokenizer.tokenize(self.text)
        ctx = self._ds.storage
        parts = [
            _cached_corpus(ctx, segment, partition)
            for segment in self.segments
            for partition in segment_tokenizer(ctx, segment)[1]
        ]
        stats = _Stats(0, 0, dict.fromkeys(terms, 0))
        for part in parts:
            stats = stats + _corpus_stats(part, terms)
        flat, _ = self._flat_corpus(self.tokenizer)
        found = [_scores(part, terms, stats) for part in parts]
        if parts:
            ids = np.concatenate([f[0] for f in found])
            keep = np.isin(ids, self._row_ids(None))
            found = [(ids[keep], np.concatenate([f[1] for f in found])[keep])]
        found.append(_scores(flat, terms, stats + _corpus_stats(flat, terms)))
        return np.concatenate([f[0] for f in found]), np.concatenate([f[1] for f in found]).astype(np.float32)

    def to_table(self) -> pa.Table:
        ids, scores = self._candidates()
        if self._filter is not None and self._prefilter:
            keep = np.isin(ids, self._row_ids(self._filter))
            ids, scores = ids[keep], scores[keep]
        order = np.lexsort((ids, -scores))
        start = self._offset or 0
        stop = None if self._limit is None else start + self._limit
        ids, scores = ids[order][start:stop], scores[order][start:stop]
        if self._filter is not None and not self._prefilter:
            keep = np.isin(ids, self._row_ids(self._filter))
            ids, scores = ids[keep], scores[keep]
        columns = self._columns if self._columns is not None else self._ds.schema.names
        files = self._ds.handle.files
        table = (
            take_rows(files, ids, take_columns(files, columns))
            if columns
            else pa.table({"_": pa.nulls(len(ids))}).drop(["_"])
        )
        table = table.append_column("_score", pa.array(scores, pa.float32()))
        if self._with_row_id:
            table = table.append_column("_rowid", pa.array(ids, pa.uint64()))
        return table

    def to_batches(self) -> Any:
        return iter(self.to_table().to_batches())

    def count_rows(self) -> int:
        return self.to_table().num_rows

    def explain_plan(self, verbose: bool = False) -> str:
        lines = [f"Take: columns={self._columns or self._ds.schema.names}"]
        if self._filter is not None:
            lines.append(f"  Filter: {self._filter} ({'prefilter' if self._prefilter else 'postfilter'})")
        lines.append("  SortExec: _score DESC")
        terms = self.tokenizer.tokenize(self.text)
        if self.segments:
            lines.append(
                f"    MatchQuery: column={self.column}, index={self.segments[0].name}, "
                f"deltas={len(self.segments)}, query={terms}"
            )
        lines.append(f"    FlatMatchQuery (unindexed fragments): column={self.column}, query={self.text}")
        return "\n".join(lines) + "\n"
