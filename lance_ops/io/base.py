"""The storage seam: an object-store interface used by ``lance_ops.file`` and ``lance_ops.table``.

Everything above this layer sees storage as a flat namespace of immutable-ish objects addressed by
*store paths* (strings the store understands; build them with :meth:`ObjectStore.join`). The
interface is deliberately the small set of operations a Lance reader and committer need:

* whole and ranged reads, plus :meth:`ObjectStore.read_ranges`, which serves many small reads of
  one file (column pages, offsets, footers) with few I/O calls by *coalescing*: requested ranges
  are sorted, ranges that overlap or sit at most ``coalesce_gap`` bytes apart are merged into one
  span, each span is read once, and every request gets a zero-copy ``memoryview`` slice of its span,
  returned in the caller's order. Example with ``coalesce_gap=8``::

      requests  (10, 5) (0, 4) (12, 2) (40, 1)
      spans     [0, 15) [40, 41)           # the hole 4..10 (6 bytes) is bridged; 40 is far
      answers   span0[10:15] span0[0:4] span0[12:14] span1[0:1]

* :meth:`ObjectStore.put_if_absent`, an atomic create used to commit manifests (exactly one of
  several racing writers wins), and :meth:`ObjectStore.open_output`, a streaming writer whose file
  only becomes visible, whole, on ``close()``;
* a non-recursive :meth:`ObjectStore.list` returning :class:`FileInfo`, and :meth:`ObjectStore.walk`,
  which lists a whole subtree *including* the temporary files of writes in progress (or of killed
  writers), for cleanup.

Reads past the end of a file are *not* errors here: a range is clipped to the bytes that exist
(possibly to nothing). Only the file layer knows how long a range must be, so it checks lengths and
raises :class:`lance_ops.errors.CorruptFileError`. Missing files raise the builtin
``FileNotFoundError``. No Arrow in this package: bytes in, bytes out.
"""

from __future__ import annotations

import builtins
import functools
import posixpath
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Self

import numpy as np

__all__ = [
    "CloseOrAbort",
    "FileInfo",
    "ObjectStore",
    "OutputStream",
    "BufferedRanges",
    "RangePlan",
    "RangeReader",
    "plan_ranges",
    "serve_ranges",
]


@dataclass(frozen=True)
class FileInfo:
    """One file found by :meth:`ObjectStore.list`.

    ``path`` is a store path (usable with the same store), ``size`` is in bytes and ``mtime`` is the
    last-modification time in seconds since the Unix epoch (UTC).
    """

    path: str
    size: int
    mtime: float


@dataclass(frozen=True)
class RangePlan:
    """How a batch of ``(start, length)`` requests is served by a few coalesced reads.

    ``span_starts[k]``/``span_ends[k]`` bound the k-th read (half-open byte interval, sorted by
    start). ``owner[i]`` is the span answering request ``i``, or -1 for an empty request (length 0),
    which needs no I/O. ``starts``/``lengths`` are the original requests, in the caller's order.
    """

    starts: np.ndarray
    lengths: np.ndarray
    span_starts: np.ndarray
    span_ends: np.ndarray
    owner: np.ndarray

    @property
    def spans(self) -> list[tuple[int, int]]:
        """The reads to issue, as ``(start, length)`` pairs."""
        return list(zip(self.span_starts.tolist(), (self.span_ends - self.span_starts).tolist(), strict=True))

    def slices(self, buffers: Sequence[memoryview]) -> list[memoryview]:
        """Cut the answer to every request out of the span buffers (one per span, in span order).

        A span buffer may be shorter than asked for when the file ends early; requests falling (partly)
        past its end get the bytes that exist, possibly none.
        """
        if len(buffers) != len(self.span_starts):
            raise ValueError(f"expected {len(self.span_starts)} span buffers, got {len(buffers)}")
        empty = memoryview(b"")
        span_base = self.span_starts[np.maximum(self.owner, 0)] if len(buffers) else 0
        offsets = (self.starts - span_base).tolist()
        out: list[memoryview] = []
        for span, offset, length in zip(self.owner.tolist(), offsets, self.lengths.tolist(), strict=True):
            out.append(empty if span < 0 else buffers[span][offset : offset + length])
        return out


# Up to this many requests are planned in plain Python: the vectorised plan's ~20 numpy calls cost
# more than the loop (a take reading a few rows from each of many small files plans one or two).
_FEW_RANGES = 8


