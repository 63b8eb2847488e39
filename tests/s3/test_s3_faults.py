"""lance_ops on S3 under injected faults, and its request economy beside pylance's.

lance_ops reaches the moto server through the fault-injecting proxy (:mod:`tests.s3.proxy`); pylance,
the oracle, reads the server directly. Under faults every operation either succeeds or raises
:class:`~lance_ops.errors.StorageError`; no version is ever visible half-written; an ambiguous
manifest claim (the server took it, the answer was lost) is neither a false conflict nor a double
commit; and pylance afterwards reads every version with the right row count.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_ops
from lance_ops.errors import StorageError
from lance_ops.io.retry import DEFAULT_RETRY
from tests.s3.conftest import S3Location, storage_options
from tests.s3.proxy import FaultProxy, running_proxy

pytestmark = [pytest.mark.s3, pytest.mark.interop]


@pytest.fixture
def proxy(s3_endpoint: str) -> Iterator[FaultProxy]:
    with running_proxy(s3_endpoint, max_seconds=120) as running:
        yield running


@pytest.fixture
def faulty(s3: S3Location, proxy: FaultProxy) -> dict[str, str]:
    """lance_ops' storage options for ``s3``'s bucket, through the proxy."""
    return storage_options(proxy.endpoint)


def _table(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in ids]})


def _history(s3: S3Location) -> dict[int, int]:
    """Every version pylance sees (straight from the server) and its row count."""
    latest = lance.dataset(s3.uri(), storage_options=s3.storage_options)
    return {
        int(v["version"]): lance.dataset(
            s3.uri(), version=v["version"], storage_options=s3.storage_options
        ).count_rows()
        for v in latest.versions()
    }


def _operations(s3: S3Location, options: dict[str, Any]) -> dict[str, Callable[[int], Any]]:
    """lance_ops' write / append / delete / compaction / scan of ``s3``'s dataset; each takes a step
    number (an append adds ids from ``100 * step``)."""
    uri = s3.uri()

    def open_() -> lance_ops.LanceDataset:
        return lance_ops.dataset(uri, storage_options=options)

    return {
        "write": lambda _: lance_ops.write_dataset(
            _table(0, 30), uri, storage_options=options, max_rows_per_file=10
        ),
        "append": lambda step: lance_ops.write_dataset(
            _table(100 * step, 10), uri, storage_options=options, mode="append"
        ),
        "delete": lambda _: open_().delete("id < 5"),
        "compact": lambda _: open_().optimize.compact_files(),
        "scan": lambda _: open_().to_table(),
    }


@pytest.mark.parametrize("kind", ["500", "503", "reset", "truncate"])
def test_transient_faults_are_retried(
    s3: S3Location, proxy: FaultProxy, faulty: dict[str, str], kind: str
) -> None:
    """Two failed requests before each operation: every operation succeeds, pylance agrees."""
    operations = _operations(s3, faulty)
    for name, rows in (("write", 30), ("append", 40), ("delete", 35), ("compact", 35), ("scan", 35)):
        proxy.clear()
        fault = proxy.inject(kind, count=2)
        result = operations[name](1)
        assert fault.injected == 2, name
        if name == "scan":
            assert result.num_rows == rows
        assert lance.dataset(s3.uri(), storage_options=s3.storage_options).count_rows() == rows, name
    history = _history(s3)
    assert list(history) == list(range(1, len(history) + 1))
    assert list(history.values())[:3] == [30, 40, 35] and set(list(history.values())[2:]) == {35}


@pytest.mark.parametrize("seed", [1, 2])
def test_random_faults_never_expose_a_partial_version(
    s3: S3Location, proxy: FaultProxy, faulty: dict[str, str], seed: int
) -> None:
    """A seeded share of requests fails in every way: each operation succeeds or raises StorageError,
    makes at most one version (a compaction two), and every version pylance sees holds the rows its
    operation meant."""
    lance_ops.write_dataset(_table(0, 30), s3.uri(), storage_options=faulty, max_rows_per_file=10)
    for index, kind in enumerate(("500", "503", "reset", "truncate")):
        proxy.inject(kind, rate=0.04, seed=seed * 10 + index, limit=40)
    options = faulty
    meant = {1: 30}
    # (operation, rows it leaves given the rows before it)
    changes: list[tuple[str, Callable[[int], int]]] = [
        ("append", lambda n: n + 10),
        ("delete", lambda n: n - 5),
        ("compact", lambda n: n),
        ("append", lambda n: n + 10),
        ("scan", lambda n: n),
    ]
    for step, (name, rows_after) in enumerate(changes):
        rows_before = meant[max(meant)]
        call = _operations(s3, options)[name]
        try:
            result = call(step + 1)
        except StorageError:
            result = None
        history = _history(s3)
        new = sorted(set(history) - set(meant))
        # a compaction commits twice, as pylance's: ReserveFragments, then the Rewrite
        assert len(new) <= {"scan": 0, "compact": 2}.get(name, 1), name
        meant.update({version: rows_after(rows_before) for version in new})
        assert history == meant, name
        if name == "scan" and result is not None:
            assert result.num_rows == rows_before
    assert sum(f.injected for f in proxy.faults) > 0


@pytest.mark.parametrize("kind", ["reset", "500", "truncate"])
def test_ambiguous_manifest_claim_is_one_commit(
    s3: S3Location, proxy: FaultProxy, faulty: dict[str, str], kind: str
) -> None:
    """The server takes the conditional PUT of the manifest, its answer is lost: the retry finds our
    bytes there, so the append is version 2 (not a conflict, not versions 2 and 3)."""
    lance_ops.write_dataset(_table(0, 10), s3.uri(), storage_options=faulty)
    fault = proxy.inject(kind, count=1, forward_first=True, operations=frozenset({"PUT if-none-match"}))
    ds = lance_ops.write_dataset(_table(10, 5), s3.uri(), storage_options=faulty, mode="append")
    assert fault.injected == 1
    assert ds.version == 2
    assert _history(s3) == {1: 10, 2: 15}


@pytest.mark.parametrize("kind", ["503", "reset", "truncate"])
def test_persistent_failure_is_a_storage_error(
    s3: S3Location, proxy: FaultProxy, faulty: dict[str, str], kind: str
) -> None:
    """A store that keeps failing gives StorageError (never a botocore / aiohttp error) after
    lance_ops' own bounded retries only (botocore and s3fs do not retry beneath them: each failing
    request is sent at most ``max_attempts`` times, not the product of three retry budgets), and
    leaves no new version."""
    lance_ops.write_dataset(_table(0, 10), s3.uri(), storage_options=faulty)
    fault = proxy.inject(kind, count=1000, operations=frozenset({"PUT if-none-match", "GET", "GET range"}))
    with pytest.raises(StorageError):
        lance_ops.write_dataset(_table(10, 5), s3.uri(), storage_options=faulty, mode="append")
    with pytest.raises(StorageError):
        lance_ops.dataset(s3.uri(), storage_options=faulty).to_table()
    # two operations, each giving up after max_attempts tries of one request (a reset one may be
    # sent again by the HTTP client, on a fresh connection); stacked driver retries would send
    # each at least 5 times as often
    assert 0 < fault.injected <= 2 * 2 * DEFAULT_RETRY.max_attempts + DEFAULT_RETRY.max_attempts
    assert _history(s3) == {1: 10}


def test_truncated_ranges_are_read_again(s3: S3Location, proxy: FaultProxy, faulty: dict[str, str]) -> None:
    """Bodies cut short (the connection drops before ``Content-Length`` bytes) are never decoded."""
    lance_ops.write_dataset(_table(0, 100), s3.uri(), storage_options=faulty, max_rows_per_file=25)
    # one short of lance_ops' attempts (the only retries: the drivers' own are off), so that the
    # first read, cut short every time, still gets through
    cuts = DEFAULT_RETRY.max_attempts - 1
    fault = proxy.inject("truncate", count=cuts, operations=frozenset({"GET", "GET range"}))
    table = lance_ops.dataset(s3.uri(), storage_options=faulty).to_table()
    assert fault.injected == cuts
    assert table.column("id").to_pylist() == list(range(100))


def _large_files(s3: S3Location) -> pa.Table:
    """Written by pylance straight to the server: 3 fragments whose data files are larger than a
    remote store reads whole when opening one, so a full scan fetches them whole, ahead."""
    words = np.random.default_rng(3).integers(0, 2**62, (9000, 4), dtype=np.int64)
    table = pa.table({"id": pa.array(range(9000), pa.int64()), "text": [w.tobytes().hex() for w in words]})
    lance.write_dataset(table, s3.uri(), storage_options=s3.storage_options, max_rows_per_file=3000)
    return table


@pytest.mark.parametrize("kind", ["500", "503", "reset", "truncate"])
def test_files_fetched_ahead_are_read_again_after_transient_faults(
    s3: S3Location, proxy: FaultProxy, faulty: dict[str, str], kind: str
) -> None:
    """The first requests of the files a scan fetches ahead fail (or come back cut short): each is
    made again under the retry policy and the scan returns pylance's rows."""
    table = _large_files(s3)
    ds = lance_ops.dataset(s3.uri(), storage_options=faulty)
    fault = proxy.inject(kind, count=2, operations=frozenset({"GET"}))
    assert ds.to_table().equals(table)
    assert fault.injected == 2


