"""One agent's two runs as a list of library calls, each call with every argument it takes, to be
made through the library, over HTTP and over MCP: the faces are full when every call exists on
each and the ledger and the answers come out the same.

A call is (name, arguments): `name` is the library method (a `Run`'s, or the memory's for
`start_run`, `state`, `audit`, `explain`, `experiment`), its HTTP route and, but for `finish`
(`finish_run`), its MCP tool; run calls go to the run the last `start_run` started."""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable
from dataclasses import asdict, is_dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

import memtape
from memtape.api import Memory, Run
from memtape.operations import OPERATIONS, Operation

SHOP = "https://shop.example/"
BLOCKED = "element <div class=cookies> intercepts pointer events"
SECRET = "hunter2-Wool-Socks-77"
PAGE = ["button Buy", "link Home", "button Accept cookies"]
#: what an agent's extract() gave for the cart page
PAGE_TEXT = {
    "title": "Cart",
    "text": "1 x wool socks, 12.50 EUR",
    "links": [{"url": SHOP, "text": "Home"}],
    "section_count": 2,
}
#: the pattern the first run's success learns (its id is a hash of the domain and the steps)
LEARNED_PATTERN = "pat_6463ff69d17e83cd"

#: calls whose route and tool are another call's, taking more (`finish_run` by id is `finish`'s)
SHARED = {"finish_run": "finish"}

#: calls made on the memory -> the `Memory` method; every other call is made on the current run
#: (`memory_tier1` and the memory's recalls: the memory's own, outside a run or for any run by id)
MEMORY_CALLS = {
    **{op.route_name: op.call.__name__ for op in OPERATIONS if not op.on_run},
    "finish_run": "finish_run",
}


def _route(op: Operation) -> tuple[str, str]:
    """(method, path) of a row, {run} standing for the current run."""
    path = re.sub(r"\{(\w+):path\}", r"{\1}", op.path)
    return op.method.lower(), path.replace("{run_id}", "{run}") if op.on_run else path


#: calls on a run named otherwise than the `Run` method (`run_search`: the memory's `search` is `search`)
RUN_CALLS = {op.route_name: op.call.__name__ for op in OPERATIONS if op.on_run and op.route_name != op.call.__name__}

#: HTTP route of each call, from the table of operations: (method, path); {run} is the current run
ROUTES: dict[str, tuple[str, str]] = {
    **{op.route_name: _route(op) for op in OPERATIONS},
    "finish_run": ("post", "/runs/{run_id}/finish"),
}
#: a call's arguments named otherwise in the query string (`diff`'s start and end are from= and to=)
QUERY_NAMES = {op.route_name: op.query_names for op in OPERATIONS if op.query_names}
#: the MCP tool of each call
TOOLS = {**{op.route_name: op.name for op in OPERATIONS}, "finish_run": "finish_run"}

