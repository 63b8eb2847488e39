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


def _loaded(script: str, modules: tuple[str, ...]) -> list[str]:
    check = f"{script}\nimport sys\nprint(sorted(m for m in {modules!r} if m in sys.modules))\n"
    done = subprocess.run(
        [sys.executable, "-c", check], cwd=REPO, capture_output=True, text=True, check=True, timeout=120
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
