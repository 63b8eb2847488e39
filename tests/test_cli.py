"""The ``lance-ops`` command line (click's CliRunner): every command on real datasets (text and
``--json``), dry runs that write nothing, the exit-status contract (0 ok, 1 failed, 2 usage; one
line on stderr, no traceback without ``--debug``), the progress bar and the HTML report."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from click.testing import CliRunner, Result
from rich.console import Console

import lance_ops
from lance_ops.cli import cli, main
from lance_ops.cli import commands as commands_module
from lance_ops.cli.output import ProgressBar
from lance_ops.encoding.plan import CONFIG_KEY as PLAN_CONFIG_KEY
from lance_ops.file import LanceFileReader, LanceFileWriter
from lance_ops.ops import encodings as encodings_op
from tests.data.golden import DATASETS_DIR, FILES_DIR, leaf_paths, text_features

REPO = Path(__file__).resolve().parent.parent


def invoke(*argv: object) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in argv])


def ok(*argv: object) -> str:
    result = invoke(*argv)
    assert (result.exit_code, result.stderr) == (0, ""), result.stderr or result.exception
    return result.stdout


def ok_json(*argv: object) -> Any:
    return json.loads(ok(*argv, "--json"))


def failed(*argv: object, status: int, match: str) -> str:
    """The command fails with ``status``, nothing on stdout and one line on stderr naming ``match``."""
    result = invoke(*argv)
    assert result.exit_code == status, (result.stdout, result.stderr)
    assert result.stdout == ""
    kind = "usage" if status == 2 else "error"
    assert result.stderr.startswith(f"lance-ops: {kind}: ") and result.stderr.count("\n") == 1, result.stderr
    assert match in result.stderr
    assert "Traceback" not in result.stderr
    return result.stderr


def listing(root: Path) -> list[tuple[str, int, int]]:
    """Every file below ``root`` with its size and modification time."""
    return sorted(
        (str(p.relative_to(root)), p.stat().st_size, p.stat().st_mtime_ns)
        for p in root.rglob("*")
        if p.is_file()
    )


def table(rows: int, start: int = 0) -> pa.Table:
    ids = list(range(start, start + rows))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "cat": pa.array([f"c{i % 3}" for i in ids]),
            "score": pa.array([i / 4 for i in ids], pa.float64()),
        }
    )


@pytest.fixture
def uri(tmp_path: Path) -> Path:
    """A dataset with four versions: a create and two appends (six small fragments), then a delete;
    its files carry no page statistics (as pylance writes them), so ``stats --rebuild`` has work."""
    path = tmp_path / "people.lance"
    plain = {"page_statistics": False}
    lance_ops.write_dataset(table(40), path, max_rows_per_file=20, **plain)
    lance_ops.write_dataset(table(20, 40), path, mode="append", max_rows_per_file=10, **plain)
    lance_ops.write_dataset(table(20, 60), path, mode="append", max_rows_per_file=10, **plain)
    lance_ops.dataset(path).delete("id % 10 = 0")
    return path


# --- inspect: data files -------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_inspect_file_pages(version: str) -> None:
    out = ok("inspect", FILES_DIR / version / "shapes.lance", "--pages")
    assert f"format version {version}, 3001 rows" in out
    assert "  runs_int32: int32" in out
    assert "page 0: rows 0..3001," in out
    assert "mini-block values=Rle(Flat(32), Flat(8)) layers=all_valid_item" in out
    assert "constant layers=nullable_item" in out
    assert "def=OutOfLineBitpacking(16, Flat(1))" in out
    assert "values=General(zstd, ByteStreamSplit(Flat(64)))" in out
    if version == "2.2":
        assert "constant layers=all_valid_item inline_value=8B" in out


def test_inspect_file_without_pages_summarises_columns() -> None:
    out = ok("inspect", FILES_DIR / "2.1" / "shapes.lance")
    assert "page 0:" not in out
    row = next(line for line in out.splitlines() if line.startswith("runs_int32 "))
    assert row.split()[1:3] == ["1", str(sum(c["bytes"] for c in _columns("runs_int32")))]
    assert "mini-block/Rle" in row


def _columns(name: str) -> list[dict[str, Any]]:
    report = ok_json("inspect", FILES_DIR / "2.1" / "shapes.lance")
    return [c for c in report["columns"] if c["name"] == name]


@pytest.mark.parametrize("name", ["nested", "primitives"])
def test_inspect_legacy_v0_1_file(name: str) -> None:
    """0.1 files list a column per field id, parents included."""
    report = ok_json("inspect", FILES_DIR / "0.1" / f"{name}.lance", "--pages")
    assert report["version"] == "0.2"
    names = [c["name"] for c in report["columns"]]
    if name == "nested":
        assert "list_int32" in names and "list_int32.item" in names and "struct.inner.tags.item" in names
        assert [len(c["pages"]) for c in report["columns"] if c["name"] == "list_int32"] == [4]


def test_inspect_file_layout_names() -> None:
    out = ok("inspect", FILES_DIR / "2.1" / "fullzip.lance", "--pages")
    assert "full-zip values=Fsst(symbol_table=" in out
    out = ok("inspect", FILES_DIR / "2.2" / "strings.lance", "--pages")
    assert "mini-block values=InlineBitpacking(32) dict=General(lz4, Variable(Flat(64))) dict_items=5" in out
    out = ok("inspect", FILES_DIR / "2.2" / "huge_values.lance", "--pages")
    assert "full-zip values=General(zstd:0, Variable(Flat(32)))" in out
    assert "full-zip/General(zstd)" in ok("inspect", FILES_DIR / "2.2" / "huge_values.lance")


@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("name", ["multipage", "strings", "nested", "empty"])
def test_inspect_file_json_matches_pylance_pages(version: str, name: str) -> None:
    path = FILES_DIR / version / f"{name}.lance"
    report = ok_json("inspect", path, "--pages")
    pylance_pages = json.loads((FILES_DIR / version / "encodings.json").read_text())[name]
    assert (report["kind"], report["version"]) == ("file", version)
    assert [c["name"] for c in report["columns"]] == leaf_paths(LanceFileReader(str(path)).schema)
    for column in report["columns"]:
        assert [text_features(p["layout"]) for p in column["pages"]] == pylance_pages[column["name"]]
        assert sum(p["rows"] for p in column["pages"]) == (report["rows"] if column["pages"] else 0)
        assert column["bytes"] == sum(size for p in column["pages"] for _, size in p["buffers"])
        assert sum(column["encodings"].values()) == column["bytes"]
    if name == "multipage":
        assert report["rows"] == 2070
        assert all(len(c["pages"]) == 5 for c in report["columns"])
    assert all("pages" not in c for c in ok_json("inspect", path)["columns"])


def test_inspect_nested_columns_named_by_leaf(tmp_path: Path) -> None:
    data = pa.table(
        {
            "s": pa.array([{"a": 1, "b": "x"}, None]),
            "l": pa.array([[1, 2], None]),
            "v": pa.FixedSizeListArray.from_arrays(pa.array([1.0, 2.0, 3.0, 4.0], pa.float32()), 2),
        }
    )
    path = tmp_path / "nested.lance"
    with LanceFileWriter(str(path), version="2.1") as writer:
        writer.write_batch(data)
    assert [c["name"] for c in ok_json("inspect", path)["columns"]] == ["s.a", "s.b", "l.item", "v"]


# --- inspect: datasets ---------------------------------------------------------------------------


def test_inspect_dataset_text() -> None:
    out = ok("inspect", DATASETS_DIR / "deletes.lance")
    assert "version 4 (latest 4), data storage version 2.2, 428 rows, 3 fragments" in out
    assert "versions: 1, 2, 3, 4" in out
    assert "  score: double" in out
    fragment_1 = next(line.split() for line in out.splitlines() if line.strip().startswith("1 "))
    assert fragment_1[:4] == ["1", "68", "300", "232"]
    assert out.count("_deletions/") == 3 and out.count("(file 2.2,") == 3


def test_inspect_dataset_json_every_version() -> None:
    summary = json.loads((DATASETS_DIR / "basic.expected" / "versions.json").read_text())
    for info in summary:
        report = ok_json("inspect", DATASETS_DIR / "basic.lance", "--version", info["version"])
        assert report["kind"] == "dataset"
        assert (report["version"], report["latest_version"]) == (info["version"], summary[-1]["version"])
        assert report["rows"] == info["rows"] == sum(f["rows"] for f in report["fragments"])
        assert len(report["fragments"]) == info["fragments"]
        assert [f["name"] for f in report["schema"]] == info["columns"]
        assert report["versions"] == [v["version"] for v in summary]
        assert all(d["path"].startswith("data/") for f in report["fragments"] for d in f["files"])


def test_inspect_dataset_pages(uri: Path) -> None:
    report = ok_json("inspect", uri, "--pages")
    for fragment in report["fragments"]:
        for data_file in fragment["files"]:
            assert [c["name"] for c in data_file["columns"]] == ["id", "cat", "score"]
            pages = [p for c in data_file["columns"] for p in c["pages"]]
            assert sum(p["rows"] for p in pages) == 3 * fragment["physical_rows"]
    assert "page 0: rows 0..20," in ok("inspect", uri, "--pages")


def test_memory_store_uri_with_storage_options() -> None:
    """Every opening of a memory:// URI is a new, empty store (as in pylance): what another call
    wrote there is not found, and the storage options a memory store ignores are accepted."""
    path = "memory://test-cli/people.lance"
    lance_ops.write_dataset(table(10), path, mode="overwrite")
    failed(
        "inspect",
        path,
        "--storage-option",
        "unused=1",
        status=1,
        match="no Lance file or dataset at memory://",
    )
    failed("versions", path, "--storage-option", "a=b", status=1, match="no Lance dataset")


# --- versions and history ------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["basic", "deletes", "bitmap_deletes"])
def test_versions_json(name: str) -> None:
    rows = ok_json("versions", DATASETS_DIR / f"{name}.lance")
    summary = json.loads((DATASETS_DIR / f"{name}.expected" / "versions.json").read_text())
    assert [(r["version"], r["rows"], r["fragments"]) for r in rows] == [
        (s["version"], s["rows"], s["fragments"]) for s in summary
    ]


def test_versions_and_history_text(uri: Path) -> None:
    lines = ok("versions", uri).splitlines()
    assert lines[0].split() == [
        "version",
        "timestamp",
        "rows",
        "fragments",
        "data_files",
        "deleted_rows",
        "bytes",
    ]
    assert [line.split()[0] for line in lines[1:]] == ["1", "2", "3", "4"]
    history = ok("history", uri)
    assert [line.split()[3] for line in history.splitlines()[1:]] == [
        "Overwrite",
        "Append",
        "Append",
        "Delete",
    ]


def test_history_json(uri: Path) -> None:
    rows = ok_json("history", uri)
    assert [r["operation"] for r in rows] == ["Overwrite", "Append", "Append", "Delete"]
    assert [r["rows"] for r in rows] == [40, 60, 80, 72]
    assert [r["deleted_rows"] for r in rows] == [0, 0, 0, 8]
    assert rows[-1]["read_version"] == 3 and isinstance(rows[-1]["transaction_properties"], dict)


# --- tags and restore ----------------------------------------------------------------------------


def test_tags_cycle(uri: Path) -> None:
    assert ok_json("tags", "list", uri) == []
    assert ok_json("tags", "create", uri, "first", 1) == {"tag": "first", "version": 1, "action": "create"}
    assert "created tag good -> version 4" in ok("tags", "create", uri, "good", 4)
    assert [(t["name"], t["version"]) for t in ok_json("tags", "list", uri)] == [("first", 1), ("good", 4)]
    ok("tags", "update", uri, "first", "2")
    assert lance_ops.dataset(uri).tags.get_version("first") == 2
    assert ok_json("tags", "delete", uri, "first") == {"tag": "first", "action": "delete"}
    assert list(lance_ops.dataset(uri).tags.list()) == ["good"]
    failed("tags", "create", uri, "good", 1, status=1, match="good")
    failed("tags", "delete", uri, "nope", status=1, match="nope")


def test_restore_a_version_and_a_tag(uri: Path) -> None:
    assert ok_json("restore", uri, 2) == {"restored": 2, "version": 5, "rows": 60}
    lance_ops.dataset(uri).tags.create("full", 3)
    assert "restored version 3 as version 6 (80 rows)" in ok("restore", uri, "full")
    assert lance_ops.dataset(uri).count_rows() == 80
    failed("restore", uri, 99, status=1, match="99")


# --- changes and their dry runs ------------------------------------------------------------------


def test_delete_dry_run_writes_nothing(uri: Path) -> None:
    before = listing(uri)
    assert ok_json("delete", uri, "--where", "id < 30", "--dry-run") == {
        "dry_run": True,
        "deleted_rows": 27,
        "version": 4,
    }
    assert "would delete 27 rows" in ok("delete", uri, "--where", "id < 30", "--dry-run")
    assert listing(uri) == before
    assert ok_json("delete", uri, "--where", "id < 30") == {
        "dry_run": False,
        "deleted_rows": 27,
        "version": 5,
    }
    assert lance_ops.dataset(uri).count_rows() == 72 - 27
    failed("delete", uri, "--where", "nope > 1", status=1, match="nope")


def test_add_column(uri: Path) -> None:
    result = ok_json("add-column", uri, "twice=id * 2", "label=concat(cat, '!')")
    assert result["added"] == ["twice", "label"] and result["schema"] == [
        "id",
        "cat",
        "score",
        "twice",
        "label",
    ]
    got = lance_ops.dataset(uri).to_table(columns=["id", "twice", "label"], filter="id = 7").to_pylist()
    assert got == [{"id": 7, "twice": 14, "label": "c1!"}]
    failed("add-column", uri, "x=no_such_column + 1", status=1, match="no_such_column")
    failed("add-column", uri, "no-equals-sign", status=2, match="KEY=VALUE")


def test_compact_dry_run_then_compact(uri: Path) -> None:
    before = listing(uri)
    plan = ok_json("compact", uri, "--dry-run")
    assert plan["dry_run"] and plan["read_version"] == 4
    assert [t["fragment_ids"] for t in plan["tasks"]] == [[0, 1, 2, 3, 4, 5]]
    text = ok("compact", uri, "--dry-run")
    assert "1 task(s) would rewrite 6 fragment(s): 72 rows kept, 8 deleted rows dropped" in text
    assert "nothing written (dry run)" in text
    header, task = text.splitlines()[1:3]
    assert header.split() == ["task", "fragments", "count", "rows", "deleted_rows", "bytes"]
    assert task.split()[:5] == ["0", "0-5", "6", "72", "8"]  # fragment ids as a range
    assert listing(uri) == before
    result = ok_json("compact", uri)
    assert (result["version"], result["fragments_removed"], result["fragments_added"]) == (6, 6, 1)
    ds = lance_ops.dataset(uri)
    assert len(ds.get_fragments()) == 1 and ds.count_rows() == 72
    policy = "(--target-rows-per-fragment=1048576, --deletion-threshold=0.1)"
    assert ok("compact", uri).strip() == f"nothing to compact: 1 fragment, all within the policy {policy}"


def test_compact_dry_run_with_nothing_to_do_says_so(uri: Path) -> None:
    """No squashed empty table: one line naming the fragments and the policy, in flags."""
    out = ok("compact", uri, "--dry-run", "--target-rows-per-fragment", "5", "--keep-deletions")
    assert out == (
        "nothing to compact: 6 fragments, all within the policy "
        "(--target-rows-per-fragment=5, --keep-deletions) (dry run)\n"
    )
    assert (
        ok_json("compact", uri, "--dry-run", "--target-rows-per-fragment", "5", "--keep-deletions")["tasks"]
        == []
    )


def test_compact_options(uri: Path) -> None:
    plan = ok_json("compact", uri, "--dry-run", "--target-rows-per-fragment", "30", "--num-threads", "1")
    assert [t["fragment_ids"] for t in plan["tasks"]] == [[0, 1], [2, 3, 4, 5]]
    failed("compact", uri, "--target-rows-per-fragment", "0", status=2, match="--target-rows-per-fragment")


def test_cleanup_dry_run_writes_nothing_then_cleanup(uri: Path) -> None:
    ok("tags", "create", uri, "keep", 2)
    before = listing(uri)
    failed("cleanup", uri, "--older-than", "0s", status=1, match="keep")
    dry = ok_json("cleanup", uri, "--older-than", "0s", "--dry-run", "--allow-tagged")
    assert dry["dry_run"] and dry["old_versions"] == 2 and dry["paths"]
    assert "(dry run)" in ok("cleanup", uri, "--older-than", "0s", "--dry-run", "--allow-tagged")
    assert listing(uri) == before
    assert ok_json("cleanup", uri, "--dry-run")["paths"] == []  # nothing is two weeks old
    done = ok_json("cleanup", uri, "--older-than", "0s", "--allow-tagged")
    assert done["paths"] == dry["paths"] and not done["dry_run"]
    removed = {p for p, _, _ in before} - {p for p, _, _ in listing(uri)}
    assert removed == set(dry["paths"])
    assert [v["version"] for v in ok_json("versions", uri)] == [2, 4]
    failed("cleanup", uri, "--older-than", "soon", status=2, match="--older-than")


def test_cleanup_refusal_names_the_flag(uri: Path) -> None:
    """The library tells Python callers about ``error_if_tagged_old_versions=False``; the command
    line names its own flag."""
    ok("tags", "create", uri, "keep", 2)
    message = failed("cleanup", uri, "--older-than", "0s", status=1, match="Pass --allow-tagged")
    assert "error_if_tagged_old_versions" not in message and "'keep': 2" in message
    failed("cleanup", uri, "--older-than", "99999999999w", status=2, match="longer than a timedelta")


def test_cleanup_retain_versions(uri: Path) -> None:
    result = ok_json("cleanup", uri, "--retain-versions", "3", "--older-than", "0s")
    assert result["old_versions"] == 1
    assert [v["version"] for v in ok_json("versions", uri)] == [2, 3, 4]


def test_stats_rebuild(uri: Path) -> None:
    before = ok_json("stats", uri)
    assert before["rebuilt_fragments"] == [] and before["dataset"]["num_deleted_rows"] == 8
    assert all(c["fragments_with_statistics"] == 0 for c in before["columns"])
    result = ok_json("stats", uri, "--rebuild")
    assert result["version"] == 5 and result["rebuilt_fragments"] == list(range(6))
    by_name = {c["column"]: c for c in result["columns"]}
    assert (by_name["id"]["min_value"], by_name["id"]["max_value"]) == (0, 79)
    assert by_name["cat"]["distinct_count"] == 3 and by_name["id"]["fragments_with_statistics"] == 6
    assert ok_json("stats", uri, "--rebuild", "--column", "id")["rebuilt_fragments"] == []
    assert "statistics rebuilt for 0 fragment(s)" in ok("stats", uri, "--rebuild")
    failed("stats", uri, "--force", status=2, match="--rebuild")
    failed("stats", uri, "--column", "nope", status=1, match="nope")


def test_stats_of_bounds_python_cannot_hold(tmp_path: Path) -> None:
    """A date32 column holding its type's min: the bound shows as its integer and type."""
    uri = tmp_path / "dates"
    dates = pa.array([-(2**31), 5], pa.int32()).view(pa.date32())
    lance_ops.write_dataset(pa.table({"d": dates}), str(uri))
    assert pytest.importorskip("lance").dataset(str(uri)).to_table().column("d").chunk(0) == dates
    (column,) = ok_json("stats", uri)["columns"]
    assert (column["min_value"], column["max_value"]) == ("-2147483648 (date32[day])", "1970-01-06")
    assert "-2147483648 (date32[day])" in ok("stats", uri)


