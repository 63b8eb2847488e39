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
