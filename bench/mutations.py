"""Row-level mutations beside pylance: ``merge_insert`` (half the source matching) and ``update``.

Each measurement runs in a child process of its own on a fresh copy of the same dataset (written
once by pylance, ``--rows`` rows of an int64 key, a float64 and a short string, 1Mi rows per file),
reporting its wall time, the process's peak resident set (``VmHWM``) and what the work added to
it (after minus before), after a warm-up write of 50k rows and a filtered count of them (one-time
imports and loading the compiled hash kernels of the distinct-count sketches, ~2 s in a fresh
process, and lance_ops' SQL parser, ~0.1 s, are not the operation's; a 10-row warm-up wrote no
sketch and left that cost in the first measurement).

* ``merge_insert``: ``--source`` rows, half with existing keys (spread over the table), half new;
  ``when_matched_update_all().when_not_matched_insert_all()``;
* ``merge_insert (BTREE id)``: the same upsert on a copy with a BTREE index on ``id`` (built once by
  pylance, before the copies; both systems then look the source keys up in it);
* ``update``: ``update({"v": "v + 1"}, where="id % 100 = 7")`` (1 % of the rows).

Wall seconds and CPU seconds (``time.process_time``: every thread of the process) are reported;
on a shared, loaded machine the CPU ratio is the steadier one.

Both systems' results are compared (row counts, result dicts). Run on demand (not a test)::

    .venv/bin/python bench/mutations.py [--rows 1M] [--source 100k] [--spark]

``--spark`` also times the Spark upsert, ``jobs.merge_insert(spark, uri, df, on="id")`` at
``--master`` (default ``local[2]``), on its own copy with the same source as a cached DataFrame,
after a warm-up upsert on a small dataset (session start, Python workers, imports), interleaved
with pylance's in-process merge_insert on copies of its own (two rounds, medians; wall and CPU
time, the Spark job's over its whole process tree); its result dict and rows are compared with
pylance's.

The issue's target is ``--rows 10M --source 100k`` (merge_insert of 100k rows, half matching, into
10M rows; update of 1 % of 10M rows); counts take ``k`` / ``M`` suffixes.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa


def table(ids: np.ndarray, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "v": pa.array(rng.random(len(ids))),
            "s": pa.array([f"s{i % 1000}" for i in ids]),
        }
    )


def source(rows: int, size: int) -> pa.Table:
    rng = np.random.default_rng(7)
    matching = rng.choice(rows, size // 2, replace=False)
    new = np.arange(rows, rows + size - size // 2)
    return table(np.concatenate([matching, new]), 11)


# Enough rows that the warm-up write loads the compiled kernels (lance_ops.encoding.kernels uses
# numpy forms below COMPILED_FROM values; numba loads on the first bigger write).
WARM_UP_ROWS = 100_000
INDEXED_MERGE = "merge_insert (BTREE id)"
SPARK_ROUNDS = 2


def count(text: str) -> int:
    """``1000``, ``100k`` or ``10M``."""
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1:].lower(), 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


def _peak_mb() -> float:
    """This process's peak RSS: ``VmHWM`` (``ru_maxrss`` survives the exec of a child and would
    report the parent's peak, which holds the whole target table)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(system: str, op: str, path: str, rows: int, size: int) -> dict[str, object]:
    module = __import__("lance_ops" if system == "lance_ops" else "lance")
    # One tiny write first: one-time costs (imports, kernel compilation) are not the operation's.
    warm = module.write_dataset(table(np.arange(WARM_UP_ROWS), 1), path + ".warm-up")
    warm.count_rows(filter="id % 100 = 7")  # loads the SQL parser (lance_ops imports it on first use)
    ds = module.dataset(path)
    data = source(rows, size) if op.startswith("merge_insert") else None
    before = _peak_mb()
    start, cpu = time.perf_counter(), time.process_time()
    if op.startswith("merge_insert"):
        result = ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(data)
    else:
        result = ds.update({"v": "v + 1"}, where="id % 100 = 7")
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    peak = _peak_mb()
    return {"seconds": seconds, "cpu": cpu, "peak_mb": peak, "held_mb": peak - before, "result": dict(result)}


