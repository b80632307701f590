"""`memtape start-run|finish-run|recall`: runs and recall for agents in other languages.

Each command parses its arguments and calls one function of the library's
`RecordingMemory` (memtape.projections.recording), the same the Python API calls, so what it
logs is exactly what the library call logs. An agent records its steps with
`memtape append` (step_recorded lines carrying the run id) between
`start-run` and `finish-run`.
"""

from __future__ import annotations

from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import click
import orjson

from memtape.analytics.tabular import Report, Table
from memtape.commands.opening import open_memory
from memtape.output import emit, listing_options
from memtape.projections.recording.memory import RecordingMemory
from memtape.projections.recording.values import Learned, Lesson, TrajectoryRecall


def _memory() -> RecordingMemory:
    return open_memory(RecordingMemory)


def _echo_json(value: Any) -> None:
    click.echo(orjson.dumps(value).decode())


@click.command("start-run")
@click.option("--goal", required=True, help="What the agent is asked to do.")
@click.option("--url", "start_url", required=True, help="Where the run starts.")
@click.option("--session-id", default=None, help="Group runs into a session (default: the run id).")
@click.option("--json", "as_json", is_flag=True, help="Print {run_id, session_id} as JSON.")
def start_run(goal: str, start_url: str, session_id: str | None, as_json: bool) -> None:
    """Start a run and print its id: stale runs are abandoned, then the start-of-run policy
    (seeds on first use, pruning, trajectory expiry) and run_started are written together.

    Example: RUN=$(memtape start-run --goal 'Buy wool socks' --url https://shop.example/)
    """
    run = _memory().start_run(goal=goal, start_url=start_url, session_id=session_id)
    if as_json:
        _echo_json({"run_id": run.run_id, "session_id": run.session_id})
    else:
        click.echo(run.run_id)


@click.command("finish-run")
@click.argument("run_id", metavar="RUN")
@click.option("--success", "succeeded", is_flag=True, help="The run reached its goal (this or --failure).")
@click.option("--failure", "failed", is_flag=True, help="It did not (this or --success).")
@click.option("--outcome", default="", help="What happened, in a sentence.")
@click.option("--json", "as_json", is_flag=True, help="Print what post-run learning produced as JSON.")
def finish_run(run_id: str, succeeded: bool, failed: bool, outcome: str, as_json: bool) -> None:
    """Finish RUN: post-run learning from its recorded steps (lessons, facts, selectors, the
    trajectory of a success), the session entry, graded steps and run_completed.

    Example: memtape finish-run run_1795462280_0012ae --success --outcome 'socks in the cart'
    """
    if succeeded == failed:  # both given contradict each other: neither flag wins silently
        raise click.UsageError("give one of --success or --failure" + (", not both" if succeeded else ""))
    success = succeeded
    learned = _memory().finish_run(run_id, success=success, outcome=outcome)
    summary = finished(run_id, success, learned)
    if as_json:
        _echo_json(summary)
        return
    click.echo(
        f"{run_id} finished ({'success' if success else 'failure'}): {len(learned.lessons)} lessons, "
        f"{len(learned.facts)} facts, " + ("a trajectory" if learned.trajectory else "no trajectory")
    )


def finished(run_id: str, success: bool, learned: Learned) -> dict[str, Any]:
    """What finishing a run produced, as `finish-run --json` prints it (and the MCP tool returns it)."""
    return {
        "run_id": run_id,
        "success": success,
        "lessons": [l.lesson_id for l in learned.lessons],
        "facts": [f"{f.fact_type}: {f.key}" for f in learned.facts],
        "trajectory": learned.trajectory.trajectory_id if learned.trajectory else None,
    }


def _where(run_id: str | None, step: int | None) -> dict[str, Any]:
    if step is not None and run_id is None:
        raise click.UsageError("--step needs --run")
    return {"run_id": run_id, "step": step}


def _show_lessons(lessons: list[Lesson], fmt: str | None, out: str | None) -> None:
    """One line per lesson by default; `--format` gives the lessons as a table like every listing."""
    if fmt is not None:
        records = [asdict(l) for l in lessons]
        emit(Report("lessons", {"lessons": Table.from_records(records, [f.name for f in fields(Lesson)])}), fmt, out)
        return
    if not lessons:
        click.echo("no lessons")
    for l in lessons:
        click.echo(f"{l.lesson_id}  [{l.category}, used {l.use_count}]  {l.text}")


