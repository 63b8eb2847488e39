"""k-nearest-neighbour search: ``scanner(nearest={...})``, through an IVF index when one covers the
column (and its metric), else an exact flat search.

``nearest`` holds ``column``, ``q``, ``k`` (10, or the scan's ``limit`` when only that is given),
``nprobes`` (20, at most the partitions; or ``minimum_nprobes``, the number probed, and
``maximum_nprobes``, shown in the plan: lance_ops does not probe further when a filter leaves fewer
than ``k`` rows), ``refine_factor``, ``metric`` (the index's; ``l2`` without one) and ``use_index``
(True). ``fast_search=True`` searches the indexed fragments only, as pylance.

With an index, each segment's ``nprobes`` centroids nearest the query are probed and the rows of
those partitions scored from the stored codes (IVF_FLAT exactly, IVF_SQ / IVF_PQ from the decoded
approximations); fragments no segment covers are searched flat; rows deleted since the index was
built are left out. ``refine_factor`` takes ``k * refine_factor`` candidates and re-scores them with
the exact vectors. ``_distance`` is pylance 14's: squared l2, ``1 - cos`` for cosine, ``1 - q.v``
for dot, the number of differing bits for hamming (binary ``uint8`` vectors). Ties go to the
smaller row id.

``filter`` with ``prefilter=False`` (the default) applies after the top ``k`` are chosen (fewer than
``k`` rows may come back), with ``prefilter=True`` before, as pylance.

A multivector column (``list<fixed_size_list<float>>``) takes one query vector or several (a
sequence of equally long vectors): a row's ``_distance`` is the sum over the query vectors of the
smallest distance from that query vector to one of the row's vectors (late interaction, "MaxSim",
with cosine ``sum(1 - max cos)``); rows with a null or empty list are never returned. Through an
index (cosine only, as pylance 14 builds them) it is pylance 14's estimate: each query vector
takes its ``k * 10`` nearest indexed vectors (``LANCE_XTR_OVERFETCH``, 10), a row's similarity to
that query vector is ``1 -`` its nearest such vector's distance, or, when none of its vectors is
among them, ``1 -`` the farthest of the ``k * 10`` distances; ``_distance`` is the number of query
vectors less the sum of the similarities. ``refine_factor`` re-scores the top ``k *
refine_factor`` rows with the exact MaxSim.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from pyroaring import BitMap

from lance_ops.errors import (
    CorruptFileError,
    IndexColumnTypeError,
    IndexCorruptError,
    InvalidArgumentError,
    UnsupportedFeatureError,
)
from lance_ops.file import LanceFileReader
from lance_ops.fragment.scan import take_columns, take_rows
from lance_ops.index.build_vector import (
    as_matrix,
    is_multivector_type,
    is_vector_type,
    vector_matrix,
    vector_rows,
)
from lance_ops.index.files import IndexFileData
from lance_ops.index.ivf import (
    _CODE_COLUMNS,
    ROW_ID,
    STORAGE_FILE,
    _centroids,
    _codebook,
    _decode,
    _ivf_of,
    _Storage,
    unpack_4bit,
)
from lance_ops.index.legacy_ivf import (
    LEGACY_FILE,
    LegacyIvfPq,
    is_legacy_index,
    read_legacy_model,
    read_legacy_partitions,
)
from lance_ops.index.types import VECTOR_TYPES, covers_no_fragment, index_type_of
from lance_ops.io.context import StorageContext
from lance_ops.io.index_cache import count_comparisons
from lance_ops.scanner import projected_take
from lance_ops.schema import LanceSchema
from lance_ops.table import frag_reuse
from lance_ops.table.manifest import IndexMetadata

if TYPE_CHECKING:
    from lance_ops.dataset import LanceDataset

__all__ = ["VectorQuery"]

_DEFAULT_NPROBES = 20


def _overfetch() -> int:
    """How many indexed vectors per ``k`` each query vector of a multivector search takes."""
    return int(os.environ.get("LANCE_XTR_OVERFETCH", "10"))


@dataclass(frozen=True)
class _Nearest:
    column: str
    q: np.ndarray
    k: int
    nprobes: int | None
    refine_factor: int | None
    metric: str | None
    use_index: bool
    maximum_nprobes: int | None = None


def _parse(nearest: Any, limit: int | None = None) -> _Nearest:
    if not isinstance(nearest, dict) or "column" not in nearest or "q" not in nearest:
        raise InvalidArgumentError("nearest must be a dict with at least 'column' and 'q'")
    q = _query(nearest["q"], nearest["column"])
    metric = nearest.get("metric")
    metric = None if metric is None else {"euclidean": "l2"}.get(str(metric).lower(), str(metric).lower())
    if metric not in (None, "l2", "cosine", "dot", "hamming"):
        raise InvalidArgumentError(f"nearest on {nearest['column']!r}: unknown metric {nearest['metric']!r}")
    k = int(nearest.get("k") or limit or 10)
    refine = nearest.get("refine_factor")
    nprobes = nearest.get("nprobes", nearest.get("minimum_nprobes"))
    maximum = nearest.get("nprobes", nearest.get("maximum_nprobes"))
    return _Nearest(
        str(nearest["column"]),
        q,
        k,
        None if nprobes is None else int(nprobes),
        None if refine is None else int(refine),
        metric,
        bool(nearest.get("use_index", True)),
        None if maximum is None else int(maximum),
    )


def _query(q: Any, column: Any) -> np.ndarray:
    """The query: 1-d for one vector, ``[n, dim]`` for several (a sequence of vectors, as pylance
    tells them apart), which must all be as long."""
    scalar = np.isscalar(q) or (isinstance(q, np.ndarray) and q.ndim == 0)
    sequence = hasattr(q, "__getitem__") and not scalar
    first = q[0] if sequence and len(q) else None
    if not isinstance(first, (list, tuple, np.ndarray, pa.Array)):
        return np.asarray(q, dtype=np.float32).reshape(-1)
    vectors = [np.asarray(v, dtype=np.float32).reshape(-1) for v in q]
    other = next((v.size for v in vectors if v.size != vectors[0].size), None)
    if other is not None:
        raise InvalidArgumentError(
            f"nearest on {column!r}: All query vectors must have the same length, "
            f"but got {vectors[0].size} and {other}"
        )
    return np.stack(vectors)


def _maxsim(
    values: pa.Array, row_ids: np.ndarray, queries: np.ndarray, metric: str
) -> tuple[np.ndarray, np.ndarray]:
    """The rows of a multivector column ``values`` (at ``row_ids``) that hold a vector, and their
    exact distance to ``queries`` (``[n, dim]``): per query vector the smallest distance to one of
    the row's vectors, summed (float32)."""
    vectors, _ = vector_rows(values, row_ids)
    lengths = np.asarray(values.value_lengths().fill_null(0), dtype=np.int64)
    present = lengths > 0
    if not present.any():
        return np.empty(0, np.uint64), np.empty(0, np.float32)
    matrix = as_matrix(vectors, "nearest")
    dists = np.stack([_flat_distance(matrix, q, metric) for q in queries], axis=1).astype(np.float32)
    starts = (np.cumsum(lengths) - lengths)[present]
    nearest = np.fmin.reduceat(dists, starts, axis=0)  # a null vector (NaN) counts when alone
    return np.asarray(row_ids, np.uint64)[present], nearest.sum(axis=1, dtype=np.float32)


