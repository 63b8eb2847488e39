"""L18: NGRAM indices built by lance_ops (create_scalar_index(column, "NGRAM")), used by pylance.

Our file holds exactly what pylance 14's own build of the same rows holds (tokens and row-id sets,
schema included); pylance's ``contains()`` plan names our index and its rows equal its full scan;
the folding of non-ASCII text is swept character by character against pylance's index.
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyroaring import BitMap64
from pyspark.sql import SparkSession

import jobs
import lance_ops
from lance_ops.errors import IndexColumnTypeError
from lance_ops.file import LanceFileReader
from lance_ops.index.ngram import NGRAM_FILE, ngram_tokens

pytestmark = pytest.mark.interop

TEXTS = [
    "Hello World",
    "Crème brûlée ßtraße",
    None,
    "ab",
    "",
    "x-yz9 ABC abc",
    "ÆØÅ æøå ﬁne ½ ℃ ①②③ ＡＢＣ",
    "日本語のテキスト abc",
    "the quick brown fox",
]


def _file(uri: str, name: str = "text_idx", segment: int = 0) -> pa.Table:
    ds = lance_ops.dataset(uri)
    index = sorted((i for i in ds.manifest.indices if i.name == name), key=lambda i: i.dataset_version)[
        segment
    ]
    path = Path(uri) / "_indices" / str(uuid.UUID(bytes=index.uuid)) / NGRAM_FILE
    return LanceFileReader(str(path)).read_all().to_table()


def _postings(uri: str, segment: int = 0) -> dict[int, list[int]]:
    table = _file(uri, segment=segment)
    return {
        t: sorted(BitMap64.deserialize(b))
        for t, b in zip(table["tokens"].to_pylist(), table["posting_list"].to_pylist(), strict=True)
    }


def _table(n: int) -> pa.Table:
    texts = [TEXTS[i % len(TEXTS)] if i % 5 else f"row {i} word{i % 17}" for i in range(n)]
    return pa.table({"id": pa.array(np.arange(n), pa.int64()), "text": pa.array(texts, pa.string())})


def _twins(tmp_path: Path, table: pa.Table, stable: bool = False, **write: int) -> tuple[str, str]:
    """The same rows written (and deleted from) by pylance twice: one copy for each build."""
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    lance.write_dataset(table, ours, enable_stable_row_ids=stable, **write)
    if table.num_rows > 10:
        lance.dataset(ours).delete("id % 7 = 2")
    shutil.copytree(ours, theirs)
    lance_ops.dataset(ours).create_scalar_index("text", "NGRAM")
    lance.dataset(theirs).create_scalar_index("text", "NGRAM")
    return ours, theirs


def _contains_rows(ds: lance.LanceDataset, needle: str, use_index: bool) -> list[int]:
    flt = f"contains(text, '{needle}')"
    return sorted(ds.to_table(columns=["id"], filter=flt, use_scalar_index=use_index)["id"].to_pylist())


NEEDLES = [
    "hello",
    "WORLD",
    "brûl",
    "strasse",
    "abc",
    "word1",
    "row 1",
    "fine",
    "xyz",
    "zzz",
    "ab",
    "æøå",
    "12",
]


@pytest.mark.parametrize("stable", [False, True])
def test_files_equal_pylance_and_pylance_uses_ours(tmp_path: Path, stable: bool) -> None:
    ours, theirs = _twins(tmp_path, _table(2500), stable, max_rows_per_file=800)
    mine, other = _file(ours), _file(theirs)
    assert mine.schema.equals(other.schema, check_metadata=True)
    assert _postings(ours) == _postings(theirs)
    ds = lance.dataset(ours)
    (described,) = ds.describe_indices()
    assert described.index_type == "NGram" and described.name == "text_idx"
    assert ds.stats.index_stats("text_idx")["num_unindexed_rows"] == 0
    for needle in NEEDLES:
        if len(needle) >= 3:
            assert "ScalarIndexQuery" in ds.scanner(filter=f"contains(text, '{needle}')").explain_plan()
        assert _contains_rows(ds, needle, True) == _contains_rows(ds, needle, False), needle


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    texts=st.lists(
        st.one_of(st.none(), st.text(alphabet="abAB09 -éßøÆ½\u0301ℂ", max_size=12)), min_size=0, max_size=12
    )
)
def test_property_tokens_equal_pylance(tmp_path: Path, texts: list[str | None]) -> None:
    root = tmp_path / uuid.uuid4().hex
    ours, theirs = _twins(root, pa.table({"id": np.arange(len(texts)), "text": pa.array(texts, pa.string())}))
    assert _postings(ours) == _postings(theirs)


def test_folding_sweep_loses_no_trigram(tmp_path: Path) -> None:
    """Every character of the Latin, IPA, letter-like, number-form, enclosed and full-width blocks
    between letters: our (token, row) pairs are exactly those of pylance's index."""
    ranges = [(0xA0, 0x2B0), (0x1D00, 0x1DC0), (0x1E00, 0x1F00), (0x2000, 0x2190), (0x2460, 0x2500)]
    ranges += [(0x2C60, 0x2C80), (0xA720, 0xA800), (0xFB00, 0xFB07), (0xFF01, 0xFF5F)]
    chars = [chr(c) for a, b in ranges for c in range(a, b)]
    texts = [f"x{c}yz" for c in chars] + [f"ab{c}" for c in chars] + [f"{c}bc" for c in chars]
    path = str(tmp_path / "sweep")
    lance.write_dataset(pa.table({"text": texts}), path).create_scalar_index("text", "NGRAM")
    theirs = {(t, r) for t, rows in _postings(path).items() for r in rows}
    tokens, rows = ngram_tokens(pa.array(texts), np.arange(len(texts), dtype=np.uint64))
    mine = set(zip(tokens.tolist(), rows.tolist(), strict=True))
    assert sorted({texts[r] for _, r in theirs ^ mine}) == []