def test_files_fetched_ahead_failing_for_good_are_a_storage_error(
    s3: S3Location, proxy: FaultProxy, faulty: dict[str, str]
) -> None:
    _large_files(s3)
    ds = lance_ops.dataset(s3.uri(), storage_options=faulty)
    fault = proxy.inject("503", count=1000, operations=frozenset({"GET", "GET range"}))
    with pytest.raises(StorageError):
        ds.to_table()
    # the first file's first request and its retries (the others' first requests may have gone too)
    assert DEFAULT_RETRY.max_attempts < fault.injected <= 3 * (1 + DEFAULT_RETRY.max_attempts)


def _bench() -> Any:
    path = Path(__file__).resolve().parents[2] / "bench" / "object_store.py"
    spec = importlib.util.spec_from_file_location("bench_object_store", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_request_economy_report(
    s3_endpoint: str, proxy: FaultProxy, capsys: pytest.CaptureFixture[str]
) -> None:
    """REPORTS the requests of open+count, scan, take and compaction of both systems (bench/object_store.py
    runs the same with timings); it checks only that both reach the server for each operation that
    reads files not read before (a warm handle may serve its reads from files it holds)."""
    bench = _bench()
    results = bench.run_workloads(proxy, s3_endpoint, fragments=10, rows=200)
    with capsys.disabled():
        print("\n" + bench.report(results))
    for op, by_system in results.items():
        if op not in bench.WARM_OPERATIONS:
            assert all(measured.total > 0 for measured in by_system.values()), op
