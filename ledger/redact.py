"""Redaction: secrets are replaced by a marker before an event is built.

A secret must never be at rest: not in ledger.db, not in its WAL, and so not in
anything derived from them (projections.db, exports, reports, audits). The
store calls `Redactor.value` on every payload and `Redactor.ident` on the
envelope fields a caller may choose (`run_id`, `stream`, `id`, `domain`) before
it builds the row that is hashed and written.

What is replaced:
- values under secret-named keys (`SECRET_NAMES`: patterns, not a list of exact
  names: `pwd`, `client_secret`, `x-api-key`, `refreshToken`, `sessionid`...);
  numbers and booleans are kept, so that a payload keeps its shape;
- dict keys that are themselves secrets;
- every argument of an action marked `sensitive` (`masked_args`);
- passwords a text gives the way the agent reads them (`ledger.credentials`,
  the parser the scripted policy logs in with), as typed and as written; and
  those of a goal JSON-encoded in the text (`Log in as \\"demo\\" using
  \\"pw\\"` in a recorded request body): each JSON string is read decoded too;
- the shapes in `DETECTORS`, wherever they occur in a string: memtape's own and
  detect-secrets' plugin patterns (`ledger.vendored_secrets`); a detector with a
  check (Luhn for card numbers, a `user:password` inside Basic auth, the look of
  a random 40-character AWS secret) replaces only what passes it, so that ids,
  UUIDs and sha256 digests (the hash chain) are kept;
- text with `%XX` escapes is read decoded too (a decoded URL also as the sentence
  it may encode), and kept decoded when that reading holds a secret;
- (in `ledger.events`) the value typed into a field whose role, name, selector or
  label says password, passcode, PIN, OTP, secret, token or card (`secret_field`),
  whether or not the caller said `sensitive`;
- whatever the extra patterns from `MEMTAPE_SECRET_PATTERNS` (one regex per
  line) match.

Zero-width and other invisible format characters are removed before matching
(an `sk-` key split by a zero-width space is still a key); a string that held
no secret is kept byte for byte.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import re
from collections.abc import Mapping
from difflib import SequenceMatcher
from functools import lru_cache
from typing import Any
from urllib.parse import unquote

from memtape.ledger.credentials import passwords
from memtape.ledger.detector import UUID_SHAPE, Detector, looks_random
from memtape.ledger.detector import detector as _d
from memtape.ledger.errors import LedgerError
from memtape.ledger.gitleaks_rules import rule_set, shannon_entropy
from memtape.ledger.key_material import KEY_MATERIAL, jwk_private_member
from memtape.ledger.token_shapes import HOOK_STEMS, TOKEN_SHAPES, may_hold_token, random_body
from memtape.ledger.vendored_secrets import PLUGIN_NEEDS, SCREEN_STEMS, VENDORED
from memtape.ledger.vendored_secrets import SCREEN as VENDORED_SCREEN

MARKER = "[REDACTED]"
#: the longest string whose clean verdict a `Redactor` remembers
CLEAN_CACHE_TEXT = 64
#: invisible format characters a secret can be split with (zero-width space, joiners, soft hyphen,
#: word joiner, bidi controls, byte order mark)
INVISIBLE = re.compile("[\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")


class SecretPatternError(LedgerError):
    """A `MEMTAPE_SECRET_PATTERNS` line is not a usable regular expression."""


# ---- secret-named keys ---------------------------------------------------------------------

#: matched (re.search) against a key normalized by `key_words`: lower case, words joined by "_"
#: (`clientSecret`, `client-secret` and `CLIENT_SECRET` all read `client_secret`)
SECRET_NAMES: tuple[str, ...] = (
    r"secret",
    r"passw",
    r"passphrase",
    r"passcode",
    r"pwd",
    r"credential",
    r"authorization",
    r"cookie",
    r"bearer",
    r"token(?!s)",  # token, refresh_token, csrftoken; not tokens, total_tokens, tokens_in
    r"(?:api|private|access|signing|encryption|master|account|session|license|client)_?key",
    r"(?:^|_)(?:pass|pw|auth)(?:_|$)|cvv|cvc",
    r"card_?number|(?:^|_)cc_?num",
    r"(?:^|_)(?:pin|otp|totp)(?:_|$)|(?:security|verification|mfa|2fa|one_time)_?code",
    r"^session$|sessid|sessionid",  # a session cookie; not session_id, memtape's own session tag
)
SECRET_NAME = re.compile("|".join(f"(?:{p})" for p in SECRET_NAMES))
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NON_ALNUM = re.compile(r"[^a-z0-9]+")


def key_words(key: str) -> str:
    return _NON_ALNUM.sub("_", _CAMEL.sub("_", key).lower()).strip("_")


@lru_cache(maxsize=4096)
def secret_named(key: str) -> bool:
    """Whether a value stored under `key` is a secret by its name alone."""
    return bool(SECRET_NAME.search(key_words(key)))


#: what names a field whose typed value is a secret: a label, accessible name, role, id, name or
#: selector holding one of these words (`textbox "Password"`, `#pin`, `input[name=cc-number]`)
SENSITIVE_FIELD = re.compile(
    r"pass(?:word|wd|code|phrase)?(?![a-z])|(?<![a-z])pin(?![a-z])|(?<![a-z])(?:t?otp|mfa|2fa|cvv|cvc|cvn|csc)(?![a-z])|"
    r"one[ _-]?time|secret|token|card|cc[ _-]?(?:num|number|exp|csc)|security[ _-]?code|verification[ _-]?code|auth[ _-]?code",
    re.I,
)
#: commands that type a value into a field (the bundled agent's, Playwright's, browser-use's)
TYPING_COMMANDS = frozenset(
    {
        "fill",
        "type",
        "input",
        "input_text",
        "press_sequentially",
        "send_keys",
        "set_value",
        "insert_text",
        "keyboard_type",
        "select",
        "select_option",
    }
)


def secret_field(command: str, *labels: str | None) -> bool:
    """Whether `command` types into a field that one of `labels` (role, name, selector, label) names
    as a password, passcode, PIN, OTP, secret, token or card field: its value is a secret whether or
    not the caller said `sensitive`."""
    return command.lower() in TYPING_COMMANDS and any(label and SENSITIVE_FIELD.search(label) for label in labels)


def masked_args(args: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments of a sensitive action: every one masked (a secret can be typed under any name)."""
    return {k: (MARKER if v not in (None, "") else v) for k, v in args.items()}


