"""Builders shared by the projections tests: events with chosen times and domains."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from memtape.ledger.clock import format_ts, parse_ts
from memtape.ledger.envelope import NewEvent
from memtape.ledger.events import (
    ErrorRecall,
    FactObserved,
    LessonRecorded,
    RunCompleted,
    RunStarted,
    SessionRecorded,
    StepGraded,
    StepRecorded,
    TrajectoryRecorded,
)

T0 = "2026-01-01T00:00:00.000000Z"
CLICK_TEXT = "When click fails with 'intercepts pointer events', try press(key='Escape') first."


def at(days: float = 0, base: str = T0, **delta: float) -> str:
    """An ISO time `days` (plus other timedelta units) after `base`."""
    return format_ts(parse_ts(base) + timedelta(days=days, **delta))


def lesson(
    text: str = CLICK_TEXT,
    domain: str | None = "google.com",
    *,
    fc: str | None = "click",
    ep: str | None = "intercepts pointer events",
    category: str = "error_recovery",
    scope: str | None = None,
    when: str | None = None,
    run_id: str | None = None,
    **extra: Any,
) -> NewEvent:
    return NewEvent(
        LessonRecorded(
            lesson_id="",
            lesson=text,
            category=category,
            failed_command=fc,  # type: ignore[arg-type]
            error_pattern=ep,
            scope_domain=scope,
            **extra,
        ),
        domain=domain,
        occurred_at=when,
        run_id=run_id,
    )


def recall(
    lesson_ids: list[str], domain: str | None, command: str = "click", error: str = "boom", when: str | None = None
) -> NewEvent:
    return NewEvent(
        ErrorRecall(command=command, error_snippet=error, matched=len(lesson_ids), lesson_ids=lesson_ids),
        domain=domain,
        occurred_at=when,
    )


def fact(
    value: str,
    domain: str = "example.com",
    key: str = "modal",
    fact_type: str = "quirk",
    confidence: float | None = None,
    when: str | None = None,
) -> NewEvent:
    return NewEvent(
        FactObserved(fact_type=fact_type, key=key, value=value, confidence=confidence),  # type: ignore[arg-type]
        domain=domain,
        occurred_at=when,
    )


def session(n: int, domain: str = "example.com", success: bool = True) -> NewEvent:
    return NewEvent(
        SessionRecorded(
            session_id=f"s{n}",
            goal=f"goal {n}",
            outcome=f"did {n}",
            success=success,
            final_url=f"https://{domain}/{n}",
            timestamp=at(n),
        ),
        domain=domain,
        run_id=f"run{n}",
    )


def trajectory(
    tid: str,
    goal: str,
    domain: str = "example.com",
    when: str | None = None,
    duration_ms: float = 1000,
    verified: int = 1,
    steps: int = 2,
    run_id: str | None = None,
) -> NewEvent:
    return NewEvent(
        TrajectoryRecorded(
            trajectory_id=tid,
            goal=goal,
            origin=f"https://{domain}/",
            steps=[
                {"command": "click", "args": {"ref": f"e{i}"}, "url": f"https://{domain}/", "verified": i < verified}
                for i in range(steps)
            ],
            duration_ms=duration_ms,
            turns=steps,
        ),
        domain=domain,
        occurred_at=when,
        run_id=run_id,
    )


def run_started(
    run_id: str,
    goal: str = "do it",
    domain: str = "example.com",
    session_id: str | None = None,
    when: str | None = None,
    **extra: Any,
) -> NewEvent:
    return NewEvent(
        RunStarted(goal=goal, session_id=session_id, start_url=f"https://{domain}/", **extra),
        run_id=run_id,
        domain=domain,
        occurred_at=when,
    )


def run_completed(run_id: str, success: bool = True, domain: str = "example.com", when: str | None = None) -> NewEvent:
    return NewEvent(
        RunCompleted(success=success, summary="done", final_url=f"https://{domain}/end", turns=3),
        run_id=run_id,
        domain=domain,
        occurred_at=when,
    )


def step(
    run_id: str,
    n: int,
    command: str = "click",
    args: dict[str, Any] | None = None,
    ok: bool = True,
    url: str = "https://example.com/",
    after: str | None = None,
    elements: list[str] | None = None,
    intent: str = "",
    domain: str = "example.com",
    think: str | None = None,
    target_text: str | None = None,
    embedding: list[float] | None = None,
    model: str | None = None,
) -> NewEvent:
    return NewEvent(
        StepRecorded(
            env_before={"url": url, "elements": elements or []},
            env_after={"url": after or url},
            internal_state=intent or None,
            think=think,
            action={"command": command, "args": args or {}},
            ok=ok,
            target_text=target_text,
            error=None if ok else "failed",
            internal_state_embedding=embedding or [],
            embedding_model=model,
        ),
        run_id=run_id,
        step=n,
        domain=domain,
    )


def graded(run_id: str, n: int, outcome: str, reason: str = "because", correction: str | None = None) -> NewEvent:
    return NewEvent(StepGraded(outcome=outcome, reason=reason, correction=correction), run_id=run_id, step=n)  # type: ignore[arg-type]
