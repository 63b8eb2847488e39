"""The ``lance-ops`` commands (click): thin layers over :mod:`lance_ops.dataset` and :mod:`lance_ops.ops`.

Every command takes ``--json`` (machine-readable output on stdout) and ``--storage-option KEY=VALUE``
(repeatable, for remote stores). Exit status: 0 done, 1 failed (the library refused or an I/O error:
one line ``lance-ops: error: ...`` on stderr), 2 usage (one line ``lance-ops: usage: ...``). No
traceback unless ``lance-ops --debug COMMAND``. Commands that change a dataset print what they did;
``compact``, ``cleanup`` and ``delete`` have ``--dry-run`` (plan, write nothing).

Importing this module loads click, rich and :mod:`lance_ops.errors` only: the dataset layer (and
through it pyarrow.dataset, pandas, sqlglot) is imported inside the commands that read a dataset,
so ``lance-ops --help`` and ``lance-ops COMMAND --help`` start in a fraction of a second
(``tests/test_cli.py::test_help_imports_no_heavy_modules`` holds the line).
"""

from __future__ import annotations

import datetime as dt
import functools
import importlib.util
import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import click

from lance_ops.cli.output import ProgressBar, emit_json, human_bytes, lines, table
from lance_ops.errors import LanceOpsError, TaggedVersionsError, UnsupportedFeatureError

if TYPE_CHECKING:
    from lance_ops.dataset import LanceDataset
    from lance_ops.ops.compaction import CompactionOptions, CompactionPlan
    from lance_ops.ops.tags import Tags

F = TypeVar("F", bound=Callable[..., Any])

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


# --- parameter types -----------------------------------------------------------------------------


class KeyValue(click.ParamType):
    """``KEY=VALUE`` -> ``(key, value)``. A malformed argument is not echoed: it may be a secret."""

    name = "KEY=VALUE"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> tuple[str, str]:
        if isinstance(value, tuple):
            return value
        key, sep, text = str(value).partition("=")
        if not sep or not key:
            self.fail("expected KEY=VALUE (the argument has no '=' or no key)", param, ctx)
        return key, text


class Duration(click.ParamType):
    """``30s``, ``15m``, ``12h``, ``7d``, ``2w`` -> ``timedelta``."""

    name = "DURATION"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> dt.timedelta:
        if isinstance(value, dt.timedelta):
            return value
        match = _DURATION.match(str(value))
        if match is None:
            self.fail(f"expected a duration such as 30s, 15m, 12h, 7d or 2w, got {value!r}", param, ctx)
        try:
            return dt.timedelta(**{_UNITS[match.group(2)]: float(match.group(1))})
        except OverflowError:
            self.fail(f"{value!r} is longer than a timedelta holds (999,999,999 days)", param, ctx)


class Version(click.ParamType):
    """A version number or a tag name."""

    name = "VERSION"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int | str:
        text = str(value)
        return int(text) if text.isdigit() else text


def common(command: F) -> F:
    """``--json`` and ``--storage-option`` (as ``storage_options``: a dict or None) for a command."""

    @click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts instead of tables.")
    @click.option(
        "--storage-option",
        "storage_options",
        multiple=True,
        type=KeyValue(),
        help="Object store option KEY=VALUE for remote URIs (repeatable).",
    )
    @functools.wraps(command)
    def wrapper(*args: Any, storage_options: Sequence[tuple[str, str]], **kwargs: Any) -> Any:
        return command(*args, storage_options=dict(storage_options) or None, **kwargs)

    return wrapper  # type: ignore[return-value]


def _done(as_json: bool, result: dict[str, Any], text: str) -> None:
    """Report a change: ``result`` as JSON, or ``text`` for people."""
    if as_json:
        emit_json(result)
    else:
        lines([text])


def _open(uri: str, storage_options: dict[str, str] | None, version: int | str | None = None) -> LanceDataset:
    """The dataset at ``uri`` (the dataset layer is imported here, on first use: see the module doc)."""
    from lance_ops.dataset import dataset

    return dataset(uri, version=version, storage_options=storage_options)


# --- the group -----------------------------------------------------------------------------------


class State:
    """What the group options set for the whole invocation."""

    debug = False


class LanceOpsGroup(click.Group):
    """The command group whose ``main`` applies the exit-status and one-line-error contract, both for
    the console script and for click's test runner."""

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> int:
        status = _status(self, args, prog_name, complete_var=complete_var, **extra)
        if standalone_mode:
            sys.exit(status)
        return status


