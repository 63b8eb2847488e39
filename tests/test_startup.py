"""Startup: ``import lance_ops`` loads none of the heavy optional layers (Spark, Dagster, Airflow,
the SQL parser, numba), and opening and counting a dataset loads no engine either. A check of
``sys.modules`` in a fresh process, not a timing (bench/RESULTS.md has the times)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

import lance_ops

REPO = Path(__file__).resolve().parents[1]
ENGINES = ("pyspark", "dagster", "airflow", "jobs", "assets")
HEAVY = (*ENGINES, "sqlglot", "numba", "pandas", "pyarrow.dataset", "lance")


def _loaded(script: str, modules: tuple[str, ...], timeout: int = 120) -> list[str]:
    check = f"{script}\nimport sys\nprint(sorted(m for m in {modules!r} if m in sys.modules))\n"
    done = subprocess.run(
        [sys.executable, "-c", check], cwd=REPO, capture_output=True, text=True, check=True, timeout=timeout
    )
    return eval(done.stdout.strip().splitlines()[-1])  # noqa: S307 - our own print of a list of names


def test_import_loads_no_heavy_module() -> None:
    assert _loaded("import lance_ops", HEAVY) == []


def test_opening_and_counting_a_dataset_loads_no_engine_or_compiler(tmp_path: Path) -> None:
    lance = pytest.importorskip("lance")  # the oracle reads what this test wrote
    uri = str(tmp_path / "ds")
    lance_ops.write_dataset(pa.table({"a": [1, 2, 3]}), uri)
    assert lance.dataset(uri).count_rows() == 3
    script = f"import lance_ops\nassert lance_ops.dataset({uri!r}).count_rows() == 3"
    assert _loaded(script, (*ENGINES, "numba", "pandas", "pyarrow.dataset")) == []


def test_the_check_sees_an_import() -> None:
    """The same check after importing a heavy module does see it: it can fail."""
    assert _loaded("import lance_ops, sqlglot", HEAVY) == ["sqlglot"]


MIXED = """
import pyarrow as pa
n = {rows}
table = pa.table({{
    "id": pa.array(range(n), pa.int64()),
    "f": pa.array([i * 0.5 for i in range(n)], pa.float64()),
    "cat": pa.array([("a", "bb", "ccc")[i % 3] for i in range(n)]),
    "text": pa.array([f"word {{i % 50}} and {{i % 7}} more" for i in range(n)]),
    "name": pa.array([f"user {{i * 7919 % 100003}} of {{i}}" for i in range(n)]),
    "nul": pa.array([None if i % 7 == 0 else i for i in range(n)], pa.int64()),
    "lst": pa.array([[i, i + 1] for i in range(n)], pa.list_(pa.int32())),
}})
import lance_ops
from lance_ops.encoding.compression import fsst
coded = []
encode = fsst.fsst_encode
fsst.fsst_encode = lambda *args: coded.append(1) or encode(*args)
lance_ops.write_dataset(table, {uri!r})
assert coded  # the distinct names were FSST-coded
"""


def test_a_small_first_write_loads_no_compiler_sql_parser_or_remote_store(tmp_path: Path) -> None:
    """A few thousand rows (page statistics on) are encoded by the kernels' numpy forms: the
    first write of a process does not pay numba's start (lance_ops.encoding.kernels), strings
    of many distinct values (FSST-coded) and lists among them."""
    lance = pytest.importorskip("lance")
    uri = str(tmp_path / "small")
    loaded = _loaded(MIXED.format(rows=5000, uri=uri), (*HEAVY, "fsspec", "snowballstemmer"))
    assert loaded == ["pandas"]  # pyarrow's own conversion of the Python lists above imports it
    assert lance.dataset(uri).count_rows() == 5000


def test_a_large_write_uses_the_compiled_kernels(tmp_path: Path) -> None:
    """The same check sees numba once the inputs pass the kernels' thresholds (a column of
    ``COMPILED_FROM`` integers: its statistics sketch hashes them with the compiled kernel; the
    child may compile it into numba's cache first, hence the long timeout)."""
    lance = pytest.importorskip("lance")
    from lance_ops.encoding.kernels import COMPILED_FROM

    uri = str(tmp_path / "large")
    script = (
        "import numpy as np, pyarrow as pa, lance_ops\n"
        f"lance_ops.write_dataset(pa.table({{'id': np.arange({COMPILED_FROM})}}), {uri!r})"
    )
    assert _loaded(script, ("numba",), timeout=900) == ["numba"]
    assert lance.dataset(uri).count_rows() == COMPILED_FROM