def run_child(system: str, op: str, path: str, rows: int, size: int) -> dict[str, object]:
    command = [sys.executable, __file__, "--child", system, op, path, str(rows), str(size)]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def spark_upsert(
    work: Path, base: str, args: argparse.Namespace, merged: dict[str, dict[str, object]]
) -> list[str]:
    """Time ``jobs.merge_insert`` at ``args.master`` against pylance's in-process merge_insert, run
    in this process interleaved with it (``SPARK_ROUNDS`` rounds, each on fresh copies; wall and
    CPU time: the Spark job's whole process tree — driver, JVM, Python workers —, pylance's process).
    ``merged`` holds the child-process runs above (lance_ops in-process beside them)."""
    import lance

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import jobs
    from bench.spark_jobs import in_process, timed
    from jobs.session import get_spark

    spark = get_spark("lance-ops-bench-mutations", master=args.master, config={"spark.ui.enabled": "false"})
    data = source(args.rows, args.source)
    runs: dict[str, list[tuple[float, float]]] = {"spark": [], "pylance": []}
    try:
        warm_up = str(work / "spark-warm-up.lance")
        lance.write_dataset(table(np.arange(WARM_UP_ROWS), 1), warm_up)
        small = spark.createDataFrame(source(WARM_UP_ROWS, 1_000)).cache()
        jobs.merge_insert(spark, warm_up, small, on="id")
        frame = spark.createDataFrame(data).cache()
        frame.count()
        for round_ in range(SPARK_ROUNDS):
            uri, theirs_uri = str(work / f"spark-{round_}.lance"), str(work / f"pylance-{round_}.lance")
            shutil.copytree(base, uri)
            shutil.copytree(base, theirs_uri)
            theirs = lance.dataset(theirs_uri)
            runs["pylance"].append(
                in_process(
                    lambda: (
                        theirs.merge_insert("id")  # noqa: B023 (called here)
                        .when_matched_update_all()
                        .when_not_matched_insert_all()
                        .execute(data)
                    )
                )
            )
            outcome: dict[str, object] = {}
            runs["spark"].append(
                timed(lambda: outcome.update(jobs.merge_insert(spark, uri, frame, on="id").result))  # noqa: B023
            )
    finally:
        spark.stop()
    same_rows = (
        lance.dataset(uri).to_table().sort_by("id").equals(lance.dataset(theirs_uri).to_table().sort_by("id"))
    )
    same = outcome == merged["pylance"]["result"] and same_rows
    (theirs_s, theirs_cpu), (ours_s, ours_cpu) = (
        tuple(float(np.median(v)) for v in zip(*runs[k], strict=True)) for k in ("pylance", "spark")
    )
    listed = {k: ", ".join(f"{w:.2f} / {c:.2f}" for w, c in v) for k, v in runs.items()}
    return [
        f"Spark upsert ({args.master}, source a cached DataFrame; {SPARK_ROUNDS} interleaved rounds, "
        f"medians; load average {os.getloadavg()[0]:.1f} at the end)",
        "",
        "| merge_insert | wall s | / pylance | CPU s | / pylance | runs (wall / CPU) | same as pylance |",
        "|---|---|---|---|---|---|---|",
        f"| Spark jobs.merge_insert | {ours_s:.2f} | {ours_s / theirs_s:.2f} | {ours_cpu:.2f} | "
        f"{ours_cpu / theirs_cpu:.2f} | {listed['spark']} | {same} |",
        f"| pylance in-process | {theirs_s:.2f} | 1.00 | {theirs_cpu:.2f} | 1.00 | {listed['pylance']} | |",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=count, default=1_000_000, help="target rows (e.g. 10M)")
    parser.add_argument("--source", type=count, default=100_000, help="source rows (e.g. 100k)")
    parser.add_argument("--spark", action="store_true", help="also time jobs.merge_insert on Spark")
    parser.add_argument("--master", default="local[2]", help="Spark master of --spark")
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        system, op, path, rows, size = args.child
        print(json.dumps(child(system, op, path, int(rows), int(size))))
        return 0
    import lance

    work = Path(tempfile.mkdtemp(prefix="lance-ops-bench-mutations-"))
    try:
        base = str(work / "base.lance")
        lance.write_dataset(table(np.arange(args.rows), 3), base, max_rows_per_file=1 << 20)
        lines = [
            f"rows {args.rows:,}, source {args.source:,} (half matching); peak = the process's peak "
            "RSS, held = what the work added to it",
            "",
            "| operation | lance_ops s | pylance s | ratio | lance_ops CPU s | pylance CPU s | CPU ratio | "
            "lance_ops peak / held MB | pylance peak / held MB | same result |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        indexed = str(work / "base-btree.lance")
        shutil.copytree(base, indexed)
        lance.dataset(indexed).create_scalar_index("id", "BTREE")
        merged: dict[str, dict[str, object]] = {}
        for op in ("merge_insert", INDEXED_MERGE, "update"):
            results = {}
            for system in ("lance_ops", "pylance"):
                copy = str(work / f"{system}-{op.replace(' ', '_')}.lance")
                shutil.copytree(indexed if op == INDEXED_MERGE else base, copy)
                results[system] = run_child(system, op, copy, args.rows, args.source)
                results[system]["rows"] = lance.dataset(copy).count_rows()
            if op == "merge_insert":
                merged = results
            ours, theirs = results["lance_ops"], results["pylance"]
            same = ours["result"] == theirs["result"] and ours["rows"] == theirs["rows"]
            ratio = float(ours["seconds"]) / float(theirs["seconds"])  # type: ignore[arg-type]
            cpu_ratio = float(ours["cpu"]) / float(theirs["cpu"])  # type: ignore[arg-type]
            lines.append(
                f"| {op} | {ours['seconds']:.2f} | {theirs['seconds']:.2f} | {ratio:.2f} | "
                f"{ours['cpu']:.2f} | {theirs['cpu']:.2f} | {cpu_ratio:.2f} | "
                f"{ours['peak_mb']:.0f} / {ours['held_mb']:.0f} | "
                f"{theirs['peak_mb']:.0f} / {theirs['held_mb']:.0f} | {same} |"
            )
        if args.spark:
            lines += ["", *spark_upsert(work, base, args, merged)]
        print("\n".join(lines))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
