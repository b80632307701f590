"""`memledger analytics|audit|explain|experiment|fork|report|watch`: thin commands over `analytics`.

Each command parses its arguments and calls one public function; errors are
`LedgerError`s, printed by the CLI as one line.
"""
from __future__ import annotations

import click

from analytics.output import emit, format_options
from ledger.settings import Settings


def _settings() -> Settings:
    return click.get_current_context().find_object(Settings)


@click.group()
def analytics() -> None:
    """DuckDB analytics over the ledger (every subcommand takes --format table|json|csv|parquet).

    Example: memledger analytics promotions --format json
    """


def _analysis_command(name: str, doc: str) -> click.Command:
    @format_options
    def command(fmt: str, out: str | None, section: str | None) -> None:
        from analytics.answers import analyse
        emit(analyse(name, _settings().store()), fmt, out, section)

    command.__doc__ = doc
    return click.command(name=name)(command)


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
