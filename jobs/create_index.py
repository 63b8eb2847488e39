"""Distributed index build: the driver trains, executors encode their fragments, the driver commits.

    python -m jobs.create_index --uri DIR --column vec --index-type IVF_PQ \\
        [--name N] [--param num_partitions=256 --param num_sub_vectors=16 ...]

The driver pins the latest version and checks the call as ``create_index`` /
``create_scalar_index`` would (:func:`lance_ops.ops.vector_index.plan_vector_index`,
:func:`lance_ops.ops.scalar_index.plan_scalar_index`: same errors, nothing committed).

Vector indices (IVF_FLAT / IVF_PQ / IVF_SQ / IVF_HNSW_*): the driver draws the same samples as the in-process
build (:func:`lance_ops.index.build_vector.train_ivf`, positions among the live rows taken from
the pinned version) and trains the IVF centroids and the PQ codebooks / SQ bounds there; the model
travels to one Spark task per fragment, which assigns and encodes that fragment's vectors and
ships back an Arrow IPC payload of ``row id, partition, code``; the driver lays the rows out and
writes the two index files (:func:`~lance_ops.index.build_vector.write_ivf`; IVF_HNSW_*: the
graphs are built there, from the codes).

Scalar indices (BTREE / BITMAP / LABEL_LIST / ZONEMAP / BLOOMFILTER / NGRAM): each task reads its
fragment's keys and row ids or addresses and ships them back as Arrow IPC; the driver concatenates
them in fragment order and writes the index files (sorting the keys, as the in-process build
does). ZONEMAP and BLOOMFILTER ship keys too, not zone statistics: the zones are computed by the
driver from them.

INVERTED: pylance 14's distributed build. Each task tokenizes its fragment and stages one
partition of the index under ``_indices/<uuid>/staging/``
(:func:`lance_ops.ops.scalar_index.create_partial_scalar_index`, as
``create_scalar_index(..., fragment_ids=[f], index_uuid=uuid)``); the driver merges the staged
partitions into the index files (as ``merge_index_metadata``; the same files as the in-process
build) and commits. If a task or the merge fails, the directory is removed.

Given the same parameters (and ``seed``) the files equal those of the in-process build. The
driver commits one ``CreateIndex`` over every fragment of the pinned version; a failed task fails
the job before anything is written or committed.
"""

from __future__ import annotations

import argparse
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import SparkSession

from jobs.common import (
    commit_options,
    driver_log,
    latest,
    on_executors,
    open_version,
    run_main,
    storage_option,
)
from lance_ops.ops.commit import commit
from lance_ops.ops.engine import (
    BUILDABLE_SCALAR_TYPES,
    CreateIndex,
    DataFragment,
    ExternalManifestStore,
    IndexMetadata,
    IndexWriter,
    RemapResult,
    ScalarBuild,
    TrainedIvf,
    VersionFiles,
    as_matrix,
    column_rows,
    encode_ivf,
    is_multivector_type,
    prepare,
    remove_index_directory,
    scalar_rows,
    take,
    take_columns,
    train_ivf,
    vector_rows,
    write_ivf,
    write_scalar_index,
)
from lance_ops.ops.scalar_index import create_partial_scalar_index, merge_staged_inverted, plan_scalar_index
from lance_ops.ops.vector_index import VectorIndexPlan, commit_vector_index, plan_vector_index
from lance_ops.progress import ProgressCallback, Tracker

__all__ = ["IndexBuildResult", "create_index", "main"]

CREATE_INDEX = "create_index"
INVERTED = "INVERTED"


@dataclass(frozen=True)
class IndexBuildResult:
    """What a build committed: the index name and type, its uuid, the new version, the fragments
    indexed and the number of Spark tasks."""

    name: str
    index_type: str
    uuid: str
    version: int
    fragment_ids: tuple[int, ...]
    tasks: int


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue())


def _table(payload: bytes) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(payload)).read_all()


