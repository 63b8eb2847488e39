"""``create_scalar_index``: build a BTREE / BITMAP / LABEL_LIST / ZONEMAP index over every fragment
and commit it as pylance 14 does (one ``CreateIndex``; ``replace`` removes the old segments).

Names as pylance 14 picks them: ``name=None`` is ``<column>_idx``, or, when that name holds an index
of another type, the first free ``<column>_idx_<n>`` (n = 2, 3, ...) or one of the same type,
which is replaced. An explicit name that exists is replaced, or with ``replace=False`` refused
with :class:`~lance_ops.errors.IndexExistsError`. Nothing is committed on any error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lance_ops.errors import IndexExistsError, UnsupportedIndexTypeError
from lance_ops.fragment.reader import VersionFiles
from lance_ops.index.build_scalar import BUILDABLE_SCALAR_TYPES, build_scalar_index
from lance_ops.index.types import index_type_of
from lance_ops.ops.commit import CommitOptions, commit
from lance_ops.table.manifest import IndexMetadata, Manifest
from lance_ops.table.transaction import CreateIndex, Transaction

__all__ = ["create_scalar_index"]

_PYLANCE_SCALAR = ("BTREE", "BITMAP", "NGRAM", "ZONEMAP", "LABEL_LIST", "INVERTED", "BLOOMFILTER")


def _segments(manifest: Manifest, name: str) -> list[IndexMetadata]:
    return [i for i in manifest.indices if i.name == name]


def _default_name(files: VersionFiles, column: str, kind: str) -> str:
    base = f"{column.replace('.', '_')}_idx"
    n = 1
    while True:
        name = base if n == 1 else f"{base}_{n}"
        found = _segments(files.manifest, name)
        if not found or index_type_of(found[0], files.storage) == kind:
            return name
        n += 1


def create_scalar_index(
    files: VersionFiles,
    column: str,
    index_type: str,
    name: str | None,
    replace: bool,
    options: CommitOptions,
    params: Mapping[str, Any] | None = None,
) -> tuple[Manifest, Transaction]:
    kind = str(index_type).upper()
    if kind not in BUILDABLE_SCALAR_TYPES:
        if kind in _PYLANCE_SCALAR:
            raise UnsupportedIndexTypeError(f"lance_ops does not build {kind} indices yet")
        supported = ", ".join(BUILDABLE_SCALAR_TYPES)
        raise UnsupportedIndexTypeError(
            f"Only {supported} are supported for scalar columns. Received {index_type}"
        )
    schema = files.manifest.schema
    field = schema.field_at(column)  # FieldNotFoundError when there is none
    parts = column.split(".")
    arrow = schema.to_arrow().field(parts[0])
    for part in parts[1:]:
        arrow = arrow.type.field(part)
    if name is None:
        name = _default_name(files, column, kind)
    existing = _segments(files.manifest, name)
    if existing and not replace:
        raise IndexExistsError(
            f"Index name '{name}' already exists, please specify a different name or use replace=True"
        )
    index = build_scalar_index(
        files.storage, files.manifest, column, field.id, arrow.type, kind, name, params
    )
    return commit(files.storage, CreateIndex((index,), tuple(existing)), options)