def test_stats_say_what_they_count(uri: Path) -> None:
    """After a delete and an add-column, statistics count the deleted rows (their nulls too): the
    table says so in its headings and a note, and gives the live-row null count where it is known."""
    ds = lance_ops.dataset(uri)
    ds.add_columns({"twice": "id * 2"})  # written with nulls for the 8 deleted rows
    ds.stats.rebuild()
    by_name = {c["column"]: c for c in ok_json("stats", uri)["columns"]}
    twice = by_name["twice"]
    assert twice["null_count"] == 8 and twice["counted_rows"] == {"physical_rows": 80, "deleted_rows": 8}
    assert twice["live_null_count"] is None  # fragments with deleted rows would have to be read
    assert by_name["id"]["live_null_count"] == 0  # no null at all: none among the live rows either
    live = {c["column"]: c for c in ok_json("stats", uri, "--live")["columns"]}
    assert {name: c["live_null_count"] for name, c in live.items()} == {
        "id": 0,
        "cat": 0,
        "score": 0,
        "twice": 0,
    }
    out = ok("stats", uri, "--live")
    assert "72 live rows, 8 deleted rows" in out
    header = out.splitlines()[1]
    for heading in (
        "nulls (live rows)",
        "nulls (all rows, incl. deleted)",
        "min (bound)",
        "distinct (estimate",
    ):
        assert heading in header
    row = next(line for line in out.splitlines() if line.startswith("twice "))
    assert row.split()[1:3] == ["0", "8"] and row.rstrip().endswith("6 of 6")
    assert ok("stats", uri).splitlines()[2].split()[:3] == ["id", "0", "0"]
    assert "they count deleted rows too" in out
    assert "pass --live" in ok("stats", uri) and "pass --live" not in out


