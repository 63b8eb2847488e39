"""The main job: the whole maintenance cycle of a Lance dataset, run through Spark.

    python -m jobs.pipeline [--uri DIR] [--rows N] [--appends K] [--master MASTER]

Steps, in order (each is a Spark job committing one transaction, or one per ``commit_every`` group):

1. ``append`` x K — ``rows`` demo rows each through ``df.write.format("lance")``;
2. ``backfill`` — a replace-where rewrite of the ``alpha`` category (score doubled), one ``Update``;
3. ``delete`` — :func:`jobs.delete` of the rows without a note;
4. ``add_column`` — :func:`jobs.add_columns` of a SQL column computed from ``score``;
5. ``profile`` — :func:`jobs.profile_encodings`: per-partition HLL sketches merged into the
   dataset's encoding plan, stored in its config (one ``UpdateConfig``);
6. ``compact`` — :func:`jobs.compact` into fragments of ``rows * appends`` rows (rewritten with the
   stored plan);
7. ``tag`` — the compacted version is tagged;
8. ``statistics`` — :func:`jobs.rebuild_statistics` (executors compute, one ``UpdateConfig``);
9. ``cleanup`` — :func:`jobs.cleanup`: a dry run, then the cleanup of every untagged old version.

Each step's result is checked against the state before it (rows, schema, the committed operation);
one line per step reports version, rows, fragments, bytes and seconds, and the process exits with
status 1 on the first wrong result. The last line is a JSON summary. Default dataset:
``data/demo.lance`` under the repository root; re-running continues on the existing dataset.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import jobs
import lance_ops
from jobs.session import get_spark
from lance_ops.encoding.plan import EncodingPlan
from lance_ops.errors import DatasetNotFoundError

DEFAULT_URI = str(Path(__file__).resolve().parent.parent / "data" / "demo.lance")
CATEGORIES = ("alpha", "beta", "gamma", "delta")


@dataclass(frozen=True)
class WriteSummary:
    """What a Lance dataset looks like after a write."""

    uri: str
    version: int
    rows: int
    fragments: int


@dataclass(frozen=True)
class Snapshot:
    """The state a step is checked against: latest version, live rows, fragments, data bytes,
    column names and the operation that made the version."""

    version: int
    rows: int
    fragments: int
    bytes: int
    columns: tuple[str, ...]
    operation: str


@dataclass(frozen=True)
class StepReport:
    """One line of the job's output."""

    step: str
    version: int
    rows: int
    fragments: int
    bytes: int
    seconds: float

    def line(self) -> str:
        return (
            f"{self.step:<12} version={self.version} rows={self.rows} fragments={self.fragments} "
            f"bytes={self.bytes} seconds={self.seconds:.2f}"
        )


class StepFailed(RuntimeError):
    """A step committed a result that is not the expected one."""


def demo_frame(spark: SparkSession, rows: int, start: int = 0, partitions: int | None = None) -> DataFrame:
    """``rows`` deterministic demo rows with ids ``start .. start+rows-1``: ints, floats, strings, nulls,
    timestamps and a small float vector."""
    ids = spark.range(start, start + rows, numPartitions=partitions or spark.sparkContext.defaultParallelism)
    category = F.element_at(
        F.array(*[F.lit(c) for c in CATEGORIES]), (F.col("id") % len(CATEGORIES) + 1).cast("int")
    )
    return ids.select(
        F.col("id"),
        category.alias("category"),
        (F.col("id") * F.lit(0.5)).cast("double").alias("score"),
        F.when(F.col("id") % 7 == 0, F.lit(None))
        .otherwise(F.concat(F.lit("note-"), F.col("id")))
        .alias("note"),
        F.timestamp_seconds(F.lit(1_700_000_000) + F.col("id")).alias("ts"),
        F.array(*[(F.col("id") + i).cast("float") for i in range(4)]).alias("vector"),
    )


def write_lance(
    df: DataFrame, uri: str, mode: str = "append", options: Mapping[str, str] | None = None
) -> None:
    """Write ``df`` through the data source (any save mode, see :func:`jobs.save`; extra ``options``)."""
    jobs.save(df, uri, mode=mode, **dict(options or {}))


def summarize(uri: str, storage_options: Mapping[str, str] | None = None) -> WriteSummary:
    """Version, row count and fragment count of the latest version at ``uri``."""
    ds = lance_ops.dataset(uri, storage_options=dict(storage_options or {}))
    return WriteSummary(uri=uri, version=ds.version, rows=ds.count_rows(), fragments=len(ds.get_fragments()))


