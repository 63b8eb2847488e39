"""Shared pieces of the crash and concurrency runs: the operations, their journal, fingerprints.

A *journal* is a JSON-lines file a worker appends to, flushed and fsynced after every line, so it
survives the worker being killed: it is the out-of-band record of what the worker saw committed.
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

ROWS_PER_APPEND = 200


class Journal:
    """Append-only JSON lines, durable line by line."""

    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def log(self, **entry: Any) -> None:
        os.write(self._fd, (json.dumps(entry, sort_keys=True) + "\n").encode())
        os.fsync(self._fd)

    @staticmethod
    def read(path: str) -> list[dict[str, Any]]:
        if not os.path.exists(path):
            return []
        entries = []
        with open(path) as lines:
            for line in lines:
                if line.endswith("\n"):  # a line cut by a kill is not an entry
                    entries.append(json.loads(line))
        return entries


def rows(first_id: int, count: int = ROWS_PER_APPEND) -> pa.Table:
    ids = pa.array(range(first_id, first_id + count), pa.int64())
    return pa.table({"id": ids, "v": pa.array([f"r{i}" for i in range(first_id, first_id + count)])})


def fingerprint(ds: Any) -> dict[str, Any]:
    """What must hold for a version forever: live rows, their ids' sum, the schema's names."""
    table = ds.to_table(columns=["id"])
    return {
        "rows": table.num_rows,
        "id_sum": int(pa.compute.sum(table["id"]).as_py() or 0),
        "columns": list(ds.schema.names),
    }


@dataclass(frozen=True)
class Step:
    """One operation a worker will run: its name and arguments (JSON-able, for the journal/replay)."""

    op: str
    args: dict[str, Any]


def choose_step(rng: random.Random, ds: Any, next_id: int, own_ids: list[int], tick: int) -> Step:
    """A random operation valid on ``ds`` (a lance_ops dataset at its latest version)."""
    names = list(ds.schema.names)
    added = [n for n in names if n.startswith("c_")]
    choices = ["append"] * 4 + ["delete"] * 2 + ["add_column", "compact", "compact_every", "stats", "tag"]
    if added:
        choices.append("alter_column")
    older = [entry["version"] for entry in ds.versions()][-4:-1]
    if older:
        choices.append("restore")
    choices.append("cleanup")
    op = rng.choice(choices)
    if op == "append":
        return Step(op, {"first_id": next_id})
    if op == "delete":
        if own_ids:
            start = rng.choice(own_ids)
            return Step(op, {"predicate": f"id >= {start} AND id < {start + rng.randint(1, 60)}"})
        return Step(op, {"predicate": f"id % 97 = {rng.randrange(97)}"})
    if op == "add_column":
        return Step(op, {"name": f"c_{tick}", "expr": f"id * {rng.randint(2, 9)}"})
    if op == "alter_column":
        return Step(op, {"path": rng.choice(added), "name": f"r_{tick}"})
    if op == "restore":
        return Step(op, {"version": rng.choice(older)})
    if op == "tag":
        return Step(op, {"name": f"t{tick}"})
    return Step(op, {})


def apply_step(ds: Any, step: Step) -> Any:
    """Run ``step`` on ``ds`` (a lance_ops dataset); returns the dataset at the version the step
    committed (``ds`` itself, which adopts it), not the latest (another writer may be ahead)."""
    import lance_ops

    args = step.args
    if step.op == "append":
        table = rows(args["first_id"])
        extra = [n for n in ds.schema.names if n not in table.column_names]
        for name in extra:
            table = table.append_column(
                ds.schema.field(name), pa.nulls(len(table), ds.schema.field(name).type)
            )
        return lance_ops.write_dataset(table, ds.uri, mode="append")
    if step.op == "delete":
        ds.delete(args["predicate"])
    elif step.op == "add_column":
        ds.add_columns({args["name"]: args["expr"]})
    elif step.op == "alter_column":
        ds.alter_columns({"path": args["path"], "name": args["name"]})
    elif step.op == "compact":
        ds.optimize.compact_files(target_rows_per_fragment=1000)
    elif step.op == "compact_every":
        ds.optimize.compact_files(target_rows_per_fragment=400, commit_every=1)
    elif step.op == "stats":
        ds.stats.rebuild(force=True)
    elif step.op == "tag":
        ds.tags.create(args["name"], ds.version)
    elif step.op == "restore":
        ds = ds.checkout_version(args["version"])
        ds.restore()
    elif step.op == "cleanup":
        import datetime as dt

        ds.cleanup_old_versions(
            older_than=dt.timedelta(0), retain_versions=3, error_if_tagged_old_versions=False
        )
    else:
        raise ValueError(step.op)
    return ds
