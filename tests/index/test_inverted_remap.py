"""INVERTED indices built by pylance, compacted by lance_ops after deletions (lance_ops.index.inverted).

Removed documents leave the docs file, the posting lists are renumbered and rescored, tokens left
in no document are dropped: the index files equal those of pylance's own compaction of a twin
dataset, and pylance's full-text answers and ``_score``s on ours equal its answers on the twin."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

import jobs
import lance_ops
from lance_ops.errors import IndexCorruptError
from lance_ops.file import LanceFileReader
from lance_ops.index.remap import remap_index
from lance_ops.index.types import uuid_text
from lance_ops.ops.compaction import CompactionOptions
from lance_ops.table import frag_reuse
from lance_ops.table.transaction import Rewrite
from tests.index.helpers import compact_deferred

ROWS = 3000
# scattered rows, a whole run of one fragment, and the only rows holding "rare7x" and "rare1007x"
DELETE = "id % 10 = 3 or (id >= 1000 and id < 1100) or id = 7"
QUERIES = ("hello", "world", "3", "rare507x", "rare7x", "rare1007x", "world 5", "nothing")


def _texts(rare: bool) -> list[str | None]:
    texts: list[str | None] = []
    for i in range(ROWS):
        if i % 250 == 5:
            texts.append(None)
        elif i % 250 == 6:
            texts.append("")
        else:
            texts.append(f"hello world {i % 11}" + (f" rare{i}x" if rare and i % 500 == 7 else ""))
    return texts


def _zipf(seed: int = 3) -> list[str | None]:
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}x" for i in range(400)]
    p = 1 / np.arange(1, len(vocab) + 1)
    p /= p.sum()
    return [" ".join(rng.choice(vocab, int(rng.integers(0, 40)), p=p)) for _ in range(ROWS)]


def _build(path: Path, texts: list[str | None], stable: bool = False, **params: object) -> Path:
    table = pa.table({"id": np.arange(ROWS), "txt": pa.array(texts, pa.string())})
    ds = lance.write_dataset(table, path, max_rows_per_file=1000, enable_stable_row_ids=stable)
    ds.create_scalar_index("txt", "INVERTED", name="txt_idx", **params)
    lance.dataset(str(path)).delete(DELETE)
    return path


def _twins(source: Path, tmp_path: Path) -> tuple[Path, Path]:
    ours, twin = tmp_path / "ours", tmp_path / "twin"
    shutil.copytree(source, ours)
    shutil.copytree(source, twin)
    lance.dataset(str(twin)).optimize.compact_files(target_rows_per_fragment=1 << 20)
    return ours, twin


def _files(path: Path) -> dict[str, pa.Table]:
    ds = lance.dataset(str(path))
    (index,) = [ix for ix in lance_ops.dataset(str(path)).manifest.indices if ix.name == "txt_idx"]
    assert ds.stats.index_stats("txt_idx")["num_unindexed_rows"] == 0
    directory = path / "_indices" / uuid_text(index)
    return {f.name: LanceFileReader(str(f)).read_all().to_table() for f in sorted(directory.iterdir())}


def _answers_equal(ours: Path, twin: Path, queries: tuple[str, ...] = QUERIES, scores: bool = True) -> None:
    mine, theirs = lance.dataset(str(ours)), lance.dataset(str(twin))
    assert "MatchQuery: column=txt" in mine.scanner(full_text_query="hello").explain_plan(True)
    for query in queries:
        a = mine.to_table(full_text_query=query, columns=["id"]).sort_by("id")
        b = theirs.to_table(full_text_query=query, columns=["id"]).sort_by("id")
        assert a["id"].equals(b["id"]), query
        assert not scores or a["_score"].equals(b["_score"]), query


def _sorted_partitions(table: pa.Table) -> pa.Table:
    metadata = dict(table.schema.metadata)
    metadata[b"partitions"] = json.dumps(sorted(json.loads(metadata[b"partitions"]))).encode()
    return table.replace_schema_metadata(metadata)


def _frag_reuse(path: Path) -> object:
    return frag_reuse.find(lance_ops.dataset(str(path)).manifest)


@pytest.mark.parametrize("data", ["kept_tokens", "zipf"])
def test_files_equal_pylance_compaction(tmp_path: Path, data: str) -> None:
    """No token loses all its documents: every file equals pylance's, the FST is copied."""
    texts = _texts(rare=False) if data == "kept_tokens" else _zipf()
    ours, twin = _twins(_build(tmp_path / "src", texts), tmp_path)
    outcome = lance_ops.dataset(str(ours)).optimize.compact_files_with_outcome(
        CompactionOptions(target_rows_per_fragment=1 << 20)
    )
    assert outcome is not None and "txt_idx" in outcome.indices.remapped and not outcome.indices.deferred
    assert _frag_reuse(ours) is None
    mine, theirs = _files(ours), _files(twin)
    assert mine.keys() == theirs.keys()
    for name, table in theirs.items():
        assert mine[name].equals(table, check_metadata=True), name
    docs = mine["part_0_docs.lance"]
    assert int(docs.schema.metadata[b"total_tokens"]) == int(np.asarray(docs["_num_tokens"]).sum())
    _answers_equal(ours, twin, QUERIES if data == "kept_tokens" else ("w0x", "w1x w7x", "w399x", "w77x"))


