"""Conflict resolution between our transaction and one committed concurrently.

Row = our operation, column = theirs (committed at a version newer than our ``read_version``).
``ok`` compatible, ``R`` :class:`RetryableCommitConflictError` (re-read and redo the operation),
``I`` :class:`CommitConflictError` (incompatible). Delete and Update share a row and a column.
Conditions are evaluated on the two operations (fragment ids touched, config keys, index fields).

==================  ====  ====  ====  ====  ====  ====  ====  ====  ====  ====  ====  ====
ours \\ theirs       App   Del   Ovw   Rst   Idx   Rwr   Mrg   Prj   Rsv   Cfg   DRp   Cln
==================  ====  ====  ====  ====  ====  ====  ====  ====  ====  ====  ====  ====
Append              ok    ok    I     I     ok    ok    R1    ok    ok    ok    ok    ok
Delete / Update     ok    R2    I     I     ok    R2    R     ok    ok    ok    R2    ok
Overwrite           ok    ok    R     ok    ok    ok    ok    ok    ok    I3    ok    ok
Restore             ok    ok    ok    ok    ok    ok    ok    ok    ok    ok    ok    ok
CreateIndex         ok    ok    I     I     ok    R4    ok    ok    ok    ok    R5    ok
Rewrite             ok    R2    I     I     R4    R2    R     ok    ok    ok    R2    ok
Merge               R     R     I     I     ok    R     R     I     ok    ok    R     ok
Project             ok    ok    I     I     ok    ok    R     R     ok    ok    ok    ok
ReserveFragments    ok    ok    I     I     ok    ok    ok    ok    ok    ok    ok    ok
UpdateConfig        ok    ok    I6    ok    ok    ok    ok    ok    ok    I7    ok    ok
DataReplacement     ok    ok    I     I     R5    R2    ok    ok    ok    ok    R8    ok
Clone               ok    ok    ok    ok    ok    ok    ok    ok    ok    ok    ok    ok
UpdateBases         ok    ok    ok    ok    ok    ok    ok    ok    ok    ok    ok    I9
==================  ====  ====  ====  ====  ====  ====  ====  ====  ====  ====  ====  ====

Columns: Append, Delete/Update, Overwrite, Restore, CreateIndex, Rewrite, Merge, Project,
ReserveFragments, UpdateConfig, DataReplacement, Clone/UpdateBases (UpdateBases against
UpdateBases is I9).

Conditions on a numbered cell (otherwise ``ok``):

1. unless their Merge sets ``preserves_nullability``;
2. only if both touch a common fragment id; a Delete over a Delete is not retried but rebased by the
   commit loop (deletion vectors unioned, :func:`lance_ops.table.deletion.rebase_delete`), as
   pylance's ``delete`` does, and so is a Rewrite over a Delete or an Update when row ids are
   stable (deletions carried into the new fragments, :func:`lance_ops.table.rewrite_rebase.carry_delete`),
   and an Update over a Rewrite (its deletions followed into the compacted fragments,
   :func:`lance_ops.table.rewrite_rebase.follow_rewrite`);
3. if their config changes touch a key we upsert;
4. if the rewritten fragments are covered by the index (its fragment bitmap);
5. if a replaced data file holds an indexed field;
6. if we change schema or field metadata, or a config key they upsert;
7. if both change the same config key, both change schema metadata, or both change one field's
   metadata;
8. same fragment and overlapping fields;
9. same non-zero base id, same name or same path.
"""

from __future__ import annotations

from collections.abc import Callable

from pyroaring import BitMap

from lance_ops.errors import CommitConflictError, RetryableCommitConflictError
from lance_ops.table.transaction import (
    Append,
    Clone,
    CreateIndex,
    DataReplacement,
    Delete,
    Merge,
    Operation,
    Overwrite,
    Project,
    ReserveFragments,
    Restore,
    Rewrite,
    Transaction,
    Update,
    UpdateBases,
    UpdateConfig,
)