# ---- detectors -----------------------------------------------------------------------------


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


def _card(m: re.Match[str]) -> bool:
    return _luhn_ok(re.sub(r"\D", "", m.groupdict().get("secret") or m.group()))


def _basic_credentials(m: re.Match[str]) -> bool:
    """`Basic X` is credentials when X decodes to `user:password`, not when it is a word ("Basic settings")."""
    token = m.group("secret")
    try:
        decoded = base64.b64decode(token + "=" * (-len(token) % 4), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return False
    return ":" in decoded and decoded.isprintable()


def _random_looking(m: re.Match[str]) -> bool:
    """A bare 40-character AWS secret: random base64 mixes cases often and has digits; hex digests
    (lower case), identifiers made of words and URL paths do not look like that."""
    s = m.group()
    if not (any(c.isupper() for c in s) and any(c.islower() for c in s) and any(c.isdigit() for c in s)):
        return False
    if s.count("/") > 3:
        return False
    pairs = [(a, b) for a, b in zip(s, s[1:]) if a.isalpha() and b.isalpha()]
    switches = sum(a.isupper() != b.isupper() for a, b in pairs)
    return switches >= 0.25 * max(1, len(pairs))


def _credential_value(m: re.Match[str]) -> bool:
    """`name: value` in prose names a secret when the name does and the value is not a plain short
    word (`Password: hunter2` is; `Cookies: Accept` is not); a bare "session" label is not a cookie."""
    value, name = m.group("secret"), m.group("name")
    if key_words(name) == "session":  # "session: <id>" in prose names a session (memtape's prompts say so)
        return False
    return secret_named(name) and (len(value) >= 8 or not value.isalpha())


#: words that follow "the password is" in messages about a password rather than in a password
_NOT_A_PASSWORD = frozenset(
    {
        "incorrect",
        "invalid",
        "required",
        "wrong",
        "too",
        "not",
        "missing",
        "empty",
        "expired",
        "correct",
        "reset",
        "changed",
        "case",
        "set",
        "the",
        "a",
        "an",
        "at",
        "weak",
        "strong",
        "valid",
        "sent",
        "hidden",
        "masked",
        "redacted",
        "shown",
        "displayed",
        "below",
        "above",
        "here",
        "there",
        "saved",
        "stored",
        "same",
        "different",
        "ok",
        "fine",
        "needed",
        "mandatory",
        "optional",
        "blank",
        "unchanged",
        "updated",
        "accepted",
        "rejected",
        "locked",
        "in",
        "on",
        "of",
        "for",
        "to",
        "that",
        "this",
        "it",
        "and",
        "or",
        "your",
        "my",
        "our",
        "their",
        "still",
        "now",
        "no",
        "being",
    }
)


_USER_BEFORE = re.compile(r"(?<![\w./:@%-])([A-Za-z0-9._+-]{1,64})\Z")
#: words before `:x@host` that label an address rather than name a user
_ADDRESS_LABELS = frozenset(
    {"mailto", "email", "e-mail", "mail", "from", "to", "cc", "bcc", "reply-to", "contact", "sender"}
)


def _user_before(m: re.Match[str]) -> bool:
    """`user:password@host`: a user name starts a word before the colon (not a scheme's `//`, not `mailto:`)."""
    user = _USER_BEFORE.search(m.string, max(0, m.start() - 65), m.start())
    return user is not None and user.group(1).lower() not in _ADDRESS_LABELS


def _named_value(m: re.Match[str]) -> bool:
    """`the password is X`: X is the password unless it is a word about the password ("incorrect")."""
    value = m.group("secret").strip(".!?")
    return bool(value) and value != MARKER and value.lower() not in _NOT_A_PASSWORD


def _field_call(m: re.Match[str]) -> bool:
    """`fill('#password', 'X')`: the value is a secret when the selector names a secret field."""
    return bool(SENSITIVE_FIELD.search(m.group("sel")))


def _opaque(m: re.Match[str]) -> bool:
    """A link's token: letters and digits mixed (a random string), not a word or a slug of words."""
    s = m.group("secret")
    return (
        any(c.isdigit() for c in s) and any(c.isalpha() for c in s) and not re.fullmatch(r"[a-z]+(?:[-_][a-z0-9]+)*", s)
    )


def _iban_ok(m: re.Match[str]) -> bool:
    """An IBAN: 15 to 34 characters whose mod-97 check (country and check digits moved to the end,
    letters as 10..35) leaves 1; a reference number that merely looks like one does not."""
    iban = m.group("secret").replace(" ", "")
    if not 15 <= len(iban) <= 34:
        return False
    return int("".join(str(int(c, 36)) for c in iban[4:] + iban[:4])) % 97 == 1


def _dni_ok(m: re.Match[str]) -> bool:
    """A Spanish DNI (or NIE: X, Y, Z for 0, 1, 2): its letter is the number's check letter mod 23."""
    raw = m.group("secret").replace("-", "").upper()
    number = "XYZ".index(raw[0]).__str__() + raw[1:-1] if raw[0] in "XYZ" else raw[:-1]
    return "TRWAGMYFPDXBNJZSQVHLCKE"[int(number) % 23] == raw[-1]


def _link_token(m: re.Match[str]) -> bool:
    """A query value that looks random, of a URL whose path says it signs in, verifies, resets or
    is a magic link: every parameter of such a link is judged, whatever its name or place."""
    text, at = m.string, m.start()
    begins = max(text.rfind(c, 0, at) for c in " \t\r\n\"'<>") + 1
    url = text[begins : at + 1]
    query = url.rfind("?")  # the last: a link may sit in another URL's query
    return query >= 0 and _AUTH_LINK.search(url[: query + 1]) is not None and looks_random(m.group("secret"))


def _cpf_ok(m: re.Match[str]) -> bool:
    """A Brazilian CPF: its two check digits (mod 11 over the nine before, then the ten before)."""
    d = [int(c) for c in m.group("secret") if c.isdigit()]
    if len(set(d)) == 1:
        return False
    first = sum((10 - i) * d[i] for i in range(9)) * 10 % 11 % 10
    second = sum((11 - i) * d[i] for i in range(10)) * 10 % 11 % 10
    return (first, second) == (d[9], d[10])


def _high_entropy(m: re.Match[str]) -> bool:
    """A value after a key-like name that reads as random: 16+ characters, letters and digits
    mixed, more than 3.5 bits a character (gitleaks' generic threshold); not an id's UUID shape."""
    value = m.group("secret")
    return looks_random(value, 16) and shannon_entropy(value) > 3.5 and UUID_SHAPE.fullmatch(value) is None


#: a link whose path says it signs in, verifies, resets or confirms: any random query value is a token
_AUTH_LINK_PATH = (
    r"(?:log-?in|sign-?in|sign_in|signon|sso|auth\w*|oauth\w*|verif\w*|confirm\w*|reset\w*|recover\w*|"
    r"magic\w*|passwordless|otp|invit\w*|activat\w*|one-?time|token|callback|unsubscribe)"
)
#: names a random value after them is a secret by: a key, token, secret, password, PAT, private key...
#: in lower case, upper case or capitalized (`apiKey`, `API_KEY`): spelled out, as `re.I` would make the
#: search ~10x slower (it can no longer skip to the letters a name starts with)
_KEY_WORDS = [
    "key",
    "token",
    "secret",
    "password",
    "passwd",
    "pwd",
    "pass",
    "pat",
    "auth",
    "credential",
    "private",
    "signing",
    "signature",
    "cookie",
    "bearer",
    "apikey",
    "salt",
    "nonce",
    "pin",
    "otp",
]
_KEY_LIKE = (
    "(?:"
    + "|".join(sorted({w for k in _KEY_WORDS for w in (k, k.upper(), k.capitalize())}, key=len, reverse=True))
    + ")"
)


_AWS_ID = re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|APKA|AROA|ASCA)[A-Z0-9]{16}\b")
DETECTORS: tuple[Detector, ...] = (
    *KEY_MATERIAL,
    _d("OpenAI / Anthropic key", r"\bsk-[A-Za-z0-9_-]{16,}"),
    _d("Stripe key", r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}"),
    _d("Stripe webhook secret", r"\bwhsec_[A-Za-z0-9]{16,}"),
    Detector("AWS access key id", _AWS_ID),
    _d("Google API key", r"\bAIza[0-9A-Za-z_-]{30,}"),
    _d("GitHub token", r"\bgh[pousr]_[A-Za-z0-9]{20,}|\bgithub_pat_[A-Za-z0-9_]{20,}"),
    _d("GitLab token", r"\bglpat-[A-Za-z0-9_-]{20,}"),
    _d("Slack token", r"\bxox[abposre]-[A-Za-z0-9-]{10,}|\bxapp-\d-[A-Za-z0-9-]{10,}"),
    _d("Slack webhook", r"hooks\.slack\.com/services/[A-Za-z0-9/_-]{16,}"),
    _d("SendGrid key", r"\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"),
    _d("npm token", r"\bnpm_[A-Za-z0-9]{30,}"),
    _d("Hugging Face token", r"\bhf_[A-Za-z0-9]{30,}"),
    _d("JWT", r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"),
    _d("Bearer token", r"\bbearer\s+(?=[A-Za-z0-9._~+/=-]*[0-9._~+/=-])[A-Za-z0-9._~+/=-]{8,}", flags=re.I),
    _d("Basic auth", r"\bbasic\s+(?P<secret>[A-Za-z0-9+/]{4,}={0,2})", _basic_credentials, flags=re.I),
    _d("credentials in a URL", r"\b[a-z][a-z0-9+.-]{0,31}://(?P<secret>[^\s/?#@:\"'<>]*:[^\s/?#@\"'<>]+)@", flags=re.I),
    _d(
        "credentials before a host",
        r"(?<=[A-Za-z0-9._+-]):(?P<secret>[^\s:@/\"'<>]{3,})@(?=[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+)",
        _user_before,
    ),
    _d(
        "Authorization header (any scheme)",
        r"\b(?:proxy-)?authori[sz]ation[ \t]*[:=][ \t]*[\"']?(?:[A-Za-z][A-Za-z0-9_-]*[ \t]+)?(?P<secret>[^\s\"'<>,;]{6,})",
        flags=re.I,
    ),
    _d("Google OAuth token", r"\bya29\.[0-9A-Za-z_-]{20,}|(?<!\w)1//0[0-9A-Za-z_-]{20,}"),
    _d("DigitalOcean token", r"\bdo[opr]_v1_[A-Za-z0-9]{20,}"),
    _d("Shopify token", r"\bshp(?:at|ss|ca|pa)_[A-Za-z0-9]{20,}"),
    _d("PyPI token", r"\bpypi-[A-Za-z0-9_-]{30,}"),
    _d("Vault token", r"\bhv[sbr]\.[A-Za-z0-9_-]{20,}"),
    _d("sshpass password", r"\bsshpass\s+-p\s*[\"']?(?P<secret>[^\s\"']+)"),
    _d("mysql password", r"\bmysql(?:dump|admin)?\b[^\n]*?\s-p(?P<secret>[^\s-][^\s]*)"),
    _d("--password option", r"--pass(?:word)?[ \t]+[\"']?(?P<secret>[^\s\"'-][^\s\"']*)"),
    _d(
        "password named in a sentence",
        r"\b(?:password|passcode|passphrase|pin|pwd|otp|one-time code|secret)\s+(?:is|was|will be)\s*:?\s+[\"'\u201c]?(?P<secret>[^\s\"'\u201d<>,;]+)",
        _named_value,
        flags=re.I,
    ),
    _d(
        "value typed by code into a secret field",
        r"\b(?:fill|type|press_?sequentially|send_?keys|set_?value|input_?text)\s*\(\s*(?P<q>[\"'`])(?P<sel>(?:(?!(?P=q)).){0,200})(?P=q)\s*,"
        r"\s*(?P<q2>[\"'`])(?P<secret>(?:(?!(?P=q2)).){1,500})(?P=q2)",
        _field_call,
        flags=re.I,
    ),
    _d(
        "value typed by code into a located secret field",
        r"\b(?:get_?by_?(?:label|placeholder|role|test_?id)|locator)\s*\((?P<sel>[^)]{0,200})\)\s*\.\s*(?:fill|type|press_?sequentially)"
        r"\s*\(\s*(?P<q>[\"'`])(?P<secret>(?:(?!(?P=q)).){1,500})(?P=q)",
        _field_call,
        flags=re.I,
    ),
    _d(
        "token in a sign-in or reset link",
        r"/(?:magic[-_]?links?|magic|login|log-in|signin|sign-in|verify|verification|confirm|reset|reset-password|password-reset|"
        r"invite|invitation|activate|auth|sso|unsubscribe|onboard)(?:/[^\s\"'<>?#/]*)?/(?P<secret>[A-Za-z0-9_-]{16,})",
        _opaque,
        flags=re.I,
    ),
    _d(
        "one-time code in a link",
        r"[?&;#](?:otp|ticket|magic|oobcode|login_?hash|auth_?code|verification_?code|reset_?key|invite)="
        r"(?P<secret>[^\s&#\"'<>;,]+)",
        flags=re.I,
    ),
    _d(
        "random query value of a sign-in, verify, reset or magic link",
        r"[?&;][A-Za-z0-9_.-]+=(?P<secret>[^\s&;#?\"'<>]*[^\s&;#?\"'<>,.)\]])",  # a `?` starts a nested link's query
        _link_token,
        needs=("://",),
    ),
    _d(
        "credential as a URL's user name",
        r"\b[A-Za-z][A-Za-z0-9+.-]{1,20}://(?P<secret>[A-Za-z0-9_~-]{16,})@",
        lambda m: random_body(m.group("secret"), 16),
    ),
    _d(
        "random value after a key-like name",
        _KEY_LIKE
        + r"[A-Za-z0-9_.-]{0,20}[\"']?(?:[ \t]*(?:=>|:=|=|:)[ \t]*|[ \t]+)[\"']?(?P<secret>[A-Za-z0-9_~+/=.-]{15,}[A-Za-z0-9_~+/=-])",
        _high_entropy,
    ),
    _d("IBAN (mod-97)", r"\b(?P<secret>[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,4})?)\b", _iban_ok),
    _d("US social security number", r"(?<![\w-])(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?![\w-])"),
    _d(
        "UK national insurance number",
        r"\b(?!BG|GB|NK|KN|TN|NT|ZZ)[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z] ?\d{2} ?\d{2} ?\d{2} ?[A-D]\b",
    ),
    _d("Spanish DNI / NIE (check letter)", r"\b(?P<secret>[XYZ]?\d{7,8}-?[A-Z])\b", _dni_ok),
    _d("Brazilian CPF (check digits)", r"(?<![\w.])(?P<secret>\d{3}\.\d{3}\.\d{3}-\d{2})(?![\w-])", _cpf_ok),
    *(
        Detector(
            f"detect-secrets {v.plugin}", re.compile(v.pattern, v.flags), part=v.secret, needs=PLUGIN_NEEDS[v.plugin]
        )
        for v in VENDORED
    ),
    # generic shapes last: a specific detector above takes a token whole
    _d("AWS secret access key", r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])", _random_looking),
    _d("AWS secret access key in a path or query", r"(?<=[/=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])", _random_looking),
    _d(
        "secret in a query or assignment",
        r"\b[a-z0-9_.-]{0,64}(?:pass(?:word|wd)?|pwd|token|secret|api[_-]?key|apikey|auth|credentials?|signature)"
        r"=(?P<secret>[^\s&#\"'<>;,]+)",
        flags=re.I,
    ),
    _d("key in a URL query", r"[?&;](?:key|sig|code)=(?P<secret>[^\s&#\"'<>;,]+)", flags=re.I),
    _d(
        "secret-named field in text",
        r"\"(?P<name>[A-Za-z0-9_.-]{1,64})\"\s*:\s*\"(?P<secret>[^\"\\\n]+)\"",
        lambda m: secret_named(m.group("name")),
    ),
    _d(
        "secret-named header or label",
        r"(?<![\w./@-])(?P<name>[A-Za-z][A-Za-z0-9_-]{1,40})[ \t]*[:=][ \t]*[\"']?(?=(?P<secret>[^\s\"'<>,;&]+))",
        _credential_value,
    ),
    # a lookahead from each group's start: a number before the card ("order 15 4111 ...") is tried and left
    _d("card number (Luhn)", r"(?<![\w-])(?=(?P<secret>(?:\d[ -]?){12,18}\d)(?![\w-]))", _card),
    _d(
        "card number with dots (Luhn)",
        r"(?<![\w.-])(?:\d{4}\.\d{4}\.\d{4}\.\d{1,7}|\d{4}\.\d{6}\.\d{4,5})(?![\w-]|\.\d)",
        _card,
    ),
    # the classes judged by shape alone, last: every detector above takes its token whole first
    *TOKEN_SHAPES,
)


