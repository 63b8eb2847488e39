"""Benchmark the Spark jobs against the same operation in pylance, in the same run (on demand).

For ``--rows`` rows (default 1M, ``ints_nulls``-like columns generated with numpy) written as
``--fragments`` fragments, each operation runs once per system on a fresh copy of the same dataset:

* ``append``      — Spark: ``jobs.save(df)`` of a DataFrame of ``--rows`` rows (``--partitions`` tasks);
  pylance: ``lance.write_dataset(table, mode="append")``;
* ``delete``      — ``jobs.delete(spark, uri, "id % 10 = 3")`` vs ``ds.delete(...)``;
* ``add_column``  — ``jobs.add_columns(spark, uri, {"y": "a * 2 + b"})`` vs ``ds.add_columns(...)``;
* ``compaction``  — ``jobs.compact(spark, uri, target_rows_per_fragment=rows // 4)`` (after the
  delete) vs ``ds.optimize.compact_files(...)`` with the same target.

The ratio is Spark / pylance (below 1: the Spark job is faster). Spark runs on ``--master``
(default ``local[2]``); the session is started (and warmed up with one tiny job) before timing.
``--scaling`` also times the Spark append with 1, 2 and 4 partitions. Results are printed as a
Markdown table; nothing is written to RESULTS.md.

    .venv/bin/python bench/spark_jobs.py                        # 1M rows, local[2]
    .venv/bin/python bench/spark_jobs.py --rows 100000 --scaling
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jobs  # noqa: E402
from jobs.session import get_spark  # noqa: E402


def make_table(rows: int, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "id": np.arange(rows, dtype=np.int64),
            "a": rng.integers(0, 1000, rows, dtype=np.int64),
            "b": rng.integers(-(2**40), 2**40, rows, dtype=np.int64),
            "c": rng.random(rows),
        }
    )


def timed(run: Callable[[], object]) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--fragments", type=int, default=8)
    parser.add_argument("--partitions", type=int, default=2, help="tasks of the Spark append")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--scaling", action="store_true", help="also time the append with 1, 2, 4 tasks")
    args = parser.parse_args(argv)
    import lance

    table = make_table(args.rows)
    per_file = -(-args.rows // args.fragments)
    spark = get_spark("lance-ops-bench", master=args.master, config={"spark.ui.enabled": "false"})
    workdir = Path(tempfile.mkdtemp(prefix="lance-ops-spark-bench-"))
    try:
        base = str(workdir / "base.lance")
        lance.write_dataset(table, base, max_rows_per_file=per_file)

        def fresh(name: str) -> str:
            path = str(workdir / f"{name}.lance")
            shutil.rmtree(path, ignore_errors=True)
            shutil.copytree(base, path)
            return path

        frame = spark.createDataFrame(table.to_pandas()).repartition(args.partitions).cache()
        frame.count()
        jobs.save(spark.range(1), str(workdir / "warmup.lance"))
        rows: list[tuple[str, float, float]] = []

        spark_uri, pylance_uri = fresh("append-spark"), fresh("append-pylance")
        rows.append(
            (
                "append",
                timed(lambda: jobs.save(frame, spark_uri)),
                timed(lambda: lance.write_dataset(table, pylance_uri, mode="append")),
            )
        )
        spark_uri, pylance_uri = fresh("delete-spark"), fresh("delete-pylance")
        rows.append(
            (
                "delete",
                timed(lambda: jobs.delete(spark, spark_uri, "id % 10 = 3")),
                timed(lambda: lance.dataset(pylance_uri).delete("id % 10 = 3")),
            )
        )
        rows.append(
            (
                "compaction",
                timed(lambda: jobs.compact(spark, spark_uri, target_rows_per_fragment=args.rows // 4)),
                timed(
                    lambda: lance.dataset(pylance_uri).optimize.compact_files(
                        target_rows_per_fragment=args.rows // 4
                    )
                ),
            )
        )
        spark_uri, pylance_uri = fresh("add-spark"), fresh("add-pylance")
        rows.append(
            (
                "add_column",
                timed(lambda: jobs.add_columns(spark, spark_uri, {"y": "a * 2 + b"})),
                timed(lambda: lance.dataset(pylance_uri).add_columns({"y": "a * 2 + b"})),
            )
        )
        for name in ("append", "delete", "add"):
            spark_rows = lance.dataset(str(workdir / f"{name}-spark.lance")).to_table().sort_by("id")
            pylance_rows = lance.dataset(str(workdir / f"{name}-pylance.lance")).to_table().sort_by("id")
            if not spark_rows.equals(pylance_rows):
                print(f"WRONG DATA: {name}: the Spark job and pylance disagree", file=sys.stderr)
                return 1

        print(f"{args.rows:,} rows in {args.fragments} fragments, Spark {args.master}\n")
        print("| operation | Spark job (s) | pylance (s) | Spark / pylance |")
        print("|---|---:|---:|---:|")
        for name, ours, theirs in rows:
            print(f"| {name} | {ours:.2f} | {theirs:.2f} | {ours / theirs:.2f} |")
        if args.scaling:
            print("\n| append tasks | Spark job (s) |")
            print("|---:|---:|")
            for partitions in (1, 2, 4):
                scaled = frame.repartition(partitions).cache()
                scaled.count()
                print(f"| {partitions} | {timed(lambda s=scaled: jobs.save(s, fresh('scale'))):.2f} |")
    finally:
        spark.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
