"""The seq a step's memory is read at: one rule that audits (`audit.audit_run`) and the analytics
mirror's `memory_at_step` view both ask. Its own module so that the mirror, which every
`memtape analytics ...` opens, does not load the audit and with it the whole `MemoryView`."""

from __future__ import annotations

from collections.abc import Iterable

#: the events that make up a step, as far as its memory is concerned
STEP_TYPES = (
    "context_built",
    "step_recorded",
    "step_graded",
    "error_recall",
    "domain_recall",
    "trajectory_recalled",
    "tier1_loaded",
    "memory_searched",
)


def as_of_seq(step_events: Iterable[tuple[int, str]]) -> int:
    """The seq a step's memory is read at: just before its first `step_recorded`; for a step without
    an action, its last prompt (`context_built`); else its last event. `step_events`: the (seq, type)
    of the step's events of STEP_TYPES in log order."""
    events = list(step_events)
    action = next((seq for seq, t in events if t == "step_recorded"), None)
    if action is not None:
        return action - 1
    prompts = [seq for seq, t in events if t == "context_built"]
    return prompts[-1] if prompts else events[-1][0]
