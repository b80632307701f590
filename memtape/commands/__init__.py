"""The `memtape` commands, one module per subject; `memtape.cli` loads a module only when
one of its commands runs.

Each command parses its arguments, calls one library function and prints the answer; the
library layers know nothing of click or rich.
"""

from __future__ import annotations

from typing import Any

import click

from memtape.ledger.location import projections_file
from memtape.ledger.settings import Settings
from memtape.progress import fold_progress_bar
from memtape.projections.cache.materialize import ProjectionsHead, fold_progress

#: commands that only read memory: on a place with no ledger they say `no memory at DIR` and create nothing
READS_ONLY = frozenset(
    {
        "events",
        "verify",
        "stats",
        "rebuild",
        "state",
        "runs",
        "diff",
        "analytics",
        "audit",
        "explain",
        "experiment",
        "fork",
        "report",
        "watch",
        "export",
    }
)
#: commands over items memory must already hold (`lessons pin`): no ledger is created for them either
NEEDS_MEMORY = READS_ONLY | {"lessons"}


def current_settings() -> Settings:
    """The memory the global options named (`memtape --memory-dir DIR --store URL ...`): made on
    the first call from the top-level context's options, and closed with it, its fold progress bar too."""
    root = click.get_current_context().find_root()
    if not isinstance(root.obj, Settings):
        settings = Settings(
            memory=root.params.get("memory_dir"),
            store_url=root.params.get("store_url"),
            seeds=root.params.get("seeds"),
            reads_only=root.invoked_subcommand in NEEDS_MEMORY,
            keeper_factories=[_projections_head],
        )
        root.obj = settings
        root.call_on_close(settings.close)
        progress = fold_progress.set(root.with_resource(fold_progress_bar()))
        root.call_on_close(lambda: fold_progress.reset(progress))
    return root.obj


def _projections_head(settings: Settings) -> ProjectionsHead:
    """projections.db remembers the head it saw too (see ledger.anchor)."""
    return ProjectionsHead(projections_file(settings.store()))


def _allow_broken(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        current_settings().allow_broken = True


def allow_broken_option(command: Any) -> Any:
    """`--allow-broken` on a read command: forensics on an edited ledger (see Settings.allow_broken)."""
    return click.option(
        "--allow-broken",
        is_flag=True,
        expose_value=False,
        is_eager=True,
        callback=_allow_broken,
        help="Forensics: read even a ledger whose chain or remembered head is broken "
        "(nothing is checked; projections.db is neither read nor written).",
    )(command)


def _seeds(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is not None:
        current_settings().seeds = value


def seeds_option(command: Any) -> Any:
    """`--seeds` on a command that serves memory (`serve`, `mcp`): the same as `memtape --seeds`."""
    return click.option(
        "--seeds",
        default=None,
        expose_value=False,
        is_eager=True,
        callback=_seeds,
        metavar="default|none|browser-use|FILE",
        help="Seed lessons a new memory starts with: the seed documents' (default), none, browser-use's, or a JSON "
        "file of your own (as `memtape --seeds`).",
    )(command)
