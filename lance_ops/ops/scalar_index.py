"""``create_scalar_index``: build a BTREE / BITMAP / LABEL_LIST / ZONEMAP / NGRAM / INVERTED index
over every fragment and commit it as pylance 14 does (one ``CreateIndex``; ``replace`` removes the old
segments).

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
from lance_ops.index.build_scalar import (
    BUILDABLE_SCALAR_TYPES,
    ScalarBuild,
    plan_scalar_build,
    scalar_rows,
    write_scalar_index,
)
from lance_ops.index.types import index_type_of
from lance_ops.ops.commit import CommitOptions, commit
from lance_ops.table.manifest import IndexMetadata, Manifest
from lance_ops.table.transaction import CreateIndex, Transaction

__all__ = ["create_scalar_index", "plan_scalar_index"]

_PYLANCE_SCALAR = ("BTREE", "BITMAP", "NGRAM", "ZONEMAP", "LABEL_LIST", "INVERTED", "BLOOMFILTER")


def _segments(manifest: Manifest, name: str) -> list[IndexMetadata]:
    return [i for i in manifest.indices if i.name == name]


def _default_name(files: VersionFiles, column: str, kind: str) -> str:
    base = f"{column}_idx"  # pylance 14 keeps a struct path's dots (``meta.lang_idx``)
    n = 1
    while True:
        name = base if n == 1 else f"{base}_{n}"
        found = _segments(files.manifest, name)
        if not found or index_type_of(found[0], files.storage) == kind:
            return name
        n += 1


def plan_scalar_index(
    files: VersionFiles,
    column: str,
    index_type: str,
    name: str | None,
    replace: bool,
    params: Mapping[str, Any] | None = None,
) -> tuple[ScalarBuild, tuple[IndexMetadata, ...]]:
    """Check a ``create_scalar_index`` call: the build, and the segments its commit replaces."""
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
    existing = tuple(_segments(files.manifest, name))
    if existing and not replace:
        raise IndexExistsError(
            f"Index name '{name}' already exists, please specify a different name or use replace=True"
        )
    build = plan_scalar_build(files.manifest, column, field.id, arrow.type, kind, name, params)
    return build, existing


def create_scalar_index(
    files: VersionFiles,
    column: str,
    index_type: str,
    name: str | None,
    replace: bool,
    options: CommitOptions,
    params: Mapping[str, Any] | None = None,
) -> tuple[Manifest, Transaction]:
    build, existing = plan_scalar_index(files, column, index_type, name, replace, params)
    manifest = files.manifest
    rows = scalar_rows(files.storage, manifest, manifest.fragments, build)
    index = write_scalar_index(files.storage, manifest, build, rows)
    return commit(files.storage, CreateIndex((index,), existing), options)
