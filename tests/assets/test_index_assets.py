"""The ``indices`` maintenance asset and the ``indices_coverage`` check on a dataset carrying a
pylance-built index (L15): appended days leave rows unindexed and the check fails past the
configured share; the nightly job compacts (remapping the index), catches the index up, and the
check passes; pylance answers from the index.

No ``from __future__ import annotations`` here, to match the asset modules.
"""

from collections.abc import Callable
from pathlib import Path

import dagster as dg
import pytest
from pyspark.sql import SparkSession

import lance_ops
from tests.assets.conftest import dataset_entry
from tests.assets.test_assets import DATASET, checks, ingest, key, metadata, run, uri_of

pytestmark = [pytest.mark.dagster, pytest.mark.spark, pytest.mark.interop]


def test_indices_asset_and_coverage_check(
    spark: SparkSession,
    make_defs: Callable[..., dg.Definitions],
    instance: dg.DagsterInstance,
    tmp_path: Path,
) -> None:
    import lance

    entry = dataset_entry()
    entry["maintenance"]["indices"] = {"max_unindexed_ratio": 0.3}
    defs, uri = make_defs(entry), uri_of(tmp_path)
    ingest(defs, instance, "2026-11-01")
    ingest(defs, instance, "2026-11-02")
    lance.dataset(uri).create_scalar_index("id", "BTREE")
    lance.dataset(uri).create_scalar_index("category", "BITMAP")
    ingest(defs, instance, "2026-11-03")
    ingest(defs, instance, "2026-11-04")  # half of the rows are now unindexed

    before = run(defs, [DATASET], instance)
    assert checks(before)["indices_coverage"] is False
    (evaluation,) = [c for c in before.get_asset_check_evaluations() if c.check_name == "indices_coverage"]
    assert evaluation.metadata["lance/indices/unindexed_rows"].value == 200  # 2 indices x 100 rows
    assert evaluation.metadata["lance/indices/max_unindexed_ratio"].value == pytest.approx(0.5)

    result = defs.resolve_job_def("sales_maintenance").execute_in_process(instance=instance)
    assert result.success
    step = metadata(result, key("indices"))
    assert step["lance/indices/count"] == 2
    assert step["lance/indices/unindexed_rows_before"] == 200
    assert step["lance/indices/unindexed_rows"] == 0
    assert step["lance/indices/extended"] == 2
    assert step["lance/noop"] is False
    ds = lance.dataset(uri)
    for predicate in ("id = 120", "id > 30 AND id < 170", "category = 'b'"):
        indexed = ds.to_table(filter=predicate, columns=["id"])["id"].to_pylist()
        scanned = ds.to_table(filter=predicate, columns=["id"], use_scalar_index=False)["id"].to_pylist()
        assert sorted(indexed) == sorted(scanned), predicate
    after = run(defs, [DATASET], instance)
    assert checks(after)["indices_coverage"] is True

    again = defs.resolve_job_def("sales_maintenance").execute_in_process(instance=instance)
    assert metadata(again, key("indices"))["lance/noop"] is True  # run twice: nothing to do
    assert lance_ops.dataset(uri).stats.index_stats("id_idx")["num_unindexed_rows"] == 0
