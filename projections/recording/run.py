"""`Run`: one run of an agent — what it did and what it recalled, in the ledger as it happens.

With memory off a run is still logged (run_started, step_recorded,
context_built, step_graded, run_completed: the baseline rep) but reads
nothing and learns nothing. Secrets never reach the ledger: passwords the
goal gives (read by `ledger.credentials`, as the policy reads them) and values
typed with `sensitive=True` are scrubbed from every payload before it is
built, and `Action(sensitive=True)` masks every argument of the action itself.
`finish` learns through `learning` in the transaction that writes run_completed.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import Any, cast

from memtape.ledger.clock import parse_ts
from memtape.ledger.envelope import NewEvent, RecordedEvent
from memtape.ledger.errors import InvalidEvent, RunConflict
from memtape.ledger.events import (
    LOCATOR_ARGS,
    Backtracked,
    ContextBuilt,
    ContextGiven,
    ContextInferred,
    ExplorationCompleted,
    ExplorationStarted,
    ExtractionRecorded,
    ExtractionServed,
    FactObserved,
    LessonRecorded,
    PageMapStored,
    Payload,
    RepeatedFailureDetected,
    RunCompleted,
    RunProgress,
    ScratchSet,
    SelectorFailed,
    SelectorSucceeded,
    SitemapLinksDiscovered,
    SitemapPageVisited,
    SnapshotTaken,
    StepRecorded,
)
from memtape.ledger.redact import MARKER, secret_field
from memtape.projections import records
from memtape.projections.budget import DEFAULT_BUDGET, token_counter
from memtape.projections.folds.lessons import lesson_id_for
from memtape.projections.folds.selectors import known_good
from memtape.projections.folds.steps import action_signature
from memtape.projections.pin import tier1_refusal
from memtape.projections.recording.checks import (
    check_amount,
    check_embedding,
    check_flag,
    check_step,
    check_storable,
    check_text,
    checked_arguments,
    context_item,
    context_items,
    one_line,
)
from memtape.projections.recording.host import RunHost
from memtape.projections.recording.learning import finishing, goal_secrets
from memtape.projections.recording.searching import RunSearch
from memtape.projections.recording.values import (
    Extraction,
    Learned,
    Lesson,
    StepRecord,
    TrajectoryRecall,
    parse_element,
)
from memtape.projections.text import domain_of
from memtape.projections.writer import RunSoFar, run_finished


@checked_arguments
class Run(RunSearch):
    """One run of an agent: what it did and what it recalled, in the ledger as it happens.

    Use it as a context manager: leaving the block by an exception finishes the run as failed
    with the error recorded (and re-raises); leaving it without `finish()` finishes it as
    failed with reason "unfinished". `url` follows the last recorded step.
    """

    def __init__(
        self, memory: RunHost, run_id: str, goal: str, start_url: str, session_id: str, *, enabled: bool = True
    ):
        self.memory = memory
        self.run_id = run_id
        self.goal = goal
        self.start_url = start_url
        self.url = start_url
        self.session_id = session_id
        self.enabled = enabled
        self.steps: list[StepRecord] = []
        self.secrets: list[str] = []
        for s in goal_secrets(goal):
            self.add_secret(s)
        self.started = time.perf_counter()
        self.started_at: str | None = None
        #: this run's rep: its number within its session (1: the baseline, no step memories)
        self.rep = 1
        #: runs whose graded steps this run may retrieve (None: every other run)
        self.step_memory_runs: list[str] | None = []
        #: the internal state embedding of this run's internal state (its goal), and its model
        self.state_embedding: tuple[float, ...] = ()
        self.embedding_model: str | None = None
        self.finished = False
        self.ms_total = 0.0
        self._ms_step = 0.0
        self.patterns_used: list[str] = []

    def __repr__(self) -> str:
        return f"Run({self.run_id!r}, goal={self.safe_goal!r}, url={self.url!r})"

    def __enter__(self) -> Run:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.finished:
            return
        try:
            if exc is not None:
                self.finish(success=False, outcome=f"{type(exc).__name__}: {one_line(exc)}"[:2000], reason="exception")
            else:
                self.finish(success=False, outcome="the run ended without finish()", reason="unfinished")
        except RunConflict:  # finished by another process or handle: the ledger's ending stands
            self.finished = True

    # ---- plumbing ------------------------------------------------------------------

    @contextmanager
    def timed(self) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            dt = (time.perf_counter() - t0) * 1000
            self.ms_total += dt
            self._ms_step += dt

    def take_step_ms(self) -> float:
        """Milliseconds spent in memory since the last call (a loop reads it once per step)."""
        ms, self._ms_step = self._ms_step, 0.0
        return ms

    @property
    def domain(self) -> str:
        """The host of the current URL."""
        return domain_of(self.url)

    @property
    def safe_goal(self) -> str:
        """The goal as memory stores it (secrets scrubbed): trajectories are matched on it."""
        return str(self.scrub(self.goal))

    def scrub(self, value: Any) -> Any:
        """Replace every known secret in strings of a nested value."""
        if not self.secrets:
            return value
        if isinstance(value, str):
            for s in self.secrets:
                if s and s in value:
                    value = value.replace(s, MARKER)
            return value
        if isinstance(value, dict):
            return {k: self.scrub(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.scrub(v) for v in value]
        return value

    def add_secret(self, value: str) -> None:
        if value and value != MARKER and value not in self.secrets:
            self.secrets.append(value)
            self.secrets.sort(key=len, reverse=True)

    def _event(
        self, cls: type[Payload], fields: dict[str, Any], *, step: int | None = None, domain: str | None = None
    ) -> NewEvent:
        return self.memory.event(cls, self.scrub(fields), run_id=self.run_id, step=check_step(step), domain=domain)

    def _live(self, what: str = "events") -> None:
        """Refuse early what this handle knows the run no longer takes (the writer checks the ledger)."""
        if self.finished:
            raise run_finished(self.run_id, what)

    # ---- recall ------------------------------------------------------------------------

    def tier1(self) -> list[Lesson]:
        """The Tier 1 lessons for the system prompt; logs tier1_loaded."""
        self._live()
        if not self.enabled:
            return []
        with self.timed():
            return self.memory.tier1(run_id=self.run_id, step=0, domain=domain_of(self.start_url))

    def recall_domain(self, step: int | None = None, domain: str | None = None) -> list[Lesson]:
        """Trigger B for the site of the current URL (or `domain`); logs domain_recall."""
        self._live()
        domain = domain if domain is not None else self.domain
        if not self.enabled or not domain:
            check_step(step)
            return []
        with self.timed():
            return self.memory.recall_domain(domain, run_id=self.run_id, step=step)

    def recall_error(
        self, command: str, error: str, step: int | None = None, domain: str | None = None
    ) -> list[Lesson]:
        """Trigger A for a failed command on the current site (or `domain`); logs error_recall."""
        self._live()
        if not self.enabled:
            check_text(command, "command")
            return []
        with self.timed():
            return self.memory.recall_error(
                command,
                self.scrub(error) if isinstance(error, str) else error,
                domain=domain if domain is not None else (self.domain or None),
                run_id=self.run_id,
                step=step,
            )

    def recall_trajectory(self, step: int | None = None, url: str | None = None) -> TrajectoryRecall | None:
        """The reference trajectory for this run's goal on the current site (or `url`'s); logs
        trajectory_recalled."""
        self._live()
        if not self.enabled:
            return None
        with self.timed():
            return self.memory.recall_trajectory(
                self.safe_goal, url if url is not None else self.url, run_id=self.run_id, step=step
            )

    # ---- plain reads (their provenance goes into record_context) ---------------------------

    def sessions(self, domain: str | None = None) -> list[records.SessionEntry]:
        if not self.enabled:
            return []
        with self.timed():
            return self.memory.current().sessions(domain if domain is not None else self.domain)

    def facts(self, domain: str | None = None) -> list[records.Fact]:
        if not self.enabled:
            return []
        with self.timed():
            return self.memory.current().facts(
                domain if domain is not None else self.domain, min_confidence=self.memory.policy.fact_prompt_min
            )

    def selectors(self, domain: str | None = None) -> list[records.SelectorEntry]:
        """Known-good selectors of the site (each succeeded at least once), most successful first."""
        if not self.enabled:
            return []
        with self.timed():
            good = known_good(self.memory.current().selectors(domain if domain is not None else self.domain))
            return sorted(good, key=lambda s: (-s.successes, s.failures, s.role, s.name))

    def step_memories(self, elements: list[str], intent: str) -> list[records.StepMemory]:
        """Graded steps on a page like this one (steps to repeat or avoid): none on rep 1 (the
        baseline); then those of the session's previous reps (or of every other run, widened)."""
        if not self.enabled or self.rep <= 1:
            return []
        with self.timed():
            return self.memory.current().step_memories(
                elements,
                intent,
                exclude_run=self.run_id,
                runs=self.step_memory_runs,
                embedding=self.state_embedding,
                embedding_model=self.embedding_model,
            )

    def use_embedding(self, vector: Sequence[float], model: str) -> None:
        """The vector of this run's internal state (its goal, as memory stores it) by `model`,
        from an embeddings endpoint the caller configured: every step recorded from now on
        carries it (Trayn's internalStateEmbedding), and step-memory retrieval compares
        intents by it wherever a memory has a vector of the same model. Memory itself never
        asks an endpoint, so a replay or an experiment reads the recorded vectors."""
        check_text(model, "model")
        self.state_embedding, self.embedding_model = check_embedding(vector), model

    def recorded_embedding(self, model: str) -> tuple[float, ...] | None:
        """This run's internal state as `model` embedded it for an earlier step, if one did (so
        the same goal is never sent to the endpoint twice)."""
        check_text(model, "model")
        return self.memory.current().recorded_embedding(self.internal_state, model)

    @property
    def internal_state(self) -> str:
        """The internal state of every step of the run: the task it pursues, as memory
        stores it (the step's own reasoning is its `think`)."""
        return self.safe_goal[:2000]

    def loop_warnings(self) -> tuple[str, ...]:
        """The short-term loop warnings for this run."""
        with self.timed():
            return self.memory.current().short_term(self.run_id).loop_warnings

    # ---- layered memory (seed 003): short-term, context, patterns, snapshots, extractions -------

    def short_term(self) -> records.ShortTerm:
        """This run's short-term and working memory (within the run, so read with memory off too)."""
        with self.timed():
            return self.memory.current().short_term(self.run_id)

    def known_failure(self, command: str, args: Mapping[str, Any], url: str) -> str | None:
        """Is this a repeated failure: the action's signature when it already failed in this run."""
        check_storable(command, "command")
        check_storable(url, "url")
        signature = action_signature({"command": command, "args": dict(args)}, url)
        return signature if self.short_term().has_failed(signature) else None

    def repeated_failure(self, signature: str, action: str, url: str, response: str, step: int) -> None:
        """Log what the agent did about an action known to fail: chose otherwise, or went ahead warned."""
        self._live()
        ev = self._event(
            RepeatedFailureDetected,
            {"signature": signature, "action": action[:500], "url": url[:2000], "response": response},
            step=step,
            domain=domain_of(url) or None,
        )
        with self.timed():
            self.memory.append([ev])

    def give_context(self, context: Mapping[str, str]) -> None:
        """User context given to this run (`memtape run --context key=value`)."""
        self._live()
        events = [
            self._event(ContextGiven, {"key": k, "value": v}, domain=domain_of(self.start_url) or None)
            for k, v in context.items()
        ]
        with self.timed():
            self.memory.append(events)

    def infer_context(
        self, key: str, value: str, source: str, step: int | None = None, domain: str | None = None
    ) -> bool:
        """Context learned during execution; recorded once per (domain, key, value)."""
        self._live()
        domain = domain if domain is not None else self.domain
        if not self.enabled or not domain:
            return False
        with self.timed():
            if any(
                e.kind == "inferred" and e.key == key and e.value == value and e.domain == domain
                for e in self.memory.current().context(None, domain)
            ):
                return False
            self.memory.append(
                [self._event(ContextInferred, {"key": key, "value": value, "source": source}, step=step, domain=domain)]
            )
            return True

    def relevant_context(self, domain: str | None = None) -> list[records.ContextEntry]:
        """This run's user context and the site's inferred context that share words with the goal."""
        with self.timed():
            found = self.memory.current().relevant_context(
                self.safe_goal, self.run_id, domain if domain is not None else self.domain
            )
            return [e for e in found if self.enabled or e.kind == "user"]

    def prompt_context(self, domain: str | None = None) -> list[records.ContextEntry]:
        """What a prompt's context section holds: all of this run's user context, then what was
        inferred on the site that is relevant to the goal (with memory on); the context budget
        places it by priority."""
        with self.timed():
            found = self.memory.current().prompt_context(
                self.run_id, domain if domain is not None else self.domain, self.safe_goal
            )
            return [e for e in found if self.enabled or e.kind == "user"]

    def patterns(self, domain: str | None = None) -> list[records.Pattern]:
        """Learned patterns for the site, best first."""
        domain = domain if domain is not None else self.domain
        if not self.enabled or not domain or not self.memory.policy.learned_patterns:
            return []
        with self.timed():
            return self.memory.current().patterns(domain)

    def pattern_used(self, pattern_id: str) -> None:
        """The agent followed a learned pattern: its success or failure is counted when the run finishes."""
        if pattern_id not in self.patterns_used:
            self.patterns_used.append(pattern_id)

    def extraction(self, key: str, tool: str, url: str, extract: Any, step: int | None = None) -> Extraction:
        """An extraction through the cache: served from memory (and logged as such) when the same key
        was extracted at most `extraction_ttl_seconds` ago, else `extract()` (a dict with title, text,
        links, section_count) is called and recorded."""
        self._live()
        domain = domain_of(url) or None
        with self.timed():
            cached = self.memory.current().cached_extraction(key, self.memory.now()) if self.enabled else None
            if cached is not None:
                age = max((parse_ts(self.memory.now()) - parse_ts(cached.occurred_at)).total_seconds(), 0.0)
                self.memory.append(
                    [
                        self._event(
                            ExtractionServed,
                            {
                                "key": key,
                                "extraction_id": cached.event_ids[0],
                                "age_seconds": round(age, 3),
                                "ttl_seconds": self.memory.policy.extraction_ttl_seconds,
                            },
                            step=step,
                            domain=domain,
                        )
                    ]
                )
                return Extraction.served(key, cached)
        if not callable(extract):
            raise InvalidEvent(f"extract must be a function returning the extraction, got {type(extract).__name__}")
        data = extract()
        if not isinstance(data, Mapping):
            raise InvalidEvent(
                f"extract() must return a dict (title, text, links, section_count), got {type(data).__name__}"
            )
        count = data.get("section_count", 0)
        if isinstance(count, bool) or not isinstance(count, int):
            raise InvalidEvent(f"extract()'s section_count must be an integer, got {count!r:.40}")
        ev = self._event(
            ExtractionRecorded,
            {
                "key": key,
                "tool": tool,
                "url": url,
                "text": str(data.get("text", ""))[:50_000],
                "title": str(data.get("title", ""))[:500],
                "links": list(data.get("links") or [])[:500],
                "section_count": int(data.get("section_count", 0)),
            },
            step=step,
            domain=domain,
        )
        with self.timed():
            recorded = self.memory.append([ev])[0]
            return Extraction.recorded(key, tool, url, recorded)

    def extractions(self, domain: str | None = None) -> list[records.ContextEntry]:
        """The site's cached extractions, oldest first (the prompt budget and compression decide how
        much of each is shown)."""
        domain = domain if domain is not None else self.domain
        if not self.enabled or not domain:
            return []
        with self.timed():
            return [e for e in self.memory.current().context(None, domain) if e.kind == "extraction"]

    def snapshot(
        self, url: str, title: str, summary: str, form_state: Mapping[str, str], scroll: tuple[int, int], step: int
    ) -> str:
        """The browser's state at a navigation (secret form values are already redacted)."""
        self._live()
        for what, text in (("url", url), ("title", title), ("summary", summary)):
            check_text(text, what, empty=True)
        if not isinstance(form_state, Mapping):
            raise InvalidEvent(f"form_state must be a mapping of field to value, got {type(form_state).__name__}")
        if not (
            isinstance(scroll, tuple | list)
            and len(scroll) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) for v in scroll)
        ):
            raise InvalidEvent(f"scroll must be a pair of integers (x, y), got {scroll!r:.60}")
        check_step(step, required=True)
        snapshot_id = f"snap_{self.run_id}_{step}"
        ev = self._event(
            SnapshotTaken,
            {
                "snapshot_id": snapshot_id,
                "url": url[:2000],
                "title": title[:500],
                "visible_elements_summary": summary[:2000],
                "form_state": dict(form_state),
                "scroll_x": max(0, scroll[0]),
                "scroll_y": max(0, scroll[1]),
                "associated_step": step,
            },
            step=step,
            domain=domain_of(url) or None,
        )
        with self.timed():
            self.memory.append([ev])
        return snapshot_id

    def snapshots(self) -> list[records.Snapshot]:
        """This run's snapshots, in the order they were taken."""
        with self.timed():
            return self.memory.current().snapshots(self.run_id)

    def backtracked(
        self, snapshot_id: str, from_url: str, to_url: str, reason: str, avoided: Sequence[str], step: int
    ) -> None:
        """Stuck: the agent went back to a snapshot, avoiding what led to the dead end."""
        self._live()
        ev = self._event(
            Backtracked,
            {
                "snapshot_id": snapshot_id,
                "from_url": from_url[:2000],
                "to_url": to_url[:2000],
                "reason": reason[:500],
                "avoided": [a[:300] for a in avoided][:100],
            },
            step=step,
            domain=domain_of(to_url) or None,
        )
        with self.timed():
            self.memory.append([ev])

    # ---- working memory (seed 003): the scratch pad and PageMaps ----------------------------------
    # The run's own, so kept with memory off too: no other run reads them.

    def set_scratch(self, key: str, value: Any, step: int | None = None) -> None:
        """Put `value` (any JSON value) on this run's scratch pad under `key`: working data between cycles, replaced when the key is set again. A value
        under a key that names a secret (password, token, PIN...) is kept redacted."""
        self._live()
        check_text(key, "key")
        ev = self._event(ScratchSet, {"key": key, "value": value}, step=step, domain=self.domain or None)
        with self.timed():
            self.memory.append([ev])

    def get_scratch(self, key: str, default: Any = None) -> Any:
        """The value last set under `key` on this run's scratch pad, else `default`. A copy: changing it changes nothing until it is set again."""
        check_text(key, "key")
        with self.timed():
            entry = self.memory.current().scratch(self.run_id).get(key)
        return default if entry is None else copy.deepcopy(entry.value)

    def scratch(self) -> dict[str, Any]:
        """This run's whole scratch pad, key -> value (a copy), keys in the order they were first set."""
        with self.timed():
            return {k: copy.deepcopy(e.value) for k, e in self.memory.current().scratch(self.run_id).items()}

    def store_page_map(self, url: str, page_map: Mapping[str, Any], step: int | None = None) -> None:
        """This run's understanding of the page at `url`, a mapping of
        `title`, `summary`, `total_width`, `total_height` (pixels) and `regions` — each with `kind`
        (header, navigation, hero, content, sidebar, footer, modal or unknown), `name`,
        `description`, `elements` (the key elements in it) and `start_y`/`end_y`. Replaces an
        earlier map of the same URL."""
        self._live()
        check_text(url, "url")
        if not isinstance(page_map, Mapping):
            raise InvalidEvent(
                f"page_map must be a mapping of title, summary, regions..., got {type(page_map).__name__}"
            )
        ev = self._event(PageMapStored, {**page_map, "url": url}, step=step, domain=domain_of(url) or None)
        with self.timed():
            self.memory.append([ev])

    def get_page_map(self, url: str) -> records.PageMap | None:
        """The PageMap this run stored for `url`, or None."""
        check_text(url, "url")
        return self.get_all_page_maps().get(url)

    def has_page_map(self, url: str) -> bool:
        return self.get_page_map(url) is not None

    def get_all_page_maps(self) -> dict[str, records.PageMap]:
        """Every PageMap of this run, URL -> map, in the order the URLs were first mapped."""
        with self.timed():
            return self.memory.current().page_maps(self.run_id)

    def get_page_summary(self, url: str) -> str:
        """The summary of the page at `url` from its PageMap ("" without one)."""
        found = self.get_page_map(url)
        return found.summary if found is not None else ""

    # ---- sitemap exploration (seed 003's SitemapGraph) -------------------------------------------

    def exploration_started(self, homepage_url: str, max_depth: int, max_pages: int) -> None:
        """A sitemap exploration of the site of `homepage_url` begins, within these bounds."""
        self._explored(
            ExplorationStarted,
            {"homepage_url": homepage_url, "max_depth": max_depth, "max_pages": max_pages},
            homepage_url,
        )

    def sitemap_links(self, parent_url: str, depth: int, links: Sequence[Mapping[str, str]], step: int) -> None:
        """Links the exploration found on `parent_url` (each with `url`, and `text`, `link_type`)."""
        self._explored(
            SitemapLinksDiscovered,
            {"parent_url": parent_url, "depth": depth, "links": [dict(l) for l in links][:1000]},
            parent_url,
            step,
        )

    def sitemap_visited(self, url: str, title: str, summary: str, section_count: int, depth: int, step: int) -> None:
        """A page the exploration visited, as the agent summarized it."""
        self._explored(
            SitemapPageVisited,
            {
                "url": url,
                "title": title[:500],
                "summary": summary[:2000],
                "section_count": section_count,
                "depth": depth,
            },
            url,
            step,
        )

    def exploration_completed(
        self, homepage_url: str, visited: int, discovered: int, complete: bool, summary: str
    ) -> None:
        """How the exploration of the site of `homepage_url` ended: pages visited and found, whether
        it covered the site, and the agent's summary of it."""
        self._explored(
            ExplorationCompleted,
            {
                "homepage_url": homepage_url,
                "pages_visited": visited,
                "pages_discovered": discovered,
                "complete": complete,
                "summary": summary[:20_000],
            },
            homepage_url,
        )

    def _explored(self, cls: type[Payload], fields: dict[str, Any], url: str, step: int | None = None) -> None:
        self._live()
        ev = self._event(cls, fields, step=step, domain=domain_of(url) or None)
        with self.timed():
            self.memory.append([ev])

    def sitemap(self, domain: str | None = None) -> records.SiteMap | None:
        """The site's graph (None before its first exploration)."""
        with self.timed():
            return self.memory.current().sitemap(domain if domain is not None else self.domain)

    # ---- what happened ------------------------------------------------------------------

    def record_step(
        self,
        step: int,
        action: str,
        target: str | None = None,
        url: str | None = None,
        ok: bool = True,
        error: str | None = None,
        *,
        args: Mapping[str, Any] | None = None,
        url_after: str | None = None,
        selector: str | None = None,
        sensitive: bool = False,
        duration_ms: float = 0.0,
        think: str | None = None,
        page_before: Mapping[str, Any] | None = None,
        page_after: Mapping[str, Any] | None = None,
        decided_by: str = "policy",
        in_shadow: bool = False,
        memory_ms: float = 0.0,
    ) -> str:
        """One action the agent took on the page at `url` (default the current URL), ending on
        `url_after` (default `url`); `target` names the element as `role "name"`. `page_before`
        and `page_after` describe the page (url, title, page_type, elements) for step memories.
        With `sensitive=True` every argument is masked and the typed value (args value/text) is
        redacted everywhere. Returns the event id. A step number is recorded once per run: the
        same step again with the same content (a retry) returns the first event's id; with other
        content it is refused (RunConflict)."""
        self._live("step_recorded")
        check_step(step, required=True)
        check_text(action, "action")
        check_text(target, "target", empty=True, optional=True)
        check_flag(ok, "ok")
        check_flag(sensitive, "sensitive")
        check_flag(in_shadow, "in_shadow")
        for what, text in (("error", error), ("selector", selector), ("think", think)):
            check_text(text, what, empty=True, optional=True)
        check_amount(duration_ms, "duration_ms")
        check_amount(memory_ms, "memory_ms")
        url = check_text(url if url is not None else self.url, "url", empty=True) or ""
        after = check_text(url_after if url_after is not None else url, "url_after", empty=True) or ""
        for what, value in (("args", args), ("page_before", page_before), ("page_after", page_after)):
            if value is not None and not isinstance(value, Mapping):
                raise InvalidEvent(f"{what} must be a mapping, got {type(value).__name__}")
        role, name = parse_element(target)
        # a value typed into a password, PIN, OTP, secret, token or card field is a secret, said or not
        sensitive = sensitive or secret_field(
            action, role, name, selector, *(v for k in LOCATOR_ARGS if isinstance(v := (args or {}).get(k), str))
        )
        with self.timed():
            if sensitive:
                self.add_secret(str((args or {}).get("value", (args or {}).get("text", ""))))
            ev = self._event(
                StepRecorded,
                {
                    "env_before": dict(page_before) if page_before is not None else {"url": url},
                    "env_after": dict(page_after) if page_after is not None else {"url": after},
                    "think": (think or "")[:2000] or None,
                    "internal_state": self.internal_state or None,
                    "internal_state_embedding": list(self.state_embedding),
                    "embedding_model": self.embedding_model,
                    "action": {"command": action, "args": dict(args or {}), "sensitive": sensitive},
                    "target": {
                        "role": role or "",
                        "name": name or "",
                        "selector": selector,
                        **({"in_shadow": True} if in_shadow else {}),
                    }
                    if role or name
                    else None,
                    "target_text": name or None,
                    "ok": ok,
                    "error": error,
                    "duration_ms": round(duration_ms, 3),
                    "memory_ms": round(memory_ms, 3),
                    "decided_by": decided_by,
                    "rep": self.rep,
                },
                step=step,
                domain=domain_of(url) or domain_of(after) or None,
            )
            written = self.memory.append([ev])
            if not written:  # recorded before (a retry): the first event answers
                return self.memory.writer.runs[self.run_id].steps[step].id
            # post-run learning reads the step as the door stored it (secrets redacted), never the raw
            # values: a lesson's error pattern is lower-cased, and a lower-cased key no detector knows
            stored = StepRecord.from_event(written[0])
            self.steps.append(stored)
            self.url = after
            return stored.event_id or ""

    def record_lesson(
        self,
        text: str,
        category: str = "error_recovery",
        *,
        failed_command: str | None = None,
        error_pattern: str | None = None,
        scope_domain: str | None = None,
        step: int | None = None,
    ) -> str:
        """A lesson the agent learned by itself (deduplicated and promoted like every lesson);
        returns its lesson id. `category` is error_recovery or site_specific: Tier 1 (every system
        prompt) takes text only from the seeds, promotion or a person's `memtape lessons pin`.
        A site_specific lesson without `scope_domain` is scoped to the run's site (domain recall finds it)."""
        self._live("lesson_recorded")
        refusal = tier1_refusal(category) if isinstance(category, str) else None
        if refusal is not None:
            raise InvalidEvent(refusal)
        check_text(text, "text")
        for what, value in (
            ("failed_command", failed_command),
            ("error_pattern", error_pattern),
            ("scope_domain", scope_domain),
        ):
            check_text(value, what, empty=True, optional=True)
            check_storable(value, what)
        if category == "site_specific" and not scope_domain:
            scope_domain = self.domain or None
        ev = self._event(
            LessonRecorded,
            {
                "lesson_id": lesson_id_for(failed_command, error_pattern, scope_domain, text),
                "lesson": text,
                "category": category,
                "failed_command": failed_command,
                "error_pattern": error_pattern,
                "scope_domain": scope_domain,
            },
            step=step,
            domain=self.domain,
        )
        with self.timed():
            self.memory.append([ev])
        return ev.payload.lesson_id  # type: ignore[attr-defined,no-any-return]

    def observe_fact(self, kind: str, key: str, value: str, step: int | None = None, domain: str | None = None) -> None:
        """App knowledge about the current site (or `domain`): kind is timing, selector, pattern or
        quirk. The same value confirms a fact, a different one contradicts it."""
        self._live()
        domain = domain if domain is not None else self.domain
        if not domain:
            raise InvalidEvent("observe_fact needs a domain: record a step with a URL first, or pass domain=")
        ev = self._event(FactObserved, {"fact_type": kind, "key": key, "value": value}, step=step, domain=domain)
        with self.timed():
            self.memory.append([ev])

    def selector_result(
        self,
        element: str,
        selector: str,
        ok: bool,
        step: int | None = None,
        *,
        error: str | None = None,
        url: str | None = None,
        healed_from: str | None = None,
    ) -> None:
        """Whether `selector` found `element` (`role "name"`) on the current page (or `url`)."""
        self._live()
        check_text(element, "element")
        check_flag(ok, "ok")
        url = check_text(url if url is not None else self.url, "url", empty=True) or ""
        role, name = parse_element(element)
        fields: dict[str, Any] = {"role": role or "", "name": name or "", "selector": selector, "url": url}
        if ok:
            fields["healed_from"] = healed_from
        else:
            fields["error"] = error[:300] if isinstance(error, str) else error
        ev = self._event(SelectorSucceeded if ok else SelectorFailed, fields, step=step, domain=domain_of(url))
        with self.timed():
            self.memory.append([ev])

    def record_context(
        self,
        items: Sequence[Mapping[str, Any]],
        step: int,
        budget: int = DEFAULT_BUDGET,
        *,
        trimmed: Sequence[Mapping[str, Any]] = (),
        prompt: str = "step",
        domain: str | None = None,
        counted_by: str | None = None,
    ) -> None:
        """What one prompt held: each item's source, priority, text and the event ids it came from
        (and what the budget trimmed), as a context_built event. Audits show exactly this.

        An item's `tokens` is the agent's own count and `counted_by` names what counted it (its
        tokenizer; every item must then carry its count). An item without one is counted here, and
        the event names this process's counter (`cl100k_base`, or `estimate` without the tokens extra)."""
        self._live()
        kept, cut = context_items(items, "items"), context_items(trimmed, "trimmed")
        counted_here = any("tokens" not in i for i in [*kept, *cut])
        if counted_by is not None and counted_here:
            raise InvalidEvent(
                "context_built: counted_by names what counted the items' tokens; give every item its tokens"
            )
        kept_items = [context_item(i, self.scrub) for i in kept]
        cut_items = [context_item(i, self.scrub) for i in cut]
        ev = self._event(
            ContextBuilt,
            {
                "prompt": prompt,
                "budget": budget,
                "total_tokens": sum(i.tokens for i in kept_items),
                "items": kept_items,
                "trimmed": cut_items,
                "counted_by": token_counter() if counted_here else counted_by,
            },
            step=step,
            domain=domain if domain is not None else (self.domain or None),
        )
        with self.timed():
            self.memory.append([ev])

    def progress(self, turn: int, url: str) -> None:
        """For the run registry: where the run is, every few turns."""
        with self.timed():
            self.memory.append(
                [self._event(RunProgress, {"turn": turn, "current_url": url}, domain=domain_of(url) or None)]
            )

    # ---- the end ------------------------------------------------------------------------

    def finish(
        self,
        success: bool,
        outcome: str = "",
        *,
        reason: str | None = None,
        result: str | None = None,
        final_url: str | None = None,
        turns: int | None = None,
        tokens_in: int = 0,
        tokens_out: int = 0,
        duration_ms: float | None = None,
        policy_decisions: int | None = None,
        replayed_steps: int | None = None,
        learn: bool = True,
    ) -> Learned:
        """Post-run learning (lessons from failure→recovery, facts, selectors, the trajectory and the
        patterns of a success), the uses of learned patterns, the session entry, graded steps and
        run_completed, in one transaction. `learn=False` (an exploration) learns nothing from the steps.

        The steps are the run's as the ledger holds them inside that transaction, whichever process
        or handle recorded them; a run already finished (here or elsewhere) is refused (RunConflict)."""
        self._live("run_completed")
        check_flag(success, "success")
        check_text(outcome, "outcome", empty=True)
        for what, text in (("reason", reason), ("result", result), ("final_url", final_url)):
            check_text(text, what, empty=True, optional=True)
        for what, count in (
            ("turns", turns),
            ("tokens_in", tokens_in),
            ("tokens_out", tokens_out),
            ("policy_decisions", policy_decisions),
            ("replayed_steps", replayed_steps),
        ):
            check_amount(count, what, whole=True)
        check_amount(duration_ms, "duration_ms")
        learned = Learned()

        def build(so_far: RunSoFar) -> list[NewEvent]:
            steps = [StepRecord.from_event(ev) for ev in so_far.step_events()]  # the ledger's, whoever recorded them
            last_url = next((s.url_after for s in reversed(steps) if s.url_after), self.url)
            run = cast(
                RunCompleted,
                self.memory.event(
                    RunCompleted,
                    {  # the outcome as run_completed records it (memory_ms: at the end)
                        "success": success,
                        "summary": outcome[:2000],
                        "result": result,
                        "reason": reason,
                        "final_url": final_url if final_url is not None else last_url,
                        "turns": turns if turns is not None else len(steps),
                        "tokens_in": tokens_in,
                        "tokens_out": tokens_out,
                        "duration_ms": round(duration_ms if duration_ms is not None else self._elapsed_ms(), 3),
                        "policy_decisions": policy_decisions
                        if policy_decisions is not None
                        else sum(1 for s in steps if s.decided_by == "policy"),
                        "replayed_steps": replayed_steps
                        if replayed_steps is not None
                        else sum(1 for s in steps if s.decided_by == "replay"),
                    },
                    run_id=self.run_id,
                ).payload,
            )
            return self._learning(steps, run, learned, learn, so_far.pending_recalls)

        with self.timed():
            self.memory.append_to_run(self.run_id, build)
        self.finished = True
        return learned

    def _learning(
        self,
        steps: Sequence[StepRecord],
        run: RunCompleted,
        learned: Learned,
        learn: bool,
        recalls: Sequence[RecordedEvent],
    ) -> list[NewEvent]:
        """The events of finishing the run with `steps`: what it learned (into `learned`), the uses of
        patterns, the session entry, graded steps and run_completed (a run with memory off writes only
        run_completed: it neither reads nor writes memory a later run retrieves)."""
        events: list[NewEvent] = []
        if self.enabled:  # memory off: run_completed only (it neither reads nor writes memory)
            for cls, fields, step, domain in finishing(
                steps,
                run,
                learned,
                learn=learn,
                patterns_used=self.patterns_used,
                recalls=recalls,
                run_id=self.run_id,
                goal=self.goal,
                safe_goal=self.safe_goal,
                start_url=self.start_url,
                session_id=self.session_id,
                now=self.memory.now(),
            ):
                events.append(self._event(cls, fields, step=step, domain=domain))
        events.append(
            self._event(
                RunCompleted,
                {
                    "success": run.success,
                    "summary": run.summary[:2000],
                    "result": run.result,
                    "reason": run.reason,
                    "final_url": run.final_url,
                    "turns": run.turns,
                    "tokens_in": run.tokens_in,
                    "tokens_out": run.tokens_out,
                    "duration_ms": round(run.duration_ms, 3),
                    "policy_decisions": run.policy_decisions,
                    "replayed_steps": run.replayed_steps,
                    "memory_ms": round(self.ms_total, 3),
                },
                domain=domain_of(run.final_url or "") or domain_of(self.start_url),
            )
        )
        return events

    def _elapsed_ms(self) -> float:
        if self.started_at is None:
            return (time.perf_counter() - self.started) * 1000
        return max(0.0, (parse_ts(self.memory.now()) - parse_ts(self.started_at)).total_seconds() * 1000)
