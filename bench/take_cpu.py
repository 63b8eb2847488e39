"""CPU time of a local ``dataset.take`` beside pylance's, in one process (run on demand).

Builds (once, in ``--workdir``) 1M rows (int64 id, string name, float64 value, list<int32> tags)
written by pylance as one fragment, and its first 200k rows in fragments of 500 rows; then takes
``--rows`` sorted random rows of each, the best ``process_time`` of ``--repeats`` runs per system.
Meant for comparing two checkouts side by side, alternating them::

    PYTHONPATH=. .venv/bin/python bench/take_cpu.py --workdir /tmp/take_cpu
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import lance  # noqa: E402

import lance_ops  # noqa: E402


def build(workdir: str) -> list[tuple[str, int]]:
    one, many = f"{workdir}/mixed.lance", f"{workdir}/many.lance"
    if not os.path.exists(one):
        n = 1_000_000
        table = pa.table(
            {
                "id": np.arange(n),
                "name": pa.array([f"name-{i:08d}" for i in range(n)]),
                "value": np.random.default_rng(0).random(n),
                "tags": pa.array([list(range(i % 4)) for i in range(n)], pa.list_(pa.int32())),
            }
        )
        lance.write_dataset(table, one)
        lance.write_dataset(table.slice(0, 200_000), many, max_rows_per_file=500)
    return [(one, 1_000_000), (many, 200_000)]


def best(take: Callable[[np.ndarray], object], rows: np.ndarray, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.process_time()
        take(rows)
        times.append(time.process_time() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", default="/tmp/lance_ops_take_cpu")
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    print(f"lance_ops from {lance_ops.__file__}")
    for uri, total in build(args.workdir):
        rows = np.sort(np.random.default_rng(1).choice(total, args.rows, replace=False))
        ours, theirs = lance_ops.dataset(uri), lance.dataset(uri)
        ours.take(rows)
        theirs.take(rows)
        a, b = best(ours.take, rows, args.repeats), best(theirs.take, rows, args.repeats)
        print(f"{Path(uri).name}: lance_ops {a * 1e3:.2f} ms, pylance {b * 1e3:.2f} ms, ratio {a / b:.2f}")


if __name__ == "__main__":
    main()