def test_profile_and_store(uri: Path) -> None:
    result = ok_json("profile", uri)
    plan = {c["column"]: c for c in result["columns"]}
    assert set(plan) == {"id", "cat", "score"} and result["stored_in_version"] is None
    expected = encodings_op.profile(lance_ops.dataset(uri))
    assert {name: plan[name]["dictionary"] for name in plan} == {
        name: column.dictionary for name, column in expected.columns.items()
    }
    assert "Encoding plan" in ok("profile", uri, "--column", "cat")
    stored = ok_json("profile", uri, "--store")
    assert stored["stored_in_version"] == 5
    assert PLAN_CONFIG_KEY in lance_ops.dataset(uri).manifest.config


# --- the report ----------------------------------------------------------------------------------


def test_report_renders_every_plot(uri: Path, tmp_path: Path) -> None:
    lance_ops.dataset(uri).add_columns({"twice": "id * 2"})
    output = tmp_path / "report.html"
    result = ok_json("report", uri, "-o", output)
    assert result["output"] == str(output) and result["version"] == 5
    page = output.read_text()
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    for section in ("history", "encodings", "compression", "fragments", "columns"):
        assert f'<section id="{section}">' in page
    assert page.count("<svg") == 4
    # self-contained: nothing fetched from anywhere
    assert not re.search(r"<script|<link|<img|src=|href=\"http|url\((?!#)", page)
    assert "mini-block/" in page and "twice" in page


