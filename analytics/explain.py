"""Explain: the whole life of one memory item, from the events that touched it.

An ITEM is a lesson id, a fact id (`fact_...`) or a fact key, a selector, a
trajectory id or a learned pattern's id (tried in that order). The answer lists, in log order, when
it was recorded (or seeded), deduplicated, recalled (in which runs), loaded
into Tier 1, promoted, confirmed or decayed (facts, with the confidence after
each event), pruned or expired, and when part of it was forgotten — plus the
item as it stands now. Forgotten subjects are unknown here.

With projections.db, the events of the life are found by its index of mentions
(`projections.cache.mentions`: which events name which item) and read by seq through
the store's verified read; without it, every event of the item's types is read.

Usage::

    life = explain_item(store, "lsn_f6e59d160e5396b1")
    for e in life["life"]: print(e["seq"], e["stage"], e["run_id"], e["detail"])
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

from memtape.analytics.forget_filter import Forgotten, lesson_id_of
from memtape.ledger.envelope import RecordedEvent
from memtape.ledger.errors import LedgerError, UnknownItem
from memtape.ledger.store import Store
from memtape.projections.cache import mentions
from memtape.projections.cache.materialize import indexed_memory
from memtape.projections.folds import credit as credit_fold
from memtape.projections.folds import knowledge
from memtape.projections.folds.knowledge import fact_id_for
from memtape.projections.folds.lessons import counted
from memtape.projections.folds.selectors import ranked
from memtape.projections.parameters import DEFAULT_POLICY
from memtape.projections.view import MemoryView

#: the events of some types that name some items (`projections.cache.mentions` keys), in log order
Read = Callable[[list[str] | tuple[str, ...], list[str]], Iterable[RecordedEvent]]

LESSON_EVENTS = (*mentions.LESSON_TYPES, *mentions.RECALL_TYPES, "subject_forgotten")


def _entry(ev: RecordedEvent, stage: str, detail: str, forgotten: Forgotten, **extra: Any) -> dict[str, Any]:
    run_id, step, domain = forgotten.where(ev)
    return {
        "seq": ev.seq,
        "at": ev.occurred_at,
        "recorded_at": ev.recorded_at,
        "stage": stage,
        "type": ev.type,
        "run_id": run_id,
        "step": step,
        "domain": domain,
        "detail": detail,
        **extra,
    }


def _plain(obj: Any) -> Any:
    if is_dataclass(obj) and not isinstance(obj, type):
        return {k: _plain(v) for k, v in asdict(obj).items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    return obj


def _lesson_life(read: Read, lesson_id: str, forgotten: Forgotten) -> dict[str, Any] | None:
    life: list[dict[str, Any]] = []
    born = False
    info: dict[str, Any] = {}
    for ev in read(LESSON_EVENTS, [mentions.lesson(lesson_id)]):
        d = ev.data
        t = ev.type
        if t == "subject_forgotten":
            if (
                born
                and d["subject_kind"] == "domain"
                and d["subject"].lower() in {x.lower() for x in info.get("domains", ())}
            ):
                life.append(_entry(ev, "forgotten", "a domain where it was used was forgotten", forgotten))
            elif born and d["subject_kind"] == "run" and d["subject"] in info.get("runs", ()):
                life.append(_entry(ev, "forgotten", "a run that used it was forgotten", forgotten))
            continue
        if t in ("error_recall", "domain_recall", "lessons_used", "tier1_loaded") or t == "lessons_pruned":
            if lesson_id not in (d.get("lesson_ids") or ()):
                continue
        elif lesson_id_of(ev) != lesson_id:
            continue
        if forgotten.hides(ev):
            return None
        if ev.domain:
            info.setdefault("domains", set()).add(ev.domain)
        if ev.run_id:
            info.setdefault("runs", set()).add(ev.run_id)
        if t == "lesson_seeded":
            born = True
            life.append(_entry(ev, "seeded", f"{d['category']}: {d['lesson']}", forgotten))
        elif t == "lesson_recorded":
            stage = "recorded" if not born else "observed again"
            born = True
            life.append(_entry(ev, stage, f"{d['category']}: {d['lesson']}", forgotten))
        elif t == "lesson_deduplicated":
            life.append(_entry(ev, "deduplicated", f"use_count {d['new_use_count']}", forgotten))
        elif t == "error_recall":
            stage, why = (
                ("recalled", "on error")
                if lesson_id in counted(d)
                else ("recalled", "on error (a use only if the run then clears it)")
                if lesson_id in (d.get("pending_ids") or ())
                else ("offered", "on its command only (not a use)")
            )
            life.append(
                _entry(ev, stage, f"{why}: {d.get('command')} / {d.get('error_snippet')}", forgotten, trigger="error")
            )
        elif t == "domain_recall":
            life.append(_entry(ev, "recalled", "on domain change", forgotten, trigger="domain"))
        elif t == "lessons_used":
            why = f"the failure recalled on at step {d['recall_step']} cleared at step {d['cleared_at']}"
            life.append(_entry(ev, "used", why, forgotten, trigger="error"))
        elif t == "tier1_loaded":
            life.append(_entry(ev, "in Tier 1", "loaded into the system prompt", forgotten))
        elif t == "lesson_promoted":
            life.append(
                _entry(
                    ev,
                    "promoted",
                    f"{d.get('from_category')} -> {d.get('to_category')} at use_count "
                    f"{d['use_count']} on {len(forgotten.domains_shown(d['triggered_domains']))} domains",
                    forgotten,
                )
            )
        elif t == "lesson_pinned":
            life.append(
                _entry(
                    ev,
                    "pinned",
                    f"{d.get('from_category')} -> {d.get('to_category')} by {d.get('pinned_by')}: {d.get('reason')}",
                    forgotten,
                )
            )
        elif t == "lesson_unpinned":
            life.append(
                _entry(
                    ev,
                    "unpinned",
                    f"{d.get('from_category')} -> {d.get('to_category')} by {d.get('unpinned_by')}: {d.get('reason')}",
                    forgotten,
                )
            )
        elif t == "lesson_demoted":
            life.append(
                _entry(
                    ev,
                    "demoted",
                    f"{d.get('from_category')} -> {d.get('to_category')}: its measured credit turned negative "
                    f"({d.get('turns_saved')} turns saved)",
                    forgotten,
                )
            )
        elif t == "lessons_pruned" and lesson_id in (d.get("zero_credit_ids") or ()):
            life.append(
                _entry(
                    ev,
                    "pruned",
                    f"its measured credit stayed at zero for more than {d.get('max_age_days')} days "
                    f"(as of {d.get('as_of')})",
                    forgotten,
                )
            )
        elif t == "lessons_pruned":
            life.append(
                _entry(
                    ev,
                    "pruned",
                    f"unused for more than {d.get('max_age_days')} days with fewer than "
                    f"{d.get('min_uses')} uses (as of {d.get('as_of')})",
                    forgotten,
                )
            )
    if not born and not life:
        return None
    return {"life": life}


def _fact_matches(item: str, domain: str, d: dict[str, Any]) -> bool:
    return item == d.get("key") or item == fact_id_for(domain, d["fact_type"], d["key"], d["value"])


def _fact_life(
    read: Read, item: str, forgotten: Forgotten, policy: Any, domain: str | None = None
) -> dict[str, Any] | None:
    """The life of a fact id, or of the facts under a key on one domain: a key that names facts on
    several domains (`blocking overlay` on shop.test and news.test) is refused without `domain`, so
    that two sites' facts are never told as one life."""
    groups: set[tuple[str, str, str]] = set()
    ids: set[str] = set()
    for ev in read(["fact_observed"], [mentions.fact(item)]):
        dom = ev.domain or ""
        if domain is not None and dom != domain:
            continue
        if _fact_matches(item, dom, ev.data) and not forgotten.hides(ev):
            groups.add((dom, ev.data["fact_type"], ev.data["key"]))
            if item.startswith("fact_"):
                ids.add(item)
            else:
                ids.add(fact_id_for(dom, ev.data["fact_type"], ev.data["key"], ev.data["value"]))
    if not groups:
        return None
    domains = sorted({g[0] for g in groups})
    if len(domains) > 1:
        raise LedgerError(
            f"fact key {item[:80]!r} is on {len(domains)} domains ({', '.join(domains)}): "
            "name the domain or give a fact id"
        )
    state = knowledge.empty()
    life: list[dict[str, Any]] = []
    keys = [
        *(mentions.fact_group(g[0], str(g[1]), str(g[2])) for g in sorted(groups)),
        *(mentions.fact(fid) for fid in sorted(ids)),
    ]
    for ev in read(["fact_observed", "fact_contradicted", "facts_pruned"], keys):
        if forgotten.hides(ev):  # a life a forget ended is not told (the same fact seen again is new)
            continue
        d = ev.data
        dom = ev.domain or ""
        if ev.type == "facts_pruned":
            touched = [
                f
                for f in d.get("facts") or ()
                if (f.get("fact_id") in ids)
                or (
                    (f.get("domain", dom) or "", f.get("fact_type"), f.get("key")) in groups
                    and fact_id_for(
                        f.get("domain", dom) or "", f.get("fact_type", ""), f.get("key", ""), f.get("value", "")
                    )
                    in ids
                )
            ]
            if not touched:
                continue
        elif (dom, d["fact_type"], d["key"]) not in groups:
            continue
        before = {fid: f.confidence for facts in state.current.values() for fid, f in facts.items()}
        knowledge.apply(state, ev, policy)
        after = {fid: f for facts in state.current.values() for fid, f in facts.items()}
        for fid in sorted(ids):
            f = after.get(fid)
            if ev.type == "fact_observed" and fact_id_for(dom, d["fact_type"], d["key"], d["value"]) == fid:
                stage = "confirmed" if fid in before else "recorded"
                life.append(
                    _entry(
                        ev,
                        stage,
                        f"{d['fact_type']}:{d['key']} = {d['value']!r}",
                        forgotten,
                        fact_id=fid,
                        confidence=round(f.confidence, 6) if f else None,
                    )
                )
            elif ev.type == "fact_contradicted" and fid in before and f is not None and f.confidence != before[fid]:
                shown = forgotten.shown(ev)  # the value may be a forgotten run's
                value = shown[3].get("new_value", "") if shown is not None else ""
                life.append(
                    _entry(
                        ev,
                        "decayed",
                        f"contradicted by {value!r}: x{d['factor']}",
                        forgotten,
                        fact_id=fid,
                        confidence=round(f.confidence, 6),
                    )
                )
            elif ev.type == "facts_pruned" and fid in before and f is None:
                life.append(
                    _entry(
                        ev,
                        "pruned",
                        f"confidence below {d.get('threshold')}",
                        forgotten,
                        fact_id=fid,
                        confidence=round(before[fid], 6),
                    )
                )
    return {"life": life, "fact_ids": sorted(ids), "domains": {g[0] for g in groups}}


