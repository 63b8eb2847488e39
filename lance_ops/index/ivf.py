"""IVF vector index files (pylance 14): IVF_FLAT, IVF_PQ, IVF_SQ and IVF_HNSW_*.

``index.idx``: the IVF model. Schema metadata ``lance:index`` (``{"type":"IVF_PQ",
"distance_type":"l2"}``) and ``lance:ivf`` = the global buffer holding the ``IVF`` message
(:mod:`lance_ops.index.ivf_pb`) with the centroids tensor ``[partitions, dim]``. Without HNSW the file
has no rows (one ``__flat_marker`` column) and its IVF offsets / lengths are zero; with HNSW its
rows are the per-partition graphs (``__vector_id``, ``__neighbors``, ``_distance``; ``lance:hnsw``
holds each partition's entry point and level offsets) and its IVF gives each graph's rows.

``auxiliary.idx``: the vectors' storage, partition after partition; schema metadata ``lance:ivf``
(an IVF message with the partitions' row ``offsets`` / ``lengths``), ``distance_type`` and
``storage_metadata`` (a JSON list with one JSON text). Columns ``_rowid`` (uint64) and

* IVF_FLAT: ``flat`` (``fixed_size_list<float>[dim]``, the raw vectors);
* IVF_SQ: ``__sq_code`` (``fixed_size_list<uint8>[dim]``), ``floor((x - start) / (end - start) * 255)``
  clipped to 0..255, bounds in ``storage_metadata`` (``{"dim":8,"num_bits":8,"bounds":{...}}``);
* IVF_PQ: ``__pq_code`` (``fixed_size_list<uint8>[m]``) of the residual ``x - centroid``; the
  codebook ``[m * 256, dim / m]`` (sub-vector ``j`` uses rows ``j * 256 ..``) is the global buffer
  ``codebook_position`` of ``storage_metadata``; with ``"transposed": true`` each partition's codes
  are stored column-major: the partition's ``n * m`` code bytes are ``m`` runs of ``n`` bytes.
  With ``"nbits": 4`` (16 codewords, ``m`` even) two codes share a byte: byte ``j`` holds sub-vector
  ``2 j`` in its low nibble and ``2 j + 1`` in its high one, so the column is
  ``fixed_size_list<uint8>[m / 2]`` (transposed the same way, by byte); the codebook is
  ``[m * 16, dim / m]``.

e.g. a partition of 2 rows with codes ``(1, 2)`` and ``(3, 4)`` is stored transposed as the two
list values ``[1, 3]``, ``[2, 4]``.

Remap drops removed rows and renumbers the rest partition by partition (``index.idx`` is copied).
HNSW graphs refer to storage positions: unchanged when no row is removed (``index.idx`` copied),
else the removed nodes are taken out of the graphs (:mod:`lance_ops.index.hnsw`).

Extension (optimize after an append; l2, cosine and dot) assigns each new vector to its centroid
and encodes it with the existing codebook / bounds, as pylance's delta segments do; ``index.idx``
is copied, or for HNSW holds new graphs built in the index's metric.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from google.protobuf.message import DecodeError

from lance_ops.errors import IndexCorruptError, PartitionOutOfRangeError, UnsupportedIndexTypeError
from lance_ops.index.files import IndexFileData, IndexWriter, RemapResult, read_index_file
from lance_ops.index.hnsw import build_graphs, drop_nodes
from lance_ops.index.ivf_pb import IVF, Tensor, tensor_array
from lance_ops.index.mapping import RowAddressMapping
from lance_ops.io.context import StorageContext
from lance_ops.table.manifest import IndexMetadata

__all__ = ["extend_ivf", "pack_4bit", "read_partition", "remap_ivf", "unpack_4bit"]

INDEX_FILE = "index.idx"
STORAGE_FILE = "auxiliary.idx"
ROW_ID = "_rowid"
_CODE_COLUMNS = {"FLAT": "flat", "SQ": "__sq_code", "PQ": "__pq_code"}


def pack_4bit(codes: np.ndarray) -> np.ndarray:
    """``[n, m]`` 4-bit PQ codes (values 0..15, ``m`` even) as pylance 14 stores them: ``[n, m / 2]``
    bytes, byte ``j`` = code ``2 j`` in the low nibble, code ``2 j + 1`` in the high one."""
    codes = np.asarray(codes, np.uint8)
    return np.ascontiguousarray(codes[:, 0::2] | (codes[:, 1::2] << 4))


def unpack_4bit(packed: np.ndarray, axis: int = 1) -> np.ndarray:
    """The inverse of :func:`pack_4bit` along ``axis``: ``[n, m / 2]`` -> ``[n, m]`` (``axis=1``), or
    the transposed ``[m / 2, n]`` -> ``[m, n]`` (``axis=0``)."""
    packed = np.asarray(packed, np.uint8)
    shape = list(packed.shape)
    shape[axis] *= 2
    out = np.empty(shape, np.uint8)
    low = (slice(None), slice(0, None, 2)) if axis == 1 else (slice(0, None, 2), slice(None))
    high = (slice(None), slice(1, None, 2)) if axis == 1 else (slice(1, None, 2), slice(None))
    out[low] = packed & 0x0F
    out[high] = packed >> 4
    return out


def _quantizer(kind: str) -> str:
    return kind.rsplit("_", 1)[1]


def _corrupt(index: IndexMetadata, file: str, reason: str) -> IndexCorruptError:
    return IndexCorruptError(file, f"index {index.name!r}: {reason}")


@dataclass(frozen=True)
class _Storage:
    """``auxiliary.idx`` decoded: rows, partition sizes, storage parameters."""

    data: IndexFileData
    ivf_position: int  # in data.global_buffers
    ivf: Any
    lengths: np.ndarray
    params: dict[str, Any]
    code_column: str

    @property
    def transposed(self) -> bool:
        return bool(self.params.get("transposed", False))

    @property
    def nbits(self) -> int:
        """Bits per PQ code: 8, or 4 (two codes a byte, :func:`pack_4bit`)."""
        return int(self.params.get("nbits", 8))


def _ivf_of(data: IndexFileData, index: IndexMetadata, file: str) -> tuple[int, Any]:
    raw = data.meta("lance:ivf", index, file)
    try:
        position = int(raw) - 1
    except ValueError:
        position = -1
    if not 0 <= position < len(data.global_buffers):
        raise _corrupt(index, file, f"bad IVF buffer {raw!r}")
    message = IVF()
    try:
        message.ParseFromString(data.global_buffers[position])
    except DecodeError as exc:
        raise _corrupt(index, file, f"undecodable IVF message: {exc}") from exc
    return position, message


def _read_storage(ctx: StorageContext, index: IndexMetadata, kind: str) -> _Storage:
    data = read_index_file(ctx, index, STORAGE_FILE)
    position, ivf = _ivf_of(data, index, STORAGE_FILE)
    lengths = np.asarray(ivf.lengths, dtype=np.int64)
    offsets = np.asarray(ivf.offsets, dtype=np.int64)
    if lengths.sum() != data.table.num_rows or not np.array_equal(offsets, np.cumsum(lengths) - lengths):
        raise _corrupt(index, STORAGE_FILE, "partition offsets / lengths do not cover the rows")
    try:
        params = json.loads(json.loads(data.meta("storage_metadata", index, STORAGE_FILE))[0])
    except (ValueError, IndexError, TypeError) as exc:
        raise _corrupt(index, STORAGE_FILE, f"undecodable storage_metadata: {exc}") from exc
    code_column = _CODE_COLUMNS[_quantizer(kind)]
    data.column(ROW_ID, index, STORAGE_FILE)
    data.column(code_column, index, STORAGE_FILE)
    return _Storage(data, position, ivf, lengths, params, code_column)


def _code_matrix(storage: _Storage) -> np.ndarray:
    """The code / vector column as a ``[rows, width]`` array in row order (un-transposed)."""
    column = storage.data.table.column(storage.code_column).combine_chunks()
    width = column.type.list_size
    flat = np.asarray(column.flatten()).reshape(-1)
    if not storage.transposed:
        return flat.reshape(-1, width)
    return _transpose_partitions(flat, storage.lengths, width, to_rows=True)


def _transpose_partitions(flat: np.ndarray, lengths: np.ndarray, width: int, to_rows: bool) -> np.ndarray:
    """Between row-major ``[rows, width]`` codes and per-partition column-major runs.

    Row ``k`` of partition ``p`` (starting at row ``o``, ``n`` rows) keeps code ``j`` at
    ``o * width + j * n + k`` when transposed, ``(o + k) * width + j`` when not.
    """
    rows = int(lengths.sum())
    starts = (np.cumsum(lengths) - lengths).tolist()
    flat = flat.reshape(-1)
    # one block copy per partition (a few thousand at most), each a [width, n] <-> [n, width] view
    if to_rows:
        out = np.empty((rows, width), dtype=flat.dtype)
        for start, n in zip(starts, lengths.tolist(), strict=True):
            out[start : start + n] = flat[start * width : (start + n) * width].reshape(width, n).T
        return out
    out = np.empty(rows * width, dtype=flat.dtype)
    for start, n in zip(starts, lengths.tolist(), strict=True):
        out[start * width : (start + n) * width].reshape(width, n)[...] = (
            flat[start * width : (start + n) * width].reshape(n, width).T
        )
    return out


def _write_storage(
    writer: IndexWriter, storage: _Storage, row_ids: np.ndarray, codes: np.ndarray, lengths: np.ndarray
) -> None:
    """``auxiliary.idx`` with the old file's schema, metadata and buffers, new rows and partitions."""
    ivf = IVF()
    ivf.CopyFrom(storage.ivf)
    ivf.lengths[:] = lengths.tolist()
    ivf.offsets[:] = (np.cumsum(lengths) - lengths).tolist()
    buffers = list(storage.data.global_buffers)
    buffers[storage.ivf_position] = ivf.SerializeToString()
    schema = storage.data.schema
    code_type = schema.field(storage.code_column).type
    flat = (
        _transpose_partitions(codes, lengths, code_type.list_size, to_rows=False)
        if storage.transposed
        else codes
    )
    values = pa.array(np.ascontiguousarray(flat).reshape(-1), code_type.value_type)
    columns = {
        ROW_ID: pa.array(row_ids, pa.uint64()),
        storage.code_column: pa.FixedSizeListArray.from_arrays(values, code_type.list_size),
    }
    missing = set(schema.names) - set(columns)
    if missing:
        raise UnsupportedIndexTypeError(f"vector storage columns {sorted(missing)} are not known")
    table = pa.table([columns[f.name].cast(f.type) for f in schema], schema=schema)
    writer.write(STORAGE_FILE, table, version=storage.data.version, global_buffers=buffers)


