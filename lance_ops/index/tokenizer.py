"""The text tokenizer of an INVERTED index, as pylance 14 configures it (its ``params``).

A text goes through, in this order (pylance 14's pipeline):

1. the base tokenizer: ``simple`` splits on every character that is not a letter or digit,
   ``whitespace`` on white space, ``raw`` keeps the whole text as one token, ``ngram`` takes
   the character n-grams of the whole text (:meth:`TokenizerParams._ngrams`; every position 0,
   and ``stem`` / ``remove_stop_words`` default to False, as in pylance 14), ``jieba`` /
   ``jieba/<model>`` cuts Chinese text with a jieba dictionary from the language model directory
   (:mod:`lance_ops.index.jieba_tokenizer`; a token's position is its first character's number);
2. tokens of ``max_token_length`` UTF-8 bytes or more are dropped (``None``: no limit);
3. ``lower_case``;
4. ``stem``: the Snowball stemmer of ``language`` (any of :data:`LANGUAGES`, the
   ``snowballstemmer`` package: the stems of pylance's stemmers, checked on sample texts);
5. ``remove_stop_words``: the stemmed token is dropped when it is a stop word (English: the
   122 words and 27 contractions pylance 14 drops, read from its index; ``no``, ``nor``,
   ``not`` and the negations such as ``isn't`` are kept) or one of ``custom_stop_words``;
6. ``ascii_folding``: accented and other foldable letters become their ASCII form
   (``"crème"`` -> ``"creme"``; the same folding as the NGRAM index).

Stemming before folding matters: ``"brûlée"`` stems as ``"brûlée"`` (its vowels are not ASCII)
and is stored as ``"brulee"``, where ``"brulee"`` typed in ASCII stems to ``"brule"``.

Only what pylance 14 accepts with these meanings is taken: unknown keywords and unsupported
values (stop words of languages other than English, the ``lindera`` tokenizers)
raise :class:`~lance_ops.errors.InvalidArgumentError` /
:class:`~lance_ops.errors.UnsupportedFeatureError` naming them.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_ops.encoding.jsonb import float_text
from lance_ops.errors import InvalidArgumentError, UnsupportedFeatureError
from lance_ops.index.jieba_tokenizer import JiebaTokenizer, check_lindera_model, load_jieba
from lance_ops.index.ngram import _fold_char

__all__ = ["ENGLISH_STOP_WORDS", "LANGUAGES", "TokenizerParams", "tokenizer_params"]

# pylance 14's ``language`` values (spelled so); each has a Snowball stemmer of that name
LANGUAGES = (
    "Arabic", "Danish", "Dutch", "English", "Finnish", "French", "German", "Greek", "Hungarian", "Italian",
    "Norwegian", "Portuguese", "Romanian", "Russian", "Spanish", "Swedish", "Tamil", "Turkish",
)  # fmt: skip

ENGLISH_STOP_WORDS = frozenset(
    "a about above after again against all am an and any are as at be because been before being "
    "below between both but by can did do does doing down during each few for from further had "
    "has have having he her here hers herself him himself his how i if in into is it its itself "
    "just me more most my myself now of off on once only or other our ours ourselves out over "
    "own re same she should so some such than that the their theirs them themselves then there "
    "these they this those through to too under until up very was we were what when where which "
    "while who whom why will with you your yours yourself yourselves"
    " i'm i've i'd i'll you're you've you'd you'll he's he'd he'll she's she'd she'll it's it'd it'll"
    " we're we've we'd we'll they're they've they'd they'll that'll should've".split()
)
# Marks and symbols that are alphabetic to pylance 14's simple tokenizer though neither letters
# nor digits (Rust's ``char::is_alphanumeric``: vowel signs such as Tamil "ை", circled letters),
# found by indexing every such character with pylance: code points and ranges, hexadecimal.
_OTHER_ALPHABETIC = (
    "345 363-36F 5B0-5BD 5BF 5C1-5C2 5C4-5C5 5C7 610-61A 64B-657 659-65F 670 6D6-6DC 6E1-6E4 6E7-6E8 "
    "6ED 711 730-73F 7A6-7B0 816-817 81B-823 825-827 829-82C 8D4-8DF 8E3-8E9 8F0-903 93A-93B 93E-94C "
    "94E-94F 955-957 962-963 981-983 9BE-9C4 9C7-9C8 9CB-9CC 9D7 9E2-9E3 A01-A03 A3E-A42 A47-A48 "
    "A4B-A4C A51 A70-A71 A75 A81-A83 ABE-AC5 AC7-AC9 ACB-ACC AE2-AE3 AFA-AFC B01-B03 B3E-B44 B47-B48 "
    "B4B-B4C B56-B57 B62-B63 B82 BBE-BC2 BC6-BC8 BCA-BCC BD7 C00-C04 C3E-C44 C46-C48 C4A-C4C C55-C56 "
    "C62-C63 C81-C83 CBE-CC4 CC6-CC8 CCA-CCC CD5-CD6 CE2-CE3 D00-D03 D3E-D44 D46-D48 D4A-D4C D57 "
    "D62-D63 D81-D83 DCF-DD4 DD6 DD8-DDF DF2-DF3 E31 E34-E3A E4D EB1 EB4-EB9 EBB-EBC ECD F71-F83 "
    "F8D-F97 F99-FBC 102B-1036 1038 103B-103E 1056-1059 105E-1060 1062-1064 1067-106D 1071-1074 "
    "1082-108D 108F 109A-109D 1712-1713 1732-1733 1752-1753 1772-1773 17B6-17C8 1885-1886 18A9 "
    "1920-192B 1930-1938 1A17-1A1B 1A55-1A5E 1A61-1A74 1ABF-1AC0 1ACC-1ACE 1B00-1B04 1B35-1B43 "
    "1B80-1B82 1BA1-1BA9 1BAC-1BAD 1BE7-1BF1 1C24-1C36 1DD3-1DF4 24B6-24E9 2DE0-2DFF A674-A67B "
    "A69E-A69F A802 A80B A823-A827 A880-A881 A8B4-A8C3 A8C5 A8FF A926-A92A A947-A952 A980-A983 "
    "A9B4-A9BF A9E5 AA29-AA36 AA43 AA4C-AA4D AA7B-AA7D AAB0 AAB2-AAB4 AAB7-AAB8 AABE AAEB-AAEF AAF5 "
    "ABE3-ABEA FB1E 10376-1037A 10A01-10A03 10A05-10A06 10A0C-10A0F 10D24-10D27 10EAB-10EAC "
    "11000-11002 11038-11045 11073-11074 11080-11082 110B0-110B8 110C2 11100-11102 11127-11132 "
    "11145-11146 11180-11182 111B3-111BF 111CE-111CF 1122C-11234 11237 1123E 112DF-112E8 11300-11303 "
    "1133E-11344 11347-11348 1134B-1134C 11357 11362-11363 11435-11441 11443-11445 114B0-114C1 "
    "115AF-115B5 115B8-115BE 115DC-115DD 11630-1163E 11640 116AB-116B5 1171D-1172A 1182C-11838 "
    "11930-11935 11937-11938 1193B-1193C 11940 11942 119D1-119D7 119DA-119DF 119E4 11A01-11A0A "
    "11A35-11A39 11A3B-11A3E 11A51-11A5B 11A8A-11A97 11C2F-11C36 11C38-11C3E 11C92-11CA7 11CA9-11CB6 "
    "11D31-11D36 11D3A 11D3C-11D3D 11D3F-11D41 11D43 11D47 11D8A-11D8E 11D90-11D91 11D93-11D96 "
    "11EF3-11EF6 16F4F 16F51-16F87 16F8F-16F92 16FF0-16FF1 1BC9E 1E000-1E006 1E008-1E018 1E01B-1E021 "
    "1E023-1E024 1E026-1E02A 1E947 1F130-1F149 1F150-1F169 1F170-1F189 "
)

# Separators (Arrow's RE2 kernels split on them): runs of what is not a letter, digit or one of
# the characters above (simple), or of Unicode white space (whitespace).
_OTHER_ALPHABETIC_RE2 = "".join(
    "-".join(f"\\x{{{end}}}" for end in item.split("-")) for item in _OTHER_ALPHABETIC.split()
)
_SIMPLE_RE2 = r"[^\p{L}\p{N}" + _OTHER_ALPHABETIC_RE2 + "]+"
_WHITESPACE_RE2 = r"[\s\x{0B}\x{1C}-\x{1F}\x{85}\p{Z}]+"
_BASE_TOKENIZERS = ("simple", "whitespace", "raw", "ngram")
# keyword -> default, as pylance 14 writes them in ``params`` (key order kept)
_DEFAULTS: dict[str, Any] = {
    "lance_tokenizer": "text",
    "base_tokenizer": "simple",
    "language": "English",
    "with_position": False,
    "max_token_length": 40,
    "lower_case": True,
    "stem": True,
    "remove_stop_words": True,
    "custom_stop_words": None,
    "ascii_folding": True,
    "min_ngram_length": 3,
    "max_ngram_length": 3,
    "prefix_only": False,
    "block_size": 128,
    "split_identifiers": False,
    "split_on_numerics": False,
    "preserve_original": False,
    "index_operators": False,
}
_BOOLS = ("with_position", "lower_case", "stem", "remove_stop_words", "ascii_folding", "prefix_only")
# Accepted with their default value only (what lance_ops' tokenizer and files do).
_FIXED = {
    "block_size": 128,
    "split_identifiers": False,
    "split_on_numerics": False,
    "preserve_original": False,
    "index_operators": False,
}
_NGRAM_ONLY = ("min_ngram_length", "max_ngram_length", "prefix_only")


@functools.lru_cache(maxsize=4096)
def _fold_one(c: str) -> str:
    """One character folded to ASCII, or kept when it has no ASCII form (Greek, Cyrillic, ...);
    an upper-case letter without decomposition folds as its lower-case form, upper-cased
    (``"Æ"`` -> ``"AE"``, ``"Ł"`` -> ``"L"``)."""
    folded = _fold_char(c)
    if folded == c and c.isupper():
        lower = _fold_char(c.lower())
        if lower != c.lower():
            folded = lower.upper()
    return folded if folded.isascii() else c


def _fold(token: str) -> str:
    return token if token.isascii() else "".join(map(_fold_one, token))


class TokenizerParams:
    """Checked tokenizer settings (:func:`tokenizer_params`); :meth:`tokenize` splits one text."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self.values = dict(values)
        stops = self.values["custom_stop_words"]
        self._stops = frozenset(stops) if stops is not None else ENGLISH_STOP_WORDS
        self._stem: Callable[[str], str] | None = None
        if self.values["stem"]:
            import snowballstemmer  # noqa: PLC0415 - 40 modules, loaded only when a tokenizer stems

            self._stem = snowballstemmer.stemmer(self.values["language"].lower()).stemWord
        self._cache: dict[str, str | None] = {}
        base = self.values["base_tokenizer"]
        self._jieba: JiebaTokenizer | None = load_jieba(base) if _is_jieba(base) else None

    @property
    def char_positions(self) -> bool:
        """Whether a token's position is the number of its first character in its text (jieba)
        rather than the number of the token in its row."""
        return self._jieba is not None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TokenizerParams) and self.values == other.values

    __hash__ = None  # type: ignore[assignment]

    def to_json(self) -> str:
        """The ``params`` schema metadata pylance 14 writes in ``metadata.lance``."""
        return json.dumps(dict(self.values), separators=(",", ":"))

    def split_array(self, texts: pa.Array) -> tuple[pa.Array, np.ndarray]:
        """The base tokens of every text of ``texts`` (strings; a null gives none), flattened, and
        the position in ``texts`` each comes from: Arrow's kernels split them (as for
        :meth:`tokenize` too), so no Python code runs per text or per token."""
        return self.split_with_starts(texts)[:2]

    def split_with_starts(self, texts: pa.Array) -> tuple[pa.Array, np.ndarray, np.ndarray | None]:
        """:meth:`split_array` and, for jieba (:attr:`char_positions`), the number of the
        character each token starts at in its text (None for the other tokenizers)."""
        texts = texts.cast(pa.large_string())
        base = self.values["base_tokenizer"]
        if self._jieba is not None:
            return self._jieba_split(texts)
        if base == "raw":
            valid = np.asarray(texts.is_valid(), dtype=bool)
            return texts.filter(pa.array(valid)), np.flatnonzero(valid), None
        if base == "ngram":
            return (*self._ngrams(texts), None)
        split = pc.split_pattern_regex(texts, _SIMPLE_RE2 if base == "simple" else _WHITESPACE_RE2)
        tokens = pc.list_flatten(split)
        parents = np.asarray(pc.list_parent_indices(split), dtype=np.int64)
        keep = np.asarray(pc.greater(pc.binary_length(tokens), 0), dtype=bool)
        return tokens.filter(pa.array(keep)), parents[keep], None

    def _jieba_split(self, texts: pa.LargeStringArray) -> tuple[pa.Array, np.ndarray, np.ndarray]:
        """jieba's tokens of every text (one Python call per text: jieba is pure Python)."""
        assert self._jieba is not None
        tokens: list[str] = []
        parents: list[int] = []
        starts: list[int] = []
        for row, text in enumerate(texts.to_pylist()):
            if text is None:
                continue
            for token, start in self._jieba.tokenize(text):
                tokens.append(token)
                parents.append(row)
                starts.append(start)
        return (
            pa.array(tokens, pa.large_string()),
            np.asarray(parents, dtype=np.int64),
            np.asarray(starts, dtype=np.int64),
        )

    def _ngrams(self, texts: pa.LargeStringArray) -> tuple[pa.Array, np.ndarray]:
        """The character n-grams of every text, as pylance 14's ngram tokenizer gives them: from
        each character in turn (only the first with ``prefix_only``), those of every length from
        ``min_ngram_length`` to ``max_ngram_length`` that fit in the text, shortest first."""
        low, high = self.values["min_ngram_length"], self.values["max_ngram_length"]
        data = np.frombuffer(texts.buffers()[2] or b"", np.uint8)
        offsets = np.frombuffer(texts.buffers()[1], np.int64)[texts.offset : texts.offset + len(texts) + 1]
        valid = np.asarray(texts.is_valid(), dtype=bool)
        # the byte where each character starts; a text's characters are a run of them
        starts = np.flatnonzero((data & 0xC0) != 0x80).astype(np.int64)
        first = np.searchsorted(starts, offsets[:-1])
        chars = np.where(valid, np.searchsorted(starts, offsets[1:]) - first, 0)
        bounds = np.append(starts, len(data))  # a character's end is the next one's start
        # every (text, start character, length): starts in order, lengths ascending
        count = np.minimum(chars, 1) if self.values["prefix_only"] else chars
        origins = np.repeat(np.arange(len(texts)), count)
        at = np.arange(len(origins)) - np.repeat(np.cumsum(count) - count, count)
        lengths = np.arange(low, high + 1, dtype=np.int64)
        parents = np.repeat(origins, len(lengths))
        start = np.repeat(first[origins] + at, len(lengths))
        length = np.tile(lengths, len(origins))
        fits = np.repeat(at, len(lengths)) + length <= chars[parents]
        parents, start, length = parents[fits], start[fits], length[fits]
        begin, end = bounds[start], bounds[start + length]
        sizes = end - begin
        token_offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
        picked = np.arange(int(token_offsets[-1])) - np.repeat(token_offsets[:-1] - begin, sizes)
        tokens = pa.LargeStringArray.from_buffers(
            len(sizes), pa.py_buffer(token_offsets.tobytes()), pa.py_buffer(data[picked].tobytes())
        )
        return tokens, parents

    def positions(self, parents: np.ndarray) -> np.ndarray:
        """The position of each token of :meth:`split_array` (``parents``: its text, ascending):
        its number in its text, or 0 for every n-gram (as pylance 14 records them)."""
        if self.values["base_tokenizer"] == "ngram":
            return np.zeros(len(parents), np.int64)
        return np.arange(len(parents), dtype=np.int64) - np.searchsorted(parents, parents)

    def term(self, token: str) -> str | None:
        """One base token through the filters (None: dropped); memoised per token."""
        try:
            return self._cache[token]
        except KeyError:
            pass
        values = self.values
        result: str | None = None
        limit = values["max_token_length"]
        if limit is None or len(token.encode()) < limit:
            term = token.lower() if values["lower_case"] else token
            if self._stem is not None:
                term = self._stem(term)
            if not (values["remove_stop_words"] and term in self._stops):
                result = _fold(term) if values["ascii_folding"] else term
        if len(self._cache) < 1 << 20:
            self._cache[token] = result
        return result

    @property
    def json(self) -> bool:
        """A JSON tokenizer (``lance_tokenizer="json"``, an index of a JSON column): documents are
        JSON, terms ``path,type,value`` (:meth:`json_terms`), queries such triplets."""
        return bool(self.values["lance_tokenizer"] == "json")

    def tokenize(self, text: str) -> list[str]:
        """The terms of ``text`` in order (repeats kept)."""
        return [term for term, _ in self.tokenize_with_positions(text)]

    def json_terms(self, document: Any) -> list[str]:
        """The terms of a parsed JSON document, as pylance 14's JSON tokenizer makes them: each
        leaf, depth first (object members in key order, array items in order; an array adds no
        path step), as ``path,str,term`` per term of a string (this tokenizer's terms), else
        ``path,number,99`` / ``path,bool,true`` / ``path,null,null``; ``path`` joins the member
        names with ``.``."""
        out: list[str] = []
        pending: list[tuple[str, Any]] = [("", document)]
        while pending:
            prefix, value = pending.pop()
            if isinstance(value, dict):
                for key in sorted(value, reverse=True):
                    pending.append((f"{prefix}.{key}" if prefix else key, value[key]))
            elif isinstance(value, list):
                pending.extend((prefix, item) for item in reversed(value))
            elif isinstance(value, str):
                out.extend(f"{prefix},str,{term}" for term in self._text_terms(value))
            else:
                out.append(f"{prefix},{_json_kind(value)},{_json_scalar(value)}")
        return out

    def _text_terms(self, text: str) -> list[str]:
        return [term for term, _ in self._text_terms_with_positions(text)]

    def _query_triplets(self, text: str) -> list[str]:
        """A JSON index's query: ``path,type,value`` triplets separated by ``;``, a ``str`` value
        split into this tokenizer's terms (InvalidArgumentError for another form)."""
        terms: list[str] = []
        for triplet in text.split(";"):
            parts = triplet.split(",", 2)
            if len(parts) != 3:
                raise InvalidArgumentError(f"Invalid triple format: {triplet}")
            path, kind, value = parts
            if kind in ("number", "bool", "null"):
                terms.append(f"{path},{kind},{value}")
            elif kind == "str":
                terms.extend(f"{path},str,{term}" for term in self._text_terms(value))
            else:
                raise InvalidArgumentError(f"Invalid triple type: {kind}")
        return terms

    def tokenize_with_positions(self, text: str) -> list[tuple[str, int]]:
        """The terms of ``text`` in order, each with its position: the number of its base token
        (dropped tokens, such as stop words, keep their numbers), as an index records them.
        For a JSON tokenizer ``text`` is a query of triplets (:meth:`_query_triplets`)."""
        if self.json:
            return [(term, i) for i, term in enumerate(self._query_triplets(text))]
        return self._text_terms_with_positions(text)

    def _text_terms_with_positions(self, text: str) -> list[tuple[str, int]]:
        tokens, parents, starts = self.split_with_starts(pa.array([text], pa.large_string()))
        positions = self.positions(parents) if starts is None else starts
        terms = zip(map(self.term, tokens.to_pylist()), positions.tolist(), strict=True)
        return [(term, position) for term, position in terms if term is not None]


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    return "bool" if isinstance(value, bool) else "number"


