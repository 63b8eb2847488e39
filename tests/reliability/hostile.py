"""Hostile-input harness: mutate one file of a known-good dataset, read everything, classify the outcome.

Used by ``test_hostile_input.py`` (a fixed, seeded corpus in CI) and by the ``soak`` run (many more
seeds). Cases run in a child process (:func:`run_cases`) whose address space is capped, so a length field
that makes the library allocate gigabytes shows up as ``MemoryError`` (an *untyped* outcome) instead of
swapping the machine; every case also runs under a ``SIGALRM`` watchdog, so a loop that never ends
shows up as a *hang*.

Outcomes of one case:

* ``ok``: every read succeeded (``wrong`` too when the rows differ from the pristine dataset's);
* ``typed``: a read raised a :class:`lance_ops.errors.LanceOpsError`;
* ``untyped``: a read raised anything else (a bug: the library let a foreign error escape);
* ``hang``: the watchdog fired.
"""

from __future__ import annotations

import json
import os
import random
import resource
import shutil
import signal
import struct
import subprocess
import sys
import traceback
import zlib
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import pyarrow as pa

CASE_SECONDS = 20
ADDRESS_SPACE_HEADROOM = 3 * 1024**3

# File kinds and how to recognise them inside a dataset directory.
KINDS = ("data", "manifest", "transaction", "deletion_arrow", "deletion_bitmap", "rowids", "tag", "hint")


def kind_of(relative: str) -> str | None:
    if relative.startswith("data/"):
        return "data"
    if relative.startswith("_versions/"):
        return "hint" if relative.endswith(".json") else "manifest"
    if relative.startswith("_transactions/"):
        return "transaction"
    if relative.startswith("_deletions/"):
        return "deletion_arrow" if relative.endswith(".arrow") else "deletion_bitmap"
    if relative.startswith("_rowids/"):
        return "rowids"
    if relative.startswith("_refs/tags/"):
        return "tag"
    return None


def build_pristine(root: str) -> None:
    """A small dataset holding one file of every kind.

    Two fragments with stable row ids, an Arrow and a Roaring deletion vector, a tag, an added column
    (so versions have transactions of several kinds) and fragment 0's row-id sequence moved to an
    external file (pylance never writes one, but the format allows it and lance_ops reads it).
    """
    import lance_ops
    from lance_ops.io import object_store
    from lance_ops.table.commit import load_manifest
    from lance_ops.table.manifest import ExternalFile, encode_manifest_file

    rows = 12_000
    table = pa.table({"id": pa.array(range(rows), pa.int64()), "s": [f"v{i}" for i in range(rows)]})
    ds = lance_ops.write_dataset(table, root, max_rows_per_file=6000, enable_stable_row_ids=True)
    ds.delete("id < 10")
    ds.delete("id >= 6000 and id < 11500")
    ds.tags.create("t1", 2)
    ds.add_columns({"x": "id * 2"})
    store, base = object_store(root)
    loaded = load_manifest(store, base)
    first = loaded.manifest.fragments[0]
    assert isinstance(first.row_ids, bytes)
    padding = b"\x00" * 7
    store.write(store.join(base, "_rowids", "0.bin"), padding + first.row_ids)
    external = ExternalFile("_rowids/0.bin", len(padding), len(first.row_ids))
    fragments = (replace(first, row_ids=external), *loaded.manifest.fragments[1:])
    manifest = replace(loaded.manifest, fragments=fragments)
    store.write(loaded.path, encode_manifest_file(manifest, loaded.transaction))


def read_everything(root: str) -> pa.Table:
    """Everything a reader may touch: every version, its rows and row ids, transactions, tags, stats."""
    import lance_ops
    from lance_ops.table.transaction import Transaction

    ds = lance_ops.dataset(root)
    ds.versions()
    ds.history()
    ds.tags.list()
    ds.tags.list_ordered()
    for entry in ds.versions():
        old = ds.checkout_version(entry["version"])
        old.read_transaction(entry["version"])
        old.to_table(with_row_id=True)
    ds.checkout_version("t1").count_rows()
    ds.stats.dataset_stats()
    # What a committer reads when it rebases over a concurrent version.
    for path in sorted(Path(root, "_transactions").glob("*.txn")):
        Transaction.deserialize(path.read_bytes(), str(path))
    return ds.to_table(with_row_id=True).sort_by("id")


# --------------------------------------------------------------------------- mutations


@dataclass(frozen=True)
class Case:
    """One mutation: ``kind`` of file, which one (``index`` among files of that kind), how, and a seed."""

    kind: str
    index: int
    mutation: str
    seed: int


MUTATIONS = ("bitflip", "truncate", "random_bytes", "garbage_tail", "empty", "huge_length", "zero_region")


def _huge_length(data: bytearray, rng: random.Random, kind: str) -> None:
    """Overwrite a length/offset field with a value claiming petabytes."""
    huge = rng.choice([2**50, 2**62, 2**63 - 1, 2**64 - 1])
    if kind in ("manifest", "data") and len(data) >= 16:
        # The manifest footer's section position (u64) / the file footer's offsets (u64 each).
        slots = [len(data) - 16] if kind == "manifest" else [len(data) - 40 + 8 * k for k in range(3)]
        slot = rng.choice([s for s in slots if s >= 0])
        struct.pack_into("<Q", data, slot, huge)
        return
    if len(data) >= 8:
        at = rng.randrange(0, len(data) - 7)
        struct.pack_into("<Q", data, at, huge)


