"""Benchmark index maintenance: lance_ops vs pylance on the same indexed dataset (run on demand).

pylance writes ``--rows`` rows (an int64 ``id`` and a ``--dim``-float ``vec``) in fragments of
``--rows-per-fragment`` rows without stable row ids, builds a BTREE on ``id`` and an IVF_PQ on
``vec``, and deletes ``--deleted`` of the rows at random. Three operations, each run by both systems
on a fresh copy of one prepared dataset (best of ``--repeats``):

* ``compact, no index``: the reference: ``compact_files()`` on a copy without the indices (what
  the data rewrite alone costs; ``bench/compaction.py`` covers it);
* ``compact``: ``compact_files()`` (defaults: everything into one fragment per 1M rows), which
  remaps both indices to the new row addresses in the same Rewrite;
* ``compact deferred``: ``compact_files(defer_index_remap=True)``: the Fragment Reuse Index only;
* ``optimize``: ``optimize_indices()`` after ``--appended`` more rows were appended (the BTREE
  rewritten over every fragment, a delta segment added to the IVF_PQ).

Each result is checked with pylance: row count, no unindexed rows left (except after a deferred
compaction, where both leave the same coverage), the same BTREE answers as a scan, and kNN searches
answered from the index.

    .venv/bin/python bench/indices.py                       # 1M rows, 10 % deleted, 10 % appended
    .venv/bin/python bench/indices.py --rows 100000 --markdown

``--markdown`` replaces the index section of RESULTS.md (kept across ``run.py --markdown`` runs).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import numpy as np
import pyarrow as pa
from run import RESULTS_PATH, environment, replace_section

import lance_ops

BEGIN, END = "<!-- indices: begin -->", "<!-- indices: end -->"
OPERATIONS = ("compact, no index", "compact", "compact deferred", "optimize")


def make_table(start: int, rows: int, dim: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((rows, dim), dtype=np.float32)
    return pa.table(
        {
            "id": np.arange(start, start + rows, dtype=np.int64),
            "vec": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), dim),
        }
    )


def prepare(path: str, args: argparse.Namespace) -> dict[str, str]:
    """The indexed dataset with its deletions, by operation (a copy with ``--appended`` rows
    appended for ``optimize``, one without the indices for the reference)."""
    import lance

    ds = lance.write_dataset(
        make_table(0, args.rows, args.dim, args.seed), path, max_rows_per_file=args.rows_per_fragment
    )
    ds.create_scalar_index("id", "BTREE")
    ds.create_index(
        "vec", "IVF_PQ", num_partitions=args.partitions, num_sub_vectors=args.dim // 4, name="vec_idx"
    )
    doomed = np.random.default_rng(args.seed).choice(args.rows, int(args.rows * args.deleted), replace=False)
    ds.delete(f"id IN ({', '.join(map(str, np.sort(doomed)))})")
    appended = path + "-appended"
    shutil.copytree(path, appended)
    extra = make_table(args.rows, int(args.rows * args.appended), args.dim, args.seed + 1)
    lance.write_dataset(extra, appended, mode="append", max_rows_per_file=args.rows_per_fragment)
    plain = path + "-plain"
    shutil.copytree(path, plain)
    for name in ("id_idx", "vec_idx"):
        lance.dataset(plain).drop_index(name)
    # warm both systems up (imports, first-use caches) outside the timings
    lance_ops.dataset(plain).to_table(columns=["id"], limit=1)
    lance.dataset(plain).to_table(columns=["id"], limit=1)
    return {"compact, no index": plain, "optimize": appended}


def run_ops(operation: str, path: str) -> object:
    ds = lance_ops.dataset(path)
    if operation == "optimize":
        return ds.optimize.optimize_indices()
    return ds.optimize.compact_files(defer_index_remap=operation == "compact deferred")


def run_pylance(operation: str, path: str) -> object:
    import lance

    ds = lance.dataset(path)
    if operation == "optimize":
        return ds.optimize.optimize_indices()
    return ds.optimize.compact_files(defer_index_remap=operation == "compact deferred")


def timed(
    source: str, workdir: Path, name: str, repeats: int, run: Callable[[str], object]
) -> tuple[float, str]:
    best, target = float("inf"), ""
    for attempt in range(repeats):
        target = str(workdir / f"{name}-{attempt}")
        if os.path.exists(target):
            shutil.rmtree(target)
        shutil.copytree(source, target)
        start = time.perf_counter()
        run(target)
        elapsed = time.perf_counter() - start
        best = min(best, elapsed)
        print(f"  {name} #{attempt}: {elapsed:.3f} s", file=sys.stderr)
    return best, target


def coverage(path: str) -> dict[str, tuple[int, int]]:
    import lance

    ds = lance.dataset(path)
    return {
        name: (stats["num_indexed_rows"], stats["num_unindexed_rows"])
        for name in ("id_idx", "vec_idx")
        for stats in [ds.stats.index_stats(name)]
    }


def check(ours: str, theirs: str, dim: int) -> str:
    """'' when pylance reads our result as well as its own, else what differs."""
    import lance

    ds, twin = lance.dataset(ours), lance.dataset(theirs)
    if ds.count_rows() != twin.count_rows():
        return f"rows {ds.count_rows()} != {twin.count_rows()}"
    if not lance.dataset(theirs).list_indices():
        return ""
    if coverage(ours) != coverage(theirs):
        return f"coverage {coverage(ours)} != {coverage(theirs)}"
    for predicate in ("id = 777", "id >= 5000 AND id < 5100"):
        got = ds.to_table(filter=predicate, columns=["id"])["id"].to_pylist()
        scanned = ds.to_table(filter=predicate, columns=["id"], use_scalar_index=False)["id"].to_pylist()
        if sorted(got) != sorted(scanned):
            return f"BTREE answers differ from a scan for {predicate}"
    for q in np.random.default_rng(7).standard_normal((3, dim)).astype(np.float32):
        nearest = {"column": "vec", "q": q, "k": 10, "nprobes": 8}
        if "ANNSubIndex" not in ds.scanner(nearest=nearest).explain_plan(True):
            return "kNN not answered from the index"
        if ds.to_table(nearest=nearest, columns=["id"]).num_rows != 10:
            return "kNN answered fewer than k rows"
    return ""


def report(args: argparse.Namespace, times: dict[str, tuple[float, float]], problems: dict[str, str]) -> str:
    lines = [
        BEGIN,
        "## Index maintenance (`bench/indices.py`, L15)",
        "",
        environment(),
        "",
        f"{args.rows:,} rows (`id` int64, `vec` {args.dim} x float32) in fragments of "
        f"{args.rows_per_fragment:,}, written by pylance without stable row ids; BTREE on `id`, IVF_PQ "
        f"on `vec` ({args.partitions} partitions, {args.dim // 4} sub-vectors); {args.deleted:.0%} of rows "
        f"deleted at random; for `optimize`, {args.appended:.0%} more rows appended first. Best of "
        f"{args.repeats} on a fresh copy each time.",
        "",
        "| operation | lance_ops (s) | pylance (s) | ratio | pylance reads ours as its own |",
        "| --- | --- | --- | --- | --- |",
    ]
    for operation, (ops, pylance) in times.items():
        verdict = problems[operation] or "yes"
        lines.append(f"| {operation} | {ops:.3f} | {pylance:.3f} | {ops / pylance:.2f} | {verdict} |")
    lines += [
        "",
        f"Load average at the end of the run: {os.getloadavg()[0]:.1f} (the machine is shared: "
        "ratios move with load).",
        END,
    ]
    return "\n".join(lines)


def write_markdown(section: str) -> None:
    replace_section(BEGIN, END, section)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rows-per-fragment", type=int, default=10_000)
    parser.add_argument("--dim", type=int, default=32)
    parser.add_argument("--partitions", type=int, default=64)
    parser.add_argument("--deleted", type=float, default=0.1)
    parser.add_argument("--appended", type=float, default=0.1)
    parser.add_argument("--operations", nargs="+", choices=OPERATIONS, default=list(OPERATIONS))
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--markdown", action="store_true", help=f"also update {RESULTS_PATH.name}")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    times: dict[str, tuple[float, float]] = {}
    problems: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="lance-ops-indices-") as tmp:
        workdir = Path(tmp)
        source = str(workdir / "source")
        start = time.perf_counter()
        sources = prepare(source, args)
        print(f"  prepared in {time.perf_counter() - start:.1f} s", file=sys.stderr)
        for operation in args.operations:
            base = sources.get(operation, source)
            key = operation.replace(" ", "-").replace(",", "")
            ops, ops_path = timed(base, workdir, f"ops-{key}", args.repeats, partial(run_ops, operation))
            pylance, pylance_path = timed(
                base, workdir, f"pylance-{key}", args.repeats, partial(run_pylance, operation)
            )
            times[operation] = (ops, pylance)
            problems[operation] = check(ops_path, pylance_path, args.dim)
            for path in (ops_path, pylance_path):
                shutil.rmtree(path)
    section = report(args, times, problems)
    print(section)
    if args.markdown:
        write_markdown(section)
    return 0 if not any(problems.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