def _json_scalar(value: Any) -> str:
    """A JSON number / boolean / null as pylance's JSON tokenizer prints it (its JSONB text)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) and not -(2**63) <= value < 2**64:
        value = float(value)  # beyond int64 / uint64: a float, as serde_json reads it
    if isinstance(value, float):
        if not math.isfinite(value):
            return "null"
        return float_text(value)  # as the JSONB text pylance tokenizes: 1e+300, 0.00001
    return str(value)


def _is_jieba(base: str) -> bool:
    return base == "jieba" or base.startswith("jieba/")


def tokenizer_params(params: Mapping[str, Any] | None = None) -> TokenizerParams:
    """Check ``create_scalar_index(..., "INVERTED", **params)``'s tokenizer keywords."""
    params = dict(params or {})
    unknown = sorted(set(params) - set(_DEFAULTS))
    if unknown:
        raise InvalidArgumentError(f"INVERTED index: unknown tokenizer parameters {unknown}")
    # pylance 14 neither stems nor drops stop words from n-grams unless asked to
    ngram_defaults = (
        {"stem": False, "remove_stop_words": False} if params.get("base_tokenizer") == "ngram" else {}
    )
    values = {**_DEFAULTS, **ngram_defaults, **params}
    for key in _BOOLS:
        if not isinstance(values[key], bool):
            raise InvalidArgumentError(f"INVERTED index: {key} must be a bool, got {values[key]!r}")
    if isinstance(values["base_tokenizer"], str) and values["base_tokenizer"].startswith("lindera/"):
        check_lindera_model(values["base_tokenizer"])
    if not isinstance(values["base_tokenizer"], str) or (
        values["base_tokenizer"] not in _BASE_TOKENIZERS and not _is_jieba(values["base_tokenizer"])
    ):
        raise UnsupportedFeatureError(
            f"INVERTED index: base_tokenizer {values['base_tokenizer']!r} is not supported by lance_ops "
            f"(supported: {', '.join(_BASE_TOKENIZERS)}, jieba/<model>)"
        )
    if values["lance_tokenizer"] not in ("text", "json"):
        raise InvalidArgumentError(f"unknown lance tokenizer {values['lance_tokenizer']!r}")
    for key, fixed in _FIXED.items():
        if values[key] != fixed:
            raise UnsupportedFeatureError(
                f"INVERTED index: {key}={values[key]!r} is not supported by lance_ops (only {fixed!r})"
            )
    if values["base_tokenizer"] == "ngram":
        low, high = values["min_ngram_length"], values["max_ngram_length"]
        for key, value in (("min_ngram_length", low), ("max_ngram_length", high)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise InvalidArgumentError(
                    f"INVERTED index: {key} must be an int greater than 0, got {value!r}"
                )
        if low > high:
            raise InvalidArgumentError(
                f"INVERTED index: min_ngram_length {low} must not be greater than max_ngram_length {high}"
            )
    else:
        for key in _NGRAM_ONLY:
            if values[key] != _DEFAULTS[key]:
                raise UnsupportedFeatureError(f"INVERTED index: {key} only applies to the ngram tokenizer")
    language = values["language"]
    if language not in LANGUAGES:
        raise InvalidArgumentError(
            f"INVERTED index: unknown language {language!r} (one of {', '.join(LANGUAGES)})"
        )
    if language != "English" and values["remove_stop_words"] and values["custom_stop_words"] is None:
        raise UnsupportedFeatureError(
            f"INVERTED index: the {language} stop words of pylance are not known to lance_ops; "
            "pass remove_stop_words=False or custom_stop_words"
        )
    limit = values["max_token_length"]
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0):
        raise InvalidArgumentError(
            f"INVERTED index: max_token_length must be a positive int or None, got {limit!r}"
        )
    stops = values["custom_stop_words"]
    if stops is not None:
        if isinstance(stops, str) or not all(isinstance(w, str) for w in stops):
            raise InvalidArgumentError("INVERTED index: custom_stop_words must be a list of strings")
        values["custom_stop_words"] = list(stops)
    return TokenizerParams(values)
