"""An fsspec filesystem that injects storage faults at chosen points (``faulty:///abs/path``).

It is fsspec's local filesystem plus a :class:`FaultPlan`: a list of :class:`Fault` rules, each
matching calls by method and a path substring, letting ``skip`` matching calls through, then firing
``times`` times. Kinds:

* ``transient``: raise ``ConnectionResetError`` (the library should retry);
* ``permanent``: raise ``OSError(EIO)`` (the library should fail with a typed ``StorageError``);
* ``short``: a ranged ``cat_file`` returns only half the requested bytes;
* ``slow``: sleep ``delay`` seconds, then proceed;
* ``write_fail``: the file opened for writing writes half of its first chunk, then raises ``OSError(EIO)``
  (with ``"xb"`` on a local filesystem the half-written file is already visible);
* ``lost_ack``: the write fully lands, then closing raises ``ConnectionResetError`` (an answer lost).

Plans are registered by name in :data:`PLANS` and picked with ``storage_options={"plan": name}``, so
every store the library opens for the URI shares the plan.
"""

from __future__ import annotations

import errno
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import fsspec
from fsspec.implementations.local import LocalFileSystem

PLANS: dict[str, FaultPlan] = {}


@dataclass
class Fault:
    method: str
    kind: str
    path_contains: str = ""
    times: int = 1
    skip: int = 0
    delay: float = 0.05
    fired: int = 0
    seen: int = 0


@dataclass
class FaultPlan:
    faults: list[Fault] = field(default_factory=list)
    calls: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def check(self, method: str, path: str) -> str | None:
        """The kind of fault to inject into this call, if any (sleeps for ``slow`` itself)."""
        with self.lock:
            self.calls[method] = self.calls.get(method, 0) + 1
            for fault in self.faults:
                if fault.method != method or fault.path_contains not in path or fault.fired >= fault.times:
                    continue
                fault.seen += 1
                if fault.seen <= fault.skip:
                    continue
                fault.fired += 1
                kind = fault.kind
                break
            else:
                return None
        if kind == "slow":
            time.sleep(fault.delay)
            return None
        if kind == "transient":
            raise ConnectionResetError(errno.ECONNRESET, f"injected reset in {method} {path}")
        if kind == "permanent":
            raise OSError(errno.EIO, f"injected I/O error in {method} {path}")
        return kind

    @property
    def fired(self) -> int:
        return sum(f.fired for f in self.faults)


class _FailingFile:
    """Proxy of a writable file that fails as its fault says (see module docstring)."""

    def __init__(self, inner: Any, kind: str) -> None:
        self._inner = inner
        self._kind = kind

    def write(self, data: Any) -> int:
        if self._kind == "write_fail":
            view = memoryview(data).cast("B")
            self._inner.write(view[: len(view) // 2])
            self._inner.flush()
            raise OSError(errno.EIO, "injected failed write")
        return int(self._inner.write(data))

    def close(self) -> None:
        self._inner.close()
        if self._kind == "lost_ack":
            raise ConnectionResetError(errno.ECONNRESET, "injected lost acknowledgement")

    def __enter__(self) -> _FailingFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class FaultyFileSystem(LocalFileSystem):
    protocol = ("faulty",)
    cachable = False

    def __init__(self, plan: str = "", **kwargs: Any) -> None:
        super().__init__(auto_mkdir=True, **kwargs)
        self.plan = PLANS.setdefault(plan, FaultPlan())

    def cat_file(self, path: Any, start: int | None = None, end: int | None = None, **kwargs: Any) -> bytes:
        kind = self.plan.check("cat_file", str(path))
        data = super().cat_file(path, start=start, end=end, **kwargs)
        if kind == "short" and start is not None:
            return data[: len(data) // 2]
        return data

    def info(self, path: Any, **kwargs: Any) -> dict[str, Any]:
        self.plan.check("info", str(path))
        return super().info(path, **kwargs)

    def ls(self, path: Any, detail: bool = False, **kwargs: Any) -> Any:
        self.plan.check("ls", str(path))
        return super().ls(path, detail=detail, **kwargs)

    def rm_file(self, path: Any) -> None:
        self.plan.check("rm_file", str(path))
        super().rm_file(path)

    def _open(self, path: Any, mode: str = "rb", block_size: Any = None, **kwargs: Any) -> Any:
        kind = self.plan.check(f"open_{mode}", str(path))
        handle = super()._open(path, mode, block_size, **kwargs)
        return _FailingFile(handle, kind) if kind in ("write_fail", "lost_ack") else handle

    def open(self, path: Any, mode: str = "rb", **kwargs: Any) -> Any:
        # fsspec's open() routes to _open; "xb" is what put_if_absent uses.
        return self._open(path, mode, **kwargs) if "x" in mode else super().open(path, mode, **kwargs)


def install(name: str, *faults: Fault) -> FaultPlan:
    """Register the filesystem (idempotent) and a fresh plan ``name``; returns the plan."""
    fsspec.register_implementation("faulty", FaultyFileSystem, clobber=True)
    PLANS[name] = FaultPlan(list(faults))
    return PLANS[name]
