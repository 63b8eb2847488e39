"""L20: the clustering's external sort keeps its memory bounded. Each run is a child process
reporting the peak bytes it allocated during the clustering: Python's and numpy's (``tracemalloc``)
plus Arrow's (its memory pool's high-water mark), an upper bound of what was held at once that does
not depend on how the allocators give memory back (RSS does, by tens of MB from run to run). The
fast case clusters 3x more data under the same budget and grows by less than the extra data (an
in-memory sort grows by about three times it: the rows, their sorted copy, the writer's pages);
the soak case clusters ~400 MB of data files with a 16 MB budget under 200 MB."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import lance_ops

CHILD = textwrap.dedent(
    """
    import json, sys, tracemalloc
    import pyarrow as pa
    import lance_ops
    from lance_ops.optimize import CompactionOptions

    uri, budget = sys.argv[1], int(sys.argv[2])
    ds = lance_ops.dataset(uri)
    pool = pa.default_memory_pool()
    before = pool.max_memory()
    tracemalloc.start()  # numpy's buffers are traced too
    options = CompactionOptions(
        target_rows_per_fragment=50_000, cluster_by=("k",), cluster_memory_bytes=budget
    )
    ds.optimize.compact_files_with_outcome(options)
    print(json.dumps({"grew": tracemalloc.get_traced_memory()[1] + pool.max_memory() - before}))
    """
)


def write(uri: str, rows: int) -> int:
    """``rows`` rows of a random float key and a 400-byte incompressible payload; data bytes."""
    rng = np.random.default_rng(0)
    per = 50_000
    for start in range(0, rows, per):
        n = min(per, rows - start)
        payload = rng.integers(0, 256, size=(n, 400), dtype=np.uint8).view("S400").ravel()
        table = pa.table(
            {
                "id": pa.array(np.arange(start, start + n)),
                "k": pa.array(rng.normal(size=n)),
                "p": pa.array(list(payload), pa.binary()),
            }
        )
        lance_ops.write_dataset(table, uri, mode="create" if start == 0 else "append", max_rows_per_file=per)
    ds = lance_ops.dataset(uri)
    return sum(d.file_size_bytes or 0 for f in ds.manifest.fragments for d in f.files)


def grown(uri: str, budget: int) -> int:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, uri, str(budget)], env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return int(json.loads(done.stdout.strip().splitlines()[-1])["grew"])


def check_sorted(uri: str, lance_module, rows: int) -> None:  # type: ignore[no-untyped-def]
    got = lance_module.dataset(uri).to_table(columns=["id", "k"])
    assert got.num_rows == rows
    assert np.all(np.diff(got["k"].to_numpy()) >= 0)
    assert np.array_equal(np.sort(got["id"].to_numpy()), np.arange(rows))


def test_spilled_clustering_grows_by_less_than_the_data(tmp_path: Path, lance_module) -> None:  # type: ignore[no-untyped-def]
    sizes, growth = {}, {}
    for rows in (60_000, 180_000):
        uri = str(tmp_path / str(rows))
        sizes[rows] = write(uri, rows)
        growth[rows] = grown(uri, 4 * 2**20)
        check_sorted(uri, lance_module, rows)
    extra = sizes[180_000] - sizes[60_000]
    # an in-memory sort holds the rows and their sorted copy: it grows by at least twice the extra
    assert growth[180_000] - growth[60_000] < extra, (growth, sizes)


@pytest.mark.soak
def test_spilled_clustering_of_400_mb_stays_bounded(tmp_path: Path, lance_module) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "d")
    data_bytes = write(uri, 1_000_000)
    assert data_bytes > 380 * 2**20
    assert grown(uri, 16 * 2**20) < 200 * 2**20
    check_sorted(uri, lance_module, 1_000_000)
