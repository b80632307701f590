"""`memtape import` and `memtape export`: thin commands over importers/exporters."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console

from memtape.commands import allow_broken_option, current_settings
from memtape.ledger.clock import normalize_ts
from memtape.ledger.errors import LedgerError
from memtape.ledger.settings import Settings
from memtape.output import AnswerPath
from memtape.projections.cache.materialize import seq_or_time
from memtape.projections.interop.exporters import EXPORT_FORMATS, ExportResult, export_memory
from memtape.projections.interop.importers import FORMATS, ImportResult, import_source
from memtape.projections.view import MemoryView


def run_import(settings: Settings, path: Path, fmt: str) -> ImportResult:
    """Import one source into the ledger of `settings`."""
    return import_source(settings.store(), path, fmt, settings.projections_path)


def parse_as_of(raw: str | None) -> int | str | None:
    """`--as-of 120` is a seq; anything else must be an ISO time."""
    if raw is None:
        return None
    point = seq_or_time(raw)
    if isinstance(point, int):
        return point
    try:
        return normalize_ts(raw)
    except (ValueError, OverflowError):
        raise LedgerError(f"--as-of {raw[:40]!r}: expected a seq or an ISO time") from None


def run_export(settings: Settings, fmt: str, out: Path, as_of: int | str | None) -> ExportResult:
    """Export the memory of `settings` (as of a seq, or now) in one of the seed formats."""
    store = settings.store()
    view = MemoryView.open(store, settings.projections_path, as_of=as_of)
    return export_memory(view.state, store, fmt, out)


@click.command("import")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["auto", *FORMATS]),
    default="auto",
    show_default=True,
    help="memory-json: mycompagent's memory.json; memory-events: a folder of mycompagent's "
    "memory_events.jsonl logs; agent-memory: bad's .agent-memory folder; trayn-json: Trayn's JSON "
    "export of MemoryEntry records. auto: guessed from the path.",
)
def import_cmd(path: Path, fmt: str) -> None:
    """Import another agent's memory: mycompagent's memory.json or memory_events.jsonl logs, bad's
    .agent-memory folder, or Trayn's JSON export (refused whole if any file is malformed; twice = once).
    docs/cli.md shows a minimal valid source of each.

    Example: memtape import ~/.browser_agent/memory.json
    """
    with Console(stderr=True).status(f"importing {path} ..."):
        r = run_import(current_settings(), path, fmt)
    counts = ", ".join(f"{k} {v}" for k, v in r.counts.items() if v)
    if r.already_imported_seq is not None:
        click.echo(
            f"already imported (memory_imported at seq {r.already_imported_seq}, sha256 {r.digest}): nothing appended"
        )
        return
    click.echo(
        f"imported {r.source_format} {r.source_path}: appended {r.appended} events "
        f"(seq {r.first_seq}..{r.last_seq}; {counts or 'nothing to add'})"
    )


@click.command("export")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(list(EXPORT_FORMATS)),
    required=True,
    help="agent-memory: bad's .agent-memory folder; memory-json: mycompagent's memory.json; "
    "memory-events: mycompagent's per-run memory_events.jsonl logs (a folder); "
    "json/csv: Trayn's MemoryEntry records; prompt: Trayn's REPEAT/AVOID text.",
)
@click.option(
    "--out",
    type=AnswerPath(path_type=Path),
    required=True,
    help="Directory (agent-memory, memory-events; new or empty) or file to write (missing parents are created); "
    "nothing outside it is written.",
)
@click.option(
    "--as-of",
    "as_of",
    default=None,
    metavar="SEQ|TIME",
    help="Export memory as of this seq (or ISO time: what the ledger had recorded by then).",
)
@allow_broken_option
def export_cmd(fmt: str, out: Path, as_of: str | None) -> None:
    """Export memory in another agent's format: bad, mycompagent or Trayn (files 0600, directories 0700).

    Example: memtape export --format agent-memory --out ./exported/.agent-memory --as-of 120
    """
    with Console(stderr=True).status(f"exporting {fmt} to {out} ..."):
        r = run_export(current_settings(), fmt, out, parse_as_of(as_of))
    counts = ", ".join(f"{k} {v}" for k, v in r.counts.items())
    click.echo(f"exported {fmt} to {r.out}: {len(r.files)} file(s) ({counts})")


COMMANDS = [import_cmd, export_cmd]
