"""Any other storage, through an fsspec filesystem (s3://, gs://, az://, hf://, ...).

Store paths are the filesystem's own paths, i.e. URLs with the protocol stripped
(``s3://bucket/ds`` -> ``bucket/ds``). Requests are costly here, so :meth:`read_ranges` bridges holes
of up to :data:`REMOTE_COALESCE_GAP` and hands all spans to ``fs.cat_ranges`` in one call, which
async filesystems (s3fs, gcsfs, adlfs) serve concurrently.

Small files are read whole: a reader opening a file of at most :data:`REMOTE_WHOLE_READ_SIZE`
bytes fetches it in one request and serves its footer, metadata and page reads from that buffer
(:attr:`~lance_ops.io.base.ObjectStore.whole_file_read_size`). A scan or take about to open many
such files fetches them together (:meth:`FsspecStore.read_files`: one ``cat`` call, whose
requests s3fs sends concurrently), as pylance reads its files concurrently. Whole reads are plain
GETs with no range (and no size asked first), as pylance's. A take needing ranges of many files
asks for them all in one :meth:`FsspecStore.read_many` (one ``cat_ranges`` call over every file).

Writes:

* :class:`FsspecOutput` keeps the first :data:`SINGLE_PUT_SIZE` bytes in memory; a file that ends
  within them is sent in one request on close (``pipe_file``: one PUT on object stores, which
  publish it whole). A larger one goes on through a file opened with ``autocommit=False`` (on S3 a
  multipart upload in parts of :data:`UPLOAD_PART_SIZE`, three requests at least) and is committed
  on close. Filesystems with real files (fsspec's local one, where ``pipe_file`` writes in place)
  always take the second way: they write a temporary file and move it into place on commit.
* :meth:`FsspecStore.put_if_absent` opens with exclusive-create mode ``"xb"``: conditional PUT
  (``If-None-Match: *``) on object stores whose fsspec driver implements it (s3fs >= 2024.12).
  fsspec's local filesystem would create the file empty at open, so a reader listing it meanwhile (a
  manifest being claimed) would see a partial file: there the bytes are written to a temporary
  sibling first and hard-linked into place, as :class:`~lance_ops.io.local.LocalStore` does.
  A lost race is "already exists" (False), however the store words it: ``FileExistsError``, an
  HTTP 412 / ``PreconditionFailed`` answer that the driver did not translate (s3fs only does when
  the answer names the ``If-None-Match`` condition), or any other permanent failure after which the
  object is found there. The object found is **never removed**: it is the winner's.
  A driver that rejects ``"xb"`` (``ValueError``/``NotImplementedError``) cannot create atomically:
  :class:`~lance_ops.errors.ConditionalPutUnsupportedError`, unless the caller does not need
  atomicity (``require_atomic=False``: an external manifest store holds the commit point), which
  gets an exists-check followed by a write (and a warning).

Freshness: other processes commit at any time, so nothing the filesystem caches about a directory
may answer a listing, an existence check or a size: the store drops the driver's cached listings
(``invalidate_cache``) before each, and ``s3://`` filesystems are built without a listings cache
(:mod:`lance_ops.io.options`). File contents are always fetched (Lance files are immutable, but
nothing is cached here anyway).

Failures: every filesystem call goes through the store's :class:`~lance_ops.io.retry.RetryPolicy`,
which retries transient errors with bounded backoff and raises permanent (or exhausted) ones as
:class:`~lance_ops.errors.StorageError`; missing files stay ``FileNotFoundError``. A ranged read
returning fewer bytes than the file holds is a transient short read, retried. Whole writes
(:meth:`FsspecStore.write`, :meth:`FsspecStore.put_if_absent`) are retried whole; a streamed
:class:`FsspecOutput` is not (its bytes are gone), it fails with ``StorageError`` and is discarded.
An exclusive create that fails after creating its file removes that partial file before retrying,
but only on fsspec's local filesystem (and subclasses), where ``"xb"`` creates the file at open with
``O_EXCL``, so the file is known to be ours; on object stores the object at the path after a failure
is the winner's, or ours complete. An "exists" answer is checked against our bytes: an earlier
attempt, ours or the driver's own (botocore resends a PUT whose connection dropped), may have landed
with its answer lost, and the object holding exactly our bytes is then our success, not a conflict
(nor, retried at the next version, a second commit).

The driver's own exceptions (botocore, aiohttp, urllib3, http.client: most are no ``OSError``) are
translated before the policy sees them (:func:`driver_failure`): transport failures — resets, closed
connections, bodies shorter than their ``Content-Length`` — and 5xx / throttling answers are
transient, the rest permanent; so nothing but ``StorageError`` (or the builtin answers above)
leaves the store. s3fs translates some answers itself into ``OSError`` (``InternalError`` into
``EREMOTEIO``, ``SlowDown`` into ``EBUSY``, ...), keeping botocore's error as the cause: those whose
cause is a 5xx / throttling answer are transient too.

One retry budget: on ``s3://`` the driver's own retries are off unless the options ask for them
(botocore and s3fs make one attempt each, :mod:`lance_ops.io.options`), so the policy alone decides
how long a failing store is tried (about 1.5 s of backoff by default), not three stacked layers.
"""

