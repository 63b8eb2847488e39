"""pylance 14's legacy IVF_PQ index file (``create_index(..., index_file_version="Legacy")``).

pylance 14 writes this older layout for IVF_PQ only (its other vector types ignore the option and
write V3 files). The index is one file, ``index.idx``, in the Lance 0.1 container::

    partition 0: codes  [rows, num_sub_vectors] uint8, row-major (not transposed; 4-bit codes
                         packed two a byte as V3 files pack them: [rows, num_sub_vectors / 2])
                 row ids [rows] uint64 little-endian
    partition 1: ...                       (an empty partition takes no bytes)
    metadata:    u32 length, then a ``lance.index.pb.Index`` message
    footer:      u64 metadata position, u16 major 0, u16 minor 1, b"LANC"

The ``Index`` message (Lance's index.proto) holds ``name`` (1), ``columns`` (2),
``dataset_version`` (3), ``index_type`` (4, VECTOR = 0) and a ``VectorIndex`` (5) of
``spec_version`` 1 (1), ``dimension`` (2), ``stages`` (3) and ``metric_type`` (4: L2 0, Cosine 1,
Dot 2). The stages are the transforms (none in pylance 14), then ``IVF`` (stage 2: centroids
tensor, ``offsets`` the BYTE position of each partition in the file, ``lengths`` its rows, the
k-means loss) and ``PQ`` (stage 3: ``num_bits`` 1, ``num_sub_vectors`` 2, ``dimension`` 3,
``codebook_tensor`` 5: shape ``[2**num_bits, dim]``, values sub-vector after sub-vector, i.e.
``[num_sub_vectors, 2**num_bits, dim / num_sub_vectors]`` in C order, as V3 files store it).

A cosine index works on normalized vectors, as V3 files do; distances are computed the same way.
The manifest entry is pylance's V3 one (same details) with ``index_version`` 1; readers tell the
two apart by the file's footer version (0.1 here).
"""

from __future__ import annotations

import struct
import uuid as uuid_module
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from google.protobuf.message import DecodeError

from lance_ops.encoding.protowire import encode_varint, fields, length_delimited
from lance_ops.errors import IndexCorruptError, PartitionOutOfRangeError, UnsupportedFeatureError
from lance_ops.index.build_vector import (
    VECTOR_DETAILS_URL,
    TrainedIvf,
    as_matrix,
    encode_ivf,
    index_details,
    prepare,
)
from lance_ops.index.files import IndexWriter, RemapResult
from lance_ops.index.ivf import pack_4bit, unpack_4bit
from lance_ops.index.ivf_pb import IVF, Tensor, tensor_array, tensor_of
from lance_ops.index.mapping import RowAddressMapping
from lance_ops.io.context import StorageContext
from lance_ops.table.manifest import IndexFile, IndexMetadata

__all__ = [
    "LEGACY_FILE",
    "LegacyIvfPq",
    "build_legacy_ivf_pq",
    "encode_legacy_ivf_pq",
    "is_legacy_index",
    "legacy_partition_table",
    "read_legacy_model",
    "read_legacy_partitions",
    "remap_legacy_ivf_pq",
]

LEGACY_FILE = "index.idx"
_MAGIC = b"LANC"
_FOOTER = 16
_DOT_CHUNK = 1 << 16
_METRICS = {"l2": 0, "cosine": 1, "dot": 2, "hamming": 3}
_METRIC_NAMES = {v: k for k, v in _METRICS.items()}


