"""L20: the compaction sensor's clustering threshold (``max_overlap_depth``) and its metadata."""

from __future__ import annotations

from pathlib import Path

import lance

from assets.checks import Fragmentation
from assets.config import CompactionPolicy
from tests.table.test_clustering import build


def test_overlap_depth_breach_until_clustered(tmp_path: Path) -> None:
    uri = str(tmp_path / "d")
    ds = build(uri, 4000, 8, stable=False)
    policy = CompactionPolicy(max_fragments=100, max_small_files=100, max_overlap_depth=3.0)
    assert Fragmentation.of(ds, policy).breaches(policy) == []  # no clustering keys configured
    ds.update_config({"lance-ops.cluster-by": "day"})
    state = Fragmentation.of(ds, policy)
    assert state.breaches(policy) == ["overlap depth of day 8.00 > 3.0"]
    assert state.metadata()["lance/clustering/day/overlap_depth"] == 8.0
    ds.optimize.compact_files(target_rows_per_fragment=500)  # clusters by the config key
    state = Fragmentation.of(ds, policy)
    assert state.breaches(policy) == []
    assert state.metadata()["lance/clustering/day/overlap_depth"] < 3.0
    assert lance.dataset(uri).count_rows() == 4000