def snapshot(uri: str) -> Snapshot | None:
    """The latest state of ``uri`` (None: no dataset yet)."""
    try:
        ds = lance_ops.dataset(uri)
    except DatasetNotFoundError:
        return None
    fragments = ds.manifest.fragments
    transaction = ds.read_transaction()
    return Snapshot(
        version=ds.version,
        rows=ds.count_rows(),
        fragments=len(fragments),
        bytes=sum(d.file_size_bytes or 0 for f in fragments for d in f.files),
        columns=tuple(ds.schema.names),
        operation="" if transaction is None else type(transaction.operation).__name__,
    )


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise StepFailed(message)


# A step runs on (spark, uri, state before) and returns a check of the state after it.
Check = Callable[[Snapshot], None]
Step = Callable[[SparkSession, str, "Snapshot | None"], Check]


def append_step(rows: int) -> Step:
    def step(spark: SparkSession, uri: str, before: Snapshot | None) -> Check:
        start = 0 if before is None else lance_ops.dataset(uri).count_rows()
        write_lance(demo_frame(spark, rows, start=start), uri)

        def check(after: Snapshot) -> None:
            expect(after.rows == start + rows, f"append: {after.rows} rows, expected {start + rows}")
            counted = spark.read.format("lance").load(uri).count()
            expect(counted == after.rows, f"append: Spark reads {counted} rows, the dataset has {after.rows}")

        return check

    return step


def backfill_step(spark: SparkSession, uri: str, before: Snapshot | None) -> Check:
    """Replace the ``alpha`` rows with themselves, score doubled: one ``Update``, same row count."""
    assert before is not None
    where = "category = 'alpha'"
    current = spark.read.format("lance").load(uri).filter(F.col("category") == "alpha")
    alpha = current.count()
    total = current.agg(F.sum("score")).collect()[0][0] or 0.0
    current.withColumn("score", F.col("score") * 2).write.format("lance").mode("overwrite").option(
        "replace_where", where
    ).save(uri)

    def check(after: Snapshot) -> None:
        expect(after.operation == "Update", f"backfill committed {after.operation}, not one Update")
        expect(after.rows == before.rows, f"backfill: {after.rows} rows, expected {before.rows}")
        again = spark.read.format("lance").option("filter", where).load(uri)
        expect(again.count() == alpha, "backfill changed the number of alpha rows")
        doubled = again.agg(F.sum("score")).collect()[0][0] or 0.0
        expect(abs(doubled - 2 * total) <= 1e-6 * max(1.0, abs(total)), "backfill: scores not doubled")

    return check


def delete_step(spark: SparkSession, uri: str, before: Snapshot | None) -> Check:
    assert before is not None
    doomed = lance_ops.dataset(uri).count_rows("note IS NULL")
    result = jobs.delete(spark, uri, "note IS NULL")

    def check(after: Snapshot) -> None:
        expect(after.operation == "Delete", f"delete committed {after.operation}")
        expect(
            result.num_deleted_rows == doomed, f"delete: {result.num_deleted_rows} rows, expected {doomed}"
        )
        expect(after.rows == before.rows - doomed, f"delete: {after.rows} rows left")

    return check


def add_column_step(spark: SparkSession, uri: str, before: Snapshot | None) -> Check:
    assert before is not None
    name = f"score_x10_v{before.version}"
    jobs.add_columns(spark, uri, {name: "score * 10"})

    def check(after: Snapshot) -> None:
        expect(after.operation == "Merge", f"add column committed {after.operation}")
        expect(after.columns == (*before.columns, name), f"add column: columns {after.columns}")
        expect(after.rows == before.rows, "add column changed the row count")
        wrong = lance_ops.dataset(uri).count_rows(f"{name} <> score * 10")
        expect(wrong == 0, f"add column: {wrong} wrong values")

    return check


def profile_step(spark: SparkSession, uri: str, before: Snapshot | None) -> Check:
    """Profile every column on executors and store the dataset's encoding plan (one commit)."""
    assert before is not None
    plan = jobs.profile_encodings(spark, uri)

    def check(after: Snapshot) -> None:
        expect(after.operation == "UpdateConfig", f"profile committed {after.operation}")
        expect(after.rows == before.rows, "profile changed the row count")
        stored = EncodingPlan.from_config(lance_ops.dataset(uri).manifest.config)
        expect(stored == plan, "profile: the stored plan is not the one computed")
        expect(plan.columns["category"].dictionary, "profile: 4 categories should be a dictionary")

    return check


def compact_step(target_rows: int) -> Step:
    def step(spark: SparkSession, uri: str, before: Snapshot | None) -> Check:
        assert before is not None
        jobs.compact(spark, uri, target_rows_per_fragment=target_rows)

        def check(after: Snapshot) -> None:
            expect(after.rows == before.rows, "compaction changed the row count")
            expect(after.fragments <= before.fragments, "compaction added fragments")

        return check

    return step


