"""Crash at any point: a child loops random operations and is SIGKILLed at random moments.

The child (:func:`child_main`) journals ``begin`` before each operation and ``done`` with the version
and :func:`~tests.reliability.workload.fingerprint` it observed once the call returned (fsynced: the
out-of-band record of what was committed). After each kill the parent (:func:`check_after_kill`)
verifies, with lance_ops and pylance:

* both open the latest version, agree on it and on its rows;
* nothing committed is lost: the latest version is at least the last journaled one, and every
  journaled version still present has exactly the journaled fingerprint;
* every present version is whole: it reads completely (no missing or partial data, deletion or
  row-id file), with pylance agreeing on its row count.

:func:`final_cleanup_check` then runs cleanup (``delete_unverified``) and checks that no file outside
the kept versions' references remains (temporary files of killed writes included).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import random
import select
import signal
import subprocess
import sys
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tests.reliability.workload import Journal, apply_step, choose_step, fingerprint, rows

READY = "ready"


def child_main(uri: str, journal_path: str, run: int, seed: int) -> None:
    """Loop random operations on ``uri`` forever (until killed)."""
    import lance_ops

    journal = Journal(journal_path)
    if not os.path.exists(os.path.join(uri, "_versions")):
        ds = lance_ops.write_dataset(rows(0), uri, mode="create")
        journal.log(event="done", op="create", run=run, version=ds.version, fp=fingerprint(ds))
    ds = lance_ops.dataset(uri)
    rng = random.Random(seed)
    next_id = 10_000_000 * (run + 1)
    own: list[int] = []
    journal.log(event=READY, run=run)
    for tick in range(run * 10_000, (run + 1) * 10_000):
        step = choose_step(rng, ds, next_id, own, tick)
        journal.log(event="begin", op=step.op, run=run, args=step.args)
        ds = apply_step(ds, step)
        if step.op == "append":
            own.append(next_id)
            next_id += 200
        journal.log(event="done", op=step.op, run=run, version=ds.version, fp=fingerprint(ds))


@dataclass
class CrashStats:
    kills: int = 0
    commits: int = 0
    lost_commits: int = 0
    partial_versions: int = 0
    untyped_errors: int = 0
    hangs: int = 0
    child_errors: list[str] = field(default_factory=list)
    killed_during: Counter[str] = field(default_factory=Counter)
    versions_checked: int = 0
    verified: set[int] = field(default_factory=set)


def check_after_kill(uri: str, journal_path: str, stats: CrashStats) -> None:
    import lance

    import lance_ops
    from lance_ops.errors import LanceOpsError

    entries = Journal.read(journal_path)
    done = [e for e in entries if e["event"] == "done"]
    stats.commits = len(done)
    if entries and entries[-1]["event"] == "begin":
        stats.killed_during[entries[-1]["op"]] += 1
    try:
        ours = lance_ops.dataset(uri)
        theirs = lance.dataset(uri)
        assert ours.version == theirs.version, (ours.version, theirs.version)
        assert ours.to_table().sort_by("id").equals(theirs.to_table().sort_by("id"))
        present = {entry["version"] for entry in ours.versions()}
    except LanceOpsError as exc:
        stats.partial_versions += 1
        stats.child_errors.append(f"latest unreadable: {exc!r}")
        return
    if done and ours.version < max(e["version"] for e in done):
        stats.lost_commits += 1
    by_version = {e["version"]: e["fp"] for e in done}
    # Versions are immutable: each is checked once (the latest is re-checked above after every kill).
    for version in sorted(present - stats.verified):
        try:
            old = ours.checkout_version(version)
            got = fingerprint(old)
            assert lance.dataset(uri, version=version).count_rows() == got["rows"]
        except LanceOpsError as exc:
            stats.partial_versions += 1
            stats.child_errors.append(f"version {version}: {exc!r}")
            continue
        except AssertionError:
            stats.partial_versions += 1
            continue
        stats.versions_checked += 1
        stats.verified.add(version)
        if version in by_version and by_version[version] != got:
            stats.lost_commits += 1
            stats.child_errors.append(f"version {version}: journal {by_version[version]} != {got}")


def referenced_files(uri: str) -> set[str]:
    """Paths (relative to the root) of the data, deletion and transaction files of every version."""
    from lance_ops.io import object_store
    from lance_ops.table.commit import load_manifests

    store, root = object_store(uri)
    keep = set()
    for loaded in load_manifests(store, root):
        for fragment in loaded.manifest.fragments:
            keep.update(f"data/{f.path}" for f in fragment.files)
            if fragment.deletion_file is not None:
                keep.add(f"_deletions/{fragment.deletion_file.file_name(fragment.id)}")
        if loaded.manifest.transaction_file:
            keep.add(f"_transactions/{loaded.manifest.transaction_file}")
    return keep


def final_cleanup_check(uri: str) -> list[str]:
    """Cleanup everything unreferenced; returns the files left that no kept version references."""
    import lance_ops

    lance_ops.dataset(uri).cleanup_old_versions(
        older_than=dt.timedelta(0), delete_unverified=True, error_if_tagged_old_versions=False
    )
    keep = referenced_files(uri)
    left = []
    for path in Path(uri).rglob("*"):
        relative = path.relative_to(uri).as_posix()
        if not path.is_file():
            continue
        if relative.split("/")[0] in ("data", "_deletions", "_transactions") and relative not in keep:
            left.append(relative)
        elif relative.endswith(".lance-ops-partial"):
            left.append(relative)
    return left


def zygote_main() -> None:
    """Import lance_ops once, then fork one crash child per request line read from stdin.

    Forking from a warm process makes a kill cycle cost the operations, not the imports, so the
    long run reaches hundreds of kills. The zygote alone writes to stdout: ``pid N`` after a fork and
    ``exit CODE`` once the child is gone (``-9`` after SIGKILL); the child's output goes to a file.
    """
    import lance_ops  # noqa: F401 - the point is to import before forking

    for line in sys.stdin:
        uri, journal_path, run, seed, err_path = json.loads(line)
        pid = os.fork()
        if pid == 0:
            err = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(err, 1)
            os.dup2(err, 2)
            try:
                child_main(uri, journal_path, run, seed)
            except BaseException:  # noqa: BLE001 - reported through the exit code and stderr
                traceback.print_exc()
            finally:
                sys.stderr.flush()
                os._exit(1)
        print(f"pid {pid}", flush=True)
        _, status = os.waitpid(pid, 0)
        print(f"exit {os.waitstatus_to_exitcode(status)}", flush=True)


def _read_line(zygote: subprocess.Popen[str], timeout: float) -> tuple[str, int]:
    """The zygote's next ``(word, number)`` line; ``("hang", 0)`` if none comes within ``timeout``."""
    assert zygote.stdout is not None
    ready, _, _ = select.select([zygote.stdout], [], [], timeout)
    if not ready:
        return "hang", 0
    line = zygote.stdout.readline()
    if not line:
        raise RuntimeError("crash zygote died")
    word, _, number = line.strip().partition(" ")
    return word, int(number)


