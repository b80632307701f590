"""App knowledge (seed 000): typed domain facts with confidence, bitemporal.

A new fact starts at `fact_initial_confidence` (0.6); observing a value that
is already current confirms it (c += 0.2·(1−c), never a duplicate). A
different value is a contradiction: the `fact_contradicted` decision halves
every current fact of that (type, key) and the new value is added. Facts that
fall below 0.1 are pruned by a `facts_pruned` decision, which *closes* them
(valid_to set) instead of deleting them: "current" queries leave them out,
history keeps them. A `subject_forgotten` deletes facts outright: those of a
domain, those a forgotten run or session first saw, or one fact by its id. valid_from/valid_to are occurred (valid) time;
recorded_at is when the ledger learned the fact.

A prompt shows a fact as `fact_line`, and only a fact that can change the
decision (`for_prompt`): not one a site tip or a learned pattern already says
(`restated`), not another task's field, not what the browser handles itself.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from memtape.ledger.credentials import QUOTED
from memtape.ledger.envelope import RecordedEvent, constructor
from memtape.ledger.field_rules import INT64_MAX
from memtape.projections.text import (
    add_event_id,
    build,
    domain_matches,
    evolve,
    fenced,
    forgotten_runs,
    goal_names,
)

#: the keys of the facts the bundled agent records itself (`recording.learning.observe_facts`)
FILL_FAILS = "fill fails on "  # then the field's name
SHADOW_DOM = "shadow DOM"
LOAD_TIME = "load time "  # then the page's path

TYPES = ("fact_observed", "fact_contradicted", "facts_pruned", "subject_forgotten")


@dataclass(frozen=True, slots=True)
class Fact:
    fact_id: str
    domain: str
    fact_type: str
    key: str
    value: str
    confidence: float
    sources: int
    valid_from: str
    valid_to: str | None
    recorded_at: str
    last_seen: str
    closed: bool
    event_ids: tuple[str, ...]
    #: the run that first observed it (its value came from that run's pages)
    first_run: str | None = None


_fact = constructor(Fact)


@dataclass
class KnowledgeState:
    #: domain -> fact_id -> current fact
    current: dict[str, dict[str, Fact]] = field(default_factory=dict)
    #: domain -> closed facts, in the order they were closed
    closed: dict[str, list[Fact]] = field(default_factory=dict)


def empty() -> KnowledgeState:
    return KnowledgeState()


def fact_id_for(domain: str, fact_type: str, key: str, value: str) -> str:
    body = orjson.dumps([domain, fact_type, key, value])
    return "fact_" + hashlib.sha256(body).hexdigest()[:16]


def apply(state: KnowledgeState, ev: RecordedEvent, policy: Any) -> KnowledgeState:
    """Fold one event into the knowledge state (in place; returns it)."""
    t, d = ev.type, ev.data
    domain = ev.domain or ""
    if t == "fact_observed":
        facts = state.current.setdefault(domain, {})
        fid = fact_id_for(domain, d["fact_type"], d["key"], d["value"])
        old = facts.get(fid)
        if old is not None:
            c = old.confidence + policy.fact_confirm_rate * (1.0 - old.confidence)
            facts[fid] = evolve(
                old,
                confidence=c,
                sources=min(old.sources + 1, INT64_MAX),
                last_seen=ev.occurred_at,
                event_ids=add_event_id(old.event_ids, ev.id),
            )
        else:
            conf = d.get("confidence")
            facts[fid] = _fact(
                fact_id=fid,
                domain=domain,
                fact_type=d["fact_type"],
                key=d["key"],
                value=d["value"],
                confidence=float(conf) if conf is not None else policy.fact_initial_confidence,
                sources=int(d.get("sources") or 1),
                valid_from=ev.occurred_at,
                valid_to=None,
                recorded_at=ev.recorded_at,
                last_seen=ev.occurred_at,
                closed=False,
                event_ids=(ev.id,),
                first_run=ev.run_id,
            )
    elif t == "fact_contradicted":
        facts = state.current.get(domain, {})
        old_values = set(d.get("old_values") or ())
        factor = float(d["factor"])
        for fid, f in list(facts.items()):
            if (
                f.fact_type == d["fact_type"]
                and f.key == d["key"]
                and f.value != d["new_value"]
                and (not old_values or f.value in old_values)
            ):
                facts[fid] = evolve(f, confidence=f.confidence * factor, event_ids=add_event_id(f.event_ids, ev.id))
    elif t == "facts_pruned":
        for item in d.get("facts") or ():
            fdomain = item.get("domain", domain) or ""
            fid = item.get("fact_id") or fact_id_for(
                fdomain, item.get("fact_type", ""), item.get("key", ""), item.get("value", "")
            )
            held = state.current.get(fdomain)
            pruned = held.pop(fid, None) if held is not None else None
            if pruned is not None:
                state.closed.setdefault(fdomain, []).append(
                    evolve(
                        pruned, valid_to=ev.occurred_at, closed=True, event_ids=add_event_id(pruned.event_ids, ev.id)
                    )
                )
    elif t == "subject_forgotten" and d["subject_kind"] == "domain":
        for dom in [k for k in state.current if domain_matches(k, d["subject"])]:
            del state.current[dom]
        for dom in [k for k in state.closed if domain_matches(k, d["subject"])]:
            del state.closed[dom]
    elif t == "subject_forgotten" and d["subject_kind"] == "fact":
        _drop_facts(state, lambda f: f.fact_id == d["subject"])
    elif t == "subject_forgotten" and d["subject_kind"] in ("run", "session"):
        runs = forgotten_runs(d)
        _drop_facts(state, lambda f: f.first_run in runs)
    return state


def _drop_facts(state: KnowledgeState, gone: Callable[[Fact], bool]) -> None:
    """Remove the facts `gone` picks, current and closed, and the domains left without any."""
    for dom, facts in list(state.current.items()):
        for fid in [fid for fid, f in facts.items() if gone(f)]:
            del facts[fid]
        if not facts:
            del state.current[dom]
    for dom, closed in list(state.closed.items()):
        kept = [f for f in closed if not gone(f)]
        if kept:
            state.closed[dom] = kept
        else:
            del state.closed[dom]


#: how projections/cache/intervals.py files this state (field -> depth)
LAYOUT = {"current": 2, "closed": 1}


def touched(state: KnowledgeState, ev: RecordedEvent) -> list[tuple[str, ...]] | None:
    """The paths `apply` may change for this event (None: any)."""
    d, domain = ev.data, ev.domain or ""
    if ev.type == "fact_observed":
        return [("current", domain, fact_id_for(domain, d["fact_type"], d["key"], d["value"]))]
    if ev.type == "fact_contradicted":
        return [("current", domain)]
    if ev.type == "facts_pruned":
        doms = {item.get("domain", domain) or "" for item in d.get("facts") or ()}
        return [p for dom in sorted(doms) for p in (("current", dom), ("closed", dom))]
    return None


def confidence_order(f: Fact) -> tuple[float, str, str, str]:
    """Where a fact sits among its domain's current facts: most confident first, then by text."""
    return (-f.confidence, f.fact_type, f.key, f.value)


