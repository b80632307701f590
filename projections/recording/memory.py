"""`RecordingMemory`: one ledger under one policy — opens runs, answers recall outside a run (`memtape.Memory` adds the analytics answers).

`RecordingMemory` opens runs on a store under one policy (`Thresholds`); a `run.Run` records what the
agent did and recalls what memory holds. Every call appends its events
through `projections.writer.MemoryWriter` (so the policy's decisions — dedup,
promotion, pruning, contradiction, the start-of-run seeding and expiry — land
in the same transaction) and every read goes through
`projections.view.MemoryView`; every recall is itself an event. Nothing here
knows the bundled browser agent: its loop starts a `Run` and calls it as any
agent does, so what an external agent gets is what the demo measures.
`RecordingMemory.state` answers `memtape state`; `memtape.api` adds the answers that
need the analytics layer (audit, experiment).

Example:
    mem = RecordingMemory(store, projections_path)
    with mem.start_run(goal="Buy wool socks", start_url="https://shop.example/") as run:
        run.recall_domain(step=1)
        run.record_step(step=1, action="click", target='button "Buy"', ok=False, error="...")
        run.finish(success=True, outcome="bought")
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal, overload

from pydantic import ValidationError

from memtape.ledger.anchor import Keeper, remember_head
from memtape.ledger.clock import format_ts, parse_ts
from memtape.ledger.envelope import NewEvent, RecordedEvent
from memtape.ledger.errors import AnswerGone, InvalidEvent, KeyReused, RunConflict, UnknownItem
from memtape.ledger.events import (
    DomainRecall,
    ErrorRecall,
    MemorySearched,
    Payload,
    RequestAnswered,
    RunStarted,
    SeedLesson,
    Tier1Loaded,
    TrajectoryRecalled,
)
from memtape.ledger.field_rules import INT64_MAX
from memtape.ledger.ids import short_id
from memtape.ledger.store import Store
from memtape.ledger.urls import start_url_refusal
from memtape.projections.folds.credit import worth
from memtape.projections.folds.lessons import recall_payload
from memtape.projections.folds.runs import RunManifest
from memtape.projections.forgetting import answer_forgotten
from memtape.projections.parameters import DEFAULT_POLICY, Thresholds
from memtape.projections.recording.checks import (
    check_point,
    check_step,
    check_text,
    checked_arguments,
    one_line,
)
from memtape.projections.recording.run import Run
from memtape.projections.recording.values import Learned, Lesson, Scenario, StepRecord, TrajectoryRecall
from memtape.projections.records import (
    ContextEntry,
    Fact,
    ItemCredit,
    ListedLesson,
    PageMap,
    Pattern,
    ScratchEntry,
    SelectorEntry,
    SessionEntry,
    ShortTerm,
    SitePage,
    Snapshot,
    Trajectory,
)
from memtape.projections.search import SearchIndex, SearchResult, check_search
from memtape.projections.seeds import recorded_seeds
from memtape.projections.state_rows import STATE_KINDS, StatePage, StateRow, open_state
from memtape.projections.text import domain_of, origin_of
from memtape.projections.view import MemoryView
from memtape.projections.writer import MemoryWriter, RunSoFar

#: a run with no event for this long is abandoned when the next run starts (its process died)
STALE_AFTER = timedelta(hours=1)


@checked_arguments
class RecordingMemory:
    """One ledger under one policy: opens runs, and answers recall outside a run."""

    def __init__(
        self,
        store: Store,
        projections_path: Path | None = None,
        policy: Thresholds = DEFAULT_POLICY,
        *,
        enabled: bool = True,
        stale_after: timedelta = STALE_AFTER,
        keepers: Sequence[Keeper] = (),
        seeds: Sequence[SeedLesson] | None = None,
    ):
        if not isinstance(policy, Thresholds):
            raise InvalidEvent(f"policy must be a memtape Policy, got {type(policy).__name__}")
        if seeds is not None and not all(isinstance(s, SeedLesson) for s in seeds):
            raise InvalidEvent("seeds must be SeedLesson records (projections.seeds.choose_seeds reads them)")
        #: the seed lessons this memory's first run writes (None: seed 001's); each run_started records them
        self.seeds = tuple(seeds) if seeds is not None else None
        #: whether the opener chose the seeds (`memtape.open(seeds=...)`): an integration with seeds
        #: of its own (browser-use's) uses them only where the opener did not
        self.seeds_chosen = seeds is not None
        self.store = store
        self.policy = policy
        self.enabled = enabled
        self.stale_after = stale_after
        self.projections_path = projections_path
        #: where this memory remembers the head it saw when it closes (`memtape.ledger.anchor`)
        self.keepers = tuple(keepers)
        # starts from projections.db outside the write lock, not by folding the whole log inside it
        self.writer = MemoryWriter(store, policy, projections_path)
        self.view: MemoryView | None = None
        self._dirty = True
        #: the full-text index of memory at its head, kept up to date as the head moves, with the
        #: view and head it was last brought to (searches in a row share it unchanged)
        self._search_index: SearchIndex | None = None
        self._searched_at: tuple[MemoryView, int] | None = None

    # ---- plumbing ------------------------------------------------------------------

    def close(self) -> None:
        """Remember the head this memory saw, then close the ledger."""
        try:
            if self.keepers:
                remember_head(self.store, self.keepers)
        finally:
            self.store.close()

    def __enter__(self) -> RecordingMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def now(self) -> str:
        return format_ts(self.store.clock())

    def current(self) -> MemoryView:
        """The view at the ledger's head (folding in only what was appended since the last read)."""
        if self.view is None:
            self.view = MemoryView.open(self.store, self.projections_path, self.policy)
            # later refreshes fold only the new events in memory (no projections.db round trip)
            self.view.projections_path = None
            self._dirty = False
        elif self._dirty:
            self.view.refresh()
            self._dirty = False
        return self.view

    def append(self, events: Sequence[NewEvent]) -> list[RecordedEvent]:
        if not events:
            return []
        out = self.writer.append(list(events))
        self._dirty = True
        return out

    def append_to_run(self, run_id: str, build: Callable[[RunSoFar], Sequence[NewEvent]]) -> list[RecordedEvent]:
        """Append what `build` makes of run `run_id` as the ledger holds it (`MemoryWriter.append_to_run`)."""
        out = self.writer.append_to_run(run_id, build)
        self._dirty = True
        return out

    def once(self, key: str, request: str, answer: Callable[[], tuple[int, Any]]) -> tuple[int, Any, bool]:
        """Answer a request sent with idempotency key `key` at most once. The first time, `answer()`
        runs and what it writes commits in one transaction with its answer (a `request_answered`
        event in the key's own stream); the same key again with the same `request` (a sha256 of
        what was asked) gets the first answer and writes nothing; with another request it is
        refused (KeyReused). Returns (status, body, replayed)."""
        check_text(key, "idempotency key")
        digest = hashlib.sha256(key.encode()).hexdigest()
        # named as a digest (`sha256-`), which the redactor keeps; a key answered by an earlier
        # version sits under `request-<hex>`, or its redacted name: all three in one indexed query
        stream = f"request-sha256-{digest}"
        legacy = f"request-{digest}"
        names = tuple(dict.fromkeys((stream, legacy, self.store.redactor.ident(legacy) or legacy)))
        try:
            with self.writer.atomic() as tx:
                first = next(tx.select(stream=names), None)
                if first is not None:
                    if first.data["request_sha256"] != request:
                        raise KeyReused(f"idempotency key {key[:60]!r} already answered another request")
                    forgets = self.store.read(first.seq + 1, types=["subject_forgotten"])
                    gone = answer_forgotten(first.data["response"], forgets)
                    if gone is not None:
                        raise AnswerGone(
                            f"idempotency key {key[:60]!r}: its answer held {gone.data['subject_kind']} "
                            f"{gone.data['subject'][:60]!r}, forgotten at seq {gone.seq}; nothing was written"
                        )
                    return int(first.data["status"]), first.data["response"], True
                status, body = answer()
                self.append(
                    [
                        self.event(
                            RequestAnswered,
                            {"request_sha256": request, "status": status, "response": body},
                            stream=stream,
                        )
                    ]
                )
        except BaseException:
            self.view = None  # it may have folded what was rolled back
            raise
        finally:
            self._dirty = True
        return status, body, False

    def event(
        self,
        cls: type[Payload],
        fields: dict[str, Any],
        *,
        run_id: str | None = None,
        step: int | None = None,
        domain: str | None = None,
        stream: str | None = None,
    ) -> NewEvent:
        """Build (and so validate) one event; bad input raises InvalidEvent before anything is written."""
        check_text(domain, "domain", empty=True, optional=True)
        try:
            return NewEvent(cls(**fields), run_id=run_id, step=step, domain=domain or None, stream=stream)
        except (ValidationError, ValueError, TypeError) as exc:
            raise InvalidEvent(f"{cls.model_fields['type'].default}: {one_line(exc)}") from None

    def _known_run(self, run_id: str | None) -> None:
        if run_id is not None and self.current().run(check_text(run_id, "run_id") or "") is None:
            raise UnknownItem(f"no run {run_id!r} in the ledger")

    # ---- runs ------------------------------------------------------------------------

    def start_run(
        self,
        *,
        goal: str,
        start_url: str,
        session_id: str | None = None,
        run_id: str | None = None,
        parent_run_id: str | None = None,
        mode: str = "new",
        isolation: str = "shared",
        case_id: str | None = None,
        agent: str = "external",
        rep: int | None = None,
        step_memory_scope: str = "session",
    ) -> Run:
        """Abandon stale runs, then start this one: the start-of-run policy (seeds on first use,
        pruning, trajectory expiry) is applied by the writer in the same transaction as run_started.

        Reps: without `rep`, the run is numbered within its session (1 + the
        session's runs already in the registry; a run without a session id is rep 1). Rep 1
        retrieves no step memories (the baseline); rep 2+ retrieves those of the session's
        previous reps, or of every other run with `step_memory_scope="all"`."""
        check_text(goal, "goal")
        check_text(start_url, "start_url")
        check_text(agent, "agent")
        if step_memory_scope not in ("session", "all"):
            raise InvalidEvent(f"step_memory_scope must be 'session' or 'all', got {step_memory_scope!r:.40}")
        if rep is not None and (not isinstance(rep, int) or isinstance(rep, bool) or not 1 <= rep <= INT64_MAX):
            # every step records the rep: one its event cannot hold would leave a run that records no step
            raise InvalidEvent(f"rep must be a whole number from 1 to 2**63-1, got {rep!r:.40}")
        run_id = run_id or short_id("run")
        run = Run(self, run_id, goal, start_url, session_id or run_id, enabled=self.enabled)
        previous = [r.run_id for r in self.current().runs(session_id=session_id)] if session_id else []
        run.rep = rep if rep is not None else len(previous) + 1
        run.step_memory_runs = None if step_memory_scope == "all" else previous
        started = run._event(
            RunStarted,
            {
                "session_id": session_id,
                "parent_run_id": parent_run_id,
                "mode": mode,
                "goal": goal,
                "start_url": start_url,
                "memory_enabled": self.enabled,
                "isolation": isolation,
                "policy": {
                    "decision_policy": agent,
                    "step_memory_scope": step_memory_scope,
                    "fingerprint": self.policy.fingerprint(),
                    **self.policy.model_dump(mode="json"),
                    **recorded_seeds(self.seeds),
                },
                "case_id": case_id,
            },
            domain=domain_of(start_url),
        )
        refusal = start_url_refusal(start_url)  # after the event's own checks (a script URL says so)
        if refusal is not None:
            raise InvalidEvent(refusal)
        if self.current().run(run.run_id) is not None:
            raise InvalidEvent(f"run {run.run_id!r} already exists")
        with run.timed():
            self.abandon_stale_runs()
            self.append([started])
        return run

    def run(self, run_id: str) -> Run:
        """A running run started elsewhere (another process, the command line), to record into or
        finish. The ledger stays its one truth: every write of the handle is checked against the
        run as the ledger holds it then, and `finish` learns from every step any process recorded."""
        manifest = self._manifest(run_id)
        if manifest.status != "running":
            raise RunConflict(f"run {run_id!r} is already {manifest.status}")
        return self._handle(manifest)

    def read_run(self, run_id: str) -> Run:
        """A handle on any run, running or finished, to read what it holds (scratch pad, page maps,
        sessions, facts, step memories, ...). A finished run's handle is finished, as is the one
        that finished it: its recall (which logs events) and its writes are refused (RunConflict)."""
        manifest = self._manifest(run_id)
        run = self._handle(manifest)
        run.finished = manifest.status != "running"
        return run

    def _manifest(self, run_id: str) -> RunManifest:
        check_text(run_id, "run_id")
        self._dirty = True  # another process may have started or finished it since this memory last read
        manifest = self.current().run(run_id)
        if manifest is None:
            raise UnknownItem(f"no run {run_id!r:.80} in the ledger")
        return manifest

    def _handle(self, manifest: RunManifest) -> Run:
        """A Run on `manifest`'s run as the ledger holds it: its rep, steps, embedding and URL."""
        run_id = manifest.run_id
        run = Run(
            self,
            run_id,
            manifest.goal,
            manifest.start_url or "",
            manifest.session_id or run_id,
            enabled=manifest.memory_enabled,
        )
        run.started_at = manifest.started_at
        if manifest.session_id:  # its rep: the session's runs that started before it
            earlier = [
                r.run_id
                for r in self.current().runs(session_id=manifest.session_id)
                if r.run_id != run_id and r.started_at <= manifest.started_at
            ]
            run.rep, run.step_memory_runs = len(earlier) + 1, earlier
        recorded = list(self.store.read(run_id=run_id, types=["step_recorded"]))
        run.steps = [StepRecord.from_event(ev) for ev in recorded]
        embedded = [ev.data for ev in recorded if ev.data.get("internal_state_embedding")]
        if embedded:  # the vector the run's steps carry, carried on
            run.state_embedding = tuple(embedded[-1]["internal_state_embedding"])
            run.embedding_model = embedded[-1].get("embedding_model")
        urls = [u for s in run.steps for u in (s.url_before, s.url_after) if u]
        run.url = urls[-1] if urls else (manifest.current_url or run.start_url)
        return run

    def finish_run(self, run_id: str, *, success: bool, outcome: str = "", reason: str | None = None) -> Learned:
        """Finish a running run started elsewhere (`memtape finish-run`): `Run.finish` on its
        steps as the ledger holds them."""
        return self.run(run_id).finish(success=success, outcome=outcome, reason=reason)

    def abandon_stale_runs(self, older_than: timedelta | None = None) -> list[str]:
        """Finish as failed (reason "abandoned") every running run with no event for `older_than`
        (default `stale_after`, one hour): a crash between start and finish leaves no run running
        forever. `start_run` calls this first; returns the run ids finished."""
        if older_than is not None and not isinstance(older_than, timedelta):
            raise InvalidEvent(f"older_than must be a datetime.timedelta, got {older_than!r:.60}")
        limit = parse_ts(self.now()) - (older_than if older_than is not None else self.stale_after)
        done: list[str] = []
        for manifest in self.current().runs(status="running"):
            last = self._last_activity(manifest)
            if parse_ts(last) <= limit:
                try:
                    self.finish_run(
                        manifest.run_id,
                        success=False,
                        outcome=f"abandoned: no activity since {last}",
                        reason="abandoned",
                    )
                except RunConflict:  # another process finished it meanwhile
                    continue
                done.append(manifest.run_id)
        return done

    def _last_activity(self, manifest: RunManifest) -> str:
        last = manifest.updated_at
        for ev in self.store.read(run_id=manifest.run_id):
            last = max(last, ev.occurred_at)
        return last

    def resume_scenario(self, run_id: str, goal: str | None = None) -> Scenario:
        """Resume: continue run `run_id` where it left off (its final URL), in its
        session, lineage kept (`parent_run_id`), on its goal unless `goal` gives another."""
        return self._scenario(run_id, goal, "resume")

    def fork_scenario(self, run_id: str, goal: str | None = None) -> Scenario:
        """Fork: branch off run `run_id` from its final URL in a new session
        (`fork_...`), lineage kept, on its goal unless `goal` gives another."""
        return self._scenario(run_id, goal, "fork")

    def _scenario(self, run_id: str, goal: str | None, mode: str) -> Scenario:
        check_text(goal, "goal", optional=True)
        manifest = self._manifest(run_id)
        view = self.current()
        chosen = goal if goal is not None else manifest.goal
        seed = view.resume_scenario(run_id, chosen) if mode == "resume" else view.fork_scenario(run_id, chosen)
        return Scenario(
            goal=seed["goal"],
            start_url=seed["startUrl"] or "",
            session_id=seed["sessionId"],
            parent_run_id=seed["parentRunId"],
            mode=mode,
            case_id=manifest.case_id,
        )

    # ---- recall (each one is an event; run_id and step say where it happened) ------------------

    def tier1(self, *, run_id: str | None = None, step: int | None = 0, domain: str | None = None) -> list[Lesson]:
        """Tier 1: the tool_fallback and best_practice lessons a system prompt carries; logs tier1_loaded."""
        self._known_run(run_id)
        lessons = [l for l in self.current().tier1() if self.policy.seed_lessons or l.source != "seed"]
        self.append(
            [
                self.event(
                    Tier1Loaded,
                    {
                        "count": len(lessons),
                        "lessons": [l.lesson for l in lessons],
                        "lesson_ids": [l.lesson_id for l in lessons],
                    },
                    run_id=run_id,
                    step=check_step(step),
                    domain=domain,
                )
            ]
        )
        return [Lesson.of(l) for l in lessons]

    def recall_domain(self, domain: str, *, run_id: str | None = None, step: int | None = None) -> list[Lesson]:
        """Trigger B: lessons scoped to the site (or a parent domain); logs domain_recall."""
        check_text(domain, "domain")
        probe = self.event(DomainRecall, {"matched": 0}, run_id=run_id, step=check_step(step), domain=domain)
        self._known_run(run_id)
        view = self.current()
        matches = view.domain_matches(probe.domain or "")
        made = recall_payload(matches, worth(view.state.credit))
        self.append([self.event(DomainRecall, made, run_id=run_id, step=step, domain=probe.domain)])
        return [Lesson.recalled(m) for m in matches]

    def recall_error(
        self, command: str, error: str, *, domain: str | None = None, run_id: str | None = None, step: int | None = None
    ) -> list[Lesson]:
        """Trigger A: lessons matching a failed command or its error (site lessons only on their
        site); logs error_recall. In a run, a lesson without credit counts as a use only when the run
        finishes and the decisions after this recall cleared the failure (`lessons_used`)."""
        check_text(command, "command")
        check_text(error, "error", empty=True)
        probe = self.event(
            ErrorRecall,
            {"command": command, "error_snippet": error[:300], "matched": 0},
            run_id=run_id,
            step=check_step(step),
            domain=domain,
        )
        self._known_run(run_id)
        view = self.current()
        matches = [
            m
            for m in view.error_matches(command, error, probe.domain)
            if self.policy.seed_lessons or m.lesson.source != "seed"
        ]
        self.append(
            [
                self.event(
                    ErrorRecall,
                    {
                        "command": command,
                        "error_snippet": error[:300],
                        **recall_payload(matches, worth(view.state.credit), pending=run_id is not None),
                    },
                    run_id=run_id,
                    step=step,
                    domain=probe.domain,
                )
            ]
        )
        return [Lesson.recalled(m) for m in matches]

    def recall_trajectory(
        self, goal: str, url: str, *, run_id: str | None = None, step: int | None = None
    ) -> TrajectoryRecall | None:
        """The reference trajectory for `goal` on the host of `url`; logs trajectory_recalled."""
        check_text(goal, "goal")
        check_text(url, "url")
        domain = domain_of(url)
        probe = self.event(TrajectoryRecalled, {"goal": goal}, run_id=run_id, step=check_step(step), domain=domain)
        self._known_run(run_id)
        match = self.current().match_trajectory(goal, probe.domain or "", self.now())
        replay = bool(
            self.policy.replay
            and match
            and match.similarity >= self.policy.replay_min_similarity
            and match.trajectory.origin == origin_of(url)
            and match.trajectory.steps
        )
        t = match.trajectory if match else None
        self.append(
            [
                self.event(
                    TrajectoryRecalled,
                    {
                        "goal": goal,
                        "trajectory_id": t.trajectory_id if t else None,
                        "matched_goal": t.goal if t else None,
                        "similarity": round(match.similarity, 6) if match else 0.0,
                        "score": round(match.score, 6) if match else None,
                        "steps": len(t.steps) if t else 0,
                        "replay": replay,
                    },
                    run_id=run_id,
                    step=step,
                    domain=probe.domain,
                )
            ]
        )
        return TrajectoryRecall(match.trajectory, match.similarity, match.score, replay) if match else None

    def search(
        self,
        query: str,
        *,
        kinds: list[str] | None = None,
        domain: str | None = None,
        as_of: int | str | None = None,
        limit: int = 10,
        run_id: str | None = None,
        step: int | None = None,
    ) -> list[SearchResult]:
        """Ranked full-text search (SQLite FTS5, BM25) over lessons, current facts, patterns,
        selectors, trajectories, sessions and context, now or as the ledger knew it at seq / ISO
        time `as_of`; `kinds` and `domain` narrow it. The query is words (no search syntax). A
        search is a recall: it logs memory_searched with the query, filters and hits, against
        `run_id` and `step` when given (and the site that run is on)."""
        query, chosen, limit = check_search(query, kinds, limit)
        check_text(domain, "domain", optional=True)
        point = check_point(as_of, "as_of")
        fields: dict[str, Any] = {
            "query": query,
            "kinds": list(chosen) if chosen is not None else None,
            "domain_filter": domain,
            "as_of": None if point is None else str(point),
            "limit": limit,
        }
        probe = self.event(MemorySearched, fields, run_id=run_id, step=check_step(step), domain=domain)
        self._known_run(run_id)
        searcher = self.current().run(run_id) if run_id is not None else None
        where = (domain_of(searcher.current_url or "") or searcher.domain) if searcher is not None else probe.domain
        if point is None:
            index = self.search_index()
            view = self.current()
        else:
            view = MemoryView.open(self.store, self.projections_path, self.policy, as_of=point)
            index = view.search_index()
        hits = index.search(query, chosen, domain, limit)
        searched = [{"kind": h.kind, "item_id": h.item_id, "score": h.score} for h in hits]
        logged = self.append(
            [
                self.event(
                    MemorySearched,
                    {**fields, "matched": len(hits), "hits": searched},
                    run_id=run_id,
                    step=step,
                    domain=where or None,
                )
            ]
        )
        if point is None:  # the search's own event changes no item: the index stays valid past it
            self._searched_at = (view, logged[-1].seq) if logged[-1].seq == view.head + 1 else None
        return hits

    def search_index(self) -> SearchIndex:
        """The full-text index of memory at the ledger's head, brought up to it: built whole the
        first time (what a server's warm-up pays, so its first search does not), then given only
        the documents the new events added, changed or removed (`SearchIndex.update`)."""
        self._dirty = True  # another process may have written since (a forget, a pin): index its head
        view = self.current()
        if self._search_index is None:
            self._search_index = SearchIndex(view.text_ranker())
        if self._searched_at is None or self._searched_at[0] is not view or self._searched_at[1] != view.head:
            self._search_index.update(view.state)
            self._searched_at = (view, view.head)
        return self._search_index

    # ---- what memory holds ---------------------------------------------------------------

    @overload
    def state(
        self,
        kind: Literal["lessons", "tier1"],
        as_of: int | str | None = None,
        domain: str | None = None,
        run: str | None = None,
        session: str | None = None,
        outcome: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[ListedLesson]: ...
    @overload
    def state(
        self,
        kind: Literal["facts"],
        as_of: int | str | None = None,
        domain: str | None = None,
        run: str | None = None,
        session: str | None = None,
        outcome: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[Fact]: ...
    @overload
    def state(
        self,
        kind: Literal["sessions"],
        as_of: int | str | None = None,
        domain: str | None = None,
        run: str | None = None,
        session: str | None = None,
        outcome: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[SessionEntry]: ...
    @overload
    def state(
        self,
        kind: Literal["selectors"],
        as_of: int | str | None = None,
        domain: str | None = None,
        run: str | None = None,
        session: str | None = None,
        outcome: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[SelectorEntry]: ...
    @overload
    def state(
        self,
        kind: Literal["trajectories"],
        as_of: int | str | None = None,
        domain: str | None = None,
        run: str | None = None,
        session: str | None = None,
        outcome: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[Trajectory]: ...
    @overload
    def state(
        self,
        kind: Literal["runs"],
        as_of: int | str | None = None,
        domain: str | None = None,
        run: str | None = None,
        session: str | None = None,
        outcome: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[RunManifest]: ...
    @overload
    def state(
        self,
        kind: Literal["short-term"],
        as_of: int | str | None = None,
        domain: str | None = None,
        run: str | None = None,
        session: str | None = None,
        outcome: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[ShortTerm]: ...
    @overload
    def state(
        self,
        kind: Literal["patterns"],
        as_of: int | str | None = None,
        domain: str | None = None,
        run: str | None = None,
        session: str | None = None,
        outcome: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[Pattern]: ...
    @overload
    def state(
        self,
        kind: Literal["context"],
        as_of: int | str | None = None,
        domain: str | None = None,
        run: str | None = None,
        session: str | None = None,
        outcome: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[ContextEntry]: ...
    @overload
    def state(
        self,
        kind: Literal["snapshots"],
        as_of: int | str | None = None,
        domain: str | None = None,
        run: str | None = None,
        session: str | None = None,
        outcome: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[Snapshot]: ...
    @overload
    def state(
        self,
        kind: Literal["sitemap"],
        as_of: int | str | None = None,
        domain: str | None = None,
        run: str | None = None,
        session: str | None = None,
        outcome: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[SitePage]: ...
    @overload
    def state(
        self,
        kind: Literal["scratch"],
        as_of: int | str | None = None,
        domain: str | None = None,
        run: str | None = None,
        session: str | None = None,
        outcome: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[ScratchEntry]: ...
    @overload
    def state(
        self,
        kind: Literal["page-maps"],
        as_of: int | str | None = None,
        domain: str | None = None,
        run: str | None = None,
        session: str | None = None,
        outcome: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[PageMap]: ...
    @overload
    def state(
        self,
        kind: Literal["credit"],
        as_of: int | str | None = None,
        domain: str | None = None,
        run: str | None = None,
        session: str | None = None,
        outcome: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[ItemCredit]: ...
    @overload
    def state(
        self,
        kind: str,
        as_of: int | str | None = None,
        domain: str | None = None,
        run: str | None = None,
        session: str | None = None,
        outcome: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[StateRow]: ...
    def state(
        self,
        kind: str,
        as_of: int | str | None = None,
        domain: str | None = None,
        run: str | None = None,
        session: str | None = None,
        outcome: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[Any]:  # each overload above says which record
        """One projection's records, now or as the ledger knew it at seq / ISO time `as_of`, of one
        domain and one run when given: the rows of `state KIND --json`, as the record of each kind
        (the type checker knows which from a literal kind; the HTTP and MCP schemas name the same):

        lessons, tier1: `ListedLesson`; facts: `Fact`; sessions: `SessionEntry`; selectors:
        `SelectorEntry`; trajectories: `Trajectory`; runs: `RunManifest`; short-term: `ShortTerm`;
        patterns: `Pattern`; context: `ContextEntry`; snapshots: `Snapshot`; sitemap: `SitePage`;
        scratch: `ScratchEntry`; page-maps: `PageMap`; credit: `ItemCredit`.

        `run` keeps a per-run kind's state of that run (short-term, context, snapshots, scratch,
        page-maps, runs), what that run taught (lessons, tier1, facts, selectors, trajectories,
        patterns, sessions) or the credit measured on it. Runs and sessions also filter by
        `session` and by `outcome` (running, success or failed). `limit` (1 to 10,000) and `offset`
        page the list as it is ordered (runs newest first): the answer is the filtered list's
        `[offset:offset + limit]`, read without converting the rest; `count` says how many there
        are in all."""
        return list(self._state(kind, as_of, domain, run, session, outcome, limit, offset).rows)

    def count(
        self,
        kind: str,
        as_of: int | str | None = None,
        domain: str | None = None,
        run: str | None = None,
        session: str | None = None,
        outcome: str | None = None,
    ) -> int:
        """How many records `state` lists for the same kind and filters (a page's "of N"), counted
        without converting any."""
        return self._state(kind, as_of, domain, run, session, outcome, 1, 0).total

    def _state(
        self,
        kind: str,
        as_of: int | str | None,
        domain: str | None,
        run: str | None,
        session: str | None,
        outcome: str | None,
        limit: int | None,
        offset: int,
    ) -> StatePage:
        if kind not in STATE_KINDS:
            raise InvalidEvent(f"unknown state {kind!r:.60}: choose from {', '.join(STATE_KINDS)}")
        if domain is not None and not isinstance(domain, str):
            raise InvalidEvent(f"domain must be a string, got {type(domain).__name__}")
        if run is not None and not isinstance(run, str):
            raise InvalidEvent(f"run must be a string, got {type(run).__name__}")
        return open_state(
            self.store,
            self.projections_path,
            kind,
            domain,
            check_point(as_of, "as_of"),
            self.policy,
            run=run,
            session=session,
            outcome=outcome,
            limit=limit,
            offset=offset,
        )
