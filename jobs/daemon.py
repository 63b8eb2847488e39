"""Spark's Python daemon for the lance-ops jobs (``spark.python.daemon.module``, set by
:func:`jobs.session.get_spark`).

Spark starts one daemon per executor and forks a Python worker from it for each task slot. A
worker forked from PySpark's own daemon imports ``jobs`` and ``lance_ops`` itself at its first
task: seconds of each job's fixed cost (more when bytecode is not cached), paid again by every
new worker. This daemon imports them once, before forking, so every worker starts with them
loaded (the pages stay shared between the workers until written). An import failure here is
only logged: the workers then import as usual and report the error from the task.
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


def _load_kernels() -> None:
    """Load the compiled hash kernels of the page statistics (numba, from its cache) that every
    write calls, by sketching an int and a string column once."""
    import pyarrow as pa

    from lance_ops.ops.engine import DistinctSketch

    DistinctSketch().update(pa.array([1, 2, 3])).update(pa.array(["a", "b"]))


def preload() -> list[str]:
    """Import :data:`PRELOADED` and load the kernels; returns what failed (errors to stderr)."""
    loads: list[tuple[str, Callable[[], object]]] = [
        (name, partial(importlib.import_module, name)) for name in PRELOADED
    ]
    failed = []
    for name, load in [*loads, ("kernels", _load_kernels)]:
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
