"""The context store (seed 003's ContextStore): user context given to a run, context
inferred during execution (with its source), and the extraction cache.

User context belongs to the run it was given to; inferred context to the domain
where it was inferred (a later run on the site sees it too). A prompt gets all
of the run's user context and the inferred context relevant to its goal
(`for_prompt`), placed by the context budget's priority; relevance retrieval
(`relevant`, seed 003's `get_relevant_context`) scores an entry by how many
words of its key and value the goal shares, function words aside. The
extraction cache keeps the latest extraction per key; whether it is still
fresh is a read-time rule on occurred time (`fresh_extraction`), so the fold
stays pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from memtape.ledger.envelope import RecordedEvent
from memtape.projections.similarity import STOP_WORDS
from memtape.projections.text import add_event_id, build, domain_matches, evolve, forgotten_runs, older_than, words

TYPES = (
    "run_started",
    "context_given",
    "context_inferred",
    "extraction_recorded",
    "extraction_served",
    "subject_forgotten",
)
SECONDS_PER_DAY = 86400.0


@dataclass(frozen=True, slots=True)
class ContextEntry:
    kind: str  # user | inferred | extraction
    key: str
    value: str
    source: str
    run_id: str | None
    domain: str
    occurred_at: str
    event_ids: tuple[str, ...]
    session_id: str | None = None
    #: extractions only: where it came from, what the page linked to, how often it was served from memory
    url: str = ""
    title: str = ""
    links: tuple[dict[str, str], ...] = ()
    section_count: int = 0
    served_count: int = 0


@dataclass
class ContextState:
    #: "kind\x1fscope\x1fkey" -> entry (scope: the run for user context, the domain otherwise)
    entries: dict[str, ContextEntry] = field(default_factory=dict)
    #: run_id -> session_id, so that forgetting a session forgets its runs' context
    session_of: dict[str, str] = field(default_factory=dict)


def empty() -> ContextState:
    return ContextState()


def _slot(kind: str, scope: str, key: str) -> str:
    return f"{kind}\x1f{scope}\x1f{key}"


def apply(state: ContextState, ev: RecordedEvent, policy: Any = None) -> ContextState:
    """Fold one event (in place; returns the state)."""
    d, t = ev.data, ev.type
    domain = ev.domain or ""
    if t == "run_started":
        if ev.run_id and d.get("session_id"):
            state.session_of[ev.run_id] = d["session_id"]
    elif t in ("context_given", "context_inferred"):
        kind = "user" if t == "context_given" else "inferred"
        slot = _slot(kind, (ev.run_id or "") if kind == "user" else domain, d["key"])
        state.entries[slot] = ContextEntry(
            kind=kind,
            key=d["key"],
            value=d["value"],
            source=d.get("source") or "user",
            run_id=ev.run_id,
            domain=domain,
            occurred_at=ev.occurred_at,
            event_ids=(ev.id,),
            session_id=state.session_of.get(ev.run_id or ""),
        )
    elif t == "extraction_recorded":
        state.entries[_slot("extraction", "", d["key"])] = ContextEntry(
            kind="extraction",
            key=d["key"],
            value=d.get("text", ""),
            source=d["tool"],
            run_id=ev.run_id,
            domain=domain,
            occurred_at=ev.occurred_at,
            event_ids=(ev.id,),
            session_id=state.session_of.get(ev.run_id or ""),
            url=d.get("url", ""),
            title=d.get("title", ""),
            links=tuple(d.get("links") or ()),
            section_count=int(d.get("section_count", 0)),
        )
    elif t == "extraction_served":
        slot = _slot("extraction", "", d["key"])
        old = state.entries.get(slot)
        if old is not None:
            state.entries[slot] = evolve(
                old, served_count=old.served_count + 1, event_ids=add_event_id(old.event_ids, ev.id)
            )
    elif t == "subject_forgotten":
        kind, subject = d["subject_kind"], d["subject"]
        runs = forgotten_runs(d) if kind in ("run", "session") else set()
        if kind == "session":
            runs |= {r for r, s in state.session_of.items() if s == subject}
        for slot in [
            k
            for k, e in state.entries.items()
            if (kind == "domain" and domain_matches(e.domain, subject)) or (e.run_id in runs)
        ]:
            del state.entries[slot]
        for r in runs:
            state.session_of.pop(r, None)
    return state


def entries(state: ContextState, run_id: str | None = None, domain: str | None = None) -> list[ContextEntry]:
    """Every entry (user, inferred, extraction), in recording order, filtered by run and domain."""
    return [
        e
        for e in state.entries.values()
        if (run_id is None or e.run_id == run_id) and (domain is None or domain_matches(e.domain, domain))
    ]


def _shared_words(goal_words: frozenset[str], e: ContextEntry) -> int:
    """How many words of an entry's key and value the goal has, function words aside (a
    `with` in both says nothing about either)."""
    return len(goal_words & words(f"{e.key} {e.value}"))


def relevant(state: ContextState, goal: str, run_id: str | None, domain: str | None) -> list[ContextEntry]:
    """Seed 003's get_relevant_context: the run's user context and the domain's inferred context
    whose key or value shares words with the goal, most shared words first (then recording order)."""
    goal_words = words(goal) - STOP_WORDS
    scored = []
    for i, e in enumerate(state.entries.values()):
        if (
            e.kind == "user"
            and e.run_id == run_id
            or e.kind == "inferred"
            and domain
            and domain_matches(e.domain, domain)
        ):
            score = _shared_words(goal_words, e)
            if score:
                scored.append((-score, i, e))
    return [e for _, _, e in sorted(scored, key=lambda x: (x[0], x[1]))]


def for_prompt(state: ContextState, run_id: str | None, domain: str | None, goal: str) -> list[ContextEntry]:
    """What a prompt's context section holds (seed 003's `format_for_prompt` of the context store):
    all of the run's user context (the user's own constraints: no word of it need be in the goal),
    then the site's inferred context relevant to `goal` (seed 003's `get_relevant_context`: its key
    or value shares a word with the goal, function words aside) under keys the user did not give
    (given context wins, as `get_all` has it), each in recording order. What a page showed about
    its site (`pagination_type`, `login_required`) changes no decision of a task that names none
    of it, so it stays out of that task's prompts. Whether it fits is the budget's call, by the
    section's priority."""
    given = [e for e in state.entries.values() if e.kind == "user" and e.run_id == run_id]
    keys = {e.key for e in given}
    goal_words = words(goal) - STOP_WORDS
    inferred = [
        e
        for e in state.entries.values()
        if e.kind == "inferred"
        and e.key not in keys
        and domain
        and domain_matches(e.domain, domain)
        and _shared_words(goal_words, e)
    ]
    return given + inferred


