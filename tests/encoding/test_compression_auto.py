"""``compression="auto"``: smaller files that pylance 14.0.2 still reads.

Every file here is written by ``lance_ops.file.LanceFileWriter(..., compression="auto")`` in 2.1
and 2.2 and read back by pylance (whole and with ``take_rows``) and by us; the choices the
strategy makes are checked on data where the answer is known (zstd around bit-packing for a
sequence, BSS + zstd for floats, zstd around plain strings for a small alphabet, nothing for
random bytes), and the sizes against pylance's own file of the same rows.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lance_ops.errors import InvalidArgumentError, UnsupportedFeatureError
from lance_ops.file import LanceFileReader, LanceFileWriter
from tests.encoding.harness import assert_same, describe, flat_arrays, nested_arrays, pylance_pages
from tests.encoding.test_structural_interop import (
    MAP,
    NOT_REPRODUCIBLE,
    REPRODUCIBLE,
    V22_ONLY,
    field_for,
)

pytestmark = pytest.mark.interop

RNG = np.random.default_rng(7)
ALPHABET = np.frombuffer(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ", np.uint8)


def _random_strings(n: int, lo: int, hi: int) -> pa.Array:
    lengths = RNG.integers(lo, hi + 1, n)
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int32)
    chars = ALPHABET[RNG.integers(0, len(ALPHABET), int(offsets[-1]))]
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(chars)])


N = 200_000
# Shapes where zstd pays (and one where it cannot): large enough that the sample is a sample.
COMPRESSIBLE = {
    "int64 sequence": pa.array(np.arange(N, dtype=np.int64)),
    "float64 normal": pa.array(RNG.normal(size=N)),
    "float64 prices": pa.array(np.round(RNG.normal(1000, 300, N), 2)),
    "nullable float32": pa.array(RNG.normal(size=N).astype(np.float32), mask=RNG.random(N) < 0.1),
    "strings small alphabet": _random_strings(N, 4, 24),
    "nullable strings small alphabet": pa.array(
        _random_strings(N, 4, 24).to_pylist(), mask=RNG.random(N) < 0.2
    ),
    "list<int32>": pa.array([list(range(i % 6)) if i % 9 else None for i in range(N)], pa.list_(pa.int32())),
    "full-zip text": pa.array(["lorem ipsum dolor sit amet " * 12 + str(i) for i in range(3000)]),
    "full-zip binary": pa.array([b"abcdefgh" * 40 + str(i).encode() for i in range(3000)], pa.binary()),
    "dictionary strings": pa.array([f"category-{i % 40:04d}" for i in range(N)]),
    "random bytes": pa.array(RNG.integers(0, 2**63, N, dtype=np.int64)),
}
EXPECTED_PATH = {  # what "auto" must choose (pylance's default in brackets)
    "int64 sequence": "mini_block_layout/general/",  # zstd around bit-packing or BSS [inline_bitpacking]
    "float64 normal": "mini_block_layout/flat",  # zstd + BSS saves < 10 %: not worth its decode time
    "float64 prices": "mini_block_layout/general/",  # [flat]
    "strings small alphabet": "mini_block_layout/general/variable",  # [fsst/variable]
    "full-zip binary": "full_zip_layout/general/variable",  # per-value zstd [variable]
    "random bytes": "mini_block_layout/inline_bitpacking",  # zstd cannot shrink it: the default stays
}
ALL = {**REPRODUCIBLE, **NOT_REPRODUCIBLE, **COMPRESSIBLE}


def _write(
    path: Path, array: pa.Array, version: str, field: pa.Field | None = None, **options: object
) -> None:
    field = field or pa.field("c", array.type)
    with LanceFileWriter(str(path), pa.schema([field]), version=version, **options) as writer:  # type: ignore[arg-type]
        writer.write_batch(pa.table({"c": array}, schema=pa.schema([field])))


def _pylance_table(path: Path) -> pa.Table:
    from lance.file import LanceFileReader as PylanceReader

    return PylanceReader(str(path)).read_all().to_table()


def _check_both_read(path: Path, array: pa.Array) -> None:
    from lance.file import LanceFileReader as PylanceReader

    assert_same(_pylance_table(path).column("c").combine_chunks(), array, "pylance read of auto file")
    assert_same(
        LanceFileReader(str(path)).read_all().to_table().column("c").combine_chunks(), array, "our read"
    )
    n = len(array)
    if n:
        idx = sorted({0, n // 3, min(n // 2 + 1, n - 1), n - 1})
        taken = PylanceReader(str(path)).take_rows(idx).to_table().column("c").combine_chunks()
        assert_same(taken, array.take(pa.array(idx)), "pylance take of auto file")
        ours = LanceFileReader(str(path)).take_rows(np.array(idx)).to_table().column("c").combine_chunks()
        assert_same(ours, array.take(pa.array(idx)), "our take of auto file")


@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("name", list(ALL))
def test_pylance_reads_auto_files(tmp_path: Path, name: str, version: str) -> None:
    array = ALL[name]
    path = tmp_path / "c.lance"
    _write(path, array, version, field_for(name, array), compression="auto")
    _check_both_read(path, array)


@pytest.mark.parametrize("name", [*V22_ONLY, "map"])
def test_pylance_reads_auto_files_22_only(tmp_path: Path, name: str) -> None:
    array = MAP if name == "map" else V22_ONLY[name]
    path = tmp_path / "c.lance"
    _write(path, array, "2.2", field_for(name, array), compression="auto")
    _check_both_read(path, array)


@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("name", list(EXPECTED_PATH))
def test_auto_chooses(tmp_path: Path, name: str, version: str) -> None:
    path = tmp_path / "c.lance"
    _write(path, COMPRESSIBLE[name], version, compression="auto")
    layouts = {describe(page.layout) for page in pylance_pages(str(path))[0]}
    assert len(layouts) == 1
    assert layouts.pop().startswith(EXPECTED_PATH[name])


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_auto_files_smaller_than_pylance(tmp_path: Path, version: str) -> None:
    """10 % smaller than pylance's file on the mix; per column never larger than our default."""
    from lance.file import LanceFileWriter as PylanceWriter

    table = pa.table({k: v for k, v in COMPRESSIBLE.items() if len(v) == N})
    ours, theirs = tmp_path / "ours.lance", tmp_path / "theirs.lance"
    with LanceFileWriter(str(ours), table.schema, version=version, compression="auto") as writer:
        writer.write_batch(table)
    with PylanceWriter(str(theirs), table.schema, version=version) as writer:
        writer.write_batch(table)
    assert _pylance_table(ours).equals(table)
    assert os.path.getsize(ours) <= 0.9 * os.path.getsize(theirs)
    for name, array in COMPRESSIBLE.items():  # and never larger than our default's file
        one, other = tmp_path / f"a-{name}.lance", tmp_path / f"b-{name}.lance"
        _write(one, array, version, compression="auto")
        _write(other, array, version)
        assert os.path.getsize(one) <= os.path.getsize(other), name


