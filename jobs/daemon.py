"""Spark's Python daemon for the lance-ops jobs (``spark.python.daemon.module``, set by
:func:`jobs.session.get_spark`).

Spark starts one daemon per executor and forks a Python worker from it for each task slot. A
worker forked from PySpark's own daemon imports ``jobs`` and ``lance_ops`` itself at its first
task: seconds of each job's fixed cost (more when bytecode is not cached), paid again by every
new worker. This daemon imports them once, before forking, so every worker starts with them
loaded (the pages stay shared between the workers until written). An import failure here is
only logged: the workers then import as usual and report the error from the task.

Importing is not all of it: lance_ops runs its compiled (numba) kernels only for large inputs and
loads them at the first one (~1.3 s of CPU: numba's start and each kernel's machine code from the
cache), and parses a predicate with sqlglot's dialects (~0.3 s at the first). A warm-up of
:data:`WARM_ROWS` rows (written and read back in a temporary directory, on the calling thread
only) and a predicate parsed pay both here once, so no task does (measured at 1M rows before this:
each worker's first write task spent 1.3-1.6 of its 1.9-2.0 s CPU there).
"""

from __future__ import annotations

import gc
import importlib
import sys
import traceback
from collections.abc import Callable
from functools import partial

#: What the job tasks run: the job modules, and through them lance_ops' read, write and
#: maintenance paths (pandas: pyarrow imports it at a task's first conversion of numpy arrays).
#: Nothing here starts a thread (forking a threaded process is unsafe).
PRELOADED = ("pandas", "pyarrow.compute", "pyarrow.dataset", "jobs", "lance_ops.dataset")

#: Rows of the warm-up: above the size from which lance_ops calls its compiled kernels (65,536).
WARM_ROWS = 70_000


def _warm_up() -> None:
    """Write and read back a small dataset of the usual column kinds in a temporary directory, on
    this thread (lance_ops' worker threads set to 1, then restored), and parse a predicate: the
    compiled kernels, the predicate parser and the write / read paths loaded. Starts no thread,
    Python's or native (tests/jobs/test_task_threads.py)."""
    import tempfile

    import numpy as np
    import pyarrow as pa

    import lance_ops
    from lance_ops.ops.engine import parse_predicate, set_worker_threads

    ids = np.arange(WARM_ROWS, dtype=np.int64)
    table = pa.table(
        {
            "id": ids,
            "small": (ids % 1000).astype(np.int32),
            "wide": ids * 2654435761,
            "real": ids / 7.0,
            "text": pa.array(np.char.add("v", (ids % 5000).astype(str)).tolist()),
        }
    )
    previous = set_worker_threads(1)
    try:
        with tempfile.TemporaryDirectory(prefix="lance-ops-warm-up-") as directory:
            ds = lance_ops.write_dataset(table, directory + "/warm.lance")
            ds.to_table()
            # Parsed and bound only: evaluating it would start Arrow's thread pool before the fork.
            parse_predicate("small = 3 AND text LIKE 'v1%' AND real > 0.5", ds.schema)
    finally:
        set_worker_threads(previous)


def preload() -> list[str]:
    """Import :data:`PRELOADED` and warm up (:func:`_warm_up`); returns what failed (errors to
    stderr)."""
    loads: list[tuple[str, Callable[[], object]]] = [
        (name, partial(importlib.import_module, name)) for name in PRELOADED
    ]
    failed = []
    for name, load in [*loads, ("warm-up", _warm_up)]:
        try:
            load()
        except Exception:  # the worker loads it again and reports the error from its task
            traceback.print_exc(file=sys.stderr)
            failed.append(name)
    return failed


if __name__ == "__main__":
    preload()
    gc.freeze()  # the imported objects left out of the collector: their pages stay shared
    from pyspark import daemon

    daemon.manager()
