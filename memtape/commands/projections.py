"""`memtape rebuild|state|runs|diff`: thin commands over projections.

Each command parses its arguments, calls one library function and renders
the result as a rich table (or JSON with --json).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import click

from memtape.analytics.tabular import Report, Table
from memtape.commands import allow_broken_option, current_settings
from memtape.ledger.location import projections_file
from memtape.output import emit, listing_options
from memtape.progress import fold_progress_bar
from memtape.projections.cache.materialize import rebuild as rebuild_projections
from memtape.projections.cache.materialize import seq_or_time
from memtape.projections.folds.state import PROJECTIONS, digests
from memtape.projections.state_rows import COLUMNS, STATE_KINDS, Change, diff_between, open_state
from memtape.projections.view import MemoryView


def _as_of(value: str | None) -> int | str | None:
    if value is None:
        return None
    return seq_or_time(value)


def _display(value: Any) -> Any:
    """A table cell: a tuple of records (a trajectory's steps) shows its length."""
    if isinstance(value, tuple) and value and not isinstance(value[0], str):
        return len(value)
    return value


def _report(title: str, columns: tuple[str, ...], items: Sequence[Any], fmt: str) -> Report:
    """The table shows `columns`; json, csv and parquet carry every field of every item."""
    if fmt == "table":
        rows = [tuple(_display(getattr(item, c, None)) for c in columns) for item in items]
        return Report(title, {"items": Table(list(columns), rows)})
    records = [dataclasses.asdict(i) if dataclasses.is_dataclass(i) and not isinstance(i, type) else i for i in items]
    columns = tuple(records[0]) if records else columns
    return Report(title, {"items": Table.from_records(records, columns)})


@click.command()
@click.option(
    "--projection",
    "projection",
    type=click.Choice(PROJECTIONS),
    multiple=True,
    help="Rebuild only this projection (repeatable); default all.",
)
def rebuild(projection: tuple[str, ...]) -> None:
    """Rebuild projections.db from the ledger, with a progress bar.

    Example: memtape rebuild --projection lessons
    """
    s = current_settings()
    with fold_progress_bar(always=True) as progress:
        state = rebuild_projections(
            s.store(), projections_file(s.store()), projections=projection or None, progress=progress
        )
    rows = list(digests(state, projection or PROJECTIONS).items())
    emit(
        Report(f"projections rebuilt at seq {state.head}", {"digests": Table(["projection", "digest (sha256)"], rows)}),
        "table",
    )


@click.command()
@click.argument("kind", type=click.Choice(STATE_KINDS))
@click.option("--domain", default=None, help="Only this domain (and its subdomains where it applies).")
@click.option(
    "--run",
    "run",
    default=None,
    metavar="RUN",
    help="Only this run: its own state (runs, short-term, context, snapshots, scratch, page-maps), what it "
    "taught (lessons, tier1, facts, selectors, trajectories, patterns, sessions), the credit measured on it.",
)
@click.option("--session", default=None, metavar="SESSION", help="Only this session's (runs, sessions).")
@click.option("--outcome", default=None, metavar="OUTCOME", help="Only running, success or failed (runs, sessions).")
@click.option(
    "--as-of",
    "as_of",
    default=None,
    metavar="SEQ|ISO-TIME",
    help="Memory as the ledger knew it at this seq or recorded time.",
)
@click.option("--limit", type=int, default=None, metavar="N", help="At most N rows (1 to 10000): one page of the list.")
@click.option(
    "--offset", type=int, default=0, metavar="N", help="Skip the first N rows (with --limit: the page after)."
)
@listing_options(json_help="Same as --format json: an array with every field (the table shows the main ones).")
@allow_broken_option
def state(
    kind: str,
    domain: str | None,
    run: str | None,
    session: str | None,
    outcome: str | None,
    as_of: str | None,
    limit: int | None,
    offset: int,
    fmt: str,
    out: str | None,
) -> None:
    """Show one projection's current (or past) state, or a page of it.

    Example: memtape state runs --outcome failed --limit 50 --offset 50
    """
    s = current_settings()
    page = open_state(
        s.store(),
        s.projections_path,
        kind,
        domain,
        _as_of(as_of),
        run=run,
        session=session,
        outcome=outcome,
        limit=limit,
        offset=offset,
    )
    where = ", ".join(x for x in (domain, run, session, outcome) if x)
    title = f"{kind} at seq {page.head}" + (f" ({where})" if where else "")
    if limit is not None or offset:
        title += f": {_span(offset, len(page.rows), page.total)}"
    emit(_report(title, COLUMNS[kind], page.rows, fmt), fmt, out)


def _span(offset: int, shown: int, total: int) -> str:
    """Which rows a page holds, as a person reads it: "51-100 of 3,410"."""
    return f"{offset + 1:,}-{offset + shown:,} of {total:,}" if shown else f"none of {total:,}"


@click.command()
@click.option("--session-id", default=None)
@click.option("--domain", default=None)
@click.option("--status", type=click.Choice(["running", "completed", "failed"]), default=None)
@click.option("--limit", type=click.IntRange(min=0), default=None)
@listing_options(json_help="Same as --format json: an array of run manifests with every field.")
@allow_broken_option
def runs(
    session_id: str | None, domain: str | None, status: str | None, limit: int | None, fmt: str, out: str | None
) -> None:
    """List run manifests, newest first (what `bad runs` lists from bad's .agent-memory).

    Example: memtape runs --session-id proj_123 --json
    """
    s = current_settings()
    items = MemoryView.open(s.store(), s.projections_path).runs(session_id, domain, status, limit)
    emit(_report("runs", COLUMNS["runs"] + ("success", "final_url"), items, fmt), fmt, out)


@click.command()
@click.option("--from", "from_seq", required=True, metavar="SEQ|ISO-TIME|RUN")
@click.option("--to", "to_seq", required=True, metavar="SEQ|ISO-TIME|RUN")
@listing_options(json_help="Same as --format json: an array of changes.")
@allow_broken_option
def diff(from_seq: str, to_seq: str, fmt: str, out: str | None) -> None:
    """What memory gained, lost, promoted and decayed between two points of the log.

    Example: memtape diff --from 100 --to 250
    """
    s = current_settings()
    changes = diff_between(s.store(), s.projections_path, from_seq, to_seq)
    emit(
        _report(
            f"memory changes from {from_seq} to {to_seq}",
            tuple(f.name for f in dataclasses.fields(Change)),
            changes,
            fmt,
        ),
        fmt,
        out,
    )


COMMANDS = [rebuild, state, runs, diff]
