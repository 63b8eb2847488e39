"""Fixtures for the file tests: ``fake_codec`` swaps the real codec for a raw test codec."""

from __future__ import annotations

import pytest

from lance_ops.file.page_statistics import PageStatisticsCollector
from tests.file import fake_codec


@pytest.fixture
def fake_codec_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The raw test codec; files written with it carry no page statistics (it cannot encode the
    struct columns of the statistics file a data file embeds)."""
    for module, name in (
        ("field_encoder", "make_field_encoder"),
        ("field_decoder", "make_field_decoder"),
        ("columns", "num_columns"),
    ):
        monkeypatch.setattr(f"lance_ops.encoding.{module}.{name}", getattr(fake_codec, name))
    monkeypatch.setattr(PageStatisticsCollector, "table", lambda self: None)
