""":class:`DatasetHandle`: what a :class:`~lance_ops.dataset.LanceDataset` lends the objects built on it.

``LanceFragment``, ``LanceScanner``, ``ds.stats`` and ``ds.optimize`` read the dataset's version and
commit operations in its name; they get this small frozen interface (``ds.handle``, internal, not
pylance API) instead of reaching into the dataset's private members:

* ``files``: the version's :class:`~lance_ops.fragment.VersionFiles` (fragment readers, schema,
  open file readers), shared with the dataset;
* ``commit_options(transaction_properties, commit)``: how the dataset's operations commit (its
  storage options and manifest store, with a caller's :class:`~lance_ops.CommitOptions`);
* ``adopt(manifest, transaction)``: make the dataset the version one of our commits just wrote.

A handle describes one version: take a fresh one from ``ds.handle`` after the dataset changed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from lance_ops.fragment import VersionFiles
from lance_ops.ops.commit import CommitOptions
from lance_ops.table.manifest import Manifest
from lance_ops.table.transaction import Transaction


class CommitOptionsFor(Protocol):
    """The dataset's commit options with ``transaction_properties`` and ``commit`` joined in."""

    def __call__(
        self, transaction_properties: Mapping[str, str] | None = None, commit: CommitOptions | None = None
    ) -> CommitOptions: ...


@dataclass(frozen=True)
class DatasetHandle:
    """One dataset version's files, its commit options and the way back to the dataset."""

    files: VersionFiles
    commit_options: CommitOptionsFor
    adopt: Callable[[Manifest, Transaction], None]
