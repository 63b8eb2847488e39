"""The pylance-shaped objects of row-level mutations and change feeds: ``MergeInsertBuilder``
(``ds.merge_insert(on)``) and ``DatasetDelta`` (``ds.delta(...)``), thin over
:mod:`lance_ops.ops.merge_insert` and :mod:`lance_ops.ops.changes`."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lance_ops.errors import InvalidArgumentError
from lance_ops.ops import changes as changes_op
from lance_ops.ops import merge_insert as merge_op
from lance_ops.ops.commit import CommitOptions
from lance_ops.table.transaction import Transaction

if TYPE_CHECKING:
    from lance_ops.dataset import LanceDataset


class MergeInsertBuilder:
    """pylance's ``MergeInsertBuilder``: configure with the ``when_*`` methods, then ``execute``."""

    def __init__(self, dataset: LanceDataset, on: str | Iterable[str]) -> None:
        keys = (on,) if isinstance(on, str) else tuple(on)
        self._dataset = dataset
        self._plan = merge_op.MergeInsertPlan(on=keys)
        self._plan.check_keys(dataset.schema)

    def _with(self, **changes: Any) -> MergeInsertBuilder:
        self._plan = replace(self._plan, **changes)
        return self

    def when_matched_update_all(self, condition: str | None = None) -> MergeInsertBuilder:
        """Replace matched target rows by their source rows (only where ``condition`` holds; it
        names columns as ``target.x`` / ``source.x``)."""
        return self._with(when_matched="update", matched_condition=condition)

    def when_matched_delete(self) -> MergeInsertBuilder:
        """Delete the target rows a source row matches."""
        return self._with(when_matched="delete", matched_condition=None)

    def when_matched_fail(self) -> MergeInsertBuilder:
        """Fail (commit nothing) when any source row matches a target row."""
        return self._with(when_matched="fail", matched_condition=None)

    def when_not_matched_insert_all(self) -> MergeInsertBuilder:
        """Insert the source rows no target row matches."""
        return self._with(insert_not_matched=True)

    def when_not_matched_by_source_delete(self, expr: str | None = None) -> MergeInsertBuilder:
        """Delete the target rows no source row matches (only those ``expr`` selects, if given)."""
        return self._with(delete_not_matched_by_source=True, by_source_condition=expr)

    def conflict_retries(self, max_retries: int) -> MergeInsertBuilder:
        if max_retries < 0:
            raise InvalidArgumentError(f"conflict_retries must be >= 0, not {max_retries}")
        return self._with(conflict_retries=max_retries)

    def retry_timeout(self, timeout: dt.timedelta) -> MergeInsertBuilder:
        return self._with(retry_timeout=timeout.total_seconds())

    def use_index(self, use_index: bool) -> MergeInsertBuilder:
        """Whether a scalar index of a key column may select the target rows read (default True;
        False: the target is pruned by page statistics only, and the plan can be reported)."""
        return self._with(use_index=bool(use_index))

    def explain_plan(self, schema: pa.Schema | None = None, verbose: bool = False) -> str:
        """How the merge would run for a source of ``schema`` (default: the dataset's)."""
        files = self._dataset.handle.files
        self._plan.check(files.schema)
        return merge_op.explain(files, self._plan, schema or files.schema, verbose)

    def analyze_plan(self, data_obj: Any, *, schema: pa.Schema | None = None) -> str:
        """Run the merge with ``data_obj`` without committing it (its files are removed again) and
        describe it with its metrics (rows inserted / updated / deleted, files and bytes written)."""
        return merge_op.analyze(self._dataset.handle.files, self._plan, data_obj, schema)

    def execute(
        self,
        data_obj: Any,
        *,
        schema: pa.Schema | None = None,
        transaction_properties: Mapping[str, str] | None = None,
        commit: CommitOptions | None = None,
    ) -> dict[str, int]:
        """Run the merge on this version of the dataset with ``data_obj`` (anything
        ``write_dataset`` takes) as the source; commits one ``Update`` and makes the dataset that
        version. Returns ``{"num_inserted_rows", "num_updated_rows", "num_deleted_rows"}``.
        ``transaction_properties`` (an extension over pylance) are recorded in the transaction;
        ``commit`` (:class:`~lance_ops.CommitOptions`) says how to commit, as the keyword does."""
        ds = self._dataset
        committed = merge_op.merge_insert(
            ds.handle.files,
            self._plan,
            data_obj,
            schema,
            ds.handle.commit_options(transaction_properties, commit),
        )
        ds.handle.adopt(committed.manifest, committed.transaction)
        return committed.result

    def execute_uncommitted(
        self, data_obj: Any, *, schema: pa.Schema | None = None
    ) -> tuple[Transaction, dict[str, int]]:
        """Write the merge's files and return the transaction (for ``LanceDataset.commit``) and result."""
        files = self._dataset.handle.files
        prepared = merge_op.prepare(files, self._plan, data_obj, schema)
        return Transaction(read_version=files.manifest.version, operation=prepared.operation), prepared.result


class DatasetDelta:
    """pylance's ``DatasetDelta``: what changed between two versions."""

    def __init__(self, delta: changes_op.Delta) -> None:
        self._delta = delta

    def list_transactions(self) -> list[Transaction]:
        return self._delta.list_transactions()

    def get_inserted_rows(self) -> pa.RecordBatchReader:
        return self._delta.rows(inserted=True)

    def get_updated_rows(self) -> pa.RecordBatchReader:
        return self._delta.rows(inserted=False)

    def get_deleted_row_ids(self) -> pa.RecordBatchReader:
        return self._delta.deleted_row_ids()
