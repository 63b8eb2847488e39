"""Fixtures for the file tests: ``fake_codec`` swaps the real codec for a raw test codec."""

from __future__ import annotations

import pytest

import lance_ops.encoding
from tests.file import fake_codec


@pytest.fixture
def fake_codec_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("make_field_encoder", "make_field_decoder", "num_columns"):
        monkeypatch.setattr(lance_ops.encoding, name, getattr(fake_codec, name), raising=False)
