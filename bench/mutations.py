"""Row-level mutations beside pylance: ``merge_insert`` (half the source matching) and ``update``.

Each measurement runs in a child process of its own on a fresh copy of the same dataset (written
once by pylance, ``--rows`` rows of an int64 key, a float64 and a short string, 1Mi rows per file),
reporting its wall time and the peak resident set the work added (``ru_maxrss`` after minus before),
after a tiny warm-up write (one-time imports and kernel compilation are not the operation's).

* ``merge_insert``: ``--source`` rows, half with existing keys (spread over the table), half new;
  ``when_matched_update_all().when_not_matched_insert_all()``;
* ``update``: ``update({"v": "v + 1"}, where="id % 100 = 7")`` (1 % of the rows).

Both systems' results are compared (row counts, result dicts). Run on demand (not a test)::

    .venv/bin/python bench/mutations.py [--rows 1000000] [--source 100000]
"""

from __future__ import annotations

import argparse
import json
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


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(system: str, op: str, path: str, rows: int, size: int) -> dict[str, object]:
    module = __import__("lance_ops" if system == "lance_ops" else "lance")
    # One tiny write first: one-time costs (imports, kernel compilation) are not the operation's.
    module.write_dataset(table(np.arange(10), 1), path + ".warm-up")
    ds = module.dataset(path)
    data = source(rows, size) if op == "merge_insert" else None
    before = _peak_mb()
    start = time.perf_counter()
    if op == "merge_insert":
        result = ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(data)
    else:
        result = ds.update({"v": "v + 1"}, where="id % 100 = 7")
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "held_mb": _peak_mb() - before, "result": dict(result)}


def run_child(system: str, op: str, path: str, rows: int, size: int) -> dict[str, object]:
    command = [sys.executable, __file__, "--child", system, op, path, str(rows), str(size)]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--source", type=int, default=100_000)
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
            f"rows {args.rows:,}, source {args.source:,} (half matching); held = peak RSS added by the work",
            "",
            "| operation | lance_ops s | pylance s | ratio | lance_ops held MB | pylance held MB | same result |",
            "|---|---|---|---|---|---|---|",
        ]
        for op in ("merge_insert", "update"):
            results = {}
            for system in ("lance_ops", "pylance"):
                copy = str(work / f"{system}-{op}.lance")
                shutil.copytree(base, copy)
                results[system] = run_child(system, op, copy, args.rows, args.source)
                results[system]["rows"] = lance.dataset(copy).count_rows()
            ours, theirs = results["lance_ops"], results["pylance"]
            same = ours["result"] == theirs["result"] and ours["rows"] == theirs["rows"]
            ratio = float(ours["seconds"]) / float(theirs["seconds"])  # type: ignore[arg-type]
            lines.append(
                f"| {op} | {ours['seconds']:.2f} | {theirs['seconds']:.2f} | {ratio:.2f} | "
                f"{ours['held_mb']:.0f} | {theirs['held_mb']:.0f} | {same} |"
            )
        print("\n".join(lines))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
