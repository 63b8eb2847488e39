"""L18: pylance 14's distributed INVERTED build with lance_ops —
``create_scalar_index(column, "INVERTED", fragment_ids=[...], index_uuid=u)`` per worker (nothing
committed; one partition staged under ``_indices/<u>/staging/``), ``merge_index_metadata(u,
"INVERTED")``, then ``LanceDataset.commit(uri, LanceOperation.CreateIndex([Index(uuid=u, ...)], []))``.

Both ways: our staged partials equal pylance's (same rows, terms and postings), pylance merges ours
and we merge pylance's; the merged index answers every query with pylance's rows and scores, and
its files are those of our one-shot build (same process, so byte for byte). pylance 14's refusals
(BTREE and the other types through ``create_index_uncommitted``, unknown types to merge, a missing
staging directory, an unknown fragment) are matched with nothing committed.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pytest
from lance.file import LanceFileReader as PylanceFileReader

import lance_ops
from lance_ops.errors import IndexCorruptError, InvalidArgumentError, UnsupportedFeatureError
from tests.index.test_fts_build import QUERIES, assert_same_search, corpus

pytestmark = pytest.mark.interop

UUID = "6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b"
FILES = ["metadata.lance", "part_0_docs.lance", "part_0_invert.lance", "part_0_tokens.lance"]


def write(path: Path, texts: list[str | None], rows_per_file: int = 250) -> None:
    table = pa.table({"id": pa.array(range(len(texts)), pa.int64()), "text": pa.array(texts, pa.string())})
    lance.write_dataset(table, path, max_rows_per_file=rows_per_file)


def stage(mod: Any, path: Path, groups: list[list[int]], **params: Any) -> None:
    ds = mod.dataset(str(path))
    for group in groups:
        ds.create_scalar_index(
            "text", "INVERTED", name="text_idx", replace=False, index_uuid=UUID, fragment_ids=group, **params
        )


def publish(mod: Any, path: Path) -> Any:
    """Commit the merged index as pylance's own tests do (an ``Index`` without details)."""
    ds = mod.dataset(str(path))
    index_cls = importlib.import_module(f"{mod.__name__}.dataset").Index
    index = index_cls(
        uuid=UUID,
        name="text_idx",
        fields=[ds.schema.get_field_index("text")],
        dataset_version=ds.version,
        fragment_ids={f.fragment_id for f in ds.get_fragments()},
        index_version=0,
    )
    op = mod.LanceOperation.CreateIndex(new_indices=[index], removed_indices=[])
    return mod.LanceDataset.commit(str(path), op, read_version=ds.version)


def one_shot(path: Path, texts: list[str | None], **params: Any) -> lance.LanceDataset:
    write(path, texts)
    ds = lance.dataset(str(path))
    ds.create_scalar_index("text", "INVERTED", **params)
    return lance.dataset(str(path))


def table_of(path: Path) -> pa.Table | None:
    reader = PylanceFileReader(str(path))
    if not reader.metadata().schema.names:
        return None
    return reader.read_all().to_table()


def staged(path: Path) -> dict[str, tuple[pa.Table | None, dict[bytes, bytes]]]:
    directory = path / "_indices" / UUID / "staging"
    return {
        p.name: (table_of(p), dict(PylanceFileReader(str(p)).metadata().schema.metadata or {}))
        for p in sorted(directory.iterdir())
    }


def texts_with_gaps() -> list[str | None]:
    """700 documents; fragment 1 (rows 250-499) all null, so it stages no partition."""
    texts = corpus(750)
    texts[250:500] = [None] * 250
    return texts


@pytest.mark.parametrize(
    "groups",
    [[[0], [1], [2]], [[2, 0], [1]], [[0, 1, 2]]],
    ids=["per-fragment", "grouped", "all-at-once"],
)
def test_our_distributed_build_answers_as_pylance_one_shot(tmp_path: Path, groups: list[list[int]]) -> None:
    texts = texts_with_gaps()
    write(tmp_path / "ours", texts)
    before = lance.dataset(str(tmp_path / "ours")).version
    stage(lance_ops, tmp_path / "ours", groups)
    assert lance.dataset(str(tmp_path / "ours")).version == before  # staging commits nothing
    lance_ops.dataset(str(tmp_path / "ours")).merge_index_metadata(UUID, "INVERTED")
    assert not (tmp_path / "ours" / "_indices" / UUID / "staging").exists()
    publish(lance_ops, tmp_path / "ours")

    theirs = one_shot(tmp_path / "theirs", texts)
    ours = lance.dataset(str(tmp_path / "ours"))
    assert ours.describe_indices()[0].num_rows_indexed == theirs.describe_indices()[0].num_rows_indexed
    assert_same_search(ours, theirs)  # pylance on our files
    assert_same_search(lance_ops.dataset(str(tmp_path / "ours")), theirs)  # lance_ops on our files
    plan = ours.scanner(full_text_query="alpha", columns=["id"]).explain_plan()
    assert "text_idx" in plan or "MatchQuery" in plan


