"""Credit: what each memory item was worth, by counterfactual (`item_credited` events).

Each `item_credited` says what one item was worth to one run; the latest credit of an (item, run)
pair replaces an earlier one (credit asked again after a fix is not counted twice). An item's
credit sums its runs: decisions shown and changed, turns and tokens saved, runs whose success it
changed. Its `credit` is the outcome it bought: successes saved first, then turns saved; positive,
zero or negative, and None for an item never credited (so promotion, use counts and pruning can
tell "measured worthless" from "not measured").

Forgetting a lesson or a fact drops its credit; forgetting a run drops the credit measured on it; forgetting a
domain drops the credit of runs on it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from memtape.ledger.envelope import RecordedEvent
from memtape.projections.text import add_event_id, build, covered_runs, domain_matches

TYPES = ("item_credited", "subject_forgotten")


@dataclass(frozen=True, slots=True)
class RunCredit:
    """One item's worth to one run (the latest `item_credited` of the pair)."""

    item: str
    kind: str
    text: str
    credited_run: str
    method: str
    shown: int
    changed: int
    turns_saved: int
    tokens_saved: int
    success_changed: bool
    success_saved: int
    evidence_runs: tuple[str, ...]
    domain: str
    occurred_at: str
    event_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ItemCredit:
    """An item's credit over every run it was credited on."""

    item: str
    kind: str
    text: str
    shown: int
    changed: int
    turns_saved: int
    tokens_saved: int
    success_changed: int
    success_saved: int
    method: str
    runs: tuple[str, ...]
    evidence_runs: tuple[str, ...]
    #: when the item was first credited (occurred time): pruning counts its 90 days from here
    first_credited: str

    @property
    def credit(self) -> int:
        """The sign of what the item bought (`sign_of`)."""
        return sign_of(self.success_saved, self.turns_saved)


@dataclass
class CreditState:
    #: item -> credited run -> its credit, items and runs in the order first credited
    by_item: dict[str, dict[str, RunCredit]] = field(default_factory=dict)


def empty() -> CreditState:
    return CreditState()


def apply(state: CreditState, ev: RecordedEvent, policy: Any = None) -> CreditState:
    """Fold one event (in place; returns the state)."""
    d, t = ev.data, ev.type
    if t == "item_credited":
        runs = state.by_item.setdefault(d["item"], {})
        old = runs.get(d["credited_run"])
        runs[d["credited_run"]] = RunCredit(
            item=d["item"],
            kind=d["kind"],
            text=d.get("text") or "",
            credited_run=d["credited_run"],
            method=d["method"],
            shown=d.get("shown", 0),
            changed=d.get("changed", 0),
            turns_saved=d.get("turns_saved", 0),
            tokens_saved=d.get("tokens_saved", 0),
            success_changed=bool(d.get("success_changed")),
            success_saved=d.get("success_saved", 0),
            evidence_runs=tuple(d.get("evidence_runs") or ()),
            domain=ev.domain or "",
            occurred_at=old.occurred_at if old is not None else ev.occurred_at,
            event_ids=add_event_id(old.event_ids if old is not None else (), ev.id),
        )
    elif t == "subject_forgotten":
        kind, subject, covered = d["subject_kind"], d["subject"], covered_runs(d)
        for item in list(state.by_item):
            entries = state.by_item[item]
            if kind in ("lesson", "fact") and item == subject:
                entries.clear()
            for run in list(entries):
                gone = run in covered or (kind == "run" and run == subject)
                if gone or (kind == "domain" and domain_matches(entries[run].domain, subject)):
                    del entries[run]
            if not entries:
                del state.by_item[item]
    return state


def item_credit(state: CreditState, item: str) -> ItemCredit | None:
    """One item's credit summed over its runs (None: never credited)."""
    entries = list(state.by_item.get(item, {}).values())
    if not entries:
        return None
    last = entries[-1]
    return ItemCredit(
        item=item,
        kind=last.kind,
        text=last.text,
        shown=sum(e.shown for e in entries),
        changed=sum(e.changed for e in entries),
        turns_saved=sum(e.turns_saved for e in entries),
        tokens_saved=sum(e.tokens_saved for e in entries),
        success_changed=sum(e.success_changed for e in entries),
        success_saved=sum(e.success_saved for e in entries),
        method=", ".join(dict.fromkeys(e.method for e in entries)),
        runs=tuple(e.credited_run for e in entries),
        evidence_runs=tuple(r for e in entries for r in e.evidence_runs),
        first_credited=min(e.occurred_at for e in entries),
    )


def worth(state: CreditState) -> Callable[[str], int | None]:
    """An item's credit sign (None: never measured), for counting recalls as uses."""

    def sign(item: str) -> int | None:
        found = item_credit(state, item)
        return None if found is None else found.credit

    return sign


def sign_of(success_saved: int, turns_saved: int) -> int:
    """What an item bought, as a sign: successes saved outweigh any turns."""
    if success_saved:
        return 1 if success_saved > 0 else -1
    return (turns_saved > 0) - (turns_saved < 0)


def sign_with(state: CreditState, data: dict[str, Any]) -> int:
    """The sign of an item's credit once the `item_credited` payload `data` is folded in (it replaces
    that run's earlier credit), without folding it."""
    entries = {**state.by_item.get(data["item"], {})}
    entries.pop(data["credited_run"], None)
    success = sum(e.success_saved for e in entries.values()) + int(data.get("success_saved", 0))
    turns = sum(e.turns_saved for e in entries.values()) + int(data.get("turns_saved", 0))
    return sign_of(success, turns)


def ranked(state: CreditState) -> list[ItemCredit]:
    """Every credited item, most worth first: successes saved, turns saved, tokens saved, then
    decisions changed; equal items keep the order they were first credited."""
    out = [c for c in (item_credit(state, item) for item in state.by_item) if c is not None]
    out.sort(key=lambda c: (c.success_saved, c.turns_saved, c.tokens_saved, c.changed), reverse=True)
    return out


def decode(raw: dict[str, Any]) -> CreditState:
    return CreditState(
        by_item={
            item: {
                run: build(RunCredit, e, evidence_runs=tuple(e["evidence_runs"]), event_ids=tuple(e["event_ids"]))
                for run, e in runs.items()
            }
            for item, runs in raw.get("by_item", {}).items()
        }
    )


def tables(state: CreditState) -> dict[str, list[dict[str, Any]]]:
    return {
        "credit": [
            {
                "item": e.item,
                "kind": e.kind,
                "text": e.text,
                "credited_run": e.credited_run,
                "method": e.method,
                "shown": e.shown,
                "changed": e.changed,
                "turns_saved": e.turns_saved,
                "tokens_saved": e.tokens_saved,
                "success_changed": e.success_changed,
                "success_saved": e.success_saved,
                "domain": e.domain,
                "occurred_at": e.occurred_at,
            }
            for runs in state.by_item.values()
            for e in runs.values()
        ]
    }
