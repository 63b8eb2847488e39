"""Benchmark the Spark jobs against the same operation in pylance, in the same run (on demand).

For ``--rows`` rows (default 1M: an int64 id and three columns computed from it the same way by
numpy and by Spark, so the DataFrame is built and cached in the JVM, never shipped through pandas) written as
``--fragments`` fragments, each operation runs once per system on a fresh copy of the same dataset:

* ``append``      — Spark: ``jobs.save(df)`` of a DataFrame of ``--rows`` rows (``--partitions`` tasks);
  pylance: ``lance.write_dataset(table, mode="append")``;
* ``append_files`` (only with ``--append-files``, then alone) — Spark: ``jobs.append_files`` of
  ``--source-files`` Parquet files holding the ``--rows`` rows; pylance:
  ``lance.write_dataset(pyarrow.dataset.dataset(dir), mode="append")``;
* ``delete``      — ``jobs.delete(spark, uri, "id % 10 = 3")`` vs ``ds.delete(...)``;
* ``add_column``  — ``jobs.add_columns(spark, uri, {"y": "a * 2 + b"})`` vs ``ds.add_columns(...)``;
* ``add_column after delete`` — the same on a copy where pylance first deleted ``id % 10 = 3``;
* ``compaction``  — ``jobs.compact(spark, uri, target_rows_per_fragment=rows // 4)`` (after the
  delete) vs ``ds.optimize.compact_files(...)`` with the same target.

The ratio is Spark / pylance (below 1: the Spark job is faster), in wall time and in CPU time (the
Spark job's: the driver, the JVM and the Python workers together; pylance's: its process). Spark
runs on ``--master`` (default ``local[2]``); the session is started and its Python workers warmed
up with two tiny jobs (a data source write, an RDD map) before timing; their time is printed apart.
``--scaling`` also times the Spark append with 1, 2 and 4 partitions. Results are printed as a
Markdown table; nothing is written to RESULTS.md.

    .venv/bin/python bench/spark_jobs.py                        # 1M rows, local[2]
    .venv/bin/python bench/spark_jobs.py --rows 100000 --scaling
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jobs  # noqa: E402
import lance_ops  # noqa: E402
from jobs.common import on_executors  # noqa: E402
from jobs.session import get_spark  # noqa: E402
from lance_ops.ops.engine import parse_predicate  # noqa: E402

# The columns as functions of ``id``, so that Spark builds the same rows in the JVM (no 10M-row
# pandas frame shipped from the driver): a small-range int (bit-packable), a wide int, a double.
COLUMNS = {
    "a": "(id * 7919) % 1000",
    "b": "((id * 2654435761) % 2199023255552) - 1099511627776",
    "c": "CAST(id % 100003 AS DOUBLE) / 100003",
}


#: Seconds the session is left at rest to measure its idle CPU.
IDLE_SECONDS = 5.0


def make_table(rows: int) -> pa.Table:
    ids = np.arange(rows, dtype=np.int64)
    return pa.table(
        {
            "id": ids,
            "a": (ids * 7919) % 1000,
            "b": ((ids * 2654435761) % 2199023255552) - 1099511627776,
            "c": (ids % 100003).astype(np.float64) / 100003,
        }
    )


def make_frame(spark: Any, rows: int, partitions: int) -> Any:
    """:func:`make_table`'s rows as a cached DataFrame of ``partitions`` partitions."""
    columns = [f"{expr} AS {name}" for name, expr in COLUMNS.items()]
    frame = spark.range(0, rows, numPartitions=partitions).selectExpr("id", *columns).cache()
    frame.count()
    return frame


