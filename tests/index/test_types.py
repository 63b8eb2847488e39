"""index_type_of names every index pylance 14 builds as pylance does."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import lance
import pytest

import lance_ops
from lance_ops.errors import IndexCorruptError, UnsupportedIndexTypeError
from lance_ops.index.types import index_type_of, pylance_type_name


def test_every_pylance_index_type(indexed: Path) -> None:
    ours = lance_ops.dataset(str(indexed))
    theirs = {d.name: d.index_type for d in lance.dataset(str(indexed)).describe_indices()}
    got = {ix.name: pylance_type_name(index_type_of(ix)) for ix in ours.manifest.indices}
    assert got == theirs
    assert index_type_of(next(ix for ix in ours.manifest.indices if ix.name == "id_idx")) == "BTREE"


def test_empty_vector_details_read_from_index_file(indexed: Path) -> None:
    ours = lance_ops.dataset(str(indexed))
    for ix in ours.manifest.indices:
        if ix.details and ix.details[0].endswith("VectorIndexDetails"):
            bare = dataclasses.replace(ix, details=(ix.details[0], b""))
            assert index_type_of(bare, ours.storage) == index_type_of(ix)
            with pytest.raises(UnsupportedIndexTypeError, match=ix.name):
                index_type_of(bare)


def test_unknown_and_corrupt(indexed: Path) -> None:
    ix = lance_ops.dataset(str(indexed)).manifest.indices[0]
    with pytest.raises(UnsupportedIndexTypeError, match=ix.name) as info:
        index_type_of(dataclasses.replace(ix, details=("/lance.table.FancyIndexDetails", b"")))
    assert info.value.index == ix.name
    with pytest.raises(UnsupportedIndexTypeError, match=ix.name):
        index_type_of(dataclasses.replace(ix, details=None))
    with pytest.raises(IndexCorruptError, match=ix.name):
        index_type_of(dataclasses.replace(ix, details=("/lance.index.pb.VectorIndexDetails", b"\x22\x7f")))
