"""The conflict matrix: every cell of the table in ``lance_ops.table.conflicts``' docstring."""

from __future__ import annotations

import re

import pytest
from pyroaring import BitMap

from lance_ops.errors import CommitConflictError, RetryableCommitConflictError
from lance_ops.table import conflicts
from lance_ops.table.manifest import BasePath, DataFile, DataFragment, IndexMetadata
from lance_ops.table.schema import LanceSchema
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
    RewriteGroup,
    Transaction,
    Update,
    UpdateBases,
    UpdateConfig,
    UpdateMap,
)

NO_SCHEMA = LanceSchema(())


def frag(fragment_id: int, fields: tuple[int, ...] = (0,)) -> DataFragment:
    return DataFragment(fragment_id, (DataFile(f"{fragment_id}.lance", fields, (0,), 2, 2),), 10)


def index(fragments: set[int], fields: tuple[int, ...]) -> IndexMetadata:
    bitmap = BitMap(fragments)
    return IndexMetadata(b"u" * 16, fields, "idx", 1, bitmap.serialize())


# Ours and theirs samples never meet a condition: disjoint fragments, keys, fields and bases.
OURS: dict[type, Operation] = {
    Append: Append((frag(0),)),
    Delete: Delete((frag(1),), (), "id < 3"),
    Update: Update(removed_fragment_ids=(1,)),
    Overwrite: Overwrite((frag(0),), NO_SCHEMA, config_upsert_values={"o": "1"}),
    Restore: Restore(1),
    CreateIndex: CreateIndex((index({10}, (7,)),)),
    Rewrite: Rewrite((RewriteGroup((frag(3),), (frag(0),)),)),
    Merge: Merge((frag(1),), NO_SCHEMA),
    Project: Project(NO_SCHEMA),
    ReserveFragments: ReserveFragments(2),
    UpdateConfig: UpdateConfig(config_updates=UpdateMap((("a", "1"),))),
    DataReplacement: DataReplacement(((5, DataFile("r.lance", (0,), (0,), 2, 2)),)),
    Clone: Clone(True, 1, "/src"),
    UpdateBases: UpdateBases((BasePath(1, "/a"),)),
}
THEIRS: dict[type, Operation] = {
    **OURS,
    Delete: Delete((frag(2),), (), "id < 3"),
    Update: Update(removed_fragment_ids=(2,)),
    Overwrite: Overwrite((frag(0),), NO_SCHEMA, config_upsert_values={"t": "1"}),
    CreateIndex: CreateIndex((index({11}, (8,)),)),
    Rewrite: Rewrite((RewriteGroup((frag(4),), (frag(0),)),)),
    UpdateConfig: UpdateConfig(config_updates=UpdateMap((("b", "1"),))),
    DataReplacement: DataReplacement(((6, DataFile("r.lance", (0,), (0,), 2, 2)),)),
    UpdateBases: UpdateBases((BasePath(2, "/b"),)),
}

ROWS = {
    "Append": [Append],
    "Delete / Update": [Delete, Update],
    "Overwrite": [Overwrite],
    "Restore": [Restore],
    "CreateIndex": [CreateIndex],
    "Rewrite": [Rewrite],
    "Merge": [Merge],
    "Project": [Project],
    "ReserveFragments": [ReserveFragments],
    "UpdateConfig": [UpdateConfig],
    "DataReplacement": [DataReplacement],
    "Clone": [Clone],
    "UpdateBases": [UpdateBases],
}
COLUMNS = [
    [Append],
    [Delete, Update],
    [Overwrite],
    [Restore],
    [CreateIndex],
    [Rewrite],
    [Merge],
    [Project],
    [ReserveFragments],
    [UpdateConfig],
    [DataReplacement],
    [Clone, UpdateBases],
]


def documented_matrix() -> dict[tuple[type, type], str]:
    doc = conflicts.__doc__ or ""
    out = {}
    for label, ours in ROWS.items():
        line = next(
            line for line in doc.splitlines() if re.match(rf"{re.escape(label)}\s{{2,}}(ok|R|I)", line)
        )
        cells = line[len(label) :].split()
        assert len(cells) == len(COLUMNS), line
        for cell, theirs in zip(cells, COLUMNS, strict=True):
            for a in ours:
                for b in theirs:
                    out[a, b] = cell
    return out


def expected_for_samples(cell: str) -> str:
    """Numbered cells hold only under their condition; the samples meet none except (1)."""
    if cell == "R1":
        return "R"
    return "ok" if cell[-1].isdigit() else cell


