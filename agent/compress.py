"""Extraction results in prompts (seed 003's extraction budget and ContextCompressor), without a model.

Budget: all extractions together take at most 20% of the budget left after the
other sections and at most 4,000 tokens; each is cut to 8,000 characters. Compression, first: an
extraction above 2,000 tokens is compressed by tier — 1 (recent, this run): full detail, cut
head and tail; 2 (session): text compressed (whitespace collapsed, repeated lines dropped, long
prose lines cut) with every URL and selector of the input kept; 3 (archival): facts only (lines
with figures or "key: value") and every URL. Only a line repeated word for word is a repeat: lines
that differ in their numbers (200 priced items) are distinct facts. A compressed extraction that
is still too long keeps its lines from the top while they fit beside the list of every URL (and
selector) they leave out, so a cut loses prose before it loses a URL; when even that list does
not fit, it keeps as many URLs as fit, first ones first. Results of URL-critical tools (search
results, page state, attributes) are never compressed: their URLs and selectors are what the
next action needs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from memtape.projections.budget import CHARS_PER_TOKEN, MIN_TRUNCATED_TOKENS, count_tokens, longest_cut

MAX_BUDGET_SHARE = 0.20
MAX_EXTRACTION_TOKENS = 4000
MAX_SINGLE_CHARS = 8000
COMPRESS_ABOVE_TOKENS = 2000
URL_CRITICAL_TOOLS = frozenset(
    {"search", "search_human", "search_api", "search_rank", "get_page_state", "get_attribute"}
)
URL_RE = re.compile(r"https?://[^\s\"'<>()\[\]{}]+")
SELECTOR_RE = re.compile(
    r"role=[a-z]+\[name=\"[^\"\n]*\"s?\]|(?<![\w/.#:-])[#.][A-Za-z_][\w-]*|\[[a-z][\w-]*=\"[^\"\n]*\"\]"
)
FACT_LINE = re.compile(r"\d|^[^:]{1,60}:\s*\S")
MAX_PROSE = 160


def urls_in(text: str) -> list[str]:
    return list(dict.fromkeys(URL_RE.findall(text)))


def selectors_in(text: str) -> list[str]:
    """CSS id, class and attribute selectors and Playwright role selectors named in a text."""
    return list(dict.fromkeys(m for m in SELECTOR_RE.findall(text) if not m.startswith(".") or len(m) > 2))


def head_tail(text: str, max_chars: int) -> str:
    """At most max_chars: two thirds head, one third tail, the cut marked."""
    if len(text) <= max_chars:
        return text
    marker = f"\n[... {len(text) - max_chars} characters omitted ...]\n"
    room = max(max_chars - len(marker), 0)
    head = room * 2 // 3
    return text[:head] + marker + text[len(text) - (room - head) :] if room else text[:max_chars]


def compress(text: str, tier: int, max_chars: int | None = None) -> str:
    """Deterministic compression by tier (see the module docstring), within `max_chars` when given."""
    return _compressed(text, tier, max_chars)[0]


def _compressed(text: str, tier: int, max_chars: int | None) -> tuple[str, bool]:
    """(the compressed text, whether lines or references were left out to fit `max_chars`)."""
    if tier <= 1:
        return text, False
    lines: list[str] = ["Facts:"] if tier >= 3 else []
    seen: set[str] = set()
    for raw in text.splitlines():
        line = " ".join(raw.split())
        if not line or line in seen:
            continue
        seen.add(line)
        if tier >= 3 and not FACT_LINE.search(line):
            continue
        if len(line) > MAX_PROSE and not (URL_RE.search(line) or SELECTOR_RE.search(line)):
            line = line[: MAX_PROSE - 1] + "…"
        lines.append(f"- {line}" if tier >= 3 else line)
    first = 1 if tier >= 3 else 0  # the "Facts:" heading is never left out
    refs = {"URLs": urls_in(text), "Selectors": selectors_in(text) if tier == 2 else []}
    shown = [_refs_in(line, tier) for line in lines]

    def render(kept: int) -> str:
        """The first `kept` lines, a note of the others, and every reference they do not show."""
        found = set().union(*shown[:kept])
        out = lines[:kept] + ([f"[... {len(lines) - kept} more lines omitted ...]"] if kept < len(lines) else [])
        for name, items in refs.items():
            left_out = [r for r in items if r not in found]
            if left_out:
                out.append(f"{name}: " + " ".join(left_out))
        return "\n".join(out)

    whole = render(len(lines))
    if max_chars is None or len(whole) <= max_chars:
        return whole, False
    # lines from the top while they fit beside the references they leave out (an estimate that
    # never undercounts what a line frees; the rendering decides)
    kept, size, unseen = first, len(render(first)), set().union(*refs.values())
    while kept < len(lines):
        new = shown[kept] & unseen
        grown = size + len(lines[kept]) + 1 - sum(len(r) + 1 for r in new)
        if grown > max_chars:
            break
        unseen -= new
        kept, size = kept + 1, grown
    while kept >= first:
        out = render(kept)
        if len(out) <= max_chars:
            return out, True
        kept -= 1
    return _references_only(
        lines[:first] + [f"[... {len(lines) - first} more lines omitted ...]"], refs, max_chars
    ), True


def _references_only(head: list[str], refs: dict[str, list[str]], max_chars: int) -> str:
    """When not even the list of references fits: as many as do after `head`, first ones first
    (URLs before selectors), each list's omission noted."""
    out = list(head)
    used = sum(len(line) + 1 for line in out)
    for name, items in refs.items():
        if not items:
            continue
        note = f"[... {len(items)} more {name} omitted ...]"  # the longest the note can be
        room = max_chars - used - (len(note) + 1) - (len(name) + 2)
        taken: list[str] = []
        for r in items:
            if len(r) + 1 > room:
                break
            taken.append(r)
            room -= len(r) + 1
        if taken:
            out.append(f"{name}: " + " ".join(taken))
        if len(taken) < len(items):
            out.append(f"[... {len(items) - len(taken)} more {name} omitted ...]")
        used = sum(len(line) + 1 for line in out)
    return "\n".join(out)[:max_chars]


