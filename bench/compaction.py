"""Benchmark compaction: lance_ops vs pylance on the same fragmented dataset (run on demand).

One dataset of ``--fragments`` fragments of ``--rows-per-fragment`` rows is written by pylance
(stable row ids unless ``--no-stable-row-ids``), then ``--deleted`` of its rows, chosen at random,
are deleted. For each repeat and each system a fresh copy is compacted with
``ds.optimize.compact_files()`` (pylance's defaults: every fragment is merged into one and the
deletions are materialised); the best time counts. Both results are read back and compared (rows,
row order, ``_rowid``, fragment row counts and the row id / version sequences' bytes).

    .venv/bin/python bench/compaction.py                          # 100 x 10,000 rows, 10 % deleted
    .venv/bin/python bench/compaction.py --fragments 20 --markdown

``--markdown`` replaces the compaction section of RESULTS.md (kept across ``run.py --markdown`` runs,
being below its notes marker).
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

import numpy as np
import pyarrow as pa
from datagen import TABLES, make_table
from run import NOTES_MARKER, RESULTS_PATH, environment

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
    doomed = np.random.default_rng(args.seed).choice(rows, int(rows * args.deleted), replace=False)
    lance.dataset(path).delete(f"row IN ({', '.join(map(str, np.sort(doomed)))})")


def compact_ops(path: str) -> object:
    return lance_ops.dataset(path).optimize.compact_files()


def compact_pylance(path: str) -> object:
    import lance

    return lance.dataset(path).optimize.compact_files()


def read_back(path: str) -> pa.Table:
    import lance

    return lance.dataset(path).to_table(with_row_id=True)


def layout(path: str) -> list[tuple[object, ...]]:
    """Each fragment's rows and row id / version sequences (bytes), as recorded in the manifest."""
    return [
        (f.physical_rows, f.row_ids, f.created_at_versions, f.last_updated_at_versions)
        for f in lance_ops.dataset(path).manifest.fragments
    ]


def timed(
    source: str, workdir: Path, name: str, repeats: int, run: Callable[[str], object]
) -> tuple[float, str]:
    best, target = float("inf"), ""
    for attempt in range(repeats):
        target = str(workdir / f"{name}-{attempt}")
        shutil.copytree(source, target)
        start = time.perf_counter()
        metrics = run(target)
        best = min(best, time.perf_counter() - start)
        print(f"  {name} #{attempt}: {time.perf_counter() - start:.3f} s {metrics}", file=sys.stderr)
    return best, target


def report(args: argparse.Namespace, ops: float, pylance: float, same: bool) -> str:
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
            f"`compact_files()` with default options; best of {args.repeats}.",
            "",
            "| system | compact (s) |",
            "| --- | --- |",
            f"| lance_ops | {ops:.3f} |",
            f"| pylance | {pylance:.3f} |",
            f"| ratio lance_ops / pylance | {ops / pylance:.2f} |",
            "",
            f"Results identical (rows, order, `_rowid`, fragment row counts, row id and version "
            f"sequences byte for byte): {'yes' if same else 'NO'}. Load average at "
            f"the end of the run: {os.getloadavg()[0]:.1f} (the machine is shared: ratios move with load).",
            END,
        ]
    )


def write_markdown(section: str) -> None:
    text = RESULTS_PATH.read_text() if RESULTS_PATH.exists() else "# Benchmark results\n"
    if BEGIN in text:
        text = text[: text.index(BEGIN)] + section + text[text.index(END) + len(END) :]
    else:
        if NOTES_MARKER not in text:
            text = text.rstrip("\n") + f"\n\n{NOTES_MARKER}\n"
        text = text.rstrip("\n") + f"\n\n{section}\n"
    RESULTS_PATH.write_text(text)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fragments", type=int, default=100)
    parser.add_argument("--rows-per-fragment", type=int, default=10_000)
    parser.add_argument(
        "--deleted", type=float, default=0.1, help="fraction of rows deleted before compacting"
    )
    parser.add_argument("--table", choices=sorted(TABLES), default="ints_nulls")
    parser.add_argument("--no-stable-row-ids", dest="stable_row_ids", action="store_false")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--markdown", action="store_true", help=f"also update {RESULTS_PATH.name}")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="lance-ops-compaction-") as tmp:
        workdir = Path(tmp)
        source = str(workdir / "source")
        prepare(source, args)
        ops, ops_path = timed(source, workdir, "lance_ops", args.repeats, compact_ops)
        pylance, pylance_path = timed(source, workdir, "pylance", args.repeats, compact_pylance)
        same = read_back(ops_path).equals(read_back(pylance_path)) and layout(ops_path) == layout(
            pylance_path
        )
    section = report(args, ops, pylance, same)
    print(section)
    if args.markdown:
        write_markdown(section)
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
