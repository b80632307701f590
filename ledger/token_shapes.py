"""Tokens by their shape, with no key name before them: classes of secret judged by length, alphabet
and entropy, never by a vendor's prefix or a host.

- a word-prefixed token: a prefix of 2 to 10 letters and digits (up to two more short parts, as in
  `xx_api_`), a `-`, `_` or `.`, and a random body of 24+ characters (`<word>_<random>`,
  `<WORD>-<random>`): the shape most SaaS and cloud tokens share;
- an id and a secret joined by a colon: digits (an account or app id, `/`-separated parts allowed)
  before a random value of 20+ characters (`<n>/<digits>:<hex>`, a bot's `<digits>:<random>`);
- a bare run of 40+ base64 characters that is random (a key with no name before it: a Curve25519 or
  Ed25519 key, a long API token), not a digest, a data URL's content or a path;
- a credential carried in a URL path: after a path segment that names a hook (`/webhooks/`,
  `/hooks/`, `/services/`, `/callbacks/`, `/incoming...`, `/triggers/`, `/notify/`), every random
  segment of 16+ characters; anywhere else in a URL path, a segment of 32+ characters that mixes
  upper case, lower case and digits at random.

Kept on purpose (the audit, the replay and the viewer need them): UUIDs (run ids, event ids,
idempotency keys), hex digests (the hash chain, content hashes in asset names, commits), memtape's
short ids (`run_1710543210_ab12cd`), words joined by separators (slugs, CSS classes), and asset
files (a token-shaped name followed by a file extension). The thresholds were chosen against the
bundled sites' pages and cases (`tests/test_gitleaks_rules.py` keeps them at zero false positives)
and ordinary random-looking text (`tests/test_token_shapes.py`).
"""

from __future__ import annotations

import math
import re

from memtape.ledger.detector import UUID_SHAPE, Detector, detector
from memtape.ledger.gitleaks_rules import shannon_entropy

#: the share of the most bits a character a value of its length and alphabet can have that a
#: random body exceeds: random base62 of 24 characters measures 3.5 to 4.6 bits (the most 4.58),
#: hex of 32 2.9 to 4 (the most 4); words and slugs are told apart by their parts, not by this
ENTROPY_SHARE = 0.72
#: the share of neighbouring characters a random body switches between lower case, upper case and
#: digits at (~0.6 for random base62, ~0.4 for lower case and digits; a camelCase name ~0.2)
SWITCH_SHARE = 0.15
_HEX = re.compile(r"[0-9a-f]+|[0-9A-F]+")
#: a word (with a short number after it: `amd64`, `v20`), an upper-case word or a short number: a
#: body whose parts between separators are all of these is words (a slug, a snake_case name)
_WORD_PART = re.compile(r"[A-Za-z][a-z]*\d{0,3}|[A-Z]+|\d{1,4}")
_PARTS = re.compile(r"[-_.~+=/]")
#: a camelCase name read in pieces (an acronym before a capitalized word, a word, a short number):
#: words when the whole reads so and the pieces average 3+ characters (`XMLHttpRequest`,
#: `GetElementById`); random letters rarely read so, and then in pieces of ~2
#: (possessive: a run of lower case or digits is one piece, so a failed reading is given up in linear
#: time, not tried in every split: 0.9 s for a 48-letter token before)
_CAMEL = re.compile(r"(?:[A-Z]{2,}(?=[A-Z][a-z])|[A-Z]?[a-z]++|[A-Z]++\Z|\d++)++")
_CAMEL_PIECE = re.compile(r"[A-Z]{2,}(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+\Z|\d+")
_URL_SAFE = re.compile(r"[A-Za-z0-9_~+/=-]+")
#: what follows an asset's name: a content-hashed file is not a token
_ASSET = re.compile(
    r"\.(?:m?js|css|map|png|jpe?g|gif|svg|webp|avif|ico|woff2?|ttf|otf|eot|html?|json|txt|wasm|xml)\b", re.I
)
#: a prefix that names a digest (a content hash, an integrity value, a commit), not a credential
_DIGEST_WORD = re.compile(
    r"(?:sha\d*|md5|hash|digest|commit|rev|etag|build|chunk|blake\d*|crc\d*|checksum|sum)\Z", re.I
)