@click.group(
    "lance-ops",
    cls=LanceOpsGroup,
    no_args_is_help=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.option("--debug", is_flag=True, help="Show the full traceback when a command fails.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Inspect and maintain Lance files and datasets."""
    ctx.ensure_object(State).debug = debug


# --- reading -------------------------------------------------------------------------------------


@cli.command()
@click.argument("path")
@click.option("--version", type=Version(), help="Dataset version number or tag (default: latest).")
@click.option("--pages", is_flag=True, help="List every page with its encoding and sizes.")
@common
def inspect(
    path: str, version: int | str | None, pages: bool, as_json: bool, storage_options: dict[str, str] | None
) -> None:
    """Describe a .lance data file or a dataset directory."""
    from lance_ops.cli import inspect as info
    from lance_ops.file import describe

    if info.is_dataset(path, storage_options):
        report = info.dataset_report(_open(path, storage_options, version), pages=pages)
        emit_json(report) if as_json else _show_dataset(report)
        return
    reader = info.open_file(path, storage_options)
    if version is not None:
        raise click.UsageError("--version applies to datasets, not to single data files")
    file_report = describe.file_report(path, reader, pages=pages)
    emit_json(file_report) if as_json else _show_file(file_report)


def _schema_lines(schema: list[dict[str, Any]]) -> list[str]:
    return [f"  {f['name']}: {f['type']}{'' if f['nullable'] else ' not null'}" for f in schema]


def _show_columns(columns: list[dict[str, Any]], indent: str = "") -> None:
    rows = [
        {
            "column": column["name"],
            "pages": column["num_pages"],
            "bytes": column["bytes"],
            "encodings": ", ".join(column["encodings"]),
        }
        for column in columns
    ]
    table(rows, ["column", "pages", "bytes", "encodings"])
    for column in columns:
        first = 0
        for number, page in enumerate(column.get("pages", [])):
            if number == 0:
                lines([f"{indent}{column['name']}:"])
            lines(
                [
                    f"{indent}  page {number}: rows {first}..{first + page['rows']}, {page['bytes']} bytes "
                    f"in {len(page['buffers'])} buffers",
                    f"{indent}    {page['summary']}",
                ]
            )
            first += page["rows"]


def _show_file(report: dict[str, Any]) -> None:
    lines(
        [
            f"Lance file {report['path']}",
            f"  format version {report['version']}, {report['rows']} rows",
            f"  {report['data_bytes']} data bytes, {report['column_metadata_bytes']} column metadata bytes, "
            f"{report['global_buffer_bytes']} global buffer bytes",
            "Schema:",
            *_schema_lines(report["schema"]),
        ]
    )
    _show_columns(report["columns"])


def _show_dataset(report: dict[str, Any]) -> None:
    lines(
        [
            f"Lance dataset {report['uri']}",
            f"  version {report['version']} (latest {report['latest_version']}), data storage version "
            f"{report['data_storage_version']}, {report['rows']} rows, {len(report['fragments'])} fragments, "
            f"stable row ids: {'yes' if report['stable_row_ids'] else 'no'}",
            f"  versions: {', '.join(map(str, report['versions']))}",
            "Schema:",
            *_schema_lines(report["schema"]),
        ]
    )
    rows = [
        {
            "fragment": f["id"],
            "rows": f["rows"],
            "physical": f["physical_rows"],
            "deleted": f["deleted_rows"],
            "files": len(f["files"]),
            "bytes": sum(d["bytes"] for d in f["files"]),
            "deletion_file": f["deletion_file"] or "",
        }
        for f in report["fragments"]
    ]
    table(rows, ["fragment", "rows", "physical", "deleted", "files", "bytes", "deletion_file"], "Fragments")
    for fragment in report["fragments"]:
        for data_file in fragment["files"]:
            lines(
                [
                    f"fragment {fragment['id']}: {data_file['path']} (file {data_file['version']}, "
                    f"{data_file['bytes']} bytes, fields {data_file['fields']})"
                ]
            )
            if "columns" in data_file:
                _show_columns(data_file["columns"], indent="  ")


@cli.command()
@click.argument("uri")
@common
def versions(uri: str, as_json: bool, storage_options: dict[str, str] | None) -> None:
    """List every version of a dataset with its size."""
    from lance_ops.cli import inspect as info

    rows = info.version_rows(_open(uri, storage_options))
    if as_json:
        emit_json(rows)
    else:
        table(rows, ["version", "timestamp", "rows", "fragments", "data_files", "deleted_rows", "bytes"])


@cli.command()
@click.argument("uri")
@common
def history(uri: str, as_json: bool, storage_options: dict[str, str] | None) -> None:
    """DESCRIBE HISTORY: one row per version with the operation that made it."""
    rows = _open(uri, storage_options).history().to_pylist()
    for row in rows:
        row["timestamp"] = row["timestamp"].isoformat(sep=" ", timespec="seconds")
        row["transaction_properties"] = dict(row["transaction_properties"] or [])
    if as_json:
        emit_json(rows)
    else:
        table(
            rows,
            [
                "version",
                "timestamp",
                "operation",
                "read_version",
                "rows",
                "deleted_rows",
                "fragments",
                "bytes",
                "commit_message",
            ],
        )


# --- tags ----------------------------------------------------------------------------------------


@cli.group(no_args_is_help=False)
def tags() -> None:
    """List, create, update and delete tags (named versions)."""


def _tag_rows(tag_list: Tags) -> list[dict[str, Any]]:
    return [{"name": name, **contents} for name, contents in sorted(tag_list.list().items())]


@tags.command("list")
@click.argument("uri")
@common
def tags_list(uri: str, as_json: bool, storage_options: dict[str, str] | None) -> None:
    """List the tags of a dataset."""
    rows = _tag_rows(_open(uri, storage_options).tags)
    if as_json:
        emit_json(rows)
    else:
        table(rows, ["name", "version", "manifest_size"])


def _change_tag(
    action: str,
    uri: str,
    name: str,
    version: int | str,
    as_json: bool,
    storage_options: dict[str, str] | None,
) -> None:
    tag_list = _open(uri, storage_options).tags
    getattr(tag_list, action)(name, version)
    target = tag_list.get_version(name)
    _done(
        as_json,
        {"tag": name, "version": target, "action": action},
        f"{action}d tag {name} -> version {target}",
    )


@tags.command("create")
@click.argument("uri")
@click.argument("name")
@click.argument("version", type=Version())
@common
def tags_create(
    uri: str, name: str, version: int | str, as_json: bool, storage_options: dict[str, str] | None
) -> None:
    """Create the tag NAME on VERSION (a number or another tag)."""
    _change_tag("create", uri, name, version, as_json, storage_options)


@tags.command("update")
@click.argument("uri")
@click.argument("name")
@click.argument("version", type=Version())
@common
def tags_update(
    uri: str, name: str, version: int | str, as_json: bool, storage_options: dict[str, str] | None
) -> None:
    """Point the existing tag NAME at VERSION."""
    _change_tag("update", uri, name, version, as_json, storage_options)


@tags.command("delete")
@click.argument("uri")
@click.argument("name")
@common
def tags_delete(uri: str, name: str, as_json: bool, storage_options: dict[str, str] | None) -> None:
    """Delete the tag NAME."""
    _open(uri, storage_options).tags.delete(name)
    _done(as_json, {"tag": name, "action": "delete"}, f"deleted tag {name}")


# --- indices -------------------------------------------------------------------------------------


@cli.group(no_args_is_help=False)
def index() -> None:
    """List, create, optimize and drop indices."""


def _param_value(text: str) -> Any:
    """A ``--param`` value: an integer or float when it reads as one, else the text."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


@index.command("list")
@click.argument("uri")
@common
def index_list(uri: str, as_json: bool, storage_options: dict[str, str] | None) -> None:
    """List the indices of a dataset (one row per index, by name)."""
    rows = [
        {
            "name": d.name,
            "type": d.index_type,
            "columns": ",".join(d.field_names),
            "segments": d.num_segments,
            "rows_indexed": d.num_rows_indexed,
        }
        for d in _open(uri, storage_options).describe_indices()
    ]
    if as_json:
        emit_json(rows)
    else:
        table(rows, ["name", "type", "columns", "segments", "rows_indexed"])


@index.command("create")
@click.argument("uri")
@click.argument("column")
@click.argument("index_type", metavar="TYPE")
@click.option("--name", default=None, help="Index name (default <column>_idx).")
@click.option("--no-replace", is_flag=True, help="Fail if an index of that name exists.")
@click.option("--param", "params", multiple=True, type=KeyValue(), help="Build parameter KEY=VALUE.")
@common
def index_create(
    uri: str,
    column: str,
    index_type: str,
    name: str | None,
    no_replace: bool,
    params: Sequence[tuple[str, str]],
    as_json: bool,
    storage_options: dict[str, str] | None,
) -> None:
    """Build a TYPE index on COLUMN: BTREE, BITMAP, LABEL_LIST, ZONEMAP, BLOOMFILTER, NGRAM or
    INVERTED; IVF_* for vectors."""
    ds = _open(uri, storage_options)
    kwargs = {k: _param_value(v) for k, v in params}
    before = {i["uuid"] for i in ds.list_indices()}
    if index_type.upper().startswith("IVF_"):
        ds.create_index(column, index_type.upper(), name=name, replace=not no_replace, **kwargs)
    else:
        ds.create_scalar_index(column, index_type, name=name, replace=not no_replace, **kwargs)
    built = next(i["name"] for i in ds.list_indices() if i["uuid"] not in before)
    result = {"index": built, "type": index_type.upper(), "column": column, "version": ds.version}
    _done(as_json, result, f"created {index_type.upper()} index {built} on {column} (version {ds.version})")


@index.command("optimize")
@click.argument("uri")
@click.option("--index", "names", multiple=True, help="Only this index (repeatable).")
@click.option("--merge", "num_indices_to_merge", default=1, show_default=True, type=int)
@common
def index_optimize(
    uri: str,
    names: Sequence[str],
    num_indices_to_merge: int,
    as_json: bool,
    storage_options: dict[str, str] | None,
) -> None:
    """Add unindexed fragments to the indices (and remap indices a deferred compaction left)."""
    ds = _open(uri, storage_options)
    report = ds.optimize.optimize_indices(list(names) or None, num_indices_to_merge)
    result = {"extended": list(report.extended), "remapped": list(report.remapped), "version": ds.version}
    _done(
        as_json,
        result,
        f"extended {len(report.extended)} and remapped {len(report.remapped)} index(es) "
        f"(version {ds.version})",
    )


@index.command("drop")
@click.argument("uri")
@click.argument("name")
@common
def index_drop(uri: str, name: str, as_json: bool, storage_options: dict[str, str] | None) -> None:
    """Drop the index NAME (its files stay until cleanup)."""
    ds = _open(uri, storage_options)
    ds.drop_index(name)
    _done(as_json, {"index": name, "action": "drop", "version": ds.version}, f"dropped index {name}")


# --- changes -------------------------------------------------------------------------------------


@cli.command()
@click.argument("uri")
@click.argument("version", type=Version())
@common
def restore(uri: str, version: int | str, as_json: bool, storage_options: dict[str, str] | None) -> None:
    """Make VERSION (a number or a tag) the latest version again (a new version; history is kept)."""
    ds = _open(uri, storage_options, version)
    restored = ds.version
    ds.restore()
    rows = ds.count_rows()
    result = {"restored": restored, "version": ds.version, "rows": rows}
    _done(as_json, result, f"restored version {restored} as version {ds.version} ({rows} rows)")


@cli.command()
@click.argument("uri")
@click.option("--where", "predicate", required=True, help="SQL predicate selecting the rows to delete.")
@click.option("--dry-run", is_flag=True, help="Count the rows that would be deleted; change nothing.")
@common
def delete(
    uri: str, predicate: str, dry_run: bool, as_json: bool, storage_options: dict[str, str] | None
) -> None:
    """Delete the rows a predicate selects."""
    ds = _open(uri, storage_options)
    if dry_run:
        count = ds.count_rows(filter=predicate)
        result = {"dry_run": True, "deleted_rows": count, "version": ds.version}
    else:
        count = ds.delete(predicate)
        result = {"dry_run": False, "deleted_rows": count, "version": ds.version}
    text = (
        f"would delete {count} rows (dry run)" if dry_run else f"deleted {count} rows (version {ds.version})"
    )
    _done(as_json, result, text)


@cli.command("add-column")
@click.argument("uri")
@click.argument("columns", nargs=-1, required=True, type=KeyValue(), metavar="NAME=SQL...")
@click.option("--batch-size", type=click.IntRange(min=1), help="Rows per evaluation batch.")
@common
def add_column(
    uri: str,
    columns: Sequence[tuple[str, str]],
    batch_size: int | None,
    as_json: bool,
    storage_options: dict[str, str] | None,
) -> None:
    """Add columns computed by SQL expressions over existing columns, e.g. ``total=price * qty``."""
    ds = _open(uri, storage_options)
    with ProgressBar() as bar:
        ds.add_columns(dict(columns), batch_size=batch_size, progress=bar)
    added = [name for name, _ in columns]
    result = {"version": ds.version, "added": added, "schema": ds.schema.names}
    _done(as_json, result, f"added {', '.join(added)} (version {ds.version})")


def _nothing_to_compact(ds: LanceDataset, options: CompactionOptions) -> str:
    """Why a compaction has no task, with the policy it applied in flags (as the user would pass them)."""
    deletions = (
        f"--deletion-threshold={options.materialize_deletions_threshold:g}"
        if options.materialize_deletions
        else "--keep-deletions"
    )
    fragments = len(ds.get_fragments())
    return (
        f"nothing to compact: {fragments} fragment{'' if fragments == 1 else 's'}, all within the policy "
        f"(--target-rows-per-fragment={options.target_rows_per_fragment}, {deletions})"
    )


def _id_ranges(ids: Sequence[int]) -> str:
    """``[0, 1, 2, 3, 7, 9, 10]`` -> ``0-3, 7, 9-10`` (a task often covers a long run of fragments)."""
    runs: list[list[int]] = []
    for value in sorted(ids):
        if runs and value == runs[-1][1] + 1:
            runs[-1][1] = value
        else:
            runs.append([value, value])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _show_compaction_plan(plan: CompactionPlan) -> None:
    """One row per task (its fragments as id ranges) and a line with the totals."""
    rows = [
        {
            "task": number,
            "fragments": _id_ranges(task["fragment_ids"]),
            "count": len(task["fragment_ids"]),
            "rows": task["rows"],
            "deleted_rows": task["deleted_rows"],
            "bytes": task["bytes"],
        }
        for number, task in enumerate(plan.summary())
    ]
    table(rows, list(rows[0]), f"Compaction plan on version {plan.read_version}")
    lines(
        [
            f"{plan.num_tasks()} task(s) would rewrite {plan.num_fragments} fragment(s): "
            f"{plan.num_rows} rows kept, {plan.num_deleted_rows} deleted rows dropped, "
            f"{human_bytes(plan.num_bytes)} read; "
            "nothing written (dry run)"
        ]
    )


@cli.command()
@click.argument("uri")
@click.option("--target-rows-per-fragment", type=click.IntRange(min=1), help="Rows per compacted fragment.")
@click.option("--max-bytes-per-file", type=click.IntRange(min=1), help="Bytes per data file.")
@click.option(
    "--materialize-deletions/--keep-deletions", default=None, help="Rewrite fragments with many deleted rows."
)
@click.option("--deletion-threshold", type=click.FloatRange(0, 1), help="Deleted fraction that triggers it.")
@click.option("--num-threads", type=click.IntRange(min=1), help="Tasks run at the same time.")
@click.option("--cluster-by", help="Comma-separated keys ordering the rows (default: lance-ops.cluster-by).")
@click.option("--cluster-mode", type=click.Choice(["sort", "zorder"]), help="How --cluster-by orders rows.")
@click.option("--dry-run", is_flag=True, help="Show the plan; write nothing.")
@common
def compact(
    uri: str,
    target_rows_per_fragment: int | None,
    max_bytes_per_file: int | None,
    materialize_deletions: bool | None,
    deletion_threshold: float | None,
    num_threads: int | None,
    cluster_by: str | None,
    cluster_mode: str | None,
    dry_run: bool,
    as_json: bool,
    storage_options: dict[str, str] | None,
) -> None:
    """Merge small fragments and materialise deletions (plan first with --dry-run)."""
    ds = _open(uri, storage_options)
    options: dict[str, Any] = {
        "target_rows_per_fragment": target_rows_per_fragment,
        "max_bytes_per_file": max_bytes_per_file,
        "materialize_deletions": materialize_deletions,
        "materialize_deletions_threshold": deletion_threshold,
        "num_threads": num_threads,
        "cluster_by": None if cluster_by is None else [k.strip() for k in cluster_by.split(",") if k.strip()],
        "cluster_mode": cluster_mode,
    }
    if dry_run:
        plan = ds.optimize.compact_files(**options, dry_run=True)
        tasks = plan.summary()
        if as_json:
            emit_json({"dry_run": True, "read_version": plan.read_version, "tasks": tasks})
        elif not tasks:
            lines([_nothing_to_compact(ds, plan.options) + " (dry run)"])
        else:
            _show_compaction_plan(plan)
        return
    before = ds.version
    with ProgressBar() as bar:
        metrics = ds.optimize.compact_files(**options, progress=bar)
    result = {
        "dry_run": False,
        "read_version": before,
        "version": ds.version,
        "fragments_removed": metrics.fragments_removed,
        "fragments_added": metrics.fragments_added,
        "files_removed": metrics.files_removed,
        "files_added": metrics.files_added,
    }
    if as_json:
        emit_json(result)
    elif ds.version == before:
        from lance_ops.ops.compaction import CompactionOptions

        chosen = CompactionOptions(**{name: value for name, value in options.items() if value is not None})
        lines([_nothing_to_compact(ds, chosen)])
    else:
        lines(
            [
                f"compacted {metrics.fragments_removed} fragments into {metrics.fragments_added} "
                f"(version {ds.version})"
            ]
        )


@cli.command()
@click.argument("uri")
@click.option("--older-than", type=Duration(), help="Remove versions older than this (e.g. 7d; default 2w).")
@click.option(
    "--retain-versions", type=click.IntRange(min=1), help="Keep at least this many newest versions."
)
@click.option("--delete-unverified", is_flag=True, help="Also remove unreferenced files younger than 7 days.")
@click.option("--allow-tagged", is_flag=True, help="Skip tagged old versions instead of failing.")
@click.option("--dry-run", is_flag=True, help="List what would be removed; remove nothing.")
@common
def cleanup(
    uri: str,
    older_than: dt.timedelta | None,
    retain_versions: int | None,
    delete_unverified: bool,
    allow_tagged: bool,
    dry_run: bool,
    as_json: bool,
    storage_options: dict[str, str] | None,
) -> None:
    """Remove old versions and the files only they use (list them first with --dry-run)."""
    ds = _open(uri, storage_options)
    try:
        with ProgressBar() as bar:
            stats = ds.cleanup_old_versions(
                older_than,
                retain_versions,
                delete_unverified=delete_unverified,
                error_if_tagged_old_versions=not allow_tagged,
                dry_run=dry_run,
                progress=bar,
            )
    except TaggedVersionsError as exc:
        raise TaggedVersionsError(
            f"{len(exc.tags)} tagged version(s) would be removed: {exc.tags}. Pass --allow-tagged to "
            "keep them and clean up the rest, or delete the tag(s) first (lance-ops tags delete).",
            exc.tags,
        ) from exc
    result = {
        "dry_run": dry_run,
        "old_versions": stats.old_versions,
        "bytes_removed": stats.bytes_removed,
        "data_files_removed": stats.data_files_removed,
        "deletion_files_removed": stats.deletion_files_removed,
        "transaction_files_removed": stats.transaction_files_removed,
        "failed_deletes": stats.failed_deletes,
        "paths": list(stats.paths),
    }
    if as_json:
        emit_json(result)
        return
    lines([f"  {path}" for path in stats.paths])
    verb = "would remove" if dry_run else "removed"
    lines(
        [
            f"{verb} {stats.old_versions} version(s) and {len(stats.paths)} file(s), "
            f"{human_bytes(stats.bytes_removed)}{' (dry run)' if dry_run else ''}"
        ]
    )


@cli.command()
@click.argument("uri")
@click.option(
    "--older-than",
    type=Duration(),
    help="Then remove versions older than this (default 0s: all but the newest).",
)
@click.option("--allow-tagged", is_flag=True, help="Skip tagged old versions instead of failing.")
@common
def purge(
    uri: str,
    older_than: dt.timedelta | None,
    allow_tagged: bool,
    as_json: bool,
    storage_options: dict[str, str] | None,
) -> None:
    """Physically remove deleted rows: rewrite every fragment with deletions, then clean up old files."""
    ds = _open(uri, storage_options)
    plan = ds.optimize.compact_files(purge=True, dry_run=True)
    purged = [t for t in plan.tasks if t.num_deleted_rows]
    with ProgressBar() as bar:
        metrics = ds.optimize.compact_files(purge=True, progress=bar)
        stats = ds.cleanup_old_versions(
            older_than if older_than is not None else dt.timedelta(0),
            error_if_tagged_old_versions=not allow_tagged,
            progress=bar,
        )
    result = {
        "version": ds.version,
        "deleted_rows_purged": sum(t.num_deleted_rows for t in purged),
        "fragments_rewritten": metrics.fragments_removed,
        "fragments_added": metrics.fragments_added,
        "old_versions_removed": stats.old_versions,
        "data_files_removed": stats.data_files_removed,
        "deletion_files_removed": stats.deletion_files_removed,
        "bytes_removed": stats.bytes_removed,
    }
    if as_json:
        emit_json(result)
        return
    lines(
        [
            f"purged {result['deleted_rows_purged']} deleted row(s) from "
            f"{metrics.fragments_removed} fragment(s) "
            f"(version {ds.version}); removed {stats.old_versions} old version(s), "
            f"{stats.data_files_removed} data file(s), {stats.deletion_files_removed} deletion file(s), "
            f"{human_bytes(stats.bytes_removed)}"
        ]
    )


@cli.command()
@click.argument("uri")
@click.option("--column", "columns", multiple=True, help="Only this column (repeatable).")
@click.option("--rebuild", is_flag=True, help="Compute the statistics this version lacks first.")
@click.option("--force", is_flag=True, help="With --rebuild: recompute every statistic.")
@click.option(
    "--live",
    is_flag=True,
    help="Count nulls among live rows exactly (reads the column of fragments with deleted rows).",
)
@common
def stats(
    uri: str,
    columns: Sequence[str],
    rebuild: bool,
    force: bool,
    live: bool,
    as_json: bool,
    storage_options: dict[str, str] | None,
) -> None:
    """Dataset statistics and per-column null counts, bounds and distinct counts.

    Statistics describe the data files, so they count every physical row, deleted ones included;
    the null count among live rows is shown where it is known without reading data (--live reads).
    """
    if force and not rebuild:
        raise click.UsageError("--force only applies with --rebuild")
    from lance_ops.encoding.statistics import supports_statistics

    ds = _open(uri, storage_options)
    rebuilt: list[int] = []
    if rebuild:
        with ProgressBar() as bar:
            rebuilt = list(ds.stats.rebuild(list(columns) or None, force=force, progress=bar).fragment_ids)
    names = list(columns) or [f.name for f in ds.schema if supports_statistics(f.type)]
    summaries = [
        {
            "column": name,
            **ds.stats.column_summary(name),
            "live_null_count": ds.stats.live_null_count(name, read=live),
            "counted_rows": ds.stats.counted_rows(name),
        }
        for name in names
    ]
    dataset_stats = ds.stats.dataset_stats()
    result = {
        "version": ds.version,
        "dataset": dataset_stats,
        "rebuilt_fragments": rebuilt,
        "columns": summaries,
    }
    if as_json:
        emit_json(result)
        return
    deleted = dataset_stats["num_deleted_rows"]
    lines(
        [
            f"version {ds.version}: {dataset_stats['num_fragments']} fragments, {ds.count_rows()} live rows, "
            f"{deleted} deleted rows, {dataset_stats['num_small_files']} small files"
            + (f"; statistics rebuilt for {len(rebuilt)} fragment(s)" if rebuild else "")
        ]
    )
    table([_stats_row(summary) for summary in summaries], list(_STATS_COLUMNS.values()))
    if any(s["counted_rows"]["deleted_rows"] for s in summaries):
        lines(
            [
                "Statistics describe the data files: they count deleted rows too (a deleted row's value and "
                "null still count; add-column writes nulls for deleted rows), and min/max are bounds.",
            ]
        )
    if any(s["live_null_count"] is None for s in summaries):
        lines(["nulls (live rows) is blank where fragments with deleted rows would be read: pass --live"])


# ``lance-ops stats`` table: summary key -> column heading saying what the figure counts.
_STATS_COLUMNS = {
    "column": "column",
    "live_null_count": "nulls (live rows)",
    "null_count": "nulls (all rows, incl. deleted)",
    "min_value": "min (bound)",
    "max_value": "max (bound)",
    "distinct_count": "distinct (estimate, all rows)",
    "fragments_with_statistics": "fragments with statistics",
}


def _stats_row(summary: dict[str, Any]) -> dict[str, Any]:
    row = {heading: summary[key] for key, heading in _STATS_COLUMNS.items()}
    row["fragments with statistics"] = f"{summary['fragments_with_statistics']} of {summary['num_fragments']}"
    return row


@cli.command()
@click.argument("uri")
@click.option("--column", "columns", multiple=True, help="Only this column (repeatable).")
@click.option(
    "--store", is_flag=True, help="Store the plan in the dataset's config: later appends follow it."
)
@common
def profile(
    uri: str, columns: Sequence[str], store: bool, as_json: bool, storage_options: dict[str, str] | None
) -> None:
    """The encoding plan the data calls for: per column, dictionary or not, from HLL estimates."""
    from lance_ops.dataset import LanceDataset, LanceOperation
    from lance_ops.encoding.plan import CONFIG_KEY as PLAN_CONFIG_KEY
    from lance_ops.ops import encodings as encodings_op

    ds = _open(uri, storage_options)
    plan = encodings_op.profile(ds, list(columns) or None)
    version = None
    if store:
        update = LanceOperation.UpdateConfig({PLAN_CONFIG_KEY: plan.to_json()})
        stored = LanceDataset.commit(uri, update, read_version=ds.version, storage_options=storage_options)
        version = stored.version
    rows = [{"column": name, **vars(column)} for name, column in sorted(plan.columns.items())]
    if as_json:
        emit_json({"columns": rows, "stored_in_version": version})
        return
    table(rows, ["column", "dictionary", "compression", "bss", "rle_threshold"], "Encoding plan")
    if version is not None:
        lines([f"stored as the dataset's encoding plan (version {version})"])


# --- pictures and the demo -----------------------------------------------------------------------


@cli.command()
@click.argument("uri")
@click.option("-o", "--output", "output", required=True, type=click.Path(dir_okay=False), help="HTML file.")
@common
def report(uri: str, output: str, as_json: bool, storage_options: dict[str, str] | None) -> None:
    """One self-contained HTML page: history, column sizes and encodings, compression, fragment sizes."""
    if importlib.util.find_spec("matplotlib") is None:
        raise UnsupportedFeatureError("the report needs matplotlib (pip install 'lance-ops[report]')")
    from lance_ops import report as report_module

    ds = _open(uri, storage_options)
    page = report_module.render(ds)
    with open(output, "w", encoding="utf-8") as out:
        out.write(page)
    result = {"output": output, "version": ds.version, "bytes": len(page.encode())}
    _done(as_json, result, f"wrote {output} (version {ds.version})")


@cli.command()
@click.option("--uri", help="Dataset to append to (default: the pipeline's data/demo.lance).")
@click.option("--rows", type=click.IntRange(min=1), help="Rows per append (default: the pipeline's).")
@click.option("--master", help="Spark master (default: the pipeline's).")
@common
def demo(
    uri: str | None,
    rows: int | None,
    master: str | None,
    as_json: bool,
    storage_options: dict[str, str] | None,
) -> None:
    """Run the main Spark job (jobs.pipeline) in its own process; it prints its JSON summary."""
    if importlib.util.find_spec("jobs") is None:
        raise UnsupportedFeatureError("the demo needs the Spark jobs (pip install 'lance-ops[spark]')")
    if storage_options:
        raise click.UsageError("the demo writes a local dataset: --storage-option does not apply")
    argv = [
        f"--{name}={value}" for name, value in (("uri", uri), ("rows", rows), ("master", master)) if value
    ]
    if subprocess.run([sys.executable, "-m", "jobs.pipeline", *argv], check=False).returncode:
        raise click.ClickException("the demo pipeline failed (its output is above)")


# --- entry point ---------------------------------------------------------------------------------


def _fail(kind: str, message: object) -> None:
    text = " ".join(str(message).split()) or "unknown error"
    click.echo(f"lance-ops: {kind}: {text}", err=True)


def _status(group: click.Group, args: Sequence[str] | None, prog_name: str | None, **extra: Any) -> int:
    """Run ``group`` on ``args``: the exit status, every failure reported as one line on stderr."""
    state = State()
    try:
        click.Group.main(
            group, args=args, prog_name=prog_name or "lance-ops", standalone_mode=False, obj=state, **extra
        )
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.UsageError as exc:
        hint = f" (see {exc.ctx.command_path} --help)" if exc.ctx else ""
        _fail("usage", f"{exc.format_message()}{hint}")
        return EXIT_USAGE
    except click.Abort:
        _fail("error", "aborted")
        return EXIT_FAILED
    except click.ClickException as exc:
        _fail("error", exc.format_message())
        return EXIT_FAILED
    except BrokenPipeError:
        # The reader of our output went away (``lance-ops inspect x | head``): stop quietly.
        return EXIT_FAILED
    except Exception as exc:  # noqa: BLE001 (the command line's one place that reports every failure)
        if state.debug:
            raise
        prefix = "" if isinstance(exc, LanceOpsError) else f"{type(exc).__name__}: "
        _fail("error", f"{prefix}{exc}")
        return EXIT_FAILED
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit status (0 ok, 1 failed, 2 usage), errors as one line."""
    return cli.main(args=list(argv) if argv is not None else None, standalone_mode=False)
