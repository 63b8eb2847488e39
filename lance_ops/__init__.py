"""lance-ops: a pure-Python implementation of the Lance columnar format (files and datasets).

Public dataset API (pylance's names): :func:`write_dataset`, :func:`dataset`,
:class:`LanceDataset`, :class:`LanceScanner`, :class:`LanceFragment`, :class:`LanceOperation`,
:class:`FragmentMetadata`, :func:`batch_udf`; Lance schemas (field ids) through :mod:`lance_ops.schema`;
data files through :mod:`lance_ops.file`, executor-side fragment writes through :mod:`lance_ops.fragment`.

The names are imported on first use (PEP 562): ``import lance_ops.cli`` or ``lance_ops.errors``
must not load the dataset layer (pyarrow.dataset, pandas, sqlglot), or ``lance-ops --help`` takes
a second.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

from lance_ops import _malloc

if TYPE_CHECKING:
    from lance_ops.blob import BlobFile
    from lance_ops.dataset import BatchUDF, LanceDataset, LanceOperation, batch_udf, dataset, write_dataset
    from lance_ops.dataset_fragment import LanceFragment
    from lance_ops.fragment import FragmentMetadata
    from lance_ops.ops.cleanup import CleanupStats
    from lance_ops.ops.commit import CommitOptions
    from lance_ops.ops.compaction import CompactionOptions
    from lance_ops.scanner import LanceScanner
    from lance_ops.table.manifest_store import SqliteManifestStore
    from lance_ops.table.transaction import Transaction

__version__ = "0.1.0"

_malloc.tune()

# Public name -> the module defining it.
_EXPORTS = {
    "BlobFile": "lance_ops.blob",
    "BatchUDF": "lance_ops.dataset",
    "LanceDataset": "lance_ops.dataset",
    "LanceOperation": "lance_ops.dataset",
    "batch_udf": "lance_ops.dataset",
    "dataset": "lance_ops.dataset",
    "write_dataset": "lance_ops.dataset",
    "LanceFragment": "lance_ops.dataset_fragment",
    "FragmentMetadata": "lance_ops.fragment",
    "CleanupStats": "lance_ops.ops.cleanup",
    "CommitOptions": "lance_ops.ops.commit",
    "CompactionOptions": "lance_ops.ops.compaction",
    "LanceScanner": "lance_ops.scanner",
    "ScanStatistics": "lance_ops.scan_stats",
    "SqliteManifestStore": "lance_ops.table.manifest_store",
    "Transaction": "lance_ops.table.transaction",
}

__all__ = [
    "BatchUDF",
    "BlobFile",
    "CleanupStats",
    "CommitOptions",
    "CompactionOptions",
    "FragmentMetadata",
    "LanceDataset",
    "LanceFragment",
    "LanceOperation",
    "LanceScanner",
    "ScanStatistics",
    "SqliteManifestStore",
    "Transaction",
    "__version__",
    "batch_udf",
    "dataset",
    "write_dataset",
]


def _export(name: str) -> Any:
    return getattr(importlib.import_module(_EXPORTS[name]), name)


class _Package(types.ModuleType):
    """``lance_ops.dataset`` is both a function and a submodule: importing the submodule sets the
    package attribute to the module, so the function is a data descriptor that ignores that."""

    @property
    def dataset(self) -> Any:
        return _export("dataset")

    @dataset.setter
    def dataset(self, module: types.ModuleType) -> None:
        """The import system recording the submodule: the function stays the public name."""


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = _export(name)
    globals()[name] = value
    return value