def test_report_figures_show_the_data(uri: Path) -> None:
    from lance_ops import report

    data = report.collect(lance_ops.dataset(uri))
    assert [row["rows"] for row in data.history] == [40, 60, 80, 72]
    history = report.history_figure(data.history)
    rows_line = history.axes[0].get_lines()[0]
    assert list(rows_line.get_xdata()) == [1, 2, 3, 4] and list(rows_line.get_ydata()) == [40, 60, 80, 72]
    by_column = {c["column"]: c for c in data.columns}
    assert set(by_column) == {"id", "cat", "score"}
    assert all(c["bytes"] > 0 and c["raw_bytes"] > 0 for c in data.columns)
    assert by_column["id"]["raw_bytes"] == 8 * 80  # physical rows, deleted ones included
    encodings = report.column_encodings_figure(data.columns)
    stacked = sum(p.get_width() for p in encodings.axes[0].patches)
    assert stacked == pytest.approx(sum(c["bytes"] for c in data.columns))
    ratios = report.compression_figure(data.columns).axes[0].patches
    assert [round(p.get_width(), 6) for p in ratios] == [
        round(c["compression_ratio"], 6) for c in data.columns
    ]
    sizes = report.fragment_sizes_figure(data.fragments)
    assert sum(p.get_height() for p in sizes.axes[0].patches) == 6
    assert report.png_data_uri(sizes).startswith("data:image/png;base64,")


