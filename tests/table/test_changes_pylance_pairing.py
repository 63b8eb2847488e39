"""Pairing update pre/post images in histories pylance 14 wrote: by stable row id (pylance keeps
an updated row's ``_rowid`` then), and without stable row ids only by ``keys`` — pylance records
nothing that ties the rewritten row to its old copy — with ``require_pairs`` refusing otherwise."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_ops
from lance_ops.errors import InvalidArgumentError
from tests.table.twins import rows

SOURCE = pa.table({"id": pa.array([4, 9], pa.int64()), "v": [44.0, 99.0], "s": ["u", "n"]})


def _pylance_history(lance: Any, uri: str, stable: bool) -> dict[int, list[int]]:
    """v1 write (6 rows, 3 per file), v2 update of id 1, v3 upsert (4 updated, 9 inserted), v4
    delete of id 0; returns pylance's ``_rowid`` of ids 1 and 4 at v1 and at v3."""
    lance.write_dataset(rows(6), uri, max_rows_per_file=3, enable_stable_row_ids=stable)

    def ids() -> list[int]:
        table = lance.dataset(uri).to_table(columns=["id"], with_row_id=True).sort_by("id")
        found = dict(zip(table["id"].to_pylist(), table["_rowid"].to_pylist(), strict=True))
        return [found[1], found[4]]

    before = ids()
    lance.dataset(uri).update({"v": "v + 100"}, where="id = 1")
    lance.dataset(uri).merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(
        SOURCE
    )
    after = ids()
    lance.dataset(uri).delete("id = 0")
    return {1: before, 3: after}


def _feed(table: pa.Table) -> list[tuple[int, str, int, float]]:
    columns = [table[c].to_pylist() for c in ("_commit_version", "_change_type", "id", "v")]
    return sorted(zip(*columns, strict=True))


PAIRED = [
    (2, "update_postimage", 1, 101.0),
    (2, "update_preimage", 1, 1.0),
    (3, "insert", 9, 99.0),
    (3, "update_postimage", 4, 44.0),
    (3, "update_preimage", 4, 4.0),
    (4, "delete", 0, 0.0),
]


def test_stable_row_ids_pair_a_pylance_history(lance_module: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    row_ids = _pylance_history(lance_module, uri, stable=True)
    assert row_ids[1] == row_ids[3]  # pylance keeps an updated row's stable row id
    feed = lance_ops.dataset(uri).changes(2, require_pairs=True)
    assert _feed(feed) == PAIRED
    # The post-images are what pylance's own delta calls updated, row ids included.
    ours = feed.filter(pc.equal(feed["_change_type"], "update_postimage"))
    theirs = lance_module.dataset(uri).delta(compared_against=1).get_updated_rows().read_all()
    assert sorted(theirs["_rowid"].to_pylist()) == sorted(row_ids[3])
    assert sorted(theirs["id"].to_pylist()) == sorted(ours["id"].to_pylist()) == [1, 4]


def test_without_stable_row_ids_only_keys_pair_a_pylance_history(lance_module: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    row_ids = _pylance_history(lance_module, uri, stable=False)
    assert row_ids[1] != row_ids[3]  # the row id is the row address: the rewritten row has a new one
    # pylance's delta finds no updated (nor inserted) rows without stable row ids.
    delta = lance_module.dataset(uri).delta(compared_against=1)
    assert delta.get_updated_rows().read_all().num_rows == 0
    assert delta.get_inserted_rows().read_all().num_rows == 0
    transaction = lance_module.dataset(uri).read_transaction(2)
    assert transaction.transaction_properties == {}
    assert all(f.row_id_meta is None for f in transaction.operation.new_fragments)

    ds = lance_ops.dataset(uri)
    kinds = {"update_preimage": "delete", "update_postimage": "insert"}
    assert _feed(ds.changes(2)) == sorted((c, kinds.get(k, k), i, v) for c, k, i, v in PAIRED)
    with pytest.raises(InvalidArgumentError, match=r"version 2: .*keys=") as refused:
        ds.changes(2, require_pairs=True)
    assert "enable_stable_row_ids" in str(refused.value)
    assert _feed(ds.changes(2, keys=["id"], require_pairs=True)) == PAIRED
    assert _feed(ds.changes(4, require_pairs=True)) == [(4, "delete", 0, 0.0)]  # a delete pairs nothing


def test_require_pairs_accepts_what_lance_ops_recorded(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    ds = lance_ops.write_dataset(rows(6), uri, max_rows_per_file=3)
    ds.update({"v": "v + 100"}, where="id = 1")
    ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(SOURCE)
    ds.merge_insert("id").when_not_matched_insert_all().execute(rows(1, 20))  # inserts only
    ds.delete("id = 0")
    feed = _feed(lance_ops.dataset(uri).changes(2, require_pairs=True))
    assert feed == sorted([*PAIRED[:5], (4, "insert", 20, 20.0), (5, "delete", 0, 0.0)])
