"""Clustering compaction (L20): bytes read and time of selective filters before / after clustering.

A table in arrival order (``id`` ascending, ``day`` uniform over 365 days, a float and a 24-byte
string payload) is written by lance_ops as ``--fragments`` fragments. Per layout:

* ``arrival``: as written;
* ``sort(day)``: ``compact_files(cluster_by=["day"])``;
* ``zorder(day,id)``: ``compact_files(cluster_by=["day", "id"], cluster_mode="zorder")``;

each on its own copy (removed once measured), with the clustering time (lance_ops) and, for
reference, the time of a plain pylance ``compact_files`` rewriting every row of a copy (all
fragments into one). With ``--spark``, the same clusterings also run through the Spark job,
``jobs.compact(spark, uri, cluster_by=[...])`` at ``--master`` (default ``local[2]``; the session
is started and warmed up before the clock starts), as the layouts ``spark sort(day)`` and
``spark zorder(day,id)``. Each clustering and the pylance compaction run in a child process of
their own: the time, the CPU time of that process (``process_time``; Spark's JVM and Python
workers not included) and the growth of its peak RSS (``VmHWM``) from just before the operation
are reported (for Spark, the driver's Python process only). Then, per filter (``day = 100``,
about 0.3 % of the rows; ``id BETWEEN n/2 AND n/2 + n/100``, 1 %), the bytes the process read
(``rchar`` of ``/proc/self/io``: every byte read from files, cached or not), the best time of
``--repeat`` runs of ``ds.to_table(filter=...)`` on a fresh handle, and the overlap depth of the
filter's column (``ds.stats.clustering``).

The table is generated and written in batches of ``--batch-rows`` rows (one seeded generator per
batch), so a 10M-row run holds one batch, not the table; the clusterings are bounded by their
``cluster_memory_bytes`` (``--cluster-memory-bytes``, default 256 MiB: above it, the external sort).

    .venv/bin/python bench/clustering.py --rows 1000000 --fragments 20
    .venv/bin/python bench/clustering.py --rows 10000000 --fragments 200 --repeat 2 --spark
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
from collections.abc import Iterator
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
budget, engine = int(sys.argv[5]) or None, sys.argv[6]
options = {}
if what is not None:
    keys, mode = what
    options = dict(
        target_rows_per_fragment=rows_per_fragment, cluster_by=keys, cluster_mode=mode,
        cluster_memory_bytes=budget,
    )
if engine.startswith("spark:"):
    import jobs
    from jobs.session import get_spark
    spark = get_spark("lance-ops-bench-clustering", master=engine[6:], config={"spark.ui.enabled": "false"})
    spark.range(4).count()  # warm up: the session and its Python workers are started
    run = lambda: jobs.compact(spark, uri, **options)
elif what is None:
    ds = lance.dataset(uri)
    run = lambda: ds.optimize.compact_files(target_rows_per_fragment=10**12)
else:
    ds = lance_ops.dataset(uri)  # the handle opened (and its modules imported) before the clock starts
    run = lambda: ds.optimize.compact_files(**options)
base = hwm()
started, cpu = time.perf_counter(), time.process_time()
run()
seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
print(json.dumps({"seconds": seconds, "cpu": cpu, "grew": hwm() - base}))
"""


def in_child(
    uri: str, spec: object, rows_per_fragment: int, budget: int = 0, engine: str = "local"
) -> dict[str, float]:
    """Time, CPU time and peak-RSS growth of one compaction (``spec`` None: pylance's plain one) in a
    child process; ``engine`` ``spark:<master>`` runs it as the Spark job."""
    root = str(Path(__file__).resolve().parents[1])
    args = [
        sys.executable, "-c", CHILD, root, uri, json.dumps(spec), str(rows_per_fragment), str(budget), engine,
    ]  # fmt: skip
    done = subprocess.run(args, capture_output=True, text=True, check=True, env=dict(os.environ))
    return json.loads(done.stdout.strip().splitlines()[-1])