def test_emptied_tokens_dropped_as_pylance(tmp_path: Path) -> None:
    """ "rare7x" and "rare1007x" lose their only document: pylance drops them and renumbers the
    later tokens (the FST rebuilt); so do we."""
    ours, twin = _twins(_build(tmp_path / "src", _texts(rare=True)), tmp_path)
    lance_ops.dataset(str(ours)).optimize.compact_files(target_rows_per_fragment=1 << 20)
    assert _frag_reuse(ours) is None
    mine, theirs = _files(ours), _files(twin)
    for name, table in theirs.items():
        assert mine[name].equals(table, check_metadata=True), name
    tokens = mine["part_0_tokens.lance"].to_pylist()[0]
    assert tokens["_token_next_id"] == mine["part_0_invert.lance"].num_rows
    _answers_equal(ours, twin)


@pytest.mark.parametrize(
    "delete",
    ["id % 10 = 3 and id < 3000", "id >= 3002 or id % 7 = 1", "id > 3000 or id % 7 = 1"],
    ids=["first_partition_loses_rows", "second_left_with_one_document", "second_emptied"],
)
def test_two_partitions(tmp_path: Path, delete: str) -> None:
    """pylance's optimize_indices puts appended rows in a second partition; each partition is
    renumbered on its own statistics (one left with a single document drops most of its tokens;
    one left with none keeps empty files, as pylance's)."""
    texts: list[str | None] = [f"hello world {i % 11} w{i % 97}x" for i in range(ROWS + 300)]
    texts[ROWS:] = [None if i == 0 else f"{t} extra{i}x" for i, t in enumerate(texts[ROWS:])]
    table = pa.table({"id": np.arange(ROWS + 300), "txt": pa.array(texts, pa.string())})
    src = tmp_path / "src"
    lance.write_dataset(table.slice(0, ROWS), src, max_rows_per_file=1000).create_scalar_index(
        "txt", "INVERTED", name="txt_idx"
    )
    lance.dataset(str(src)).insert(table.slice(ROWS))
    lance.dataset(str(src)).optimize.optimize_indices()
    lance.dataset(str(src)).delete(delete)
    ours, twin = _twins(src, tmp_path)
    lance_ops.dataset(str(ours)).optimize.compact_files(target_rows_per_fragment=1 << 20)
    assert _frag_reuse(ours) is None
    mine, theirs = _files(ours), _files(twin)
    assert "part_1_docs.lance" in theirs and mine.keys() == theirs.keys()
    for name, table in theirs.items():
        if name == "metadata.lance":  # pylance lists the partitions in no fixed order
            mine[name], table = (_sorted_partitions(t) for t in (mine[name], table))
        assert mine[name].equals(table, check_metadata=True), name
    _answers_equal(ours, twin, ("hello", "w5x", "extra0x", "extra1x", "extra299x"))