FLOW: list[tuple[str, dict[str, Any]]] = [
    (
        "start_run",
        {
            "goal": "Buy wool socks",
            "start_url": SHOP,
            "session_id": "sess-faces",
            "run_id": "run_faces_a",
            "parent_run_id": None,
            "mode": "new",
            "isolation": "shared",
            "case_id": "case-7",
            "agent": "faces-agent",
            "rep": None,
            "step_memory_scope": "session",
        },
    ),
    ("tier1", {}),
    ("recall_domain", {"step": 1, "domain": "shop.example"}),
    ("give_context", {"context": {"size": "wool socks in size 42", "budget": "under 20 EUR"}}),
    (
        "record_step",
        {
            "step": 1,
            "action": "click",
            "target": 'button "Buy"',
            "url": SHOP + "socks",
            "ok": False,
            "error": BLOCKED,
            "args": {"ref": "e12", "button": "left"},
            "url_after": SHOP + "socks",
            "selector": "#buy",
            "sensitive": False,
            "duration_ms": 41.5,
            "think": "buy the wool socks",
            "page_before": {"url": SHOP + "socks", "title": "Socks", "page_type": "product", "elements": PAGE},
            "page_after": {"url": SHOP + "socks", "title": "Socks", "page_type": "product", "elements": PAGE},
            "decided_by": "policy",
            "in_shadow": False,
            "memory_ms": 1.25,
        },
    ),
    ("recall_error", {"command": "click", "error": BLOCKED, "step": 1, "domain": "shop.example"}),
    (
        "record_step",
        {
            "step": 2,
            "action": "type",
            "target": 'textbox "Gift note"',
            "url": SHOP + "socks",
            "ok": True,
            "error": None,
            "args": {"text": SECRET},
            "url_after": None,
            "selector": "#note",
            "sensitive": True,
            "duration_ms": 12.0,
            "think": None,
            "page_before": None,
            "page_after": None,
            "decided_by": "policy",
            "in_shadow": False,
            "memory_ms": 0.5,
        },
    ),
    (
        "record_step",
        {
            "step": 3,
            "action": "click",
            "target": 'button "Accept cookies"',
            "url": None,
            "ok": True,
            "error": None,
            "args": None,
            "url_after": SHOP + "cart",
            "selector": "#accept",
            "sensitive": False,
            "duration_ms": 30.0,
            "think": "the banner first",
            "page_before": None,
            "page_after": None,
            "decided_by": "replay",
            "in_shadow": True,
            "memory_ms": 0.0,
        },
    ),
    (
        "record_lesson",
        {
            "text": "Accept the cookie banner before clicking Buy",
            "category": "site_specific",
            "failed_command": "click",
            "error_pattern": "intercepts pointer events",
            "scope_domain": "shop.example",
            "step": 3,
        },
    ),
    (
        "observe_fact",
        {
            "kind": "quirk",
            "key": "cookie banner",
            "value": "blocks clicks until accepted",
            "step": 3,
            "domain": "shop.example",
        },
    ),
    (
        "selector_result",
        {
            "element": 'button "Checkout"',
            "selector": "#checkout",
            "ok": False,
            "step": 3,
            "error": "no element matches #checkout",
            "url": SHOP + "cart",
            "healed_from": None,
        },
    ),
    (
        "selector_result",
        {
            "element": 'button "Checkout"',
            "selector": "button.checkout",
            "ok": True,
            "step": 3,
            "error": None,
            "url": SHOP + "cart",
            "healed_from": "#checkout",
        },
    ),
    (
        "record_context",
        {
            "items": [
                {
                    "source": "domain_tips",
                    "text": "Accept cookies first",
                    "priority": 60,
                    "event_ids": ["evt-one"],
                    "tokens": 7,
                    "content_type": "text",
                    "confidence": 0.9,
                    "truncated": False,
                },
                {"source": "goal", "text": "Buy wool socks", "priority": 100},
            ],
            "step": 3,
            "budget": 1200,
            "trimmed": [{"source": "history", "text": "old", "priority": 10}],
            "prompt": "step",
            "domain": "shop.example",
        },
    ),
    ("progress", {"turn": 3, "url": SHOP + "cart"}),
    (
        "infer_context",
        {"key": "shipping", "value": "free over 20 EUR", "source": "cart page", "step": 3, "domain": None},
    ),
    (
        "infer_context",
        {"key": "shipping", "value": "free over 20 EUR", "source": "cart page", "step": 4, "domain": None},
    ),
    ("use_embedding", {"vector": [0.25, -1, 0.5], "model": "faces-embed"}),
    *[("record_step", {"step": n, "action": "scroll", "args": {"direction": "down"}}) for n in (4, 5, 6)],
    ("recorded_embedding", {"model": "faces-embed"}),
    ("loop_warnings", {}),
    ("known_failure", {"command": "click", "args": {"ref": "e12", "button": "left"}, "url": SHOP + "socks"}),
    (
        "repeated_failure",
        {
            "signature": "click on Buy",
            "action": "accepted the cookies instead",
            "url": SHOP + "socks",
            "response": "chose_otherwise",
            "step": 4,
        },
    ),
    ("short_term", {}),
    (
        "snapshot",
        {
            "url": SHOP + "cart",
            "title": "Cart",
            "summary": "one pair of wool socks",
            "form_state": {"qty": "1"},
            "scroll": [0, 120],
            "step": 5,
        },
    ),
    (
        "backtracked",
        {
            "snapshot_id": "snap_run_faces_a_5",
            "from_url": SHOP + "checkout",
            "to_url": SHOP + "cart",
            "reason": "the checkout asked for an account",
            "avoided": ['button "Checkout"'],
            "step": 6,
        },
    ),
    ("snapshots", {}),
    *[
        ("extraction", {"key": "cart lines", "tool": "extract", "url": SHOP + "cart", "extract": PAGE_TEXT, "step": n})
        for n in (5, 6)  # the second is served from the cache
    ],
    ("extractions", {"domain": None}),
    ("exploration_started", {"homepage_url": SHOP, "max_depth": 2, "max_pages": 10}),
    (
        "sitemap_links",
        {"parent_url": SHOP, "depth": 0, "links": [{"url": SHOP + "socks", "text": "Socks"}], "step": 6},
    ),
    (
        "sitemap_visited",
        {"url": SHOP + "socks", "title": "Socks", "summary": "wool socks", "section_count": 3, "depth": 1, "step": 6},
    ),
    (
        "exploration_completed",
        {"homepage_url": SHOP, "visited": 1, "discovered": 1, "complete": True, "summary": "a shop of socks"},
    ),
    ("sitemap", {"domain": None}),
    ("set_scratch", {"key": "cart", "value": {"items": [{"sku": "WS-42", "qty": 1}], "total": 12.5}, "step": 6}),
    ("set_scratch", {"key": "coupon", "value": "WOOL10", "step": 6}),
    ("get_scratch", {"key": "cart", "default": None}),
    ("scratch", {}),
    (
        "store_page_map",
        {
            "url": SHOP + "cart",
            "step": 6,
            "page_map": {
                "title": "Cart",
                "summary": "The cart: one pair of wool socks, a checkout button",
                "total_width": 1280,
                "total_height": 2400,
                "regions": [
                    {
                        "kind": "header",
                        "name": "Top bar",
                        "description": "logo and search",
                        "elements": ['link "Home"'],
                        "start_y": 0,
                        "end_y": 80,
                    },
                    {
                        "kind": "content",
                        "name": "Cart lines",
                        "description": "items",
                        "elements": ['button "Checkout"'],
                        "start_y": 80,
                        "end_y": 900,
                    },
                ],
            },
        },
    ),
    ("get_page_map", {"url": SHOP + "cart"}),
    ("has_page_map", {"url": SHOP + "cart"}),
    ("get_all_page_maps", {}),
    ("get_page_summary", {"url": SHOP + "cart"}),
    ("prompt_context", {"domain": None}),
    ("relevant_context", {"domain": "shop.example"}),
    (
        "finish",
        {
            "success": True,
            "outcome": "socks in the cart",
            "reason": None,
            "result": "1 pair",
            "final_url": SHOP + "cart",
            "turns": 3,
            "tokens_in": 1500,
            "tokens_out": 90,
            "duration_ms": 2500.0,
            "policy_decisions": 2,
            "replayed_steps": 1,
            "learn": True,
        },
    ),
    (
        "start_run",
        {
            "goal": "Buy wool socks again",
            "start_url": SHOP,
            "session_id": "sess-faces",
            "run_id": "run_faces_b",
            "parent_run_id": "run_faces_a",
            "mode": "new",
            "isolation": "shared",
            "case_id": None,
            "agent": "faces-agent",
            "rep": 2,
            "step_memory_scope": "all",
        },
    ),
    ("recall_trajectory", {"step": 1, "url": SHOP}),
    ("recall_domain", {"step": 1, "domain": None}),
    ("patterns", {"domain": None}),
    ("pattern_used", {"pattern_id": LEARNED_PATTERN}),
    ("sessions", {"domain": "shop.example"}),
    ("facts", {"domain": None}),
    ("selectors", {"domain": "shop.example"}),
    ("step_memories", {"elements": PAGE, "intent": "buy the wool socks"}),
    (
        "finish",
        {
            "success": False,
            "outcome": "out of stock",
            "reason": "gave up",
            "result": None,
            "final_url": None,
            "turns": None,
            "tokens_in": 0,
            "tokens_out": 0,
            "duration_ms": 900.0,
            "policy_decisions": None,
            "replayed_steps": None,
            "learn": False,
        },
    ),
    (
        "state",
        {
            "kind": "sessions",
            "as_of": None,
            "domain": "shop.example",
            "run": None,
            "session": None,
            "outcome": None,
            "limit": None,
            "offset": 0,
        },
    ),
    (
        "state",
        {
            "kind": "runs",
            "as_of": None,
            "domain": "shop.example",
            "run": None,
            "session": "sess-faces",
            "outcome": "failed",
            "limit": 1,
            "offset": 0,
        },
    ),
    (
        "count",
        {
            "kind": "runs",
            "as_of": None,
            "domain": "shop.example",
            "run": None,
            "session": "sess-faces",
            "outcome": None,
        },
    ),
    ("diff", {"start": 0, "end": "run_faces_a"}),
    ("audit", {"run_id": "run_faces_a", "step": 1}),
    ("explain", {"item": "#checkout", "domain": None}),
    ("experiment", {"changes": {"promotion_min_uses": 2}, "until": None}),
    ("credit", {"runs": ["run_faces_a"], "rerun": False}),  # another agent's run: skipped, nothing run
    ("memory_tier1", {"run_id": None, "step": None, "domain": "shop.example"}),
    ("memory_recall_domain", {"domain": "shop.example", "run_id": "run_faces_b", "step": 2}),
    (
        "memory_recall_error",
        {"command": "click", "error": BLOCKED, "domain": "shop.example", "run_id": None, "step": None},
    ),
    ("memory_recall_trajectory", {"goal": "Buy wool socks", "url": SHOP, "run_id": "run_faces_a", "step": 7}),
    (
        "start_run",
        {
            "goal": "Return the socks",
            "start_url": SHOP,
            "session_id": None,
            "run_id": "run_faces_c",
            "parent_run_id": None,
            "mode": "new",
            "isolation": "shared",
            "case_id": None,
            "agent": "faces-agent",
            "rep": None,
            "step_memory_scope": "session",
        },
    ),
    ("record_step", {"step": 1, "action": "click", "target": 'link "Returns"'}),
    ("abandon_stale_runs", {"older_than": 0}),
    (
        "start_run",
        {
            "goal": "Track the parcel",
            "start_url": SHOP,
            "session_id": None,
            "run_id": "run_faces_d",
            "parent_run_id": None,
            "mode": "new",
            "isolation": "shared",
            "case_id": None,
            "agent": "faces-agent",
            "rep": None,
            "step_memory_scope": "session",
        },
    ),
    ("record_step", {"step": 1, "action": "click", "target": 'link "Track"', "ok": False, "error": BLOCKED}),
    ("record_step", {"step": 2, "action": "click", "target": 'link "Track"', "url_after": SHOP + "track"}),
    ("finish_run", {"run_id": "run_faces_d", "success": True, "outcome": "tracked", "reason": None}),
]

