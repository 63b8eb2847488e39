"""``LanceDataset.delta`` (pylance's DatasetDelta) and ``changes`` (a Delta-style change data feed)
against known histories; ``delta`` compared with pylance 14 on twin datasets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lance_ops
from lance_ops.errors import InvalidArgumentError
from tests.table.twins import make_twins, rows


def history(ds: Any, module: Any) -> None:
    """v2 update, v3 upsert (1 update + 1 insert), v4 delete, v5 append, v6 compaction."""
    ds.update({"v": "v + 100"}, where="id = 1")
    ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(
        pa.table({"id": pa.array([4, 9], pa.int64()), "v": [44.0, 99.0], "s": ["u", "n"]})
    )
    ds.delete("id = 0")
    ds.insert(rows(1, 10))
    ds.optimize.compact_files(target_rows_per_fragment=100)


def _read(reader: pa.RecordBatchReader, key: str) -> dict[str, list[Any]]:
    return reader.read_all().sort_by(key).to_pydict()


@pytest.mark.parametrize("stable", [True, False], ids=["stable", "addresses"])
def test_delta_matches_pylance(lance_module: Any, tmp_path: Path, stable: bool) -> None:
    twins = make_twins(lance_module, tmp_path, rows(6), stable, max_rows_per_file=3)
    twins.run(history)
    end = lance_module.dataset(twins.theirs).version
    assert lance_ops.dataset(twins.ours).version == end
    for begin in range(1, end + 1):
        theirs = lance_module.dataset(twins.theirs).delta(compared_against=begin)
        on_ours = lance_module.dataset(twins.ours).delta(compared_against=begin)
        ours = lance_ops.dataset(twins.ours).delta(compared_against=begin)
        for method in ("get_inserted_rows", "get_updated_rows"):
            expected = _read(getattr(theirs, method)(), "_rowid")
            assert _read(getattr(ours, method)(), "_rowid") == expected, (begin, method)
            assert _read(getattr(on_ours, method)(), "_rowid") == expected, (begin, method)
        if stable:
            expected = _read(theirs.get_deleted_row_ids(), "_rowid")
            assert _read(ours.get_deleted_row_ids(), "_rowid") == expected
        else:
            with pytest.raises(InvalidArgumentError, match="deleted row ids require stable row ids"):
                ours.get_deleted_row_ids()
        # Up to the compaction (which lance_ops and pylance commit in their own ways).
        names = [[type(t.operation).__name__ for t in d.list_transactions()] for d in (ours, theirs)]
        assert len(names[0]) == len(names[1]) == end - begin
        assert names[0][: max(0, 5 - begin)] == names[1][: max(0, 5 - begin)]


def test_delta_known_history(tmp_path: Path) -> None:
    ds = lance_ops.write_dataset(
        rows(6), str(tmp_path / "ds"), max_rows_per_file=3, enable_stable_row_ids=True
    )
    history(ds, lance_ops)
    delta = ds.delta(compared_against=1)
    inserted = delta.get_inserted_rows().read_all()
    assert inserted.column("id").to_pylist() == [9, 10]
    assert inserted.column("_row_created_at_version").to_pylist() == [3, 5]
    updated = delta.get_updated_rows().read_all().sort_by("id")
    assert updated.column("id").to_pylist() == [1, 4]
    assert updated.column("_row_last_updated_at_version").to_pylist() == [2, 3]
    assert delta.get_deleted_row_ids().read_all().column("_rowid").to_pylist() == [0]
    ranged = ds.delta(begin_version=2, end_version=3)
    assert ranged.get_updated_rows().read_all().column("id").to_pylist() == [4]


def test_delta_arguments(tmp_path: Path) -> None:
    ds = lance_ops.write_dataset(rows(2), str(tmp_path / "ds"))
    with pytest.raises(InvalidArgumentError, match="Must specify either compared_against_version"):
        ds.delta()
    with pytest.raises(InvalidArgumentError, match="Must specify both"):
        ds.delta(begin_version=1)


def _changes(table: pa.Table) -> list[tuple[Any, ...]]:
    return sorted(
        zip(
            table.column("_commit_version").to_pylist(),
            table.column("_change_type").to_pylist(),
            table.column("id").to_pylist(),
            table.column("v").to_pylist(),
            strict=True,
        )
    )


def test_changes_known_history_stable(tmp_path: Path) -> None:
    ds = lance_ops.write_dataset(
        rows(6), str(tmp_path / "ds"), max_rows_per_file=3, enable_stable_row_ids=True
    )
    history(ds, lance_ops)
    feed = ds.changes(2)
    assert feed.column_names == ["id", "v", "s", "_change_type", "_commit_version"]
    assert _changes(feed) == [
        (2, "update_postimage", 1, 101.0),
        (2, "update_preimage", 1, 1.0),
        (3, "insert", 9, 99.0),
        (3, "update_postimage", 4, 44.0),
        (3, "update_preimage", 4, 4.0),
        (4, "delete", 0, 0.0),
        (5, "insert", 10, 10.0),
    ]
    assert _changes(ds.changes(4, 4)) == [(4, "delete", 0, 0.0)]
    assert _changes(ds.changes(6)) == []  # the compaction moved rows, changed none
    assert [r[1] for r in _changes(ds.changes(1, 1))] == ["insert"] * 6


def test_changes_without_stable_ids_and_overwrite(tmp_path: Path) -> None:
    import lance

    ds = lance_ops.write_dataset(rows(3), str(tmp_path / "ds"))
    ds.update({"v": "-v"}, where="id = 2")  # lance-ops' update records its in-order pairing
    ds.insert(rows(1, 7), mode="overwrite")
    assert _changes(ds.changes(2)) == [
        (2, "update_postimage", 2, -2.0),
        (2, "update_preimage", 2, 2.0),
        (3, "delete", 0, 0.0),
        (3, "delete", 1, 1.0),
        (3, "delete", 2, -2.0),
        (3, "insert", 7, 7.0),
    ]
    assert lance.dataset(str(tmp_path / "ds")).to_table().to_pydict() == rows(1, 7).to_pydict()


# v2: update of ids 1, 4 (two fragments); v3: upsert updating 5 and 2 (source order differs from
# the target's), inserting 9 and deleting 0 (not matched by source, id < 1); v4: delete of id 3.
def _pairing_history(ds: Any) -> None:
    ds.update({"v": "v + 100"}, where="id = 1 OR id = 4")
    ds.merge_insert(
        "id"
    ).when_matched_update_all().when_not_matched_insert_all().when_not_matched_by_source_delete(
        "id < 1"
    ).execute(
        pa.table({"id": pa.array([5, 9, 2], pa.int64()), "v": [55.0, 99.0, 22.0], "s": ["a", "b", "c"]})
    )
    ds.delete("id = 3")


PAIRED = [
    (2, "update_postimage", 1, 101.0),
    (2, "update_postimage", 4, 104.0),
    (2, "update_preimage", 1, 1.0),
    (2, "update_preimage", 4, 4.0),
    (3, "delete", 0, 0.0),
    (3, "insert", 9, 99.0),
    (3, "update_postimage", 2, 22.0),
    (3, "update_postimage", 5, 55.0),
    (3, "update_preimage", 2, 2.0),
    (3, "update_preimage", 5, 5.0),
    (4, "delete", 3, 3.0),
]


def _unpaired(expected: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    kinds = {"update_preimage": "delete", "update_postimage": "insert"}
    return sorted((v, kinds.get(k, k), i, x) for v, k, i, x in expected)


@pytest.mark.parametrize("writer", ["lance_ops", "pylance"])
@pytest.mark.parametrize("stable", [True, False], ids=["stable", "addresses"])
def test_changes_pairs_updates_with_and_without_stable_ids(
    lance_module: Any, tmp_path: Path, writer: str, stable: bool
) -> None:
    """Exact pre/post images: by row id with stable ids; without them by the pairing lance-ops'
    update / merge_insert record, or by the ``keys`` the caller names (pylance records nothing)."""
    import lance

    uri = str(tmp_path / "ds")
    module = lance_module if writer == "pylance" else lance_ops
    _pairing_history(module.write_dataset(rows(6), uri, max_rows_per_file=3, enable_stable_row_ids=stable))
    ours = lance_ops.dataset(uri)
    recorded = stable or writer == "lance_ops"
    assert _changes(ours.changes(2)) == (PAIRED if recorded else _unpaired(PAIRED))
    assert _changes(ours.changes(2, keys=["id"])) == PAIRED
    # Keys whose values the upsert changed (s) pair nothing; stable row ids pair regardless.
    wrong_keys = PAIRED if stable else _unpaired(PAIRED)
    assert _changes(ours.changes(3, 3, keys=["id", "s"])) == [r for r in wrong_keys if r[0] == 3]
    assert sorted(lance.dataset(uri).to_table().column("id").to_pylist()) == [1, 2, 4, 5, 9]
    if writer == "lance_ops":
        properties = lance.dataset(uri).read_transaction(3).transaction_properties
        assert properties == {"lance_ops.merge_insert.on": '["id"]'}
        assert lance.dataset(uri).read_transaction(2).transaction_properties == {
            "lance_ops.update.rows": "in_order"
        }


def test_changes_keys_that_are_not_columns_pair_nothing(tmp_path: Path) -> None:
    ds = lance_ops.write_dataset(rows(3), str(tmp_path / "ds"))
    ds.merge_insert("id").when_matched_update_all().execute(rows(1, 1))
    assert [r[1] for r in _changes(ds.changes(2, keys=["nope"]))] == ["delete", "insert"]
    assert [r[1] for r in _changes(ds.changes(2))] == ["update_postimage", "update_preimage"]


def test_changes_across_a_schema_change_and_bad_range(tmp_path: Path) -> None:
    ds = lance_ops.write_dataset(rows(2), str(tmp_path / "ds"))
    ds.add_columns({"w": "id * 2"})
    ds.insert(
        pa.table({"id": pa.array([5], pa.int64()), "v": [5.0], "s": ["s5"], "w": pa.array([10], pa.int64())})
    )
    feed = ds.changes(1)
    assert feed.column("w").to_pylist() == [None, None, 10]
    assert feed.column("_change_type").to_pylist() == ["insert"] * 3
    with pytest.raises(InvalidArgumentError):
        ds.changes(3, 2)