OK = "ok"
RETRY = "R"
INCOMPATIBLE = "I"

Rule = str | Callable[[Operation, Operation], str]


def _touched(op: Operation) -> set[int]:
    """Existing fragment ids an operation modifies or removes."""
    if isinstance(op, Delete):
        return {f.id for f in op.updated_fragments} | set(op.deleted_fragment_ids)
    if isinstance(op, Update):
        return {f.id for f in op.updated_fragments} | set(op.removed_fragment_ids)
    if isinstance(op, Rewrite):
        return {f.id for g in op.groups for f in g.old_fragments}
    if isinstance(op, DataReplacement):
        return {fid for fid, _ in op.replacements}
    return set()


def _overlap(ours: Operation, theirs: Operation) -> str:
    return RETRY if _touched(ours) & _touched(theirs) else OK


def _merge_nullability(ours: Operation, theirs: Operation) -> str:
    return OK if isinstance(theirs, Merge) and theirs.preserves_nullability else RETRY


def _pick(a: Operation, b: Operation, kind: type) -> tuple[Operation, Operation]:
    """``(the one of kind, the other)``."""
    return (a, b) if isinstance(a, kind) else (b, a)


def _index_covers_rewrite(ours: Operation, theirs: Operation) -> str:
    index_op, rewrite = _pick(ours, theirs, CreateIndex)
    assert isinstance(index_op, CreateIndex) and isinstance(rewrite, Rewrite)
    rewritten = {f.id for g in rewrite.groups for f in g.old_fragments}
    for index in index_op.new_indices:
        covered = set(BitMap.deserialize(index.fragment_bitmap)) if index.fragment_bitmap else set()
        if covered & rewritten:
            return RETRY
    return OK


def _index_replaced_field(ours: Operation, theirs: Operation) -> str:
    index_op, replacement = _pick(ours, theirs, CreateIndex)
    assert isinstance(index_op, CreateIndex) and isinstance(replacement, DataReplacement)
    indexed = {f for i in index_op.new_indices for f in i.fields}
    replaced = {f for _, data_file in replacement.replacements for f in data_file.fields}
    return RETRY if indexed & replaced else OK


def _same_fragment_fields(ours: Operation, theirs: Operation) -> str:
    assert isinstance(ours, DataReplacement) and isinstance(theirs, DataReplacement)
    mine = {(fid, f) for fid, d in ours.replacements for f in d.fields}
    other = {(fid, f) for fid, d in theirs.replacements for f in d.fields}
    return RETRY if mine & other else OK


def _config_keys(op: UpdateConfig) -> frozenset[str]:
    return op.config_updates.keys if op.config_updates else frozenset()


def _overwrite_vs_config(ours: Operation, theirs: Operation) -> str:
    assert isinstance(ours, Overwrite) and isinstance(theirs, UpdateConfig)
    return INCOMPATIBLE if set(ours.config_upsert_values) & _config_keys(theirs) else OK


def _config_vs_overwrite(ours: Operation, theirs: Operation) -> str:
    assert isinstance(ours, UpdateConfig) and isinstance(theirs, Overwrite)
    if ours.schema_metadata_updates or ours.field_metadata_updates:
        return INCOMPATIBLE
    return INCOMPATIBLE if _config_keys(ours) & set(theirs.config_upsert_values) else OK


def _config_vs_config(ours: Operation, theirs: Operation) -> str:
    assert isinstance(ours, UpdateConfig) and isinstance(theirs, UpdateConfig)
    if _config_keys(ours) & _config_keys(theirs):
        return INCOMPATIBLE
    if ours.schema_metadata_updates and theirs.schema_metadata_updates:
        return INCOMPATIBLE
    if set(ours.field_metadata_updates) & set(theirs.field_metadata_updates):
        return INCOMPATIBLE
    return OK