FIRST_DOMAIN_RECALL = 2
#: the second `infer_context` of the same value records nothing: it answers False
ALREADY_INFERRED = [i for i, (name, _) in enumerate(FLOW) if name == "infer_context"][1]

#: the public calls of `memtape.Run` and `memtape.Memory` that no face offers, and why: each one
#: is about the caller's own process (its objects, clock, timings, transactions), not the memory
LOCAL_CALLS = {
    "Run.timed": "times the caller's own code in memory_ms",
    "Run.take_step_ms": "reads the caller's own timer (a face's caller sends memory_ms)",
    "Run.scrub": "a string operation on the caller's values with the handle's secrets",
    "Run.add_secret": "a secret held by one process's handle; a face's caller marks a step `sensitive`",
    "Memory.close": "the caller's connection (a server closes its own)",
    "Memory.current": "the in-process view object (the faces read it through `state`)",
    "Memory.search_index": "the in-process full-text index a server warms (the faces search through `search`)",
    "Memory.event": "builds an event object for `append` (a face's caller sends JSON Lines to POST /events)",
    "Memory.append_to_run": "takes a Python function",
    "Memory.once": "the idempotency transaction the HTTP face wraps each POST in (Idempotency-Key)",
    "Memory.now": "the ledger clock's reading, for the library's own use",
    "Memory.run": "a handle to record into: a face's run calls take the run_id",
    "Memory.read_run": "a handle to read from: a face's run calls take the run_id",
}
#: public calls offered by one face only, and where
ONE_FACE_CALLS = {
    "Memory.append": "raw events, an importer's call rather than an agent's: HTTP's POST /events takes them as "
    "JSON Lines, as `memtape append` does; MCP has no tool for it",
}


