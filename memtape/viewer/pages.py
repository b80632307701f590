"""What each page of the viewer shows, read through the public API only (`Memory.state`, `audit`,
`explain`, `diff`): the same answers the HTTP API and MCP give, shaped for a person to look at.

Long lists are cut into pages of `PAGE_SIZE` (`paged`); every function here returns plain data the
templates render (autoescaped), and raises the library's own errors (an unknown run or item is
`UnknownItem`, a 404) for the app to show in one line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memtape.api import Memory, MemtapeError

PAGE_SIZE = 50
#: the searchable text of each kind of memory a search looks through, and the field naming an item
SEARCHED: dict[str, tuple[tuple[str, ...], str]] = {
    "lessons": (("lesson", "failed_command", "error_pattern", "scope_domain"), "lesson_id"),
    "facts": (("key", "value", "fact_type", "domain"), "fact_id"),
    "trajectories": (("goal", "domain"), "trajectory_id"),
    "selectors": (("name", "selector", "role", "domain"), "selector"),
}
MAX_QUERY = 200


@dataclass(frozen=True)
class Page:
    """One page of a long list: its rows, its number (from 1), how many pages, how many rows."""

    rows: Sequence[Any]
    number: int
    pages: int
    total: int


def page_number(raw: str | None) -> int:
    """`?page=` as a person may type it: digits from 1; anything else is refused in one line."""
    if raw is None or raw == "":
        return 1
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 9 or int(raw) < 1:
        raise MemtapeError(f"page must be a whole number from 1, got {raw[:40]!r}")
    return int(raw)


def paged(rows: Sequence[Any], number: int, size: int = PAGE_SIZE) -> Page:
    """Page `number` of `rows` (a page past the last is the last, so a stale link still shows rows)."""
    pages = max(1, -(-len(rows) // size))
    number = min(number, pages)
    return Page(rows[(number - 1) * size : number * size], number, pages, len(rows))


def outcome(run: dict[str, Any]) -> str:
    """A run's outcome as the list filters it: running, success or failed."""
    if run.get("status") == "running":
        return "running"
    return "success" if run.get("success") else "failed"


OUTCOMES = ("running", "success", "failed")


def runs(
    memory: Memory, *, site: str | None = None, session: str | None = None, result: str | None = None
) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """(runs newest first, filtered; every site; every session) for the list of runs."""
    if result is not None and result not in OUTCOMES:
        raise MemtapeError(f"outcome must be one of {', '.join(OUTCOMES)}, got {result[:40]!r}")
    every = memory.state("runs")
    sites = sorted({r["domain"] for r in every if r.get("domain")})
    sessions = sorted({r["session_id"] for r in every if r.get("session_id")})
    shown = [
        dict(r, outcome=outcome(r))
        for r in every
        if (site is None or r.get("domain") == site)
        and (session is None or r.get("session_id") == session)
        and (result is None or outcome(r) == result)
    ]
    return shown, sites, sessions


def funnel(memory: Memory) -> list[tuple[str, int]]:
    """The promotion funnel of learned lessons: learned, used again, used as often as promotion
    asks, on as many domains as it asks, in Tier 1 (the policy's thresholds)."""
    policy = memory.policy
    learned = [l for l in memory.state("lessons") if l.get("source") != "seed"]
    tier1 = {l["lesson_id"] for l in memory.state("tier1")}
    return [
        ("learned", len(learned)),
        ("used again", sum(1 for l in learned if l["use_count"] >= 2)),
        (f"≥ {policy.promotion_min_uses} uses", sum(1 for l in learned if l["use_count"] >= policy.promotion_min_uses)),
        (
            f"≥ {policy.promotion_min_domains} domains",
            sum(1 for l in learned if len(l["triggered_domains"]) >= policy.promotion_min_domains),
        ),
        ("in Tier 1", sum(1 for l in learned if l["lesson_id"] in tier1)),
    ]


def step_tokens(step: dict[str, Any]) -> int:
    """Tokens of the prompts recorded at a step (system and step prompt)."""
    return sum(int(p.get("total_tokens") or 0) for p in step.get("prompt", ()))


def taught(memory: Memory, run_id: str) -> dict[str, list[dict[str, Any]]]:
    """What memory holds now that run `run_id` taught: its lessons, facts, trajectory, and the
    patterns learned in it."""
    return {
        "lessons": [l for l in memory.state("lessons") if l.get("taught_by_run") == run_id],
        "facts": [f for f in memory.state("facts") if f.get("first_run") == run_id],
        "trajectories": [t for t in memory.state("trajectories") if t.get("run_id") == run_id],
        "patterns": [p for p in memory.state("patterns") if p.get("first_run") == run_id],
    }


def records_now(explained: dict[str, Any]) -> list[dict[str, Any]]:
    """An explained item as memory holds it now: a fact key or a selector may name several records
    (one per site), a lesson or trajectory one, a forgotten item none."""
    now = explained.get("now")
    if isinstance(now, list):
        return now
    return [now] if now else []


def confidence_points(life: Sequence[dict[str, Any]]) -> list[tuple[int, float]]:
    """(seq, confidence) along a fact's life, for its chart."""
    return [(int(e["seq"]), float(e["confidence"])) for e in life if e.get("confidence") is not None]


def changes_by_projection(changes: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """A diff's changes grouped by kind of memory, in the order the diff lists them."""
    out: dict[str, list[dict[str, Any]]] = {}
    for change in changes:
        out.setdefault(change["projection"], []).append(change)
    return out


def search(memory: Memory, query: str) -> dict[str, list[dict[str, Any]]]:
    """Memory items whose text holds every word of `query` (case-insensitive), by kind."""
    if len(query) > MAX_QUERY:
        raise MemtapeError(f"a search is at most {MAX_QUERY} characters, got {len(query)}")
    words = query.casefold().split()
    if not words:
        return {}
    found: dict[str, list[dict[str, Any]]] = {}
    for kind, (fields, _name) in SEARCHED.items():
        for record in memory.state(kind):
            text = " ".join(str(record.get(f) or "") for f in fields).casefold()
            if all(w in text for w in words):
                found.setdefault(kind, []).append(record)
    return found
