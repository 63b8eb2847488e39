"""Clustering compaction (L20): bytes read and time of selective filters before / after clustering.

A table in arrival order (``id`` ascending, ``day`` uniform over 365 days, a float and a 24-byte
string payload) is written by lance_ops as ``--fragments`` fragments. Per layout:

* ``arrival``: as written;
* ``sort(day)``: ``compact_files(cluster_by=["day"])``;
* ``zorder(day,id)``: ``compact_files(cluster_by=["day", "id"], cluster_mode="zorder")``;

each on its own copy, with the clustering time (lance_ops) and, for reference, the time of a plain
pylance ``compact_files`` rewriting every row of a copy (all fragments into one). Each clustering
and the pylance compaction run in a child process of their own: the time and the growth of its
peak RSS (``VmHWM``) from just before the operation are reported. Then, per filter (``day = 100``,
about 0.3 % of the rows; ``id BETWEEN n/2 AND n/2 + n/100``, 1 %), the bytes the process read
(``rchar`` of ``/proc/self/io``: every byte read from files, cached or not), the best time of
``--repeat`` runs of ``ds.to_table(filter=...)`` on a fresh handle, and the overlap depth of the
filter's column (``ds.stats.clustering``).

    .venv/bin/python bench/clustering.py --rows 1000000 --fragments 20
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import lance_ops  # noqa: E402

FILTERS = ("day = 100", "id BETWEEN {lo} AND {hi}")
LAYOUTS = {"arrival": None, "sort(day)": (["day"], "sort"), "zorder(day,id)": (["day", "id"], "zorder")}


def rchar() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise RuntimeError("no rchar in /proc/self/io")


CHILD = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
import lance, lance_ops

def hwm():
    with open("/proc/self/status") as lines:
        return next(int(line.split()[1]) for line in lines if line.startswith("VmHWM:")) * 1024

uri, what, rows_per_fragment = sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
budget = int(sys.argv[5]) or None
ds = lance.dataset(uri) if what is None else lance_ops.dataset(uri)
base = hwm()
started = time.perf_counter()
if what is None:
    ds.optimize.compact_files(target_rows_per_fragment=10**12)
else:
    keys, mode = what
    ds.optimize.compact_files(
        target_rows_per_fragment=rows_per_fragment, cluster_by=keys, cluster_mode=mode,
        cluster_memory_bytes=budget,
    )
print(json.dumps({"seconds": time.perf_counter() - started, "grew": hwm() - base}))
"""


def in_child(uri: str, spec: object, rows_per_fragment: int, budget: int = 0) -> dict[str, float]:
    """Time and peak-RSS growth of one compaction (``spec`` None: pylance's plain one) in a child."""
    root = str(Path(__file__).resolve().parents[1])
    args = [sys.executable, "-c", CHILD, root, uri, json.dumps(spec), str(rows_per_fragment), str(budget)]
    done = subprocess.run(args, capture_output=True, text=True, check=True, env=dict(os.environ))
    return json.loads(done.stdout.strip().splitlines()[-1])


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
    parser.add_argument("--cluster-memory-bytes", type=int, default=0, help="0: the default budget (256 MiB)")
    parser.add_argument(
        "--layouts", default="|".join(LAYOUTS), help="separated by '|', of: " + " ".join(LAYOUTS)
    )
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
        plain = in_child(pylance_copy, None, per_fragment)
        shutil.rmtree(pylance_copy)
        print(
            f"pylance compact_files rewriting every row (reference): {plain['seconds']:.2f} s, "
            f"peak RSS +{plain['grew'] / 2**20:.0f} MiB"
        )
        print(f"rows={args.rows} fragments={args.fragments}")
        print(
            "| layout | clustering s | peak RSS growth MiB | filter | rows | bytes read | best s "
            "| overlap depth |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for name in args.layouts.split("|"):
            spec = LAYOUTS[name]
            uri = str(base / name.replace("(", "_").replace(")", "").replace(",", "_"))
            shutil.copytree(source, uri)
            seconds, rss = 0.0, 0.0
            if spec is not None:
                done = in_child(uri, spec, per_fragment, args.cluster_memory_bytes)
                seconds, rss = done["seconds"], done["grew"] / 2**20
            memory = f"{rss:.0f}" if spec is not None else "—"
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
                    f"| {name} | {seconds:.2f} | {memory} | `{predicate}` | {rows} | "
                    f"{read / 2**20:.1f} MiB | {best:.3f} | {depth:.2f} |"
                )
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