def _where_options(f: Any) -> Any:
    f = listing_options(json_help="Same as --format json: a JSON array.", default=None)(f)
    f = click.option("--step", type=click.IntRange(min=0), default=None, help="The step it happened at.")(f)
    return click.option("--run", "run_id", default=None, metavar="RUN", help="The run it happened in.")(f)


@click.group()
def recall() -> None:
    """Recall memory as the library does (each recall is logged as an event).

    Example: memtape recall error --command click --error 'intercepts pointer events' --domain shop.test
    """


@recall.command("error")
@click.option("--command", "command", required=True, help="The command that failed.")
@click.option("--error", required=True, help="Its error message.")
@click.option("--domain", default=None, help="The site it failed on (site lessons apply only there).")
@_where_options
def recall_error(
    command: str, error: str, domain: str | None, run_id: str | None, step: int | None, fmt: str | None, out: str | None
) -> None:
    """Trigger A: lessons for a failed command (logs error_recall)."""
    _show_lessons(_memory().recall_error(command, error, domain=domain, **_where(run_id, step)), fmt, out)


@recall.command("domain")
@click.option("--domain", required=True, help="The site just entered.")
@_where_options
def recall_domain(domain: str, run_id: str | None, step: int | None, fmt: str | None, out: str | None) -> None:
    """Trigger B: lessons for a site (logs domain_recall)."""
    _show_lessons(_memory().recall_domain(domain, **_where(run_id, step)), fmt, out)


@recall.command("tier1")
@click.option("--domain", default=None, help="The site the run starts on (recorded with the event).")
@_where_options
def recall_tier1(domain: str | None, run_id: str | None, step: int | None, fmt: str | None, out: str | None) -> None:
    """Tier 1: the lessons for a system prompt (logs tier1_loaded)."""
    where = _where(run_id, step)
    _show_lessons(
        _memory().tier1(run_id=where["run_id"], step=step if step is not None else 0, domain=domain), fmt, out
    )


@recall.command("trajectory")
@click.option("--goal", required=True, help="The goal to match.")
@click.option("--url", required=True, help="The page the run is on (its host scopes the match).")
@_where_options
def recall_trajectory(
    goal: str, url: str, run_id: str | None, step: int | None, fmt: str | None, out: str | None
) -> None:
    """The reference trajectory for a goal on a site (logs trajectory_recalled). `--format json` is
    the match as one object (null when none); table, csv and parquet list its steps."""
    found = _memory().recall_trajectory(goal, url, **_where(run_id, step))
    if fmt == "json":
        text = orjson.dumps(_trajectory(found)).decode() + "\n"
        if out is not None:
            Path(out).write_text(text)
        else:
            click.echo(text, nl=False)
        return
    if fmt is not None:
        title = (
            (
                f"trajectory {found.trajectory.trajectory_id} (similarity {found.similarity:.2f}, replay "
                f"{'yes' if found.replay else 'no'})"
            )
            if found
            else "no trajectory"
        )
        steps = [asdict(s) for s in found.trajectory.steps] if found else []
        emit(Report(title, {"steps": Table.from_records(steps)}), fmt, out)
        return
    if found is None:
        click.echo("no trajectory")
        return
    t = found.trajectory
    click.echo(
        f"{t.trajectory_id}  similarity {found.similarity:.2f}  replay {'yes' if found.replay else 'no'}  "
        f"goal {t.goal!r}"
    )
    for i, s in enumerate(t.steps, 1):
        target = f" {s.role} {s.name!r}" if s.role else ""
        click.echo(f"  {i}. {s.command}{target} {orjson.dumps(s.args).decode()} at {s.url}")


def _trajectory(found: TrajectoryRecall | None) -> dict[str, Any] | None:
    if found is None:
        return None
    t = found.trajectory
    return {
        "trajectory_id": t.trajectory_id,
        "goal": t.goal,
        "origin": t.origin,
        "similarity": found.similarity,
        "score": found.score,
        "replay": found.replay,
        "steps": [asdict(s) for s in t.steps],
        "event_ids": list(t.event_ids),
    }


COMMANDS = [start_run, finish_run, recall]