def tag_step(spark: SparkSession, uri: str, before: Snapshot | None) -> Check:
    """Tag the compacted version, so the cleanup below must keep it."""
    assert before is not None
    name = f"compacted-v{before.version}"
    lance_ops.dataset(uri).tags.create(name, before.version)

    def check(after: Snapshot) -> None:
        tags = lance_ops.dataset(uri).tags.list()
        expect(tags.get(name, {}).get("version") == before.version, f"tag: {name} not on v{before.version}")

    return check


def statistics_step(spark: SparkSession, uri: str, before: Snapshot | None) -> Check:
    """Rebuild column statistics for the latest version on executors (one commit)."""
    assert before is not None
    jobs.rebuild_statistics(spark, uri)

    def check(after: Snapshot) -> None:
        expect(after.rows == before.rows, "statistics rebuild changed the row count")
        summary = lance_ops.dataset(uri).stats.column_summary("score")
        expect(
            summary["fragments_with_statistics"] == summary["num_fragments"],
            f"statistics: {summary['fragments_with_statistics']} of {summary['num_fragments']} fragments",
        )

    return check


def cleanup_step(spark: SparkSession, uri: str, before: Snapshot | None) -> Check:
    """A cleanup dry run, then the cleanup of every untagged old version; both must agree."""
    assert before is not None
    zero = dt.timedelta(0)
    dry = jobs.cleanup(spark, uri, zero, error_if_tagged_old_versions=False, dry_run=True)
    done = jobs.cleanup(spark, uri, zero, error_if_tagged_old_versions=False)

    def check(after: Snapshot) -> None:
        expect(set(dry.paths) == set(done.paths), "cleanup removed other files than its dry run listed")
        expect(after.rows == before.rows, "cleanup changed the latest version")
        ds = lance_ops.dataset(uri)
        for name, tag in ds.tags.list().items():
            tagged = ds.checkout_version(name)
            expect(tagged.version == tag["version"], f"cleanup: tag {name} does not open")
            tagged.count_rows()

    return check


def cycle(rows: int, appends: int) -> list[tuple[str, Step]]:
    """The steps of the maintenance cycle, in order."""
    steps: list[tuple[str, Step]] = [("append", append_step(rows)) for _ in range(appends)]
    steps += [
        ("backfill", backfill_step),
        ("delete", delete_step),
        ("add_column", add_column_step),
        # Before compaction, so that compaction rewrites the data with the stored encoding plan.
        ("profile", profile_step),
        ("compact", compact_step(rows * appends)),
        ("tag", tag_step),
        ("statistics", statistics_step),
        ("cleanup", cleanup_step),
    ]
    return steps


def run_step(spark: SparkSession, uri: str, name: str, step: Step) -> StepReport:
    """Run one step, check its result (raising :class:`StepFailed`) and report the state after it."""
    started = time.perf_counter()
    check = step(spark, uri, snapshot(uri))
    seconds = time.perf_counter() - started
    after = snapshot(uri)
    if after is None:
        raise StepFailed(f"{name}: no dataset at {uri}")
    check(after)
    return StepReport(name, after.version, after.rows, after.fragments, after.bytes, seconds)


def run(spark: SparkSession, uri: str, rows: int, appends: int = 3) -> list[StepReport]:
    """Run the cycle on ``uri``, printing one line per step; raises :class:`StepFailed` on a wrong result."""
    reports = []
    for name, step in cycle(rows, appends):
        report = run_step(spark, uri, name, step)
        print(report.line(), flush=True)
        reports.append(report)
    return reports


def main(argv: Sequence[str] | None = None) -> list[StepReport]:
    parser = argparse.ArgumentParser(prog="python -m jobs.pipeline", description=__doc__.splitlines()[0])
    parser.add_argument("--uri", default=DEFAULT_URI, help="Lance dataset directory (default: %(default)s)")
    parser.add_argument("--rows", type=int, default=10_000, help="rows per append (default: %(default)s)")
    parser.add_argument("--appends", type=int, default=3, help="appends per cycle (default: %(default)s)")
    parser.add_argument(
        "--master", default=None, help="Spark master (default: spark-submit's, else local[*])"
    )
    args = parser.parse_args(argv)
    spark = get_spark("lance-ops-pipeline", master=args.master)
    try:
        reports = run(spark, args.uri, args.rows, args.appends)
    except StepFailed as exc:
        print(f"FAILED: {exc}", file=sys.stderr)
        sys.exit(1)
    finally:
        spark.stop()
    print(json.dumps({**asdict(summarize(args.uri)), "steps": [asdict(r) for r in reports]}))
    return reports


if __name__ == "__main__":
    main()
