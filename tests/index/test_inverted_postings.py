"""The INVERTED posting codec (lance_ops.index.inverted_postings) against pylance 14's bytes.

Every token of indices pylance builds (1, 127, 128, 129 and thousands of documents; repeated
words, empty strings, nulls, long documents, positions) decodes and encodes back to the very
bytes pylance wrote: ``_posting`` (with its block scores), ``_max_score``, ``_length`` and
``_impacts``."""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lance_ops.errors import CorruptFileError, UnsupportedEncodingError
from lance_ops.file import LanceFileReader
from lance_ops.index import inverted_postings as ip

VOCAB = [f"w{i}x" for i in range(300)] + ["the", "and", "Élan", "naïve", "running", "runs"]


def _texts(rows: int, seed: int) -> list[str | None]:
    """Zipf-like words, 0..60 per row; a null and an empty string now and then."""
    rng = np.random.default_rng(seed)
    p = 1 / np.arange(1, len(VOCAB) + 1)
    p /= p.sum()
    texts: list[str | None] = []
    for _ in range(rows):
        r = rng.random()
        texts.append(
            None
            if r < 0.03
            else ""
            if r < 0.06
            else " ".join(rng.choice(VOCAB, int(rng.integers(0, 60)), p=p))
        )
    return texts


def _long_texts(rows: int, seed: int) -> list[str]:
    """Few words, documents of 1 to 2500 tokens: large frequencies and lengths."""
    rng = np.random.default_rng(seed)
    words = ["alpha", "beta", "gamma", "delta", "zeta", "omega"]
    return [
        " ".join(
            rng.choice(words, int(rng.choice([1, 5, 50, 400, 2500])), p=[0.5, 0.2, 0.1, 0.1, 0.05, 0.05])
        )
        for _ in range(rows)
    ]


