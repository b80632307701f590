"""What a secret detector is, and what "random-looking" means to every detector that judges a value
by its look (`ledger.redact`'s own, `ledger.key_material`'s and `ledger.token_shapes`' classes)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Detector:
    """A secret shape: the match's `secret` group (the whole match when there is none) is replaced,
    when `check` (if any) accepts the match."""

    name: str
    pattern: re.Pattern[str]
    check: Callable[[re.Match[str]], bool] | None = None
    #: detect-secrets' patterns (`vendored_secrets.Vendored.secret`): "match" (less the delimiters a
    #: pattern takes around a token), 1 (the first group) or "rest" (from the match to the end)
    part: Literal["secret", "match", "rest", 1] = "secret"
    #: lower-case text of which every match holds one: the pattern runs only over a string holding one
    needs: tuple[str, ...] = ()


def detector(
    name: str,
    pattern: str,
    check: Callable[[re.Match[str]], bool] | None = None,
    flags: int = 0,
    needs: tuple[str, ...] = (),
) -> Detector:
    return Detector(name, re.compile(pattern, flags), check, needs=needs)


_WORDY = re.compile(r"[a-z]+(?:[-_. ][a-z0-9]+)*|[A-Z][a-z]+(?:[A-Z][a-z]+)*")
UUID_SHAPE = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_URL_SAFE = re.compile(r"[A-Za-z0-9_~+/=-]+")


def looks_random(value: str, length: int = 8) -> bool:
    """A token rather than a word, a slug, an address or a number: at least `length` characters of
    the URL-safe alphabet, letters and digits mixed, not words joined by separators."""
    return (
        len(value) >= length
        and _URL_SAFE.fullmatch(value) is not None
        and any(c.isdigit() for c in value)
        and any(c.isalpha() for c in value)
        and _WORDY.fullmatch(value) is None
    )
