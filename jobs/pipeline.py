"""The main job: one day of a Lance dataset's life, run through Spark, on the dataset it finds.

    python -m jobs.pipeline [--uri DIR] [--rows N] [--appends K] [--retain-versions R] [--master M]

Each run is one day; the next run continues the dataset the last one left (steps, in order, each a
Spark job committing one transaction, or nothing when there is nothing to do):

1. ``append`` x K — ``rows`` new demo rows each (ids continue after the largest id) through
   ``df.write.format("lance")`` with ``fill_missing="compute"``: a column the dataset gained from
   an SQL expression (``score_x10``, step 4 of the first day) is computed for the new rows;
2. ``backfill`` — a replace-where correction of the day's ``alpha`` rows (score doubled, the
   computed column recomputed from it), one ``Update``;
3. ``delete`` — :func:`jobs.delete` of the rows without a note;
4. ``add_column`` — :func:`jobs.add_columns` of ``score_x10 = score * 10``, the first day only (the
   schema evolves once; later days check the column still holds ``score * 10`` everywhere);
5. ``profile`` — :func:`jobs.profile_encodings`: per-partition HLL sketches merged into the
   dataset's encoding plan, stored in its config (one ``UpdateConfig``) when it changed;
6. ``compact`` — :func:`jobs.compact` into fragments of up to 1Mi rows (rewritten with the stored
   plan); nothing is committed when there is nothing to merge;
7. ``tag`` — the latest version is tagged ``day-<n>``;
8. ``statistics`` — :func:`jobs.rebuild_statistics` (executors compute, one ``UpdateConfig`` when
   a fragment lacks statistics);
9. ``cleanup`` — :func:`jobs.cleanup`: a dry run, then the cleanup of untagged versions beyond the
   ``retain_versions`` newest (default 5), so ``lance-ops history`` and the report show the days.

Each step's result is checked against the state before it (rows, schema, the committed operation);
one line per step reports version, rows, fragments, bytes and seconds, and the last line is a JSON
summary. Any failure — a wrong result or an error — ends the run with one line
``FAILED: <step>: <reason>`` on stderr and exit status 1; the traceback, with Spark's own log, is in
the log file (``--log-file``, default ``pipeline.log`` beside the dataset). Default dataset:
``data/demo.lance`` under the repository root.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import re
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import jobs
import lance_ops
from jobs.session import get_spark
from lance_ops.errors import DatasetNotFoundError
from lance_ops.ops.engine import ENCODING_PLAN_KEY as PLAN_CONFIG_KEY
from lance_ops.ops.engine import EncodingPlan

DEFAULT_URI = str(Path(__file__).resolve().parent.parent / "data" / "demo.lance")
CATEGORIES = ("alpha", "beta", "gamma", "delta")
# The column the first day adds (earlier releases of the demo named it score_x10_v<version>).
EVOLVED_COLUMN = "score_x10"
EVOLVED_EXPRESSION = "score * 10"
DEFAULT_RETAIN_VERSIONS = 5
# Compaction merges each day's fragments into fragments of up to this many rows.
TARGET_ROWS_PER_FRAGMENT = 1024 * 1024
TAG_PREFIX = "day-"

# Named, not __name__: run as `python -m jobs.pipeline` the module is __main__, outside "jobs".
log = logging.getLogger("jobs.pipeline")


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
    """A step failed: it committed a result that is not the expected one, or raised."""


@dataclass
class Day:
    """What the steps of one run share: the first id the day appended (None before the appends)."""

    first_id: int | None = None


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


def evolved_column(columns: Sequence[str]) -> str | None:
    """The column the first day added, if the dataset has it."""
    return next((c for c in columns if c == EVOLVED_COLUMN or c.startswith(f"{EVOLVED_COLUMN}_v")), None)


def next_id(uri: str) -> int:
    """One past the largest id of the latest version (0 for an empty or missing dataset)."""
    try:
        ids = lance_ops.dataset(uri).to_table(columns=["id"]).column("id")
    except DatasetNotFoundError:
        return 0
    largest = pc.max(ids).as_py()
    return 0 if largest is None else largest + 1


# A step runs on (spark, uri, state before) and returns a check of the state after it.
Check = Callable[[Snapshot], None]
Step = Callable[[SparkSession, str, "Snapshot | None"], Check]


def append_step(rows: int, day: Day | None = None) -> Step:
    """Append ``rows`` new rows; columns the dataset gained from SQL are computed for them."""

    def step(spark: SparkSession, uri: str, before: Snapshot | None) -> Check:
        start = next_id(uri)
        if day is not None and day.first_id is None:
            day.first_id = start
        write_lance(demo_frame(spark, rows, start=start), uri, options={"fill_missing": "compute"})
        live = 0 if before is None else before.rows

        def check(after: Snapshot) -> None:
            expect(after.rows == live + rows, f"{after.rows} rows after appending, expected {live + rows}")
            counted = spark.read.format("lance").load(uri).count()
            expect(counted == after.rows, f"Spark reads {counted} rows, the dataset has {after.rows}")

        return check

    return step


def backfill_step(day: Day) -> Step:
    """Replace the day's ``alpha`` rows with themselves, score doubled: one ``Update``, same row
    count; the evolved column is left out of the DataFrame and recomputed by the writer."""

    def step(spark: SparkSession, uri: str, before: Snapshot | None) -> Check:
        assert before is not None
        where = (
            "category = 'alpha'" if day.first_id is None else f"category = 'alpha' AND id >= {day.first_id}"
        )
        current = spark.read.format("lance").option("filter", where).load(uri)
        alpha = current.count()
        total = current.agg(F.sum("score")).collect()[0][0] or 0.0
        evolved = evolved_column(before.columns)
        corrected = current.withColumn("score", F.col("score") * 2)
        if evolved is not None:
            corrected = corrected.drop(evolved)
        corrected.write.format("lance").mode("overwrite").option("replace_where", where).option(
            "fill_missing", "compute"
        ).save(uri)

        def check(after: Snapshot) -> None:
            expect(after.operation == "Update", f"committed {after.operation}, not one Update")
            expect(after.rows == before.rows, f"{after.rows} rows, expected {before.rows}")
            again = spark.read.format("lance").option("filter", where).load(uri)
            expect(again.count() == alpha, "the number of alpha rows changed")
            doubled = again.agg(F.sum("score")).collect()[0][0] or 0.0
            expect(abs(doubled - 2 * total) <= 1e-6 * max(1.0, abs(total)), "scores not doubled")

        return check

    return step


def delete_step(spark: SparkSession, uri: str, before: Snapshot | None) -> Check:
    assert before is not None
    doomed = lance_ops.dataset(uri).count_rows("note IS NULL")
    result = jobs.delete(spark, uri, "note IS NULL")

    def check(after: Snapshot) -> None:
        expect(after.operation == "Delete" or doomed == 0, f"delete committed {after.operation}")
        expect(
            result.num_deleted_rows == doomed, f"deleted {result.num_deleted_rows} rows, expected {doomed}"
        )
        expect(after.rows == before.rows - doomed, f"{after.rows} rows left after the delete")

    return check


def add_column_step(spark: SparkSession, uri: str, before: Snapshot | None) -> Check:
    """Add ``score_x10`` unless an earlier day did; either way it must equal ``score * 10``."""
    assert before is not None
    name = evolved_column(before.columns)
    added = name is None
    if added:
        name = EVOLVED_COLUMN
        jobs.add_columns(spark, uri, {name: EVOLVED_EXPRESSION})
    else:
        log.info("column %s is already there: the schema evolved on an earlier day", name)

    def check(after: Snapshot) -> None:
        if added:
            expect(after.operation == "Merge", f"add column committed {after.operation}")
            expect(after.columns == (*before.columns, name), f"columns {after.columns}")
        else:
            expect(after.version == before.version, "the schema had evolved already, yet a version was made")
        expect(after.rows == before.rows, "the row count changed")
        wrong = lance_ops.dataset(uri).count_rows(f"{name} <> {EVOLVED_EXPRESSION}")
        expect(wrong == 0, f"{wrong} rows where {name} is not {EVOLVED_EXPRESSION}")

    return check


def profile_step(spark: SparkSession, uri: str, before: Snapshot | None) -> Check:
    """Profile every column on executors; store the dataset's encoding plan when it changed."""
    assert before is not None
    stored_before = lance_ops.dataset(uri).manifest.config.get(PLAN_CONFIG_KEY)
    plan = jobs.profile_encodings(spark, uri)
    changed = stored_before != plan.to_json()

    def check(after: Snapshot) -> None:
        if changed:
            expect(after.operation == "UpdateConfig", f"profile committed {after.operation}")
        else:
            expect(after.version == before.version, "the plan did not change, yet a version was made")
        expect(after.rows == before.rows, "profile changed the row count")
        stored = EncodingPlan.from_config(lance_ops.dataset(uri).manifest.config)
        expect(stored == plan, "the stored plan is not the one computed")
        expect(plan.columns["category"].dictionary, "4 categories should be a dictionary")

    return check


