"""Hand-built ledgers for the analytics tests: a known sequence of events, a known answer.

`learning_ledger` plays a small agent through `MemoryWriter` (so the decisions
in the log are the real policy step's): five runs of the same goal on five
sites; each run fails a fill with "intercepts pointer events" (a failure no seed lesson
carries as its own dedup key), recalls what
memory has, recovers with Escape, learns the failure→recovery lesson (a dedup
from run 2 on), observes a fact and a selector, and completes. Run 0 has
memory off. The lesson reaches use_count 5 on 3 domains in run 3
(recall + dedup) and is promoted there under the default policy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import orjson

from memtape.analytics.mirror import MIRRORED, connect
from memtape.ledger.envelope import event
from memtape.ledger.events import (
    Action,
    ContextBuilt,
    ContextItem,
    DomainRecall,
    EnvState,
    ErrorRecall,
    FactObserved,
    LessonRecorded,
    RunCompleted,
    RunStarted,
    SelectorSucceeded,
    SessionRecorded,
    StepRecorded,
    SubjectForgotten,
    Tier1Loaded,
    TrajectoryRecalled,
    TrajectoryRecorded,
    TrajectoryStep,
)
from memtape.ledger.store import Store
from memtape.projections.folds import FOLDS, INDEXED
from memtape.projections.folds.state import MemoryState, encode, fold

DOMAINS = ("a.test", "b.test", "c.test", "d.test", "e.test")
LESSON = "When fill fails with 'intercepts pointer events', press Escape first."


@dataclass
class Built:
    """What the builder did, for the tests' expectations."""

    runs: list[str] = field(default_factory=list)
    #: run_id -> step -> seq of that step's step_recorded
    step_seq: dict[str, dict[int, int]] = field(default_factory=dict)
    #: run_id -> seq of its error_recall / lesson_recorded
    recall_seq: dict[str, int] = field(default_factory=dict)
    record_seq: dict[str, int] = field(default_factory=dict)
    lesson_id: str = ""
    promoted_seq: int | None = None
    first_record_run: str = ""