def batches(rows: int, batch_rows: int, seed: int = 0) -> Iterator[pa.RecordBatch]:
    """The table in arrival order, ``batch_rows`` rows at a time (batch ``n`` drawn from the seed
    ``(seed, n)``): ``id`` ascending, ``day`` uniform over 365 days, a float, a ~24-byte string."""
    for n, start in enumerate(range(0, rows, batch_rows)):
        count = min(batch_rows, rows - start)
        rng = np.random.default_rng((seed, n))
        payload = np.char.add("payload-", rng.integers(0, 10**15, count).astype(str))
        yield pa.record_batch(
            {
                "id": pa.array(np.arange(start, start + count), pa.int64()),
                "day": pa.array(rng.integers(0, 365, count), pa.int32()),
                "x": pa.array(rng.normal(size=count)),
                # a numpy string array this long converts in several chunks
                "payload": pa.chunked_array([pa.array(payload, pa.string())]).combine_chunks(),
            }
        )


SCHEMA = next(batches(1, 1)).schema


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--fragments", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cluster-memory-bytes", type=int, default=0, help="0: the default budget (256 MiB)")
    parser.add_argument(
        "--layouts", default="|".join(LAYOUTS), help="separated by '|', of: " + " ".join(LAYOUTS)
    )
    parser.add_argument("--batch-rows", type=int, default=1_000_000, help="rows generated at a time")
    parser.add_argument("--spark", action="store_true", help="also cluster with jobs.compact (Spark)")
    parser.add_argument("--master", default="local[2]", help="the Spark master of --spark")
    parser.add_argument("--no-reference", action="store_true", help="skip pylance's plain compaction")
    args = parser.parse_args(argv)
    per_fragment = -(-args.rows // args.fragments)
    lo = args.rows // 2
    filters = [f.format(lo=lo, hi=lo + args.rows // 100 - 1) for f in FILTERS]
    base = Path(tempfile.mkdtemp(prefix="bench-clustering-"))
    try:
        source = str(base / "source")
        reader = pa.RecordBatchReader.from_batches(SCHEMA, batches(args.rows, args.batch_rows))
        lance_ops.write_dataset(reader, source, max_rows_per_file=per_fragment)
        print(f"rows={args.rows} fragments={args.fragments}")
        if not args.no_reference:
            pylance_copy = str(base / "pylance")
            shutil.copytree(source, pylance_copy)
            plain = in_child(pylance_copy, None, per_fragment)
            shutil.rmtree(pylance_copy)
            print(
                f"pylance compact_files rewriting every row (reference): {plain['seconds']:.2f} s, "
                f"CPU {plain['cpu']:.2f} s, peak RSS +{plain['grew'] / 2**20:.0f} MiB"
            )
        print(
            "| layout | clustering s | CPU s | peak RSS growth MiB | filter | rows | bytes read | best s "
            "| overlap depth |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
        runs = [(name, LAYOUTS[name], "local") for name in args.layouts.split("|")]
        if args.spark:
            runs += [
                (f"spark {name}", LAYOUTS[name], f"spark:{args.master}")
                for name in args.layouts.split("|")
                if LAYOUTS[name] is not None
            ]
        for name, spec, engine in runs:
            uri = str(base / "layout")
            shutil.copytree(source, uri)
            seconds = cpu = "—"
            memory = "—"
            if spec is not None:
                done = in_child(uri, spec, per_fragment, args.cluster_memory_bytes, engine)
                seconds, cpu = f"{done['seconds']:.2f}", f"{done['cpu']:.2f}"
                memory = f"{done['grew'] / 2**20:.0f}"
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
                    f"| {name} | {seconds} | {cpu} | {memory} | `{predicate}` | {rows} | "
                    f"{read / 2**20:.1f} MiB | {best:.3f} | {depth:.2f} |",
                    flush=True,
                )
            shutil.rmtree(uri)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
