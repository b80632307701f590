"""`memtape run` and `memtape demo`: thin commands over agent.runner, and their tables.

The demo's audit is composed here: the agent layer runs the passes and names the run to
audit; analytics audits it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click
from rich.console import Console
from rich.progress import Progress
from rich.table import Table
from rich.text import Text

from memtape.agent.credit import credit
from memtape.agent.loop import RunResult
from memtape.agent.runner import (
    NO_REPLAY,
    PASSES,
    DemoReport,
    RunOptions,
    TaskProgress,
    audited_run,
    cold_memory,
    run_agent,
    run_demo,
)
from memtape.agent.sites import CASES_FILE, load_cases
from memtape.analytics.audit import audit_run
from memtape.analytics.experiment import make_policy
from memtape.analytics.memory_use import MemoryUse, memory_use
from memtape.commands import current_settings
from memtape.commands.experiment import parse_settings
from memtape.ledger.settings import Settings
from memtape.ledger.store import SqliteStore
from memtape.projections.budget import BPE_COUNTER, DEFAULT_BUDGET, token_counter
from memtape.projections.parameters import Thresholds
from memtape.projections.recording.memory import RecordingMemory
from memtape.projections.text import clip
from memtape.render import audit_text


def tokens_note() -> str:
    """What the tokens columns count, naming the counter that counted them."""
    counter = token_counter()
    how = (
        "counted by the BPE tokenizer cl100k_base"
        if counter == BPE_COUNTER
        else "estimated by content type (chars/4 for text; install memtape[tokens] for a real count)"
    )
    return (
        f"tokens = size of every prompt the policy was given, {how}, plus its tool call; replayed steps build no prompt"
    )


def _settings(memory_dir: str | None = None) -> Settings:
    settings = current_settings()
    if memory_dir is not None:
        settings.close()
        settings.memory = memory_dir
    return settings


@click.command("run")
@click.option("--goal", "--task", "goal", default=None, help="What the agent should do (quote element names).")
@click.option("--url", "--start-url", "start_url", default=None, help="Where to start.")
@click.option(
    "--cases",
    "cases_file",
    default=None,
    type=click.Path(exists=True, dir_okay=False),
    help="A JSON cases file: [{id, goal, site, start_url, success}]. Bundled: agent/sites/cases.json.",
)
@click.option("--case", "case_ids", multiple=True, help="Only these case ids from --cases.")
@click.option("--no-memory", is_flag=True, help="Clean baseline: read and learn nothing (the run is still logged).")
@click.option("--memory-dir", default=None, metavar="DIR", help="Memory directory (same as the global option).")
@click.option(
    "--trace-scoring",
    is_flag=True,
    help="Rank trajectories by 60% similarity, 20% recency, 10% speed, 10% verification.",
)
@click.option(
    "--trace-ttl-days", type=click.FloatRange(min=0), default=None, metavar="N", help="Trajectory expiry (default 30)."
)
@click.option("--session-id", default=None, help="Tag related runs with one session id.")
@click.option("--resume-run", default=None, metavar="RUN", help="Continue from RUN's final URL, same session.")
@click.option("--fork-run", default=None, metavar="RUN", help="Branch off RUN with a new session id.")
@click.option(
    "--memory-isolation",
    "isolation",
    type=click.Choice(["shared", "per-run"]),
    default=None,
    help="per-run: each run gets a ledger of its own under <memory-dir>/runs/<run_id>/, starting "
    "from the directory's forked memory (empty unless made by `memtape fork`). "
    "Default: the fork's setting, else shared.",
)
@click.option(
    "--policy",
    "policy",
    type=click.Choice(["scripted", "openai"]),
    default="scripted",
    help="scripted (no model) or openai (MEMTAPE_LLM_BASE_URL, MEMTAPE_LLM_MODEL, MEMTAPE_LLM_API_KEY).",
)
@click.option("--max-turns", type=click.IntRange(min=1), default=25)
@click.option(
    "--context-budget",
    type=click.IntRange(min=1),
    default=DEFAULT_BUDGET,
    show_default=True,
    metavar="N",
    help="Tokens of memory and page sections per call (system prompt and step message); strict priorities: "
    "lower ones are dropped first, the boundary item cut.",
)
@click.option(
    "--step-memory-scope",
    type=click.Choice(["session", "all"]),
    default="session",
    show_default=True,
    help="Reps: rep 2+ of a session retrieves graded steps of the session's previous reps "
    "(all: of every other run); rep 1 retrieves none.",
)
@click.option(
    "--context",
    "context",
    multiple=True,
    metavar="KEY=VALUE",
    help="User context given to the run (repeatable), e.g. --context preferred_language=English.",
)
@click.option(
    "--explore",
    "explore",
    default=None,
    metavar="URL",
    help="Explore the site from URL (sitemap: links, visited pages, summary) instead of a goal.",
)
@click.option("--max-depth", type=click.IntRange(min=0, max=100), default=2, help="Exploration depth limit.")
@click.option("--max-pages", type=click.IntRange(min=1, max=100_000), default=50, help="Exploration page limit.")
@click.option(
    "--set",
    "thresholds",
    multiple=True,
    metavar="NAME=VALUE",
    help="A memory parameter or switch for these runs (repeatable; the keys of `memtape experiment "
    "--list-params`), e.g. replay=false, learned_patterns=false, seed_lessons=false.",
)
@click.option(
    "--embeddings-url",
    default=None,
    metavar="URL",
    help="An OpenAI-compatible embeddings endpoint (else MEMTAPE_EMBEDDINGS_BASE_URL; model "
    "MEMTAPE_EMBEDDINGS_MODEL, key MEMTAPE_EMBEDDINGS_API_KEY): each run's goal is embedded once, "
    "the vector recorded in its steps, and step memories compare intents by it.",
)
def run(
    goal: str | None,
    start_url: str | None,
    cases_file: str | None,
    case_ids: tuple[str, ...],
    no_memory: bool,
    memory_dir: str | None,
    trace_scoring: bool,
    trace_ttl_days: float | None,
    session_id: str | None,
    resume_run: str | None,
    fork_run: str | None,
    isolation: str | None,
    policy: str,
    max_turns: int,
    context_budget: int,
    step_memory_scope: str,
    context: tuple[str, ...],
    explore: str | None,
    max_depth: int,
    max_pages: int,
    embeddings_url: str | None,
    thresholds: tuple[str, ...],
) -> None:
    """Run the browser agent on a goal or a cases file, with memory.

    Example: memtape run --goal 'Open "Wool Socks"' --url http://shop.test/ --session-id proj_1
    """
    pairs = {}
    for item in context:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{item[:60]!r}: expected KEY=VALUE", param_hint="--context")
        pairs[key.strip()] = value
    if explore and (goal or cases_file or resume_run or fork_run):
        raise click.UsageError("--explore URL runs alone: drop --goal, --cases, --resume-run and --fork-run")
    opts = RunOptions(
        goal=goal,
        start_url=start_url,
        cases_file=cases_file,
        memory=not no_memory,
        trace_scoring=trace_scoring,
        trace_ttl_days=trace_ttl_days,
        session_id=session_id,
        resume_run=resume_run,
        fork_run=fork_run,
        isolation=isolation,
        policy=policy,
        max_turns=max_turns,
        case_ids=list(case_ids),
        context_budget=context_budget,
        step_memory_scope=step_memory_scope,
        context=pairs,
        explore=explore,
        max_depth=max_depth,
        max_pages=max_pages,
        embeddings_url=embeddings_url,
        thresholds=checked_settings(thresholds).model_dump(exclude_defaults=True),
    )
    with task_bar(wide_console(stderr=True), "running") as progress:
        results = run_agent(_settings(memory_dir), opts, progress)
    wide_console().print(results_table(results))


@click.command("demo")
@click.option(
    "--cases",
    "cases_file",
    default=None,
    type=click.Path(exists=True, dir_okay=False),
    help="Cases to run (default: the bundled suite).",
)
@click.option("--no-audit", is_flag=True, help="Skip the audit of one run at the end.")
@click.option(
    "--set",
    "thresholds",
    multiple=True,
    metavar="NAME=VALUE",
    help="A memory parameter or switch for every pass (repeatable; the keys of `memtape experiment --list-params`).",
)
def demo(cases_file: str | None, no_audit: bool, thresholds: tuple[str, ...]) -> None:
    """Serve the bundled sites and run the suite with memory off, then twice with memory on;
    print passes, turns, policy decisions, tokens and memory's share of step time.

    Example: memtape --memory-dir .agent-memory demo
    """
    settings = _settings()
    console = wide_console()
    chosen = checked_settings(thresholds)
    cases = load_cases(cases_file or CASES_FILE)
    memory, fresh = cold_memory(settings)
    if fresh is not None:
        console.print(
            Text(
                f"{settings.dir} already holds memory ({settings.store().head()} events); the demo starts "
                f"cold in {fresh}"
            )
        )
    try:
        with task_bar(console, "demo") as progress:
            report = run_demo(memory, cases, progress, chosen)
        with task_bar(console, "credit") as progress:  # which decisions memory changed: by counterfactual
            credit_demo(memory, report, progress)
        per, tot = demo_tables(report)
        console.print(per)
        console.print(tot)
        console.print(memory_table(demo_memory_use(memory, report)))
        if not no_audit:
            print_audit(memory, report, console)
    finally:
        if fresh is not None:
            memory.close()


def checked_settings(pairs: tuple[str, ...]) -> Thresholds:
    """`--set NAME=VALUE` pairs as memory thresholds: parsed and checked as `memtape experiment` does."""
    return make_policy(Thresholds(), parse_settings(pairs))


def credit_demo(settings: Settings, report: DemoReport, progress: Any) -> None:
    """Credit the memory-on runs of every pass in the ledger they wrote (the pass without replay:
    its fork), so the memory table counts the decisions memory changed."""
    for label, rs in report.passes.items():
        on = [r.run_id for r in rs if r.memory_enabled]
        if not on:
            continue
        if label == NO_REPLAY and report.no_replay_dir is not None:
            with SqliteStore.open(report.no_replay_dir / "ledger.db") as store:
                credit(
                    RecordingMemory(store, report.no_replay_dir / "projections.db"), on, rerun=False, progress=progress
                )
        else:
            credit(RecordingMemory(settings.store(), settings.projections_path), on, rerun=False, progress=progress)


def demo_memory_use(settings: Settings, report: DemoReport) -> dict[str, MemoryUse]:
    """Each pass's memory use, read off the ledger its runs wrote (the pass without replay: its fork)."""
    out: dict[str, MemoryUse] = {}
    for label, rs in report.passes.items():
        ids = [r.run_id for r in rs]
        if label == NO_REPLAY and report.no_replay_dir is not None:
            with SqliteStore.open(report.no_replay_dir / "ledger.db") as store:
                out[label] = memory_use(store, ids)
        else:
            out[label] = memory_use(settings.store(), ids)
    return out