def test_report_figures_read_well() -> None:
    """Plain integer ticks (no ``+2.571e4`` offset), room for the longest bar's label, and a series
    of one point drawn as a labelled bar with a note, not a lone dot."""
    from lance_ops import report

    row = {"version": 25_710, "rows": 25_712, "fragments": 3, "bytes": 1_000_000, "deleted_rows": 0}
    history = [row, {**row, "version": 25_711, "rows": 25_716}]
    rows_ax = report.history_figure(history).axes[0]
    for axis in (rows_ax.xaxis, rows_ax.yaxis):
        assert axis.get_major_formatter()(25_712, 0) == "25,712"
    single = report.history_figure(history[:1])
    assert "only version 25710" in single.get_suptitle()
    for ax in single.axes:
        assert not ax.get_lines() and len(ax.patches) == 1 and list(ax.get_xticks()) == [25_710]
    assert single.axes[0].texts[0].get_text() == "25,712"
    columns = [
        {"column": "a", "compression_ratio": 11.6, "encodings": {"x": 900}},
        {"column": "b", "compression_ratio": 1.0, "encodings": {"y": 100}},
    ]
    assert report.compression_figure(columns).axes[0].get_xlim()[1] >= 11.6 * 1.1
    assert report.column_encodings_figure(columns).axes[0].get_xlim()[1] >= 900 * 1.1
    sizes = report.fragment_sizes_figure([(5, 700)])
    assert sizes.get_suptitle() == "Fragment sizes (1 fragment)"
    assert [t.get_text() for t in sizes.axes[1].get_xticklabels()] == ["700"]


