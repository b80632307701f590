"""The write side: observations and the decisions they cause, in one transaction.

    writer = MemoryWriter(store)
    writer.open_for_run("run_1", "2026-03-01T10:00:00Z")    # seeds, pruning, expiry
    writer.append([event(LessonRecorded(...), run_id="run_1", domain="bing.com")])
"""
from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path

from memtape.ledger.clock import format_ts, normalize_ts
from memtape.ledger.errors import InvalidEvent
from memtape.ledger.events import NewEvent, RecordedEvent
from memtape.ledger.store import Store, Transaction
from memtape.projections.decisions import decide, lesson_id_taken, on_open
from memtape.projections.materialize import load_state
from memtape.projections.parameters import DEFAULT_POLICY, Policy
from memtape.projections.state import PROJECTIONS, MemoryState, dispatch, fold

#: the projections the policy step reads (the writer folds only these)
WRITER_PROJECTIONS = ("lessons", "knowledge", "trajectories", "patterns")


def touched(types: Collection[str]) -> set[str]:
    """The writer's projections that appending observations of `types` reads or folds: those that
    fold each type (`decide` reads only those, and its decisions fold into them), and all of them
    for a run start (the start-of-run policy reads lessons, facts and trajectories)."""
    if "run_started" in types:
        return set(WRITER_PROJECTIONS)
    table = dispatch(WRITER_PROJECTIONS)
    return {name for t in types for name, _ in table.get(t, ())}


class MemoryWriter:
    """Appends observations with their policy decisions atomically (one BEGIN IMMEDIATE)."""

    def __init__(self, store: Store, policy: Policy = DEFAULT_POLICY, projections_path: Path | None = None):
        self.store = store
        self.policy = policy
        self.projections_path = projections_path
        self.state: MemoryState | None = None

    def _warm(self, types: Collection[str]) -> None:
        """Start from projections.db (outside the write lock) instead of folding the whole log, and
        decode there, not inside the transaction, the projections that events of `types` touch."""
        if self.state is None and self.projections_path is not None:
            state = load_state(self.store, self.projections_path, self.policy)
            for name in PROJECTIONS:
                if name not in WRITER_PROJECTIONS:
                    setattr(state, name, None)
                    state.heads.pop(name, None)
            self.state = state
        if self.state is not None:
            for name in touched(types):
                getattr(self.state, name)  # a LazyState's projection is decoded on first access

    def _catch_up(self, tx: Transaction) -> MemoryState:
        if self.state is None:
            self.state = MemoryState.empty(WRITER_PROJECTIONS)
        fold(self.state, tx.read(self.state.head + 1), self.policy, WRITER_PROJECTIONS)
        return self.state

    def _write(self, tx: Transaction, state: MemoryState, events: Sequence[NewEvent]) -> list[RecordedEvent]:
        recorded = tx.append(events)
        fold(state, recorded, self.policy, WRITER_PROJECTIONS)
        return recorded

    def append(self, events: Sequence[NewEvent]) -> list[RecordedEvent]:
        """Append each observation followed by the decisions `decide` makes for it; a
        `run_started` with memory on is preceded by the start-of-run decisions (`opening`).

        A lesson whose caller-chosen id belongs to a lesson with another dedup key is
        refused (InvalidEvent, nothing written): it must never act on the other lesson."""
        out: list[RecordedEvent] = []
        if not events:
            return out
        for i, ev in enumerate(events):
            if not isinstance(ev, NewEvent):
                raise InvalidEvent(f"event {i + 1}: expected NewEvent, got {type(ev).__name__}")
        self._warm({ev.type for ev in events})
        try:
            with self.store.atomic() as tx:
                state = self._catch_up(tx)
                for obs in events:
                    taken = lesson_id_taken(state, obs)
                    if taken is not None:
                        raise InvalidEvent(taken)
                    out.extend(self._write(tx, state, [*self.opening(state, obs), obs, *decide(state, obs, self.policy)]))
        except BaseException:
            self.state = None  # folded events that were rolled back: start over next time
            raise
        return out

    def opening(self, state: MemoryState, obs: NewEvent) -> list[NewEvent]:
        """The start-of-run policy for a `run_started` with memory on (seeds on first use,
        pruning, trajectory expiry) at the time the run started: the library's `start_run` and
        `memtape append` both come through here."""
        if obs.type != "run_started" or not obs.run_id or not obs.payload.memory_enabled:  # type: ignore[attr-defined]
            return []
        started = normalize_ts(obs.occurred_at) if obs.occurred_at is not None else format_ts(self.store.clock())
        return on_open(state, obs.run_id, started, self.policy)

    def open_for_run(self, run_id: str, started_at: str) -> list[RecordedEvent]:
        """Memory opened for a run: seed lessons on first use, prune stale lessons and facts,
        expire old trajectories — each as a decision event, in one transaction."""
        started = normalize_ts(started_at)
        self._warm({"run_started"})
        try:
            with self.store.atomic() as tx:
                state = self._catch_up(tx)
                decisions = on_open(state, run_id, started, self.policy)
                return self._write(tx, state, decisions) if decisions else []
        except BaseException:
            self.state = None
            raise
