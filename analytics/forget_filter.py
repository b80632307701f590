"""Which events, and which parts of them, an analytics answer must leave out after `subject_forgotten`.

The analytics mirror (mirror.py) stores events only as `Forgotten.shown` gives
them, so this is the one place analytics decides what forget hides (no SQL
repeats it). A forget acts where it stands in the log, as every projection
folds it: it removes what memory held before it, and what is learned after it
is new. So an event is hidden when a later forget covers it: events about a
forgotten run, session, domain (with its subdomains, as
`projections.text.domain_matches` says) or lesson — except the events that
name lessons (`projections.cache.mentions`), which, as in the lessons projection
where a universal lesson survives the forgetting of a place it was used, stay
with their run, step and domain masked and the forgotten subjects taken out of
their payload. The runs a forget takes along are the ones the runs projection
drops (`projections.folds.runs.covered`, for the runs started before it), a lesson
event's id is the one the lessons projection gives it
(`projections.folds.lessons.lesson_id_in`), and the lessons a forget removes are the
ones the lessons fold removes (`lessons.apply`, asked by `removed_lessons`): a
lesson recorded without a scope but merged into one scoped to the forgotten
domain goes with it.

Knowledge is not decided by subject at all: the knowledge fold keeps a fact
another run first saw when a forgotten run confirmed it, and drops a fact a
forgotten run first saw along with every later confirmation of it. Which facts
a forget removes is asked of the fold itself (`projections.folds.knowledge.apply`
over the log's fact events, `FactsForgotten`): a fact event is hidden when every
fact it changed was later removed by a forget (of a domain, a run, a session or
the fact itself, by id), and a `facts_pruned` that stays loses the removed facts
from its payload; the credit measured for a forgotten fact or lesson
(`item_credited`) is hidden with it.

Usage::

    forgotten = Forgotten.scan(store)
    if forgotten.hides(ev): ...
    shown = forgotten.shown(ev)     # None, or (run_id, step, domain, payload) as answers may show them
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from memtape.ledger.envelope import RecordedEvent
from memtape.ledger.store import Store
from memtape.projections.cache import mentions
from memtape.projections.folds import knowledge, lessons
from memtape.projections.folds.knowledge import Fact, KnowledgeState
from memtape.projections.folds.lessons import lesson_id_in
from memtape.projections.folds.runs import covered
from memtape.projections.parameters import DEFAULT_POLICY, Thresholds
from memtape.projections.text import domain_matches

#: the events that name lessons: they survive the forgetting of the run or domain where they happened (masked)
LESSON_TYPES = frozenset((*mentions.LESSON_TYPES, *mentions.RECALL_TYPES))
#: the events the knowledge fold reads, but the forget itself
FACT_TYPES = frozenset(mentions.FACT_TYPES)
#: the fact events that name other facts in their payload: a shown one loses those a forget removed
_NAMES_FACTS = ("facts_pruned", "fact_contradicted")
#: where a recall keeps how many lessons it returned, beside `lesson_ids`
_COUNTS = {"error_recall": "matched", "domain_recall": "matched", "tier1_loaded": "count"}
#: the text a prompt item is shown with when part of it came from a hidden event
FORGOTTEN_TEXT = "[forgotten]"
#: the lists of prompt items a `context_built` keeps (each item names the events it came from)
_PROMPT_ITEMS = ("items", "trimmed")

FactKey = tuple[str, str]  # (domain, fact_id)


def lesson_id_of(ev: RecordedEvent) -> str | None:
    """The lesson an event is about; an empty id means the one its dedup key gives (as in the projection).
    Payloads are read upcast, so a v1 `lesson_recorded`'s scope is `scope_domain` too."""
    if ev.type in ("lesson_recorded", "lesson_seeded", "lesson_deduplicated"):
        return lesson_id_in(ev.data)
    return ev.data.get("lesson_id") or None


def fact_changes(
    state: KnowledgeState, ev: RecordedEvent, policy: Thresholds
) -> tuple[list[tuple[FactKey, Fact, bool]], dict[FactKey, Fact]]:
    """Fold `ev` into `state` (knowledge) and say what it did to the current facts: those it made
    or changed (key, the fact now, whether it is new) and those it removed (as they were)."""
    paths = knowledge.touched(state, ev)
    before = _current_facts(state, paths)
    knowledge.apply(state, ev, policy)
    after = _current_facts(state, paths)
    changed = [(key, f, key not in before) for key, f in after.items() if before.get(key) is not f]
    return changed, {key: f for key, f in before.items() if key not in after}


