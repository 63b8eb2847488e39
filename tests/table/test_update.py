"""``LanceDataset.update`` and ``insert`` against pylance 14 on twin datasets: rows, result dicts,
the Update transaction, row versions with stable row ids; bad input; concurrent updates."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lance_ops
from lance_ops.errors import FieldNotFoundError, InvalidArgumentError, PredicateError
from tests.table.twins import make_twins, rows

CASES = [
    ({"v": "v * 10"}, "id >= 3 AND id < 7"),
    ({"v": "v + 1", "s": "'x'"}, "id % 2 = 0"),
    ({"v": "1"}, None),
    ({"s": "s || '!'"}, "v > 100"),  # selects nothing: still one commit
    ({"id": "id + 100"}, "s = 's4'"),
]


@pytest.mark.parametrize("stable", [False, True], ids=["addresses", "stable"])
@pytest.mark.parametrize(("updates", "where"), CASES, ids=["range", "two-columns", "all", "none", "key"])
def test_update_matches_pylance(
    lance_module: Any, tmp_path: Path, updates: Any, where: Any, stable: bool
) -> None:
    twins = make_twins(lance_module, tmp_path, rows(12), stable)
    theirs, ours = twins.run(lambda ds, module: (ds.update(updates, where=where), ds.version))
    assert ours == theirs
    twins.assert_same()
    twins.assert_same_transaction()
    # Twice in a row, then after an append: rows keep their ids and created-at versions.
    theirs, ours = twins.run(lambda ds, module: (ds.update(updates, where=where), ds.version))
    assert ours == theirs
    twins.assert_same()


@pytest.mark.parametrize("stable", [False, True], ids=["addresses", "stable"])
def test_insert_matches_pylance(lance_module: Any, tmp_path: Path, stable: bool) -> None:
    twins = make_twins(lance_module, tmp_path, rows(4), stable)

    def insert(ds: Any, module: Any) -> Any:
        ds.insert(rows(3, 10))
        versions = [ds.version]
        ds.insert(rows(2, 20), mode="overwrite")
        return [*versions, ds.version, ds.count_rows()]

    theirs, ours = twins.run(insert)
    assert ours == theirs == [2, 3, 2]
    twins.assert_same()


def test_created_at_kept_for_rows_added_later(lance_module: Any, tmp_path: Path) -> None:
    """A row appended in version 2 and updated in version 3 was created in version 2 (pylance 14
    looks the version up by row address and reports 1 here; lance_ops keeps the real one)."""
    uri = str(tmp_path / "ds")
    ds = lance_ops.write_dataset(rows(4), uri, enable_stable_row_ids=True)
    ds.insert(rows(4, 4))
    ds.update({"v": "-v"}, where="id IN (1, 6)")
    table = lance_module.dataset(uri).to_table(
        columns=["id", "v", "_rowid", "_row_created_at_version", "_row_last_updated_at_version"]
    )
    by_id = {r["id"]: r for r in table.to_pylist()}
    assert (
        by_id[6]["_rowid"],
        by_id[6]["_row_created_at_version"],
        by_id[6]["_row_last_updated_at_version"],
    ) == (
        6,
        2,
        3,
    )
    assert (by_id[1]["_row_created_at_version"], by_id[1]["_row_last_updated_at_version"]) == (1, 3)
    assert by_id[5]["_row_last_updated_at_version"] == 2 and by_id[6]["v"] == -6.0


def _files(uri: str) -> set[str]:
    return {str(p.relative_to(uri)) for p in Path(uri).rglob("*") if p.is_file()}


@pytest.mark.parametrize(
    ("updates", "where", "error", "match"),
    [
        ({"nope": "1"}, None, FieldNotFoundError, "Column 'nope' does not exist in dataset schema"),
        ({"v": "nope + 1"}, None, FieldNotFoundError, "nope"),
        ({"v": "'abc'"}, None, InvalidArgumentError, "cannot update"),
        ({"v": "v + 1"}, "id = = 1", PredicateError, "cannot parse"),
        ({}, None, InvalidArgumentError, "non-empty mapping"),
    ],
    ids=["unknown-column", "unknown-in-expression", "bad-cast", "bad-where", "empty"],
)
def test_bad_input_commits_nothing(
    lance_module: Any, tmp_path: Path, updates: Any, where: Any, error: type, match: str
) -> None:
    ds = lance_ops.write_dataset(rows(6), str(tmp_path / "ds"), max_rows_per_file=4)
    before = _files(ds.uri)
    with pytest.raises(error, match=match):
        ds.update(updates, where=where)
    assert _files(ds.uri) == before and lance_module.dataset(ds.uri).version == 1
    if updates:
        with pytest.raises(ValueError):
            lance_module.dataset(ds.uri).update(updates, where=where)


@pytest.mark.parametrize("stable", [False, True], ids=["addresses", "stable"])
def test_concurrent_updates_of_the_same_rows_are_not_lost(
    lance_module: Any, tmp_path: Path, stable: bool
) -> None:
    uri = str(tmp_path / "ds")
    lance_ops.write_dataset(rows(20), uri, max_rows_per_file=10, enable_stable_row_ids=stable)
    barrier = threading.Barrier(4)

    def work() -> None:
        barrier.wait()
        lance_ops.dataset(uri).update({"v": "v + 1"}, where="id < 3 OR id = 15", conflict_retries=50)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    table = lance_module.dataset(uri).to_table().sort_by("id")
    assert table.column("id").to_pylist() == list(range(20))
    values = table.column("v").to_pylist()
    assert [values[i] for i in (0, 1, 2, 15)] == [4.0, 5.0, 6.0, 19.0]
    assert values[3] == 3.0


def test_update_reads_a_pylance_history(lance_module: Any, tmp_path: Path) -> None:
    """pylance wrote and updated the dataset; lance_ops continues the history and pylance agrees."""
    uri = str(tmp_path / "ds")
    lance_module.write_dataset(rows(10), uri, max_rows_per_file=4, enable_stable_row_ids=True)
    lance_module.dataset(uri).update({"v": "v * 2"}, where="id < 5")
    lance_module.dataset(uri).delete("id = 9")
    ds = lance_ops.dataset(uri)
    assert ds.update({"s": "'ours'"}, where="id >= 3") == {"num_rows_updated": 6}
    ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(
        pa.table({"id": pa.array([0, 50], pa.int64()), "v": [0.5, 50.0], "s": ["a", "b"]})
    )
    table = lance_module.dataset(uri).to_table(columns=["id", "v", "s", "_rowid"]).sort_by("id")
    assert table.column("id").to_pylist() == [*range(9), 50]
    assert table.column("s").to_pylist()[:4] == ["a", "s1", "s2", "ours"]
    assert table.column("v").to_pylist()[:3] == [0.5, 2.0, 4.0]
    assert table.column("_rowid").to_pylist() == [*range(9), 10]


def test_update_with_array_literals_matches_pylance(lance_module: Any, tmp_path: Path) -> None:
    """``[1.0, 2.0]`` sets fixed-size-list and list columns, as pylance's update does; an array of
    non-constants or the wrong length is refused with nothing committed."""
    vectors = pa.FixedSizeListArray.from_arrays(pa.array(range(8), pa.float32()), 2)
    lists = pa.array([[1], [2], [3], [4]], pa.list_(pa.int64()))
    data = pa.table({"id": pa.array(range(4), pa.int64()), "vec": vectors, "l": lists})
    uris = {"pylance": str(tmp_path / "theirs"), "lance_ops": str(tmp_path / "ours")}
    lance_module.write_dataset(data, uris["pylance"])
    lance_ops.write_dataset(data, uris["lance_ops"])
    updates = {"vec": "[42.0, 43.0]", "l": "[7, 8, 9]"}
    theirs = lance_module.dataset(uris["pylance"]).update(updates, where="id >= 2")
    ours_ds = lance_ops.dataset(uris["lance_ops"])
    assert ours_ds.update(updates, where="id >= 2") == theirs
    expected = lance_module.dataset(uris["pylance"]).to_table().sort_by("id")
    assert lance_module.dataset(uris["lance_ops"]).to_table().sort_by("id") == expected
    version = ours_ds.version
    with pytest.raises(lance_ops.errors.UnsupportedSQLError, match="constant elements"):
        ours_ds.update({"vec": "[id, 1.0]"})
    with pytest.raises(InvalidArgumentError):
        ours_ds.update({"vec": "[1.0, 2.0, 3.0]"})
    assert lance_ops.dataset(uris["lance_ops"]).version == version


def test_uncommitted_merge_commits_on_a_memory_dataset() -> None:
    """pylance's pattern: ``execute_uncommitted`` then ``LanceDataset.commit(dataset, txn)`` on a
    memory:// dataset (the dataset's own store, not a path named by its uri)."""
    ds = lance_ops.write_dataset(pa.table({"id": range(4), "flag": [False] * 4}), "memory://l16-commit")
    builder = ds.merge_insert("id").when_matched_update_all()
    transaction, stats = builder.execute_uncommitted(pa.table({"id": [1], "flag": [True]}))
    assert isinstance(transaction.operation, lance_ops.LanceOperation.Update)
    assert not isinstance(transaction, lance_ops.LanceOperation.Update)
    assert stats == {"num_inserted_rows": 0, "num_updated_rows": 1, "num_deleted_rows": 0}
    committed = lance_ops.LanceDataset.commit(ds, transaction)
    assert committed.to_table().sort_by("id").column("flag").to_pylist() == [False, True, False, False]