def wide_console(stderr: bool = False) -> Console:
    """A terminal-width console on a terminal; 120 columns when output is piped or captured (logs, CI)."""
    console = Console(stderr=stderr)
    return console if console.is_terminal else Console(stderr=stderr, width=120)


@contextmanager
def task_bar(console: Console, label: str) -> Iterator[TaskProgress]:
    """A transient bar over the runs of `run_agent` or `run_demo`, drawn from the first run on (a
    refusal before any run prints nothing else)."""
    bar = Progress(console=console, transient=True)
    job = bar.add_task(label, total=None)
    started: list[bool] = []

    def report(what: str, done: int, total: int) -> None:
        if not started:
            bar.start()
            started.append(True)
        bar.update(job, description=what, completed=done, total=total)

    try:
        yield report
    finally:
        if started:
            bar.stop()


def results_table(results: list[RunResult], title: str = "runs") -> Table:
    t = Table(title=title, caption=tokens_note(), title_justify="left")
    for col in ("task", "run", "memory", "pass", "turns", "decisions", "replayed", "tokens", "memory share", "stop"):
        t.add_column(
            col,
            justify="right" if col in ("turns", "decisions", "replayed", "tokens", "memory share") else "left",
            no_wrap=col == "run",
        )
    for r in results:
        o = r.outcome
        t.add_row(
            Text(r.case_id or "-"),
            r.run_id,
            "on" if r.memory_enabled else "off",
            "✓" if o.success else "✗",
            str(o.turns),
            str(o.policy_decisions),
            str(o.replayed_steps),
            str(r.tokens),
            f"{100 * r.memory_share:.1f}%",
            o.reason or "finished",
        )
    return t


