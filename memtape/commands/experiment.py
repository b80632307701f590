"""`memtape experiment|fork`: replay the log under a changed policy, and copy a ledger up to a seq.

Each command parses its arguments and calls one public function; errors are
`LedgerError`s, printed by the CLI as one line.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import click
import orjson
from rich.progress import Progress

from memtape.analytics.experiment import (
    EXPERIMENT_SECTIONS,
    experiment_report,
    make_policy,
    policy_parameters,
    run_experiment,
)
from memtape.analytics.fork import fork_ledger
from memtape.commands import allow_broken_option, current_settings
from memtape.ledger.errors import LedgerError
from memtape.output import FORMATS, AnswerPath, emit
from memtape.projections.parameters import Thresholds

T = TypeVar("T")

COMMANDS: list[click.Command] = []


@click.command()
@click.option(
    "--set",
    "settings",
    multiple=True,
    metavar="NAME=VALUE",
    help="A policy parameter to change (repeatable), e.g. promotion_min_uses=3; see --list-params.",
)
@click.option("--until", default=None, metavar="SEQ|TIME", help="Replay events up to this seq (or ISO time).")
@click.option(
    "--list-params", is_flag=True, help="List the policy parameters (name, type, default, range, meaning) and exit."
)
@click.option("--json", "as_json", is_flag=True, help="The whole answer as one JSON object.")
@click.option(
    "--section",
    default=None,
    metavar="NAME",
    help=f"One table of the answer: {', '.join(EXPERIMENT_SECTIONS)} (csv and parquet write the first by default).",
)
@click.option(
    "--out",
    type=AnswerPath(dir_okay=False),
    default=None,
    metavar="FILE",
    help="Write to FILE instead of stdout (parquet: needed when stdout is a terminal).",
)
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True, help="Output format.")
@allow_broken_option
def experiment(
    settings: tuple[str, ...],
    until: str | None,
    list_params: bool,
    as_json: bool,
    fmt: str,
    out: str | None,
    section: str | None,
) -> None:
    """Replay the log's observations under a changed policy and diff against what really happened.

    Example: memtape experiment --set promotion_min_uses=3 --set fact_decay=0.3 --until 500
    """
    if list_params:
        emit(policy_parameters(), "json" if as_json else fmt, out, section)
        return
    overrides = parse_settings(settings)
    make_policy(Thresholds(), overrides)  # a value out of range is refused before memory is opened
    result = _with_progress(
        "replaying", lambda progress: run_experiment(current_settings().store(), overrides, until, progress=progress)
    )
    if as_json:
        click.echo(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
        return
    emit(experiment_report(result), fmt, out, section)


def parse_settings(pairs: Iterable[str]) -> dict[str, Any]:
    """`["promotion_min_uses=3", "fact_decay=0.3"]` -> typed overrides of `Thresholds` fields."""
    fields = Thresholds.model_fields
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
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False),
    metavar="DIR",
    help="Directory for the new ledger (gets DIR/ledger.db).",
)
@click.option(
    "--memory-isolation",
    "isolation",
    type=click.Choice(["shared", "per-run"]),
    default="shared",
    help="How runs in the fork use it: shared (they append to it) or per-run (each starts from the "
    "forked memory in runs/<run_id>/; nothing leaks between runs).",
)
def fork(until: str, out_dir: str, isolation: str) -> None:
    """A new ledger with the events up to SEQ, rows verbatim so the hash chain verifies (for A/B runs).

    Example: memtape fork --until 120 --out ab/memory-b --memory-isolation per-run && \
    memtape --memory-dir ab/memory-b run --cases agent/sites/cases.json
    """
    result = fork_ledger(current_settings().store(), until, out_dir, isolation)
    click.echo(
        f"forked {result.count} events (seq 1..{result.head}) into {result.path}; chain verified; "
        f"memory isolation {result.isolation}"
    )


COMMANDS.extend([experiment, fork])
