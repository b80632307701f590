"""`memtape search`: ranked full-text search of memory, as `Memory.search` does it (logged as a
`memory_searched` event, like every recall)."""

from __future__ import annotations

import dataclasses

import click

from memtape.analytics.tabular import Report, Table
from memtape.commands.opening import open_memory
from memtape.output import emit, listing_options
from memtape.projections.cache.materialize import seq_or_time
from memtape.projections.recording.memory import RecordingMemory
from memtape.projections.search import MAX_LIMIT, SEARCH_KINDS, SearchResult

COLUMNS = ("kind", "item_id", "domain", "score", "text")


@click.command("search")
@click.argument("query")
@click.option(
    "--kind",
    "kinds",
    multiple=True,
    metavar="KIND",
    help=f"Only items of this kind (repeatable): {', '.join(SEARCH_KINDS)}.",
)
@click.option("--domain", default=None, help="Only items of this site (its subdomains, and those scoped to a parent).")
@click.option(
    "--as-of", "as_of", default=None, metavar="SEQ|ISO-TIME", help="Memory as the ledger knew it at this seq or time."
)
@click.option("--limit", default=10, type=int, show_default=True, help=f"At most this many hits (1 to {MAX_LIMIT}).")
@click.option("--run", "run_id", default=None, metavar="RUN", help="The run that searched (the event names it).")
@click.option("--step", type=click.IntRange(min=0), default=None, help="The step it searched at.")
@listing_options(json_help="Same as --format json: an array of hits, best first, with every field.")
def search(
    query: str,
    kinds: tuple[str, ...],
    domain: str | None,
    as_of: str | None,
    limit: int,
    run_id: str | None,
    step: int | None,
    fmt: str,
    out: str | None,
) -> None:
    """Search memory by words (lessons, facts, patterns, selectors, trajectories, sessions, context), best
    first; logged as a memory_searched event.

    The ranking is SQLite FTS5's BM25; the query is words, never search syntax.

    Example: memtape search "stale token" --kind lessons --json
    """
    if step is not None and run_id is None:
        raise click.UsageError("--step needs --run")
    hits = open_memory(RecordingMemory).search(
        query,
        kinds=list(kinds) or None,
        domain=domain,
        as_of=seq_or_time(as_of) if as_of is not None else None,
        limit=limit,
        run_id=run_id,
        step=step,
    )
    emit(Report(f"{len(hits)} hits for {query[:60]!r}", {"hits": _table(hits, fmt)}), fmt, out)


def _table(hits: list[SearchResult], fmt: str) -> Table:
    if fmt == "table":
        return Table(list(COLUMNS), [tuple(getattr(h, c) for c in COLUMNS) for h in hits])
    records = [dataclasses.asdict(h) for h in hits]
    return Table.from_records(records, [f.name for f in dataclasses.fields(SearchResult)])


COMMANDS = [search]
