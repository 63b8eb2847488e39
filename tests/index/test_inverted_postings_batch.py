"""L18: :func:`lance_ops.index.inverted_postings.encode_postings` — every token of a partition
encoded at once (numpy over all postings) — gives pylance 14's ``_posting`` / ``_max_score`` /
``_length`` / ``_impacts`` bytes, and those of :func:`encode_posting_list` token by token, for
block-boundary shapes (1, 127/128/129, 4095/4096/4097 documents), large frequencies and lengths
(the packed sort key's lexsort fallback) and no token at all.
"""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lance_ops.index import inverted_postings as ip
from tests.index.test_inverted_postings import CASES, _build, _read

pytestmark = pytest.mark.interop


def _postings(table: pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    terms, docs, freqs = [], [], []
    for number, row in enumerate(table.to_pylist()):
        ids, f = ip.decode_posting_list(row["_posting"], row["_length"])
        terms.append(np.full(len(ids), number, np.int64))
        docs.append(ids)
        freqs.append(f)
    return np.concatenate(terms), np.concatenate(docs), np.concatenate(freqs)


@pytest.mark.parametrize("case", ["one", "127", "128", "129", "long"])
def test_all_tokens_at_once_give_pylance_bytes(tmp_path: Path, case: str) -> None:
    _build(tmp_path / case, CASES[case]())
    assert lance.dataset(str(tmp_path / case)).stats.index_stats("txt_idx")["index_type"] == "Inverted"
    (directory,) = (tmp_path / case / "_indices").iterdir()
    for invert in sorted(directory.glob("part_*_invert.lance")):
        table = _read(invert)
        docs = _read(invert.with_name(invert.name.replace("invert", "docs")))
        total = int(docs.schema.metadata[b"total_tokens"])
        term, doc, freq = _postings(table)
        columns = ip.encode_postings(term, doc, freq, np.asarray(docs["_num_tokens"]), total, table.num_rows)
        for name, column in zip(("_posting", "_max_score", "_length", "_impacts"), columns, strict=True):
            assert column.equals(table.column(name).combine_chunks()), name


def _random_partition(
    rng: np.random.Generator, counts: list[int], num_docs: int, max_freq: int, max_length: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    lengths = rng.integers(1, max_length, num_docs, endpoint=True).astype(np.uint32)
    docs = [np.sort(rng.choice(num_docs, size=c, replace=False)) for c in counts]
    term = np.repeat(np.arange(len(counts)), counts)
    freq = rng.integers(1, max_freq, len(term), endpoint=True)
    return term, np.concatenate(docs), freq, lengths


def _assert_as_token_by_token(
    term: np.ndarray, doc: np.ndarray, freq: np.ndarray, lengths: np.ndarray
) -> None:
    counts = np.bincount(term)
    total = int(lengths.sum())
    posting, max_score, length, impacts = ip.encode_postings(term, doc, freq, lengths, total, len(counts))
    bounds = np.concatenate(([0], np.cumsum(counts)))
    for t in range(len(counts)):
        a, b = bounds[t], bounds[t + 1]
        row = ip.encode_posting_list(doc[a:b], freq[a:b], lengths, total)
        assert posting[t].as_py() == row.posting
        assert np.float32(max_score[t].as_py()) == row.max_score
        assert length[t].as_py() == row.length
        assert impacts[t].as_py() == row.impacts


@settings(max_examples=40, deadline=None)
@given(
    counts=st.lists(
        st.one_of(st.sampled_from([1, 2, 127, 128, 129, 255, 256, 257]), st.integers(1, 400)),
        min_size=1,
        max_size=12,
    ),
    max_freq=st.sampled_from([1, 3, 200, 70_000]),
    max_length=st.sampled_from([1, 7, 300, 100_000]),
    seed=st.integers(0, 2**16),
)
def test_matches_token_by_token(counts: list[int], max_freq: int, max_length: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    _assert_as_token_by_token(*_random_partition(rng, counts, max(counts) + 50, max_freq, max_length))


def test_group_boundaries_and_wide_keys() -> None:
    rng = np.random.default_rng(7)
    # 4095 / 4096 / 4097 / 33 blocks: impact group entries; frequencies and lengths near 2**31
    # make the (segment, frequency, length) key wider than 63 bits (the lexsort path)
    counts = [4095, 4096, 4097, 128 * 33, 1]
    term, doc, freq, lengths = _random_partition(rng, counts, 9000, 300, 5000)
    _assert_as_token_by_token(term, doc, freq, lengths)
    wide_freq = rng.integers(1, 2**31, len(term))
    wide_lengths = rng.integers(1, 2**31, 9000).astype(np.uint32)
    assert int(wide_freq.max()).bit_length() + int(wide_lengths.max()).bit_length() > 58
    _assert_as_token_by_token(term, doc, wide_freq, wide_lengths)


def test_no_tokens() -> None:
    empty = np.zeros(0, np.int64)
    posting, max_score, length, impacts = ip.encode_postings(empty, empty, empty, np.ones(3, np.uint32), 3, 0)
    assert len(posting) == len(max_score) == len(length) == len(impacts) == 0
    assert posting.type == impacts.type == pa.list_(pa.large_binary())


def test_a_token_without_documents_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one document"):
        ip.encode_postings(np.array([1]), np.array([0]), np.array([1]), np.ones(2, np.uint32), 2, 2)


def _assert_positions_as_token_by_token(counts: list[int], freq: np.ndarray, positions: np.ndarray) -> None:
    term = np.repeat(np.arange(len(counts)), counts)
    streams, offsets = ip.encode_position_streams(term, freq, positions, len(counts))
    by_term = np.concatenate(([0], np.cumsum(counts)))
    by_doc = np.concatenate(([0], np.cumsum(freq)))
    for t in range(len(counts)):
        a, b = by_term[t], by_term[t + 1]
        stream, starts = ip.encode_positions(positions[by_doc[a] : by_doc[b]], freq[a:b])
        assert streams[t].as_py() == stream
        assert offsets[t].as_py() == starts


@settings(max_examples=40, deadline=None)
@given(
    counts=st.lists(
        st.one_of(st.sampled_from([1, 127, 128, 129]), st.integers(1, 300)), min_size=1, max_size=8
    ),
    max_freq=st.sampled_from([1, 2, 130, 400]),
    max_gap=st.sampled_from([1, 3, 70_000]),
    seed=st.integers(0, 2**16),
)
def test_positions_match_token_by_token(counts: list[int], max_freq: int, max_gap: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    freq = rng.integers(1, max_freq, sum(counts), endpoint=True)
    gaps = rng.integers(1, max_gap, int(freq.sum()), endpoint=True)
    starts = np.concatenate(([0], np.cumsum(freq)))[:-1]
    gaps[starts] = rng.integers(0, max_gap, len(starts), endpoint=True)  # a document's first: as is
    positions = np.cumsum(gaps) - np.repeat(np.cumsum(gaps)[starts] - gaps[starts], freq)
    _assert_positions_as_token_by_token(counts, freq, positions)


def test_positions_of_zero_width_groups_and_no_tokens() -> None:
    # 128 documents holding the token once, at position 0: a packed group of width 0
    _assert_positions_as_token_by_token([128, 129], np.ones(257, np.int64), np.zeros(257, np.int64))
    empty = np.zeros(0, np.int64)
    streams, offsets = ip.encode_position_streams(empty, empty, empty, 0)
    assert len(streams) == len(offsets) == 0
