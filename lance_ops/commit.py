"""pylance's ``lance.commit`` names: the error a ``commit_lock`` raises to say its version is
taken, and the lock's type (``lock(version)`` returns a context manager guarding one commit)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

from lance_ops.errors import CommitConflictError

CommitLock = Callable[[int], AbstractContextManager[object]]

__all__ = ["CommitConflictError", "CommitLock"]
