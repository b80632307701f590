"""Redaction: secrets are replaced by a marker before an event is built.

Two rules: values under secret-looking keys (password, token, api_key...) and
values typed into password fields are replaced whole; strings matching the
secret patterns (API keys, bearer tokens, card numbers, JWTs, and any extra
patterns from `MEMLEDGER_SECRET_PATTERNS`, one regex per line) are replaced
where they occur.
"""
from __future__ import annotations

import os
import re
from typing import Any

MARKER = "[REDACTED]"

DEFAULT_PATTERNS: tuple[str, ...] = (
    r"\bsk-[A-Za-z0-9_-]{16,}",
    r"\bAKIA[0-9A-Z]{16}\b",
    r"\bgh[pousr]_[A-Za-z0-9]{20,}",
    r"\bxox[abprs]-[A-Za-z0-9-]{10,}",
    r"\b[Bb][Ee][Aa][Rr][Ee][Rr]\s+[A-Za-z0-9._~+/=-]{8,}",
    r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
)
#: a card number stands alone: digits glued to letters or "_" are part of an id or a hex digest
_CARD = re.compile(r"(?<![\w-])(?:\d[ -]?){12,18}\d(?![\w-])")
_CARD_CANDIDATE = re.compile(r"\d(?:[ -]?\d){12}")
SECRET_KEY = re.compile(r"(?i)^(pass(word|wd|phrase)?|secret|api[_-]?key|token|access[_-]?token|authorization|card[_-]?number|cvv)$")
#: a superset screen for the default rules, run once over a payload's JSON text (fast path): every
#: secret key and every default pattern's literal prefix survives JSON encoding unescaped, and a card
#: number is a run of at least 13 characters among digits, spaces and dashes
_SCREEN_WORDS = ('"pass', '"secret"', '"api', '"token"', '"access', '"authorization"', '"card', '"cvv"',
                 "bearer", "sk-", "akia", "xox", "eyj")
_GH = re.compile(r"gh[pousr]_")
_CARDISH = bytes.maketrans(b"0123456789 -", b"000000000000")
_CARD_RUN = b"0" * 13


def _luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


class Redactor:
    """Replaces secrets in strings and nested payloads."""

    def __init__(self, extra_patterns: tuple[str, ...] | list[str] = ()):
        env = os.environ.get("MEMLEDGER_SECRET_PATTERNS", "")
        extra = list(extra_patterns) + [p for p in env.splitlines() if p.strip()]
        self.pattern = re.compile("|".join(f"(?:{p})" for p in [*DEFAULT_PATTERNS, *extra]))
        self._screened = not extra  # extra patterns cannot be screened: always walk the payload

    def may_contain_secrets(self, json_text: str) -> bool:
        """False only when `value()` would change nothing in the payload encoded as `json_text` (fast path)."""
        if not self._screened:
            return True
        low = json_text.lower()
        for word in _SCREEN_WORDS:
            if word in low:
                return True
        if "gh" in low and _GH.search(low):
            return True
        raw = json_text.encode()
        return _CARD_RUN in raw.translate(_CARDISH) if len(raw) >= 13 else False

    def text(self, value: str) -> str:
        value = self.pattern.sub(MARKER, value)
        if _CARD_CANDIDATE.search(value):
            value = _CARD.sub(lambda m: MARKER if _luhn_ok(re.sub(r"\D", "", m.group())) else m.group(), value)
        return value

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: (MARKER if isinstance(k, str) and SECRET_KEY.match(k) and v not in (None, "") else self.value(v)) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v) for v in value]
        return value


_default: Redactor | None = None


def default_redactor() -> Redactor:
    global _default
    if _default is None:
        _default = Redactor()
    return _default


def redact(value: Any) -> Any:
    return default_redactor().value(value)
