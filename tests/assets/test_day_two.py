"""A week of the pipeline through Dagster's in-process APIs, on the dataset each day leaves behind.

Every day ingests through the ``ingest`` asset and runs the ``<name>_maintenance`` job, as the
schedule would; the week holds a quiet day (nothing to do: every step a clean no-op, no new
version), maintenance run twice in a row, a schema change (a non-nullable column added from SQL)
followed by a backfill of earlier days, a day that fails and is re-run, and another writer's
commits (pylance). After every step pylance scans the whole dataset, and no non-nullable column
holds a null.

No ``from __future__ import annotations`` here, to match the asset modules.
"""

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG
from pyspark.sql import SparkSession

import jobs
import lance_ops
from tests.assets.conftest import dataset_entry

pytestmark = [pytest.mark.dagster, pytest.mark.spark, pytest.mark.interop]

ROWS = 40
MAINTENANCE_STEPS = ("encodings", "compaction", "indices", "statistics", "cleanup")


def scan(uri: str) -> pa.Table:
    """pylance's full scan of the latest version; non-nullable columns hold no null."""
    import lance

    table = lance.dataset(uri).to_table()
    for field in table.schema:
        if not field.nullable:
            assert table.column(field.name).null_count == 0, field.name
    assert table.num_rows == lance_ops.dataset(uri).count_rows()
    return table


def version(uri: str) -> int:
    return lance_ops.dataset(uri).version


def ingest(
    defs: dg.Definitions, instance: dg.DagsterInstance, first: str, last: str | None = None
) -> dg.ExecuteInProcessResult:
    """Ingest the day ``first`` (through ``last``: one single-run backfill); failures are returned."""
    job = defs.resolve_implicit_global_asset_job_def()
    key = dg.AssetKey(["lance", "sales", "ingest"])
    tags = {ASSET_PARTITION_RANGE_START_TAG: first, ASSET_PARTITION_RANGE_END_TAG: last or first}
    return job.execute_in_process(asset_selection=[key], instance=instance, tags=tags, raise_on_error=False)


def maintain(defs: dg.Definitions, instance: dg.DagsterInstance) -> dict[str, dict[str, Any]]:
    """The nightly maintenance job; each step's materialization metadata."""
    result = defs.resolve_job_def("sales_maintenance").execute_in_process(instance=instance)
    assert result.success
    out = {}
    for event in result.get_asset_materialization_events():
        metadata = event.step_materialization_data.materialization.metadata
        out[event.asset_key.path[-1]] = {k: v.value for k, v in metadata.items()}
    assert set(out) == set(MAINTENANCE_STEPS)
    return out


def test_a_week_of_days(
    spark: SparkSession,
    make_defs: Callable[..., dg.Definitions],
    instance: dg.DagsterInstance,
    tmp_path: Path,
) -> None:
    import lance

    uri = str(tmp_path / "sales.lance")

    def definitions(fill_missing: str) -> dg.Definitions:
        entry: Mapping[str, Any] = dataset_entry(
            ingest={
                "kind": "demo",
                "start_date": "2026-11-01",
                "rows_per_partition": ROWS,
                "fill_missing": fill_missing,
            },
            maintenance={
                "cron": "0 3 * * *",
                "compaction": {"target_rows_per_fragment": 100_000, "small_file_rows": 10},
                "cleanup": {"older_than_days": 0, "retain_versions": 3},
                "statistics": {"columns": ["id", "score"]},
            },
        )
        return make_defs(entry)

    # The operator starts strict: a day whose rows lack a column of the dataset fails.
    defs = definitions("error")

    # Day 1: the first ingest creates the dataset; maintenance finds it compact already.
    assert ingest(defs, instance, "2026-11-01").success
    scan(uri)
    day1 = maintain(defs, instance)
    assert day1["compaction"]["lance/noop"] is True
    assert day1["compaction"]["lance/plan/tasks"] == 0
    scan(uri)

    # Day 2: one more day, maintenance merges the two fragments; run twice, the second is quiet.
    assert ingest(defs, instance, "2026-11-02").success
    day2 = maintain(defs, instance)
    assert day2["compaction"]["lance/compaction/fragments_removed"] == 2
    assert len(lance.dataset(uri).get_fragments()) == 1
    scan(uri)
    settled = version(uri)
    again = maintain(defs, instance)
    assert version(uri) == settled
    assert all(again[step]["lance/noop"] for step in MAINTENANCE_STEPS), again
    assert again["cleanup"]["lance/cleanup/files_removed"] == 0
    report = Path(again["cleanup"]["lance/report"])
    assert report.is_file() and report.parent == tmp_path / "reports" / "sales"  # beside the dataset
    scan(uri)

    # Day 3: a quiet day, no new rows: maintenance succeeds and commits nothing.
    quiet = maintain(defs, instance)
    assert version(uri) == settled
    assert quiet["compaction"]["lance/noop"] is True
    scan(uri)

    # Day 4: the schema evolves (a non-nullable column computed from SQL); the strict ingest of the
    # day fails with the column's name and commits nothing.
    jobs.add_columns(spark, uri, {"score_x10": "score * 10"})
    evolved = lance.dataset(uri)
    assert not evolved.schema.field("score_x10").nullable
    failed = ingest(defs, instance, "2026-11-04")
    assert not failed.success
    message = str(failed.get_step_failure_events()[0].event_specific_data.error)
    assert "score_x10" in message
    assert version(uri) == evolved.version
    scan(uri)
    # The operator lets the ingest compute columns the source lacks; the re-run of the day
    # succeeds, and a backfill of the first two days recomputes them too (one Update).
    defs = definitions("compute")
    assert ingest(defs, instance, "2026-11-04").success
    backfill = ingest(defs, instance, "2026-11-01", "2026-11-02")
    assert backfill.success
    table = scan(uri)
    assert table.num_rows == 3 * ROWS
    assert pc.all(pc.equal(table.column("score_x10"), pc.multiply(table.column("score"), 10))).as_py()
    maintain(defs, instance)
    scan(uri)

    # Day 5: another writer (pylance) appends rows and deletes some; maintenance continues from
    # its versions, keeping both.
    other = scan(uri).slice(0, 5)
    other = other.set_column(0, "id", pc.add(other.column("id"), 10_000_000))
    lance.write_dataset(other, uri, mode="append")
    lance.dataset(uri).delete("id % 4 = 0")
    expected = sorted(scan(uri).column("id").to_pylist())
    day5 = maintain(defs, instance)
    assert day5["compaction"]["lance/noop"] is False
    assert sorted(scan(uri).column("id").to_pylist()) == expected
    assert len(lance.dataset(uri).get_fragments()) == 1
    assert len(lance.dataset(uri).versions()) <= 3 + len(lance.dataset(uri).tags.list())

    # Day 6: the same day ingested twice (a re-run) leaves one copy of it.
    assert ingest(defs, instance, "2026-11-06").success
    assert ingest(defs, instance, "2026-11-06").success
    ids = scan(uri).column("id").to_pylist()
    assert len(ids) == len(set(ids)) == len(expected) + ROWS
    maintain(defs, instance)

    # Day 7: maintenance twice more; the second run changes nothing.
    maintain(defs, instance)
    settled = version(uri)
    final = maintain(defs, instance)
    assert version(uri) == settled
    assert all(final[step]["lance/noop"] for step in MAINTENANCE_STEPS), final
    scan(uri)
