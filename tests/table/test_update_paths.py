"""``update``'s selection paths against pylance on twin datasets: the numpy filter and its Arrow
fallback, fragments found in parallel, selections read by their task and those read in pieces."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import lance_ops
from lance_ops.ops import update as update_op
from tests.table.twins import make_twins, rows

WHERES = [
    "id % 10 = 7",  # numpy
    "id >= 1000 AND id < 1030",  # numpy, pages pruned by the statistics
    "id % 10 = 7 OR v > 1500",  # Arrow (a float column)
    "s = 's5'",  # Arrow
]


@pytest.mark.parametrize("stable", [False, True], ids=["addresses", "stable"])
@pytest.mark.parametrize("n", [1023, 1025])
@pytest.mark.parametrize("where", WHERES)
def test_update_paths_match_pylance(
    lance_module: Any, tmp_path: Path, where: str, n: int, stable: bool
) -> None:
    twins = make_twins(lance_module, tmp_path, rows(n), stable, max_rows_per_file=256)
    # A deletion file in every fragment first: the selections skip deleted rows.
    twins.run(lambda ds, module: ds.delete("id % 10 = 3"))
    theirs, ours = twins.run(lambda ds, module: ds.update({"v": "v + 0.5"}, where=where))
    assert ours == theirs
    twins.assert_same()
    twins.assert_same_transaction()


@pytest.mark.parametrize("stable", [False, True], ids=["addresses", "stable"])
def test_large_selection_read_in_pieces(
    lance_module: Any, tmp_path: Path, stable: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A selection larger than a task reads is read in pieces as it is written: same result."""
    monkeypatch.setattr(update_op, "TASK_READ_ROWS", 50)
    monkeypatch.setattr(update_op, "READ_BATCH_ROWS", 64)
    twins = make_twins(lance_module, tmp_path, rows(1025), stable, max_rows_per_file=300)
    theirs, ours = twins.run(lambda ds, module: ds.update({"v": "v * 2"}, where="id % 3 = 1"))
    assert ours == theirs == {"num_rows_updated": 342}
    twins.assert_same()
    twins.assert_same_transaction()


def test_serial_and_parallel_selection_agree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fragments found two at a time on the pool write what one at a time writes."""
    results = []
    for window in (1, 2):
        monkeypatch.setattr(update_op, "WORKER_THREADS", window)
        uri = str(tmp_path / f"w{window}")
        lance_ops.write_dataset(rows(1000), uri, max_rows_per_file=128)
        ds = lance_ops.dataset(uri)
        assert ds.update({"v": "-v"}, where="id % 7 = 2") == {"num_rows_updated": 143}
        results.append(ds.to_table().to_pylist())
    assert results[0] == results[1]