def plan_ranges(ranges: Sequence[tuple[int, int]] | np.ndarray, coalesce_gap: int) -> RangePlan:
    """Merge ``(start, length)`` requests whose gap is at most ``coalesce_gap`` bytes into spans.

    Overlapping and touching requests always merge. Vectorised: sort by start, carry the running
    maximum end, and open a new span wherever a start lies beyond that end plus the gap.
    """
    if coalesce_gap < 0:
        raise ValueError(f"coalesce_gap must be >= 0, got {coalesce_gap}")
    if len(ranges) <= _FEW_RANGES and not (isinstance(ranges, np.ndarray) and ranges.ndim != 2):
        pairs = ranges.tolist() if isinstance(ranges, np.ndarray) else ranges
        return _plan_few([(int(s), int(n)) for s, n in pairs], coalesce_gap)
    return _plan_many(ranges, coalesce_gap)


def _plan_few(pairs: list[tuple[int, int]], coalesce_gap: int) -> RangePlan:
    """:func:`plan_ranges` of a few requests, one at a time (same plan as :func:`_plan_many`)."""
    if any(start < 0 or length < 0 for start, length in pairs):
        raise ValueError("byte ranges need start >= 0 and length >= 0")
    owner = [-1] * len(pairs)
    span_starts: list[int] = []
    span_ends: list[int] = []
    for i in sorted((i for i, (_, length) in enumerate(pairs) if length > 0), key=lambda i: pairs[i][0]):
        start, length = pairs[i]
        if not span_starts or start > span_ends[-1] + coalesce_gap:
            span_starts.append(start)
            span_ends.append(start + length)
        else:
            span_ends[-1] = max(span_ends[-1], start + length)
        owner[i] = len(span_starts) - 1
    return RangePlan(
        starts=np.array([start for start, _ in pairs], dtype=np.int64),
        lengths=np.array([length for _, length in pairs], dtype=np.int64),
        span_starts=np.array(span_starts, dtype=np.int64),
        span_ends=np.array(span_ends, dtype=np.int64),
        owner=np.array(owner, dtype=np.int64),
    )


def _plan_many(ranges: Sequence[tuple[int, int]] | np.ndarray, coalesce_gap: int) -> RangePlan:
    requests = np.asarray(ranges, dtype=np.int64).reshape(-1, 2)
    starts = requests[:, 0].copy()
    lengths = requests[:, 1].copy()
    if (starts < 0).any() or (lengths < 0).any():
        raise ValueError("byte ranges need start >= 0 and length >= 0")
    owner = np.full(len(starts), -1, dtype=np.int64)
    wanted = np.flatnonzero(lengths > 0)
    if len(wanted) == 0:
        none = np.empty(0, dtype=np.int64)
        return RangePlan(starts, lengths, none, none.copy(), owner)
    order = wanted[np.argsort(starts[wanted], kind="stable")]
    sorted_starts = starts[order]
    sorted_ends = sorted_starts + lengths[order]
    reach = np.maximum.accumulate(sorted_ends)
    opens = np.empty(len(order), dtype=bool)
    opens[0] = True
    opens[1:] = sorted_starts[1:] > reach[:-1] + coalesce_gap
    first = np.flatnonzero(opens)
    owner[order] = np.cumsum(opens) - 1
    return RangePlan(
        starts=starts,
        lengths=lengths,
        span_starts=sorted_starts[first],
        span_ends=np.maximum.reduceat(sorted_ends, first),
        owner=owner,
    )


class RangeReader:
    """Ranged reads of one file of a store (:meth:`ObjectStore.open_ranges`): the same answers as
    ``store.read_ranges(path, ...)``. :meth:`close` releases whatever it holds (a no-op here); it
    stays usable afterwards, reopening on demand. Pickles (and forks) as its store and path."""

    def __init__(self, store: ObjectStore, path: str) -> None:
        self.store = store
        self.path = path

    def read_ranges(self, ranges: Sequence[tuple[int, int]] | np.ndarray) -> list[memoryview]:
        return self.store.read_ranges(self.path, ranges)

    def close(self) -> None:
        """Release any open handle (reads after this reopen it)."""


