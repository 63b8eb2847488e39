"""Startup: ``import`` + the first write of a new process, lance_ops beside pylance (run on demand).

Each measurement is a fresh interpreter that builds a table with pyarrow (not timed), then times
``import lance_ops`` / ``import lance`` and one ``write_dataset`` of the table to a new directory:
CPU (``time.process_time``, what the process itself spent) and wall. Systems run interleaved,
``--repeats`` times each; the medians are reported, and which heavy modules the process had
loaded at the end (numba, pandas, sqlglot, fsspec).

Tables (``--rows`` rows): ``mixed`` is bench/datagen.py's mixed table (its ``name`` and ``comment``
strings are all distinct, so they are FSST-coded: below the kernels' thresholds by FSST's numpy
form, so a small write loads no numba); ``mixed-dict`` has the same shape with strings of few
distinct values (dictionary-coded). See :mod:`lance_ops.encoding.kernels` for the thresholds.

    .venv/bin/python bench/startup.py --rows 10000 --repeats 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
SYSTEMS = {"lance_ops": "lance_ops", "pylance": "lance"}
TABLES = ("mixed", "mixed-dict")
WATCHED = ("numba", "pandas", "sqlglot", "fsspec")

CHILD = """
import json, sys, time
sys.path.insert(0, {bench!r})
import numpy as np
import pyarrow as pa
from datagen import make_table

table = make_table("mixed", {rows}, seed=0)
if {table!r} == "mixed-dict":
    few = pa.array([f"value {{i}} of a few" for i in range(40)])
    picks = pa.array(np.random.default_rng(1).integers(0, len(few), {rows}))
    for name in ("name", "comment"):
        table = table.set_column(table.schema.get_field_index(name), name, few.take(picks))
before = sorted(m for m in {watched!r} if m in sys.modules)
c0, w0 = time.process_time(), time.perf_counter()
import {module} as system
c1, w1 = time.process_time(), time.perf_counter()
system.write_dataset(table, {uri!r})
c2, w2 = time.process_time(), time.perf_counter()
print(json.dumps({{
    "import_cpu": c1 - c0, "import_wall": w1 - w0, "write_cpu": c2 - c1, "write_wall": w2 - w1,
    "before": before, "after": sorted(m for m in {watched!r} if m in sys.modules),
}}))
"""


def run_once(system: str, table: str, rows: int, workdir: str, run: int) -> dict[str, object]:
    uri = os.path.join(workdir, f"{system}-{table}-{run}")
    code = CHILD.format(
        bench=str(HERE), rows=rows, table=table, watched=WATCHED, module=SYSTEMS[system], uri=uri
    )
    # cwd: the temporary directory, so lance_ops comes from PYTHONPATH (not a checkout that is the cwd).
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=workdir
    )
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _load_average() -> str:
    try:
        return " ".join(f"{v:.1f}" for v in os.getloadavg())
    except OSError:
        return "?"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--tables", nargs="+", choices=TABLES, default=list(TABLES))
    args = parser.parse_args(argv)
    print(f"load average before: {_load_average()}", file=sys.stderr)
    results: dict[tuple[str, str], list[dict[str, object]]] = {}
    with tempfile.TemporaryDirectory() as workdir:
        for run in range(args.repeats):
            for table in args.tables:
                for system in SYSTEMS:  # interleaved, so both see the same load
                    results.setdefault((table, system), []).append(
                        run_once(system, table, args.rows, workdir, run)
                    )
    print(f"load average after: {_load_average()}", file=sys.stderr)
    print(f"\n{args.rows:,} rows, median of {args.repeats} fresh processes each\n")
    print("| table | system | import CPU s | write CPU s | total CPU s | total wall s | loaded |")
    print("|---|---|---|---|---|---|---|")
    for (table, system), runs in results.items():

        def median(key: str, runs: list[dict[str, object]] = runs) -> float:
            return statistics.median(float(r[key]) for r in runs)  # type: ignore[arg-type]

        total_cpu = statistics.median(float(r["import_cpu"]) + float(r["write_cpu"]) for r in runs)  # type: ignore[arg-type]
        total_wall = statistics.median(float(r["import_wall"]) + float(r["write_wall"]) for r in runs)  # type: ignore[arg-type]
        loaded = ", ".join(sorted(set(runs[-1]["after"]) - set(runs[-1]["before"]))) or "—"  # type: ignore[arg-type]
        print(
            f"| {table} | {system} | {median('import_cpu'):.3f} | {median('write_cpu'):.3f} "
            f"| {total_cpu:.3f} | {total_wall:.3f} | {loaded} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
