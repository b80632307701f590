"""`memledger analytics|audit|explain|experiment|fork|report|watch`: thin commands over `analytics`.

Each command parses its arguments and calls one public function; errors are
`LedgerError`s, printed by the CLI as one line.
"""
from __future__ import annotations

import inspect
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import click
import orjson
from rich.progress import Progress

from memledger.analytics.answers import analyse
from memledger.analytics.audit import audit_run
from memledger.analytics.experiment import (
    EXPERIMENT_SECTIONS,
    experiment_report,
    make_policy,
    policy_parameters,
    run_experiment,
)
from memledger.analytics.explain import explain_item
from memledger.analytics.fork import fork_ledger
from memledger.analytics.queries import ANALYSES, sections
from memledger.analytics.report import build_report
from memledger.analytics.tables import AUDIT_SECTIONS, EXPLAIN_SECTIONS, audit_report, explain_report
from memledger.analytics.watch import follow_projections
from memledger.commands import allow_broken_option, current_settings
from memledger.ledger.errors import LedgerError
from memledger.ledger.location import projections_file
from memledger.output import FORMATS, console, emit, listing_options
from memledger.projections.parameters import Policy
from memledger.render import audit_html, audit_text, explain_html, explain_text

T = TypeVar("T")


@click.group()
def analytics() -> None:
    """DuckDB analytics over the ledger (every subcommand takes --format table|json|csv|parquet).

    Example: memledger analytics promotions --format json
    """


def _analysis_command(name: str, doc: str) -> click.Command:
    @listing_options(list(sections(ANALYSES[name][0])))
    def command(fmt: str, out: str | None, section: str | None) -> None:
        emit(analyse(name, current_settings().store()), fmt, out, section)

    command.__doc__ = doc
    return click.command(name=name)(command)


analytics.help = inspect.cleandoc(analytics.help or "") + "\n\n\b\nSections (--section NAME):\n" + "\n".join(
    f"  {name}: {', '.join(sections(file))}" for name, (file, _) in ANALYSES.items())

for _name, _doc in (
    ("promotions", "The lesson funnel recorded → deduplicated → promoted, time to promotion, by category and domain.\n\n"
                   "Example: memledger analytics promotions --section time_to_promotion --format csv"),
    ("decay", "Fact confidence over time, contradictions and pruning.\n\n"
              "Example: memledger analytics decay --section timeline --format json"),
    ("recall", "Hit rate of error and domain recall; lessons never recalled.\n\n"
               "Example: memledger analytics recall --section never_recalled"),
    ("memory-effect", "Turns, tokens, duration and pass rate for the same goals: memory off vs on, cold vs warm.\n\n"
                      "Example: memledger analytics memory-effect --format parquet --out effect.parquet"),
    ("runs", "Runs, their outcomes, sessions and lineage (resume / fork).\n\n"
             "Example: memledger analytics runs --section lineage"),
):
    analytics.add_command(_analysis_command(_name, _doc))


COMMANDS: list[click.Command] = [analytics]


@click.command()
@click.option("--set", "settings", multiple=True, metavar="NAME=VALUE",
              help="A policy parameter to change (repeatable), e.g. promotion_min_uses=3; see --list-params.")
@click.option("--until", default=None, metavar="SEQ|TIME", help="Replay events up to this seq (or ISO time).")
@click.option("--list-params", is_flag=True,
              help="List the policy parameters (name, type, default, range, meaning) and exit.")
@click.option("--json", "as_json", is_flag=True, help="The whole answer as one JSON object.")
@click.option("--section", default=None, metavar="NAME",
              help=f"One table of the answer: {', '.join(EXPERIMENT_SECTIONS)} (csv and parquet write the first by default).")
@click.option("--out", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Write to FILE instead of stdout (parquet: needed when stdout is a terminal).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True, help="Output format.")
@allow_broken_option
def experiment(settings: tuple[str, ...], until: str | None, list_params: bool, as_json: bool, fmt: str,
               out: str | None, section: str | None) -> None:
    """Replay the log's observations under a changed policy and diff against what really happened.

    Example: memledger experiment --set promotion_min_uses=3 --set fact_decay=0.3 --until 500
    """
    if list_params:
        emit(policy_parameters(), "json" if as_json else fmt, out, section)
        return
    overrides = parse_settings(settings)
    make_policy(Policy(), overrides)  # a value out of range is refused before memory is opened
    result = _with_progress("replaying", lambda progress: run_experiment(current_settings().store(), overrides, until,
                                                                          progress=progress))
    if as_json:
        click.echo(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
        return
    emit(experiment_report(result), fmt, out, section)


def parse_settings(pairs: Iterable[str]) -> dict[str, Any]:
    """`["promotion_min_uses=3", "fact_decay=0.3"]` -> typed overrides of `Policy` fields."""
    fields = Policy.model_fields
    out: dict[str, Any] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        name = name.strip().replace("-", "_")
        if not sep:
            raise LedgerError(f"--set {pair!r}: expected NAME=VALUE")
        if name not in fields:
            raise LedgerError(f"--set {name}: no such policy parameter; known: {', '.join(fields)}")
        kind = fields[name].annotation
        raw = raw.strip()
        try:
            if kind is bool:
                if raw.lower() not in ("true", "false", "1", "0", "yes", "no"):
                    raise ValueError(raw)
                out[name] = raw.lower() in ("true", "1", "yes")
            elif kind is int:
                out[name] = int(raw)
            else:
                out[name] = float(raw)
        except ValueError as exc:
            raise LedgerError(f"--set {name}={raw}: expected a {getattr(kind, '__name__', kind)}") from exc
    return out


def _with_progress(label: str, work: Callable[[Callable[[int, int], None] | None], T]) -> T:
    """Run `work(progress)` with a rich progress bar on a terminal (silent otherwise)."""
    if not sys.stderr.isatty():
        return work(None)
    with Progress(transient=True) as bar:
        task = bar.add_task(label, total=None)
        return work(lambda done, total: bar.update(task, completed=done, total=total))


@click.command()
@click.option("--until", required=True, metavar="SEQ|TIME", help="Last seq (or ISO time) to copy.")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), metavar="DIR",
              help="Directory for the new ledger (gets DIR/ledger.db).")
