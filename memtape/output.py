"""The command line's one output path for every command that lists things.

`--format table|json|csv|parquet` (`--json` is `--format json`), `--out FILE`
and, where an answer has several tables, `--section NAME`. An answer is a
`Report` of named `Table`s (`analytics.tabular`); how the formats carry it:

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

Two paths draw a table. On a terminal rich draws it (colour, a bold title, dim notes). Everywhere
else — piped, `--out FILE`, what scripts and benchmarks read — the same characters come from a
small renderer here (`report_text`): rich's padding, wrapping and cropping of segments cost a
third of a cold command on a large analysis, the renderer a tenth of that (docs/benchmarks.md).
It reproduces rich's output byte for byte for these tables — rich's HEAVY_HEAD box, the widths
from `layout`, rich's word wrapping and folding, justification, titles — measuring text with
rich's own `rich.cells`; tests/test_face_render.py checks the two agree on random tables, odd
text included. rich itself (slow to import) loads only when a terminal needs it, or a stream
that is not UTF-8 (rich then draws the box in ASCII).
"""

from __future__ import annotations

import functools
import io
import os
import re
import shutil
import sys
import textwrap
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import click
import orjson
from rich.cells import cell_len, chop_cells, set_cell_size

from memtape.analytics.tabular import Report, Table, cell_text, header, plain, shown, to_csv, to_parquet
from memtape.ledger.errors import LedgerError
from memtape.ledger.location import holds_memory_files

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table as RichTable

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
    from rich.console import Console  # rich loads only when something is drawn with it (see the docstring)

    stream = stream or sys.stdout
    tty = bool(getattr(stream, "isatty", lambda: False)())
    return Console(
        file=stream,
        width=width or terminal_width(stream),
        force_terminal=tty or None,
        color_system="auto" if tty else None,
        soft_wrap=False,
    )


def _kept_whole(name: str, values: Sequence[str]) -> bool:
    """Hashes, digests and ids are compared or copied character for character: never cut or wrapped."""
    if any(k in name for k in ("hash", "digest", "sha256")) or name == "id" or name.endswith("_id"):
        return True
    present = [v for v in values if v]
    return bool(present) and all(_HEX.match(v) for v in present)


def _numeric(values: Sequence[Any]) -> bool:
    present = [v for v in map(plain, values) if v is not None]
    return bool(present) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present)


def _natural(text: str) -> int:
    return max(map(cell_len, text.split("\n"))) if "\n" in text else cell_len(text)


def layout(table: Table, width: int) -> tuple[list[int], set[int]]:
    """Column widths for a table `width` columns wide. When it is too wide: its widest text column
    wraps (down to 24 characters); then headers wrap between their words; then, only if that is not
    enough, the next widest text columns wrap between words (down to 10), the widest goes down to
    16 and, as a last resort, the others fold to 6. Numbers, ids and hashes keep their width. Returns the widths and the columns whose values wrap; when even that does not fit, the
    table is wider than `width`."""
    numeric = [_numeric([row[i] for row in table.rows]) for i in range(len(table.columns))]
    return _layout(table.columns, [[cell_text(v) for v in row] for row in table.rows], numeric, width)


def _layout(
    names: Sequence[str], cells: Sequence[Sequence[str]], numeric: Sequence[bool], width: int
) -> tuple[list[int], set[int]]:
    """`layout` of the columns `names` given the cells' text and which columns hold numbers."""
    columns = list(zip(*cells)) if cells else [() for _ in names]
    values = [max(map(_natural, col), default=0) for col in columns]
    heads = [header(name) for name in names]
    widths = [max(cell_len(h), v, 1) for h, v in zip(heads, values)]  # a column is at least one cell wide
    text = [i for i, name in enumerate(names) if not numeric[i] and not _kept_whole(name, columns[i])]
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
            shrink(i, max(max(cell_len(w) for w in heads[i].split(" ")), values[i], 1))
    for i in order[1:]:  # wrap between words only: `portal.test` is never split
        if excess > 0:
            shrink(i, max(MIN_CELL, max((cell_len(w) for c in columns[i] for w in c.split()), default=0)))
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


@dataclass(frozen=True)
class TableDrawing:
    """What a table looks like, decided once for both renderers: its title, each column's header
    (wrapped between words), width, whether its values wrap and whether it aligns right (numbers),
    and every cell's text."""

    title: str
    headers: list[str]
    widths: list[int]
    wraps: list[bool]
    right: list[bool]
    cells: list[list[str]]


