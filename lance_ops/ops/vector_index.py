"""``create_index``: train and write an IVF_FLAT / IVF_PQ / IVF_SQ / IVF_HNSW_FLAT / IVF_HNSW_PQ /
IVF_HNSW_SQ index over every fragment and commit it as pylance 14 does (one ``CreateIndex`` whose
``fragment_bitmap`` is every fragment; an existing index of that name is removed by it, or refused
with ``replace=False``).

pylance 14's defaults: ``name`` ``<column>_idx``, metric ``l2``, ``num_partitions`` rows // 8192
(1 .. 4096), ``sample_rate`` 256, ``max_iters`` 50, ``num_bits`` 8; IVF_PQ needs
``num_sub_vectors`` dividing the dimension. Null vectors and vectors with a NaN are left out of
the index (pylance's ``filter_nan=True``). IVF_HNSW_* (any metric; graph distances are stored in
the index's metric, as pylance does) take ``m`` (20), ``ef_construction`` (150) and
``max_level`` (7); their graphs are built with HNSW's heuristic neighbour choice over exact
candidates within each partition (:func:`lance_ops.index.hnsw.build_graphs`: quadratic in a
partition's rows, so keep partitions to some thousands of rows). Nothing is committed on any error.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyroaring import BitMap

from lance_ops.errors import (
    IndexColumnTypeError,
    IndexExistsError,
    InvalidArgumentError,
    UnsupportedIndexTypeError,
)
from lance_ops.fragment.reader import VersionFiles
from lance_ops.index.build_vector import BUILDABLE_TYPES, HNSW_DEFAULTS, METRICS, VectorIndexParams, build_ivf
from lance_ops.index.files import IndexWriter, RemapResult
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


def default_num_partitions(num_rows: int, target_partition_size: int | None = None) -> int:
    """pylance's: one partition per ``target_partition_size`` (8192) rows, between 1 and 4096."""
    return min(max(1, num_rows // (target_partition_size or 8192)), 4096)


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
    if not pa.types.is_fixed_size_list(dtype) or not pa.types.is_floating(dtype.value_type):
        raise IndexColumnTypeError(
            f"Vector column {column} must be a fixed_size_list of float for {kind}, got {dtype}", column
        )
    metric_name = _METRIC_ALIASES.get(str(metric).lower(), str(metric).lower())
    if metric_name not in METRICS:
        raise InvalidArgumentError(f"column {column!r}: unknown metric {metric!r} (l2, cosine or dot)")
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
    if num_bits != 8:
        raise InvalidArgumentError(f"column {column!r}: lance_ops builds {kind} with num_bits=8 only")
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
    name = name or f"{column.replace('.', '_')}_idx"
    existing = tuple(i for i in manifest.indices if i.name == name)
    if existing and not replace:
        raise IndexExistsError(
            f"Index name '{name}' already exists, please specify a different name or use replace=True"
        )
    return VectorIndexPlan(params, field.id, name, existing)


def create_index(
    files: VersionFiles, column: str, index_type: str, options: CommitOptions, **kwargs: Any
) -> tuple[Manifest, Transaction]:
    """Build the index in this process and commit it (keyword arguments: :func:`plan_vector_index`)."""
    plan = plan_vector_index(files, column, index_type, **kwargs)
    fragments = list(files.manifest.fragments)
    values, ids = column_rows(files.storage, files.manifest, fragments, column, "_rowid")
    result = build_ivf(IndexWriter(files.storage), plan.params, values, ids)
    return commit_vector_index(files, plan, fragments, result, options)


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
