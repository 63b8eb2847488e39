"""Dataset-level pieces of pylance 14's API closed in L17: ``ds.stats.data_stats()``,
``ds.lance_schema.fields()`` and ``DataFile.path()``, each compared with pylance on twin datasets."""

from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa
import pytest

import lance_ops

pytestmark = pytest.mark.interop


def _table(rows: int) -> pa.Table:
    return pa.table(
        {
            "a": pa.array(range(rows), pa.int64()),
            "s": [f"v{i % 37}" * (i % 5) for i in range(rows)],
            "st": pa.array([{"p": i, "q": "z" * (i % 3)} for i in range(rows)]),
            "l": [[i, i + 1] for i in range(rows)],
        }
    )


def _sizes(stats: object) -> list[tuple[int, int]]:
    return [(f.id, f.bytes_on_disk) for f in stats.fields]  # type: ignore[attr-defined]


@pytest.mark.parametrize("version", ["2.0", "2.1"])
@pytest.mark.parametrize("writer", ["lance_ops", "pylance"])
def test_data_stats_match_pylance(tmp_path: Path, version: str, writer: str) -> None:
    """Per field id (nested and list fields included, struct parents 0) after appends, a delete,
    an added column (a second data file per fragment) and a dropped column."""
    lib = lance_ops if writer == "lance_ops" else lance
    uri = str(tmp_path / "ds.lance")
    lib.write_dataset(_table(2500), uri, data_storage_version=version, max_rows_per_file=1000)
    lib.write_dataset(_table(7), uri, mode="append")
    lib.dataset(uri).delete("a < 10")
    lib.dataset(uri).add_columns({"b": "a * 2"})
    lib.dataset(uri).drop_columns(["s"])
    theirs = _sizes(lance.dataset(uri).stats.data_stats())
    ours = lance_ops.dataset(uri).stats.data_stats()
    assert _sizes(ours) == theirs
    assert any(size > 0 for _, size in theirs)


def test_data_stats_of_a_legacy_dataset_are_zero(tmp_path: Path) -> None:
    uri = str(tmp_path / "legacy.lance")
    lance.write_dataset(_table(100), uri, data_storage_version="legacy")
    assert _sizes(lance_ops.dataset(uri).stats.data_stats()) == _sizes(lance.dataset(uri).stats.data_stats())
    assert {size for _, size in _sizes(lance_ops.dataset(uri).stats.data_stats())} == {0}


def test_data_stats_of_an_empty_dataset(tmp_path: Path) -> None:
    uri = str(tmp_path / "empty.lance")
    lance_ops.write_dataset(_table(0), uri)
    assert _sizes(lance_ops.dataset(uri).stats.data_stats()) == _sizes(lance.dataset(uri).stats.data_stats())


def test_lance_schema_is_pylances(tmp_path: Path) -> None:
    """``ds.lance_schema`` answers pylance's calls (``fields()`` of top-level fields with ``id()``,
    ``name()``, ``children()``; ``field(path)``) with pylance's ids; the table layer's schema is
    ``ds.manifest.schema``."""
    uri = str(tmp_path / "ds.lance")
    lance_ops.write_dataset(_table(10), uri)
    lance_ops.dataset(uri).drop_columns(["s"])
    lance_ops.dataset(uri).add_columns({"b": "a + 1"})
    ours, theirs = lance_ops.dataset(uri).lance_schema, lance.dataset(uri).lance_schema

    def tree(fields: list) -> list:  # type: ignore[type-arg]
        return [(f.name(), f.id(), tree(f.children())) for f in fields]

    assert tree(ours.fields()) == tree(theirs.fields())
    assert ours.field("st.q").id() == theirs.field("st.q").id()
    assert ours.field("a").metadata == theirs.field("a").metadata == {}
    assert ours.to_pyarrow() == theirs.to_pyarrow()
    assert ours.to_internal() == lance_ops.dataset(uri).manifest.schema
