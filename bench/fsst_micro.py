"""FSST encoder micro-benchmark: MB/s per core of table construction and coding (not a test).

Codes the ``name`` column of bench/datagen.py's ``mixed`` table (4-24 random characters) and,
with ``--words``, a 4-word text column, with ``--mix`` a column of URLs, e-mail addresses and
JSON-ish records (a third each, drawn from small vocabularies and numbers), and with
``--comment`` the mixed table's nullable ``comment`` column, and reports CPU seconds of the calling thread
(``time.thread_time``: a loaded machine inflates wall time, not the CPU a single thread spends),
the median of ``--repeats`` runs, as MB/s of input per core, for the symbol table alone and for
the whole ``fsst_encode`` (table + coding). With ``--pylance``, also the CPU seconds of the whole
process (``time.process_time``, all threads) to write each column alone to a 2.2 file with FSST
asked for (``lance-encoding:compression``), by pylance and by lance_ops, in turns. Run from the
repository root:

    PYTHONPATH=. .venv/bin/python bench/fsst_micro.py --rows 1000000
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).parent))

from datagen import make_table  # noqa: E402

from lance_ops.encoding.compression import fsst  # noqa: E402
from lance_ops.encoding.data import VariableWidthBlock  # noqa: E402

MIX_HOSTS = "example.com github.com docs.python.org en.wikipedia.org s3.amazonaws.com api.internal".split()
MIX_PATHS = "index issues pull blob/main/README.md wiki/Lance v1/items search static/js/app.js".split()
MIX_USERS = "alice bob carol dave erin frank grace heidi ivan judy mallory oscar".split()
MIX_DOMAINS = "gmail.com yahoo.com example.org company.io outlook.com".split()
MIX_KEYS = "id name status created_at tags score user active".split()
MIX_STATUS = "ok error pending done".split()
WORDS = np.array("the of and to in a is that for it as was with be by on not he this are".split())


def word_column(rows: int, seed: int = 0) -> pa.Array:
    rng = np.random.default_rng(seed)
    picks = WORDS[rng.integers(0, len(WORDS), (rows, 4))]
    return pa.array([" ".join(row) for row in picks.tolist()])


def mix_column(rows: int, seed: int = 1) -> pa.Array:
    """URLs, e-mail addresses and JSON-ish records, a third each (seeded)."""
    rng = np.random.default_rng(seed)

    def pick(words: list[str]) -> list[str]:
        return np.array(words)[rng.integers(0, len(words), rows)].tolist()

    kind, number = rng.integers(0, 3, rows).tolist(), rng.integers(0, 100_000, rows).tolist()
    host, path, user, domain = pick(MIX_HOSTS), pick(MIX_PATHS), pick(MIX_USERS), pick(MIX_DOMAINS)
    key1, key2, status = pick(MIX_KEYS), pick(MIX_KEYS), pick(MIX_STATUS)
    forms = (
        lambda i: f"https://{host[i]}/{path[i]}?id={number[i]}",
        lambda i: f"{user[i]}.{number[i] % 1000}@{domain[i]}",
        lambda i: f'{{"{key1[i]}": {number[i]}, "{key2[i]}": "{status[i]}", "user": "{user[i]}"}}',
    )
    return pa.array([forms[kind[i]](i) for i in range(rows)])


def block(array: pa.Array) -> VariableWidthBlock:
    offsets = np.frombuffer(array.buffers()[1], np.int32)[: len(array) + 1].astype(np.int64)
    data = np.frombuffer(array.buffers()[2], np.uint8)
    return VariableWidthBlock(offsets, data, len(array))


def cpu(fn, repeats: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeats):
        start = time.thread_time()
        fn()
        times.append(time.thread_time() - start)
    return statistics.median(times)


def write_cpu(array: pa.Array, repeats: int) -> tuple[float, float]:
    """CPU seconds (all threads, median) of one-column FSST file writes: (pylance, lance_ops)."""
    import tempfile

    from lance.file import LanceFileWriter as PylanceWriter

    from lance_ops.file import LanceFileWriter

    meta = {"lance-encoding:compression": "fsst", "lance-encoding:dictionary": "never"}
    table = pa.table({"s": array}, schema=pa.schema([pa.field("s", array.type, metadata=meta)]))
    times: dict[str, list[float]] = {"pylance": [], "lance_ops": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeats + 1):  # the first round warms up
            for name, writer in (("pylance", PylanceWriter), ("lance_ops", LanceFileWriter)):
                start = time.process_time()
                with writer(f"{tmp}/{name}-{i}.lance", table.schema, version="2.2") as out:
                    out.write_batch(table)
                if i:
                    times[name].append(time.process_time() - start)
    return statistics.median(times["pylance"]), statistics.median(times["lance_ops"])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--words", action="store_true", help="also a 4-word text column")
    parser.add_argument("--mix", action="store_true", help="also URLs, e-mails and JSON-ish text")
    parser.add_argument("--comment", action="store_true", help="also the mixed table's comment")
    parser.add_argument("--pylance", action="store_true", help="also whole-file writes, pylance side by side")
    args = parser.parse_args()
    print(f"lance_ops from {Path(fsst.__file__).parents[3]}", file=sys.stderr)
    mixed = make_table("mixed", args.rows)
    columns = {"name (4-24 random chars)": mixed.column("name").combine_chunks()}
    if args.comment:
        columns["comment (name, nullable)"] = mixed.column("comment").combine_chunks()
    if args.words:
        columns["text (4 words)"] = word_column(args.rows)
    if args.mix:
        columns["URLs / e-mails / JSON"] = mix_column(args.rows)
    for label, array in columns.items():
        values = block(array)
        size = int(values.offsets[-1]) / 1e6
        fsst.fsst_encode(values)  # compile / warm
        table_s = cpu(lambda v=values: fsst.build_symbol_table(v.data, v.offsets), args.repeats)
        total_s = cpu(lambda v=values: fsst.fsst_encode(v), args.repeats)
        coded, _ = fsst.fsst_encode(values)
        ratio = int(coded.offsets[-1]) / 1e6 / size
        print(
            f"{label}: {size:.1f} MB, table {table_s * 1e3:.1f} ms, encode {total_s * 1e3:.1f} ms CPU "
            f"-> {size / total_s:.0f} MB/s per core (coding alone {size / (total_s - table_s):.0f} MB/s), "
            f"coded/raw {ratio:.4f} ({int(coded.offsets[-1]):,} bytes)"
        )
        if args.pylance:
            theirs, ours = write_cpu(array, args.repeats)
            print(
                f"  one-column 2.2 file with FSST, CPU of all threads: pylance {theirs * 1e3:.1f} ms, "
                f"lance_ops {ours * 1e3:.1f} ms ({ours / theirs:.2f}x pylance)"
            )


if __name__ == "__main__":
    main()
