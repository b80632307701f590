"""Memory inside a real agent step in Chromium: its share of step time, and the cost of building
one step's context, each beside the browser work of the same steps, measured in the same run.

The bundled suite runs twice with memory on against one fresh ledger (cold: nothing learned yet;
warm: the second pass, with lessons, trajectories, facts and selectors to recall). Figures:

- memory's share of step time, cold and warm: the time spent inside the memory facade during
  steps (recalls, graded-step retrieval, recording steps and prompts) beside the whole step
  time (observe, decide, act, verify). Aim: memory ≤ 2% of a step (ratio ≥ 50x).
- context build per policy step (both passes; replayed steps build none), p50 and p99: gathering the prompt's memory items, fitting them to the
  budget, rendering the text and appending `context_built`, beside observing the page (the
  accessibility snapshot) for the same steps.

Usage::

    python bench/agent_step.py            # the whole bundled suite, twice
    python bench/agent_step.py --quick    # three cases
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import Figure, print_json, show

BENCH = "agent_step"
QUICK_CASES = ("shop-view-socks", "search-padel", "news-bakery")


class Timings:
    """Milliseconds per call of the wrapped functions, by label."""

    def __init__(self) -> None:
        self.ms: dict[str, list[float]] = {}

    def wrap(self, label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed_call(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.add(label, (time.perf_counter() - t) * 1000)

        return timed_call

    def add(self, label: str, ms: float) -> None:
        self.ms.setdefault(label, []).append(ms)


@contextmanager
def instrumented(timings: Timings) -> Iterator[None]:
    """Time the context build (items + fit + render + `record_prompt`) and page observation of
    every policy step, by wrapping the functions the loop calls (restored afterwards)."""
    from memtape.agent import loop
    from memtape.agent.browser import Browser

    saved = (loop.step_items, loop.fit, loop.P.render_step, loop.record_prompt, Browser.observe)
    parts = ("items", "fit", "render", "record")
    loop.step_items, loop.fit = timings.wrap("items", saved[0]), timings.wrap("fit", saved[1])
    loop.P.render_step = timings.wrap("render", saved[2])  # type: ignore[assignment]

    def record_prompt(run: Any, prompt: str, *args: Any, **kwargs: Any) -> Any:
        if prompt != "step":
            return saved[3](run, prompt, *args, **kwargs)
        return timings.wrap("record", saved[3])(run, prompt, *args, **kwargs)

    loop.record_prompt = record_prompt
    Browser.observe = timings.wrap("observe", saved[4])  # type: ignore[method-assign]
    try:
        yield
    finally:
        loop.step_items, loop.fit, loop.P.render_step = saved[0], saved[1], saved[2]
        loop.record_prompt, Browser.observe = saved[3], saved[4]  # type: ignore[method-assign]
    n = min(len(timings.ms.get(p, [])) for p in parts)
    timings.ms["context"] = [sum(timings.ms[p][i] for p in parts) for i in range(n)]  # every pass so far


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def run(quick: bool = False, case_ids: tuple[str, ...] | None = None) -> list[Figure]:
    """Run the suite cold then warm in real Chromium and return the figures."""
    from memtape.agent.browser import Browser
    from memtape.agent.loop import RunConfig, RunResult, run_task
    from memtape.agent.policy import make_policy
    from memtape.agent.sites import SitesServer, load_cases
    from memtape.ledger.store import SqliteStore
    from memtape.projections.recording.memory import RecordingMemory

    wanted = case_ids or (QUICK_CASES if quick else None)
    cases = [c for c in load_cases() if wanted is None or c["id"] in wanted]
    passes: dict[str, list[RunResult]] = {}
    timings = Timings()
    with (
        tempfile.TemporaryDirectory(prefix="memtape-bench-") as d,
        SitesServer() as sites,
        Browser(proxy=sites.proxy) as browser,
        SqliteStore.open(Path(d) / "ledger.db") as store,
    ):
        for rep, label in enumerate(("cold", "warm"), 1):
            memory = RecordingMemory(store, Path(d) / "projections.db")
            with instrumented(timings):
                passes[label] = [
                    run_task(
                        browser,
                        memory,
                        make_policy("scripted"),
                        goal=c["goal"],
                        start_url=c["start_url"],
                        case_id=c["id"],
                        success_check=c.get("success"),
                        config=RunConfig(rep=rep),
                    )
                    for c in cases
                ]
    figs: list[Figure] = []
    for label, rs in passes.items():
        step_ms = sum(r.step_ms for r in rs)
        mem_ms = sum(r.step_memory_ms for r in rs)
        steps = sum(r.outcome.turns for r in rs)
        figs.append(
            Figure(
                BENCH,
                f"memory inside agent steps, {label} ({len(rs)} runs, {steps} steps)",
                mem_ms,
                "ms",
                "whole step time (observe, decide, act, verify)",
                step_ms,
                aim=50.0,
                higher_is_better=False,
                note=f"{100 * mem_ms / step_ms:.2f}% of step time" if step_ms else "",
            )
        )
    ctx, obs = timings.ms.get("context", []), timings.ms.get("observe", [])
    if ctx and obs:
        for q, name in ((0.5, "p50"), (0.99, "p99")):
            figs.append(
                Figure(
                    BENCH,
                    f"context build per policy step, {name} ({len(ctx)} prompts)",
                    pct(ctx, q),
                    "ms",
                    f"observing the page, {name}",
                    pct(obs, q),
                    higher_is_better=False,
                )
            )
        figs[-2] = Figure(
            **{
                **figs[-2].__dict__,
                "note": "median ms of items / fit / render / record: "
                + " / ".join(f"{statistics.median(timings.ms[p]):.3f}" for p in ("items", "fit", "render", "record")),
            }
        )
    return figs


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK_CASES)}")
    ap.add_argument("--case", action="append", default=None, help="only these case ids (repeatable)")
    ap.add_argument("--json", action="store_true", help="print one JSON object (the figures) instead of the table")
    args = ap.parse_args(argv)
    figs = run(quick=args.quick, case_ids=tuple(args.case) if args.case else None)
    if args.json:
        print_json(figs)
        return
    show("memory inside a real agent step (Chromium, bundled sites)", figs)


if __name__ == "__main__":
    main()
