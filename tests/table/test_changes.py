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
    ds = lance_ops.write_dataset(rows(3), str(tmp_path / "ds"))
    ds.update({"v": "-v"}, where="id = 2")
    ds.insert(rows(1, 7), mode="overwrite")
    assert _changes(ds.changes(2)) == [
        (2, "delete", 2, 2.0),
        (2, "insert", 2, -2.0),
        (3, "delete", 0, 0.0),
        (3, "delete", 1, 1.0),
        (3, "delete", 2, -2.0),
        (3, "insert", 7, 7.0),
    ]


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
