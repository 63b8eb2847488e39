"""index_type_of names every index pylance 14 builds as pylance does."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import lance
import pytest

import lance_ops
from lance_ops.errors import IndexCorruptError, UnsupportedIndexTypeError
from lance_ops.index.types import index_type_of, pylance_type_name
from tests.index.conftest import build_all


@pytest.fixture(scope="module")
def every_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("types") / "ds"
    build_all(path)
    return path


def test_every_pylance_index_type(every_index: Path) -> None:
    ours = lance_ops.dataset(str(every_index))
    theirs = {d.name: d.index_type for d in lance.dataset(str(every_index)).describe_indices()}
    got = {ix.name: pylance_type_name(index_type_of(ix)) for ix in ours.manifest.indices}
    assert got == theirs
    assert len(got) == 12
    assert index_type_of(next(ix for ix in ours.manifest.indices if ix.name == "id_idx")) == "BTREE"


def test_empty_vector_details_read_from_index_file(every_index: Path) -> None:
    ours = lance_ops.dataset(str(every_index))
    vectors = [
        ix for ix in ours.manifest.indices if ix.details and ix.details[0].endswith("VectorIndexDetails")
    ]
    assert len(vectors) == 6
    for ix in vectors:
        bare = dataclasses.replace(ix, details=(ix.details[0], b""))
        assert index_type_of(bare, ours.storage) == index_type_of(ix)
        with pytest.raises(UnsupportedIndexTypeError, match=ix.name):
            index_type_of(bare)


def test_unknown_and_corrupt(every_index: Path) -> None:
    ix = lance_ops.dataset(str(every_index)).manifest.indices[0]
    with pytest.raises(UnsupportedIndexTypeError, match=ix.name) as info:
        index_type_of(dataclasses.replace(ix, details=("/lance.table.FancyIndexDetails", b"")))
    assert info.value.index == ix.name
    with pytest.raises(UnsupportedIndexTypeError, match=ix.name):
        index_type_of(dataclasses.replace(ix, details=None))
    with pytest.raises(IndexCorruptError, match=ix.name):
        index_type_of(dataclasses.replace(ix, details=("/lance.index.pb.VectorIndexDetails", b"\x22\x7f")))