def drawing(table: Table, width: int, title: str | None = None) -> TableDrawing:
    """One `Table` no wider than `width` (see `layout`), or as narrow as its numbers, ids and hashes
    allow; columns with no value in any row are left out."""
    table = shown(table)
    cells = [[cell_text(v) for v in row] for row in table.rows]
    numeric = [_numeric([row[i] for row in table.rows]) for i in range(len(table.columns))]
    widths, wrapped = _layout(table.columns, cells, numeric, width)
    return TableDrawing(
        title=title if title is not None else table.title,
        headers=[
            "\n".join(textwrap.wrap(header(name), widths[i], break_on_hyphens=False))
            for i, name in enumerate(table.columns)
        ],
        widths=widths,
        wraps=[i in wrapped for i in range(len(widths))],
        right=numeric,
        cells=cells,
    )


def rich_table(table: Table, width: int, title: str | None = None) -> RichTable:
    """`drawing(table, width, title)` as a rich table. Cells are data (page text, errors): never rich markup."""
    from rich.table import Table as RichTable  # a terminal's path only (see the docstring)
    from rich.text import Text

    d = drawing(table, width, title)
    rt = RichTable(title=Text(d.title), title_justify="left")
    for head, w, wraps, right in zip(d.headers, d.widths, d.wraps, d.right):
        rt.add_column(Text(head), width=w, no_wrap=not wraps, overflow="fold", justify="right" if right else "left")
    for row in d.cells:
        rt.add_row(*(Text(c) for c in row))
    return rt


def print_report(report: Report, section: str | None, out: Console) -> None:
    """Every section (or the one named) as a table under the report's title, drawn by rich (for a
    terminal: colour); an empty section is one line."""
    from rich.text import Text  # a terminal's path only (see the docstring)

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
            terminal = out.width
            # wider than the terminal only to keep numbers, ids and hashes whole
            out.width = max(_table_width([c.width or 0 for c in rt.columns]), terminal)
            try:
                out.print(rt)
            finally:
                out.width = terminal


def report_text(report: Report, section: str | None, width: int) -> str:
    """What `print_report` prints on a console `width` columns wide without colour, drawn here
    character for character the same (see the docstring)."""
    names = [report.section(section)[0]] if section else list(report.sections)
    alone = len(report.sections) == 1 and bool(report.title)
    lines: list[str] = []
    if report.title and not alone:
        lines.extend(_wrapped(_printable(report.title), width))
    for name in names:
        t = report.sections[name]
        label = report.title if alone else (t.title or name.replace("_", " "))
        if not t.rows:
            lines.extend(_wrapped(_printable(f"{label}: {t.empty or 'no rows'}"), width))
        else:
            lines.extend(_table_lines(drawing(t, width, label), width))
    return "".join(f"{line}\n" for line in lines)


def _table_width(widths: Sequence[int]) -> int:
    """Columns, one space either side of each, and the borders between and around them."""
    return sum(widths) + 3 * len(widths) + 1


#: the control codes rich's Text removes from its text (rich.control.STRIP_CONTROL_CODES)
_STRIPPED = dict.fromkeys((7, 8, 11, 12, 13))
_TRAILING_SPACE = re.compile(r"\s+$")
_WORD = re.compile(r"\s*\S+\s*")
#: rich's HEAVY_HEAD box: (left, fill, divider, right) of the top, the header's rows, the rule under the
#: header, the body's rows and the bottom
_TOP, _HEAD, _RULE, _BODY, _BOTTOM = (
    ("┏", "━", "┳", "┓"),
    ("┃", " ", "┃", "┃"),
    ("┡", "━", "╇", "┩"),
    ("│", " ", "│", "│"),
    ("└", "─", "┴", "┘"),
)


def _printable(text: str) -> str:
    return text.translate(_STRIPPED)


def _expand_tabs(line: str, tab_size: int = 8) -> str:
    """Each tab as a space and then up to the next multiple of `tab_size` cells, as rich expands them."""
    out: list[str] = []
    position = 0
    for part in re.findall(r"[^\t]*\t|[^\t]+$", line):
        if part.endswith("\t"):
            part = part[:-1] + " "
            position += cell_len(part)
            if position % tab_size:
                part += " " * (tab_size - position % tab_size)
                position += tab_size - position % tab_size
        else:
            position += cell_len(part)
        out.append(part)
    return "".join(out)


