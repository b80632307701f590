"""Private-key material in any container, not only PEM: a class of secret found by the structure of
the file or object that carries it, never by a vendor's prefix.

- armored blocks: `BEGIN ... PRIVATE KEY` or `BEGIN ... SECRET KEY` between three to five dashes
  (PEM's `-----BEGIN RSA PRIVATE KEY-----`, OpenSSH's, PGP's `PRIVATE KEY BLOCK`, ssh.com/RFC 4716's
  `---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----`), to their END line or, cut short, to the end;
- key files with a structural header: a `Private-Lines: N` header and the base64 lines after it, up
  to its `Private-MAC`/`Private-Hash` (PuTTY's .ppk of any version);
- a line announcing a private or secret key followed by base64 lines (minisign's and signify's
  `untrusted comment: ... secret key`, "Private key (base64):" in a tool's output), when those
  lines look random;
- JSON Web Keys: in a text holding `"kty"`, the private members (`d`, `p`, `q`, `dp`, `dq`, `qi`,
  `k`, and `r`/`t` of `oth`), quoted, escaped in a JSON string or as a Python repr; in a payload, an
  object with `kty` has those members masked (`jwk_private_member`); `n`, `e`, `x`, `y` stay;
- .NET's XML RSA key: `<D>`, `<P>`, `<Q>`, `<DP>`, `<DQ>`, `<InverseQ>` beside a `<Modulus>`.

A line break is matched as written or escaped (`\\n` inside a JSON string), so that a key file
recorded inside a request body is found too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from memtape.ledger.detector import Detector, detector
from memtape.ledger.gitleaks_rules import shannon_entropy

#: a line break as a text holds it: raw, or escaped inside a JSON string
_NL = r"(?:\r?\n|(?:\\r)?\\n)"
_B64_LINE = r"[A-Za-z0-9+/=_-]{4,}"
#: a JSON Web Key's private members (RFC 7518 6.2.2, 6.3.2, 6.4.1; `oth` lists more primes, each
#: with its `r`, `d`, `t`): the rest are public
JWK_PRIVATE = frozenset({"d", "p", "q", "dp", "dq", "qi", "k", "r", "t", "oth"})


def jwk_private_member(obj: Mapping[Any, Any], key: object) -> bool:
    """Whether `obj[key]` is a private member of a JSON Web Key (an object that has `kty`)."""
    return isinstance(key, str) and key in JWK_PRIVATE and "kty" in obj


def _random_body(m: re.Match[str]) -> bool:
    """Base64 lines after a key's announcement: random (letters and digits mixed, over 4 bits a
    character), not a heading's underline or a row of a table."""
    body = re.sub(r"\\[rn]|\s", "", m.group("secret"))
    return (
        len(body) >= 32
        and any(c.isdigit() for c in body)
        and any(c.isupper() for c in body)
        and any(c.islower() for c in body)
        and shannon_entropy(body) > 4.0
    )


_KEY_WORD = r"(?:PRIVATE|SECRET) KEY(?: BLOCK)?"
KEY_MATERIAL: tuple[Detector, ...] = (
    detector(
        "armored private key block",
        r"-{3,5} ?BEGIN [A-Z0-9 ]*?" + _KEY_WORD + r" ?-{3,5}"
        r"(?:.*?-{3,5} ?END [A-Z0-9 ]*?" + _KEY_WORD + r" ?-{3,5}|.*)",
        flags=re.S,
        needs=("begin",),
    ),
    detector(
        "key file's private lines",
        r"Private-Lines:[ \t]*\d+[ \t]*"
        + _NL
        + r"(?P<secret>"
        + _B64_LINE
        + r"(?:"
        + _NL
        + r"(?!Private-)"
        + _B64_LINE
        + r")*"
        r"(?:" + _NL + r"Private-(?:MAC|Hash):[ \t]*[0-9A-Fa-f]*)?)",
        flags=re.I,
        needs=("private-lines",),
    ),
    detector(
        "base64 lines after a private or secret key's announcement",
        r"(?:private|secret)[ _-]?key\b[^\n]{0,100}?" + _NL + r"(?P<secret>[A-Za-z0-9+/=_-]{32,}"
        r"(?:" + _NL + r"[A-Za-z0-9+/=_-]{4,})*)",
        _random_body,
        flags=re.I,
        needs=("private", "secret"),
    ),
    detector(
        "JSON Web Key's private member",
        r"(?<![\w-])(?P<q>\\?[\"']?)(?:d|p|q|dp|dq|qi|k|r|t)(?P=q)[ \t]*[:=][ \t]*\\?[\"']?"
        r"(?P<secret>[A-Za-z0-9_+/-]{4,}={0,2})",
        lambda m: "kty" in m.string,
        needs=("kty",),
    ),
    detector(
        "XML RSA key's private element",
        r"<(?P<tag>D|P|Q|DP|DQ|InverseQ)>(?P<secret>[A-Za-z0-9+/=\s]{4,}?)</(?P=tag)>",
        lambda m: "<Modulus>" in m.string,
        needs=("<modulus>",),
    ),
)