def test_merged_files_equal_our_one_shot_build(tmp_path: Path) -> None:
    texts = texts_with_gaps()
    write(tmp_path / "parts", texts)
    stage(lance_ops, tmp_path / "parts", [[2], [0], [1]])
    lance_ops.dataset(str(tmp_path / "parts")).merge_index_metadata(UUID, "INVERTED")
    write(tmp_path / "whole", texts)
    whole = lance_ops.dataset(str(tmp_path / "whole"))
    whole.create_scalar_index("text", "INVERTED")
    whole_dir = tmp_path / "whole" / "_indices" / whole.list_indices()[0]["uuid"]
    assert sorted(p.name for p in whole_dir.iterdir()) == FILES
    for name in FILES:
        assert (tmp_path / "parts" / "_indices" / UUID / name).read_bytes() == (whole_dir / name).read_bytes()


def test_staged_partials_hold_what_pylance_stages(tmp_path: Path) -> None:
    texts = texts_with_gaps()
    groups = [[2, 0], [1]]  # partition numbered by the first id given, rows in dataset order
    for mod, name in ((lance, "theirs"), (lance_ops, "ours")):
        write(tmp_path / name, texts)
        stage(mod, tmp_path / name, groups)
    theirs, ours = staged(tmp_path / "theirs"), staged(tmp_path / "ours")
    assert sorted(ours) == sorted(theirs)
    assert "part_empty_4294967296_metadata.lance" in ours
    for name, (table, metadata) in theirs.items():
        assert ours[name][1] == metadata, name
        if table is None:
            assert ours[name][0] is None
        else:
            assert ours[name][0] is not None and ours[name][0].equals(table), name


def test_pylance_merges_our_partials_and_we_merge_pylances(tmp_path: Path) -> None:
    texts = corpus(700)
    theirs = one_shot(tmp_path / "theirs", texts, with_position=True)
    for stager, merger, name in ((lance_ops, lance, "a"), (lance, lance_ops, "b")):
        write(tmp_path / name, texts)
        stage(stager, tmp_path / name, [[0], [1], [2]], with_position=True)
        merger.dataset(str(tmp_path / name)).merge_index_metadata(UUID, "INVERTED")
        publish(merger, tmp_path / name)
        assert_same_search(lance.dataset(str(tmp_path / name)), theirs, QUERIES + ['"alpha beta"'])
        assert_same_search(lance_ops.dataset(str(tmp_path / name)), theirs)
        assert lance_ops.dataset(str(tmp_path / name)).list_indices()[0]["type"] == "Inverted"


def test_second_merge_changes_nothing_and_history_continues(tmp_path: Path) -> None:
    texts = corpus(600)
    write(tmp_path / "d", texts, rows_per_file=200)
    stage(lance_ops, tmp_path / "d", [[0, 1], [2]])
    ds = lance_ops.dataset(str(tmp_path / "d"))
    ds.merge_index_metadata(UUID, "INVERTED")
    merged = {n: (tmp_path / "d" / "_indices" / UUID / n).read_bytes() for n in FILES}
    ds.merge_index_metadata(UUID, "INVERTED")  # as pylance 14: nothing staged, the merge stands
    assert {n: (tmp_path / "d" / "_indices" / UUID / n).read_bytes() for n in FILES} == merged
    publish(lance_ops, tmp_path / "d")
    # the next day: rows appended, pylance optimizes our index and finds the new rows
    extra = pa.table({"id": pa.array([600, 601], pa.int64()), "text": ["zebra crossing", "zebra"]})
    lance.write_dataset(extra, tmp_path / "d", mode="append")
    pl = lance.dataset(str(tmp_path / "d"))
    pl.optimize.optimize_indices()
    pl = lance.dataset(str(tmp_path / "d"))
    assert sorted(pl.to_table(full_text_query="zebra", columns=["id"]).column("id").to_pylist()) == [600, 601]
    assert (
        pl.to_table(full_text_query="alpha").num_rows
        == lance_ops.dataset(str(tmp_path / "d")).to_table(full_text_query="alpha").num_rows
    )


