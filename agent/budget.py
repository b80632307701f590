"""The context budget (seeds 000 and 003): prioritized prompt items, trimmed lowest first.

Every section of a per-step prompt is an item with a priority and a token
estimate by content type (text 4, code 3.5, JSON 3, HTML 2.5 characters per
token). Priorities are strict (seed 000: "higher priority items survive
context budget trimming"): items are taken from the highest priority down
(equal priorities in their given order) while they fit; the first one that
does not fit is the boundary — it is truncated, its head and tail kept around
a marker (seed 003), when at least MIN_TRUNCATED_TOKENS of it fit, else
dropped — and every item after it is dropped. So an item is dropped only
after every lower-priority item is. What was kept and what was trimmed are
both returned, so the memory facade can record them in `context_built`.

Example:
    result = fit([BudgetItem("page_state", PRIORITIES["page_state"], text)], budget=2000)
    result.kept, result.trimmed, result.total_tokens
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

#: chars per token by content type (seed 003's TokenEstimator)
CHARS_PER_TOKEN: dict[str, float] = {"text": 4.0, "code": 3.5, "json": 3.0, "html": 2.5}

#: priorities of the prompt sections; seed 000 fixes the middle four
PRIORITIES: dict[str, int] = {
    "last_error": 90,        # the failure the next action must react to, with its tips
    "page_state": 80,        # what is on the page now: without it no action is possible
    "domain_tips": 60,       # Trigger B lessons for this site
    "session_history": 50,   # seed 000
    "reference_trajectory": 40,  # seed 000
    "recent_actions": 35,    # short-term memory and loop warnings (seed 003)
    "app_knowledge": 30,     # seed 000
    "known_selectors": 25,   # seed 000
    "step_memories": 20,     # REPEAT/AVOID (seed 002)
}
DEFAULT_BUDGET = 2500
MIN_TRUNCATED_TOKENS = 40


def estimate_tokens(text: str, content_type: str = "text") -> int:
    """Tokens a model would read for `text` (ceil of chars / chars-per-token)."""
    if not text:
        return 0
    return math.ceil(len(text) / CHARS_PER_TOKEN.get(content_type, 4.0))


@dataclass(frozen=True)
class BudgetItem:
    source: str
    priority: int
    text: str
    content_type: str = "text"
    event_ids: tuple[str, ...] = ()
    truncated: bool = False

    @property
    def tokens(self) -> int:
        return estimate_tokens(self.text, self.content_type)


@dataclass
class BudgetResult:
    kept: list[BudgetItem] = field(default_factory=list)
    trimmed: list[BudgetItem] = field(default_factory=list)
    budget: int = DEFAULT_BUDGET

    @property
    def total_tokens(self) -> int:
        return sum(i.tokens for i in self.kept)


def truncate(item: BudgetItem, tokens: int) -> BudgetItem:
    """`item` cut to at most `tokens`: its head and its tail (where a fenced section closes),
    with a marker saying how much of the middle was left out."""
    per = CHARS_PER_TOKEN.get(item.content_type, 4.0)
    text = item.text
    keep = int(tokens * per) - 40  # room for the marker
    while keep > 0:
        head = keep * 2 // 3
        tail = keep - head
        marker = f"\n[... {len(text) - head - tail} characters trimmed ...]\n"
        cut = replace(item, text=text[:head] + marker + (text[-tail:] if tail else ""), truncated=True)
        if cut.tokens <= tokens:
            return cut
        keep -= max(1, int(per))
    return replace(item, text="", truncated=True)


def fit(items: list[BudgetItem], budget: int = DEFAULT_BUDGET) -> BudgetResult:
    """Keep items from the highest priority down while they fit; truncate the boundary item
    (head and tail) when a useful part of it fits; drop it and everything below it otherwise.
    Kept items come back in their given order."""
    order = sorted(range(len(items)), key=lambda i: (-items[i].priority, i))
    keep: dict[int, BudgetItem] = {}
    trimmed: list[BudgetItem] = []
    left = budget
    boundary_passed = False
    for i in order:
        item = items[i]
        if not boundary_passed and item.tokens <= left:
            keep[i] = item
            left -= item.tokens
            continue
        if not boundary_passed and left >= MIN_TRUNCATED_TOKENS:
            cut = truncate(item, left)
            keep[i] = cut
            left -= cut.tokens
        boundary_passed = True
        trimmed.append(item)
    return BudgetResult(kept=[keep[i] for i in sorted(keep)], trimmed=trimmed, budget=budget)
