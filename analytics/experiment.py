"""Experiments: replay the log's observations under another policy (`Thresholds`) and diff against reality.

Reality is the log as recorded (observations and the decisions the policy in
force made), folded with the real policy. The experiment drops every decision
event (`projections.decisions.DECISION_TYPES`) and asks `decide` again, with the
changed policy, what each observation causes; the memory opened for each run
(`on_open`: seeds, pruning, fact pruning, trajectory expiry) is replayed at
the same points. Both sides are compared before each observation — where
reality's decisions for the previous one are all in — on Tier 1, Tier 2,
current facts (with confidence) and live trajectories; every change of a
difference is reported at its seq, and the decisions are matched one by one
(promotion of a lesson: reality at seq 57, experiment at seq 42).

Recall is re-made too (counterfactual recall): at each error recall, domain
recall, Tier 1 load and trajectory match an agent run recorded, the experiment
asks its own memory again under the changed policy (`recall_top_k`,
`tier1_cap`, `trajectory_min_similarity`, ...) from the recorded observation
(command and error, domain, goal); the lessons it would have recalled are the
ones whose use counts grow (so promotions follow), and each run's prompt items
— tips for the site and under errors, Tier 1, the reference trajectory, app
knowledge at `fact_prompt_min` (less the facts a tip restates), session history
at `session_history` and `session_full_detail` (the sessions the run continues),
step memories (REPEAT/AVOID, re-retrieved at each step prompt of a rep 2+ run
from the page and the goal's vector its step recorded, at `step_memory_min_similarity`, `step_memory_top`
and `step_memory_count`)
— are compared with reality's, by id and by the text the prompt shows: `prompts`
lists per run what would have been added, removed or changed. A recording the
real policy does not reproduce (an imported log, an error longer than its
300-character snippet, an agent that shows no step memories) is kept as
recorded and counted.
What cannot be simulated is said in the answer (`limits`): the agent's later
actions — every step, error, lesson and run after a changed prompt is replayed
as it happened, although an agent given another prompt may have acted otherwise.

Where memory was opened: at each real open (decision events of `on_open`'s
kinds that follow no observation of their own) and, when the log uses opens at
all (it holds seed lessons), at every `run_started` with memory enabled that
had no real open.

The replay is an `Experiment` (the two sides, the decisions each made, the
differences seen so far); its answer is an `ExperimentResult` (`as_json()` is
what `memtape experiment --json` prints).

Usage::

    result = run_experiment(store, {"promotion_min_uses": 3}, until=None)
    result.differences, result.decisions, result.timeline
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from pydantic import ValidationError

from memtape.analytics.forget_filter import Forgotten
from memtape.analytics.fork import resolve_seq
from memtape.analytics.tabular import Report, Table
from memtape.ledger.clock import normalize_ts
from memtape.ledger.envelope import NewEvent, RecordedEvent
from memtape.ledger.errors import LedgerError
from memtape.ledger.store import Store
from memtape.projections.decisions import DECISION_TYPES, decide, on_open
from memtape.projections.folds.credit import worth
from memtape.projections.folds.knowledge import current_facts, fact_line
from memtape.projections.folds.knowledge import for_prompt as prompt_facts
from memtape.projections.folds.lessons import TIER1_CATEGORIES, recall_payload
from memtape.projections.folds.sessions import continued, history_lines
from memtape.projections.folds.steps import on_page
from memtape.projections.parameters import DEFAULT_POLICY, Thresholds
from memtape.projections.replay import PolicyMemory, as_new, opens_run, run_seeds
from memtape.projections.view import MemoryView
from memtape.projections.writer import WRITER_PROJECTIONS

#: the policy step's projections, sessions and step memories (what prompts held)
EXPERIMENT_PROJECTIONS = (*WRITER_PROJECTIONS, "sessions", "step_memories")
#: recorded reads the experiment re-makes under its policy
REMADE = frozenset({"error_recall", "domain_recall", "tier1_loaded", "trajectory_recalled"})
LIMITS = (
    "Not simulated: the agent's later actions. Every step, error, lesson learned and run after a prompt "
    "that would have differed is replayed as it happened; an agent given the other prompt may have acted "
    "otherwise (another recovery, a replayed trajectory or none, more or fewer turns)."
)
AREAS = ("tier1", "tier2", "facts", "trajectories", "patterns")
#: the tables of `experiment_report`, the first being the main one
EXPERIMENT_SECTIONS = ("decisions", "timeline", "final", "sizes", "prompts", "limits")


def policy_parameters() -> Report:
    """Every parameter `--set` accepts: name, type, default, allowed range and what it does."""
    rows = []
    for name, info in Thresholds.model_fields.items():
        bounds = {k: getattr(m, k) for m in info.metadata for k in ("ge", "gt", "le") if hasattr(m, k)}
        kind = getattr(info.annotation, "__name__", str(info.annotation))
        if kind == "bool":
            allowed = "true or false"
        elif "le" in bounds:
            low = f"{bounds['ge']}" if "ge" in bounds else f"above {bounds['gt']}"
            allowed = f"{low} to {bounds['le']}"
        else:
            allowed = f">= {bounds['ge']}" if "ge" in bounds else f"> {bounds['gt']}" if "gt" in bounds else "any"
        rows.append((name, kind, info.default, allowed, info.description))
    return Report(
        "Policy parameters (memtape experiment --set NAME=VALUE)",
        {"parameters": Table(["name", "type", "default", "range", "meaning"], rows, "parameters")},
    )


def make_policy(base: Any, overrides: dict[str, Any]) -> Any:
    try:
        return type(base).model_validate({**base.model_dump(), **overrides})
    except ValidationError as exc:
        err = exc.errors()[0]
        name = ".".join(str(p) for p in err.get("loc", ()))
        raise LedgerError(
            f"policy parameter {name}={err.get('input')!r:.40}: {err.get('msg', 'invalid value')}"
        ) from None


def _as_recorded(new: NewEvent, seq: int, n: int, at: RecordedEvent) -> RecordedEvent:
    """A decision the experiment made, shaped like a stored event (seq = its trigger's)."""
    data = new.payload.model_dump(mode="json", exclude={"type", "schema_version"})
    occurred = normalize_ts(new.occurred_at) if new.occurred_at is not None else at.occurred_at
    return RecordedEvent(
        seq,
        f"experiment-{seq}-{n}",
        new.resolved_stream,
        0,
        new.type,
        new.payload.schema_version,
        at.recorded_at,
        occurred,
        new.run_id,
        new.step,
        new.domain,
        data,
        "",
        "",
        "",
    )


class Side(PolicyMemory):
    """One memory (reality or the experiment): the policy-relevant projections and their fold."""

    def __init__(self, policy: Any):
        super().__init__(policy, EXPERIMENT_PROJECTIONS)
        self.opened: set[str] = set()
        #: what the agent asks of this memory (Tier 1 in the view's own order)
        self.view = MemoryView(self.state, policy)

    def summary(self) -> dict[tuple[str, str], Any]:
        """What the comparison looks at: (area, item) -> value."""
        out: dict[tuple[str, str], Any] = {}
        for l in self.view.tier1():
            out[("tier1", l.lesson_id)] = True
        for l in self.state.lessons.lessons.values():
            if l.category not in TIER1_CATEGORIES:
                out[("tier2", l.lesson_id)] = True
        for facts in self.state.knowledge.current.values():
            for f in facts.values():
                out[("facts", f.fact_id)] = round(f.confidence, 9)
        for items in self.state.trajectories.by_domain.values():
            for t in items:
                out[("trajectories", t)] = True
        for pid in self.state.patterns.patterns:
            out[("patterns", pid)] = True
        return out


#: (source, item id) -> label, one run's prompt items
Items = dict[tuple[str, str], str]
#: (area or "lesson", item id) -> what the answer says of it (text, scope, domain, run)
Labels = dict[tuple[str, str], dict[str, Any]]


class Prompts:
    """What each agent run's prompts held of memory, in reality and in the experiment."""

    def __init__(self, real: Side, exp: Side, run_started: dict[str, RecordedEvent]):
        self.real_side, self.exp_side = real, exp
        self.real_view, self.exp_view = real.view, exp.view
        self.run_started = run_started
        self.real: dict[str, Items] = {}
        self.exp: dict[str, Items] = {}
        self.remade = 0
        self.kept_as_recorded = 0
        #: run id -> the runs of its session that started before it (its step memories' scope)
        self.earlier: dict[str, list[str]] = {}
        self._sessions: dict[str, list[str]] = {}
        #: (run id, step) -> the event ids of the step memories that step's prompt held
        self.shown_memories: dict[tuple[str, int], list[str]] = {}

    def _add(self, run_id: str, real: Items, exp: Items) -> None:
        self.real.setdefault(run_id, {}).update(real)
        self.exp.setdefault(run_id, {}).update(exp)

    def started(self, ev: RecordedEvent) -> None:
        """A run started: the runs of its session before it are its reps' step memory scope."""
        session = ev.data.get("session_id")
        if session and ev.run_id:
            self.earlier[ev.run_id] = list(self._sessions.get(session, ()))
            self._sessions.setdefault(session, []).append(ev.run_id)

    def built(self, ev: RecordedEvent) -> None:
        """A step prompt: the step memories it held (kept or trimmed), for its step to re-make."""
        if ev.data.get("prompt") != "system" and ev.run_id and ev.step is not None:
            self.shown_memories[(ev.run_id, ev.step)] = [
                i
                for item in [*(ev.data.get("items") or ()), *(ev.data.get("trimmed") or ())]
                if item.get("source") == "step_memories"
                for i in item.get("event_ids") or ()
            ]

    def step_memories(self, ev: RecordedEvent) -> None:
        """The step memories a rep 2+ run's prompt of this step held, re-retrieved on both sides
        from the page the step recorded, the run's goal and the goal's vector the step recorded
        (seed 002's retrieval, `on_page`)."""
        run_id = str(ev.run_id)
        recorded = self.shown_memories.pop((run_id, ev.step if ev.step is not None else -1), None)
        started = self.run_started[run_id]
        if recorded is None or not started.data.get("memory_enabled", True) or int(ev.data.get("rep", 1)) <= 1:
            return
        page = list((ev.data.get("env_before") or {}).get("elements") or ())
        scope = (
            None
            if (started.data.get("policy") or {}).get("step_memory_scope") == "all"
            else self.earlier.get(run_id, [])
        )

        vector = tuple(ev.data.get("internal_state_embedding") or ())  # the run's, when it had one

        def again(view: MemoryView) -> Items:
            found = view.step_memories(
                page,
                started.data.get("goal") or "",
                exclude_run=run_id,
                runs=scope,
                embedding=vector,
                embedding_model=ev.data.get("embedding_model"),
            )
            mems = on_page(found, page)
            return {
                ("step_memories", f"{m.run_id}#{m.step}"): f"{m.kind}: {m.action.get('command', '')} "
                f"{m.target_text or ''}".strip()
                for m in mems
            }

        real = again(self.real_view)
        ids = [i for key in real for i in self._memory_ids(key[1])]
        if list(dict.fromkeys(ids))[:64] != recorded:
            self.kept_as_recorded += 1
            return
        self.remade += 1
        self._add(run_id, real, again(self.exp_view))

    def _memory_ids(self, key: str) -> tuple[str, ...]:
        run_id, step = key.rsplit("#", 1)
        mem = self.real_side.state.step_memories.by_run.get(run_id, {}).get(step)
        return mem.event_ids if mem is not None else ()

    def remake(self, ev: RecordedEvent) -> RecordedEvent:
        """Note the prompt items of recorded read `ev` on both sides; return the read as the
        experiment would have made it (the event its memory folds)."""
        d, run_id = ev.data, str(ev.run_id)
        if ev.type == "trajectory_recalled":
            self._trajectory(ev, run_id)
            return ev
        source = {"error_recall": "error_tips", "domain_recall": "domain_tips", "tier1_loaded": "tier1"}[ev.type]

        def again(view: MemoryView) -> tuple[list[str], dict[str, Any]]:
            """The lesson ids the read returns on `view`, and the payload fields it would record."""
            if ev.type == "tier1_loaded":
                lessons = view.tier1()
                return [l.lesson_id for l in lessons], {
                    "lesson_ids": [l.lesson_id for l in lessons],
                    "lessons": [l.lesson for l in lessons],
                    "count": len(lessons),
                }
            if ev.type == "error_recall":
                matches = view.error_matches(d["command"], d["error_snippet"], ev.domain)
            else:
                matches = view.domain_matches(ev.domain or "")
            made = recall_payload(matches, worth(view.state.credit), pending="pending_ids" in d)
            if d.get("counted_ids") is None:  # a recall written before counted_ids counts every lesson it lists
                del made["counted_ids"]
            return made["lesson_ids"], made

        recorded = list(d.get("lesson_ids") or [])
        real = {(source, lid): text for lid, text in zip(recorded, d.get("lessons") or [])}
        if again(self.real_view)[0] != recorded:
            self.kept_as_recorded += 1
            self._add(run_id, real, real)
            exp = real
            out = ev
        else:
            self.remade += 1
            ids, made = again(self.exp_view)
            exp = {(source, lid): text for lid, text in zip(ids, made["lessons"])}
            self._add(run_id, real, exp)
            out = (
                ev
                if all(d.get(key) == value for key, value in made.items())
                else replace(ev, data={**d, **made}, _model=[])
            )
        if ev.type == "domain_recall" and ev.domain:
            self._site(ev.domain, run_id, list(real.values()), list(exp.values()))
        return out

    def _site(self, domain: str, run_id: str, real_tips: list[str], exp_tips: list[str]) -> None:
        """A domain change also brings the site's app knowledge (the facts a decision of the run's goal
        can act on, less what its tips restate: `knowledge.for_prompt`) and
        the history of the sessions the run continues."""
        d = self.run_started[run_id].data
        sides = []
        for side, tips in ((self.real_side, real_tips), (self.exp_side, exp_tips)):
            items: Items = {
                ("app_knowledge", f.fact_id): fact_line(f)
                for f in prompt_facts(
                    current_facts(side.state.knowledge, domain, side.policy.fact_prompt_min), d.get("goal") or "", tips
                )
            }
            sessions = continued(
                side.state.sessions.by_domain.get(domain, []),
                session_id=d.get("session_id") or run_id,
                parent_run_id=d.get("parent_run_id"),
                goal=d.get("goal") or "",
            )
            items.update(
                {
                    ("session_history", str(s.run_id)): line
                    for s, line in zip(sessions, history_lines(sessions, side.policy.session_full_detail))
                }
            )
            sides.append(items)
        self._add(run_id, *sides)

    def _trajectory(self, ev: RecordedEvent, run_id: str) -> None:
        d = ev.data
        real: Items = (
            {("reference_trajectory", d["trajectory_id"]): d.get("matched_goal") or ""}
            if d.get("trajectory_id")
            else {}
        )
        base = self.real_view.match_trajectory(d["goal"], ev.domain or "", ev.occurred_at)
        if (base.trajectory.trajectory_id if base else None) != d.get("trajectory_id"):
            self.kept_as_recorded += 1
            self._add(run_id, real, real)
            return
        self.remade += 1
        m = self.exp_view.match_trajectory(d["goal"], ev.domain or "", ev.occurred_at)
        self._add(run_id, real, {("reference_trajectory", m.trajectory.trajectory_id): m.trajectory.goal} if m else {})

    def changes(self, forgotten: Forgotten, labels: Labels) -> list[PromptChange]:
        """Per run, the prompt items only one side had, and those whose text differs (forgotten
        subjects left out)."""
        rows = []
        for run_id in self.real:
            if forgotten.run(run_id):
                continue
            a, b = self.real[run_id], self.exp.get(run_id, {})
            for change, mine, other in (("removed", a, b), ("added", b, a)):
                for (source, item), label in mine.items():
                    if (source, item) in other or _prompt_item_hidden(source, item, labels, forgotten):
                        continue
                    rows.append(PromptChange(run_id, change, source, item, label))
            for (source, item), label in a.items():
                if (
                    (source, item) in b
                    and b[(source, item)] != label
                    and not _prompt_item_hidden(source, item, labels, forgotten)
                ):
                    rows.append(PromptChange(run_id, "changed", source, item, b[(source, item)], was=label))
        return rows


def _prompt_item_hidden(source: str, item: str, labels: Labels, forgotten: Forgotten) -> bool:
    if source in ("error_tips", "domain_tips", "tier1"):
        return _hidden(("tier1", item), labels, forgotten)
    if source == "session_history":
        return forgotten.run(item)
    if source == "step_memories":
        return forgotten.run(item.rsplit("#", 1)[0])
    return _hidden(("facts" if source == "app_knowledge" else "trajectories", item), labels, forgotten)


def _decision_keys(ev: RecordedEvent | NewEvent, counter: dict[tuple[Any, ...], int]) -> list[tuple[Any, ...]]:
    """Stable identities of the things a decision decides (to match reality's and the experiment's)."""
    d = ev.data if isinstance(ev, RecordedEvent) else ev.payload.model_dump(mode="json")
    t = ev.type
    if t in ("lesson_promoted", "lesson_seeded") or t == "lesson_deduplicated":
        base = [(t, d["lesson_id"])]
    elif t == "lessons_pruned":
        base = [(t, lid) for lid in d.get("lesson_ids") or ()]
    elif t == "trajectories_expired":
        base = [(t, tid) for tid in d.get("trajectory_ids") or ()]
    elif t == "patterns_pruned":
        base = [(t, pid) for pid in d.get("pattern_ids") or ()]
    elif t == "facts_pruned":
        base = [
            (t, f.get("fact_id") or f"{f.get('domain')}|{f.get('fact_type')}|{f.get('key')}|{f.get('value')}")
            for f in d.get("facts") or ()
        ]
    elif t == "fact_contradicted":
        base = [(t, f"{ev.domain or ''}|{d['fact_type']}|{d['key']}|{d['new_value']}")]
    else:
        base = [(t, "")]
    out = []
    for key in base:
        n = counter.get(key, 0) + 1
        counter[key] = n
        out.append((*key, n))
    return out


@dataclass
class _Decisions:
    #: key -> (trigger seq, decision seq, summary)
    found: dict[tuple[Any, ...], tuple[int, int | None, str]] = field(default_factory=dict)
    counter: dict[tuple[Any, ...], int] = field(default_factory=dict)

    def add(self, ev: RecordedEvent | NewEvent, trigger: int, own_seq: int | None) -> None:
        for key in _decision_keys(ev, self.counter):
            self.found.setdefault(key, (trigger, own_seq, _describe(ev)))


def _describe(ev: RecordedEvent | NewEvent) -> str:
    d = ev.data if isinstance(ev, RecordedEvent) else ev.payload.model_dump(mode="json")
    t = ev.type
    if t == "lesson_promoted":
        return f"promote {d['lesson_id']} (use_count {d['use_count']}, {len(d['triggered_domains'])} domains)"
    if t == "fact_contradicted":
        return f"contradict {d['fact_type']}:{d['key']} -> {d['new_value']!r} (x{d['factor']})"
    if t == "facts_pruned":
        return f"prune {len(d['facts'])} fact(s) below {d['threshold']}"
    if t == "lessons_pruned":
        return f"prune {len(d['lesson_ids'])} lesson(s)"
    if t == "trajectories_expired":
        return f"expire {len(d['trajectory_ids'])} trajectory(ies)"
    if t == "patterns_pruned":
        return f"prune {len(d['pattern_ids'])} pattern(s) over {d['max_patterns']}"
    return f"{t} {d.get('lesson_id', '')}".strip()


def _opens_used(store: Store, until: int) -> bool:
    return any(True for _ in store.read(to_seq=until, types=["lesson_seeded"], batch=1))


@dataclass(frozen=True)
class DecisionChange:
    """A decision made at another point (or only on one side); seqs are the observations that caused it."""

    decision: str
    item: Any
    occurrence: int
    reality_seq: int | None
    reality_event_seq: int | None
    experiment_seq: int | None
    what: str
    label: str | None


@dataclass(frozen=True)
class TimelineChange:
    """At `seq`, an item's value on each side changed from what it was (`differs`: they now differ)."""

    seq: int
    area: str
    item: str
    reality: Any
    experiment: Any
    differs: bool
    label: str | None


@dataclass(frozen=True)
class PromptChange:
    """A prompt item one run's prompts held on one side only ("added", "removed"), or on both
    with another text ("changed": `label` is the experiment's, `was` reality's)."""

    run_id: str
    change: str
    source: str
    item: str
    label: str
    was: str | None = None


@dataclass(frozen=True)
class ChangedItem:
    item: str
    reality: Any
    experiment: Any


@dataclass
class AreaDifference:
    """How one area (tier1, tier2, facts, trajectories, patterns) differs at the end."""

    only_reality: list[str] = field(default_factory=list)
    only_experiment: list[str] = field(default_factory=list)
    changed: list[ChangedItem] = field(default_factory=list)


@dataclass(frozen=True)
class ExperimentResult:
    """The answer of an experiment; `as_json()` is what `memtape experiment --json` prints."""

    policy: dict[str, Any]
    policy_fingerprint: str
    until: int
    differences: int
    first_divergence_seq: int | None
    decisions: list[DecisionChange]
    timeline: list[TimelineChange]
    final: dict[str, AreaDifference]
    #: "reality" / "experiment" -> area -> items
    sizes: dict[str, dict[str, int]]
    prompts: list[PromptChange]
    prompt_runs: int
    recalls_remade: int
    recalls_kept_as_recorded: int
    limits: str

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


class Experiment:
    """One replay of the log up to a seq under a changed policy, beside reality (see module doc)."""

    def __init__(
        self,
        store: Store,
        overrides: dict[str, Any],
        until: int | str | None = None,
        real_policy: Thresholds | None = None,
    ):
        self.store = store
        self.overrides = overrides
        self.base = real_policy if real_policy is not None else DEFAULT_POLICY
        self.policy = make_policy(self.base, overrides)
        self.head = resolve_seq(store, until)
        self.opens = _opens_used(store, self.head)
        #: the seed lessons each run's memory was opened with (the experiment seeds as reality did)
        self.seeds = run_seeds(store, self.head)
        self.forgotten = Forgotten.scan(store, self.head)
        self.real, self.exp = Side(self.base), Side(self.policy)
        self.real_dec, self.exp_dec = _Decisions(), _Decisions()
        self.timeline: list[dict[str, Any]] = []
        #: (area, item) -> (reality, experiment) where they differ now
        self.current: dict[tuple[str, str], tuple[Any, Any]] = {}
        self.labels: Labels = {}
        self.run_started: dict[str, RecordedEvent] = {}
        self.prompts = Prompts(self.real, self.exp, self.run_started)
        self.pending: list[str] = []  # runs started with memory on whose opening is still to come
        self.open_at: dict[str, int] = {}
        #: a fold since the last comparison changed what the comparison looks at
        self.dirty = False
        self.last_obs = 0

    def run(self, progress: Callable[[int, int], None] | None = None) -> ExperimentResult:
        touches = set(self.real.table)
        prev: RecordedEvent | None = None
        for ev in self.store.read(to_seq=self.head):
            if progress is not None and ev.seq % 500 == 0:
                progress(ev.seq, self.head)
            if ev.type in DECISION_TYPES:
                self._reality_decided(ev, prev)
            else:
                self._flush_pending()
                self._compare(prev.seq if prev is not None else 0)
                self._observed(ev, touches)
            prev = ev
        self._flush_pending()
        self.dirty = True
        self._compare(self.head)
        return self._answer()

    def _reality_decided(self, ev: RecordedEvent, prev: RecordedEvent | None) -> None:
        if opens_run(ev, prev) and ev.run_id:
            rs = self.run_started.get(ev.run_id)
            trigger = rs.seq if rs is not None else self.open_at.setdefault(ev.run_id, ev.seq)
            self._open_exp(ev.run_id, ev.occurred_at, trigger, ev)
            self.real.opened.add(ev.run_id)
            self.real_dec.add(ev, trigger, ev.seq)
        else:
            self.real_dec.add(ev, self.last_obs, ev.seq)
        self.real.fold(ev)
        self.dirty = True

    def _observed(self, ev: RecordedEvent, touches: set[str]) -> None:
        self.last_obs = ev.seq
        seen = self.prompts.remake(ev) if ev.type in REMADE and ev.run_id in self.run_started else ev
        if ev.type == "context_built":
            self.prompts.built(ev)
        elif ev.type == "step_recorded" and ev.run_id in self.run_started:
            self.prompts.step_memories(ev)
        decisions = decide(self.exp.state, as_new(seen), self.policy)
        self.real.fold(ev)
        self.exp.fold(seen)
        for i, new in enumerate(decisions):
            self.exp_dec.add(new, ev.seq, None)
            self.exp.fold(_as_recorded(new, ev.seq, i, ev))
        if decisions or ev.type in touches:
            self.dirty = True
        if ev.type == "run_started" and ev.run_id:
            self.run_started[ev.run_id] = ev
            self.prompts.started(ev)
            if self.opens and ev.data.get("memory_enabled", True) and ev.run_id not in self.real.opened:
                self.pending.append(ev.run_id)

    def _label(self, side: Side) -> None:
        labels = self.labels
        for l in side.state.lessons.lessons.values():
            labels.setdefault(("lesson", l.lesson_id), {"text": l.lesson, "scope_domain": l.scope_domain})
        for facts in side.state.knowledge.current.values():
            for f in facts.values():
                labels.setdefault(
                    ("facts", f.fact_id), {"text": f"{f.domain} {f.fact_type}:{f.key}={f.value}", "domain": f.domain}
                )
        for items in side.state.trajectories.by_domain.values():
            for t in items.values():
                labels.setdefault(
                    ("trajectories", t.trajectory_id),
                    {"text": f"{t.domain}: {t.goal}", "domain": t.domain, "run_id": t.run_id},
                )
        for pat in side.state.patterns.patterns.values():
            labels.setdefault(
                ("patterns", pat.pattern_id),
                {"text": f"{pat.domain}: {pat.description}", "domain": pat.domain, "run_id": pat.first_run},
            )

    def _compare(self, at: int) -> None:
        if not self.dirty:
            return
        self.dirty = False
        a, b = self.real.summary(), self.exp.summary()
        now = {k: (a.get(k), b.get(k)) for k in a.keys() | b.keys() if a.get(k) != b.get(k)}
        if now or self.current:
            self._label(self.real)
            self._label(self.exp)
        for key in sorted(self.current.keys() | now.keys()):
            if self.current.get(key) != now.get(key):
                va, vb = now.get(key, (a.get(key), b.get(key)))
                self.timeline.append(
                    {"seq": at, "area": key[0], "item": key[1], "reality": va, "experiment": vb, "differs": key in now}
                )
        self.current = now

    def _open_exp(self, run_id: str, started_at: str, trigger: int, at: RecordedEvent) -> None:
        if run_id in self.exp.opened:
            return
        self.exp.opened.add(run_id)
        for i, new in enumerate(on_open(self.exp.state, run_id, started_at, self.policy, self.seeds.get(run_id))):
            self.exp_dec.add(new, trigger, None)
            self.exp.fold(_as_recorded(new, at.seq, 1000 + i, at))
            self.dirty = True

    def _flush_pending(self) -> None:
        for rid in self.pending:
            if rid not in self.real.opened:
                rs = self.run_started[rid]
                self._open_exp(rid, rs.occurred_at, rs.seq, rs)
        self.pending.clear()

    def _answer(self) -> ExperimentResult:
        labels, forgotten = self.labels, self.forgotten
        for side in (self.real, self.exp):
            for l in side.state.lessons.lessons.values():
                labels.setdefault(("lesson", l.lesson_id), {"text": l.lesson, "scope_domain": l.scope_domain})
        prompt_rows = self.prompts.changes(forgotten, labels)
        decisions = []
        for key in sorted(self.real_dec.found.keys() | self.exp_dec.found.keys(), key=lambda k: tuple(map(str, k))):
            r, e = self.real_dec.found.get(key), self.exp_dec.found.get(key)
            if r is not None and e is not None and r[0] == e[0]:
                continue
            if key[0] == "fact_contradicted":
                about = ("facts", "")
                hidden = forgotten.domain(str(key[1]).split("|")[0])
            else:
                about = _decision_item(key)
                hidden = _hidden(about, labels, forgotten)
            made = e or r
            if hidden or made is None:
                continue
            decisions.append(
                DecisionChange(
                    key[0],
                    key[1],
                    key[2],
                    r[0] if r else None,
                    r[1] if r else None,
                    e[0] if e else None,
                    made[2],
                    labels.get(about, {}).get("text"),
                )
            )
        rows = [
            TimelineChange(
                **row,
                label=labels.get(
                    ("lesson", row["item"]) if row["area"] in ("tier1", "tier2") else (row["area"], row["item"]), {}
                ).get("text"),
            )
            for row in self.timeline
            if not _hidden((row["area"], row["item"]), labels, forgotten)
        ]
        final = {a: AreaDifference() for a in AREAS}
        for (area, item), (va, vb) in sorted(self.current.items()):
            if _hidden((area, item), labels, forgotten):
                continue
            if vb is None:
                final[area].only_reality.append(item)
            elif va is None:
                final[area].only_experiment.append(item)
            else:
                final[area].changed.append(ChangedItem(item, va, vb))
        sizes = {}
        for name, side in (("reality", self.real), ("experiment", self.exp)):
            summ = side.summary()
            sizes[name] = {
                a: sum(1 for (ar, item) in summ if ar == a and not _hidden((ar, item), labels, forgotten))
                for a in AREAS
            }
        seqs = [r.seq for r in rows if r.differs]
        for d in decisions:
            at = d.experiment_seq or d.reality_seq
            if at is not None:
                seqs.append(at)
        first = min(seqs, default=None)
        return ExperimentResult(
            policy=self.overrides,
            policy_fingerprint=self.policy.fingerprint(),
            until=self.head,
            differences=len(decisions) + len(rows) + len(prompt_rows),
            first_divergence_seq=first,
            decisions=decisions,
            timeline=rows,
            final=final,
            sizes=sizes,
            prompts=prompt_rows,
            prompt_runs=len({r.run_id for r in prompt_rows}),
            recalls_remade=self.prompts.remade,
            recalls_kept_as_recorded=self.prompts.kept_as_recorded,
            limits=LIMITS,
        )


def run_experiment(
    store: Store,
    overrides: dict[str, Any],
    until: int | str | None = None,
    real_policy: Thresholds | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ExperimentResult:
    """Replay observations 1..until under the changed policy (see module doc)."""
    return Experiment(store, overrides, until, real_policy).run(progress)


def _hidden(key: tuple[str, str], labels: Labels, forgotten: Forgotten) -> bool:
    """Items of forgotten subjects never appear in the answer."""
    area, item = key
    if area in ("tier1", "tier2", "lesson"):
        info = labels.get(("lesson", item), {})
        return item in forgotten.lessons or forgotten.domain(info.get("scope_domain"))
    info = labels.get(key, {})
    return forgotten.domain(info.get("domain")) or forgotten.run(info.get("run_id"))


def _decision_item(key: tuple[Any, ...]) -> tuple[str, str]:
    t, item = key[0], str(key[1])
    if t in ("lesson_promoted", "lesson_seeded", "lesson_deduplicated", "lessons_pruned"):
        return ("lesson", item)
    if t == "trajectories_expired":
        return ("trajectories", item)
    if t == "patterns_pruned":
        return ("patterns", item)
    return ("facts", item)


def experiment_report(result: ExperimentResult) -> Report:
    """The experiment answer as tables (for --format and the HTML report)."""
    decisions = Table.from_records(
        [asdict(d) for d in result.decisions],
        ["decision", "item", "occurrence", "reality_seq", "reality_event_seq", "experiment_seq", "what", "label"],
    )
    timeline = Table.from_records(
        [asdict(r) for r in result.timeline], ["seq", "area", "item", "reality", "experiment", "differs", "label"]
    )
    final_rows = []
    for area, parts in result.final.items():
        for item in parts.only_reality:
            final_rows.append({"area": area, "item": item, "difference": "only in reality"})
        for item in parts.only_experiment:
            final_rows.append({"area": area, "item": item, "difference": "only in the experiment"})
        for ch in parts.changed:
            final_rows.append(
                {
                    "area": area,
                    "item": ch.item,
                    "difference": f"{ch.reality} in reality, {ch.experiment} in the experiment",
                }
            )
    sizes = Table.from_records(
        [{"area": a, "reality": result.sizes["reality"][a], "experiment": result.sizes["experiment"][a]} for a in AREAS]
    )
    prompts = Table.from_records(
        [asdict(p) for p in result.prompts], ["run_id", "change", "source", "item", "label", "was"]
    )
    limits = Table.from_records(
        [
            {
                "recalls re-made": result.recalls_remade,
                "kept as recorded": result.recalls_kept_as_recorded,
                "not simulated": result.limits,
            }
        ]
    )
    changed = ", ".join(f"{k}={v}" for k, v in result.policy.items()) or "the default policy"
    title = f"Experiment with {changed} up to seq {result.until}: {result.differences} difference(s)" + (
        f", first at seq {result.first_divergence_seq}" if result.first_divergence_seq else ""
    )
    tables = (
        decisions,
        timeline,
        Table.from_records(final_rows, ["area", "item", "difference"]),
        sizes,
        prompts,
        limits,
    )
    return Report(title, dict(zip(EXPERIMENT_SECTIONS, tables)))