from __future__ import annotations

import asyncio
import builtins
import errno
import functools
import http.client
import inspect
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from typing import Any, ParamSpec, TypeVar

import fsspec
from fsspec import AbstractFileSystem
from fsspec.implementations.local import LocalFileSystem

from lance_ops.errors import ConditionalPutUnsupportedError, StorageError
from lance_ops.io.base import FileInfo, ObjectStore, OutputStream, plan_ranges
from lance_ops.io.local import link_exclusive
from lance_ops.io.metrics import record
from lance_ops.io.options import DEFAULT_S3FS_RETRIES, S3FS_RETRIES_OPTION, fsspec_options
from lance_ops.io.retry import DEFAULT_RETRY, RetryPolicy, ShortReadError, is_transient

__all__ = [
    "REMOTE_COALESCE_GAP",
    "REMOTE_WHOLE_READ_SIZE",
    "SINGLE_PUT_SIZE",
    "UPLOAD_PART_SIZE",
    "FsspecOutput",
    "FsspecStore",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")
P = ParamSpec("P")

# A round trip to an object store costs about as much as transferring ~1 MiB.
REMOTE_COALESCE_GAP = 1024 * 1024
# Files up to this size are read whole when opened, as pylance does below its cloud block size
# (lance-io's 64 KiB). Readers of such files keep the buffer, and the fragment layer keeps up to 512
# readers: at most 32 MiB held.
REMOTE_WHOLE_READ_SIZE = 64 * 1024
# Files up to this size are written in one PUT.
SINGLE_PUT_SIZE = 16 * 1024 * 1024
# Larger files go out in parts of this size (a multipart upload; S3's smallest part is 5 MiB). The
# driver holds a part in memory, and a copy of it while it is sent: s3fs's default block of 50 MiB
# held ~100 MB per file being written (a compaction writing to S3 peaked that much higher).
UPLOAD_PART_SIZE = 16 * 1024 * 1024

# Object stores: no directories to create (a file's parent exists once the file does), and a
# makedirs would cost a request (s3fs checks the bucket).
_FLAT_PROTOCOLS = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl"})

# Keys fsspec drivers use for modification times, in order of preference.
_MTIME_KEYS = ("mtime", "LastModified", "last_modified", "updated", "modified", "created")


def _mtime_seconds(value: Any) -> float:
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, str):
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    return float(value)