def test_every_cell_matches_the_documented_matrix() -> None:
    matrix = documented_matrix()
    assert len(matrix) == 14 * 14
    for (ours, theirs), cell in matrix.items():
        got = conflicts.verdict(OURS[ours], THEIRS[theirs])
        assert got == expected_for_samples(cell), (ours.__name__, theirs.__name__, cell)


CONDITIONS = [
    (Append((frag(0),)), Merge((frag(1),), NO_SCHEMA, preserves_nullability=True), "ok"),
    (Delete((frag(2),)), THEIRS[Delete], "R"),
    (Update(removed_fragment_ids=(2,)), THEIRS[Delete], "R"),
    (Delete((frag(4),)), THEIRS[Rewrite], "R"),
    (Delete((frag(6),)), THEIRS[DataReplacement], "R"),
    (Rewrite((RewriteGroup((frag(2),), ()),)), THEIRS[Delete], "R"),
    (Rewrite((RewriteGroup((frag(4),), ()),)), THEIRS[Rewrite], "R"),
    (Rewrite((RewriteGroup((frag(6),), ()),)), THEIRS[DataReplacement], "R"),
    (DataReplacement(((4, DataFile("x", (0,), (0,), 2, 2)),)), THEIRS[Rewrite], "R"),
    (Overwrite((), NO_SCHEMA, config_upsert_values={"b": "2"}), THEIRS[UpdateConfig], "I"),
    (CreateIndex((index({4}, (7,)),)), THEIRS[Rewrite], "R"),
    (Rewrite((RewriteGroup((frag(11),), ()),)), THEIRS[CreateIndex], "R"),
    (CreateIndex((index({10}, (0,)),)), THEIRS[DataReplacement], "R"),
    (DataReplacement(((5, DataFile("x", (8,), (0,), 2, 2)),)), THEIRS[CreateIndex], "R"),
    (UpdateConfig(schema_metadata_updates=UpdateMap((("m", "1"),))), THEIRS[Overwrite], "I"),
    (UpdateConfig(config_updates=UpdateMap((("t", None),))), THEIRS[Overwrite], "I"),
    (UpdateConfig(config_updates=UpdateMap((("b", "2"),))), THEIRS[UpdateConfig], "I"),
    (
        UpdateConfig(schema_metadata_updates=UpdateMap()),
        UpdateConfig(schema_metadata_updates=UpdateMap((("x", "1"),))),
        "I",
    ),
    (
        UpdateConfig(field_metadata_updates={3: UpdateMap()}),
        UpdateConfig(field_metadata_updates={3: UpdateMap()}),
        "I",
    ),
    (
        UpdateConfig(field_metadata_updates={3: UpdateMap()}),
        UpdateConfig(field_metadata_updates={4: UpdateMap()}),
        "ok",
    ),
    (DataReplacement(((6, DataFile("x", (0,), (0,), 2, 2)),)), THEIRS[DataReplacement], "R"),
    (DataReplacement(((6, DataFile("x", (1,), (0,), 2, 2)),)), THEIRS[DataReplacement], "ok"),
    (UpdateBases((BasePath(3, "/b"),)), THEIRS[UpdateBases], "I"),
    (UpdateBases((BasePath(2, "/c"),)), THEIRS[UpdateBases], "I"),
    (UpdateBases((BasePath(0, "/c", name="n"),)), UpdateBases((BasePath(0, "/d", name="n"),)), "I"),
    (UpdateBases((BasePath(0, "/c"),)), UpdateBases((BasePath(0, "/d"),)), "ok"),
]


@pytest.mark.parametrize(("ours", "theirs", "expected"), CONDITIONS)
def test_numbered_conditions(ours: Operation, theirs: Operation, expected: str) -> None:
    assert conflicts.verdict(ours, theirs) == expected


def test_check_conflict_raises_typed_errors() -> None:
    append = Transaction(1, OURS[Append])
    conflicts.check_conflict(append, Transaction(1, THEIRS[Append]), 2)
    with pytest.raises(CommitConflictError, match="Incompatible") as info:
        conflicts.check_conflict(append, Transaction(1, THEIRS[Overwrite]), 2)
    assert not isinstance(info.value, RetryableCommitConflictError)
    with pytest.raises(RetryableCommitConflictError, match="Commit conflict for version 2"):
        conflicts.check_conflict(Transaction(1, OURS[Overwrite]), Transaction(1, THEIRS[Overwrite]), 2)