def test_report_without_matplotlib(uri: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(commands_module.importlib.util, "find_spec", lambda name: None)
    failed("report", uri, "-o", tmp_path / "r.html", status=1, match="lance-ops[report]")
    assert not (tmp_path / "r.html").exists()


# --- progress ------------------------------------------------------------------------------------


def test_progress_bar_draws_operations(uri: Path) -> None:
    out = Console(file=open(os.devnull, "w"), force_terminal=True, width=120)  # noqa: SIM115
    with ProgressBar(out) as bar:
        lance_ops.dataset(uri).optimize.compact_files(target_rows_per_fragment=30, progress=bar)
        lance_ops.dataset(uri).stats.rebuild(force=True, progress=bar)  # compaction wrote page statistics
    out.file.close()
    assert bar.state == {"compact": (2, 2), "statistics": (2, 2)}


def test_commands_pass_a_progress_bar(uri: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bars: list[ProgressBar] = []

    class Recording(ProgressBar):
        def __init__(self) -> None:
            super().__init__()
            bars.append(self)

    monkeypatch.setattr(commands_module, "ProgressBar", Recording)
    ok("compact", uri)
    ok("add-column", uri, "twice=id * 2")
    ok("stats", uri, "--rebuild", "--force")  # the compacted files carry page statistics
    ok("cleanup", uri, "--older-than", "0s")
    assert [bar.state for bar in bars] == [
        {"compact": (1, 1)},
        {"add_columns": (1, 1)},
        {"statistics": (1, 1)},
        {"cleanup": (bars[3].state["cleanup"][1], bars[3].state["cleanup"][1])},
    ]
    assert bars[3].state["cleanup"][1] > 0


# --- the exit-status contract --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        ([], "Missing command"),
        (["frobnicate"], "frobnicate"),
        (["inspect"], "PATH"),
        (["demo", "--rows", "many"], "--rows"),
        (["versions", "x", "--storage-option", "k"], "KEY=VALUE"),
        (["tags"], "Missing command"),
        (["tags", "create", "x", "name"], "VERSION"),
        (["delete", "x"], "--where"),
        (["report", "x"], "--output"),
        (["cleanup", "x", "--older-than", "7 days"], "duration"),
    ],
)
def test_usage_errors_exit_2_with_one_line(argv: list[str], match: str) -> None:
    failed(*argv, status=2, match=match)


