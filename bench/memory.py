"""Peak memory of writing the mixed table from a stream and scanning it back, beside pylance and Parquet.

Every measurement runs in a child process of its own, which reports its wall time and its peak
resident set (``VmHWM``, see ``bench/rss.py``), and the peak it had reached before the measured work
began (imports, an open dataset): the difference is what the work itself held at its worst. The
rows come from a generator of ``--batch-rows`` record batches of ``bench/datagen.py``'s mixed table
(wrapped in a ``RecordBatchReader``), so no system ever sees the whole table at once; the ``stream``
line is that generator alone, the floor under every write.

* ``write``: ``lance_ops.write_dataset`` / ``lance.write_dataset`` of the stream, or
  ``pyarrow.parquet.ParquetWriter`` (zstd) writing batch by batch;
* ``scan``: ``dataset.to_batches()`` (``ParquetFile.iter_batches``), every batch dropped at once.

Bounded memory means the ``held`` column does not grow with the row count. Run on demand (not a
test; 10M rows take minutes)::

    .venv/bin/python bench/memory.py [--rows 1000000 10000000] [--markdown]
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
from collections.abc import Iterator, Sequence
from pathlib import Path

from rss import peak_mb

SYSTEMS = ("stream", "lance_ops", "pylance", "parquet")
from run import RESULTS_PATH, replace_section  # noqa: E402

BEGIN, END = "<!-- memory: begin -->", "<!-- memory: end -->"


def batches(rows: int, batch_rows: int) -> Iterator[object]:
    """The mixed table as a stream of record batches (ids continue across batches)."""
    import numpy as np
    import pyarrow as pa

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench.datagen import mixed

    rng = np.random.default_rng(0)
    for start in range(0, rows, batch_rows):
        table = mixed(rng, min(batch_rows, rows - start))
        ids = pa.array(np.arange(start, start + table.num_rows, dtype=np.int64))
        yield from table.set_column(0, "id", ids).to_batches()


def child(system: str, op: str, path: str, rows: int, batch_rows: int) -> dict[str, float]:
    """One measurement, in this (child) process."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import lance_ops

    if system == "pylance":
        import lance
    first = next(batches(1, 1))
    schema = first.schema  # type: ignore[attr-defined]
    count = 0
    if op == "scan":
        if system == "parquet":
            source = pq.ParquetFile(path)
            stream = source.iter_batches()
        else:
            ds = (lance if system == "pylance" else lance_ops).dataset(path)
            stream = ds.to_batches()
    before = peak_mb()
    start = time.perf_counter()
    if op == "write":
        reader = pa.RecordBatchReader.from_batches(schema, batches(rows, batch_rows))
        if system == "stream":
            for batch in reader:
                count += batch.num_rows
        elif system == "parquet":
            with pq.ParquetWriter(path, schema, compression="zstd") as writer:
                for batch in reader:
                    writer.write_batch(batch)
                    count += batch.num_rows
        else:
            (lance if system == "pylance" else lance_ops).write_dataset(reader, path)
            count = rows
    else:
        for batch in stream:
            count += batch.num_rows
    seconds = time.perf_counter() - start
    if count != rows:
        raise SystemExit(f"{system} {op}: {count} rows, expected {rows}")
    return {"seconds": seconds, "before_mb": before, "peak_mb": peak_mb()}


def run_child(system: str, op: str, path: str, rows: int, batch_rows: int) -> dict[str, float]:
    args = [sys.executable, __file__, "--child", system, op, path, str(rows), str(batch_rows)]
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"{system} {op} {rows}: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def size_mb(path: str) -> float:
    if os.path.isfile(path):
        return os.path.getsize(path) / 1e6
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file()) / 1e6


def render(results: list[dict[str, object]], batch_rows: int, loads: list[str]) -> str:
    lines = [
        BEGIN,
        "## Memory: 10M rows from a stream (`bench/memory.py`)",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; mixed table from a generator of"
        f" {batch_rows:,}-row batches; one child process per line; {os.cpu_count()} CPUs;"
        f" load average (1/5/15 min) at the start of each row count: {'; '.join(loads)}."
        " `peak` is the child's VmHWM, `held` = peak"
        " minus the peak before the measured work (imports, an open dataset).",
        "",
        "| rows | op | system | time (s) | peak RSS (MB) | held (MB) | size (MB) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        lines.append(
            f"| {r['rows']:,} | {r['op']} | {r['system']} | {r['seconds']:.2f} | {r['peak_mb']:.0f} |"
            f" {r['peak_mb'] - r['before_mb']:.0f} | {r['size']} |"  # type: ignore[operator]
        )
    lines.append(END)
    return "\n".join(lines) + "\n"


def write_markdown(section: str) -> None:
    replace_section(BEGIN, END, section)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--child"]:
        system, op, path, rows, batch_rows = argv[1:6]
        print(json.dumps(child(system, op, path, int(rows), int(batch_rows))))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--batch-rows", type=int, default=65_536)
    parser.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=SYSTEMS)
    parser.add_argument("--markdown", action="store_true", help=f"write a section of {RESULTS_PATH.name}")
    args = parser.parse_args(argv)
    results: list[dict[str, object]] = []
    loads = []
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as workdir:
        for rows in args.rows:
            loads.append(f"{rows:,}: " + " / ".join(Path("/proc/loadavg").read_text().split()[:3]))
            for system in args.systems:
                path = os.path.join(workdir, f"{system}-{rows}" + (".parquet" if system == "parquet" else ""))
                for op in ("write", "scan") if system != "stream" else ("write",):
                    result = run_child(system, op, path, rows, args.batch_rows)
                    size = f"{size_mb(path):.0f}" if system != "stream" else "-"
                    results.append({"rows": rows, "op": op, "system": system, "size": size, **result})
                    print(json.dumps(results[-1]), flush=True)
                if os.path.exists(path):
                    shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
    report = render(results, args.batch_rows, loads)
    print(report)
    if args.markdown:
        write_markdown(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
