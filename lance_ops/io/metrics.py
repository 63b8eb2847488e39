"""Counting the storage reads of one operation (``LanceScanner.analyze_plan``'s I/O metrics).

Every read that reaches storage goes through a store's whole-file read (:meth:`ObjectStore.read`,
:meth:`ObjectStore.read_files`) or its span read (``_read_spans`` of a store or of a
:class:`LocalRangeReader`). Each of those calls :func:`record` with the buffers it read, which
adds them to the :class:`IoCounter` active in the calling context, if any:

- ``requests``: calls into a store's read path (one ``read_ranges`` of many ranges is one request);
- ``iops``: read operations sent to storage after coalescing (one per span: a ``pread``, a ranged
  GET, a whole-file GET);
- ``bytes_read``: bytes those operations returned.

Reads served from a buffer already in memory (:class:`BufferedRanges`, cached metadata) count
nothing, as they touch no storage. The counter lives in a :class:`contextvars.ContextVar`, so two
scans counted at once (two threads, two asyncio tasks) never mix; :func:`lance_ops.file.parallel.run_tasks`
carries it to its worker threads. With no counter active, :func:`record` costs one ``ContextVar.get``.

Example::

    with counting_io() as io:
        scanner.to_table()
    io.bytes_read, io.iops, io.requests
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class IoCounter:
    """Storage reads seen while this counter was active (see the module docstring)."""

    bytes_read: int = 0
    iops: int = 0
    requests: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, nbytes: int, iops: int) -> None:
        with self._lock:
            self.bytes_read += nbytes
            self.iops += iops
            self.requests += 1


_active: contextvars.ContextVar[IoCounter | None] = contextvars.ContextVar(
    "lance_ops_io_counter", default=None
)


def current() -> IoCounter | None:
    """The counter active in this context, or None."""
    return _active.get()


@contextmanager
def counting_io(counter: IoCounter | None = None) -> Iterator[IoCounter]:
    """Count the storage reads made in this context (and the worker threads it starts) into a fresh
    :class:`IoCounter` (or ``counter``) until the block ends."""
    counter = IoCounter() if counter is None else counter
    token = _active.set(counter)
    try:
        yield counter
    finally:
        _active.reset(token)


@contextmanager
def counting_into(counter: IoCounter | None) -> Iterator[None]:
    """Make ``counter`` (another context's, possibly None) active here: how worker threads join the
    count of the thread that gave them work."""
    if counter is None:
        yield
        return
    token = _active.set(counter)
    try:
        yield
    finally:
        _active.reset(token)


def record(buffers: Sequence[bytes | memoryview]) -> None:
    """One request to storage that returned ``buffers`` (one read operation each)."""
    counter = _active.get()
    if counter is not None:
        counter.add(sum(len(buffer) for buffer in buffers), len(buffers))
