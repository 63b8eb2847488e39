"""Benchmark building and using indices: lance_ops against pylance in the same run (on demand).

For ``--rows`` rows (default 1M; ``id`` a random permutation, ``cat`` 1,000 distinct strings)
written by pylance as ``--fragments`` fragments, each system builds on its own copy:

* ``BTREE(id)`` and ``BITMAP(cat)``: ``create_scalar_index`` build time; then the latency of an
  indexed point filter (``id = v`` / ``cat = 'c…'``, median of ``--queries`` values, columns
  ``id, cat``) with each system reading its own index; and for the BTREE also the mean wall and
  CPU time of ``--loop`` (200) point queries on values not asked before, through a freshly
  opened dataset (its index cache empty), the systems taking turns query by query;
* ``IVF_PQ(vec)`` over ``--vector-rows`` (default 1M) clustered ``--dim``-d (128) float32 vectors:
  ``create_index(num_partitions=rows // 8192, num_sub_vectors=dim // 8)`` build time in process,
  and with ``--spark`` also ``jobs.create_index`` on ``local[2]`` (session started and warmed up
  before timing); then the latency of a kNN (``k=10, nprobes=20``, median of ``--queries``
  queries) and recall@10 against brute force on 50 of them;
* ``INVERTED(text)`` over ``--text-rows`` (default 100k) documents of 5-60 Zipf-distributed words
  from a 30,000-word vocabulary: ``create_scalar_index`` build time, wall and CPU
  (``time.process_time``: pylance's build is multi-threaded, and the machine is shared), and with
  ``--spark`` also ``jobs.create_index(..., "INVERTED")`` (per-fragment partials merged by the
  driver).

Both systems first build and use each index once on a 2,000-row table (imports and first-use
caches, as a long-lived process has them; ``--cold`` skips that, and the first builds then pay
them). Ratios are lance_ops / pylance (below 1: lance_ops is faster). Each figure is one run: the
machine is shared, so treat them as rough. Results are printed as Markdown.

    .venv/bin/python bench/index_build.py                    # 1M rows, 1M x 128-d vectors
    .venv/bin/python bench/index_build.py --rows 100000 --vector-rows 100000 --spark
    .venv/bin/python bench/index_build.py --skip-scalar --skip-vector --text-rows 100000
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import lance  # noqa: E402

import lance_ops  # noqa: E402


def timed(run: Callable[[], object]) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def cpu_timed(run: Callable[[], object]) -> float:
    started = time.process_time()  # every thread of the process: pylance's workers too
    run()
    return time.process_time() - started


def median_ms(
    run: Callable[[Any], object], arguments: Sequence[Any], clock: Callable[..., float] = timed
) -> float:
    run(arguments[0])  # warm: index files read once, as a long-lived process has them
    times = [clock(lambda a=a: run(a)) for a in arguments]
    return statistics.median(times) * 1000


def scalar_table(rows: int, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "id": rng.permutation(rows).astype(np.int64),
            "cat": pa.array([f"c{k:04d}" for k in rng.integers(0, 1000, rows)]),
            "value": rng.random(rows),
        }
    )


def vector_data(rows: int, dim: int, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(256, dim)).astype(np.float32) * 2
    out = np.empty((rows, dim), np.float32)
    step = 100_000
    for start in range(0, rows, step):
        n = min(step, rows - start)
        out[start : start + n] = centres[rng.integers(0, 256, n)] + rng.normal(size=(n, dim)).astype(
            np.float32
        )
    return out


def copy(source: Path, target: Path) -> str:
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target)
    return str(target)


def warm_up(root: Path) -> None:
    """Both systems build and use each index once on a small table, outside the timings: imports
    and first-use caches are paid once by a long-lived process (the timed builds are then
    steady-state; ``--cold`` skips this)."""
    table = scalar_table(2000)
    x = vector_data(2000, 16)
    table = table.append_column("vec", pa.FixedSizeListArray.from_arrays(pa.array(x.reshape(-1)), 16))
    for name, system in (("lance_ops", lance_ops), ("pylance", lance)):
        path = str(root / f"warm-{name}")
        system.write_dataset(table, path)
        ds = system.dataset(path)
        ds.create_scalar_index("id", "BTREE")
        ds.create_scalar_index("cat", "BITMAP")
        ds.create_index("vec", "IVF_PQ", num_partitions=2, num_sub_vectors=2)
        ds = system.dataset(path)
        ds.to_table(columns=["id", "cat"], filter="id = 5")
        ds.to_table(columns=["id", "cat"], filter="cat = 'c0001'")
        ds.to_table(columns=["id"], nearest={"column": "vec", "q": x[0], "k": 10, "nprobes": 2})
        shutil.rmtree(path, ignore_errors=True)


def bench_scalar(
    root: Path, rows: int, fragments: int, queries: int, loop: int
) -> list[tuple[str, float, float]]:
    source = root / "scalar"
    lance.write_dataset(scalar_table(rows), str(source), max_rows_per_file=-(-rows // fragments))
    rng = np.random.default_rng(5)
    out = []
    for column, kind, values in (
        ("id", "BTREE", [f"id = {v}" for v in rng.integers(0, rows, queries)]),
        ("cat", "BITMAP", [f"cat = 'c{v:04d}'" for v in rng.integers(0, 1000, queries)]),
    ):
        ours, theirs = copy(source, root / f"ours-{kind}"), copy(source, root / f"theirs-{kind}")
        build_ours = timed(lambda o=ours, c=column, k=kind: lance_ops.dataset(o).create_scalar_index(c, k))
        build_theirs = timed(lambda t=theirs, c=column, k=kind: lance.dataset(t).create_scalar_index(c, k))
        out.append((f"build {kind}({column}) s", build_ours, build_theirs))
        ours_ds, theirs_ds = lance_ops.dataset(ours), lance.dataset(theirs)
        for flt in values[:3]:
            a = sorted(ours_ds.to_table(columns=["id"], filter=flt)["id"].to_pylist())
            b = sorted(theirs_ds.to_table(columns=["id"], filter=flt)["id"].to_pylist())
            assert a == b, f"{kind}: {flt} differs"
        assert f"{column}_idx" in ours_ds.scanner(filter=values[0]).explain_plan()
        name = f"query `{values[0].split(' =')[0]} = …` via {kind}"
        for clock, unit in ((timed, "ms"), (cpu_timed, "CPU ms")):
            query_ours = median_ms(
                lambda f, d=ours_ds: d.to_table(columns=["id", "cat"], filter=f), values, clock
            )
            query_theirs = median_ms(
                lambda f, d=theirs_ds: d.to_table(columns=["id", "cat"], filter=f), values, clock
            )
            out.append((f"{name} {unit}", query_ours, query_theirs))
        if kind == "BTREE":
            out += cold_loop(ours, theirs, column, rows, loop)
    return out


def cold_loop(ours: str, theirs: str, column: str, rows: int, count: int) -> list[tuple[str, float, float]]:
    """Wall and CPU ms per query of ``count`` point filters on values not asked before, through a
    freshly opened dataset of each system (its index cache empty: nearly every query meets a page
    of the index it has not read yet), the two systems taking turns query by query."""
    values = np.random.default_rng(11).integers(0, rows, count)
    systems = {"lance_ops": lance_ops.dataset(ours), "pylance": lance.dataset(theirs)}
    spent = {(name, clock): 0.0 for name in systems for clock in ("wall", "cpu")}
    for i, v in enumerate(values.tolist()):
        for name, ds in sorted(systems.items(), reverse=bool(i % 2)):
            wall, cpu = time.perf_counter(), time.process_time()
            ds.to_table(columns=["id", "cat"], filter=f"{column} = {v}")
            spent[name, "wall"] += time.perf_counter() - wall
            spent[name, "cpu"] += time.process_time() - cpu
    label = f"{count} point queries `{column} = …` via BTREE, cold pages, per query"
    return [
        (f"{label} ms", *(spent[n, "wall"] / count * 1000 for n in systems)),
        (f"{label} CPU ms", *(spent[n, "cpu"] / count * 1000 for n in systems)),
    ]


def spark_build(master: str, uri: str, column: str, kind: str, **params: Any) -> float:
    """Seconds of ``jobs.create_index`` on a session started (and warmed up) before timing."""
    import jobs  # noqa: PLC0415
    from jobs.session import get_spark  # noqa: PLC0415

    spark = get_spark("bench-index-build", master=master)
    spark.sparkContext.parallelize(range(4), 2).count()  # warm-up
    seconds = timed(lambda: jobs.create_index(spark, uri, column, kind, **params))
    assert lance.dataset(uri).describe_indices()[0].index_type.upper() == kind
    spark.stop()
    return seconds


def text_table(rows: int, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    vocab = np.array([f"w{i}" for i in range(30_000)])
    p = 1.0 / np.arange(1, len(vocab) + 1)
    lengths = rng.integers(5, 60, rows)
    words = vocab[rng.choice(len(vocab), size=int(lengths.sum()), p=p / p.sum())]
    bounds = np.concatenate(([0], np.cumsum(lengths)))
    texts = [" ".join(words[bounds[i] : bounds[i + 1]]) for i in range(rows)]
    return pa.table({"id": np.arange(rows), "text": texts})


def timed_cpu(run: Callable[[], object]) -> tuple[float, float]:
    """Wall and CPU (this process, every thread) seconds of ``run``."""
    cpu = time.process_time()
    wall = timed(run)
    return wall, time.process_time() - cpu


def bench_inverted(
    root: Path, rows: int, fragments: int, spark_master: str | None
) -> tuple[list[tuple[str, float, float]], dict[str, float]]:
    for name, system in (("lance_ops", lance_ops), ("pylance", lance)):  # warm: tokenizer, stemmer
        path = str(root / f"warm-text-{name}")
        lance.write_dataset(text_table(2000, seed=1), path)
        system.dataset(path).create_scalar_index("text", "INVERTED")
    source = root / "text"
    lance.write_dataset(text_table(rows), str(source), max_rows_per_file=-(-rows // fragments))
    ours, theirs = copy(source, root / "ours-fts"), copy(source, root / "theirs-fts")
    wall_theirs, cpu_theirs = timed_cpu(lambda: lance.dataset(theirs).create_scalar_index("text", "INVERTED"))
    wall_ours, cpu_ours = timed_cpu(lambda: lance_ops.dataset(ours).create_scalar_index("text", "INVERTED"))
    for query in ("w1", "w17 w250", "w2999"):
        a = lance.dataset(ours).to_table(full_text_query=query, columns=["id"])["id"].to_pylist()
        b = lance.dataset(theirs).to_table(full_text_query=query, columns=["id"])["id"].to_pylist()
        assert sorted(a) == sorted(b), f"INVERTED: {query} differs"
    out = [
        ("build INVERTED(text) wall s", wall_ours, wall_theirs),
        ("build INVERTED(text) CPU s", cpu_ours, cpu_theirs),
    ]
    extra: dict[str, float] = {}
    if spark_master is not None:
        on_spark = copy(source, root / "spark-fts")
        extra["build INVERTED(text) via jobs.create_index s"] = spark_build(
            spark_master, on_spark, "text", "INVERTED"
        )
    return out, extra


def bench_vector(
    root: Path, rows: int, dim: int, fragments: int, queries: int, spark_master: str | None
) -> tuple[list[tuple[str, float, float]], dict[str, float]]:
    x = vector_data(rows, dim)
    source = root / "vectors"
    table = pa.table(
        {"id": np.arange(rows), "vec": pa.FixedSizeListArray.from_arrays(pa.array(x.reshape(-1)), dim)}
    )
    lance.write_dataset(table, str(source), max_rows_per_file=-(-rows // fragments))
    del table
    params = {"num_partitions": max(1, rows // 8192), "num_sub_vectors": dim // 8}
    ours, theirs = copy(source, root / "ours-pq"), copy(source, root / "theirs-pq")
    out = []
    cpu = time.process_time()
    build_ours = timed(lambda: lance_ops.dataset(ours).create_index("vec", "IVF_PQ", **params))
    cpu_ours, cpu = time.process_time() - cpu, time.process_time()
    build_theirs = timed(lambda: lance.dataset(theirs).create_index("vec", "IVF_PQ", **params))
    cpu_theirs = time.process_time() - cpu
    out.append(("build IVF_PQ(vec) s", build_ours, build_theirs))
    out.append(("build IVF_PQ(vec) CPU s", cpu_ours, cpu_theirs))
    spark_time: dict[str, float] = {}
    if spark_master is not None:
        on_spark = copy(source, root / "spark-pq")
        spark_time["build IVF_PQ(vec) via jobs.create_index s"] = spark_build(
            spark_master, on_spark, "vec", "IVF_PQ", **params
        )
    rng = np.random.default_rng(9)
    q = x[rng.choice(rows, queries, replace=False)] + rng.normal(size=(queries, dim)).astype(np.float32) * 0.3
    ours_ds, theirs_ds = lance_ops.dataset(ours), lance.dataset(theirs)

    def nearest(ds: Any, v: np.ndarray) -> pa.Table:
        return ds.to_table(columns=["id"], nearest={"column": "vec", "q": v, "k": 10, "nprobes": 20})

    out.append(
        (
            "kNN k=10 nprobes=20 ms",
            median_ms(lambda v: nearest(ours_ds, v), list(q)),
            median_ms(lambda v: nearest(theirs_ds, v), list(q)),
        )
    )
    sample = q[:50]
    norms = (x * x).sum(1)
    truth = [np.argsort(norms - 2 * x @ v)[:10] for v in sample]
    for name, ds in (("lance_ops", ours_ds), ("pylance", theirs_ds)):
        hits = sum(
            len(set(nearest(ds, v)["id"].to_pylist()) & set(t.tolist()))
            for v, t in zip(sample, truth, strict=True)
        )
        spark_time[f"recall@10 ({name} search of its own index)"] = hits / (10 * len(sample))
    return out, spark_time


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--vector-rows", type=int, default=1_000_000)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--fragments", type=int, default=8)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--loop", type=int, default=200, help="point queries of the cold BTREE loop")
    parser.add_argument("--spark", action="store_true", help="also build IVF_PQ with jobs.create_index")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--skip-vector", action="store_true")
    parser.add_argument("--skip-scalar", action="store_true")
    parser.add_argument("--text-rows", type=int, default=100_000)
    parser.add_argument("--skip-text", action="store_true")
    parser.add_argument("--cold", action="store_true", help="no warm-up: first builds pay imports")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="bench-index-"))
    try:
        print(f"load average before: {os.getloadavg()}")
        if not args.cold:
            warm_up(root)
        rows = (
            [] if args.skip_scalar else bench_scalar(root, args.rows, args.fragments, args.queries, args.loop)
        )
        extra: dict[str, float] = {}
        if not args.skip_vector:
            vector_rows, extra = bench_vector(
                root,
                args.vector_rows,
                args.dim,
                args.fragments,
                args.queries,
                args.master if args.spark else None,
            )
            rows += vector_rows
        if not args.skip_text:
            text_rows, text_extra = bench_inverted(
                root, args.text_rows, args.fragments, args.master if args.spark else None
            )
            rows += text_rows
            extra.update(text_extra)
        print(f"load average after: {os.getloadavg()}\n")
        print("| measure | lance_ops | pylance | ratio |\n| --- | --- | --- | --- |")
        for name, ours, theirs in rows:
            print(f"| {name} | {ours:.3f} | {theirs:.3f} | {ours / theirs:.2f} |")
        for name, value in extra.items():
            print(f"| {name} | {value:.3f} | | |")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