def compact_step(target_rows: int = TARGET_ROWS_PER_FRAGMENT) -> Step:
    def step(spark: SparkSession, uri: str, before: Snapshot | None) -> Check:
        assert before is not None
        jobs.compact(spark, uri, target_rows_per_fragment=target_rows)

        def check(after: Snapshot) -> None:
            expect(after.rows == before.rows, "compaction changed the row count")
            expect(after.fragments <= before.fragments, "compaction added fragments")

        return check

    return step


def tag_step(spark: SparkSession, uri: str, before: Snapshot | None) -> Check:
    """Tag the latest version ``day-<n>`` (the n-th run), so cleanup keeps each day's state."""
    assert before is not None
    tags = lance_ops.dataset(uri).tags
    days = [int(t[len(TAG_PREFIX) :]) for t in tags.list() if re.fullmatch(rf"{TAG_PREFIX}\d+", t)]
    name = f"{TAG_PREFIX}{max(days, default=0) + 1}"
    tags.create(name, before.version)

    def check(after: Snapshot) -> None:
        tagged = lance_ops.dataset(uri).tags.list()
        expect(tagged.get(name, {}).get("version") == before.version, f"{name} is not on v{before.version}")

    return check


def statistics_step(spark: SparkSession, uri: str, before: Snapshot | None) -> Check:
    """Rebuild column statistics for the latest version on executors (one commit, if any lack)."""
    assert before is not None
    jobs.rebuild_statistics(spark, uri)

    def check(after: Snapshot) -> None:
        expect(after.rows == before.rows, "statistics rebuild changed the row count")
        summary = lance_ops.dataset(uri).stats.column_summary("score")
        expect(
            summary["fragments_with_statistics"] == summary["num_fragments"],
            f"{summary['fragments_with_statistics']} of {summary['num_fragments']} fragments have statistics",
        )

    return check