def test_failures_exit_1_with_one_line(tmp_path: Path) -> None:
    failed("inspect", tmp_path / "nothing.lance", status=1, match="no Lance file or dataset")
    failed("versions", tmp_path, status=1, match=str(tmp_path))
    garbage = tmp_path / "garbage.lance"
    garbage.write_bytes(b"not a lance file at all" * 10)
    failed("inspect", garbage, status=1, match=str(garbage))
    data = (FILES_DIR / "2.1" / "shapes.lance").read_bytes()
    truncated = tmp_path / "truncated.lance"
    truncated.write_bytes(data[: len(data) // 2])
    failed("inspect", truncated, status=1, match="truncated.lance")
    failed("inspect", DATASETS_DIR / "basic.lance", "--version", "99", status=1, match="99")
    failed("inspect", FILES_DIR / "2.1" / "one_row.lance", "--version", "1", status=2, match="--version")


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("id = = 3", "cannot parse predicate 'id = = 3': syntax error near '=' (column 6)"),
        ("id > 3 AND", "'AND' is missing its right operand"),
        ("cat = 5", "cannot compare column 'cat' (string) with 5 (integer) using '='"),
        ("id IN (1, 'x')", "cannot compare column 'id' (int64) with 'x' (string) using 'IN'"),
        ("cat + 1 > 2", "cannot apply '+' to column 'cat' (string) and 1 (integer)"),
        ("id", "The filter id does not return a boolean: it returns int64"),
    ],
)
def test_predicate_errors_in_the_users_words(uri: Path, where: str, message: str) -> None:
    for dry_run in ([], ["--dry-run"]):
        stderr = failed("delete", uri, "--where", where, *dry_run, status=1, match=message)
        assert not re.search(r"sqlglot|<class|kernel|Function '", stderr), stderr
    failed("add-column", uri, "x=cat * 2", status=1, match="cannot apply '*' to column 'cat' (string)")