def _totals(rs: list[RunResult]) -> dict[str, float]:
    step = sum(r.step_ms for r in rs)
    return {
        "passes": sum(r.outcome.success for r in rs),
        "tasks": len(rs),
        "turns": sum(r.outcome.turns for r in rs),
        "decisions": sum(r.outcome.policy_decisions for r in rs),
        "replayed": sum(r.outcome.replayed_steps for r in rs),
        "tokens": sum(r.tokens for r in rs),
        "errors": sum(r.errors for r in rs),
        "share": (sum(r.step_memory_ms for r in rs) / step) if step else 0.0,
        "seconds": sum(r.wall_ms for r in rs) / 1000,
    }


def demo_tables(report: DemoReport) -> tuple[Table, Table]:
    per = Table(
        title="Per task: pass turns / policy decisions / tokens / memory share of step time",
        caption=tokens_note(),
        title_justify="left",
    )
    per.add_column("task")
    for label in (p.label for p in PASSES):
        per.add_column(label, justify="right")
    names = [r.case_id or clip(r.goal, 30) for r in report.passes[PASSES[0].label]]
    for i, name in enumerate(names):
        cells = []
        for label in (p.label for p in PASSES):
            r = report.passes[label][i]
            o = r.outcome
            cells.append(
                f"{'✓' if o.success else '✗'} {o.turns:>2} / {o.policy_decisions:>2} / {r.tokens:>5} / "
                f"{100 * r.memory_share:4.1f}%" + (f" ({o.replayed_steps} replayed)" if o.replayed_steps else "")
            )
        per.add_row(Text(name), *cells)
    tot = Table(title="Totals", title_justify="left")
    for col in (
        "pass",
        "passes",
        "turns",
        "policy decisions",
        "replayed steps",
        "tokens",
        "errors",
        "memory share of step time",
        "wall time",
    ):
        tot.add_column(col, justify="right" if col != "pass" else "left", no_wrap=col == "pass")
    for label in (p.label for p in PASSES):
        s = _totals(report.passes[label])
        tot.add_row(
            label,
            f"{s['passes']}/{s['tasks']}",
            str(s["turns"]),
            str(s["decisions"]),
            str(s["replayed"]),
            str(s["tokens"]),
            str(s["errors"]),
            f"{100 * s['share']:.1f}%",
            f"{s['seconds']:.1f}s",
        )
    return per, tot