def public_calls() -> set[str]:
    """Every public method of the library's `Run` and `Memory`, as `Run.name` / `Memory.name`."""
    return {
        f"{cls.__name__}.{name}"
        for cls in (memtape.Run, memtape.Memory)
        for name, _ in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_")
    }


def qualified(name: str) -> str:
    """The library call a face's call makes, as `Run.name` / `Memory.name`."""
    return f"Memory.{MEMORY_CALLS[name]}" if name in MEMORY_CALLS else f"Run.{RUN_CALLS.get(name, name)}"


def library_call(name: str) -> Callable[..., Any]:
    """The library method a call makes: the memory's or a run's."""
    if name in MEMORY_CALLS:
        return getattr(Memory, MEMORY_CALLS[name])  # type: ignore[no-any-return]
    return getattr(Run, RUN_CALLS.get(name, name))  # type: ignore[no-any-return]


#: calls that write (their answers are compared by the events they logged)
WRITES = frozenset(
    {
        "start_run",
        "record_step",
        "record_lesson",
        "observe_fact",
        "selector_result",
        "record_context",
        "finish",
        "give_context",
        "set_scratch",
        "store_page_map",
        "finish_run",
        "progress",
        "pattern_used",
        "snapshot",
        "backtracked",
        "repeated_failure",
        "use_embedding",
        "exploration_started",
        "sitemap_links",
        "sitemap_visited",
        "exploration_completed",
    }
)

