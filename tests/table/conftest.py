"""Fixtures for the table-layer tests: datasets written by pylance 14 (the oracle).

``pylance_history`` builds, once per session, datasets exercising every operation pylance 14
commits (create, append, overwrite, delete, update, add/drop columns, config, index, compaction,
restore, stable row ids, V1 names, 2.1 files) and returns their roots.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

PYLANCE_VERSION = "14.0.2"


def table(n: int, start: int = 0) -> pa.Table:
    ids = pa.array(range(start, start + n), pa.int64())
    return pa.table(
        {
            "id": ids,
            "s": pa.array([f"r{i}" for i in range(start, start + n)]),
            "st": pa.array([{"a": i, "b": float(i)} for i in range(start, start + n)]),
        }
    )


def manifest_files(root: str | Path) -> list[Path]:
    versions = Path(root) / "_versions"
    return sorted(p for p in versions.iterdir() if p.name.endswith(".manifest"))


def transaction_files(root: str | Path) -> list[Path]:
    return sorted((Path(root) / "_transactions").iterdir())


@pytest.fixture(scope="session")
def lance_module():  # type: ignore[no-untyped-def]
    lance = pytest.importorskip("lance")
    assert lance.__version__ == PYLANCE_VERSION
    return lance


@pytest.fixture(scope="session")
def pylance_history(tmp_path_factory: pytest.TempPathFactory, lance_module) -> dict[str, str]:  # type: ignore[no-untyped-def]
    lance = lance_module
    base = tmp_path_factory.mktemp("pylance")
    roots = {name: str(base / name) for name in ("basic", "v1_21", "evolved", "stable", "indexed")}

    lance.write_dataset(
        table(100),
        roots["basic"],
        max_rows_per_file=40,
        commit_message="first",
        transaction_properties={"k": "v"},
    )
    lance.write_dataset(table(5, 100), roots["basic"], mode="append")
    lance.write_dataset(table(30, 500), roots["basic"], mode="overwrite", max_rows_per_file=20)

    lance.write_dataset(
        table(50),
        roots["v1_21"],
        max_rows_per_file=20,
        data_storage_version="2.1",
        enable_v2_manifest_paths=False,
    )
    lance.write_dataset(table(10, 50), roots["v1_21"], mode="append")

    lance.write_dataset(table(60), roots["evolved"], max_rows_per_file=20)
    ds = lance.dataset(roots["evolved"])
    ds.delete("id < 3")
    ds = lance.dataset(roots["evolved"])
    ds.update({"s": "'x'"}, where="id = 30")
    ds = lance.dataset(roots["evolved"])
    ds.add_columns({"twice": "id * 2"})
    ds = lance.dataset(roots["evolved"])
    ds.drop_columns(["twice"])
    ds = lance.dataset(roots["evolved"])
    ds.update_config({"my.key": "1"})
    ds = lance.dataset(roots["evolved"])
    ds.optimize.compact_files(target_rows_per_fragment=1000)
    lance.dataset(roots["evolved"], version=2).restore()

    lance.write_dataset(table(10), roots["stable"], max_rows_per_file=4, enable_stable_row_ids=True)
    lance.write_dataset(table(5, 10), roots["stable"], mode="append")
    lance.dataset(roots["stable"]).delete("id = 1 or id = 12")

    lance.write_dataset(table(40), roots["indexed"], max_rows_per_file=20)
    lance.dataset(roots["indexed"]).create_scalar_index("id", "BTREE")
    lance.write_dataset(table(5, 40), roots["indexed"], mode="append")
    return roots