def _build(path: Path, texts: list[str | None], **params: object) -> Path:
    table = pa.table({"id": np.arange(len(texts)), "txt": pa.array(texts, pa.string())})
    ds = lance.write_dataset(table, path, max_rows_per_file=max(1, len(texts) // 3))
    ds.create_scalar_index("txt", "INVERTED", **params)
    return path


def _read(path: Path) -> pa.Table:
    return LanceFileReader(str(path)).read_all().to_table()


CASES = {
    "one": lambda: ["the quick brown fox jumps over the lazy dog dog dog"],
    "127": lambda: _texts(127, 1),
    "128": lambda: [f"w{i % 3}x common" for i in range(128)],
    "129": lambda: _texts(129, 2),
    "many": lambda: _texts(12_000, 3),
    "long": lambda: _long_texts(700, 4),
}


@pytest.fixture(scope="module")
def indices(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("inverted")
    built = {name: _build(root / name, make()) for name, make in CASES.items()}
    built["positions"] = _build(root / "positions", _long_texts(300, 5), with_position=True)
    return built


@pytest.mark.parametrize("case", [*CASES, "positions"])
def test_every_token_round_trips_to_pylance_bytes(indices: dict[str, Path], case: str) -> None:
    assert lance.dataset(str(indices[case])).stats.index_stats("txt_idx")["index_type"] == "Inverted"
    (directory,) = (indices[case] / "_indices").iterdir()
    inverts = sorted(directory.glob("part_*_invert.lance"))
    assert inverts
    for invert in inverts:
        table = _read(invert)
        docs = _read(invert.with_name(invert.name.replace("invert", "docs")))
        total = int(docs.schema.metadata[b"total_tokens"])
        lengths = np.asarray(docs["_num_tokens"])
        assert table.schema.metadata[b"posting_tail_codec"].decode() == ip.TAIL_VARINT_DELTA
        rows = table.to_pylist()
        assert rows
        for row in rows:
            ids, freqs = ip.decode_posting_list(row["_posting"], row["_length"])
            assert ids.dtype == freqs.dtype == np.uint32
            assert len(ids) == row["_length"] and (freqs > 0).all()
            again = ip.encode_posting_list(ids, freqs, lengths, total)
            assert again.posting == row["_posting"]
            assert again.max_score == np.float32(row["_max_score"])
            assert again.length == row["_length"]
            assert again.impacts == row["_impacts"]


def test_a_token_in_every_document_covers_them_in_order(indices: dict[str, Path]) -> None:
    """The 128-document index: ``common`` is in every document, numbered 0..127 in one block."""
    (directory,) = (indices["128"] / "_indices").iterdir()
    docs = _read(directory / "part_0_docs.lance")
    rows = _read(directory / "part_0_invert.lance").to_pylist()
    full = [r for r in rows if r["_length"] == 128]
    assert len(full) == 1 and len(full[0]["_posting"]) == 1
    ids, freqs = ip.decode_posting_list(full[0]["_posting"], 128)
    assert np.array_equal(ids, np.arange(128)) and (freqs == 1).all()
    assert docs.num_rows == 128


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 5000).flatmap(
        lambda n: st.tuples(
            st.lists(st.integers(1, 3000), min_size=n, max_size=n),
            st.lists(st.integers(1, 2**20), min_size=n, max_size=n),
        )
    ),
    st.integers(0, 2**31 - 1),
)
def test_encode_then_decode(data: tuple[list[int], list[int]], seed: int) -> None:
    gaps, freqs = (np.array(v, np.uint32) for v in data)
    ids = (np.cumsum(gaps, dtype=np.uint64) - gaps[0]).astype(np.uint32)
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 5000, int(ids[-1]) + 1).astype(np.uint32)
    lengths[ids] = np.maximum(lengths[ids], freqs.astype(np.uint32) % 4096 + 1)
    row = ip.encode_posting_list(ids, freqs, lengths)
    assert row.length == len(ids) and len(row.posting) == -(-len(ids) // 128)
    blocks = len(row.posting)
    assert len(row.impacts) == blocks + -(-blocks // 32)
    got_ids, got_freqs = ip.decode_posting_list(row.posting, len(ids))
    assert np.array_equal(got_ids, ids) and np.array_equal(got_freqs, freqs)
    scores = ip.block_max_scores(row.posting)
    assert row.max_score == scores.max() and (scores > 0).all()


@pytest.mark.parametrize("width", [0, 1, 7, 8, 31, 32])
def test_bit_packing_widths(width: int) -> None:
    rng = np.random.default_rng(width)
    values = (
        rng.integers(0, 2**width, 128, dtype=np.uint64).astype(np.uint32)
        if width
        else np.zeros(128, np.uint32)
    )
    if width:
        values[5] = 2**width - 1
    packed = ip._pack(values)
    assert packed[0] == width and len(packed) == 1 + 16 * width
    got, end = ip._unpack(packed, 1, width)
    assert end == len(packed) and np.array_equal(got, values)


def test_quantized_lengths() -> None:
    values = np.array([0, 1, 7, 8, 15, 16, 17, 24, 100, 2**31], np.uint32)
    codes = ip.quantize_doc_length(values)
    assert codes[:4].tolist() == [0, 1, 7, 8]
    assert codes[5] == codes[6]  # 16 and 17 share a bucket
    assert (np.diff(codes.astype(int)) >= 0).all()


def test_bad_bytes_raise_typed_errors() -> None:
    row = ip.encode_posting_list(np.arange(200, dtype=np.uint32), np.ones(200, np.uint32), np.full(200, 3))
    with pytest.raises(CorruptFileError, match="posting blocks for"):
        ip.decode_posting_list(row.posting, 300)
    with pytest.raises(CorruptFileError):
        ip.decode_posting_list([row.posting[0][:-3], row.posting[1]], 200)
    with pytest.raises(CorruptFileError, match="varints"):
        ip.decode_posting_list([row.posting[0], row.posting[1][:10]], 200)
    with pytest.raises(CorruptFileError, match="null"):
        ip.decode_posting_list(None, 0)
    with pytest.raises(UnsupportedEncodingError, match="zigzag"):
        ip.decode_posting_list(row.posting, 200, tail_codec="zigzag")
    with pytest.raises(ValueError, match="ascending"):
        ip.encode_posting_list(np.array([3, 3], np.uint32), np.ones(2, np.uint32), np.ones(4))
    with pytest.raises(ValueError, match="beyond"):
        ip.encode_posting_list(np.array([9], np.uint32), np.ones(1, np.uint32), np.ones(4))
