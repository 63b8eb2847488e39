"""L18: the INVERTED tokenizer and the token FST against pylance 14's own index.

pylance indexes a corpus; its FST is read by :class:`FstReader` and must hold exactly the terms
our tokenizer gives for the same texts (with the per-document term counts of its docs file); our
FST writer, fed pylance's (term, id) pairs, writes pylance's bytes.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lance_ops.errors import CorruptFileError, InvalidArgumentError, UnsupportedFeatureError
from lance_ops.file import LanceFileReader
from lance_ops.index.build_inverted import corpus_of
from lance_ops.index.fst import FstReader, build_fst, crc32c_masked
from lance_ops.index.tokenizer import tokenizer_params

pytestmark = pytest.mark.interop

CORPUS = [
    "The quick brown fox jumps over the lazy dog",
    "Running runners ran quickly; generously organizational universities",
    None,
    "",
    "a an the of and not no nor",
    "Crème brûlée naïve café Ærøskøbing Łukasz straße ﬁne ÉCOLE élève",
    "snake_case foo-bar 3.14 ½ ² x2y",
    "I'm sure you'll see they've done it, isn't it? should've that'll",
    "A" * 39 + " " + "b" * 40 + " " + "é" * 20 + " " + "é" * 19 + "e",
    "dying lying skies news atlas cosmos inning outing canning herring proceed exceed succeed",
    "generate generates generated generic communism arsenal fluently ugly early only singly cried",
    "Ελληνικά Русский текст 日本語のテキスト abc",
    "HELLO hello Hello hElLo",
    "caresses ponies ties caress cats feed agreed disabled matting mating meeting milling",
    "relational conditional rational valenci hesitanci digitizer conformabli radicalli",
    "triplicate formative formalize electriciti electrical hopeful goodness revival allowance",
]


def _pylance_terms(
    tmp_path: Path, texts: list[str | None], **params: object
) -> tuple[set[str], dict[int, int], bytes]:
    path = tmp_path / f"ds-{uuid.uuid4().hex[:8]}"
    ds = lance.write_dataset(pa.table({"text": pa.array(texts, pa.string())}), path)
    ds.create_scalar_index("text", "INVERTED", **params)
    directory = next((path / "_indices").iterdir())
    fst_bytes = (
        LanceFileReader(str(directory / "part_0_tokens.lance")).read_all().to_table().column(0)[0].as_py()
    )
    docs = LanceFileReader(str(directory / "part_0_docs.lance")).read_all().to_table()
    counts = dict(zip(docs.column("_rowid").to_pylist(), docs.column("_num_tokens").to_pylist(), strict=True))
    return {k.decode() for k, _ in FstReader(fst_bytes).items()}, counts, fst_bytes


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"stem": False, "lower_case": False},
        {"ascii_folding": False, "remove_stop_words": False},
        {"base_tokenizer": "whitespace", "max_token_length": 10},
        {"base_tokenizer": "raw"},
        {"custom_stop_words": ["quick", "brown"], "max_token_length": None},
    ],
)
def test_terms_match_pylance(tmp_path: Path, params: dict) -> None:
    terms, counts, _ = _pylance_terms(tmp_path, CORPUS, **params)
    tokenizer = tokenizer_params(params)
    ours = [tokenizer.tokenize(t) if t is not None else [] for t in CORPUS]
    assert {t for ts in ours for t in ts} == terms
    # documents without a term are not in pylance's docs file
    assert {i: len(ts) for i, ts in enumerate(ours) if ts} == counts


def test_stop_words_follow_stemming() -> None:
    tokenizer = tokenizer_params({})
    assert tokenizer.tokenize("Being brûlée brulee No") == ["brulee", "brule", "no"]
    assert tokenizer.tokenize("") == []


@pytest.mark.parametrize(
    ("params", "error", "named"),
    [
        ({"flavour": "x"}, InvalidArgumentError, "flavour"),
        ({"base_tokenizer": "ngram", "min_ngram_length": 0}, InvalidArgumentError, "min_ngram_length"),
        ({"language": "French"}, UnsupportedFeatureError, "French"),
        ({"language": "english"}, InvalidArgumentError, "english"),
        ({"with_position": 1}, InvalidArgumentError, "with_position"),
        ({"stem": "yes"}, InvalidArgumentError, "stem"),
        ({"max_token_length": 0}, InvalidArgumentError, "max_token_length"),
        ({"custom_stop_words": "the"}, InvalidArgumentError, "custom_stop_words"),
    ],
)
def test_bad_tokenizer_params(params: dict, error: type[Exception], named: str) -> None:
    with pytest.raises(error, match=named):
        tokenizer_params(params)


def test_fst_reads_and_rewrites_pylance_bytes(tmp_path: Path) -> None:
    words = [f"w{i:05d}x" for i in range(0, 3000, 7)] + ["alpha", "alphabet", "alpine", "zeta"]
    _, _, fst_bytes = _pylance_terms(tmp_path, [" ".join(words)], stem=False)
    reader = FstReader(fst_bytes)
    items = list(reader.items())
    assert [k for k, _ in items] == sorted(w.encode() for w in words)
    assert sorted(v for _, v in items) == list(range(len(words)))
    assert len(reader) == len(words)
    assert reader.get("alphabet") == dict(items)[b"alphabet"]
    assert reader.get("alph") is None and reader.get("alphabets") is None and reader.get("") is None
    assert build_fst(items) == fst_bytes


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.binary(max_size=12), st.integers(0, 2**40), max_size=300))
def test_fst_round_trip(mapping: dict[bytes, int]) -> None:
    items = sorted(mapping.items())
    data = build_fst(items)
    reader = FstReader(data)
    assert list(reader.items()) == items
    assert len(reader) == len(items)
    for key, value in items[:20]:
        assert reader.get(key) == value
    assert crc32c_masked(data[:-4]).to_bytes(4, "little") == data[-4:]


def test_fst_wide_node_and_bad_bytes() -> None:
    # more than 32 transitions out of one node: the 256-byte index is written and read
    items = [(bytes([b]), b) for b in range(256)] + [(bytes([255, 1]), 7)]
    assert list(FstReader(build_fst(items)).items()) == items
    with pytest.raises(ValueError, match="increasing"):
        build_fst([(b"b", 1), (b"a", 2)])
    with pytest.raises(CorruptFileError):
        FstReader(b"\x03" + b"\0" * 10)
    with pytest.raises(CorruptFileError):
        FstReader(build_fst(items)[:-1])


_KNOWN = st.characters(categories=["L", "M", "N", "P", "S", "Z", "Cc"])


@pytest.mark.parametrize("base", ["simple", "whitespace", "raw"])
@settings(max_examples=80, deadline=None)
@given(texts=st.lists(st.one_of(st.none(), st.text(_KNOWN, max_size=40)), max_size=8))
def test_arrow_split_equals_python_split(base: str, texts: list[str | None]) -> None:
    """Arrow's split (builds and queries) equals Python's regular expressions' on characters of
    the Unicode version Python knows: letters and digits, or not white space, make tokens."""
    tokenizer = tokenizer_params({"base_tokenizer": base})
    tokens, parents = tokenizer.split_array(pa.array(texts, pa.string()))
    got: list[list[str]] = [[] for _ in texts]
    for token, parent in zip(tokens.to_pylist(), parents.tolist(), strict=True):
        got[parent].append(token)
    split = {"simple": re.compile(r"[^\W_]+").findall, "whitespace": re.compile(r"\S+").findall}.get(
        base, lambda t: [t]
    )
    want = [split(t) if t is not None else [] for t in texts]
    assert got == want


@pytest.mark.parametrize("params", [{}, {"base_tokenizer": "whitespace", "stem": False}])
def test_corpus_counts(params: dict) -> None:
    tokenizer = tokenizer_params(params)
    texts = list(CORPUS)
    corpus = corpus_of(pa.array(texts, pa.string()), np.arange(len(texts), dtype=np.uint64) * 10, tokenizer)
    expected = {
        i * 10: tokenizer.tokenize(t) for i, t in enumerate(texts) if t is not None and tokenizer.tokenize(t)
    }
    assert corpus.row_ids.tolist() == list(expected)
    assert corpus.lengths.tolist() == [len(v) for v in expected.values()]
    for term, doc, freq in zip(corpus.term, corpus.doc, corpus.freq, strict=True):
        assert expected[int(corpus.row_ids[doc])].count(corpus.terms[term]) == freq
