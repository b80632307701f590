"""`memledger run` and `memledger demo`: thin commands over agent.runner."""
from __future__ import annotations

import click

from memledger.ledger.settings import Settings


def _settings(memory_dir: str | None = None) -> Settings:
    settings = click.get_current_context().find_object(Settings)
    if settings is None:
        settings = Settings()
    if memory_dir is not None:
        settings.close()
        settings.memory = memory_dir
    return settings


@click.command("run")
@click.option("--goal", "--task", "goal", default=None, help="What the agent should do (quote element names).")
@click.option("--url", "--start-url", "start_url", default=None, help="Where to start.")
@click.option("--cases", "cases_file", default=None, type=click.Path(exists=True, dir_okay=False),
              help="A JSON cases file: [{id, goal, site, start_url, success}]. Bundled: agent/sites/cases.json.")
@click.option("--case", "case_ids", multiple=True, help="Only these case ids from --cases.")
@click.option("--no-memory", is_flag=True, help="Clean baseline: read and learn nothing (the run is still logged).")
@click.option("--memory-dir", default=None, metavar="DIR", help="Memory directory (same as the global option).")
@click.option("--trace-scoring", is_flag=True, help="Rank trajectories by 60% similarity, 20% recency, 10% speed, 10% verification.")
@click.option("--trace-ttl-days", type=click.FloatRange(min=0), default=None, metavar="N", help="Trajectory expiry (default 30).")
@click.option("--session-id", default=None, help="Tag related runs with one session id.")
@click.option("--resume-run", default=None, metavar="RUN", help="Continue from RUN's final URL, same session.")
@click.option("--fork-run", default=None, metavar="RUN", help="Branch off RUN with a new session id.")
@click.option("--memory-isolation", "isolation", type=click.Choice(["shared", "per-run"]), default=None,
              help="per-run: each run gets a ledger of its own under <memory-dir>/runs/<run_id>/, starting "
                   "from the directory's forked memory (empty unless made by `memledger fork`). "
                   "Default: the fork's setting, else shared.")
@click.option("--policy", "policy", type=click.Choice(["scripted", "openai"]), default="scripted",
              help="scripted (no model) or openai (MEMLEDGER_LLM_BASE_URL, MEMLEDGER_LLM_MODEL, MEMLEDGER_LLM_API_KEY).")
@click.option("--max-turns", type=click.IntRange(min=1), default=25)
@click.option("--context-budget", type=click.IntRange(min=1), default=2500, show_default=True, metavar="N",
              help="Tokens per step prompt; strict priorities: lower ones are dropped first, the boundary item cut.")
@click.option("--step-memory-scope", type=click.Choice(["session", "all"]), default="session", show_default=True,
              help="Seed 002's reps: rep 2+ of a session retrieves graded steps of the session's previous reps "
                   "(all: of every other run); rep 1 retrieves none.")
@click.option("--context", "context", multiple=True, metavar="KEY=VALUE",
              help="User context given to the run (repeatable), e.g. --context preferred_language=English.")
@click.option("--explore", "explore", default=None, metavar="URL",
              help="Explore the site from URL (sitemap: links, visited pages, summary) instead of a goal.")
@click.option("--max-depth", type=click.IntRange(min=0, max=100), default=2, help="Exploration depth limit.")
@click.option("--max-pages", type=click.IntRange(min=1, max=100_000), default=50, help="Exploration page limit.")
def run(goal: str | None, start_url: str | None, cases_file: str | None, case_ids: tuple[str, ...], no_memory: bool,
        memory_dir: str | None, trace_scoring: bool, trace_ttl_days: float | None, session_id: str | None,
        resume_run: str | None, fork_run: str | None, isolation: str | None, policy: str, max_turns: int,
        context_budget: int, step_memory_scope: str, context: tuple[str, ...], explore: str | None, max_depth: int,
        max_pages: int) -> None:
    """Run the browser agent on a goal or a cases file, with memory.

    Example: memledger run --goal 'Open "Wool Socks"' --url http://shop.test/ --session-id proj_1
    """
    from memledger.agent.runner import RunOptions, results_table, run_agent, wide_console
    pairs = {}
    for item in context:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{item[:60]!r}: expected KEY=VALUE", param_hint="--context")
        pairs[key.strip()] = value
    if explore and (goal or cases_file or resume_run or fork_run):
        raise click.UsageError("--explore URL runs alone: drop --goal, --cases, --resume-run and --fork-run")
    opts = RunOptions(goal=goal, start_url=start_url, cases_file=cases_file, memory=not no_memory,
                      trace_scoring=trace_scoring, trace_ttl_days=trace_ttl_days, session_id=session_id,
                      resume_run=resume_run, fork_run=fork_run, isolation=isolation, policy=policy,
                      max_turns=max_turns, case_ids=list(case_ids), context_budget=context_budget,
                      step_memory_scope=step_memory_scope, context=pairs, explore=explore, max_depth=max_depth,
                      max_pages=max_pages)
    results = run_agent(_settings(memory_dir), opts)
    wide_console().print(results_table(results))


@click.command("demo")
@click.option("--cases", "cases_file", default=None, type=click.Path(exists=True, dir_okay=False),
              help="Cases to run (default: the bundled suite).")
@click.option("--no-audit", is_flag=True, help="Skip the audit of one run at the end.")
def demo(cases_file: str | None, no_audit: bool) -> None:
    """Serve the bundled sites and run the suite with memory off, then twice with memory on;
    print passes, turns, policy decisions, tokens and memory's share of step time.

    Example: memledger --memory-dir .agent-memory demo
    """
    from memledger.agent.runner import run_demo, wide_console
    run_demo(_settings(), wide_console(), cases_file, audit=not no_audit)


COMMANDS = [run, demo]
