"""``lance_ops._malloc.tune``: glibc keeps freed heap memory for the next read, unless told not to."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from lance_ops import _malloc

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc only")


def _tune_in_child(**env: str) -> str:
    """What ``tune()`` returns in a fresh interpreter with ``env`` (glibc's own knobs removed)."""
    clean = {k: v for k, v in os.environ.items() if k not in (*_malloc._GLIBC_KNOBS, "LANCE_OPS_MALLOC_PAD")}
    code = "from lance_ops import _malloc; print(_malloc.tune())"
    out = subprocess.run(
        [sys.executable, "-c", code], env={**clean, **env}, capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


def test_tuned_by_default() -> None:
    assert _tune_in_child() == "True"


@pytest.mark.parametrize(
    "env",
    [
        {"LANCE_OPS_MALLOC_PAD": "0"},
        {"LANCE_OPS_MALLOC_PAD": "lots"},
        {"MALLOC_TOP_PAD_": "1048576"},
        {"MALLOC_MMAP_THRESHOLD_": "131072"},
        {"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=0"},
    ],
)
def test_off_when_disabled_or_glibc_is_configured(env: dict[str, str]) -> None:
    assert _tune_in_child(**env) == "False"


_RELEASE = """
import numpy as np
from lance_ops import _malloc

def rss():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) // 1024 for line in status if line.startswith("VmRSS:"))

assert _malloc.tune()
block = np.ones(48 * 1024 * 1024, np.uint8)  # under the mmap threshold: from the heap, touched
del block
kept = rss()
released = _malloc.release_free_memory()
print(released, kept - rss())
"""


def test_release_free_memory_returns_what_the_pad_keeps() -> None:
    """A freed 48 MB array stays resident under the tuned pad; :func:`release_free_memory` hands it
    back (in a fresh interpreter: one thread, one heap)."""
    clean = {k: v for k, v in os.environ.items() if k not in (*_malloc._GLIBC_KNOBS, "LANCE_OPS_MALLOC_PAD")}
    out = subprocess.run(
        [sys.executable, "-c", _RELEASE], env=clean, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out[0] == "True"
    assert int(out[1]) >= 40, f"released {out[1]} MB of 48"


_RELEASE_ARROW = """
import numpy as np, pyarrow as pa
from lance_ops import _malloc

def rss():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) // 1024 for line in status if line.startswith("VmRSS:"))

source = pa.array(np.arange(1 << 17, dtype=np.int64))
# 96 arrays of 512 KB written by Arrow's default pool (mimalloc in the wheels), then freed
arrays = [source.cast(pa.int32()) for _ in range(96)]
del arrays
kept = rss()
_malloc.release_free_memory()
print(pa.default_memory_pool().backend_name, kept - rss())
"""


def test_release_free_memory_returns_what_arrows_pool_keeps() -> None:
    """48 MB of freed Arrow arrays stay resident in the default pool (mimalloc keeps its free
    pages); :func:`release_free_memory` has the pool hand them back too (a compaction task's
    batches no longer stay resident into the next task)."""
    out = subprocess.run(
        [sys.executable, "-c", _RELEASE_ARROW], capture_output=True, text=True, check=True
    ).stdout.split()
    assert int(out[1]) >= 40, f"released {out[1]} MB of 48 ({out[0]} pool)"
