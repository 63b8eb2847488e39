"""Concurrency soak: N processes run a random mix of operations against one dataset.

Each worker logs every call: ``landed`` with the versions before and after, or ``conflict`` (a
``CommitConflictError``); anything else is logged as ``error`` (a failure of the run). The checks
(:func:`check_run`):

* no two landed calls claim one version, and every version is claimed by a logged call (or is the
  ``ReserveFragments`` commit a compaction makes before its ``Rewrite``);
* the serial replay of the landed calls in version order, on a fresh dataset, matches after every
  call (live rows, hence deletions, and schema of that version) and at the end (rows, schema and
  stable row ids). Version numbers themselves may differ only by those reservations;
* pylance agrees with lance_ops on the final dataset.

The mix is the operations whose effect does not depend on *when* they read: appends of fresh ids,
deletes of ids the same worker appended earlier (so the rows exist at its read version),
compaction, statistics rebuilds, tags, restores (replayed to the replay's version of the same
content) and column additions (an append racing one either conflicts or is rebased, in both cases
the replay sees the same order). Column renames, cleanup and ``commit_every`` compaction are left
to the crash run: a rename makes a racing append's data invalid (an error, not a conflict), cleanup
removes the versions the check compares, and ``commit_every`` commits versions no call reports.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.reliability.workload import Journal, Step, apply_step, rows

OPS = ["append"] * 4 + ["delete"] * 2 + ["compact", "stats", "tag", "add_column", "restore"]


def worker_main(uri: str, log_path: str, worker: int, seconds: float, seed: int, min_calls: int = 4) -> None:
    """Run random calls for ``seconds`` and at least ``min_calls`` calls (so a slow machine still races)."""
    import lance_ops
    from lance_ops.errors import CommitConflictError

    journal = Journal(log_path)
    rng = random.Random(seed)
    next_id = 10_000_000 * (worker + 1)
    own: list[int] = []
    deadline = time.monotonic() + seconds
    tick = calls = 0
    while time.monotonic() < deadline or calls < min_calls:
        tick += 1
        ds = lance_ops.dataset(uri)
        op = rng.choice(OPS)
        if op == "append":
            step = Step(op, {"first_id": next_id})
        elif op == "delete" and own:
            start = rng.choice(own)
            step = Step(op, {"predicate": f"id >= {start} AND id < {start + rng.randint(1, 60)}"})
        elif op == "add_column":
            step = Step(op, {"name": f"c_{worker}_{tick}", "expr": f"id * {rng.randint(2, 9)}"})
        elif op == "tag":
            step = Step(op, {"name": f"w{worker}t{tick}"})
        elif op == "restore" and ds.version > 1:
            step = Step(op, {"version": rng.randint(max(1, ds.version - 3), ds.version - 1)})
        elif op in ("compact", "stats"):
            step = Step(op, {})
        else:
            continue
        before = ds.version
        calls += 1
        try:
            after = apply_step(ds, step).version
        except CommitConflictError as exc:
            journal.log(worker=worker, op=op, args=step.args, result="conflict", detail=type(exc).__name__)
            continue
        except Exception as exc:  # noqa: BLE001 - an untyped failure is what the soak looks for
            journal.log(worker=worker, op=op, args=step.args, result="error", detail=repr(exc)[:500])
            continue
        if op == "append":
            own.append(next_id)
            next_id += 200
        # A call that committed nothing (e.g. nothing to compact) reports the version it read.
        landed = after if after != before else None
        journal.log(worker=worker, op=op, args=step.args, result="landed", version=landed, before=before)


@dataclass
class SoakStats:
    calls: int = 0
    landed: int = 0
    conflicts: int = 0
    errors: list[str] = field(default_factory=list)
    duplicate_versions: int = 0
    replay_mismatches: list[str] = field(default_factory=list)
    final_version: int = 0


def state(ds: Any) -> dict[str, Any]:
    table = ds.to_table(with_row_id=True).sort_by("id")
    return {"schema": ds.schema.names, "rows": table.drop_columns(["_rowid"]), "rowids": table["_rowid"]}


def check_run(uri: str, logs: list[str], replay_uri: str) -> SoakStats:
    import lance

    import lance_ops

    stats = SoakStats()
    entries = [e for path in logs for e in Journal.read(path)]
    stats.calls = len(entries)
    stats.errors = [f"{e['op']}: {e['detail']}" for e in entries if e["result"] == "error"]
    stats.conflicts = sum(e["result"] == "conflict" for e in entries)
    landed = [e for e in entries if e["result"] == "landed" and e["version"] is not None]
    stats.landed = len(landed)
    versions = [e["version"] for e in landed]
    stats.duplicate_versions = len(versions) - len(set(versions))
    final = lance_ops.dataset(uri)
    stats.final_version = final.version
    unclaimed = [v for v in range(2, final.version + 1) if v not in set(versions)]
    for version in unclaimed:
        # Compaction first reserves its fragment ids in a version of its own; nothing else may hide.
        operation = type(final.read_transaction(version).operation).__name__
        if operation != "ReserveFragments":
            stats.replay_mismatches.append(f"version {version} ({operation}) was committed by no logged call")
    replay = lance_ops.write_dataset(rows(0), replay_uri, mode="create", enable_stable_row_ids=True)
    replayed_as: dict[int, int] = {1: 1}  # original version -> replay version
    for entry in sorted(landed, key=lambda e: e["version"]):
        args = entry["args"]
        if entry["op"] == "restore":
            # An unclaimed (ReserveFragments) version holds what the claimed one before it holds.
            target = max(v for v in replayed_as if v <= args["version"])
            args = {"version": replayed_as[target]}
        replay = apply_step(replay, Step(entry["op"], args))
        replayed_as[entry["version"]] = replay.version
        original = final.checkout_version(entry["version"])
        if original.count_rows() != replay.count_rows() or original.schema != replay.schema:
            stats.replay_mismatches.append(
                f"version {entry['version']} ({entry['op']}) differs in the replay"
            )
    ours, replayed = state(final), state(lance_ops.dataset(replay_uri))
    for key in ours:
        if ours[key] != replayed[key] if key == "schema" else not ours[key].equals(replayed[key]):
            stats.replay_mismatches.append(f"final {key} differs from the serial replay")
    theirs = lance.dataset(uri)
    if theirs.version != final.version or not theirs.to_table().sort_by("id").equals(
        final.to_table().sort_by("id")
    ):
        stats.replay_mismatches.append("pylance disagrees with lance_ops on the final dataset")
    return stats


def run_soak(workdir: str, workers: int, seconds: float, seed: int) -> SoakStats:
    import lance_ops

    uri = os.path.join(workdir, "ds")
    lance_ops.write_dataset(rows(0), uri, mode="create", enable_stable_row_ids=True)
    repo = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": repo}
    logs = [os.path.join(workdir, f"worker{w}.jsonl") for w in range(workers)]
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                "from tests.reliability.concurrency import worker_main; "
                f"worker_main({uri!r}, {logs[w]!r}, {w}, {seconds}, {seed * 100 + w})",
            ],
            env=env,
            cwd=repo,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(workers)
    ]
    extra = []
    for proc in procs:
        _, err = proc.communicate(timeout=seconds + 300)
        if proc.returncode != 0:
            extra.append(f"worker exited {proc.returncode}: {err[-1500:]}")
    stats = check_run(uri, logs, os.path.join(workdir, "replay"))
    stats.errors += extra
    return stats