class FsspecOutput(OutputStream):
    """A file written in one ``pipe_file`` if it stays within ``single_put_size`` bytes, else through
    a non-autocommitting fsspec file, committed on close; discarded on abort (module docstring)."""

    def __init__(self, fs: AbstractFileSystem, path: str, single_put_size: int = SINGLE_PUT_SIZE) -> None:
        super().__init__(path)
        self._fs = fs
        self._single_put_size = 0 if isinstance(fs, LocalFileSystem) else single_put_size
        self._buffer: bytearray | None = bytearray() if self._single_put_size else None
        self._file: Any = None if self._single_put_size else self._open()

    def _open(self) -> Any:
        # _open is fsspec's per-driver hook; fs.open would also enlist the file in fs.transaction,
        # which keeps every file ever opened this way alive.
        return self._fs._open(self.path, mode="wb", autocommit=False, block_size=UPLOAD_PART_SIZE)

    def _write(self, data: memoryview) -> None:
        try:
            if self._buffer is not None:
                if len(self._buffer) + data.nbytes <= self._single_put_size:
                    self._buffer += data
                    return
                self._file = _translating_driver_errors(self._open)()
                _translating_driver_errors(self._file.write)(self._buffer)
                self._buffer = None
            _translating_driver_errors(self._file.write)(data)
        except OSError as exc:
            raise StorageError(f"writing {self.path} failed: {exc!r}") from exc

    def _commit(self) -> None:
        if self._buffer is not None:
            try:
                _translating_driver_errors(self._fs.pipe_file)(self.path, bytes(self._buffer))
            except OSError as exc:
                raise StorageError(f"publishing {self.path} failed: {exc!r}") from exc
            finally:
                self._buffer = None
            return
        try:
            _translating_driver_errors(self._file.close)()
            _translating_driver_errors(self._file.commit)()
        except OSError as exc:
            self._file.discard()
            raise StorageError(f"publishing {self.path} failed: {exc!r}") from exc

    def _discard(self) -> None:
        self._buffer = None
        if self._file is not None:
            self._file.close()
            self._file.discard()


