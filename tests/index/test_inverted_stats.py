"""``ds.stats.index_stats(name)`` of INVERTED and NGRAM indices as pylance 14 reports them, key by
key (``params``, ``num_tokens``, ``num_docs``; ``num_ngrams``): built by pylance (one partition,
with positions, two partitions after pylance's optimize_indices) and after our compaction."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_ops

ROWS = 3000


def _table(rows: int = ROWS, start: int = 0) -> pa.Table:
    ids = np.arange(start, start + rows)
    texts = [
        None if i % 250 == 5 else "" if i % 250 == 6 else f"hello world {i % 11} w{i % 97}x" for i in ids
    ]
    return pa.table({"id": ids, "txt": pa.array(texts, pa.string())})


def _assert_equal(path: Path, names: tuple[str, ...]) -> None:
    ours, theirs = lance_ops.dataset(str(path)), lance.dataset(str(path))
    for name in names:
        mine: dict[str, Any] = ours.stats.index_stats(name)
        expected: dict[str, Any] = theirs.stats.index_stats(name)
        assert set(mine) == set(expected), name
        for key in expected:
            assert mine[key] == expected[key], (name, key)
        assert mine["indices"] and mine["indices"][0], name  # details read, not empty


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("stats") / "ds"
    ds = lance.write_dataset(_table(), path, max_rows_per_file=1000)
    ds.create_scalar_index("txt", "INVERTED", name="txt_idx")
    ds.create_scalar_index("txt", "INVERTED", name="txt_pos", with_position=True, lower_case=False)
    ds.create_scalar_index("txt", "NGRAM", name="txt_ng")
    return path


def test_pylance_built(built: Path) -> None:
    _assert_equal(built, ("txt_idx", "txt_pos", "txt_ng"))
    details = lance_ops.dataset(str(built)).stats.index_stats("txt_pos")["indices"][0]
    assert details["params"]["with_position"] is True and details["params"]["lower_case"] is False
    assert details["num_docs"] == ROWS - 2 * (ROWS // 250)  # nulls and empty strings hold no tokens
    assert lance_ops.dataset(str(built)).stats.index_stats("txt_ng")["indices"][0]["num_ngrams"] > 0


def test_two_partitions_after_pylance_optimize(built: Path, tmp_path: Path) -> None:
    """pylance's optimize_indices adds a partition for appended rows: tokens and documents summed."""
    path = tmp_path / "ds"
    shutil.copytree(built, path)
    ds = lance.dataset(str(path))
    ds.insert(_table(100, start=ROWS))
    lance.dataset(str(path)).optimize.optimize_indices(index_names=["txt_idx", "txt_ng"])
    _assert_equal(path, ("txt_idx", "txt_ng"))
    assert lance_ops.dataset(str(path)).stats.index_stats("txt_idx")["indices"][0]["num_docs"] > ROWS - 24


def test_after_our_compaction_with_removed_rows(built: Path, tmp_path: Path) -> None:
    path = tmp_path / "ds"
    shutil.copytree(built, path)
    lance.dataset(str(path)).delete("id % 10 = 3 or id < 400")
    lance_ops.dataset(str(path)).optimize.compact_files(target_rows_per_fragment=1 << 20)
    _assert_equal(path, ("txt_idx", "txt_pos", "txt_ng"))
    stats = lance_ops.dataset(str(path)).stats.index_stats("txt_idx")
    assert stats["indices"][0]["num_docs"] < ROWS - 600 and stats["num_unindexed_rows"] == 0