def test_field_metadata_wins_over_auto(tmp_path: Path) -> None:
    array = COMPRESSIBLE["int64 sequence"]
    path = tmp_path / "c.lance"
    field = pa.field("c", array.type, metadata={"lance-encoding:compression": "none"})
    _write(path, array, "2.2", field, compression="auto")
    assert {describe(p.layout) for p in pylance_pages(str(path))[0]} == {"mini_block_layout/flat"}
    _check_both_read(path, array)


def test_writer_scheme_is_a_default_for_every_leaf(tmp_path: Path) -> None:
    """``compression="zstd"`` writes what ``lance-encoding:compression=zstd`` on the leaf writes."""
    array = pa.array([[i * 7919 % 100_003] * (i % 5) for i in range(20_000)], pa.list_(pa.int64()))
    a, b = tmp_path / "a.lance", tmp_path / "b.lance"
    _write(a, array, "2.2", compression="zstd")
    leaf = pa.field("item", pa.int64(), metadata={"lance-encoding:compression": "zstd"})
    _write(b, array, "2.2", pa.field("c", pa.list_(leaf)))
    pages_a, pages_b = pylance_pages(str(a)), pylance_pages(str(b))
    assert [describe(p.layout) for p in pages_a[0]] == [describe(p.layout) for p in pages_b[0]]
    assert describe(pages_a[0][0].layout).startswith("mini_block_layout/general/")
    assert [p.buffers for p in pages_a[0]] == [p.buffers for p in pages_b[0]]
    _check_both_read(a, array)


@pytest.mark.parametrize("bad", ["brotli", "AUTO2", "", 3])
def test_unknown_compression_is_refused(tmp_path: Path, bad: object) -> None:
    path = tmp_path / "c.lance"
    with pytest.raises(InvalidArgumentError, match="compression must be one of"):
        LanceFileWriter(str(path), pa.schema([pa.field("c", pa.int32())]), compression=bad)  # type: ignore[arg-type]
    assert not path.exists()


def test_auto_needs_a_structural_version(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedFeatureError, match="2.1 or 2.2"):
        LanceFileWriter(
            str(tmp_path / "c.lance"),
            pa.schema([pa.field("c", pa.int32())]),
            version="2.0",
            compression="auto",
        )
    assert not (tmp_path / "c.lance").exists()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(array=st.one_of(flat_arrays(), nested_arrays()), version=st.sampled_from(["2.1", "2.2"]))
def test_auto_round_trips_through_pylance(tmp_path: Path, array: pa.Array, version: str) -> None:
    if pa.types.is_map(array.type) and version == "2.1":
        version = "2.2"
    path = tmp_path / f"h-{version}.lance"
    if path.exists():
        path.unlink()
    _write(path, array, version, compression="auto")
    _check_both_read(path, array)


def test_write_dataset_auto_is_stored_and_followed_by_appends(tmp_path: Path) -> None:
    import lance

    from lance_ops import dataset, write_dataset

    table = pa.table({"s": COMPRESSIBLE["strings small alphabet"], "i": COMPRESSIBLE["int64 sequence"]})
    auto, plain = tmp_path / "auto", tmp_path / "plain"
    write_dataset(table, str(auto), compression="auto")
    write_dataset(table, str(plain))
    assert dataset(str(auto)).config()["lance-ops.compression"] == "auto"
    write_dataset(table, str(auto), mode="append")  # follows the stored choice
    theirs = lance.dataset(str(auto))
    assert theirs.to_table().equals(pa.concat_tables([table, table]))
    assert len(theirs.get_fragments()) == 2
    plain_size = sum(p.stat().st_size for p in (plain / "data").iterdir())
    assert len(list((auto / "data").iterdir())) == 2
    for path in (auto / "data").iterdir():
        assert path.stat().st_size <= 0.9 * plain_size
    with pytest.raises(InvalidArgumentError):
        write_dataset(table, str(tmp_path / "bad"), compression="gzip")
    assert not (tmp_path / "bad").exists()
