"""Learning seed 003's long-term patterns from a successful run's steps (pure functions).

A login flow is the click that opened the login form (when there was one), the
fields typed on that page and the click that submitted them, when one of the
fields is a password field; a form fill is the same without a password; a
navigation is the run's page-changing clicks when there are at least two and
no form. Typed values become placeholders named after their field (`{password}`
for a password field), so a pattern never holds what was typed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, cast

from memtape.ledger.events import PatternLearned, PatternStep, PatternType
from memtape.projections.folds.patterns import pattern_id_for

FIELD_COMMANDS = ("fill", "type", "select")
PASSWORD_PLACEHOLDER = "{password}"
USER_PLACEHOLDER = "{username}"


def placeholder(name: str | None, sensitive: bool) -> str:
    """`{password}` for a password field, else `{field_name}` from the field's accessible name."""
    if sensitive:
        return PASSWORD_PLACEHOLDER
    slug = re.sub(r"[^a-z0-9]+", "_", (name or "value").lower()).strip("_")[:40]
    return "{" + (slug or "value") + "}"


def _step(s: Any) -> PatternStep:
    value = placeholder(s.name, s.sensitive) if s.command in FIELD_COMMANDS else None
    if s.command == "press":
        value = str(s.args.get("key", ""))
    return PatternStep(
        command=s.command, role=s.role, name=(s.name or None) and s.name[:300], value=value, url=s.url_before[:2000]
    )


def _describe(kind: str, steps: Sequence[Any], domain: str) -> str:
    if kind == "login_flow":
        return f"Login flow for {domain}"
    if kind == "form_fill":
        fields = ", ".join(f'"{s.name}"' for s in steps if s.command in FIELD_COMMANDS and s.name)
        return f"Fill {fields[:300]} on {domain}"
    return f"Navigate {domain}: " + " → ".join(f'"{s.name}"' for s in steps if s.name)[:400]


def learn_patterns(steps: Sequence[Any], domain: str) -> list[PatternLearned]:
    """The patterns a successful run's effective steps show (see the module docstring)."""
    out: list[PatternLearned] = []
    used = [s for s in steps if s.ok and s.command != "finish" and s.decided_by != "backtrack"]
    i = 0
    while i < len(used):
        s = used[i]
        if s.command not in FIELD_COMMANDS:
            i += 1
            continue
        page = s.url_before
        j = i
        while j < len(used) and used[j].url_before == page and used[j].command in FIELD_COMMANDS + ("click", "press"):
            j += 1
            if used[j - 1].url_after != page:
                break
        segment = used[i:j]
        opener = (
            used[i - 1]
            if i > 0
            and used[i - 1].command == "click"
            and used[i - 1].url_after == page
            and used[i - 1].url_before != page
            else None
        )
        submitted = segment[-1].command in ("click", "press") and segment[-1].url_after != page
        if submitted:
            kind = "login_flow" if any(x.sensitive for x in segment) else "form_fill"
            flow = ([opener] if opener is not None and kind == "login_flow" else []) + list(segment)
            out.append(_pattern(kind, flow, domain))
        i = j
    if not any(s.command in FIELD_COMMANDS for s in used):
        nav = [s for s in used if s.command == "click" and s.url_after != s.url_before]
        if len(nav) >= 2:
            out.append(_pattern("navigation", nav, domain))
    return out


def _pattern(kind: str, flow: Sequence[Any], domain: str) -> PatternLearned:
    steps = [_step(s) for s in flow]
    dumped = [s.model_dump(mode="json") for s in steps]
    return PatternLearned(
        pattern_id=pattern_id_for(domain, kind, dumped),
        description=_describe(kind, flow, domain),
        pattern_type=cast(PatternType, kind),
        steps=steps,
    )


def fill_placeholders(pattern_steps: Sequence[dict[str, Any]], user: str, password: str) -> list[dict[str, Any]]:
    """A login pattern's steps with the user and password put back in: the password field gets the
    password, the first other typed field the user name."""
    out = []
    user_done = False
    for s in pattern_steps:
        s = dict(s)
        if s.get("command") in FIELD_COMMANDS:
            if s.get("value") == PASSWORD_PLACEHOLDER:
                s["value"] = password
            elif not user_done:
                s["value"], user_done = user, True
        out.append(s)
    return out
