"""The web viewer's pages (`memtape serve`, /ui/) beside the same reads through the Python API,
at 100,000 events (issue 35's aims: each page within 300 ms at 100,000 events, 1 s at 1,000,000).

For each page the first answer at the ledger's head (in a running `memtape serve`, right after
a run was started and finished through its API: nothing the viewer kept applies) and the answer
again (what paging, filters and going back cost: the viewer keeps each read while the head
stays), beside the reads the page makes through `memtape.open` in this process, first after a
run was started and finished the same way, and again. The bench appends those runs to the memory
it measures.

| page | the reads it makes |
|---|---|
| `/ui/` | `count("runs")`, `state("runs", limit=50)`, `state("lessons")`, `state("tier1")` |
| `/ui/runs/RUN` | `audit(RUN)`, `state(KIND, run=RUN)` of lessons, facts, trajectories, patterns |
| `/ui/runs/RUN/steps/N` | `audit(RUN, step=N)`, `audit(RUN)` |
| `/ui/items/LESSON` | `explain(LESSON)` |
| `/ui/diff?from=S&to=RUN` | `diff(S, RUN)` (S: the seq before the run started) |
| `/ui/search?q=WORD` | `search(WORD, limit=100)` (a recall: it logs `memory_searched`, so each search moves the head) |

Usage::

    python bench/viewer.py                          # 100,000 events (built in a temp dir)
    python bench/viewer.py --memory-dir /tmp/v100k  # built there once, reused
    python bench/viewer.py --quick --json           # 5,000 events, for the suite
"""

from __future__ import annotations

import os
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

import memtape
from bench import Figure, memory_command, ms, over_memory, served, show
from devtools.synthetic import ensure_memory
from memtape.viewer.gate import COOKIE, session_value
from memtape.viewer.pages import PAGE_SIZE, TAUGHT

BENCH = "viewer"
AIM_MS = {100_000: 300.0, 1_000_000: 1000.0}