def remap_ivf(
    ctx: StorageContext, index: IndexMetadata, mapping: RowAddressMapping, kind: str
) -> RemapResult:
    storage = _read_storage(ctx, index, kind)
    old_ids = np.asarray(storage.data.table.column(ROW_ID).combine_chunks(), dtype=np.uint64)
    new_ids, kept = mapping.apply(old_ids)
    partition = np.repeat(np.arange(storage.lengths.size), storage.lengths)
    lengths = np.bincount(partition[kept], minlength=storage.lengths.size)
    codes = _code_matrix(storage)[kept]
    writer = IndexWriter(ctx)
    if "HNSW" in kind and not kept.all():
        _write_graphs(writer, ctx, index, storage.lengths, kept)
    else:
        writer.copy(ctx, index, INDEX_FILE)
    _write_storage(writer, storage, new_ids, codes, lengths)
    return writer.result(index)


def _read_graphs(
    ctx: StorageContext, index: IndexMetadata
) -> tuple[IndexFileData, int, Any, list[dict[str, Any]]]:
    """An HNSW ``index.idx``: the file, its IVF message (and buffer position), per-partition JSON."""
    data = read_index_file(ctx, index, INDEX_FILE)
    position, ivf = _ivf_of(data, index, INDEX_FILE)
    try:
        meta = [json.loads(m) for m in json.loads(data.meta("lance:hnsw", index, INDEX_FILE))]
    except (ValueError, TypeError) as exc:
        raise _corrupt(index, INDEX_FILE, f"undecodable lance:hnsw: {exc}") from exc
    return data, position, ivf, meta