def _encoded(model: TrainedIvf, values: pa.Array, row_ids: np.ndarray) -> pa.Table:
    """``_rowid`` / ``partition`` / ``code`` of the indexable rows among ``values``."""
    matrix = as_matrix(values, model.params.column)
    keep = np.isfinite(matrix).all(axis=1)
    partition, codes = encode_ivf(model, prepare(model.params, matrix[keep]))
    flat = pa.array(np.ascontiguousarray(codes).reshape(-1))
    return pa.table(
        {
            "_rowid": pa.array(np.asarray(row_ids, np.uint64)[keep]),
            "partition": pa.array(partition),
            "code": pa.FixedSizeListArray.from_arrays(flat, codes.shape[1]),
        }
    )


def _codes(table: pa.Table) -> np.ndarray:
    column = table.column("code").combine_chunks()
    flat = np.asarray(column.flatten())
    return flat.reshape(len(column), column.type.list_size)


def _field_type(files: VersionFiles, column: str) -> pa.DataType:
    parts = column.split(".")
    field = files.manifest.schema.to_arrow().field(parts[0])
    for part in parts[1:]:
        field = field.type.field(part)
    return field.type


def _column(table: pa.Table, column: str) -> pa.Array:
    parts = column.split(".")
    values = table.column(parts[0]).combine_chunks()
    for part in parts[1:]:
        values = values.field(part)
    return values


def _fragment_rows(
    uri: str, version: int, storage_options: dict[str, str], fragment_id: int
) -> tuple[VersionFiles, list[DataFragment]]:
    """On an executor: the pinned version and the one fragment of a task."""
    pinned = open_version(uri, version, storage_options)
    return pinned, [f for f in pinned.manifest.fragments if f.id == fragment_id]


def _build_scalar(
    spark: SparkSession,
    uri: str,
    files: VersionFiles,
    storage_options: dict[str, str],
    build: ScalarBuild,
    tracker: Tracker,
) -> IndexMetadata:
    version = files.manifest.version

    def task(fragment_id: int) -> bytes:
        pinned, fragment = _fragment_rows(uri, version, storage_options, fragment_id)
        return _ipc(scalar_rows(pinned.storage, pinned.manifest, fragment, build))

    fragment_ids = [f.id for f in files.manifest.fragments]
    tables = [_table(p) for p in on_executors(spark, fragment_ids, task, tracker)]
    rows = pa.concat_tables(tables) if tables else scalar_rows(files.storage, files.manifest, [], build)
    return write_scalar_index(files.storage, files.manifest, build, rows)


def _build_inverted(
    spark: SparkSession,
    uri: str,
    files: VersionFiles,
    storage_options: dict[str, str],
    build: ScalarBuild,
    params: Mapping[str, Any],
    tracker: Tracker,
) -> IndexMetadata:
    version, column, name = files.manifest.version, build.column, build.template.name
    index_uuid = str(uuid.uuid4())

    def task(fragment_id: int) -> None:
        pinned = open_version(uri, version, storage_options)
        create_partial_scalar_index(pinned, column, INVERTED, name, [fragment_id], index_uuid, params)

    try:
        on_executors(spark, [f.id for f in files.manifest.fragments], task, tracker)
        return merge_staged_inverted(files, build, index_uuid)
    except BaseException:
        remove_index_directory(files.storage, uuid.UUID(index_uuid).bytes)
        raise


def _build_vector(
    spark: SparkSession,
    uri: str,
    files: VersionFiles,
    storage_options: dict[str, str],
    plan: VectorIndexPlan,
    tracker: Tracker,
) -> RemapResult:
    column, version = plan.params.column, files.manifest.version
    vector_type = _field_type(files, column)
    if is_multivector_type(vector_type):  # sampled by rows, each giving all its vectors
        vector_type = vector_type.value_type
    columns = take_columns(files, [column.split(".")[0]])

    def fetch(positions: np.ndarray) -> np.ndarray:
        values = _column(take(files, positions, columns), column)
        return as_matrix(vector_rows(values, np.zeros(len(values), np.uint64))[0], column)

    model = train_ivf(plan.params, int(sum(files.live_counts)), vector_type.list_size, fetch)

    def task(fragment_id: int) -> bytes:
        pinned, fragment = _fragment_rows(uri, version, storage_options, fragment_id)
        values, ids = vector_rows(*column_rows(pinned.storage, pinned.manifest, fragment, column, "_rowid"))
        return _ipc(_encoded(model, values, ids))

    fragment_ids = [f.id for f in files.manifest.fragments]
    tables = [_table(p) for p in on_executors(spark, fragment_ids, task, tracker)]
    encoded = (
        pa.concat_tables(tables)
        if tables
        else _encoded(model, pa.array([], vector_type), np.empty(0, np.uint64))
    )
    return write_ivf(
        IndexWriter(files.storage),
        model,
        np.asarray(encoded.column("_rowid"), np.uint64),
        np.asarray(encoded.column("partition"), np.uint32),
        _codes(encoded),
    )


