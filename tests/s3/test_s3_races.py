"""Processes of both libraries racing commits on one S3 dataset (moto on loopback).

Two lance_ops processes and two pylance processes (OS processes, not threads: each library's
commit path runs with its own caches and clients, as separate writers would) start together on one
dataset and each commit a few appends, a delete of rows it appended itself and, one process of each
library, a compaction. Conflicts are retried by the worker (a bounded number of times), as a user of
either library would. Afterwards:

* every appended row is there exactly once, except the rows a delete selected (each worker's
  delete only selects rows of its own earlier appends, so the expected set is known whatever the
  interleaving);
* the history is gapless (versions 1..N), every commit a worker was told about has its own version,
  and N is one more than the number of commits;
* every version opens in both libraries, and both read the same rows from it;
* pylance scans the latest version.

The race runs on a plain ``s3://`` dataset (the commit point is S3's conditional put) and on an
``s3+ddb://`` dataset (the commit point is DynamoDB).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pytest

import lance_ops
from tests.s3.conftest import ATTRIBUTES, KEY_SCHEMA, DdbLocation, S3Location, _client

pytestmark = [pytest.mark.s3, pytest.mark.interop]

ROWS = 20  # per append
APPENDS = 3  # per worker: two before its delete, one after
WORKER_SECONDS = 240.0
START_SECONDS = 120.0

# The worker: arguments as one JSON document in argv[1]; prints one JSON line of what it committed.
WORKER = r"""
import json, random, sys, time
spec = json.loads(sys.argv[1])
if spec["library"] == "lance":
    import lance as lib
else:
    import lance_ops as lib
    from lance_ops.errors import CommitConflictError
import pyarrow as pa
from pathlib import Path

uri, options, base = spec["uri"], spec["options"], spec["base"]


def conflict(exc):
    if spec["library"] == "lance_ops":
        return isinstance(exc, CommitConflictError)
    return "conflict" in str(exc).lower()


def retried(action):
    for attempt in range(spec["attempts"]):
        try:
            return action()
        except Exception as exc:
            if not conflict(exc) or attempt + 1 == spec["attempts"]:
                raise
            time.sleep(random.uniform(0.05, 0.3))


def append(j):
    ids = pa.array(range(base + 100 * j, base + 100 * j + spec["rows"]), pa.int64())
    data = pa.table({"id": ids, "worker": pa.array([base] * len(ids), pa.int64())})
    return retried(lambda: lib.write_dataset(data, uri, mode="append", storage_options=options).version)


def delete():
    def attempt():
        ds = lib.dataset(uri, storage_options=options)
        ds.delete(spec["delete"])
        return ds.version
    return retried(attempt)


def compact():
    def attempt():
        ds = lib.dataset(uri, storage_options=options)
        return ds.optimize.compact_files().fragments_removed > 0
    return retried(attempt)


Path(spec["ready"]).touch()
deadline = time.monotonic() + spec["start_seconds"]
while not Path(spec["go"]).exists():
    if time.monotonic() > deadline:
        sys.exit("never told to start")
    time.sleep(0.02)

versions, compacted = [append(0), append(1)], 0
if spec["compact"]:
    compacted += compact()
