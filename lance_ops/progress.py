"""Progress of long operations: one callback hook, ``progress=``, for every operation that does long work.

The contract (what a caller wiring this into a progress bar, a Spark driver log or Dagster log
events can rely on):

* ``progress`` is a callable taking one :class:`ProgressEvent`. It is called synchronously, in the
  thread that called the operation (compaction runs tasks in a thread pool but reports from the
  calling thread), so it needs no locking; it should return quickly. An exception it raises aborts
  the operation as any other failure would (nothing is committed).
* Each operation first reports ``done == 0`` (with ``total`` when it is known up front), then one
  event per unit of work finished, ``done`` increasing; when ``total`` is known the last event has
  ``done == total``. ``total`` None means "not known until the end" (a streamed write).
* The operations, their units and when they report:

  - ``write`` (``rows``): when a data file is opened (``done`` unchanged) and when it is closed
    (``done`` += its rows). ``total`` is the input's rows for a Table, RecordBatch or pandas frame,
    else None. ``fragment`` is the fragment opened (its data file named, ``physical_rows`` 0) or
    finished (its data file and ``physical_rows``).
  - ``compact`` (``tasks``): per compaction task finished; ``total`` = tasks planned.
  - ``statistics`` (``fragments``): per fragment whose statistics were computed; ``total`` =
    fragments lacking them.
  - ``cleanup`` (``files``): per file removed; ``total`` = manifests and files to remove. A dry run
    removes nothing and reports nothing.
  - ``add_columns`` (``fragments``): per fragment whose new data file was written; ``total`` =
    fragments. All-null columns write nothing and report nothing.
  - The Spark jobs (:mod:`jobs`) report ``compact``, ``delete``, ``add_columns`` and
    ``statistics`` in ``tasks``: per Spark task finished, polled from the driver.

* ``message`` is a short human sentence about the unit just done ("compacted fragments 0-3 into
  1"), fit for a log line.

Wiring it elsewhere: a Spark driver passes ``progress=lambda e: log.info("%s %s/%s %s: %s",
e.operation, e.done, e.total, e.unit, e.message)``; a Dagster asset passes a function calling
``context.log.info(...)`` with the same fields.

pylance compatibility: ``write_dataset(progress=...)`` and ``write_fragments(progress=...)`` also
accept a :class:`FragmentWriteProgress` (pylance's experimental per-fragment tracker, or any object
with ``begin(fragment)`` and ``complete(fragment)``): :func:`as_callback` turns it into a callback.
``begin`` is called before a fragment's data file is written (id 0, no files, ``physical_rows``
0 where pylance has None; from ``LanceFragment.create``, as there in pylance, with the fragment's
id and the data file about to be written) and ``complete`` after it is closed (id 0: ids are
assigned at commit).
One deliberate difference: pylance 14 skips ``complete`` for the last fragment of a write unless
that fragment filled up to ``max_rows_per_file``; here every ``begin`` has its ``complete``.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, TypeAlias

from lance_ops.io.context import StorageContext
from lance_ops.table.manifest import DataFragment

__all__ = [
    "ADD_COLUMNS",
    "CLEANUP",
    "COMPACT",
    "DELETE",
    "STATISTICS",
    "WRITE",
    "FileSystemFragmentWriteProgress",
    "FragmentWriteProgress",
    "NoopFragmentWriteProgress",
    "ProgressCallback",
    "ProgressEvent",
    "Tracker",
    "as_callback",
]

WRITE = "write"
COMPACT = "compact"
STATISTICS = "statistics"
CLEANUP = "cleanup"
ADD_COLUMNS = "add_columns"
DELETE = "delete"


@dataclass(frozen=True)
class ProgressEvent:
    """How far one operation has got: ``done`` of ``total`` (None: unknown) ``unit``.

    ``fragment`` is set by ``write`` events only (see the module docstring).
    """

    operation: str
    done: int
    total: int | None
    unit: str
    message: str = ""
    fragment: DataFragment | None = None

    @property
    def fraction(self) -> float | None:
        """``done / total`` (at most 1), or None when the total is unknown or zero."""
        if not self.total:
            return None
        return min(self.done / self.total, 1.0)


ProgressCallback: TypeAlias = Callable[[ProgressEvent], None]


class Tracker:
    """Counts one operation's units and reports each step to a callback (or to nobody).

    Operations create one with :meth:`start` (which reports ``done == 0``) and call
    :meth:`advance` once per unit of work.
    """

    def __init__(self, callback: ProgressCallback | None, operation: str, total: int | None, unit: str):
        self._callback = callback
        self.operation = operation
        self.total = total
        self.unit = unit
        self.done = 0

    @property
    def reports(self) -> bool:
        """Whether anybody receives the events (without a callback, counting is all it does)."""
        return self._callback is not None

    @classmethod
    def start(
        cls, callback: ProgressCallback | None, operation: str, total: int | None, unit: str
    ) -> Tracker:
        """A tracker that has reported its start (``done == 0``) to ``callback``."""
        tracker = cls(callback, operation, total, unit)
        tracker.advance(0)
        return tracker

    def advance(self, amount: int = 1, message: str = "", fragment: DataFragment | None = None) -> None:
        """Count ``amount`` more units done (0 for an event that starts a unit) and report it."""
        self.done += amount
        if self._callback is not None:
            self._callback(ProgressEvent(self.operation, self.done, self.total, self.unit, message, fragment))


class FragmentWriteProgress(ABC):
    """pylance's per-fragment write tracker: ``begin`` before a fragment is written, ``complete`` after.

    Pass an instance as ``write_dataset(progress=...)``. Experimental in pylance, as here.
    """

    @abstractmethod
    def begin(self, fragment: DataFragment, **kwargs: Any) -> None:
        """Called when a new fragment is about to be written (its id is not assigned yet)."""

    @abstractmethod
    def complete(self, fragment: DataFragment, **kwargs: Any) -> None:
        """Called when a fragment has been written (its data file and rows are known)."""


class NoopFragmentWriteProgress(FragmentWriteProgress):
    """Does nothing (pylance's default tracker)."""

    def begin(self, fragment: DataFragment, **kwargs: Any) -> None:
        pass

    def complete(self, fragment: DataFragment, **kwargs: Any) -> None:
        pass


class FileSystemFragmentWriteProgress(FragmentWriteProgress):
    """pylance's file-based tracker: ``fragment_{id}.in_progress`` (with ``metadata``) and
    ``fragment_{id}.json`` under ``base_uri`` on ``begin``; the ``.in_progress`` file is removed on
    ``complete``. A crashed writer leaves its ``.in_progress`` files behind.
    """

    PROGRESS_EXT: str = ".in_progress"

    def __init__(
        self,
        base_uri: str,
        metadata: Mapping[str, str] | None = None,
        storage_options: Mapping[str, str] | None = None,
    ) -> None:
        self._storage = StorageContext.open(base_uri, storage_options)
        self._metadata = dict(metadata or {})

    def _in_progress_path(self, fragment: DataFragment) -> str:
        return self._storage.path(f"fragment_{fragment.id}{self.PROGRESS_EXT}")

    def _fragment_file(self, fragment: DataFragment) -> str:
        return self._storage.path(f"fragment_{fragment.id}.json")

    def begin(self, fragment: DataFragment, **kwargs: Any) -> None:
        state = {"fragment_id": fragment.id, "metadata": self._metadata}
        self._storage.store.write(self._in_progress_path(fragment), json.dumps(state).encode())
        self._storage.store.write(self._fragment_file(fragment), json.dumps(fragment.to_json()).encode())

    def complete(self, fragment: DataFragment, **kwargs: Any) -> None:
        path = self._in_progress_path(fragment)
        if self._storage.store.exists(path):
            self._storage.store.delete(path)


def _fragment_callback(tracker: Any, begin_with_files: bool) -> ProgressCallback:
    """A callback calling ``tracker.begin`` / ``tracker.complete`` for the fragments of write events."""

    def report(event: ProgressEvent) -> None:
        if event.operation != WRITE or event.fragment is None:
            return
        if event.fragment.physical_rows:
            tracker.complete(event.fragment)
        else:
            tracker.begin(event.fragment if begin_with_files else replace(event.fragment, files=()))

    return report


def as_callback(
    progress: ProgressCallback | FragmentWriteProgress | Any | None, begin_with_files: bool = False
) -> ProgressCallback | None:
    """``progress`` as an event callback: a :class:`FragmentWriteProgress` (or any object with
    ``begin`` and ``complete`` methods, pylance's own included) is adapted; a callable is used as is.

    The adapted ``begin`` gets the fragment without files, as pylance's dataset writes give it;
    ``begin_with_files`` names the data file about to be written, as pylance's
    ``LanceFragment.create`` does."""
    if progress is None:
        return None
    if callable(getattr(progress, "begin", None)) and callable(getattr(progress, "complete", None)):
        return _fragment_callback(progress, begin_with_files)
    if callable(progress):
        return progress
    raise TypeError(
        f"progress must be a callable taking a ProgressEvent or a FragmentWriteProgress, "
        f"not {type(progress).__name__}"
    )