def _write_graphs(
    writer: IndexWriter,
    ctx: StorageContext,
    index: IndexMetadata,
    storage_lengths: np.ndarray,
    kept: np.ndarray,
) -> None:
    """``index.idx`` of an HNSW index without the nodes of the removed storage rows."""
    data, position, ivf, meta = _read_graphs(ctx, index)
    graph_lengths = np.asarray(ivf.lengths, dtype=np.int64)
    if len(meta) != storage_lengths.size or graph_lengths.size != storage_lengths.size:
        raise _corrupt(index, INDEX_FILE, "graphs and storage have different partitions")
    for name in ("__vector_id", "__neighbors", "_distance"):
        data.column(name, index, INDEX_FILE)
    table, new_meta, lengths = drop_nodes(data.table, meta, graph_lengths, storage_lengths, kept)
    _write_graph_file(writer, data, position, ivf, table, new_meta, lengths)


def _write_graph_file(
    writer: IndexWriter,
    data: IndexFileData,
    ivf_position: int,
    ivf: Any,
    table: pa.Table,
    meta: list[dict[str, Any]],
    lengths: np.ndarray,
) -> None:
    """``index.idx`` from the old one's schema, metadata and buffers with new graph rows."""
    ivf.lengths[:] = lengths.tolist()
    ivf.offsets[:] = (np.cumsum(lengths) - lengths).tolist()
    buffers = list(data.global_buffers)
    buffers[ivf_position] = ivf.SerializeToString()
    metadata = dict(data.metadata)
    compact = (",", ":")
    metadata[b"lance:hnsw"] = json.dumps(
        [json.dumps(m, separators=compact) for m in meta], separators=compact
    ).encode()
    table = table.cast(data.schema.remove_metadata()).replace_schema_metadata(metadata)
    writer.write(INDEX_FILE, table, version=data.version, global_buffers=buffers)


