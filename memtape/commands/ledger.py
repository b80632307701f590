"""`memtape append|events|verify|stats|schema|copy`: thin commands over the store."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterable, Sequence
from typing import IO

import click
import orjson
from rich.progress import Progress

from memtape.analytics.tabular import Report, Table, cell_text
from memtape.commands import allow_broken_option, current_settings
from memtape.ledger.anchor import Anchor, parse_anchor, verify_ledger
from memtape.ledger.copy import copy_ledger
from memtape.ledger.envelope import NewEvent, RecordedEvent
from memtape.ledger.errors import ChainBroken, InvalidEvent, LedgerError
from memtape.ledger.event_schema import json_schema
from memtape.ledger.events import EVENT_TYPES
from memtape.ledger.field_rules import check_domain, check_ident
from memtape.ledger.jsonl import parse_lines, read_source
from memtape.ledger.location import projections_path
from memtape.ledger.store import COLUMNS, Store
from memtape.ledger.urls import display_url
from memtape.output import PIPED_WIDTH, emit, listing_options, terminal_width
from memtape.projections.pin import caller_refusal, door_refusal
from memtape.projections.replay import verify_decisions
from memtape.projections.text import clip
from memtape.projections.writer import MemoryWriter


def _domain_option(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    try:
        return check_domain(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc).encode("unicode_escape").decode("ascii")) from None


def _ident_option(_ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    try:
        return check_ident(value, param.name or "id")
    except ValueError as exc:
        raise click.BadParameter(str(exc).encode("unicode_escape").decode("ascii")) from None


def summarize(ev: RecordedEvent) -> str:
    d = ev.data
    for key in ("lesson", "goal", "value", "error_snippet", "summary", "selector", "subject", "trajectory_id"):
        if d.get(key):
            return str(d[key])
    if ev.type == "step_recorded":
        a = d.get("action", {})
        return f"{a.get('command')} {'ok' if d.get('ok') else 'ERROR ' + str(d.get('error'))}"
    return ""


def _where(ev: RecordedEvent) -> str:
    return f"{ev.run_id}#{ev.step}" if ev.run_id and ev.step is not None else (ev.run_id or "-")


def format_line(ev: RecordedEvent, width: int = PIPED_WIDTH) -> str:
    """One event as a line of `events --format table` (streamed, so a log of any length prints at
    once): the summary fills what the terminal has left, cut with "…"."""
    head = f"{ev.seq:>7} {cell_text(ev.recorded_at)} {ev.type:<20} {_where(ev):<20} {ev.domain or '-':<18} "
    return head + clip(summarize(ev), max(width - len(head), 10))


#: `events --format csv|parquet`: one row per event with the whole envelope, then the payload as JSON
ENVELOPE_COLUMNS = (*(c for c in COLUMNS if c != "payload"), "payload")


def events_report(events: Iterable[RecordedEvent]) -> Report:
    rows = [tuple(ev.as_dict()[c] for c in ENVELOPE_COLUMNS) for ev in events]
    return Report("events", {"events": Table(list(ENVELOPE_COLUMNS), rows)})


def append_observations(store: Store, events: Sequence[NewEvent]) -> list[RecordedEvent]:
    """`memtape append`'s writer: the events plus the decisions of the default policy. What a caller
    may not write (decisions, Tier 1 text) is refused as over HTTP (`caller_refusal`)."""
    refusal = caller_refusal(events)
    if refusal is not None:
        raise InvalidEvent(refusal)
    return MemoryWriter(store, projections_path=projections_path(store)).append(events)


@click.command()
@click.argument("source", type=click.File("rb"))
@click.option("--raw", is_flag=True, help="Append exactly these events, without the policy step's decisions.")
def append(source: IO[bytes], raw: bool) -> None:
    """Append JSON Lines events (one per line, payload fields at top level).

    Example: memtape append events.jsonl   (or `-` for stdin)
    """
    events = parse_lines(read_source(source, getattr(source, "name", None) or "input"))
    refusal = door_refusal(events) if raw else None
    if refusal is not None:
        raise InvalidEvent(refusal)
    store = current_settings().store()
    recorded = store.append(events) if raw else append_observations(store, events)
    click.echo(
        f"appended {len(recorded)} events (seq {recorded[0].seq}..{recorded[-1].seq})"
        if recorded
        else "appended 0 events"
    )


@click.command()
@click.option("--from-seq", type=click.IntRange(min=1, max=2**63 - 1), default=None)
@click.option("--to-seq", type=click.IntRange(min=0, max=2**63 - 1), default=None)
@click.option("--type", "types", multiple=True, type=click.Choice(sorted(EVENT_TYPES)))
@click.option("--run", "run_id", default=None, callback=_ident_option)
@click.option("--domain", default=None, callback=_domain_option)
@click.option("--follow", is_flag=True, help="Keep printing events as other processes append them (table or json).")
@listing_options(json_help="Same as --format json: one JSON object per line, with the envelope.")
@allow_broken_option
def events(
    from_seq: int | None,
    to_seq: int | None,
    types: tuple[str, ...],
    run_id: str | None,
    domain: str | None,
    follow: bool,
    fmt: str,
    out: str | None,
) -> None:
    """Print events in seq order, filtered. `--format json` prints one object per line (envelope and
    payload); csv and parquet one row per event with the envelope and the payload as JSON.

    Example: memtape events --type lesson_promoted --json
    """
    store = current_settings().store()
    types_set = set(types)
    if follow and (fmt in ("csv", "parquet") or out is not None):
        raise click.UsageError("--follow prints to stdout as a table or --format json")

    width = terminal_width() if out is None else PIPED_WIDTH

    def line(ev: RecordedEvent) -> str:
        return (orjson.dumps(ev.as_dict()).decode() if fmt == "json" else format_line(ev, width)) + "\n"

    def emit_line(ev: RecordedEvent) -> None:
        sys.stdout.write(line(ev))
        sys.stdout.flush()

    if not follow:
        found = store.read(from_seq, to_seq, types=types, run_id=run_id, domain=domain)
        if fmt in ("csv", "parquet"):
            emit(events_report(found), fmt, out)
        elif out is not None:
            with open(out, "w") as f:
                f.writelines(line(ev) for ev in found)
        else:
            for ev in found:
                sys.stdout.write(line(ev))
            sys.stdout.flush()
        return
    stop = threading.Event()
    try:
        for ev in store.subscribe(from_seq or 1, stop):
            if to_seq is not None and ev.seq > to_seq:
                break
            if (
                (types_set and ev.type not in types_set)
                or (run_id and ev.run_id != run_id)
                or (domain and ev.domain != domain)
            ):
                continue
            emit_line(ev)
    except KeyboardInterrupt:
        stop.set()


def _anchor_option(_ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]) -> list[Anchor]:
    try:
        return [parse_anchor(v, "--head") for v in values]
    except LedgerError as exc:
        raise click.BadParameter(str(exc)) from None


@click.command()
@click.option(
    "--head",
    "heads",
    multiple=True,
    metavar="SEQ:HASH",
    callback=_anchor_option,
    help="Also check a head kept elsewhere (as printed by an earlier verify); repeatable.",
)
@click.option(
    "--decisions",
    is_flag=True,
    help="Also replay the log under each run's recorded policy and check every decision event.",
)
def verify(heads: list[Anchor], decisions: bool) -> None:
    """Walk the hash chain and check the remembered head; exit 1 naming the first bad or missing seq.

    Example: memtape verify --decisions --head 1200:5f3a...
    """
    s = current_settings()
    store = s.store(create=False, check_head=False)
    result = verify_ledger(store, s.keepers(store), heads)
    if not result.ok:
        raise ChainBroken(result.first_bad_seq or 0, result.reason or "")
    rederived = ""
    if decisions:
        check = verify_decisions(store)
        problems = [f"decision differs at seq {check.first_bad_seq}: {check.reason}"] if check.reason else []
        if check.unmade:
            problems.append(
                f"{len(check.unmade)} Tier 1 entries no seed, promotion or pin command made: " + "; ".join(check.unmade)
            )
        if problems:
            raise LedgerError(". ".join(problems))
        rederived = f", {check.decisions} decisions re-derived"
    head = f"{result.head_seq}:{result.head_hash}" if result.head_seq else "0 (empty)"
    click.echo(f"ok: {result.count} events, chain intact{rederived}; head {head}")


STATS_SECTIONS = ("summary", "by_type", "by_domain", "by_run")


@click.command()
@listing_options(STATS_SECTIONS, json_help="Same as --format json: one object with every count.")
@allow_broken_option
def stats(fmt: str, out: str | None, section: str | None) -> None:
    """Counts by type, domain and run; file size; time span. `--format json` is one object
    (count, by_type, by_domain, by_run, first/last recorded_at, file_bytes) unless --section names a table.

    Example: memtape stats --json
    """
    st = current_settings().store(create=False).stats()
    if fmt == "json" and section is None:
        text = orjson.dumps(st.__dict__).decode() + "\n"
        if out is not None:
            with open(out, "w") as f:
                f.write(text)
        else:
            click.echo(text, nl=False)
        return
    summary = Table(
        ["events", "bytes", "first_recorded_at", "last_recorded_at"],
        [(st.count, st.file_bytes, st.first_recorded_at, st.last_recorded_at)],
        "summary",
    )
    tables = [summary] + [
        Table([title, "events"], list(counts.items()), f"by {title}")
        for title, counts in (("type", st.by_type), ("domain", st.by_domain), ("run", st.by_run))
    ]
    emit(Report("", dict(zip(STATS_SECTIONS, tables))), fmt, out, section)


@click.command()
@click.argument("event_type", required=False, type=click.Choice(sorted(EVENT_TYPES)))
def schema(event_type: str | None) -> None:
    """Print the JSON Schema of every event type (or one).

    Example: memtape schema lesson_recorded
    """
    click.echo(orjson.dumps(json_schema(event_type), option=orjson.OPT_INDENT_2).decode())


@click.command(name="copy")
@click.option(
    "--from", "from_url", required=True, metavar="URL", help="Source ledger: sqlite:///path or postgresql://..."
)
@click.option(
    "--to", "to_url", required=True, metavar="URL", help="Empty target ledger: sqlite:///path or postgresql://..."
)
def copy_command(from_url: str, to_url: str) -> None:
    """Copy a ledger between stores, rows verbatim, chain verified at the end.

    Example: memtape copy --from sqlite:///.agent-memory/ledger.db --to postgresql://localhost/memory
    """
    with Progress(transient=True) as bar:
        task = bar.add_task("copying", total=None)
        result = copy_ledger(
            from_url, to_url, on_progress=lambda done, total: bar.update(task, completed=done, total=total)
        )
    click.echo(
        f"copied {result.count} events from {display_url(from_url)} to {display_url(to_url)}; "
        f"chain verified (head {result.head_hash})"
    )


COMMANDS = [append, events, verify, stats, schema, copy_command]