class FsspecStore(ObjectStore):
    """Adapter from an fsspec filesystem to :class:`~lance_ops.io.base.ObjectStore`."""

    def __init__(
        self,
        fs: AbstractFileSystem,
        coalesce_gap: int = REMOTE_COALESCE_GAP,
        retry: RetryPolicy = DEFAULT_RETRY,
    ) -> None:
        self.fs = fs
        self.coalesce_gap = coalesce_gap
        self.whole_file_read_size = REMOTE_WHOLE_READ_SIZE
        self.retry = retry
        self._made_dirs: set[str] = set()
        protocols = {fs.protocol} if isinstance(fs.protocol, str) else set(fs.protocol)
        self._flat = bool(protocols & _FLAT_PROTOCOLS)
        self.keeps_version_hint = not self._flat
        # s3fs asks for the size (a HEAD) before a whole read, to split a large one into concurrent
        # ranges; the files read whole here (manifests, transactions, deletion files) are small.
        accepts = inspect.signature(getattr(fs, "_cat_file", fs.cat_file)).parameters
        self._whole_read: dict[str, Any] = {"max_concurrency": 1} if "max_concurrency" in accepts else {}

    @classmethod
    def from_uri(cls, uri: str, storage_options: Mapping[str, Any] | None = None) -> tuple[FsspecStore, str]:
        """The store for ``uri`` and its path; ``storage_options`` configure the fsspec filesystem
        (pylance's keys are accepted for ``s3://``, see :mod:`lance_ops.io.options`)."""
        protocol = uri.split("://", 1)[0] if "://" in uri else "file"
        options = fsspec_options(protocol, storage_options)
        retries = options.pop(S3FS_RETRIES_OPTION, None)
        if retries is not None and retries != DEFAULT_S3FS_RETRIES:
            # The count is no constructor argument, so not in fsspec's instance-cache key: a
            # filesystem with a count of its own is not shared with those of the default one.
            options["skip_instance_cache"] = True
        fs, path = fsspec.core.url_to_fs(uri, **options)
        if retries is not None and isinstance(getattr(fs, S3FS_RETRIES_OPTION, None), int):
            # s3fs reads its retry count from the instance (a class attribute by default).
            setattr(fs, S3FS_RETRIES_OPTION, retries)
        return cls(fs), path

    def __repr__(self) -> str:
        protocol = self.fs.protocol if isinstance(self.fs.protocol, str) else self.fs.protocol[0]
        return f"FsspecStore({protocol!r})"  # never the options: they may hold secrets

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        """``fn()`` under the retry policy, the driver's own exceptions seen as OSErrors."""
        return self.retry.call(what, _translating_driver_errors(fn))

    def read(self, path: str) -> bytes:
        data = self._call(f"read {path}", lambda: bytes(self.fs.cat_file(path, **self._whole_read)))
        record((data,))
        return data

    def _check_short(self, path: str, spans: Sequence[tuple[int, int]], blobs: Sequence[bytes]) -> None:
        """Raise :class:`ShortReadError` if a span came back shorter than the file allows."""
        short = [(s, n, len(b)) for (s, n), b in zip(spans, blobs, strict=True) if len(b) < n]
        if short:
            size = int(self.fs.info(path)["size"])
            for start, length, got in short:
                if got < min(length, max(0, size - start)):
                    raise ShortReadError(f"short read of {path}: {got} of {length} bytes at {start}")

    def read_range(self, path: str, start: int, length: int) -> memoryview:
        if start < 0 or length < 0:
            raise ValueError(f"byte ranges need start >= 0 and length >= 0: {path}")
        if length == 0:
            return memoryview(b"")
        return self._read_spans(path, [(start, length)])[0]

    def _read_spans(self, path: str, spans: Sequence[tuple[int, int]]) -> list[memoryview]:
        def attempt() -> list[bytes]:
            blobs = self.fs.cat_ranges(
                [path] * len(spans),
                [start for start, _ in spans],
                [start + length for start, length in spans],
                on_error="raise",
            )
            self._check_short(path, spans, blobs)
            return blobs

        blobs = self._call(f"read {len(spans)} ranges of {path}", attempt)
        record(blobs)
        return [memoryview(blob) for blob in blobs]

    def read_many(self, requests: Sequence[tuple[str, Sequence[tuple[int, int]]]]) -> list[list[memoryview]]:
        """The ranges of every file coalesced as :meth:`read_ranges` does, and all the spans of
        all the files in one ``cat_ranges`` call, which async drivers (s3fs) send concurrently."""
        plans = [plan_ranges(ranges, self.coalesce_gap) for _, ranges in requests]
        paths = [path for (path, _), plan in zip(requests, plans, strict=True) for _ in plan.spans]
        spans = [span for plan in plans for span in plan.spans]
        if len({*paths}) < 2:
            return [self.read_ranges(path, ranges) for path, ranges in requests]

        def attempt() -> list[bytes]:
            blobs = self.fs.cat_ranges(
                paths,
                [start for start, _ in spans],
                [start + length for start, length in spans],
                on_error="raise",
            )
            for path, span, blob in zip(paths, spans, blobs, strict=True):
                self._check_short(path, [span], [blob])
            return blobs

        blobs = self._call(f"read {len(spans)} ranges of {len(requests)} files", attempt)
        record(blobs)
        out, at = [], 0
        for plan in plans:
            count = len(plan.span_starts)
            out.append(plan.slices([memoryview(blob) for blob in blobs[at : at + count]]))
            at += count
        return out

    def read_files(self, files: Sequence[tuple[str, int]]) -> list[memoryview]:
        """All of ``files`` in one ``cat`` call (plain GETs, no size asked first), which async
        drivers (s3fs) send concurrently."""
        if len(files) < 2:
            return [memoryview(self.read(path)) for path, _ in files]
        paths = [path for path, _ in files]

        def attempt() -> list[bytes]:
            found = self.fs.cat(paths, on_error="raise", **self._whole_read)
            blobs = [found[path] for path in paths]
            for (path, size), blob in zip(files, blobs, strict=True):
                if len(blob) < size:
                    self._check_short(path, [(0, size)], [blob])
            return blobs

        blobs = self._call(f"read {len(files)} files", attempt)
        record(blobs)
        return [memoryview(blob) for blob in blobs]

    def read_files_ahead(self, files: Sequence[tuple[str, int]]) -> list[Callable[[], memoryview]]:
        """Every read started now: on an async filesystem (s3fs) as requests on its event loop,
        on another on the threads of :func:`_fetch_pool`. A first request that fails, or whose
        body comes back short, is made again through the retry policy when its call is made (a
        missing file raises ``FileNotFoundError``)."""
        loop = getattr(self.fs, "loop", None) if getattr(self.fs, "async_impl", False) else None
        out: list[Callable[[], memoryview]] = []
        for path, size in files:
            if loop is None:
                out.append(_fetch_pool().submit(self._read_whole, path, size).result)
            else:
                future = asyncio.run_coroutine_threadsafe(self.fs._cat_file(path, **self._whole_read), loop)
                out.append(functools.partial(self._awaited, path, size, future))
        return out

    def _read_whole(self, path: str, size: int) -> memoryview:
        """The whole of ``path`` (``size`` bytes, as far as the caller knows) under the retry
        policy, a body cut short read again."""

        def attempt() -> bytes:
            data = bytes(self.fs.cat_file(path, **self._whole_read))
            if len(data) < size:
                self._check_short(path, [(0, size)], [data])
            return data

        data = self._call(f"read {path}", attempt)
        record((data,))
        return memoryview(data)

    def _awaited(self, path: str, size: int, future: Future[bytes]) -> memoryview:
        """The file a first request started by :meth:`read_files_ahead` reads; if it failed or
        came back short, read again by :meth:`_read_whole`."""
        try:
            blob = future.result()
        except FileNotFoundError:
            raise
        except Exception:
            return self._read_whole(path, size)  # the retry policy judges the failure
        if len(blob) < size:
            return self._read_whole(path, size)
        record((blob,))
        return memoryview(blob)

    def size(self, path: str) -> int:
        self.fs.invalidate_cache(path)
        info = self._call(f"stat {path}", lambda: self.fs.info(path))
        if info.get("type") == "directory":
            raise IsADirectoryError(path)
        return int(info["size"])

    def exists(self, path: str) -> bool:
        self.fs.invalidate_cache(path)
        return self._call(f"stat {path}", lambda: bool(self.fs.isfile(path)))

    def _ensure_parent(self, path: str) -> None:
        """Create the parent directory where the filesystem has directories (object stores ignore this).

        Remembered per directory, so a filesystem pays the round trip once per directory, not per write.
        """
        parent = self.fs._parent(path)
        if not self._flat and parent not in self._made_dirs:
            self._call(f"mkdir {parent}", lambda: self.fs.makedirs(parent, exist_ok=True))
            self._made_dirs.add(parent)

    def open_output(self, path: str) -> FsspecOutput:
        self._ensure_parent(path)
        return self._call(f"open {path}", lambda: FsspecOutput(self.fs, path))

    def write(self, path: str, data: bytes | bytearray | memoryview) -> None:
        payload = memoryview(data).cast("B")
        self._ensure_parent(path)

        def attempt() -> None:
            with FsspecOutput(self.fs, path) as out:
                out.write(payload)

        self._call(f"write {path}", _unwrapping_storage_errors(attempt))

    def put_if_absent(
        self, path: str, data: bytes | bytearray | memoryview, *, require_atomic: bool = True
    ) -> bool:
        self._ensure_parent(path)
        payload = memoryview(data).cast("B")

        def attempt() -> bool:
            try:
                self._create_exclusive(path, payload, require_atomic)
                return True
            except FileExistsError:
                # The file may be ours: an earlier attempt (ours, or the driver's own retry of this
                # one) landed and its answer was lost.
                return self._holds(path, payload)
            except StorageError:
                raise
            except OSError as exc:
                if is_transient(exc) or not self.exists(path):
                    raise
                # A permanent failure, yet the object is there: a lost race in words we do not
                # know, or our own create landing. Either way it stays.
                return self._holds(path, payload)

        return self._call(f"create {path}", attempt)

    def _holds(self, path: str, payload: memoryview) -> bool:
        """Whether ``path`` exists holding exactly ``payload``."""
        try:
            return bytes(self.fs.cat_file(path)) == bytes(payload)
        except FileNotFoundError:
            return False

    def _create_exclusive(self, path: str, payload: memoryview, require_atomic: bool) -> None:
        """One exclusive-create attempt; raises FileExistsError if the path is taken."""
        if type(self.fs) is LocalFileSystem:  # subclasses may change how files open
            link_exclusive(self.fs._strip_protocol(path), payload)
            return
        try:
            handle = self.fs.open(path, "xb")
        except (ValueError, NotImplementedError) as exc:
            if require_atomic:
                raise ConditionalPutUnsupportedError(
                    f"{type(self.fs).__name__} cannot create {path} atomically (no exclusive create / "
                    f"conditional put), so concurrent commits could overwrite each other; commit through "
                    f"an external manifest store (manifest_store=lance_ops.SqliteManifestStore(path))"
                ) from exc
            logger.warning(
                "%s does not support exclusive create; put_if_absent(%s) is not atomic",
                type(self.fs).__name__,
                path,
            )
            if self.exists(path):
                raise FileExistsError(errno.EEXIST, "file exists", path) from None
            self.write(path, payload)
            return
        try:
            with handle:
                handle.write(payload)
        except FileExistsError:
            raise
        except OSError as exc:
            if precondition_failed(exc):
                raise FileExistsError(errno.EEXIST, "conditional put refused: file exists", path) from exc
            if isinstance(self.fs, LocalFileSystem):
                # "xb" created the file at open (O_EXCL), so it is ours: remove what a failed write left.
                if self.fs.isfile(path) and not self._holds(path, payload):
                    self.fs.rm_file(path)
            raise

    def list(self, dir_path: str) -> list[FileInfo]:
        self.fs.invalidate_cache(dir_path)
        try:
            entries = self._call(f"list {dir_path}", lambda: self.fs.ls(dir_path, detail=True))
        except (FileNotFoundError, NotADirectoryError):
            return []
        parent = self.fs._strip_protocol(dir_path).rstrip("/")
        found = []
        for entry in entries:
            name = self.fs._strip_protocol(entry["name"])
            if entry.get("type") != "file" or self.fs._parent(name).rstrip("/") != parent:
                continue
            found.append(FileInfo(name, int(entry["size"]), self._mtime(name, entry)))
        return sorted(found, key=lambda info: info.path)

    def walk(self, dir_path: str) -> builtins.list[FileInfo]:
        self.fs.invalidate_cache(dir_path)
        try:
            entries = self._call(f"walk {dir_path}", lambda: self.fs.find(dir_path, detail=True))
        except (FileNotFoundError, NotADirectoryError):
            return []
        found = [
            FileInfo(self.fs._strip_protocol(name), int(entry["size"]), self._mtime(name, entry))
            for name, entry in entries.items()
            if entry.get("type") == "file"
        ]
        return sorted(found, key=lambda info: info.path)

    def _mtime(self, path: str, entry: Mapping[str, Any]) -> float:
        for key in _MTIME_KEYS:
            if entry.get(key) is not None:
                return _mtime_seconds(entry[key])
        return _mtime_seconds(self._call(f"stat {path}", lambda: self.fs.modified(path)))

    def delete(self, path: str) -> None:
        try:
            self._call(f"delete {path}", lambda: self.fs.rm_file(path))
        except FileNotFoundError:
            pass


