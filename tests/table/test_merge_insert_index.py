"""L16 / L18: merge_insert finds the target rows a source may match through a BTREE or BITMAP index
of a key column, reading only the fragments (and rows) the index points at; fragments appended
after the index are pruned by their page statistics. Rows, result dicts, transactions and row
versions equal pylance 14's on twin datasets and the unpruned path's; the DEBUG record
``merge_pruning`` says which path ran (so these tests fail if pruning silently stops)."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lance_ops
from lance_ops.ops import merge_insert as merge_op
from lance_ops.ops.merge_insert import MergePruning
from tests.table.twins import Twins, make_twins

ROWS, PER_FILE = 3000, 500  # six indexed fragments
LOGGER = "lance_ops.ops.merge_insert"


def _table(ids: np.ndarray, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "v": pa.array(rng.random(len(ids))),
            "s": pa.array([f"s{i % 40}" for i in ids]),
        }
    )


def _pruning(caplog: pytest.LogCaptureFixture) -> MergePruning:
    found = [r.merge_pruning for r in caplog.records if hasattr(r, "merge_pruning")]
    assert found, "the merge logged no merge_pruning record"
    caplog.clear()
    return found[-1]  # type: ignore[no-any-return]


def _indexed_twins(lance_module: Any, tmp_path: Path, kind: str, stable: bool, column: str = "id") -> Twins:
    """Six fragments indexed (each system builds its own index), a seventh appended after."""
    twins = make_twins(lance_module, tmp_path, _table(np.arange(ROWS), 1), stable, max_rows_per_file=PER_FILE)
    twins.run(lambda ds, module: ds.create_scalar_index(column, kind))
    twins.run(lambda ds, module: ds.delete("id % 7 = 3"))
    appended = _table(np.arange(ROWS, ROWS + 200), 2)
    twins.run(lambda ds, module: module.write_dataset(appended, ds.uri, mode="append"))
    return twins


Builder = Callable[[Any], Any]
BUILDERS: dict[str, Builder] = {
    "upsert": lambda b: b.when_matched_update_all().when_not_matched_insert_all(),
    "update_if": lambda b: b.when_matched_update_all("source.v > target.v"),
    "delete": lambda b: b.when_matched_delete(),
    "insert": lambda b: b.when_not_matched_insert_all(),
}


def _source() -> pa.Table:
    """Keys in fragments 1 and 4 (a few deleted ones among them), in the appended fragment, and new."""
    ids = np.r_[np.arange(600, 640), np.arange(2100, 2110), np.arange(ROWS + 10, ROWS + 20), [9000, 9001]]
    return _table(ids, 3)


@pytest.mark.parametrize("builder", sorted(BUILDERS))
@pytest.mark.parametrize(
    ("kind", "stable"),
    [("BTREE", False), ("BTREE", True), ("BITMAP", False)],
    ids=["btree", "btree-stable", "bitmap"],
)
def test_index_prunes_and_matches_pylance(
    lance_module: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture, kind: str, stable: bool, builder: str
) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    twins = _indexed_twins(lance_module, tmp_path, kind, stable)
    plain = str(tmp_path / "plain")  # ours again, without the index: the unpruned path
    lance_ops.write_dataset(
        _table(np.arange(ROWS), 1), plain, max_rows_per_file=PER_FILE, enable_stable_row_ids=stable
    )
    lance_ops.dataset(plain).delete("id % 7 = 3")
    lance_ops.write_dataset(_table(np.arange(ROWS, ROWS + 200), 2), plain, mode="append")
    source = _source()

    def merge(ds: Any, module: Any) -> Any:
        return dict(BUILDERS[builder](ds.merge_insert("id")).execute(source))

    caplog.clear()
    theirs, ours = twins.run(merge)
    pruning = _pruning(caplog)
    assert ours == theirs
    twins.assert_same()
    twins.assert_same_transaction()
    assert pruning == MergePruning(fragments=7, fragments_read=3, index="id_idx", fragments_by_index=6)
    unpruned = merge(lance_ops.dataset(plain), lance_ops)
    assert _pruning(caplog).index is None
    assert unpruned == ours
    columns = ["id", "v", "s"]
    assert lance_module.dataset(plain).to_table(columns=columns).sort_by("id") == lance_module.dataset(
        twins.ours
    ).to_table(columns=columns).sort_by("id")


def test_no_pruning_when_deleting_by_source(
    lance_module: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    twins = _indexed_twins(lance_module, tmp_path, "BTREE", False)
    source = _source()

    def merge(ds: Any, module: Any) -> Any:
        builder = (
            ds.merge_insert("id").when_matched_update_all().when_not_matched_by_source_delete("id < 1000")
        )
        return dict(builder.execute(source))

    theirs, ours = twins.run(merge)
    assert ours == theirs
    twins.assert_same()
    assert _pruning(caplog) == MergePruning(fragments=7, fragments_read=7, index=None, fragments_by_index=0)


@pytest.mark.parametrize(("column", "kind"), [("s", "BITMAP"), ("id", "BTREE")])
def test_composite_key_pruned_by_an_index_of_one_key(
    lance_module: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture, column: str, kind: str
) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    twins = _indexed_twins(lance_module, tmp_path, kind, False, column=column)
    source = _table(np.array([5, 6, 1207, 3050, 9000]), 4)  # s5, s6, s7, s10, s0

    def merge(ds: Any, module: Any) -> Any:
        return dict(
            ds.merge_insert(["id", "s"])
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute(source)
        )

    theirs, ours = twins.run(merge)
    assert ours == theirs
    twins.assert_same()
    twins.assert_same_transaction()
    pruning = _pruning(caplog)
    assert pruning.index == f"{column}_idx" and pruning.fragments_by_index == 6
    # s: the five values are in every indexed fragment; id: fragment 0 and the appended one (1207,
    # in fragment 2, is a deleted row the index still lists: the fragment is not read)
    assert pruning.fragments_read == (7 if column == "s" else 2)


def test_deferred_compaction_leaves_the_index_out(
    lance_module: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An index a deferred compaction left behind (its addresses are old) is not used; the merge
    prunes by statistics and agrees with pylance; after optimize_indices the index prunes again."""
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    twins = _indexed_twins(lance_module, tmp_path, "BTREE", False)
    twins.run(
        lambda ds, module: ds.optimize.compact_files(target_rows_per_fragment=1000, defer_index_remap=True)
    )
    source = _source()

    def merge(ds: Any, module: Any) -> Any:
        return dict(
            ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(source)
        )

    theirs, ours = twins.run(merge)
    assert ours == theirs
    twins.assert_same()
    assert _pruning(caplog).index is None
    # ours remaps the index (pylance 14's optimize_indices commits nothing here: versions differ)
    lance_ops.dataset(twins.ours).optimize.optimize_indices()
    again = _table(np.array([10, 11, 2500, 9002]), 5)
    theirs, ours = twins.run(
        lambda ds, module: dict(
            ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(again)
        )
    )
    assert ours == theirs
    assert twins.table(twins.ours).to_pydict() == twins.table(twins.theirs).to_pydict()
    pruning = _pruning(caplog)
    assert pruning.index == "id_idx" and pruning.fragments_read < pruning.fragments


