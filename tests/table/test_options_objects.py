"""Options objects (L17 repair 4): ``lance_ops.CommitOptions`` and ``lance_ops.CompactionOptions``
beside the pylance-shaped keyword forms, which stay thin wrappers giving the same result."""

from __future__ import annotations

import inspect
from collections.abc import Callable
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
    extras = {"self", "options", "dry_run", "commit_every", "progress", "transaction_properties", "commit"}
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


def _commit_trace(uri: str) -> list[tuple[str, dict[str, str]]]:
    """Each version's operation and transaction properties (the uuid aside), as we and pylance read them."""
    ours = lance_ops.dataset(uri)
    theirs = lance.dataset(uri)
    trace = []
    for version in range(1, ours.latest_version + 1):
        transaction = ours.read_transaction(version)
        assert transaction is not None
        read_back = theirs.read_transaction(version)
        assert (
            read_back is not None and dict(read_back.transaction_properties or {}) == transaction.properties
        )
        trace.append((type(transaction.operation).__name__, dict(transaction.properties)))
    return trace


@pytest.mark.interop
def test_dataset_methods_take_commit_options_as_their_keywords(tmp_path: Path) -> None:
    """write_dataset, LanceDataset.commit, insert, merge_insert(...).execute and restore commit the
    same with ``commit=CommitOptions(...)`` as with their keyword forms; pylance reads the results."""
    props = {"run": "r1"}
    results = {}
    for form in ("keywords", "object"):
        uri = str(tmp_path / f"{form}.lance")
        by_object = form == "object"

        def how(**keywords: object) -> dict[str, object]:
            return {"commit": lance_ops.CommitOptions(**keywords)} if by_object else keywords  # noqa: B023

        first = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "v": ["a", "b", "c"]})
        ds = lance_ops.write_dataset(
            first,
            uri,
            **how(commit_message="create", transaction_properties=props, enable_stable_row_ids=True),
        )
        ds.insert(pa.table({"id": pa.array([4], pa.int64()), "v": ["d"]}), **how(commit_message="insert"))
        appended = lance_ops.write_dataset(
            pa.table({"id": pa.array([5], pa.int64()), "v": ["e"]}), uri, mode="append", max_rows_per_file=1
        )
        transaction = appended.read_transaction(appended.version)
        assert transaction is not None
        lance_ops.write_dataset(pa.table({"id": pa.array([9], pa.int64()), "v": ["z"]}), uri, mode="append")
        lance_ops.LanceDataset.commit(
            uri,
            transaction.operation,
            **how(read_version=appended.version, transaction_properties={"step": "commit"}, max_retries=3),
        )
        ds = lance_ops.dataset(uri)
        source = pa.table({"id": pa.array([2, 7], pa.int64()), "v": ["B", "g"]})
        merged = (
            ds.merge_insert("id")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute(source, **how(transaction_properties={"step": "merge"}))
        )
        ds.checkout_version(2).restore(**how(transaction_properties={"step": "restore"}))
        theirs = lance.dataset(uri)
        assert theirs.has_stable_row_ids
        results[form] = (
            merged,
            _commit_trace(uri),
            [
                sorted(theirs.checkout_version(v).to_table().to_pylist(), key=str)
                for v in range(1, theirs.version + 1)
            ],
        )
    assert results["keywords"] == results["object"]
    merged, trace, tables = results["object"]
    assert merged["num_updated_rows"] == 1 and merged["num_inserted_rows"] == 1
    assert trace[0] == ("Overwrite", {"run": "r1", "__lance_commit_message": "create"})
    assert trace[1][1] == {"__lance_commit_message": "insert"}
    assert [t[1].get("step") for t in trace[4:]] == ["commit", "merge", "restore"]
    # the append of id 5 committed again on top of id 9's: ids 1-5, 9 and 5 once more
    assert tables[-1] == tables[1] and sorted(row["id"] for row in tables[4]) == [1, 2, 3, 4, 5, 5, 9]