def create_index(
    spark: SparkSession,
    uri: str,
    column: str,
    index_type: str,
    *,
    name: str | None = None,
    replace: bool | None = None,
    storage_options: Mapping[str, str] | None = None,
    commit_message: str | None = None,
    transaction_properties: Mapping[str, str] | None = None,
    manifest_store: ExternalManifestStore | None = None,
    progress: ProgressCallback | None = None,
    **params: Any,
) -> IndexBuildResult:
    """Build a ``index_type`` index of ``column`` of the latest version of ``uri`` on Spark and
    commit it. ``params`` are those of ``create_index`` (vector: ``metric``, ``num_partitions``,
    ``num_sub_vectors``, ``sample_rate``, ``max_iters``, ``seed`` ...) or of
    ``create_scalar_index`` (ZONEMAP ``rows_per_zone``, INVERTED tokenizer keywords);
    ``replace`` defaults as there (True for a scalar index, False for a vector index).
    ``progress`` hears of every finished task."""
    files = latest(uri, storage_options, manifest_store)
    store_options = dict(storage_options or {})
    fragments = list(files.manifest.fragments)
    kind = str(index_type).upper()
    options = commit_options(storage_options, commit_message, transaction_properties, manifest_store)
    if kind in BUILDABLE_SCALAR_TYPES:
        build, existing = plan_scalar_index(
            files, column, kind, name, True if replace is None else replace, params
        )
        tracker = Tracker.start(progress, CREATE_INDEX, len(fragments), "tasks")
        if kind == INVERTED and fragments:
            index = _build_inverted(spark, uri, files, store_options, build, params, tracker)
        else:
            index = _build_scalar(spark, uri, files, store_options, build, tracker)
        manifest, _ = commit(files.storage, CreateIndex((index,), existing), options)
        index_name = build.template.name
    else:
        plan = plan_vector_index(files, column, kind, name=name, replace=bool(replace), **params)
        tracker = Tracker.start(progress, CREATE_INDEX, len(fragments), "tasks")
        result = _build_vector(spark, uri, files, store_options, plan, tracker)
        manifest, _ = commit_vector_index(files, plan, fragments, result, options)
        index_name = plan.name
    created = next(i for i in manifest.indices if i.name == index_name)
    return IndexBuildResult(
        index_name,
        kind,
        str(uuid.UUID(bytes=created.uuid)),
        manifest.version,
        tuple(f.id for f in fragments),
        len(fragments),
    )


def _parameter(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` of ``--param``; the value is read as JSON when it parses (numbers, booleans),
    else kept as text (e.g. ``metric=cosine``)."""
    key, value = storage_option(text)
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def _run(spark: SparkSession, args: argparse.Namespace) -> dict[str, Any]:
    result = create_index(
        spark,
        args.uri,
        args.column,
        args.index_type,
        name=args.name,
        replace=args.replace,
        storage_options=args.storage_options,
        progress=driver_log,
        **dict(args.params),
    )
    return asdict(result)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--column", required=True)
        parser.add_argument(
            "--index-type",
            required=True,
            help="BTREE, BITMAP, LABEL_LIST, ZONEMAP, BLOOMFILTER, NGRAM, INVERTED, IVF_*",
        )
        parser.add_argument("--name", default=None)
        parser.add_argument(
            "--replace",
            action=argparse.BooleanOptionalAction,
            default=None,
            help="replace an index of that name",
        )
        parser.add_argument(
            "--param",
            dest="params",
            action="append",
            type=_parameter,
            default=[],
            metavar="KEY=VALUE",
            help="build parameter, e.g. num_partitions=256 (repeatable)",
        )

    result: dict[str, Any] = run_main("python -m jobs.create_index", argv, arguments, _run)
    return result


if __name__ == "__main__":
    main()
