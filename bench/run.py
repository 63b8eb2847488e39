"""Benchmark lance_ops against pylance and Parquet on generated tables (run on demand, not a test).

For every table in :mod:`datagen` and every system it measures, in one run and on the same data:
write, full scan, projected scan (one column: the table's last), take of ``--take`` random rows
(sorted, since pylance's file API requires ascending indices), and the bytes on disk. Each time is the
best of ``--repeats`` runs with ``time.perf_counter``; reads run against a warm page cache. Every
result read back is compared with the source table, and a mismatch is flagged next to the timing.

Systems: lance_ops file API (``lance_ops.file``, format 2.2), the same with ``compression="auto"``
(``lance_ops file auto``) and dataset API (``lance_ops``), pylance
with the same calls on ``lance``, and Parquet via ``pyarrow.parquet`` (default writer settings; take
reads only the row groups holding the wanted rows). lance_ops cases whose API is missing
(``ImportError``) or unfinished (``NotImplementedError``) are reported as skipped; any other error
is reported and the run continues.

    .venv/bin/python bench/run.py --rows 1000000 --repeats 3 [--markdown]
    .venv/bin/python bench/run.py --rows 10000000 --tables mixed vectors --repeats 2 \
        --markdown --output bench/RESULTS-10M.md
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from datagen import TABLES, make_table

T = TypeVar("T")
Columns = list[str] | None

LANCE_VERSION: Final = "2.2"
METRICS = ("write", "full", "project", "take", "size")
UNITS = {"write": "s", "full": "s", "project": "s", "take": "ms", "size": "MB"}
RESULTS_PATH = Path(__file__).resolve().parent / "RESULTS.md"
NOTES_MARKER = "<!-- notes: kept across --markdown runs -->"


def kept_notes(path: Path = RESULTS_PATH) -> str:
    """The hand-written part of a results file (from NOTES_MARKER on), which a new run keeps."""
    old = path.read_text() if path.exists() else ""
    at = old.find(NOTES_MARKER)
    return "\n" + old[at:] if at >= 0 else ""


def replace_section(begin: str, end: str, section: str, path: Path = RESULTS_PATH) -> None:
    """Put ``section`` (which opens with ``begin`` and closes with ``end``) in the results file: in
    place of the one there, else appended among the notes a new ``--markdown`` run keeps."""
    text = path.read_text() if path.exists() else "# Benchmark results\n"
    if begin in text:
        text = text[: text.index(begin)] + section.rstrip("\n") + text[text.index(end) + len(end) :]
    else:
        if NOTES_MARKER not in text:
            text = text.rstrip("\n") + f"\n\n{NOTES_MARKER}\n"
        text = text.rstrip("\n") + f"\n\n{section.rstrip(chr(10))}\n"
    path.write_text(text)


# --- systems --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class System:
    """One storage engine + API under test; ``location`` names its output inside a work directory."""

    name: str
    write: Callable[[pa.Table, str], None]
    scan: Callable[[str, Columns], pa.Table]
    take: Callable[[str, np.ndarray], pa.Table]
    suffix: str


def _ops_file_write(table: pa.Table, path: str) -> None:
    from lance_ops.file import LanceFileWriter

    with LanceFileWriter(path, table.schema, version=LANCE_VERSION) as writer:
        writer.write_batch(table)


def _ops_file_scan(path: str, columns: Columns) -> pa.Table:
    from lance_ops.file import LanceFileReader

    return LanceFileReader(path).read_all(columns=columns).to_table()


def _ops_file_take(path: str, indices: np.ndarray) -> pa.Table:
    from lance_ops.file import LanceFileReader

    return LanceFileReader(path).take_rows(indices).to_table()


def _ops_auto_write(table: pa.Table, path: str) -> None:
    from lance_ops.file import LanceFileWriter

    with LanceFileWriter(path, table.schema, version=LANCE_VERSION, compression="auto") as writer:
        writer.write_batch(table)


def _ops_dataset_write(table: pa.Table, path: str) -> None:
    from lance_ops import write_dataset

    write_dataset(table, path, data_storage_version=LANCE_VERSION)


def _ops_dataset_scan(path: str, columns: Columns) -> pa.Table:
    from lance_ops import dataset

    return dataset(path).to_table(columns=columns)


def _ops_dataset_take(path: str, indices: np.ndarray) -> pa.Table:
    from lance_ops import dataset

    return dataset(path).take(indices)


def _pylance_file_write(table: pa.Table, path: str) -> None:
    from lance.file import LanceFileWriter

    with LanceFileWriter(path, table.schema, version=LANCE_VERSION) as writer:
        writer.write_batch(table)


def _pylance_file_scan(path: str, columns: Columns) -> pa.Table:
    from lance.file import LanceFileReader

    return LanceFileReader(path, columns=columns).read_all().to_table()


def _pylance_file_take(path: str, indices: np.ndarray) -> pa.Table:
    from lance.file import LanceFileReader

    return LanceFileReader(path).take_rows(indices.tolist()).to_table()


def _pylance_dataset_write(table: pa.Table, path: str) -> None:
    import lance

    lance.write_dataset(table, path, data_storage_version=LANCE_VERSION)


def _pylance_dataset_scan(path: str, columns: Columns) -> pa.Table:
    import lance

    return lance.dataset(path).to_table(columns=columns)


def _pylance_dataset_take(path: str, indices: np.ndarray) -> pa.Table:
    import lance

    return lance.dataset(path).take(indices)


def _parquet_write(table: pa.Table, path: str) -> None:
    pq.write_table(table, path)


def _parquet_scan(path: str, columns: Columns) -> pa.Table:
    return pq.read_table(path, columns=columns)


def _parquet_take(path: str, indices: np.ndarray) -> pa.Table:
    """Read only the row groups containing ``indices``, then take within them."""
    parquet = pq.ParquetFile(path)
    group_rows = np.array([parquet.metadata.row_group(i).num_rows for i in range(parquet.num_row_groups)])
    group_start = np.concatenate([[0], np.cumsum(group_rows)])
    group_of = np.searchsorted(group_start, indices, side="right") - 1
    needed = np.unique(group_of)
    loaded_start = np.concatenate([[0], np.cumsum(group_rows[needed])])
    position = loaded_start[np.searchsorted(needed, group_of)] + (indices - group_start[group_of])
    return parquet.read_row_groups(needed.tolist()).take(pa.array(position))


SYSTEMS = {
    system.name: system
    for system in (
        System("lance_ops file", _ops_file_write, _ops_file_scan, _ops_file_take, ".lance"),
        System("lance_ops dataset", _ops_dataset_write, _ops_dataset_scan, _ops_dataset_take, ".d"),
        System("lance_ops file auto", _ops_auto_write, _ops_file_scan, _ops_file_take, ".lance"),
        System("pylance file", _pylance_file_write, _pylance_file_scan, _pylance_file_take, ".lance"),
        System(
            "pylance dataset",
            _pylance_dataset_write,
            _pylance_dataset_scan,
            _pylance_dataset_take,
            ".lance.d",
        ),
        System("parquet", _parquet_write, _parquet_scan, _parquet_take, ".parquet"),
    )
}

# (numerator, denominator) pairs reported as ratios.
RATIOS = (
    ("lance_ops file", "pylance file"),
    ("lance_ops dataset", "pylance dataset"),
    ("lance_ops file auto", "pylance file"),
    ("lance_ops file auto", "lance_ops file"),
    ("lance_ops file", "parquet"),
    ("lance_ops dataset", "parquet"),
    ("lance_ops file auto", "parquet"),
)


# --- measuring ------------------------------------------------------------------------------------


@dataclass
class Outcome:
    """Measurements of one system on one table (absent metrics were not reached)."""

    values: dict[str, float] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    skipped: str | None = None


def best_time(repeats: int, run: Callable[[int], T]) -> tuple[float, T]:
    """Fastest of ``repeats`` calls of ``run(attempt)`` and the last call's result."""
    best = float("inf")
    result: T
    for attempt in range(repeats):
        start = time.perf_counter()
        result = run(attempt)
        best = min(best, time.perf_counter() - start)
    return best, result


