"""Interleaved write timings of the mixed table: lance_ops (this checkout and, with ``--base``,
another checkout), pylance and Parquet, for a loaded machine (not a test).

Each variant lives in its own long-running child process holding the table (generated once per
process by ``datagen.py``, same seed) and warmed up by one write; the parent asks the variants in
turn, round after round, for one timed write each, so every variant sees the same load over the
run. Reports the median and the spread of the rounds, the ratios of the medians to pylance, and
each variant's CPU seconds per write (all threads of its process). Run from the repository root:

    PYTHONPATH=. .venv/bin/python bench/write_ab.py --rows 1000000 --rounds 5 [--base /work/main]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

WRITERS = {
    "lance_ops file": "from lance_ops.file import LanceFileWriter as W\n"
    "def write(t, p):\n    with W(p, t.schema, version='2.2') as w: w.write_batch(t)",
    "lance_ops file, no statistics": "from lance_ops.file import LanceFileWriter as W\n"
    "def write(t, p):\n    with W(p, t.schema, version='2.2', page_statistics=False) as w: w.write_batch(t)",
    "lance_ops dataset": "import lance_ops\n"
    "def write(t, p): lance_ops.write_dataset(t, p, data_storage_version='2.2')",
    "pylance file": "from lance.file import LanceFileWriter as W\n"
    "def write(t, p):\n    with W(p, t.schema, version='2.2') as w: w.write_batch(t)",
    "pylance dataset": "import lance\ndef write(t, p): lance.write_dataset(t, p, data_storage_version='2.2')",
    "parquet": "import pyarrow.parquet as pq\ndef write(t, p): pq.write_table(t, p)",
}

CHILD = """
import json, os, shutil, sys, time
sys.path.insert(0, {bench!r})
from datagen import make_table
{writer}
table = make_table({table!r}, {rows})
work = {work!r}
def once(i):
    path = os.path.join(work, str(i))
    wall, cpu = time.perf_counter(), time.process_time()
    write(table, path)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) else os.remove(path)
    return wall, cpu
once(0)
import lance_ops
print("ready", lance_ops.__file__, file=sys.stderr, flush=True)
print("ready", flush=True)
for i, line in enumerate(sys.stdin, 1):
    print(json.dumps(once(i)), flush=True)
"""


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--table", default="mixed")
    parser.add_argument("--base", help="another checkout whose lance_ops file write is timed beside this one")
    parser.add_argument("--variants", nargs="+", choices=list(WRITERS), default=list(WRITERS))
    args = parser.parse_args()
    here = str(HERE.parent)
    variants = [(name, here, WRITERS[name]) for name in args.variants]
    if args.base:
        variants.append(("lance_ops file @ base", args.base, WRITERS["lance_ops file"]))
    with tempfile.TemporaryDirectory() as work:
        children = {}
        for name, root, writer in variants:
            directory = os.path.join(work, str(len(children)))
            os.makedirs(directory)
            code = CHILD.format(
                bench=str(HERE), writer=writer, table=args.table, rows=args.rows, work=directory
            )
            env = {**os.environ, "PYTHONPATH": root}
            # cwd=root: ``python -c`` puts the working directory first on sys.path, ahead of
            # PYTHONPATH, so a child started from this checkout would import this lance_ops.
            child = subprocess.Popen(
                [sys.executable, "-c", code],
                cwd=root,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env=env,
            )
            assert child.stdout is not None and child.stdout.readline().strip() == "ready", name
            children[name] = child
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in children}
        for _ in range(args.rounds):
            for name, child in children.items():
                assert child.stdin is not None and child.stdout is not None
                child.stdin.write("go\n")
                child.stdin.flush()
                times[name].append(tuple(json.loads(child.stdout.readline())))  # type: ignore[arg-type]
        for child in children.values():
            assert child.stdin is not None
            child.stdin.close()
            child.wait()
    load = os.getloadavg()
    print(f"{args.table}, {args.rows:,} rows, {args.rounds} interleaved rounds, load {load[0]:.1f}")
    print("| variant | median s | min–max s | CPU s (median) | / pylance file | / pylance dataset |")
    print("| --- | --- | --- | --- | --- | --- |")
    med = {name: statistics.median(w for w, _ in ts) for name, ts in times.items()}
    for name, ts in times.items():
        walls = [w for w, _ in ts]
        ratios = [
            f"{med[name] / med[ref]:.2f}" if ref in med else "" for ref in ("pylance file", "pylance dataset")
        ]
        print(
            f"| {name} | {med[name]:.3f} | {min(walls):.3f}–{max(walls):.3f} | "
            f"{statistics.median(c for _, c in ts):.3f} | {' | '.join(ratios)} |"
        )


if __name__ == "__main__":
    main()
