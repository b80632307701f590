"""gitleaks' rule set (gitleaks/gitleaks, MIT), read from its own config file, kept verbatim.

`rules/gitleaks.toml` is upstream's `config/gitleaks.toml` at the tag `GITLEAKS_VERSION`, byte for byte
(`tests/test_gitleaks_rules.py` checks its sha256 against `GITLEAKS_SHA256`, the one recorded when it
was copied, and that the licence notice ships beside it in `rules/GITLEAKS-LICENSE`). A maintained
rule set rather than memtape's own list: its ~220 rules name the SaaS, cloud and key-file shapes a
hand-kept list misses. To update: copy the file of a newer tag, record its tag, commit and sha256
here, and run that test and `tests/test_secrets_at_rest.py`.

The rules are read as gitleaks reads them (detect/detect.go at that tag): a rule runs over a text
only when the lower-cased text holds one of its keywords; its secret is the capture group
`secretGroup` names, else the first non-empty group, else the whole match; a secret whose Shannon
entropy is not above the rule's `entropy` is not one; the global allowlist and the rule's own
(regexes over the secret, the match or the line; stopwords in the secret; OR or AND) let a
finding go. Left out: the rules bound to a file path (`path`: they judge a file by its name, and a
memtape event is not a file) and allowlists that need a path or a commit to match.

Go's regexp (RE2) is not Python's `re`: `go_to_python` translates at load time. A flag group in the
middle of a pattern (`p8e-(?i)[a-z0-9]{32}`, an error in Python) becomes a scoped group to the end of
its alternative, reopened in each alternative after it (RE2 keeps the flag to the end of the
enclosing group); `\\z` and `$` (end of text in RE2 without `(?m)`) become `\\Z`; POSIX classes
(`[[:alnum:]]`) are spelled out; `[`, `&`, `~` and `|` inside a class are escaped (Python reads them
as set operators to come); every pattern is compiled with `re.ASCII`, as RE2's `\\w`, `\\d`, `\\s`
and `\\b` are ASCII. A pattern is compiled the first time a text holds one of its keywords.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path
from typing import Any, Literal

GITLEAKS_VERSION = "v8.30.1"
GITLEAKS_COMMIT = "83d9cd684c87d95d656c1458ef04895a7f1cbd8e"
GITLEAKS_SHA256 = "e163e53b9e7e8a8511e77271e2b323ed057759542a6d988258afe3a1fa329caf"
CONFIG = Path(__file__).parent / "rules" / "gitleaks.toml"
LICENCE = Path(__file__).parent / "rules" / "GITLEAKS-LICENSE"


class GoPatternError(ValueError):
    """A gitleaks pattern uses RE2 syntax `go_to_python` does not translate."""


_FLAG_GROUP = re.compile(r"\(\?([a-zA-Z-]+)\)")
_POSIX = {
    "alnum": "0-9A-Za-z",
    "alpha": "A-Za-z",
    "digit": "0-9",
    "lower": "a-z",
    "upper": "A-Z",
    "xdigit": "0-9A-Fa-f",
    "space": r"\t\n\v\f\r ",
    "word": "0-9A-Za-z_",
    "punct": r"!-/:-@\[-`{-~",
}


def go_to_python(go: str) -> str:
    """`go` (an RE2 pattern, as gitleaks writes it) as a Python `re` pattern that matches the same."""
    out: list[str] = []
    #: per open group, the flags set inside it by a `(?i)` not at the start: each is a scoped group
    #: to close at the next `|` (and reopen after it) and at the group's end
    scopes: list[list[str]] = [[]]
    in_class = class_start = False
    i, n = 0, len(go)
    while i < n:
        c = go[i]
        if c == "\\":
            if i + 1 >= n:
                raise GoPatternError(f"a trailing backslash: {go!r}")
            nxt = go[i + 1]
            if nxt in "QEpPC":
                raise GoPatternError(f"\\{nxt} is not translated: {go!r}")
            out.append(r"\Z" if nxt == "z" and not in_class else go[i : i + 2])
            i += 2
            class_start = False
            continue
        if in_class:
            if c == "]" and not class_start:
                in_class = False
                out.append(c)
            elif c == "[" and go.startswith("[:", i):
                end = go.index(":]", i)
                name = go[i + 2 : end].lstrip("^")
                if name not in _POSIX or go[i + 2] == "^":
                    raise GoPatternError(f"POSIX class [:{go[i + 2 : end]}:] is not translated: {go!r}")
                out.append(_POSIX[name])
                i = end + 2
                class_start = False
                continue
            elif c in "[&~|" or (c == "-" and out and out[-1] == "-"):
                out.append("\\" + c)
            else:
                out.append(c)
            class_start = class_start and c == "^"
            i += 1
            continue
        if c == "[":
            in_class = class_start = True
            out.append(c)
        elif c == "(":
            flags = _FLAG_GROUP.match(go, i)
            if flags:
                if set(flags.group(1)) - set("is-"):
                    raise GoPatternError(f"flags ({flags.group(1)}) are not translated: {go!r}")
                if i == 0:
                    out.append(flags.group())
                else:
                    out.append(f"(?{flags.group(1)}:")
                    scopes[-1].append(flags.group(1))
                i = flags.end()
                continue
            scopes.append([])
            out.append(c)
        elif c == "|":
            open_here = scopes[-1]
            out.append(")" * len(open_here) + "|" + "".join(f"(?{f}:" for f in open_here))
        elif c == ")":
            if len(scopes) == 1:
                raise GoPatternError(f"an unbalanced parenthesis: {go!r}")
            out.append(")" * len(scopes.pop()) + ")")
        elif c == "$":
            out.append(r"\Z")
        else:
            out.append(c)
        i += 1
    if in_class or len(scopes) != 1:
        raise GoPatternError(f"an unclosed class or group: {go!r}")
    out.append(")" * len(scopes[0]))
    return "".join(out)


def _compile(go: str) -> re.Pattern[str]:
    return re.compile(go_to_python(go), re.ASCII)


#: how 151 of the rules end a token: a quote, a space, `;`, an escaped line break or the end; written for
#: code, where a token in prose ("token glsa_..., then") also ends at `,`, `)`, `]`, `>` or a full stop
#: (a `.` before a space or the end: not `.png` after a file name's hash, a counter-example of theirs), which
#: memtape's texts (page text, thoughts, errors) are full of. The one change made to gitleaks' patterns
TOKEN_END = r"""(?:[\x60'"\s;]|\\[nr]|$)"""
PROSE_TOKEN_END = r"""(?:[\x60'"\s;,)\]>]|\.(?:\s|$)|\\[nr]|$)"""


def shannon_entropy(text: str) -> float:
    """Bits per character of `text`, as gitleaks counts them (characters over its UTF-8 length)."""
    if not text:
        return 0.0
    size = len(text.encode())
    return -sum(count / size * math.log2(count / size) for count in Counter(text).values())


@dataclass(frozen=True)
class Allowlist:
    """What lets a finding go: a regex over its secret, match or line, or a stopword in its secret."""

    regexes: tuple[re.Pattern[str], ...]
    stopwords: tuple[str, ...]
    target: Literal["secret", "match", "line"]
    #: AND: every kind of check the allowlist has must pass (one that needs a path or commit never does)
    every: bool
    needs_path: bool

    def allows(self, secret: str, match: str, line: str) -> bool:
        subject = {"secret": secret, "match": match, "line": line}[self.target]
        by_regex = bool(subject) and any(p.search(subject) for p in self.regexes)
        low = secret.lower()
        by_stopword = bool(secret) and any(w in low for w in self.stopwords)
        if self.every:
            if self.needs_path:
                return False
            checks = ([by_regex] if self.regexes else []) + ([by_stopword] if self.stopwords else [])
            return bool(checks) and all(checks)
        return by_regex or by_stopword


def _allowlist(raw: dict[str, Any]) -> Allowlist:
    target = raw.get("regexTarget", "secret")
    if target not in ("secret", "match", "line"):
        raise GoPatternError(f"an allowlist's regexTarget {target!r} is not known")
    return Allowlist(
        regexes=tuple(_compile(p) for p in raw.get("regexes", ())),
        stopwords=tuple(w.lower() for w in raw.get("stopwords", ())),
        target=target,
        every=raw.get("condition", "OR").upper() == "AND",
        needs_path=bool(raw.get("paths") or raw.get("commits")),
    )


#: memtape's one addition to the allowlists, for gitleaks' generic rule only: a UUID is an id (memtape's
#: events, runs and idempotency keys are UUIDs; docs/trust.md promises they stay), not a key
GENERIC = frozenset({"generic-api-key"})
MEMTAPE_ALLOWLIST = (
    Allowlist(
        regexes=(re.compile(r"\A[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\Z"),),
        stopwords=(),
        target="secret",
        every=False,
        needs_path=False,
    ),
)


@dataclass(frozen=True)
class Rule:
    """One gitleaks rule, read as gitleaks reads it."""

    id: str
    description: str
    go_pattern: str
    keywords: tuple[str, ...]
    entropy: float
    secret_group: int
    allowlists: tuple[Allowlist, ...] = field(default=())

    @cached_property
    def pattern(self) -> re.Pattern[str]:
        return _compile(self.go_pattern.replace(TOKEN_END, PROSE_TOKEN_END))

    def spans(self, text: str, allowed: tuple[Allowlist, ...] = ()) -> list[tuple[int, int]]:
        """Where the secrets this rule finds in `text` are (the rule's keywords are not looked for:
        the caller has)."""
        found = []
        for m in self.pattern.finditer(text):
            start, end = m.span()
            while end > start and text[end - 1] == "\n":  # gitleaks trims a match's newlines
                end -= 1
            group = self.secret_group
            if not group and m.re.groups:
                group = next((g for g in range(1, m.re.groups + 1) if m.group(g)), 0)
            if group:
                start, end = m.span(group)
                if start < 0:
                    continue
            secret = text[start:end]
            if self.entropy and shannon_entropy(secret) <= self.entropy:
                continue
            line_start = text.rfind("\n", 0, m.start()) + 1
            line_end = text.find("\n", m.end())
            line = text[line_start : len(text) if line_end < 0 else line_end]
            if any(a.allows(secret, m.group(), line) for a in allowed + self.allowlists):
                continue
            found.append((start, end))
        return found


def _trie(words: list[str]) -> str:
    """A pattern matching the shortest of `words` starting at a position (a word that another one
    begins with ends the branch): one pass over a text instead of one search per word."""
    tree: dict[str, Any] = {}
    for word in words:
        node = tree
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def branch(node: dict[str, Any]) -> str:
        if "" in node:
            return ""
        alts = [re.escape(ch) + branch(sub) for ch, sub in sorted(node.items())]
        return alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"

    return branch(tree)


#: keywords common in plain text ("task", "they", "its.") whose rule needs more right after them: the
#: screen looks for that (lower-cased, made of characters JSON never escapes) instead of the bare
#: keyword. twilio-api-key `SK[0-9a-fA-F]{32}`, jwt `ey[a-zA-Z0-9]{17,}`, vault-service-token `s\.[a-z0-9]{24}`
#: (with `(?i)`); `tests/test_gitleaks_rules.py` checks each against its rule
NARROWED: dict[str, str] = {"sk": r"sk[0-9a-f]{32}", "ey": r"ey[a-z0-9]{17}", "s.": r"s\.[a-z0-9]{24}"}


@dataclass(frozen=True)
class RuleSet:
    rules: tuple[Rule, ...]
    #: the rules left out because gitleaks applies them to files by name (their ids)
    path_bound: tuple[str, ...]
    allowlist: tuple[Allowlist, ...]
    #: every keyword, lower case, and the rules each one starts
    by_keyword: dict[str, tuple[Rule, ...]]

    @cached_property
    def _roots(self) -> dict[str, tuple[str, ...]]:
        """Per root keyword (one no other keyword is a prefix of), the keywords it begins."""
        roots: dict[str, list[str]] = {}
        for kw in sorted(self.by_keyword, key=len):
            root = next((r for r in roots if kw.startswith(r)), kw)
            roots.setdefault(root, []).append(kw)
        return {root: tuple(kws) for root, kws in roots.items()}

    @cached_property
    def _screen(self) -> re.Pattern[str]:
        """What any match needs: a keyword, or for a `NARROWED` one, what its rule needs after it (the
        longer keywords it begins are looked for as themselves)."""
        words = [root for root in self._roots if root not in NARROWED]
        words += [kw for root in NARROWED for kw in self._roots.get(root, ()) if kw != root]
        return re.compile("|".join([_trie(words), *NARROWED.values()]))

    @cached_property
    def _every_root(self) -> re.Pattern[str]:
        return re.compile(f"(?=({_trie(list(self._roots))}))")

    def may_match(self, low: str) -> bool:
        """Whether a rule could find something in the text `low` is the lower-cased form of (or the
        JSON encoding of: no keyword holds a quote, a backslash or a control character)."""
        return self._screen.search(low) is not None

    def keywords_in(self, low: str) -> list[str]:
        """The keywords the lower-cased text `low` holds (a keyword's root is at its every place)."""
        return [
            kw for root in set(self._every_root.findall(low)) for kw in self._roots[root] if kw == root or kw in low
        ]

    def spans(self, text: str) -> list[tuple[int, int]]:
        """The secrets of every rule whose keyword the lower-cased `text` holds, in the order of the
        rules (and within a rule, of the text)."""
        started = {id(r) for kw in self.keywords_in(text.lower()) for r in self.by_keyword[kw]}
        if not started:
            return []
        return [
            span
            for rule in self.rules
            if id(rule) in started
            for span in rule.spans(text, self.allowlist + (MEMTAPE_ALLOWLIST if rule.id in GENERIC else ()))
        ]


@cache
def rule_set() -> RuleSet:
    """The vendored rules, read once a process (the first text that could hold a secret pays ~10 ms)."""
    with CONFIG.open("rb") as f:
        config = tomllib.load(f)
    rules, path_bound = [], []
    for raw in config["rules"]:
        if "path" in raw or "regex" not in raw:
            path_bound.append(raw["id"])
            continue
        rules.append(
            Rule(
                id=raw["id"],
                description=raw["description"],
                go_pattern=raw["regex"],
                keywords=tuple(k.lower() for k in raw.get("keywords", ())),
                entropy=float(raw.get("entropy", 0.0)),
                secret_group=int(raw.get("secretGroup", 0)),
                allowlists=tuple(_allowlist(a) for a in raw.get("allowlists", ())),
            )
        )
    by_keyword: dict[str, list[Rule]] = {}
    for rule in rules:
        if not rule.keywords:
            raise GoPatternError(f"gitleaks rule {rule.id} has no keyword: every rule here needs one")
        for kw in rule.keywords:
            by_keyword.setdefault(kw, []).append(rule)
    return RuleSet(
        rules=tuple(rules),
        path_bound=tuple(path_bound),
        allowlist=(_allowlist(config["allowlist"]),),
        by_keyword={kw: tuple(rs) for kw, rs in by_keyword.items()},
    )
