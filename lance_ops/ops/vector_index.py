"""``create_index``: train and write an IVF_FLAT / IVF_PQ / IVF_SQ / IVF_HNSW_FLAT / IVF_HNSW_PQ /
IVF_HNSW_SQ index over every fragment and commit it as pylance 14 does (one ``CreateIndex`` whose
``fragment_bitmap`` is every fragment; an existing index of that name is removed by it, or refused
with ``replace=False``).

pylance 14's defaults: ``name`` ``<column>_idx``, metric ``l2``, ``num_partitions`` rows // 8192
(1 .. 4096), ``sample_rate`` 256, ``max_iters`` 50, ``num_bits`` 8; IVF_PQ needs
``num_sub_vectors`` dividing the dimension (and even with ``num_bits=4``, PQ's other choice; IVF_SQ
stores 8-bit codes whatever ``num_bits`` says, as pylance). Binary vectors (``fixed_size_list`` of
``uint8``) take IVF_FLAT with ``metric="hamming"`` only. Null vectors and vectors with a NaN are left out of
the index (pylance's ``filter_nan=True``). IVF_HNSW_* (any metric; graph distances are stored in
the index's metric, as pylance does) take ``m`` (20), ``ef_construction`` (150) and
``max_level`` (7); their graphs are built with HNSW's heuristic neighbour choice over exact
candidates within each partition (:func:`lance_ops.index.hnsw.build_graphs`: quadratic in a
partition's rows, so keep partitions to some thousands of rows). Nothing is committed on any error.
"""

from __future__ import annotations

import inspect
import time
import uuid as uuid_module
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa
from pyroaring import BitMap

from lance_ops.errors import (
    ArgumentTypeError,
    IndexColumnTypeError,
    IndexExistsError,
    InvalidArgumentError,
    UnsupportedFeatureError,
    UnsupportedIndexTypeError,
)
from lance_ops.fragment.reader import VersionFiles
from lance_ops.index.build_vector import (
    BUILDABLE_TYPES,
    HNSW_DEFAULTS,
    METRICS,
    VECTOR_DETAILS_URL,
    TrainedIvf,
    VectorIndexParams,
    as_matrix,
    build_ivf,
    default_num_partitions,
    index_details,
    is_multivector_type,
    is_vector_type,
    multivector_model,
    pq_codebooks,
    prepare,
    sample_positions,
    train_ivf,
    vector_rows,
)
from lance_ops.index.files import IndexWriter, RemapResult
from lance_ops.index.legacy_ivf import build_legacy_ivf_pq
from lance_ops.index.optimize import column_rows
from lance_ops.ops.commit import CommitOptions, commit
from lance_ops.table.manifest import DataFragment, IndexMetadata, Manifest
from lance_ops.table.transaction import CreateIndex, Transaction

__all__ = [
    "VectorIndexPlan",
    "commit_vector_index",
    "create_index",
    "default_num_partitions",
    "plan_vector_index",
]

_METRIC_ALIASES = {"euclidean": "l2", "cos": "cosine"}