def test_two_rounds_on_our_own_files(tmp_path: Path) -> None:
    """The next day: more rows deleted and compacted again, our remap reading the files it wrote
    (and pylance its own on the twin); still the same files and answers."""
    ours, twin = _twins(_build(tmp_path / "src", _zipf(5)), tmp_path)
    lance_ops.dataset(str(ours)).optimize.compact_files(target_rows_per_fragment=1 << 20)
    for path in (ours, twin):
        lance.dataset(str(path)).delete("id % 7 = 2 or id > 2900")
    lance.dataset(str(twin)).optimize.compact_files(target_rows_per_fragment=1 << 20)
    lance_ops.dataset(str(ours)).optimize.compact_files(target_rows_per_fragment=1 << 20)
    assert _frag_reuse(ours) is None
    mine, theirs = _files(ours), _files(twin)
    for name, table in theirs.items():
        assert mine[name].equals(table, check_metadata=True), name
    _answers_equal(ours, twin, ("w0x", "w1x w7x", "w300x"))
    version = lance_ops.dataset(str(ours)).version
    lance_ops.dataset(str(ours)).optimize.compact_files(target_rows_per_fragment=1 << 20)  # nothing to do
    assert lance_ops.dataset(str(ours)).version == version
    # pylance carries on from our files: an append indexed by its optimize_indices
    extra = pa.table({"id": np.arange(ROWS, ROWS + 200), "txt": pa.array(_zipf(6)[:200], pa.string())})
    for path in (ours, twin):
        lance.dataset(str(path)).insert(extra)
        lance.dataset(str(path)).optimize.optimize_indices()
    _answers_equal(ours, twin, ("w0x", "w1x w7x", "w300x"))


def test_remap_index_directly(tmp_path: Path) -> None:
    """The remap API on pylance's deferred compaction: the reuse index replaced by our remap."""
    path = _build(tmp_path / "src", _texts(rare=False))
    twin = tmp_path / "twin"
    shutil.copytree(path, twin)
    lance.dataset(str(twin)).optimize.compact_files(target_rows_per_fragment=1 << 20)
    mapping, _ = compact_deferred(path)
    assert mapping.removed.size == 391
    ours = lance_ops.dataset(str(path))
    (index,) = [ix for ix in ours.manifest.indices if ix.name == "txt_idx"]
    result = remap_index(ours.storage, index, mapping)
    assert result is not None and result.uuid != index.uuid
    docs = (
        LanceFileReader(str(path / "_indices" / result.uuid_text / "part_0_docs.lance")).read_all().to_table()
    )
    assert docs.equals(_files(twin)["part_0_docs.lance"], check_metadata=True)


def test_stable_row_ids(tmp_path: Path) -> None:
    """Stable row ids: as pylance, the index keeps its files and uuid (row ids do not move) and its
    fragments move to the new fragment; answers and scores equal pylance's after its own
    compaction."""
    ours, twin = _twins(_build(tmp_path / "src", _texts(rare=True), stable=True), tmp_path)
    before = lance_ops.dataset(str(ours)).manifest.indices
    lance_ops.dataset(str(ours)).optimize.compact_files(target_rows_per_fragment=1 << 20)
    assert _frag_reuse(ours) is None
    (old,) = [ix for ix in before if ix.name == "txt_idx"]
    mine, theirs = (
        [ix for ix in lance_ops.dataset(str(p)).manifest.indices if ix.name == "txt_idx"][0]
        for p in (ours, twin)
    )
    assert mine.uuid == theirs.uuid == old.uuid
    assert mine.fragment_bitmap == theirs.fragment_bitmap != old.fragment_bitmap
    _answers_equal(ours, twin)


