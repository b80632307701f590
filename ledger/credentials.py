"""What counts as a login in free text: the one parser the agent's policy and the scrubber share.

The scripted policy logs in when a clause of its goal holds a login verb and two
quoted strings (`Log in as "demo" using "correct-horse-battery"`): the first is
typed as the user name, the second as the password. Whatever the policy would
type as a password must never be stored, so the scrubber (`ledger.redact`) reads
text with this same grammar; a second, looser copy of it would let a phrasing
through that the agent still acts on. It lives in `ledger`, the lowest layer, so
that both the agent and the store import it.

A quoted string ends at the first quote not escaped by a backslash, and
starts at one: `"fill \\"Password\\" → click \\"Sign in\\""` (how a prompt
renders a fact that quotes element names) is one string, so "Sign in" is no
login verb there. Inside one, `\\"` is a quote and `\\\\` a backslash (what
`projections.text.fenced` writes); any other backslash is kept as written
(`"C:\\Users"`). The scrubber hides a password both as typed and as written.

Besides logins, a password may be named by keyword: `password "p"`,
`password is "p"`, `password: p`, `passwd=p`.

Example:
    clauses('Log in as "demo" using "p\\\\"w"') == [
        Clause(text='Log in as \\x010\\x02 using \\x011\\x02', args=('demo', 'p"w'), written=('demo', 'p\\\\"w'))
    ]
    login_in(clauses('Log in as "demo" using "pw"')[0]) == Login(user="demo", password="pw")
    passwords('Sign in with "ada" and then...') == []
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: a quoted string: from a quote to the next one, a backslash escaping the character after it; a
#: quote escaped by an odd run of backslashes neither opens nor closes one (an even run is taken
#: with the quote it stands before)
QUOTED = re.compile(r'(?<!\\)(?:\\\\)*"((?:[^"\\]|\\[\s\S]){1,200})"')
#: a goal is a list of clauses: separated by commas, "and", "then" or line breaks
CLAUSE_SPLIT = re.compile(r"\s*\n\s*|\s*,\s*(?:and\s+|then\s+)*|\s+and\s+(?:then\s+)?|\s+then\s+", re.I)
#: a login verb is a word of the sentence, not part of a path or host (`http://portal.test/login`)
LOGIN_VERB = re.compile(r"(?<![\w/.-])(?:log ?in|sign in)(?![\w/-])", re.I)
#: the escapes a quoted string's text is read with: a quote, a backslash
_ESCAPED = re.compile(r'\\(["\\])')
_PLACEHOLDER = re.compile(r"\x01(\d+)\x02")
_WORD = r"\b(?:password|passwd|passphrase|pwd)"
#: a password named by keyword: quoted (`password "p"`, `password is "p"`, `password: "p"`) or
#: unquoted after `:` or `=` on the same line; the keyword must be followed by a space or a
#: separator, so that `"Forgot password" "Sign in"` (a page's element names) names nothing
KEYWORD_PASSWORD = re.compile(
    _WORD
    + r"(?:[ \t]+is[ \t]*|[ \t]*[:=][ \t]*|[ \t]+)\"((?:[^\"\\\n]|\\[^\n]){1,200})\"|"
    + _WORD
    + r"[ \t]*[:=][ \t]*([^\s\"'&;,<>]+)",
    re.I,
)


@dataclass(frozen=True)
class Clause:
    """One clause of a goal: its text with each quoted string replaced by \\x01N\\x02, and those strings
    (`args` as meant, `written` as the text writes them, escapes included)."""

    text: str
    args: tuple[str, ...]
    written: tuple[str, ...]


@dataclass(frozen=True)
class Login:
    user: str
    password: str


def clauses(text: str) -> list[Clause]:
    """The non-empty clauses of `text`, in order; quoted strings never split a clause."""
    quotes: list[str] = []

    def keep(m: re.Match[str]) -> str:
        quotes.append(m.group(1))
        return f"\x01{len(quotes) - 1}\x02"

    # \x01 and \x02 delimit the placeholders: a text that holds them must not forge one
    masked = QUOTED.sub(keep, text.replace("\x01", " ").replace("\x02", " ").strip().rstrip("."))
    out: list[Clause] = []
    for part in CLAUSE_SPLIT.split(masked):
        if part.strip():
            written = tuple(quotes[int(i)] for i in _PLACEHOLDER.findall(part))
            out.append(Clause(part, tuple(unescaped(q) for q in written), written))
    return out


def unescaped(quoted: str) -> str:
    """A quoted string's text as meant: `\\"` is a quote, `\\\\` a backslash, any other backslash itself."""
    return _ESCAPED.sub(r"\1", quoted) if "\\" in quoted else quoted


def login_in(clause: Clause) -> Login | None:
    """The login a clause asks for: a login verb outside the quotes and at least two quoted strings."""
    if len(clause.args) >= 2 and LOGIN_VERB.search(_PLACEHOLDER.sub(" ", clause.text)):
        return Login(clause.args[0], clause.args[1])
    return None


def logins(text: str) -> list[Login]:
    return [login for c in clauses(text) if (login := login_in(c)) is not None]


def passwords(text: str) -> list[str]:
    """Every password `text` gives (its logins' and the keyword-named ones), first seen first, once each:
    as typed and, when a quote or backslash in it is escaped in `text`, as written there too."""
    found: list[str] = []
    if LOGIN_VERB.search(text):
        for clause in clauses(text):
            if login_in(clause) is not None:
                found += [clause.args[1], clause.written[1]]
    for quoted, bare in KEYWORD_PASSWORD.findall(text):
        found += [unescaped(quoted), quoted] if quoted else [bare]
    return [p for p in dict.fromkeys(found) if p.strip()]
