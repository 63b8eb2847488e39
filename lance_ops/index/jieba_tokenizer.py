"""The ``jieba/<model>`` base tokenizer of an INVERTED index, as pylance 14 runs it.

pylance 14 looks the model up in ``$LANCE_LANGUAGE_MODEL_HOME/jieba/<model>/`` (``"jieba"`` alone
is ``"jieba/default"``); without that variable, in ``lance/language_models`` under the platform's
local data directory (``$XDG_DATA_HOME`` or ``~/.local/share`` on Linux). The directory holds a
``dict.txt`` (the main dictionary), or a ``config.json`` ``{"main": ..., "users": [...]}`` naming
the main and user dictionaries relative to it. A dictionary line is ``word [frequency [tag]]``
(a missing frequency is 0); the user dictionaries' words are added to, or replace the
frequency of, the main dictionary's. A missing directory or dictionary, or a line whose
frequency is not an integer, is a :class:`~lance_ops.errors.LanguageModelError` (an
``OSError``, as pylance raises).

A text is cut as the Rust ``jieba-rs`` crate pylance uses cuts it in search mode with the HMM:
blocks of CJK ideographs, ASCII letters, digits and ``+#&._%-`` are segmented by the dictionary
(the most probable path; runs of unknown characters by the HMM of the PyPI ``jieba`` package,
the same model), every other character is a token of its own and white space is kept as
tokens; each word longer than two characters is preceded by its two- and (longer than three)
three-character pieces that are dictionary words. A token's position is the number of the
character where it starts, as pylance records it.

The PyPI ``jieba`` package is imported only when such a tokenizer is built. Cutting runs in
Python, one text at a time (jieba has no vectorised form).
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from lance_ops.errors import LanguageModelError

__all__ = ["JiebaTokenizer", "check_lindera_model", "join_list_rows", "language_model_home", "load_jieba"]

MODEL_HOME_ENV = "LANCE_LANGUAGE_MODEL_HOME"
# the blocks jieba-rs 0.8 segments by the dictionary (its default "Han" pattern)
_BLOCK = re.compile(
    "([\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002a6df\U0002a700-\U0002b73f"
    "\U0002b740-\U0002b81f\U0002b820-\U0002ceaf\U0002ceb0-\U0002ebef\U0002f800-\U0002fa1f"
    "a-zA-Z0-9+#&._%\\-]+)"
)
_SKIP = re.compile(r"(\r\n|\s)")


def _data_local_dir() -> Path | None:
    """The platform's local data directory (as Rust's ``dirs::data_local_dir``)."""
    if sys.platform == "win32":
        local = os.environ.get("LOCALAPPDATA")
        return Path(local) if local else None
    home = Path.home()
    if sys.platform == "darwin":
        return home / "Library" / "Application Support"
    xdg = os.environ.get("XDG_DATA_HOME")
    return Path(xdg) if xdg and os.path.isabs(xdg) else home / ".local" / "share"


def language_model_home() -> Path | None:
    """Where pylance 14 looks for language models (``LANCE_LANGUAGE_MODEL_HOME`` or its default)."""
    home = os.environ.get(MODEL_HOME_ENV)
    if home is not None:
        return Path(home)
    local = _data_local_dir()
    return None if local is None else local / "lance" / "language_models"


def _read_dictionary(path: Path, freq: dict[str, int]) -> None:
    """Add the words of one dictionary file to ``freq`` (word -> frequency)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise LanguageModelError(f"jieba tokenizer: cannot read dictionary {path}: {exc}") from exc
    for number, line in enumerate(lines, 1):
        parts = line.split()
        if not parts:
            continue
        try:
            count = int(parts[1]) if len(parts) > 1 else 0
        except ValueError:
            count = -1
        if count < 0:
            raise LanguageModelError(
                f"jieba tokenizer: dictionary {path} line {number} {line!r}: the frequency is not an integer"
            )
        freq[parts[0]] = count


class JiebaTokenizer:
    """A loaded jieba model: :meth:`tokenize` cuts one text into (token, position) pairs."""

    def __init__(self, words: dict[str, int]) -> None:
        import jieba  # noqa: PLC0415 - loaded only when a jieba tokenizer is used

        self._words = words
        prefixes: dict[str, int] = dict.fromkeys((w[:i] for w in words for i in range(1, len(w))), 0)
        tokenizer = jieba.Tokenizer()
        # the frequencies as jieba's own loader would hold them, without its disk cache and log
        tokenizer.FREQ = {**prefixes, **words}
        tokenizer.total = sum(words.values())
        tokenizer.initialized = True
        # jieba 0.42's dictionary (DAG) + HMM cut of one block of ideographs and ASCII words
        self._cut_block: Any = tokenizer._Tokenizer__cut_DAG  # noqa: SLF001

    def _words_of(self, text: str) -> Iterator[str]:
        for block in _BLOCK.split(text):
            if not block:
                continue
            if _BLOCK.fullmatch(block):
                yield from self._cut_block(block)
                continue
            for piece in _SKIP.split(block):
                if _SKIP.fullmatch(piece):
                    yield piece
                else:
                    yield from piece

    def tokenize(self, text: str) -> list[tuple[str, int]]:
        """The tokens of ``text`` in jieba-rs' search-mode order, each with its start character."""
        out: list[tuple[str, int]] = []
        start = 0
        words = self._words
        for word in self._words_of(text):
            width = len(word)
            for size in (2, 3):
                if width > size:
                    out.extend(
                        (word[i : i + size], start + i)
                        for i in range(width - size + 1)
                        if word[i : i + size] in words
                    )
            out.append((word, start))
            start += width
        return out


