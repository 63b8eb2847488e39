"""The dataset report: one self-contained HTML page of plots about a dataset (matplotlib, inline SVG).

The page shows, for the dataset's latest (or given) version:

* its history over versions: rows, fragments, bytes of data files and the deleted-row ratio;
* per column, the bytes on disk split by the encodings its pages use (stacked bars);
* per column, the compression ratio: raw Arrow size of the same rows over bytes on disk;
* the distribution of fragment sizes (rows and bytes).

Every figure is built by a public function of plain data (:func:`~lance_ops.dataset_report.collect`
gathers it), so every front end attaches the same pictures: ``lance-ops report`` writes the page,
the Dagster maintenance asset writes it beside the dataset, and an asset can put
``png_data_uri(fig)`` in a Markdown metadata value. Figures use matplotlib's object API (no
pyplot, no global state, no display).
Counts and sizes are labelled as plain integers with thousands separators (never an offset such
as ``+2.571e4``), bars keep room for their labels, and a series of one point (a dataset with one
version, fragments all of one size) is drawn as a labelled bar with a note rather than a lone dot.
Needs the ``report`` extra (``pip install 'lance-ops[report]'``).
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import io
from collections.abc import Sequence
from typing import Any

from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator, PercentFormatter

from lance_ops.dataset import LanceDataset
from lance_ops.dataset_report import ReportData, collect

__all__ = [
    "ReportData",
    "collect",
    "column_encodings_figure",
    "compression_figure",
    "figures",
    "fragment_sizes_figure",
    "history_figure",
    "png_data_uri",
    "render",
    "svg",
]

WIDTH = 9.0  # inches; every figure is this wide so the page lines up
HEADROOM = 1.15  # axis length over the longest bar: room for the bar's label


def _counts(axis: Axis) -> None:
    """At most six ticks at whole numbers labelled ``25,710`` (no offset, no scientific notation;
    few enough that long labels do not run into each other on a half-width panel)."""
    axis.set_major_locator(MaxNLocator(nbins=5, integer=True))
    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.0f}"))


def _single_bar(ax: Axes, x: float, height: float, label: str, color: str | None = None) -> None:
    """One value as a labelled bar centred on ``x`` with ``x`` as the only tick (a lone dot on an
    axis autoscaled around it reads as nothing)."""
    bars = ax.bar([x], [height], width=0.5, color=color)
    ax.bar_label(bars, labels=[label], fontsize=8, padding=2)
    ax.set_xlim(x - 1, x + 1)
    ax.set_xticks([x])
    ax.set_ylim(0, max(height, 1) * HEADROOM)


def history_figure(history: Sequence[dict[str, Any]]) -> Figure:
    """Four panels over versions: rows, fragments, bytes and deleted-row ratio (one version: bars)."""
    versions = [row["version"] for row in history]
    deleted = [
        row["deleted_rows"] / (row["rows"] + row["deleted_rows"])
        if row["rows"] + row["deleted_rows"]
        else 0.0
        for row in history
    ]
    panels = [
        ("rows", [row["rows"] for row in history]),
        ("fragments", [row["fragments"] for row in history]),
        ("bytes", [row["bytes"] for row in history]),
        ("deleted rows (share of physical rows)", deleted),
    ]
    fig = Figure(figsize=(WIDTH, 5.5), layout="constrained")
    axes = fig.subplots(2, 2, sharex=True)
    ratio_ax = axes[1][1]
    for ax, (title, values) in zip(axes.flat, panels, strict=True):
        ratio = ax is ratio_ax
        _counts(ax.xaxis)
        if ratio:
            ax.yaxis.set_major_formatter(PercentFormatter(1.0))
        else:
            _counts(ax.yaxis)
        if len(versions) == 1:
            _single_bar(ax, versions[0], values[0], f"{values[0]:.1%}" if ratio else f"{values[0]:,}")
        else:
            ax.plot(versions, values, marker="o", markersize=3)
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
    ratio_ax.set_ylim(0, max(0.05, max(deleted, default=0.0)) * 1.1)
    for ax in axes[1]:
        ax.set_xlabel("version")
    one = f" (only version {versions[0]} so far)" if len(versions) == 1 else ""
    fig.suptitle(f"History over versions{one}")
    return fig


def column_encodings_figure(columns: Sequence[dict[str, Any]]) -> Figure:
    """Per column, bytes on disk as a bar stacked by the encodings its pages use."""
    names = [c["column"] for c in columns]
    encodings = sorted({e for c in columns for e in c["encodings"]})
    fig = Figure(figsize=(WIDTH, 1.2 + 0.4 * max(len(names), 1)), layout="constrained")
    ax = fig.subplots()
    left = [0] * len(names)
    for encoding in encodings:
        sizes = [c["encodings"].get(encoding, 0) for c in columns]
        ax.barh(names, sizes, left=left, label=encoding)
        left = [a + b for a, b in zip(left, sizes, strict=True)]
    ax.invert_yaxis()
    ax.set_xlabel("bytes on disk")
    ax.set_title("On-disk size per column by encoding")
    ax.set_xlim(0, max(max(left, default=0), 1) * HEADROOM)
    _counts(ax.xaxis)
    if encodings:  # beside the plot, where it cannot cover a bar
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    ax.grid(axis="x", alpha=0.3)
    return fig


def compression_figure(columns: Sequence[dict[str, Any]]) -> Figure:
    """Per column, raw Arrow bytes / bytes on disk (1 = no gain; the dashed line)."""
    names = [c["column"] for c in columns]
    ratios = [c["compression_ratio"] or 0.0 for c in columns]
    fig = Figure(figsize=(WIDTH, 1.2 + 0.4 * max(len(names), 1)), layout="constrained")
    ax = fig.subplots()
    bars = ax.barh(names, ratios, color="tab:green")
    ax.bar_label(bars, labels=[f"{r:.2f}x" for r in ratios], fontsize=8, padding=2)
    ax.axvline(1.0, color="grey", linestyle="--", linewidth=1)
    ax.set_xlim(0, max(max(ratios, default=0.0), 1.0) * HEADROOM)
    ax.invert_yaxis()
    ax.set_xlabel("compression ratio (raw Arrow size / on-disk size)")
    ax.set_title("Compression per column")
    ax.grid(axis="x", alpha=0.3)
    return fig


def _histogram(ax: Axes, values: Sequence[int], color: str) -> None:
    """Fragments per size; one distinct size is one labelled bar (a histogram of it is a slab)."""
    _counts(ax.yaxis)
    if len(set(values)) == 1:
        _single_bar(ax, 0, len(values), f"{len(values):,}", color)
        ax.set_xticks([0], [f"{values[0]:,}"])
    else:
        _counts(ax.xaxis)
        ax.hist(values, bins=min(max(len(values), 1), 30), color=color)


def fragment_sizes_figure(fragments: Sequence[tuple[int, int]]) -> Figure:
    """Histograms of fragment sizes in rows and in bytes."""
    fig = Figure(figsize=(WIDTH, 3.2), layout="constrained")
    rows_ax, bytes_ax = fig.subplots(1, 2)
    _histogram(rows_ax, [rows for rows, _ in fragments], "tab:blue")
    rows_ax.set_xlabel("physical rows")
    _histogram(bytes_ax, [size for _, size in fragments], "tab:orange")
    bytes_ax.set_xlabel("bytes")
    for ax in (rows_ax, bytes_ax):
        ax.set_ylabel("fragments")
        ax.grid(alpha=0.3)
    count = len(fragments)
    fig.suptitle(f"Fragment sizes ({count} fragment{'' if count == 1 else 's'})")
    return fig


def figures(data: ReportData) -> dict[str, Figure]:
    """Every figure of the report, by section id."""
    return {
        "history": history_figure(data.history),
        "encodings": column_encodings_figure(data.columns),
        "compression": compression_figure(data.columns),
        "fragments": fragment_sizes_figure(data.fragments),
    }


def svg(fig: Figure) -> str:
    """The figure as an inline ``<svg>`` element (text as paths: no fonts needed)."""
    out = io.StringIO()
    fig.savefig(out, format="svg", metadata={"Date": None})
    text = out.getvalue()
    return text[text.index("<svg") :]


def png_data_uri(fig: Figure, dpi: int = 100) -> str:
    """The figure as a ``data:image/png;base64,...`` URI (for Markdown / HTML elsewhere)."""
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=dpi)
    return "data:image/png;base64," + base64.b64encode(out.getvalue()).decode()


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 60em; color: #222; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { padding: 0.2em 0.8em; text-align: right; border-bottom: 1px solid #ddd; }
th:first-child, td:first-child { text-align: left; }
section { margin-bottom: 2.5em; }
"""

