"""L18: INVERTED indices with positions (``with_position=True``) built by lance_ops hold the files
pylance 14 writes for the same data (positions compared as decoded tables), pylance phrase-searches
them as its own, and ``optimize_indices`` after an append keeps the positions (both builders)."""

from __future__ import annotations

from pathlib import Path

import lance
import lance.query
import numpy as np
import pyarrow as pa
import pytest

import lance_ops
from lance_ops.file import LanceFileReader
from tests.index.test_fts_build import corpus

pytestmark = pytest.mark.interop

FILES = ("metadata.lance", "part_0_invert.lance", "part_0_docs.lance", "part_0_tokens.lance")
TEXTS: list[str | None] = [
    "the quick brown " + "x" * 45 + " fox",  # an over-long token still takes a position
    "quick brown",
    "brown quick",
    None,
    "",
    "the the fox fox brown brown",
    "quick " * 300,  # a full packed group of positions
    "Brown FOX jumps quick",
]
LISTS: list[list[str | None] | None] = [
    ["quick", "brown fox"],  # positions run on from one string to the next
    ["fox"],
    ["brown", "quick the fox"],
    None,
    [],
    ["a"],
    ["quick", None, "brown"],
    ["fox"],
]
PHRASES = ["quick brown", "brown fox", "quick the brown", "fox brown", "brown brown", "quick", "the quick"]


def write(path: Path, texts: list, text_type: pa.DataType | None = None, **kwargs: object) -> None:
    table = pa.table(
        {"id": pa.array(range(len(texts)), pa.int64()), "text": pa.array(texts, text_type or pa.string())}
    )
    lance.write_dataset(table, path, **kwargs)


def index_files(uri: Path | str, name: str = "text_idx") -> dict[str, pa.Table]:
    index = next(i for i in lance_ops.dataset(str(uri)).list_indices() if i["name"] == name)
    directory = Path(uri) / "_indices" / index["uuid"]
    return {f: LanceFileReader(str(directory / f)).read_all().to_table() for f in FILES}


def phrase_search(uri: Path | str, text: str, slop: int = 0) -> tuple[list[int], np.ndarray]:
    query = lance.query.PhraseQuery(text, "text", slop=slop)
    table = lance.dataset(str(uri)).to_table(full_text_query=query, columns=["id", "_score"])
    table = table.sort_by([("_score", "descending"), ("id", "ascending")])
    return table.column("id").to_pylist(), np.asarray(table.column("_score"), np.float32)


def assert_same_phrases(ours: Path, theirs: Path, phrases: list[str] = PHRASES) -> int:
    found = 0
    for text in phrases:
        for slop in (0, 1, 3):
            ids, scores = phrase_search(ours, text, slop)
            want_ids, want_scores = phrase_search(theirs, text, slop)
            assert sorted(ids) == sorted(want_ids), (text, slop)
            np.testing.assert_allclose(scores, want_scores, rtol=1e-6, err_msg=text)
            found += len(ids)
    return found


@pytest.mark.parametrize(
    ("texts", "text_type"),
    [(TEXTS, pa.string()), (TEXTS, pa.large_string()), (LISTS, pa.list_(pa.string()))],
)
def test_same_files_as_pylance(tmp_path: Path, texts: list, text_type: pa.DataType) -> None:
    for name in ("ours", "theirs"):
        write(tmp_path / name, texts, text_type)
    lance_ops.dataset(str(tmp_path / "ours")).create_scalar_index("text", "INVERTED", with_position=True)
    lance.dataset(str(tmp_path / "theirs")).create_scalar_index("text", "INVERTED", with_position=True)
    ours, theirs = index_files(tmp_path / "ours"), index_files(tmp_path / "theirs")
    for name in FILES:
        assert ours[name].equals(theirs[name]), name
        assert ours[name].schema.metadata == theirs[name].schema.metadata, name
    assert "_compressed_position" in ours["part_0_invert.lance"].column_names
    details = [lance_ops.dataset(str(tmp_path / n)).manifest.indices[0].details for n in ("ours", "theirs")]
    assert details[0] == details[1]
    assert assert_same_phrases(tmp_path / "ours", tmp_path / "theirs") > 5


@pytest.mark.parametrize("merge", [0, 1])
@pytest.mark.parametrize("builder", ["pylance", "lance_ops"])
def test_optimize_keeps_positions(tmp_path: Path, merge: int, builder: str) -> None:
    """Yesterday's positional index, today's append: lance_ops' optimize_indices gives the phrase
    search pylance's own optimize gives; run again, nothing changes."""
    texts, more = corpus(300), corpus(200, seed=5)
    phrases = ["quick brown", "alpha beta", "w1 w2", "gamma the delta", "w3 w3"]
    for name in ("ours", "theirs"):
        write(tmp_path / name, texts, max_rows_per_file=120)
        module = lance if builder == "pylance" or name == "theirs" else lance_ops
        module.dataset(str(tmp_path / name)).create_scalar_index("text", "INVERTED", with_position=True)
        extra = pa.table({"id": pa.array(range(300, 500), pa.int64()), "text": pa.array(more, pa.string())})
        lance.write_dataset(extra, tmp_path / name, mode="append")
    lance_ops.dataset(str(tmp_path / "ours")).optimize.optimize_indices(num_indices_to_merge=merge)
    lance.dataset(str(tmp_path / "theirs")).optimize.optimize_indices(num_indices_to_merge=merge)
    segments = lambda name: sorted(  # noqa: E731
        sorted(i["fragment_ids"]) for i in lance_ops.dataset(str(tmp_path / name)).list_indices()
    )
    assert segments("ours") == segments("theirs") and len(segments("ours")) == (2 if merge == 0 else 1)
    assert "_compressed_position" in index_files(tmp_path / "ours")["part_0_invert.lance"].column_names
    assert assert_same_phrases(tmp_path / "ours", tmp_path / "theirs", phrases) > 20
    uuids = lambda: sorted(i["uuid"] for i in lance_ops.dataset(str(tmp_path / "ours")).list_indices())  # noqa: E731
    before = uuids()
    lance_ops.dataset(str(tmp_path / "ours")).optimize.optimize_indices(num_indices_to_merge=merge)
    assert uuids() == before
