"""The uncoloured tables (piped, `--out FILE`) come from memtape.output's own renderer, not from
rich: it must print exactly what rich prints for the same `rich_table`, for any table — wide and
zero-width characters, grapheme clusters, empty cells, words longer than any line, tabs, newlines,
control codes and text rich would read as markup included."""

from __future__ import annotations

import datetime as dt
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from memtape.analytics.tabular import Report, Table
from memtape.output import console, emit, print_report, report_text

#: characters that stress the layout: wide (CJK, emoji), zero-width (combining, ZWJ, VS16), spaces
#: that are not " " (tab, no-break, ideographic), the control codes rich strips or keeps, markup
ODD = [
    "a",
    "b",
    "Z",
    " ",
    " ",
    "\t",
    "\n",
    "\r",
    "\x07",
    "\x08",
    "\x0b",
    "\x0c",
    "\x1b",
    "\x00",
    "\x7f",
    "[",
    "]",
    "[bold]",
    "[/]",
    ":smile:",
    "-",
    ".",
    "é",
    "e\u0301",
    "\u0301",
    "中",
    "文",
    "ｱ",
    "😀",
    "👨\u200d👩\u200d👧",
    "\u200d",
    "\ufe0f",
    "❤\ufe0f",
    "\u3000",
    "\u00a0",
    "…",
    "─",
    "│",
]

words = st.one_of(
    st.lists(st.sampled_from(ODD), max_size=12).map("".join),
    st.text(alphabet="abcdefgh", min_size=25, max_size=120),  # a word longer than any column
    st.text(max_size=30),  # anything unicode has
    st.sampled_from(["", " ", "\n", "\t\t", "lsn_1381735f897a909b", "ab" * 32, "2026-01-02T00:14:00.000000Z"]),
)
values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**12), max_value=10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.datetimes(min_value=dt.datetime(2000, 1, 1)),
    st.lists(words, max_size=3),
    words,
    st.lists(words, min_size=1, max_size=4).map(" ".join),
)
names = st.one_of(
    st.sampled_from(
        [
            "id",
            "lesson_id",
            "run_hash",
            "digest",
            "lesson",
            "category",
            "domain",
            "hours_to_promotion",
            "use_count",
            "x",
        ]
    ),
    st.text(alphabet="abcxyz_中 ", min_size=1, max_size=30),
)


@st.composite
def tables(draw: st.DrawFn) -> Table:
    columns = draw(st.lists(names, min_size=1, max_size=7))
    rows = draw(st.lists(st.tuples(*[values for _ in columns]), max_size=5))
    return Table(columns, rows, title=draw(words), empty=draw(st.sampled_from(["", "nothing was promoted"])))


@st.composite
def reports(draw: st.DrawFn) -> tuple[Report, str | None]:
    sections = draw(st.dictionaries(st.text(alphabet="abc_", min_size=1, max_size=8), tables(), min_size=1, max_size=3))
    report = Report(draw(words), sections)
    return report, draw(st.one_of(st.none(), st.sampled_from(sorted(sections))))


def drawn_by_rich(report: Report, section: str | None, width: int) -> str:
    sink = io.StringIO()
    print_report(report, section, console(sink, width))
    return sink.getvalue()


@settings(max_examples=400)
@given(reports(), st.integers(min_value=12, max_value=200))
@example((Report("", {"t": Table(["lesson"], [("x" * 300,)])}), None), 12)
@example((Report("a report", {"t": Table(["a", "b"], [(None, ""), ("", None)])}), None), 40)
@example((Report("", {"t": Table(["note"], [("[bold]not markup[/] \t tab\r\n\n e\u0301 中文 ❤\ufe0f",)])}), "t"), 20)
@example((Report("中中中中中中 x", {"a": Table(["中中中中中中中中 中"], [("x",)]), "b": Table(["n"], [])}), None), 12)
@example(
    (Report("", {"t": Table(["lesson"], [(None,), (["\u200d\u200daaaa[bold]:smile:"],)])}), None), 12
)  # joins at seams
def test_the_renderer_prints_what_rich_prints(drawn: tuple[Report, str | None], width: int) -> None:
    report, section = drawn
    assert report_text(report, section, width) == drawn_by_rich(report, section, width)


def test_the_renderer_draws_rich_box_and_wraps_the_widest_text() -> None:
    """The comparison above compares something: a real table, wrapped and right-aligned."""
    table = Table(["lesson", "uses"], [("when the list covers the button press Escape first", 12), ("short", 3)])
    text = report_text(Report("Lessons", {"main": table}), None, 30)
    assert text == drawn_by_rich(Report("Lessons", {"main": table}), None, 30)
    assert text.splitlines()[1].startswith("┏━") and "┡" in text and text.rstrip().endswith("┘")
    assert "│   12 │" in text and max(len(line) for line in text.splitlines()) == 30


def test_emit_draws_piped_tables_without_rich(tmp_path: Path) -> None:
    """Piped output and --out go through the renderer: a table printed that way loads no rich.console."""
    script = (
        "import sys\n"
        "from memtape.analytics.tabular import Report, Table\n"
        "from memtape.output import emit\n"
        "emit(Report('r', {'t': Table(['a', 'b'], [('x y', 1)])}), 'table')\n"
        "emit(Report('r', {'t': Table(['a', 'b'], [('x y', 1)])}), 'table', sys.argv[1])\n"
        "assert 'rich.console' not in sys.modules, 'rich.console loaded'\n"
    )
    out = tmp_path / "table.txt"
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "FORCE_COLOR")}
    run = subprocess.run([sys.executable, "-c", script, str(out)], capture_output=True, text=True, env=env, timeout=60)
    assert run.returncode == 0, run.stderr
    want = drawn_by_rich(Report("r", {"t": Table(["a", "b"], [("x y", 1)])}), None, 120)
    assert run.stdout == want == out.read_text()


def test_emit_to_a_stream_rich_cannot_draw_boxes_on_falls_back_to_rich(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stream that is not UTF-8 gets rich's ASCII box, as before."""
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="ascii", errors="replace")
    monkeypatch.setattr(sys, "stdout", stream)
    emit(Report("r", {"t": Table(["a", "b"], [("x y", 1)])}), "table")
    stream.flush()
    text = raw.getvalue().decode("ascii")
    assert "+--" in text and "x y" in text
