"""What the engines and orchestrators above the library use below the dataset API, in one place.

The Spark jobs (``jobs/``), the Dagster assets (``assets/``) and the Airflow provider
(``lance_ops.airflow``) reach the library through :mod:`lance_ops` (the dataset API), the
operation modules of :mod:`lance_ops.ops`, and this module only (``tests/test_layers.py`` enforces
it). A Spark data source does work the dataset API keeps inside one process: it writes fragments on
executors and commits them on the driver, prunes fragments by a pushed predicate, opens a pinned
version per task and carries an encoding plan or statistics sketches between executors (lance-spark
uses pylance's ``LanceFragment`` / ``FragmentMetadata`` / ``LanceOperation`` the same way). Those
pieces are named here, so that the table, fragment, query and encoding layers keep their freedom to
move things behind them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from lance_ops.encoding.plan import CONFIG_KEY as ENCODING_PLAN_KEY
from lance_ops.encoding.plan import EncodingPlan
from lance_ops.encoding.sketch import DistinctSketch
from lance_ops.errors import UnsupportedFeatureError
from lance_ops.file.parallel import set_worker_threads
from lance_ops.fragment import FragmentMetadata, write_fragments
from lance_ops.fragment.conform import Conform, ConformPlan, check_fill_missing
from lance_ops.fragment.options import DEFAULT_BATCH_SIZE, ScanOptions, WriteOptions
from lance_ops.fragment.pruning import row_mask
from lance_ops.fragment.reader import ROW_ADDRESS, ROW_ID, VersionFiles
from lance_ops.fragment.scan import take, take_columns
from lance_ops.index.build_scalar import BUILDABLE_SCALAR_TYPES, ScalarBuild, scalar_rows, write_scalar_index
from lance_ops.index.build_vector import (
    TrainedIvf,
    as_matrix,
    encode_ivf,
    is_multivector_type,
    prepare,
    train_ivf,
    vector_rows,
    write_ivf,
)
from lance_ops.index.files import IndexWriter, RemapResult, remove_index_directory
from lance_ops.index.optimize import column_rows
from lance_ops.io import object_store
from lance_ops.io.context import StorageContext
from lance_ops.io.local import LocalStore
from lance_ops.query.predicate import Predicate, parse_predicate
from lance_ops.table.manifest import (
    SUPPORTED_READER_FLAGS,
    SUPPORTED_WRITER_FLAGS,
    DataFile,
    DataFragment,
    IndexMetadata,
    Manifest,
)
from lance_ops.table.manifest_store import ExternalManifestStore, SqliteManifestStore
from lance_ops.table.schema import LanceSchema
from lance_ops.table.statistics import FragmentStatistics
from lance_ops.table.transaction import CreateIndex, Operation, RewrittenIndex

__all__ = [
    "BUILDABLE_SCALAR_TYPES",
    "DEFAULT_BATCH_SIZE",
    "ENCODING_PLAN_KEY",
    "ROW_ADDRESS",
    "ROW_ID",
    "SUPPORTED_READER_FLAGS",
    "SUPPORTED_WRITER_FLAGS",
    "as_matrix",
    "is_multivector_type",
    "vector_rows",
    "check_fill_missing",
    "column_rows",
    "Conform",
    "ConformPlan",
    "CreateIndex",
    "DataFile",
    "DataFragment",
    "DistinctSketch",
    "encode_ivf",
    "EncodingPlan",
    "ExternalManifestStore",
    "FragmentMetadata",
    "FragmentStatistics",
    "IndexMetadata",
    "IndexWriter",
    "LanceSchema",
    "Manifest",
    "Operation",
    "parse_predicate",
    "Predicate",
    "prepare",
    "RemapResult",
    "remove_index_directory",
    "RewrittenIndex",
    "row_mask",
    "scalar_rows",
    "ScalarBuild",
    "ScanOptions",
    "set_worker_threads",
    "source_filesystem",
    "SqliteManifestStore",
    "StorageContext",
    "take",
    "take_columns",
    "train_ivf",
    "TrainedIvf",
    "VersionFiles",
    "write_fragments",
    "write_ivf",
    "write_scalar_index",
    "WriteOptions",
]


def source_filesystem(
    uri: str | os.PathLike[str], storage_options: Mapping[str, str] | None = None
) -> tuple[Any, str]:
    """The filesystem pyarrow reads files below ``uri`` with, and ``uri``'s path on it, reached with
    ``storage_options`` as a dataset there would be (pylance's keys for ``s3://``): ``None`` (pyarrow's
    local filesystem) and an absolute path for a local one, the fsspec filesystem otherwise."""
    store, path = object_store(uri, dict(storage_options) if storage_options else None)
    if isinstance(store, LocalStore):
        return None, path
    fs = getattr(store, "fs", None)
    if fs is None:
        raise UnsupportedFeatureError(f"files at {os.fspath(uri)!r} cannot be read with pyarrow")
    return fs, path
