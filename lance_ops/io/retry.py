"""Bounded retries of transient storage failures (used by :class:`~lance_ops.io.fsspec_store.FsspecStore`).

*Transient* (:func:`is_transient`) means the same request may succeed if sent again:

* ``ConnectionError`` (resets, refused, aborted, broken pipes) and ``TimeoutError``;
* an ``OSError`` whose ``errno`` is one of :data:`TRANSIENT_ERRNOS` (``EAGAIN``/``EWOULDBLOCK``,
  ``EINTR``, ``EBUSY``, ``ETIMEDOUT``, ``ENETDOWN``, ``ENETUNREACH``, ``ENETRESET``, ``EHOSTUNREACH``,
  ``ECONNRESET``, ``ECONNABORTED``, ``ECONNREFUSED``);
* a *short read*: a ranged read returning fewer bytes than a file that is long enough holds
  (:class:`ShortReadError`, raised by the store when it notices).

Everything else is *permanent*: missing files (``FileNotFoundError`` stays the builtin, the io
layer's contract), and any other ``OSError`` (permissions, a full disk, ...) which
:meth:`RetryPolicy.call` re-raises as :class:`~lance_ops.errors.StorageError` (an ``OSError``) —
as it does a transient failure still failing after the last attempt.

Backoff is exponential with full jitter, capped per sleep (``max_backoff``) and in total
(``max_elapsed``): with the defaults, at most 5 attempts and about 1.5 s of sleeping.

This policy is the only retry layer of a store: the fsspec driver's own retries are turned off
where lance_ops builds the filesystem (botocore's and s3fs's on ``s3://``, see
:mod:`lance_ops.io.options`), so a persistently failing store fails within this budget instead of
the product of three.
"""

from __future__ import annotations

import errno
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from lance_ops.errors import StorageError

__all__ = ["DEFAULT_RETRY", "TRANSIENT_ERRNOS", "RetryPolicy", "ShortReadError", "is_transient"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

TRANSIENT_ERRNOS = frozenset(
    {
        errno.EAGAIN,
        errno.EWOULDBLOCK,
        errno.EINTR,
        errno.EBUSY,
        errno.ETIMEDOUT,
        errno.ENETDOWN,
        errno.ENETUNREACH,
        errno.ENETRESET,
        errno.EHOSTUNREACH,
        errno.ECONNRESET,
        errno.ECONNABORTED,
        errno.ECONNREFUSED,
    }
)


class ShortReadError(OSError):
    """A ranged read returned fewer bytes than the file holds (a transient, retried failure)."""


def is_transient(exc: BaseException) -> bool:
    """Whether retrying the request that raised ``exc`` may succeed (see module docstring)."""
    if isinstance(exc, StorageError | FileNotFoundError | FileExistsError | PermissionError):
        return False
    if isinstance(exc, ConnectionError | TimeoutError | ShortReadError):
        return True
    return isinstance(exc, OSError) and exc.errno in TRANSIENT_ERRNOS


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry a transient storage failure.

    ``max_attempts`` counts the first try; sleeps grow from ``initial_backoff`` by ``multiplier``, each
    drawn uniformly from ``[0, bound]`` (full jitter, so racing clients spread out), capped at
    ``max_backoff``; no retry starts once ``max_elapsed`` seconds have passed since the first try.
    """

    max_attempts: int = 5
    initial_backoff: float = 0.05
    multiplier: float = 2.0
    max_backoff: float = 1.0
    max_elapsed: float = 30.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts}")
        if min(self.initial_backoff, self.max_backoff, self.max_elapsed) < 0 or self.multiplier < 1:
            raise ValueError("backoffs and max_elapsed must be >= 0 and multiplier >= 1")

    def backoff(self, attempt: int) -> float:
        """Seconds to sleep after failed attempt number ``attempt`` (1-based)."""
        bound = min(self.max_backoff, self.initial_backoff * self.multiplier ** (attempt - 1))
        return random.uniform(0, bound)

    def call(self, what: str, fn: Callable[[], T]) -> T:
        """``fn()``, retried on transient failures; permanent or exhausted ones as StorageError.

        ``FileNotFoundError`` and ``FileExistsError`` pass through unchanged: they are answers, not
        failures, at this layer.
        """
        started = time.monotonic()
        attempt = 1
        while True:
            try:
                return fn()
            except (FileNotFoundError, FileExistsError, StorageError):
                raise
            except OSError as exc:
                elapsed = time.monotonic() - started
                if not is_transient(exc):
                    raise StorageError(f"{what} failed: {exc!r}") from exc
                if attempt >= self.max_attempts or elapsed >= self.max_elapsed:
                    raise StorageError(f"{what} still failing after {attempt} attempts: {exc!r}") from exc
                delay = min(self.backoff(attempt), max(0.0, self.max_elapsed - elapsed))
                logger.info("%s failed (%r); retry %d in %.3f s", what, exc, attempt, delay)
                time.sleep(delay)
                attempt += 1


DEFAULT_RETRY = RetryPolicy()
