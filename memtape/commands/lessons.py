"""`memtape lessons`: a person's commands over lessons (pinning one into Tier 1)."""

from __future__ import annotations

import getpass

import click

from memtape.commands import current_settings
from memtape.projections.pin import pin


@click.group("lessons")
def lessons_group() -> None:
    """A person's commands over lessons: `lessons pin LESSON` puts one into Tier 1 (every system prompt), recorded with who and why.

    Tier 1 takes text only from the seeds, from promotion, or from this command."""


def _login() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name in this environment: --by must say who
        return ""


@lessons_group.command("pin")
@click.argument("lesson_id", metavar="LESSON")
@click.option(
    "--by",
    "pinned_by",
    default=_login,
    show_default="your login name",
    metavar="NAME",
    help="Who pins it (recorded in the event).",
)
@click.option("--reason", required=True, metavar="TEXT", help="Why (recorded in the event).")
@click.option(
    "--category",
    type=click.Choice(["best_practice", "tool_fallback"]),
    default="best_practice",
    show_default=True,
    help="The Tier 1 category it gets.",
)
def pin_cmd(lesson_id: str, pinned_by: str, reason: str, category: str) -> None:
    """Put lesson LESSON (its id, as `memtape state lessons` lists it) into Tier 1, so every later
    run's system prompt carries it: appends `lesson_pinned` with who and why.

    Example: memtape lessons pin lsn_0123456789abcdef --by ada --reason "checked on three sites"
    """
    settings = current_settings()
    ev = pin(
        settings.store(),
        lesson_id,
        pinned_by=pinned_by,
        reason=reason,
        category=category,
        projections_path=settings.projections_path,
    )
    click.echo(f"pinned {lesson_id} into Tier 1 as {category} (lesson_pinned at seq {ev.seq}, by {pinned_by})")


COMMANDS = [lessons_group]