def _params(
    column: str,
    dtype: pa.DataType,
    index_type: str,
    metric: str,
    num_rows: int,
    num_partitions: int | None,
    num_sub_vectors: int | None,
    num_bits: int,
    sample_rate: int,
    max_iters: int,
    target_partition_size: int | None,
    seed: int | None,
    hnsw: dict[str, int | None] | None = None,
) -> VectorIndexParams:
    kind = str(index_type).upper()
    if kind not in BUILDABLE_TYPES:
        raise UnsupportedIndexTypeError(
            f"lance_ops builds {', '.join(BUILDABLE_TYPES)} vector indices, not {index_type!r}"
        )
    if is_multivector_type(dtype):
        metric_name = _METRIC_ALIASES.get(str(metric).lower(), str(metric).lower())
        if metric_name != "cosine":  # as pylance 14
            raise InvalidArgumentError(
                f"column {column!r}: a multivector column ({dtype}) is indexed with metric "
                f"'cosine' only, not {metric!r}"
            )
        dtype = dtype.value_type
    if not is_vector_type(dtype):
        raise IndexColumnTypeError(
            f"Vector column {column} must be a fixed_size_list of float for {kind}, got {dtype}", column
        )
    metric_name = _METRIC_ALIASES.get(str(metric).lower(), str(metric).lower())
    if metric_name not in METRICS:
        raise InvalidArgumentError(
            f"column {column!r}: unknown metric {metric!r} (l2, cosine, dot or hamming)"
        )
    binary = pa.types.is_uint8(dtype.value_type)
    if binary != (metric_name == "hamming") or (binary and kind != "IVF_FLAT"):
        # as pylance 14: binary vectors are indexed by IVF_FLAT in hamming distance, and only them
        need = (
            "binary (uint8) vectors are indexed by IVF_FLAT with metric 'hamming'"
            if binary
            else "metric 'hamming' needs binary vectors (fixed_size_list of uint8)"
        )
        raise IndexColumnTypeError(
            f"column {column!r}: {need}, not {kind} / {metric_name!r} on {dtype}", column
        )
    dim = dtype.list_size
    graph: tuple[tuple[str, int], ...] = ()
    if "HNSW" in kind:
        chosen = {k: v for k, v in (hnsw or {}).items() if v is not None}
        values = {**HNSW_DEFAULTS, **chosen}
        if (
            any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in values.values())
            or values["m"] < 2
        ):
            raise InvalidArgumentError(f"column {column!r}: bad HNSW parameters {chosen}")
        graph = tuple(values.items())
    if kind.endswith("_PQ"):
        if num_sub_vectors is None:
            raise InvalidArgumentError(f"column {column!r}: num_sub_vectors is required for {kind}")
        if num_sub_vectors <= 0 or dim % num_sub_vectors:
            raise InvalidArgumentError(
                f"column {column!r}: dimension ({dim}) must be divisible by "
                f"num_sub_vectors ({num_sub_vectors})"
            )
    if not kind.endswith("_PQ"):
        num_bits = 8  # pylance 14 takes any num_bits for IVF_SQ and stores 8-bit codes
    elif num_bits not in (4, 8):
        raise InvalidArgumentError(f"column {column!r}: PQ num_bits must be 4 or 8, got {num_bits}")
    elif num_bits == 4 and num_sub_vectors is not None and num_sub_vectors % 2:
        raise InvalidArgumentError(
            f"column {column!r}: num_sub_vectors must be even for num_bits=4, got {num_sub_vectors}"
        )
    partitions = (
        default_num_partitions(num_rows, target_partition_size) if num_partitions is None else num_partitions
    )
    if int(partitions) < 1 or sample_rate < 1 or max_iters < 1:
        raise InvalidArgumentError(
            f"column {column!r}: num_partitions, sample_rate and max_iters must be positive"
        )
    return VectorIndexParams(
        column,
        kind,
        metric_name,
        int(partitions),
        num_sub_vectors,
        num_bits,
        sample_rate,
        max_iters,
        seed,
        graph,
    )


@dataclass(frozen=True)
class VectorIndexPlan:
    """A checked ``create_index`` call: the parameters, the column's field id, the index name and
    the segments of that name the commit replaces."""

    params: VectorIndexParams
    field_id: int
    name: str
    existing: tuple[IndexMetadata, ...]


def plan_vector_index(
    files: VersionFiles,
    column: str,
    index_type: str,
    *,
    name: str | None = None,
    metric: str = "l2",
    replace: bool = False,
    num_partitions: int | None = None,
    num_sub_vectors: int | None = None,
    num_bits: int = 8,
    sample_rate: int = 256,
    max_iters: int = 50,
    target_partition_size: int | None = None,
    seed: int | None = None,
    m: int | None = None,
    ef_construction: int | None = None,
    max_level: int | None = None,
) -> VectorIndexPlan:
    """Check a ``create_index`` call against ``files``' version (the errors of ``create_index``);
    ``m`` / ``ef_construction`` / ``max_level`` are the graph parameters of IVF_HNSW_*."""
    manifest = files.manifest
    field = manifest.schema.field_at(column)  # FieldNotFoundError when there is none
    arrow = manifest.schema.to_arrow().field(column.split(".")[0])
    for part in column.split(".")[1:]:
        arrow = arrow.type.field(part)
    num_rows = sum(f.num_rows for f in manifest.fragments)
    params = _params(
        column,
        arrow.type,
        index_type,
        metric,
        num_rows,
        num_partitions,
        num_sub_vectors,
        num_bits,
        sample_rate,
        max_iters,
        target_partition_size,
        seed,
        {"m": m, "ef_construction": ef_construction, "max_level": max_level},
    )
    name = name or f"{column}_idx"  # pylance 14 keeps a struct path's dots
    existing = tuple(i for i in manifest.indices if i.name == name)
    if existing and not replace:
        raise IndexExistsError(
            f"Index name '{name}' already exists, please specify a different name or use replace=True"
        )
    return VectorIndexPlan(params, field.id, name, existing)


