"""Dataset operations against the number of fragments, beside pylance on the same datasets.

For each fragment count (default 100, 1,000 and 10,000) one dataset is built: a template fragment of
``--rows`` rows is written once, its data file copied once per fragment, and all fragments are
appended in one ``Append`` (so building 10,000 fragments takes seconds, and every system reads the
very same bytes). Then, for lance_ops and pylance, best of ``--repeats``:

* ``open``: opening the latest version (``dataset(uri)``);
* ``count``: ``count_rows()`` without a filter (metadata only);
* ``versions``: ``versions()`` (two versions: the template's and the append of the copies);
* ``take``: ``take`` of 100 random rows spread over the whole dataset;
* ``take_open``: the same take on a freshly opened dataset (open included);
* ``take_local``: ``take`` of 100 rows inside one fragment;
* ``filter``: ``count_rows(filter=...)`` matching rows of a single fragment.

The point is scaling: ``open``/``count`` should grow with the manifest only, ``take_local`` should
not grow at all. Run on demand (not a test)::

    .venv/bin/python bench/fragments.py [--fragments 100 1000 10000 100000] [--markdown]
        [--clock cpu] [--rounds 3] [--only take take_open]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import lance_ops  # noqa: E402
from lance_ops.ops.commit import CommitOptions, commit  # noqa: E402
from lance_ops.table.transaction import Append  # noqa: E402

RESULTS_PATH = Path(__file__).resolve().parent / "RESULTS-fragments.md"
METRICS = ("open", "count", "versions", "take", "take_open", "take_local", "filter")
NOTES = "<!-- notes: kept across --markdown runs -->"


def build(uri: str, fragments: int, rows: int) -> None:
    """``fragments`` copies of one ``rows``-row fragment: the first written, the rest appended."""
    table = pa.table({"id": np.arange(rows, dtype=np.int64), "value": np.random.default_rng(0).random(rows)})
    lance_ops.write_dataset(table, uri, data_storage_version="2.1")
    (source,) = lance_ops.dataset(uri).manifest.fragments
    (data_file,) = source.files
    copies = []
    for n in range(1, fragments):
        name = f"copy-{n:06d}.lance"
        shutil.copyfile(os.path.join(uri, "data", data_file.path), os.path.join(uri, "data", name))
        copies.append(replace(source, id=0, files=(replace(data_file, path=name),)))
    if copies:
        commit(uri, Append(tuple(copies)), CommitOptions())


# What ``best`` times: wall clock by default; ``--clock cpu`` takes the process's CPU time (all
# threads), steadier than wall time on a shared machine.
CLOCK: Callable[[], float] = time.perf_counter


def best(repeats: int, run: Callable[[], object]) -> float:
    times = []
    for _ in range(repeats):
        start = CLOCK()
        run()
        times.append(CLOCK() - start)
    return min(times)


def measure(
    module: object, uri: str, fragments: int, rows: int, repeats: int, only: Sequence[str] = METRICS
) -> dict[str, float]:
    open_dataset = module.dataset  # type: ignore[attr-defined]
    ds = open_dataset(uri)
    rng = np.random.default_rng(1)
    spread = np.sort(rng.choice(fragments * rows, size=min(100, fragments * rows), replace=False))
    local = np.sort(rng.choice(rows, size=min(100, rows), replace=False)) + (fragments // 2) * rows
    expected = fragments * rows
    assert ds.count_rows() == expected
    runs: dict[str, Callable[[], object]] = {
        "open": lambda: open_dataset(uri),
        "count": lambda: open_dataset(uri).count_rows(),
        "versions": lambda: open_dataset(uri).versions(),
        "take": lambda: ds.take(spread),
        "take_open": lambda: open_dataset(uri).take(spread),
        "take_local": lambda: ds.take(local),
        "filter": lambda: ds.count_rows(filter="value < 0.001"),
    }
    return {metric: best(repeats, runs[metric]) for metric in only}


def render(results: dict[int, dict[str, dict[str, float]]], rows: int, repeats: int) -> str:
    lines = [
        "# Fragment-count scaling",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {rows} rows per fragment; best of {repeats};"
        f" {'CPU' if CLOCK is time.process_time else 'wall'} time;"
        f" {os.cpu_count()} CPUs. Times in milliseconds; ratio = lance_ops / pylance.",
        "",
        "| fragments | metric | lance_ops (ms) | pylance (ms) | ratio |",
        "| --- | --- | --- | --- | --- |",
    ]
    for fragments, systems in results.items():
        for metric in systems["lance_ops"]:
            ours, theirs = systems["lance_ops"][metric], systems["pylance"][metric]
            lines.append(
                f"| {fragments:,} | {metric} | {ours * 1e3:.2f} | {theirs * 1e3:.2f} | {ours / theirs:.2f} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fragments", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--rows", type=int, default=100, help="rows per fragment")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--markdown", action="store_true", help=f"also write {RESULTS_PATH.name}")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall", help="what is timed")
    parser.add_argument("--only", nargs="+", choices=METRICS, default=METRICS, help="measure only these")
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="lance_ops and pylance measured in turn this many times (best kept)",
    )
    args = parser.parse_args(argv)
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    import lance  # the oracle, only in benchmarks and tests

    results: dict[int, dict[str, dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as workdir:
        for fragments in args.fragments:
            uri = os.path.join(workdir, f"d{fragments}")
            build(uri, fragments, args.rows)
            rounds = [
                {
                    name: measure(module, uri, fragments, args.rows, args.repeats, args.only)
                    for name, module in (("lance_ops", lance_ops), ("pylance", lance))
                }
                for _ in range(args.rounds)
            ]
            results[fragments] = {
                name: {m: min(r[name][m] for r in rounds) for m in args.only}
                for name in ("lance_ops", "pylance")
            }
            print(f"{fragments} fragments: {results[fragments]}", flush=True)
    report = render(results, args.rows, args.repeats)
    print(report)
    if args.markdown:
        old = RESULTS_PATH.read_text() if RESULTS_PATH.exists() else ""
        notes = old[old.index(NOTES) :] if NOTES in old else ""
        RESULTS_PATH.write_text(report + ("\n" + notes if notes else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
