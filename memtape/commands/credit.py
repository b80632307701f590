"""`memtape credit`: a thin command over agent.credit, and its table."""

from __future__ import annotations

import json

import click
from rich.table import Table

from memtape.agent.credit import credit
from memtape.commands import current_settings
from memtape.commands.agent import task_bar, wide_console
from memtape.projections.parameters import DEFAULT_POLICY
from memtape.projections.recording.memory import RecordingMemory


@click.command("credit")
@click.option("--run", "runs", multiple=True, metavar="RUN", help="Credit only these runs (default: every run).")
@click.option(
    "--rerun/--no-rerun",
    default=True,
    show_default=True,
    help="Run a task again without each item that changed a decision, measuring turns, tokens and success.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def credit_cmd(runs: tuple[str, ...], rerun: bool, as_json: bool) -> None:
    """Credit every memory item by counterfactual: ask each decision's policy again without each item it was shown, and run the task again where one changed a decision; record item_credited events.

    Example: memtape --memory-dir .agent-memory credit --json
    """
    settings = current_settings()
    memory = RecordingMemory(settings.store(), settings.projections_path, DEFAULT_POLICY)
    console = wide_console(stderr=True)
    with task_bar(console, "credit") as progress:
        report = credit(memory, list(runs), rerun=rerun, progress=progress)
    if as_json:
        click.echo(json.dumps(report.as_dict(), indent=2))
        return
    table = Table(title=f"credit: {report.reproduced} of {report.decisions} recorded decisions reproduced")
    for column in ("item", "kind", "shown", "changed", "turns saved", "tokens saved", "success changed", "method"):
        table.add_column(column)
    table.add_column("text", overflow="fold")
    for w in report.items:
        table.add_row(
            w.item,
            w.kind,
            str(w.shown),
            str(w.changed),
            str(w.turns_saved),
            str(w.tokens_saved),
            str(w.success_changed),
            w.method,
            w.text[:120],
        )
    wide_console().print(table)
    for run_id, why in report.skipped.items():
        click.echo(f"skipped {run_id}: {why}", err=True)


COMMANDS = [credit_cmd]