def _current_facts(state: KnowledgeState, paths: list[tuple[str, ...]] | None) -> dict[FactKey, Fact]:
    """The current facts an event may change (`knowledge.touched`'s paths; None: all of them)."""
    out: dict[FactKey, Fact] = {}
    for path in paths if paths is not None else [("current", dom) for dom in state.current]:
        if path[0] != "current":
            continue
        facts = state.current.get(path[1], {})
        if len(path) == 3:
            if path[2] in facts:
                out[(path[1], path[2])] = facts[path[2]]
        else:
            out.update(((path[1], fid), f) for fid, f in facts.items())
    return out


def fact_of(item: dict[str, Any], domain: str | None) -> FactKey:
    """The fact a `facts_pruned` item names, as the knowledge fold finds it."""
    dom = item.get("domain", domain) or ""
    return dom, item.get("fact_id") or knowledge.fact_id_for(
        dom, item.get("fact_type", ""), item.get("key", ""), item.get("value", "")
    )


def value_fact(domain: str | None, data: dict[str, Any], value: str) -> FactKey:
    """The fact a contradiction's value (one of `old_values`, or `new_value`) is, as the knowledge fold keys it."""
    dom = domain or ""
    return dom, knowledge.fact_id_for(dom, data.get("fact_type", ""), data.get("key", ""), value)


def removed_lessons(events: Iterable[RecordedEvent]) -> dict[str, int]:
    """Lesson id -> the seq of the last forget that removed it, by folding the lessons projection."""
    state = lessons.empty()
    out: dict[str, int] = {}
    for ev in events:
        held = set(state.lessons) if ev.type == "subject_forgotten" else None
        lessons.apply(state, ev, DEFAULT_POLICY)
        if held is not None:
            out.update((lid, ev.seq) for lid in held - state.lessons.keys())
    return out


@dataclass
class FactsForgotten:
    """What the forgets took from knowledge, by folding the log's fact events and forgets: each fact,
    from the event that made it until it is gone, is one life; a forget that removes it (whether
    current or closed) forgets that life, and with it every event that changed it."""

    #: seq -> the lives of facts the event changed
    changed: dict[int, list[tuple[int, FactKey]]] = field(default_factory=dict)
    #: the lives a forget ended
    forgotten: set[int] = field(default_factory=set)
    #: seq of a contradiction -> the life of the fact holding its new value then
    named: dict[int, int] = field(default_factory=dict)

    @classmethod
    def fold(cls, events: Iterable[RecordedEvent]) -> FactsForgotten:
        out = cls()
        state = knowledge.empty()
        live: dict[FactKey, int] = {}  # current fact -> its life
        closed: dict[int, tuple[Fact, int]] = {}  # id of a closed fact -> (it, its life)
        lives = 0
        for ev in events:
            if ev.type == "subject_forgotten":
                knowledge.apply(state, ev, DEFAULT_POLICY)
                for key in list(live):
                    if key[1] not in state.current.get(key[0], {}):
                        out.forgotten.add(live.pop(key))
                kept = {id(f) for facts in state.closed.values() for f in facts}
                for ref in [ref for ref in closed if ref not in kept]:
                    out.forgotten.add(closed.pop(ref)[1])
                continue
            if ev.type == "fact_contradicted":
                named = live.get(value_fact(ev.domain, ev.data, ev.data.get("new_value", "")))
                if named is not None:
                    out.named[ev.seq] = named
            made, removed = fact_changes(state, ev, DEFAULT_POLICY)
            changed = out.changed.setdefault(ev.seq, [])
            for key, _, new in made:
                if new:
                    lives += 1
                    live[key] = lives
                changed.append((live[key], key))
            for key in removed:
                life = live.pop(key)
                changed.append((life, key))
                gone = next((f for f in reversed(state.closed.get(key[0], [])) if f.fact_id == key[1]), None)
                if gone is not None:
                    closed[id(gone)] = (gone, life)
        return out

    def hides(self, seq: int) -> bool:
        """Every fact this event changed was later forgotten (an event that changed none is not decided here)."""
        lives = self.changed.get(seq, [])
        return bool(lives) and all(life in self.forgotten for life, _ in lives)

    def lost(self, seq: int) -> set[FactKey]:
        """The facts this event changed that a later forget removed."""
        return {key for life, key in self.changed.get(seq, ()) if life in self.forgotten}

    def names_lost(self, seq: int) -> bool:
        """This contradiction's new value is a fact a later forget removed."""
        return self.named.get(seq) in self.forgotten