def mutate(data: bytes, case: Case) -> bytes:
    rng = random.Random(case.seed)
    out = bytearray(data)
    if case.mutation == "bitflip":
        for _ in range(rng.randint(1, 8)):
            if out:
                position = rng.randrange(len(out))
                out[position] ^= 1 << rng.randrange(8)
    elif case.mutation == "truncate":
        del out[rng.randrange(len(out) + 1) if out else 0 :]
    elif case.mutation == "random_bytes":
        if out:
            start = rng.randrange(len(out))
            length = rng.randint(1, min(64, len(out) - start))
            out[start : start + length] = rng.randbytes(length)
    elif case.mutation == "garbage_tail":
        out += rng.randbytes(rng.randint(1, 64))
    elif case.mutation == "empty":
        out = bytearray()
    elif case.mutation == "huge_length":
        _huge_length(out, rng, case.kind)
    elif case.mutation == "zero_region":
        if out:
            start = rng.randrange(len(out))
            out[start : start + rng.randint(1, 32)] = bytes(min(32, len(out) - start))[
                : len(out[start : start + 32])
            ]
    else:
        raise ValueError(case.mutation)
    return bytes(out)


def files_by_kind(root: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {kind: [] for kind in KINDS}
    for path in sorted(Path(root).rglob("*")):
        if path.is_file():
            relative = path.relative_to(root).as_posix()
            kind = kind_of(relative)
            if kind is not None:
                found[kind].append(relative)
    return found


def corpus(seeds: range, mutations: tuple[str, ...] = MUTATIONS) -> Iterator[Case]:
    """Every kind x mutation x seed; the file of the kind is picked by the seed."""
    for seed in seeds:
        for kind in KINDS:
            for mutation in mutations:
                # crc32, not hash(): str hashes differ per process (PYTHONHASHSEED), so the "fixed"
                # corpus would change every run (and on every xdist worker).
                salt = zlib.crc32(f"{kind}/{mutation}".encode()) % 10007
                yield Case(kind, seed, mutation, seed * 7919 + salt)


# --------------------------------------------------------------------------- running


class Hang(BaseException):
    """Raised by the watchdog (a BaseException so ``except Exception`` in the library cannot swallow it)."""


@dataclass(frozen=True)
class Outcome:
    case: Case
    file: str
    result: str
    detail: str = ""


def _on_alarm(signum: int, frame: object) -> None:
    raise Hang


def run_case(pristine: str, scratch: str, expected: pa.Table, case: Case) -> Outcome:
    from lance_ops.errors import LanceOpsError

    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(pristine, scratch)
    files = files_by_kind(scratch)[case.kind]
    target = files[case.index % len(files)]
    path = Path(scratch, target)
    path.write_bytes(mutate(path.read_bytes(), case))
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(CASE_SECONDS)
    try:
        table = read_everything(scratch)
    except Hang:
        return Outcome(case, target, "hang")
    except LanceOpsError as exc:
        return Outcome(case, target, "typed", f"{type(exc).__name__}: {exc}"[:300])
    except BaseException as exc:  # noqa: BLE001 - classifying is the point
        return Outcome(case, target, "untyped", "".join(traceback.format_exception(exc))[-1500:])
    finally:
        signal.alarm(0)
    return Outcome(case, target, "ok" if table.equals(expected) else "wrong")


def _cap_address_space() -> None:
    with open("/proc/self/status") as status:
        size_kb = next(int(line.split()[1]) for line in status if line.startswith("VmSize:"))
    limit = size_kb * 1024 + ADDRESS_SPACE_HEADROOM
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def worker_main(workdir: str, cases_json: str) -> None:
    """Child process: build the pristine dataset, cap memory, run the cases, print one JSON per outcome."""
    import lance_ops  # noqa: F401 - import (and JIT caches) before the memory cap

    pristine = os.path.join(workdir, "pristine")
    shutil.rmtree(pristine, ignore_errors=True)
    build_pristine(pristine)
    expected = read_everything(pristine)
    _cap_address_space()
    for raw in json.loads(cases_json):
        outcome = run_case(pristine, os.path.join(workdir, "scratch"), expected, Case(**raw))
        print(json.dumps({**asdict(outcome), "case": asdict(outcome.case)}), flush=True)


def run_cases(workdir: str, cases: list[Case], timeout: float) -> list[Outcome]:
    """Run ``cases`` in a fresh child (see module docstring); a dead child is reported as untyped."""
    payload = json.dumps([asdict(c) for c in cases])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            f"from tests.reliability.hostile import worker_main; worker_main({workdir!r}, {payload!r})",
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=str(Path(__file__).resolve().parents[2]),
    )
    outcomes = []
    for line in proc.stdout.splitlines():
        raw = json.loads(line)
        outcomes.append(Outcome(Case(**raw.pop("case")), **raw))
    if proc.returncode != 0:
        done = {o.case for o in outcomes}
        outcomes += [
            Outcome(c, "?", "untyped", f"child died: {proc.stderr[-1500:]}") for c in cases if c not in done
        ]
    return outcomes


__all__ = ["Case", "Outcome", "build_pristine", "corpus", "mutate", "read_everything", "run_cases"]
