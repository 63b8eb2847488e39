"""L18: a scalar index committed without details (pylance's own ``test_commit_index``: an
``Index`` given to ``LanceOperation.CreateIndex`` with no ``index_details``), as pylance 14 reads it.

pylance 14 lists its type as ``"Unknown"`` (so ``test_commit_index``'s equality of the two
``list_indices()`` fails on pylance 14 as on lance_ops) and, when a filter may use it, guesses the
type from the column and the files: LABEL_LIST on a list column, BITMAP when
``bitmap_page_lookup.lance`` exists, INVERTED with ``metadata.lance``, else BTREE. Both libraries
answer filters from such an index with the rows of a full scan.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import lance
import pyarrow as pa
import pytest

import lance_ops
from lance_ops.dataset import Index, LanceOperation

CASES = {
    "BTREE": ("id", "id = 57", "BTree"),
    "BITMAP": ("cat", "cat = 'c3'", "Bitmap"),
    "LABEL_LIST": ("tags", "array_has_any(tags, ['t2'])", "LabelList"),
}


def _table() -> pa.Table:
    ids = list(range(500))
    return pa.table(
        {
            "id": ids,
            "cat": [f"c{i % 7}" for i in ids],
            "tags": pa.array([[f"t{i % 5}", f"t{i % 3}"] for i in ids]),
        }
    )


@pytest.mark.parametrize("kind", list(CASES))
def test_scalar_index_committed_without_details(tmp_path: Path, kind: str) -> None:
    column, predicate, printed = CASES[kind]
    built = lance_ops.write_dataset(_table(), tmp_path / "built")
    built.create_scalar_index(column, kind, name="idx")
    uuid = built.describe_indices()[0].segments[0].uuid
    target = lance_ops.write_dataset(_table(), tmp_path / "target")
    shutil.copytree(tmp_path / "built" / "_indices" / uuid, tmp_path / "target" / "_indices" / uuid)
    field_id = next(f.id for f in target._files.manifest.schema if f.name == column)
    index = Index(
        uuid=uuid,
        name="idx",
        fields=[field_id],
        dataset_version=target.version,
        fragment_ids={f.fragment_id for f in target.get_fragments()},
        index_version=0,
    )
    op = LanceOperation.CreateIndex(new_indices=[index], removed_indices=[])
    lance_ops.LanceDataset.commit(str(tmp_path / "target"), op, read_version=target.version)

    ours, theirs = lance_ops.dataset(str(tmp_path / "target")), lance.dataset(str(tmp_path / "target"))
    assert ours.describe_indices()[0].index_type == theirs.describe_indices()[0].index_type == "Unknown"
    expected = theirs.to_table(filter=predicate, columns=["id"], use_scalar_index=False).sort_by("id")
    assert expected.num_rows > 0
    for ds in (ours, theirs):
        assert f"@idx({printed})" in ds.scanner(filter=predicate).explain_plan()
        assert ds.to_table(filter=predicate, columns=["id"]).sort_by("id").equals(expected)
