"""Benchmark compaction: lance_ops vs pylance on the same fragmented dataset (run on demand).

One dataset of ``--fragments`` fragments of ``--rows-per-fragment`` rows is written by pylance
(stable row ids unless ``--no-stable-row-ids``), then ``--deleted`` of its rows, chosen at random,
are deleted. For each repeat and each system a fresh copy is compacted with
``ds.optimize.compact_files()`` (pylance's defaults: every fragment is merged into one and the
deletions are materialised); the best time counts. Both results are read back and compared (rows,
row order, ``_rowid``, fragment row counts and the row id / version sequences' bytes).

    .venv/bin/python bench/compaction.py                          # 100 x 10,000 rows, 10 % deleted
    .venv/bin/python bench/compaction.py --fragments 20 --markdown
    .venv/bin/python bench/compaction.py --fragments 1000 --rows-per-fragment 10000 --memory  # 10M rows
    .venv/bin/python bench/compaction.py --rows 10000000 --fragments 1000 --memory --source /tmp/c10m
    .venv/bin/python bench/compaction.py --rows 1000000 --fragments 100 --memory --num-threads 1

``--memory`` runs every compaction in a child process of its own, which reports its wall time, its
peak resident set (``VmHWM``) and the peak before the compaction began (imports, a warm-up
compaction of a 120,000-row dataset that pays the one-time costs of a process such as compiled
kernels, the opened dataset): the difference (``held``) is what the compaction itself held at
its worst; the process's whole peak is reported too.

``--num-threads N`` passes ``num_threads=N`` to both systems' ``compact_files`` (default: theirs,
one task per core); with 1, one task runs at a time, which shows whether the memory held grows with
the dataset's size (more tasks) or stays that of one task.

``--markdown`` replaces the compaction section of RESULTS.md (kept across ``run.py --markdown`` runs,
being below its notes marker).
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
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
from datagen import TABLES, make_table
from rss import peak_mb
from run import RESULTS_PATH, environment, replace_section

import lance_ops

BEGIN, END = "<!-- compaction: begin -->", "<!-- compaction: end -->"


def prepare(path: str, args: argparse.Namespace) -> None:
    import lance

    rows = args.fragments * args.rows_per_fragment
    table = make_table(args.table, rows, args.seed).append_column("row", pa.array(np.arange(rows)))
    lance.write_dataset(
        table,
        path,
        max_rows_per_file=args.rows_per_fragment,
        enable_stable_row_ids=args.stable_row_ids,
        data_storage_version="2.2",
    )
    doomed = np.sort(np.random.default_rng(args.seed).choice(rows, int(rows * args.deleted), replace=False))
    for start in range(0, len(doomed), 100_000):  # IN lists of at most 100,000 values
        lance.dataset(path).delete(f"row IN ({', '.join(map(str, doomed[start : start + 100_000]))})")


def _threads() -> dict[str, int]:
    """``compact_files``' ``num_threads`` when ``--num-threads`` was given (passed to the child
    processes as ``BENCH_COMPACT_THREADS``)."""
    threads = os.environ.get("BENCH_COMPACT_THREADS")
    return {"num_threads": int(threads)} if threads else {}


def compact_ops(path: str) -> object:
    return lance_ops.dataset(path).optimize.compact_files(**_threads())


def compact_pylance(path: str) -> object:
    import lance

    return lance.dataset(path).optimize.compact_files(**_threads())


def read_back(path: str) -> pa.Table:
    import lance

    return lance.dataset(path).to_table(with_row_id=True)


def layout(path: str) -> list[tuple[object, ...]]:
    """Each fragment's rows and row id / version sequences (bytes), as recorded in the manifest."""
    return [
        (f.physical_rows, f.row_ids, f.created_at_versions, f.last_updated_at_versions)
        for f in lance_ops.dataset(path).manifest.fragments
    ]


WARM_UP_ROWS = 50_000  # per fragment, three fragments