def disk_bytes(path: str) -> int:
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(
        os.path.getsize(os.path.join(root, name)) for root, _, names in os.walk(path) for name in names
    )


def _remove(path: str) -> None:
    if os.path.isdir(path):
        shutil.rmtree(path)
    elif os.path.exists(path):
        os.remove(path)


def _check(outcome: Outcome, what: str, got: pa.Table, expected: pa.Table) -> None:
    if not got.equals(expected):
        outcome.problems.append(f"wrong data: {what}")


def measure(system: System, table: pa.Table, workdir: str, repeats: int, indices: np.ndarray) -> Outcome:
    outcome = Outcome()
    column = table.column_names[-1]
    paths = [
        os.path.join(workdir, f"{system.name.replace(' ', '_')}-{i}{system.suffix}") for i in range(repeats)
    ]

    def write(attempt: int) -> str:
        _remove(paths[attempt])
        system.write(table, paths[attempt])
        return paths[attempt]

    try:
        outcome.values["write"], path = best_time(repeats, write)
        for stale in paths[:-1]:
            _remove(stale)
        outcome.values["size"] = disk_bytes(path) / 1e6
        outcome.values["full"], full = best_time(repeats, lambda _: system.scan(path, None))
        _check(outcome, "full scan", full, table)
        outcome.values["project"], projected = best_time(repeats, lambda _: system.scan(path, [column]))
        _check(outcome, "projected scan", projected, table.select([column]))
        seconds, taken = best_time(repeats, lambda _: system.take(path, indices))
        outcome.values["take"] = seconds * 1e3
        _check(outcome, "take", taken, table.take(pa.array(indices)))
    except (ImportError, NotImplementedError) as exc:
        outcome.skipped = f"{type(exc).__name__}: {exc}"
    except Exception as exc:  # noqa: BLE001 - a broken case must not stop the other measurements
        outcome.problems.append(f"{type(exc).__name__}: {exc}")
        traceback.print_exc(file=sys.stderr)
    finally:
        for stale in paths:
            _remove(stale)
    return outcome