# --- extension over appended rows -----------------------------------------------------------------


def _centroids(ctx: StorageContext, index: IndexMetadata) -> tuple[np.ndarray, str]:
    data = read_index_file(ctx, index, INDEX_FILE)
    _, ivf = _ivf_of(data, index, INDEX_FILE)
    try:
        centroids = tensor_array(ivf.centroids_tensor).astype(np.float32)
        metric = json.loads(data.meta("lance:index", index, INDEX_FILE))["distance_type"]
    except (ValueError, KeyError, TypeError) as exc:
        raise _corrupt(index, INDEX_FILE, f"bad IVF model: {exc}") from exc
    if centroids.ndim != 2:
        raise _corrupt(index, INDEX_FILE, f"centroids of shape {centroids.shape}")
    return centroids, metric


def _nearest(
    vectors: np.ndarray, points: np.ndarray, dot: bool = False, chunk: int | None = None
) -> np.ndarray:
    """Index of the nearest of ``points`` for each of ``vectors`` (squared l2, or with ``dot`` the
    largest inner product), in chunks computed in place (``|p|^2 + v.(-2 p)``: the same float32
    values, so the same choices, as the plain expression; scaling by -2 is exact).

    Chunks are 8192 vectors, or 512 for PQ sub-vectors of fewer than 8 dimensions: measured (100k
    vectors, 256 codewords, BLAS as installed here), 512-row chunks cost a seventh of 8192-row ones
    for 4 dimensions but five times more for 8."""
    if chunk is None:
        chunk = 512 if points.shape[1] < 8 else 8192
    transposed = np.ascontiguousarray(points.T) * np.float32(1.0 if dot else -2.0)
    norms = (points * points).sum(1)
    out = np.empty(len(vectors), np.int64)
    buffer = np.empty((min(chunk, len(vectors)), len(points)), np.result_type(vectors, transposed))
    for i in range(0, len(vectors), chunk):
        block = np.ascontiguousarray(vectors[i : i + chunk])
        products = np.matmul(block, transposed, out=buffer[: len(block)])
        if dot:
            out[i : i + chunk] = products.argmax(1)
        else:
            products += norms
            out[i : i + chunk] = products.argmin(1)
    return out