def cleanup_step(retain_versions: int = DEFAULT_RETAIN_VERSIONS) -> Step:
    """A cleanup dry run, then the cleanup of the untagged versions beyond the ``retain_versions``
    newest; both must agree."""

    def step(spark: SparkSession, uri: str, before: Snapshot | None) -> Check:
        assert before is not None
        zero = dt.timedelta(0)
        dry = jobs.cleanup(
            spark, uri, zero, retain_versions, error_if_tagged_old_versions=False, dry_run=True
        )
        done = jobs.cleanup(spark, uri, zero, retain_versions, error_if_tagged_old_versions=False)

        def check(after: Snapshot) -> None:
            expect(set(dry.paths) == set(done.paths), "cleanup removed other files than its dry run listed")
            expect(after.version == before.version, "cleanup changed the latest version")
            ds = lance_ops.dataset(uri)
            kept = len(ds.versions())
            expect(kept >= min(retain_versions, before.version), f"only {kept} versions kept")
            for name, tag in ds.tags.list().items():
                tagged = ds.checkout_version(name)
                expect(tagged.version == tag["version"], f"tag {name} does not open")
                tagged.count_rows()

        return check

    return step


def cycle(rows: int, appends: int, retain_versions: int = DEFAULT_RETAIN_VERSIONS) -> list[tuple[str, Step]]:
    """The steps of one day, in order."""
    day = Day()
    steps: list[tuple[str, Step]] = [("append", append_step(rows, day)) for _ in range(appends)]
    steps += [
        ("backfill", backfill_step(day)),
        ("delete", delete_step),
        ("add_column", add_column_step),
        # Before compaction, so that compaction rewrites the data with the stored encoding plan.
        ("profile", profile_step),
        ("compact", compact_step()),
        ("tag", tag_step),
        ("statistics", statistics_step),
        ("cleanup", cleanup_step(retain_versions)),
    ]
    return steps


def run_step(spark: SparkSession, uri: str, name: str, step: Step) -> StepReport:
    """Run one step, check its result (raising :class:`StepFailed`) and report the state after it."""
    started = time.perf_counter()
    check = step(spark, uri, snapshot(uri))
    seconds = time.perf_counter() - started
    after = snapshot(uri)
    if after is None:
        raise StepFailed(f"no dataset at {uri}")
    check(after)
    return StepReport(name, after.version, after.rows, after.fragments, after.bytes, seconds)


# The last line of a Python traceback inside a Spark error: ``package.module.SomeError: message``.
_PYTHON_ERROR_LINE = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?([A-Za-z_]\w*(?:Error|Exception)): (.+)$")


