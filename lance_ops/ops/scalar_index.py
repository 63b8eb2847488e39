"""``create_scalar_index``: build a BTREE / BITMAP / LABEL_LIST / ZONEMAP / NGRAM / INVERTED index
over every fragment and commit it as pylance 14 does (one ``CreateIndex``; ``replace`` removes the old
segments).

Names as pylance 14 picks them: ``name=None`` is ``<column>_idx``, or, when that name holds an index
of another type, the first free ``<column>_idx_<n>`` (n = 2, 3, ...) or one of the same type,
which is replaced. An explicit name that exists is replaced, or with ``replace=False`` refused
with :class:`~lance_ops.errors.IndexExistsError`. Nothing is committed on any error.
"""

from __future__ import annotations

import uuid as uuid_module
from collections.abc import Mapping, Sequence
from typing import Any

from lance_ops.errors import (
    IndexExistsError,
    InvalidArgumentError,
    UnsupportedFeatureError,
    UnsupportedIndexTypeError,
)
from lance_ops.fragment.reader import VersionFiles
from lance_ops.index.build_inverted import (
    merge_inverted_partials,
    partial_partition_id,
    write_inverted_partial,
)
from lance_ops.index.build_scalar import (
    BUILDABLE_SCALAR_TYPES,
    ScalarBuild,
    index_entry,
    plan_scalar_build,
    scalar_rows,
    write_scalar_index,
)
from lance_ops.index.optimize import column_rows
from lance_ops.index.types import INVERTED, index_type_of
from lance_ops.ops.commit import CommitOptions, commit
from lance_ops.table.manifest import IndexMetadata, Manifest
from lance_ops.table.transaction import CreateIndex, Transaction

__all__ = [
    "DISTRIBUTED_MERGE_TYPES",
    "create_partial_scalar_index",
    "create_scalar_index",
    "merge_index_metadata",
    "merge_staged_inverted",
    "plan_scalar_index",
]

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
    """Build and commit the index (see the module). ``train=False`` (a keyword among ``params``, as
    pylance's) commits it empty: its files hold no row and it covers no fragment, the scans read
    every fragment as unindexed until ``optimize_indices`` adds them; ``progress_callback`` is
    accepted and not called."""
    params = dict(params or {})
    train = params.pop("train", True)
    params.pop("progress_callback", None)
    build, existing = plan_scalar_index(files, column, index_type, name, replace, params)
    manifest = files.manifest
    fragments = manifest.fragments if train else []
    rows = scalar_rows(files.storage, manifest, fragments, build)
    index = write_scalar_index(files.storage, manifest, build, rows, fragments)
    return commit(files.storage, CreateIndex((index,), existing), options)


# pylance 14's SupportedDistributedIndices: the types ``merge_index_metadata`` takes. lance_ops
# merges INVERTED partials; pylance 14 itself stages none of the others through
# ``create_scalar_index`` (BTREE and the vector types go through ``create_index_uncommitted``).
DISTRIBUTED_MERGE_TYPES = ("BTREE", "INVERTED", "IVF_FLAT", "IVF_PQ", "IVF_SQ", "VECTOR")


def _uuid_bytes(index_uuid: str) -> bytes:
    try:
        return uuid_module.UUID(str(index_uuid)).bytes
    except ValueError as exc:
        raise InvalidArgumentError(f"index_uuid must be a UUID, got {index_uuid!r}") from exc


def create_partial_scalar_index(
    files: VersionFiles,
    column: str,
    index_type: str,
    name: str | None,
    fragment_ids: Sequence[int],
    index_uuid: str | None,
    params: Mapping[str, Any] | None = None,
) -> str:
    """One worker's part of a distributed build (``create_scalar_index(..., fragment_ids=,
    index_uuid=)``): stage the index of the rows of ``fragment_ids`` under ``_indices/<index_uuid>``
    (a new uuid when None; returned) and commit nothing. INVERTED only, as in pylance 14, which
    refuses the other scalar types with a ``ValueError`` naming ``create_index_uncommitted``."""
    build, _ = plan_scalar_index(files, column, index_type, name, True, params)
    if build.kind != INVERTED:
        raise InvalidArgumentError(
            f"{build.kind} distributed indexing uses create_index_uncommitted(..., "
            f'index_type="{build.kind}", fragment_ids=...)'
        )
    ids = [int(i) for i in fragment_ids]
    if not ids:
        raise InvalidArgumentError("fragment_ids must name at least one fragment")
    known = {f.id for f in files.manifest.fragments}
    missing = [i for i in ids if i not in known]
    if missing:
        raise InvalidArgumentError(f"No fragment with id {missing[0]}")
    wanted = set(ids)  # read in the dataset's fragment order, as pylance 14 does
    fragments = [f for f in files.manifest.fragments if f.id in wanted]
    target = _uuid_bytes(index_uuid) if index_uuid is not None else uuid_module.uuid4().bytes
    values, row_ids = column_rows(files.storage, files.manifest, fragments, build.column, "_rowid")
    assert build.tokenizer is not None
    write_inverted_partial(files.storage, target, partial_partition_id(ids), values, row_ids, build.tokenizer)
    return str(uuid_module.UUID(bytes=target))


def merge_index_metadata(files: VersionFiles, index_uuid: str, index_type: str) -> None:
    """Merge the partials staged for ``index_uuid`` into one index's files (pylance's
    ``merge_index_metadata``); commits nothing: a ``CreateIndex`` naming ``index_uuid`` publishes
    it. A type outside :data:`DISTRIBUTED_MERGE_TYPES` is refused as pylance 14 refuses it."""
    kind = str(index_type).upper()
    if kind not in DISTRIBUTED_MERGE_TYPES:
        raise UnsupportedFeatureError(
            f"Only {', '.join(sorted(DISTRIBUTED_MERGE_TYPES))} are supported, received {index_type}"
        )
    if kind != INVERTED:
        raise UnsupportedFeatureError(f"lance_ops merges staged INVERTED partials only, not {kind}")
    merge_inverted_partials(files.storage, _uuid_bytes(index_uuid))


def merge_staged_inverted(files: VersionFiles, build: ScalarBuild, index_uuid: str) -> IndexMetadata:
    """The driver's side of a distributed INVERTED build (:mod:`jobs.create_index`): merge what the
    workers staged for ``index_uuid`` (:func:`create_partial_scalar_index`, one call per fragment)
    and return the manifest entry over every fragment of ``files``, as the in-process build's."""
    result = merge_inverted_partials(files.storage, _uuid_bytes(index_uuid), build.template)
    if result is None:
        raise InvalidArgumentError(f"index {index_uuid}: nothing was staged to merge")
    return index_entry(files.manifest, build.template, result)