versions.append(delete())
versions.extend(append(j) for j in range(2, spec["appends"]))
print(json.dumps({"versions": versions, "compactions": compacted}))
"""


@dataclass(frozen=True)
class Worker:
    library: str
    base: int
    compact: bool

    @property
    def delete_predicate(self) -> str:
        # Rows of its first two appends only, which this worker committed before its delete.
        return f"id >= {self.base} AND id < {self.base + 200} AND id % 7 = 0"

    def appended(self) -> list[int]:
        return [self.base + 100 * j + i for j in range(APPENDS) for i in range(ROWS)]

    def expected(self) -> list[int]:
        return [i for i in self.appended() if not (i < self.base + 200 and i % 7 == 0)]


WORKERS = [
    Worker("lance_ops", 10_000, compact=True),
    Worker("lance_ops", 20_000, compact=False),
    Worker("lance", 30_000, compact=True),
    Worker("lance", 40_000, compact=False),
]


def _race(uri: str, options: dict[str, str], tmp_path: Path) -> list[dict[str, Any]]:
    """Run every worker against ``uri`` at once; their reports (a failing worker fails the test)."""
    go = tmp_path / "go"
    processes = []
    for n, worker in enumerate(WORKERS):
        spec = {
            "library": worker.library,
            "uri": uri,
            "options": options,
            "base": worker.base,
            "rows": ROWS,
            "appends": APPENDS,
            "delete": worker.delete_predicate,
            "compact": worker.compact,
            "attempts": 20,
            "ready": str(tmp_path / f"ready-{n}"),
            "go": str(go),
            "start_seconds": START_SECONDS,
        }
        processes.append(
            subprocess.Popen(
                [sys.executable, "-c", WORKER, json.dumps(spec)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    try:
        deadline = time.monotonic() + START_SECONDS
        while not all((tmp_path / f"ready-{n}").exists() for n in range(len(WORKERS))):
            assert time.monotonic() < deadline, "workers did not start"
            assert all(p.poll() is None for p in processes), "a worker exited before the start"
            time.sleep(0.05)
        go.touch()
        reports = []
        for worker, process in zip(WORKERS, processes, strict=True):
            out, err = process.communicate(timeout=WORKER_SECONDS)
            assert process.returncode == 0, f"{worker} failed:\n{err[-4000:]}"
            reports.append(json.loads(out.strip().splitlines()[-1]))
        return reports
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()


def _ids(ds: Any) -> list[int]:
    return sorted(ds.to_table(columns=["id"]).column("id").to_pylist())


def _check_outcome(uri: str, options: dict[str, str], reports: list[dict[str, Any]]) -> None:
    expected = sorted(i for worker in WORKERS for i in worker.expected())
    latest = lance.dataset(uri, storage_options=options)
    assert _ids(latest) == expected  # nothing lost, nothing duplicated, the deletes applied

    # Gapless, and every commit reported once; the rest are the compactions' commits (a Rewrite, each
    # attempt after reserving fragment ids: pylance's Python binding shows ReserveFragments as
    # BaseOperation).
    history = list(range(1, latest.version + 1))
    assert [v["version"] for v in latest.versions()] == history
    committed = [v for report in reports for v in report["versions"]]
    assert len(set(committed)) == len(committed), f"two commits reported one version: {sorted(committed)}"
    operations = {
        latest.version - age: type(t.operation).__name__
        for age, t in enumerate(latest.get_transactions(latest.version))
    }
    others = [operations[v] for v in history if v not in committed and v != 1]
    assert set(others) <= {"Rewrite", "BaseOperation"}, operations
    assert others.count("Rewrite") == sum(report["compactions"] for report in reports), operations
    ours = lance_ops.dataset(uri, storage_options=options)
    assert [v["version"] for v in ours.versions()] == history
    assert _ids(ours) == expected

    for version in history:
        theirs = lance.dataset(uri, version=version, storage_options=options)
        mine = lance_ops.dataset(uri, version=version, storage_options=options)
        assert _ids(mine) == _ids(theirs), f"version {version} differs between the libraries"


def _seed() -> pa.Table:
    return pa.table({"id": pa.array([0], pa.int64()), "worker": pa.array([0], pa.int64())})


def _race_and_check(uri: str, options: dict[str, str], tmp_path: Path) -> None:
    lance_ops.write_dataset(_seed(), uri, storage_options=options)
    lance_ops.dataset(uri, storage_options=options).delete("id = 0")  # an empty start: ids are the workers'
    reports = _race(uri, options, tmp_path)
    # Versions 1 and 2 are the seed and its delete; the workers' commits follow.
    reports.append({"versions": [2], "compactions": 0})
    _check_outcome(uri, options, reports)


def test_processes_of_both_libraries_race_on_s3(s3: S3Location, tmp_path: Path) -> None:
    _race_and_check(s3.uri(), s3.storage_options, tmp_path)


def test_processes_of_both_libraries_race_on_s3_ddb(s3: S3Location, tmp_path: Path) -> None:
    client = _client(s3, "dynamodb")
    table = f"lance-ops-{uuid.uuid4().hex[:12]}"
    client.create_table(
        TableName=table, KeySchema=KEY_SCHEMA, AttributeDefinitions=ATTRIBUTES, BillingMode="PAY_PER_REQUEST"
    )
    try:
        ddb = DdbLocation(s3, table, client)
        _race_and_check(ddb.uri(), ddb.storage_options, tmp_path)
        items = ddb.items()
        assert [int(item["version"]["N"]) for item in items] == list(range(1, len(items) + 1))
        assert all(item["path"]["S"].endswith(".manifest") for item in items)
    finally:
        client.delete_table(TableName=table)
