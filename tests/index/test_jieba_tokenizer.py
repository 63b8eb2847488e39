"""L18: INVERTED indices with ``base_tokenizer="jieba/<model>"``: lance_ops writes the files
pylance 14 writes for the same model and data, each library answers full-text queries on the
other's index as on its own, and a bad model directory is an ``OSError`` with nothing committed.

The models live under ``$LANCE_LANGUAGE_MODEL_HOME/jieba/<model>/``: a small dictionary generated
here (so the HMM cuts the many unknown characters), the same with a user dictionary (through
``config.json``), and the full dictionary of the PyPI ``jieba`` package.

Not compared: phrases whose query tokens overlap (search mode adds a long word's dictionary
pieces at the word's own positions, "光明的前途" -> 光明@0, 前途@3, 光明的前途@0); pylance 14
matches such phrases in indexed rows that lack some of the tokens and misses them in unindexed
rows, and lance_ops does not copy that."""

from __future__ import annotations

import functools
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import jieba
import lance
import lance.query
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lance_ops
import lance_ops.query
from lance_ops.errors import LanguageModelError
from lance_ops.index.jieba_tokenizer import JiebaTokenizer, language_model_home, load_jieba
from tests.index.fts_helpers import assert_same_files, indexed_then_appended
from tests.index.test_fts_positions import (
    FILES,
    assert_same,
    assert_same_phrases,
    index_files,
    pylance_search,
    write,
)

pytestmark = pytest.mark.interop

DICTIONARY = """我们 98740 r
都 202780 d
有 423765 v
光明 1219 n
的 318825 uj
前途 1263 n
前 62779 f
途 857 n
北京 34488 ns
大学 20025 n
清华大学 2053 nt
中华 16086 nz
人民 53221 n
共和国 2386 n
中华人民共和国 2425 ns
长江 2546 ns
长江大桥 3 ns
大桥 413 n
"""
USER = "光明的前途 318825 n\n南京市 10000\n\n"
TEXTS = [
    "我们都有光明的前途",
    "光明的前途",
    "Hello, World! 我们 running 3.14 100% a+b  tab\there",
    "前途光明我们都有",
    None,
    "",
    "光明的前途，我们。ab12cd",
    "我来到北京清华大学",
    "中华人民共和国成立了",
    "南京市长江大桥",
    "㐀㐁中文字符 r\r\n\n x 丽",
]
WORDS = ["我们", "光明的前途", "北京清华大学", "长江大桥", "中华人民共和国", "running", "都有", "前途光明"]
QUERIES = [
    "我们",
    "光明",
    "前途",
    "的前",
    "光明的前途",
    "清华",
    "大学",
    "中华人民共和国",
    "大桥",
    "running",
    "xyz",
]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """``LANCE_LANGUAGE_MODEL_HOME`` with ``jieba/default`` (small dictionary), ``jieba/user``
    (it plus a user dictionary) and ``jieba/full`` (the jieba package's dictionary)."""
    home = tmp_path_factory.mktemp("models")
    (home / "jieba" / "default").mkdir(parents=True)
    (home / "jieba" / "default" / "dict.txt").write_text(DICTIONARY, encoding="utf-8")
    (home / "jieba" / "user").mkdir()
    (home / "jieba" / "user" / "user.txt").write_text(USER, encoding="utf-8")
    config = {"main": "../default/dict.txt", "users": ["user.txt"]}
    (home / "jieba" / "user" / "config.json").write_text(json.dumps(config), encoding="utf-8")
    (home / "jieba" / "full").mkdir()
    full = Path(jieba.__file__).parent / "dict.txt"
    (home / "jieba" / "full" / "config.json").write_text(json.dumps({"main": str(full)}), encoding="utf-8")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LANCE_LANGUAGE_MODEL_HOME", str(home))
        yield home


@pytest.mark.parametrize("model", ["jieba", "jieba/default", "jieba/user", "jieba/full"])
@pytest.mark.parametrize("with_position", [False, True])
def test_same_files_as_pylance(models: Path, tmp_path: Path, model: str, with_position: bool) -> None:
    texts = [
        *TEXTS,
        "结过婚的和尚未结过婚的",
        "工信处女干事每月经过下属科室都要亲口交代24口交换机等技术性器件的安装工作",
    ]
    assert_same_files(tmp_path, texts, base_tokenizer=model, with_position=with_position)


