"""The command line's one output path for every command that lists things.

`--format table|json|csv|parquet` (`--json` is `--format json`), `--out FILE`
and, where an answer has several tables, `--section NAME`. An answer is a
`Report` of named `Table`s (`analytics.output`); how the formats carry it:

- `table`: every section as a table sized to the terminal (120 columns when
  the output is piped or written with `--out`; `COLUMNS` overrides both). When
  a table is too wide, its widest text column wraps, then headers, then, only
  if that is not enough, the next widest; numbers, ids and hashes are never cut;
  columns empty in every row are left out.
- `json`: `{section: [rows]}`, or the rows of one section when `--section`
  names it or the answer has only one.
- `csv` and `parquet`: one table, the section `--section` names, else the
  first. Parquet without `--out` goes to stdout as bytes (refused on a terminal).

Library layers build `Report`s; only this module knows click and rich.
"""
from __future__ import annotations

import functools
import io
import os
import re
import shutil
import sys
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

import click
import orjson
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from memledger.analytics.output import Report, Table, cell_text, header, plain, shown, to_csv, to_parquet
from memledger.ledger.errors import LedgerError

FORMATS = ("table", "json", "csv", "parquet")
#: the width of a table that is not printed on a terminal (piped, or written with --out)
PIPED_WIDTH = 120
#: the widest text column wraps down to MIN_WRAP characters; the others, if needed, to MIN_CELL
MIN_WRAP = 24
MIN_CELL = 10
_HEX = re.compile(r"^[0-9a-f]{16,}$")


def terminal_width(stream: TextIO | None = None) -> int:
    """`COLUMNS` when set, else the terminal's width, else 120 (piped output)."""
    raw = os.environ.get("COLUMNS", "")
    if raw.isdigit() and int(raw) > 0:
        return int(raw)
    stream = stream or sys.stdout
    try:
        if stream.isatty():
            return shutil.get_terminal_size((PIPED_WIDTH, 24)).columns
    except (AttributeError, ValueError):
        pass
    return PIPED_WIDTH


def console(stream: TextIO | None = None, width: int | None = None) -> Console:
    """A rich console for data: sized like `terminal_width`, colour only on a terminal."""
    stream = stream or sys.stdout
    tty = bool(getattr(stream, "isatty", lambda: False)())
    return Console(file=stream, width=width or terminal_width(stream), force_terminal=tty or None,
                   color_system="auto" if tty else None, soft_wrap=False)


def _kept_whole(name: str, values: Sequence[str]) -> bool:
    """Hashes, digests and ids are compared or copied character for character: never cut or wrapped."""
    if any(k in name for k in ("hash", "digest", "sha256")) or name == "id" or name.endswith("_id"):
        return True
    present = [v for v in values if v]
    return bool(present) and all(_HEX.match(v) for v in present)


def _numeric(values: Sequence[Any]) -> bool:
    present = [plain(v) for v in values if plain(v) is not None]
    return bool(present) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present)


def _natural(text: str) -> int:
    return max((cell_len(line) for line in text.split("\n")), default=0)


def layout(table: Table, width: int) -> tuple[list[int], set[int]]:
    """Column widths for a table `width` columns wide. When it is too wide: its widest text column
    wraps (down to 24 characters); then headers wrap between their words; then, only if that is not
    enough, the next widest text columns wrap between words (down to 10), the widest goes down to
    16 and, as a last resort, the others fold to 6. Numbers, ids and hashes keep their width. Returns the widths and the columns whose values wrap; when even that does not fit, the
    table is wider than `width`."""
    cells = [[cell_text(v) for v in row] for row in table.rows]
    columns = list(zip(*cells)) if cells else [() for _ in table.columns]
    values = [max((_natural(c) for c in col), default=0) for col in columns]
    heads = [header(name) for name in table.columns]
    widths = [max(cell_len(h), v) for h, v in zip(heads, values)]
    text = [i for i, name in enumerate(table.columns)
            if not _numeric([row[i] for row in table.rows]) and not _kept_whole(name, columns[i])]
    excess = sum(widths) + 3 * len(widths) + 1 - width  # borders and padding
    wrapped: set[int] = set()

    def shrink(i: int, floor: int) -> None:
        nonlocal excess
        give = min(excess, max(widths[i] - floor, 0))
        widths[i] -= give
        excess -= give

    order = sorted(text, key=lambda i: -widths[i])
    if order and excess > 0:
        shrink(order[0], MIN_WRAP)
        wrapped.add(order[0])
    for i in range(len(widths)):
        if excess > 0:
            shrink(i, max(max(cell_len(w) for w in heads[i].split(" ")), values[i]))
    words = [max((cell_len(w) for c in col for w in c.split()), default=0) for col in columns]
    for i in order[1:]:  # wrap between words only: `portal.test` is never split
        if excess > 0:
            shrink(i, max(MIN_CELL, words[i]))
            wrapped.add(i)
    if order and excess > 0:
        shrink(order[0], MIN_CELL + 6)
    for i in order[1:]:  # last resort: the other text columns fold down to a few characters
        if excess > 0:
            shrink(i, 6)
            wrapped.add(i)
    if order and excess < 0:  # room left over (headers wrapped): back to the widest text column
        widths[order[0]] += min(-excess, max(values[order[0]] - widths[order[0]], 0))
    return widths, {i for i in wrapped if widths[i] < values[i]}


