"""`memtape analytics|report|watch`: thin commands over `analytics`.

Each command parses its arguments and calls one public function; errors are
`LedgerError`s, printed by the CLI as one line. `audit` and `explain` live in
commands/audit.py, `experiment` and `fork` in commands/experiment.py, so that a
cold `memtape analytics ...` loads none of their modules.
"""

from __future__ import annotations

import inspect
import threading

import click

from memtape.analytics.answers import analyse
from memtape.analytics.queries import ANALYSES, sections
from memtape.analytics.report import build_report
from memtape.analytics.watch import follow_projections
from memtape.commands import allow_broken_option, current_settings
from memtape.ledger.location import projections_file
from memtape.output import emit, listing_options


@click.group()
def analytics() -> None:
    """DuckDB analytics over the ledger (every subcommand takes --format table|json|csv|parquet).

    Example: memtape analytics promotions --format json
    """


def _analysis_command(name: str, doc: str) -> click.Command:
    @listing_options(list(sections(ANALYSES[name][0])))
    def command(fmt: str, out: str | None, section: str | None) -> None:
        emit(analyse(name, current_settings().store()), fmt, out, section)

    command.__doc__ = doc
    return click.command(name=name)(command)


analytics.help = (
    inspect.cleandoc(analytics.help or "")
    + "\n\n\b\nSections (--section NAME):\n"
    + "\n".join(f"  {name}: {', '.join(sections(file))}" for name, (file, _) in ANALYSES.items())
)

for _name, _doc in (
    (
        "promotions",
        "The lesson funnel recorded → deduplicated → promoted, time to promotion, by category and domain.\n\n"
        "Example: memtape analytics promotions --section time_to_promotion --format csv",
    ),
    (
        "decay",
        "Fact confidence over time, contradictions and pruning.\n\n"
        "Example: memtape analytics decay --section timeline --format json",
    ),
    (
        "recall",
        "Hit rate of error and domain recall; lessons never recalled.\n\n"
        "Example: memtape analytics recall --section never_recalled",
    ),
    (
        "memory-effect",
        "Turns, tokens, duration and pass rate for the same goals: memory off vs on, cold vs warm.\n\n"
        "Example: memtape analytics memory-effect --format parquet --out effect.parquet",
    ),
    (
        "runs",
        "Runs, their outcomes, sessions and lineage (resume / fork).\n\n"
        "Example: memtape analytics runs --section lineage",
    ),
    (
        "credit",
        "Memory items ranked by what `memtape credit` measured: decisions changed, turns, tokens and "
        "successes saved, against the tokens spent showing them (an estimate).\n\n"
        "Example: memtape analytics credit --section items --format json",
    ),
):
    analytics.add_command(_analysis_command(_name, _doc))


COMMANDS: list[click.Command] = [analytics]


@click.command()
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False),
    metavar="DIR",
    help="Directory for report.html and its PNG plots.",
)
@allow_broken_option
def report(out_dir: str) -> None:
    """A self-contained HTML page with PNG plots of every analysis.

    Example: memtape report --out report && chromium report/report.html
    """
    path = build_report(current_settings().store(), out_dir)
    click.echo(f"wrote {path}")


COMMANDS.append(report)


@click.command()
@click.option("--max-events", type=click.IntRange(min=1), default=None, help="Stop after this many new events.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0),
    default=None,
    metavar="SECONDS",
    help="Stop after this long (default: until Ctrl-C).",
)
def watch(max_events: int | None, timeout: float | None) -> None:
    """Follow the ledger, keep projections.db current and print what each new event changed.

    Example: memtape watch            (Ctrl-C to stop; agents append elsewhere)
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
        follow_projections(
            store, projections, on_change=lambda c: click.echo(c.line()), stop=stop, max_events=max_events
        )
    except KeyboardInterrupt:
        stop.set()
    finally:
        if timer is not None:
            timer.cancel()


COMMANDS.append(watch)