@pytest.mark.parametrize("kind", ["BTREE", "BITMAP", "ZONEMAP"])
def test_other_types_are_refused_as_pylance_refuses_them(tmp_path: Path, kind: str) -> None:
    write(tmp_path / "d", corpus(300))
    for mod in (lance, lance_ops):
        ds = mod.dataset(str(tmp_path / "d"))
        with pytest.raises(ValueError, match=f"{kind} distributed indexing uses create_index_uncommitted"):
            ds.create_scalar_index("id", kind, index_uuid=UUID, fragment_ids=[0])
    assert not (tmp_path / "d" / "_indices").exists()
    assert lance.dataset(str(tmp_path / "d")).version == 1


def test_bad_calls_are_refused_and_nothing_is_committed(tmp_path: Path) -> None:
    write(tmp_path / "d", corpus(300))
    ds = lance_ops.dataset(str(tmp_path / "d"))
    with pytest.raises(InvalidArgumentError, match="No fragment with id 7"):
        ds.create_scalar_index("text", "INVERTED", index_uuid=UUID, fragment_ids=[0, 7])
    with pytest.raises(InvalidArgumentError, match="index_uuid must be a UUID"):
        ds.create_scalar_index("text", "INVERTED", index_uuid="nope", fragment_ids=[0])
    with pytest.raises(InvalidArgumentError, match="No partition metadata files found"):
        ds.merge_index_metadata(UUID, "INVERTED")
    with pytest.raises(NotImplementedError, match="received BITMAP"):
        ds.merge_index_metadata(UUID, "BITMAP")
    with pytest.raises(UnsupportedFeatureError, match="INVERTED partials only"):
        ds.merge_index_metadata(UUID, "BTREE")
    stage(lance_ops, tmp_path / "d", [[0]])
    stage(lance_ops, tmp_path / "d", [[1]], lower_case=False)
    with pytest.raises(IndexCorruptError, match="different tokenizers"):
        ds.merge_index_metadata(UUID, "INVERTED")
    assert lance.dataset(str(tmp_path / "d")).version == 1
    assert lance_ops.dataset(str(tmp_path / "d")).list_indices() == []


def test_without_index_uuid_a_new_directory_is_staged(tmp_path: Path) -> None:
    write(tmp_path / "d", corpus(300))
    ds = lance_ops.dataset(str(tmp_path / "d"))
    ds.create_scalar_index("text", "INVERTED", fragment_ids=[1])
    (directory,) = (tmp_path / "d" / "_indices").iterdir()
    assert sorted(p.name for p in (directory / "staging").iterdir()) == [
        f"part_4294967296_{k}.lance" for k in ("docs", "invert", "metadata", "tokens")
    ]
    assert lance.dataset(str(tmp_path / "d")).version == 1


def test_vector_segments_over_some_fragments_are_refused(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(600, 8)).astype(np.float32)
    table = pa.table({"vec": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), 8)})
    lance.write_dataset(table, tmp_path / "v", max_rows_per_file=200)
    ds = lance_ops.dataset(str(tmp_path / "v"))
    with pytest.raises(UnsupportedFeatureError, match="fragment_ids"):
        ds.create_index("vec", "IVF_FLAT", num_partitions=2, fragment_ids=[0], index_uuid=UUID)
    assert lance.dataset(str(tmp_path / "v")).version == 1
    assert not (tmp_path / "v" / "_indices").exists()


def test_lance_ops_maintains_pylances_distributed_index(tmp_path: Path) -> None:
    """The next day on pylance's distributed index (committed without details): rows appended and
    deleted, lance_ops compacts (remapping it) and optimizes it; both find the new rows and agree."""
    texts = corpus(600)
    write(tmp_path / "d", texts, rows_per_file=100)
    stage(lance, tmp_path / "d", [[f] for f in range(6)])
    lance.dataset(str(tmp_path / "d")).merge_index_metadata(UUID, "INVERTED")
    publish(lance, tmp_path / "d")
    extra = pa.table({"id": pa.array([600, 601], pa.int64()), "text": ["zebra alpha", "zebra"]})
    lance.write_dataset(extra, tmp_path / "d", mode="append")
    ds = lance_ops.dataset(str(tmp_path / "d"))
    ds.delete("id % 10 = 3")
    ds.optimize.compact_files(target_rows_per_fragment=250)
    lance_ops.dataset(str(tmp_path / "d")).optimize.optimize_indices()
    for mod in (lance, lance_ops):
        got = mod.dataset(str(tmp_path / "d")).to_table(full_text_query="zebra", columns=["id"])
        assert sorted(got.column("id").to_pylist()) == [600, 601]
    expected = lance.dataset(str(tmp_path / "d")).to_table(full_text_query="alpha", columns=["id"]).num_rows
    assert lance_ops.dataset(str(tmp_path / "d")).to_table(full_text_query="alpha").num_rows == expected
    assert [d.name for d in lance.dataset(str(tmp_path / "d")).describe_indices()] == ["text_idx"]