@dataclass(frozen=True)
class LegacyIvfPq:
    """The model of a legacy IVF_PQ file: its ``Index`` message decoded."""

    name: str
    column: str
    dataset_version: int
    dimension: int
    metric: str
    centroids: np.ndarray  # [num_partitions, dim] float32
    offsets: np.ndarray  # byte position of each partition
    lengths: np.ndarray  # rows of each partition
    loss: float | None
    num_bits: int
    codebook: np.ndarray  # [num_sub_vectors, 2**num_bits, dim / num_sub_vectors] float32

    @property
    def num_sub_vectors(self) -> int:
        return int(self.codebook.shape[0])

    def file_bytes(self, row_ids: np.ndarray, partition: np.ndarray, codes: np.ndarray) -> bytes:
        """A legacy file of this model over these rows (:func:`encode_legacy_ivf_pq`)."""
        return encode_legacy_ivf_pq(
            name=self.name,
            column=self.column,
            dataset_version=self.dataset_version,
            metric=self.metric,
            centroids=self.centroids,
            codebook=self.codebook,
            num_bits=self.num_bits,
            loss=self.loss,
            row_ids=row_ids,
            partition=partition,
            codes=codes,
        )


def _varint_field(number: int, value: int) -> bytes:
    return encode_varint(number << 3) + encode_varint(value) if value else b""


def encode_legacy_ivf_pq(
    *,
    name: str,
    column: str,
    dataset_version: int,
    metric: str,
    centroids: np.ndarray,
    codebook: np.ndarray,
    num_bits: int,
    loss: float | None,
    row_ids: np.ndarray,
    partition: np.ndarray,
    codes: np.ndarray,
) -> bytes:
    """The bytes of a legacy ``index.idx``: ``codes`` (``[n, num_sub_vectors]`` uint8) and
    ``row_ids`` of the rows in ``partition`` (each row's partition), partition after partition
    (rows in the order given within one), then the model and the footer."""
    num_partitions = len(centroids)
    order = np.argsort(partition, kind="stable")
    lengths = np.bincount(np.asarray(partition, np.int64), minlength=num_partitions)
    codes = np.asarray(codes, np.uint8).reshape(len(partition), int(codebook.shape[0]))[order]
    codes = pack_4bit(codes) if num_bits == 4 else np.ascontiguousarray(codes)
    ids = np.asarray(row_ids, np.uint64)[order].astype("<u8")
    width = codes.shape[1]
    chunks: list[bytes] = []
    offsets = np.zeros(num_partitions, np.int64)
    position = start = 0
    for p, n in enumerate(lengths.tolist()):
        offsets[p] = position
        if n:
            chunks.append(codes[start : start + n].tobytes())
            chunks.append(ids[start : start + n].tobytes())
            position += n * (width + 8)
            start += n
    ivf = IVF()
    ivf.offsets[:] = offsets.tolist()
    ivf.lengths[:] = lengths.tolist()
    ivf.centroids_tensor.CopyFrom(tensor_of(np.asarray(centroids, np.float32)))
    if loss is not None:
        ivf.loss = float(loss)
    books = np.asarray(codebook, np.float32)
    dim = int(np.asarray(centroids).shape[1])
    pq = (
        _varint_field(1, num_bits)
        + _varint_field(2, int(books.shape[0]))
        + _varint_field(3, dim)
        + length_delimited(5, _codebook_tensor(books))
    )
    stages = length_delimited(3, length_delimited(2, ivf.SerializeToString())) + length_delimited(
        3, length_delimited(3, pq)
    )
    vector = _varint_field(1, 1) + _varint_field(2, dim) + stages + _varint_field(4, _METRICS[metric])
    message = (
        length_delimited(1, name.encode())
        + length_delimited(2, column.encode())
        + _varint_field(3, dataset_version)
        + length_delimited(5, vector)
    )
    chunks.append(struct.pack("<I", len(message)) + message)
    chunks.append(struct.pack("<QHH", position, 0, 1) + _MAGIC)
    return b"".join(chunks)


def _codebook_tensor(books: np.ndarray) -> bytes:
    """pylance's tensor of a ``[m, k, sub]`` codebook: the values in that order, the shape said
    ``[k, dim]``."""
    m, k, sub = books.shape
    tensor = tensor_of(books.reshape(-1))
    tensor.shape[:] = [k, m * sub]
    return bytes(tensor.SerializeToString())