def precondition_failed(exc: BaseException) -> bool:
    """Whether ``exc``, or an error it was raised from, is an HTTP 412 / ``PreconditionFailed`` answer
    (botocore's ``ClientError.response``; ``status`` / ``status_code`` of HTTP client errors)."""
    seen: BaseException | None = exc
    for _ in range(8):  # cause chains are short; never loop on a cyclic one
        if seen is None:
            return False
        response = getattr(seen, "response", None)
        if isinstance(response, Mapping):
            error = response.get("Error") or {}
            metadata = response.get("ResponseMetadata") or {}
            if error.get("Code") == "PreconditionFailed" or metadata.get("HTTPStatusCode") == 412:
                return True
        if 412 in (getattr(seen, "status", None), getattr(seen, "status_code", None)):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _unwrapping_storage_errors(fn: Callable[[], T]) -> Callable[[], T]:
    """``fn`` re-raising the transient cause of a :class:`StorageError` (so a retry policy sees it).

    :class:`FsspecOutput` reports failures as StorageError for its streaming users; a whole write
    built on it must still retry the transient ones.
    """

    def run() -> T:
        try:
            return fn()
        except StorageError as exc:
            cause = exc.__cause__
            if isinstance(cause, OSError) and is_transient(cause):
                raise cause from None
            raise

    return run


