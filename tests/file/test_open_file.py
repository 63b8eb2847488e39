"""``open_file``: the one place a file's version picks its reader (``LanceFileReader(path)`` calls it)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from lance_ops.file import FileReader, LanceFileReader, open_file
from lance_ops.file.legacy_v0_1 import LegacyFileReader
from lance_ops.file.reader import V2FileReader
from lance_ops.io.local import LocalStore
from tests.data.golden import FILES_DIR

CASES = [
    ("0.1", "nested", LegacyFileReader),
    ("2.0", "primitives", V2FileReader),
    ("2.2", "nested", V2FileReader),
]


class CountingStore(LocalStore):
    """The local store, counting the requests a reader makes while it opens a file."""

    def __init__(self) -> None:
        self.sizes = 0
        self.reads: list[tuple[int, int]] = []

    def size(self, path: str) -> int:
        self.sizes += 1
        return super().size(path)

    def read_range(self, path: str, start: int, length: int) -> memoryview:
        self.reads.append((start, length))
        return super().read_range(path, start, length)

    def read_ranges(self, path: str, ranges: Sequence[tuple[int, int]]) -> list[memoryview]:
        self.reads.extend((int(start), int(length)) for start, length in ranges)
        return super().read_ranges(path, ranges)


@pytest.mark.parametrize(("version", "name", "kind"), CASES)
def test_the_version_picks_the_reader(version: str, name: str, kind: type[LanceFileReader]) -> None:
    path = str(FILES_DIR / version / f"{name}.lance")
    opened: FileReader = open_file(path, columns=None)
    constructed = LanceFileReader(path)
    direct = kind(path)
    for reader in (opened, constructed, direct):
        assert type(reader) is kind and isinstance(reader, LanceFileReader)
        assert str(reader.version) == version
    expected = direct.read_all().to_table()
    assert opened.read_all().to_table().equals(expected)
    assert constructed.take_rows([1, 0]).to_table().equals(expected.take([1, 0]))


@pytest.mark.parametrize(("version", "name", "kind"), CASES)
def test_the_tail_is_read_once(version: str, name: str, kind: type[LanceFileReader]) -> None:
    """Opening a file of any version with its size known is one request: its tail, which picks the
    reader and is then parsed by it (the 0.1 container reads nothing more for a small file)."""
    path = FILES_DIR / version / f"{name}.lance"
    store = CountingStore()
    reader = open_file(str(path), store=store, size=path.stat().st_size)
    assert type(reader) is kind
    assert store.sizes == 0 and len(store.reads) == 1
