"""``scan_stats_callback``: what one scan did, handed to the caller when it ends (pylance's
``ScanStatistics``).

A scan given a callback counts, while it runs, its storage reads (:mod:`lance_ops.io.metrics`:
``iops``, ``requests``, ``bytes_read``) and its index work (:mod:`lance_ops.io.index_cache`:
``indices_loaded`` and ``parts_loaded``, the index cache misses that read an index or a piece of
one; ``index_comparisons``; ``index_cache_hits`` / ``index_cache_misses``), and calls the callback
once with a :class:`ScanStatistics` after its last batch. A batch scan counts only while it makes a
batch (not while the caller holds it); an error raised by the callback is logged, not raised, as in
pylance.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from lance_ops.io.index_cache import IndexCounter, counting_index_work
from lance_ops.io.metrics import IoCounter, counting_io

__all__ = ["ScanCounters", "ScanStatistics", "StatsCallback", "report_batches", "report_run"]

T = TypeVar("T")
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ScanStatistics:
    """What one scan read and searched (pylance's ``lance.ScanStatistics`` fields)."""

    iops: int
    requests: int
    bytes_read: int
    indices_loaded: int
    parts_loaded: int
    index_comparisons: int
    index_cache_hits: int
    index_cache_misses: int
    all_counts: Mapping[str, int] = field(default_factory=dict)
    all_times: Mapping[str, int] = field(default_factory=dict)


StatsCallback = Callable[[ScanStatistics], Any]


@dataclass
class ScanCounters:
    """The storage reads and index work of one scan, counted while :meth:`active`."""

    io: IoCounter = field(default_factory=IoCounter)
    index: IndexCounter = field(default_factory=IndexCounter)

    @contextmanager
    def active(self) -> Iterator[ScanCounters]:
        with counting_io(self.io), counting_index_work(self.index):
            yield self

    def statistics(self, **counts: int) -> ScanStatistics:
        """The counts as :class:`ScanStatistics`; ``counts`` (e.g. ``output_rows``) join ``all_counts``."""
        work = self.index
        return ScanStatistics(
            iops=self.io.iops,
            requests=self.io.requests,
            bytes_read=self.io.bytes_read,
            indices_loaded=work.indices_loaded,
            parts_loaded=work.parts_loaded,
            index_comparisons=work.index_comparisons,
            index_cache_hits=work.index_cache_hits,
            index_cache_misses=work.index_cache_misses,
            all_counts={
                "index_cache_hits": work.index_cache_hits,
                "index_cache_misses": work.index_cache_misses,
                **{k: int(v) for k, v in counts.items()},
            },
        )


def _call(callback: StatsCallback, stats: ScanStatistics) -> None:
    try:
        callback(stats)
    except Exception:  # pylance logs a callback's error and carries on
        _log.exception("scan_stats_callback raised")


def report_run(callback: StatsCallback | None, run: Callable[[], T], rows: Callable[[T], int]) -> T:
    """``run()`` counted, then ``callback`` called with its statistics (``rows(result)`` rows
    returned); without a callback just ``run()``."""
    if callback is None:
        return run()
    counters = ScanCounters()
    with counters.active():
        result = run()
    _call(callback, counters.statistics(output_rows=rows(result)))
    return result


def report_batches(
    callback: StatsCallback | None, batches: Iterable[Any], counters: ScanCounters | None = None
) -> Iterator[Any]:
    """``batches``, each counted (into ``counters``: what preparing the scan counted) while it is
    made; ``callback`` called after the last."""
    if callback is None:
        yield from batches
        return
    counters = ScanCounters() if counters is None else counters
    rows = 0
    iterator = iter(batches)
    while True:
        with counters.active():
            batch = next(iterator, None)
        if batch is None:
            break
        rows += batch.num_rows
        yield batch
    _call(callback, counters.statistics(output_rows=rows))