# Error codes of S3-style answers worth sending again (botocore's own list of throttling codes, and
# the 5xx ones), for a ClientError that reaches us untranslated.
_TRANSIENT_CODES = frozenset(
    {
        "InternalError",
        "ServiceUnavailable",
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "RequestTimeout",
        "RequestTimeTooSkewed",
        "RequestLimitExceeded",
        "BandwidthLimitExceeded",
        "TooManyRequestsException",
    }
)


@functools.cache
def _driver_error_types() -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
    """(transport errors, other errors) of the HTTP stacks fsspec drivers use, those installed.

    Imported on the first failure only: most stores never fail, and botocore is slow to import.
    """
    transport: list[type[BaseException]] = [http.client.HTTPException]
    other: list[type[BaseException]] = []
    try:
        import botocore.exceptions as boto
        from botocore.parsers import ResponseParserError
    except ImportError:
        pass
    else:
        transport += [
            boto.HTTPClientError,
            boto.ConnectionError,
            boto.IncompleteReadError,
            ResponseParserError,
        ]
        other += [boto.BotoCoreError, boto.ClientError]
    try:
        import aiohttp
    except ImportError:
        pass
    else:
        transport += [aiohttp.ClientConnectionError, aiohttp.ClientPayloadError]
        other.append(aiohttp.ClientError)
    try:
        import urllib3.exceptions as urllib3_errors
    except ImportError:
        pass
    else:
        transport += [urllib3_errors.ProtocolError, urllib3_errors.IncompleteRead]
    return tuple(transport), tuple(other)


