"""lance-ops: a pure-Python implementation of the Lance columnar format (files and datasets).

Public dataset API (pylance's names): :func:`write_dataset`, :func:`dataset`,
:class:`LanceDataset`, :class:`LanceScanner`, :class:`LanceFragment`, :class:`LanceOperation`,
:class:`FragmentMetadata`, :func:`batch_udf`; Lance schemas (field ids) through :mod:`lance_ops.schema`;
data files through :mod:`lance_ops.file`, executor-side fragment writes through :mod:`lance_ops.fragment`.
"""

from __future__ import annotations

from lance_ops import _malloc
from lance_ops.dataset import BatchUDF, LanceDataset, LanceOperation, batch_udf, dataset, write_dataset
from lance_ops.dataset_fragment import LanceFragment
from lance_ops.fragment import FragmentMetadata
from lance_ops.ops.cleanup import CleanupStats
from lance_ops.scanner import LanceScanner
from lance_ops.table.manifest_store import SqliteManifestStore

__version__ = "0.1.0"

_malloc.tune()

__all__ = [
    "BatchUDF",
    "CleanupStats",
    "FragmentMetadata",
    "LanceDataset",
    "LanceFragment",
    "LanceOperation",
    "LanceScanner",
    "SqliteManifestStore",
    "__version__",
    "batch_udf",
    "dataset",
    "write_dataset",
]
