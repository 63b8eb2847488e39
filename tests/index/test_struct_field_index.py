"""L18: lance_ops' scans use scalar indices on fields inside struct columns (an index on ``s.x``
answers ``s.x = 5``), as pylance does: plan names the index, rows equal a full scan's and
pylance's, with the index built by either system."""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_ops
from tests.index.helpers import index_selection as _selection


def _table(start: int, n: int) -> pa.Table:
    ids = np.arange(start, start + n)
    inner = pa.StructArray.from_arrays(
        [
            pa.array([None if k % 19 == 0 else int(k % 40) for k in ids], pa.int64()),
            pa.array([None if k % 11 == 0 else f"v{k % 7}" for k in ids], pa.string()),
            pa.array(ids / 4, pa.float64()),
        ],
        names=["x", "y", "z"],
        mask=pa.array(ids % 23 == 5),  # whole structs null: their fields read as null
    )
    outer = pa.StructArray.from_arrays([inner], names=["inner"])
    return pa.table({"id": pa.array(ids, pa.int64()), "s": inner, "o": outer})


_FILTERS = [
    "s.x = 5",
    "s.x IN (1, 2, 39)",
    "s.x >= 38",
    "s.x IS NULL",
    "s.y = 'v3'",
    "s.y IS NULL",
    "s.y IS NOT NULL AND s.x < 3",
    "s.y = 'v1' AND id > 600",
    "s.x = 7 AND id % 3 = 0",
    "s.z > 200.5",
    "o.inner.x = 6",
]
_INDICES = {"s.x": "BTREE", "s.y": "BITMAP", "s.z": "BTREE", "o.inner.x": "BTREE"}


def _build(system: object, path: Path) -> None:
    ds = system.write_dataset(_table(0, 800), str(path), max_rows_per_file=200)  # type: ignore[attr-defined]
    for column, kind in _INDICES.items():
        ds.create_scalar_index(column, kind)
    ds = system.dataset(str(path))  # type: ignore[attr-defined]
    ds.delete("id % 9 = 4")
    system.write_dataset(_table(800, 90), str(path), mode="append")  # type: ignore[attr-defined]  # not indexed


@pytest.fixture(scope="module", params=["lance_ops", "pylance"])
def dataset(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> lance_ops.LanceDataset:
    path = tmp_path_factory.mktemp("struct") / "ds"
    _build(lance_ops if request.param == "lance_ops" else lance, path)
    return lance_ops.dataset(str(path))


def _ids(ds: lance_ops.LanceDataset, flt: str, use: bool = True) -> list[int]:
    return sorted(ds.to_table(columns=["id"], filter=flt, use_scalar_index=use)["id"].to_pylist())


@pytest.mark.parametrize("flt", _FILTERS)
def test_struct_field_index_answers_with_full_scan_rows(dataset: lance_ops.LanceDataset, flt: str) -> None:
    column = flt.split(" ")[0]
    plan = dataset.scanner(filter=flt).explain_plan()
    assert f"@{column}_idx(" in plan, plan
    full = _ids(dataset, flt, use=False)
    assert full  # every filter selects some rows
    assert _ids(dataset, flt) == full
    assert dataset.count_rows(flt) == len(full)
    theirs = lance.dataset(dataset.uri)
    assert f"@{column}_idx(" in theirs.scanner(filter=flt).explain_plan()
    assert sorted(theirs.to_table(columns=["id"], filter=flt)["id"].to_pylist()) == full


def test_exactness_of_struct_field_answers(dataset: lance_ops.LanceDataset) -> None:
    assert _selection(dataset, "s.x = 5 AND s.y = 'v5'").exact
    assert _selection(dataset, "s.x IS NULL").exact
    assert not _selection(dataset, "s.z > 200.5").exact  # a float comparison is rechecked
    assert not _selection(dataset, "s.x = 7 AND id % 3 = 0").exact


def test_unindexed_struct_field_is_scanned(dataset: lance_ops.LanceDataset) -> None:
    flt = "o.inner.y = 'v2'"  # no index on o.inner.y
    assert "ScalarIndexQuery" not in dataset.scanner(filter=flt).explain_plan()
    assert _ids(dataset, flt) == _ids(dataset, flt, use=False) != []
