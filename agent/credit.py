"""Credit by counterfactual (`memtape credit`): what each memory item was worth to the runs that saw it.

For each run the bundled agent made with memory, the task is run again from a fork of memory as it
stood at the run's start (every event before its `run_started`), on the bundled sites, with the
run's own policy, goal and budget. At every policy decision of that run the policy is asked again,
from its state before the decision (the conversation so far), on the same prompt with each memory
item it shows removed (`RunConfig.probe`): an item "changed" the decision where the answer differs.
For the scripted policy the answer is exact; for a model it is asked at temperature 0 through its
endpoint, an estimate (`method` says which). `reproduced` counts the recorded decisions the policy
gives again on the unchanged prompt, in order: for the scripted policy it equals `decisions`.

Where an item changed a decision (and `rerun`), the task is run once more from the same fork with
that item masked from every prompt (`RunConfig.masked`), and the item's worth is the difference:
turns and tokens the run without it took beyond the run with it (the unmasked run again, so both
sides are measured by the same code), and whether success changed. An item that changed no decision
leaves every decision, so the run, as it was: it saved nothing, and is not run again.

Each (item, run) is recorded as an `item_credited` event in the ledger, so credit is
audited, replayed and read as-of like all memory (`state credit`, `explain ITEM`, `analytics credit`).

Example:
    report = credit(memory, runs=["run_1796408860_47f27a"])
    report.as_dict()  # {"decisions": 7, "reproduced": 7, "items": [...]}
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memtape.agent.browser import Browser
from memtape.agent.loop import MemoryItem, RunConfig, RunResult, Without, run_task
from memtape.agent.policy import Decision, make_policy
from memtape.agent.sites import CASES_FILE, HOSTILE_CASES_FILE, MEMORY_CASES_FILE, SitesServer, is_bundled, load_cases
from memtape.ledger.copy import copy_events
from memtape.ledger.envelope import RecordedEvent
from memtape.ledger.errors import LedgerError
from memtape.ledger.events import ItemCredited
from memtape.ledger.ids import short_id
from memtape.ledger.redact import MARKER
from memtape.ledger.store import SqliteStore
from memtape.projections.parameters import Thresholds
from memtape.projections.recording.memory import RecordingMemory

#: told what is being credited (a run, an item), the runs done and the runs in all
CreditProgress = Callable[[str, int, int], None]


@dataclass
class ItemWorth:
    """One item's credit over the runs credited in one call (the `items` of `memtape credit --json`)."""

    item: str
    kind: str
    text: str
    shown: int = 0
    changed: int = 0
    turns_saved: int = 0
    tokens_saved: int = 0
    success_changed: int = 0
    method: str = ""
    runs: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "item": self.item,
            "kind": self.kind,
            "text": self.text,
            "shown": self.shown,
            "changed": self.changed,
            "turns_saved": self.turns_saved,
            "tokens_saved": self.tokens_saved,
            "success_changed": self.success_changed,
            "method": self.method,
            "runs": list(self.runs),
        }


@dataclass
class CreditReport:
    decisions: int = 0
    reproduced: int = 0
    items: list[ItemWorth] = field(default_factory=list)
    #: runs left out, with why (another agent's, memory off, no bundled case to run again)
    skipped: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"decisions": self.decisions, "reproduced": self.reproduced, "items": [i.as_dict() for i in self.items]}


@dataclass
class _Probed:
    """What the probe saw in one run: its decisions, and per item the decisions that showed it and
    those it changed."""

    decisions: list[Decision] = field(default_factory=list)
    shown: dict[str, int] = field(default_factory=dict)
    #: item -> the steps whose decision it changed, and the prompt sections it was in there
    changed: dict[str, dict[int, tuple[str, ...]]] = field(default_factory=dict)
    items: dict[str, MemoryItem] = field(default_factory=dict)

    def __call__(self, step: int, decision: Decision, without: dict[str, Without]) -> None:
        self.decisions.append(decision)
        for key, other in without.items():
            self.items.setdefault(key, other.item)
            self.shown[key] = self.shown.get(key, 0) + 1
            if decision_key(other.decision) != decision_key(decision):
                self.changed.setdefault(key, {})[step] = other.sections