def current_facts(
    state: KnowledgeState, domain: str, min_confidence: float | None = None, include_closed: bool = False
) -> list[Fact]:
    """Current facts of one domain, most confident first (closed ones appended on request)."""
    facts = [
        f for f in state.current.get(domain, {}).values() if min_confidence is None or f.confidence >= min_confidence
    ]
    facts.sort(key=confidence_order)
    if include_closed:
        facts.extend(state.closed.get(domain, []))
    return facts


def fact_line(f: Fact) -> str:
    """A fact as APP KNOWLEDGE lists it (seed 000): type, key, value and confidence."""
    return f"- {f.fact_type}: {fenced(f.key, 80)}: {fenced(f.value, 160)} (confidence {f.confidence:.2f})"


def restated(fact: Fact, tips: Iterable[str], patterns: Iterable[Any] = ()) -> bool:
    """Whether one of `tips`, or one of the learned `patterns` a prompt shows, already says what
    `fact` says: it quotes (a pattern: acts on) every element the fact quotes (at least one).
    `blocking overlay: button "Accept all cookies" must be clicked first` restates the site tip
    that says to click "Accept all cookies" first; `auth flow: fill "Username" → fill "Password" →
    click "Sign in"` restates the login flow that fills and clicks them; a fact that quotes
    nothing (a timing, a quirk of a named field) is never taken for either."""
    names = set(QUOTED.findall(f"{fact.key} {fact.value}"))
    return bool(names) and (
        any(names <= set(QUOTED.findall(tip)) for tip in tips)
        or any(names <= {s.get("name") for s in p.steps} for p in patterns)
    )


def fill_fails_key(field_name: str) -> str:
    """The key of the quirk the bundled agent records for a field where `fill` fails (`fill fails
    on Display name`), and reads back to click the field and type instead."""
    return f"{FILL_FAILS}{field_name}"


def for_prompt(facts: Iterable[Fact], goal: str, tips: Iterable[str], patterns: Iterable[Any] = ()) -> list[Fact]:
    """The facts an APP KNOWLEDGE section shows to an agent whose tools take element refs and whose
    browser waits for each page to load (the bundled agent), in their order: each fact that can
    change one of its decisions for `goal`. Left out: a fact a site tip or a shown learned pattern
    restates (`restated`); a field's quirk (`fill fails on X`) when the goal does not name the field
    (`text.goal_names`: another task's field); and what the browser already handles, as known
    selectors are left out for tools that take refs: `shadow DOM` (a ref reaches into a shadow root)
    and a page's `load time` the agent measured (every action waits for the page it opens). A fact
    of any other kind or key (another agent's, imported) is shown."""
    tips, patterns = list(tips), list(patterns)
    out = []
    for f in facts:
        if (
            restated(f, tips, patterns)
            or f.key == SHADOW_DOM
            or (f.fact_type == "timing" and f.key.startswith(LOAD_TIME))
        ):
            continue
        if f.fact_type == "quirk" and f.key.startswith(FILL_FAILS) and not goal_names(goal, f.key[len(FILL_FAILS) :]):
            continue
        out.append(f)
    return out


def decode(raw: dict[str, Any]) -> KnowledgeState:
    def fact(row: dict[str, Any]) -> Fact:
        return build(Fact, row, event_ids=tuple(row["event_ids"]))

    return KnowledgeState(
        current={dom: {fid: fact(r) for fid, r in facts.items()} for dom, facts in raw.get("current", {}).items()},
        closed={dom: [fact(r) for r in facts] for dom, facts in raw.get("closed", {}).items()},
    )


def tables(state: KnowledgeState) -> dict[str, list[dict[str, Any]]]:
    rows = []
    for facts in [*(list(v.values()) for v in state.current.values()), *state.closed.values()]:
        for f in facts:
            rows.append(
                {
                    "fact_id": f.fact_id,
                    "domain": f.domain,
                    "fact_type": f.fact_type,
                    "key": f.key,
                    "value": f.value,
                    "confidence": f.confidence,
                    "sources": f.sources,
                    "valid_from": f.valid_from,
                    "valid_to": f.valid_to,
                    "recorded_at": f.recorded_at,
                    "last_seen": f.last_seen,
                    "closed": int(f.closed),
                    "event_ids": orjson.dumps(f.event_ids).decode(),
                }
            )
    return {"facts": rows}