def rich_table(table: Table, width: int, title: str | None = None) -> RichTable:
    """One `Table` as a rich table no wider than `width` (see `layout`), or as narrow as its numbers,
    ids and hashes allow; columns with no value in any row are left out. Cells are data (page text,
    errors): never rich markup."""
    table = shown(table)
    widths, wrapped = layout(table, width)
    rt = RichTable(title=Text(title if title is not None else table.title), title_justify="left")
    for i, name in enumerate(table.columns):
        numeric = _numeric([row[i] for row in table.rows])
        rt.add_column(Text("\n".join(textwrap.wrap(header(name), widths[i], break_on_hyphens=False))), width=widths[i], no_wrap=i not in wrapped, overflow="fold",
                      justify="right" if numeric else "left")
    for row in table.rows:
        rt.add_row(*(Text(cell_text(v)) for v in row))
    return rt


def print_report(report: Report, section: str | None, out: Console) -> None:
    """Every section (or the one named) as a table under the report's title; an empty section is one line."""
    names = [report.section(section)[0]] if section else list(report.sections)
    alone = len(report.sections) == 1 and bool(report.title)  # one table: the report's title is its title
    if report.title and not alone:
        out.print(Text(report.title, style="bold"))
    for name in names:
        t = report.sections[name]
        label = report.title if alone else (t.title or name.replace("_", " "))
        if not t.rows:
            out.print(Text(f"{label}: {t.empty or 'no rows'}", style="dim"))
        else:
            rt = rich_table(t, out.width, label)
            needed = sum(c.width or 0 for c in rt.columns) + 3 * len(rt.columns) + 1
            terminal = out.width
            out.width = max(needed, terminal)  # wider than the terminal only to keep numbers, ids and hashes whole
            try:
                out.print(rt)
            finally:
                out.width = terminal


def json_payload(report: Report, section: str | None) -> Any:
    """`{section: rows}`, or one section's rows (named, or the only one)."""
    if section or len(report.sections) == 1:
        return report.section(section)[1].records()
    return report.as_json()


def emit(report: Report, fmt: str, out: str | Path | None = None, section: str | None = None) -> None:
    """Write `report` in `fmt` to `out` (a file) or stdout."""
    if fmt not in FORMATS:
        raise LedgerError(f"unknown format {fmt!r}; choose one of: {', '.join(FORMATS)}")
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
    if fmt == "table":
        if out is None:
            print_report(report, section, console())
            return
        sink = io.StringIO()
        print_report(report, section, Console(file=sink, width=PIPED_WIDTH, color_system=None, soft_wrap=False))
        text = sink.getvalue()
    elif fmt == "json":
        text = orjson.dumps(json_payload(report, section), option=orjson.OPT_INDENT_2).decode() + "\n"
    else:
        text = to_csv(report.section(section)[1])
    if out is not None:
        Path(out).write_text(text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()


def listing_options(sections: Sequence[str] = (), *, json_help: str = "Same as --format json.",
                    out_help: str = "Write to FILE instead of stdout (parquet: needed when stdout is a terminal).",
                    default: str | None = "table") -> Callable[[Any], Any]:
    """`--format`, `--json` (its synonym), `--out FILE` and, for answers with several tables,
    `--section NAME` whose help lists the names. The command receives `fmt` (with `--json` folded
    in; None only when `default` is None and neither was given), `out` and `section`."""
    def decorate(func: Any) -> Any:
        @functools.wraps(func)
        def command(*args: Any, fmt: str | None, as_json: bool, **kwargs: Any) -> Any:
            if as_json and fmt not in (None, "json"):
                raise click.UsageError(f"--json is --format json; it cannot be combined with --format {fmt}")
            return func(*args, fmt="json" if as_json else (fmt or default), **kwargs)

        if sections:
            command = click.option("--section", default=None, metavar="NAME",
                                   help=f"One table of the answer: {', '.join(sections)} "
                                        "(csv and parquet write the first by default).")(command)
        command = click.option("--out", type=click.Path(dir_okay=False), default=None, metavar="FILE",
                               help=out_help)(command)
        command = click.option("--json", "as_json", is_flag=True, help=json_help)(command)
        return click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
                            help=f"Output format (default {default or 'a readable page'}).")(command)
    return decorate