def _selector_life(read: Read, item: str, forgotten: Forgotten) -> dict[str, Any] | None:
    life = []
    for ev in read(["selector_succeeded", "selector_failed"], [mentions.selector(item)]):
        if ev.data.get("selector") != item or forgotten.hides(ev):
            continue
        d = ev.data
        ok = ev.type == "selector_succeeded"
        detail = f"{d.get('role')} {d.get('name')!r}" + ("" if ok else f": {d.get('error') or 'failed'}")
        if ok and d.get("healed_from"):
            detail += f" (healed from {d['healed_from']})"
        life.append(_entry(ev, "succeeded" if ok else "failed", detail, forgotten))
    return {"life": life} if life else None


def _trajectory_life(read: Read, item: str, forgotten: Forgotten) -> dict[str, Any] | None:
    life: list[dict[str, Any]] = []
    for ev in read(["trajectory_recorded", "trajectory_recalled", "trajectories_expired"], [mentions.trajectory(item)]):
        d = ev.data
        if ev.type == "trajectories_expired":
            if item not in (d.get("trajectory_ids") or ()):
                continue
            if life:
                life.append(
                    _entry(ev, "expired", f"older than {d.get('ttl_days')} days (as of {d.get('as_of')})", forgotten)
                )
            continue
        if d.get("trajectory_id") != item:
            continue
        if forgotten.hides(ev):
            if ev.type == "trajectory_recorded":
                return None
            continue
        if ev.type == "trajectory_recorded":
            life.append(_entry(ev, "recorded", f"{len(d.get('steps') or ())} steps for {d.get('goal')!r}", forgotten))
        else:
            life.append(
                _entry(
                    ev,
                    "recalled",
                    f"for {d.get('goal')!r} (similarity {d.get('similarity')}"
                    f"{', replayed' if d.get('replay') else ''})",
                    forgotten,
                )
            )
    return {"life": life} if life else None


