"""The Lance table format: manifests, transactions, commits.

Modules, bottom up:

* :mod:`~lance_ops.table.naming` — file names in a dataset directory, manifest naming schemes;
* :mod:`~lance_ops.table.schema` — LanceSchema / LanceField, the dataset schema as domain objects;
* :mod:`~lance_ops.table.manifest` — Manifest, DataFragment, DataFile, DeletionFile, ... as frozen
  dataclasses with ``from_pb`` / ``to_pb``, feature flags, and the manifest file framing;
* :mod:`~lance_ops.table.transaction` — Transaction and one dataclass per operation;
* :mod:`~lance_ops.table.apply` — ``apply_operation`` (single dispatch) and ``build_manifest``;
* :mod:`~lance_ops.table.conflicts` — the conflict matrix;
* :mod:`~lance_ops.table.manifest_store` — the external manifest store protocol and its SQLite store;
* :mod:`~lance_ops.table.commit` — commit handlers, the commit loop, version listing and loading;
* :mod:`~lance_ops.table.deletion`, :mod:`~lance_ops.table.rowids` — deletion vectors and
  stable row-id sequences.
"""
