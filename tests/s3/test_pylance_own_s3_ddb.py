"""pylance's own ``test_s3_ddb.py``, unmodified, with ``import lance`` answered by lance_ops (moto).

The upstream file is not part of this repository: ``scripts/pylance_own_tests.sh`` copies it (from
a local clone of the Lance repository or from GitHub, at a given ref) into a cache directory. This
test runs it when it is found at ``$LANCE_OPS_PYLANCE_S3_DDB_TEST`` (a file) or in the cache
(``$LANCE_OPS_PYLANCE_TESTS_DIR``, else ``${XDG_CACHE_HOME:-~/.cache}/lance-ops/pylance-tests``),
and skips, saying how to get it, otherwise.

It runs in a pytest subprocess with the plugin ``tests/s3/pylance_alias.py``, which maps ``lance``
to lance_ops, points the file's endpoints at this worker's moto server and has the real pylance
read every dataset the file leaves in its bucket. Every test of the file must pass.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.s3, pytest.mark.interop]

FILE_NAME = "test_s3_ddb.py"
ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_SECONDS = 600


def upstream_file() -> Path | None:
    """The upstream test file, from the environment or the cache; None when absent."""
    given = os.environ.get("LANCE_OPS_PYLANCE_S3_DDB_TEST")
    if given:
        return Path(given)
    cache = os.environ.get("LANCE_OPS_PYLANCE_TESTS_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "lance-ops", "pylance-tests"
    )
    candidate = Path(cache) / FILE_NAME
    return candidate if candidate.is_file() else None


def test_pylance_own_s3_ddb_file_passes(s3_endpoint: str, tmp_path: Path) -> None:
    source = upstream_file()
    if source is None:
        pytest.skip(
            f"pylance's {FILE_NAME} is not in the cache: run scripts/pylance_own_tests.sh "
            "(or set LANCE_OPS_PYLANCE_S3_DDB_TEST to the file)"
        )
    if not source.is_file():
        pytest.fail(f"LANCE_OPS_PYLANCE_S3_DDB_TEST names no file: {source}")
    shutil.copyfile(source, tmp_path / FILE_NAME)  # run a copy: no cache files next to the original
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    environment = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("AWS_", "DYNAMODB_", "PYTEST_")) and key not in ("ALLOW_HTTP", "PYTHONPATH")
    }
    environment.update(
        PYTHONPATH=str(ROOT),
        PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
        LANCE_OPS_S3_ENDPOINT=s3_endpoint,
    )
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.s3.pylance_alias", "-p", "no:cacheprovider"]
        + ["-rA", "-s", "--rootdir", str(tmp_path), "-c", str(tmp_path / "pytest.ini"), FILE_NAME],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_SECONDS,
    )
    output = run.stdout + run.stderr
    summary = re.search(r"=+ (.*) in [\d.]+s", run.stdout)
    assert run.returncode == 0 and summary is not None, output[-6000:]
    counts = {kind: int(n) for n, kind in re.findall(r"(\d+) (\w+)", summary.group(1))}
    collected = re.search(r"collected (\d+) items", run.stdout)
    assert collected is not None and int(collected.group(1)) >= 9, output[-3000:]  # 9 in the file today
    assert counts == {"passed": int(collected.group(1))}, summary.group(1)
    assert "pylance read" in run.stdout, "pylance did not check the datasets the file left"