def test_compaction_with_stable_row_ids(
    lance_module: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Stable row ids: a compaction (remapping the index at once, as pylance 14 must with stable
    ids) then a merge through the index; rows and row versions as pylance's."""
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    twins = _indexed_twins(lance_module, tmp_path, "BTREE", True)
    twins.run(lambda ds, module: ds.optimize.compact_files(target_rows_per_fragment=1000))
    source = _source()

    def merge(ds: Any, module: Any) -> Any:
        return dict(
            ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(source)
        )

    theirs, ours = twins.run(merge)
    assert ours == theirs
    twins.assert_same()
    twins.assert_same_transaction()
    # the source's keys are in each of the three compacted fragments: all read, two through the index
    assert _pruning(caplog) == MergePruning(
        fragments=3, fragments_read=3, index="id_idx", fragments_by_index=2
    )


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("merge-index") / "base"
    lance_ops.write_dataset(_table(np.arange(ROWS), 1), str(path), max_rows_per_file=PER_FILE)
    ds = lance_ops.dataset(str(path))
    ds.create_scalar_index("id", "BTREE")
    ds.delete("id % 5 = 1")
    lance_ops.write_dataset(_table(np.arange(ROWS, ROWS + 100), 2), str(path), mode="append")
    return path


_KEYS = st.lists(st.one_of(st.integers(-20, ROWS + 150), st.none()), max_size=60, unique=True)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keys=_KEYS)
def test_property_pruned_equals_unpruned(
    base: Path,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    keys: list[int | None],
) -> None:
    work = tmp_path_factory.mktemp("case")
    pruned, unpruned = str(work / "pruned"), str(work / "unpruned")
    shutil.copytree(base, pruned)
    shutil.copytree(base, unpruned)
    source = pa.table(
        {
            "id": pa.array(keys, pa.int64()),
            "v": pa.array(np.arange(len(keys), dtype=np.float64)),
            "s": pa.array([f"n{i}" for i in range(len(keys))], pa.string()),
        }
    )

    def merge(uri: str) -> dict[str, int]:
        builder = (
            lance_ops.dataset(uri).merge_insert("id").when_matched_update_all().when_not_matched_insert_all()
        )
        return dict(builder.execute(source))

    assert merge_op.index_keys(lance_ops.dataset(pruned)._files, source, ["id"]) is not None
    first = merge(pruned)
    with monkeypatch.context() as patched:
        patched.setattr(merge_op, "index_keys", lambda *args: None)
        second = merge(unpruned)
    assert first == second
    ours, theirs = (
        lance_ops.dataset(u).to_table().sort_by([("id", "ascending"), ("s", "ascending")])
        for u in (pruned, unpruned)
    )
    assert ours == theirs


def test_a_one_fragment_task_prunes_by_statistics(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A distributed merge's task for one fragment does not read the whole index for it."""
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    uri = str(tmp_path / "ds")
    lance_ops.write_dataset(_table(np.arange(ROWS), 1), uri, max_rows_per_file=PER_FILE)
    lance_ops.dataset(uri).create_scalar_index("id", "BTREE")
    files = lance_ops.dataset(uri)._files
    plan = merge_op.MergeInsertPlan(on=("id",), when_matched="update", insert_not_matched=True)
    source = merge_op.read_source(_source(), None, plan, files.schema)
    part = merge_op.merge_fragments(files, plan, source, [1])
    assert part.result["num_updated_rows"] == 40
    assert _pruning(caplog) == MergePruning(fragments=1, fragments_read=1, index=None, fragments_by_index=0)
