"""The change-feed sensor (``assets.change_feed``) with Dagster's in-process APIs: evaluated with a
real instance and the dataset's resource, commits in between, its requests run by a downstream job
that reads the feed; cleaned-up and re-created datasets give full refreshes.

No ``from __future__ import annotations`` (Dagster inspects the op's context annotation)."""

import datetime as dt
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest

import lance_ops
from assets.change_feed import (
    END,
    FULL,
    INCREMENTAL,
    MODE,
    START,
    ChangeRange,
    change_feed_sensor,
    change_range,
    read_changes,
)
from assets.config import DatasetConfig
from assets.resources import LanceDatasetResource


def table(ids: list[int], value: float = 0.0) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([float(i) + value for i in ids])})


class Harness:
    """The sensor of one dataset, its downstream job (which records the feed it reads) and an
    instance; ``tick()`` evaluates the sensor with the cursor of the previous tick."""

    def __init__(self, tmp_path: Path, instance: dg.DagsterInstance) -> None:
        self.uri = str(tmp_path / "events.lance")
        self.instance = instance
        self.resource = LanceDatasetResource(uri=self.uri)
        self.seen: list[pa.Table] = []
        seen = self.seen
        resource = self.resource

        @dg.op
        def consume(context: dg.OpExecutionContext) -> None:
            span = change_range(dict(context.run.tags))
            seen.append(read_changes(resource.load(), span))

        @dg.job(name="events_downstream")
        def downstream() -> None:
            consume()

        self.job = downstream
        config = DatasetConfig(name="events", uri=self.uri)
        self.sensor = change_feed_sensor(config, downstream)
        self.cursor: str | None = None

    def tick(self) -> Any:
        data = self.sensor.evaluate_tick(
            dg.build_sensor_context(
                instance=self.instance, resources={"lance_events": self.resource}, cursor=self.cursor
            )
        )
        self.cursor = data.cursor if data.cursor is not None else self.cursor
        return data

    def run(self, request: dg.RunRequest) -> pa.Table:
        result = self.job.execute_in_process(instance=self.instance, tags=request.tags)
        assert result.success
        return self.seen[-1]


@pytest.fixture
def harness(tmp_path: Path, instance: dg.DagsterInstance) -> Harness:
    return Harness(tmp_path, instance)


def only_request(data: Any) -> dg.RunRequest:
    (request,) = data.run_requests
    return request


def kinds(feed: pa.Table) -> list[tuple[int, str, int]]:
    return sorted(
        zip(
            feed.column("_commit_version").to_pylist(),
            feed.column("_change_type").to_pylist(),
            feed.column("id").to_pylist(),
            strict=True,
        )
    )


def test_sensor_requests_each_new_range_once(harness: Harness) -> None:
    import lance

    assert "no dataset" in str(harness.tick().skip_message)
    assert harness.cursor is None
    ds = lance_ops.write_dataset(table([1, 2, 3]), harness.uri)
    first = only_request(harness.tick())
    assert harness.cursor == "1"
    assert first.run_key == "events-changes-incremental-1-1"
    assert {k: first.tags[k] for k in (START, END, MODE)} == {START: "1", END: "1", MODE: INCREMENTAL}
    assert first.tags["lance/changes.insert"] == "3" and first.tags["lance/changes.rows"] == "3"
    assert kinds(harness.run(first)) == [(1, "insert", 1), (1, "insert", 2), (1, "insert", 3)]

    # Nothing new: skipped, the cursor stays.
    data = harness.tick()
    assert not data.run_requests and "already processed" in str(data.skip_message)
    assert harness.cursor == "1"

    # Three commits between ticks (one by pylance): one request for 2..4 with their counts.
    ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(table([2, 7], 10))
    lance.dataset(harness.uri).delete("id = 1")
    ds = lance_ops.dataset(harness.uri)
    ds.insert(table([8]))
    second = only_request(harness.tick())
    assert harness.cursor == "4"
    assert (second.tags[START], second.tags[END]) == ("2", "4")
    counts = {k: second.tags[f"lance/changes.{k}"] for k in ("insert", "update", "delete", "rows")}
    assert counts == {"insert": "2", "update": "1", "delete": "1", "rows": "5"}
    assert kinds(harness.run(second)) == [
        (2, "insert", 7),
        (2, "update_postimage", 2),
        (2, "update_preimage", 2),
        (3, "delete", 1),
        (4, "insert", 8),
    ]
    assert sorted(lance.dataset(harness.uri).to_table().column("id").to_pylist()) == [2, 3, 7, 8]

    # A compaction changes no row: the cursor moves past it without a run.
    ds.optimize.compact_files()
    latest = lance_ops.dataset(harness.uri).version
    assert latest > 4
    data = harness.tick()
    assert not data.run_requests and "changed no row" in str(data.skip_message)
    assert harness.cursor == str(latest)
    # The same cursor gives the same range and run key, so the daemon does not start it twice.
    harness.cursor = "1"
    assert only_request(harness.tick()).run_key == f"events-changes-incremental-2-{latest}"


