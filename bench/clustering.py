"""Clustering compaction (L20): bytes read and time of selective filters before / after clustering.

A table in arrival order (``id`` ascending, ``day`` uniform over 365 days, a float and a 24-byte
string payload) is written by lance_ops as ``--fragments`` fragments. Per layout:

* ``arrival``: as written;
* ``sort(day)``: ``compact_files(cluster_by=["day"])``;
* ``zorder(day,id)``: ``compact_files(cluster_by=["day", "id"], cluster_mode="zorder")``;

each on its own copy, with the clustering time (lance_ops) and, for reference, the time of a plain
pylance ``compact_files`` rewriting every row of a copy (all fragments into one). Then, per
filter (``day = 100``, about 0.3 % of the rows; ``id BETWEEN n/2 AND n/2 + n/100``, 1 %), the bytes
the process read (``rchar`` of ``/proc/self/io``: every byte read from files, cached or not), the
best time of ``--repeat`` runs of ``ds.to_table(filter=...)`` on a fresh handle, and the overlap
depth of the filter's column (``ds.stats.clustering``). Peak RSS is the process's high-water mark
after each clustering (it only grows).

    .venv/bin/python bench/clustering.py --rows 1000000 --fragments 20
"""

from __future__ import annotations

import argparse
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import lance  # noqa: E402

import lance_ops  # noqa: E402

FILTERS = ("day = 100", "id BETWEEN {lo} AND {hi}")
LAYOUTS = {"arrival": None, "sort(day)": (["day"], "sort"), "zorder(day,id)": (["day", "id"], "zorder")}


def rchar() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise RuntimeError("no rchar in /proc/self/io")


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def make(rows: int, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "id": pa.array(np.arange(rows), pa.int64()),
            "day": pa.array(rng.integers(0, 365, rows), pa.int32()),
            "x": pa.array(rng.normal(size=rows)),
            "payload": pa.array(np.char.add("payload-", rng.integers(0, 10**15, rows).astype(str)).tolist()),
        }
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--fragments", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    per_fragment = -(-args.rows // args.fragments)
    lo = args.rows // 2
    filters = [f.format(lo=lo, hi=lo + args.rows // 100 - 1) for f in FILTERS]
    base = Path(tempfile.mkdtemp(prefix="bench-clustering-"))
    try:
        source = str(base / "source")
        lance_ops.write_dataset(make(args.rows), source, max_rows_per_file=per_fragment)
        pylance_copy = str(base / "pylance")
        shutil.copytree(source, pylance_copy)
        started = time.perf_counter()
        lance.dataset(pylance_copy).optimize.compact_files(target_rows_per_fragment=args.rows)
        print(f"pylance compact_files rewriting every row (reference): {time.perf_counter() - started:.2f} s")
        print(f"rows={args.rows} fragments={args.fragments}")
        print(
            "| layout | clustering s | peak RSS MiB | filter | rows | bytes read | best s | overlap depth |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for name, spec in LAYOUTS.items():
            uri = str(base / name.replace("(", "_").replace(")", "").replace(",", "_"))
            shutil.copytree(source, uri)
            seconds = 0.0
            if spec is not None:
                keys, mode = spec
                started = time.perf_counter()
                lance_ops.dataset(uri).optimize.compact_files(
                    target_rows_per_fragment=per_fragment, cluster_by=keys, cluster_mode=mode
                )
                seconds = time.perf_counter() - started
            rss = peak_rss_mib()
            for predicate in filters:
                column = predicate.split()[0]
                depth = lance_ops.dataset(uri).stats.clustering(column)["average_overlap_depth"]
                best, read, rows = float("inf"), 0, 0
                for _ in range(args.repeat):
                    ds = lance_ops.dataset(uri)
                    before = rchar()
                    started = time.perf_counter()
                    rows = ds.to_table(filter=predicate).num_rows
                    best = min(best, time.perf_counter() - started)
                    read = rchar() - before
                print(
                    f"| {name} | {seconds:.2f} | {rss:.0f} | `{predicate}` | {rows} | "
                    f"{read / 2**20:.1f} MiB | {best:.3f} | {depth:.2f} |"
                )
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
