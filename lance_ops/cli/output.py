"""How the command line shows things: JSON for scripts, rich tables for people, a progress bar.

Tables and text go to stdout; progress bars and errors to stderr, so ``--json`` output stays
parseable while a bar is drawn. Bars are drawn only when stderr is a terminal.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    # lance_ops.progress imports the storage and table layers: not for every ``--help``.
    from lance_ops.progress import ProgressEvent

# Wide enough that tables are not squeezed when the output is a pipe or a file.
PIPE_WIDTH = 200


def console(stderr: bool = False) -> Console:
    """A console on the current stdout / stderr (click's test runner swaps them per call)."""
    stream = sys.stderr if stderr else sys.stdout
    terminal = stream.isatty()
    width = None if terminal else PIPE_WIDTH
    return Console(file=stream, width=width, highlight=False, emoji=False, markup=False)


def emit_json(value: Any) -> None:
    """``value`` as indented JSON on stdout (timestamps and other objects as strings)."""
    click.echo(json.dumps(value, indent=2, default=_text))


def table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], title: str | None = None) -> None:
    """``rows`` as a table of ``columns`` (numbers right-aligned, None blank) on stdout."""
    shown = Table(title=title, title_justify="left", box=None, header_style="bold", pad_edge=False)
    for name in columns:
        values = [row.get(name) for row in rows if row.get(name) is not None]
        numeric = bool(values) and all(isinstance(value, int | float) for value in values)
        shown.add_column(name, justify="right" if numeric else "left", overflow="fold")
    for row in rows:
        shown.add_row(*(Text(_cell(row.get(name))) for name in columns))
    console().print(shown)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"  # bounds such as 148.5 stay exact; more digits are noise in a table
    if isinstance(value, list | tuple):
        return ", ".join(map(str, value))
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items())
    return _text(value)


def _text(value: Any) -> str:
    """``str(value)``; an Arrow scalar Python cannot hold (a statistics bound such as date32
    -2147483648 days) as its integer and type: ``-2147483648 (date32[day])``."""
    try:
        return str(value)
    except (OverflowError, ValueError):
        import pyarrow as pa

        if not isinstance(value, pa.Scalar):
            raise
        storage = pa.int32() if value.type.bit_width == 32 else pa.int64()
        return f"{pa.array([value], value.type).view(storage)[0].as_py()} ({value.type})"


def lines(text: Iterable[str]) -> None:
    out = console()
    for line in text:
        out.print(Text(line), soft_wrap=True)


def human_bytes(size: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


class ProgressBar:
    """A :data:`~lance_ops.progress.ProgressCallback` drawing one rich bar per operation.

    Use as a context manager around the operation and pass the object as ``progress=``.
    """

    def __init__(self, out: Console | None = None) -> None:
        out = out or console(stderr=True)
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[unit]}"),
            TimeElapsedColumn(),
            TextColumn("{task.fields[message]}", style="dim"),
            console=out,
            disable=not out.is_terminal,
            transient=False,
        )
        self._tasks: dict[str, TaskID] = {}

    def __enter__(self) -> ProgressBar:
        self._progress.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._progress.stop()

    def __call__(self, event: ProgressEvent) -> None:
        task = self._tasks.get(event.operation)
        if task is None:
            task = self._progress.add_task(event.operation, total=event.total, unit=event.unit, message="")
            self._tasks[event.operation] = task
        self._progress.update(task, completed=event.done, total=event.total, message=event.message)

    @property
    def state(self) -> dict[str, tuple[float, float | None]]:
        """``operation -> (done, total)`` as drawn (for tests and summaries)."""
        tasks = {task.id: task for task in self._progress.tasks}
        return {name: (tasks[task].completed, tasks[task].total) for name, task in self._tasks.items()}
