"""Keep freed heap memory for the next read instead of handing it back to the kernel at once.

A scan allocates and frees arrays of megabytes per column and per batch. With glibc's defaults the
such arrays are mapped for each allocation and unmapped when freed (or the top of the heap is
trimmed), so the next array of the same size faults its pages in again; on the bench tables that
page-faulting was up to half of a scan's time (a 1M-row float table: 29 -> 14 ms on two threads,
37 -> 18 ms on one). :func:`tune` has glibc serve allocations up to :data:`PAD_BYTES` from the
heap (``M_MMAP_THRESHOLD``) and keep that much padding at the top of each heap (``M_TOP_PAD``).
This only delays giving memory back: peak RSS is unchanged, and a process may hold up to
:data:`PAD_BYTES` of freed memory per malloc arena (one per thread that allocated, at most).

:func:`release_free_memory` hands what is free back at the end of a large piece of work (a
compaction task): the freed arrays of its threads' heaps, and the pages Arrow's default memory pool
(mimalloc or jemalloc) keeps for reuse, would otherwise stay resident and add up with the next
task's. Without it, one compaction task after another raised the resident set by ~50-100 MB at 10M
rows (the Arrow pool's retained pages mostly), so that memory grew with the number of tasks.

Applied once, on ``import lance_ops``, on glibc only. glibc's own environment variables
(``MALLOC_TOP_PAD_``, ``MALLOC_MMAP_THRESHOLD_``) win when set, and ``LANCE_OPS_MALLOC_PAD=0``
turns the tuning off.
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys

PAD_BYTES = 64 * 1024 * 1024
# mallopt parameter numbers (malloc.h)
_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3
_GLIBC_KNOBS = ("MALLOC_TOP_PAD_", "MALLOC_MMAP_THRESHOLD_", "GLIBC_TUNABLES")


def tune() -> bool:
    """Set glibc's M_MMAP_THRESHOLD and M_TOP_PAD (see the module text); whether both were set."""
    if any(knob in os.environ for knob in _GLIBC_KNOBS) or platform.libc_ver()[0] != "glibc":
        return False
    try:
        pad = min(int(os.environ.get("LANCE_OPS_MALLOC_PAD", PAD_BYTES)), 2**31 - 1)
    except ValueError:
        return False
    if pad <= 0:
        return False
    try:
        libc = ctypes.CDLL(None)  # the process's own symbols, glibc's among them (no ldconfig run)
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, ctypes.c_int(pad))) and bool(
            libc.mallopt(_M_TOP_PAD, ctypes.c_int(pad))
        )
    except (OSError, AttributeError):
        return False


def release_free_memory() -> bool:
    """Return the free memory of every malloc heap to the kernel (glibc's ``malloc_trim(0)``:
    the free top of each heap and the free pages inside them), after asking Arrow's default
    memory pool to return the pages it keeps free (``MemoryPool.release_unused``, any platform,
    when pyarrow is loaded);
    whether glibc's part was done (glibc only). Costs a walk of the heaps' free lists: call it
    after large pieces of work, not per batch."""
    pa = sys.modules.get("pyarrow")  # not imported: Arrow has allocated nothing to give back
    if pa is not None:
        pa.default_memory_pool().release_unused()
    if platform.libc_ver()[0] != "glibc":
        return False
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        return False
    return True
