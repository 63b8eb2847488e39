"""``merge_insert(...).explain_plan()`` / ``analyze_plan()`` where the merge would select its
target rows through a key column's scalar index (a BTREE or BITMAP of a non-float key): refused
as pylance 14 refuses it ("does not support explain_plan" / "plan reporting"), nothing written;
``use_index(False)`` reports the plan (and runs the merge) without the index."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import lance
import pyarrow as pa
import pytest

import lance_ops
from lance_ops.errors import UnsupportedFeatureError

SOURCE = pa.table({"id": [5, 700], "f": [0.0, 0.0], "v": [9, 9]})


def _dataset(path: Path) -> lance_ops.LanceDataset:
    table = pa.table({"id": list(range(100)), "f": [float(i) for i in range(100)], "v": [1] * 100})
    return lance_ops.write_dataset(table, path, max_rows_per_file=40)


def test_plan_without_index(tmp_path: Path) -> None:
    ds = _dataset(tmp_path / "d")
    plan = ds.merge_insert("id").when_matched_update_all().explain_plan()
    assert plan.startswith("MergeInsert: on=[id]")


@pytest.mark.parametrize("kind", ["BTREE", "BITMAP"])
@pytest.mark.parametrize("lib", ["lance_ops", "pylance"])
def test_index_path_has_no_plan_as_in_pylance(tmp_path: Path, kind: str, lib: str) -> None:
    path = tmp_path / "d"
    _dataset(path).create_scalar_index("id", kind)
    ds = lance_ops.dataset(str(path)) if lib == "lance_ops" else lance.dataset(str(path))
    builder = ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all()
    with pytest.raises(Exception, match="does not support explain_plan"):
        builder.explain_plan()
    with pytest.raises(Exception, match="does not support plan reporting"):
        builder.analyze_plan(SOURCE)
    files = sorted(p.name for p in (path / "data").iterdir())
    # without the index, or reading every row (a by-source delete), the plan is reported
    plan = builder.use_index(False).explain_plan()
    assert "MergeInsert" in plan
    by_source = ds.merge_insert("id").when_matched_update_all().when_not_matched_by_source_delete()
    assert "MergeInsert" in by_source.explain_plan()
    assert "MergeInsert" in builder.use_index(False).analyze_plan(SOURCE)
    if lib == "lance_ops":  # its analyze removes what it wrote (pylance's leaves the files)
        assert sorted(p.name for p in (path / "data").iterdir()) == files
    assert lance.dataset(str(path)).version == 2


def test_refusal_is_typed_and_names_the_index(tmp_path: Path) -> None:
    ds = _dataset(tmp_path / "d")
    ds.create_scalar_index("id", "BTREE")
    with pytest.raises(UnsupportedFeatureError, match="'id_idx' on 'id'"):
        ds.merge_insert("id").when_matched_update_all().explain_plan()
    # a float key is never looked up in an index: its plan is reported
    ds.create_scalar_index("f", "BTREE")
    assert "MergeInsert" in ds.merge_insert("f").when_matched_update_all().explain_plan()


def test_use_index_false_merges_without_the_index(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The same merge with and without the index: same rows and result; only the first reads
    through the index (its MergePruning record)."""
    path = tmp_path / "d"
    ds = _dataset(path)
    ds.create_scalar_index("id", "BTREE")
    ds.insert(pa.table({"id": [500], "f": [0.5], "v": [2]}))
    outcomes = []
    for use in (True, False):
        copy = tmp_path / f"copy_{use}"
        shutil.copytree(path, copy)
        builder = lance_ops.dataset(str(copy)).merge_insert("id").when_matched_update_all()
        with caplog.at_level(logging.DEBUG, logger="lance_ops"):
            caplog.clear()
            result = builder.when_not_matched_insert_all().use_index(use).execute(SOURCE)
        pruning = [r.merge_pruning for r in caplog.records if hasattr(r, "merge_pruning")]
        assert pruning and (pruning[-1].index == ("id_idx" if use else None)), pruning
        outcomes.append((result, lance.dataset(str(copy)).to_table().sort_by("id")))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][0] == {"num_inserted_rows": 1, "num_updated_rows": 1, "num_deleted_rows": 0}
