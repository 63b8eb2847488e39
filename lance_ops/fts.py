"""Full-text search: ``scanner(full_text_query=...)`` over INVERTED indices, as pylance 14 answers it.

``full_text_query`` is a string or ``{"query": str, "columns": [...]}`` (a match in those columns,
by default every column an INVERTED index covers), or one of :mod:`lance_ops.query.fulltext`'s
objects. A match splits its text into terms with the column's index tokenizer and finds the rows
holding any term (``operator`` AND: every distinct term); ``_score`` (float32) is BM25 (k1 1.2,
b 0.75) summed over the query's terms, a term given twice counting twice, times ``boost``.
Observed in pylance 14 (and checked against it by the tests):

* rows an index covers are scored with the index's statistics (documents, their average length
  and each term's document count, summed over all segments and partitions); rows deleted since
  the build are left out, the statistics stay;
* rows of fragments no segment covers are tokenized and scored with the index's statistics plus
  theirs (``FlatMatchQuery``; with ``prefilter=True`` only the rows passing the filter are read
  and counted); without an index on the column every row is searched that way, split into plain
  words (the simple tokenizer without lower-casing, stemming, stop words or folding);
* several columns: a row's best column score (``MultiMatchQuery``, after each column's boost);
  ``BoostQuery``: the positive query's rows, less ``negative_boost`` times the negative query's
  score; ``BooleanQuery``: the rows of every MUST (of any SHOULD when there is no MUST), none of a
  MUST_NOT, scores of the MUST and SHOULD queries summed;
* rows come by descending ``_score``, ties by ascending row id (pylance orders ties arbitrarily);
  ``limit`` / ``offset`` apply to that order; ``filter`` applies after them unless
  ``prefilter=True`` (then before).

An index partition is read once (kept for the next queries, as pylance's index cache) and only
the query terms' postings are decoded. A phrase
(``PhraseQuery`` or a ``full_text_query`` string in double quotes, as pylance reads it: one column,
the one INVERTED index's when none is named) matches the rows holding its terms at their
positions in the query (counted from its first term; stop words keep their places), scored as a
match of all its terms; it needs an index with positions (``with_position=True``; unindexed rows
are tokenized with them), else ``InvalidArgumentError`` as pylance's ValueError. With ``slop``
above 0 the terms may drift apart as pylance 14 lets them (see :func:`_phrase_docs`).

A ``MatchQuery`` with ``fuzziness`` above 0 (``None`` is an exact match in pylance 14) searches
the index for the terms within that many character edits of each plain word of the query
(:meth:`_Column.expand`), each scored as a term of the query; unindexed rows are searched for the
query's ordinary terms, as pylance does. On an n-gram index (every n-gram at position 0) a match
or a phrase finds, in index partitions, the rows holding any n-gram of the query (with ``AND``
too, but for a fuzzy ``AND``), in unindexed rows a phrase needs all of them. Not supported
(:class:`~lance_ops.errors.UnsupportedFeatureError`): ``CombinedFieldsQuery``, list-element
documents, ``_rowaddr``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from pyroaring import BitMap

from lance_ops.errors import (
    CorruptFileError,
    IndexCorruptError,
    InvalidArgumentError,
    UnsupportedFeatureError,
)
from lance_ops.file.schema import is_json
from lance_ops.fragment.scan import take_columns, take_rows
from lance_ops.index.build_inverted import (
    POSITION_OFFSETS,
    POSITIONS,
    InvertedCorpus,
    corpus_of,
    segment_tokenizer,
)
from lance_ops.index.files import read_index_file
from lance_ops.index.fst import FstReader
from lance_ops.index.fuzzy import Vocabulary
from lance_ops.index.inverted_postings import (
    K1,
    TAIL_VARINT_DELTA,
    B,
    average_length,
    decode_positions,
    decode_posting_list,
    idf,
)
from lance_ops.index.tokenizer import tokenizer_params
from lance_ops.index.types import INVERTED, index_type_of
from lance_ops.io.context import StorageContext
from lance_ops.io.index_cache import IndexCounter, count_comparisons, counting_index_work
from lance_ops.query import fulltext
from lance_ops.scan_stats import ScanCounters, StatsCallback, report_run
from lance_ops.schema import LanceSchema
from lance_ops.table.manifest import IndexMetadata

if TYPE_CHECKING:
    from lance_ops.dataset import LanceDataset

__all__ = ["FullTextScan"]


class _Part:
    """Documents and postings searched together: an index partition or the unindexed rows."""

    row_ids: np.ndarray  # uint64, by document number
    lengths: np.ndarray  # uint32, by document number
    tokens: int

    def term_docs(self, term: str) -> int:
        raise NotImplementedError

    def postings(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        """Document numbers (ascending) and frequencies of ``term`` (empty when absent)."""
        raise NotImplementedError

    def positions(self, term: str) -> np.ndarray:
        """The positions of ``term`` in its documents (uint32), document after document as
        :meth:`postings` lists them, each document's ascending."""
        raise NotImplementedError