def reason(exc: BaseException) -> str:
    """One line saying why ``exc`` happened; for a Spark error, the Python error it wraps."""
    if isinstance(exc, StepFailed):
        return str(exc)
    lines = [line.strip() for line in str(exc).splitlines()]
    wrapped = [m for m in map(_PYTHON_ERROR_LINE.match, lines) if m is not None]
    if wrapped and type(exc).__module__.startswith(("py4j", "pyspark")):
        name, message = wrapped[-1].groups()
        return f"{name}: {message}"
    first = next((line for line in lines if line), "")
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def run(
    spark: SparkSession,
    uri: str,
    rows: int,
    appends: int = 3,
    retain_versions: int = DEFAULT_RETAIN_VERSIONS,
) -> list[StepReport]:
    """Run one day on ``uri``, printing one line per step; the first failure raises
    :class:`StepFailed` with ``<step>: <reason>`` (the original error as its cause)."""
    reports = []
    for name, step in cycle(rows, appends, retain_versions):
        try:
            report = run_step(spark, uri, name, step)
        except Exception as exc:
            raise StepFailed(f"{name}: {reason(exc)}") from exc
        print(report.line(), flush=True)
        reports.append(report)
    return reports


def default_log_file(uri: str) -> Path:
    """``pipeline.log`` beside a local dataset, else in the working directory."""
    if "://" in uri and not uri.startswith("file://"):
        return Path("pipeline.log").resolve()
    return Path(uri.removeprefix("file://")).resolve().parent / "pipeline.log"


LOG4J_TEMPLATE = """\
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.append = true
appender.file.fileName = {path}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{yyyy-MM-dd HH:mm:ss}} %p %c{{1}}: %m%n
"""


# The loggers whose INFO lines go to the log file: this package's and the library's.
LOGGED = ("jobs", "lance_ops")


def log_to(path: Path) -> tuple[logging.Handler, dict[str, str]]:
    """A handler writing the jobs' and the library's log lines to ``path`` (added to their loggers;
    the caller removes it), and the Spark settings sending the driver's log4j output there too
    (the JVM reads them when it starts)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    for name in LOGGED:
        logging.getLogger(name).addHandler(handler)
        logging.getLogger(name).setLevel(logging.INFO)
    properties = path.with_suffix(".log4j2.properties")
    properties.write_text(LOG4J_TEMPLATE.format(path=path))
    return handler, {"spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{properties}"}


def main(argv: Sequence[str] | None = None, spark: SparkSession | None = None) -> list[StepReport]:
    """The command line; ``spark``: run on that session (left open) instead of a new one."""
    parser = argparse.ArgumentParser(prog="python -m jobs.pipeline", description=__doc__.splitlines()[0])
    parser.add_argument("--uri", default=DEFAULT_URI, help="Lance dataset directory (default: %(default)s)")
    parser.add_argument("--rows", type=int, default=10_000, help="rows per append (default: %(default)s)")
    parser.add_argument("--appends", type=int, default=3, help="appends per day (default: %(default)s)")
    parser.add_argument(
        "--retain-versions",
        type=int,
        default=DEFAULT_RETAIN_VERSIONS,
        help="untagged versions cleanup keeps (default: %(default)s)",
    )
    parser.add_argument(
        "--log-file", default=None, help="log and tracebacks (default: pipeline.log beside the dataset)"
    )
    parser.add_argument(
        "--master", default=None, help="Spark master (default: spark-submit's, else local[*])"
    )
    args = parser.parse_args(argv)
    log_file = Path(args.log_file) if args.log_file else default_log_file(args.uri)
    handler, spark_logging = log_to(log_file)
    log.info("run on %s: %d x %d rows", args.uri, args.appends, args.rows)
    session = spark
    try:
        if session is None:
            session = get_spark("lance-ops-pipeline", master=args.master, config=spark_logging)
        reports = run(session, args.uri, args.rows, args.appends, args.retain_versions)
    except Exception as exc:
        log.error("the run failed\n%s", "".join(traceback.format_exception(exc)))
        step = str(exc) if isinstance(exc, StepFailed) else f"start: {reason(exc)}"
        print(f"FAILED: {step} (traceback in {log_file})", file=sys.stderr)
        sys.exit(1)
    finally:
        if spark is None and session is not None:
            session.stop()
        for name in LOGGED:
            logging.getLogger(name).removeHandler(handler)
        handler.close()
    print(json.dumps({**asdict(summarize(args.uri)), "steps": [asdict(r) for r in reports]}))
    return reports


if __name__ == "__main__":
    main()