#: the screen (`may_hold_secret`): a superset of what any rule above could change, cheap enough to
#: run over a whole payload's JSON text (the fast path) and over each string. Lower-case stems of
#: every detector, secret name and credential phrase, found without word boundaries (in JSON text a
#: line break before a key is the letter n of an escape); a card number is a run of 13 characters
#: among digits, spaces and dashes, a bare key (AWS's secret, a long random run) a run of 40
#: among letters, digits, /, +, - and _
_STEMS: tuple[str, ...] = (
    "pass",
    "pw",
    "secret",
    "key",
    "token",
    "auth",
    "sess",
    "cookie",
    "credential",
    "card",
    "cv",
    "bearer",
    "basic",
    "eyj",
    "xox",
    "aiza",
    "whsec_",
    "npm_",
    "hf_",
    "sg.",
    "slack",
    "sign in",
    "log in",
    "login",
    "k_live_",
    "k_test_",
    "github_pat_",
    "ya29.",
    "1//",
    "_v1_",
    "shp",
    "hvs.",
    "hvb.",
    "hvr.",
    "pin",
    "otp",
    "security",
    "mysql",
    "magic",
    "verif",
    "reset",
    "/invit",
    "invite=",
    "/activat",
    "/signin",
    "/sign-in",
    "/log-in",
    "/confirm",
    "/sso",
    "/unsubscribe",
    "/onboard",
    "ticket=",
    "oobcode=",
    "2fa",
    "mfa",
    "one-time",
    "one time",
    "one_time",
    "onetime",
    "csc",
    "cvn",
    "kty",
    "modulus",
    *HOOK_STEMS,
    *SCREEN_STEMS,
)
#: stems that hold a rarer character, looked for only when that character is there
_DASH_STEMS = ("begin", "sk-", "glpat-", "xapp-")
_QUERY_STEMS = ("sig=", "code=")
_GH = re.compile(r"gh[pousr]_")
_CC_NUM = re.compile(r"cc[^a-z0-9]*num")
#: the AWS key id detector's shape, with a literal first character (a fast search)
_AWS_ID_SHAPE = re.compile(r"A[BCGIKNPSR][A-Z]{2}[A-Z0-9]{16}")
#: a user and password before a host without a scheme (`deploy:pw@db.example.com`), and a card number
#: grouped by dots, both without the context the detectors look behind for (JSON text escapes it)
_HOST_CREDENTIALS = re.compile(r":[^\s:@/\"'<>]{3,}@[A-Za-z0-9-]+\.[A-Za-z0-9]")
_DOTTED_CARD = re.compile(r"\.\d{4,6}\.")
#: what an IBAN, a US SSN, a UK NINO, a Spanish DNI/NIE and a Brazilian CPF hold, whatever surrounds them
#: (every branch starts with a digit, and the search skips to the digits: ~1 µs a payload, not ~20)
_ID_SHAPES = re.compile(
    r"\d(?:(?<=[A-Z]{2}\d)\d ?[A-Z0-9]{4}|\d\d-\d\d-\d|(?<=[A-Z]{2}\d)\d ?\d\d ?\d\d ?[A-D]"
    r"|(?<=[A-Z]{2} \d)\d ?\d\d ?\d\d ?[A-D]|\d{6}-?[A-Z]|\d\d\.\d{3}\.\d{3}-\d\d)"
)
#: a link whose path may say it signs in, verifies or resets, with a query
_AUTH_LINK = re.compile(r"://[^\s?#]*" + _AUTH_LINK_PATH + r"[^\s?#]*\?", re.I)
#: key-like names the stems above do not hold
_KEY_STEMS = ("pat", "private", "signing", "signature", "salt", "nonce")
#: how many times a percent-encoded text is decoded (a value encoded twice in a URL inside a URL)
PERCENT_ROUNDS = 6
_CARD_RUN, _B64_RUN = b"0" * 13, b"0" * 40
_CARDISH = bytes(48 if chr(b) in "0123456789 -" else 46 for b in range(256))
_B64ISH = bytes(48 if chr(b).isascii() and (chr(b).isalnum() or chr(b) in "/+-_") else 46 for b in range(256))