@dataclass
class Forgotten:
    """The subjects forgotten, each with the seq of its latest forget: an event before it is covered."""

    domains: dict[str, int] = field(default_factory=dict)
    runs: dict[str, int] = field(default_factory=dict)
    sessions: dict[str, int] = field(default_factory=dict)
    lessons: dict[str, int] = field(default_factory=dict)
    #: facts forgotten one by one, by fact id
    fact_ids: dict[str, int] = field(default_factory=dict)
    #: the fact events and forgets up to the last forget that can take facts, read when first needed
    #: (None: no fact can have been forgotten); an event after that forget is not asked about
    fact_events: Callable[[], Iterable[RecordedEvent]] | None = None
    facts_until: int = 0
    #: the same for lessons (forgets of a lesson or a domain)
    lesson_events: Callable[[], Iterable[RecordedEvent]] | None = None
    lessons_until: int = 0
    #: the trajectories recorded up to the last forget of a run, session or domain (read when first needed)
    trajectory_events: Callable[[], Iterable[RecordedEvent]] | None = None
    #: an event by id, to ask whether a prompt item's origin is hidden (None: ids are unknown here)
    lookup: Callable[[str], RecordedEvent | None] | None = None
    _facts: FactsForgotten | None = None
    _lessons: dict[str, int] | None = None
    _trajectories: set[str] | None = None
    #: ids of the hidden events `shown` met, and the seq up to which it met every event (in log
    #: order from seq 1, as a rebuild of the mirror reads them): an origin there needs no lookup
    _hidden_ids: set[str] = field(default_factory=set)
    _met_to: int = 0
    #: origins looked up: event id -> hidden
    _origins: dict[str, bool] = field(default_factory=dict)

    @classmethod
    def scan(cls, store: Store, to_seq: int | None = None) -> Forgotten:
        """Read the forget events (and the runs they take with them) from a store."""
        f = cls.from_events(store.read(to_seq=to_seq, types=["subject_forgotten"]))
        f.lookup = store.get
        if f.domains or f.sessions:
            f.add_runs(store.read(to_seq=to_seq, types=["run_started"]))
        if f.domains or f.runs or f.sessions or f.fact_ids:
            f.facts_until = max((*f.domains.values(), *f.runs.values(), *f.sessions.values(), *f.fact_ids.values()))
            f.fact_events = lambda: store.read(to_seq=f.facts_until, types=list(knowledge.TYPES))
        if f.domains or f.runs or f.sessions:
            f.trajectory_events = lambda: store.read(to_seq=f.facts_until, types=["trajectory_recorded"])
        if f.domains or f.lessons:
            f.lessons_until = max((*f.domains.values(), *f.lessons.values()))
            f.lesson_events = lambda: store.read(to_seq=f.lessons_until, types=list(lessons.TYPES))
        return f

    @classmethod
    def from_events(cls, events: Iterable[RecordedEvent]) -> Forgotten:
        f = cls()
        for ev in events:
            if ev.type != "subject_forgotten":
                continue
            kind, subject = ev.data["subject_kind"], ev.data["subject"]
            {"domain": f.domains, "run": f.runs, "session": f.sessions, "lesson": f.lessons, "fact": f.fact_ids}[kind][
                subject.lower() if kind == "domain" else subject
            ] = ev.seq
        return f

    def add_runs(self, run_started: Iterable[RecordedEvent]) -> None:
        """The runs a forgotten session or domain takes along, as the runs projection drops them:
        the ones started before the forget."""
        subjects = [
            *(("session", s, at) for s, at in self.sessions.items()),
            *(("domain", d, at) for d, at in self.domains.items()),
        ]
        for ev in run_started:
            if ev.type != "run_started" or not ev.run_id:
                continue
            at = max(
                (
                    at
                    for kind, subject, at in subjects
                    if ev.seq < at and covered(kind, subject, ev.run_id, ev.data.get("session_id"), ev.domain)
                ),
                default=None,
            )
            if at is not None and at > self.runs.get(ev.run_id, 0):
                self.runs[ev.run_id] = at

    def __bool__(self) -> bool:
        return bool(self.domains or self.runs or self.sessions or self.lessons or self.fact_ids)

    def domain(self, host: str | None, seq: int = 0) -> bool:
        """Is this host forgotten (itself or as a subdomain of a forgotten domain) by a forget after `seq`?"""
        return any(seq < at and domain_matches(host, d) for d, at in self.domains.items())

    def run(self, run_id: str | None, seq: int = 0) -> bool:
        """Is this run forgotten by a forget after `seq`?"""
        return bool(run_id) and seq < self.runs.get(run_id or "", 0)

    def lesson(self, lesson_id: str | None, seq: int = 0) -> bool:
        """Did a forget after `seq` remove this lesson from the lessons projection (itself, or its
        scope's domain)?"""
        if lesson_id is None or self.lesson_events is None or seq >= self.lessons_until:
            return False
        if self._lessons is None:
            self._lessons = removed_lessons(self.lesson_events())
        return seq < self._lessons.get(lesson_id, 0)

    def credit_forgotten(self, data: dict[str, Any], seq: int) -> bool:
        """An `item_credited` measured a fact or a lesson a later forget removed: as the credit
        fold drops it, its worth (and the item's text) is not shown."""
        forgets = {"fact": self.fact_ids, "lesson": self.lessons}.get(str(data.get("kind")), {})
        return seq < forgets.get(str(data.get("item")), 0)

    def facts(self) -> FactsForgotten:
        """What the forgets took from knowledge (folded once, when first asked)."""
        if self._facts is None:
            self._facts = FactsForgotten.fold(self.fact_events() if self.fact_events is not None else ())
        return self._facts

    def masks(self, ev: RecordedEvent) -> bool:
        """The event's run, step and domain must not be shown."""
        return self.run(ev.run_id, ev.seq) or self.domain(ev.domain, ev.seq)

    def hides(self, ev: RecordedEvent) -> bool:
        """The event must not appear at all."""
        if ev.type == "subject_forgotten":
            return True
        if ev.type in FACT_TYPES and ev.seq < self.facts_until and self.facts().changed.get(ev.seq):
            return self.facts().hides(ev.seq)
        d = ev.data
        if self.lesson_events is not None and self.lesson(lesson_id_of(ev), ev.seq):
            return True
        if ev.type == "item_credited" and self.credit_forgotten(d, ev.seq):
            return True
        if ev.type == "session_recorded" and ev.seq < self.sessions.get(d.get("session_id") or "", 0):
            return True
        return self.masks(ev) and ev.type not in LESSON_TYPES

    def where(self, ev: RecordedEvent) -> tuple[str | None, int | None, str | None]:
        """(run_id, step, domain) of an event as an answer may show them. A fact event that stays
        keeps its domain unless the domain is forgotten: the facts it changed are shown with it."""
        if ev.type in FACT_TYPES and not self.domain(ev.domain, ev.seq):
            return (None, None, ev.domain) if self.run(ev.run_id, ev.seq) else (ev.run_id, ev.step, ev.domain)
        if self.masks(ev):
            return None, None, None
        return ev.run_id, ev.step, ev.domain

    def origin_hidden(self, event_id: str, seq: int) -> bool:
        """Is the event `event_id` (before `seq`) hidden?"""
        if self._met_to >= seq - 1:
            return event_id in self._hidden_ids
        if event_id not in self._origins:
            ev = self.lookup(event_id) if self.lookup is not None else None
            self._origins[event_id] = ev is not None and self.hides(ev)
        return self._origins[event_id]

    def trajectory(self, trajectory_id: str | None) -> bool:
        """Was this trajectory recorded by a run, or on a domain, a later forget covers?"""
        if not trajectory_id or self.trajectory_events is None:
            return False
        if self._trajectories is None:
            self._trajectories = {
                str(ev.data.get("trajectory_id")) for ev in self.trajectory_events() if self.hides(ev)
            }
        return trajectory_id in self._trajectories

    def item_forgotten(self, event_ids: Iterable[str], seq: int) -> bool:
        """A prompt item (of the `context_built` at `seq`) came, at least in part, from a hidden event:
        its text and origins are not shown (a forgotten run's goal in a later run's session history)."""
        return bool(self) and any(self.origin_hidden(eid, seq) for eid in event_ids)

    def stream(self, ev: RecordedEvent) -> str | None:
        """The event's stream as an answer may show it: none when its run or domain is masked (a
        run's stream is named after it, `run-<run_id>`)."""
        return None if self and self.masks(ev) else ev.stream

    def domains_shown(self, domains: Iterable[str], seq: int = 0) -> list[str]:
        return [d for d in domains if not self.domain(d, seq)]

    def shown(self, ev: RecordedEvent) -> tuple[str | None, int | None, str | None, dict[str, Any]] | None:
        """The event as an answer may show it — None when hidden, else its run, step, domain (masked
        when they are forgotten) and its payload without forgotten subjects: forgotten lessons out of
        `lesson_ids` (with their texts, the count following), forgotten domains out of
        `triggered_domains`, forgotten facts out of `facts_pruned` (and their values out of a
        contradiction's `old_values` and `new_value`), the error text of a recall
        made in a forgotten run or domain, the text of a prompt item that came from a hidden
        event, the forgotten trajectory a recall matched and a forgotten run a run resumed or
        forked. Called in log order from seq 1, it remembers the hidden events it met (a prompt
        item's origins are then not looked up)."""
        hidden = self.hides(ev)
        if hidden and self:
            self._hidden_ids.add(ev.id)
        if ev.seq == self._met_to + 1:
            self._met_to = ev.seq
        if hidden:
            return None
        data = ev.data
        if not self:
            return ev.run_id, ev.step, ev.domain, data
        data = dict(data)
        if ev.type == "trajectory_recalled" and self.trajectory(data.get("trajectory_id")):
            data["trajectory_id"], data["matched_goal"] = None, FORGOTTEN_TEXT
        if ev.type == "run_started" and self.run(data.get("parent_run_id")):
            data["parent_run_id"] = None
        if ev.type == "context_built":
            for part in _PROMPT_ITEMS:
                if isinstance(data.get(part), list):
                    data[part] = [
                        {**item, "text": FORGOTTEN_TEXT, "event_ids": []}
                        if isinstance(item, dict) and self.item_forgotten(item.get("event_ids") or (), ev.seq)
                        else item
                        for item in data[part]
                    ]
        ids = data.get("lesson_ids")
        if isinstance(ids, list) and any(self.lesson(lid, ev.seq) for lid in ids):
            texts = data.get("lessons")
            keep = [i for i, lid in enumerate(ids) if not self.lesson(lid, ev.seq)]
            data["lesson_ids"] = [ids[i] for i in keep]
            if isinstance(texts, list) and len(texts) == len(ids):
                data["lessons"] = [texts[i] for i in keep]
            if ev.type in _COUNTS:
                data[_COUNTS[ev.type]] = len(keep)
            for listed in ("counted_ids", "pending_ids"):
                if isinstance(data.get(listed), list):
                    data[listed] = [lid for lid in data[listed] if not self.lesson(lid, ev.seq)]
        if isinstance(data.get("triggered_domains"), list):
            data["triggered_domains"] = self.domains_shown(data["triggered_domains"], ev.seq)
        if ev.type in _NAMES_FACTS and ev.seq < self.facts_until:
            lost = self.facts().lost(ev.seq)
            if ev.type == "facts_pruned":
                data["facts"] = [item for item in data.get("facts") or () if fact_of(item, ev.domain) not in lost]
            else:  # a contradiction names the values it contradicted, and the one that contradicted them
                data["old_values"] = [
                    value for value in data.get("old_values") or () if value_fact(ev.domain, data, value) not in lost
                ]
                if self.facts().names_lost(ev.seq):
                    data["new_value"] = ""
        if "error_snippet" in data and self.masks(ev):
            data["error_snippet"] = ""
        return (*self.where(ev), data)