def _class(c: str) -> int:
    return 0 if c.islower() else 1 if c.isupper() else 2 if c.isdigit() else 3


def _words(body: str) -> bool:
    """Words joined by separators or by case (a slug, a snake_case or camelCase name, a version)."""
    if all(_WORD_PART.fullmatch(p) for p in _PARTS.split(body) if p):
        return True
    if any(c.isupper() for c in body) and any(c.islower() for c in body) and _CAMEL.fullmatch(body):
        return len(body) >= 3 * len(_CAMEL_PIECE.findall(body))
    return False


def random_body(body: str, length: int = 24) -> bool:
    """A random value rather than an id, a digest or words: a hex body is random when it is long
    (32+) and spread; any other when it looks random, is not words joined by separators, switches
    between cases and digits often and holds near the most bits its length allows; a UUID never."""
    if len(body) < length or UUID_SHAPE.search(body):
        return False
    if _HEX.fullmatch(body):
        return len(body) >= 32 and any(c.isalpha() for c in body) and shannon_entropy(body) > ENTROPY_SHARE * 4
    if not _URL_SAFE.fullmatch(body) or _words(body):
        return False
    switches = sum(_class(a) != _class(b) for a, b in zip(body, body[1:]) if a.isalnum() and b.isalnum())
    most = math.log2(min(len(body), 64))
    return switches >= SWITCH_SHARE * len(body) and shannon_entropy(body) > ENTROPY_SHARE * most


def _prefixed_token(m: re.Match[str]) -> bool:
    if _ASSET.match(m.string, m.end()) or _DIGEST_WORD.search(m.group("prefix")) or UUID_SHAPE.search(m.group()):
        return False
    return random_body(m.group("body"))


#: a prefix of 2 to 10 letters and digits, with up to two more short parts (`xx_api`)
_PREFIX = r"[A-Za-z][A-Za-z0-9]{1,9}(?:[-_.][A-Za-z0-9]{1,8}){0,2}"
_PREFIXED = re.compile(_PREFIX + r"[-_.]")
#: what a long run follows when it is data or a digest, not a credential: a data URL's `base64,`, a
#: digest's name and separator (`sha384-`, `sha256:`)
_DATA_OR_DIGEST_BEFORE = re.compile(
    r"(?:base64,|(?:sha\d*|md5|hash|digest|blake\d*|integrity)[-:=]\s*"
    r"|(?:sk-)?(?:ssh-(?:rsa|dss|ed25519|ed448)|ecdsa-sha2-nistp\d+)(?:@openssh\.com)?\s+)\Z",  # a public key: kept
    re.I,
)


def _long_run(m: re.Match[str]) -> bool:
    """A bare run of 40+ base64 characters that is random (a key or token with no name before it),
    not a digest, a data URL's content, an SSH public key, a path of words or a URL's path (judged by
    its own rule)."""
    run = m.group("secret").rstrip("=")
    if _PREFIXED.match(run):  # the word-prefixed rule has judged it (a digest, an asset, a token)
        return False
    if _DATA_OR_DIGEST_BEFORE.search(m.string, max(0, m.start() - 40), m.start()) or _HEX.fullmatch(run):
        return False
    return not run.startswith("/") and random_body(run, 40)


def _id_and_secret(m: re.Match[str]) -> bool:
    ident, _, secret = m.group("secret").partition(":")
    return sum(c.isdigit() for c in ident) >= 6 and random_body(secret, 20)


#: the URL (or path) a segment is part of: everything back to a space, a quote or a bracket
_URL_BEFORE = re.compile(r"[^\s\"'<>()\[\]{}]*\Z")


def _hook_credential(m: re.Match[str]) -> bool:
    """The segments after a hook's name hold its credential when one of them is random (a UUID too)."""
    return any(random_body(s, 16) or UUID_SHAPE.fullmatch(s) for s in m.group("secret").split("/"))