# Modules ``lance-ops --help`` must not load: each costs 0.1-1 s of start-up.
HEAVY_MODULES = ("pandas", "sqlglot", "pyarrow.dataset", "numba", "pyspark", "dagster", "matplotlib")

_HELP_IMPORTS = """
import sys
from lance_ops.cli import main
for argv in (["--help"], ["stats", "--help"], ["tags", "--help"], ["tags", "create", "--help"]):
    assert main(argv) == 0
import lance_ops
print(" ".join(sorted(sys.modules)))
"""


def test_help_imports_no_heavy_modules() -> None:
    """Structural, not timed: ``lance-ops --help`` (and a command's) loads click, rich and
    ``lance_ops.errors``; the package exports its names lazily and the dataset layer is imported
    inside the commands that need it."""
    run = subprocess.run(
        [sys.executable, "-c", _HELP_IMPORTS], cwd=REPO, capture_output=True, text=True, check=True
    )
    loaded = set(run.stdout.splitlines()[-1].split())  # after the help texts
    assert "lance_ops.cli.commands" in loaded
    assert sorted(loaded & set(HEAVY_MODULES)) == []
    assert "lance_ops.dataset" not in loaded


def test_lazy_exports_keep_the_public_names() -> None:
    """``lance_ops.dataset`` stays the function after its submodule is imported."""
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, types, lance_ops, lance_ops.dataset; m = sys.modules['lance_ops.dataset']; "
            "assert callable(lance_ops.dataset) and not isinstance(lance_ops.dataset, types.ModuleType); "
            "assert lance_ops.LanceDataset is m.LanceDataset and lance_ops.dataset is m.dataset; "
            "assert sorted(n for n in lance_ops.__all__ if not hasattr(lance_ops, n)) == []",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["--debug", "inspect", str(tmp_path / "nothing.lance")])
    assert result.exit_code == 1 and isinstance(result.exception, FileNotFoundError)
    status = subprocess.run(
        [sys.executable, "-m", "lance_ops.cli", "--debug", "versions", str(tmp_path)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
    )
    assert status.returncode == 1 and "Traceback" in status.stderr


def test_help_and_entry_point(capsys: pytest.CaptureFixture[str]) -> None:
    out = ok("--help")
    for command in (
        "inspect",
        "history",
        "versions",
        "tags",
        "restore",
        "delete",
        "add-column",
        "compact",
        "cleanup",
        "stats",
        "profile",
        "report",
        "demo",
    ):
        assert re.search(rf"^\s+{command}\s", out, re.M), command
    assert main(["versions", str(DATASETS_DIR / "basic.lance"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["version"] == 1
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"lance-ops": "lance_ops.cli:main"}


# --- demo ----------------------------------------------------------------------------------------


def _fake_pipeline(monkeypatch: pytest.MonkeyPatch, returncode: int = 0) -> list[list[str]]:
    """Record the arguments ``demo`` passes to ``python -m jobs.pipeline`` instead of running it."""
    calls: list[list[str]] = []

    def run(command: list[str], check: bool) -> subprocess.CompletedProcess[str]:
        assert command[:3] == [sys.executable, "-m", "jobs.pipeline"]
        calls.append(command[3:])
        return subprocess.CompletedProcess(command, returncode)

    monkeypatch.setattr(commands_module.subprocess, "run", run)
    return calls


def test_demo_passes_options(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _fake_pipeline(monkeypatch)
    ok("demo", "--uri", "memory://demo", "--rows", "5", "--master", "local[1]")
    ok("demo")
    assert calls == [["--uri=memory://demo", "--rows=5", "--master=local[1]"], []]
    failed("demo", "--storage-option", "a=b", status=2, match="--storage-option")


def test_demo_failures(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_pipeline(monkeypatch, returncode=3)
    failed("demo", status=1, match="pipeline failed")
    monkeypatch.setitem(sys.modules, "jobs", None)
    failed("demo", status=1, match="lance-ops[spark]")
