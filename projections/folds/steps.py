"""Graded step memories (seed 002): every step with env before/after, graded later.

Retrieval (`retrieve`) finds graded memories of *other* runs taken in a state like the
current one. Two similarities, each in [0, 1] (`projections/similarity.py`: TF-IDF cosine
over word and character 3-grams, deterministic, no service):

- page: the elements' roles and names before the step against the current page's, so a
  reworded page (Basket/Remove for Cart/Delete) or a few extra links still match;
- intent: the step's internal state and reasoning (`internal_state`, `think`) against the
  current task; when both sides carry an embedding of the same model (Trayn's
  `internalStateEmbedding`, recorded in the event), the cosine of the two vectors instead.

The score is their weighted geometric mean, page^0.65 x intent^0.35: the page weighs most,
but a step matches only where the task does too, so the same page under an unrelated task
does not bring back a mistake that was one only for the other task (nor does a perfect
intent make up for another page). Memories scoring at least
`step_memory_min_similarity` are ranked by score (ties: run, step), the best
`step_memory_top` kept, deduplicated by action signature (the best kept), and the best
`step_memory_count` offered — with at least one REPEAT (success) and one AVOID (failure)
when both kinds matched and two or more are offered (seed 002's example shows one of each).
A prompt shows those whose target is on the current page (`on_page`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from memtape.ledger.envelope import RecordedEvent, constructor
from memtape.projections.similarity import embedding_similarity, page_similarity, text_similarity
from memtape.projections.text import add_event_id, build, domain_matches, evolve

TYPES = ("run_started", "step_recorded", "step_graded", "subject_forgotten")
#: the weights of the page and the intent in a memory's score (a weighted geometric mean)
PAGE_WEIGHT, INTENT_WEIGHT = 0.65, 0.35


@dataclass(frozen=True, slots=True)
class StepMemory:
    run_id: str
    step: int
    env_before: dict[str, Any]
    env_after: dict[str, Any]
    action: dict[str, Any]
    target_text: str | None
    outcome: str  # pending | success | failure
    reason: str | None
    correction: str | None
    page_similarity: float
    intent_similarity: float
    score: float
    event_ids: tuple[str, ...]
    intent: str = ""
    rep: int = 1
    domain: str = ""
    think: str = ""
    #: Trayn's internalStateEmbedding as recorded, and the model that made it
    embedding: tuple[float, ...] = ()
    embedding_model: str | None = None

    @property
    def kind(self) -> str:
        """REPEAT for a step graded success, AVOID for a failure (seed 002's prompt format)."""
        return "REPEAT" if self.outcome == "success" else "AVOID"

    @property
    def signature(self) -> str:
        """The action with its target: two clicks on one page differ by the element they clicked,
        even when the step names it only as its target (no `ref` among the arguments)."""
        return action_signature(self.action, self.env_before.get("url", ""), self.target_text or "")

    @property
    def intents(self) -> tuple[str, ...]:
        """The texts the intent similarity compares: the internal state and the reasoning."""
        return (self.intent,) if self.think in ("", self.intent) else (self.intent, self.think)


def action_signature(action: dict[str, Any], url: str, target: str = "") -> str:
    """Seed 003's action signature: tool, sorted parameters and URL, hashed; with the step's
    target when it has one (seed 002's deduplication)."""
    return signature(*action_parts(action), url, target)


def action_parts(action: dict[str, Any]) -> tuple[str, str]:
    """The action's tool and its parameters as canonical JSON (sorted keys): what its signature
    hashes and short-term memory counts (encoded once a step for both)."""
    return action.get("command", ""), orjson.dumps(action.get("args") or {}, option=orjson.OPT_SORT_KEYS).decode()


def signature(command: str, args: str, url: str, target: str = "") -> str:
    """`action_signature` of an action given as its `action_parts`."""
    body = ":".join((command, args, url, target) if target else (command, args, url))
    return hashlib.md5(body.encode()).hexdigest()[:16]


_step_memory = constructor(StepMemory)


@dataclass
class StepsState:
    #: run_id -> str(step) -> memory, in recording order
    by_run: dict[str, dict[str, StepMemory]] = field(default_factory=dict)
    #: run_id -> session_id, so that forgetting a session forgets its runs' steps
    session_of: dict[str, str] = field(default_factory=dict)


def empty() -> StepsState:
    return StepsState()


def apply(state: StepsState, ev: RecordedEvent, policy: Any = None) -> StepsState:
    """Fold one event (in place; returns the state)."""
    d = ev.data
    if ev.type == "run_started":
        if ev.run_id and d.get("session_id"):
            state.session_of[ev.run_id] = d["session_id"]
    elif ev.type == "step_recorded" and ev.run_id:
        steps = state.by_run.setdefault(ev.run_id, {})
        step = ev.step if ev.step is not None else len(steps)
        intent = d.get("internal_state") or d.get("think") or d.get("target_text") or ""
        steps[str(step)] = _step_memory(
            run_id=ev.run_id,
            step=step,
            env_before=d.get("env_before") or {},
            env_after=d.get("env_after") or {},
            action=d["action"],
            target_text=d.get("target_text"),
            outcome="pending",
            reason=None,
            correction=None,
            page_similarity=0.0,
            intent_similarity=0.0,
            score=0.0,
            event_ids=(ev.id,),
            intent=intent,
            rep=int(d.get("rep", 1)),
            domain=ev.domain or "",
            think=d.get("think") or "",
            embedding=tuple(d.get("internal_state_embedding") or ()),
            embedding_model=d.get("embedding_model"),
        )
    elif ev.type == "step_graded" and ev.run_id:
        mem = state.by_run.get(ev.run_id, {}).get(str(ev.step))
        if mem is not None:
            state.by_run[ev.run_id][str(ev.step)] = evolve(
                mem,
                outcome=d["outcome"],
                reason=d.get("reason"),
                correction=d.get("correction"),
                event_ids=add_event_id(mem.event_ids, ev.id),
            )
    elif ev.type == "subject_forgotten":
        kind, subject = d["subject_kind"], d["subject"]
        if kind == "run":
            state.by_run.pop(subject, None)
            state.session_of.pop(subject, None)
        elif kind == "session":
            for rid in [r for r, s in state.session_of.items() if s == subject]:
                state.by_run.pop(rid, None)
                del state.session_of[rid]
        elif kind == "domain":
            for rid in list(state.by_run):
                steps = state.by_run[rid]
                for k in [k for k, m in steps.items() if domain_matches(m.domain, subject)]:
                    del steps[k]
                if not steps:
                    del state.by_run[rid]
    return state


#: how projections/cache/intervals.py files this state (field -> depth)
LAYOUT = {"by_run": 2, "session_of": 1}


def touched(state: StepsState, ev: RecordedEvent) -> list[tuple[str, ...]] | None:
    """The paths `apply` may change for this event (None: any)."""
    if ev.type == "run_started":
        return [("session_of", ev.run_id)] if ev.run_id else []
    if ev.type == "step_recorded" and ev.run_id:
        return [("by_run", ev.run_id, str(ev.step if ev.step is not None else len(state.by_run.get(ev.run_id, ()))))]
    if ev.type == "step_graded":
        return [("by_run", ev.run_id, str(ev.step))] if ev.run_id else []
    return None


def retrieve(
    memories: Iterable[StepMemory],
    elements: list[str],
    intent: str,
    exclude_run: str | None,
    policy: Any,
    embedding: Sequence[float] = (),
    embedding_model: str | None = None,
) -> list[StepMemory]:
    """Seed 002's retrieval over candidate memories (see the module docstring); `embedding` is the
    current intent's vector by `embedding_model`, when the agent has one."""
    if not elements or not intent.strip():
        return []
    scored: list[StepMemory] = []
    for m in memories:
        if m.outcome == "pending" or m.run_id == exclude_run:
            continue
        before = m.env_before.get("elements") or ()
        if not before:
            continue
        page = page_similarity(elements, before)
        vectors = embedding_similarity(embedding, m.embedding) if m.embedding_model == embedding_model else None
        isim = vectors if vectors is not None else text_similarity((intent,), m.intents)
        score = page**PAGE_WEIGHT * isim**INTENT_WEIGHT
        if score < policy.step_memory_min_similarity or score == 0:
            continue
        scored.append(evolve(m, page_similarity=page, intent_similarity=isim, score=score))
    scored.sort(key=lambda m: (-m.score, m.run_id, m.step))
    seen: set[str] = set()
    unique = []
    for m in scored[: policy.step_memory_top]:
        sig = m.signature
        if sig not in seen:
            seen.add(sig)
            unique.append(m)
    return offered(unique, policy.step_memory_count)


def offered(ranked: list[StepMemory], count: int) -> list[StepMemory]:
    """The best `count` of `ranked` (best first); when two or more are offered and both kinds are
    among `ranked`, the best of the missing kind takes the last place (one REPEAT and one AVOID
    at the default of two, as seed 002's example shows)."""
    chosen = ranked[:count]
    if count >= 2:
        for kind in ("REPEAT", "AVOID"):
            if not any(m.kind == kind for m in chosen):
                best = next((m for m in ranked if m.kind == kind), None)
                if best is not None:
                    chosen = sorted([*chosen[:-1], best], key=lambda m: (-m.score, m.run_id, m.step))
    return chosen


def on_page(memories: Iterable[StepMemory], elements: Iterable[str]) -> list[StepMemory]:
    """The memories a prompt shows on a page whose elements are `role:name` identities (as the
    bundled agent records them): REPEAT or AVOID an element only where that element is, by its
    name; an action without a target (goto, wait, finish) is about the page itself."""
    names = {e.split(":", 1)[1] for e in elements if ":" in e}
    return [m for m in memories if not m.target_text or m.target_text in names]


def decode(raw: dict[str, Any]) -> StepsState:
    return StepsState(
        by_run={
            rid: {
                k: build(StepMemory, r, event_ids=tuple(r["event_ids"]), embedding=tuple(r.get("embedding") or ()))
                for k, r in steps.items()
            }
            for rid, steps in raw.get("by_run", {}).items()
        },
        session_of=dict(raw.get("session_of", {})),
    )


def tables(state: StepsState) -> dict[str, list[dict[str, Any]]]:
    rows = [
        {
            "run_id": m.run_id,
            "step": m.step,
            "domain": m.domain,
            "rep": m.rep,
            "env_before": orjson.dumps(m.env_before).decode(),
            "env_after": orjson.dumps(m.env_after).decode(),
            "action": orjson.dumps(m.action).decode(),
            "target_text": m.target_text,
            "intent": m.intent,
            "outcome": m.outcome,
            "reason": m.reason,
            "correction": m.correction,
            "event_ids": orjson.dumps(m.event_ids).decode(),
        }
        for steps in state.by_run.values()
        for m in steps.values()
    ]
    return {"step_memories": rows}