def join_list_rows(values: pa.Array) -> pa.Array:
    """Each list-of-strings row as the one text pylance 14 cuts for it: its strings (nulls left
    out) one after the other, a space between two once the text is not empty (a null list: a
    null text)."""
    texts: list[str | None] = []
    for row in values.to_pylist():
        if row is None:
            texts.append(None)
            continue
        text = ""
        for string in row:
            if string is not None:
                text = f"{text} {string}" if text else string
        texts.append(text)
    return pa.array(texts, pa.large_string())


def _model_directory(kind: str, name: str, base_tokenizer: str) -> Path:
    """The directory of language model ``name`` (under :func:`language_model_home`), which must
    exist (:class:`LanguageModelError` naming the ``kind`` of tokenizer otherwise)."""
    home = language_model_home()
    if home is None:
        raise LanguageModelError(f"{kind} tokenizer: no language model directory for {base_tokenizer!r}")
    root = home / name
    if not root.is_dir():
        raise LanguageModelError(f"{kind} tokenizer: {root} is not a valid directory")
    return root


def load_jieba(base_tokenizer: str) -> JiebaTokenizer:
    """The model of ``base_tokenizer`` (``"jieba"`` or ``"jieba/<model>"``), read from disk."""
    name = "jieba/default" if base_tokenizer == "jieba" else base_tokenizer
    root = _model_directory("jieba", name, base_tokenizer)
    main, users = root / "dict.txt", []
    config_path = root / "config.json"
    if config_path.exists():
        try:
            config = json.loads(config_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise LanguageModelError(f"jieba tokenizer: cannot read {config_path}: {exc}") from exc
        if not isinstance(config, dict):
            raise LanguageModelError(f"jieba tokenizer: {config_path} must hold a JSON object")
        main_name, user_names = config.get("main"), config.get("users") or []
        if not (main_name is None or isinstance(main_name, str)) or not (
            isinstance(user_names, list) and all(isinstance(u, str) for u in user_names)
        ):
            raise LanguageModelError(
                f"jieba tokenizer: {config_path}: main must be a path, users a list of paths"
            )
        if main_name is not None:
            main = root / main_name
        users = [root / user for user in user_names]
    paths = (main, *users)
    return _load(tuple((str(path), _signature(path)) for path in paths))


def _signature(path: Path) -> tuple[int, int] | None:
    """A file's size and modification time (None when it cannot be read: the load reports it)."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_size, stat.st_mtime_ns


@functools.lru_cache(maxsize=8)
def _load(files: tuple[tuple[str, tuple[int, int] | None], ...]) -> JiebaTokenizer:
    """The tokenizer of these dictionaries (kept while their sizes and times stay the same, so
    that each query does not read a large dictionary again)."""
    words: dict[str, int] = {}
    for path, _ in files:
        _read_dictionary(Path(path), words)
    return JiebaTokenizer(words)


def check_lindera_model(base_tokenizer: str) -> None:
    """Raise :class:`LanguageModelError` where pylance 14 fails to load a ``lindera/<model>``
    tokenizer: no such model directory, or a ``config.yml`` that is not YAML or names a dictionary
    that does not exist (lindera resolves those paths from the working directory). lance_ops builds
    no lindera tokenizer: a model that would load is refused by the caller as unsupported."""
    root = _model_directory("lindera", base_tokenizer, base_tokenizer)
    config_path = root / "config.yml"
    if not config_path.exists():
        return
    import yaml

    try:
        config = yaml.safe_load(config_path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise LanguageModelError(f"lindera tokenizer: cannot load {config_path}: {exc}") from exc
    segmenter = config.get("segmenter") if isinstance(config, dict) else None
    for key in ("dictionary", "user_dictionary"):
        entry = segmenter.get(key) if isinstance(segmenter, dict) else None
        path = entry.get("path") if isinstance(entry, dict) else None
        if isinstance(path, str) and not Path(path).exists():
            raise LanguageModelError(
                f"lindera tokenizer: {config_path} names the {key.replace('_', ' ')} {path}, "
                "which does not exist"
            )