def may_hold_secret(text: str) -> bool:
    """False only when no rule of `Redactor` without extra patterns would change `text`, nor the value
    whose JSON encoding `text` is."""
    return _screen(text, rules=True)


def _screen(text: str, rules: bool) -> bool:
    """`may_hold_secret`, with the vendored rule set's keywords looked for when `rules` is set (without,
    what memtape's and detect-secrets' rules alone could change)."""
    low = text.lower()
    for stem in _STEMS:
        if stem in low:
            return True
    if "-" in low and any(stem in low for stem in _DASH_STEMS):
        return True
    if "=" in low and any(stem in low for stem in _QUERY_STEMS):
        return True
    if ("://" in low and "@" in low) or ("gh" in low and _GH.search(low)) or ("num" in low and _CC_NUM.search(low)):
        return True
    if not text.isascii() and INVISIBLE.search(text):
        return True
    if _AWS_ID_SHAPE.search(text) or VENDORED_SCREEN.search(text) or (rules and rule_set().may_match(low)):
        return True
    if ("@" in text and _HOST_CREDENTIALS.search(text)) or _DOTTED_CARD.search(text) or _ID_SHAPES.search(text):
        return True
    if may_hold_token(text):
        return True
    if any(stem in low for stem in _KEY_STEMS) or ("://" in low and "?" in low and _AUTH_LINK.search(low)):
        return True
    raw = text.encode()
    if len(raw) >= 13 and (_CARD_RUN in raw.translate(_CARDISH) or _B64_RUN in raw.translate(_B64ISH)):
        return True
    if "\\u" in low:
        # a stem spelled with \uXXXX escapes in a JSON-encoded goal (`encoded_passwords`)
        unescaped = json_decoded(text)
        if unescaped != text and _screen(unescaped, rules):
            return True
    if "%" in text:
        decoded = percent_decoded(text)
        return decoded != text and (_screen(decoded, rules) or _screen(url_spaced(decoded), rules))
    return False


