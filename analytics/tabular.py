"""Answers as data: a `Report` of named sections, each a `Table` (column names and rows), and
their plain serializations (CSV text, a parquet file).

Every command that lists things builds a `Report`; the command line
(`memtape.output`) prints it as a table, JSON, CSV or parquet.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from memtape.ledger.errors import LedgerError
from memtape.ledger.extras import load


@dataclass
class Table:
    """Rows of one answer, in column order; values are JSON-ready scalars or lists."""

    columns: list[str]
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    title: str = ""
    #: the columns a table for people shows (None: every column); json, csv and parquet carry all
    shown: list[str] | None = None
    #: one sentence saying why the table has no rows (a table for people shows it instead)
    empty: str = ""

    def records(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, (plain(v) for v in row))) for row in self.rows]

    @classmethod
    def from_records(
        cls, records: Sequence[dict[str, Any]], columns: Sequence[str] | None = None, title: str = ""
    ) -> Table:
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


def cell_text(value: Any) -> str:
    """A value as one table cell: times to the second, floats to 4 significant digits, lists joined."""
    value = plain(value)
    if value is None:
        return ""
    if isinstance(value, str) and _TS.match(value):
        return _TS.sub(r"\1 \2", value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1000 else f"{value:.0f}"
    if isinstance(value, list):
        return ", ".join(cell_text(v) for v in value)
    if isinstance(value, dict):
        return orjson.dumps(value).decode()
    return str(value)


def header(name: str) -> str:
    """A column name as a table header: words, so that a narrow column wraps it between them."""
    return name.replace("_", " ")


def shown(table: Table) -> Table:
    """The columns a person needs to see: the table's `shown` ones (in that order), and of those only the ones with
    a value in some row (all of them when there is no row)."""
    keep = (
        list(range(len(table.columns)))
        if table.shown is None
        else [table.columns.index(c) for c in table.shown if c in table.columns]
    )
    if table.rows:
        keep = [i for i in keep if any(cell_text(row[i]) for row in table.rows)]
    return Table([table.columns[i] for i in keep], [tuple(row[i] for i in keep) for row in table.rows], table.title)


def to_csv(table: Table) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(table.columns)
    for row in table.rows:
        writer.writerow(
            [orjson.dumps(plain(v)).decode() if isinstance(v, (list, dict)) else _csv_scalar(v) for v in row]
        )
    return buf.getvalue()


def _csv_scalar(value: Any) -> Any:
    value = plain(value)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


def to_parquet(table: Table, sink: str | Path | BinaryIO) -> None:
    pa = load("pyarrow", "--format parquet", "analytics")
    pq = load("pyarrow.parquet", "--format parquet", "analytics")

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
