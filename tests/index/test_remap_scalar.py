"""Scalar indices remapped by lance_ops after a compaction answer pylance's filters as pylance's own
remap does (BTREE, BITMAP, LABEL_LIST, NGRAM, INVERTED); ZONEMAP is left alone (INVERTED losing rows:
tests/index/test_inverted_remap.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_ops
from lance_ops.file import LanceFileReader
from lance_ops.index.remap import remap_index
from lance_ops.index.types import uuid_text
from lance_ops.ops.compaction import CompactionOptions
from tests.index.conftest import DELETE, build_scalar
from tests.index.helpers import compact_deferred, remap_all, scalar_answers

REMAPPED = {"id_idx", "cat_idx", "tags_idx", "txt_ng"}
PREDICATES = {
    "id_idx": [
        "id = 1500",
        "id > 2990",
        "id < 5",
        "id IN (3, 4, 1050, 2999)",
        "id BETWEEN 990 AND 1110",
        "id IS NULL",
    ],
    "cat_idx": ["cat = 'c3'", "cat IN ('c0', 'c6')", "cat IS NULL", "cat != 'c1'"],
    "tags_idx": [
        "array_has_any(tags, ['u3'])",
        "array_has_all(tags, ['t0', 'u1'])",
        "array_has_any(tags, ['nope'])",
    ],
    "txt_ng": ["contains(txt, 'world 1')", "contains(txt, 'hello')"],
}


@pytest.fixture(scope="module")
def deleted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("scalar") / "ds"
    build_scalar(path).delete(DELETE)
    return path


@pytest.fixture(scope="module")
def twins(
    deleted: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[lance.LanceDataset, lance.LanceDataset]:
    """(ours: pylance compacts deferred, lance_ops remaps; theirs: pylance compacts and remaps)."""
    root = tmp_path_factory.mktemp("scalar_twins")
    ours_path, theirs_path = root / "ours", root / "theirs"
    shutil.copytree(deleted, ours_path)
    shutil.copytree(deleted, theirs_path)
    mapping, fragments = compact_deferred(ours_path)
    ours = remap_all(ours_path, mapping, fragments, REMAPPED)
    theirs = lance.dataset(str(theirs_path))
    theirs.optimize.compact_files(target_rows_per_fragment=1 << 20)
    return ours, lance.dataset(str(theirs_path))


@pytest.mark.parametrize("name", sorted(PREDICATES))
def test_remapped_index_answers_filters(
    twins: tuple[lance.LanceDataset, lance.LanceDataset], name: str
) -> None:
    ours, theirs = twins
    for predicate in PREDICATES[name]:
        indexed, scanned, plan = scalar_answers(ours, predicate)
        assert f"@{name}" in plan, plan
        assert indexed.equals(scanned), predicate
        assert indexed.equals(scalar_answers(theirs, predicate)[0]), predicate


def test_coverage_as_pylance_remap(twins: tuple[lance.LanceDataset, lance.LanceDataset]) -> None:
    ours, theirs = twins
    for name in sorted(REMAPPED):
        mine, pylance_own = ours.stats.index_stats(name), theirs.stats.index_stats(name)
        assert mine["num_indexed_rows"] == pylance_own["num_indexed_rows"], name
        assert mine["num_unindexed_rows"] == pylance_own["num_unindexed_rows"] == 0, name
    assert [s.fragment_ids for d in ours.describe_indices() if d.name == "id_zm" for s in d.segments] == [
        {0, 1, 2}
    ]


def _file_tables(ds: lance.LanceDataset, name: str) -> dict[str, pa.Table]:
    ours = lance_ops.dataset(ds.uri)
    index = next(ix for ix in ours.manifest.indices if ix.name == name)
    root = Path(ds.uri) / "_indices" / uuid_text(index)
    return {f.path: LanceFileReader(str(root / f.path)).read_all().to_table() for f in index.files}


@pytest.mark.parametrize("name", ["cat_idx", "tags_idx", "txt_ng"])
def test_row_sets_equal_pylance_remap(
    twins: tuple[lance.LanceDataset, lance.LanceDataset], name: str
) -> None:
    """Key for key, the remapped row sets are pylance's (compared decoded: serializations may differ)."""
    from lance_ops.index.treemap import decode_bitmap64, decode_row_address_map

    decode = decode_bitmap64 if name == "txt_ng" else decode_row_address_map
    ours, theirs = (_file_tables(ds, name) for ds in twins)
    assert ours.keys() == theirs.keys()
    for file, table in ours.items():
        other = theirs[file]
        assert table.schema.equals(other.schema, check_metadata=True)
        assert table.column(0).equals(other.column(0))
        for a, b in zip(table.column(1).to_pylist(), other.column(1).to_pylist(), strict=True):
            assert np.array_equal(decode(a), decode(b))


def test_btree_pages_equal_pylance_remap(twins: tuple[lance.LanceDataset, lance.LanceDataset]) -> None:
    ours, theirs = (_file_tables(ds, "id_idx") for ds in twins)
    for file in ("page_data.lance", "page_lookup.lance"):
        assert ours[file].equals(theirs[file], check_metadata=True), file


def test_zonemap_kept(deleted: Path, tmp_path: Path) -> None:
    path = tmp_path / "ds"
    shutil.copytree(deleted, path)
    mapping, _ = compact_deferred(path)
    ours = lance_ops.dataset(str(path))
    by_name = {ix.name: ix for ix in ours.manifest.indices}
    before = sorted(p.name for p in (path / "_indices").iterdir())
    assert remap_index(ours.storage, by_name["id_zm"], mapping) is None
    assert sorted(p.name for p in (path / "_indices").iterdir()) == before


