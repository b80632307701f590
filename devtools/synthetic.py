"""A synthetic agent log: runs, steps, grades, recalls, lessons with their decisions, facts,
selectors, trajectories and sessions, shaped as the agent and the policy step write them.

Shared by bench/ (the projections, DuckDB and verified-read benchmarks measure on it) and
tests/ (the kill test folds it): neither imports the other, so the generator lives here.

Usage::

    store = build_ledger(Path("ledger.db"), 200_000)     # a SqliteStore holding that many events
"""

from __future__ import annotations

import random
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from memtape.ledger.clock import SteppingClock, format_ts, parse_ts
from memtape.ledger.envelope import NewEvent
from memtape.ledger.events import (
    Action,
    ContextBuilt,
    DomainRecall,
    EnvState,
    ErrorRecall,
    FactContradicted,
    FactObserved,
    LessonDeduplicated,
    LessonPromoted,
    LessonRecorded,
    RunCompleted,
    RunStarted,
    SelectorSucceeded,
    SessionRecorded,
    StepGraded,
    StepRecorded,
    TrajectoryRecorded,
    TrajectoryStep,
)
from memtape.ledger.location import LEDGER_FILE, PROJECTIONS_FILE
from memtape.ledger.store import SqliteStore
from memtape.projections.cache.materialize import caught_up
from memtape.projections.folds.lessons import lesson_id_for

COMMANDS = ["click", "fill", "type", "press", "goto", "scroll", "hover", "select"]
ERRORS = [
    "timeout exceeded",
    "intercepts pointer events",
    "too many arguments",
    "element not visible",
    "detached from dom",
    "strict mode violation",
    "navigation failed",
    "not editable",
]
VOCAB = [f"w{i}" for i in range(600)]


def c(cls: Any, **fields: Any) -> Any:
    """A payload without validation (the generator knows its fields are valid)."""
    return cls.model_construct(**fields)


# ---- synthetic agent log -------------------------------------------------------------


