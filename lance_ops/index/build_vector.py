"""Building an IVF vector index from scratch (``create_index``): IVF_FLAT, IVF_PQ and IVF_SQ.

The model is trained on a random sample, as pylance 14 samples: k-means over
``num_partitions * sample_rate`` vectors for the IVF centroids (``max_iters`` rounds), k-means of
``2 ** num_bits`` codewords per sub-vector over ``2 ** num_bits * sample_rate`` residuals for PQ,
min / max bounds for SQ. Cosine indices work on the vectors normalized (k-means in l2), dot
indices assign by largest inner product and PQ-encode the vectors themselves (l2 codewords, as
pylance's first build). Then every vector is assigned and encoded and the two files are written
in pylance 14's layout (:mod:`lance_ops.index.ivf`): ``index.idx`` with the centroids and the
k-means loss, ``auxiliary.idx`` with the rows partition after partition (PQ codes transposed).

All the arithmetic is numpy on matrices: distances as ``|x|^2 - 2 x.c + |c|^2`` in chunks, cluster
sums by ``bincount``; no loop runs per vector.

Binary vectors (``fixed_size_list<uint8>``, 8 bits a byte) take ``metric="hamming"`` and IVF_FLAT
only, as pylance 14: k-modes instead of k-means (each centroid bit the strict majority of its
cluster's bits, least significant bit first; an emptied cluster takes the point farthest from its
centroid), hamming distances as ``|x| + |c| - 2 x.c`` over the unpacked bits (one matmul), the
centroids a ``uint8`` tensor and the stored vectors ``uint8`` as they are.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lance_ops.encoding.protowire import encode_varint, fields
from lance_ops.errors import IndexColumnTypeError, InvalidArgumentError
from lance_ops.file.parallel import WORKER_THREADS, run_tasks
from lance_ops.index.files import IndexWriter, RemapResult
from lance_ops.index.hnsw import build_graphs
from lance_ops.index.ivf import INDEX_FILE, ROW_ID, STORAGE_FILE, _transpose_partitions, pack_4bit
from lance_ops.index.ivf_pb import IVF, Tensor, tensor_of
from lance_ops.table.manifest import IndexFile, IndexMetadata

__all__ = [
    "BUILDABLE_TYPES",
    "HNSW_DEFAULTS",
    "METRICS",
    "VECTOR_DETAILS_URL",
    "TrainedIvf",
    "VectorIndexParams",
    "as_matrix",
    "build_ivf",
    "default_num_partitions",
    "encode_ivf",
    "hamming_nearest",
    "index_details",
    "is_multivector_type",
    "is_vector_type",
    "kmodes",
    "multivector_model",
    "params_from_details",
    "pq_codebooks",
    "prepare",
    "train_ivf",
    "vector_matrix",
    "vector_rows",
    "write_ivf",
]

BUILDABLE_TYPES = ("IVF_FLAT", "IVF_PQ", "IVF_SQ", "IVF_HNSW_FLAT", "IVF_HNSW_PQ", "IVF_HNSW_SQ")
# pylance 14's HNSW defaults, in the order its ``lance:hnsw`` JSON lists them
HNSW_DEFAULTS = {"max_level": 7, "m": 20, "ef_construction": 150, "prefetch_distance": 2}
METRICS = ("l2", "cosine", "dot", "hamming")
VECTOR_DETAILS_URL = "/lance.index.pb.VectorIndexDetails"
_METRIC_CODES = {"l2": 0, "cosine": 1, "dot": 2, "hamming": 3}
_CHUNK = 16384
_TOLERANCE = 1e-4  # relative loss change at which k-means stops early
_SMALL_DIM = 16  # nearest points searched by the compiled kernel up to this many dimensions
_ENCODE_ROWS = 1 << 17  # rows encoded at a time


@dataclass(frozen=True)
class VectorIndexParams:
    """Checked parameters of one build."""

    column: str
    index_type: str
    metric: str
    num_partitions: int
    num_sub_vectors: int | None = None
    num_bits: int = 8
    sample_rate: int = 256
    max_iters: int = 50
    seed: int | None = None
    hnsw: tuple[tuple[str, int], ...] = ()  # IVF_HNSW_*: the graph parameters (HNSW_DEFAULTS' keys)

    @property
    def is_hnsw(self) -> bool:
        return "HNSW" in self.index_type


def vector_matrix(values: pa.Array, ids: np.ndarray, column: str) -> tuple[np.ndarray, np.ndarray]:
    """``[n, dim]`` float32 vectors of the rows to index and their ids: null vectors and vectors
    holding a NaN or infinity are left out (as pylance's ``filter_nan=True``)."""
    matrix = as_matrix(values, column)
    keep = np.isfinite(matrix).all(axis=1)
    return matrix[keep], ids[keep]


def _bits(x: np.ndarray) -> np.ndarray:
    """``[n, 8 d]`` float32 0 / 1 of ``[n, d]`` bytes, least significant bit first."""
    return np.unpackbits(np.asarray(x, np.uint8), axis=1, bitorder="little").astype(np.float32)


def hamming_nearest(x: np.ndarray, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each row of ``x`` (``[n, d]`` bytes): index of the nearest of ``points`` (``[k, d]``
    bytes) in hamming distance (the first on a tie) and that distance, chunk by chunk: ``|x| + |p|
    - 2 x.p`` over the bits, exact in float32."""
    ones = _bits(points)
    transposed = np.ascontiguousarray(ones.T) * np.float32(-2.0)
    norms = ones.sum(1)
    nearest = np.empty(len(x), np.int64)
    best = np.empty(len(x), np.float64)
    for start in range(0, len(x), _CHUNK):
        chunk = _bits(x[start : start + _CHUNK])
        scores = chunk @ transposed
        scores += norms
        at = scores.argmin(1)
        nearest[start : start + len(chunk)] = at
        best[start : start + len(chunk)] = scores[np.arange(len(chunk)), at] + chunk.sum(1)
    return nearest, best


def kmodes(data: np.ndarray, k: int, max_iters: int, rng: np.random.Generator) -> tuple[np.ndarray, float]:
    """``k`` binary centroids (``uint8`` ``[k, d]``) of ``data`` (``[n, d]`` bytes) in hamming
    distance, Lloyd-style from ``k`` random points: each centroid bit is set where more than half
    of its cluster's bits are; the loss is the sum of hamming distances to the nearest centroid."""
    from lance_ops.index._pq_kernels import cluster_sums  # noqa: PLC0415 - numba, on first use

    data = np.ascontiguousarray(data, np.uint8)
    n = len(data)
    centroids = data[rng.choice(n, k, replace=n < k)].copy()
    bits = _bits(data)
    loss = np.inf
    for _ in range(max(1, max_iters)):
        assign, dist = hamming_nearest(data, centroids)
        new_loss = float(dist.sum())
        counts = np.bincount(assign, minlength=k)
        ones = np.zeros((k, bits.shape[1]), np.float64)
        cluster_sums(bits, assign, ones)
        filled = counts > 0
        majority = ones[filled] * 2 > counts[filled, None]
        centroids[filled] = np.packbits(majority, axis=1, bitorder="little")
        empty = np.flatnonzero(~filled)
        if empty.size and n >= k:
            centroids[empty] = data[np.argsort(dist, kind="stable")[::-1][: empty.size]]
        converged = np.isfinite(loss) and abs(loss - new_loss) <= _TOLERANCE * max(abs(loss), 1e-12)
        loss = new_loss
        if converged and not empty.size:
            break
    return centroids, loss


def _distances(x: np.ndarray, points: np.ndarray, dot: bool) -> tuple[np.ndarray, np.ndarray]:
    """For each row of ``x``: index of the nearest of ``points`` and its distance (squared l2, or
    ``-x.p`` with ``dot``), chunk by chunk."""
    norms = np.zeros(len(points), np.float32) if dot else (points * points).sum(1)
    scale = 1.0 if dot else 2.0
    nearest = np.empty(len(x), np.int64)
    best = np.empty(len(x), np.float64)
    if x.ndim == 2 and x.shape[1] <= _SMALL_DIM and x.dtype == np.float32 and len(x):
        # a PQ sub-vector's few dimensions: compiled, no [n, k] score matrix
        from lance_ops.index._pq_kernels import nearest_points  # noqa: PLC0415 - numba, on first use

        scores = np.empty(len(x), np.float32)
        points_t = np.ascontiguousarray(points.T, np.float32)
        rows, norms32 = np.ascontiguousarray(x), norms.astype(np.float32)
        # row ranges on the worker threads (the kernel releases the GIL); each row's answer is
        # the same whatever the split
        cuts = np.linspace(0, len(x), max(1, min(WORKER_THREADS, len(x) // _CHUNK)) + 1).astype(int)

        def part(a: int, b: int) -> Callable[[], None]:
            return lambda: nearest_points(rows[a:b], points_t, norms32, scale, nearest[a:b], scores[a:b])

        run_tasks([part(a, b) for a, b in zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True)])
        best[:] = scores if dot else np.maximum(scores + (x * x).sum(1), 0)
        return nearest, best
    transposed = points.T
    buffer = np.empty((min(_CHUNK, len(x)), len(points)), np.result_type(x, transposed))
    for start in range(0, len(x), _CHUNK):
        chunk = x[start : start + _CHUNK]
        # norms - scale * (x.p), in place: (-scale) * v + norms is the same float as norms - scale * v
        scores = np.matmul(chunk, transposed, out=buffer[: len(chunk)])
        scores *= -scale
        scores += norms
        at = scores.argmin(1)
        nearest[start : start + len(chunk)] = at
        value = scores[np.arange(len(chunk)), at].astype(np.float64)
        best[start : start + len(chunk)] = value if dot else np.maximum(value + (chunk * chunk).sum(1), 0)
    return nearest, best


def kmeans(
    data: np.ndarray, k: int, max_iters: int, rng: np.random.Generator, dot: bool = False
) -> tuple[np.ndarray, float]:
    """``k`` centroids of ``data`` (Lloyd's algorithm from ``k`` random points) and the loss (sum
    of the distances to the nearest centroid). An emptied cluster takes the point farthest from its
    centroid; with fewer points than ``k`` points are repeated."""
    from lance_ops.index._pq_kernels import cluster_sums  # noqa: PLC0415 - numba, on first use

    data = np.ascontiguousarray(data)
    n, dim = data.shape
    centroids = data[rng.choice(n, k, replace=n < k)].astype(np.float32)
    loss = np.inf
    for _ in range(max(1, max_iters)):
        assign, dist = _distances(data, centroids, dot)
        new_loss = float(dist.sum())
        counts = np.bincount(assign, minlength=k)
        sums = np.zeros((k, dim), np.float64)
        cluster_sums(data, assign, sums)
        filled = counts > 0
        centroids[filled] = (sums[filled] / counts[filled, None]).astype(np.float32)
        empty = np.flatnonzero(~filled)
        if empty.size and n >= k:
            far = np.argsort(dist)[::-1][: empty.size]
            centroids[empty] = data[far]
        converged = np.isfinite(loss) and abs(loss - new_loss) <= _TOLERANCE * max(abs(loss), 1e-12)
        loss = new_loss
        if converged and not empty.size:
            break
    return centroids, loss


def _sample(data: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    return data if len(data) <= size else data[np.sort(rng.choice(len(data), size, replace=False))]


def default_num_partitions(num_rows: int, target_partition_size: int | None = None) -> int:
    """pylance's: one partition per ``target_partition_size`` (8192) rows, between 1 and 4096."""
    return min(max(1, num_rows // (target_partition_size or 8192)), 4096)


def params_from_details(column: str, kind: str, value: bytes, num_rows: int) -> VectorIndexParams:
    """The parameters a ``VectorIndexDetails`` (:func:`index_details`'s, or pylance 14's) records
    for a ``kind`` index of ``column``: metric, quantizer's and graph's, IVF sample rate and
    iterations. The number of partitions is not among them: pylance's default for ``num_rows``,
    as pylance 14 trains the empty index of ``train=False`` when optimizing it."""
    metric, quantizer, graph, build = "l2", {}, {}, {}
    codes = {code: name for name, code in _METRIC_CODES.items()}
    for number, payload in fields(value):
        if number == 1 and isinstance(payload, int):
            metric = codes.get(payload, "l2")
        elif number == 3 and isinstance(payload, bytes):
            graph = dict(fields(payload))  # 1 m, 2 ef_construction, 3 max_level
        elif number in (4, 5) and isinstance(payload, bytes):
            quantizer = dict(fields(payload))  # 1 num_bits, 2 num_sub_vectors (PQ)
        elif number == 9 and isinstance(payload, bytes):
            entry = {k: v.decode() for k, v in fields(payload) if isinstance(v, bytes)}
            build[entry.get(1, "")] = entry.get(2, "")
    given = {
        "m": graph.get(1),
        "ef_construction": graph.get(2),
        "max_level": graph.get(3),
        "prefetch_distance": build.get("lance.hnsw.prefetch_distance"),
    }
    hnsw = tuple((k, _positive(given[k], d)) for k, d in HNSW_DEFAULTS.items()) if "HNSW" in kind else ()
    return VectorIndexParams(
        column,
        kind,
        metric,
        default_num_partitions(num_rows),
        _positive(quantizer.get(2), 0) or None if kind.endswith("_PQ") else None,
        _positive(quantizer.get(1), 8),
        _positive(build.get("lance.ivf.sample_rate"), 256),
        _positive(build.get("lance.ivf.max_iters"), 50),
        None,
        hnsw,
    )


def _positive(value: object, default: int) -> int:
    """``value`` (a varint, or a number as text) when it is a positive integer, else ``default``."""
    number = (
        value if isinstance(value, int) else int(value) if isinstance(value, str) and value.isdigit() else 0
    )
    return number if number > 0 else default


def index_details(params: VectorIndexParams) -> bytes:
    """``VectorIndexDetails``: metric (1), PQ (4) / SQ (5) / flat (8) parameters, build params (9)."""

    varint = encode_varint

    def field(number: int, payload: bytes) -> bytes:
        return varint(number << 3 | 2) + varint(len(payload)) + payload

    out = b""
    if _METRIC_CODES[params.metric]:
        out += varint(1 << 3) + varint(_METRIC_CODES[params.metric])
    if params.is_hnsw:
        hnsw = dict(params.hnsw)
        numbers = b"\x08" + varint(hnsw["m"]) + b"\x10" + varint(hnsw["ef_construction"])
        out += field(3, numbers + b"\x18" + varint(hnsw["max_level"]))
    quantizer = params.index_type.rsplit("_", 1)[1]
    if quantizer == "PQ":
        out += field(4, b"\x08" + varint(params.num_bits) + b"\x10" + varint(params.num_sub_vectors or 0))
    elif quantizer == "SQ":
        out += field(5, b"\x08" + varint(params.num_bits))
    else:
        out += field(8, b"")
    build = {"lance.ivf.max_iters": params.max_iters, "lance.ivf.sample_rate": params.sample_rate}
    if quantizer in ("PQ", "SQ"):
        build[f"lance.{quantizer.lower()}.sample_rate"] = params.sample_rate
    if quantizer == "PQ":
        build["lance.pq.max_iters"] = params.max_iters
    if params.is_hnsw:
        build["lance.hnsw.prefetch_distance"] = dict(params.hnsw)["prefetch_distance"]
    for key, value in build.items():
        out += field(9, field(1, key.encode()) + field(2, str(value).encode()))
    return out


def _ivf_message(
    lengths: np.ndarray, centroids: np.ndarray | None = None, loss: float | None = None
) -> bytes:
    ivf = IVF()
    ivf.lengths[:] = lengths.tolist()
    ivf.offsets[:] = (np.cumsum(lengths) - lengths).tolist()
    if centroids is not None:  # binary (hamming) centroids stay uint8
        ivf.centroids_tensor.CopyFrom(
            tensor_of(centroids if centroids.dtype == np.uint8 else centroids.astype(np.float32))
        )
    if loss is not None:
        ivf.loss = loss
    return ivf.SerializeToString()


def _metadata(pairs: dict[str, str]) -> dict[bytes, bytes]:
    return {k.encode(): v.encode() for k, v in pairs.items()}


@dataclass(frozen=True)
class TrainedIvf:
    """The model of one build: centroids (and k-means loss), and PQ codebooks ``[m, 2**bits,
    dim / m]`` or SQ bounds. Picklable, so Spark executors encode with it."""

    params: VectorIndexParams
    dim: int
    centroids: np.ndarray
    loss: float
    codebooks: np.ndarray | None = None
    bounds: tuple[float, float] | None = None


def sample_positions(total: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """Positions (ascending) of the sample among ``total`` live rows: every row when there are at
    most ``size``, else ``size`` of them drawn without replacement."""
    if total <= size:
        return np.arange(total, dtype=np.int64)
    return np.sort(rng.choice(total, size, replace=False)).astype(np.int64)


def is_vector_type(dtype: pa.DataType) -> bool:
    """A ``fixed_size_list`` of floats, or of ``uint8`` (binary vectors, for hamming)."""
    return pa.types.is_fixed_size_list(dtype) and (
        pa.types.is_floating(dtype.value_type) or pa.types.is_uint8(dtype.value_type)
    )


def is_multivector_type(dtype: pa.DataType) -> bool:
    """A multivector column: a ``list`` of float vectors (``fixed_size_list`` of float)."""
    return (
        (pa.types.is_list(dtype) or pa.types.is_large_list(dtype))
        and pa.types.is_fixed_size_list(dtype.value_type)
        and pa.types.is_floating(dtype.value_type.value_type)
    )


def vector_rows(values: pa.Array, ids: np.ndarray) -> tuple[pa.Array, np.ndarray]:
    """The vectors an index holds and the row id of each: a multivector column's vectors one by
    one, each with its row's id (a null or empty list gives none), as pylance 14 indexes them;
    any other column as it is."""
    if not is_multivector_type(values.type):
        return values, ids
    lengths = np.asarray(values.value_lengths().fill_null(0), dtype=np.int64)
    return values.flatten(), np.repeat(np.asarray(ids, np.uint64), lengths)


def multivector_model(params: VectorIndexParams, values: pa.Array) -> TrainedIvf | None:
    """The model of an index on a multivector column's live rows ``values``, trained on samples
    drawn among the rows (each giving all its vectors), as the Spark driver draws them; ``None``
    for a vector column (:func:`build_ivf` trains on its rows)."""
    if not is_multivector_type(values.type):
        return None
    dim = values.type.value_type.list_size

    def fetch(positions: np.ndarray) -> np.ndarray:
        return as_matrix(values.take(pa.array(positions)).flatten(), params.column)

    return train_ivf(params, len(values), dim, fetch)


def as_matrix(values: pa.Array, column: str) -> np.ndarray:
    """``[n, dim]`` float32 of every row of a vector column, null vectors as rows of NaN (binary
    vectors, ``uint8``, as their byte values)."""
    if not is_vector_type(values.type):
        raise IndexColumnTypeError(
            f"column {column!r} of type {values.type} is not a vector column "
            "(fixed_size_list of float, or of uint8 for hamming)",
            column,
        )
    dim = values.type.list_size
    valid = np.asarray(values.is_valid(), dtype=bool)
    flat = np.asarray(values.flatten().cast(pa.float32()).fill_null(np.nan), dtype=np.float32)
    if valid.all():
        return flat.reshape(-1, dim)  # no null list: the values as they are (no second copy)
    matrix = np.full((len(values), dim), np.nan, np.float32)
    matrix[valid] = flat.reshape(-1, dim)  # flatten() leaves out the null lists' slots
    return matrix


def prepare(params: VectorIndexParams, matrix: np.ndarray) -> np.ndarray:
    """The vectors an index of ``params`` works on: finite rows only, normalized for cosine."""
    finite = np.isfinite(matrix).all(axis=1)
    vectors = matrix if finite.all() else matrix[finite]  # no copy when every row is kept
    if params.metric == "cosine":
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors = vectors / np.where(norms == 0, 1.0, norms)
    return vectors


def train_ivf(
    params: VectorIndexParams, total_rows: int, dim: int, fetch: Callable[[np.ndarray], np.ndarray]
) -> TrainedIvf:
    """Train the model on samples of the ``total_rows`` live rows: ``fetch(positions)`` returns
    those rows' vectors as :func:`as_matrix` does (null / NaN rows are dropped from the sample).
    The IVF sample is ``num_partitions * sample_rate`` rows, the PQ / SQ one ``2**num_bits *
    sample_rate``, drawn in that order from one generator seeded with ``params.seed``: the same
    model whoever fetches the rows (in process, or the Spark driver)."""
    p = params
    rng = np.random.default_rng(p.seed)
    sample = prepare(p, fetch(sample_positions(total_rows, p.num_partitions * p.sample_rate, rng)))
    if len(sample) < p.num_partitions:
        raise InvalidArgumentError(
            f"column {p.column!r}: {len(sample)} vectors are too few to train {p.num_partitions} partitions"
        )
    if p.metric == "hamming":
        centroids, loss = kmodes(sample.astype(np.uint8), p.num_partitions, p.max_iters, rng)
        return TrainedIvf(p, dim, centroids, loss)
    dot = p.metric == "dot"
    centroids, loss = kmeans(sample, p.num_partitions, p.max_iters, rng, dot)
    quantizer = p.index_type.rsplit("_", 1)[1]
    if quantizer == "FLAT":
        return TrainedIvf(p, dim, centroids, loss)
    k = 2**p.num_bits
    second = prepare(p, fetch(sample_positions(total_rows, k * p.sample_rate, rng)))
    if quantizer == "SQ":
        return TrainedIvf(p, dim, centroids, loss, bounds=(float(second.min()), float(second.max())))
    books = pq_codebooks(p, centroids, second, rng)
    return TrainedIvf(p, dim, centroids, loss, codebooks=books)


def pq_codebooks(
    params: VectorIndexParams, centroids: np.ndarray, sample: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """PQ codebooks ``[num_sub_vectors, 2**num_bits, dim / num_sub_vectors]`` trained on
    ``sample`` (from :func:`prepare`): k-means per sub-vector over the residuals to the nearest of
    ``centroids`` (dot: over the vectors themselves)."""
    dot = params.metric == "dot"
    residuals = sample if dot else sample - centroids[_distances(sample, centroids, dot)[0]]
    m = int(params.num_sub_vectors or 0)
    sub = sample.shape[1] // m
    k = 2**params.num_bits
    return np.stack(
        [
            kmeans(np.ascontiguousarray(residuals[:, j * sub : (j + 1) * sub]), k, params.max_iters, rng)[0]
            for j in range(m)
        ]
    )


def encode_ivf(model: TrainedIvf, vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each of ``vectors`` (from :func:`prepare`)'s partition (uint32) and code row: the vector
    (FLAT, float32), its SQ bytes or its PQ codes (uint8 ``[n, num_sub_vectors]``).

    Encoded :data:`_ENCODE_ROWS` rows at a time (each row's answer is its own), so the
    temporaries (residuals, sub-vectors) stay that small whatever the row count."""
    if model.params.metric == "hamming":  # binary FLAT: the bytes are the codes
        codes = np.asarray(vectors, np.uint8)
        return hamming_nearest(codes, model.centroids)[0].astype(np.uint32), codes
    if model.bounds is None and model.codebooks is None:  # FLAT: the vectors are the codes
        partition, _ = _distances(vectors, model.centroids, model.params.metric == "dot")
        return partition.astype(np.uint32), np.asarray(vectors, np.float32)
    parts = [
        _encode_block(model, vectors[a : a + _ENCODE_ROWS]) for a in range(0, len(vectors), _ENCODE_ROWS)
    ]
    if not parts:
        parts = [_encode_block(model, vectors)]
    return np.concatenate([p for p, _ in parts]), np.concatenate([c for _, c in parts])


def _encode_block(model: TrainedIvf, vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    p = model.params
    dot = p.metric == "dot"
    partition, _ = _distances(vectors, model.centroids, dot)
    if model.bounds is not None:
        start, end = model.bounds
        scale = 255.0 / (end - start) if end > start else 0.0
        codes = np.clip(np.floor((vectors - start) * scale), 0, 255).astype(np.uint8)
    else:
        assert model.codebooks is not None
        residuals = vectors if dot else vectors - model.centroids[partition]
        m = len(model.codebooks)
        sub = model.dim // m
        codes = np.stack(
            [
                _distances(
                    np.ascontiguousarray(residuals[:, j * sub : (j + 1) * sub]), model.codebooks[j], False
                )[0]
                for j in range(m)
            ],
            axis=1,
        ).astype(np.uint8)
    return partition.astype(np.uint32), codes


def write_ivf(
    writer: IndexWriter,
    model: TrainedIvf,
    row_ids: np.ndarray,
    partition: np.ndarray,
    codes: np.ndarray,
    transpose_pq: bool = True,
) -> RemapResult:
    """Write the two index files of ``writer`` for rows ``row_ids`` encoded by :func:`encode_ivf`
    (any row order: rows are laid out partition after partition, by row id within one). PQ codes
    are stored row-major with ``transpose_pq=False``, as pylance 14's uncommitted segments."""
    p, dim = model.params, model.dim
    quantizer = p.index_type.rsplit("_", 1)[1]
    row_ids = np.asarray(row_ids, np.uint64)
    partition = np.asarray(partition, np.int64)
    order = np.lexsort((row_ids, partition))
    lengths = np.bincount(partition, minlength=p.num_partitions)
    buffers = [_ivf_message(lengths)]
    codes = codes[order]
    graph_codes = codes  # rows in storage order, before PQ's transposition
    if quantizer == "FLAT":
        storage_params: dict[str, object] = {"dim": dim}
        # pylance 14's binary flat column is nullable, its float one not
        code_type, nullable = (pa.uint8(), True) if p.metric == "hamming" else (pa.float32(), False)
    elif quantizer == "SQ":
        assert model.bounds is not None
        start, end = model.bounds
        storage_params = {"dim": dim, "num_bits": p.num_bits, "bounds": {"start": start, "end": end}}
        code_type, nullable = pa.uint8(), True
    else:
        assert model.codebooks is not None
        m, k = model.codebooks.shape[:2]
        if p.num_bits == 4:  # two codes a byte, as pylance 14
            codes = pack_4bit(codes)
        width = codes.shape[1]
        if transpose_pq:
            codes = _transpose_partitions(codes.reshape(-1), lengths, width, to_rows=False).reshape(-1, width)
        tensor = Tensor(data_type=2, shape=[k, dim], data=model.codebooks.astype("<f4").tobytes())
        buffers.append(tensor.SerializeToString())
        storage_params = {
            "codebook_position": 2,
            "nbits": p.num_bits,
            "num_sub_vectors": m,
            "dimension": dim,
            "codebook_tensor": [],
            "transposed": transpose_pq,
        }
        code_type, nullable = pa.uint8(), True
    width = codes.shape[1]
    code_column = {"FLAT": "flat", "SQ": "__sq_code", "PQ": "__pq_code"}[quantizer]
    storage_schema = pa.schema(
        [pa.field(ROW_ID, pa.uint64()), pa.field(code_column, pa.list_(code_type, width), nullable=nullable)],
        metadata=_metadata(
            {
                "lance:ivf": "1",
                "storage_metadata": json.dumps([json.dumps(storage_params, separators=(",", ":"))]),
                "distance_type": p.metric,
            }
        ),
    )
    values = pa.array(np.ascontiguousarray(codes).reshape(-1), code_type)
    storage = pa.table(
        [pa.array(row_ids[order], pa.uint64()), pa.FixedSizeListArray.from_arrays(values, width)],
        schema=storage_schema,
    )
    if p.is_hnsw:
        _write_hnsw(writer, model, lengths, graph_codes)
    else:
        index_schema = pa.schema(
            [pa.field("__flat_marker", pa.uint64(), nullable=False)],
            metadata=_metadata(
                {
                    "lance:flat": json.dumps([""] * p.num_partitions, separators=(",", ":")),
                    "lance:ivf": "1",
                    "lance:index": json.dumps(
                        {"type": p.index_type, "distance_type": p.metric}, separators=(",", ":")
                    ),
                }
            ),
        )
        ivf_model = _ivf_message(np.zeros(p.num_partitions, np.int64), model.centroids, model.loss)
        writer.write(INDEX_FILE, index_schema.empty_table(), global_buffers=[ivf_model])
    writer.write(STORAGE_FILE, storage, global_buffers=buffers)
    shape = IndexMetadata(
        uuid=writer.uuid,
        fields=(),
        name="",
        dataset_version=0,
        details=(VECTOR_DETAILS_URL, index_details(p)),
        index_version=1,
        files=(IndexFile(STORAGE_FILE, 0), IndexFile(INDEX_FILE, 0)),
    )
    return writer.result(shape)


def _decoded(model: TrainedIvf, lengths: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """The vectors the stored codes (rows in storage order) stand for: FLAT as stored, SQ at the
    middle of each code's bucket, PQ codewords + the row's centroid (l2, cosine: PQ codes the
    residual) or alone (dot: it codes the vector). The HNSW graphs are built on these."""
    if model.bounds is not None:
        start, end = model.bounds
        return (start + (codes.astype(np.float32) + 0.5) * ((end - start) / 255.0)).astype(np.float32)
    if model.codebooks is None:
        return np.asarray(codes, np.float32)
    m = len(model.codebooks)
    parts = [model.codebooks[j][codes[:, j].astype(np.int64)] for j in range(m)]
    if model.params.metric == "dot":
        return np.concatenate(parts, axis=1).astype(np.float32)
    partition = np.repeat(np.arange(lengths.size), lengths)
    return (np.concatenate(parts, axis=1) + model.centroids[partition]).astype(np.float32)


def _write_hnsw(writer: IndexWriter, model: TrainedIvf, lengths: np.ndarray, codes: np.ndarray) -> None:
    """``index.idx`` of an IVF_HNSW_* index: one graph per partition over the decoded storage
    rows in the index's metric (:func:`lance_ops.index.hnsw.build_graphs`, as the delta graphs of
    :func:`lance_ops.index.ivf.extend_ivf`), the model in its IVF message."""
    p = model.params
    params = dict(p.hnsw)
    seed = p.seed if p.seed is not None else int.from_bytes(writer.uuid[:8], "little")
    table, meta, graph_lengths = build_graphs(
        _decoded(model, lengths, codes), lengths, params, seed, p.metric
    )
    compact = (",", ":")
    metadata = {
        "lance:hnsw": json.dumps([json.dumps(m, separators=compact) for m in meta], separators=compact),
        "lance:ivf": "1",
        "lance:index": json.dumps({"type": p.index_type, "distance_type": p.metric}, separators=compact),
    }
    schema = pa.schema(
        [
            pa.field("__vector_id", pa.uint32()),
            pa.field("__neighbors", pa.list_(pa.uint32())),
            pa.field("_distance", pa.list_(pa.float32())),
        ],
        metadata=_metadata(metadata),
    )
    ivf_model = _ivf_message(graph_lengths, model.centroids, model.loss)
    writer.write(INDEX_FILE, table.cast(schema), global_buffers=[ivf_model])


def build_ivf(
    writer: IndexWriter,
    params: VectorIndexParams,
    values: pa.Array,
    row_ids: np.ndarray,
    model: TrainedIvf | None = None,
    transpose_pq: bool = True,
) -> RemapResult:
    """Train on the live rows ``values`` (a vector column, nulls and NaNs left out) at
    ``row_ids`` (unless ``model`` is given), encode them all and write the index files of ``writer``
    (``transpose_pq``: :func:`write_ivf`)."""
    matrix = as_matrix(values, params.column)
    if model is None:
        model = train_ivf(params, len(matrix), matrix.shape[1], lambda positions: matrix[positions])
    keep = np.isfinite(matrix).all(axis=1)
    partition, codes = encode_ivf(model, prepare(params, matrix))  # prepare leaves out what keep does
    return write_ivf(writer, model, np.asarray(row_ids, np.uint64)[keep], partition, codes, transpose_pq)