@click.option("--memory-isolation", "isolation", type=click.Choice(["shared", "per-run"]), default="shared",
              help="How runs in the fork use it: shared (they append to it) or per-run (each starts from the "
                   "forked memory in runs/<run_id>/; nothing leaks between runs).")
def fork(until: str, out_dir: str, isolation: str) -> None:
    """A new ledger with the events up to SEQ, rows verbatim so the hash chain verifies (for A/B runs).

    Example: memledger fork --until 120 --out ab/memory-b --memory-isolation per-run && \
    memledger --memory-dir ab/memory-b run --cases agent/sites/cases.json
    """
    result = fork_ledger(current_settings().store(), until, out_dir, isolation)
    click.echo(f"forked {result.count} events (seq 1..{result.head}) into {result.path}; chain verified; "
               f"memory isolation {result.isolation}")


COMMANDS.extend([experiment, fork])


def _write_or_echo(text: str, out: str | None) -> None:
    if out is None:
        click.echo(text, nl=False)
    else:
        Path(out).write_text(text)
        click.echo(f"wrote {out}")


def table_formats(names: tuple[str, ...]) -> Callable[[Any], Any]:
    """`--format` and `--section` for commands whose default output is a readable page, not a table."""
    def decorate(func: Any) -> Any:
        func = click.option("--section", default=None, metavar="NAME",
                            help=f"One table: {', '.join(names)} (csv and parquet write the first by default).")(func)
        return click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
                            help="The answer as tables: table, json, csv or parquet (see `--section`).")(func)
    return decorate


def _one_output(as_json: bool, as_html: bool, fmt: str | None) -> None:
    if sum((as_json, as_html, fmt is not None)) > 1:
        raise click.UsageError("choose one of --json, --html and --format")


@click.command()
@click.argument("run_id", metavar="RUN")
@click.option("--step", type=click.IntRange(min=0), default=None, help="Only this step.")
@click.option("--json", "as_json", is_flag=True, help="The audit as one JSON object.")
@click.option("--html", "as_html", is_flag=True, help="A self-contained HTML page.")
@click.option("--out", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Write the JSON, HTML or --format output to FILE instead of stdout.")
@table_formats(AUDIT_SECTIONS)
@allow_broken_option
def audit(run_id: str, step: int | None, as_json: bool, as_html: bool, out: str | None, fmt: str | None,
          section: str | None) -> None:
    """What the agent knew at each step of RUN: prompt items, memory as of the step, the action —
    and for every item the run and step that taught it. `--format` gives the sections steps,
    prompt_items and memory as tables.

    Example: memledger audit run_20260301_ab12 --step 3 --json
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
@click.option("--domain", default=None, metavar="D",
              help="For a fact key used on several domains: the domain whose fact to explain.")
@click.option("--json", "as_json", is_flag=True, help="The life as one JSON object.")
@click.option("--html", "as_html", is_flag=True, help="A self-contained HTML page.")
@click.option("--out", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="With --format: write to FILE instead of stdout.")
@table_formats(EXPLAIN_SECTIONS)
@allow_broken_option
def explain(item: str, domain: str | None, as_json: bool, as_html: bool, out: str | None, fmt: str | None,
            section: str | None) -> None:
    """The whole life of one lesson, fact (id or key), selector or trajectory: recorded, deduplicated,
    recalled (in which runs), promoted, decayed, pruned, forgotten. `--format` gives the sections
    life, now and recalled_in_runs as tables.

    Example: memledger explain lsn_f6e59d160e5396b1
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


@click.command()
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), metavar="DIR",
              help="Directory for report.html and its PNG plots.")
@allow_broken_option
def report(out_dir: str) -> None:
    """A self-contained HTML page with PNG plots of every analysis.

    Example: memledger report --out report && chromium report/report.html
    """
    path = build_report(current_settings().store(), out_dir)
    click.echo(f"wrote {path}")


COMMANDS.append(report)


@click.command()
@click.option("--max-events", type=click.IntRange(min=1), default=None, help="Stop after this many new events.")
@click.option("--timeout", type=click.FloatRange(min=0), default=None, metavar="SECONDS",
              help="Stop after this long (default: until Ctrl-C).")
def watch(max_events: int | None, timeout: float | None) -> None:
    """Follow the ledger, keep projections.db current and print what each new event changed.

    Example: memledger watch            (Ctrl-C to stop; agents append elsewhere)
    """
    s = current_settings()
    store = s.store()
    projections = projections_file(store)
    stop = threading.Event()
    timer = threading.Timer(timeout, stop.set) if timeout is not None else None
    if timer is not None:
        timer.daemon = True
        timer.start()
    click.echo(f"watching {store.where} (projections: {projections})")
    try:
        follow_projections(store, projections, on_change=lambda c: click.echo(c.line()), stop=stop,
                           max_events=max_events)
    except KeyboardInterrupt:
        stop.set()
    finally:
        if timer is not None:
            timer.cancel()


COMMANDS.append(watch)