#: a JSON string escape: how a goal reads inside a recorded request body, tool call or log line
_JSON_ESCAPE = re.compile(r'\\(?:u([0-9a-fA-F]{4})|(["\\/bfnrt]))')
_JSON_SHORT = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
#: a backslash escape or a quote: a quote outside an escape starts or ends a JSON string
_ESCAPE_OR_QUOTE = re.compile(r'\\[\s\S]|"')
#: how many times a JSON-encoded text is read decoded (a goal in a JSON string inside a JSON string)
JSON_ROUNDS = 6


def json_decoded(text: str) -> str:
    """`text` with the escapes of a JSON string decoded once (`\\"`, `\\\\`, `\\n`, `\\u0041`...)."""
    return _JSON_ESCAPE.sub(lambda m: chr(int(m[1], 16)) if m[1] else _JSON_SHORT.get(m[2], m[2]), text)


def _json_pieces(text: str) -> list[str]:
    """The pieces of `text` between the quotes no backslash escapes: the contents of its JSON strings
    (and what lies between them), or the whole text when it is a fragment of one."""
    pieces, start = [], 0
    for m in _ESCAPE_OR_QUOTE.finditer(text):
        if m.group() == '"':
            pieces.append(text[start : m.start()])
            start = m.end()
    pieces.append(text[start:])
    return pieces


