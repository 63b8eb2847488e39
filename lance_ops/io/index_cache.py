"""The index cache of one opened dataset, and the index work one scan counts.

:class:`IndexCache` is pylance's session index cache: what index searches read from storage (an
index's small files, a BTREE page, an IVF segment's model and partitions, an inverted index
partition) is kept, keyed by the index's uuid (index files never change under a uuid), for the
next search through the same opened dataset. Each :func:`lance_ops.dataset` call opens the dataset
with a fresh cache (as each ``lance.dataset`` call opens a new session); the versions checked out
from it, and those its own commits make it, share it. ``index_cache_size_bytes`` bounds it:
least recently used entries go first, an entry bigger than the whole budget is not kept, and a
budget of 0 keeps nothing (every lookup loads from storage).

Every lookup counts as a hit or a miss, in the cache (:meth:`IndexCache.hit_rate`, pylance's
``index_cache_hit_rate``) and in the :class:`IndexCounter` of the scan running in the calling
context, if any (:func:`counting_index_work`; a :class:`contextvars.ContextVar`, like
:mod:`lance_ops.io.metrics`). A miss on a whole index (``kind="index"``: the files a search opens
first) counts one ``indices_loaded``, a miss on a piece of it (``kind="part"``: a page, a
partition) one ``parts_loaded``; searches add ``index_comparisons`` (:func:`count_comparisons`:
keys, zones, centroids and vectors compared, documents scored).
"""

from __future__ import annotations

import contextvars
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal, TypeVar

from lance_ops.errors import InvalidArgumentError

__all__ = [
    "BYTES_PER_CACHE_ENTRY",
    "DEFAULT_INDEX_CACHE_BYTES",
    "IndexCache",
    "IndexCounter",
    "count_comparisons",
    "counting_index_work",
]

T = TypeVar("T")

# pylance's default is 6 GiB; lance-ops keeps less per opened dataset (entries are Python objects).
DEFAULT_INDEX_CACHE_BYTES = 1 << 30
# pylance converts its deprecated ``index_cache_size`` (entries) to bytes at 20 MiB an entry.
BYTES_PER_CACHE_ENTRY = 20 << 20


@dataclass
class IndexCounter:
    """The index work of one scan (pylance's ``ScanStatistics`` index fields)."""

    indices_loaded: int = 0
    parts_loaded: int = 0
    index_comparisons: int = 0
    index_cache_hits: int = 0
    index_cache_misses: int = 0

    def metrics(self) -> str:
        """The counts as an ``analyze_plan`` line shows them (``name=value, ...``)."""
        return ", ".join(f"{name}={value}" for name, value in vars(self).items())


_active: contextvars.ContextVar[IndexCounter | None] = contextvars.ContextVar(
    "lance_ops_index_counter", default=None
)


@contextmanager
def counting_index_work(counter: IndexCounter | None = None) -> Iterator[IndexCounter]:
    """Count the index cache lookups, loads and comparisons made in this context into a fresh
    :class:`IndexCounter` (or ``counter``) until the block ends (a block inside another counts
    into its own counter only)."""
    counter = IndexCounter() if counter is None else counter
    token = _active.set(counter)
    try:
        yield counter
    finally:
        _active.reset(token)


def count_comparisons(n: int) -> None:
    """A search compared ``n`` keys / zones / vectors, or scored ``n`` documents."""
    counter = _active.get()
    if counter is not None:
        counter.index_comparisons += int(n)


class IndexCache:
    """Least-recently-used index entries up to ``capacity_bytes`` (see the module docstring)."""

    def __init__(self, capacity_bytes: int = DEFAULT_INDEX_CACHE_BYTES) -> None:
        _check_budget(capacity_bytes)
        self.capacity_bytes = int(capacity_bytes)
        self._entries: OrderedDict[Hashable, tuple[object, int]] = OrderedDict()
        self._bytes = 0
        self._hits = 0
        self._misses = 0
        self._lock = threading.Lock()

    def get(
        self,
        key: Hashable,
        load: Callable[[], T],
        size: Callable[[T], int],
        kind: Literal["index", "part"] = "part",
    ) -> T:
        """The entry under ``key``: kept, or ``load()``-ed (and kept if ``size`` of it fits)."""
        return self.get_many([key], lambda _: [load()], size, kind)[0]

    def get_many(
        self,
        keys: Sequence[Hashable],
        load: Callable[[list[int]], Sequence[T]],
        size: Callable[[T], int],
        kind: Literal["index", "part"] = "part",
    ) -> list[T]:
        """The entries under ``keys``, in order: those kept, and those not loaded by one call of
        ``load`` (given their positions in ``keys``, it returns their values in that order; lets a
        caller read adjacent pieces in one storage read). Each key is one lookup."""
        counter = _active.get()
        out: list[object] = [None] * len(keys)
        missing = []
        with self._lock:
            for i, key in enumerate(keys):
                found = self._entries.get(key)
                if found is None:
                    missing.append(i)
                else:
                    self._entries.move_to_end(key)
                    out[i] = found[0]
            self._hits += len(keys) - len(missing)
            self._misses += len(missing)
        if counter is not None:
            counter.index_cache_hits += len(keys) - len(missing)
            counter.index_cache_misses += len(missing)
            if kind == "index":
                counter.indices_loaded += len(missing)
            else:
                counter.parts_loaded += len(missing)
        if missing:
            for i, value in zip(missing, load(missing), strict=True):
                out[i] = value
                self._put(keys[i], value, max(int(size(value)), 1))
        return out  # type: ignore[return-value]

    def _put(self, key: Hashable, value: object, nbytes: int) -> None:
        if nbytes > self.capacity_bytes:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            self._entries[key] = (value, nbytes)
            self._bytes += nbytes
            self._evict()

    def resize(self, capacity_bytes: int) -> None:
        """Change the budget (entries over it go, least recently used first)."""
        _check_budget(capacity_bytes)
        with self._lock:
            self.capacity_bytes = int(capacity_bytes)
            self._evict()

    def _evict(self) -> None:
        """Drop least recently used entries until the budget holds (the lock held)."""
        while self._bytes > self.capacity_bytes:
            _, (_, dropped) = self._entries.popitem(last=False)
            self._bytes -= dropped

    @property
    def entry_count(self) -> int:
        return len(self._entries)

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def hit_rate(self) -> float:
        """Hits over lookups since the cache was made (0.0 before the first lookup)."""
        lookups = self._hits + self._misses
        return self._hits / lookups if lookups else 0.0


def _check_budget(capacity_bytes: int) -> None:
    if capacity_bytes < 0:
        raise InvalidArgumentError(f"index_cache_size_bytes must be >= 0, got {capacity_bytes}")
