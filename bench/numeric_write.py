"""Write speed of the all-numeric table (the Spark bench's: ``id`` sequential int64, ``a`` a
small-range int64, ``b`` a wide random-looking int64, ``c`` a float64), lance_ops against
pylance, interleaved in one process: the file API and the dataset API, best of ``--repeats``
wall and CPU seconds (CPU: ``time.process_time``, all threads of the process), with the load.
``--profile`` prints a cProfile (CPU clock, every task on the calling thread) of one lance_ops
file write (or ``--variant``) instead. Not a test.

    PYTHONPATH=. .venv/bin/python bench/numeric_write.py --rows 1000000 10000000 --repeats 3
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import shutil
import tempfile
import time
from collections.abc import Callable

import numpy as np
import pyarrow as pa


def make_table(rows: int) -> pa.Table:
    """The rows of ``bench/spark_jobs.py``'s table (the same formulas of ``id``)."""
    ids = np.arange(rows, dtype=np.int64)
    return pa.table(
        {
            "id": ids,
            "a": (ids * 7919) % 1000,
            "b": ((ids * 2654435761) % 2199023255552) - 1099511627776,
            "c": (ids % 100003).astype(np.float64) / 100003,
        }
    )


def writers(version: str) -> dict[str, Callable[[pa.Table, str], object]]:
    import lance
    import lance.file

    import lance_ops
    import lance_ops.file

    def ops_file(table: pa.Table, path: str) -> None:
        with lance_ops.file.LanceFileWriter(path, table.schema, version=version) as writer:
            writer.write_batch(table)

    def ops_file_nostats(table: pa.Table, path: str) -> None:
        with lance_ops.file.LanceFileWriter(path, table.schema, version=version, page_statistics=False) as w:
            w.write_batch(table)

    def pylance_file(table: pa.Table, path: str) -> None:
        with lance.file.LanceFileWriter(path, table.schema, version=version) as writer:
            writer.write_batch(table)

    return {
        "lance_ops file": ops_file,
        "lance_ops file, no statistics": ops_file_nostats,
        "pylance file": pylance_file,
        "lance_ops dataset": lambda t, p: lance_ops.write_dataset(t, p, data_storage_version=version),
        "pylance dataset": lambda t, p: lance.write_dataset(t, p, data_storage_version=version),
    }


def timed(write: Callable[[pa.Table, str], object], table: pa.Table, work: str) -> tuple[float, float]:
    path = os.path.join(work, "out")
    wall, cpu = time.perf_counter(), time.process_time()
    write(table, path)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--version", default="2.2")
    parser.add_argument(
        "--profile", action="store_true", help="cProfile one lance_ops file write (on one thread)"
    )
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--variant", default="lance_ops file", help="the writer --profile profiles")
    args = parser.parse_args()
    variants = writers(args.version)
    with tempfile.TemporaryDirectory() as work:
        for rows in args.rows:
            table = make_table(rows)
            for write in variants.values():  # warm-up: imports, compiled kernels, the pools
                timed(write, table, work)
            if args.profile:
                # cProfile sees the calling thread only: run every task there.
                from lance_ops.file.parallel import set_worker_threads

                set_worker_threads(1)
                profile = cProfile.Profile(time.process_time)
                profile.enable()
                timed(variants[args.variant], table, work)
                profile.disable()
                pstats.Stats(profile).sort_stats("cumulative").print_stats(args.top)
                pstats.Stats(profile).sort_stats("tottime").print_stats(args.top)
                continue
            best = {name: (float("inf"), float("inf")) for name in variants}
            for _ in range(args.repeats):
                for name, write in variants.items():
                    wall, cpu = timed(write, table, work)
                    best[name] = (min(best[name][0], wall), min(best[name][1], cpu))
            load = os.getloadavg()
            print(
                f"\nnumeric, {rows:,} rows, version {args.version}, best of {args.repeats}, "
                f"load {load[0]:.1f} / {load[1]:.1f}"
            )
            print("| variant | wall s | CPU s | wall / pylance | CPU / pylance |")
            print("| --- | --- | --- | --- | --- |")
            for name, (wall, cpu) in best.items():
                ref = best["pylance dataset" if "dataset" in name else "pylance file"]
                print(f"| {name} | {wall:.3f} | {cpu:.3f} | {wall / ref[0]:.2f} | {cpu / ref[1]:.2f} |")


if __name__ == "__main__":
    main()