def test_dataset_methods_refuse_a_setting_given_both_ways(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds.lance")
    table = pa.table({"id": pa.array([1], pa.int64())})
    with pytest.raises(InvalidArgumentError, match="commit_message"):
        lance_ops.write_dataset(
            table, uri, commit_message="a", commit=lance_ops.CommitOptions(commit_message="b")
        )
    ds = lance_ops.write_dataset(table, uri)
    with pytest.raises(InvalidArgumentError, match="transaction_properties"):
        ds.restore(
            transaction_properties={"a": "1"},
            commit=lance_ops.CommitOptions(transaction_properties={"a": "2"}),
        )
    assert ds.version == 1 and lance.dataset(uri).version == 1


# Every mutating entry point with the commit settings it was given (L17: rebuild, compaction and the
# dataset methods that lacked ``commit=``); each call commits one version whose properties say its name.
_MUTATIONS: dict[str, Callable[[lance_ops.LanceDataset, lance_ops.CommitOptions], object]] = {
    "delete": lambda ds, c: ds.delete("id = 1", commit=c),
    "update": lambda ds, c: ds.update({"id": "id + 100"}, where="id = 2", commit=c),
    "add_columns": lambda ds, c: ds.add_columns({"x": "id * 2"}, commit=c),
    "alter_columns": lambda ds, c: ds.alter_columns({"path": "x", "name": "y"}, commit=c),
    "drop_columns": lambda ds, c: ds.drop_columns(["y"], commit=c),
    "update_config": lambda ds, c: ds.update_config({"k": "v"}, commit=c),
    "delete_config_keys": lambda ds, c: ds.delete_config_keys(["k"], commit=c),
    "update_metadata": lambda ds, c: ds.update_metadata({"m": "1"}, commit=c),
    "update_schema_metadata": lambda ds, c: ds.update_schema_metadata({"s": "1"}, commit=c),
    "update_field_metadata": lambda ds, c: ds.update_field_metadata({"id": {"f": "1"}}, commit=c),
    "compact_files": lambda ds, c: ds.optimize.compact_files(commit=c),
    "rebuild": lambda ds, c: ds.stats.rebuild(force=True, commit=c),
}


@pytest.mark.interop
def test_every_mutating_method_takes_commit_options(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds.lance")
    _small_fragments(uri, fragments=3)
    ds = lance_ops.dataset(uri)
    expected = []
    for name, call in _MUTATIONS.items():
        before = ds.version
        call(ds, lance_ops.CommitOptions(commit_message=name, transaction_properties={"step": name}))
        assert ds.version > before, name
        expected += [{"step": name, "__lance_commit_message": name}] * (ds.version - before)
    trace = _commit_trace(uri)[3:]
    # (an update also records its own lance_ops.* property)
    mine = [{k: v for k, v in props.items() if not k.startswith("lance_ops.")} for _, props in trace]
    assert mine == expected
    # compaction commits ReserveFragments then Rewrite; the statistics rebuild an UpdateConfig
    assert [op for op, _ in trace][-3:] == ["ReserveFragments", "Rewrite", "UpdateConfig"]
    assert sorted(lance.dataset(uri).to_table()["id"].to_pylist()) == [0, *range(3, 30), 102]


def test_compaction_entry_points_take_commit_options(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds.lance")
    _small_fragments(uri, fragments=4)
    ds = lance_ops.dataset(uri)
    lance_ops.optimize.Compaction.execute(
        ds,
        {"target_rows_per_fragment": 20},
        commit=lance_ops.CommitOptions(transaction_properties={"s": "1"}),
    )
    plan = lance_ops.optimize.Compaction.plan(ds, {"target_rows_per_fragment": 40})
    results = [task.execute(uri) for task in plan.tasks]
    lance_ops.optimize.Compaction.commit(
        ds, results, commit=lance_ops.CommitOptions(transaction_properties={"s": "2"})
    )
    assert [props.get("s") for _, props in _commit_trace(uri)][4:] == ["1", "1", "2", "2"]
    assert sorted(lance.dataset(uri).to_table()["id"].to_pylist()) == list(range(40))


def test_compact_files_and_rebuild_refuse_a_setting_given_both_ways(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds.lance")
    _small_fragments(uri, fragments=2)
    ds = lance_ops.dataset(uri)
    conflicting = lance_ops.CommitOptions(transaction_properties={"a": "2"})
    with pytest.raises(InvalidArgumentError, match="transaction_properties"):
        ds.optimize.compact_files(transaction_properties={"a": "1"}, commit=conflicting)
    with pytest.raises(InvalidArgumentError, match="transaction_properties"):
        ds.stats.rebuild(force=True, transaction_properties={"a": "1"}, commit=conflicting)
    assert ds.version == 2 and lance.dataset(uri).version == 2