def _breaks(line: str, width: int) -> list[int]:
    """Where rich's word wrap breaks `line` for `width` cells: between words, and through a word
    too long for any line (folded)."""
    breaks: list[int] = []
    offset = 0
    for match in _WORD.finditer(line):
        start, word = match.start(), match.group(0)
        length = cell_len(word.rstrip())
        if width - offset >= length:
            offset += cell_len(word)
        elif length > width:
            folded = chop_cells(word, width)
            for i, piece in enumerate(folded):
                if start:
                    breaks.append(start)
                if i == len(folded) - 1:
                    offset = cell_len(piece)
                else:
                    start += len(piece)
        elif offset and start:
            breaks.append(start)
            offset = cell_len(word)
    return breaks


def _wrapped(text: str, width: int, wraps: bool = True, justify: str = "default") -> list[str]:
    """`text` (already stripped of control codes) as rich lays a Text out in `width` cells: split at
    newlines, tabs expanded, wrapped between words (when `wraps`), justified ("left" and "right" pad
    to `width`) and cropped."""
    lines: list[str] = []
    for line in text.split("\n"):
        if "\t" in line:
            line = _expand_tabs(line)
        if wraps:
            cuts = [0, *_breaks(line, width), len(line)]
            pieces = [_rstrip_end(line[a:b], width) for a, b in zip(cuts, cuts[1:])]
        else:
            pieces = [line]
        for piece in pieces:
            if justify == "left":
                piece = set_cell_size(piece, width)
            elif justify == "right":
                piece = _cropped(piece.rstrip(), width)
                piece = " " * (width - cell_len(piece)) + piece
            lines.append(_cropped(piece, width))
    return lines


def _cropped(text: str, width: int) -> str:
    return set_cell_size(text, width) if cell_len(text) > width else text


def _rstrip_end(piece: str, width: int) -> str:
    """rich's `Text.rstrip_end`: trailing whitespace removed as far as the text has more characters
    (not cells) than `width`."""
    if len(piece) > width and (space := _TRAILING_SPACE.search(piece)) is not None:
        return piece[: len(piece) - min(len(space.group(0)), len(piece) - width)]
    return piece


def _rule(widths: Sequence[int], left: str, fill: str, divider: str, right: str) -> str:
    return left + divider.join(fill * (w + 2) for w in widths) + right


def _table_lines(d: TableDrawing, width: int) -> Iterator[str]:
    """The lines rich draws for `rich_table` on a console `width` columns wide (widened to the table,
    as `print_report` does): the title wrapped to the table's width, the box, the header's cells
    aligned to the bottom, the body's to the top."""
    if not d.widths:
        yield ""
        return
    table_width = _table_width(d.widths)
    width = max(width, table_width)
    title = _printable(d.title)
    if title:
        yield from (_cropped(line, width) for line in _wrapped(title, table_width, justify="left"))
    yield _rule(d.widths, *_TOP)
    yield from _row_lines(d, d.headers, _HEAD, width, header=True)
    yield _rule(d.widths, *_RULE)
    for row in d.cells:
        yield from _row_lines(d, row, _BODY, width)
    yield _rule(d.widths, *_BOTTOM)


def _adjusted(segments: list[str], length: int, pad: bool = True) -> list[str]:
    """rich's `Segment.adjust_line_length`: a line of segments padded (with a segment of spaces) or
    cropped to `length` cells, each segment measured apart. rich adjusts a cell's lines three times
    (its text to the column, then with its padding, then to the row's shape) and the whole row once
    more; measured apart, text that joins across the seams (a zero-width joiner before a space) can
    come out a cell longer or shorter, so each adjustment is done the same way here."""
    total = _cells(segments)
    if total < length:
        return [*segments, " " * (length - total)] if pad else segments
    if total == length:
        return segments
    kept: list[str] = []
    used = 0
    for segment in segments:
        size = cell_len(segment)
        if used + size >= length:
            kept.append(set_cell_size(segment, length - used))
            break
        kept.append(segment)
        used += size
    return kept


def _cells(segments: Sequence[str]) -> int:
    """The cells a line of segments takes, each measured apart (plain ASCII: one a character)."""
    joined = "".join(segments)
    return len(joined) if joined.isascii() and joined.isprintable() else sum(map(cell_len, segments))