class _FlatPart(_Part):
    def __init__(self, corpus: InvertedCorpus) -> None:
        self._corpus = corpus
        self.row_ids, self.lengths = corpus.row_ids, corpus.lengths
        self.tokens = int(corpus.lengths.sum(dtype=np.uint64))
        self._ids = {t: i for i, t in enumerate(corpus.terms)}
        self._counts = np.bincount(corpus.term, minlength=len(corpus.terms))

    def term_docs(self, term: str) -> int:
        return int(self._counts[self._ids[term]]) if term in self._ids else 0

    def postings(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        if term not in self._ids:
            return np.empty(0, np.int64), np.empty(0, np.uint32)
        mine = self._corpus.term == self._ids[term]
        return self._corpus.doc[mine].astype(np.int64), self._corpus.freq[mine]

    def positions(self, term: str) -> np.ndarray:
        corpus = self._corpus
        if term not in self._ids or corpus.positions is None:
            return np.empty(0, np.uint32)
        triples = np.flatnonzero(corpus.term == self._ids[term])
        spans = corpus.triple_positions()
        counts = corpus.freq[triples].astype(np.int64)
        within = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
        return corpus.positions[np.repeat(spans[triples], counts) + within]


class _IndexPart(_Part):
    """One partition of an INVERTED segment, read once; a term's postings are decoded when a
    query first asks for it."""

    def __init__(self, ctx: StorageContext, segment: IndexMetadata, partition: int) -> None:
        names = {k: f"part_{partition}_{k}.lance" for k in ("tokens", "docs", "invert")}
        tokens = read_index_file(ctx, segment, names["tokens"])
        docs = read_index_file(ctx, segment, names["docs"])
        invert = read_index_file(ctx, segment, names["invert"])
        self._where = (segment, names["invert"])
        self._tail = invert.metadata.get(b"posting_tail_codec", TAIL_VARINT_DELTA.encode()).decode()
        try:
            self._fst = FstReader(tokens.column("_token_fst_bytes", segment, names["tokens"])[0].as_py())
        except CorruptFileError as exc:
            raise IndexCorruptError(names["tokens"], f"index {segment.name!r}: {exc.reason}") from exc
        self.row_ids = np.asarray(docs.column("_rowid", segment, names["docs"]).combine_chunks(), np.uint64)
        self.lengths = np.asarray(
            docs.column("_num_tokens", segment, names["docs"]).combine_chunks(), np.uint32
        )
        total = docs.metadata.get(b"total_tokens")
        self.tokens = int(total) if total is not None else int(self.lengths.sum(dtype=np.uint64))
        self._lengths_by_term = np.asarray(
            invert.column("_length", segment, names["invert"]).combine_chunks()
        )
        self._postings = invert.column("_posting", segment, names["invert"])
        self._decoded: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._vocabulary: Vocabulary | None = None
        self._streams = self._offsets = None
        if POSITIONS in invert.table.column_names:
            self._streams = invert.column(POSITIONS, segment, names["invert"])
            self._offsets = invert.column(POSITION_OFFSETS, segment, names["invert"])

    @property
    def nbytes(self) -> int:
        """What the partition holds as read (postings decoded later are not counted)."""
        held = [self.row_ids, self.lengths, self._lengths_by_term]
        read = sum(a.nbytes for a in held) + self._postings.nbytes
        positions = [a for a in (self._streams, self._offsets) if a is not None]
        return read + sum(a.nbytes for a in positions)

    def _token(self, term: str) -> int | None:
        token = self._fst.get(term)
        return token if token is not None and token < len(self._lengths_by_term) else None

    def vocabulary(self) -> Vocabulary:
        """The partition's terms (decoded from its token dictionary once)."""
        if self._vocabulary is None:
            count = len(self._lengths_by_term)
            self._vocabulary = Vocabulary(key.decode() for key, token in self._fst.items() if token < count)
        return self._vocabulary

    def term_docs(self, term: str) -> int:
        token = self._token(term)
        return 0 if token is None else int(self._lengths_by_term[token])

    def postings(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        if term not in self._decoded:
            token = self._token(term)
            if token is None:
                found = np.empty(0, np.int64), np.empty(0, np.uint32)
            else:
                try:
                    docs, freqs = decode_posting_list(
                        self._postings[token], int(self._lengths_by_term[token]), self._tail
                    )
                except CorruptFileError as exc:
                    segment, name = self._where
                    raise IndexCorruptError(name, f"index {segment.name!r}: {exc.reason}") from exc
                found = docs.astype(np.int64), freqs
            self._decoded[term] = found
        return self._decoded[term]

    def positions(self, term: str) -> np.ndarray:
        token = self._token(term)
        if token is None or self._streams is None or self._offsets is None:
            return np.empty(0, np.uint32)
        try:
            return decode_positions(
                self._streams[token].as_py(), self._offsets[token].as_py(), self.postings(term)[1]
            )
        except CorruptFileError as exc:
            segment, name = self._where
            raise IndexCorruptError(name, f"index {segment.name!r}: {exc.reason}") from exc


# Index files never change under a uuid: the partitions searched are kept in the dataset's index
# cache for the next query (as pylance keeps them in its session's).
_PLAIN_WORDS = {"lower_case": False, "stem": False, "remove_stop_words": False, "ascii_folding": False}


def _cached_part(ctx: StorageContext, segment: IndexMetadata, partition: int) -> _IndexPart:
    return ctx.index_cache.get(
        ("inverted-partition", segment.uuid, partition),
        lambda: _IndexPart(ctx, segment, partition),
        lambda part: part.nbytes,
    )


def prewarm(ctx: StorageContext, segment: IndexMetadata, with_position: bool) -> None:
    """Read every partition of an INVERTED segment into the dataset's index cache (its token
    dictionary, documents and postings as stored; ``with_position``: its positions too, which
    are read with the postings)."""
    del with_position  # positions are part of the partition as read
    for partition in segment_tokenizer(ctx, segment)[1]:
        _cached_part(ctx, segment, partition)


def _parse(query: Any, indexed: list[str]) -> fulltext.FullTextQuery:
    """The query as a query object: a string or ``{"query", "columns"}`` is a multi-column match
    over the given columns (default: every column with an INVERTED index), as in pylance."""
    if isinstance(query, fulltext.FullTextQuery):
        return query
    if isinstance(query, str):
        text, columns = query, None
    elif isinstance(query, Mapping):
        unknown = set(query) - {"query", "columns"}
        if unknown or not isinstance(query.get("query"), str):
            raise InvalidArgumentError(
                f"full_text_query: a dict takes 'query' (a string) and 'columns', got {sorted(query)}"
            )
        text, columns = query["query"], query.get("columns")
        if columns is not None and (isinstance(columns, str) or not all(isinstance(c, str) for c in columns)):
            raise InvalidArgumentError("full_text_query: 'columns' must be a list of column names")
    else:
        raise UnsupportedFeatureError(
            f"full_text_query of type {type(query).__name__} is not supported by lance_ops "
            "(a string, {'query': ..., 'columns': [...]} or a lance_ops.query full-text query)"
        )
    columns = list(columns) if columns is not None else indexed
    if not columns:
        raise InvalidArgumentError(
            "full_text_query: no INVERTED index in the dataset; name the column with "
            "{'query': ..., 'columns': [column]}"
        )
    if text.startswith('"') and text.endswith('"'):  # the whole string quoted: a phrase
        if len(columns) > 1:
            raise InvalidArgumentError(
                "full_text_query: the column must be specified in the query"
                if query is text
                else "Phrase queries cannot be used with multiple columns."
            )
        return fulltext.PhraseQuery(text[1:-1], columns[0])
    return fulltext.MultiMatchQuery(text, columns)


@dataclass(frozen=True)
class _Stats:
    """BM25 statistics: documents, their total length, and documents per query term."""

    docs: int
    tokens: int
    term_docs: dict[str, int]

    def __add__(self, other: _Stats) -> _Stats:
        terms = {t: self.term_docs.get(t, 0) + other.term_docs.get(t, 0) for t in self.term_docs}
        return _Stats(self.docs + other.docs, self.tokens + other.tokens, terms)


def _part_stats(part: _Part, terms: list[str]) -> _Stats:
    return _Stats(len(part.row_ids), part.tokens, {t: part.term_docs(t) for t in terms})


def _scores(
    part: _Part,
    terms: list[str],
    stats: _Stats,
    required: list[list[str]] | None = None,
    only: np.ndarray | None = None,
    allowed: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Row ids of ``part``'s documents holding a query term (with ``required``: a term of each
    of its groups; among the document numbers ``only`` when given; ``allowed``: a mask of the
    documents a prefilter lets through, the others not scored) and their BM25 scores (float32).
    The documents of an index partition scored count as index comparisons."""
    if not stats.docs:
        return _empty()
    avgdl = average_length(stats.tokens, stats.docs)
    total = np.zeros(len(part.row_ids), np.float32)
    matched = np.zeros(len(part.row_ids), np.int64)
    for term in terms:
        docs, freqs = part.postings(term)
        if allowed is not None:
            keep = allowed[docs]
            docs, freqs = docs[keep], freqs[keep]
        if not len(docs):
            continue
        f = freqs.astype(np.float32)
        lengths = part.lengths[docs].astype(np.float32)
        norm = K1 * ((np.float32(1.0) - B) + (B * lengths) / avgdl)
        scale = np.float32(idf(stats.term_docs[term], stats.docs) * np.float32(K1 + np.float32(1.0)))
        total[docs] += ((f / (f + norm)).astype(np.float32) * scale).astype(np.float32)
        matched[docs] += 1
    hit = matched > 0
    if isinstance(part, _IndexPart):
        count_comparisons(int(hit.sum()))
    if required is not None:  # a repeated term or group scores twice but is needed once
        groups = {tuple(sorted(set(group))) for group in required}
        matched[:] = 0
        for group in groups:
            holds = np.zeros(len(part.row_ids), bool)
            for term in group:
                holds[part.postings(term)[0]] = True
            matched += holds
        hit = matched == len(groups) if groups else np.zeros(len(part.row_ids), bool)
        if allowed is not None:
            hit &= allowed
    if only is not None:
        hit &= np.isin(np.arange(len(hit)), only)
    return part.row_ids[hit], total[hit]


def _term_occurrences(part: _Part, term: str, candidates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions of ``term`` in the documents ``candidates`` (ascending document numbers): the
    document number of each occurrence and its position, document after document."""
    docs, freqs = part.postings(term)
    owner = np.repeat(docs, freqs.astype(np.int64))
    positions = part.positions(term).astype(np.int64)
    keep = np.isin(owner, candidates)
    return owner[keep], positions[keep]


def _phrase_docs(part: _Part, query: list[tuple[str, int]], slop: int = 0) -> np.ndarray:
    """Document numbers of ``part`` holding the phrase: every query term, and (``slop`` 0) its
    terms at their positions in the query (counted from its first term) shifted alike, at or
    after the document's start, or (``slop`` above 0) a placement found as pylance 14 finds one:
    in an index partition :func:`_sloppy_docs`, in unindexed rows :func:`_every_placement`."""
    if not query:
        return np.empty(0, np.int64)
    candidates: np.ndarray | None = None
    for term in {t for t, _ in query}:
        docs = part.postings(term)[0]
        candidates = docs if candidates is None else np.intersect1d(candidates, docs)
    assert candidates is not None
    if len(query) == 1 or not len(candidates):
        return candidates
    if slop:
        search = _every_placement if isinstance(part, _FlatPart) else _sloppy_docs
        return search(part, query, slop, candidates)
    keys = None  # a shift every term has in the same document
    for term, at in query:
        owner, positions = _term_occurrences(part, term, candidates)
        shifted = positions - at
        mine = np.unique((owner[shifted >= 0] << 32) | shifted[shifted >= 0])
        keys = mine if keys is None else np.intersect1d(keys, mine, assume_unique=True)
    assert keys is not None
    return np.unique(keys >> 32)


def _every_placement(
    part: _Part, query: list[tuple[str, int]], slop: int, candidates: np.ndarray
) -> np.ndarray:
    """The ``candidates`` holding a placement of the phrase: a position of each query term ``k``
    whose offset (position - its query position) is, in query order, at or after the previous
    term's offset by at most ``slop`` (pylance 14's search of unindexed rows, which finds every
    such placement). Runs term after term on the (document, offset) pairs reachable so far."""
    shift, base = np.int64(32), np.int64(1 << 31)  # offsets may be negative: stored + 2**31
    reached: np.ndarray | None = None  # sorted keys (document << 32) | (offset + base)
    for term, at in query:
        owner, positions = _term_occurrences(part, term, candidates)
        keys = (owner << shift) | (positions - at + base)
        if reached is not None:  # an earlier offset in [offset - slop, offset]
            low = np.searchsorted(reached, keys - slop)
            keys = keys[np.searchsorted(reached, keys, side="right") > low]
        reached = np.unique(keys)
    assert reached is not None
    return np.unique(reached >> shift)


def _sloppy_docs(part: _Part, query: list[tuple[str, int]], slop: int, candidates: np.ndarray) -> np.ndarray:
    """The ``candidates`` (documents holding every term) where pylance 14 finds a phrase with
    ``slop`` above 0 (its rule, observed on many small cases).

    Each query term ``k`` (query position ``q_k``) has a cursor on its positions in the
    document, first on its first position; its offset is ``position - q_k``. A placement is
    found when, in query order, every offset is at or after the previous one by at most
    ``slop``. Otherwise the pairs of consecutive terms are checked in query order up to the
    first failing pair (a term without positions left ends the search: no match), each pair
    (``a``, ``b``) asking for an offset of ``a`` if ``b``'s is smaller, else ``max(a + 1,
    b - slop)``; every cursor then moves to its first position whose offset is at least the
    largest of these (from the start of its positions: a cursor can move back). The search runs
    on all candidates at once, one step of every document per round."""
    shift = np.int64(32)
    keys, starts, stops = [], [], []
    for term, _at in query:
        owner, positions = _term_occurrences(part, term, candidates)
        rank = np.searchsorted(candidates, owner).astype(np.int64)
        term_keys = (rank << shift) | positions  # sorted: by document, then position
        keys.append(term_keys)
        bounds = np.searchsorted(term_keys, np.arange(len(candidates) + 1, dtype=np.int64) << shift)
        starts.append(bounds[:-1])
        stops.append(bounds[1:])
    at = np.array([a for _, a in query], np.int64)
    cursor = np.array(starts)  # (terms, documents): index of each cursor in keys[k]
    active = np.arange(len(candidates))
    found = np.zeros(len(candidates), bool)
    mask = (np.int64(1) << shift) - 1
    while len(active):
        cur = cursor[:, active]
        live = np.array([cur[k] < stops[k][active] for k in range(len(query))])
        offsets = np.array(
            [
                np.where(live[k], keys[k][np.minimum(cur[k], len(keys[k]) - 1)] & mask, 0) - at[k]
                for k in range(len(query))
            ]
        )
        last, nxt = offsets[:-1], offsets[1:]
        ended = ~(live[:-1] & live[1:])
        fits = (last <= nxt) & (nxt <= last + slop)
        stop_pair = ended | ~fits  # (pairs, documents)
        failing = np.argmax(stop_pair, axis=0)
        failed = stop_pair[failing, np.arange(len(active))]
        found[active[~failed]] = True
        dead = ended[failing, np.arange(len(active))]
        wanted = np.where(last > nxt, last, np.maximum(last + 1, nxt - slop))
        wanted[np.arange(len(wanted))[:, None] > failing[None, :]] = np.iinfo(np.int64).min
        target = wanted.max(axis=0)
        moving = failed & ~dead
        active, target = active[moving], target[moving]
        for k in range(len(query)):
            least = (active.astype(np.int64) << shift) | np.maximum(target + at[k], 0)
            cursor[k, active] = np.searchsorted(keys[k], least)
    return candidates[found]


def _union(
    a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray], how: str
) -> tuple[np.ndarray, np.ndarray]:
    """Combine two (row ids, scores) results: ``sum`` / ``max`` over the union of their rows."""
    ids = np.union1d(a[0], b[0])
    out = []
    for part_ids, part_scores in (a, b):
        full = np.full(len(ids), np.nan if how == "max" else 0.0, np.float32)
        full[np.searchsorted(ids, part_ids)] = part_scores
        out.append(full)
    scores = np.fmax(out[0], out[1]) if how == "max" else (out[0] + out[1]).astype(np.float32)
    return ids, scores.astype(np.float32)


def _restrict(
    result: tuple[np.ndarray, np.ndarray], ids: np.ndarray, keep: bool
) -> tuple[np.ndarray, np.ndarray]:
    mask = np.isin(result[0], ids)
    mask = mask if keep else ~mask
    return result[0][mask], result[1][mask]


def _empty() -> tuple[np.ndarray, np.ndarray]:
    return np.empty(0, np.uint64), np.empty(0, np.float32)


class _Column:
    """Searching one text column: its INVERTED index segments (or none) and unindexed rows."""

    def __init__(
        self, scan: FullTextScan, column: str, segments: list[IndexMetadata], positions: bool
    ) -> None:
        ds = scan._ds
        self._scan, self.column, self.segments = scan, column, segments
        self._positions = positions  # the unindexed rows' positions are needed (phrases)
        field = LanceSchema(ds.manifest.schema).field(column)
        if field is None:
            raise InvalidArgumentError(f"full_text_query: column {column!r} is not in the schema")
        dtype = field.to_arrow().type
        item = dtype.value_type if pa.types.is_list(dtype) or pa.types.is_large_list(dtype) else dtype
        json_indexed = bool(segments) and is_json(dtype)  # searched through its JSON tokenizer
        if not (pa.types.is_string(item) or pa.types.is_large_string(item) or json_indexed):
            raise InvalidArgumentError(
                f"full_text_query: column {column!r} of type {dtype} is not a text column"
            )
        if segments:
            self.tokenizer = segment_tokenizer(ds.storage, segments[0])[0]
        else:  # pylance splits unindexed text into plain words: no case, stem, stop-word or folding
            self.tokenizer = tokenizer_params(_PLAIN_WORDS)
        self._loaded: tuple[list[_IndexPart], _FlatPart, np.ndarray | None] | None = None

    def _load(self) -> tuple[list[_IndexPart], _FlatPart, np.ndarray | None]:
        if self._loaded is None:
            ctx = self._scan._ds.storage
            parts = [
                _cached_part(ctx, segment, partition)
                for segment in self.segments
                for partition in segment_tokenizer(ctx, segment)[1]
            ]
            live = self._scan._row_ids(None) if parts else None
            self._loaded = parts, _FlatPart(self._flat_corpus()), live
        return self._loaded

    def _flat_corpus(self) -> InvertedCorpus:
        covered = BitMap()
        for segment in self.segments:
            if segment.fragment_bitmap:
                covered |= BitMap.deserialize(segment.fragment_bitmap)
        ds = self._scan._ds
        fragments = [f for f in ds.get_fragments() if f.fragment_id not in covered]
        if not fragments:
            return InvertedCorpus.empty()
        # with a prefilter pylance reads (and counts in the statistics) only the rows passing it
        where = self._scan._filter if self._scan._prefilter else None
        table = ds.to_table(columns=[self.column], with_row_id=True, fragments=fragments, filter=where)
        ids = np.asarray(table.column("_rowid"), np.uint64)
        return corpus_of(table.column(0).combine_chunks(), ids, self.tokenizer, self._positions)

    @property
    def has_positions(self) -> bool:
        """Whether phrases can be searched: the index records positions (unindexed rows are
        tokenized with them)."""
        return not self.segments or bool(self.tokenizer.values["with_position"])

    @property
    def ngrams(self) -> bool:
        """Whether the column's index splits texts into n-grams."""
        return bool(self.tokenizer.values["base_tokenizer"] == "ngram")

    def match(
        self, text: str, conjunctive: bool, fuzzy: tuple[int, int, int] | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The rows holding the terms of ``text`` (each of them when ``conjunctive``). With
        ``fuzzy`` (edits, max expansions, prefix length) the index partitions are searched for
        each term's expansions (see :meth:`expand`); unindexed rows for the terms themselves,
        as pylance 14 searches them."""
        terms = self.tokenizer.tokenize(text)
        if fuzzy is None:  # on n-grams pylance 14 finds the rows holding any, even with AND
            return self._search(terms, conjunctive and not self.ngrams)
        # pylance 14 expands the query's plain words (split as by the simple tokenizer, whatever the
        # index's; not lower-cased, stemmed, folded or filtered)
        base = tokenizer_params(_PLAIN_WORDS).split_array(pa.array([text], pa.large_string()))[0].to_pylist()
        expanded = self.expand(base, *fuzzy)  # unindexed n-grams: any of them, as without fuzziness
        return self._search(
            terms, conjunctive, expanded=expanded, flat_conjunctive=conjunctive and not self.ngrams
        )

    def expand(self, terms: list[str], edits: int, most: int, prefix: int) -> list[list[str]]:
        """Each query term's expansions: the terms of any index partition at most ``edits``
        edits from it sharing its first ``prefix`` characters, in byte order; ``most`` of them
        in all, taken term after term (a repeated query term is expanded again)."""
        parts = self._load()[0]
        groups, left = [], most
        for term in terms:
            found = sorted({t for part in parts for t in part.vocabulary().within(term, edits, prefix)})
            groups.append(found[: max(left, 0)])
            left -= len(groups[-1])
        return groups

    def phrase(self, text: str, slop: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """The rows holding the phrase (see :func:`_phrase_docs`), scored as a match of every
        term of it (repeats counting again)."""
        query = self.tokenizer.tokenize_with_positions(text)
        first = query[0][1] if query else 0  # positions count from the phrase's first term
        query = [(term, at - first) for term, at in query]
        terms = [t for t, _ in query]
        if self.ngrams:  # pylance 14: an index partition's rows holding any n-gram (every position
            # of an n-gram is 0), unindexed rows holding the phrase (so: every n-gram)
            flat_only = lambda part: _phrase_docs(part, query, slop) if isinstance(part, _FlatPart) else None  # noqa: E731
            return self._search(terms, False, flat_only, flat_conjunctive=True)
        return self._search(terms, True, lambda part: _phrase_docs(part, query, slop))

    def _search(
        self,
        terms: list[str],
        conjunctive: bool,
        docs: Any = None,
        expanded: list[list[str]] | None = None,
        flat_conjunctive: bool | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Score the rows holding ``terms`` (index partitions: ``expanded``, one group of terms
        per query term, when given; unindexed rows: each term if ``flat_conjunctive``, default
        ``conjunctive``); ``docs(part)`` narrows a part's documents."""
        parts, flat, live = self._load()

        def index_stats(terms: list[str]) -> _Stats:
            stats = _Stats(0, 0, dict.fromkeys(terms, 0))
            for part in parts:
                stats = stats + _part_stats(part, terms)
            return stats

        only = (lambda part: None) if docs is None else docs
        groups = [[t] for t in terms] if expanded is None else expanded
        index_terms = [t for group in groups for t in group]
        stats = index_stats(index_terms)
        required = groups if conjunctive else None
        prefiltered = self._scan._prefiltered
        found = [
            _scores(
                part,
                index_terms,
                stats,
                required,
                only(part),
                None if prefiltered is None else np.isin(part.row_ids, prefiltered),
            )
            for part in parts
        ]
        if live is not None:
            ids = np.concatenate([f[0] for f in found])
            keep = np.isin(ids, live)
            found = [(ids[keep], np.concatenate([f[1] for f in found])[keep])]
        flat_stats = (stats if expanded is None else index_stats(terms)) + _part_stats(flat, terms)
        required = (
            [[t] for t in terms] if (conjunctive if flat_conjunctive is None else flat_conjunctive) else None
        )
        found.append(_scores(flat, terms, flat_stats, required, only(flat)))
        return np.concatenate([f[0] for f in found]), np.concatenate([f[1] for f in found]).astype(np.float32)


def _has_phrase(query: fulltext.FullTextQuery) -> bool:
    if isinstance(query, fulltext.PhraseQuery):
        return True
    if isinstance(query, fulltext.BoostQuery):
        return _has_phrase(query.positive) or _has_phrase(query.negative)
    if isinstance(query, fulltext.BooleanQuery):
        return any(_has_phrase(q) for _, q in query.queries)
    return False


class FullTextScan:
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
        stats_callback: StatsCallback | None = None,
    ) -> None:
        self._ds = ds
        self._stats_callback = stats_callback
        if columns is not None and not isinstance(columns, (list, tuple)):
            raise UnsupportedFeatureError("full-text scans take a list of column names")
        self._columns = None if columns is None else [c for c in columns if c != "_score"]
        self._filter, self._prefilter, self._with_row_id = filter, prefilter, with_row_id
        self._limit, self._offset = limit, offset
        self._indexed = self._indexed_columns()
        self._searches: dict[str, _Column] = {}
        self.query = _parse(query, sorted(self._indexed))
        self._phrases = _has_phrase(self.query)
        self._check(self.query)

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

    def _column(self, column: str) -> _Column:
        if column not in self._searches:
            self._searches[column] = _Column(self, column, self._indexed.get(column, []), self._phrases)
        return self._searches[column]

    def _check(self, query: fulltext.FullTextQuery) -> None:
        """Refuse what lance_ops does not search before anything is read; open the columns."""
        if isinstance(query, fulltext.MatchQuery):
            for name in ("fuzziness", "max_expansions", "prefix_length"):
                value = getattr(query, name)
                if (value is not None or name != "fuzziness") and (
                    isinstance(value, bool) or not isinstance(value, int) or value < 0
                ):
                    raise InvalidArgumentError(
                        f"full_text_query: MatchQuery {name} must be an int >= 0, got {value!r}"
                    )
            if query.document_granularity == fulltext.DocumentGranularity.LIST_ELEMENT:
                raise UnsupportedFeatureError("full_text_query: list-element documents are not supported")
            self._column(query.column)
        elif isinstance(query, fulltext.MultiMatchQuery):
            if not query.columns:
                raise InvalidArgumentError("full_text_query: MultiMatchQuery needs at least one column")
            if query.boosts is not None and len(query.boosts) != len(query.columns):
                raise InvalidArgumentError("full_text_query: MultiMatchQuery needs one boost per column")
            for column in query.columns:
                self._column(column)
        elif isinstance(query, fulltext.PhraseQuery):
            if isinstance(query.slop, bool) or not isinstance(query.slop, int) or query.slop < 0:
                raise InvalidArgumentError(
                    f"full_text_query: phrase slop must be an int >= 0, got {query.slop!r}"
                )
            if query.document_granularity == fulltext.DocumentGranularity.LIST_ELEMENT:
                raise UnsupportedFeatureError("full_text_query: list-element documents are not supported")
            if not self._column(query.column).has_positions:
                raise InvalidArgumentError(
                    "position is not found but required for phrase queries, try recreating the index "
                    f"with position (column {query.column!r})"
                )
        elif isinstance(query, fulltext.BoostQuery):
            self._check(query.positive)
            self._check(query.negative)
        elif isinstance(query, fulltext.BooleanQuery):
            for _, inner in query.queries:
                self._check(inner)
        else:
            raise UnsupportedFeatureError(
                f"full_text_query {type(query).__name__} is not supported by lance_ops"
            )

    def _evaluate(self, query: fulltext.FullTextQuery) -> tuple[np.ndarray, np.ndarray]:
        if isinstance(query, fulltext.MatchQuery):
            fuzzy = (query.fuzziness, query.max_expansions, query.prefix_length) if query.fuzziness else None
            ids, scores = self._column(query.column).match(
                query.query, query.operator == fulltext.FullTextOperator.AND, fuzzy
            )
            return ids, (scores * np.float32(query.boost)).astype(np.float32)
        if isinstance(query, fulltext.PhraseQuery):
            return self._column(query.column).phrase(query.query, query.slop)
        if isinstance(query, fulltext.MultiMatchQuery):
            result = _empty()
            for i, column in enumerate(query.columns):
                boost = np.float32(query.boosts[i] if query.boosts is not None else 1.0)
                ids, scores = self._column(column).match(
                    query.query, query.operator == fulltext.FullTextOperator.AND
                )
                result = _union(result, (ids, (scores * boost).astype(np.float32)), "max")
            return result
        if isinstance(query, fulltext.BoostQuery):
            # rows of the positive query; those the negative one matches lose negative_boost times
            # its score
            ids, scores = self._evaluate(query.positive)
            union_ids, penalty = _union(
                (ids, np.zeros(len(ids), np.float32)), self._evaluate(query.negative), "sum"
            )
            penalty = penalty[np.searchsorted(union_ids, ids)]
            return ids, (scores - np.float32(query.negative_boost) * penalty).astype(np.float32)
        assert isinstance(query, fulltext.BooleanQuery)
        must = [self._evaluate(q) for occur, q in query.queries if occur == fulltext.Occur.MUST]
        should = [self._evaluate(q) for occur, q in query.queries if occur == fulltext.Occur.SHOULD]
        must_not = [self._evaluate(q) for occur, q in query.queries if occur == fulltext.Occur.MUST_NOT]
        result = _empty()
        for part in must + should:
            result = _union(result, part, "sum")
        for part in must:
            result = _restrict(result, part[0], keep=True)
        for part in must_not:
            result = _restrict(result, part[0], keep=False)
        return result

    def _row_ids(self, filter: Any) -> np.ndarray:
        table = self._ds.to_table(columns=[], filter=filter, with_row_id=True)
        return np.asarray(table.column("_rowid"), dtype=np.uint64)

    @cached_property
    def _prefiltered(self) -> np.ndarray | None:
        """Row ids passing the filter, when it is a prefilter (index partitions score only those)."""
        return self._row_ids(self._filter) if self._filter is not None and self._prefilter else None

    def to_table(self) -> pa.Table:
        """The matching rows by descending ``_score`` (see the module docstring)."""
        return report_run(self._stats_callback, self._table, lambda table: table.num_rows)

    def _table(self) -> pa.Table:
        ids, scores = self._evaluate(self.query)
        if self._prefiltered is not None:
            keep = np.isin(ids, self._prefiltered)
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
        lines += self._plan(self.query, "    ")
        return "\n".join(lines) + "\n"

    def analyze_plan(self) -> str:
        """The plan (:meth:`explain_plan`) after running the search: the rows returned and the
        storage reads made (the take's line), the prefilter's index work (its line) and the
        search's (the query's line): ``indices_loaded``, ``parts_loaded``, ``index_comparisons``
        (documents scored), ``index_cache_hits`` / ``index_cache_misses`` (see
        :mod:`lance_ops.io.index_cache`)."""
        counters, filtering = ScanCounters(), IndexCounter()
        with counters.active():
            with counting_index_work(filtering):
                prefiltered = self._prefiltered is not None
            rows = self._table().num_rows
        lines = self.explain_plan().splitlines()
        io = counters.io
        reads = f"bytes_read={io.bytes_read}, iops={io.iops}, requests={io.requests}"
        lines[0] += f", metrics=[output_rows={rows}, {reads}]"
        if prefiltered:
            lines[1] += f", metrics=[{filtering.metrics()}]"
        search = lines.index("  SortExec: _score DESC") + 1
        lines[search] += f", metrics=[{counters.index.metrics()}]"
        return "\n".join(lines) + "\n"

    def _plan(self, query: fulltext.FullTextQuery, indent: str) -> list[str]:
        if isinstance(query, fulltext.MatchQuery | fulltext.MultiMatchQuery):
            columns = [query.column] if isinstance(query, fulltext.MatchQuery) else query.columns
            lines = []
            for column in columns:
                search = self._column(column)
                terms = search.tokenizer.tokenize(query.query)
                if search.segments:
                    lines.append(
                        f"{indent}MatchQuery: column={column}, index={search.segments[0].name}, "
                        f"deltas={len(search.segments)}, query={terms}"
                    )
                lines.append(f"{indent}FlatMatchQuery (unindexed fragments): column={column}, query={terms}")
            return lines
        if isinstance(query, fulltext.PhraseQuery):
            search = self._column(query.column)
            terms = search.tokenizer.tokenize(query.query)
            lines = [f"{indent}PhraseQuery: column={query.column}, slop={query.slop}, query={terms}"]
            if search.segments:
                lines[0] += f", index={search.segments[0].name}"
            return lines
        inner = (
            [query.positive, query.negative]
            if isinstance(query, fulltext.BoostQuery)
            else [q for _, q in query.queries]  # type: ignore[attr-defined]
        )
        return [f"{indent}{type(query).__name__}"] + [
            line for q in inner for line in self._plan(q, indent + "  ")
        ]