class BufferedRanges(RangeReader):
    """Ranged reads of a file already read whole (``contents``), served from that buffer with no I/O.

    A reader of a small remote file holds one of these (see
    :attr:`ObjectStore.whole_file_read_size`). Pickles as a plain :class:`RangeReader` of the same
    store and path: the buffer stays behind, reads after unpickling go to the store.
    """

    def __init__(self, store: ObjectStore, path: str, contents: memoryview) -> None:
        super().__init__(store, path)
        self.contents = contents

    def read_ranges(self, ranges: Sequence[tuple[int, int]] | np.ndarray) -> list[memoryview]:
        pairs = ranges.tolist() if isinstance(ranges, np.ndarray) else ranges
        out = []
        for start, length in pairs:
            if start < 0 or length < 0:
                raise ValueError("byte ranges need start >= 0 and length >= 0")
            out.append(self.contents[start : start + length])
        return out

    def __reduce__(self) -> tuple[type[RangeReader], tuple[ObjectStore, str]]:
        return (RangeReader, (self.store, self.path))


def serve_ranges(
    ranges: Sequence[tuple[int, int]] | np.ndarray,
    coalesce_gap: int,
    read_spans: Callable[[list[tuple[int, int]]], list[memoryview]],
) -> list[memoryview]:
    """:meth:`ObjectStore.read_ranges` over ``read_spans`` (which reads coalesced spans of one file)."""
    if len(ranges) == 1 and not isinstance(ranges, np.ndarray):
        # One request (a small page's chunks, a footer): nothing to plan or cut.
        ((start, length),) = ranges
        start, length = int(start), int(length)
        if start < 0 or length < 0:
            raise ValueError("byte ranges need start >= 0 and length >= 0")
        return read_spans([(start, length)]) if length else [memoryview(b"")]
    plan = plan_ranges(ranges, coalesce_gap)
    return plan.slices(read_spans(plan.spans) if len(plan.span_starts) else [])