def encoded_passwords(text: str, rounds: int = JSON_ROUNDS) -> list[str]:
    """The passwords of the goals `text` holds JSON-encoded, as `text` writes them: each JSON string
    (a piece between quotes no backslash escapes) read decoded, as the policy reads the goal it
    encodes. The text itself is read with the quotes it has (`ledger.credentials`): a prompt that
    renders `"fill \\"Password\\" → click \\"Sign in\\""` names no login."""
    found: list[str] = []
    if rounds == 0 or "\\" not in text:
        return found
    for piece in _json_pieces(text):
        if "\\" in piece:
            decoded = json_decoded(piece)
            for secret in passwords(decoded) + encoded_passwords(decoded, rounds - 1):
                found += [secret, json.dumps(secret, ensure_ascii=False)[1:-1], json.dumps(secret)[1:-1]]
    return list(dict.fromkeys(found))


#: what separates the parts of a URL: read as spaces, a decoded path or query reads as the sentence it encodes
_URL_DELIMITERS = re.compile(r"[/?&#+]")


def url_spaced(text: str) -> str:
    """`text` with the URL delimiters as spaces (the same length): `/Log%20in%20as...` decoded reads as
    the sentence `Log in as ...` once the slash before it no longer makes it part of a path."""
    return _URL_DELIMITERS.sub(" ", text)


