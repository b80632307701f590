"""One output path for every analytics command: `--format table|json|csv|parquet`.

A command's answer is a `Report`: named sections, each a `Table` (column
names and rows). How the formats carry several sections:

- `table`: every section as a rich table (human-facing);
- `json`: one object `{section: [row objects]}` (every section), or the row
  array of one section when `--section` names it;
- `csv` and `parquet`: a single table, so they write one section: the one
  `--section` names, else the first (the command's main table).

`--out FILE` writes to a file instead of stdout. Parquet is binary: without
`--out` it is written to stdout as bytes, and refused when stdout is a
terminal (redirect it, or pass `--out`).
"""
from __future__ import annotations

import csv
import datetime as dt
import io
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, BinaryIO

import click
import orjson

from memledger.ledger.errors import LedgerError

FORMATS = ("table", "json", "csv", "parquet")


@dataclass
class Table:
    """Rows of one answer, in column order; values are JSON-ready scalars or lists."""

    columns: list[str]
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    title: str = ""

    def records(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, (plain(v) for v in row))) for row in self.rows]

    @classmethod
    def from_records(cls, records: Sequence[dict[str, Any]], columns: Sequence[str] | None = None,
                     title: str = "") -> "Table":
        cols = list(columns) if columns is not None else (list(records[0]) if records else [])
        return cls(cols, [tuple(r.get(c) for c in cols) for r in records], title)

    def column(self, name: str) -> list[Any]:
        i = self.columns.index(name)
        return [row[i] for row in self.rows]


@dataclass
class Report:
    """A command's whole answer: named tables, the first being the main one."""

    title: str
    sections: dict[str, Table]

    def section(self, name: str | None) -> tuple[str, Table]:
        if name is None:
            first = next(iter(self.sections))
            return first, self.sections[first]
        if name not in self.sections:
            raise LedgerError(f"no section {name!r}; choose one of: {', '.join(self.sections)}")
        return name, self.sections[name]

    def as_json(self) -> dict[str, list[dict[str, Any]]]:
        return {name: t.records() for name, t in self.sections.items()}


def plain(value: Any) -> Any:
    """A JSON/CSV-friendly value (DuckDB gives datetimes and Decimals)."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, float) and value != value:
        return None
    return value


_TS = re.compile(r"^(\d{4}-\d\d-\d\d)T(\d\d:\d\d:\d\d)\.\d+Z$")


def _cell(value: Any) -> str:
    value = plain(value)
    if value is None:
        return ""
    if isinstance(value, str) and _TS.match(value):
        return _TS.sub(r"\1 \2", value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e6 else f"{value:.0f}"
    if isinstance(value, list):
        return ", ".join(_cell(v) for v in value)
    if isinstance(value, dict):
        return orjson.dumps(value).decode()
    return str(value)


def to_csv(table: Table) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(table.columns)
    for row in table.rows:
        writer.writerow([orjson.dumps(plain(v)).decode() if isinstance(v, (list, dict)) else _csv_scalar(v) for v in row])
    return buf.getvalue()


def _csv_scalar(value: Any) -> Any:
    value = plain(value)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


def to_parquet(table: Table, sink: str | Path | BinaryIO) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    data: dict[str, list[Any]] = {c: [] for c in table.columns}
    for row in table.rows:
        for c, v in zip(table.columns, row):
            v = plain(v)
            data[c].append(orjson.dumps(v).decode() if isinstance(v, dict) else v)
    arrays = {}
    for c, values in data.items():
        try:
            arrays[c] = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            arrays[c] = pa.array([None if v is None else orjson.dumps(v).decode() for v in values], type=pa.string())
    pq.write_table(pa.table(arrays) if arrays else pa.table({}), sink)


def render_rich(report: Report, section: str | None = None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table as RichTable
    from rich.text import Text

    console = Console() if sys.stdout.isatty() else Console(width=200)
    names = [report.section(section)[0]] if section else list(report.sections)
    console.print(f"[bold]{escape(report.title)}[/bold]")
    for name in names:
        t = report.sections[name]
        rt = RichTable(title=escape(t.title or name), title_justify="left", show_lines=False)
        for c in t.columns:
            rt.add_column(escape(c), overflow="fold")
        for row in t.rows:  # cells are data (page text, errors): never rich markup
            rt.add_row(*(Text(_cell(v)) for v in row))
        if not t.rows:
            console.print(f"[dim]{escape(t.title or name)}: no rows[/dim]")
        else:
            console.print(rt)


def emit(report: Report, fmt: str, out: str | Path | None = None, section: str | None = None) -> None:
    """Write `report` in `fmt` to `out` (a file) or stdout."""
    if fmt not in FORMATS:
        raise LedgerError(f"unknown format {fmt!r}; choose one of: {', '.join(FORMATS)}")
    if fmt == "table":
        if out is not None:
            raise LedgerError("--out needs --format json, csv or parquet")
        render_rich(report, section)
        return
    if fmt == "parquet":
        _, table = report.section(section)
        if out is not None:
            to_parquet(table, str(out))
            return
        if sys.stdout.isatty():
            raise LedgerError("parquet is binary: pass --out FILE or redirect stdout")
        buf = io.BytesIO()
        to_parquet(table, buf)
        sys.stdout.buffer.write(buf.getvalue())
        sys.stdout.buffer.flush()
        return
    if fmt == "json":
        payload: Any = report.section(section)[1].records() if section else report.as_json()
        text = orjson.dumps(payload, option=orjson.OPT_INDENT_2).decode() + "\n"
    else:
        text = to_csv(report.section(section)[1])
    if out is not None:
        Path(out).write_text(text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()


def format_options(func: Any) -> Any:
    """The shared `--format/--out/--section` options of every analytics command."""
    func = click.option("--section", default=None, metavar="NAME",
                        help="One section of the answer (csv and parquet write the first one by default).")(func)
    func = click.option("--out", type=click.Path(dir_okay=False), default=None, metavar="FILE",
                        help="Write to FILE instead of stdout (parquet: needed when stdout is a terminal).")(func)
    func = click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True,
                        help="Output format.")(func)
    return func