def test_sensor_full_refresh_after_cleanup_and_recreation(harness: Harness) -> None:
    import lance

    ds = lance_ops.write_dataset(table([1, 2]), harness.uri)
    harness.run(only_request(harness.tick()))
    for i in range(3):
        ds.insert(table([10 + i]))
    # The cursor's version (1) is cleaned up before the sensor looks again.
    ds.cleanup_old_versions(older_than=dt.timedelta(0), retain_versions=1)
    full = only_request(harness.tick())
    assert {k: full.tags[k] for k in (START, END, MODE)} == {START: "4", END: "4", MODE: FULL}
    assert "lance/changes.rows" not in full.tags
    feed = harness.run(full)
    assert kinds(feed) == [(4, "insert", i) for i in (1, 2, 10, 11, 12)]
    assert harness.cursor == "4"
    assert not harness.tick().run_requests

    # The dataset is deleted and written anew: its latest version is below the cursor.
    lance_ops.write_dataset(table([5]), harness.uri + ".new")
    import shutil

    shutil.rmtree(harness.uri)
    shutil.move(harness.uri + ".new", harness.uri)
    again = only_request(harness.tick())
    assert (again.tags[MODE], again.tags[END]) == (FULL, "1")
    assert kinds(harness.run(again)) == [(1, "insert", 5)]
    assert lance.dataset(harness.uri).to_table().column("id").to_pylist() == [5]


def test_change_range_refuses_other_runs() -> None:
    with pytest.raises(dg.Failure, match="not a change-feed run"):
        change_range({"dagster/run_key": "x"})
    with pytest.raises(dg.Failure, match="unknown change-feed mode"):
        change_range({START: "1", END: "2", MODE: "sometimes"})
    assert change_range(ChangeRange(2, 3, INCREMENTAL).tags()) == ChangeRange(2, 3, INCREMENTAL)


def test_definitions_wire_a_change_feed_job(tmp_path: Path, instance: dg.DagsterInstance) -> None:
    """``build_definitions(change_feed_jobs=)`` adds the job and its sensor, bound to the dataset's
    resource; an unknown dataset name is refused."""
    import lance
    from dagster_pyspark import PySparkResource

    from assets.definitions import build_definitions
    from lance_ops.errors import InvalidArgumentError
    from tests.assets.conftest import dataset_entry, write_datasets_file

    @dg.op
    def noop() -> None:
        pass

    @dg.job(name="sales_feed_consumer")
    def consumer() -> None:
        noop()

    path = write_datasets_file(tmp_path, dataset_entry())
    defs = build_definitions(path, PySparkResource(spark_config={}), change_feed_jobs={"sales": consumer})
    repo = defs.get_repository_def()
    sensor = repo.get_sensor_def("sales_change_feed_sensor")
    assert sensor.job_name == "sales_feed_consumer" and repo.has_job("sales_feed_consumer")
    uri = str(tmp_path / "sales.lance")
    lance.write_dataset(table([1, 2]), uri)  # written by pylance, read by the sensor
    resources = {"lance_sales": repo.get_top_level_resources()["lance_sales"]}
    data = sensor.evaluate_tick(dg.build_sensor_context(instance=instance, resources=resources))
    assert data.cursor == "1" and only_request(data).tags["lance/changes.insert"] == "2"
    with pytest.raises(InvalidArgumentError, match="nope"):
        build_definitions(path, PySparkResource(spark_config={}), change_feed_jobs={"nope": consumer})