def decision_key(d: Decision) -> tuple[Any, ...]:
    """What makes two decisions the same action: the command, its target and its arguments (an
    element ref names the same element only within one page load, so the target stands for it)."""
    args = tuple(sorted((k, str(v)) for k, v in d.args.items() if k != "ref"))
    target = (d.target.role, d.target.name) if d.target is not None else None
    return (d.command, target, args)


def step_key(ev: RecordedEvent) -> tuple[Any, ...]:
    """`decision_key` of a recorded step."""
    action, target = ev.data["action"], ev.data.get("target") or None
    args = tuple(sorted((k, str(v)) for k, v in (action.get("args") or {}).items() if k != "ref"))
    return (action["command"], (target["role"], target["name"]) if target else None, args)


def bundled_cases() -> dict[str, dict[str, Any]]:
    """Every bundled case by id (the demo's suite, the memory-only and the hostile sites)."""
    out: dict[str, dict[str, Any]] = {}
    for path in (CASES_FILE, MEMORY_CASES_FILE, HOSTILE_CASES_FILE):
        if Path(path).exists():
            for case in load_cases(path):
                out.setdefault(case["id"], case)
    return out


@dataclass(frozen=True)
class _Task:
    """A recorded run, as it is run again."""

    run_id: str
    start_seq: int
    goal: str
    start_url: str
    case_id: str | None
    check: dict[str, Any] | None
    session_id: str | None
    policy_name: str
    policy: Thresholds
    budget: int
    recorded: tuple[tuple[Any, ...], ...]


def _task(store: Any, run_id: str, cases: dict[str, dict[str, Any]]) -> _Task | str:
    """The run to credit, or why it cannot be."""
    events = list(store.read(run_id=run_id, types=["run_started", "run_completed", "step_recorded", "context_built"]))
    started = next((e for e in events if e.type == "run_started"), None)
    if started is None:
        return "no such run"
    if not any(e.type == "run_completed" for e in events):
        return "not finished"
    d = started.data
    if not d.get("memory_enabled", True):
        return "memory off"
    settings = d.get("policy") or {}
    name = settings.get("decision_policy")
    if name not in ("scripted", "openai"):
        return f"not the bundled agent's ({name or 'external'})"
    case = cases.get(d.get("case_id") or "") or {
        "id": None,
        "goal": d.get("goal") or "",
        "start_url": d.get("start_url"),
    }
    if not case["start_url"] or not is_bundled(case["start_url"]):
        return "not on the bundled sites"
    if not case["goal"] or MARKER in case["goal"]:
        return "its goal holds a redacted secret and it is no bundled case"
    budget = next((e.data["budget"] for e in events if e.type == "context_built"), None)
    return _Task(
        run_id=run_id,
        start_seq=started.seq,
        goal=case["goal"],  # the case's own goal: the ledger keeps its password redacted
        start_url=case["start_url"],
        case_id=case["id"],
        check=case.get("success"),
        session_id=d.get("session_id"),
        policy_name=name,
        policy=Thresholds(**{k: v for k, v in settings.items() if k in Thresholds.model_fields}),
        budget=int(budget) if budget is not None else RunConfig().budget,
        recorded=tuple(
            step_key(e) for e in events if e.type == "step_recorded" and e.data.get("decided_by") == "policy"
        ),
    )


@contextmanager
def _fork(store: Any, until: int, policy: Thresholds) -> Iterator[RecordingMemory]:
    """Memory as it stood before event `until`, in a ledger of its own that is thrown away."""
    with tempfile.TemporaryDirectory(prefix="memtape-credit-") as tmp:
        fork = SqliteStore.open(Path(tmp) / "ledger.db")
        try:
            copy_events(store, fork, until - 1)
            yield RecordingMemory(fork, Path(tmp) / "projections.db", policy)
        finally:
            fork.close()


def _again(browser: Browser, memory: RecordingMemory, task: _Task, config: RunConfig) -> RunResult:
    return run_task(
        browser,
        memory,
        make_policy(task.policy_name),
        goal=task.goal,
        start_url=task.start_url,
        run_id=short_id("run"),
        session_id=task.session_id,
        case_id=task.case_id,
        success_check=task.check,
        config=config,
    )