def build_legacy_ivf_pq(
    writer: IndexWriter,
    model: TrainedIvf,
    values: pa.Array,
    row_ids: np.ndarray,
    name: str,
    dataset_version: int,
    loss: float | None,
) -> RemapResult:
    """Encode the rows ``values`` (a vector column; null and NaN rows left out) at ``row_ids``
    with ``model`` (IVF_PQ) and write them as a legacy ``index.idx`` with ``writer`` (``loss``:
    the k-means loss to record, None when the centroids were given)."""
    params = model.params
    assert model.codebooks is not None
    matrix = as_matrix(values, params.column)
    keep = np.isfinite(matrix).all(axis=1)
    vectors = prepare(params, matrix)  # prepare leaves out what keep does
    partition, codes = encode_ivf(model, vectors)
    if params.metric == "dot":  # pylance's legacy build picks dot codewords by inner product
        codes = _dot_codes(model.codebooks, vectors)
    data = encode_legacy_ivf_pq(
        name=name,
        column=params.column,
        dataset_version=dataset_version,
        metric=params.metric,
        centroids=model.centroids,
        codebook=model.codebooks,
        num_bits=params.num_bits,
        loss=loss,
        row_ids=np.asarray(row_ids, np.uint64)[keep],
        partition=partition,
        codes=codes,
    )
    writer.write_bytes(LEGACY_FILE, data)
    shape = IndexMetadata(
        uuid=writer.uuid,
        fields=(),
        name="",
        dataset_version=0,
        details=(VECTOR_DETAILS_URL, index_details(params)),
        index_version=1,
        files=(IndexFile(LEGACY_FILE, 0),),
    )
    return writer.result(shape)