class CloseOrAbort:
    """Used as a context manager: :meth:`close` when the block ends normally, :meth:`abort` when it
    raises, so a failed write never leaves a partial file behind."""

    def close(self) -> object:
        raise NotImplementedError

    def abort(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


class OutputStream(CloseOrAbort, ABC):
    """A file being written. Its bytes become visible at its path, all at once, on :meth:`close`.

    Used as a context manager, leaving the block by an exception calls :meth:`abort` instead, so a
    failed write never leaves a partial file behind.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._written = 0
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Append ``data`` to the file."""
        if self._closed:
            raise ValueError(f"write to closed output {self.path}")
        view = memoryview(data).cast("B")
        self._write(view)
        self._written += view.nbytes

    def tell(self) -> int:
        """Number of bytes written so far (the offset the next write lands at)."""
        return self._written

    def close(self) -> None:
        """Publish the file. Closing twice is harmless."""
        if not self._closed:
            self._closed = True
            self._commit()

    def abort(self) -> None:
        """Throw the written bytes away; nothing appears at the path. Harmless after close/abort."""
        if not self._closed:
            self._closed = True
            self._discard()

    @abstractmethod
    def _write(self, data: memoryview) -> None: ...

    @abstractmethod
    def _commit(self) -> None: ...

    @abstractmethod
    def _discard(self) -> None: ...


class ObjectStore(ABC):
    """Storage for Lance files and manifests. Subclasses: local, memory, fsspec.

    ``coalesce_gap`` is the largest hole (bytes) :meth:`read_ranges` reads through rather than
    issuing a separate request; it reflects what one extra request costs on the medium.
    """

    coalesce_gap: int = 0
    #: Files up to this many bytes are read whole in one request when a reader opens them, and the
    #: reader serves all its reads from that buffer. Stores where a request costs more than the bytes
    #: (remote ones) set it; 0 (local disk, memory) keeps the tail read and ranged reads as they are.
    whole_file_read_size: int = 0
    #: Whether commits keep ``_versions/latest_version_hint.json`` up to date. pylance 14 writes it
    #: on local disks but not on object stores (one PUT per commit there, and nothing trusts it).
    keeps_version_hint: bool = True

    @abstractmethod
    def read(self, path: str) -> bytes:
        """The whole file. Raises ``FileNotFoundError`` if absent."""

    @abstractmethod
    def read_range(self, path: str, start: int, length: int) -> memoryview:
        """``length`` bytes from ``start``, clipped at the end of the file (never an error)."""

    def read_ranges(self, path: str, ranges: Sequence[tuple[int, int]] | np.ndarray) -> list[memoryview]:
        """Bytes for every ``(start, length)`` in ``ranges``, in the caller's order.

        Nearby ranges are served by one read (see module docstring); results may share a buffer.
        Clipping at the end of file as in :meth:`read_range`. Empty ranges need no I/O, so a batch
        of only empty ranges does not touch (or check) the file.
        """
        return serve_ranges(ranges, self.coalesce_gap, lambda spans: self._read_spans(path, spans))

    def _read_spans(self, path: str, spans: list[tuple[int, int]]) -> list[memoryview]:
        """Read coalesced spans; stores able to share a handle or go concurrent override this."""
        return [self.read_range(path, start, length) for start, length in spans]

    def read_files(self, files: Sequence[tuple[str, int]]) -> list[memoryview]:
        """The whole of each ``(path, size)`` in ``files``, in order: small files a reader is about
        to open (``size``: what the manifest records; a file may turn out longer or shorter). One
        after another here; a store that can issue requests concurrently (remote ones) overrides this."""
        return [memoryview(self.read(path)) for path, _ in files]

    def read_many(self, requests: Sequence[tuple[str, Sequence[tuple[int, int]]]]) -> list[list[memoryview]]:
        """:meth:`read_ranges` of each ``(path, ranges)`` of ``requests`` (several files), in order:
        the byte ranges a read of many files needs at once (a take's pages). One file after
        another here; a store that can issue requests concurrently (remote ones) overrides this."""
        return [self.read_ranges(path, ranges) for path, ranges in requests]

    def read_files_ahead(self, files: Sequence[tuple[str, int]]) -> list[Callable[[], memoryview]]:
        """Per ``(path, size)`` of ``files``, a call returning that file whole (as
        :meth:`read_files`). A store able to keep requests in flight while the caller works
        (remote ones) starts every read now, so the caller can use each file as it arrives; here
        each is read when its call is made."""
        return [functools.partial(self._read_view, path) for path, _ in files]

    def _read_view(self, path: str) -> memoryview:
        return memoryview(self.read(path))

    def open_ranges(self, path: str) -> RangeReader:
        """A :class:`RangeReader` of ``path``, for a caller that reads that one file many times.

        By default it forwards every call to :meth:`read_ranges`; a store able to keep a handle
        open between calls (the local disk) returns one that does.
        """
        return RangeReader(self, path)

    @abstractmethod
    def size(self, path: str) -> int:
        """File size in bytes. Raises ``FileNotFoundError`` if absent."""

    @abstractmethod
    def exists(self, path: str) -> bool:
        """Whether a file (not a directory or prefix) exists at ``path``."""

    @abstractmethod
    def open_output(self, path: str) -> OutputStream:
        """Start writing ``path`` (created or replaced when the stream is closed)."""

    def write(self, path: str, data: bytes | bytearray | memoryview) -> None:
        """Create or overwrite ``path`` with ``data``; readers see the old or the new file, whole."""
        with self.open_output(path) as out:
            out.write(data)

    @abstractmethod
    def put_if_absent(
        self, path: str, data: bytes | bytearray | memoryview, *, require_atomic: bool = True
    ) -> bool:
        """Create ``path`` holding ``data`` unless it exists. True if we created it, else False.

        Atomic: of several concurrent callers for one path exactly one gets True. A store that
        cannot create atomically raises :class:`~lance_ops.errors.ConditionalPutUnsupportedError`,
        unless ``require_atomic`` is False (the caller's commit point is elsewhere, e.g. an external
        manifest store): then it checks and writes, and racing callers may both get True.
        """

    @abstractmethod
    def list(self, dir_path: str) -> list[FileInfo]:
        """Files directly inside ``dir_path``, sorted by path. A missing directory gives ``[]``."""

    def list_names(self, dir_path: str) -> builtins.list[str]:
        """The names (last path component) of the files :meth:`list` gives, in no set order; a store
        that can list without each file's size and time (the local disk) overrides this."""
        return [info.path.rsplit("/", 1)[-1] for info in self.list(dir_path)]

    @abstractmethod
    def walk(self, dir_path: str) -> builtins.list[FileInfo]:
        """Every file below ``dir_path`` at any depth, temporary files of unfinished writes included.

        Sorted by path; a missing directory gives ``[]``.
        """

    @abstractmethod
    def delete(self, path: str) -> None:
        """Remove the file at ``path``; deleting a missing file is not an error."""

    def remove_directories(self, dir_path: str) -> None:
        """Remove the directory ``dir_path`` and the directories below it, once their files are
        deleted, where the store has directories (local disks); object stores have none to remove."""
        return

    def join(self, base: str, *parts: str) -> str:
        """Store path of ``parts`` below ``base`` ('/'-separated)."""
        return posixpath.join(base, *(part.strip("/") for part in parts if part.strip("/")))