_TITLES = {
    "history": "History",
    "encodings": "Column sizes and encodings",
    "compression": "Compression",
    "fragments": "Fragments",
}


def _table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(row.get(c, '')))}</td>" for c in columns) + "</tr>"
        for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def render(ds: LanceDataset) -> str:
    """The whole page for one dataset version: a summary, the figures (inline SVG) and tables."""
    data = collect(ds)
    latest = data.history[-1] if data.history else {}
    summary = (
        f"version {data.version}, {latest.get('rows', 0)} rows, {len(data.fragments)} fragments, "
        f"{latest.get('bytes', 0)} bytes of data files, {len(data.history)} versions"
    )
    sections = []
    for key, fig in figures(data).items():
        sections.append(f'<section id="{key}"><h2>{_TITLES[key]}</h2>{svg(fig)}</section>')
    columns = [
        {
            **c,
            "encodings": ", ".join(c["encodings"]),
            "compression_ratio": f"{c['compression_ratio'] or 0:.2f}",
        }
        for c in data.columns
    ]
    generated = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    return (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8">'
        f"<title>Lance dataset report: {html.escape(data.uri)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>{html.escape(data.uri)}</h1><p>{html.escape(summary)}; generated {generated}.</p>"
        + "".join(sections)
        + '<section id="columns"><h2>Columns</h2>'
        + _table(columns, ["column", "type", "bytes", "raw_bytes", "compression_ratio", "encodings"])
        + "</section></body></html>\n"
    )