def credit(
    memory: RecordingMemory,
    runs: Sequence[str] = (),
    *,
    rerun: bool = True,
    progress: CreditProgress | None = None,
) -> CreditReport:
    """Credit every memory item shown to the given runs (default: every finished run of the bundled
    agent with memory on), record one `item_credited` per (item, run), and return the totals."""
    store = memory.store
    if not runs:
        runs = [e.run_id for e in store.read(types=["run_started"]) if e.run_id]
    cases = bundled_cases()
    report = CreditReport()
    tasks: list[_Task] = []
    for run_id in runs:
        if not isinstance(run_id, str) or not run_id.strip():
            raise LedgerError(f"a run to credit is a run id, got {run_id!r:.60}")
    for run_id in dict.fromkeys(runs):
        found = _task(store, run_id, cases)
        if isinstance(found, str):
            if found == "no such run":
                raise LedgerError(f"no run {run_id!r} in the ledger")
            report.skipped[run_id] = found
        else:
            tasks.append(found)
    worth: dict[str, ItemWorth] = {}
    with ExitStack() as stack:
        browser: Browser | None = None
        for done, task in enumerate(tasks):
            if progress is not None:
                progress(f"{task.case_id or task.goal[:40]}: {task.run_id}", done, len(tasks))
            if browser is None:
                sites = stack.enter_context(SitesServer())
                browser = stack.enter_context(Browser(proxy=sites.proxy))
            credits = _credit_run(store, browser, task, rerun)
            report.decisions += len(task.recorded)
            report.reproduced += credits.reproduced
            for event in credits.events:
                w = worth.setdefault(event.item, ItemWorth(event.item, event.kind, event.text))
                w.shown += event.shown
                w.changed += event.changed
                w.turns_saved += event.turns_saved
                w.tokens_saved += event.tokens_saved
                w.success_changed += event.success_changed
                w.method = ", ".join(dict.fromkeys([*filter(None, w.method.split(", ")), event.method]))
                w.runs += [task.run_id, *event.evidence_runs]
            memory.append([memory.event(ItemCredited, e.model_dump(), domain=credits.domain) for e in credits.events])
        if progress is not None:
            progress("done", len(tasks), len(tasks))
    report.items = sorted(
        worth.values(), key=lambda w: (w.turns_saved, w.tokens_saved, w.changed, w.shown), reverse=True
    )
    return report


@dataclass
class _RunCredits:
    reproduced: int
    domain: str | None
    events: list[ItemCredited]


def _credit_run(store: Any, browser: Browser, task: _Task, rerun: bool) -> _RunCredits:
    probed = _Probed()
    config = RunConfig(budget=task.budget, probe=probed)
    with _fork(store, task.start_seq, task.policy) as fork:
        base = _again(browser, fork, task, config)
        again = [
            step_key(e)
            for e in fork.store.read(run_id=base.run_id, types=["step_recorded"])
            if e.data.get("decided_by") == "policy"
        ]
        domain = next((e.domain for e in fork.store.read(run_id=base.run_id, types=["run_started"])), None)
    reproduced = 0
    for recorded, asked in zip(task.recorded, again):
        if recorded != asked:
            break
        reproduced += 1
    method = "exact" if task.policy_name == "scripted" else "temperature-0"
    events = []
    for key, item in probed.items.items():
        steps = probed.changed.get(key, {})
        changed = len(steps)
        fields: dict[str, Any] = {
            "item": key,
            "kind": item.kind,
            "text": item.text[:2000],
            "credited_run": task.run_id,
            "method": method,
            "shown": probed.shown.get(key, 0),
            "changed": changed,
            "changed_steps": [{"step": step, "sections": list(sections)} for step, sections in steps.items()],
            "evidence_runs": [base.run_id],
        }
        if changed and rerun:
            with _fork(store, task.start_seq, task.policy) as fork:
                without = _again(browser, fork, task, RunConfig(budget=task.budget, masked=frozenset({key})))
            fields.update(
                method=f"{method}+rerun",
                turns_saved=without.outcome.turns - base.outcome.turns,
                tokens_saved=without.tokens - base.tokens,
                success_changed=without.outcome.success != base.outcome.success,
                success_saved=int(base.outcome.success) - int(without.outcome.success),
                evidence_runs=[base.run_id, without.run_id],
            )
        events.append(ItemCredited(**fields))
    return _RunCredits(reproduced, domain, events)
