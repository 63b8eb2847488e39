"""The ``lance-ops`` command line: ``inspect`` on the golden files and datasets (text and JSON),
``versions``, ``demo`` (argument passing with a stand-in job; the real Spark run is marked ``spark``)
and the error contract (one line on stderr, exit status 2, no traceback)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

import lance_ops
import lance_ops.cli
from lance_ops.cli import main
from lance_ops.file import LanceFileReader, LanceFileWriter
from tests.data.golden import DATASETS_DIR, FILES_DIR, leaf_paths, text_features

REPO = Path(__file__).resolve().parent.parent


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def run_ok(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    status, out, err = run(capsys, *argv)
    assert (status, err) == (0, "")
    return out


def assert_error(capsys: pytest.CaptureFixture[str], *argv: str, match: str) -> None:
    status, out, err = run(capsys, *argv)
    assert status == 2
    assert out == ""
    assert err.startswith("lance-ops: error: ") and err.count("\n") == 1, err
    assert match in err
    assert "Traceback" not in err


# --- inspect: data files -------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_inspect_file_text(capsys: pytest.CaptureFixture[str], version: str) -> None:
    out = run_ok(capsys, "inspect", FILES_DIR / version / "shapes.lance")
    assert f"format version {version}, 3001 rows" in out
    assert "  runs_int32: int32" in out
    assert "] runs_int32: 1 page," in out
    assert "page 0: rows 0..3001," in out
    assert "mini-block values=Rle(Flat(32), Flat(8)) layers=all_valid_item" in out
    assert "constant layers=nullable_item" in out
    assert "def=OutOfLineBitpacking(16, Flat(1))" in out
    assert "values=General(zstd, ByteStreamSplit(Flat(64)))" in out
    if version == "2.2":
        assert "constant layers=all_valid_item inline_value=8B" in out


@pytest.mark.parametrize("name", ["nested", "primitives"])
def test_inspect_legacy_v0_1_file(capsys: pytest.CaptureFixture[str], name: str) -> None:
    """0.1 files list a column per field id, parents included, each page with its legacy layout."""
    out = run_ok(capsys, "inspect", FILES_DIR / "0.1" / f"{name}.lance")
    assert "format version 0.2" in out
    if name == "nested":
        assert "] list_int32: 4 pages" in out and "] list_int32.item: 4 pages" in out
        assert "] struct.inner.tags.item:" in out


def test_inspect_file_layout_names(capsys: pytest.CaptureFixture[str]) -> None:
    out = run_ok(capsys, "inspect", FILES_DIR / "2.1" / "fullzip.lance")
    assert "full-zip values=Fsst(symbol_table=" in out
    out = run_ok(capsys, "inspect", FILES_DIR / "2.2" / "strings.lance")
    assert "mini-block values=InlineBitpacking(32) dict=General(lz4, Variable(Flat(64))) dict_items=5" in out
    out = run_ok(capsys, "inspect", FILES_DIR / "2.2" / "huge_values.lance")
    assert "full-zip values=General(zstd:0, Variable(Flat(32)))" in out


@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("name", ["multipage", "strings", "nested", "empty"])
def test_inspect_file_json(capsys: pytest.CaptureFixture[str], version: str, name: str) -> None:
    path = FILES_DIR / version / f"{name}.lance"
    report = json.loads(run_ok(capsys, "inspect", path, "--json"))
    pylance_pages = json.loads((FILES_DIR / version / "encodings.json").read_text())[name]
    assert report["kind"] == "file"
    assert report["version"] == version
    assert [c["name"] for c in report["columns"]] == leaf_paths(LanceFileReader(str(path)).schema)
    for column in report["columns"]:
        assert [text_features(p["layout"]) for p in column["pages"]] == pylance_pages[column["name"]]
        assert sum(p["rows"] for p in column["pages"]) == (report["rows"] if column["pages"] else 0)
        assert column["bytes"] == sum(size for p in column["pages"] for _, size in p["buffers"])
    if name == "multipage":
        assert report["rows"] == 2070
        assert all(len(c["pages"]) == 5 for c in report["columns"])


def test_inspect_nested_columns_named_by_leaf(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    table = pa.table(
        {
            "s": pa.array([{"a": 1, "b": "x"}, None]),
            "l": pa.array([[1, 2], None]),
            "v": pa.FixedSizeListArray.from_arrays(pa.array([1.0, 2.0, 3.0, 4.0], pa.float32()), 2),
        }
    )
    path = tmp_path / "nested.lance"
    with LanceFileWriter(str(path), version="2.1") as writer:
        writer.write_batch(table)
    report = json.loads(run_ok(capsys, "inspect", path, "--json"))
    assert [c["name"] for c in report["columns"]] == ["s.a", "s.b", "l.item", "v"]


# --- inspect: datasets ---------------------------------------------------------------------------


def test_inspect_dataset_text(capsys: pytest.CaptureFixture[str]) -> None:
    out = run_ok(capsys, "inspect", DATASETS_DIR / "deletes.lance")
    assert "version 4 (latest 4), data storage version 2.2, 428 rows, 3 fragments" in out
    assert "versions: 1, 2, 3, 4" in out
    assert "  score: double" in out
    assert "fragment 1: 68 rows (300 physical, 232 deleted)" in out
    assert out.count("_deletions/") == 3 and out.count("(file 2.2,") == 3


def test_inspect_dataset_bitmap_deletions(capsys: pytest.CaptureFixture[str]) -> None:
    out = run_ok(capsys, "inspect", DATASETS_DIR / "bitmap_deletes.lance")
    assert "fragment 0: 858 rows (6000 physical, 5142 deleted)" in out
    assert ".bin" in out


def test_inspect_dataset_json_every_version(capsys: pytest.CaptureFixture[str]) -> None:
    summary = json.loads((DATASETS_DIR / "basic.expected" / "versions.json").read_text())
    for info in summary:
        uri = DATASETS_DIR / "basic.lance"
        report = json.loads(run_ok(capsys, "inspect", uri, "--version", str(info["version"]), "--json"))
        assert report["kind"] == "dataset"
        assert (report["version"], report["latest_version"]) == (info["version"], summary[-1]["version"])
        assert report["rows"] == info["rows"] == sum(f["rows"] for f in report["fragments"])
        assert len(report["fragments"]) == info["fragments"]
        assert [f["name"] for f in report["schema"]] == info["columns"]
        assert report["versions"] == [v["version"] for v in summary]
        assert all(f["deletion_file"] is None for f in report["fragments"])
        assert all(d["path"].startswith("data/") for f in report["fragments"] for d in f["files"])


def test_inspect_dataset_in_memory_store(capsys: pytest.CaptureFixture[str]) -> None:
    uri = "memory://test-cli/people.lance"
    lance_ops.write_dataset(pa.table({"id": pa.array(range(10), pa.int64())}), uri, mode="overwrite")
    lance_ops.write_dataset(pa.table({"id": pa.array(range(5), pa.int64())}), uri, mode="append")
    out = run_ok(capsys, "inspect", uri, "--storage-option", "unused=1")
    assert "version 2 (latest 2)" in out and "15 rows, 2 fragments" in out
    assert [v["rows"] for v in json.loads(run_ok(capsys, "versions", uri, "--json"))] == [10, 15]


# --- versions ------------------------------------------------------------------------------------


def test_versions_text(capsys: pytest.CaptureFixture[str]) -> None:
    lines = run_ok(capsys, "versions", DATASETS_DIR / "deletes.lance").splitlines()
    assert lines[0].split() == [
        "version",
        "timestamp",
        "rows",
        "fragments",
        "data_files",
        "deleted_rows",
        "bytes",
    ]
    assert len(lines) == 5
    cells = lines[-1].split()
    assert (cells[0], cells[3], cells[4]) == ("4", "428", "3")


@pytest.mark.parametrize("name", ["basic", "deletes", "bitmap_deletes"])
def test_versions_json(capsys: pytest.CaptureFixture[str], name: str) -> None:
    rows = json.loads(run_ok(capsys, "versions", DATASETS_DIR / f"{name}.lance", "--json"))
    summary = json.loads((DATASETS_DIR / f"{name}.expected" / "versions.json").read_text())
    assert [(r["version"], r["rows"], r["fragments"]) for r in rows] == [
        (s["version"], s["rows"], s["fragments"]) for s in summary
    ]


# --- errors --------------------------------------------------------------------------------------


def test_missing_path(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert_error(capsys, "inspect", tmp_path / "nothing.lance", match="no Lance file or dataset")


def test_versions_of_a_non_dataset(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    status, out, err = run(capsys, "versions", tmp_path)
    assert (status, out) == (2, "")
    assert err.startswith("lance-ops: error: ") and err.count("\n") == 1


def test_garbage_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "garbage.lance"
    path.write_bytes(b"not a lance file at all" * 10)
    assert_error(capsys, "inspect", path, match=str(path))


def test_truncated_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    data = (FILES_DIR / "2.1" / "shapes.lance").read_bytes()
    path = tmp_path / "truncated.lance"
    path.write_bytes(data[: len(data) // 2])
    assert_error(capsys, "inspect", path, match="truncated.lance")


def test_unknown_dataset_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert_error(capsys, "inspect", DATASETS_DIR / "basic.lance", "--version", "99", match="99")


def test_version_option_on_a_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert_error(capsys, "inspect", FILES_DIR / "2.1" / "one_row.lance", "--version", "1", match="--version")


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (
        [],
        ["frobnicate"],
        ["inspect"],
        ["demo", "--rows", "many"],
        ["versions", "x", "--storage-option", "k"],
    ):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
    assert "usage: lance-ops" in capsys.readouterr().err


# --- demo ----------------------------------------------------------------------------------------


def _fake_pipeline(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Record the arguments ``demo`` passes to ``python -m jobs.pipeline`` instead of running it."""
    calls: list[list[str]] = []

    def run(command: list[str], check: bool) -> subprocess.CompletedProcess[str]:
        assert command[:3] == [sys.executable, "-m", "jobs.pipeline"]
        calls.append(command[3:])
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(lance_ops.cli.subprocess, "run", run)
    return calls


