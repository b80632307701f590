"""The read side: `MemoryView`, every memory query the agent, analytics and interop use.

    view = MemoryView.open(store, projections_path)       # catches projections.db up first
    view.recall_on_error("fill", "too many arguments: expected 2, received 3", "www.google.com")
    view.as_of("2026-03-01T00:00:00Z").lessons()

A view is a consistent snapshot at `head`; `refresh()` folds in what was
appended since. Queries use indexes built lazily from the state (by failed
command, by error-pattern trigram, by scope domain, by goal word), so recall
stays well under a millisecond with 100,000 lessons.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar, cast

from memtape.ledger.errors import LedgerError, UnknownItem
from memtape.ledger.ids import short_id
from memtape.ledger.store import Store
from memtape.projections.cache.materialize import load_state
from memtape.projections.folds import context as context_mod
from memtape.projections.folds import credit as credit_mod
from memtape.projections.folds import knowledge
from memtape.projections.folds import page_maps as page_maps_mod
from memtape.projections.folds import patterns as patterns_mod
from memtape.projections.folds import runs as runs_mod
from memtape.projections.folds import scratch as scratch_mod
from memtape.projections.folds import selectors as selectors_mod
from memtape.projections.folds import sitemap as sitemap_mod
from memtape.projections.folds import snapshots as snapshots_mod
from memtape.projections.folds import steps as steps_mod
from memtape.projections.folds import trajectories as traj_mod
from memtape.projections.folds.context import ContextEntry
from memtape.projections.folds.credit import ItemCredit
from memtape.projections.folds.knowledge import Fact
from memtape.projections.folds.lessons import LessonEntry, Match, listing_order, ranked, ranked_matches, tier1
from memtape.projections.folds.page_maps import PageMap
from memtape.projections.folds.patterns import Pattern
from memtape.projections.folds.runs import RunManifest
from memtape.projections.folds.scratch import ScratchEntry
from memtape.projections.folds.selectors import SelectorEntry
from memtape.projections.folds.sessions import SessionEntry
from memtape.projections.folds.short_term import ShortTerm, empty_run
from memtape.projections.folds.sitemap import SiteMap, SitePage
from memtape.projections.folds.snapshots import Snapshot
from memtape.projections.folds.state import MemoryState, digests, fold
from memtape.projections.folds.steps import StepMemory
from memtape.projections.folds.trajectories import Trajectory, TrajectoryMatch
from memtape.projections.parameters import DEFAULT_POLICY, Thresholds
from memtape.projections.search import Ranker, SearchIndex
from memtape.projections.text import domain_matches, goal_words, parent_domains

SMALL = 64  # below this many candidates a plain scan beats an index
#: what `MemoryView._cached` keeps per head (an index, a ranking)
Cached = TypeVar("Cached")


def scope_index(lessons: Iterable[LessonEntry]) -> dict[str, list[LessonEntry]]:
    """scope domain -> its lessons (recall on domain looks up the host and each parent)."""
    by_scope: dict[str, list[LessonEntry]] = defaultdict(list)
    for lesson in lessons:
        if lesson.scope_domain:
            by_scope[lesson.scope_domain.lower()].append(lesson)
    return by_scope


class ErrorIndex:
    """Lookup tables for recall on error over the lessons of one state (built once per view head)."""

    def __init__(self, lessons: Iterable[LessonEntry]):
        self.by_command: dict[str, list[LessonEntry]] = defaultdict(list)
        by_pattern: dict[str, list[LessonEntry]] = defaultdict(list)
        for lesson in lessons:
            if lesson.failed_command and lesson.failed_command.strip():
                self.by_command[lesson.failed_command.strip().lower()].append(lesson)
            if lesson.error_pattern and lesson.error_pattern.strip():
                by_pattern[lesson.error_pattern.strip().lower()].append(lesson)
        self.by_pattern = dict(by_pattern)
        for group in self.by_command.values():  # recall order, so that command-only hits need no sort
            group[:] = ranked(group)
        # each pattern is filed under its rarest trigram: a pattern can only occur in an
        # error text that contains that trigram, so a query looks at few patterns
        freq: dict[str, int] = defaultdict(int)
        grams: dict[str, list[str]] = {}
        self.short_patterns: list[str] = []
        for pattern in self.by_pattern:
            if len(pattern) < 3:
                self.short_patterns.append(pattern)
                continue
            g = sorted({pattern[i : i + 3] for i in range(len(pattern) - 2)})
            grams[pattern] = g
            for x in g:
                freq[x] += 1
        self.by_gram: dict[str, list[str]] = defaultdict(list)
        for pattern, g in grams.items():
            self.by_gram[min(g, key=lambda x: (freq[x], x))].append(pattern)

    def patterns_in(self, text: str) -> list[str]:
        found = [p for p in self.short_patterns if p in text]
        by_gram = self.by_gram
        if len(by_gram) < len(text):
            found.extend(p for gram, ps in by_gram.items() if gram in text for p in ps if p in text)
        else:
            for gram in {text[i : i + 3] for i in range(len(text) - 2)}:
                for p in by_gram.get(gram, ()):
                    if p in text:
                        found.append(p)
        return found


class MemoryView:
    """Every projection at one point of the log, and the queries over them."""

    def __init__(
        self,
        state: MemoryState,
        policy: Thresholds = DEFAULT_POLICY,
        store: Store | None = None,
        projections_path: Path | None = None,
        pinned: bool = False,
    ):
        self.state = state
        self.policy = policy
        self.store = store
        self.projections_path = projections_path
        self.pinned = pinned  # an as-of view never moves forward
        self._cache: dict[str, Any] = {}
        self._cache_head = -1

    # ---- opening -------------------------------------------------------------

    @classmethod
    def open(
        cls,
        store: Store,
        projections_path: Path | None = None,
        policy: Thresholds = DEFAULT_POLICY,
        as_of: int | str | None = None,
        lend: bool = False,
    ) -> MemoryView:
        """Catch projections.db up with the ledger (when given) and return a view at its head,
        or at `as_of` (a seq, or an ISO time meaning recorded time). `lend`: the view is only
        read, never refreshed, so it may share the states this process keeps between catch-ups
        (projections/cache/kept.py); it is pinned where it is."""
        state = load_state(store, projections_path, policy, as_of=as_of, lend=lend)
        return cls(state, policy, store, projections_path, pinned=as_of is not None or lend)

    @classmethod
    def from_events(cls, events: Iterable[Any], policy: Thresholds = DEFAULT_POLICY) -> MemoryView:
        """A view folded from events in memory (tests, experiments)."""
        return cls(fold(MemoryState.empty(), events, policy), policy)

    def refresh(self) -> MemoryView:
        """Fold in the events appended since this view's head (no-op for an as-of view)."""
        if self.pinned or self.store is None:
            return self
        if self.projections_path is not None:
            self.state = load_state(self.store, self.projections_path, self.policy)
        else:
            fold(self.state, self.store.read(self.state.head + 1), self.policy)
        return self

    def as_of(self, at: int | str) -> MemoryView:
        """The same memory as the ledger knew it at seq `at` or recorded time `at`."""
        if self.store is None:
            raise LedgerError("as_of needs a view opened on a store")
        return MemoryView.open(self.store, self.projections_path, self.policy, as_of=at)

    @property
    def head(self) -> int:
        return self.state.head

    def digests(self) -> dict[str, str]:
        return digests(self.state)

    def _cached(self, name: str, build: Callable[[], Cached]) -> Cached:
        if self._cache_head != self.state.head:
            self._cache.clear()
            self._cache_head = self.state.head
        if name not in self._cache:
            self._cache[name] = build()
        return cast(Cached, self._cache[name])

    def _error_index(self) -> ErrorIndex:
        return self._cached("errors", lambda: ErrorIndex(self.state.lessons.lessons.values()))

    # ---- lessons (seed 001) ---------------------------------------------------

    def tier1(self) -> list[LessonEntry]:
        """tool_fallback and best_practice lessons by use count, seeds before learned on equal
        counts, then first recorded (`lessons.tier1_order`); at most 10."""
        return tier1(self.state.lessons.lessons.values(), self.policy.tier1_cap)

    def recall_on_error(self, command: str, error: str, domain: str | None = None) -> list[LessonEntry]:
        """Trigger A: the lessons of `error_matches`."""
        return [m.lesson for m in self.error_matches(command, error, domain)]

    def error_matches(self, command: str, error: str, domain: str | None = None) -> list[Match]:
        """Trigger A: lessons whose error_pattern is in the error, those whose failed_command is the
        command too first (both case-insensitive); only when no pattern matches, lessons of the same
        failed_command (offered, never counted as a use). Lessons scoped to a site only on that site;
        ranked by `ranked_matches`; the policy's `recall_top_k`."""
        idx = self._error_index()
        k = self.policy.recall_top_k
        cmd = (command or "").strip().lower()

        def here(lesson: LessonEntry) -> bool:
            return lesson.scope_domain is None or domain_matches(domain, lesson.scope_domain)

        by_pattern: dict[str, Match] = {}
        for pattern in idx.patterns_in((error or "").lower()):
            for lesson in idx.by_pattern[pattern]:
                if here(lesson):
                    both = bool(cmd) and (lesson.failed_command or "").strip().lower() == cmd
                    by_pattern[lesson.lesson_id] = Match(lesson, "pattern+command" if both else "pattern")
        if by_pattern:
            return ranked_matches(by_pattern.values())[:k]
        found: list[Match] = []
        for lesson in idx.by_command.get(cmd, ()) if cmd else ():  # already in recall order
            if here(lesson):
                found.append(Match(lesson, "command"))
                if len(found) == k:
                    break
        return found

    def recall_on_domain(self, domain: str) -> list[LessonEntry]:
        """Trigger B: the lessons of `domain_matches`."""
        return [m.lesson for m in self.domain_matches(domain)]

    def domain_matches(self, domain: str) -> list[Match]:
        """Trigger B: lessons scoped to `domain` or a parent domain, a scope that is the host itself
        first, then by use_count, then most recently used (`ranked_matches`); the policy's `recall_top_k`."""
        if not domain:
            return []
        by_scope = self._cached("scopes", lambda: scope_index(self.state.lessons.lessons.values()))
        cands = [
            Match(l, "domain" if i else "host")
            for i, d in enumerate(parent_domains(domain))
            for l in by_scope.get(d, ())
        ]
        return ranked_matches(cands)[: self.policy.recall_top_k]

    def lessons(self, domain: str | None = None) -> list[LessonEntry]:
        """Every lesson (or those scoped to `domain` or a parent), Tier 1 first, most used first."""
        lessons = [
            l for l in self.state.lessons.lessons.values() if domain is None or domain_matches(domain, l.scope_domain)
        ]
        lessons.sort(key=listing_order)
        return lessons

    def lesson(self, lesson_id: str) -> LessonEntry | None:
        return cast(LessonEntry | None, self.state.lessons.lessons.get(lesson_id))

    # ---- knowledge, sessions, selectors (seed 000) ------------------------------

    def facts(self, domain: str, min_confidence: float | None = None, include_closed: bool = False) -> list[Fact]:
        """Current facts of `domain`, most confident first; prompts pass policy.fact_prompt_min."""
        return knowledge.current_facts(self.state.knowledge, domain, min_confidence, include_closed)

    def sessions(self, domain: str) -> list[SessionEntry]:
        """The last `session_history` completed runs kept for `domain` (the policy's), oldest..newest."""
        return list(self.state.sessions.by_domain.get(domain, ()))

    def selectors(self, domain: str | None = None) -> list[SelectorEntry]:
        return selectors_mod.ranked(self.state.selectors, domain)

    # ---- trajectories -----------------------------------------------------------

    def trajectories(self, domain: str | None = None) -> list[Trajectory]:
        by_domain = self.state.trajectories.by_domain
        doms = [domain] if domain is not None else sorted(by_domain)
        return [t for d in doms for t in by_domain.get(d, {}).values()]

    def _goal_index(self, domain: str) -> dict[str, list[Trajectory]]:
        def build() -> dict[str, list[Trajectory]]:
            index: dict[str, list[Trajectory]] = defaultdict(list)
            for t in self.state.trajectories.by_domain.get(domain, {}).values():
                for w in goal_words(t.goal):
                    index[w].append(t)
            return index

        return self._cached("goals:" + domain, build)

    def match_trajectory(self, goal: str, domain: str, now: str) -> TrajectoryMatch | None:
        """The best reference trajectory for `goal` on this host at time `now`, or None."""
        matches = self.match_trajectories(goal, domain, now)
        return matches[0] if matches else None

    def match_trajectories(self, goal: str, domain: str, now: str) -> list[TrajectoryMatch]:
        items = self.state.trajectories.by_domain.get(domain, {})
        if len(items) <= SMALL:
            cands: Iterable[Trajectory] = items.values()
        else:  # Jaccard ≥ threshold > 0 needs a shared word
            index = self._goal_index(domain)
            seen: dict[str, Trajectory] = {}
            for w in goal_words(goal):
                for t in index.get(w, ()):
                    seen[t.trajectory_id] = t
            cands = seen.values()
        return traj_mod.rank(cands, goal, now, self.policy)

    # ---- step memories and short-term (seeds 002, 003) ----------------------------

    def step_memories(
        self,
        elements: list[str],
        intent: str,
        exclude_run: str | None = None,
        runs: Iterable[str] | None = None,
        embedding: Sequence[float] = (),
        embedding_model: str | None = None,
    ) -> list[StepMemory]:
        """Graded memories of other runs (of `runs` only, when given: seed 002's previous reps of a
        session) for this page and intent (and the intent's `embedding` by `embedding_model`,
        when the caller has one): one REPEAT and one AVOID when both match. Every candidate is
        scored (a page's roles are on every page, so no index of shared terms narrows them);
        each page's vector is computed once per process."""
        by_run = self.state.step_memories.by_run
        chosen = by_run.keys() if runs is None else dict.fromkeys(runs)
        mems = [m for r in chosen for m in by_run.get(r, {}).values()]
        return steps_mod.retrieve(mems, elements, intent, exclude_run, self.policy, embedding, embedding_model)

    def recorded_embedding(self, internal_state: str, model: str) -> tuple[float, ...] | None:
        """The vector `model` gave `internal_state` for a step already recorded, if any: an
        agent reads it back instead of asking its embeddings endpoint again."""
        by_run: dict[str, dict[str, StepMemory]] = self.state.step_memories.by_run
        return next(
            (
                m.embedding
                for steps in by_run.values()
                for m in steps.values()
                if m.embedding and m.embedding_model == model and m.intent == internal_state
            ),
            None,
        )

    def short_term(self, run_id: str) -> ShortTerm:
        return self.state.short_term.by_run.get(run_id) or empty_run(run_id)

    def short_terms(self, run_id: str | None = None, domain: str | None = None) -> list[ShortTerm]:
        """Short-term memory of one run, or of every run (on a domain), in run order."""
        return [
            st
            for rid, st in self.state.short_term.by_run.items()
            if (run_id is None or rid == run_id) and (domain is None or domain_matches(st.domain, domain))
        ]

    # ---- layered memory (seed 003) ------------------------------------------------

    def patterns(self, domain: str | None = None) -> list[Pattern]:
        """Learned patterns (of a domain and its subdomains), best first."""
        return patterns_mod.for_domain(self.state.patterns, domain)

    def context(self, run_id: str | None = None, domain: str | None = None) -> list[ContextEntry]:
        return context_mod.entries(self.state.context, run_id, domain)

    def relevant_context(self, goal: str, run_id: str | None, domain: str | None) -> list[ContextEntry]:
        """The run's user context and the domain's inferred context sharing words with the goal."""
        return context_mod.relevant(self.state.context, goal, run_id, domain)

    def prompt_context(self, run_id: str | None, domain: str | None, goal: str) -> list[ContextEntry]:
        """The run's user context, then the domain's inferred context relevant to `goal`: a prompt's
        context section."""
        return context_mod.for_prompt(self.state.context, run_id, domain, goal)

    def cached_extraction(self, key: str, now: str) -> ContextEntry | None:
        """The extraction for `key` when it is at most `extraction_ttl_seconds` old at `now`."""
        return context_mod.fresh_extraction(self.state.context, key, now, self.policy.extraction_ttl_seconds)

    def snapshots(self, run_id: str | None = None, domain: str | None = None) -> list[Snapshot]:
        return snapshots_mod.listed(self.state.snapshots, run_id, domain)

    def credit(self, item: str | None = None) -> list[ItemCredit]:
        """Every credited memory item, most worth first (`credit.ranked`), or the one named."""
        if item is not None:
            one = credit_mod.item_credit(self.state.credit, item)
            return [] if one is None else [one]
        return credit_mod.ranked(self.state.credit)

    def scratch(self, run_id: str) -> dict[str, ScratchEntry]:
        """One run's scratch pad, key -> entry."""
        return scratch_mod.pad(self.state.scratch, run_id)

    def scratch_entries(self, run_id: str | None = None, domain: str | None = None) -> list[ScratchEntry]:
        return scratch_mod.listed(self.state.scratch, run_id, domain)

    def page_maps(self, run_id: str) -> dict[str, PageMap]:
        """One run's PageMaps, URL -> map."""
        return page_maps_mod.of_run(self.state.page_maps, run_id)

    def page_map_entries(self, run_id: str | None = None, domain: str | None = None) -> list[PageMap]:
        return page_maps_mod.listed(self.state.page_maps, run_id, domain)

    def sitemap(self, domain: str) -> SiteMap | None:
        return cast(SiteMap | None, self.state.sitemap.by_domain.get(domain))

    def sitemap_pages(self, domain: str | None = None) -> list[SitePage]:
        return sitemap_mod.pages(self.state.sitemap, domain)

    # ---- full-text search ------------------------------------------------------

    def search_index(self) -> SearchIndex:
        """The full-text index of this view's lessons, current facts, patterns, selectors,
        trajectories, sessions and context (built once per head, like every index of a view; a
        memory keeps its own up to date as its head moves: `Memory.search`)."""
        return self._cached("search", lambda: SearchIndex.of(self.state, self.text_ranker()))

    def text_ranker(self) -> Ranker | None:
        """The store's own full-text ranking, where it has one (PostgreSQL's)."""
        return self.store.text_ranks if self.store is not None else None

    # ---- runs ----------------------------------------------------------------

    def runs(
        self,
        session_id: str | None = None,
        domain: str | None = None,
        status: str | None = None,
        limit: int | None = None,
    ) -> list[RunManifest]:
        return runs_mod.listed(self.state.runs, session_id, domain, status, limit)

    def run(self, run_id: str) -> RunManifest | None:
        return cast(RunManifest | None, self.state.runs.runs.get(run_id))

    def _require(self, run_id: str) -> RunManifest:
        run = self.run(run_id)
        if run is None:
            raise UnknownItem(f"no run {run_id!r} in the ledger")
        return run

    def resume_scenario(self, run_id: str, goal: str) -> dict[str, Any]:
        """Seed 000: continue where a run left off (its final URL), same session, lineage kept."""
        run = self._require(run_id)
        return {
            "goal": goal,
            "startUrl": run.final_url or run.current_url or run.start_url,
            "sessionId": run.session_id,
            "parentRunId": run.run_id,
        }

    def fork_scenario(self, run_id: str, goal: str) -> dict[str, Any]:
        """Seed 000: branch off a run with a new session id (`fork_...`)."""
        run = self._require(run_id)
        return {
            "goal": goal,
            "startUrl": run.final_url or run.current_url or run.start_url,
            "sessionId": short_id("fork"),
            "parentRunId": run.run_id,
        }
