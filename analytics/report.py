"""`report`: one self-contained HTML page with PNG plots of every analysis.

The plots (matplotlib, Agg backend) are written beside the page as PNG files
and embedded in it as data URIs, so `report.html` opens anywhere on its own:
no scripts, no external resources. Every plot renders even without data (it
then says so), so every image of the page always loads.

Usage::

    path = build_report(store, Path("out"))     # -> out/report.html (+ out/*.png)
"""

from __future__ import annotations

import base64
import html
import io
import os
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memtape.analytics.answers import analyse_all
from memtape.analytics.tabular import Report, Table, cell_text, header, plain, shown
from memtape.ledger.store import Store
from memtape.projections.text import clip

MAX_ROWS = 60
#: cells no longer than this never wrap in the report's tables
SHORT = 16
PLOT_SIZE = (7.0, 3.6)


def _figure() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=PLOT_SIZE, dpi=100)
    return plt, fig, ax


def _empty(ax: Any, what: str) -> None:
    ax.text(0.5, 0.5, f"no {what} in the ledger yet", ha="center", va="center", fontsize=12, color="#777")
    ax.set_axis_off()


def _png(draw: Callable[[Any], None]) -> bytes:
    plt, fig, ax = _figure()
    try:
        draw(ax)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png", bbox_inches="tight", pad_inches=0.15)  # legends outside the axes stay whole
        return buf.getvalue()
    finally:
        plt.close(fig)


def plot_promotions(r: Report) -> bytes:
    funnel = r.sections["funnel"]

    def draw(ax: Any) -> None:
        stages, counts = funnel.column("stage"), funnel.column("lessons")
        if not counts or not any(counts):
            return _empty(ax, "learned lessons")
        bars = ax.bar(stages, counts, color=["#4c72b0", "#dd8452", "#55a868"])
        ax.bar_label(bars)
        if counts[-1] == 0:  # a true zero, said in words: no learned lesson met the promotion rule yet
            ax.text(
                len(stages) - 1,
                max(counts) * 0.5,
                "none yet: promotion needs an\nerror_recovery lesson used\non enough domains",
                ha="center",
                va="center",
                fontsize=8,
                color="#555",
            )
        ax.set_ylabel("lessons")
        ax.set_title("Lesson funnel: recorded → deduplicated → promoted")

    return _png(draw)


def plot_decay(r: Report) -> bytes:
    tl = r.sections["timeline"]

    def draw(ax: Any) -> None:
        if not tl.rows:
            return _empty(ax, "facts")
        series: dict[str, list[tuple[int, float]]] = {}
        for row in tl.records():
            if row["confidence"] is None:
                continue
            name = "\n".join(
                textwrap.wrap(f"{row['domain']} {row['fact_type']}:{row['key']} = {clip(str(row['value']), 60)}", 48)
            )
            series.setdefault(name, []).append((row["seq"], row["confidence"] if row["alive"] else 0.0))
        for name, pts in list(series.items())[:12]:
            ax.step([p[0] for p in pts], [p[1] for p in pts], where="post", marker="o", ms=3, label=name)
        ax.axhline(0.1, color="#b00", lw=0.8, ls="--")
        ax.set_ylim(0, 1.05)
        ax.set_xlabel("seq")
        ax.set_ylabel("confidence")
        ax.set_title("Fact confidence over time (0 = pruned; dashed: prune floor)")
        if len(series) <= 12:  # below the plot, so it covers no line and is never cut
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0, -0.2), ncol=2, frameon=False)

    return _png(draw)


def plot_recall(r: Report) -> bytes:
    hr = r.sections["hit_rate"]

    def draw(ax: Any) -> None:
        if not hr.rows:
            return _empty(ax, "recalls")
        kinds, recalls, hits = hr.column("kind"), hr.column("recalls"), hr.column("hits")
        x = range(len(kinds))
        ax.bar([i - 0.2 for i in x], recalls, width=0.4, label="recalls", color="#8c8c8c")
        ax.bar([i + 0.2 for i in x], hits, width=0.4, label="hits", color="#4c72b0")
        ax.set_xticks(list(x), [f"{k} recall ({plain(h) or 0:.0%})" for k, h in zip(kinds, hr.column("hit_rate"))])
        ax.set_ylabel("events")
        ax.set_title("Recall hit rate")
        ax.legend()

    return _png(draw)


def plot_memory_effect(r: Report) -> bytes:
    by = r.sections["by_goal"]

    def draw(ax: Any) -> None:
        if not by.rows:
            return _empty(ax, "completed runs")
        agg: dict[str, list[float]] = {}
        for row in by.records():
            agg.setdefault(row["condition"], []).append(float(row["avg_turns"] or 0))
        conds = [c for c in ("off", "cold", "warm") if c in agg]
        vals = [sum(agg[c]) / len(agg[c]) for c in conds]
        bars = ax.bar(conds, vals, color=["#8c8c8c", "#dd8452", "#55a868"][: len(conds)])
        ax.bar_label(bars, fmt="%.1f")
        ax.set_ylabel("average turns per goal")
        ax.set_title("Memory effect: turns with memory off, cold and warm")

    return _png(draw)