def warm_up(module: object, path: str) -> None:
    """A compaction of a small dataset of the same table (three fragments, a deletion): the
    one-time costs of a process (imports, loading compiled kernels, first-use caches) are paid
    here, not counted as the measured compaction's. It is large enough (150,000 rows) for
    lance_ops to load its compiled kernels: below 65,536 values it uses their numpy forms, and
    numba's one-time load (~100 MB) would otherwise fall into the measured compaction."""
    warm = path + ".warm-up"
    for n in range(3):
        rows = make_table("ints_nulls", WARM_UP_ROWS, n).append_column(
            "row", pa.array(np.arange(WARM_UP_ROWS))
        )
        module.write_dataset(rows, warm, mode="append" if n else "create")  # type: ignore[attr-defined]
    module.dataset(warm).delete("row < 100")  # type: ignore[attr-defined]
    module.dataset(warm).optimize.compact_files()  # type: ignore[attr-defined]
    shutil.rmtree(warm)


def child(system: str, path: str) -> dict[str, float]:
    """One compaction in this (child) process, after :func:`warm_up`: wall seconds, peak RSS
    before and after (MB)."""
    if system == "pylance":
        import lance

        warm_up(lance, path)
        ds = lance.dataset(path)
    else:
        warm_up(lance_ops, path)
        ds = lance_ops.dataset(path)
    before, kernels_loaded = peak_mb(), "numba" in sys.modules
    start, cpu = time.perf_counter(), time.process_time()
    ds.optimize.compact_files(**_threads())
    return {
        "numba_loaded_before": float(kernels_loaded),
        "seconds": time.perf_counter() - start,
        "cpu_seconds": time.process_time() - cpu,  # every thread of the process (pylance's too)
        "before_mb": before,
        "peak_mb": peak_mb(),
    }


def run_child(system: str, path: str) -> dict[str, float]:
    args = [sys.executable, __file__, "--child", system, path]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    done = subprocess.run(args, capture_output=True, text=True, check=False, env=env)
    if done.returncode:
        raise RuntimeError(f"{system} compaction: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def timed(
    source: str, workdir: Path, name: str, repeats: int, run: Callable[[str], object], memory: bool = False
) -> tuple[float, str, tuple[float, float, float]]:
    """Best time of ``repeats`` compactions of fresh copies, the last copy, and the largest peak RSS
    held by a compaction, the largest peak of its process (MB) and the least CPU time of the
    process's threads (s) (the RSS figures are 0 unless ``memory``: then each runs in a child
    process; otherwise the CPU time is this process's during the compaction)."""
    best, target, held, peak, cpu = float("inf"), "", 0.0, 0.0, float("inf")
    for attempt in range(repeats):
        target = str(workdir / f"{name}-{attempt}")
        shutil.copytree(source, target)
        if memory:
            result = run_child(name, target)
            seconds, held = result["seconds"], max(held, result["peak_mb"] - result["before_mb"])
            peak, cpu = max(peak, result["peak_mb"]), min(cpu, result["cpu_seconds"])
            metrics: object = result
        else:
            start, started_cpu = time.perf_counter(), time.process_time()
            metrics = run(target)
            seconds = time.perf_counter() - start
            cpu = min(cpu, time.process_time() - started_cpu)
        best = min(best, seconds)
        print(f"  {name} #{attempt}: {seconds:.3f} s {metrics}", file=sys.stderr, flush=True)
        if attempt + 1 < repeats:
            shutil.rmtree(target)
    return best, target, (held, peak, cpu)


