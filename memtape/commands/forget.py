"""`memtape forget`: a thin command over `projections.forgetting.forget`."""

from __future__ import annotations

import click

from memtape.commands import current_settings
from memtape.ledger.errors import LedgerError
from memtape.projections.forgetting import forget


@click.command("forget")
@click.option(
    "--domain",
    default=None,
    metavar="D",
    help="A site (and its subdomains): its lessons, facts, selectors, trajectories, sessions, runs and steps.",
)
@click.option(
    "--run", "run_id", default=None, metavar="R", help="One run: its manifest, steps, trajectory, session entry."
)
@click.option("--session", default=None, metavar="S", help="Every run of a session.")
@click.option("--lesson", default=None, metavar="L", help="One lesson, by id.")
@click.option("--fact", default=None, metavar="F", help="One fact, by id (as `memtape state facts` shows it).")
@click.option("--reason", default=None, metavar="TEXT", help="Why (recorded in the event).")
@click.option(
    "--force",
    is_flag=True,
    help="Record the forget even when memory holds no such subject (one an import may bring later).",
)
def forget_cmd(
    domain: str | None,
    run_id: str | None,
    session: str | None,
    lesson: str | None,
    fact: str | None,
    reason: str | None,
    force: bool,
) -> None:
    """Forget one subject: append `subject_forgotten`, so no projection, export, report or audit
    answer holds it any more, scrub projections.db (old snapshots, free pages, WAL) and drop the
    analytics mirror (rebuilt without the subject by the next analytics command).
    The ledger keeps its events (append-only; the chain still verifies). A subject memory does
    not hold is refused (a typo would stay in the log for good) unless --force.

    Example: memtape forget --domain shop.test --reason "user asked"
    """
    chosen = [
        (k, v)
        for k, v in (("domain", domain), ("run", run_id), ("session", session), ("lesson", lesson), ("fact", fact))
        if v is not None
    ]
    if len(chosen) != 1:
        raise LedgerError("give exactly one of --domain, --run, --session, --lesson, --fact")
    ((kind, subject),) = chosen
    settings = current_settings()
    r = forget(settings.store(), kind, subject, reason, projections_path=settings.projections_path, force=force)
    removed = ", ".join(f"{n} {t}" for t, n in sorted(r.removed.items())) or "nothing was in memory"
    scrubbed = (
        f"; projections.db scrubbed ({r.snapshots_dropped} old snapshots dropped)" if r.projections_scrubbed else ""
    )
    if r.mirror_dropped:
        scrubbed += "; analytics mirror dropped"
    click.echo(f"forgot {kind} {r.subject} (subject_forgotten at seq {r.seq}): removed {removed}{scrubbed}")


COMMANDS = [forget_cmd]