def _xtr_score(lists: list[tuple[np.ndarray, np.ndarray]], fetch: int) -> tuple[np.ndarray, np.ndarray]:
    """pylance 14's multivector score of the rows found: ``lists`` holds per query vector the
    row ids and distances of its candidate vectors; its ``fetch`` nearest are kept."""
    found: list[tuple[np.ndarray, np.ndarray, np.float32]] = []
    for ids, dists in lists:
        ids, dists = _top(ids, dists.astype(np.float32), fetch)
        missed = np.float32(1.0) - dists[-1] if len(dists) else np.float32(0.0)
        rows, first = np.unique(ids, return_index=True)  # sorted by distance: the first is nearest
        found.append((rows, np.float32(1.0) - dists[first], missed))
    rows = np.unique(np.concatenate([r for r, _, _ in found])) if found else np.empty(0, np.uint64)
    total = np.zeros(len(rows), np.float32)
    for ids, sims, missed in found:
        each = np.full(len(rows), missed, np.float32)
        each[np.searchsorted(rows, ids)] = sims
        total += each
    return rows, np.float32(len(lists)) - total


def _top(ids: np.ndarray, dists: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``count`` smallest distances (ties: smaller row id first), in order."""
    if 0 < count < len(dists):
        # every row within the count-th smallest distance (ties included), then sorted
        threshold = np.partition(dists, count - 1)[count - 1]
        near = np.flatnonzero(dists <= threshold)
        ids, dists = ids[near], dists[near]
    order = np.lexsort((ids, dists))[:count]
    return ids[order], dists[order]


def _pq_block(
    codebook: np.ndarray, codes: np.ndarray, centroid: np.ndarray, metric: str
) -> tuple[np.ndarray, np.ndarray]:
    """A cached form of one partition's PQ codes (``[m, rows]`` uint8) for :func:`_pq_distances`:
    the codes, contiguous by sub-vector, and for l2 each row's ``2 c.r + |r|^2`` (``r`` the
    row's decoded residual, ``c`` the partition's centroid)."""
    m = codebook.shape[0]
    codes = np.ascontiguousarray(codes, dtype=np.uint8)
    if metric == "dot":
        return codes, np.empty(0, np.float32)
    residual = np.concatenate([codebook[j][codes[j]] for j in range(m)], axis=1)
    extra = 2.0 * (residual @ centroid) + (residual * residual).sum(1)
    return codes, extra.astype(np.float32)


def _pq_distances(
    codebook: np.ndarray,
    blocks: list[tuple[np.ndarray, np.ndarray]],
    probed: np.ndarray,
    centroids: np.ndarray,
    q: np.ndarray,
    metric: str,
) -> np.ndarray:
    """Distances of PQ-coded rows to ``q`` by table lookup: one ``[m, k]`` table of ``q``'s
    sub-vectors against the codewords, one entry of each of its rows summed per row (``blocks``:
    each probed partition's :func:`_pq_block`; the sums compiled, :mod:`lance_ops.index._pq_kernels`).

    l2 and cosine indices code the residual ``r`` to the partition's centroid ``c``, dot indices
    the vector: l2 is ``|q - c|^2 - 2 q.r + (2 c.r + |r|^2)``, dot ``1 - q.r``. A cosine index
    is an l2 one over normalized vectors (``q`` normalized by the caller): pylance 14 ranks its
    rows and reports ``_distance`` as the l2 distance to the decoded ``c + r``, whose norm is not
    quite 1, so ``1 - q.(c + r)`` would rank them differently."""
    from lance_ops.index._pq_kernels import add_lookups  # noqa: PLC0415 - numba, on first use

    m, _, sub = codebook.shape
    counts = np.asarray([codes.shape[1] for codes, _ in blocks], dtype=np.int64)
    table = np.ascontiguousarray((codebook * q.reshape(m, 1, sub)).sum(-1), dtype=np.float32)
    out = np.zeros(int(counts.sum()), np.float32)
    start = 0
    for (codes, _), n in zip(blocks, counts.tolist(), strict=True):
        add_lookups(table, codes, out[start : start + n])
        start += n
    if metric in ("l2", "cosine"):
        centre = q[None, :] - centroids[probed]
        out *= -2.0
        out += np.repeat((centre * centre).sum(1).astype(np.float32), counts)
        out += np.concatenate([extra for _, extra in blocks]) if blocks else 0.0
        return out
    return 1.0 - out


_POPCOUNT = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).sum(1).astype(np.float32)


def _flat_distance(vectors: np.ndarray, q: np.ndarray, metric: str) -> np.ndarray:
    if metric == "hamming":  # bytes (as uint8 or their float values): the bits that differ
        return _POPCOUNT[np.bitwise_xor(np.asarray(vectors, np.uint8), np.asarray(q, np.uint8))].sum(1)
    if metric == "l2":
        diff = vectors - q[None, :]
        return (diff * diff).sum(1)
    if metric == "cosine":
        norms = np.linalg.norm(vectors, axis=1) * np.linalg.norm(q)
        return 1.0 - (vectors @ q) / np.where(norms == 0, 1.0, norms)
    return 1.0 - vectors @ q


class VectorQuery:
    """A nearest-neighbour scan of one dataset version (``to_table``, ``explain_plan``)."""

    def __init__(
        self,
        ds: LanceDataset,
        nearest: Any,
        columns: Any,
        filter: Any,
        prefilter: bool,
        with_row_id: bool,
        with_row_address: bool,
        limit: int | None,
        offset: int | None,
        fast_search: bool = False,
    ) -> None:
        self._ds = ds
        self._n = _parse(nearest, limit)
        self._fast_search = fast_search
        if columns is not None and not isinstance(columns, (list, tuple, Mapping)):
            raise UnsupportedFeatureError(
                "nearest scans take a list of column names or a dict of expressions"
            )
        if with_row_address:
            raise UnsupportedFeatureError("nearest scans do not return _rowaddr in lance_ops")
        # a dict: output name -> SQL expression over the rows found, as pylance
        self._columns: list[str] | dict[str, Any] | None = (
            None if columns is None else dict(columns) if isinstance(columns, Mapping) else list(columns)
        )
        self._filter = filter
        self._prefilter = prefilter
        self._with_row_id = with_row_id
        self._limit, self._offset = limit, offset
        field = LanceSchema(ds.manifest.schema).field(self._n.column)
        if field is None:
            raise InvalidArgumentError(f"nearest: column {self._n.column!r} is not in the schema")
        dtype = field.to_arrow().type
        self._multi = is_multivector_type(dtype)
        if self._multi:
            dtype = dtype.value_type
        if not is_vector_type(dtype):
            raise IndexColumnTypeError(
                f"nearest: column {self._n.column!r} must be a vector (fixed_size_list of float, "
                f"or of uint8 for hamming) or a multivector (list of them), got {dtype}",
                self._n.column,
            )
        if self._n.q.ndim == 2 and not self._multi:
            raise InvalidArgumentError(
                f"nearest: the query is a multivector but column {self._n.column!r} ({dtype}) is not"
            )
        if dtype.list_size != self._n.q.shape[-1] or not self._n.q.size:
            raise InvalidArgumentError(
                f"nearest: query dimension {self._n.q.shape[-1]} does not match index column size "
                f"{dtype.list_size} of column {self._n.column!r}"
            )
        # a multivector search's query vectors, [n, dim]
        self._queries = self._n.q.reshape(-1, dtype.list_size)
        self._field_id = field.id()
        self._segments, self._kind, self._index_metric = self._index()
        binary = pa.types.is_uint8(dtype.value_type)
        self.metric = self._n.metric or self._index_metric or ("hamming" if binary else "l2")
        if binary != (self.metric == "hamming"):
            raise InvalidArgumentError(
                f"nearest: metric {self.metric!r} on column {self._n.column!r} of {dtype} "
                "(hamming is for binary uint8 vectors, and only it)"
            )
        if self._segments and self.metric != self._index_metric:
            self._segments = []

    def _index(self) -> tuple[list[IndexMetadata], str | None, str | None]:
        if not self._n.use_index:
            return [], None, None
        ctx = self._ds.storage
        for name in dict.fromkeys(i.name for i in self._ds.manifest.indices):
            segments = [i for i in self._ds.manifest.indices if i.name == name]
            if segments[0].fields[:1] != (self._field_id,):
                continue
            kind = index_type_of(segments[0], ctx)
            # a segment over no fragment (``train=False``) has no files to search: every
            # fragment it could hold is searched flat
            segments = [s for s in segments if not covers_no_fragment(s)]
            if kind in VECTOR_TYPES and segments:
                return segments, kind, _segment(ctx, segments[0], kind).metric
        return [], None, None

    # ------------------------------------------------------------------ search

    def _live(self, ids: np.ndarray) -> np.ndarray:
        """Which of the index's row ids are rows of this version (not deleted since the build):
        from the fragments and their deletion files alone, when row ids are row addresses."""
        if self._ds.manifest.uses_stable_row_ids:
            return np.isin(ids, self._row_ids(None))
        fragments = list(self._ds.handle.files.fragments())
        owner = ids >> np.uint64(32)
        offset = (ids & np.uint64(0xFFFFFFFF)).astype(np.int64)
        present = np.zeros(max((f.id for f in fragments), default=-1) + 2, dtype=bool)  # last: none
        present[[f.id for f in fragments]] = True
        keep = present[np.minimum(owner, np.uint64(len(present) - 1)).astype(np.intp)]
        for reader in fragments:
            deleted = reader.deleted
            if len(deleted):
                mine = np.flatnonzero(owner == np.uint64(reader.id))
                keep[mine[np.isin(offset[mine], deleted)]] = False
        return keep

    def _all_live(self, covered: BitMap) -> bool:
        """Whether every row the segments hold is a row of this version: row ids are addresses,
        and every fragment the segments cover is still here with no row deleted."""
        manifest = self._ds.manifest
        if manifest.uses_stable_row_ids or any(frag_reuse.is_behind(manifest, s) for s in self._segments):
            return False
        fragments = {f.id: f for f in self._ds.handle.files.fragments()}
        return all(i in fragments and not len(fragments[i].deleted) for i in covered)

    def _row_ids(self, filter: Any) -> np.ndarray:
        table = self._ds.to_table(columns=[], filter=filter, with_row_id=True)
        return np.asarray(table.column("_rowid"), dtype=np.uint64)

    def _probe(self, segment: IndexMetadata, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Row ids and approximate distances to ``q`` of the probed partitions of one segment
        (only their rows are read from the index's storage file, once: they are cached)."""
        ctx = self._ds.storage
        kind = self._kind or ""
        state = _segment(ctx, segment, kind)
        centroids, metric = state.centroids, state.metric
        if metric == "cosine":
            q = q / (np.linalg.norm(q) or 1.0)
        # the same order as pylance's
        centre = _flat_distance(centroids, q, metric if metric in ("dot", "hamming") else "l2")
        nprobes = min(self._n.nprobes or _DEFAULT_NPROBES, len(centroids))
        probed = np.sort(np.argsort(centre, kind="stable")[:nprobes])
        probed = probed[state.lengths[probed] > 0]
        blocks = _partitions(ctx, state, segment, probed)
        count_comparisons(len(centroids) + sum(len(b[0]) for b in blocks))
        ids = np.concatenate([b[0] for b in blocks]) if blocks else np.empty(0, np.uint64)
        if state.codebook is not None:
            return ids, _pq_distances(state.codebook, [b[1:] for b in blocks], probed, centroids, q, metric)
        width = centroids.shape[1]
        codes = np.concatenate([b[1] for b in blocks]) if blocks else np.empty((0, width), np.float32)
        if metric == "hamming":
            return ids, _flat_distance(codes, q, "hamming")
        assert state.header is not None  # legacy files are IVF_PQ (codebook above)
        vectors = _decode(state.header, kind, codes, 0.0)
        if metric == "l2" or (metric == "cosine" and kind.endswith("SQ")):
            # pylance 14 reports a cosine IVF_SQ's distance as the squared l2 from the normalized
            # query to the decoded vector (about twice ``1 - cos``)
            return ids, _flat_distance(vectors, q, "l2")
        return ids, 1.0 - vectors @ q

    def _indexed(self, q: np.ndarray, passing: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """Row ids and distances to ``q`` of the index's candidates: the live rows of the probed
        partitions (those in ``passing`` only, when given)."""
        ids, dists = [np.empty(0, np.uint64)], [np.empty(0, np.float32)]
        for segment in self._segments:
            segment_ids, segment_dists = self._probe(segment, q)
            ids.append(segment_ids)
            dists.append(segment_dists)
        index_ids, index_dists = np.concatenate(ids), np.concatenate(dists).astype(np.float32)
        if self._segments and not self._all_live(self._covered()):
            keep = self._live(index_ids)
            index_ids, index_dists = index_ids[keep], index_dists[keep]
        if passing is not None:
            keep = np.isin(index_ids, passing)
            index_ids, index_dists = index_ids[keep], index_dists[keep]
        return index_ids, index_dists

    def _candidates(
        self, passing: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, bool]:
        """Row ids and distances of the index's candidates (a multivector search: its rows
        scored as pylance, :func:`_xtr_score`) and of the rows of the fragments no segment covers
        (exact); whether there are such. ``passing``: the rows a prefilter lets through."""
        if self._multi:
            lists = [self._indexed(q, passing) for q in self._queries] if self._segments else []
            index_ids, index_dists = _xtr_score(lists, self._n.k * _overfetch())
        else:
            index_ids, index_dists = self._indexed(self._n.q, passing)
        flat_fragments = self._unindexed()
        flat_ids, flat_dists = np.empty(0, np.uint64), np.empty(0, np.float32)
        if flat_fragments:
            table = self._ds.to_table(columns=[self._n.column], with_row_id=True, fragments=flat_fragments)
            row_ids = np.asarray(table.column("_rowid"), dtype=np.uint64)
            column = table.column(self._n.column).combine_chunks()
            if self._multi:
                flat_ids, flat_dists = _maxsim(column, row_ids, self._queries, self.metric)
            else:
                vectors, flat_ids = vector_matrix(column, row_ids, self._n.column)
                flat_dists = _flat_distance(vectors, self._n.q, self.metric).astype(np.float32)
            if passing is not None:
                keep = np.isin(flat_ids, passing)
                flat_ids, flat_dists = flat_ids[keep], flat_dists[keep]
        return index_ids, index_dists, flat_ids, flat_dists, bool(flat_fragments)

    def _unindexed(self) -> list[Any]:
        """The fragments searched flat: those no segment covers (none with ``fast_search``)."""
        if self._fast_search and self._segments:
            return []
        covered = self._covered()
        return [f for f in self._ds.get_fragments() if f.fragment_id not in covered]

    def _covered(self) -> BitMap:
        """The fragments the index's segments cover."""
        covered = BitMap()
        for segment in self._segments:
            covered |= BitMap.deserialize(segment.fragment_bitmap) if segment.fragment_bitmap else BitMap()
        return covered

    def _exact(self, ids: np.ndarray) -> np.ndarray:
        if not len(ids):
            return np.empty(0, np.float32)
        top, *path = self._n.column.split(".")  # a struct field: take its top-level struct
        values = _rows(self._ds, ids, [top]).column(top).combine_chunks()
        for name in path:
            values = values.flatten()[values.type.get_field_index(name)]
        if self._multi:  # the candidates each hold a vector: every one has its distance
            return _maxsim(values, ids, self._queries, self.metric)[1]
        vectors = np.asarray(values.flatten().cast(pa.float32()), np.float32).reshape(len(ids), -1)
        return _flat_distance(vectors, self._n.q, self.metric).astype(np.float32)

    def to_table(self) -> pa.Table:
        passing = self._row_ids(self._filter) if self._filter is not None and self._prefilter else None
        index_ids, index_dists, flat_ids, flat_dists, unindexed = self._candidates(passing)
        k = self._n.k
        # pylance re-scores the index's top k * refine_factor with the exact vectors, and its top
        # k when unindexed fragments are searched alongside (their distances are exact); an
        # IVF_FLAT's distances are exact already, a multivector score is not
        refine = self._n.refine_factor or (1 if unindexed else 0)
        if refine and self._segments and (self._multi or not (self._kind or "").endswith("FLAT")):
            index_ids, _ = _top(index_ids, index_dists, k * refine)
            index_dists = self._exact(index_ids)
        ids, dists = _top(np.concatenate([index_ids, flat_ids]), np.concatenate([index_dists, flat_dists]), k)
        if self._filter is not None and not self._prefilter:
            keep = np.isin(ids, self._row_ids(self._filter))
            ids, dists = ids[keep], dists[keep]
        start = self._offset or 0
        stop = None if self._limit is None else start + self._limit
        ids, dists = ids[start:stop], dists[start:stop]
        columns = self._columns if self._columns is not None else self._ds.schema.names
        extra = {"_distance": pa.array(dists, pa.float32()), "_rowid": pa.array(ids, pa.uint64())}
        real = [c for c in columns if c not in extra]
        if isinstance(columns, dict):
            files = self._ds.handle.files
            table = projected_take(files, columns, lambda names: take_rows(files, ids, names))
        elif real:
            table = _rows(self._ds, ids, real)
        else:
            table = pa.table({"_": pa.nulls(len(ids))}).drop(["_"])
        # _distance and _rowid where the columns name them, else last (_rowid with with_row_id)
        names = [*columns, "_distance", *(["_rowid"] if self._with_row_id else [])]
        names = list(dict.fromkeys(n for n in names if n in extra or n in real))
        fields = [pa.field(n, extra[n].type) if n in extra else table.schema.field(n) for n in names]
        arrays = [extra[n] if n in extra else table.column(n) for n in names]
        return pa.Table.from_arrays(arrays, schema=pa.schema(fields, metadata=table.schema.metadata))

    def to_batches(self) -> Any:
        return iter(self.to_table().to_batches())

    def explain_plan(self, verbose: bool = False) -> str:
        n = self._n
        lines = [f"Take: columns={list(self._columns or self._ds.schema.names)}"]
        if self._filter is not None:
            lines.append(f"  Filter: {self._filter} ({'prefilter' if self._prefilter else 'postfilter'})")
            indexed = self._ds.scanner(filter=self._filter, columns=[]).index_query()
            if indexed is not None:
                lines.append(f"    ScalarIndexQuery: query={indexed}")
        lines.append(f"  TopK: k={n.k}, refine_factor={n.refine_factor}")
        if self._segments and self._multi:
            lines.append(f"  MultivectorScoring: k={n.k}, query_vectors={len(self._queries)}")
        if self._segments:
            name = self._segments[0].name
            lines.append(
                f"    ANNSubIndex: name={name}, type={self._kind}, metric={self.metric}, "
                f"deltas={len(self._segments)}"
            )
            maximum = "None" if n.maximum_nprobes is None else f"Some({n.maximum_nprobes})"
            lines.append(
                f"      ANNIvfPartition: minimum_nprobes={n.nprobes or _DEFAULT_NPROBES}, "
                f"maximum_nprobes={maximum}"
            )
            if self._unindexed():
                lines.append("    KNNVectorDistance (unindexed fragments): metric=" + self.metric)
        else:
            lines.append(f"    KNNVectorDistance: metric={self.metric}")
        return "\n".join(lines) + "\n"

    def analyze_plan(self) -> str:
        """The plan (:meth:`explain_plan`) and the rows the search returns."""
        return self.explain_plan() + f"rows={self.to_table().num_rows}\n"


# Index files never change under a uuid: what a search read of a segment (its IVF model and storage
# header, and each probed partition's row ids and codes) is kept in the dataset's index cache
# (:mod:`lance_ops.io.index_cache`) for the next search, as pylance keeps them in its session's.
_NONE = np.empty(0, np.float32)
# partition -> row ids, codes (PQ: :func:`_pq_block`'s ``[m, rows]``, else ``[rows, width]``) and
# PQ's per-row l2 term (else empty)
_Partition = tuple[np.ndarray, np.ndarray, np.ndarray]


@dataclass
class _Segment:
    """One segment's search state: model, storage layout, open storage reader."""

    centroids: np.ndarray
    metric: str
    kind: str
    offsets: np.ndarray
    lengths: np.ndarray
    header: _Storage | None  # parameters and global buffers; no rows (None: legacy)
    codebook: np.ndarray | None  # PQ: [m, codewords, sub-vector dim]
    reader: Any
    path: str
    legacy: LegacyIvfPq | None = None  # a legacy IVF_PQ file (header and reader unused)

    @property
    def nbytes(self) -> int:
        model = self.centroids.nbytes + self.offsets.nbytes + self.lengths.nbytes
        return model + (0 if self.codebook is None else self.codebook.nbytes) + 4096  # + header, reader


def _segment(ctx: StorageContext, segment: IndexMetadata, kind: str) -> _Segment:
    return ctx.index_cache.get(
        ("ivf", segment.uuid), lambda: _open_segment(ctx, segment, kind), lambda s: s.nbytes, kind="index"
    )


def _open_segment(ctx: StorageContext, segment: IndexMetadata, kind: str) -> _Segment:
    if kind == "IVF_PQ" and is_legacy_index(ctx, segment):
        model = read_legacy_model(ctx, segment)
        return _Segment(
            model.centroids,
            model.metric,
            kind,
            model.offsets,
            model.lengths,
            None,
            model.codebook,
            None,
            ctx.path("_indices", str(uuid.UUID(bytes=segment.uuid)), LEGACY_FILE),
            model,
        )
    path = ctx.path("_indices", str(uuid.UUID(bytes=segment.uuid)), STORAGE_FILE)
    size = next((f.size_bytes for f in segment.files if f.path == STORAGE_FILE), None)
    code_column = _CODE_COLUMNS[kind.rsplit("_", 1)[1]]
    centroids, metric = _centroids(ctx, segment)
    with _storage_errors(path, segment):
        reader = LanceFileReader(path, store=ctx.store, size=size or None)
        count = len(reader.metadata().global_buffers)
        buffers = tuple(reader.read_global_buffer(i) for i in range(1, count))
        data = IndexFileData(reader.schema.empty_table(), str(reader.version), buffers)
        position, ivf = _ivf_of(data, segment, STORAGE_FILE)
        lengths = np.asarray(ivf.lengths, dtype=np.int64)
        offsets = np.cumsum(lengths) - lengths
        if int(lengths.sum()) != int(reader.num_rows) or list(offsets) != list(ivf.offsets):
            raise IndexCorruptError(path, f"index {segment.name!r}: partitions do not cover the rows")
        if len(lengths) != len(centroids):
            raise IndexCorruptError(path, f"index {segment.name!r}: partitions do not match the centroids")
        params = json.loads(json.loads(data.meta("storage_metadata", segment, STORAGE_FILE))[0])
        header = _Storage(data, position, ivf, lengths, params, code_column)
        codebook = _codebook(header) if kind.endswith("PQ") else None
    return _Segment(centroids, metric, kind, offsets, lengths, header, codebook, reader, path)


@contextmanager
def _storage_errors(path: str, segment: IndexMetadata) -> Iterator[None]:
    """Turns the file reader's errors on an index storage file into :class:`IndexCorruptError`."""
    try:
        yield
    except IndexCorruptError:
        raise
    except FileNotFoundError as exc:
        raise IndexCorruptError(path, f"index {segment.name!r}: file {STORAGE_FILE} is missing") from exc
    except CorruptFileError as exc:
        raise IndexCorruptError(path, f"index {segment.name!r}: {exc.reason}") from exc
    except (ValueError, IndexError, TypeError, KeyError) as exc:
        raise IndexCorruptError(path, f"index {segment.name!r}: undecodable storage: {exc}") from exc


def _partitions(
    ctx: StorageContext, state: _Segment, segment: IndexMetadata, probed: np.ndarray
) -> list[_Partition]:
    """The row ids and codes of the (non-empty) partitions ``probed``, through the dataset's index
    cache; those not kept are read by row range (adjacent partitions in one read)."""
    probed = probed[state.lengths[probed] > 0]
    keys = [("ivf-partition", segment.uuid, int(p)) for p in probed.tolist()]

    def load(positions: list[int]) -> list[_Partition]:
        chosen = probed[positions]
        loaded: list[_Partition] = []
        if state.legacy is not None:
            assert state.codebook is not None
            parts = read_legacy_partitions(ctx, segment, state.legacy, chosen.tolist())
            for p, (ids, rows) in zip(chosen.tolist(), parts, strict=True):
                cached, extra = _pq_block(state.codebook, rows.T, state.centroids[p], state.metric)
                loaded.append((ids, cached, extra))
            return loaded
        header = state.header
        assert header is not None
        code_column = header.code_column
        transposed = header.transposed
        with _storage_errors(state.path, segment):
            for run in np.split(chosen, np.flatnonzero(np.diff(chosen) != 1) + 1):
                table = state.reader.read_range(
                    int(state.offsets[run[0]]), int(state.lengths[run].sum()), [ROW_ID, code_column]
                ).to_table()
                ids = np.asarray(table.column(ROW_ID).combine_chunks(), dtype=np.uint64)
                column = table.column(code_column).combine_chunks()
                width = column.type.list_size
                flat = np.asarray(column.flatten()).reshape(-1)
                start = 0
                for p in run.tolist():
                    n = int(state.lengths[p])
                    block = flat[start * width : (start + n) * width]
                    if state.codebook is not None:  # PQ: [m, n], as stored when transposed
                        codes = block.reshape(width, n) if transposed else block.reshape(n, width).T
                        if header.nbits == 4:  # two codes a byte -> [m, n]
                            codes = unpack_4bit(codes, axis=0)
                        cached, extra = _pq_block(state.codebook, codes, state.centroids[p], state.metric)
                        loaded.append((ids[start : start + n].copy(), cached, extra))
                    else:
                        codes = block.reshape(width, n).T if transposed else block.reshape(n, width)
                        loaded.append((ids[start : start + n].copy(), np.ascontiguousarray(codes), _NONE))
                    start += n
        return loaded

    return ctx.index_cache.get_many(keys, load, lambda entry: sum(part.nbytes for part in entry))


def prewarm(ctx: StorageContext, segment: IndexMetadata, kind: str) -> None:
    """Read a vector index segment whole (model and every partition) into the dataset's index cache."""
    state = _segment(ctx, segment, kind)
    _partitions(ctx, state, segment, np.arange(len(state.lengths)))


def _rows(ds: LanceDataset, row_ids: np.ndarray, columns: list[str]) -> pa.Table:
    """Rows of ``ds`` by row id, in the order given (deleted or unknown ids skipped, as pylance)."""
    files = ds.handle.files
    return take_rows(files, np.asarray(row_ids, dtype=np.uint64), take_columns(files, columns))
