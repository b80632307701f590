"""Extraction results in prompts (seed 003's extraction budget and ContextCompressor), without a model.

Budget: all extractions together take at most 20% of the budget left after the
other sections and at most 4,000 tokens; each is cut to 8,000 characters
keeping its head and its tail. Compression, first: an extraction above 2,000
tokens is compressed by tier — 1 (recent, this run): full detail; 2 (session): text
compressed (whitespace collapsed, repeated lines dropped, long lines cut) with
every URL and selector of the input kept; 3 (archival): facts only (lines with
figures or "key: value"). Results of URL-critical tools (search results, page
state, attributes) are never compressed: their URLs and selectors are what
the next action needs.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from memtape.projections.budget import CHARS_PER_TOKEN, MIN_TRUNCATED_TOKENS, count_tokens, longest_cut

MAX_BUDGET_SHARE = 0.20
MAX_EXTRACTION_TOKENS = 4000
MAX_SINGLE_CHARS = 8000
COMPRESS_ABOVE_TOKENS = 2000
URL_CRITICAL_TOOLS = frozenset({"search", "search_human", "search_api", "search_rank", "get_page_state",
                                "get_attribute"})
URL_RE = re.compile(r"https?://[^\s\"'<>()\[\]{}]+")
SELECTOR_RE = re.compile(r"role=[a-z]+\[name=\"[^\"\n]*\"s?\]|(?<![\w/.#:-])[#.][A-Za-z_][\w-]*|\[[a-z][\w-]*=\"[^\"\n]*\"\]")
FACT_LINE = re.compile(r"\d|^[^:]{1,60}:\s*\S")
MAX_PROSE = 160
MAX_FACTS = 20


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
    return text[:head] + marker + text[len(text) - (room - head):] if room else text[:max_chars]


def compress(text: str, tier: int) -> str:
    """Deterministic compression by tier (see the module docstring). Tier 2 keeps every line that
    names a URL or a selector whole; other lines are cut to MAX_PROSE characters and dropped when
    they repeat an earlier line but for its numbers (release notes, listings). Tier 3 keeps facts."""
    if tier <= 1:
        return text
    lines: list[str] = []
    seen: set[str] = set()
    for raw in text.splitlines():
        line = " ".join(raw.split())
        if not line:
            continue
        keeps_refs = tier == 2 and (URL_RE.search(line) or SELECTOR_RE.search(line))
        shape = line if keeps_refs else re.sub(r"\d+", "#", line)
        if shape in seen:
            continue
        seen.add(shape)
        if tier >= 3 and not FACT_LINE.search(line):
            continue
        if not keeps_refs and len(line) > MAX_PROSE:
            line = line[:MAX_PROSE - 1] + "…"
        lines.append(line)
    if tier >= 3:
        return "Facts:\n" + "\n".join(f"- {ln}" for ln in lines[:MAX_FACTS])
    body = "\n".join(lines)
    urls = [u for u in urls_in(text) if u not in body]
    sels = [x for x in selectors_in(text) if x not in body]
    out = [body]
    if urls:
        out.append("URLs: " + " ".join(urls))
    if sels:
        out.append("Selectors: " + " ".join(sels))
    return "\n".join(out)


@dataclass(frozen=True)
class ExtractionText:
    """One extraction as it will be shown: its text, tier and whether it was cut or compressed."""

    text: str
    tier: int
    truncated: bool
    compressed: bool


def prepare(text: str, tool: str, tier: int) -> ExtractionText:
    """Compress by tier when above COMPRESS_ABOVE_TOKENS (never a URL-critical tool's result,
    never the recent tier), then cut to MAX_SINGLE_CHARS keeping head and tail."""
    compressed = tool not in URL_CRITICAL_TOOLS and tier > 1 and count_tokens(text) > COMPRESS_ABOVE_TOKENS
    body = compress(text, tier) if compressed else text
    cut = head_tail(body, MAX_SINGLE_CHARS)
    return ExtractionText(cut, tier, cut != body, compressed)


def allowance(budget_left: int) -> int:
    """Tokens all extractions may take: 20% of what is left, never more than 4,000."""
    return max(0, min(MAX_EXTRACTION_TOKENS, int(budget_left * MAX_BUDGET_SHARE)))


def fit_extractions(texts: Sequence[str], budget_left: int) -> list[tuple[str, bool]]:
    """The texts (newest first) that fit the allowance: whole while they fit, the first that does
    not cut head-and-tail to what is left (when a useful part fits), the rest dropped.
    Returns (text, truncated) for each kept one."""
    left = allowance(budget_left)
    out: list[tuple[str, bool]] = []
    for text in texts:
        tokens = count_tokens(text)
        if tokens <= left:
            out.append((text, False))
            left -= tokens
            continue
        if left >= MIN_TRUNCATED_TOKENS:
            cut = longest_cut(lambda n: head_tail(text, n), min(int(left * CHARS_PER_TOKEN["text"]) - 4, len(text)), left)
            out.append((cut if cut is not None else head_tail(text, 40), True))
        break
    return out
