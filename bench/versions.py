"""Dataset operations against the number of versions, beside pylance on the same datasets (run on demand).

For each version count (default 5,000 and 50,000) one dataset is built: lance_ops writes a table of
``--fragments`` fragments (version 1), then the manifest of version 1 is re-encoded once per further
version with that version number and a later timestamp (so building 50,000 versions takes seconds
rather than 50,000 commits, and every system reads the very same manifests). Then, for lance_ops and
pylance, best of ``--repeats``:

* ``versions``: ``dataset(uri).versions()`` (every manifest read and summarised);
* ``history``: lance_ops' ``history()`` (``DESCRIBE HISTORY``: ``versions()`` plus each version's
  transaction); pylance has none, its ``versions()`` is the reference;
* ``cleanup``: ``cleanup_old_versions(older_than=timedelta(0))`` on a fresh copy (every version but
  the latest removed: one manifest each; the data files are shared and stay), peak RSS held
  measured in a child process of its own (``VmHWM`` minus its value before the call).

    .venv/bin/python bench/versions.py [--versions 5000 50000] [--markdown]

``--markdown`` replaces the versions section of RESULTS.md (below its notes marker).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rss import peak_mb  # noqa: E402
from run import RESULTS_PATH, replace_section  # noqa: E402

import lance_ops  # noqa: E402
from lance_ops.table.manifest import decode_manifest_file, encode_manifest_file  # noqa: E402
from lance_ops.table.naming import VERSIONS_DIR, ManifestNamingScheme  # noqa: E402

BEGIN, END = "<!-- versions: begin -->", "<!-- versions: end -->"
METRICS = ("versions", "history", "cleanup")


def build(uri: str, versions: int, fragments: int) -> None:
    """Version 1 written by lance_ops; versions 2.. its manifest re-encoded with their number."""
    rows = fragments * 100
    table = pa.table({"id": np.arange(rows, dtype=np.int64), "value": np.random.default_rng(0).random(rows)})
    lance_ops.write_dataset(table, uri, max_rows_per_file=100, data_storage_version="2.1")
    directory = os.path.join(uri, VERSIONS_DIR)
    scheme = ManifestNamingScheme.V2
    with open(os.path.join(directory, scheme.manifest_name(1)), "rb") as f:
        first, transaction = decode_manifest_file(f.read(), "v1")
    for version in range(2, versions + 1):
        manifest = replace(first, version=version, timestamp_ns=first.timestamp_ns + version * 1_000_000)
        with open(os.path.join(directory, scheme.manifest_name(version)), "wb") as f:
            f.write(encode_manifest_file(manifest, transaction))
    hint = os.path.join(directory, "latest_version_hint.json")
    if os.path.exists(hint):
        os.remove(hint)


def best(repeats: int, run: Callable[[], object]) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def child(system: str, path: str) -> dict[str, float]:
    """One cleanup in this (child) process: wall seconds, peak RSS before and after (MB)."""
    if system == "pylance":
        import lance

        ds = lance.dataset(path)
    else:
        ds = lance_ops.dataset(path)
    before = peak_mb()
    start = time.perf_counter()
    ds.cleanup_old_versions(older_than=dt.timedelta(0))
    seconds = time.perf_counter() - start
    left = len(os.listdir(os.path.join(path, VERSIONS_DIR)))
    return {"seconds": seconds, "before_mb": before, "peak_mb": peak_mb(), "left": left}


def cleanup(system: str, source: str, workdir: str, repeats: int) -> tuple[float, float]:
    """Best wall time and largest peak RSS held of ``repeats`` cleanups of fresh copies."""
    seconds, held = float("inf"), 0.0
    for attempt in range(repeats):
        target = os.path.join(workdir, f"{system}-{attempt}")
        shutil.copytree(source, target)
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
        done = subprocess.run(
            [sys.executable, __file__, "--child", system, target], capture_output=True, text=True, env=env
        )
        if done.returncode:
            raise RuntimeError(f"{system} cleanup: {done.stderr[-2000:]}")
        result = json.loads(done.stdout.strip().splitlines()[-1])
        if result["left"] > 2:  # the latest manifest (and perhaps a version hint)
            raise RuntimeError(f"{system} cleanup left {result['left']} files in {VERSIONS_DIR}")
        seconds = min(seconds, result["seconds"])
        held = max(held, result["peak_mb"] - result["before_mb"])
        shutil.rmtree(target)
    return seconds, held


def measure(uri: str, versions: int, repeats: int, workdir: str) -> dict[str, dict[str, float]]:
    import lance  # the oracle, only in benchmarks and tests

    ours, theirs = lance_ops.dataset(uri), lance.dataset(uri)
    mine, reference = ours.versions(), theirs.versions()
    if len(mine) != versions or [v["metadata"] for v in mine] != [v["metadata"] for v in reference]:
        raise RuntimeError("versions() differ from pylance's")
    results = {
        "lance_ops": {
            "versions": best(repeats, ours.versions),
            "history": best(repeats, ours.history),
        },
        "pylance": {
            "versions": best(repeats, theirs.versions),
            "history": best(repeats, theirs.versions),
        },
    }
    for system in results:
        results[system]["cleanup"], results[system]["cleanup_held_mb"] = cleanup(
            system, uri, workdir, max(1, repeats // 2)
        )
    return results


def render(results: dict[int, dict[str, dict[str, float]]], fragments: int, repeats: int) -> str:
    load = " / ".join(Path("/proc/loadavg").read_text().split()[:3])
    lines = [
        BEGIN,
        "## Version counts (`bench/versions.py`)",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {fragments} fragments per version;"
        f" best of {repeats} (cleanup: of {max(1, repeats // 2)}, each in a child process on a fresh copy);"
        f" {os.cpu_count()} CPUs; load average at the end {load}. Ratio = lance_ops / pylance; pylance has"
        " no `history()`, its `versions()` is the reference for that line. `held` = peak RSS of the"
        " cleanup minus the peak before it (MB).",
        "",
        "| versions | metric | lance_ops (s) | pylance (s) | ratio | held lance_ops / pylance (MB) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for versions, systems in results.items():
        ours, theirs = systems["lance_ops"], systems["pylance"]
        for metric in METRICS:
            held = ""
            if metric == "cleanup":
                held = f"{ours['cleanup_held_mb']:.0f} / {theirs['cleanup_held_mb']:.0f}"
            lines.append(
                f"| {versions:,} | {metric} | {ours[metric]:.3f} | {theirs[metric]:.3f} |"
                f" {ours[metric] / theirs[metric]:.2f} | {held} |"
            )
    lines.append(END)
    return "\n".join(lines) + "\n"


def write_markdown(section: str) -> None:
    replace_section(BEGIN, END, section)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--child"]:
        print(json.dumps(child(argv[1], argv[2])))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--versions", type=int, nargs="+", default=[5000, 50000])
    parser.add_argument("--fragments", type=int, default=10, help="fragments per version")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--markdown", action="store_true", help=f"write a section of {RESULTS_PATH.name}")
    args = parser.parse_args(argv)
    results: dict[int, dict[str, dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as workdir:
        for versions in args.versions:
            uri = os.path.join(workdir, f"v{versions}")
            build(uri, versions, args.fragments)
            results[versions] = measure(uri, versions, args.repeats, workdir)
            print(f"{versions} versions: {results[versions]}", flush=True)
            shutil.rmtree(uri)
    report = render(results, args.fragments, args.repeats)
    print(report)
    if args.markdown:
        write_markdown(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