def _wait_ready(journal_path: str, run: int, pid: int, timeout: float) -> bool:
    """Whether run ``run`` journaled ``ready`` within ``timeout`` seconds (False: it died or hangs)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        # The whole journal: a quick child can log several steps after READY between two polls.
        if any(e["event"] == READY and e["run"] == run for e in Journal.read(journal_path)):
            return True
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        time.sleep(0.02)
    return False


def run_crashes(workdir: str, kills: int, seed: int, max_delay: float = 1.5) -> CrashStats:
    """Start, kill and check the child ``kills`` times; returns the tallies."""
    os.makedirs(workdir, exist_ok=True)
    uri = os.path.join(workdir, "ds")
    journal_path = os.path.join(workdir, "journal.jsonl")
    err_path = os.path.join(workdir, "child.err")
    rng = random.Random(seed)
    stats = CrashStats()
    repo = str(Path(__file__).resolve().parents[2])
    zygote = subprocess.Popen(
        [sys.executable, "-c", "from tests.reliability.crash import zygote_main; zygote_main()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": repo},
        cwd=repo,
    )
    assert zygote.stdin is not None
    try:
        for run in range(kills):
            request = [uri, journal_path, run, seed * 1000 + run, err_path]
            zygote.stdin.write(json.dumps(request) + "\n")
            zygote.stdin.flush()
            word, pid = _read_line(zygote, 60)
            if word != "pid":
                stats.hangs += 1
                break
            if _wait_ready(journal_path, run, pid, 60):
                time.sleep(rng.uniform(0, max_delay))
                stats.kills += 1
            else:
                stats.hangs += 1
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            word, code = _read_line(zygote, 60)
            if word != "exit":
                stats.hangs += 1
                break
            if code != -signal.SIGKILL:
                stats.untyped_errors += 1
                stats.child_errors.append(Path(err_path).read_text()[-2000:])
            check_after_kill(uri, journal_path, stats)
    finally:
        zygote.stdin.close()
        zygote.wait(timeout=60)
        if zygote.stdout is not None:
            zygote.stdout.close()
    return stats
