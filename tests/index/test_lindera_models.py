"""L18: ``lindera/<model>`` tokenizers. lance_ops builds none, but a model that pylance 14 fails to
load raises what pylance raises (an ``OSError``: :class:`LanguageModelError`), and one that would
load is refused as unsupported. Nothing is committed either way. (pylance 14 raises a
``ValueError`` for a missing model directory and an ``OSError`` for a config that fails to load;
:class:`LanguageModelError` is both.)"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import lance_ops
from lance_ops.errors import LanguageModelError, UnsupportedFeatureError

pytestmark = pytest.mark.interop


@pytest.fixture()
def model_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "models"
    (home / "lindera").mkdir(parents=True)
    monkeypatch.setenv("LANCE_LANGUAGE_MODEL_HOME", str(home))
    return home


def _config(home: Path, name: str, text: str) -> None:
    (home / "lindera" / name).mkdir()
    (home / "lindera" / name / "config.yml").write_text(text)


def _both(tmp_path: Path, base_tokenizer: str) -> tuple[BaseException, BaseException]:
    import lance

    data = pa.table({"text": ["成田国際空港"]})
    errors = []
    for name, lib in (("ours", lance_ops), ("theirs", lance)):
        ds = lib.write_dataset(data, str(tmp_path / name))
        with pytest.raises(Exception) as info:
            ds.create_scalar_index("text", "INVERTED", base_tokenizer=base_tokenizer)
        errors.append(info.value)
        assert lance.dataset(str(tmp_path / name)).version == 1  # nothing committed
        assert lance.dataset(str(tmp_path / name)).describe_indices() == []
    return errors[0], errors[1]


def test_missing_model_directory(tmp_path: Path, model_home: Path) -> None:
    ours, theirs = _both(tmp_path, "lindera/nowhere")
    assert isinstance(theirs, ValueError)
    assert isinstance(ours, LanguageModelError) and isinstance(ours, ValueError)
    assert "nowhere" in str(ours)


@pytest.mark.parametrize("key", ["dictionary", "user_dictionary"])
def test_config_naming_a_missing_dictionary(tmp_path: Path, model_home: Path, key: str) -> None:
    _config(model_home, "broken", f'segmenter:\n  mode: "normal"\n  {key}:\n    path: "{tmp_path}/no.bin"\n')
    ours, theirs = _both(tmp_path, "lindera/broken")
    assert isinstance(theirs, OSError)
    assert isinstance(ours, LanguageModelError)
    assert "no.bin" in str(ours)


def test_config_not_yaml(tmp_path: Path, model_home: Path) -> None:
    _config(model_home, "garbled", "segmenter: [unclosed\n")
    with pytest.raises(LanguageModelError, match="config.yml"):
        lance_ops.write_dataset(pa.table({"text": ["a"]}), str(tmp_path / "d")).create_scalar_index(
            "text", "INVERTED", base_tokenizer="lindera/garbled"
        )


def test_loadable_model_is_unsupported(tmp_path: Path, model_home: Path) -> None:
    dictionary = tmp_path / "dict"
    dictionary.mkdir()
    _config(model_home, "ok", f'segmenter:\n  mode: "normal"\n  dictionary:\n    path: "{dictionary}"\n')
    ds = lance_ops.write_dataset(pa.table({"text": ["a"]}), str(tmp_path / "d"))
    with pytest.raises(UnsupportedFeatureError, match="lindera/ok"):
        ds.create_scalar_index("text", "INVERTED", base_tokenizer="lindera/ok")
    assert lance_ops.dataset(str(tmp_path / "d")).describe_indices() == []