def create_index(
    files: VersionFiles,
    column: str,
    index_type: str,
    options: CommitOptions,
    *,
    ivf_centroids: Any = None,
    pq_codebook: Any = None,
    index_file_version: Any = None,
    **kwargs: Any,
) -> tuple[Manifest, Transaction]:
    """Build the index in this process and commit it (keyword arguments: :func:`plan_vector_index`).

    ``ivf_centroids`` (``[num_partitions, dim]``: a numpy array or a ``fixed_size_list`` array)
    and ``pq_codebook`` (``[num_sub_vectors, 2**num_bits, dim / num_sub_vectors]``: a numpy array,
    a fixed-shape tensor array, or a ``fixed_size_list`` array of ``2**num_bits`` rows of ``dim`` as
    ``PqModel.codebook``) are used as given instead of trained, as pylance; ``index_file_version``
    ``"Legacy"`` writes an IVF_PQ index as pylance's legacy ``index.idx``
    (:mod:`lance_ops.index.legacy_ivf`; other types ignore it and write V3 files, as pylance 14).
    ``train=False`` commits pylance 14's empty index (the entry alone: no file, no fragment;
    ``optimize_indices`` trains it), ``skip_transpose=True`` stores PQ codes row-major;
    pylance's other keywords are taken as :func:`_check_keywords` says."""
    file_version = str(getattr(index_file_version, "value", index_file_version or "V3"))
    if file_version not in ("V3", "Legacy"):
        raise InvalidArgumentError(
            f"column {column!r}: index_file_version must be 'V3' or 'Legacy', not {index_file_version!r}"
        )
    train = kwargs.pop("train", True)
    transpose = not kwargs.pop("skip_transpose", False)
    _check_keywords(column, kwargs)
    plan = plan_vector_index(files, column, index_type, **kwargs)
    # as pylance 14: only IVF_PQ has a legacy file; the other types write V3 whatever is asked
    legacy = file_version == "Legacy" and plan.params.index_type == "IVF_PQ"
    if legacy and not train:
        raise UnsupportedFeatureError(
            f"column {column!r}: an untrained (train=False) index has no legacy file version"
        )
    if not train:  # pylance 14: the entry alone, no file, no fragment; optimize_indices trains it
        empty = RemapResult(
            uuid_module.uuid4().bytes, (), (VECTOR_DETAILS_URL, index_details(plan.params)), 1
        )
        return commit_vector_index(files, plan, [], empty, options)
    fragments = list(files.manifest.fragments)
    rows, row_ids = column_rows(files.storage, files.manifest, fragments, column, "_rowid")
    values, ids = vector_rows(rows, row_ids)
    if legacy and is_multivector_type(values.type):
        raise UnsupportedFeatureError(
            f"column {column!r}: lance_ops writes legacy IVF_PQ files of vector columns only"
        )
    model: TrainedIvf | None
    if ivf_centroids is not None or pq_codebook is not None:
        model = given_model(plan.params, values, ivf_centroids, pq_codebook)
    else:
        model = multivector_model(plan.params, rows)
    if legacy:
        if model is None:
            matrix = as_matrix(values, column)
            model = train_ivf(plan.params, len(matrix), matrix.shape[1], lambda positions: matrix[positions])
        writer = IndexWriter(files.storage)
        loss = None if ivf_centroids is not None else model.loss  # as pylance
        result = build_legacy_ivf_pq(writer, model, values, ids, plan.name, files.manifest.version, loss)
        return commit_vector_index(files, plan, fragments, result, options)
    result = build_ivf(IndexWriter(files.storage), plan.params, values, ids, model, transpose)
    return commit_vector_index(files, plan, fragments, result, options)


# keywords of pylance 14's ``create_index`` that change nothing lance_ops writes: taken and unused
_ACCEPTED = frozenset(
    {
        "accelerator",
        "index_cache_size",
        "shuffle_partition_batches",
        "shuffle_partition_concurrency",
        "storage_options",
        "filter_nan",
        "progress_callback",
        "one_pass_ivfpq",
        "streaming_sample_rate",
        "streaming_coreset_rate",
        "streaming_refine_passes",
    }
)
# keywords of pylance 14's ``create_index`` that would change the index, and lance_ops does not take
_REFUSED = frozenset({"ivf_centroids_file", "precomputed_partition_dataset"})
_PLANNED = frozenset(inspect.signature(plan_vector_index).parameters) - {"files", "column", "index_type"}