def _pattern_life(store: Store, item: str, forgotten: Forgotten) -> dict[str, Any] | None:
    """A learned pattern's life: learned, each reuse (its outcome), pruned. Patterns are not in the
    index of mentions, so their few events are read by type."""
    life: list[dict[str, Any]] = []
    for ev in store.read(types=["pattern_learned", "pattern_used", "patterns_pruned"]):
        d = ev.data
        if ev.type == "patterns_pruned":
            if life and item in (d.get("pattern_ids") or ()):
                life.append(_entry(ev, "pruned", f"more than {d.get('max_patterns')} patterns", forgotten))
            continue
        if d.get("pattern_id") != item:
            continue
        if forgotten.hides(ev):
            if ev.type == "pattern_learned":
                return None
            continue
        if ev.type == "pattern_learned":
            if not life:
                steps = len(d.get("steps") or ())
                life.append(_entry(ev, "learned", f"{d.get('description')} ({steps} steps)", forgotten))
        elif life:
            life.append(_entry(ev, "used", "succeeded" if d.get("success") else "failed", forgotten))
    if not life:
        return None
    return {"life": life, "description": life[0]["detail"]}


def explain_item(
    store: Store, item: str, policy: Any | None = None, projections_path: Path | None = None, domain: str | None = None
) -> dict[str, Any]:
    """The life of a lesson, fact, selector, trajectory or learned pattern; plain data (see module doc). `domain`
    picks one site's facts when a fact key is used on several.

    The item as it stands now is read by key from projections.db's validity intervals (caught
    up first) when `projections_path` is given, else taken from a fold of the whole log.
    """
    policy = policy or DEFAULT_POLICY
    if projections_path is None:
        return _explain(store, item, policy, domain, _Folded(store, policy))
    with indexed_memory(store, Path(projections_path), policy) as memory:
        if not memory.answers(memory.head, ("lessons", "knowledge", "selectors", "trajectories")):
            return _explain(store, item, policy, domain, _Folded(store, policy))
        return _explain(store, item, policy, domain, _Indexed(memory))