def _assign(
    vectors: np.ndarray, centroids: np.ndarray, metric: str, kind: str, index: IndexMetadata
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(partition, vectors as stored, vectors PQ encodes)`` as pylance 14's delta segments have
    them (checked against its own): l2 and cosine take the nearest centroid in l2, cosine on the
    vectors normalized (and stores those), and PQ encodes the residual to the centroid; dot takes
    the centroid of largest inner product and PQ encodes the vector itself; hamming the nearest
    binary centroid in hamming distance."""
    if metric == "cosine":
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors = vectors / np.where(norms == 0, 1.0, norms)
    if metric in ("l2", "cosine"):
        partition = _nearest(vectors, centroids)
        residuals = vectors - centroids[partition] if _quantizer(kind) == "PQ" else vectors
        return partition, vectors, residuals
    if metric == "dot":
        return _nearest(vectors, centroids, dot=True), vectors, vectors
    if metric == "hamming":  # binary IVF_FLAT: bytes as float values (exact), centroids uint8
        from lance_ops.index.build_vector import hamming_nearest  # noqa: PLC0415 - it imports this module

        codes = vectors.astype(np.uint8)
        return hamming_nearest(codes, centroids.astype(np.uint8))[0], codes, codes
    raise UnsupportedIndexTypeError(
        f"{kind} index {index.name!r}: extending a {metric!r} index is not supported", index.name
    )


def _codebook(storage: _Storage) -> np.ndarray:
    """The PQ codebook as ``[sub-vectors, codewords, sub-vector dim]``."""
    m = int(storage.params["num_sub_vectors"])
    position = int(storage.params["codebook_position"]) - 1
    tensor = Tensor()
    tensor.ParseFromString(storage.data.global_buffers[position])
    codebook = tensor_array(tensor).astype(np.float32)
    return codebook.reshape(m, -1, codebook.size // m // (2 ** int(storage.params.get("nbits", 8))))


def _encode(
    storage: _Storage, kind: str, metric: str, vectors: np.ndarray, residuals: np.ndarray
) -> np.ndarray:
    """Storage rows of ``vectors``; PQ codewords are the nearest in l2, for dot indices the ones of
    largest inner product (as pylance 14's delta segments; its first build picks them in l2)."""
    quantizer = _quantizer(kind)
    if quantizer == "FLAT":
        return vectors
    if quantizer == "SQ":
        bounds = storage.params["bounds"]
        start, end = float(bounds["start"]), float(bounds["end"])
        scale = 255.0 / (end - start) if end > start else 0.0
        return np.clip(np.floor((vectors - start) * scale), 0, 255).astype(np.uint8)
    m = int(storage.params["num_sub_vectors"])
    if storage.nbits not in (4, 8):
        raise UnsupportedIndexTypeError(f"PQ with {storage.params.get('nbits')} bits is not supported")
    codebook = _codebook(storage)
    sub = codebook.shape[2]
    codes = np.stack(
        [_nearest(residuals[:, j * sub : (j + 1) * sub], codebook[j], metric == "dot") for j in range(m)],
        axis=1,
    ).astype(np.uint8)
    return pack_4bit(codes) if storage.nbits == 4 else codes


def extend_ivf(
    ctx: StorageContext,
    template: IndexMetadata,
    merged: Sequence[IndexMetadata],
    kind: str,
    vectors: np.ndarray,
    row_ids: np.ndarray,
) -> RemapResult:
    """One segment over the rows of the segments ``merged`` and the rows ``row_ids`` with
    ``vectors`` (``[n, dim]``, null vectors left out); ``merged`` empty: a delta segment of the new
    rows only. The model (centroids, codebook, bounds) is ``template``'s, which every segment of an
    index shares; ``index.idx`` is copied from it."""
    storage = _read_storage(ctx, template, kind)
    centroids, metric = _centroids(ctx, template)
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if vectors.ndim != 2 or vectors.shape[1] != centroids.shape[1]:
        raise IndexCorruptError(
            INDEX_FILE,
            f"index {template.name!r}: vectors of shape {vectors.shape} for dim {centroids.shape[1]}",
        )
    partition, vectors, residuals = _assign(vectors, centroids, metric, kind, template)
    codes = [_encode(storage, kind, metric, vectors, residuals).astype(_storage_dtype(storage))]
    partitions, ids = [partition], [np.asarray(row_ids, dtype=np.uint64)]
    for segment in merged:
        # the template is usually the newest segment merged: its storage is read once
        old = storage if segment.uuid == template.uuid else _read_storage(ctx, segment, kind)
        if old.lengths.size != centroids.shape[0]:
            raise _corrupt(segment, STORAGE_FILE, "segments of one index with different partitions")
        partitions.append(np.repeat(np.arange(old.lengths.size), old.lengths))
        ids.append(np.asarray(old.data.table.column(ROW_ID).combine_chunks(), dtype=np.uint64))
        codes.append(_code_matrix(old))
    partition, row_id = np.concatenate(partitions), np.concatenate(ids)
    order = np.lexsort((row_id, partition))
    lengths = np.bincount(partition, minlength=centroids.shape[0])
    codes_in_order = np.concatenate(codes)[order]
    writer = IndexWriter(ctx)
    if "HNSW" in kind:
        # PQ codes of dot indices encode the vectors themselves, of l2 / cosine ones the residuals
        offsets = 0.0 if metric == "dot" else centroids[partition[order]]
        graph_vectors = _decode(storage, kind, codes_in_order, offsets)
        _write_new_graphs(writer, ctx, template, graph_vectors, lengths, metric)
    else:
        writer.copy(ctx, template, INDEX_FILE)
    _write_storage(writer, storage, row_id[order], codes_in_order, lengths)
    return writer.result(template)


def _decode(storage: _Storage, kind: str, codes: np.ndarray, centroids: np.ndarray | float) -> np.ndarray:
    """Approximate float vectors of storage rows: FLAT as stored, SQ at the middle of each code's
    bucket, PQ as ``centroids`` (each row's, or 0 where PQ encodes the vectors) + codewords."""
    quantizer = _quantizer(kind)
    if quantizer == "FLAT":
        return codes.astype(np.float32)
    if quantizer == "SQ":
        bounds = storage.params["bounds"]
        start, end = float(bounds["start"]), float(bounds["end"])
        return (start + (codes.astype(np.float32) + 0.5) * ((end - start) / 255.0)).astype(np.float32)
    codebook = _codebook(storage)
    m = codebook.shape[0]
    if storage.nbits == 4:
        codes = unpack_4bit(codes)
    parts = [codebook[j][codes[:, j].astype(np.int64)] for j in range(m)]
    return (np.concatenate(parts, axis=1) + centroids).astype(np.float32)


def _write_new_graphs(
    writer: IndexWriter,
    ctx: StorageContext,
    template: IndexMetadata,
    vectors: np.ndarray,
    lengths: np.ndarray,
    metric: str,
) -> None:
    """``index.idx`` with new HNSW graphs over ``vectors`` in ``metric`` and ``template``'s model
    and parameters."""
    data, position, ivf, old_meta = _read_graphs(ctx, template)
    if not old_meta or not isinstance(old_meta[0].get("params"), dict):
        raise _corrupt(template, INDEX_FILE, "lance:hnsw holds no HNSW parameters")
    seed = int.from_bytes(writer.uuid[:8], "little")
    table, meta, graph_lengths = build_graphs(vectors, lengths, old_meta[0]["params"], seed, metric)
    _write_graph_file(writer, data, position, ivf, table, meta, graph_lengths)


def _storage_dtype(storage: _Storage) -> np.dtype:
    return np.dtype(storage.data.schema.field(storage.code_column).type.value_type.to_pandas_dtype())


def read_partition(
    ctx: StorageContext, index: IndexMetadata, kind: str, partition: int, with_codes: bool
) -> pa.Table:
    """The rows of one IVF partition of a segment as stored, as pylance's ``read_partition``:
    ``_rowid`` and, with ``with_codes``, the code column (PQ codes in the stored layout, transposed
    within the partition)."""
    storage = _read_storage(ctx, index, kind)
    if not 0 <= partition < len(storage.lengths):
        raise PartitionOutOfRangeError(
            f"partition {partition} is out of range: the index has {len(storage.lengths)}"
        )
    start = int(storage.lengths[:partition].sum())
    columns = [ROW_ID, storage.code_column] if with_codes else [ROW_ID]
    return storage.data.table.select(columns).slice(start, int(storage.lengths[partition])).combine_chunks()