@pytest.mark.parametrize("n", [0, 1, 3])
def test_tiny_datasets(tmp_path: Path, n: int) -> None:
    ours, theirs = _twins(tmp_path, _table(n))
    assert _postings(ours) == _postings(theirs)
    ds = lance.dataset(ours)
    assert _contains_rows(ds, "hello", True) == _contains_rows(ds, "hello", False)


def test_history_continues_both_ways(tmp_path: Path) -> None:
    """We build on pylance's dataset; pylance appends, optimizes our index and compacts; lance_ops
    compacts (remapping our index) and rebuilds with replace; every answer equals a full scan."""
    ours, _ = _twins(tmp_path, _table(1200), max_rows_per_file=500)
    lance.write_dataset(_table(300), ours, mode="append")
    ds = lance.dataset(ours)
    ds.optimize.optimize_indices()
    assert ds.stats.index_stats("text_idx")["num_unindexed_rows"] == 0
    lance_ops.dataset(ours).delete("id % 5 = 1")
    lance_ops.dataset(ours).optimize.compact_files(target_rows_per_fragment=1 << 20)
    ds = lance.dataset(ours)
    for needle in NEEDLES:
        assert _contains_rows(ds, needle, True) == _contains_rows(ds, needle, False), needle
    lance_ops.dataset(ours).create_scalar_index("text", "NGRAM")  # replace=True: one segment
    ds = lance.dataset(ours)
    assert [i.name for i in ds.describe_indices()] == ["text_idx"]
    for needle in NEEDLES:
        assert _contains_rows(ds, needle, True) == _contains_rows(ds, needle, False), needle


@pytest.mark.parametrize("merge", [0, 1])
def test_optimize_after_append_equals_pylance(tmp_path: Path, merge: int) -> None:
    """optimize_indices after an append (rows deleted before it): one merged segment or a delta
    segment, each holding what pylance's own optimize of a twin holds."""
    base = str(tmp_path / "base")
    lance.write_dataset(_table(900), base, max_rows_per_file=400).create_scalar_index("text", "NGRAM")
    more = _table(400).set_column(0, "id", pa.array(np.arange(900, 1300), pa.int64()))
    lance.write_dataset(more, base, mode="append").delete("id % 9 = 4")
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    shutil.copytree(base, ours)
    shutil.copytree(base, theirs)
    lance_ops.dataset(ours).optimize.optimize_indices(num_indices_to_merge=merge)
    lance.dataset(theirs).optimize.optimize_indices(num_indices_to_merge=merge)
    ds = lance.dataset(ours)
    assert ds.stats.index_stats("text_idx")["num_unindexed_rows"] == 0
    assert len(ds.describe_indices()[0].segments) == (2 if merge == 0 else 1)
    for segment in range(2 if merge == 0 else 1):
        assert _postings(ours, segment) == _postings(theirs, segment)
    for needle in NEEDLES:
        assert _contains_rows(ds, needle, True) == _contains_rows(ds, needle, False), needle


def test_large_string_column(tmp_path: Path) -> None:
    table = _table(300)
    table = table.set_column(1, "text", table["text"].cast(pa.large_string()))
    ours, theirs = _twins(tmp_path, table)
    assert _postings(ours) == _postings(theirs)


@pytest.mark.parametrize("column", ["id", "blob"])
def test_non_string_column_commits_nothing(tmp_path: Path, column: str) -> None:
    path = str(tmp_path / "ds")
    lance_ops.write_dataset(pa.table({"id": [1, 2], "blob": pa.array([b"abc", b"d"], pa.binary())}), path)
    with pytest.raises(IndexColumnTypeError) as info:
        lance_ops.dataset(path).create_scalar_index(column, "NGRAM")
    assert info.value.column == column and column in str(info.value)
    assert lance_ops.dataset(path).version == 1
    assert lance.dataset(path).describe_indices() == []


@pytest.mark.spark
def test_spark_build_equals_in_process(spark: SparkSession, tmp_path: Path) -> None:
    """jobs.create_index(..., "NGRAM"): the executors ship their fragments' texts and row ids, the
    driver writes the same file as the in-process build; pylance uses it."""
    local, spark_uri = _twins(tmp_path, _table(1500), max_rows_per_file=400)  # "ours" has our build
    shutil.rmtree(spark_uri)
    lance.write_dataset(_table(1500), spark_uri, max_rows_per_file=400).delete("id % 7 = 2")
    result = jobs.create_index(spark, spark_uri, "text", "NGRAM")
    assert (result.name, result.tasks) == ("text_idx", 4)
    assert _file(spark_uri).equals(_file(local))
    ds = lance.dataset(spark_uri)
    for needle in NEEDLES:
        assert _contains_rows(ds, needle, True) == _contains_rows(ds, needle, False), needle
