"""`memledger rebuild|state|runs|diff`: thin commands over projections.

Each command parses its arguments, calls one library function and renders
the result as a rich table (or JSON with --json).
"""
from __future__ import annotations

import dataclasses
from typing import Any

import click
import orjson

from memledger.ledger.settings import Settings
from memledger.projections.report import COLUMNS, STATE_KINDS, Change, diff_between, open_state
from memledger.projections.state import PROJECTIONS


def _settings() -> Settings:
    return click.get_current_context().find_object(Settings)


def _as_of(value: str | None) -> int | str | None:
    if value is None:
        return None
    return int(value) if value.strip().isdigit() else value


def _json(items: list[Any]) -> None:
    click.echo(orjson.dumps([dataclasses.asdict(i) if dataclasses.is_dataclass(i) else i for i in items]).decode())


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}".rstrip("0").rstrip(".") if value != int(value) else str(int(value))
    if isinstance(value, tuple):
        return str(len(value)) if value and not isinstance(value[0], str) else ", ".join(value)
    return str(value)


def _table(title: str, columns: tuple[str, ...], items: list[Any]) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text
    table = Table(title=Text(title))
    for col in columns:
        table.add_column(col, overflow="fold")
    for item in items:
        table.add_row(*(Text(_cell(getattr(item, col, None))) for col in columns))  # data, never markup
    Console().print(table)


@click.command()
@click.option("--projection", "projection", type=click.Choice(PROJECTIONS), multiple=True,
              help="Rebuild only this projection (repeatable); default all.")
def rebuild(projection: tuple[str, ...]) -> None:
    """Rebuild projections.db from the ledger, with a progress bar.

    Example: memledger rebuild --projection lessons
    """
    from memledger.projections.materialize import rebuild as rebuild_projections
    from memledger.projections.state import digests
    s = _settings()
    state = rebuild_projections(s.store(), s.projections_path, projections=projection or None)
    from rich.console import Console
    from rich.table import Table
    table = Table(title=f"projections rebuilt at seq {state.head}")
    table.add_column("projection")
    table.add_column("digest (sha256)")
    for name, dig in digests(state, projection or PROJECTIONS).items():
        table.add_row(name, dig)
    Console().print(table)


@click.command()
@click.argument("kind", type=click.Choice(STATE_KINDS))
@click.option("--domain", default=None, help="Only this domain (and its subdomains where it applies).")
@click.option("--as-of", "as_of", default=None, metavar="SEQ|ISO-TIME",
              help="Memory as the ledger knew it at this seq or recorded time.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array with every field.")
def state(kind: str, domain: str | None, as_of: str | None, as_json: bool) -> None:
    """Show one projection's current (or past) state.

    Example: memledger state lessons --domain amazon.com --as-of 2026-03-01T00:00:00Z
    """
    s = _settings()
    head, items = open_state(s.store(), s.projections_path, kind, domain, _as_of(as_of))
    if as_json:
        _json(items)
        return
    _table(f"{kind} at seq {head}" + (f" ({domain})" if domain else ""), COLUMNS[kind], items)


@click.command()
@click.option("--session-id", default=None)
@click.option("--domain", default=None)
@click.option("--status", type=click.Choice(["running", "completed", "failed"]), default=None)
@click.option("--limit", type=click.IntRange(min=0), default=None)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array of run manifests.")
def runs(session_id: str | None, domain: str | None, status: str | None, limit: int | None, as_json: bool) -> None:
    """List run manifests, newest first (seed 000's `bad runs`).

    Example: memledger runs --session-id proj_123 --json
    """
    from memledger.projections.view import MemoryView
    s = _settings()
    items = MemoryView.open(s.store(), s.projections_path).runs(session_id, domain, status, limit)
    if as_json:
        _json(items)
        return
    _table("runs", COLUMNS["runs"] + ("success", "final_url"), items)


@click.command()
@click.option("--from", "from_seq", required=True, metavar="SEQ|ISO-TIME")
@click.option("--to", "to_seq", required=True, metavar="SEQ|ISO-TIME")
@click.option("--json", "as_json", is_flag=True)
def diff(from_seq: str, to_seq: str, as_json: bool) -> None:
    """What memory gained, lost, promoted and decayed between two points of the log.

    Example: memledger diff --from 100 --to 250
    """
    s = _settings()
    changes = diff_between(s.store(), s.projections_path, _as_of(from_seq) or 0, _as_of(to_seq) or 0)
    if as_json:
        _json(changes)
        return
    _table(f"memory changes from {from_seq} to {to_seq}", tuple(f.name for f in dataclasses.fields(Change)), changes)


COMMANDS = [rebuild, state, runs, diff]