def test_demo_passes_options(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _fake_pipeline(monkeypatch)
    run_ok(capsys, "demo", "--uri", "memory://demo", "--rows", "5", "--master", "local[1]")
    run_ok(capsys, "demo")
    assert calls == [["--uri", "memory://demo", "--rows", "5", "--master", "local[1]"], []]


def test_demo_without_jobs(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "jobs", None)
    assert_error(capsys, "demo", match="lance-ops[spark]")


@pytest.mark.spark
def test_demo_runs_the_pipeline(tmp_path: Path) -> None:
    """The real job, in its own process (it starts and stops its own Spark session)."""
    uri = tmp_path / "demo.lance"
    command = [sys.executable, "-m", "lance_ops.cli", "demo", "--uri", str(uri), "--rows", "120"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [*command, "--master", "local[1]"], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout[done.stdout.index("{") :])
    status = subprocess.run(
        [sys.executable, "-m", "lance_ops.cli", "versions", str(uri), "--json"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    versions = json.loads(status.stdout)
    assert [step["step"] for step in summary["steps"]][:3] == ["append"] * 3
    assert [step["step"] for step in summary["steps"]][-3:] == ["tag", "statistics", "cleanup"]
    # the cleanup kept only the tagged compacted version, the latest (the statistics step commits
    # nothing: the data files the cycle wrote carry page statistics)
    assert len(versions) == 1 and versions[-1]["rows"] == summary["rows"]