def report(
    args: argparse.Namespace,
    ops: float,
    pylance: float,
    same: bool,
    held: tuple[tuple[float, float, float], tuple[float, float, float]] = ((0, 0, 0), (0, 0, 0)),
) -> str:
    rows = args.fragments * args.rows_per_fragment
    return "\n".join(
        [
            BEGIN,
            "## Compaction",
            "",
            f"{environment()}",
            "",
            f"`bench/compaction.py`: {args.fragments} fragments x {args.rows_per_fragment:,} rows "
            f"({rows:,} rows, table `{args.table}` plus an int64 `row`), {args.deleted:.0%} of rows deleted "
            f"at random, stable row ids {'on' if args.stable_row_ids else 'off'}; "
            f"`compact_files({_threads_text(args)})` with default options; best of {args.repeats}"
            + (
                "; each compaction in a child process after a warm-up compaction of 150,000 rows, "
                "CPU = the process's CPU time during the compaction, all threads (least of the repeats), "
                "`held` = its peak RSS minus the peak before it began, `peak` = the process's peak RSS "
                "(largest of the repeats)."
                if args.memory
                else "; CPU = this process's CPU time during the compaction, all threads "
                "(least of the repeats)."
            ),
            "",
            "| system | compact (s) | CPU (s) |" + (" held (MB) | peak (MB) |" if args.memory else ""),
            "| --- | --- | --- |" + (" --- | --- |" if args.memory else ""),
            f"| lance_ops | {ops:.3f} | {held[0][2]:.2f} |"
            + (f" {held[0][0]:.0f} | {held[0][1]:.0f} |" if args.memory else ""),
            f"| pylance | {pylance:.3f} | {held[1][2]:.2f} |"
            + (f" {held[1][0]:.0f} | {held[1][1]:.0f} |" if args.memory else ""),
            f"| ratio lance_ops / pylance | {ops / pylance:.2f} | {held[0][2] / held[1][2]:.2f} |"
            + (
                f" {held[0][0] - held[1][0]:+.0f} MB | {held[0][1] - held[1][1]:+.0f} MB |"
                if args.memory
                else ""
            ),
            "",
            f"Results identical (rows, order, `_rowid`, fragment row counts, row id and version "
            f"sequences byte for byte): {'yes' if same else 'NO'}. Load average at "
            f"the end of the run: {os.getloadavg()[0]:.1f} (the machine is shared: ratios move with load).",
            END,
        ]
    )


def _threads_text(args: argparse.Namespace) -> str:
    return "" if args.num_threads is None else f"num_threads={args.num_threads}"


def write_markdown(section: str) -> None:
    replace_section(BEGIN, END, section)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fragments", type=int, default=100)
    parser.add_argument("--rows-per-fragment", type=int, default=10_000)
    parser.add_argument(
        "--rows", type=int, help="rows in all (spread evenly: sets --rows-per-fragment to rows / fragments)"
    )
    parser.add_argument(
        "--deleted", type=float, default=0.1, help="fraction of rows deleted before compacting"
    )
    parser.add_argument("--table", choices=sorted(TABLES), default="ints_nulls")
    parser.add_argument("--no-stable-row-ids", dest="stable_row_ids", action="store_false")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--memory", action="store_true", help="compact in child processes, report peak RSS")
    parser.add_argument("--num-threads", type=int, help="compact_files(num_threads=...) for both systems")
    parser.add_argument("--markdown", action="store_true", help=f"also update {RESULTS_PATH.name}")
    parser.add_argument(
        "--source",
        help="prepared dataset to reuse (prepared there and kept if it does not exist yet): "
        "the 10M-row preparation alone takes minutes",
    )
    args = parser.parse_args(argv)
    if args.rows is not None:
        if args.rows < args.fragments:
            parser.error("--rows must be at least --fragments")
        args.rows_per_fragment = args.rows // args.fragments
    return args


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--child"]:
        print(json.dumps(child(argv[1], argv[2])))
        return 0
    args = parse_args(argv)
    if args.num_threads is not None:
        os.environ["BENCH_COMPACT_THREADS"] = str(args.num_threads)  # this process's and the children's
    with tempfile.TemporaryDirectory(prefix="lance-ops-compaction-", dir=os.environ.get("BENCH_TMP")) as tmp:
        workdir = Path(tmp)
        source = args.source or str(workdir / "source")
        if not (args.source and os.path.exists(args.source)):
            prepare(source + ".partial", args)  # renamed when complete: a kept source is never half made
            os.rename(source + ".partial", source)
        ops, ops_path, ops_held = timed(source, workdir, "lance_ops", args.repeats, compact_ops, args.memory)
        pylance, pylance_path, pylance_held = timed(
            source, workdir, "pylance", args.repeats, compact_pylance, args.memory
        )
        same = read_back(ops_path).equals(read_back(pylance_path)) and layout(ops_path) == layout(
            pylance_path
        )
    section = report(args, ops, pylance, same, (ops_held, pylance_held))
    print(section)
    if args.markdown:
        write_markdown(section)
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
