"""L18: ``lance-ops index list|create|optimize|drop`` on a dataset pylance then reads and queries."""

from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa

import lance_ops
from tests.test_cli import failed, ok, ok_json


def _data(start: int, n: int) -> pa.Table:
    return pa.table(
        {"id": pa.array(range(start, start + n), pa.int64()), "cat": [f"c{i % 4}" for i in range(n)]}
    )


def test_index_cycle(tmp_path: Path) -> None:
    uri = tmp_path / "ds"
    lance_ops.write_dataset(_data(0, 300), str(uri), max_rows_per_file=100)
    assert ok_json("index", "list", uri) == []
    created = ok_json("index", "create", uri, "id", "btree")
    assert created == {"index": "id_idx", "type": "BTREE", "column": "id", "version": 2}
    assert "created BITMAP index cats on cat" in ok("index", "create", uri, "cat", "BITMAP", "--name", "cats")
    zm = ok_json("index", "create", uri, "id", "ZONEMAP", "--param", "rows_per_zone=50")
    assert zm["index"] == "id_idx_2"
    failed("index", "create", uri, "cat", "LABEL_LIST", status=1, match="LABEL_LIST index column cat")
    failed(
        "index",
        "create",
        uri,
        "cat",
        "BTREE",
        "--name",
        "cats",
        "--no-replace",
        status=1,
        match="already exists",
    )
    rows = ok_json("index", "list", uri)
    assert [(r["name"], r["type"], r["columns"], r["rows_indexed"]) for r in rows] == [
        ("cats", "Bitmap", "cat", 300),
        ("id_idx", "BTree", "id", 300),
        ("id_idx_2", "ZoneMap", "id", 300),
    ]
    lance_ops.write_dataset(_data(300, 50), str(uri), mode="append")
    report = ok_json("index", "optimize", uri, "--index", "id_idx")
    assert report["extended"] == ["id_idx"]
    theirs = lance.dataset(str(uri))
    assert "@id_idx" in theirs.scanner(filter="id = 320").explain_plan()
    assert theirs.to_table(filter="id = 320")["id"].to_pylist() == [320]
    assert ok_json("index", "drop", uri, "cats")["action"] == "drop"
    failed("index", "drop", uri, "cats", status=1, match="cats")
    assert sorted(d.name for d in lance.dataset(str(uri)).describe_indices()) == ["id_idx", "id_idx_2"]
