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

from lance_ops.encoding.plan import CONFIG_KEY as ENCODING_PLAN_KEY
from lance_ops.encoding.plan import EncodingPlan
from lance_ops.encoding.sketch import DistinctSketch
from lance_ops.fragment import FragmentMetadata, write_fragments
from lance_ops.fragment.conform import Conform, ConformPlan, check_fill_missing
from lance_ops.fragment.options import ScanOptions, WriteOptions
from lance_ops.fragment.pruning import row_mask
from lance_ops.fragment.reader import ROW_ADDRESS, ROW_ID, VersionFiles
from lance_ops.query.predicate import Predicate, parse_predicate
from lance_ops.table.manifest import (
    SUPPORTED_READER_FLAGS,
    SUPPORTED_WRITER_FLAGS,
    DataFile,
    DataFragment,
    Manifest,
)
from lance_ops.table.manifest_store import ExternalManifestStore, SqliteManifestStore
from lance_ops.table.schema import LanceSchema
from lance_ops.table.statistics import FragmentStatistics
from lance_ops.table.transaction import Operation

__all__ = [
    "ENCODING_PLAN_KEY",
    "ROW_ADDRESS",
    "ROW_ID",
    "SUPPORTED_READER_FLAGS",
    "SUPPORTED_WRITER_FLAGS",
    "Conform",
    "ConformPlan",
    "DataFile",
    "DataFragment",
    "DistinctSketch",
    "EncodingPlan",
    "ExternalManifestStore",
    "FragmentMetadata",
    "FragmentStatistics",
    "LanceSchema",
    "Manifest",
    "Operation",
    "Predicate",
    "ScanOptions",
    "SqliteManifestStore",
    "VersionFiles",
    "WriteOptions",
    "check_fill_missing",
    "parse_predicate",
    "row_mask",
    "write_fragments",
]
