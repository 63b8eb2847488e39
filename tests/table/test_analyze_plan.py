"""``analyze_plan`` of a scan runs it and reports, on the ``LanceRead`` step, the rows returned and
the rows read (pylance's ``output_rows`` / ``rows_scanned``), checked with the patterns pylance's own
tests use on pylance's plan; ``explain_plan`` names the read columns ``projection=`` as pylance."""

from __future__ import annotations

import re
from pathlib import Path

import lance
import pyarrow as pa
import pytest

import lance_ops


@pytest.mark.parametrize("who", ["ours", "theirs"])
def test_filtered_scan_counts_rows(tmp_path: Path, who: str) -> None:
    lance.write_dataset(pa.table({"a": range(100), "b": range(100)}), tmp_path)
    ds = lance_ops.dataset(str(tmp_path)) if who == "ours" else lance.dataset(tmp_path)
    plan = ds.scanner(columns=[], filter="a < 50", with_row_id=True).analyze_plan()
    assert re.search(r"^\s*LanceRead:.*output_rows=50.*rows_scanned=100.*$", plan, re.MULTILINE), plan
    assert "projection=[a]" in ds.scanner(columns=[], filter="a < 50", with_row_id=True).explain_plan(True)


@pytest.mark.parametrize("who", ["ours", "theirs"])
def test_indexed_scan_reads_the_selected_rows(tmp_path: Path, who: str) -> None:
    lance.write_dataset(pa.table({"filter": range(100)}), tmp_path).create_scalar_index("filter", "BTREE")
    ds = lance_ops.dataset(str(tmp_path)) if who == "ours" else lance.dataset(tmp_path)
    plan = ds.scanner(filter="filter = 10").analyze_plan()
    assert re.search(r"^\s*LanceRead:.*output_rows=1.*rows_scanned=1.*$", plan, re.MULTILINE), plan


def test_deleted_rows_and_limits(tmp_path: Path) -> None:
    lance.write_dataset(pa.table({"a": range(100)}), tmp_path, max_rows_per_file=40)
    lance.dataset(tmp_path).delete("a < 10")
    plan = lance_ops.dataset(str(tmp_path)).scanner(filter="a >= 50", limit=5).analyze_plan()
    metrics = r"metrics=\[output_rows=5, rows_scanned=90, bytes_read=\d+, iops=\d+, requests=\d+\]"
    assert re.search(r"LanceRead:.*" + metrics, plan), plan