class _Folded:
    """The items as they stand now, from a fold of the whole log."""

    def __init__(self, store: Store, policy: Any):
        self.store = store
        self.view = MemoryView.from_events(store.read(), policy)

    def read(self, types: list[str] | tuple[str, ...], items: list[str]) -> Iterable[RecordedEvent]:
        """Every event of `types` (the life functions pick the item's)."""
        return self.store.read(types=types)

    def lesson(self, lesson_id: str) -> Any:
        return self.view.lesson(lesson_id)

    def facts(self, domains: set[str]) -> dict[str, Any]:
        return {f.fact_id: f for facts in self.view.state.knowledge.current.values() for f in facts.values()}

    def selectors(self) -> list[Any]:
        return self.view.selectors()

    def trajectories(self) -> list[Any]:
        return self.view.trajectories()


class _Indexed:
    """The items as they stand now, each read by key from the validity intervals."""

    def __init__(self, memory: Any):
        self.memory = memory

    def read(self, types: list[str] | tuple[str, ...], items: list[str]) -> Iterable[RecordedEvent]:
        """The events of `types` that name `items`, by projections.db's index of mentions."""
        return self.memory.events(types, items)  # type: ignore[no-any-return]

    def lesson(self, lesson_id: str) -> Any:
        return self.memory.projection("lessons", self.memory.head, "lessons", lesson_id).lessons.get(lesson_id)

    def facts(self, domains: set[str]) -> dict[str, Any]:
        return {
            f.fact_id: f
            for dom in sorted(domains)
            for f in self.memory.projection("knowledge", self.memory.head, "current", dom).current.get(dom, {}).values()
        }

    def selectors(self) -> list[Any]:
        return ranked(self.memory.projection("selectors", self.memory.head))

    def trajectories(self) -> list[Any]:
        state = self.memory.projection("trajectories", self.memory.head, "by_domain")
        return [t for items in state.by_domain.values() for t in items.values()]


