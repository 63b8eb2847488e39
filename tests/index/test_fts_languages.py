"""L18: INVERTED indices stemming the 18 languages of pylance 14 (``language=``): lance_ops
writes pylance's files for a sample text of each (stop words kept, or a custom list), and both
answer the same match queries. pylance's own stop-word lists of languages other than English are
not known to lance_ops: ``remove_stop_words=True`` without ``custom_stop_words`` is refused
naming the language, and nothing is committed."""

from __future__ import annotations

from pathlib import Path

import lance
import lance.query
import pytest

import lance_ops
import lance_ops.query
from lance_ops.errors import UnsupportedFeatureError
from lance_ops.index.tokenizer import LANGUAGES
from tests.index.fts_helpers import assert_same_files
from tests.index.test_fts_positions import assert_same, write

pytestmark = pytest.mark.interop

SAMPLES = {
    "Arabic": "الكتاب والمدرسة يكتبون المعلمين بالقلم",
    "Danish": "børnene spiste æblerne hurtigt og legede udenfor hele dagen bilerne kørende",
    "Dutch": "de kinderen aten appels en speelden buiten lopende fietsen huizen gelukkige",
    "English": "running generously happiness connection studies",
    "Finnish": "lapset söivät omenoita ja leikkivät ulkona taloissa kaupungeissa",
    "French": "les enfants mangeaient des pommes rapidement heureusement nationalisation continuellement",
    "German": "die Kinder aßen Äpfel und spielten draußen Häuser glücklicherweise Möglichkeiten",
    "Greek": "τα παιδιά έτρωγαν μήλα και έπαιζαν έξω σπίτια ευτυχώς",
    "Hungarian": "a gyerekek almát ettek és kint játszottak házakban boldogan",
    "Italian": "i bambini mangiavano mele e giocavano fuori case felicemente nazionalizzazione",
    "Norwegian": "barna spiste epler og lekte ute husene lykkelig bilene",
    "Portuguese": "as crianças comiam maçãs e brincavam lá fora casas felizmente nacionalização",
    "Romanian": "copiii mâncau mere și se jucau afară casele fericiți naționalizare",
    "Russian": "дети ели яблоки и играли на улице домах счастливо национализация",
    "Spanish": "los niños comían manzanas y jugaban afuera casas felizmente nacionalización",
    "Swedish": "barnen åt äpplen och lekte ute husen lyckligtvis bilarna",
    "Tamil": "குழந்தைகள் ஆப்பிள்களை சாப்பிட்டார்கள் வீடுகளில்",
    "Turkish": "çocuklar elmaları yediler ve dışarıda oynadılar evlerde mutlulukla",
}


def test_every_language_has_a_sample() -> None:
    assert sorted(SAMPLES) == sorted(LANGUAGES)


@pytest.mark.parametrize("language", LANGUAGES)
def test_same_files_and_answers_as_pylance(tmp_path: Path, language: str) -> None:
    words = SAMPLES[language].split()
    texts = [SAMPLES[language], " ".join(words[::2]), " ".join(reversed(words)), words[1], None]
    params = {"language": language, "remove_stop_words": False}
    if language in ("French", "German"):  # a custom list with a language, folding off
        params = {"language": language, "custom_stop_words": [words[0].lower()], "ascii_folding": False}
    assert_same_files(tmp_path, texts, **params)
    for text in (words[1], f"{words[2]} {words[-1]}", words[0]):
        ours_query = lance_ops.query.MatchQuery(text, "text")
        theirs_query = lance.query.MatchQuery(text, "text")
        found = assert_same(tmp_path / "ours", ours_query, theirs_query)
        assert assert_same(tmp_path / "theirs", ours_query, theirs_query) == found


def test_other_languages_stop_words_are_refused(tmp_path: Path) -> None:
    write(tmp_path / "ds", [SAMPLES["French"]])
    with pytest.raises(UnsupportedFeatureError, match="French stop words"):
        lance_ops.dataset(str(tmp_path / "ds")).create_scalar_index("text", "INVERTED", language="French")
    assert lance_ops.dataset(str(tmp_path / "ds")).list_indices() == []


def test_simple_tokenizer_keeps_alphabetic_marks(tmp_path: Path) -> None:
    """Marks and symbols that are alphabetic to pylance (vowel signs, circled letters) stay inside
    a token; other marks (a virama, a combining acute accent) split it, as in pylance."""
    from lance_ops.index.tokenizer import _OTHER_ALPHABETIC

    inside = [int(end, 16) for item in _OTHER_ALPHABETIC.split() for end in item.split("-")]
    splitting = [0x0BCD, 0x0301, 0x20DD, 0x2122]
    texts = [f"a{chr(c)}b x{chr(c)} {chr(c)}y" for c in inside + splitting]
    assert_same_files(
        tmp_path, texts, stem=False, lower_case=False, remove_stop_words=False, ascii_folding=False
    )