def percent_decoded(text: str) -> str:
    """`text` with its %XX escapes decoded (again, up to `PERCENT_ROUNDS` times, while one is left):
    `access_token%3DX` in a URL is `access_token=X` to whoever follows it."""
    for _ in range(PERCENT_ROUNDS):
        if "%" not in text:
            break
        decoded = unquote(text)
        if decoded == text:
            break
        text = decoded
    return text


def _compile_extra(patterns: list[str], origin: str) -> list[re.Pattern[str]]:
    out = []
    for n, p in enumerate(patterns, 1):
        try:
            compiled = re.compile(p)
        except re.error as exc:
            raise SecretPatternError(f"{origin} line {n}: not a regular expression ({exc}): {p[:60]!r}") from None
        if compiled.fullmatch(""):
            raise SecretPatternError(f"{origin} line {n}: the pattern matches the empty string: {p[:60]!r}")
        out.append(compiled)
    return out


class Redactor:
    """Replaces secrets in strings, nested payloads and envelope identifiers."""

    def __init__(self, extra_patterns: tuple[str, ...] | list[str] = ()):
        env = os.environ.get("MEMTAPE_SECRET_PATTERNS", "")
        self.extra = _compile_extra(list(extra_patterns), "extra secret pattern") + _compile_extra(
            [p for p in env.splitlines() if p.strip()], "MEMTAPE_SECRET_PATTERNS"
        )
        self._idents: dict[tuple[str, bool], str] = {}  # envelope ids repeat (a run's events share one)
        #: short strings the screen could not clear but the full scan found free of secrets: payload
        #: keys and labels repeat (a fact's "key" field, say), the scan is ~20 µs; no secret is kept
        self._clean: set[str] = set()

    def may_contain_secrets(self, json_text: str) -> bool:
        """False only when `value()` would change nothing in the payload encoded as `json_text` (fast path)."""
        return bool(self.extra) or may_hold_secret(json_text)

    def text(self, value: str) -> str:
        """`value` with every secret replaced by the marker (unchanged, byte for byte, when it holds none)."""
        if value in self._clean:
            return value
        if not self.extra and not may_hold_secret(value):
            self._remember_clean(value)  # keys and labels repeat from event to event
            return value
        if not self.extra and "%" not in value and "\\" not in value and not _screen(value, rules=False):
            # only a vendored rule's keyword is there ("they", "task" hold "ey" and "sk"): the rule set
            # alone runs, not the whole scrub (no escape to read decoded, no invisible character)
            out = _replace_spans(value, rule_set().spans(value), MARKER)
            if out == value:
                self._remember_clean(value)
            return out
        visible = INVISIBLE.sub("", value)
        out = self._scrub(value, visible)
        if "%" in value:
            # a secret percent-encoded in a URL: the text is kept decoded, with the secret replaced
            decoded = percent_decoded(value)
            if decoded != value:
                visible_decoded = INVISIBLE.sub("", decoded)
                scrubbed = self._scrub(decoded, visible_decoded)
                if scrubbed == visible_decoded and _SPAN not in visible_decoded:
                    # read as the sentence it may encode; what is found there is masked in the URL itself
                    spaced = url_spaced(visible_decoded)
                    found = self._scrub(spaced, spaced, _SPAN)
                    if found != spaced:
                        scrubbed = _masked_like(visible_decoded, spaced, found)
                if scrubbed != visible_decoded:
                    return scrubbed
        if out != visible:
            return out
        self._remember_clean(value)
        return value

    def _remember_clean(self, value: str) -> None:
        if len(value) <= CLEAN_CACHE_TEXT:
            if len(self._clean) > 4096:
                self._clean.clear()
            self._clean.add(value)

    def _scrub(self, value: str, visible: str, marker: str = MARKER) -> str:
        """`visible` (`value` less its invisible characters) with every rule applied, each secret
        replaced by `marker`."""
        out = visible
        # the policy reads the text as given, invisible characters included: parse both forms
        found = passwords(value) + encoded_passwords(value)
        if visible != value:
            found += passwords(visible) + encoded_passwords(visible)
        # the longest first, then the first found (a text is always scrubbed alike): a password typed
        # `C:\` is written `C:\\`
        for secret in sorted(dict.fromkeys(INVISIBLE.sub("", s) for s in found), key=len, reverse=True):
            if secret.strip() and secret not in (MARKER, marker):
                out = out.replace(secret, marker)
        low = out.lower()
        for d in DETECTORS:
            if d.needs and not any(n in low for n in d.needs):
                continue
            out = _apply(d, out, marker)
        out = _replace_spans(out, rule_set().spans(out), marker)
        out = _beside_a_secret(out, marker)
        for p in self.extra:
            out = p.sub(marker.replace("\\", "\\\\"), out)
        return out

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            out: dict[Any, Any] = {}
            for k, v in value.items():
                key = self.text(k) if isinstance(k, str) else k
                while key in out:  # two keys redacted alike both keep their values
                    key = f"{key}~"
                secret = isinstance(k, str) and secret_named(k) or jwk_private_member(value, k)
                out[key] = _masked(v) if secret else self.value(v)
            return out
        if isinstance(value, list):
            return [self.value(v) for v in value]
        return value

    def ident(self, value: str | None, *, case_insensitive: bool = False) -> str | None:
        """An envelope identifier (run id, stream, event id, domain) that is a secret or holds one becomes
        `redacted-` and a digest of it: still a valid identifier, and the same one for the same secret,
        so that a run's events stay together. Host names ignore case, so a domain is read both ways."""
        if value is None:
            return None
        key = (value, case_insensitive)
        known = self._idents.get(key)
        if known is None:
            if len(self._idents) > 4096:
                self._idents.clear()
            known = self._idents[key] = self._ident(value, case_insensitive)
        return known

    def _ident(self, value: str, case_insensitive: bool) -> str:
        variants = (value, value.upper()) if case_insensitive else (value,)
        if all(self.text(v) == v for v in variants):
            return value
        # the salt predates the rename to memtape; it stays, so a value redacts to the same id as before
        return "redacted-" + hashlib.sha256(b"memledger-redacted-ident\x00" + value.encode()).hexdigest()[:16]