# --- reporting ------------------------------------------------------------------------------------


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.4g}"


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _status(outcome: Outcome) -> str:
    if outcome.skipped:
        return "skipped"
    if any(problem.startswith("wrong data") for problem in outcome.problems):
        return "WRONG DATA"
    return "error" if outcome.problems else "ok"


def render(results: dict[str, dict[str, Outcome]], rows: int, repeats: int, take: int) -> str:
    lines = [
        f"Rows per table: {rows:,}; best of {repeats}; take = {take} random rows; "
        f"Lance format {LANCE_VERSION}.",
        "",
        "## Absolute",
        "",
        _row(["table", "system", *(f"{m} ({UNITS[m]})" for m in METRICS), "status"]),
        _row(["---"] * (len(METRICS) + 3)),
    ]
    notes: dict[str, None] = {}
    for table_name, outcomes in results.items():
        for system_name, outcome in outcomes.items():
            if outcome.skipped:
                notes[f"- {system_name}: skipped ({outcome.skipped})"] = None
            for problem in outcome.problems:
                notes[f"- {table_name} / {system_name}: {problem}"] = None
            cells = [_fmt(outcome.values.get(metric)) for metric in METRICS]
            lines.append(_row([table_name, system_name, *cells, _status(outcome)]))
    ratio_rows = []
    for table_name, outcomes in results.items():
        for numerator, denominator in RATIOS:
            top = outcomes[numerator].values if numerator in outcomes else {}
            bottom = outcomes[denominator].values if denominator in outcomes else {}
            shared = [m for m in METRICS if m in top and bottom.get(m)]
            if shared:
                cells = [f"{top[m] / bottom[m]:.2f}" if m in shared else "-" for m in METRICS]
                ratio_rows.append(_row([table_name, f"{numerator} / {denominator}", *cells]))
    lines += ["", "## Ratios (below 1: lance_ops is faster or smaller)", ""]
    if ratio_rows:
        lines += [_row(["table", "ratio", *METRICS]), _row(["---"] * (len(METRICS) + 2)), *ratio_rows]
    else:
        lines.append("No pair of systems was measured on the same table.")
    if notes:
        lines += ["", "## Notes", "", *notes]
    return "\n".join(lines) + "\n"


def environment() -> str:
    import lance

    return (
        f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC; Python {platform.python_version()}; "
        f"pyarrow {pa.__version__}; pylance {lance.__version__}; "
        f"{platform.machine()} with {os.cpu_count()} CPUs; load average {_load_average()}"
    )


def _load_average() -> str:
    """The 1/5/15-minute load averages at the end of the run (the machine may be shared)."""
    try:
        with open("/proc/loadavg") as f:
            return " / ".join(f.read().split()[:3])
    except OSError:
        return "unknown"


# --- main -----------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows per generated table")
    parser.add_argument("--repeats", type=int, default=3, help="runs per measurement; the best counts")
    parser.add_argument("--take", type=int, default=1000, help="rows fetched by the take measurement")
    parser.add_argument("--tables", nargs="+", choices=sorted(TABLES), default=list(TABLES))
    parser.add_argument("--systems", nargs="+", choices=list(SYSTEMS), default=list(SYSTEMS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", help="where files are written (default: a fresh temporary directory)")
    parser.add_argument("--markdown", action="store_true", help="also write the results file (--output)")
    parser.add_argument(
        "--output",
        type=Path,
        default=RESULTS_PATH,
        help=f"the file --markdown writes (default {RESULTS_PATH.name})",
    )
    args = parser.parse_args(argv)
    if args.rows < 1 or args.repeats < 1 or args.take < 0:
        parser.error("--rows and --repeats must be positive, --take non-negative")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    workdir = args.workdir or tempfile.mkdtemp(prefix="lance-ops-bench-")
    os.makedirs(workdir, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    results: dict[str, dict[str, Outcome]] = {}
    for table_name in args.tables:
        table = make_table(table_name, args.rows, args.seed)
        indices = np.sort(rng.choice(table.num_rows, min(args.take, table.num_rows), replace=False))
        print(
            f"{table_name}: {table.num_rows:,} rows, {table.nbytes / 1e6:.1f} MB in memory", file=sys.stderr
        )
        results[table_name] = {}
        for system_name in args.systems:
            outcome = measure(SYSTEMS[system_name], table, workdir, args.repeats, indices)
            results[table_name][system_name] = outcome
            state = (
                f"skipped ({outcome.skipped})" if outcome.skipped else "; ".join(outcome.problems) or "done"
            )
            print(f"  {system_name}: {state}", file=sys.stderr)
    if not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    report = render(results, args.rows, args.repeats, args.take)
    print(report)
    if args.markdown:
        args.output.write_text(f"# Benchmark results\n\n{environment()}\n\n{report}{kept_notes(args.output)}")
        print(f"wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
