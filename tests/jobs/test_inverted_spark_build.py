"""L18: ``jobs.create_index(spark, uri, column, "INVERTED", **tokenizer params)`` — each Spark task
tokenizes one fragment and stages a partition (pylance 14's distributed build), the driver merges
them and commits one ``CreateIndex``.

The files equal the in-process build's (byte for byte: the driver writes them in this process);
pylance answers every query with the rows and BM25 scores of its own index over the same data; a
second run replaces the index after an append; a failed task leaves no directory and no commit.
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import lance
import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

import jobs
import lance_ops
from jobs.create_index import main as create_index_main
from tests.index.test_fts_build import QUERIES, assert_same_search, corpus

pytestmark = [pytest.mark.spark, pytest.mark.interop]


def _dataset(path: Path, rows: int = 900) -> str:
    texts = corpus(rows)
    texts[300:400] = [None] * 100
    table = pa.table({"id": pa.array(range(rows), pa.int64()), "text": pa.array(texts, pa.string())})
    lance.write_dataset(table, str(path), max_rows_per_file=200)
    lance.dataset(str(path)).delete("id % 7 = 2")
    return str(path)


def _index_files(uri: str, name: str) -> dict[str, bytes]:
    ds = lance_ops.dataset(uri)
    (index,) = [i for i in ds.manifest.indices if i.name == name]
    root = Path(uri) / "_indices" / str(uuid.UUID(bytes=index.uuid))
    assert not (root / "staging").exists()
    return {p.name: p.read_bytes() for p in sorted(root.iterdir())}


@pytest.mark.parametrize(
    "params", [{}, {"with_position": True, "remove_stop_words": False}], ids=["default", "positions"]
)
def test_spark_inverted_build_equals_in_process_and_pylance_answers_as_its_own(
    spark: SparkSession, tmp_path: Path, params: dict[str, bool]
) -> None:
    local = _dataset(tmp_path / "local")
    spark_uri = str(tmp_path / "spark")
    shutil.copytree(local, spark_uri)
    theirs_uri = str(tmp_path / "theirs")
    shutil.copytree(local, theirs_uri)
    lance_ops.dataset(local).create_scalar_index("text", "INVERTED", **params)
    before = lance.dataset(spark_uri).version
    result = jobs.create_index(spark, spark_uri, "text", "INVERTED", **params)
    assert (result.name, result.index_type, result.tasks, result.version) == (
        "text_idx",
        "INVERTED",
        5,
        before + 1,
    )
    assert _index_files(spark_uri, "text_idx") == _index_files(local, "text_idx")
    lance.dataset(theirs_uri).create_scalar_index("text", "INVERTED", **params)
    ours, theirs = lance.dataset(spark_uri), lance.dataset(theirs_uri)
    assert [d.name for d in ours.describe_indices()] == ["text_idx"]
    queries = QUERIES + (['"alpha beta"', '"the lazy dog"'] if params else [])
    assert_same_search(ours, theirs, queries)
    assert_same_search(lance_ops.dataset(spark_uri), theirs)


def test_second_run_after_append_replaces_the_index(
    spark: SparkSession, tmp_path: Path, main_session: None, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = _dataset(tmp_path / "d")
    first = create_index_main(["--uri", uri, "--column", "text", "--index-type", "inverted"])
    assert json.loads(capsys.readouterr().out)["name"] == "text_idx"
    extra = pa.table({"id": pa.array([900, 901], pa.int64()), "text": ["zebra crossing", "zebra alpha"]})
    lance.write_dataset(extra, uri, mode="append")
    second = create_index_main(
        ["--uri", uri, "--column", "text", "--index-type", "INVERTED", "--param", "lower_case=false"]
    )
    assert second["version"] == first["version"] + 2 and second["uuid"] != first["uuid"]
    assert second["tasks"] == 6
    ds = lance.dataset(uri)
    assert [d.name for d in ds.describe_indices()] == ["text_idx"]
    assert sorted(ds.to_table(full_text_query="zebra", columns=["id"])["id"].to_pylist()) == [900, 901]
    fresh = str(tmp_path / "fresh")
    shutil.copytree(uri, fresh)
    pl = lance.dataset(fresh)
    pl.create_scalar_index("text", "INVERTED", lower_case=False)
    assert_same_search(lance.dataset(uri), lance.dataset(fresh), ["zebra", "Alpha", "alpha", "beta w3"])


def test_failed_task_leaves_no_directory_and_no_commit(spark: SparkSession, tmp_path: Path) -> None:
    uri = _dataset(tmp_path / "d")
    ds = lance_ops.dataset(uri)
    victim = ds.get_fragments()[3].data_files()[0].path
    (Path(uri) / "data" / victim).unlink()
    with pytest.raises(Exception):  # noqa: B017 (Spark wraps the executor's error)
        jobs.create_index(spark, uri, "text", "INVERTED")
    assert lance.dataset(uri).version == ds.version
    assert not (Path(uri) / "_indices").exists() or not any((Path(uri) / "_indices").iterdir())
