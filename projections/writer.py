"""The write side: observations and the decisions they cause, in one transaction.

    writer = MemoryWriter(store)
    writer.open_for_run("run_1", "2026-03-01T10:00:00Z")    # seeds, pruning, expiry
    writer.append([event(LessonRecorded(...), run_id="run_1", domain="bing.com")])

A run has one truth, the ledger: each observation of a run is checked against the run as the
ledger holds it, read inside the same write transaction (`RunSoFar`), never against what one
process or handle remembers. So any number of processes may record into one run; a finished run
takes nothing more; a step number recorded again with the same content is not written twice
(the first event stands), and with other content is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from memtape.ledger.clock import format_ts, normalize_ts
from memtape.ledger.envelope import NewEvent, RecordedEvent
from memtape.ledger.errors import InvalidEvent, RunConflict
from memtape.ledger.store import Store, Transaction, redacted_envelope, serialize_payload
from memtape.projections.cache.materialize import load_state
from memtape.projections.decisions import decide, lesson_id_taken, on_open, pin_refused
from memtape.projections.folds.state import PROJECTIONS, MemoryState, dispatch, fold
from memtape.projections.parameters import DEFAULT_POLICY, Thresholds
from memtape.projections.seeds import seeds_in

#: the projections the policy step reads (the writer folds only these)
WRITER_PROJECTIONS = ("lessons", "knowledge", "trajectories", "patterns", "credit")
#: what a finished run still takes: logged reads of memory (a recall names the run it served) and
#: grades given after the fact; every other observation of the run is refused
AFTER_FINISH = frozenset(
    {"tier1_loaded", "domain_recall", "error_recall", "trajectory_recalled", "step_graded", "subject_forgotten"}
)
_TAKES = {"step_recorded": "steps", "lesson_recorded": "lessons"}


def run_finished(run_id: str, what: str = "events") -> RunConflict:
    """The refusal of a write into a finished run, naming the run."""
    if what == "run_completed":
        return RunConflict(f"run {run_id} is already finished")
    return RunConflict(f"run {run_id} is finished; it takes no more {_TAKES.get(what, what)}")


@dataclass
class RunSoFar:
    """One run as the ledger holds it: whether it started and finished, its steps (the first
    `step_recorded` of each step number) and its recalls on error still waiting for the run's
    outcome. Caught up inside a write transaction, from `seq` on."""

    run_id: str
    seq: int = 0
    started: bool = False
    finished: bool = False
    steps: dict[int, RecordedEvent] = field(default_factory=dict)
    #: its recalls on error whose lessons wait for the run's outcome to count (`pending_ids`)
    pending_recalls: list[RecordedEvent] = field(default_factory=list)

    def fold(self, events: Iterable[RecordedEvent]) -> None:
        for ev in events:
            if ev.run_id != self.run_id:
                continue
            if ev.type == "run_started":
                self.started = True
            elif ev.type == "run_completed":
                self.finished = True
            elif ev.type == "step_recorded" and ev.step is not None:
                self.steps.setdefault(ev.step, ev)
            elif ev.type == "error_recall" and ev.step is not None and ev.data.get("pending_ids"):
                self.pending_recalls.append(ev)
            self.seq = max(self.seq, ev.seq)

    def step_events(self) -> list[RecordedEvent]:
        """The run's steps in step-number order (the agent's own order, whichever process recorded them)."""
        return [self.steps[n] for n in sorted(self.steps)]


def touched(types: Collection[str] | None) -> set[str]:
    """The writer's projections that appending observations of `types` reads or folds: those that
    fold each type (`decide` reads only those, and its decisions fold into them), and all of them
    for a run start (the start-of-run policy reads lessons, facts and trajectories) or when the
    types are not known beforehand (None)."""
    if types is None or "run_started" in types:
        return set(WRITER_PROJECTIONS)
    table = dispatch(WRITER_PROJECTIONS)
    return {name for t in types for name, _ in table.get(t, ())}


class MemoryWriter:
    """Appends observations with their policy decisions atomically (one BEGIN IMMEDIATE)."""

    def __init__(
        self,
        store: Store,
        policy: Thresholds = DEFAULT_POLICY,
        projections_path: Path | None = None,
        *,
        check_runs: bool = True,
    ):
        """`check_runs=False` writes histories live recording can no longer make (a run's events
        after its end, a step number twice: old logs, property tests of the folds over any log)."""
        self.check_runs = check_runs
        self.store = store
        self.policy = policy
        self.projections_path = projections_path
        self.state: MemoryState | None = None
        #: the runs this writer was asked about, as far as it has read them (caught up in each transaction)
        self.runs: dict[str, RunSoFar] = {}
        self._tx: Transaction | None = None

    def _warm(self, types: Collection[str] | None) -> None:
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
        for run in {ev.run_id for ev in recorded if ev.run_id is not None} & set(self.runs):
            self.runs[run].fold(recorded)
        return recorded

    def run(self, tx: Transaction, run_id: str) -> RunSoFar:
        """Run `run_id` as the ledger holds it inside `tx` (what other processes appended since this
        writer last looked is read now, under the write lock)."""
        run = self.runs.get(run_id)
        if run is None:
            run = self.runs[run_id] = RunSoFar(run_id)
        run.fold(tx.select(run.seq, run_id=run_id))
        return run

    def _repeated(self, tx: Transaction, obs: NewEvent, finished_before: dict[str, bool]) -> RecordedEvent | None:
        """The event already standing for observation `obs` (the same step of a run recorded again
        with the same content: a retry), None when `obs` is new. Refuses what a finished run no longer
        takes: a second run_completed, or any observation but a read or a grade once the run finished
        in an earlier write (`finished_before`: as each run stood when this batch began; a batch's
        own order is its writer's); and a step number recorded again with other content."""
        if obs.run_id is None:
            return None
        run = self.run(tx, obs.run_id)
        finished = finished_before.setdefault(obs.run_id, run.finished)
        if obs.type == "run_started":
            if run.started:
                raise RunConflict(f"run {obs.run_id} already exists")
            return None
        if (run.finished and obs.type == "run_completed") or (finished and obs.type not in AFTER_FINISH):
            raise run_finished(obs.run_id, obs.type)
        if obs.type != "step_recorded" or obs.step is None or obs.step not in run.steps:
            return None
        first = run.steps[obs.step]
        mine = redacted_envelope(obs, self.store.redactor)
        if first.payload_json == serialize_payload(obs.payload, self.store.redactor) and first.domain == mine.domain:
            return first
        raise RunConflict(
            f"run {obs.run_id} already has a step {obs.step} with other content; a step number is recorded once"
        )

    def _append_in(self, tx: Transaction, state: MemoryState, events: Sequence[NewEvent]) -> list[RecordedEvent]:
        out: list[RecordedEvent] = []
        finished_before: dict[str, bool] = {}
        for obs in events:
            taken = lesson_id_taken(state, obs) or pin_refused(state, obs)
            if taken is not None:
                raise InvalidEvent(taken)
            if self.check_runs and self._repeated(tx, obs, finished_before) is not None:
                continue
            out.extend(self._write(tx, state, [*self.opening(state, obs), obs, *decide(state, obs, self.policy)]))
        return out

    @contextmanager
    def _transaction(self, types: Collection[str] | None = None) -> Iterator[tuple[Transaction, MemoryState]]:
        """The write transaction every append runs in (of events of `types`: every type when not
        known beforehand); appends inside `atomic()` join the open one."""
        if self._tx is not None:
            yield self._tx, self._catch_up(self._tx)
            return
        self._warm(types)
        try:
            with self.store.atomic() as tx:
                self._tx = tx
                try:
                    yield tx, self._catch_up(tx)
                finally:
                    self._tx = None
        except BaseException:
            self.forget()
            raise

    def forget(self) -> None:
        """Drop what this writer folded: events of a rolled-back transaction must not stand."""
        self.state = None
        self.runs.clear()

    @contextmanager
    def atomic(self) -> Iterator[Transaction]:
        """One write transaction for several appends (each still checked and decided as it comes):
        they commit together, or an error leaving the block rolls all of them back."""
        with self._transaction() as (tx, _state):
            yield tx

    def append(self, events: Sequence[NewEvent]) -> list[RecordedEvent]:
        """Append each observation followed by the decisions `decide` makes for it; a
        `run_started` with memory on is preceded by the start-of-run decisions (`opening`).
        Returns what was written.

        A lesson whose caller-chosen id belongs to a lesson with another dedup key is
        refused (InvalidEvent, nothing written): it must never act on the other lesson. An
        observation of a finished run, or a step number of a run recorded again with other
        content, is refused (RunConflict, nothing written); the same step with the same content
        is not written again."""
        if not events:
            return []
        for i, ev in enumerate(events):
            if not isinstance(ev, NewEvent):
                raise InvalidEvent(f"event {i + 1}: expected NewEvent, got {type(ev).__name__}")
        with self._transaction({ev.type for ev in events}) as (tx, state):
            return self._append_in(tx, state, events)

    def append_to_run(self, run_id: str, build: Callable[[RunSoFar], Sequence[NewEvent]]) -> list[RecordedEvent]:
        """Append the events `build` makes from run `run_id` as the ledger holds it, read in the same
        transaction (finishing a run learns from every step any process recorded). A finished run
        is refused before `build` is called."""
        with self._transaction() as (tx, state):
            run = self.run(tx, run_id)
            if run.finished:
                raise run_finished(run_id, "run_completed")
            events = list(build(run))
            for i, ev in enumerate(events):
                if not isinstance(ev, NewEvent):
                    raise InvalidEvent(f"event {i + 1}: expected NewEvent, got {type(ev).__name__}")
            return self._append_in(tx, state, events)

    def opening(self, state: MemoryState, obs: NewEvent) -> list[NewEvent]:
        """The start-of-run policy for a `run_started` with memory on (seeds on first use,
        pruning, trajectory expiry) at the time the run started: the library's `start_run` and
        `memtape append` both come through here."""
        if obs.type != "run_started" or not obs.run_id or not obs.payload.memory_enabled:  # type: ignore[attr-defined]
            return []
        started = normalize_ts(obs.occurred_at) if obs.occurred_at is not None else format_ts(self.store.clock())
        return on_open(state, obs.run_id, started, self.policy, seeds_in(obs.payload.policy))  # type: ignore[attr-defined]

    def open_for_run(self, run_id: str, started_at: str) -> list[RecordedEvent]:
        """Memory opened for a run: seed lessons on first use, prune stale lessons and facts,
        expire old trajectories — each as a decision event, in one transaction."""
        started = normalize_ts(started_at)
        with self._transaction() as (tx, state):
            decisions = on_open(state, run_id, started, self.policy)
            return self._write(tx, state, decisions) if decisions else []
