"""``merge_insert(...).explain_plan()`` / ``analyze_plan()`` name the scalar index the merge prunes
its target with (a BTREE or BITMAP of a non-float key column, in the fragments it covers)."""

from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa
import pytest

import lance_ops


def _dataset(path: Path) -> lance_ops.LanceDataset:
    table = pa.table({"id": list(range(100)), "f": [float(i) for i in range(100)], "v": [1] * 100})
    return lance_ops.write_dataset(table, path, max_rows_per_file=40)


def test_plan_without_index_names_none(tmp_path: Path) -> None:
    ds = _dataset(tmp_path / "d")
    plan = ds.merge_insert("id").when_matched_update_all().explain_plan()
    assert "ScalarIndexQuery" not in plan


@pytest.mark.parametrize("kind", ["BTREE", "BITMAP"])
def test_plan_names_the_key_index_and_its_fragments(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "d"
    ds = _dataset(path)
    ds.create_scalar_index("id", kind)
    ds.insert(pa.table({"id": [500], "f": [0.5], "v": [2]}))  # a fragment the index does not cover
    builder = ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all()
    name = {"BTREE": "BTree", "BITMAP": "Bitmap"}[kind]
    expected = f"ScalarIndexQuery: query=[id IN (source keys)]@id_idx({name}), fragments=3/4"
    assert expected in builder.explain_plan()
    assert expected in builder.analyze_plan(pa.table({"id": [5, 700], "f": [0.0, 0.0], "v": [9, 9]}))
    # a by-source delete reads every row: no index; a float key is never looked up in one
    by_source = ds.merge_insert("id").when_matched_update_all().when_not_matched_by_source_delete()
    assert "ScalarIndexQuery" not in by_source.explain_plan()
    ds.create_scalar_index("f", "BTREE")
    assert "ScalarIndexQuery" not in ds.merge_insert("f").when_matched_update_all().explain_plan()
    result = builder.execute(pa.table({"id": [5, 700], "f": [0.0, 0.0], "v": [9, 9]}))
    assert result == {"num_inserted_rows": 1, "num_updated_rows": 1, "num_deleted_rows": 0}
    theirs = lance.dataset(str(path))
    assert theirs.count_rows() == 102
    assert theirs.to_table(filter="id = 5")["v"].to_pylist() == [9]
