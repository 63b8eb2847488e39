"""Numeric scan: a dataset scan of an all-numeric table, lance_ops beside pylance (run on demand).

The table is bench/spark_jobs.py's (``id`` int64 0..n-1, ``a`` a small-range int64, ``b`` a wide
int64, ``c`` a float64), written once by pylance (``--fragments`` fragments) into ``--cache``
and reused by later runs. Each round scans it with both systems, interleaved in this process:
``id`` only, then all columns, each the best of ``--repeats`` (wall with ``time.perf_counter``,
CPU with ``time.process_time``, which counts every thread of the process). ``--mixed`` also
scans bench/datagen.py's mixed table (written by lance_ops into the cache). ``--profile`` prints
a cProfile of lance_ops' scans instead.

    nice -n 5 .venv/bin/python bench/numeric_scan.py --rows 10000000 --repeats 5 --rounds 2
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pyarrow as pa

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import lance  # noqa: E402  - the oracle and the baseline (bench/ only)
from spark_jobs import make_table as numeric_table  # noqa: E402  - imports pyspark, starts no JVM

import lance_ops  # noqa: E402


def cached_numeric(cache: Path, rows: int, fragments: int) -> str:
    path = cache / f"numeric-{rows}-{fragments}.lance"
    if not path.exists():
        lance.write_dataset(numeric_table(rows), str(path), max_rows_per_file=-(-rows // fragments))
    return str(path)


def cached_mixed(cache: Path, rows: int) -> str:
    from datagen import make_table  # noqa: PLC0415 - only with --mixed

    path = cache / f"mixed-{rows}.lance"
    if not path.exists():
        lance_ops.write_dataset(make_table("mixed", rows, 0), str(path))
    return str(path)


def best(repeats: int, run: Callable[[], pa.Table]) -> tuple[float, float, pa.Table]:
    """Best wall and best CPU seconds of ``repeats`` runs, and the last result."""
    walls, cpus = [], []
    out = None
    for _ in range(repeats):
        c0, w0 = time.process_time(), time.perf_counter()
        out = run()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    assert out is not None
    return min(walls), min(cpus), out


def scans(path: str, columns: list[str] | None) -> dict[str, Callable[[], pa.Table]]:
    return {
        "lance_ops": lambda: lance_ops.dataset(path).to_table(columns=columns),
        "pylance": lambda: lance.dataset(path).to_table(columns=columns),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--fragments", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--cache", default=os.environ.get("BENCH_CACHE", "/tmp/lance_ops_bench_cache"))
    parser.add_argument("--mixed", action="store_true", help="also scan the mixed table (datagen.py)")
    parser.add_argument("--profile", action="store_true", help="cProfile lance_ops' scans instead")
    args = parser.parse_args(argv)
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    cases = {
        "numeric id": (cached_numeric(cache, args.rows, args.fragments), ["id"]),
        "numeric all": (cached_numeric(cache, args.rows, args.fragments), None),
    }
    if args.mixed:
        cases["mixed all"] = (cached_mixed(cache, args.rows), None)
    if args.profile:
        prof = cProfile.Profile()
        for path, columns in cases.values():
            scans(path, columns)["lance_ops"]()  # warm: numba's start, page cache
            prof.enable()
            scans(path, columns)["lance_ops"]()
            prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
        return 0
    print(f"rows={args.rows} fragments={args.fragments} repeats={args.repeats} load={os.getloadavg()}")
    for name, (path, columns) in cases.items():  # warm up both, and check they agree
        got = {system: run() for system, run in scans(path, columns).items()}
        if not got["lance_ops"].equals(got["pylance"]):
            raise SystemExit(f"{name}: lance_ops and pylance read different tables")
    print("| round | case | lance_ops wall / CPU s | pylance wall / CPU s | ratio wall / CPU |")
    print("| --- | --- | --- | --- | --- |")
    for round_ in range(args.rounds):
        for name, (path, columns) in cases.items():
            cells = {}
            for system, run in scans(path, columns).items():
                wall, cpu, _ = best(args.repeats, run)
                cells[system] = (wall, cpu)
            (ow, oc), (pw, pc) = cells["lance_ops"], cells["pylance"]
            print(
                f"| {round_ + 1} | {name} | {ow:.3f} / {oc:.3f} | {pw:.3f} / {pc:.3f} "
                f"| {ow / pw:.2f} / {oc / pc:.2f} |",
                flush=True,
            )
    print(f"load after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