def synthetic_events(n: int, seed: int = 7) -> list[NewEvent]:
    """About `n` events shaped like agent runs (decisions included, as the policy step writes them)."""
    rng = random.Random(seed)
    domains = [f"site{i}.com" for i in range(200)]
    keys: dict[str, tuple[int, set[str]]] = {}
    facts: dict[tuple[str, str], str] = {}
    out: list[NewEvent] = []
    run = 0
    t0 = parse_ts("2026-01-01T00:00:00Z")
    while len(out) < n:
        run += 1
        rid = f"run{run}"
        dom = rng.choice(domains)
        host = f"www.{dom}"
        when = format_ts(t0.replace(microsecond=0) + timedelta(minutes=run))
        env = {"run_id": rid, "domain": host, "occurred_at": when}
        out.append(
            NewEvent(
                c(
                    RunStarted,
                    goal=" ".join(rng.sample(VOCAB, 4)),
                    session_id=f"s{run % 1000}",
                    start_url=f"https://{host}/",
                ),
                **env,
            )
        )
        out.append(NewEvent(c(DomainRecall, matched=0, lessons=[], lesson_ids=[]), **env))
        page = [f"button:b{rng.randrange(40)}" for _ in range(6)]
        for s in range(8):
            ok = rng.random() > 0.15
            cmd = rng.choice(COMMANDS)
            out.append(
                NewEvent(
                    c(
                        StepRecorded,
                        env_before=EnvState(url=f"https://{host}/p{s}", elements=page),
                        env_after=EnvState(url=f"https://{host}/p{s + 1}"),
                        internal_state="open the thing",
                        action=Action(command=cmd, args={"ref": f"e{rng.randrange(50)}"}),
                        ok=ok,
                        error=None if ok else rng.choice(ERRORS),
                    ),
                    step=s,
                    **env,
                )
            )
            if rng.random() < 0.5:
                out.append(
                    NewEvent(c(StepGraded, outcome="success" if ok else "failure", reason="graded"), step=s, **env)
                )
            if rng.random() < 0.5:
                out.append(
                    NewEvent(
                        c(
                            SelectorSucceeded,
                            role="button",
                            name=f"b{rng.randrange(40)}",
                            selector=f"#b{rng.randrange(80)}",
                        ),
                        **env,
                    )
                )
            if s % 2 == 0:
                out.append(
                    NewEvent(c(ContextBuilt, budget=4000, total_tokens=900, items=[], trimmed=[]), step=s, **env)
                )
            if not ok:
                out.append(
                    NewEvent(
                        c(ErrorRecall, command=cmd, error_snippet="x", matched=0, lessons=[], lesson_ids=[]),
                        step=s,
                        **env,
                    )
                )
        # post-run learning: one lesson, deduplicated when its key was seen before
        cmd, err = rng.choice(COMMANDS), f"{rng.choice(ERRORS)} {rng.randrange(400)}"
        lid = lesson_id_for(cmd, err, None, "")
        text = f"When {cmd} fails with {err}, try another way."
        out.append(
            NewEvent(
                c(
                    LessonRecorded,
                    lesson_id=lid,
                    lesson=text,
                    category="error_recovery",
                    failed_command=cmd,
                    error_pattern=err,
                ),
                **env,
            )
        )
        if lid in keys:
            uses, doms = keys[lid]
            uses += 1
            doms.add(host)
            keys[lid] = (uses, doms)
            out.append(
                NewEvent(
                    c(
                        LessonDeduplicated,
                        lesson_id=lid,
                        lesson=text,
                        category="error_recovery",
                        failed_command=cmd,
                        error_pattern=err,
                        new_use_count=uses,
                    ),
                    **env,
                )
            )
            if uses == 5 and len(doms) >= 3:
                out.append(
                    NewEvent(
                        c(LessonPromoted, lesson_id=lid, lesson=text, use_count=uses, triggered_domains=sorted(doms)),
                        **env,
                    )
                )
        else:
            keys[lid] = (1, {host})
        for _ in range(2):
            key, value = f"k{rng.randrange(5)}", f"v{rng.randrange(3)}"
            out.append(NewEvent(c(FactObserved, fact_type="quirk", key=key, value=value), **env))
            old = facts.get((host, key))
            if old is not None and old != value:
                out.append(
                    NewEvent(
                        c(FactContradicted, fact_type="quirk", key=key, old_values=[old], new_value=value, factor=0.5),
                        **env,
                    )
                )
            facts[(host, key)] = value
        success = rng.random() < 0.6
        if success:
            out.append(
                NewEvent(
                    c(
                        TrajectoryRecorded,
                        trajectory_id=f"t{run}",
                        goal=" ".join(rng.sample(VOCAB, 4)),
                        steps=[
                            TrajectoryStep(
                                command="click", args={"ref": f"e{i}"}, url=f"https://{host}/", verified=True
                            )
                            for i in range(8)
                        ],
                        duration_ms=5000.0,
                        turns=8,
                    ),
                    **env,
                )
            )
        out.append(
            NewEvent(
                c(
                    SessionRecorded,
                    session_id=f"s{run % 1000}",
                    goal="g",
                    outcome="o",
                    success=success,
                    final_url=f"https://{host}/end",
                    timestamp=when,
                ),
                **env,
            )
        )
        out.append(
            NewEvent(c(RunCompleted, success=success, summary="done", final_url=f"https://{host}/end", turns=8), **env)
        )
    return out[:n]


def build_ledger(path: Path, n: int) -> SqliteStore:
    store = SqliteStore.open(path, clock=SteppingClock(step=timedelta(milliseconds=1)), synchronous="OFF")
    events = synthetic_events(n)
    for i in range(0, len(events), 5000):
        store.append(events[i : i + 5000])
    return store


def ensure_ledger(memory: Path, n: int) -> int:
    """The ledger in the memory directory `memory`, built with `n` synthetic events when it has none; its head."""
    path = memory / LEDGER_FILE
    if not path.exists():
        memory.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        store = build_ledger(path, n)
        print(f"ledger of {store.head():,} events built in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        store.close()
    with SqliteStore.open(path, create=False) as store:
        return int(store.head())


def ensure_memory(memory: Path, n: int) -> int:
    """The ledger in `memory` (built with `n` synthetic events when it has none) and projections.db
    current; its head."""
    head = ensure_ledger(memory, n)
    with SqliteStore.open(memory / LEDGER_FILE, create=False) as store:
        t0 = time.perf_counter()
        caught_up(store, memory / PROJECTIONS_FILE)
        print(f"projections.db of {head:,} events current in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return head