def plot_runs(r: Report) -> bytes:
    oc = r.sections["outcomes"]

    def draw(ax: Any) -> None:
        if not oc.rows:
            return _empty(ax, "runs")
        doms = oc.column("domain")
        passed, failed, running = oc.column("passed"), oc.column("failed"), oc.column("running")
        ax.bar(doms, passed, label="passed", color="#55a868")
        ax.bar(doms, failed, bottom=passed, label="failed", color="#c44e52")
        ax.bar(doms, running, bottom=[p + f for p, f in zip(passed, failed)], label="running", color="#ccb974")
        ax.set_ylabel("runs")
        ax.set_title("Run outcomes by domain")
        ax.tick_params(axis="x", labelrotation=30)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)  # beside the bars, never on them

    return _png(draw)


def plot_credit(r: Report) -> bytes:
    items = r.sections["items"]

    def draw(ax: Any) -> None:
        if not items.rows:
            return _empty(ax, "credited items")
        top = list(zip(items.column("item"), items.column("turns_saved")))[:10]
        ax.barh([i for i, _ in top][::-1], [t for _, t in top][::-1], color="#4c72b0")
        ax.set_xlabel("turns saved (memtape credit)")
        ax.set_title("Memory items by turns saved")

    return _png(draw)


PLOTS: dict[str, Callable[[Report], bytes]] = {
    "promotions": plot_promotions,
    "decay": plot_decay,
    "recall": plot_recall,
    "memory-effect": plot_memory_effect,
    "runs": plot_runs,
    "credit": plot_credit,
}


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _table(title: str, t: Table) -> str:
    """One table for people: its `shown` columns that have a value, human times; with no rows, the
    sentence saying why (a section with neither is left out)."""
    if not t.rows:
        return f"<h3>{_e(title)}</h3><p class=dim>{_e(t.empty)}</p>" if t.empty else ""
    t = shown(t)
    cells = [[cell_text(v) for v in row] for row in t.rows[:MAX_ROWS]]
    # short values (states, hosts, numbers) never break; long text wraps, anywhere if it must
    short = ["" if max(len(row[i]) for row in cells) > SHORT else " class=s" for i in range(len(t.columns))]
    head = "".join(f"<th>{_e(header(c))}</th>" for c in t.columns)
    rows = "".join(
        "<tr>" + "".join(f"<td{short[i]}>{_e(v)}</td>" for i, v in enumerate(row)) + "</tr>" for row in cells
    )
    more = f"<p class=dim>{len(t.rows) - MAX_ROWS} more rows</p>" if len(t.rows) > MAX_ROWS else ""
    return f"<h3>{_e(title)}</h3><table><tr>{head}</tr>{rows}</table>{more}"


def _titles(reports: dict[str, Report]) -> dict[tuple[str, str], str]:
    """One title per table: the section's name, with its analysis when two analyses share it (unless
    the analysis is named after it: `runs` of `runs` stays `runs`)."""
    names = [sec for rep in reports.values() for sec in rep.sections]
    return {
        (name, sec): sec.replace("_", " ")
        + (f" ({name.replace('-', ' ')})" if names.count(sec) > 1 and sec != name else "")
        for name, rep in reports.items()
        for sec in rep.sections
    }


_CSS = """body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;padding:0 16px;max-width:1180px;color:#222}
h1{font-size:22px}h2{font-size:18px;margin-top:36px;border-bottom:1px solid #ccc}h3{font-size:14px}
table{border-collapse:collapse;margin:6px 0 14px;font-size:12px;max-width:100%}
td,th{border:1px solid #ddd;padding:2px 6px;text-align:left;vertical-align:top;overflow-wrap:anywhere}
td.s{white-space:nowrap;overflow-wrap:normal}th{background:#f4f4f4;overflow-wrap:normal}.dim{color:#888}img{max-width:100%;height:auto;border:1px solid #eee}"""


def _write_private(path: Path, data: bytes) -> None:
    """Write a report file 0600: it holds memory content."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def build_report(store: Store, out_dir: str | Path, policy: Any | None = None) -> Path:
    """Write `out_dir/report.html` and its PNG plots; returns the page's path."""
    out = Path(out_dir)
    out.mkdir(mode=0o700, parents=True, exist_ok=True)
    reports = analyse_all(store, policy)
    titles = _titles(reports)
    head = int(store.head())
    parts = [
        f"<p>Ledger head: seq {head}. Every answer below comes from DuckDB over the analytics "
        "mirror of the ledger (analytics.duckdb, caught up to that seq); forgotten subjects are left out.</p>",
        "<nav>" + " · ".join(f"<a href='#{n}'>{_e(n)}</a>" for n in reports) + "</nav>",
    ]
    for name, rep in reports.items():
        png = PLOTS[name](rep)
        file = f"{name}.png"
        _write_private(out / file, png)
        data = base64.b64encode(png).decode()
        parts.append(
            f"<h2 id='{_e(name)}'>{_e(rep.title)}</h2>"
            f"<img src='data:image/png;base64,{data}' alt='{_e(name)} plot' data-file='{file}'>"
        )
        parts.extend(_table(titles[(name, sec)], t) for sec, t in rep.sections.items())
    page = (
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>memtape report</title>"
        f"<link rel=icon href='data:,'><style>{_CSS}</style></head><body><h1>memtape report</h1>"
        + "".join(parts)
        + "</body></html>\n"
    )
    path = out / "report.html"
    _write_private(path, page.encode())
    return path