def _pages(mem: Any) -> dict[str, tuple[str, Callable[[Any], Any]]]:
    """page name -> (its path, the reads it makes through the API), for a run with steps and the
    most used lesson of the memory."""
    runs = [r for r in mem.state("runs") if r.turn_count]
    run = runs[len(runs) // 2].run_id
    audit = mem.audit(run)
    step = audit["steps"][len(audit["steps"]) // 2]["step"]
    before = max(int(audit["run"]["started_seq"]) - 1, 0)
    lesson = max(mem.state("lessons"), key=lambda l: l.use_count).lesson_id
    word = "click"
    return {
        "runs": (
            "/ui/",
            lambda m: [m.count("runs"), m.state("runs", limit=PAGE_SIZE), m.state("lessons"), m.state("tier1")],
        ),
        "run": (f"/ui/runs/{run}", lambda m: [m.audit(run), *(m.state(k, run=run) for k in TAUGHT)]),
        "step": (f"/ui/runs/{run}/steps/{step}", lambda m: [m.audit(run, step=step), m.audit(run)]),
        "item": (f"/ui/items/{lesson}", lambda m: m.explain(lesson)),
        "diff": (f"/ui/diff?from={before}&to={run}", lambda m: m.diff(before, run)),
        "search": (f"/ui/search?q={word}", lambda m: m.search(word, limit=100)),
    }


def _get(http: httpx.Client, path: str) -> None:
    answer = http.get(path)
    if answer.status_code != 200:
        raise RuntimeError(f"GET {path}: {answer.status_code} {answer.text[-300:]}")


def _move_head(api: httpx.Client) -> None:
    """Append to the ledger through the API (a run started and finished), so that the next page is
    the first at a new head: nothing the viewer kept applies to it."""
    started = api.post("/runs", json={"goal": "bench: move the head", "start_url": "https://bench.example/"})
    started.raise_for_status()
    api.post(f"/runs/{started.json()['run_id']}/finish", json={"success": False}).raise_for_status()


def measure(memory: Path, repeat: int, events: int) -> tuple[list[Figure], dict[str, Any]]:
    with memtape.open(memory) as mem:
        pages = _pages(mem)
    api_first: dict[str, list[float]] = {name: [] for name in pages}
    api_again: dict[str, list[float]] = {name: [] for name in pages}
    page_first: dict[str, list[float]] = {name: [] for name in pages}
    page_again: dict[str, list[float]] = {name: [] for name in pages}
    for _ in range(repeat):
        for name, (_path, reads) in pages.items():
            with memtape.open(memory) as mem:
                mem.start_run(goal="bench: move the head", start_url="https://bench.example/").finish(success=False)
                api_first[name].append(ms(lambda: reads(mem)))  # noqa: B023 - called at once
                api_again[name].append(ms(lambda: reads(mem)))  # noqa: B023
    for _ in range(repeat):
        with served(memory) as server:
            api = server.client()
            with (
                api,
                httpx.Client(base_url=server.base, cookies={COOKIE: session_value(server.token)}, timeout=120) as http,
            ):
                for path, _reads in pages.values():  # the server's imports and templates, as a running server has them
                    _get(http, path)
                for name, (path, _reads) in pages.items():
                    _move_head(api)
                    page_first[name].append(ms(lambda: _get(http, path)))  # noqa: B023 - called at once
                    page_again[name].append(statistics.median(ms(lambda: _get(http, path)) for _ in range(3)))  # noqa: B023
    aim = AIM_MS.get(events)
    figs: list[Figure] = []
    metrics: dict[str, Any] = {"pages": {}, "aim_ms": aim, "repeat": repeat, "load_average": os.getloadavg()[0]}
    for name, (path, _reads) in pages.items():
        first, again = statistics.median(page_first[name]), statistics.median(page_again[name])
        base_first, base_again = statistics.median(api_first[name]), statistics.median(api_again[name])
        verdict = "" if aim is None else f"aim < {aim:,.0f} ms: {'met' if first <= aim else 'NOT met'}"
        figs.append(
            Figure(
                BENCH,
                f"GET {name} page, first at this head",
                first,
                "ms",
                "its reads through memtape.open, first",
                base_first,
                higher_is_better=False,
                note=f"{path.split('?')[0][:40]} {verdict}".strip(),
            )
        )
        figs.append(
            Figure(
                BENCH,
                f"GET {name} page, again",
                again,
                "ms",
                "its reads through memtape.open, again",
                base_again,
                higher_is_better=False,
                note="" if aim is None else f"aim < {aim:,.0f} ms: {'met' if again <= aim else 'NOT met'}",
            )
        )
        metrics["pages"][name] = {"path": path, "first_ms": first, "again_ms": again, "api_first_ms": base_first}
    return figs, metrics


def measured(
    quick: bool = False, events: int | None = None, repeat: int | None = None, memory: Path | None = None
) -> tuple[list[Figure], dict[str, Any]]:
    """The figures and the metrics of `--json`, over `memory` (built there with `events` events
    when it holds no ledger), else over a new temporary one (100,000 events; 5,000 when quick)."""
    n = events or (5_000 if quick else 100_000)
    reps = repeat or (1 if quick else 3)
    return over_memory(memory, "memtape-viewer-", lambda m: ensure_memory(m, n), lambda m: measure(m, reps, n))


def run(quick: bool = False) -> list[Figure]:
    return measured(quick)[0]


def main(argv: list[str] | None = None) -> None:
    done = memory_command(
        argv,
        __doc__ or "",
        measured,
        events=100_000,
        quick_events=5_000,
        repeat=3,
        repeat_means="new server processes per page",
        memory_means="measure over DIR (its ledger built with --events events when it has none) and keep it",
    )
    if done is None:
        return
    figs, metrics = done
    show(
        f"the web viewer's pages at {metrics['events']:,} events (median of {metrics['repeat']}; "
        f"load average {metrics['load_average']:.1f})",
        figs,
    )


if __name__ == "__main__":
    main()