def credit_of(store: Store, item: str) -> dict[str, Any] | None:
    """What `memtape credit` measured the item to be worth (`projections.folds.credit`), summed
    over the runs credited, or None when it was never credited."""
    state = credit_fold.empty()
    for ev in store.read(types=credit_fold.TYPES):
        if ev.type != "item_credited" or ev.data.get("item") == item:
            credit_fold.apply(state, ev)
    found = credit_fold.item_credit(state, item)
    if found is None:
        return None
    return {**_plain(found), "credit": found.credit}


def _explain(store: Store, item: str, policy: Any, domain: str | None, now_of: _Folded | _Indexed) -> dict[str, Any]:
    return {**_explained(store, item, policy, domain, now_of), "credit": credit_of(store, item)}


def _explained(store: Store, item: str, policy: Any, domain: str | None, now_of: _Folded | _Indexed) -> dict[str, Any]:
    forgotten = Forgotten.scan(store)
    read = now_of.read
    found = _lesson_life(read, item, forgotten)
    if found is not None:
        lesson = now_of.lesson(item)
        now = _plain(lesson) if lesson is not None else None
        if now is not None:
            now["triggered_domains"] = forgotten.domains_shown(now["triggered_domains"])
            now.pop("event_ids", None)
            if forgotten.run(now.get("taught_by_run")):
                now["taught_by_run"] = now["taught_at_step"] = None
        runs = sorted({e["run_id"] for e in found["life"] if e["stage"] == "recalled" and e["run_id"]})
        return {
            "kind": "lesson",
            "item": item,
            "now": now,
            "status": _status(found["life"], now),
            "recalled_in_runs": runs,
            "life": found["life"],
        }
    found = _fact_life(read, item, forgotten, policy, domain)
    if found is not None:
        current = now_of.facts(found["domains"])
        now = [dict(_plain(current[fid]), event_ids=None) for fid in found["fact_ids"] if fid in current]
        for n in now:
            n.pop("event_ids", None)
        return {
            "kind": "fact",
            "item": item,
            "now": now,
            "status": "current" if now else "gone",
            "fact_ids": found["fact_ids"],
            "life": found["life"],
        }
    found = _selector_life(read, item, forgotten)
    if found is not None:
        now = [dict(_plain(s)) for s in now_of.selectors() if s.selector == item and not forgotten.domain(s.domain)]
        for n in now:
            n.pop("event_ids", None)
        return {
            "kind": "selector",
            "item": item,
            "now": now,
            "status": "current" if now else "gone",
            "life": found["life"],
        }
    found = _trajectory_life(read, item, forgotten)
    if found is not None:
        # one id on several sites (a log may reuse it): the latest recorded, whichever way `now_of` lists them
        traj = max(
            (t for t in now_of.trajectories() if t.trajectory_id == item),
            key=lambda t: (t.recorded_at, t.domain),
            default=None,
        )
        now = None
        if traj is not None:
            now = {
                "trajectory_id": traj.trajectory_id,
                "domain": traj.domain,
                "goal": traj.goal,
                "steps": len(traj.steps),
                "occurred_at": traj.occurred_at,
                "run_id": traj.run_id,
            }
        runs = sorted({e["run_id"] for e in found["life"] if e["stage"] == "recalled" and e["run_id"]})
        return {
            "kind": "trajectory",
            "item": item,
            "now": now,
            "status": "current" if now else "gone",
            "recalled_in_runs": runs,
            "life": found["life"],
        }
    found = _pattern_life(store, item, forgotten)
    if found is not None:
        pruned = any(e["stage"] == "pruned" for e in found["life"])
        used = [e for e in found["life"] if e["stage"] == "used"]
        return {
            "kind": "pattern",
            "item": item,
            "now": None if pruned else {"description": found["description"], "uses": len(used)},
            "status": "pruned" if pruned else "current",
            "recalled_in_runs": sorted({e["run_id"] for e in used if e["run_id"]}),
            "life": found["life"],
        }
    raise UnknownItem(f"no lesson, fact, selector or trajectory named {item[:80]!r}")


def _status(life: list[dict[str, Any]], now: dict[str, Any] | None) -> str:
    if now is None:
        return "pruned" if any(e["stage"] == "pruned" for e in life) else "gone"
    return f"Tier {1 if now.get('category') in ('tool_fallback', 'best_practice') else 2} ({now.get('category')})"