def _cell_lines(text: str, width: int, wraps: bool, right: bool) -> tuple[list[list[str]], bool]:
    """One cell's lines as rich's table renders them — its text laid out in `width` cells, then
    padded with a space either side — and whether they are plain ASCII, each exactly `width` + 2
    characters (most cells), so that no adjustment can change them."""
    if len(text) <= width and text.isascii() and text.isprintable():
        return [[f" {text.rstrip().rjust(width) if right else text.ljust(width)} "]], True
    laid = _wrapped(_printable(text), width, wraps, "right" if right else "left")
    if all(line.isascii() and line.isprintable() for line in laid):
        return [[f" {line} "] for line in laid], True
    return [_adjusted([" ", *_adjusted([line] if line else [], width), " "], width + 2) for line in laid], False


def _row_lines(
    d: TableDrawing, row: Sequence[str], box: tuple[str, str, str, str], width: int, header: bool = False
) -> list[str]:
    """One row of cells on a console `width` columns wide: every cell as tall as the tallest."""
    left, _, divider, right = box
    laid = [_cell_lines(text, w, wraps, r) for text, w, wraps, r in zip(row, d.widths, d.wraps, d.right)]
    height = max(len(lines) for lines, _ in laid)
    cells = []
    for (lines, exact), w in zip(laid, d.widths):
        blank = [[" " * (w + 2)]] * (height - len(lines))
        lines = blank + lines if header else lines + blank
        cells.append(lines if exact else [_adjusted(line, w + 2) for line in lines])
    exact = all(e for _, e in laid)
    out = []
    for i in range(height):
        segments = [left]
        for j, lines in enumerate(cells):
            if j:
                segments.append(divider)
            segments.extend(lines[i])
        segments.append(right)
        if not exact and len(cells) + 1 + sum(_cells(lines[i]) for lines in cells) > width:
            segments = _adjusted(segments, width, pad=False)  # a cell came out wider than its column
        out.append("".join(segments))
    return out


def _for_rich(stream: TextIO) -> bool:
    """A terminal (colour), or a stream that cannot take the box's characters (rich then draws ASCII)."""
    tty = bool(getattr(stream, "isatty", lambda: False)())
    return tty or not (getattr(stream, "encoding", None) or "utf-8").lower().startswith("utf")


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
        if out is None and _for_rich(sys.stdout):
            print_report(report, section, console())
            return
        text = report_text(report, section, PIPED_WIDTH if out is not None else terminal_width())
    elif fmt == "json":
        text = orjson.dumps(json_payload(report, section), option=orjson.OPT_INDENT_2).decode() + "\n"
    else:
        text = to_csv(report.section(section)[1])
    if out is not None:
        Path(out).write_text(text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()


class AnswerPath(click.Path):
    """`--out FILE`: never a file at the top of the memory directory (or beside a SQLite ledger named
    by --store), where ledger.db, its WAL, projections.db, its key and the analytics mirror live — a
    slip of `--out` must not overwrite the only source of truth. Refused before anything runs."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        path = super().convert(value, param, ctx)
        options = ctx.find_root().params if ctx is not None else {}  # the global options (memtape.cli)
        if ctx is not None and holds_memory_files(
            Path(os.fsdecode(path)), options.get("memory_dir"), options.get("store_url")
        ):
            self.fail(
                f"{os.fsdecode(path)} is in the memory's own directory (ledger.db, projections.db and the "
                "analytics mirror live there); write the answer elsewhere",
                param,
                ctx,
            )
        return path


def listing_options(
    sections: Sequence[str] = (),
    *,
    json_help: str = "Same as --format json.",
    out_help: str = "Write to FILE instead of stdout (parquet: needed when stdout is a terminal).",
    default: str | None = "table",
) -> Callable[[Any], Any]:
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
            command = click.option(
                "--section",
                default=None,
                metavar="NAME",
                help=f"One table of the answer: {', '.join(sections)} (csv and parquet write the first by default).",
            )(command)
        command = click.option("--out", type=AnswerPath(dir_okay=False), default=None, metavar="FILE", help=out_help)(
            command
        )
        command = click.option("--json", "as_json", is_flag=True, help=json_help)(command)
        return click.option(
            "--format",
            "fmt",
            type=click.Choice(FORMATS),
            default=None,
            help=f"Output format (default {default or 'a readable page'}).",
        )(command)

    return decorate
