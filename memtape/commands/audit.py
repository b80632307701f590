"""`memtape audit|explain`: what the agent knew at each step of a run, and the life of one item.

Each command parses its arguments and calls one public function; errors are
`LedgerError`s, printed by the CLI as one line.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import orjson

from memtape.analytics.audit import audit_run
from memtape.analytics.explain import explain_item
from memtape.analytics.tables import AUDIT_SECTIONS, EXPLAIN_SECTIONS, audit_report, explain_report
from memtape.commands import allow_broken_option, current_settings
from memtape.output import FORMATS, AnswerPath, console, emit
from memtape.render import audit_html, audit_text, explain_html, explain_text

COMMANDS: list[click.Command] = []


def _write_or_echo(text: str, out: str | None) -> None:
    if out is None:
        click.echo(text, nl=False)
    else:
        Path(out).write_text(text)
        click.echo(f"wrote {out}")


def table_formats(names: tuple[str, ...]) -> Callable[[Any], Any]:
    """`--format` and `--section` for commands whose default output is a readable page, not a table."""

    def decorate(func: Any) -> Any:
        func = click.option(
            "--section",
            default=None,
            metavar="NAME",
            help=f"One table: {', '.join(names)} (csv and parquet write the first by default).",
        )(func)
        return click.option(
            "--format",
            "fmt",
            type=click.Choice(FORMATS),
            default=None,
            help="The answer as tables: table, json, csv or parquet (see `--section`).",
        )(func)

    return decorate


def _one_output(as_json: bool, as_html: bool, fmt: str | None) -> None:
    if sum((as_json, as_html, fmt is not None)) > 1:
        raise click.UsageError("choose one of --json, --html and --format")


@click.command()
@click.argument("run_id", metavar="RUN")
@click.option("--step", type=click.IntRange(min=0), default=None, help="Only this step.")
@click.option("--json", "as_json", is_flag=True, help="The audit as one JSON object.")
@click.option("--html", "as_html", is_flag=True, help="A self-contained HTML page.")
@click.option(
    "--out",
    type=AnswerPath(dir_okay=False),
    default=None,
    metavar="FILE",
    help="Write the JSON, HTML or --format output to FILE instead of stdout.",
)
@table_formats(AUDIT_SECTIONS)
@allow_broken_option
def audit(
    run_id: str, step: int | None, as_json: bool, as_html: bool, out: str | None, fmt: str | None, section: str | None
) -> None:
    """What the agent knew at each step of RUN: prompt items, memory as of the step, the action —
    and for every item the run and step that taught it. `--format` gives the sections steps,
    prompt_items and memory as tables.

    Example: memtape audit run_20260301_ab12 --step 3 --json
    """
    _one_output(as_json, as_html, fmt)
    data = audit_run(current_settings().store(), run_id, step)
    if fmt is not None:
        emit(audit_report(data), fmt, out, section)
    elif as_json:
        _write_or_echo(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n", out)
    elif as_html:
        _write_or_echo(audit_html(data), out)
    else:
        audit_text(data, console())


@click.command()
@click.argument("item")
@click.option(
    "--domain",
    default=None,
    metavar="D",
    help="For a fact key used on several domains: the domain whose fact to explain.",
)
@click.option("--json", "as_json", is_flag=True, help="The life as one JSON object.")
@click.option("--html", "as_html", is_flag=True, help="A self-contained HTML page.")
@click.option(
    "--out",
    type=AnswerPath(dir_okay=False),
    default=None,
    metavar="FILE",
    help="With --format: write to FILE instead of stdout.",
)
@table_formats(EXPLAIN_SECTIONS)
@allow_broken_option
def explain(
    item: str, domain: str | None, as_json: bool, as_html: bool, out: str | None, fmt: str | None, section: str | None
) -> None:
    """The whole life of one lesson, fact (id or key), selector or trajectory: recorded, deduplicated,
    recalled (in which runs), promoted, decayed, pruned, forgotten. `--format` gives the sections
    life, now and recalled_in_runs as tables.

    Example: memtape explain lsn_f6e59d160e5396b1
    """
    _one_output(as_json, as_html, fmt)
    if out is not None and fmt is None:
        raise click.UsageError("--out needs --format")
    s = current_settings()
    data = explain_item(s.store(), item, projections_path=s.projections_path, domain=domain)
    if fmt is not None:
        emit(explain_report(data), fmt, out, section)
    elif as_json:
        click.echo(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode())
    elif as_html:
        click.echo(explain_html(data), nl=False)
    else:
        explain_text(data, console())


COMMANDS.extend([audit, explain])
