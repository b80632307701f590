"""`memtape lessons`: a person's commands over lessons (pinning one into Tier 1)."""

from __future__ import annotations

import getpass
from collections.abc import Callable

import click

from memtape.commands import current_settings
from memtape.projections.pin import pin, unpin


@click.group("lessons")
def lessons_group() -> None:
    """A person's commands over lessons: `lessons pin LESSON` puts one into Tier 1 (every system prompt), `lessons unpin LESSON` takes one out; each recorded with who and why.

    Tier 1 takes text only from the seeds, from promotion, or from this command."""


def _login() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name in this environment: --by must say who
        return ""


def who_and_why(by: str, verb: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """`--by NAME` (into the parameter `by`, default the login name) and `--reason TEXT`: who
    changes Tier 1 and why, both recorded in the event, as pin and unpin ask them alike."""

    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        command = click.option("--reason", required=True, metavar="TEXT", help="Why (recorded in the event).")(command)
        return click.option(
            "--by",
            by,
            default=_login,
            show_default="your login name",
            metavar="NAME",
            help=f"Who {verb} it (recorded in the event).",
        )(command)

    return decorate


@lessons_group.command("pin")
@click.argument("lesson_id", metavar="LESSON")
@who_and_why("pinned_by", "pins")
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


@lessons_group.command("unpin")
@click.argument("lesson_id", metavar="LESSON")
@who_and_why("unpinned_by", "unpins")
def unpin_cmd(lesson_id: str, unpinned_by: str, reason: str) -> None:
    """Take lesson LESSON out of Tier 1 (a seed, a promoted or a pinned lesson), so no later system
    prompt carries it: appends `lesson_unpinned` with who and why; it stays in memory as an
    error_recovery lesson, recalled on its error.

    Example: memtape lessons unpin lsn_0123456789abcdef --by ada --reason "credit shows it changes nothing"
    """
    settings = current_settings()
    ev = unpin(
        settings.store(),
        lesson_id,
        unpinned_by=unpinned_by,
        reason=reason,
        projections_path=settings.projections_path,
    )
    click.echo(f"unpinned {lesson_id} from Tier 1 (lesson_unpinned at seq {ev.seq}, by {unpinned_by})")


COMMANDS = [lessons_group]