def _path_credential(m: re.Match[str]) -> bool:
    """A long path segment that mixes upper case, lower case and digits at random, in a URL or path."""
    segment = m.group("secret")
    if _ASSET.match(m.string, m.end()) or _HEX.fullmatch(segment):
        return False
    if not (any(c.isupper() for c in segment) and any(c.islower() for c in segment) and random_body(segment, 32)):
        return False
    before = _URL_BEFORE.search(m.string, max(0, m.start() - 512), m.start())
    url = before.group() if before else ""
    return "://" in url or url.startswith("/")


#: what a hook's path holds (lower case): the random segments after it are judged from 16 characters
HOOK_STEMS = ("hook", "callback", "service", "incoming", "trigger", "notify")


TOKEN_SHAPES: tuple[Detector, ...] = (
    detector(
        "credential in a hook's URL path",
        r"/(?:(?:web-?)?hooks?|callbacks?|services|incoming[\w-]*|triggers?|notify)(?P<secret>(?:/[A-Za-z0-9_~+=-]+)+)",
        _hook_credential,
        flags=re.I,
        needs=HOOK_STEMS,
    ),
    detector(
        "random segment of a URL path",
        r"(?<=/)(?P<secret>[A-Za-z0-9_~+=-]{32,})(?![A-Za-z0-9_~+=-])",
        _path_credential,
        needs=("/",),
    ),
    detector(
        "word-prefixed random token",
        r"(?<![A-Za-z0-9_.+-])(?P<secret>(?P<prefix>" + _PREFIX + r")"
        r"[-_.](?P<body>[A-Za-z0-9_-]{24,}))(?![A-Za-z0-9_-])",
        _prefixed_token,
    ),
    detector(
        "long random run with no name",
        r"(?<![A-Za-z0-9+/=_.:-])(?P<secret>[A-Za-z0-9+/_-]{40,}={0,2})(?![A-Za-z0-9+/=_-])",
        _long_run,
    ),
    detector(
        "id and secret joined by a colon",
        r"(?<![0-9/.:_-])(?P<secret>\d+(?:/\d+){0,3}:[A-Za-z0-9_-]{20,})(?![A-Za-z0-9_-])",
        _id_and_secret,
        needs=(":",),
    ),
)

#: a run that may hold a token above: 27+ characters (a prefix of 2, a separator, a body of 24; an id
#: of 6, a colon, a secret of 20; a path segment of 32), read over a payload's JSON text too
_RUN = re.compile(r"[A-Za-z0-9_.~+=-]{27,}")
#: the characters of `_RUN` as b"0", any other as b"." (`bytes.translate` finds a run ~6x faster
#: than the regex over a payload with none: 0.6 against 3.6 µs)
_RUN_BYTES = bytes(48 if chr(b).isascii() and (chr(b).isalnum() or chr(b) in "_.~+=-") else 46 for b in range(256))
_RUN_27 = b"0" * 27
_HEX_OR_ID = re.compile(r"[0-9a-f.-]+|[0-9A-F.-]+")
#: `digit:` and 20 token characters, searched from the colon (a literal first: 0.5 against 2.2 µs)
_ID_PAIR = re.compile(r":(?<=\d:)[A-Za-z0-9_-]{20}")


def may_hold_token(text: str) -> bool:
    """False only when no detector of `TOKEN_SHAPES` but the hook's (whose `HOOK_STEMS` the door's
    screen looks for) can find anything in `text`: no run of 27+ token characters with a digit or both
    cases (a random body has one or the other: `random_body`) that is not a hex digest or a UUID, no
    `digit:` before 20 token characters. A bare run of 40 with `/` in it is the door's `_B64_RUN`."""
    if _RUN_27 in text.encode("utf-8", "surrogatepass").translate(_RUN_BYTES):
        for m in _RUN.finditer(text):
            run = m.group()
            if _HEX_OR_ID.fullmatch(run):
                continue
            if any(c.isdigit() for c in run) or (any(c.isupper() for c in run) and any(c.islower() for c in run)):
                return True
    return ":" in text and _ID_PAIR.search(text) is not None
