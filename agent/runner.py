"""Running the agent for people: `memtape run` and `memtape demo` in library form.

`run_agent` resolves what to run (one goal, a cases file, a resume or a fork
of an earlier run), serves the bundled sites when a URL points at them,
starts one Chromium for all runs, opens memory per the isolation mode
(`shared`: the memory directory's ledger; `per-run`: a fresh ledger under
`<memory-dir>/runs/<run_id>/` for each run) and runs each task.

`run_demo` is the README's main job: the bundled suite with memory off, then
twice with memory on (the command line prints the comparison and an audit of
`audited_run`).

Example:
    results = run_agent(settings, RunOptions(goal='Open "Wool Socks"', start_url="http://shop.test/"))
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from memtape.agent.browser import Browser
from memtape.agent.embeddings import configured
from memtape.agent.explore import explore
from memtape.agent.loop import RunConfig, RunResult, run_task
from memtape.agent.policy import PolicyError, make_policy
from memtape.agent.sites import SitesServer, is_bundled, load_cases
from memtape.ledger.copy import copy_events
from memtape.ledger.errors import LedgerError
from memtape.ledger.events import RunCompleted
from memtape.ledger.ids import short_id
from memtape.ledger.location import memory_dir, read_fork_info
from memtape.ledger.store import SqliteStore
from memtape.projections.budget import DEFAULT_BUDGET
from memtape.projections.parameters import Thresholds
from memtape.projections.recording.memory import RecordingMemory
from memtape.projections.text import clip

#: told (what is running, tasks done, tasks in all) before each task and once all are done
TaskProgress = Callable[[str, int, int], None]


@dataclass
class RunOptions:
    goal: str | None = None
    start_url: str | None = None
    cases_file: str | None = None
    memory: bool = True
    trace_scoring: bool = False
    trace_ttl_days: float | None = None
    session_id: str | None = None
    resume_run: str | None = None
    fork_run: str | None = None
    isolation: str | None = None  # None: the fork's setting (fork.json), else shared
    policy: str = "scripted"
    max_turns: int = 25
    case_ids: list[str] = field(default_factory=list)
    context_budget: int = DEFAULT_BUDGET
    step_memory_scope: str = "session"
    #: user context given to every run (seed 003's context store)
    context: dict[str, str] = field(default_factory=dict)
    #: explore this site instead of running a goal (seed 003's sitemap)
    explore: str | None = None
    max_depth: int = 2
    max_pages: int = 50
    #: an OpenAI-compatible embeddings endpoint (else MEMTAPE_EMBEDDINGS_BASE_URL; None: text similarity only)
    embeddings_url: str | None = None
    #: memory thresholds and switches changed from the defaults (`--set KEY=VALUE`, the keys of `memtape experiment`)
    thresholds: dict[str, Any] = field(default_factory=dict)
    #: memory sections left out of every prompt (an ablation): names of `prompt.MEMORY_SECTIONS`
    sections_off: frozenset[str] = frozenset()


def memory_policy(opts: RunOptions) -> Thresholds:
    fields: dict[str, Any] = {"trace_scoring": opts.trace_scoring}
    if opts.trace_ttl_days is not None:
        fields["trace_ttl_days"] = opts.trace_ttl_days
    return Thresholds(**{**fields, **opts.thresholds})


def _tasks(settings: Any, opts: RunOptions, policy: Thresholds) -> list[dict[str, Any]]:
    """The tasks to run: a cases file, a resume/fork of a recorded run, or one goal and URL."""
    if opts.resume_run and opts.fork_run:
        raise LedgerError("a run either resumes or forks an earlier run, not both")
    if opts.cases_file:
        cases = load_cases(opts.cases_file)
        if opts.case_ids:
            cases = [c for c in cases if c["id"] in opts.case_ids]
        return [
            {
                "goal": c.get("goal", ""),
                "start_url": c["start_url"],
                "case_id": c["id"],
                "check": c.get("success"),
                "session_id": opts.session_id,
                "mode": "new",
                "parent_run_id": None,
                "explore": c.get("explore"),
            }
            for c in cases
        ]
    if opts.explore:
        return [
            {
                "goal": "",
                "start_url": opts.explore,
                "case_id": None,
                "check": None,
                "session_id": opts.session_id,
                "mode": "new",
                "parent_run_id": None,
                "explore": {"max_depth": opts.max_depth, "max_pages": opts.max_pages},
            }
        ]
    prior = opts.resume_run or opts.fork_run
    if prior:
        memory = RecordingMemory(settings.store(), settings.projections_path, policy)
        goal = opts.goal or None
        scen = memory.resume_scenario(prior, goal) if opts.resume_run else memory.fork_scenario(prior, goal)
        start = opts.start_url or scen.start_url
        if not start:
            raise LedgerError(f"run {prior!r} has no URL to continue from; give a start URL")
        return [
            {
                "goal": scen.goal,
                "start_url": start,
                "case_id": scen.case_id,
                "check": None,
                "session_id": scen.session_id if opts.fork_run else (opts.session_id or scen.session_id),
                "mode": scen.mode,
                "parent_run_id": scen.parent_run_id,
            }
        ]
    if not opts.goal or not opts.start_url:
        raise LedgerError("give a goal and a start URL, a cases file, or a run to resume or fork")
    return [
        {
            "goal": opts.goal,
            "start_url": opts.start_url,
            "case_id": None,
            "check": None,
            "session_id": opts.session_id,
            "mode": "new",
            "parent_run_id": None,
        }
    ]


def isolation_for(settings: Any, opts: RunOptions) -> tuple[str, dict[str, Any] | None]:
    """The isolation runs use (the option, else the fork's record, else shared) and the fork record."""
    fork = read_fork_info(settings.dir)
    return opts.isolation or (fork["memory_isolation"] if fork else "shared"), fork


def _memory_for(
    settings: Any,
    opts: RunOptions,
    policy: Thresholds,
    run_id: str,
    stack: ExitStack,
    isolation: str,
    fork: dict[str, Any] | None,
) -> RecordingMemory:
    """Shared: the directory's ledger. Per-run: a ledger of the run's own under runs/<run_id>/,
    holding the forked events when the directory is a fork (so every run starts from the same
    memory), else empty."""
    if isolation == "per-run":
        d = memory_dir(settings.dir / "runs" / run_id)
        store = SqliteStore.open(d / "ledger.db")
        stack.callback(store.close)
        if fork is not None and fork["until"] > 0:
            copy_events(settings.store(), store, fork["until"])
        return RecordingMemory(store, d / "projections.db", policy, enabled=opts.memory)
    return RecordingMemory(settings.store(), settings.projections_path, policy, enabled=opts.memory)


def run_agent(settings: Any, opts: RunOptions, progress: TaskProgress | None = None) -> list[RunResult]:
    """Run every task of `opts` in one browser; returns each run's numbers."""
    policy = memory_policy(opts)
    isolation, fork = isolation_for(settings, opts)
    tasks = _tasks(settings, opts, policy)
    embeddings = configured(opts.embeddings_url)
    results: list[RunResult] = []
    with ExitStack() as stack:
        proxy = None
        if any(is_bundled(t["start_url"]) for t in tasks):
            proxy = stack.enter_context(SitesServer()).proxy
        browser = stack.enter_context(Browser(proxy=proxy))
        for done, t in enumerate(tasks):
            if progress is not None:
                progress(f"{t['case_id'] or 'run'}: {clip(t['goal'], 50)}", done, len(tasks))
            run_id = short_id("run")
            with ExitStack() as run_stack:
                memory = _memory_for(settings, opts, policy, run_id, run_stack, isolation, fork)
                if t.get("explore"):
                    results.append(_explored(browser, memory, t, run_id))
                    continue
                decision_policy = make_policy(opts.policy)
                results.append(
                    run_task(
                        browser,
                        memory,
                        decision_policy,
                        goal=t["goal"],
                        start_url=t["start_url"],
                        run_id=run_id,
                        session_id=t["session_id"],
                        parent_run_id=t["parent_run_id"],
                        mode=t["mode"],
                        isolation=isolation,
                        case_id=t["case_id"],
                        success_check=t["check"],
                        config=RunConfig(
                            max_turns=opts.max_turns,
                            budget=opts.context_budget,
                            step_memory_scope=opts.step_memory_scope,
                            embeddings=embeddings,
                            sections_off=opts.sections_off,
                        ),
                        context=opts.context,
                    )
                )
        if progress is not None:
            progress("done", len(tasks), len(tasks))
    broken = next((r for r in results if r.outcome.reason == "policy_error"), None)
    if broken is not None:
        raise PolicyError(f"{broken.error} (run {broken.run_id} recorded as failed)")
    return results


def _explored(browser: Browser, memory: RecordingMemory, task: dict[str, Any], run_id: str) -> RunResult:
    """An exploration, reported in the runs table like any run."""
    limits = task["explore"]
    t0 = time.perf_counter()
    done = explore(
        browser,
        memory,
        task["start_url"],
        max_depth=int(limits.get("max_depth", 2)),
        max_pages=int(limits.get("max_pages", 50)),
        run_id=run_id,
        session_id=task["session_id"],
    )
    ms = (time.perf_counter() - t0) * 1000
    pages = len(done.visited) + len(done.served_from_cache)
    outcome = RunCompleted(
        success=pages > 0,
        reason=None if done.complete else "limits_reached",
        turns=pages,
        duration_ms=ms,
        final_url=task["start_url"],
    )
    return RunResult(
        run_id=run_id,
        goal=f"Explore {task['start_url']}",
        outcome=outcome,
        wall_ms=ms,
        step_ms=ms,
        memory_ms=done.memory_ms,
        errors=0,
        case_id=task["case_id"],
        memory_enabled=memory.enabled,
    )


# ---- the demo --------------------------------------------------------------------------


@dataclass(frozen=True)
class Pass:
    """One pass of the demo over its cases: memory off or on, a recorded trajectory replayed or not."""

    label: str
    memory: bool
    replay: bool = True


#: the warm pass again with every step decided by the policy, on memory as it stood after #1
NO_REPLAY = "memory on #2, no replay"
PASSES = (
    Pass("memory off", False),
    Pass("memory on #1", True),
    Pass("memory on #2", True),
    Pass(NO_REPLAY, True, False),
)
#: where the demo keeps the memory of its pass without replay (a fork of the memory after #1)
NO_REPLAY_DIR = "no-replay"


@dataclass
class DemoReport:
    passes: dict[str, list[RunResult]]
    #: the memory directory of the pass without replay (its own ledger: a fork of the memory after #1)
    no_replay_dir: Path | None = None


def cold_memory(settings: Any) -> tuple[Any, Path | None]:
    """Memory for the demo, which measures a cold start: `settings` when its ledger is empty, else
    settings for the first free `DIR/demo-N/` (returned as the second value), so that running the
    demo again prints the same table. A store URL that holds events is refused."""
    events = settings.store().head()
    if events == 0:
        return settings, None
    if settings.store_url:
        raise LedgerError(
            f"the demo starts from empty memory, but {settings.where()} holds {events} events: give it an empty ledger"
        )
    n = 2
    while (settings.dir / f"demo-{n}").exists():
        n += 1
    fresh = settings.dir / f"demo-{n}"
    return replace(settings, memory=str(fresh), store_url=None, _store=None), fresh


def run_demo(
    settings: Any,
    cases: list[dict[str, Any]],
    progress: TaskProgress | None = None,
    thresholds: Thresholds | None = None,
    sections_off: frozenset[str] = frozenset(),
) -> DemoReport:
    """Serve the bundled sites; run `cases` with memory off, then twice with memory on (one session
    per case: its reps), each pass on the memory of `settings`; then the warm pass again with every
    step decided by the policy (no replay), on a fork of the memory as it stood after #1."""
    base = thresholds or Thresholds()
    passes: dict[str, list[RunResult]] = {}
    total, done = len(cases) * len(PASSES), 0
    after_first = 0
    fork_dir: Path | None = None
    with ExitStack() as stack:
        sites = stack.enter_context(SitesServer())
        browser = stack.enter_context(Browser(proxy=sites.proxy))
        for p in PASSES:
            store, projections = settings.store(), settings.projections_path
            if not p.replay:
                fork_dir = memory_dir(settings.dir / NO_REPLAY_DIR)
                store = SqliteStore.open(fork_dir / "ledger.db")
                stack.callback(store.close)
                copy_events(settings.store(), store, after_first)
                projections = fork_dir / "projections.db"
            thresholds_of_pass = base if p.replay else base.model_copy(update={"replay": False})
            memory = RecordingMemory(store, projections, thresholds_of_pass, enabled=p.memory)
            rs = []
            for c in cases:
                if progress is not None:
                    progress(f"{p.label}: {c['id']}", done, total)
                rs.append(_demo_run(browser, memory, c, sections_off))
                done += 1
            passes[p.label] = rs
            if p is PASSES[1]:
                after_first = settings.store().head()
    if progress is not None:
        progress("done", total, total)
    return DemoReport(passes=passes, no_replay_dir=fork_dir)


def run_pass(
    store: Any,
    projections: Path | None,
    cases: list[dict[str, Any]],
    *,
    memory: bool = True,
    thresholds: Thresholds | None = None,
    sections_off: frozenset[str] = frozenset(),
) -> list[RunResult]:
    """One pass of `cases` on the bundled sites with the memory of `store` (an ablation's arm:
    some switches of `thresholds` off, some prompt sections left out)."""
    recording = RecordingMemory(store, projections, thresholds or Thresholds(), enabled=memory)
    with SitesServer() as sites, Browser(proxy=sites.proxy) as browser:
        return [_demo_run(browser, recording, c, sections_off) for c in cases]


def _demo_run(
    browser: Browser, memory: RecordingMemory, case: dict[str, Any], sections_off: frozenset[str]
) -> RunResult:
    """One case of a demo pass: a task (one session per case: its reps), or an exploration."""
    if case.get("explore"):
        task = {
            "start_url": case["start_url"],
            "session_id": f"demo_{case['id']}",
            "case_id": case["id"],
            "explore": case["explore"],
        }
        return _explored(browser, memory, task, short_id("run"))
    return run_task(
        browser,
        memory,
        make_policy("scripted"),
        goal=case["goal"],
        start_url=case["start_url"],
        case_id=case["id"],
        success_check=case.get("success"),
        session_id=f"demo_{case['id']}",
        config=RunConfig(sections_off=sections_off),
    )


def audited_run(settings: Any, report: DemoReport) -> tuple[RunResult, int]:
    """The run the demo audits: the first of memory on #1 that got site tips (else its first run),
    and the step of its first step prompt (else 1)."""
    store = settings.store()
    candidates = report.passes[PASSES[1].label]
    chosen = next(
        (
            r
            for r in candidates
            if any(ev.data.get("matched") for ev in store.read(run_id=r.run_id, types=["domain_recall"]))
        ),
        candidates[0],
    )
    first_step = next(
        (
            ev.step
            for ev in store.read(run_id=chosen.run_id, types=["context_built"])
            if ev.data.get("prompt") == "step"
        ),
        1,
    )
    return chosen, first_step