def test_deferred_then_optimize_trims_reuse_index(tmp_path: Path) -> None:
    """defer_index_remap=True records the compaction in the Fragment Reuse Index; optimize_indices
    later remaps the INVERTED index with its removed rows and the reuse index goes away."""
    ours, twin = _twins(_build(tmp_path / "src", _texts(rare=False)), tmp_path)
    ds = lance_ops.dataset(str(ours))
    ds.optimize.compact_files(target_rows_per_fragment=1 << 20, defer_index_remap=True)
    assert _frag_reuse(ours) is not None
    _answers_equal(ours, twin, ("hello", "3", "rare507x"), scores=False)  # old statistics until remapped
    report = lance_ops.dataset(str(ours)).optimize.optimize_indices()
    assert "txt_idx" in report.remapped
    assert _frag_reuse(ours) is None
    for name, table in _files(twin).items():
        assert _files(ours)[name].equals(table, check_metadata=True), name
    _answers_equal(ours, twin)
    version = lance_ops.dataset(str(ours)).version
    assert lance_ops.dataset(str(ours)).optimize.optimize_indices().remapped == ()
    assert lance_ops.dataset(str(ours)).version == version


def test_positions_renumbered_as_pylance(tmp_path: Path) -> None:
    """An index with positions losing rows: the position streams drop the removed documents and
    are cut into blocks again; every file equals pylance's, phrase queries answer as on the twin."""
    ours, twin = _twins(_build(tmp_path / "src", _zipf(), with_position=True), tmp_path)
    outcome = lance_ops.dataset(str(ours)).optimize.compact_files_with_outcome(
        CompactionOptions(target_rows_per_fragment=1 << 20)
    )
    assert outcome is not None and outcome.indices.remapped == ("txt_idx",) and not outcome.indices.deferred
    assert _frag_reuse(ours) is None
    mine, theirs = _files(ours), _files(twin)
    assert "_compressed_position" in mine["part_0_invert.lance"].column_names
    for name, table in theirs.items():
        assert mine[name].equals(table, check_metadata=True), name
    _answers_equal(ours, twin, ("w0x", '"w0x w1x"', '"w3x w0x w0x"', "w399x"))


def test_corrupt_postings_raise_naming_the_index(tmp_path: Path) -> None:
    path = _build(tmp_path / "src", _texts(rare=False))
    mapping, _ = compact_deferred(path)
    ds = lance_ops.dataset(str(path))
    (index,) = [ix for ix in ds.manifest.indices if ix.name == "txt_idx"]
    invert = path / "_indices" / uuid_text(index) / "part_0_invert.lance"
    table = LanceFileReader(str(invert)).read_all().to_table()
    postings = table["_posting"].to_pylist()
    postings[0] = [b[:-2] for b in postings[0]]
    broken = table.set_column(0, table.schema.field(0), pa.array(postings, table.schema.field(0).type))
    from lance_ops.file import LanceFileWriter

    invert.unlink()
    with LanceFileWriter(str(invert), broken.schema, version="2.2") as writer:
        writer.write_batch(broken.to_batches()[0])
    before = sorted(p.name for p in (path / "_indices").iterdir())
    with pytest.raises(IndexCorruptError, match="txt_idx"):
        remap_index(ds.storage, index, mapping)
    assert sorted(p.name for p in (path / "_indices").iterdir()) == before


@pytest.mark.spark
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_spark_compaction_job_remaps_on_the_executors(spark: SparkSession, tmp_path: Path) -> None:
    """The Spark compaction job: the INVERTED index losing rows is remapped in its one Rewrite
    commit, the files equal pylance's own compaction of the twin."""
    ours, twin = _twins(_build(tmp_path / "src", _texts(rare=False)), tmp_path)
    before = {i.name: i.uuid for i in lance_ops.dataset(str(ours)).manifest.indices}
    jobs.compact(spark, str(ours), target_rows_per_fragment=1 << 20)
    operation = lance_ops.dataset(str(ours)).read_transaction().operation
    assert isinstance(operation, Rewrite)
    assert {r.old_id for r in operation.rewritten_indices} == {before["txt_idx"]}
    assert _frag_reuse(ours) is None
    mine, theirs = _files(ours), _files(twin)
    for name, table in theirs.items():
        assert mine[name].equals(table, check_metadata=True), name
    _answers_equal(ours, twin)