def _dot_codes(codebooks: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """pylance 14's legacy dot-product PQ codes: per sub-vector, the codeword of largest inner
    product with the vector itself (no residual), the first on a tie; chunks of rows."""
    m, _, sub = codebooks.shape
    out = np.empty((len(vectors), m), np.uint8)
    for start in range(0, len(vectors), _DOT_CHUNK):
        block = vectors[start : start + _DOT_CHUNK]
        for j in range(m):
            scores = block[:, j * sub : (j + 1) * sub] @ codebooks[j].T
            out[start : start + len(block), j] = scores.argmax(axis=1)
    return out


def _path(ctx: StorageContext, index: IndexMetadata) -> str:
    return ctx.path("_indices", str(uuid_module.UUID(bytes=index.uuid)), LEGACY_FILE)


def _size(ctx: StorageContext, index: IndexMetadata) -> int:
    size = next((f.size_bytes for f in index.files if f.path == LEGACY_FILE), None)
    return int(size) if size else ctx.store.size(_path(ctx, index))


def is_legacy_index(ctx: StorageContext, index: IndexMetadata) -> bool:
    """Whether ``index``'s ``index.idx`` is a legacy (Lance 0.1 container) file: its footer says
    version 0.0 / 0.1. False when there is no such file (the V3 reader reports it)."""
    if index.files and {f.path for f in index.files} != {LEGACY_FILE}:
        return False  # V3 vector indices have an auxiliary.idx too
    try:
        size = _size(ctx, index)
        if size < _FOOTER:
            return False
        tail = bytes(ctx.store.read_range(_path(ctx, index), size - _FOOTER, _FOOTER))
    except FileNotFoundError:
        return False
    if len(tail) != _FOOTER or tail[-4:] != _MAGIC:
        return False
    major, minor = struct.unpack("<HH", tail[8:12])
    return major == 0 and minor in (0, 1)


def _corrupt(ctx: StorageContext, index: IndexMetadata, reason: str) -> IndexCorruptError:
    return IndexCorruptError(_path(ctx, index), f"index {index.name!r}: legacy {LEGACY_FILE}: {reason}")


def read_legacy_model(ctx: StorageContext, index: IndexMetadata) -> LegacyIvfPq:
    """The model of a legacy IVF_PQ index (two reads: the footer, then the metadata)."""
    path = _path(ctx, index)
    try:
        size = _size(ctx, index)
        if size < _FOOTER + 4:
            raise _corrupt(ctx, index, f"{size} bytes are too few")
        tail = bytes(ctx.store.read_range(path, size - _FOOTER, _FOOTER))
        (position,) = struct.unpack("<Q", tail[:8])
        if not 0 <= position <= size - _FOOTER - 4:
            raise _corrupt(ctx, index, f"metadata position {position} outside the file")
        meta = bytes(ctx.store.read_range(path, position, size - _FOOTER - position))
    except FileNotFoundError as exc:
        raise _corrupt(ctx, index, "file is missing") from exc
    (length,) = struct.unpack("<I", meta[:4])
    if length + 4 > len(meta):
        raise _corrupt(ctx, index, "metadata cut short")
    try:
        return _decode(meta[4 : 4 + length], position)
    except (ValueError, KeyError, IndexError, TypeError, DecodeError) as exc:
        raise _corrupt(ctx, index, f"undecodable metadata: {exc}") from exc
    except UnsupportedFeatureError as exc:
        raise UnsupportedFeatureError(f"index {index.name!r}: {exc}") from exc


def _decode(message: bytes, data_end: int) -> LegacyIvfPq:
    name = column = ""
    version = 0
    vector = b""
    for number, value in fields(message):
        if number == 1:
            name = bytes(value).decode()  # type: ignore[arg-type]
        elif number == 2 and not column:
            column = bytes(value).decode()  # type: ignore[arg-type]
        elif number == 3:
            version = int(value)  # type: ignore[arg-type]
        elif number == 5:
            vector = bytes(value)  # type: ignore[arg-type]
    if not vector:
        raise ValueError("no VectorIndex")
    dimension, metric_code = 0, 0
    ivf, pq = None, None
    for number, value in fields(vector):
        if number == 2:
            dimension = int(value)  # type: ignore[arg-type]
        elif number == 4:
            metric_code = int(value)  # type: ignore[arg-type]
        elif number == 3:
            for stage, payload in fields(bytes(value)):  # type: ignore[arg-type]
                if stage == 2:
                    ivf = IVF.FromString(bytes(payload))  # type: ignore[arg-type]
                elif stage == 3:
                    pq = bytes(payload)  # type: ignore[arg-type]
                else:
                    kind = {1: "Flat", 4: "Transform (OPQ)", 5: "DiskAnn"}.get(stage, str(stage))
                    raise UnsupportedFeatureError(f"legacy vector index stage {kind} is not supported")
    if ivf is None or pq is None:
        raise ValueError("an IVF and a PQ stage are needed")
    num_bits, m, books = 8, 0, None
    for number, value in fields(pq):
        if number == 1:
            num_bits = int(value)  # type: ignore[arg-type]
        elif number == 2:
            m = int(value)  # type: ignore[arg-type]
        elif number == 5:
            books = tensor_array(Tensor.FromString(bytes(value)))  # type: ignore[arg-type]
        elif number == 4 and books is None:  # the deprecated packed floats
            books = np.frombuffer(bytes(value), "<f4")  # type: ignore[arg-type]
    if num_bits not in (4, 8):
        raise ValueError(f"PQ of {num_bits} bits")
    centroids = tensor_array(ivf.centroids_tensor).astype(np.float32)
    if books is None or m <= 0 or not dimension or dimension % m or centroids.shape[1:] != (dimension,):
        raise ValueError("PQ / IVF shapes do not fit the dimension")
    codebook = np.asarray(books, np.float32).reshape(m, 2**num_bits, dimension // m)
    offsets = np.asarray(ivf.offsets, np.int64)
    lengths = np.asarray(ivf.lengths, np.int64)
    if len(offsets) != len(centroids) or len(lengths) != len(centroids):
        raise ValueError("partitions do not match the centroids")
    if len(lengths) and int((offsets + lengths * (m * num_bits // 8 + 8)).max()) > data_end:
        raise ValueError("partitions reach past the metadata")
    return LegacyIvfPq(
        name,
        column,
        version,
        dimension,
        _METRIC_NAMES[metric_code],
        centroids,
        offsets,
        lengths,
        ivf.loss if ivf.HasField("loss") else None,
        num_bits,
        codebook,
    )


def read_legacy_partitions(
    ctx: StorageContext, index: IndexMetadata, model: LegacyIvfPq, partitions: list[int]
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Row ids (uint64) and codes (``[rows, num_sub_vectors]`` uint8, 4-bit codes unpacked) of
    each of ``partitions``."""
    m = model.num_sub_vectors * model.num_bits // 8  # bytes a row
    ranges = [(int(model.offsets[p]), int(model.lengths[p]) * (m + 8)) for p in partitions]
    try:
        blocks = ctx.store.read_ranges(_path(ctx, index), ranges) if ranges else []
    except FileNotFoundError as exc:
        raise _corrupt(ctx, index, "file is missing") from exc
    out = []
    for p, block in zip(partitions, blocks, strict=True):
        n = int(model.lengths[p])
        raw = np.frombuffer(block, np.uint8)
        if len(raw) != n * (m + 8):
            raise _corrupt(ctx, index, f"partition {p} cut short")
        codes = raw[: n * m].reshape(n, m)
        if model.num_bits == 4:
            codes = unpack_4bit(codes)
        ids = raw[n * m :].view("<u8").astype(np.uint64)
        out.append((ids, codes))
    return out


def remap_legacy_ivf_pq(ctx: StorageContext, index: IndexMetadata, mapping: RowAddressMapping) -> RemapResult:
    """A legacy IVF_PQ index after compaction, as pylance 14 remaps it: a new legacy file with the
    same model, each partition's rows at their new addresses (removed rows dropped, order kept)."""
    model = read_legacy_model(ctx, index)
    parts = read_legacy_partitions(ctx, index, model, list(range(len(model.lengths))))
    old_ids = np.concatenate([ids for ids, _ in parts]) if parts else np.empty(0, np.uint64)
    codes = np.concatenate([c for _, c in parts]) if parts else np.empty((0, model.num_sub_vectors), np.uint8)
    new_ids, kept = mapping.apply(old_ids)
    partition = np.repeat(np.arange(len(model.lengths)), model.lengths)
    data = model.file_bytes(new_ids, partition[kept], codes[kept])
    writer = IndexWriter(ctx)
    writer.write_bytes(LEGACY_FILE, data)
    return writer.result(index)


def legacy_partition_table(
    ctx: StorageContext, index: IndexMetadata, partition: int, with_codes: bool
) -> pa.Table:
    """One partition as pylance's ``VectorIndexReader.read_partition`` gives a legacy index's:
    ``_rowid`` and, with ``with_codes``, ``__pq_code`` (the stored bytes of each row)."""
    model = read_legacy_model(ctx, index)
    if not 0 <= partition < len(model.lengths):
        raise PartitionOutOfRangeError(
            f"partition {partition} is out of range: the index has {len(model.lengths)}"
        )
    ((ids, codes),) = read_legacy_partitions(ctx, index, model, [partition])
    columns = {"_rowid": pa.array(ids, pa.uint64())}
    if with_codes:
        stored = pack_4bit(codes) if model.num_bits == 4 else codes
        columns["__pq_code"] = pa.FixedSizeListArray.from_arrays(
            pa.array(np.ascontiguousarray(stored).reshape(-1)), stored.shape[1]
        )
    return pa.table(columns)
