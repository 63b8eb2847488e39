"""Options objects (L17 repair 4): ``lance_ops.CommitOptions`` and ``lance_ops.CompactionOptions``
beside the pylance-shaped keyword forms, which stay thin wrappers giving the same result."""

from __future__ import annotations

import inspect
from dataclasses import fields
from pathlib import Path
from typing import get_type_hints

import lance
import pyarrow as pa
import pytest

import lance_ops
import lance_ops.optimize
from lance_ops.errors import InvalidArgumentError, InvalidOptionError
from lance_ops.optimize import CompactionKeywords


def _small_fragments(uri: str, fragments: int = 6, rows: int = 10) -> None:
    for n in range(fragments):
        table = pa.table({"id": pa.array(range(n * rows, (n + 1) * rows), pa.int64())})
        lance_ops.write_dataset(table, uri, mode="create" if n == 0 else "append")


def test_commit_options_of_joins_keywords_and_object() -> None:
    base = lance_ops.CommitOptions(commit_message="nightly", max_retries=3)
    joined = lance_ops.CommitOptions.of(base, transaction_properties={"run": "7"}, storage_options=None)
    assert joined.commit_message == "nightly" and joined.max_retries == 3
    assert joined.transaction_properties == {"run": "7"} and joined.storage_options is None
    # the same value given both ways is not a conflict; None keywords are "not given"
    assert lance_ops.CommitOptions.of(base, commit_message="nightly") == base
    assert lance_ops.CommitOptions.of(base, commit_message=None) is base
    assert lance_ops.CommitOptions.of(None, commit_message="m") == lance_ops.CommitOptions(commit_message="m")


def test_commit_options_refuse_conflicts_and_bad_values() -> None:
    with pytest.raises(InvalidArgumentError, match="commit_message"):
        lance_ops.CommitOptions.of(lance_ops.CommitOptions(commit_message="a"), commit_message="b")
    with pytest.raises(TypeError, match="unknown commit options"):
        lance_ops.CommitOptions.of(None, commit_mesage="typo")
    with pytest.raises(InvalidOptionError, match="max_retries"):
        lance_ops.CommitOptions(max_retries=-1)
    with pytest.raises(ValueError, match="read_version"):
        lance_ops.CommitOptions(read_version=-2)


def test_compaction_keywords_are_the_options_fields() -> None:
    """The keyword form of compact_files names every CompactionOptions field (io_buffer_size,
    which has no effect, aside) and nothing else."""
    keywords = set(get_type_hints(CompactionKeywords))
    assert keywords == {f.name for f in fields(lance_ops.CompactionOptions)} - {"io_buffer_size"}
    signature = set(inspect.signature(lance_ops.optimize.DatasetOptimizer.compact_files).parameters)
    extras = {"self", "options", "dry_run", "commit_every", "progress", "transaction_properties"}
    assert signature - extras == keywords


@pytest.mark.interop
def test_compact_files_keywords_and_object_give_the_same_dataset(tmp_path: Path) -> None:
    by_keywords, by_object = str(tmp_path / "k.lance"), str(tmp_path / "o.lance")
    for uri in (by_keywords, by_object):
        _small_fragments(uri)
        lance_ops.dataset(uri).delete("id % 7 = 0")
    a = lance_ops.dataset(by_keywords)
    b = lance_ops.dataset(by_object)
    plan_a = a.optimize.compact_files(target_rows_per_fragment=25, dry_run=True)
    options = lance_ops.CompactionOptions(target_rows_per_fragment=25)
    plan_b = b.optimize.compact_files(options=options, dry_run=True)
    assert plan_a.summary() == plan_b.summary() and plan_a.num_tasks() > 0
    metrics_a = a.optimize.compact_files(target_rows_per_fragment=25, excluded_fragment_ids=[5])
    metrics_b = b.optimize.compact_files(
        options=lance_ops.CompactionOptions(target_rows_per_fragment=25, excluded_fragment_ids=(5,))
    )
    assert metrics_a == metrics_b
    for uri in (by_keywords, by_object):
        theirs = lance.dataset(uri)
        assert [f.count_rows() for f in theirs.get_fragments()] == [
            f.count_rows() for f in lance_ops.dataset(uri).get_fragments()
        ]
        assert sorted(theirs.to_table().column("id").to_pylist()) == [i for i in range(60) if i % 7]
    assert [f.metadata.physical_rows for f in a.get_fragments()] == [
        f.metadata.physical_rows for f in b.get_fragments()
    ]


def test_compact_files_takes_options_or_keywords_not_both(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds.lance")
    _small_fragments(uri, fragments=2)
    ds = lance_ops.dataset(uri)
    with pytest.raises(InvalidArgumentError, match="not both"):
        ds.optimize.compact_files(options=lance_ops.CompactionOptions(), target_rows_per_fragment=5)
    with pytest.raises(TypeError, match="unexpected keyword"):
        ds.optimize.compact_files(target_rows_per_fragmnet=5)  # type: ignore[call-arg]
    assert ds.version == 2 and lance.dataset(uri).version == 2
