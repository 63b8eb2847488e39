"""Detached commits (``LanceDataset.commit(..., detached=True)``) as pylance 14: a version off the
main line, numbered with the top bit set, stored as ``_versions/d{version}.manifest``, never the
latest, reachable by its number; pylance's own ``test_detached_commits`` scenario both ways."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import lance
import pyarrow as pa
import pytest

import lance_ops
from lance_ops.errors import DetachedCommitError, VersionNotFoundError

pytestmark = pytest.mark.interop

DETACHED = 0x8000000000000000


def _detached_append(lib: ModuleType, ds: object, value: int, read_version: int) -> object:
    frag = lib.LanceFragment.create(ds.uri, pa.table({"x": [value]}))  # type: ignore[attr-defined]
    op = lib.LanceOperation.Append([frag])
    return lib.LanceDataset.commit(ds.uri, op, read_version=read_version, detached=True)  # type: ignore[attr-defined]


def _x(ds: object) -> list[int]:
    return ds.to_table().column("x").to_pylist()  # type: ignore[attr-defined]


@pytest.mark.parametrize("writer", ["lance_ops", "pylance"])
def test_detached_commits_both_ways(tmp_path: Path, writer: str) -> None:
    """pylance's scenario written by one library, every version then read by both."""
    lib = lance_ops if writer == "lance_ops" else lance
    uri = str(tmp_path / "ds.lance")
    ds = lib.write_dataset(pa.table({"x": [0]}), uri, enable_v2_manifest_paths=True)
    detached = _detached_append(lib, ds, 1, ds.version)
    assert detached.version & DETACHED and _x(detached) == [0, 1]  # type: ignore[attr-defined]
    assert _x(lib.dataset(uri)) == [0]
    ds = lib.write_dataset(pa.table({"x": [2]}), uri, mode="append")
    assert ds.version == 2 and _x(ds) == [0, 2]
    again = ds.checkout_version(detached.version)  # type: ignore[attr-defined]
    assert _x(again) == [0, 1]
    detached2 = _detached_append(lib, again, 3, again.version)
    assert _x(detached2) == [0, 1, 3] and detached2.version & DETACHED  # type: ignore[attr-defined]
    names = sorted(p.name for p in (tmp_path / "ds.lance" / "_versions").iterdir())
    assert f"d{detached.version}.manifest" in names and f"d{detached2.version}.manifest" in names  # type: ignore[attr-defined]
    for reader in (lance, lance_ops):
        opened = reader.dataset(uri)
        assert opened.version == 2 and opened.latest_version == 2 and _x(opened) == [0, 2]
        assert [v["version"] for v in opened.versions()] == [1, 2]
        assert _x(opened.checkout_version(detached.version)) == [0, 1]  # type: ignore[attr-defined]
        assert _x(reader.dataset(uri, version=detached2.version)) == [0, 1, 3]  # type: ignore[attr-defined]
    # the main line goes on from its own latest, untouched by the detached versions
    lance_ops.write_dataset(pa.table({"x": [4]}), uri, mode="append")
    assert _x(lance.dataset(uri)) == [0, 2, 4] and lance.dataset(uri).version == 3


def test_detached_commit_refusals(tmp_path: Path) -> None:
    v1 = str(tmp_path / "v1.lance")
    ds = lance_ops.write_dataset(pa.table({"x": [0]}), v1, enable_v2_manifest_paths=False)
    with pytest.raises(OSError, match="v1 manifest paths") as refused:  # pylance's test_no_detached_v1
        _detached_append(lance_ops, ds, 1, ds.version)
    assert isinstance(refused.value, DetachedCommitError)
    assert _x(lance.dataset(v1)) == [0] and lance.dataset(v1).version == 1
    v2 = str(tmp_path / "v2.lance")
    ds = lance_ops.write_dataset(pa.table({"x": [0]}), v2)
    with pytest.raises(VersionNotFoundError, match="detached version"):
        ds.checkout_version(DETACHED | 12345)
