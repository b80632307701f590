"""What the bundled agent hands its `Run`: its own records, as the public API's calls.

The loop keeps a step as a `StepRecord`, a prompt as budgeted `BudgetItem`s and
the run's end as a `RunCompleted`; an external agent passes the same facts as
arguments. These functions only translate, so the bundled agent records exactly
what any client of `memtape.projections.recording` records (its `run.Run`).

Example:
    run = memory.start_run(goal=goal, start_url=url, agent="scripted")
    record_prompt(run, "step", 2500, fitted.kept, fitted.trimmed, step=1, domain="shop.test")
    record_step(run, rec, obs.env(), after.env(), decision.think, run.take_step_ms())
    finish_run(run, outcome)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memtape.ledger.events import EnvState, RunCompleted
from memtape.projections.budget import BudgetItem, token_counter
from memtape.projections.recording.run import Run
from memtape.projections.recording.values import Learned, StepRecord, element_text


def context_item(item: BudgetItem) -> dict[str, Any]:
    """A prompt item as `Run.record_context` takes it, with the tokens the budget counted it at."""
    return {
        "source": item.source,
        "priority": item.priority,
        "text": item.text,
        "content_type": item.content_type,
        "confidence": item.confidence,
        "event_ids": item.event_ids,
        "truncated": item.truncated,
        "tokens": item.tokens,
    }


def record_prompt(
    run: Run,
    prompt: str,
    budget: int,
    kept: Sequence[BudgetItem],
    trimmed: Sequence[BudgetItem],
    step: int,
    domain: str | None,
) -> None:
    """One prompt as the budget fitted it (`context_built`): what it kept and what it trimmed."""
    run.record_context(
        [context_item(i) for i in kept],
        step,
        budget,
        trimmed=[context_item(i) for i in trimmed],
        prompt=prompt,
        domain=domain or "",
        counted_by=token_counter(),
    )


def record_step(
    run: Run, rec: StepRecord, env_before: EnvState, env_after: EnvState, think: str, memory_ms: float
) -> str:
    """One executed step (`step_recorded`); its event id is also set on `rec`."""
    rec.event_id = run.record_step(
        rec.step,
        rec.command,
        element_text(rec.role, rec.name),
        rec.url_before,
        rec.ok,
        rec.error,
        args=rec.args,
        url_after=rec.url_after,
        selector=rec.selector,
        sensitive=rec.sensitive,
        duration_ms=rec.duration_ms,
        think=think,
        page_before=env_before.model_dump(),
        page_after=env_after.model_dump(),
        decided_by=rec.decided_by,
        in_shadow=rec.in_shadow,
        memory_ms=memory_ms,
    )
    return rec.event_id


def finish_run(run: Run, outcome: RunCompleted, learn: bool = True) -> Learned:
    """The run's end as the loop measured it; `learn=False` (an exploration) learns nothing from the steps."""
    return run.finish(
        outcome.success,
        outcome.summary,
        reason=outcome.reason,
        result=outcome.result,
        final_url=outcome.final_url,
        turns=outcome.turns,
        tokens_in=outcome.tokens_in,
        tokens_out=outcome.tokens_out,
        duration_ms=outcome.duration_ms,
        policy_decisions=outcome.policy_decisions,
        replayed_steps=outcome.replayed_steps,
        learn=learn,
    )