def cpu_by_kind() -> dict[str, float]:
    """CPU seconds of this process and every process below it (Spark's JVM, its Python daemons and
    workers; children that ended and were waited for included) by kind: ``driver`` (this Python
    process), ``jvm`` and ``python`` (the daemons and workers): the work of a job wherever it ran,
    which a loaded machine stretches in wall time but not in CPU time."""
    tick = os.sysconf("SC_CLK_TCK")
    stats: dict[int, tuple[int, float, str]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    text = stat.read()
            except OSError:  # ended meanwhile
                continue
            fields = text[text.rfind(")") + 2 :].split()
            name = text[text.find("(") + 1 : text.rfind(")")]
            # after the name: state, ppid, ... utime (12th), stime, cutime, cstime (15th)
            stats[int(entry)] = (int(fields[1]), sum(int(f) for f in fields[11:15]) / tick, name)
    below = {os.getpid()}
    while True:
        more = {pid for pid, (parent, _, _) in stats.items() if parent in below} - below
        if not more:
            break
        below |= more
    kinds = {"driver": 0.0, "jvm": 0.0, "python": 0.0}
    for pid in below:
        _, cpu, name = stats.get(pid, (0, 0.0, ""))
        kind = "driver" if pid == os.getpid() else "jvm" if name == "java" else "python"
        kinds[kind] += cpu
    return kinds


def tree_cpu() -> float:
    """:func:`cpu_by_kind` summed."""
    return sum(cpu_by_kind().values())


def timed(run: Callable[[], object], clock: Callable[[], float] = tree_cpu) -> tuple[float, float]:
    """Wall and CPU seconds of ``run()`` (``clock``: the process tree's for a Spark job — a worker
    that Spark ends during the run may take its share along, so this can undercount —, the
    process's own for pylance)."""
    started, cpu = time.perf_counter(), clock()
    run()
    return time.perf_counter() - started, clock() - cpu


def in_process(run: Callable[[], object]) -> tuple[float, float]:
    """:func:`timed` with this process's CPU time (pylance works in-process, on its own threads)."""
    return timed(run, time.process_time)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--fragments", type=int, default=8)
    parser.add_argument("--partitions", type=int, default=2, help="tasks of the Spark append")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--scaling", action="store_true", help="also time the append with 1, 2, 4 tasks")
    parser.add_argument("--driver-memory", default="3g", help="the local JVM's (it caches the frame)")
    parser.add_argument("--append-files", action="store_true", help="time jobs.append_files only")
    parser.add_argument("--source-files", type=int, default=10, help="Parquet files of --append-files")
    args = parser.parse_args(argv)
    if args.append_files:
        return append_files_main(args)
    import lance

    table = make_table(args.rows)
    per_file = -(-args.rows // args.fragments)
    config = {"spark.ui.enabled": "false", "spark.driver.memory": args.driver_memory}
    spark = get_spark("lance-ops-bench", master=args.master, config=config)
    workdir = Path(tempfile.mkdtemp(prefix="lance-ops-spark-bench-"))
    try:
        base = str(workdir / "base.lance")
        lance.write_dataset(table, base, max_rows_per_file=per_file)

        def fresh(name: str) -> str:
            path = str(workdir / f"{name}.lance")
            shutil.rmtree(path, ignore_errors=True)
            shutil.copytree(base, path)
            return path

        frame = make_frame(spark, args.rows, args.partitions)
        # The session's first jobs start its Python workers (a daemon for data source tasks and one
        # for RDD tasks, each importing jobs and lance_ops): a fixed cost of a session, timed apart.
        cold = timed(lambda: jobs.save(spark.range(1), str(workdir / "warmup.lance")))[0]
        cold += timed(lambda: on_executors(spark, [0, 1], abs))[0]
        # The driver's first predicate loads the SQL parser (sqlglot's dialects, ~0.3 s of CPU): a
        # fixed cost of the driver process, like pylance's own import, timed apart too.
        parser_load = in_process(lambda: parse_predicate("id = 0", lance_ops.dataset(base).schema))
        # What the session's processes burn doing nothing (the JVM's heartbeats, its compiler and
        # collector): counted in every Spark job's CPU below, in proportion to its wall time.
        resting = cpu_by_kind()
        time.sleep(IDLE_SECONDS)
        rested = cpu_by_kind()
        idle = {k: (rested[k] - resting[k]) / IDLE_SECONDS for k in rested}
        rows: list[tuple[str, tuple[float, float], tuple[float, float]]] = []
        kinds: list[dict[str, float]] = []

        def spark_job(run: Callable[[], object]) -> tuple[float, float]:
            before = cpu_by_kind()
            measured = timed(run)
            after = cpu_by_kind()
            kinds.append({k: after[k] - before[k] for k in before})
            return measured

        spark_uri, pylance_uri = fresh("append-spark"), fresh("append-pylance")
        rows.append(
            (
                "append",
                spark_job(lambda: jobs.save(frame, spark_uri)),
                in_process(lambda: lance.write_dataset(table, pylance_uri, mode="append")),
            )
        )
        spark_uri, pylance_uri = fresh("delete-spark"), fresh("delete-pylance")
        rows.append(
            (
                "delete",
                spark_job(lambda: jobs.delete(spark, spark_uri, "id % 10 = 3")),
                in_process(lambda: lance.dataset(pylance_uri).delete("id % 10 = 3")),
            )
        )
        rows.append(
            (
                "compaction",
                spark_job(lambda: jobs.compact(spark, spark_uri, target_rows_per_fragment=args.rows // 4)),
                in_process(
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
                spark_job(lambda: jobs.add_columns(spark, spark_uri, {"y": "a * 2 + b"})),
                in_process(lambda: lance.dataset(pylance_uri).add_columns({"y": "a * 2 + b"})),
            )
        )
        # add_column on a dataset with deleted rows (10 %, deleted by pylance before timing): the
        # new column's files still cover every physical row, computed from the live ones
        spark_uri, pylance_uri = fresh("add-deleted-spark"), fresh("add-deleted-pylance")
        for uri in (spark_uri, pylance_uri):
            lance.dataset(uri).delete("id % 10 = 3")
        rows.append(
            (
                "add_column after delete",
                spark_job(lambda: jobs.add_columns(spark, spark_uri, {"y": "a * 2 + b"})),
                in_process(lambda: lance.dataset(pylance_uri).add_columns({"y": "a * 2 + b"})),
            )
        )
        for name in ("append", "delete", "add", "add-deleted"):
            spark_rows = lance.dataset(str(workdir / f"{name}-spark.lance")).to_table().sort_by("id")
            pylance_rows = lance.dataset(str(workdir / f"{name}-pylance.lance")).to_table().sort_by("id")
            if not spark_rows.equals(pylance_rows):
                print(f"WRONG DATA: {name}: the Spark job and pylance disagree", file=sys.stderr)
                return 1

        print(f"{args.rows:,} rows in {args.fragments} fragments, Spark {args.master}; the session's first")
        print(f"two jobs (its Python workers started, not counted below): {cold:.2f} s")
        wall, cpu = parser_load
        print(f"The driver's first predicate parse (not counted below): {wall:.2f} s, {cpu:.2f} s CPU")
        print(
            f"The session at rest, CPU per second of wall time: JVM {idle['jvm']:.3f} s, Python "
            f"{idle['python']:.3f} s\n"
        )
        header = "| operation | Spark job (s) | pylance (s) | Spark / pylance | Spark CPU (s) |"
        print(header + " pylance CPU (s) | CPU ratio |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for name, (ours, our_cpu), (theirs, their_cpu) in rows:
            print(
                f"| {name} | {ours:.2f} | {theirs:.2f} | {ours / theirs:.2f} | {our_cpu:.2f} | "
                f"{their_cpu:.2f} | {our_cpu / max(their_cpu, 0.01):.2f} |"
            )
        print("\nThe Spark jobs' CPU by process (s): the driver, the JVM, the Python daemons and workers\n")
        print("| operation | driver | JVM | Python workers |")
        print("|---|---:|---:|---:|")
        for (name, _, _), kind in zip(rows, kinds, strict=True):
            print(f"| {name} | {kind['driver']:.2f} | {kind['jvm']:.2f} | {kind['python']:.2f} |")
        print(f"\nLoad average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs.")
        if args.scaling:
            print("\n| append tasks | Spark job (s) |")
            print("|---:|---:|")
            for partitions in (1, 2, 4):
                scaled = make_frame(spark, args.rows, partitions)
                seconds, _ = timed(lambda: jobs.save(scaled, fresh("scale")))  # noqa: B023 (called here)
                print(f"| {partitions} | {seconds:.2f} |")
    finally:
        spark.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


def append_files_main(args: argparse.Namespace) -> int:
    """``--append-files``: ``jobs.append_files`` of ``--source-files`` Parquet files (``--rows`` rows
    of :func:`make_table`) to a dataset of as many rows, against pylance's in-process append of the
    same files, one after the other on fresh copies of the dataset; the process tree's CPU split
    by kind as for the other operations."""
    import lance
    import pyarrow.dataset as pads
    import pyarrow.parquet as pq

    table = make_table(args.rows)
    config = {"spark.ui.enabled": "false", "spark.driver.memory": args.driver_memory}
    spark = get_spark("lance-ops-bench", master=args.master, config=config)
    workdir = Path(tempfile.mkdtemp(prefix="lance-ops-spark-bench-"))
    try:
        source = workdir / "source"
        source.mkdir()
        per_file = -(-args.rows // args.source_files)
        for n, start in enumerate(range(0, args.rows, per_file)):
            pq.write_table(table.slice(start, per_file), source / f"part-{n:04d}.parquet")
        base = str(workdir / "base.lance")
        lance.write_dataset(table, base, max_rows_per_file=-(-args.rows // args.fragments))
        spark_uri, pylance_uri = str(workdir / "spark.lance"), str(workdir / "pylance.lance")
        for path in (spark_uri, pylance_uri):
            shutil.copytree(base, path)
        # the session's Python workers started by a tiny run of the same job (not counted)
        tiny = workdir / "tiny"
        tiny.mkdir()
        pq.write_table(table.slice(0, 10), tiny / "t.parquet")
        cold = timed(lambda: jobs.append_files(spark, str(workdir / "warm.lance"), str(tiny)))[0]
        before = cpu_by_kind()
        ours, our_cpu = timed(lambda: jobs.append_files(spark, spark_uri, str(source)))
        after = cpu_by_kind()
        theirs, their_cpu = in_process(
            lambda: lance.write_dataset(pads.dataset(str(source)), pylance_uri, mode="append")
        )
        if not lance.dataset(spark_uri).to_table().equals(lance.dataset(pylance_uri).to_table()):
            print("WRONG DATA: append_files: the Spark job and pylance disagree", file=sys.stderr)
            return 1
        kind = {k: after[k] - before[k] for k in before}
        print(f"{args.rows:,} rows in {args.source_files} Parquet files appended to as many rows, Spark")
        print(f"{args.master}; the session's first job (not counted): {cold:.2f} s\n")
        print(
            "| operation | Spark job (s) | pylance (s) | Spark CPU (s) | pylance CPU (s) | CPU ratio "
            "| driver / JVM / Python workers CPU (s) |"
        )
        print("|---|---:|---:|---:|---:|---:|---|")
        print(
            f"| append_files | {ours:.2f} | {theirs:.2f} | {our_cpu:.2f} | {their_cpu:.2f} | "
            f"{our_cpu / max(their_cpu, 0.01):.2f} | "
            f"{kind['driver']:.2f} / {kind['jvm']:.2f} / {kind['python']:.2f} |"
        )
        print(f"\nLoad average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs.")
    finally:
        spark.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