def _check_keywords(column: str, kwargs: dict[str, Any]) -> None:
    """Drop the keywords taken and unused; :class:`~lance_ops.errors.UnsupportedFeatureError` for
    one lance_ops does not support (given, not None), :class:`~lance_ops.errors.ArgumentTypeError`
    for a keyword ``create_index`` does not know."""
    for key in _ACCEPTED & set(kwargs):
        del kwargs[key]
    refused = sorted(k for k in _REFUSED & set(kwargs) if kwargs.pop(k) is not None)
    if refused:
        raise UnsupportedFeatureError(f"column {column!r}: lance_ops' create_index does not take {refused}")
    unknown = sorted(set(kwargs) - _PLANNED)
    if unknown:
        raise ArgumentTypeError(f"create_index() got unexpected keyword arguments {unknown}")


def _given_array(value: Any) -> np.ndarray:
    if isinstance(value, pa.ChunkedArray):
        value = value.combine_chunks()
    if isinstance(value, pa.ExtensionArray) and hasattr(value, "to_numpy_ndarray"):
        return np.asarray(value.to_numpy_ndarray(), np.float32)
    if isinstance(value, pa.FixedSizeListArray):
        return as_matrix(value, "model")
    return np.asarray(value, np.float32)


def given_model(params: VectorIndexParams, values: pa.Array, centroids: Any, codebook: Any) -> TrainedIvf:
    """The model of a build given its IVF centroids and / or PQ codebook (the rest trained on
    ``values`` as :func:`~lance_ops.index.build_vector.train_ivf` trains it)."""
    matrix = as_matrix(values, params.column)
    dim = matrix.shape[1]
    if centroids is None:
        model = train_ivf(params, len(matrix), dim, lambda positions: matrix[positions])
        centres, loss = model.centroids, model.loss
    else:
        centres, loss = _given_array(centroids), 0.0
        if centres.shape != (params.num_partitions, dim):
            raise InvalidArgumentError(
                f"column {params.column!r}: ivf_centroids of shape {centres.shape}, expected "
                f"({params.num_partitions}, {dim}) (num_partitions, dimension)"
            )
    quantizer = params.index_type.rsplit("_", 1)[1]
    if quantizer != "PQ":
        if codebook is not None:
            raise InvalidArgumentError(f"column {params.column!r}: pq_codebook is for IVF_PQ indices")
        if quantizer == "FLAT":
            return TrainedIvf(params, dim, centres, loss)
        return replace(train_ivf(params, len(matrix), dim, lambda p: matrix[p]), centroids=centres, loss=loss)
    m, k = int(params.num_sub_vectors or 0), 2**params.num_bits
    if codebook is None:
        rng = np.random.default_rng(params.seed)
        sample = prepare(params, matrix[sample_positions(len(matrix), k * params.sample_rate, rng)])
        books = pq_codebooks(params, centres, sample, rng)
    else:
        books = _given_array(codebook).reshape(-1)
        if books.size != k * dim:
            raise InvalidArgumentError(
                f"column {params.column!r}: pq_codebook of {books.size} values, expected "
                f"{m} x {k} x {dim // m} (num_sub_vectors, 2**num_bits, dimension / num_sub_vectors)"
            )
        books = books.reshape(m, k, dim // m)
    return TrainedIvf(params, dim, centres, loss, codebooks=books)


def commit_vector_index(
    files: VersionFiles,
    plan: VectorIndexPlan,
    fragments: list[DataFragment],
    result: RemapResult,
    options: CommitOptions,
) -> tuple[Manifest, Transaction]:
    """Commit the index files ``result`` over ``fragments`` as one ``CreateIndex``."""
    index = new_index(files.manifest, plan.field_id, plan.name, fragments, result)
    return commit(files.storage, CreateIndex((index,), plan.existing), options)


def new_index(
    manifest: Manifest, field_id: int, name: str, fragments: list[DataFragment], result: RemapResult
) -> IndexMetadata:
    """The manifest entry of a new index over ``fragments`` written as ``result``."""
    return IndexMetadata(
        uuid=result.uuid,
        fields=(field_id,),
        name=name,
        dataset_version=manifest.version,
        fragment_bitmap=BitMap(f.id for f in fragments).serialize(),
        details=result.index_details,
        index_version=result.index_version,
        created_at=int(time.time() * 1000),
        files=result.files,
    )