#: what detect-secrets' patterns take around a token (Artifactory's `(?:\s|=|:|"|^)`)
_DELIMITERS = frozenset(' \t\r\n\f\v=:"')


#: the marker of a scrub whose spans are then found again (`_masked_like`): a private-use character,
#: which matches no character of the text (a text holding it is not scrubbed that way)
_SPAN = "\ue000"


def _masked_like(text: str, read: str, scrubbed: str) -> str:
    """`text` with `MARKER` where scrubbing `read` (the same length as `text`, read another way)
    replaced something by `_SPAN`: the secret found in the other reading, masked in this one."""
    out, pos = [], 0
    for tag, i1, i2, _, _ in SequenceMatcher(None, read, scrubbed, autojunk=False).get_opcodes():
        if tag in ("replace", "delete") and i2 > i1:
            out += [text[pos:i1], MARKER]
            pos = i2
    out.append(text[pos:])
    return "".join(out).replace(MARKER + MARKER, MARKER)


def _apply(d: Detector, text: str, marker: str = MARKER) -> str:
    """`text` with every span `d` finds (its `secret` group, else the whole match) replaced; a detector
    may capture the secret in a lookahead, so that a value can also start the next match."""
    spans: list[tuple[int, int]] = []
    group: str | int = "secret" if "secret" in d.pattern.groupindex else 0
    if d.part == 1:
        group = 1
    for m in d.pattern.finditer(text):
        if d.check is not None and not d.check(m):
            continue
        start, end = m.span(group)
        if start < 0:
            start, end = m.span()
        if d.part == "rest":
            end = len(text)
        elif d.part == "match":
            while start < end and text[start] in _DELIMITERS:
                start += 1
            while end > start and text[end - 1] in _DELIMITERS:
                end -= 1
        if spans and start <= spans[-1][1]:
            spans[-1] = (spans[-1][0], max(end, spans[-1][1]))
        else:
            spans.append((start, end))
    return _replace_spans(text, spans, marker)


#: a call's arguments on one line, and a quoted literal among them
_CALL_ARGS = re.compile(r"\(([^()\n]{1,500})\)")
_LITERAL = re.compile(r"([\"'`])([A-Za-z0-9_~+/=.-]{16,})\1")


def _beside_a_secret(text: str, marker: str) -> str:
    """Credentials travel in pairs (an account id and its auth token, a client id and its secret):
    in a call one of whose quoted arguments was found a secret, every other quoted argument that
    looks random (`token_shapes.random_body`: 32+ hex, or 16+ random characters) is one too."""
    if marker not in text:
        return text
    quoted = tuple(q + marker + q for q in "\"'`")
    spans = []
    for call in _CALL_ARGS.finditer(text):
        args = call.group(1)
        if any(q in args for q in quoted):
            at = call.start(1)
            spans += [(at + m.start(2), at + m.end(2)) for m in _LITERAL.finditer(args) if random_body(m.group(2), 16)]
    return _replace_spans(text, spans, marker)


def _replace_spans(text: str, spans: list[tuple[int, int]], marker: str) -> str:
    """`text` with each span (overlapping or touching spans as one) replaced by `marker`."""
    if not spans:
        return text
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    out, pos = [], 0
    for start, end in merged:
        out += [text[pos:start], marker]
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _masked(value: Any) -> Any:
    """A value under a secret-named key: every string in it masked; numbers, booleans and null kept."""
    if isinstance(value, str):
        return MARKER if value else value
    if isinstance(value, dict):
        return {k: _masked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v) for v in value]
    return value


_default: Redactor | None = None


def default_redactor() -> Redactor:
    global _default
    if _default is None:
        _default = Redactor()
    return _default


def redact(value: Any) -> Any:
    return default_redactor().value(value)