def learning_ledger(
    store: Store, clock: Any, runs: int = 5, forget_domain: str | None = None, memory_off_first: bool = True
) -> Built:
    from memtape.projections.folds.lessons import lesson_id_for
    from memtape.projections.view import MemoryView
    from memtape.projections.writer import MemoryWriter

    writer = MemoryWriter(store)
    built = Built(lesson_id=lesson_id_for("fill", "intercepts pointer events", None, LESSON))
    before = sum(1 for _ in store.read(types=["run_started"]))  # a second call on one store starts new runs
    for i in range(runs):
        dom = DOMAINS[i % len(DOMAINS)]
        rid = f"run{before + i}"
        built.runs.append(rid)
        memory = not (memory_off_first and i == 0)
        clock.advance(timedelta(hours=1))
        if memory:
            writer.open_for_run(rid, clock.now.isoformat())
        view = MemoryView.from_events(store.read())
        tier1 = view.tier1()
        writer.append(
            [
                event(
                    RunStarted(
                        goal="search for shoes",
                        case_id="shoes",
                        memory_enabled=memory,
                        session_id="s1",
                        start_url=f"http://{dom}/",
                    ),
                    run_id=rid,
                    domain=dom,
                )
            ]
        )
        if memory:
            writer.append(
                [
                    event(
                        Tier1Loaded(
                            count=len(tier1), lessons=[l.lesson for l in tier1], lesson_ids=[l.lesson_id for l in tier1]
                        ),
                        run_id=rid,
                        domain=dom,
                    ),
                    event(
                        ContextBuilt(
                            prompt="system",
                            budget=400,
                            total_tokens=sum(len(l.lesson) // 4 for l in tier1),
                            items=[
                                ContextItem(
                                    source="tier1",
                                    priority=50,
                                    tokens=len(l.lesson) // 4,
                                    text=l.lesson,
                                    event_ids=list(l.event_ids[:1]),
                                )
                                for l in tier1
                            ],
                        ),
                        run_id=rid,
                        step=0,
                        domain=dom,
                    ),
                    event(DomainRecall(matched=0), run_id=rid, step=1, domain=dom),
                ]
            )
        rec = writer.append(
            [
                event(
                    StepRecorded(
                        env_before=EnvState(url=f"http://{dom}/"),
                        env_after=EnvState(url=f"http://{dom}/"),
                        action=Action(command="fill", args={"ref": "e1"}),
                        target_text="Search",
                        ok=False,
                        error="Element intercepts pointer events",
                    ),
                    run_id=rid,
                    step=1,
                    domain=dom,
                )
            ]
        )
        built.step_seq.setdefault(rid, {})[1] = rec[0].seq
        if memory:
            view = MemoryView.from_events(store.read())
            hits = view.recall_on_error("fill", "Element intercepts pointer events", dom)
            rec = writer.append(
                [
                    event(
                        ErrorRecall(
                            command="fill",
                            error_snippet="intercepts pointer events",
                            matched=len(hits),
                            lessons=[l.lesson for l in hits],
                            lesson_ids=[l.lesson_id for l in hits],
                        ),
                        run_id=rid,
                        step=1,
                        domain=dom,
                    )
                ]
            )
            built.recall_seq[rid] = rec[0].seq
            if memory and i >= 1:
                match = view.match_trajectory("search for shoes", dom, clock.now.isoformat())
                if match is not None:
                    writer.append(
                        [
                            event(
                                TrajectoryRecalled(
                                    goal="search for shoes",
                                    trajectory_id=match.trajectory.trajectory_id,
                                    matched_goal=match.trajectory.goal,
                                    similarity=match.similarity,
                                    score=match.score,
                                    steps=len(match.trajectory.steps),
                                ),
                                run_id=rid,
                                step=2,
                                domain=dom,
                            )
                        ]
                    )
            items = [
                ContextItem(
                    source="error_recall", priority=40, tokens=12, text=l.lesson, event_ids=list(l.event_ids[:1])
                )
                for l in hits
            ]
            writer.append(
                [
                    event(
                        ContextBuilt(
                            prompt="step",
                            budget=60,
                            total_tokens=sum(x.tokens for x in items),
                            items=items,
                            trimmed=[ContextItem(source="selectors", priority=25, tokens=80, text="(selector cache)")],
                        ),
                        run_id=rid,
                        step=2,
                        domain=dom,
                    )
                ]
            )
        rec = writer.append(
            [
                event(
                    StepRecorded(
                        env_before=EnvState(url=f"http://{dom}/"),
                        env_after=EnvState(url=f"http://{dom}/results"),
                        action=Action(command="press", args={"key": "Escape"}),
                        ok=True,
                    ),
                    run_id=rid,
                    step=2,
                    domain=dom,
                )
            ]
        )
        built.step_seq[rid][2] = rec[0].seq
        writer.append(
            [
                event(
                    FactObserved(fact_type="quirk", key="overlay", value="cookie overlay on load"),
                    run_id=rid,
                    domain=dom,
                ),
                event(
                    SelectorSucceeded(role="button", name="Search", selector="#search"), run_id=rid, step=2, domain=dom
                ),
            ]
        )
        rec = writer.append(
            [
                event(
                    LessonRecorded(
                        lesson_id=built.lesson_id,
                        lesson=LESSON,
                        category="error_recovery",
                        failed_command="fill",
                        error_pattern="intercepts pointer events",
                        learned_from=[rid],
                    ),
                    run_id=rid,
                    step=2,
                    domain=dom,
                )
            ]
        )
        built.record_seq[rid] = rec[0].seq
        if not built.first_record_run:
            built.first_record_run = rid
        for r in rec:
            if r.type == "lesson_promoted" and built.promoted_seq is None:
                built.promoted_seq = r.seq
        writer.append(
            [
                event(
                    TrajectoryRecorded(
                        trajectory_id=f"traj_{rid}",
                        goal="search for shoes",
                        origin=f"http://{dom}/",
                        steps=[TrajectoryStep(command="press", args={"key": "Escape"}, verified=True)],
                        duration_ms=1000 + 100 * i,
                        turns=2,
                    ),
                    run_id=rid,
                    domain=dom,
                ),
                event(
                    RunCompleted(
                        success=i % 4 != 1,
                        turns=4 - (1 if memory and i > 1 else 0),
                        tokens_in=1000 - 50 * i,
                        tokens_out=100,
                        duration_ms=5000 - 200 * i,
                        final_url=f"http://{dom}/results",
                    ),
                    run_id=rid,
                    domain=dom,
                ),
                event(
                    SessionRecorded(
                        session_id="s1",
                        goal="search for shoes",
                        success=True,
                        final_url=f"http://{dom}/results",
                        timestamp=clock.now.isoformat(),
                        turns_used=2,
                    ),
                    run_id=rid,
                    domain=dom,
                ),
            ]
        )
    if forget_domain is not None:
        writer.append([event(SubjectForgotten(subject_kind="domain", subject=forget_domain))])
    return built


def hand_ledger(store: Store) -> dict[int, str]:
    """A fixed sequence of 21 raw events (no policy step); returns seq -> event id.

    seq  1 lesson_seeded seed1 (fill / too many arguments)
         2-10 run r1 on x.test: fill fails (3), error recall of seed1 (4), click ok (5), lesson L1
              recorded at step 2 (6), fact load=3s (7), selector #buy (8), trajectory T1 (9), completed (10)
        11-21 run r2 (resume of r1): tier1 loaded (12), system prompt (13, step 0), domain recall of L1 (14),
              trajectory T1 offered (15), step-1 prompt with L1, T1 and the fact, selectors trimmed (16),
              click ok (17), fact load=3s confirmed (18), fill fails (19), error recall of seed1 (20), completed (21)
    """
    from memtape.ledger.events import LessonSeeded
    from memtape.ledger.events import StepRecorded as SR

    ids = {i: f"ev{i:02d}" for i in range(1, 22)}
    x = "x.test"
    seed = "If fill fails, click then type."
    events = [
        event(
            LessonSeeded(
                lesson_id="seed1",
                lesson=seed,
                category="tool_fallback",
                failed_command="fill",
                error_pattern="too many arguments",
            ),
            id=ids[1],
        ),
        event(RunStarted(goal="buy milk", start_url="http://x.test/"), run_id="r1", domain=x, id=ids[2]),
        event(
            SR(
                action=Action(command="fill", args={"ref": "e1", "value": "milk"}),
                ok=False,
                error="too many arguments: expected 2",
            ),
            run_id="r1",
            step=1,
            domain=x,
            id=ids[3],
        ),
        event(
            ErrorRecall(
                command="fill", error_snippet="too many arguments", matched=1, lessons=[seed], lesson_ids=["seed1"]
            ),
            run_id="r1",
            step=1,
            domain=x,
            id=ids[4],
        ),
        event(
            SR(action=Action(command="click", args={"ref": "e2"}), ok=True), run_id="r1", step=2, domain=x, id=ids[5]
        ),
        event(
            LessonRecorded(lesson_id="L1", lesson="Accept cookies first", category="site_specific", scope_domain=x),
            run_id="r1",
            step=2,
            domain=x,
            id=ids[6],
        ),
        event(FactObserved(fact_type="timing", key="load", value="3s"), run_id="r1", domain=x, id=ids[7]),
        event(SelectorSucceeded(role="button", name="Buy", selector="#buy"), run_id="r1", step=2, domain=x, id=ids[8]),
        event(
            TrajectoryRecorded(
                trajectory_id="T1",
                goal="buy milk",
                origin="http://x.test/",
                steps=[TrajectoryStep(command="click", selector="#buy", verified=True)],
            ),
            run_id="r1",
            domain=x,
            id=ids[9],
        ),
        event(RunCompleted(success=True, turns=2), run_id="r1", domain=x, id=ids[10]),
        event(RunStarted(goal="buy milk", parent_run_id="r1", mode="resume"), run_id="r2", domain=x, id=ids[11]),
        event(Tier1Loaded(count=1, lessons=[seed], lesson_ids=["seed1"]), run_id="r2", domain=x, id=ids[12]),
        event(
            ContextBuilt(
                prompt="system",
                budget=100,
                total_tokens=8,
                items=[ContextItem(source="tier1", priority=50, tokens=8, text=seed, event_ids=[ids[1]])],
            ),
            run_id="r2",
            step=0,
            domain=x,
            id=ids[13],
        ),
        event(
            DomainRecall(matched=1, lessons=["Accept cookies first"], lesson_ids=["L1"]),
            run_id="r2",
            step=1,
            domain=x,
            id=ids[14],
        ),
        event(
            TrajectoryRecalled(
                goal="buy milk", trajectory_id="T1", matched_goal="buy milk", similarity=1.0, score=1.0, steps=1
            ),
            run_id="r2",
            step=1,
            domain=x,
            id=ids[15],
        ),
        event(
            ContextBuilt(
                prompt="step",
                budget=30,
                total_tokens=24,
                items=[
                    ContextItem(
                        source="domain_recall", priority=40, tokens=6, text="Accept cookies first", event_ids=[ids[6]]
                    ),
                    ContextItem(source="trajectory", priority=40, tokens=10, text="1. click #buy", event_ids=[ids[9]]),
                    ContextItem(source="knowledge", priority=30, tokens=8, text="timing load: 3s", event_ids=[ids[7]]),
                ],
                trimmed=[
                    ContextItem(
                        source="selectors", priority=25, tokens=12, text="button Buy -> #buy", event_ids=[ids[8]]
                    )
                ],
            ),
            run_id="r2",
            step=1,
            domain=x,
            id=ids[16],
        ),
        event(
            SR(action=Action(command="click", args={"ref": "e2"}), ok=True), run_id="r2", step=1, domain=x, id=ids[17]
        ),
        event(FactObserved(fact_type="timing", key="load", value="3s"), run_id="r2", domain=x, id=ids[18]),
        event(
            SR(action=Action(command="fill", args={"ref": "e1"}), ok=False, error="too many arguments"),
            run_id="r2",
            step=2,
            domain=x,
            id=ids[19],
        ),
        event(
            ErrorRecall(
                command="fill", error_snippet="too many arguments", matched=1, lessons=[seed], lesson_ids=["seed1"]
            ),
            run_id="r2",
            step=2,
            domain=x,
            id=ids[20],
        ),
        event(RunCompleted(success=True, turns=2), run_id="r2", domain=x, id=ids[21]),
    ]
    recorded = store.append(events)
    assert [r.seq for r in recorded] == list(range(1, 22))
    return ids


# ---- memory at each step, two ways ------------------------------------------------------


def _leaves(name: str, state: Any) -> dict[tuple[str, str | None, str | None], Any]:
    """A projection's items as (field, item, part) -> JSON, from its canonical encoding."""
    raw = orjson.loads(encode(state))
    out: dict[tuple[str, str | None, str | None], Any] = {}
    for attr, depth in INDEXED[name].LAYOUT.items():
        if depth == 0:
            out[(attr, None, None)] = raw[attr]
        elif depth == 1:
            out.update({(attr, k, None): v for k, v in raw[attr].items()})
        else:
            out.update({(attr, k1, k2): v for k1, inner in raw[attr].items() for k2, v in inner.items()})
    return out


def memory_at_step_equals_the_fold(store: Store, step_seqs: dict[str, dict[int, int]]) -> int:
    """For every step: memory_at_step holds exactly the items of every mirrored projection folded up to
    the seq before the step; returns how many steps were compared."""
    con = connect(store)
    events = list(store.read())
    compared = 0
    try:
        for run_id, steps in step_seqs.items():
            for step, seq in steps.items():
                rows = con.execute(
                    "SELECT as_of_seq, projection, field, item, part, value FROM memory_at_step "
                    "WHERE run_id = ? AND step = ?",
                    (run_id, step),
                ).fetchall()
                state = fold(MemoryState.empty(), [e for e in events if e.seq < seq])
                for name in MIRRORED:
                    # a one-value field still at its empty state's value has no version yet
                    got = {k: v for k, v in _leaves(name, FOLDS[name].empty()).items() if k[1] is None}
                    got.update({(f, i, p): orjson.loads(v) for _, proj, f, i, p, v in rows if proj == name})
                    assert got == _leaves(name, getattr(state, name)), (run_id, step, name)
                assert {r[0] for r in rows} <= {seq - 1}
                compared += 1
    finally:
        con.close()
    return compared


def names(reason: str, item: dict[str, Any]) -> bool:
    """Whether a decision's reason names a prompt item: its source as a word, or one of its event ids
    (what the scripted policy writes; `memtape credit`, not this, decides what memory changed)."""
    source = str(item.get("source") or "")
    if source and re.search(rf"(?<![\w-]){re.escape(source)}(?![\w-])", reason):
        return True
    return any(str(i) in reason for i in item.get("event_ids") or ())