def _status_of(exc: BaseException) -> tuple[int | None, str | None]:
    """HTTP status and S3 error code of an HTTP client error (botocore ``response``, aiohttp ``status``)."""
    response = getattr(exc, "response", None)
    if isinstance(response, Mapping):
        status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
        return status, (response.get("Error") or {}).get("Code")
    status = getattr(exc, "status", None)
    return (status if isinstance(status, int) else None), None


def driver_failure(exc: BaseException) -> OSError | None:
    """The ``OSError`` standing for ``exc`` if it is an exception of a driver's HTTP stack (botocore,
    aiohttp, urllib3, http.client; most are no ``OSError``, and those that are carry no errno the
    retry policy reads); None otherwise.

    Transport failures (resets, closed connections, bodies shorter than their ``Content-Length``,
    unparseable answers) and 5xx / throttling answers become ``ConnectionError`` (transient, retried);
    other driver errors ``OSError(EIO)`` (permanent: raised as StorageError). The original is the
    new error's cause.
    """
    transport, other = _driver_error_types()
    if isinstance(exc, transport):
        return ConnectionError(f"{type(exc).__name__}: {exc}")
    if isinstance(exc, other):
        status, code = _status_of(exc)
        if (status is not None and (status >= 500 or status == 429)) or code in _TRANSIENT_CODES:
            return ConnectionError(f"{type(exc).__name__}: {exc}")
        return OSError(errno.EIO, f"{type(exc).__name__}: {exc}")
    if isinstance(exc, OSError) and not is_transient(exc) and isinstance(exc.__cause__, other):
        # s3fs's translation of a botocore answer (module docstring): transient if the answer is.
        if isinstance(driver_failure(exc.__cause__), ConnectionError):
            return ConnectionError(f"{type(exc).__name__}: {exc}")
    return None


#: Threads reading whole files ahead where the filesystem has no event loop
#: (:meth:`FsspecStore.read_files_ahead`).
FETCH_THREADS = 16
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _fetch_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(FETCH_THREADS, thread_name_prefix="lance-ops-fetch")
        return _pool


def _translating_driver_errors(fn: Callable[P, T]) -> Callable[P, T]:
    """``fn`` raising :func:`driver_failure`'s ``OSError`` in place of a driver's own exception."""

    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return fn(*args, **kwargs)
        except (FileNotFoundError, FileExistsError, StorageError):
            raise
        except Exception as exc:
            failure = driver_failure(exc)
            if failure is None:
                raise
            raise failure from exc

    return run
