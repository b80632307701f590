"""Which events, and which parts of them, an analytics answer must leave out after `subject_forgotten`.

The analytics mirror (mirror.py) stores events only as `Forgotten.shown` gives
them, so this is the one place analytics decides what forget hides (no SQL
repeats it): events about a forgotten run, session, domain (with its
subdomains, as `projections.text.domain_matches` says) or lesson are hidden,
except the events that name lessons (`projections.mentions`), which — as in the
lessons projection, where a universal lesson survives the forgetting of a place
it was used — stay with their run, step and domain masked and the forgotten
subjects taken out of their payload. The runs a forget takes along are the ones
the runs projection drops (`projections.runs.covered`), and a lesson event's id
is the one the lessons projection gives it (`projections.lessons.lesson_id_in`).

Usage::

    forgotten = Forgotten.scan(store)
    if forgotten.hides(ev): ...
    shown = forgotten.shown(ev)     # None, or (run_id, step, domain, payload) as answers may show them
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from memledger.ledger.events import RecordedEvent
from memledger.ledger.store import Store
from memledger.projections import mentions
from memledger.projections.lessons import lesson_id_in, removed_by
from memledger.projections.runs import covered
from memledger.projections.text import domain_matches

#: the events that name lessons: they survive the forgetting of the run or domain where they happened (masked)
LESSON_TYPES = frozenset((*mentions.LESSON_TYPES, *mentions.RECALL_TYPES))
#: where a recall keeps how many lessons it returned, beside `lesson_ids`
_COUNTS = {"error_recall": "matched", "domain_recall": "matched", "tier1_loaded": "count"}


def lesson_id_of(ev: RecordedEvent) -> str | None:
    """The lesson an event is about; an empty id means the one its dedup key gives (as in the projection).
    Payloads are read upcast, so a v1 `lesson_recorded`'s scope is `scope_domain` too."""
    if ev.type in ("lesson_recorded", "lesson_seeded", "lesson_deduplicated"):
        return lesson_id_in(ev.data)
    return ev.data.get("lesson_id") or None


@dataclass
class Forgotten:
    domains: set[str] = field(default_factory=set)
    runs: set[str] = field(default_factory=set)
    sessions: set[str] = field(default_factory=set)
    lessons: set[str] = field(default_factory=set)

    @classmethod
    def scan(cls, store: Store, to_seq: int | None = None) -> "Forgotten":
        """Read the forget events (and the runs they take with them) from a store."""
        f = cls.from_events(store.read(to_seq=to_seq, types=["subject_forgotten"]))
        if f.domains or f.sessions:
            f.add_runs(store.read(to_seq=to_seq, types=["run_started"]))
        return f

    @classmethod
    def from_events(cls, events: Iterable[RecordedEvent]) -> "Forgotten":
        f = cls()
        for ev in events:
            if ev.type != "subject_forgotten":
                continue
            kind, subject = ev.data["subject_kind"], ev.data["subject"]
            {"domain": f.domains, "run": f.runs, "session": f.sessions, "lesson": f.lessons}[kind].add(
                subject.lower() if kind == "domain" else subject)
        return f

    def add_runs(self, run_started: Iterable[RecordedEvent]) -> None:
        """The runs a forgotten session or domain takes along, as the runs projection drops them."""
        subjects = [*(("session", s) for s in self.sessions), *(("domain", d) for d in self.domains)]
        for ev in run_started:
            if ev.type == "run_started" and ev.run_id and any(
                    covered(kind, subject, ev.run_id, ev.data.get("session_id"), ev.domain) for kind, subject in subjects):
                self.runs.add(ev.run_id)

    def __bool__(self) -> bool:
        return bool(self.domains or self.runs or self.sessions or self.lessons)

    def domain(self, host: str | None) -> bool:
        """Is this host forgotten (itself or as a subdomain of a forgotten domain)?"""
        return any(domain_matches(host, d) for d in self.domains)

    def run(self, run_id: str | None) -> bool:
        return bool(run_id) and run_id in self.runs

    def lesson_removed(self, lesson_id: str | None, scope_domain: str | None) -> bool:
        """A forget removed this lesson from the lessons projection (`lessons.removed_by`)."""
        return any(removed_by(kind, subject, lesson_id, scope_domain) for kind, subjects in
                   (("lesson", self.lessons), ("domain", self.domains)) for subject in subjects)

    def masks(self, ev: RecordedEvent) -> bool:
        """The event's run, step and domain must not be shown."""
        return self.run(ev.run_id) or self.domain(ev.domain)

    def hides(self, ev: RecordedEvent) -> bool:
        """The event must not appear at all."""
        if ev.type == "subject_forgotten":
            return True
        d = ev.data
        scope = d.get("scope_domain")
        if (self.lessons or self.domains) and self.lesson_removed(lesson_id_of(ev) if self.lessons else None,
                                                                  scope if isinstance(scope, str) else None):
            return True
        if ev.type == "session_recorded" and d.get("session_id") in self.sessions:
            return True
        return self.masks(ev) and ev.type not in LESSON_TYPES

    def where(self, ev: RecordedEvent) -> tuple[str | None, int | None, str | None]:
        """(run_id, step, domain) of an event as an answer may show them."""
        if self.masks(ev):
            return None, None, None
        return ev.run_id, ev.step, ev.domain

    def domains_shown(self, domains: Iterable[str]) -> list[str]:
        return [d for d in domains if not self.domain(d)]

    def shown(self, ev: RecordedEvent) -> tuple[str | None, int | None, str | None, dict[str, Any]] | None:
        """The event as an answer may show it — None when hidden, else its run, step, domain (masked
        when they are forgotten) and its payload without forgotten subjects: forgotten lessons out of
        `lesson_ids` (with their texts, the count following), forgotten domains out of
        `triggered_domains`, and the error text of a recall made in a forgotten run or domain."""
        if self.hides(ev):
            return None
        data = ev.data
        if not self:
            return ev.run_id, ev.step, ev.domain, data
        data = dict(data)
        ids = data.get("lesson_ids")
        if isinstance(ids, list) and any(lid in self.lessons for lid in ids):
            texts = data.get("lessons")
            keep = [i for i, lid in enumerate(ids) if lid not in self.lessons]
            data["lesson_ids"] = [ids[i] for i in keep]
            if isinstance(texts, list) and len(texts) == len(ids):
                data["lessons"] = [texts[i] for i in keep]
            if ev.type in _COUNTS:
                data[_COUNTS[ev.type]] = len(keep)
        if isinstance(data.get("triggered_domains"), list):
            data["triggered_domains"] = self.domains_shown(data["triggered_domains"])
        masked = self.masks(ev)
        if masked and "error_snippet" in data:
            data["error_snippet"] = ""
        run_id, step, domain = (None, None, None) if masked else (ev.run_id, ev.step, ev.domain)
        return run_id, step, domain, data
