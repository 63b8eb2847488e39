"""Public shapes pylance's own tests rely on, each checked against pylance 14 itself (L17 section 2):
compaction tasks' fragment lists and reprs, ``DataFile.path()``, ``RowIdMeta``, and the filter
error messages."""

from __future__ import annotations

import json
import pickle
import re
from pathlib import Path

import lance
import lance.optimize
import pyarrow as pa
import pytest

import lance_ops
from lance_ops.errors import FieldNotFoundError, PredicateError
from lance_ops.fragment import DataFile, FragmentMetadata, RowIdMeta
from lance_ops.optimize import Compaction


def _datasets(
    tmp_path: Path, table: pa.Table, **kwargs: object
) -> tuple[lance_ops.LanceDataset, lance.LanceDataset]:
    ours = lance_ops.write_dataset(table, str(tmp_path / "ours"), **kwargs)
    theirs = lance.write_dataset(table, str(tmp_path / "theirs"), **kwargs)
    return ours, theirs


def test_compaction_task_fragments_are_a_list_of_the_fragments_metadata(tmp_path: Path) -> None:
    table = pa.table({"a": range(800), "b": range(800)})
    ds = lance_ops.write_dataset(table, str(tmp_path / "d"), max_rows_per_file=200)
    theirs = lance.write_dataset(table, str(tmp_path / "p"), max_rows_per_file=200)
    options = {"target_rows_per_fragment": 400, "num_threads": 1}
    plan = Compaction.plan(ds, options=options)
    their_plan = lance.optimize.Compaction.plan(theirs, options=options)
    assert repr(plan) == repr(their_plan) == "CompactionPlan(read_version=1, tasks=<2 compaction tasks>)"
    fragments = ds.get_fragments()
    for task, their_task, chunk in zip(
        plan.tasks, their_plan.tasks, (fragments[:2], fragments[2:]), strict=True
    ):
        assert type(task.fragments) is type(their_task.fragments) is list
        assert task.fragments == [f.metadata for f in chunk]
        assert [f.id for f in task.fragments] == [f.id for f in their_task.fragments]
    assert pickle.loads(pickle.dumps(plan.tasks[0])) == plan.tasks[0]
    assert type(type(plan.tasks[0]).from_json(plan.tasks[0].json()).fragments) is list

    result = plan.tasks[0].execute(ds)
    again = pickle.loads(pickle.dumps(result))
    assert again == result and again is not result
    pattern = r"RewriteResult\(read_version=1, new_fragments=\[.+\], old_fragments=\[.+\]\)"
    assert re.match(pattern, repr(result))
    assert re.match(pattern, repr(their_plan.tasks[0].execute(theirs)))
    metrics = Compaction.commit(ds, [again])
    assert (metrics.fragments_removed, metrics.fragments_added) == (2, 1)
    assert lance.dataset(str(tmp_path / "d")).to_table().sort_by("a").equals(table)


def test_data_file_path_is_a_string_and_a_deprecated_method(tmp_path: Path) -> None:
    ours, theirs = _datasets(tmp_path, pa.table({"a": range(10)}))
    for data_file in (ours.get_fragments()[0].data_files()[0], theirs.get_fragments()[0].data_files()[0]):
        assert isinstance(data_file.path, str) and data_file.path.endswith(".lance")
        with pytest.warns(DeprecationWarning, match=r"DataFile.path\(\) is deprecated, use DataFile.path"):
            assert data_file.path() == data_file.path
    mine = ours.get_fragments()[0].metadata
    unpickled = pickle.loads(pickle.dumps(mine))
    assert unpickled == mine
    with pytest.warns(DeprecationWarning):
        assert unpickled.files[0].path() == mine.files[0].path
    rebuilt = DataFile.from_dict(mine.files[0].to_dict())
    assert rebuilt == mine.files[0] and json.dumps(rebuilt.to_dict()) == json.dumps(mine.files[0].to_dict())
    assert rebuilt.to_pb().path == mine.files[0].path


def test_row_id_meta_as_pylance(tmp_path: Path) -> None:
    ours, theirs = _datasets(tmp_path, pa.table({"a": range(10)}), enable_stable_row_ids=True)
    mine = ours.get_fragments()[0].metadata.row_id_meta
    their = theirs.get_fragments()[0].metadata.row_id_meta
    assert isinstance(mine, RowIdMeta)
    assert mine.asdict() == their.asdict() == {"Inline": [10, 4, 10, 2, 16, 10]}
    assert json.loads(mine.json()) == json.loads(their.json())
    assert RowIdMeta.from_json(their.json()) == mine == RowIdMeta.from_dict(mine.asdict())
    assert pickle.loads(pickle.dumps(mine)) == mine
    with pytest.raises(ValueError, match="Inline"):
        RowIdMeta.from_dict({})
    plain, plain_theirs = _datasets(tmp_path / "plain", pa.table({"a": range(3)}))
    assert plain.get_fragments()[0].metadata.row_id_meta is None
    assert plain_theirs.get_fragments()[0].metadata.row_id_meta is None
    created = lance_ops.LanceFragment.create(str(tmp_path / "frag"), pa.table({"a": [1]}))
    assert isinstance(created, FragmentMetadata) and created.row_id_meta is None


@pytest.mark.parametrize(
    ("where", "error", "words"),
    [
        ("foo = 7", FieldNotFoundError, "No field named foo"),
        ("foo > 1 AND int = 1", FieldNotFoundError, "No field named foo"),
        ("s.foo = 1", FieldNotFoundError, "No field named s"),
        ("int", PredicateError, "does not return a boolean"),
    ],
)
def test_filter_errors_carry_pylances_words(tmp_path: Path, where: str, error: type, words: str) -> None:
    ours, theirs = _datasets(tmp_path, pa.table({"int": [1, 2], "str": ["a", "b"]}))
    with pytest.raises(ValueError, match=words) as theirs_raised:
        theirs.to_table(filter=where)
    assert "Invalid user input: " in str(theirs_raised.value)
    with pytest.raises(error, match=f"Invalid user input: .*{words}") as raised:
        ours.to_table(filter=where)
    assert isinstance(raised.value, ValueError) and isinstance(raised.value, OSError)
    assert lance.dataset(str(tmp_path / "ours")).count_rows() == 2


@pytest.mark.parametrize("module", [lance_ops, lance])
def test_commit_needs_a_read_version_except_for_overwrite_and_restore(tmp_path: Path, module: object) -> None:
    table = pa.table({"a": range(4)})
    uri = str(tmp_path / module.__name__)  # type: ignore[attr-defined]
    ds = module.write_dataset(table, uri)  # type: ignore[attr-defined]
    fragment = module.LanceFragment.create(uri, table)  # type: ignore[attr-defined]
    append = module.LanceOperation.Append([fragment])  # type: ignore[attr-defined]
    with pytest.raises(
        ValueError, match="read_version is required for all operations except Overwrite and Restore"
    ):
        module.LanceDataset.commit(ds, append)  # type: ignore[attr-defined]
    assert module.dataset(uri).version == 1  # type: ignore[attr-defined]
    assert module.LanceDataset.commit(ds, append, read_version=1).count_rows() == 8  # type: ignore[attr-defined]
    overwrite = module.LanceOperation.Overwrite(table.schema, [fragment])  # type: ignore[attr-defined]
    assert module.LanceDataset.commit(uri, overwrite).version == 3  # type: ignore[attr-defined]
    assert module.LanceDataset.commit(uri, module.LanceOperation.Restore(1)).count_rows() == 4  # type: ignore[attr-defined]
    assert lance.dataset(uri).count_rows() == 4
