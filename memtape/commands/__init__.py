"""The `memtape` commands, one module per subject; `memtape.cli` loads a module only when
one of its commands runs (or `--help` lists them).

Each command parses its arguments, calls one library function and prints the answer; the
library layers know nothing of click or rich.
"""
from __future__ import annotations

from typing import Any

import click

from memtape.ledger.settings import Settings


def current_settings() -> Settings:
    """The memory the global options named (`memtape --memory-dir DIR --store URL ...`)."""
    return click.get_current_context().ensure_object(Settings)


def _allow_broken(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        ctx.ensure_object(Settings).allow_broken = True


def allow_broken_option(command: Any) -> Any:
    """`--allow-broken` on a read command: forensics on an edited ledger (see Settings.allow_broken)."""
    return click.option("--allow-broken", is_flag=True, expose_value=False, is_eager=True, callback=_allow_broken,
                        help="Forensics: read even a ledger whose chain or remembered head is broken "
                             "(nothing is checked; projections.db is neither read nor written).")(command)
