"""L20: ``lance-ops purge URI`` — deleted rows physically gone, what was purged reported."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

import lance_ops
from tests.test_cli import ok, ok_json


def test_purge_reports_and_removes_deleted_rows(tmp_path: Path) -> None:
    import lance

    uri = str(tmp_path / "d")
    data = pa.table({"id": pa.array(range(3000), pa.int64()), "s": [f"secret{i}" for i in range(3000)]})
    lance_ops.write_dataset(data, uri, max_rows_per_file=1000)
    ds = lance_ops.dataset(uri)
    ds.update_config({"lance.compaction.target_rows_per_fragment": "900"})  # fragments are not small
    ds.delete("id = 7 OR id = 2500")
    old_files = {p.name for p in Path(uri, "data").iterdir()}
    result = ok_json("purge", uri)
    assert result["deleted_rows_purged"] == 2
    assert result["fragments_rewritten"] == 2 and result["deletion_files_removed"] == 2
    assert result["data_files_removed"] == 2
    assert not list(Path(uri).glob("_deletions/*"))
    left = {p.name for p in Path(uri, "data").iterdir()}
    assert len(left & old_files) == 1 and len(left) == 3
    got = lance.dataset(uri).to_table()
    assert got.num_rows == 2998 and 7 not in got["id"].to_pylist()
    assert "purged 0 deleted row(s)" in ok("purge", uri)


def test_compact_cluster_by(tmp_path: Path) -> None:
    import lance

    uri = str(tmp_path / "d")
    data = pa.table(
        {"id": pa.array(range(3000), pa.int64()), "day": pa.array([i * 7 % 31 for i in range(3000)])}
    )
    lance_ops.write_dataset(data, uri, max_rows_per_file=500)
    result = ok_json("compact", uri, "--target-rows-per-fragment", "1000", "--cluster-by", "day")
    assert result["fragments_removed"] == 6 and result["fragments_added"] == 3
    days = lance.dataset(uri).to_table()["day"].to_pylist()
    assert days == sorted(days)
    assert lance_ops.dataset(uri).stats.clustering("day")["max_overlap_depth"] <= 2
    assert "nothing to compact" in ok(
        "compact", uri, "--target-rows-per-fragment", "1000", "--cluster-by", "day"
    )