def test_inverted_remapped_when_no_row_is_removed(tmp_path: Path) -> None:
    """Compaction without deletions: documents keep their numbers, only their row ids move."""
    base = tmp_path / "base"
    build_scalar(base)
    ours_path, twin_path = tmp_path / "ours", tmp_path / "twin"
    shutil.copytree(base, ours_path)
    shutil.copytree(base, twin_path)
    mapping, fragments = compact_deferred(ours_path)
    assert not mapping.removed.size
    ours = remap_all(ours_path, mapping, fragments, {"txt_idx", *REMAPPED})
    lance.dataset(str(twin_path)).optimize.compact_files(target_rows_per_fragment=1 << 20)
    twin = lance.dataset(str(twin_path))
    assert "MatchQuery: column=txt" in ours.scanner(full_text_query="world").explain_plan(True)
    assert ours.to_table(full_text_query="world").num_rows == 3000
    for query in ("world", "hello", "3", "nothing"):
        mine = ours.to_table(full_text_query=query, columns=["id"]).sort_by("id")
        theirs = twin.to_table(full_text_query=query, columns=["id"]).sort_by("id")
        assert mine["id"].equals(theirs["id"]), query
    assert ours.stats.index_stats("txt_idx")["num_unindexed_rows"] == 0


def test_multi_page_btree_with_nulls(tmp_path: Path) -> None:
    """10,000 rows in 3 pages of 4096 (nulls first); a third of the rows deleted: pages are cut
    again and the lookup rebuilt, as pylance does (2 pages)."""
    rng = np.random.default_rng(1)
    n = 10_000
    values = [None if i % 97 == 0 else int(v) for i, v in enumerate(rng.integers(0, 500, n))]
    table = pa.table({"id": pa.array(np.arange(n)), "v": pa.array(values, pa.int64())})
    paths = {}
    for twin in ("ours", "theirs"):
        paths[twin] = tmp_path / twin
        ds = lance.write_dataset(table, paths[twin], max_rows_per_file=2500)
        ds.create_scalar_index("v", "BTREE", name="v_idx")
        ds.delete("id % 3 = 0")
    mapping, fragments = compact_deferred(paths["ours"])
    ours = remap_all(paths["ours"], mapping, fragments, {"v_idx"})
    theirs = lance.dataset(str(paths["theirs"]))
    theirs.optimize.compact_files(target_rows_per_fragment=1 << 20)
    theirs = lance.dataset(str(paths["theirs"]))
    mine, pylance_own = _file_tables(ours, "v_idx"), _file_tables(theirs, "v_idx")
    assert mine["page_lookup.lance"].equals(pylance_own["page_lookup.lance"], check_metadata=True)
    assert mine["page_lookup.lance"].num_rows == 2
    assert mine["page_data.lance"].column("values").equals(pylance_own["page_data.lance"].column("values"))
    for predicate in ["v = 306", "v IS NULL", "v > 400", "v < 10", "v IN (0, 201, 409, 499)"]:
        indexed, scanned, plan = scalar_answers(ours, predicate)
        assert "@v_idx" in plan
        assert indexed.equals(scanned), predicate


def test_one_row_left(tmp_path: Path) -> None:
    path = tmp_path / "ds"
    build_scalar(path).delete("id != 2222")
    mapping, fragments = compact_deferred(path)
    ours = remap_all(path, mapping, fragments, REMAPPED)
    for predicate in ["id = 2222", "id < 2222", "cat = 'c3'", "cat IS NULL", "array_has_any(tags, ['t2'])"]:
        indexed, scanned, plan = scalar_answers(ours, predicate)
        assert "ScalarIndexQuery" in plan
        assert indexed.equals(scanned), predicate


def test_text_indices_through_our_compaction_with_removed_rows(deleted: Path, tmp_path: Path) -> None:
    """lance_ops' own compaction of rows with deletions: the NGRAM and INVERTED indices are
    remapped (removed rows leave their posting lists), nothing is deferred. pylance's full-text and
    contains() answers equal those after its own compaction of a twin, before and after our
    optimize_indices."""
    ours_path, twin_path = tmp_path / "ours", tmp_path / "twin"
    shutil.copytree(deleted, ours_path)
    shutil.copytree(deleted, twin_path)
    outcome = lance_ops.dataset(str(ours_path)).optimize.compact_files_with_outcome(
        CompactionOptions(target_rows_per_fragment=1 << 20)
    )
    assert outcome is not None
    assert {"txt_ng", "txt_idx"} <= set(outcome.indices.remapped) and not outcome.indices.deferred
    lance.dataset(str(twin_path)).optimize.compact_files(target_rows_per_fragment=1 << 20)
    twin = lance.dataset(str(twin_path))
    for step in ("compacted", "optimized"):
        ours = lance.dataset(str(ours_path))
        assert "MatchQuery: column=txt" in ours.scanner(full_text_query="world").explain_plan(True), step
        assert ours.to_table(full_text_query="world").num_rows == ours.count_rows() == twin.count_rows()
        for query in ("world", "hello", "3", "nothing"):
            mine = ours.to_table(full_text_query=query, columns=["id"]).sort_by("id")
            theirs = twin.to_table(full_text_query=query, columns=["id"]).sort_by("id")
            assert mine["id"].equals(theirs["id"]), (step, query)
        for predicate in PREDICATES["txt_ng"]:
            indexed, scanned, plan = scalar_answers(ours, predicate)
            assert indexed.equals(scanned) and "txt_ng" in plan, (step, predicate)
        lance_ops.dataset(str(ours_path)).optimize.optimize_indices()
