"""`memledger append|events|verify|stats|schema|copy`: thin commands over the store."""
from __future__ import annotations

import sys
import threading

import click
import orjson

from memledger.ledger.errors import LedgerError
from memledger.ledger.events import EVENT_TYPES, RecordedEvent, check_domain, check_ident, json_schema
from memledger.ledger.jsonl import parse_lines
from memledger.ledger.settings import Settings, raw_writer


def _settings() -> Settings:
    return click.get_current_context().find_object(Settings)


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
            return str(d[key])[:80]
    if ev.type == "step_recorded":
        a = d.get("action", {})
        return f"{a.get('command')} {'ok' if d.get('ok') else 'ERROR ' + str(d.get('error'))[:60]}"
    return ""


def format_line(ev: RecordedEvent) -> str:
    where = f"{ev.run_id}#{ev.step}" if ev.run_id and ev.step is not None else (ev.run_id or "-")
    return f"{ev.seq:>7}  {ev.recorded_at}  {ev.type:<20} {where:<28} {ev.domain or '-':<22} {summarize(ev)}"


@click.command()
@click.argument("source", type=click.File("rb"))
@click.option("--raw", is_flag=True, help="Append exactly these events, without the policy step's decisions.")
def append(source: click.utils.LazyFile, raw: bool) -> None:
    """Append JSON Lines events (one per line, payload fields at top level).

    Example: memledger append events.jsonl   (or `-` for stdin)
    """
    events = parse_lines(source.read())
    s = _settings()
    writer = raw_writer if raw else s.writer
    recorded = writer(s.store(), events)
    click.echo(f"appended {len(recorded)} events (seq {recorded[0].seq}..{recorded[-1].seq})" if recorded else "appended 0 events")


@click.command()
@click.option("--from-seq", type=click.IntRange(min=1, max=2**63 - 1), default=None)
@click.option("--to-seq", type=click.IntRange(min=0, max=2**63 - 1), default=None)
@click.option("--type", "types", multiple=True, type=click.Choice(sorted(EVENT_TYPES)))
@click.option("--run", "run_id", default=None, callback=_ident_option)
@click.option("--domain", default=None, callback=_domain_option)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line, with the envelope.")
@click.option("--follow", is_flag=True, help="Keep printing events as other processes append them.")
def events(from_seq: int | None, to_seq: int | None, types: tuple[str, ...], run_id: str | None,
           domain: str | None, as_json: bool, follow: bool) -> None:
    """Print events in seq order, filtered.

    Example: memledger events --type lesson_promoted --json
    """
    store = _settings().store()
    types_set = set(types)

    def emit(ev: RecordedEvent) -> None:
        if as_json:
            sys.stdout.write(orjson.dumps(ev.as_dict()).decode() + "\n")
        else:
            sys.stdout.write(format_line(ev) + "\n")
        sys.stdout.flush()

    if not follow:
        for ev in store.read(from_seq, to_seq, types=types, run_id=run_id, domain=domain):
            emit(ev)
        return
    stop = threading.Event()
    try:
        for ev in store.subscribe(from_seq or 1, stop) if hasattr(store, "subscribe") else []:
            if to_seq is not None and ev.seq > to_seq:
                break
            if (types_set and ev.type not in types_set) or (run_id and ev.run_id != run_id) or (domain and ev.domain != domain):
                continue
            emit(ev)
    except KeyboardInterrupt:
        stop.set()


@click.command()
def verify() -> None:
    """Walk the hash chain; exit 1 naming the first bad seq.

    Example: memledger verify
    """
    result = _settings().store(create=False).verify()
    if result.ok:
        click.echo(f"ok: {result.count} events, chain intact")
        return
    raise LedgerError(f"chain broken at seq {result.first_bad_seq}: {result.reason}")


@click.command()
@click.option("--json", "as_json", is_flag=True)
def stats(as_json: bool) -> None:
    """Counts by type, domain and run; file size; time span.

    Example: memledger stats --json
    """
    st = _settings().store(create=False).stats()
    if as_json:
        click.echo(orjson.dumps(st.__dict__).decode())
        return
    from rich.console import Console
    from rich.table import Table
    console = Console()
    console.print(f"events: {st.count}   bytes: {st.file_bytes}   span: {st.first_recorded_at} .. {st.last_recorded_at}")
    for title, counts in (("type", st.by_type), ("domain", st.by_domain), ("run", st.by_run)):
        table = Table(title=f"by {title}")
        table.add_column(title)
        table.add_column("events", justify="right")
        for key, n in counts.items():
            table.add_row(str(key), str(n))
        console.print(table)


@click.command()
@click.argument("event_type", required=False, type=click.Choice(sorted(EVENT_TYPES)))
def schema(event_type: str | None) -> None:
    """Print the JSON Schema of every event type (or one).

    Example: memledger schema lesson_recorded
    """
    click.echo(orjson.dumps(json_schema(event_type), option=orjson.OPT_INDENT_2).decode())


@click.command(name="copy")
@click.option("--from", "from_url", required=True, metavar="URL", help="Source ledger: sqlite:///path or postgresql://...")
@click.option("--to", "to_url", required=True, metavar="URL", help="Empty target ledger: sqlite:///path or postgresql://...")
def copy_command(from_url: str, to_url: str) -> None:
    """Copy a ledger between stores, rows verbatim, chain verified at the end.

    Example: memledger copy --from sqlite:///.agent-memory/ledger.db --to postgresql://localhost/memory
    """
    from rich.progress import Progress

    from memledger.ledger.copy import copy_ledger
    from memledger.ledger.pgstore import display_url
    with Progress(transient=True) as bar:
        task = bar.add_task("copying", total=None)
        result = copy_ledger(from_url, to_url, on_progress=lambda done, total: bar.update(task, completed=done, total=total))
    click.echo(f"copied {result.count} events from {display_url(from_url)} to {display_url(to_url)}; "
               f"chain verified (head {result.head_hash[:16]})")


COMMANDS = [append, events, verify, stats, schema, copy_command]
