"""Valid example events of every type, and hypothesis strategies built from them.

Shared by the ledger's tests and benchmarks: one example per event type (with
every required field), free-text fields marked `T` so a strategy can replace
them with arbitrary text, and JSON-ish values for the `Any` fields.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from memtape.ledger.envelope import NewEvent
from memtape.ledger.events import EVENT_TYPES, PAYLOAD_ADAPTER

T = object()  # marks free text a strategy may replace

SAMPLES: dict[str, dict[str, Any]] = {
    "run_started": {"goal": T, "session_id": "s1", "start_url": T, "policy": {"tier1_cap": 10}},
    "run_progress": {"turn": 3, "current_url": T},
    "run_completed": {
        "success": True,
        "summary": T,
        "final_url": T,
        "turns": 4,
        "tokens_in": 10,
        "tokens_out": 5,
        "duration_ms": 12.5,
        "artifact_paths": [T],
    },
    "session_recorded": {
        "session_id": "s1",
        "goal": T,
        "outcome": T,
        "success": False,
        "timestamp": "2026-01-01T00:00:00Z",
        "turns_used": 2,
        "duration_ms": 100.0,
    },
    "step_recorded": {
        "env_before": {"url": T, "title": T, "page_type": "form", "elements": ["button:Go"]},
        "env_after": {"url": T},
        "think": T,
        "action": {"command": "click", "args": {"selector": T, "n": 1}},
        "target": {"role": "button", "name": T},
        "target_text": T,
        "ok": False,
        "error": T,
        "duration_ms": 3.0,
    },
    "step_graded": {"outcome": "failure", "reason": T, "correction": T},
    "tier1_loaded": {"count": 1, "lessons": [T], "lesson_ids": ["l1"]},
    "error_recall": {"command": T, "error_snippet": T, "matched": 0},
    "domain_recall": {"matched": 1, "lessons": [T], "lesson_ids": ["l1"]},
    "trajectory_recalled": {"goal": T, "trajectory_id": "t1", "similarity": 0.5, "steps": 2},
    "memory_searched": {
        "query": "wool socks",
        "kinds": ["lessons", "facts"],
        "domain_filter": "shop.test",
        "as_of": "12",
        "limit": 5,
        "matched": 1,
        "hits": [{"kind": "lessons", "item_id": "l1", "score": 1.25}],
    },
    "context_built": {
        "budget": 1000,
        "total_tokens": 20,
        "items": [{"source": "tier1", "priority": 50, "tokens": 20, "text": T, "event_ids": ["e1"]}],
        "trimmed": [],
    },
    "lesson_seeded": {"lesson_id": "l1", "lesson": T, "category": "best_practice"},
    "lesson_recorded": {
        "lesson_id": "l2",
        "lesson": T,
        "category": "error_recovery",
        "failed_command": T,
        "error_pattern": T,
        "scope_domain": "example.com",
        "triggered_domains": ["example.com"],
    },
    "lesson_deduplicated": {"lesson_id": "l2", "lesson": T, "category": "error_recovery", "new_use_count": 2},
    "lesson_promoted": {
        "lesson_id": "l2",
        "lesson": T,
        "use_count": 5,
        "triggered_domains": ["a.com", "b.com", "c.com"],
    },
    "lesson_pinned": {"lesson_id": "l2", "pinned_by": T, "reason": T, "from_category": "error_recovery"},
    "lesson_unpinned": {"lesson_id": "l2", "unpinned_by": T, "reason": T, "from_category": "best_practice"},
    "lesson_demoted": {"lesson_id": "l2", "lesson": T, "turns_saved": -2},
    "lessons_pruned": {"lesson_ids": ["l3"], "pruned_count": 1, "remaining_count": 4, "as_of": "2026-04-01T00:00:00Z"},
    "fact_observed": {"fact_type": "quirk", "key": T, "value": T},
    "fact_contradicted": {"fact_type": "timing", "key": T, "old_values": [T], "new_value": T, "factor": 0.5},
    "facts_pruned": {"facts": [{"key": T, "confidence": 0.05}], "threshold": 0.1},
    "selector_succeeded": {"role": "button", "name": T, "selector": "#go"},
    "selector_failed": {"role": "link", "name": T, "selector": "a.next", "error": T},
    "trajectory_recorded": {
        "trajectory_id": "t1",
        "goal": T,
        "origin": T,
        "steps": [{"command": "goto", "url": T, "args": {"url": T}}],
    },
    "trajectories_expired": {"trajectory_ids": ["t0"], "ttl_days": 30, "as_of": "2026-02-01T00:00:00Z"},
    "memory_imported": {"source_format": "lessons-json", "source_path": T, "source_digest": "ab" * 32},
    "subject_forgotten": {"subject_kind": "domain", "subject": "example.com", "reason": T},
    "pattern_learned": {
        "pattern_id": "pat_1",
        "description": T,
        "pattern_type": "login_flow",
        "steps": [{"command": "fill", "role": "textbox", "name": T, "value": "{password}"}],
    },
    "pattern_used": {"pattern_id": "pat_1", "success": True},
    "lessons_used": {"recall_step": 1, "cleared_at": 2, "lesson_ids": ["l1"]},
    "patterns_pruned": {"pattern_ids": ["pat_0"], "max_patterns": 100, "remaining_count": 80},
    "context_given": {"key": T, "value": T},
    "context_inferred": {"key": "login_required", "value": "true", "source": T},
    "extraction_recorded": {
        "key": T,
        "tool": "extract_text",
        "url": T,
        "text": T,
        "title": T,
        "links": [{"url": T, "text": T}],
        "section_count": 2,
    },
    "extraction_served": {"key": T, "extraction_id": "e1", "age_seconds": 12.5, "ttl_seconds": 300},
    "snapshot_taken": {
        "snapshot_id": "snap_1",
        "url": T,
        "title": T,
        "visible_elements_summary": T,
        "form_state": {"q": T},
        "scroll_y": 500,
        "associated_step": 2,
    },
    "backtracked": {"snapshot_id": "snap_1", "from_url": T, "to_url": T, "reason": T, "avoided": [T]},
    "repeated_failure_detected": {"signature": "0123abcd", "action": T, "url": T, "response": "warned"},
    "exploration_started": {"homepage_url": T, "max_depth": 2, "max_pages": 50},
    "sitemap_links_discovered": {
        "parent_url": T,
        "depth": 0,
        "links": [{"url": T, "text": T, "link_type": "main_nav"}],
    },
    "sitemap_page_visited": {"url": T, "title": T, "summary": T, "section_count": 3, "depth": 1},
    "exploration_completed": {
        "homepage_url": T,
        "pages_visited": 4,
        "pages_discovered": 6,
        "complete": True,
        "summary": T,
    },
    "request_answered": {"request_sha256": "0" * 64, "status": 201, "response": {"run_id": T}},
    "scratch_set": {"key": T, "value": {"items": [T, 2], "page": 1}},
    "item_credited": {
        "item": "lsn_0123456789abcdef",
        "kind": "lesson",
        "text": T,
        "credited_run": "run_1",
        "method": "exact+rerun",
        "shown": 3,
        "changed": 1,
        "turns_saved": 2,
        "tokens_saved": 4000,
        "evidence_runs": ["run_2"],
    },
    "page_map_stored": {
        "url": T,
        "title": T,
        "summary": T,
        "total_width": 1280,
        "total_height": 3000,
        "regions": [{"kind": "navigation", "name": T, "description": T, "elements": [T], "start_y": 0, "end_y": 120}],
    },
}
assert set(SAMPLES) == set(EVENT_TYPES), set(EVENT_TYPES) ^ set(SAMPLES)


def fill(value: Any, text: str = "sample text") -> Any:
    """The sample with every `T` replaced by `text`."""
    if value is T:
        return text
    if isinstance(value, dict):
        return {k: fill(v, text) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, text) for v in value]
    return value


def sample_payload(type_: str, text: str = "sample text") -> Any:
    return PAYLOAD_ADAPTER.validate_python({"type": type_, **fill(SAMPLES[type_], text)})


def sample_event(type_: str, text: str = "sample text", **envelope: Any) -> NewEvent:
    """A valid NewEvent of `type_` (a run_id is added when the type needs one)."""
    payload = sample_payload(type_, text)
    if payload.NEEDS_RUN and "run_id" not in envelope:
        envelope["run_id"] = "run-1"
    return NewEvent(payload=payload, **envelope)


def sample_line(type_: str, text: str = "sample text", **envelope: Any) -> dict[str, Any]:
    """The same event as one JSON Lines object (payload fields at the top level)."""
    obj = {"type": type_, **fill(SAMPLES[type_], text), **envelope}
    if EVENT_TYPES[type_].NEEDS_RUN and "run_id" not in obj:
        obj["run_id"] = "run-1"
    return obj


# ---- strategies ----------------------------------------------------------------

#: any Unicode text a JSON document can carry, except NUL (refused by design)
texts = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=30)
domains = st.from_regex(r"\A[a-z0-9]{1,10}(\.[a-z0-9]{1,8}){0,2}\Z").filter(lambda d: not d.endswith("-"))
idents = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9_.:@-]{0,20}\Z")
timestamps = st.datetimes(
    min_value=__import__("datetime").datetime(2000, 1, 1),
    max_value=__import__("datetime").datetime(2099, 1, 1),
).map(lambda d: d.strftime("%Y-%m-%dT%H:%M:%S.%fZ"))


@st.composite
def payload_dicts(draw: Any, type_: str | None = None) -> dict[str, Any]:
    """A JSON-ready payload dict (with `type`) whose free-text fields hold arbitrary text."""
    type_ = type_ or draw(st.sampled_from(sorted(SAMPLES)))

    def walk(value: Any) -> Any:
        if value is T:
            return draw(texts)
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    return {"type": type_, **walk(SAMPLES[type_])}


@st.composite
def new_events(draw: Any) -> NewEvent:
    """A valid NewEvent of any type with a random envelope."""
    data = draw(payload_dicts())
    payload = PAYLOAD_ADAPTER.validate_python(data)
    run_id = draw(idents) if payload.NEEDS_RUN else draw(st.none() | idents)
    return NewEvent(
        payload=payload,
        run_id=run_id,
        step=draw(st.none() | st.integers(0, 500)),
        domain=draw(st.none() | domains),
        stream=draw(st.none() | idents),
        occurred_at=draw(st.none() | timestamps),
    )