def memory_table(passes: dict[str, MemoryUse]) -> Table:
    """Memory in each pass's prompts: tokens by source (what the calls read), the share in sections
    holding an item that changed a decision (`memtape credit`), and the decisions memory changed (or
    replayed)."""
    t = Table(
        title="Memory tokens by source (share in sections holding an item that changed a decision)",
        caption="a decision uses memory when the policy, asked again without one item of its prompt, decides "
        "otherwise (memtape credit), or when it replays a recorded step",
        title_justify="left",
    )
    t.add_column("source")
    for label in passes:
        t.add_column(label, justify="right")
    sources = sorted(
        {s for use in passes.values() for s in use.by_source},
        key=lambda s: (-sum(u.by_source.get(s, 0) for u in passes.values()), s),
    )

    def cell(tokens: int, used: int) -> str:
        return f"{tokens} ({100 * used / tokens:.0f}%)" if tokens else "0"

    for source in sources:
        t.add_row(
            Text(source), *[cell(u.by_source.get(source, 0), u.used_by_source.get(source, 0)) for u in passes.values()]
        )
    t.add_row("all memory", *[cell(u.tokens, u.used_tokens) for u in passes.values()], end_section=True)
    t.add_row("decisions using memory", *[f"{u.decisions_using_memory}/{u.decisions}" for u in passes.values()])
    return t


def print_audit(settings: Settings, report: DemoReport, console: Console) -> None:
    """A short audit of one run: which memory items its first prompt held, and who taught them."""
    chosen, first_step = audited_run(settings, report)
    console.rule(f"audit of {chosen.run_id} ({chosen.case_id}, memory on #1)")
    audit_text(audit_run(settings.store(), chosen.run_id, first_step), console)
    console.print(f"full audit: memtape --memory-dir {settings.dir} audit {chosen.run_id}")


COMMANDS = [run, demo]