def _bases_clash(ours: Operation, theirs: Operation) -> str:
    assert isinstance(ours, UpdateBases) and isinstance(theirs, UpdateBases)
    for a in ours.new_bases:
        for b in theirs.new_bases:
            if (a.id and a.id == b.id) or (a.name is not None and a.name == b.name) or a.path == b.path:
                return INCOMPATIBLE
    return OK


# Column keys; Delete and Update share one, Clone and UpdateBases default to ok except (9).
_COLUMN = {
    Append: "append",
    Delete: "delete",
    Update: "delete",
    Overwrite: "overwrite",
    Restore: "restore",
    CreateIndex: "create_index",
    Rewrite: "rewrite",
    Merge: "merge",
    Project: "project",
    ReserveFragments: "reserve",
    UpdateConfig: "update_config",
    DataReplacement: "data_replacement",
    Clone: "clone",
    UpdateBases: "update_bases",
}

_DELETE_ROW: dict[str, Rule] = {
    "delete": _overlap,
    "overwrite": INCOMPATIBLE,
    "restore": INCOMPATIBLE,
    "rewrite": _overlap,
    "merge": RETRY,
    "data_replacement": _overlap,
}

MATRIX: dict[type, dict[str, Rule]] = {
    Append: {"overwrite": INCOMPATIBLE, "restore": INCOMPATIBLE, "merge": _merge_nullability},
    Delete: _DELETE_ROW,
    Update: _DELETE_ROW,
    Overwrite: {"overwrite": RETRY, "update_config": _overwrite_vs_config},
    Restore: {},
    CreateIndex: {
        "overwrite": INCOMPATIBLE,
        "restore": INCOMPATIBLE,
        "rewrite": _index_covers_rewrite,
        "data_replacement": _index_replaced_field,
    },
    Rewrite: {
        "delete": _overlap,
        "overwrite": INCOMPATIBLE,
        "restore": INCOMPATIBLE,
        "create_index": _index_covers_rewrite,
        "rewrite": _overlap,
        "merge": RETRY,
        "data_replacement": _overlap,
    },
    Merge: {
        "append": RETRY,
        "delete": RETRY,
        "overwrite": INCOMPATIBLE,
        "restore": INCOMPATIBLE,
        "rewrite": RETRY,
        "merge": RETRY,
        "project": INCOMPATIBLE,
        "data_replacement": RETRY,
    },
    Project: {"overwrite": INCOMPATIBLE, "restore": INCOMPATIBLE, "merge": RETRY, "project": RETRY},
    ReserveFragments: {"overwrite": INCOMPATIBLE, "restore": INCOMPATIBLE},
    UpdateConfig: {"overwrite": _config_vs_overwrite, "update_config": _config_vs_config},
    DataReplacement: {
        "overwrite": INCOMPATIBLE,
        "restore": INCOMPATIBLE,
        "create_index": _index_replaced_field,
        "rewrite": _overlap,
        "data_replacement": _same_fragment_fields,
    },
    Clone: {},
    UpdateBases: {"update_bases": _bases_clash},
}


def verdict(ours: Operation, theirs: Operation) -> str:
    """``"ok"``, ``"R"`` or ``"I"`` for our operation against theirs (see the module matrix)."""
    rule = MATRIX[type(ours)].get(_COLUMN[type(theirs)], OK)
    return rule if isinstance(rule, str) else rule(ours, theirs)


def check_conflict(ours: Transaction, theirs: Transaction, their_version: int) -> None:
    """Raise when ``ours`` cannot be committed on top of ``theirs`` (committed as ``their_version``)."""
    result = verdict(ours.operation, theirs.operation)
    if result == OK:
        return
    message = (
        f"{ours.operation.name} (read version {ours.read_version}) conflicts with the "
        f"{theirs.operation.name} committed concurrently as version {their_version}"
    )
    if result == RETRY:
        # pylance's words, which callers match: "Commit conflict for version N"
        raise RetryableCommitConflictError(f"Commit conflict for version {their_version}: {message}")
    raise CommitConflictError(f"Incompatible transaction: {message}")
