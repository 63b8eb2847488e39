"""Request economy on S3: requests and seconds of lance_ops and pylance on the same data (run on demand).

A moto S3 server is started on loopback with the counting proxy of ``tests/s3/proxy.py`` in front;
both libraries reach the server through the proxy (``aws_endpoint``), which counts requests by
operation. pylance writes the data straight to the server (not counted): one dataset of
``--fragments`` fragments of ``--rows`` rows each (int64 id, string name, float64 value), and
copies for the compactions (one per system and run, and one per system for a warm-up). Then, per
system, counted:

* ``open+count``: open the dataset and ``count_rows()``;
* ``scan``: ``to_table()`` of a dataset opened (and scanned) before: what a warm handle costs;
* ``take100``: ``take()`` of 100 random row indices (sorted), on that warm handle;
* ``open+scan``, ``open+take100``: the same on a dataset opened just before (no file read yet);
* ``compact``: ``optimize.compact_files()`` of a fresh copy (all fragments into one), opened just
  before (not counted), after an unmeasured compaction of another copy, so that one-time costs of
  the first compaction in a process (imports, compiled kernels loaded from numba's cache) are not
  counted.

``--latency-ms`` has the proxy delay every request, standing for the round trip of a real object
store (loopback has almost none, so there the server's own work per request dominates).

Each operation is run ``--repeat`` times per system, the systems taking turns (alternating which
goes first); the median time and the fewest requests are reported.

    .venv/bin/python bench/object_store.py
    .venv/bin/python bench/object_store.py --fragments 20 --rows 5000
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import lance  # noqa: E402

import lance_ops  # noqa: E402
from tests.s3.conftest import ACCESS_KEY, REGION, SECRET_KEY, _start_server, storage_options  # noqa: E402
from tests.s3.proxy import FaultProxy, running_proxy  # noqa: E402

OPERATIONS = ("open+count", "scan", "take100", "open+scan", "open+take100", "compact")
# Operations on a handle that has read the files before: a system caching small files whole may
# answer them with no request at all.
WARM_OPERATIONS = ("scan", "take100")
SYSTEMS = {"lance_ops": lance_ops, "pylance": lance}


@dataclass(frozen=True)
class Measured:
    """Requests (by operation) and seconds of one operation of one system."""

    requests: dict[str, int]
    seconds: float

    @property
    def total(self) -> int:
        return sum(self.requests.values())


def make_table(rows: int, start: int) -> pa.Table:
    ids = np.arange(start, start + rows, dtype=np.int64)
    return pa.table(
        {
            "id": ids,
            "name": pa.array([f"name-{i:08d}" for i in ids]),
            "value": np.random.default_rng(start).random(rows),
        }
    )


def write_fragmented(uri: str, options: dict[str, str], fragments: int, rows: int) -> None:
    """A pylance dataset of ``fragments`` appends of ``rows`` rows (one fragment each)."""
    for index in range(fragments):
        lance.write_dataset(
            make_table(rows, index * rows), uri, mode="append" if index else "create", storage_options=options
        )


def create_bucket(endpoint: str) -> str:
    import boto3

    bucket = f"bench-{uuid.uuid4().hex[:12]}"
    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        region_name=REGION,
    )
    client.create_bucket(Bucket=bucket)
    client.close()
    return bucket


def measure(proxy: FaultProxy, fn: Callable[[], Any]) -> Measured:
    """Requests through ``proxy`` and seconds of one run of ``fn()``."""
    proxy.reset_counts()
    started = time.perf_counter()
    fn()
    seconds = time.perf_counter() - started
    return Measured(proxy.snapshot(), seconds)


def summarize(runs: list[Measured]) -> Measured:
    """The median time of ``runs`` and the requests of their fewest."""
    fewest = min(runs, key=lambda run: run.total)
    return Measured(fewest.requests, float(np.median([run.seconds for run in runs])))


def run_workloads(
    proxy: FaultProxy, server: str, fragments: int, rows: int, repeat: int = 1
) -> dict[str, dict[str, Measured]]:
    """Every operation of :data:`OPERATIONS` for both systems, ``repeat`` runs each, the systems
    interleaved (alternating which goes first), so that load on a shared machine falls on both
    alike: ``{operation: {system: Measured}}`` (median time)."""
    bucket = create_bucket(server)
    direct = storage_options(server)
    counted = storage_options(proxy.endpoint)
    shared = f"s3://{bucket}/shared.lance"
    write_fragmented(shared, direct, fragments, rows)
    indices = sorted(np.random.default_rng(0).choice(fragments * rows, 100, replace=False).tolist())
    opened = {name: module.dataset(shared, storage_options=counted) for name, module in SYSTEMS.items()}
    workloads: dict[str, Callable[[str, Any, int], Callable[[], Any]]] = {
        "open+count": lambda name, m, _: lambda: m.dataset(shared, storage_options=counted).count_rows(),
        "scan": lambda name, m, _: opened[name].to_table,
        "take100": lambda name, m, _: lambda: opened[name].take(indices),
        "open+scan": lambda name, m, _: lambda: m.dataset(shared, storage_options=counted).to_table(),
        "open+take100": lambda name, m, _: lambda: m.dataset(shared, storage_options=counted).take(indices),
    }
    for name in SYSTEMS:
        opened[name].to_table()  # the warm handles have read the files once
    # Compaction: a fresh copy per system and run, and one unmeasured warm-up per system.
    copies = {
        (name, run): f"s3://{bucket}/compact-{name}-{run}.lance"
        for name in SYSTEMS
        for run in range(-1, repeat)
    }
    for uri in copies.values():
        write_fragmented(uri, direct, fragments, rows)
    for name, module in SYSTEMS.items():
        module.dataset(copies[name, -1], storage_options=direct).optimize.compact_files()

    def compaction(name: str, module: Any, run: int) -> Callable[[], Any]:
        target = module.dataset(copies[name, run], storage_options=counted)
        return target.optimize.compact_files

    workloads["compact"] = compaction
    runs: dict[str, dict[str, list[Measured]]] = {op: {name: [] for name in SYSTEMS} for op in OPERATIONS}
    for op in OPERATIONS:
        for run in range(repeat):
            order = list(SYSTEMS.items()) if run % 2 == 0 else list(reversed(SYSTEMS.items()))
            for name, module in order:
                runs[op][name].append(measure(proxy, workloads[op](name, module, run)))
    return {op: {name: summarize(r) for name, r in by_system.items()} for op, by_system in runs.items()}


def _counts(requests: dict[str, int]) -> str:
    return ", ".join(f"{op} {n}" for op, n in sorted(requests.items()))


def report(results: dict[str, dict[str, Measured]]) -> str:
    """A markdown table of requests, seconds and lance_ops / pylance ratios, and the requests by kind."""
    lines = [
        "| operation | lance_ops requests | pylance requests | ratio | lance_ops s | pylance s | ratio |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for op, by_system in results.items():
        ours, theirs = by_system["lance_ops"], by_system["pylance"]
        lines.append(
            f"| {op} | {ours.total} | {theirs.total} | {ours.total / max(theirs.total, 1):.2f} "
            f"| {ours.seconds:.3f} | {theirs.seconds:.3f} | {ours.seconds / theirs.seconds:.2f} |"
        )
    lines += ["", "Requests by kind:", ""]
    for op, by_system in results.items():
        for system, measured in by_system.items():
            lines.append(f"- {op}, {system}: {_counts(measured.requests)}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fragments", type=int, default=10)
    parser.add_argument("--rows", type=int, default=1000, help="rows per fragment")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument(
        "--latency-ms",
        type=float,
        default=0.0,
        help="delay the proxy adds to every request, standing for a real store's round trip",
    )
    args = parser.parse_args(argv)
    process, server = _start_server()
    try:
        with running_proxy(server, max_seconds=1800, latency=args.latency_ms / 1000) as proxy:
            results = run_workloads(proxy, server, args.fragments, args.rows, args.repeat)
    finally:
        process.terminate()
        process.wait(timeout=10)
    print(
        f"{args.fragments} fragments x {args.rows} rows; moto S3 on loopback, through the counting proxy; "
        f"{args.latency_ms:g} ms added per request; median of {args.repeat} interleaved runs; "
        f"load average {os.getloadavg()[0]:.1f} at the end\n"
    )
    print(report(results))


if __name__ == "__main__":
    main()