#: values that differ between two memories given the same calls: event ids, clocks, measured time
VOLATILE = frozenset(
    {
        "id",
        "event_id",
        "event_ids",
        "at",
        "recorded_at",
        "occurred_at",
        "timestamp",
        "valid_from",
        "valid_to",
        "last_seen",
        "last_used",
        "created_at",
        "started_at",
        "completed_at",
        "updated_at",
        "memory_ms",
        "policy_fingerprint",
        "learned_from",
        "source_event_ids",
        "first_seen",
        "visited_at",
        "learned_at",
        "age_seconds",
        "extraction_id",
    }
)


def plain(value: Any) -> Any:
    """A library answer as JSON gives it."""
    return json.loads(json.dumps(value, default=lambda v: asdict(v) if is_dataclass(v) else str(v)))


def steady(value: Any) -> Any:
    """`value` without what differs between memories (VOLATILE keys)."""
    if isinstance(value, dict):
        return {k: steady(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [steady(v) for v in value]
    return value


def through_library(location: Path) -> list[Any]:
    """The FLOW's answers made through the library (writes answer None: the ledger tells)."""
    answers: list[Any] = []
    with memtape.open(location) as mem:
        run = None
        for name, arguments in FLOW:
            if name == "start_run":
                run = mem.start_run(**arguments)
                answers.append(None)
                continue
            if name == "abandon_stale_runs":  # seconds over the faces, a timedelta in Python
                arguments = {"older_than": timedelta(seconds=arguments["older_than"])}
            if name == "extraction":  # the page over the faces, the function giving it in Python
                arguments = {**arguments, "extract": lambda page=arguments["extract"]: page}
            target: Any = mem if name in MEMORY_CALLS else run
            answer = getattr(target, MEMORY_CALLS.get(name, name))(**arguments)
            answers.append(None if name in WRITES else plain(answer))
    return answers


def answers_equal(face: list[Any], library: list[Any], unwrap: Callable[[str, Any], Any]) -> None:
    """Each read's answer through a face is the library's (writes are compared by their events);
    every read but the first run's domain recall (nothing learned yet) finds something."""
    for i, ((name, _), got, want) in enumerate(zip(FLOW, face, library, strict=True)):
        if name in WRITES:
            continue
        assert steady(unwrap(name, got)) == steady(want), name
        assert want or i in (FIRST_DOMAIN_RECALL, ALREADY_INFERRED), name


def run_events(location: Path) -> list[tuple[Any, ...]]:
    """Every event of the FLOW's two runs as (type, run, step, domain, payload without VOLATILE)."""
    with memtape.open(location) as mem:
        return [
            (ev.type, ev.run_id, ev.step, ev.domain, steady(_unclocked(ev.run_id, ev.data)))
            for ev in mem.store.read()
            if ev.run_id in FLOW_RUNS
        ]


FLOW_RUNS = ("run_faces_a", "run_faces_b", "run_faces_c", "run_faces_d")


def _unclocked(run_id: str | None, data: dict[str, Any]) -> dict[str, Any]:
    """An event without what the clock gave: an abandoned run's time of its last event, and the
    measured duration of the runs ended without one given (abandoned, or finished by id)."""
    kept = {key: value for key, value in data.items() if not (key == "duration_ms" and run_id in MEASURED_RUNS)}
    return {
        key: ABANDONED if isinstance(value, str) and value.startswith(ABANDONED) else value
        for key, value in kept.items()
    }


MEASURED_RUNS = ("run_faces_c", "run_faces_d")
ABANDONED = "abandoned: no activity since "


def raw_bytes(folder: Path) -> bytes:
    """Every byte the memory directory holds."""
    return b"".join(p.read_bytes() for p in sorted(Path(folder).rglob("*")) if p.is_file())


#: every read of a run, with its arguments: a finished run answers each as the run did
RUN_READS: list[tuple[str, dict[str, Any]]] = [
    ("scratch", {}),
    ("get_scratch", {"key": "cart"}),
    ("get_all_page_maps", {}),
    ("get_page_map", {"url": SHOP}),
    ("has_page_map", {"url": SHOP}),
    ("get_page_summary", {"url": SHOP}),
    ("sessions", {"domain": None}),
    ("facts", {"domain": None}),
    ("selectors", {"domain": None}),
    ("loop_warnings", {}),
    ("prompt_context", {"domain": None}),
    ("relevant_context", {"domain": None}),
    ("step_memories", {"elements": PAGE, "intent": "accept the cookie banner"}),
    ("snapshots", {}),
    ("short_term", {}),
    ("known_failure", {"command": "click", "args": {}, "url": SHOP}),
]
#: calls a finished run refuses: its recall (an event of the run) and its writes
RUN_REFUSED: list[tuple[str, dict[str, Any]]] = [
    ("recall_domain", {}),
    ("tier1", {}),
    ("record_step", {"step": 9, "action": "click"}),
    ("record_lesson", {"text": "Accept cookies first"}),
    ("set_scratch", {"key": "k", "value": 1}),
    ("finish", {"success": True}),
    ("progress", {"turn": 5, "url": SHOP}),
    ("infer_context", {"key": "k", "value": "v", "source": "page"}),
    ("use_embedding", {"vector": [0.5], "model": "m"}),
    ("snapshot", {"url": SHOP, "title": "Shop", "summary": "s", "form_state": {}, "scroll": [0, 0], "step": 9}),
    ("exploration_started", {"homepage_url": SHOP, "max_depth": 1, "max_pages": 5}),
]


def finished_run(location: Path) -> tuple[str, list[Any]]:
    """A run of the session's second rep, recorded into and finished through the library, and the
    answers of RUN_READS by the handle that finished it (each finds something)."""
    with memtape.open(location) as mem:
        with mem.start_run(goal="Buy wool socks", start_url=SHOP, session_id="sess-done") as first:
            first.record_step(
                step=1,
                action="click",
                target='button "Accept cookies"',
                url=SHOP,
                think="accept the cookie banner",
                page_before={"url": SHOP, "title": "Shop", "page_type": "home", "elements": PAGE},
            )
            first.finish(success=True, outcome="accepted")
        run = mem.start_run(goal="Buy wool socks", start_url=SHOP, session_id="sess-done", run_id="run_done")
        run.give_context({"size": "wool socks in size 42"})
        run.record_step(step=1, action="click", target='button "Buy"', url=SHOP, ok=False, error=BLOCKED)
        for step in (2, 3, 4):
            run.record_step(step=step, action="click", target='button "Buy"', url=SHOP, ok=False, error=BLOCKED)
        run.observe_fact(kind="quirk", key="cookie banner", value="blocks clicks until accepted", step=4)
        run.selector_result(element='button "Buy"', selector="#buy", ok=True, step=4)
        run.set_scratch("cart", {"sku": "WS-42"}, step=4)
        run.store_page_map(
            SHOP,
            {
                "title": "Shop",
                "summary": "The shop's front page",
                "total_width": 1280,
                "total_height": 900,
                "regions": [],
            },
            step=4,
        )
        run.snapshot(SHOP, "Shop", "the front page, a cookie banner", {}, (0, 0), step=4)
        run.finish(success=False, outcome="blocked")
        answers = [plain(getattr(run, name)(**arguments)) for name, arguments in RUN_READS]
    for (name, _), answer in zip(RUN_READS, answers, strict=True):
        assert answer, name
    return "run_done", answers


#: the run calls that take a body over HTTP (every one that records, and known_failure), each with
#: arguments the library takes (the FLOW's last)
RECORDING = {
    name: arguments
    for name, arguments in FLOW
    if name not in MEMORY_CALLS and name != "finish" and (name in WRITES or ROUTES[name][0] == "post")
}


def extremes() -> st.SearchStrategy[Any]:
    """JSON values a caller may send where another was expected: extremes of each type, text a
    field refuses (NUL, past MAX_TEXT), nested values."""
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(st.characters(blacklist_categories=("Cs",)), max_size=20),
        st.sampled_from(["", "nul\x00here", "x" * 100_001, "javascript:alert(1)"]),
        st.lists(st.integers(min_value=-(2**65), max_value=2**65), max_size=3),
        st.dictionaries(st.text(max_size=5), st.one_of(st.text(max_size=5), st.integers()), max_size=2),
    )