def _refs_in(line: str, tier: int) -> set[str]:
    """The URLs (and, tier 2, selectors) a line shows whole."""
    return set(URL_RE.findall(line)) | (set(selectors_in(line)) if tier == 2 else set())


@dataclass(frozen=True)
class ExtractionText:
    """One extraction as it will be shown: its text, tier and whether it was cut or compressed."""

    text: str
    tier: int
    truncated: bool
    compressed: bool


def prepare(text: str, tool: str, tier: int, max_chars: int = MAX_SINGLE_CHARS) -> ExtractionText:
    """Compress by tier when above COMPRESS_ABOVE_TOKENS (never a URL-critical tool's result,
    never the recent tier), within `max_chars` (keeping every URL that fits); anything else is cut
    to `max_chars` keeping head and tail."""
    if tool not in URL_CRITICAL_TOOLS and tier > 1 and count_tokens(text) > COMPRESS_ABOVE_TOKENS:
        body, cut = _compressed(text, tier, max_chars)
        return ExtractionText(body, tier, cut, True)
    body = head_tail(text, max_chars)
    return ExtractionText(body, tier, body != text, False)


def allowance(budget_left: int) -> int:
    """Tokens all extractions may take: 20% of what is left, never more than 4,000."""
    return max(0, min(MAX_EXTRACTION_TOKENS, int(budget_left * MAX_BUDGET_SHARE)))


def fit_extractions(extractions: Sequence[tuple[str, str, int]], budget_left: int) -> list[ExtractionText]:
    """The extractions — (text, tool, tier), newest first — that fit the allowance, each prepared
    (compressed, cut to MAX_SINGLE_CHARS): whole while they fit; the first that does not is
    prepared again to what is left (when a useful part fits: a compressed one keeping every URL
    that fits, another its head and tail), the rest dropped."""
    left = allowance(budget_left)
    out: list[ExtractionText] = []
    for text, tool, tier in extractions:
        prepared = prepare(text, tool, tier)
        tokens = count_tokens(prepared.text)
        if tokens <= left:
            out.append(prepared)
            left -= tokens
            continue
        if left >= MIN_TRUNCATED_TOKENS:
            cut = longest_cut(
                lambda n: prepare(text, tool, tier, n).text,  # noqa: B023 (called in this iteration)
                int(left * CHARS_PER_TOKEN["text"]),
                left,
            )
            if cut is not None:  # cut again, compressed or head-and-tail, to what the tokens left allow
                out.append(replace(prepared, text=cut, truncated=True))
        break
    return out