@pytest.fixture(scope="module", params=["pylance", "lance_ops"])
def corpus(request: pytest.FixtureRequest, models: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ``jieba/user`` index with positions by either builder over three fragments, then an
    unindexed append."""
    path = tmp_path_factory.mktemp("jieba") / "ds"
    return indexed_then_appended(
        path, request.param, WORDS, 200, 30, 11, base_tokenizer="jieba/user", with_position=True
    )


def test_queries_match_pylance(corpus: Path) -> None:
    """lance_ops answers on either builder's index as pylance does (rows and BM25 scores)."""
    found = sum(assert_same(corpus, text, text) for text in QUERIES)
    assert found > 300
    assert assert_same(corpus, "的前", "的前") == 0  # the user word is one token: no piece of it


def test_phrases_match_pylance(corpus: Path) -> None:
    """Phrases whose tokens do not overlap (see the module's note on search-mode pieces)."""
    phrases = ["前途光明", "我们 光明", "都有 我们", "running 我们"]
    assert assert_same_phrases(corpus, corpus, phrases) > 0
    for text in phrases:
        assert_same(corpus, lance_ops.query.PhraseQuery(text, "text"), lance.query.PhraseQuery(text, "text"))


def test_pylance_answers_on_ours_as_on_its_own(models: Path, tmp_path: Path) -> None:
    """The same data indexed by each library, then appended to and optimized by each: pylance's
    answers (rows, scores) are the same on both datasets."""
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    indexed_then_appended(ours, "lance_ops", WORDS, 120, 20, 3, base_tokenizer="jieba/user")
    indexed_then_appended(theirs, "pylance", WORDS, 120, 20, 3, base_tokenizer="jieba/user")
    for _ in range(2):  # yesterday's index, then after both optimized it
        for text in QUERIES:
            assert_same_answers(ours, theirs, text)
        lance_ops.dataset(str(ours)).optimize.optimize_indices()
        lance.dataset(str(theirs)).optimize.optimize_indices()
    assert lance.dataset(str(ours)).stats.index_stats("text_idx")["num_unindexed_rows"] == 0


def _bad_models(home: Path) -> dict[str, tuple[str, type[Exception]]]:
    """Model directories that pylance refuses, by name: what our error names, what pylance raises."""
    (home / "jieba" / "no_user").mkdir(parents=True)
    (home / "jieba" / "no_user" / "config.json").write_text('{"users": ["missing.txt"]}', encoding="utf-8")
    (home / "jieba" / "no_user" / "dict.txt").write_text(DICTIONARY, encoding="utf-8")
    (home / "jieba" / "no_main").mkdir()
    (home / "jieba" / "no_main" / "config.json").write_text('{"main": "missing.txt"}', encoding="utf-8")
    (home / "jieba" / "empty").mkdir()
    (home / "jieba" / "bad_freq").mkdir()
    (home / "jieba" / "bad_freq" / "dict.txt").write_text("我们 many r\n", encoding="utf-8")
    (home / "jieba" / "bad_json").mkdir()
    (home / "jieba" / "bad_json" / "config.json").write_text("{main", encoding="utf-8")
    (home / "jieba" / "bad_main").mkdir()
    (home / "jieba" / "bad_main" / "config.json").write_text('{"main": 5}', encoding="utf-8")
    return {
        "jieba/no_user": ("missing.txt", OSError),
        "jieba/no_main": ("missing.txt", OSError),
        "jieba/empty": ("dict.txt", OSError),
        "jieba/bad_freq": ("frequency", ValueError),
        "jieba/bad_json": ("config.json", RuntimeError),
        "jieba/bad_main": ("main must be a path", RuntimeError),
        "jieba/absent": ("not a valid directory", ValueError),
    }


def test_bad_models_commit_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANCE_LANGUAGE_MODEL_HOME", str(tmp_path / "models"))
    write(tmp_path / "ds", ["我们都有光明的前途"])
    for model, (named, theirs) in _bad_models(tmp_path / "models").items():
        with pytest.raises(LanguageModelError, match=named) as caught:
            lance_ops.dataset(str(tmp_path / "ds")).create_scalar_index(
                "text", "INVERTED", base_tokenizer=model
            )
        assert isinstance(caught.value, OSError)
        with pytest.raises(theirs):
            lance.dataset(str(tmp_path / "ds")).create_scalar_index("text", "INVERTED", base_tokenizer=model)
    assert lance.dataset(str(tmp_path / "ds")).version == 1
    assert lance_ops.dataset(str(tmp_path / "ds")).list_indices() == []
    assert not (tmp_path / "ds" / "_indices").exists()


def test_default_model_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without ``LANCE_LANGUAGE_MODEL_HOME``, both look in ``lance/language_models`` under the
    local data directory (``$XDG_DATA_HOME`` here)."""
    monkeypatch.delenv("LANCE_LANGUAGE_MODEL_HOME", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    if os.name != "posix" or os.uname().sysname != "Linux":
        pytest.skip("the XDG data directory is Linux's")
    assert language_model_home() == tmp_path / "data" / "lance" / "language_models"
    model = tmp_path / "data" / "lance" / "language_models" / "jieba" / "default"
    model.mkdir(parents=True)
    (model / "dict.txt").write_text(DICTIONARY, encoding="utf-8")
    assert_same_files(tmp_path, TEXTS, base_tokenizer="jieba")


def test_changed_dictionary_is_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A loaded model is kept only while its files are unchanged."""
    monkeypatch.setenv("LANCE_LANGUAGE_MODEL_HOME", str(tmp_path))
    (tmp_path / "jieba" / "default").mkdir(parents=True)
    dictionary = tmp_path / "jieba" / "default" / "dict.txt"
    dictionary.write_text(DICTIONARY, encoding="utf-8")
    assert ("光明的前途", 0) not in load_jieba("jieba").tokenize("光明的前途")
    assert load_jieba("jieba") is load_jieba("jieba/default")
    dictionary.write_text(DICTIONARY + USER, encoding="utf-8")
    assert ("光明的前途", 0) in load_jieba("jieba").tokenize("光明的前途")


@functools.cache
def _small_tokenizer() -> JiebaTokenizer:
    with tempfile.TemporaryDirectory() as home:
        (Path(home) / "jieba" / "default").mkdir(parents=True)
        (Path(home) / "jieba" / "default" / "dict.txt").write_text(DICTIONARY, encoding="utf-8")
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("LANCE_LANGUAGE_MODEL_HOME", home)
            return load_jieba("jieba/default")


@given(st.text(alphabet="我们都有光明的前途北京清华大学长江 ab1.%，\n\t㐀", max_size=40))
def test_tokens_are_their_characters(text: str) -> None:
    """Every token is the text's characters from its position on; the words of the cut (the
    longest token at each start, in order) put the text back together."""
    tokens = _small_tokenizer().tokenize(text)
    for token, start in tokens:
        assert text[start : start + len(token)] == token
    starts = sorted({start for _, start in tokens})
    words = [max((t for t, s in tokens if s == start), key=len) for start in starts]
    assert "".join(words) == text


def assert_same_answers(ours: Path, theirs: Path, text: str) -> None:
    """pylance's rows and scores for ``text`` are the same on both datasets."""
    ids, scores = pylance_search(ours, text)
    want_ids, want_scores = pylance_search(theirs, text)
    assert ids == want_ids, text
    np.testing.assert_allclose(scores, want_scores, rtol=1e-6, err_msg=text)


@pytest.mark.parametrize("with_position", [False, True])
def test_list_rows(models: Path, tmp_path: Path, with_position: bool) -> None:
    """A list row is cut as one text: its strings, nulls left out, a space between two once the
    text is not empty (pylance 14's files, read back from its index)."""
    rows = [["我们", "光明的前途"], None, [], ["我们", None, "光明"], ["我们", "", "光明"], ["", "我们"]]
    rows += [["我们", "光明", ""], [None, "北京清华大学"], [""], [None]]
    for name in ("ours", "theirs"):
        write(tmp_path / name, rows, pa.list_(pa.string()))
    params = {"base_tokenizer": "jieba/user", "with_position": with_position}
    lance_ops.dataset(str(tmp_path / "ours")).create_scalar_index("text", "INVERTED", **params)
    lance.dataset(str(tmp_path / "theirs")).create_scalar_index("text", "INVERTED", **params)
    ours, theirs = index_files(tmp_path / "ours"), index_files(tmp_path / "theirs")
    for name in FILES:
        assert ours[name].equals(theirs[name]), name
        assert ours[name].schema.metadata == theirs[name].schema.metadata, name
    for text in ["我们", "光明", "大学", "xyz"]:
        assert_same(tmp_path / "ours", text, text)
        assert_same_answers(tmp_path / "ours", tmp_path / "theirs", text)