def fresh_extraction(state: ContextState, key: str, now: str, ttl_seconds: float) -> ContextEntry | None:
    """The cached extraction for `key` when it is at most `ttl_seconds` old at `now` (occurred time)."""
    e = state.entries.get(_slot("extraction", "", key))
    if e is None or older_than(e.occurred_at, now, ttl_seconds / SECONDS_PER_DAY):
        return None
    return e


def decode(raw: dict[str, Any]) -> ContextState:
    return ContextState(
        entries={
            k: build(ContextEntry, r, event_ids=tuple(r["event_ids"]), links=tuple(r["links"]))
            for k, r in raw.get("entries", {}).items()
        },
        session_of=dict(raw.get("session_of", {})),
    )


def tables(state: ContextState) -> dict[str, list[dict[str, Any]]]:
    return {
        "context": [
            {
                "slot": k.replace("\x1f", "|"),
                "kind": e.kind,
                "key": e.key,
                "value": e.value,
                "source": e.source,
                "run_id": e.run_id,
                "domain": e.domain,
                "occurred_at": e.occurred_at,
                "url": e.url,
                "title": e.title,
                "links": orjson.dumps(e.links).decode(),
                "section_count": e.section_count,
                "served_count": e.served_count,
                "event_ids": orjson.dumps(e.event_ids).decode(),
            }
            for k, e in state.entries.items()
        ]
    }
